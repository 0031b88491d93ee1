/* SPDX-License-Identifier: MIT */
/* The trace recorder (trace_rec.h). */
#include "trace_rec.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "le_bytes.h"
#include "opts.h"
#include "trace_flight.h"
#include "trace_fs.h"

const char trace_default_events[] =
	"sched/sched_switch,sched/sched_waking,sched/sched_wakeup,"
	"irq/irq_handler_entry,irq/irq_handler_exit,irq/softirq_entry,irq/softirq_exit,"
	"timer/hrtimer_start,timer/hrtimer_expire_entry,timer/hrtimer_expire_exit,"
	"ipi/ipi_raise,ipi/ipi_entry,ipi/ipi_exit,ipi/ipi_send_cpu,ipi/ipi_send_cpumask,"
	"irq_vectors/local_timer_entry,irq_vectors/local_timer_exit,"
	"irq_vectors/reschedule_entry,irq_vectors/reschedule_exit,"
	"irq_vectors/call_function_entry,irq_vectors/call_function_exit,"
	"irq_vectors/call_function_single_entry,irq_vectors/call_function_single_exit,"
	"irq_vectors/irq_work_entry,irq_vectors/irq_work_exit,"
	"irq_vectors/x86_platform_ipi_entry,irq_vectors/x86_platform_ipi_exit,"
	"irq_vectors/thermal_apic_entry,irq_vectors/thermal_apic_exit,"
	"power/cpu_idle";

#define TR_REQUIRED "sched/sched_switch"
#define TR_POLL_NS (50 * NS_PER_MS)
#define TR_MAX_EVENTS 256
#define TR_META_RESERVE (64 * 1024)
#define TR_META_EVERY_NS NS_PER_SEC	/* flight mode: meta.json rewritten this often */
#define TR_READ_SLACK_NS NS_PER_MS	/* events this much before a complete drain are read */

struct tr_cpu {
	int cpu;
	int in_fd, out_fd;
	uint64_t pages, bytes, dropped;
	off_t good;		/* bytes of whole frames written */
	bool write_failed;
	int64_t overrun, dropped_events, commit_overrun;
	bool stats;
};

struct trace_rec {
	struct trace_opts o;
	char root[1024];
	char inst[1200];
	char name[80];
	struct tfs_journal j;
	struct tfs_page_layout layout;
	char *events[TR_MAX_EVENTS], *missing[TR_MAX_EVENTS];
	size_t n_events, n_missing;
	struct tr_cpu *cpus;
	size_t n_cpus;
	int reader_cpu;
	bool dir_made;
	pthread_t reader;
	bool reader_started;
	atomic_bool stop;
	unsigned char *page, *frame;
	char error[256];
	const char *probe;	/* for its lines on stderr */
	uint64_t started_ns, stopped_ns;
	/* --trace-mode flight */
	struct tfl fl;
	bool fl_made;
	bool fl_said;		/* its first write error is on stderr */
	uint64_t meta_at;	/* when meta.json was last written */
};

/* ---- checks ---- */

static bool ev_part_ok(const char *s, size_t n, bool star)
{
	if (n == 0 || n > 96)
		return false;
	if (star && n == 1 && s[0] == '*')
		return true;
	for (size_t i = 0; i < n; i++) {
		char ch = s[i];
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
		      ch == '_' || ch == '-'))
			return false;
	}
	return true;
}

/* Split the list into r->events (copies); -EINVAL names the bad item in err. */
static int parse_events(const char *list, char **out, size_t *n, char *err, size_t errlen)
{
	*n = 0;
	const char *p = list;
	for (;;) {
		const char *c = strchr(p, ',');
		size_t l = c ? (size_t)(c - p) : strlen(p);
		const char *slash = memchr(p, '/', l);
		if (!slash || !ev_part_ok(p, (size_t)(slash - p), false) ||
		    !ev_part_ok(slash + 1, l - (size_t)(slash - p) - 1, true) || *n >= TR_MAX_EVENTS) {
			char item[64];
			snprintf(item, sizeof(item), "%.*s", (int)(l < 60 ? l : 60), p);
			snprintf(err, errlen,
				 *n >= TR_MAX_EVENTS
					 ? "--trace-events: more than 256 events; give fewer"
					 : "--trace-events: '%s' is not SYSTEM/NAME (e.g. sched/sched_switch, osnoise/*)",
				 item);
			for (size_t k = 0; k < *n; k++)
				free(out[k]);
			*n = 0;
			return -EINVAL;
		}
		out[*n] = strndup(p, l);
		if (!out[*n])
			return -ENOMEM;
		(*n)++;
		if (!c)
			return 0;
		p = c + 1;
	}
}

int trace_rec_check(const struct trace_opts *o, const cpu_set_t *online, char *err,
		    size_t errlen)
{
	char shown[OPT_SHOWN_LEN];
	struct stat st;
	if (!o->dir && o->orphan) {
		snprintf(err, errlen, "--%s needs --trace-dir; give --trace-dir DIR or drop it", o->orphan);
		return -EINVAL;
	}
	if (!o->dir)
		return 0;
	if (!o->flight && o->flight_orphan) {
		snprintf(err, errlen, "--%s needs --trace-mode flight; add it or drop --%s",
			 o->flight_orphan, o->flight_orphan);
		return -EINVAL;
	}
	if (o->flight && o->trigger_ns == 0) {
		snprintf(err, errlen, "--trace-trigger: give a duration above 0 (e.g. 100us)");
		return -EINVAL;
	}
	if (!o->dir[0])
		return snprintf(err, errlen, "--trace-dir: empty; give a new directory"), -EINVAL;
	if (lstat(o->dir, &st) == 0) {
		snprintf(err, errlen, "--trace-dir %s exists already; give a new directory (the engine creates it)",
			 opt_shown(o->dir, shown, sizeof(shown)));
		return -EINVAL;
	}
	char parent[PATH_MAX];
	snprintf(parent, sizeof(parent), "%s", o->dir);
	size_t l = strlen(parent);
	while (l > 1 && parent[l - 1] == '/')
		parent[--l] = '\0';
	char *slash = strrchr(parent, '/');
	if (!slash)
		snprintf(parent, sizeof(parent), ".");
	else if (slash == parent)
		parent[1] = '\0';
	else
		*slash = '\0';
	if (stat(parent, &st) != 0 && (errno == EACCES || errno == EPERM)) {
		snprintf(err, errlen, "--trace-dir %s: cannot look into its parent directory (%s)",
			 opt_shown(o->dir, shown, sizeof(shown)), strerror(errno));
		return -EINVAL;
	}
	if (stat(parent, &st) != 0 || !S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "--trace-dir %s: its parent directory does not exist; create it first",
			 opt_shown(o->dir, shown, sizeof(shown)));
		return -EINVAL;
	}
	char *ev[TR_MAX_EVENTS];
	size_t n = 0;
	int r = parse_events(o->events ? o->events : trace_default_events, ev, &n, err, errlen);
	for (size_t k = 0; k < n; k++)
		free(ev[k]);
	if (r)
		return r;
	const char *list = o->events ? o->events : trace_default_events;
	bool sw = false;
	for (const char *q = list; q && *q; q = strchr(q, ',') ? strchr(q, ',') + 1 : NULL)
		sw = sw || strncmp(q, TR_REQUIRED ",", sizeof(TR_REQUIRED)) == 0 ||
		     strcmp(q, TR_REQUIRED) == 0 || strncmp(q, "sched/*", 7) == 0;
	if (!sw) {
		snprintf(err, errlen, "--trace-events: the list must name %s (the spikes' context switches)",
			 TR_REQUIRED);
		return -EINVAL;
	}
	if (o->instance && !tfs_name_ok(o->instance)) {
		snprintf(err, errlen, "--trace-instance %s: give 1..64 of letters, digits, '_', '.', '-'",
			 opt_shown(o->instance, shown, sizeof(shown)));
		return -EINVAL;
	}
	if (o->tracer && !ev_part_ok(o->tracer, strlen(o->tracer), false)) {
		snprintf(err, errlen, "--trace-tracer %s: not a tracer name (e.g. timerlat, osnoise)",
			 opt_shown(o->tracer, shown, sizeof(shown)));
		return -EINVAL;
	}
	if (!o->journal_dir || o->journal_dir[0] != '/') {
		snprintf(err, errlen, "--trace-journal-dir: give an absolute directory");
		return -EINVAL;
	}
	if (o->reader_cpu >= 0 && !CPU_ISSET(o->reader_cpu, online)) {
		char on[256];
		opt_format_cpulist(online, on, sizeof(on));
		snprintf(err, errlen, "--trace-reader-cpu: CPU %d is not online; online CPUs are %s",
			 o->reader_cpu, on);
		return -EINVAL;
	}
	return 0;
}

/* ---- files of DIR ---- */

static int write_file(const char *path, const char *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	int r = 0;
	size_t done = 0;
	while (done < len) {
		ssize_t w = write(fd, data + done, len - done);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			break;
		}
		done += (size_t)w;
	}
	if (close(fd) != 0 && !r)
		r = -errno;
	return r;
}

/* Copy a tracefs file into DIR/formats/NAME. */
static int copy_format(const struct trace_rec *r, const char *src, const char *name)
{
	char *text = NULL, dst[PATH_MAX];
	size_t len;
	int e = tfs_read(src, &text, &len);
	if (e)
		return e;
	int n = snprintf(dst, sizeof(dst), "%s/formats/%s", r->o.dir, name);
	e = n < 0 || (size_t)n >= sizeof(dst) ? -ENAMETOOLONG : write_file(dst, text, len);
	free(text);
	return e;
}

/* Remove DIR and what we wrote in it (its formats/ and files). */
static void remove_dir(const char *dir)
{
	char sub[PATH_MAX];
	const char *dirs[2] = { NULL, dir };
	snprintf(sub, sizeof(sub), "%s/formats", dir);
	dirs[0] = sub;
	for (int k = 0; k < 2; k++) {
		DIR *d = opendir(dirs[k]);
		if (!d)
			continue;
		struct dirent *de;
		while ((de = readdir(d))) {
			if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
				continue;
			char p[PATH_MAX];
			if (snprintf(p, sizeof(p), "%s/%s", dirs[k], de->d_name) < (int)sizeof(p) &&
			    unlink(p) != 0 && errno == EISDIR)
				(void)rmdir(p);
		}
		closedir(d);
		(void)rmdir(dirs[k]);
	}
}

static const char *byte_order(void)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	return "big";
#else
	return "little";
#endif
}

/* DIR/meta.json, through a temporary file renamed over it. */
static int write_meta(struct trace_rec *r, bool complete)
{
	struct jsonw w;
	jw_init(&w);
	jw_obj_begin(&w, NULL);
	jw_int(&w, "version", 1);
	jw_str(&w, "clock", "mono");
	jw_arr_begin(&w, "cpus");
	for (size_t i = 0; i < r->n_cpus; i++)
		jw_int(&w, NULL, r->cpus[i].cpu);
	jw_arr_end(&w);
	char key[16];
	jw_obj_begin(&w, "lost");
	for (size_t i = 0; i < r->n_cpus; i++) {
		const struct tr_cpu *c = &r->cpus[i];
		if (!c->stats)
			continue;
		snprintf(key, sizeof(key), "%d", c->cpu);
		jw_obj_begin(&w, key);
		jw_int(&w, "overrun", c->overrun);
		jw_int(&w, "dropped_events", c->dropped_events);
		jw_int(&w, "commit_overrun", c->commit_overrun);
		jw_obj_end(&w);
	}
	jw_obj_end(&w);
	jw_obj_begin(&w, "evicted");
	jw_obj_end(&w);
	jw_obj_begin(&w, "meta");
	jw_str(&w, "recorder", "engine");
	jw_str(&w, "byte_order", byte_order());
	jw_int(&w, "long_bits", (int64_t)r->layout.commit_size * 8);
	struct utsname u;
	jw_str_or_null(&w, "machine", uname(&u) == 0 ? u.machine : NULL);
	jw_str(&w, "engine_version", RTLAB_VERSION);
	jw_str(&w, "instance", r->name);
	jw_str(&w, "tracefs", r->root);
	jw_int_or_null(&w, "reader_cpu", r->reader_cpu);
	jw_arr_begin(&w, "events");
	for (size_t i = 0; i < r->n_events; i++)
		jw_str(&w, NULL, r->events[i]);
	jw_arr_end(&w);
	jw_arr_begin(&w, "events_missing");
	for (size_t i = 0; i < r->n_missing; i++)
		jw_str(&w, NULL, r->missing[i]);
	jw_arr_end(&w);
	jw_int(&w, "buffer_kb", r->o.buffer_kb);
	jw_int(&w, "limit_mb", r->o.limit_mb);
	jw_str_or_null(&w, "tracer", r->o.tracer);
	jw_str(&w, "mode", r->o.flight ? "flight" : "full");
	jw_uint(&w, "page_size", tfs_page_size(&r->layout));
	jw_uint(&w, "started_ns", r->started_ns);
	jw_uint_or_null(&w, "stopped_ns", r->stopped_ns);
	/* flight mode: the pages written into window files (bytes: with their frames),
	 * dropped with the windows that did not fit (aged pages are in meta.flight) */
	uint64_t bytes = 0;
	jw_obj_begin(&w, "pages");
	for (size_t i = 0; i < r->n_cpus; i++) {
		snprintf(key, sizeof(key), "%d", r->cpus[i].cpu);
		const struct tfl_ring *g = r->fl_made ? &r->fl.rings[i] : NULL;
		jw_uint(&w, key, g ? g->written : r->cpus[i].pages);
		bytes += g ? g->bytes_written : r->cpus[i].bytes;
	}
	jw_obj_end(&w);
	jw_uint(&w, "bytes", bytes);
	jw_obj_begin(&w, "dropped_pages");
	for (size_t i = 0; i < r->n_cpus; i++) {
		snprintf(key, sizeof(key), "%d", r->cpus[i].cpu);
		jw_uint(&w, key, r->fl_made ? r->fl.rings[i].dropped : r->cpus[i].dropped);
	}
	jw_obj_end(&w);
	jw_bool(&w, "complete", complete);
	const char *error = r->error[0] ? r->error : r->fl_made && r->fl.error[0] ? r->fl.error : NULL;
	jw_str_or_null(&w, "error", error);
	if (r->fl_made)
		tfl_write_meta(&r->fl, &w);
	jw_obj_end(&w);
	jw_obj_begin(&w, "symbols");
	jw_obj_end(&w);
	jw_obj_end(&w);
	if (jw_error(&w)) {
		jw_free(&w);
		return -ENOMEM;
	}
	char tmp[PATH_MAX], dst[PATH_MAX];
	snprintf(tmp, sizeof(tmp), "%s/meta.json.tmp", r->o.dir);
	snprintf(dst, sizeof(dst), "%s/meta.json", r->o.dir);
	const char *text = jw_text(&w);
	int e = write_file(tmp, text, strlen(text));
	if (!e && rename(tmp, dst) != 0)
		e = -errno;
	if (e)
		unlink(tmp);
	jw_free(&w);
	return e;
}

/* ---- the reader ---- */

/* One page into cpuN.pages, or counted as dropped. */
static void store_page(struct trace_rec *r, struct tr_cpu *c, size_t n)
{
	size_t len = tfs_page_trim(r->page, n, &r->layout);
	if (len == 0)
		return;
	if (r->fl_made) {
		uint64_t ts = 0;
		if (r->layout.ts_size == 8)
			memcpy(&ts, r->page + r->layout.ts_off, 8);
		tfl_ring_push(&r->fl.rings[c - r->cpus], r->page, len, ts);
		return;
	}
	uint64_t limit = (uint64_t)r->o.limit_mb << 20;
	if (c->write_failed || c->bytes + len + 4 > limit) {
		c->dropped++;
		return;
	}
	le_put32(r->frame, (uint32_t)len);
	memcpy(r->frame + 4, r->page, len);
	size_t done = 0, total = len + 4;
	while (done < total) {
		ssize_t w = write(c->out_fd, r->frame + done, total - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			int e = w < 0 ? errno : ENOSPC;
			c->write_failed = true;
			c->dropped++;
			/* no torn frame: the file ends with its last whole page */
			if (ftruncate(c->out_fd, c->good) != 0)
				(void)0;
			if (!r->error[0]) {
				snprintf(r->error, sizeof(r->error), "writing %s/cpu%d.pages: %s",
					 r->o.dir, c->cpu, strerror(e));
				fprintf(stderr, "rtlab-probe %s: trace: %s; further pages of CPU %d are dropped (counted)\n",
					r->probe, r->error, c->cpu);
			}
			return;
		}
		done += (size_t)w;
	}
	c->good += (off_t)total;
	c->pages++;
	c->bytes += len;
}

/*
 * Read every CPU's available pages (at most 64 each); true when one was read. Flight
 * mode, *read_to (may be NULL): the time up to which every CPU's events have been read:
 * t0 (when the pass began, less a slack for events still being committed) for a CPU
 * read until it had nothing more, else the start of the newest page read of it.
 */
static bool drain_pass(struct trace_rec *r, uint64_t t0, uint64_t *read_to)
{
	bool any = false;
	uint64_t upto = t0 > TR_READ_SLACK_NS ? t0 - TR_READ_SLACK_NS : 0;
	size_t ps = tfs_page_size(&r->layout);
	for (size_t i = 0; i < r->n_cpus; i++) {
		struct tr_cpu *c = &r->cpus[i];
		bool empty = false;
		for (int k = 0; k < 64; k++) {
			ssize_t n = read(c->in_fd, r->page, ps);
			if (n <= 0) {
				empty = true;
				break;
			}
			any = true;
			store_page(r, c, (size_t)n);
		}
		if (!empty && r->fl_made) {
			struct tfl_ring *g = &r->fl.rings[i];
			uint64_t newest = g->n ? tfl_ring_at(g, g->n - 1)->ts : 0;
			upto = newest < upto ? newest : upto;
		}
	}
	if (read_to)
		*read_to = upto;
	return any;
}

static bool drain_once(struct trace_rec *r)
{
	return drain_pass(r, 0, NULL);
}

static int write_meta(struct trace_rec *r, bool complete);

/*
 * Flight mode, one step of the reader: the pages read so far go into the rings; the
 * triggers the reporter queued open or widen windows; the windows whose end has been
 * read on every CPU are written or dropped; meta.json about once a second. True when
 * pages were read.
 */
/* The flight recorder's first write error, once on stderr. */
static void flight_say(struct trace_rec *r)
{
	if (r->fl.error[0] && !r->fl_said) {
		r->fl_said = true;
		fprintf(stderr, "rtlab-probe %s: trace: %s; what is not written is counted in meta.json, "
			"later windows are tried again\n", r->probe, r->fl.error);
	}
}

static bool flight_step(struct trace_rec *r)
{
	uint64_t t0 = rl_now_ns(CLOCK_MONOTONIC), read_to;
	bool any = drain_pass(r, t0, &read_to);
	tfl_take_queue(&r->fl);
	tfl_close(&r->fl, read_to, t0);
	flight_say(r);
	uint64_t now = rl_now_ns(CLOCK_MONOTONIC);
	if (now - r->meta_at >= TR_META_EVERY_NS) {
		(void)write_meta(r, false);
		r->meta_at = now;
	}
	return any;
}

static void *reader_main(void *arg)
{
	struct trace_rec *r = arg;
	if (r->reader_cpu >= 0) {
		cpu_set_t s;
		CPU_ZERO(&s);
		CPU_SET(r->reader_cpu, &s);
		(void)pthread_setaffinity_np(pthread_self(), sizeof(s), &s);
	}
	while (!atomic_load(&r->stop)) {
		if (!(r->fl_made ? flight_step(r) : drain_once(r))) {
			struct timespec ts = { 0, TR_POLL_NS };
			nanosleep(&ts, NULL);
		}
	}
	return NULL;
}

/* ---- set-up ---- */

static void read_stats(struct trace_rec *r)
{
	for (size_t i = 0; i < r->n_cpus; i++) {
		struct tr_cpu *c = &r->cpus[i];
		char p[PATH_MAX], *text = NULL;
		size_t len;
		snprintf(p, sizeof(p), "%s/per_cpu/cpu%d/stats", r->inst, c->cpu);
		if (tfs_read(p, &text, &len) != 0)
			continue;
		c->stats = true;
		char *save = NULL;
		for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
			char *colon = strchr(line, ':');
			if (!colon)
				continue;
			*colon = '\0';
			long long v = strtoll(colon + 1, NULL, 10);
			if (strcmp(line, "overrun") == 0)
				c->overrun = v;
			else if (strcmp(line, "dropped events") == 0)
				c->dropped_events = v;
			else if (strcmp(line, "commit overrun") == 0)
				c->commit_overrun = v;
		}
		free(text);
	}
}

static void rec_free(struct trace_rec *r)
{
	if (r->fl_made)
		tfl_free(&r->fl);
	for (size_t i = 0; i < r->n_events; i++)
		free(r->events[i]);
	for (size_t i = 0; i < r->n_missing; i++)
		free(r->missing[i]);
	free(r->cpus);
	free(r->page);
	free(r->frame);
	free(r);
}

/* Close the CPUs' files, remove the instance and the journal; with drop, DIR too. */
static int teardown(struct trace_rec *r, bool drop, const char *probe)
{
	for (size_t i = 0; r->cpus && i < r->n_cpus; i++) {
		if (r->cpus[i].in_fd >= 0)
			close(r->cpus[i].in_fd);
		if (r->cpus[i].out_fd >= 0)
			close(r->cpus[i].out_fd);
		r->cpus[i].in_fd = r->cpus[i].out_fd = -1;
	}
	int e = tfs_journal_restore(&r->j);
	if (e)
		fprintf(stderr, "rtlab-probe %s: trace: cannot remove the tracefs instance %s: %s; "
			"its journal is kept: run rtlab restore\n", probe, r->name, strerror(-e));
	if (drop && r->dir_made)
		remove_dir(r->o.dir);
	return e;
}

/* Does the kernel have the event (or the system, for SYSTEM/'*')? */
static bool have_event(const char *root, const char *ev)
{
	char p[PATH_MAX];
	struct stat st;
	const char *slash = strchr(ev, '/');
	if (strcmp(slash + 1, "*") == 0)
		snprintf(p, sizeof(p), "%s/events/%.*s/enable", root, (int)(slash - ev), ev);
	else
		snprintf(p, sizeof(p), "%s/events/%s/enable", root, ev);
	return stat(p, &st) == 0;
}

/* The format files of one event, or of every event of a system (SYSTEM/'*'). */
static int copy_event_formats(const struct trace_rec *r, const char *ev)
{
	char sys[128], name[PATH_MAX], src[PATH_MAX];
	const char *slash = strchr(ev, '/');
	snprintf(sys, sizeof(sys), "%.*s", (int)(slash - ev), ev);
	if (strcmp(slash + 1, "*") != 0) {
		snprintf(src, sizeof(src), "%s/events/%s/format", r->root, ev);
		snprintf(name, sizeof(name), "%s__%s.format", sys, slash + 1);
		return copy_format(r, src, name);
	}
	snprintf(src, sizeof(src), "%s/events/%s", r->root, sys);
	DIR *d = opendir(src);
	if (!d)
		return -errno;
	int e = 0;
	struct dirent *de;
	while (!e && (de = readdir(d))) {
		char f[PATH_MAX];
		struct stat st;
		if (de->d_name[0] == '.' ||
		    snprintf(f, sizeof(f), "%s/%s/format", src, de->d_name) >= (int)sizeof(f) ||
		    stat(f, &st) != 0)
			continue;
		snprintf(name, sizeof(name), "%s__%s.format", sys, de->d_name);
		e = copy_format(r, f, name);
	}
	closedir(d);
	return e;
}

/* A file of the instance. */
static int inst_write(const struct trace_rec *r, const char *file, const char *value)
{
	char p[PATH_MAX];
	if (snprintf(p, sizeof(p), "%s/%s", r->inst, file) >= (int)sizeof(p))
		return -ENAMETOOLONG;
	return tfs_write(p, value);
}

#define FAIL(code, ...)                                                  \
	do {                                                             \
		fprintf(stderr, "rtlab-probe %s: ", probe);              \
		fprintf(stderr, __VA_ARGS__);                            \
		fputc('\n', stderr);                                     \
		rc = (code);                                             \
		goto fail;                                               \
	} while (0)

int trace_rec_start(struct trace_rec **out, const struct trace_opts *o, const cpu_set_t *cpus,
		    const cpu_set_t *online, const char *probe)
{
	*out = NULL;
	struct trace_rec *r = calloc(1, sizeof(*r));
	if (!r) {
		fprintf(stderr, "rtlab-probe %s: out of memory\n", probe);
		return RL_EXIT_ERROR;
	}
	int rc = RL_EXIT_ERROR, e;
	char err[256], p[PATH_MAX];
	char *text = NULL;
	size_t len;
	r->o = *o;
	r->probe = probe;
	r->j.fd = -1;
	r->reader_cpu = -1;
	atomic_init(&r->stop, false);
	if (o->instance)
		snprintf(r->name, sizeof(r->name), "%s", o->instance);
	else
		snprintf(r->name, sizeof(r->name), "rtlab-%d", (int)getpid());
	char *wanted[TR_MAX_EVENTS];
	size_t n_wanted = 0;
	if (parse_events(o->events ? o->events : trace_default_events, wanted, &n_wanted, err,
			 sizeof(err)) != 0)
		FAIL(RL_EXIT_ERROR, "%s", err);

	/* what the kernel has, before anything is created */
	e = tfs_find(r->root, sizeof(r->root));
	if (e == -EACCES || e == -EPERM)
		FAIL(RL_EXIT_SKIPPED, "skipped: --trace-dir needs root (tracefs: %s)", strerror(-e));
	if (e)
		FAIL(RL_EXIT_SKIPPED, "skipped: --trace-dir: tracefs is not mounted; mount it: "
		     "mount -t tracefs nodev /sys/kernel/tracing");
	snprintf(r->inst, sizeof(r->inst), "%s/instances/%s", r->root, r->name);
	struct stat st;
	if (lstat(r->inst, &st) == 0)
		FAIL(RL_EXIT_ERROR, "--trace-instance: the tracefs instance %s exists already (another tool's?); "
		     "give another name with --trace-instance, or remove it if it is a leftover", r->name);
	snprintf(p, sizeof(p), "%s/trace_clock", r->root);
	if (tfs_read(p, &text, &len) != 0 || !strstr(text, "mono"))
		FAIL(RL_EXIT_SKIPPED, "skipped: --trace-dir: this kernel's tracefs has no mono trace clock");
	free(text);
	text = NULL;
	if (o->tracer) {
		snprintf(p, sizeof(p), "%s/available_tracers", r->root);
		bool have = false;
		if (tfs_read(p, &text, &len) == 0) {
			char *save = NULL, *copy = strdup(text);
			for (char *t = copy ? strtok_r(copy, " \n", &save) : NULL; t;
			     t = strtok_r(NULL, " \n", &save))
				have = have || strcmp(t, o->tracer) == 0;
			free(copy);
			for (char *q = text; *q; q++)
				if (*q == '\n')
					*q = ' ';
			for (size_t l = strlen(text); l > 0 && text[l - 1] == ' ';)
				text[--l] = '\0';
		}
		if (!have)
			FAIL(RL_EXIT_SKIPPED, "skipped: --trace-tracer %s: this kernel has no such tracer; it has: %s",
			     o->tracer, text ? text : "none");
		free(text);
		text = NULL;
	}
	for (size_t k = 0; k < n_wanted; k++) {
		char **slot = have_event(r->root, wanted[k]) ? &r->events[r->n_events++]
							    : &r->missing[r->n_missing++];
		*slot = wanted[k];
		wanted[k] = NULL;
	}
	n_wanted = 0;
	bool have_switch = false;
	for (size_t k = 0; k < r->n_events; k++)
		have_switch = have_switch || strcmp(r->events[k], TR_REQUIRED) == 0 ||
			      strcmp(r->events[k], "sched/*") == 0;
	if (!have_switch)
		FAIL(RL_EXIT_SKIPPED, "skipped: --trace-events: this kernel lacks %s, which the recorder needs",
		     TR_REQUIRED);
	snprintf(p, sizeof(p), "%s/events/header_page", r->root);
	if (tfs_read(p, &text, &len) != 0 || tfs_page_layout_parse(text, &r->layout) != 0)
		FAIL(RL_EXIT_ERROR, "--trace-dir: cannot read the ring buffer's page layout (%s)", p);
	free(text);
	text = NULL;
	size_t ps = tfs_page_size(&r->layout);
	r->page = malloc(ps);
	r->frame = malloc(ps + 4);
	int ncpu = 0;
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, cpus))
			ncpu = c + 1;
	r->cpus = calloc((size_t)CPU_COUNT(cpus) + 1, sizeof(*r->cpus));
	if (!r->page || !r->frame || !r->cpus)
		FAIL(RL_EXIT_ERROR, "out of memory");
	for (int c = 0; c < ncpu; c++)
		if (CPU_ISSET(c, cpus))
			r->cpus[r->n_cpus++] = (struct tr_cpu){ .cpu = c, .in_fd = -1, .out_fd = -1 };
	if (o->reader_cpu >= 0)
		r->reader_cpu = o->reader_cpu;
	else
		for (int c = 0; c < CPU_SETSIZE && r->reader_cpu < 0; c++)
			if (CPU_ISSET(c, online) && !CPU_ISSET(c, cpus))
				r->reader_cpu = c;

	/* the journal, then the instance */
	e = tfs_journal_open(&r->j, o->journal_dir, "trace");
	if (e == -EACCES || e == -EPERM || e == -EROFS)
		FAIL(RL_EXIT_SKIPPED, "skipped: --trace-dir needs root (cannot create its journal in %s: %s)",
		     o->journal_dir, strerror(-e));
	if (e)
		FAIL(RL_EXIT_ERROR, "--trace-dir: cannot create its journal in %s: %s", o->journal_dir,
		     strerror(-e));
	e = tfs_instance_create(&r->j, r->root, r->name, r->inst, sizeof(r->inst));
	if (e == -EACCES || e == -EPERM)
		FAIL(RL_EXIT_SKIPPED, "skipped: --trace-dir needs root (cannot create the tracefs instance %s: %s)",
		     r->name, strerror(-e));
	if (e == -EEXIST)
		FAIL(RL_EXIT_ERROR, "--trace-instance: the tracefs instance %s exists already (another tool's?); "
		     "give another name with --trace-instance", r->name);
	if (e)
		FAIL(RL_EXIT_ERROR, "--trace-dir: cannot create the tracefs instance %s: %s", r->name,
		     strerror(-e));

	/* the instance's set-up */
	if ((e = inst_write(r, "tracing_on", "0")) || (e = inst_write(r, "trace_clock", "mono")))
		FAIL(RL_EXIT_ERROR, "--trace-dir: cannot set up the tracefs instance %s: %s", r->name,
		     strerror(-e));
	char val[64];
	snprintf(val, sizeof(val), "%lld", (long long)o->buffer_kb);
	if ((e = inst_write(r, "buffer_size_kb", val)))
		FAIL(RL_EXIT_ERROR, "--trace-buffer-kb %lld: the kernel refused it (%s); give a smaller size",
		     (long long)o->buffer_kb, strerror(-e));
	char mask[CPU_SETSIZE / 4 + CPU_SETSIZE / 32 + 8];
	tfs_cpumask_format(cpus, ncpu, mask, sizeof(mask));
	if ((e = inst_write(r, "tracing_cpumask", mask)))
		FAIL(RL_EXIT_ERROR, "--trace-dir: cannot set tracing_cpumask %s: %s", mask, strerror(-e));
	for (size_t k = 0; k < r->n_events; k++) {
		const char *ev = r->events[k], *slash = strchr(ev, '/');
		if (strcmp(slash + 1, "*") == 0)
			snprintf(p, sizeof(p), "events/%.*s/enable", (int)(slash - ev), ev);
		else
			snprintf(p, sizeof(p), "events/%s/enable", ev);
		if ((e = inst_write(r, p, "1")))
			FAIL(RL_EXIT_ERROR, "--trace-events: cannot enable %s: %s", ev, strerror(-e));
	}
	if (o->tracer) {
		if (strcmp(o->tracer, "timerlat") == 0 || strcmp(o->tracer, "osnoise") == 0) {
			char list[1024];
			opt_format_cpulist(cpus, list, sizeof(list));
			snprintf(p, sizeof(p), "%s/osnoise/cpus", r->root);
			if ((e = tfs_write_journaled(&r->j, p, list, NULL)))
				FAIL(RL_EXIT_ERROR, "--trace-tracer %s: cannot set osnoise/cpus to %s: %s%s",
				     o->tracer, list, strerror(-e),
				     e == -EBUSY ? " (another tool, e.g. rtla, is using it; stop it first)" : "");
		}
		if ((e = inst_write(r, "current_tracer", o->tracer)))
			FAIL(RL_EXIT_ERROR, "--trace-tracer %s: cannot start it: %s%s", o->tracer,
			     strerror(-e),
			     e == -EBUSY ? " (another tool, e.g. rtla, is running it; stop it first)" : "");
	}

	/* DIR: formats, the start's meta, the CPUs' files */
	if (mkdir(o->dir, 0755) != 0)
		FAIL(RL_EXIT_ERROR, "--trace-dir %s: cannot create it: %s", o->dir, strerror(errno));
	r->dir_made = true;
	snprintf(p, sizeof(p), "%s/formats", o->dir);
	if (mkdir(p, 0755) != 0)
		FAIL(RL_EXIT_ERROR, "--trace-dir: cannot create %s: %s", p, strerror(errno));
	char src[PATH_MAX];
	snprintf(src, sizeof(src), "%s/events/header_page", r->root);
	e = copy_format(r, src, "header_page");
	snprintf(src, sizeof(src), "%s/events/header_event", r->root);
	if (!e)
		e = copy_format(r, src, "header_event");
	for (size_t k = 0; !e && k < r->n_events; k++)
		e = copy_event_formats(r, r->events[k]);
	if (!e && o->tracer) {
		/* the tracer's own events, e.g. ftrace/timerlat */
		snprintf(src, sizeof(src), "%s/events/ftrace/%s/format", r->root, o->tracer);
		char nm[128];
		snprintf(nm, sizeof(nm), "ftrace__%s.format", o->tracer);
		if (stat(src, &st) == 0)
			e = copy_format(r, src, nm);
	}
	if (e)
		FAIL(RL_EXIT_ERROR, "--trace-dir: cannot copy the format files into %s: %s", o->dir,
		     strerror(-e));
	for (size_t i = 0; i < r->n_cpus; i++) {
		struct tr_cpu *c = &r->cpus[i];
		snprintf(p, sizeof(p), "%s/per_cpu/cpu%d/trace_pipe_raw", r->inst, c->cpu);
		c->in_fd = open(p, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
		if (c->in_fd < 0)
			FAIL(RL_EXIT_ERROR, "--trace-dir: cannot open %s: %s", p, strerror(errno));
		if (o->flight)
			continue;	/* window files instead */
		snprintf(p, sizeof(p), "%s/cpu%d.pages", o->dir, c->cpu);
		c->out_fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
		if (c->out_fd < 0)
			FAIL(RL_EXIT_ERROR, "--trace-dir: cannot create %s: %s", p, strerror(errno));
	}
	if (o->flight) {
		int ids[CPU_SETSIZE];
		for (size_t i = 0; i < r->n_cpus; i++)
			ids[i] = r->cpus[i].cpu;
		const struct tfl_opts fo = {
			.trigger_ns = o->trigger_ns, .before_ns = o->before_ns, .after_ns = o->after_ns,
			.rate = (uint64_t)o->rate, .keep_mb = (uint64_t)o->keep_mb,
		};
		if (tfl_init(&r->fl, &fo, o->dir, ids, r->n_cpus, ps, rl_now_ns(CLOCK_MONOTONIC)) != 0)
			FAIL(RL_EXIT_ERROR, "--trace-keep-mb %lld: cannot hold %lld MiB per traced CPU in memory; "
			     "give a smaller --trace-keep-mb", (long long)o->keep_mb, (long long)o->keep_mb);
		r->fl_made = true;
		if ((e = tfl_open_lines(&r->fl)))
			FAIL(RL_EXIT_ERROR, "--trace-dir: cannot create %s/windows.jsonl: %s", o->dir,
			     strerror(-e));
	}
	/* room for the final meta.json when the disk fills up: given back before it is written */
	static const char zeros[4096];
	snprintf(p, sizeof(p), "%s/.meta-reserve", o->dir);
	for (int k = 0; k < TR_META_RESERVE / 4096 && !e; k++) {
		int fd = open(p, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
		e = fd < 0 ? -errno : (write(fd, zeros, sizeof(zeros)) == (ssize_t)sizeof(zeros) ? 0 : -ENOSPC);
		if (fd >= 0)
			close(fd);
	}
	if (e)
		FAIL(RL_EXIT_ERROR, "--trace-dir %s: cannot write into it: %s", o->dir, strerror(-e));
	r->started_ns = rl_now_ns(CLOCK_MONOTONIC);
	r->meta_at = r->started_ns;
	if ((e = write_meta(r, false)))
		FAIL(RL_EXIT_ERROR, "--trace-dir: cannot write %s/meta.json: %s", o->dir, strerror(-e));
	if ((e = pthread_create(&r->reader, NULL, reader_main, r)) != 0)
		FAIL(RL_EXIT_ERROR, "--trace-dir: cannot start the reader thread: %s", strerror(e));
	r->reader_started = true;
	if ((e = inst_write(r, "tracing_on", "1"))) {
		atomic_store(&r->stop, true);
		pthread_join(r->reader, NULL);
		FAIL(RL_EXIT_ERROR, "--trace-dir: cannot turn tracing on: %s", strerror(-e));
	}
	*out = r;
	return 0;
fail:
	free(text);
	for (size_t k = 0; k < n_wanted; k++)
		free(wanted[k]);
	(void)teardown(r, true, probe);
	rec_free(r);
	return rc;
}

void trace_rec_header(const struct trace_rec *r, struct jsonw *w)
{
	if (!r) {
		jw_null(w, "trace");
		return;
	}
	jw_obj_begin(w, "trace");
	jw_str(w, "dir", r->o.dir);
	jw_str(w, "instance", r->name);
	jw_int_or_null(w, "reader_cpu", r->reader_cpu);
	jw_arr_begin(w, "events_missing");
	for (size_t i = 0; i < r->n_missing; i++)
		jw_str(w, NULL, r->missing[i]);
	jw_arr_end(w);
	jw_str_or_null(w, "tracer", r->o.tracer);
	jw_str(w, "mode", r->o.flight ? "flight" : "full");
	if (r->o.flight) {
		jw_uint(w, "trigger_ns", r->o.trigger_ns);
		jw_uint(w, "before_ns", r->o.before_ns);
		jw_uint(w, "after_ns", r->o.after_ns);
		jw_uint(w, "rate_bytes_per_s", (uint64_t)r->o.rate);
		jw_uint(w, "keep_mb", (uint64_t)r->o.keep_mb);
	}
	jw_obj_end(w);
}

bool trace_rec_flight(const struct trace_rec *r)
{
	return r && r->fl_made;
}

void trace_rec_samples(void *arg, size_t chan, int cpu, uint64_t start_ns,
		       const struct sample_rec *s, size_t n)
{
	struct trace_rec *r = arg;
	if (r && r->fl_made)
		tfl_push_samples(&r->fl, (uint32_t)chan, cpu, start_ns, s, n);
}

const char *trace_rec_error(const struct trace_rec *r)
{
	return r && r->error[0] ? r->error : NULL;
}

int trace_rec_finish(struct trace_rec *r, const char *probe)
{
	if (!r)
		return 0;
	(void)inst_write(r, "tracing_on", "0");
	r->stopped_ns = rl_now_ns(CLOCK_MONOTONIC);
	atomic_store(&r->stop, true);
	if (r->reader_started)
		pthread_join(r->reader, NULL);
	for (int k = 0; k < 1000 && drain_once(r); k++)
		;
	if (r->fl_made) {
		/* tracing is off and drained: every window can be closed, what is left aged */
		tfl_take_queue(&r->fl);
		tfl_close(&r->fl, UINT64_MAX, rl_now_ns(CLOCK_MONOTONIC));
		for (size_t i = 0; i < r->fl.n_rings; i++)
			tfl_ring_age_all(&r->fl.rings[i]);
		flight_say(r);
	}
	read_stats(r);
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/.meta-reserve", r->o.dir);
	(void)unlink(p);
	int e = write_meta(r, true);
	if (e)
		fprintf(stderr, "rtlab-probe %s: trace: cannot write %s/meta.json: %s\n", probe,
			r->o.dir, strerror(-e));
	int te = teardown(r, false, probe);
	rec_free(r);
	return te ? te : e;
}
