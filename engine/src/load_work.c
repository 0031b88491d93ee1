/* SPDX-License-Identifier: MIT */
/* The OSADL mid load's workers of `rtlab-probe load` (load_work.h). */
#include "load_work.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "le_bytes.h"
#include "load.h"
#include "opts.h"

#define NET_MAGIC 0x4c4c5452u	/* "RTLL" little-endian */

int load_vm_round(size_t bytes, size_t page)
{
	char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	volatile char *v = p;
	for (size_t off = 0; off < bytes; off += page)
		v[off] = (char)(off / page);
	munmap(p, bytes);
	return 0;
}

uint64_t load_net_tick_ns(uint64_t kbit, uint64_t size)
{
	if (kbit == 0)
		kbit = 1;
	/* one message: 8 * size bits at kbit * 1000 bit/s = 8e6 * size / kbit ns */
	uint64_t t = (8ULL * size * NS_PER_MS + kbit - 1) / kbit;
	return t < LOAD_NET_MIN_TICK ? LOAD_NET_MIN_TICK : t;
}

uint64_t load_net_due(uint64_t elapsed_ns, uint64_t kbit, uint64_t size)
{
	if (size == 0)
		return 0;
	/* bits allowed = elapsed_ns * kbit / 1e6, split at whole milliseconds */
	uint64_t ms = elapsed_ns / NS_PER_MS, rest = elapsed_ns % NS_PER_MS;
	uint64_t bits = ms * kbit + rest * kbit / NS_PER_MS;
	return bits / (8 * size);
}

double load_net_mps(uint64_t kbit, uint64_t size)
{
	return size ? (double)kbit * 1000.0 / 8.0 / (double)size : 0;
}

void load_net_encode(unsigned char *buf, uint32_t tag, uint64_t seq)
{
	le_put32(buf, NET_MAGIC);
	le_put32(buf + 4, tag);
	le_put64(buf + 8, seq);
}

bool load_net_ours(const unsigned char *buf, size_t len)
{
	if (len < LOAD_NET_HDR)
		return false;
	uint32_t m = (uint32_t)buf[0] | (uint32_t)buf[1] << 8 | (uint32_t)buf[2] << 16 |
		     (uint32_t)buf[3] << 24;
	return m == NET_MAGIC;
}

static size_t page_size(void)
{
	long ps = sysconf(_SC_PAGESIZE);
	return ps > 0 ? (size_t)ps : 4096;
}

static void sleep_until(uint64_t t)
{
	struct timespec ts = rl_ns_to_ts(t);
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
	}
}

void load_alloc_worker(struct load_slot *slot, uint64_t bytes, uint64_t period_ns)
{
	size_t page = page_size();
	uint64_t next = rl_now_ns(CLOCK_MONOTONIC);
	for (;;) {
		int e = load_vm_round((size_t)bytes, page);
		if (e) {
			slot->err = e;
			_exit(WORKER_EXIT_VM);
		}
		slot->loops = slot->loops + 1;
		next += period_ns;
		uint64_t now = rl_now_ns(CLOCK_MONOTONIC);
		if (now >= next) {
			/* the round took longer than a period: counted, not caught up */
			slot->late = slot->late + 1;
			next = now;
			continue;
		}
		sleep_until(next);
	}
}

/* The io worker's file and directory, for its SIGTERM handler (this process only). */
static const struct load_io_job *io_job;

static void io_term(int sig)
{
	(void)sig;
	/* async-signal-safe: the name (if it is there) and the private dir, if empty */
	if (io_job) {
		unlink(io_job->path);
		rmdir(io_job->dir);
	}
	_exit(0);
}

static void io_fail(struct load_slot *slot, int fd)
{
	slot->err = -errno;
	if (fd >= 0)
		close(fd);
	unlink(io_job->path);
	_exit(WORKER_EXIT_IO);
}

void load_io_worker(struct load_slot *slot, const struct load_io_job *job)
{
	static unsigned char buf[LOAD_IO_WRITE];
	io_job = job;
	/* A SIGTERM to the group, and the death of the load process (then SIGTERM
	 * instead of the SIGKILL other workers get), leave no file and no directory:
	 * the handler removes the name and the private dir (it fails while another
	 * io worker's name is there; the last one removes it). */
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = io_term;
	sigfillset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	pid_t parent = getppid();
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() != parent)
		io_term(SIGTERM);
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)(i * 7 + 1);
	for (;;) {
		int fd = open(job->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0)
			io_fail(slot, -1);
		/* the name goes at once: the data is written to an unlinked file, so a
		 * worker killed at any moment leaves nothing behind (the blocks are freed
		 * at the close) */
		if (unlink(job->path) != 0)
			io_fail(slot, fd);
		for (uint64_t off = 0; off < job->bytes;) {
			size_t n = job->bytes - off < sizeof(buf) ? (size_t)(job->bytes - off)
								   : sizeof(buf);
			ssize_t w = write(fd, buf, n);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				if (w == 0)
					errno = EIO;
				io_fail(slot, fd);
			}
			if (fsync(fd) != 0 && errno != EINTR)
				io_fail(slot, fd);
			off += (uint64_t)w;
			slot->bytes = slot->bytes + (uint64_t)w;
		}
		close(fd);
		slot->loops = slot->loops + 1;
	}
}

void load_net_worker(struct load_slot *slot, int fd, uint64_t kbit, uint64_t size)
{
	static unsigned char buf[LOAD_NET_MAX_SIZE];
	uint32_t tag = (uint32_t)getpid();
	uint64_t tick = load_net_tick_ns(kbit, size);
	uint64_t start = rl_now_ns(CLOCK_MONOTONIC);
	uint64_t done = 0, seq = 0;
	memset(buf, 0, (size_t)size);
	for (uint64_t k = 1;; k++) {
		uint64_t t = start + k * tick;
		sleep_until(t);
		uint64_t due = load_net_due(t - start, kbit, size);
		uint64_t n = due - done;
		done = due;
		if (n > LOAD_NET_BURST) {
			slot->late = slot->late + (n - LOAD_NET_BURST);
			n = LOAD_NET_BURST;
		}
		for (uint64_t i = 0; i < n; i++) {
			load_net_encode(buf, tag, seq++);
			/* counted before the send: the load stops its workers with SIGKILL, and
			 * one killed between a send and its count would leave the sink with
			 * more messages than the sender says it sent */
			slot->sent = slot->sent + 1;
			slot->bytes = slot->bytes + size;
			ssize_t r = send(fd, buf, (size_t)size, 0);
			if (r != (ssize_t)size) {
				/* e.g. ECONNREFUSED (nobody listens there), ENETUNREACH, ENOBUFS:
				 * counted, the next message is tried on time */
				slot->sent = slot->sent - 1;
				slot->bytes = slot->bytes - size;
				slot->last_err = r < 0 ? errno : EMSGSIZE;
				slot->failed = slot->failed + 1;
			}
		}
		slot->loops = slot->loops + 1;
	}
}

int load_parse_duty(const char *s, uint64_t *on_ns, uint64_t *period_ns, char *err,
		    size_t errlen)
{
	char shown[OPT_SHOWN_LEN];
	const char *slash = strchr(s, '/');
	char on_s[64];
	size_t n = slash ? (size_t)(slash - s) : 0;
	if (!slash || n == 0 || n >= sizeof(on_s) || slash[1] == '\0' ||
	    strchr(slash + 1, '/')) {
		snprintf(err, errlen, "--cpu-duty: %s is not ON/PERIOD (two durations, e.g. "
			 "2ms/20ms: spin 2ms every 20ms)", opt_shown(s, shown, sizeof(shown)));
		return -EINVAL;
	}
	memcpy(on_s, s, n);
	on_s[n] = '\0';
	uint64_t on, period;
	if (opt_parse_duration(on_s, &on) != 0 || opt_parse_duration(slash + 1, &period) != 0) {
		snprintf(err, errlen, "--cpu-duty: %s is not ON/PERIOD (two durations with a unit "
			 "ns|us|ms|s, e.g. 2ms/20ms)", opt_shown(s, shown, sizeof(shown)));
		return -EINVAL;
	}
	if (period < LOAD_DUTY_MIN_PERIOD || period > LOAD_DUTY_MAX_PERIOD) {
		snprintf(err, errlen, "--cpu-duty: the period of %s is out of range; allowed "
			 "range 100us..10s", opt_shown(s, shown, sizeof(shown)));
		return -EINVAL;
	}
	if (on < LOAD_DUTY_MIN_ON || on >= period) {
		snprintf(err, errlen, "--cpu-duty: ON of %s must be at least 1us and shorter than "
			 "the period (to spin all the time, leave --cpu-duty out)",
			 opt_shown(s, shown, sizeof(shown)));
		return -EINVAL;
	}
	*on_ns = on;
	*period_ns = period;
	return 0;
}

uint64_t load_duty_next(uint64_t start, uint64_t now, uint64_t period_ns, uint64_t *missed)
{
	uint64_t next = start + period_ns;
	if (next > now)
		return next;
	uint64_t k = (now - next) / period_ns + 1; /* period starts in (start, now] */
	*missed += k;
	return next + k * period_ns;
}

void load_duty_worker(struct load_slot *slot, uint64_t on_ns, uint64_t period_ns)
{
	prctl(PR_SET_NAME, LOAD_DUTY_COMM, 0, 0, 0);
	uint64_t start = rl_now_ns(CLOCK_MONOTONIC);
	for (;;) {
		/* the burst: spin on the clock until ON has passed */
		uint64_t end = start + on_ns, now;
		while ((now = rl_now_ns(CLOCK_MONOTONIC)) < end) {
		}
		slot->loops = slot->loops + 1;
		uint64_t missed = 0;
		start = load_duty_next(start, now, period_ns, &missed);
		if (missed)
			slot->late = slot->late + missed;
		sleep_until(start);
	}
}

void load_sink_worker(struct load_slot *slot, int fd)
{
	static unsigned char buf[65536];
	for (;;) {
		ssize_t r = recv(fd, buf, sizeof(buf), 0);
		if (r < 0) {
			if (errno == EINTR || errno == ENOMEM || errno == ENOBUFS)
				continue;
			slot->err = -errno;
			_exit(WORKER_EXIT_NET);
		}
		if (load_net_ours(buf, (size_t)r)) {
			slot->sent = slot->sent + 1;
			slot->bytes = slot->bytes + (uint64_t)r;
		} else {
			slot->failed = slot->failed + 1;
		}
		slot->loops = slot->loops + 1;
	}
}
