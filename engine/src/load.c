/* SPDX-License-Identifier: MIT */
/*
 * `rtlab-probe load` (load.h): stress --cpu/--vm for boards without stress-ng,
 * and the OSADL mid load's parts (load_work.h: periodic allocation, synced file
 * I/O, a UDP sender at a bounded rate, a UDP sink). The parent prepares what the
 * workers share (the io workers' private directory, the sockets), forks them,
 * then waits in sigwaitinfo/sigtimedwait and only wakes for snapshots; the
 * workers are forked processes that count their work in a shared page (one
 * cache line each, read by the parent for snapshots and after it has reaped
 * them), and end with _exit (each worker is its own process). Every worker
 * waits at a gate (a pipe the parent holds open) until the parent has set its
 * scheduling (--policy, --priority) and printed the `load` record, so no worker
 * works at any other scheduling, and a refusal stops the load before any worked.
 */
#include "load.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "jsonw.h"
#include "lifeline.h"
#include "load_work.h"
#include "opts.h"
#include "output.h"
#include "procgroup.h"
#include "sysfile.h"
#include "udp_proto.h"
#include "version.h"

#define LOAD_VM_MIN 4096
#define LOAD_VM_MAX ((int64_t)(sizeof(void *) == 8 ? (1LL << 40) : (1LL << 31)))
#define LOAD_NEWTON_STEPS 6

/* ioprio_set(2): glibc has no wrapper, and older kernel headers no linux/ioprio.h */
#define LOAD_IOPRIO_WHO_PROCESS 1
#define LOAD_IOPRIO_CLASS_IDLE 3
#define LOAD_IOPRIO_CLASS_SHIFT 13

enum {
	L_CPU, L_CPU_DUTY, L_VM, L_VM_BYTES, L_ALLOC_BYTES, L_ALLOC_PERIOD, L_IO, L_IO_BYTES, L_IO_DIR,
	L_NET_TO, L_NET_KBIT, L_NET_SIZE, L_NET_SINK, L_CPUS, L_POLICY, L_PRIORITY, L_DURATION,
	L_SNAPSHOT, L_COUNT
};

/* --policy's choices and the policies they are (no deadline: a load has no period) */
static const char *const load_policy_names[] = { "other", "fifo", "rr", NULL };
static const enum rt_policy load_policies[] = { RT_OTHER, RT_FIFO, RT_RR };
#define LOAD_RT_DEFAULT_PRIO 1	/* --priority of fifo/rr when not given: the lowest */

static const struct opt_def load_opts[L_COUNT] = {
	[L_CPU] = { "cpu", OPT_INT, "N", "workers spinning on square roots (stress --cpu)", 0,
		    LOAD_MAX_WORKERS, NULL, "0", NULL },
	[L_CPU_DUTY] = { "cpu-duty", OPT_STRING, "ON/PERIOD",
			 "the --cpu workers spin ON every PERIOD instead of all the time (e.g. "
			 "2ms/20ms; absolute period starts, missed bursts counted as late; "
			 "comm " LOAD_DUTY_COMM "); PERIOD 100us..10s, ON 1us..PERIOD", 0, 0, NULL,
			 NULL, "none" },
	[L_VM] = { "vm", OPT_INT, "M",
		   "workers that map --vm-bytes, write every page, unmap, repeat (stress --vm)", 0,
		   LOAD_MAX_WORKERS, NULL, "0", NULL },
	[L_VM_BYTES] = { "vm-bytes", OPT_SIZE, NULL, "memory a vm worker maps per loop",
			 LOAD_VM_MIN, LOAD_VM_MAX, NULL, "256M", NULL },
	[L_ALLOC_BYTES] = { "alloc-bytes", OPT_SIZE, NULL,
			    "one alloc worker: map SIZE, write every page, unmap, once every "
			    "--alloc-period (a bounded allocation rate)", LOAD_VM_MIN, LOAD_VM_MAX,
			    NULL, NULL, "none" },
	[L_ALLOC_PERIOD] = { "alloc-period", OPT_DURATION, NULL,
			     "period of the alloc worker's rounds", (int64_t)NS_PER_MS,
			     (int64_t)(3600 * NS_PER_SEC), NULL, "1s", NULL },
	[L_IO] = { "io", OPT_INT, "N",
		   "workers that write --io-bytes to a file in 4k writes, each followed by "
		   "fsync, and remove it, over and over (idle I/O priority)", 0, LOAD_MAX_IO,
		   NULL, "0", NULL },
	[L_IO_BYTES] = { "io-bytes", OPT_SIZE, NULL, "file size of an io worker",
			 LOAD_IO_WRITE, 1LL << 30, NULL, "1M", NULL },
	[L_IO_DIR] = { "io-dir", OPT_STRING, "DIR",
		       "where the io workers' private directory is made (removed at the end)", 0,
		       0, NULL, "/tmp", NULL },
	[L_NET_TO] = { "net-to", OPT_STRING, "ADDR:PORT",
		       "one net worker sending UDP messages to ADDR:PORT at --net-kbit", 0, 0, NULL,
		       NULL, "none" },
	[L_NET_KBIT] = { "net-kbit", OPT_INT, "N", "UDP payload rate of the net worker, kbit/s", 1,
			 LOAD_NET_MAX_KBIT, NULL, "1000", NULL },
	[L_NET_SIZE] = { "net-size", OPT_INT, "BYTES", "UDP payload bytes per message",
			 LOAD_NET_MIN_SIZE, LOAD_NET_MAX_SIZE, NULL, "1000", NULL },
	[L_NET_SINK] = { "net-sink", OPT_STRING, "[ADDR:]PORT",
			 "one sink worker receiving and counting UDP messages on PORT (0: any free "
			 "port, named in the load record)", 0, 0, NULL, NULL, "none" },
	[L_CPUS] = { "cpus", OPT_CPULIST, NULL, "CPUs the workers may run on (their affinity)", 0,
		     0, NULL, NULL, "those of the command" },
	[L_POLICY] = { "policy", OPT_ENUM, "POLICY",
		       "scheduling policy of every worker (all kinds, like stress-ng --sched), "
		       "set just after its fork and before it works; the load process itself "
		       "keeps its own", 0, 0, load_policy_names, "other", NULL },
	[L_PRIORITY] = { "priority", OPT_INT, NULL,
			 "priority of the workers (fifo/rr: 1..99; other: 0, only with --policy "
			 "fifo or rr)", 0, 99, NULL, NULL, "1 for fifo/rr, 0 for other" },
	[L_DURATION] = { "duration", OPT_DURATION, NULL,
			 "stop after this time; 0s: until SIGINT/SIGTERM (or stdin EOF with --stdin-lifeline)",
			 0, (int64_t)(1000 * 3600 * NS_PER_SEC), NULL, "0s", NULL },
	[L_SNAPSHOT] = { "snapshot-interval", OPT_DURATION, NULL,
			 "print a load_snapshot record with the counts this often",
			 (int64_t)(10 * NS_PER_MS), (int64_t)(3600 * NS_PER_SEC), NULL, NULL,
			 "none" },
};

enum worker_kind { W_CPU, W_VM, W_ALLOC, W_IO, W_NET, W_SINK, W_KINDS };
static const char *const kind_names[W_KINDS] = { "cpu", "vm", "alloc", "io", "net", "sink" };

struct worker {
	pid_t pid;		/* 0: not started */
	enum worker_kind kind;
	bool alive;
	int status;		/* waitpid status once reaped */
	bool stopped;		/* killed by the parent */
	int kpolicy, prio;	/* its scheduling, read back after setting it */
};

struct load_run {
	const struct load_cfg *cfg;
	struct worker *w;
	size_t n;		/* workers started */
	struct load_slot *slots;
	size_t slots_len;
	pid_t pgid;
	struct load_io_job *io;	/* cfg->n_io jobs */
	char io_dir[512];	/* the private directory ("" while there is none) */
	int net_fd, sink_fd;	/* the parent's copies, closed once the workers have them */
	char sink_addr[64];	/* the sink's bound address, "A.B.C.D:PORT" */
	int ioprio_err;		/* -errno of the first refused ioprio_set, 0: set */
	int gate[2];		/* the workers wait for EOF on gate[0]; -1: closed */
	int sched_err;		/* -errno of the refused --policy (0: set, or not in effect) */
	bool sched_bad;		/* --policy refused or not in effect on a worker */
};

/* "PORT" alone, or what udp_parse_addr reads; 0 or -EINVAL. */
static int parse_sink(const char *s, struct sockaddr_storage *out, socklen_t *len)
{
	bool digits = *s != '\0';
	for (const char *c = s; *c; c++)
		digits = digits && *c >= '0' && *c <= '9';
	if (!digits)
		return udp_parse_addr(s, out, len);
	char buf[32];
	if (strlen(s) > 5)
		return -EINVAL;
	snprintf(buf, sizeof(buf), "0.0.0.0:%s", s);
	return udp_parse_addr(buf, out, len);
}

static uint16_t addr_port(const struct sockaddr_storage *a)
{
	if (a->ss_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)a)->sin6_port);
	return ntohs(((const struct sockaddr_in *)a)->sin_port);
}

int load_parse(int argc, char *const *argv, const cpu_set_t *online, struct load_cfg *cfg,
	       char *err, size_t errlen)
{
	struct opt_value v[L_COUNT];
	int r = opts_parse(load_opts, L_COUNT, argc, argv, online, v, err, errlen);
	if (r)
		return r;
	memset(cfg, 0, sizeof(*cfg));
	cfg->n_cpu = (unsigned)v[L_CPU].i;
	cfg->n_vm = (unsigned)v[L_VM].i;
	if (v[L_CPU_DUTY].set) {
		if (cfg->n_cpu == 0) {
			snprintf(err, errlen, "--cpu-duty: only with --cpu N");
			return -EINVAL;
		}
		r = load_parse_duty(v[L_CPU_DUTY].s, &cfg->duty_on_ns, &cfg->duty_period_ns, err,
				    errlen);
		if (r)
			return r;
	}
	cfg->vm_bytes = (uint64_t)v[L_VM_BYTES].i;
	cfg->alloc_bytes = v[L_ALLOC_BYTES].set ? (uint64_t)v[L_ALLOC_BYTES].i : 0;
	cfg->alloc_period_ns = (uint64_t)v[L_ALLOC_PERIOD].i;
	cfg->n_io = (unsigned)v[L_IO].i;
	cfg->io_bytes = (uint64_t)v[L_IO_BYTES].i;
	cfg->io_dir = v[L_IO_DIR].s;
	cfg->net_kbit = (uint64_t)v[L_NET_KBIT].i;
	cfg->net_size = (uint64_t)v[L_NET_SIZE].i;
	cfg->have_cpus = v[L_CPUS].set;
	if (cfg->have_cpus)
		cfg->cpus = v[L_CPUS].cpus;
	cfg->duration_ns = (uint64_t)v[L_DURATION].i;
	cfg->policy = load_policies[v[L_POLICY].i];
	if (cfg->policy == RT_OTHER && v[L_PRIORITY].given && v[L_PRIORITY].i != 0) {
		snprintf(err, errlen, "--priority: only with --policy fifo or rr (1..99); the "
			 "workers run at --policy %s, which has no priority",
			 load_policy_names[v[L_POLICY].i]);
		return -EINVAL;
	}
	r = probe_priority(cfg->policy, &v[L_PRIORITY], LOAD_RT_DEFAULT_PRIO, &cfg->priority, err,
			   errlen);
	if (r)
		return r;
	cfg->snapshot_ns = v[L_SNAPSHOT].set ? (uint64_t)v[L_SNAPSHOT].i : 0;
	if (v[L_NET_TO].set) {
		cfg->net_to_s = v[L_NET_TO].s;
		if (udp_parse_addr(cfg->net_to_s, &cfg->net_to, &cfg->net_to_len) != 0 ||
		    addr_port(&cfg->net_to) == 0) {
			char shown[OPT_SHOWN_LEN];
			snprintf(err, errlen, "--net-to: %s is not ADDR:PORT (a numeric IPv4 "
				 "address, or [IPv6], and a port 1..65535)",
				 opt_shown(cfg->net_to_s, shown, sizeof(shown)));
			return -EINVAL;
		}
	}
	if (v[L_NET_SINK].set) {
		cfg->sink_s = v[L_NET_SINK].s;
		if (parse_sink(cfg->sink_s, &cfg->sink, &cfg->sink_len) != 0) {
			char shown[OPT_SHOWN_LEN];
			snprintf(err, errlen, "--net-sink: %s is not [ADDR:]PORT (a port "
				 "0..65535, 0: any free one, after an optional numeric address)",
				 opt_shown(cfg->sink_s, shown, sizeof(shown)));
			return -EINVAL;
		}
	}
	if (cfg->n_cpu == 0 && cfg->n_vm == 0 && !cfg->alloc_bytes && cfg->n_io == 0 &&
	    !cfg->net_to_s && !cfg->sink_s) {
		snprintf(err, errlen, "give --cpu N and/or --vm M, or --alloc-bytes SIZE, --io N, "
			 "--net-to ADDR:PORT, --net-sink PORT (at least one worker); see --help");
		return -EINVAL;
	}
	static const struct {
		int opt, needs;
		const char *what;
	} only_with[] = {
		{ L_VM_BYTES, L_VM, "--vm M" },
		{ L_ALLOC_PERIOD, L_ALLOC_BYTES, "--alloc-bytes SIZE" },
		{ L_IO_BYTES, L_IO, "--io N" },
		{ L_IO_DIR, L_IO, "--io N" },
		{ L_NET_KBIT, L_NET_TO, "--net-to ADDR:PORT" },
		{ L_NET_SIZE, L_NET_TO, "--net-to ADDR:PORT" },
	};
	for (size_t k = 0; k < sizeof(only_with) / sizeof(only_with[0]); k++) {
		int o = only_with[k].opt, n = only_with[k].needs;
		bool has = load_opts[n].type == OPT_INT ? v[n].i > 0 : v[n].set;
		if (v[o].given && !has) {
			snprintf(err, errlen, "--%s: only with %s", load_opts[o].name,
				 only_with[k].what);
			return -EINVAL;
		}
	}
	return 0;
}

int load_sched_refusal(const struct load_cfg *cfg, int e, char *buf, size_t len)
{
	const char *pol = rt_policy_names[cfg->policy];
	if (e == -EPERM || e == -EACCES) {
		snprintf(buf, len,
			 "--policy %s --priority %d: cannot set %s priority %d on the workers (%s): "
			 "run as root or grant CAP_SYS_NICE, raise 'ulimit -r' to %d, or run in a "
			 "cgroup with RT runtime (RT group scheduling: cpu.rt_runtime_us > 0); or "
			 "use --policy other",
			 pol, cfg->priority, rt_policy_label(cfg->policy), cfg->priority,
			 strerror(-e), cfg->priority);
		return RL_EXIT_SKIPPED;
	}
	snprintf(buf, len, "--policy %s --priority %d: cannot set %s priority %d on the workers (%s)",
		 pol, cfg->priority, rt_policy_label(cfg->policy), cfg->priority,
		 e ? strerror(-e) : "not in effect after setting");
	return RL_EXIT_ERROR;
}

void load_help(FILE *f)
{
	fprintf(f,
		"usage: rtlab-probe [--tee FILE] [--stdin-lifeline] load [OPTIONS]\n\n"
		"A minimal load for targets without stress-ng or sockperf: CPU and memory\n"
		"workers like `stress --cpu N --vm M --vm-bytes SIZE`, and the parts of the\n"
		"OSADL mid load (a periodic allocation, synced small file I/O, UDP at a\n"
		"bounded rate to a sink). It measures nothing. The workers are processes in\n"
		"the load's own process group; JSON lines on stdout: a `load` record when\n"
		"they run, `load_snapshot` records with --snapshot-interval, a `load_result`\n"
		"record with their counts when they have been stopped (see docs/engine.md).\n"
		"--policy fifo|rr runs every worker at that real-time policy (the seed's\n"
		"background hog: --cpu N --policy fifo --priority 97); where it is refused\n"
		"(not root, no CAP_SYS_NICE, an RT group without runtime) nothing starts:\n"
		"one line on stderr, exit 4. --cpu-duty ON/PERIOD makes each cpu worker\n"
		"spin ON every PERIOD (comm " LOAD_DUTY_COMM "): with --cpu 1 --cpus C --policy\n"
		"fifo --priority 97 it is the seed's SCHED_FIFO task spinning D ms every P ms\n"
		"on CPU C, a known cause for a traced run.\n\n"
		"options:\n");
	opts_help(f, load_opts, L_COUNT);
	fprintf(f, "  %-28s show this help\n", "--help");
}

double load_cpu_round(double seed)
{
	double sum = 0;
	for (int i = 1; i <= LOAD_CPU_ROUND; i++) {
		double a = seed + i;
		double r = a > 2 ? a / 2 : 1;
		for (int k = 0; k < LOAD_NEWTON_STEPS; k++)
			r = 0.5 * (r + a / r);
		sum += r;
	}
	return sum;
}

/* The body of a worker process; never returns. */
static void worker_run(struct load_run *r, enum worker_kind kind, size_t index,
		       size_t kind_index, pid_t parent)
{
	const struct load_cfg *c = r->cfg;
	struct load_slot *slot = &r->slots[index];
	/* die with the parent, even if it is killed with SIGKILL */
	if (!procgroup_child_tie(parent))
		_exit(0);
	procgroup_child_signals(); /* SIGTERM to the group ends a worker */
	/* the gate: wait until the parent has set this worker's scheduling (or killed it) */
	close(r->gate[1]);
	for (;;) {
		char b;
		ssize_t n = read(r->gate[0], &b, 1);
		if (n == 0 || (n < 0 && errno != EINTR))
			break;
	}
	close(r->gate[0]);
	int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (nul >= 0) {
		/* the worker holds neither the host's stdin (lifeline) nor its stdout */
		dup2(nul, STDIN_FILENO);
		dup2(nul, STDOUT_FILENO);
		close(nul);
	}
	/* each worker keeps only its own socket */
	if (kind != W_NET && r->net_fd >= 0)
		close(r->net_fd);
	if (kind != W_SINK && r->sink_fd >= 0)
		close(r->sink_fd);
	switch (kind) {
	case W_CPU: {
		if (c->duty_period_ns)
			load_duty_worker(slot, c->duty_on_ns, c->duty_period_ns);
		const double seed = (double)(index % 8);
		for (;;) {
			/* the sum goes to the shared page: the work cannot be optimised away */
			slot->sink = load_cpu_round(seed);
			slot->loops = slot->loops + 1;
		}
	}
	case W_VM: {
		long ps = sysconf(_SC_PAGESIZE);
		size_t page = ps > 0 ? (size_t)ps : 4096;
		for (;;) {
			int e = load_vm_round((size_t)c->vm_bytes, page);
			if (e) {
				slot->err = e;
				_exit(WORKER_EXIT_VM);
			}
			slot->loops = slot->loops + 1;
		}
	}
	case W_ALLOC:
		load_alloc_worker(slot, c->alloc_bytes, c->alloc_period_ns);
	case W_IO:
		load_io_worker(slot, &r->io[kind_index]);
	case W_NET:
		load_net_worker(slot, r->net_fd, c->net_kbit, c->net_size);
	case W_SINK:
	case W_KINDS:
		break;
	}
	load_sink_worker(slot, r->sink_fd);
}

/* Kill every live worker (SIGKILL: what they leave, the parent removes) and reap it. */
static void stop_workers(struct load_run *r)
{
	for (size_t i = 0; i < r->n; i++) {
		if (r->w[i].alive && kill(r->w[i].pid, SIGKILL) == 0)
			r->w[i].stopped = true;
	}
	for (size_t i = 0; i < r->n; i++) {
		while (r->w[i].alive) {
			int st;
			pid_t p = waitpid(r->w[i].pid, &st, 0);
			if (p == r->w[i].pid) {
				r->w[i].alive = false;
				r->w[i].status = st;
			} else if (p < 0 && errno != EINTR) {
				r->w[i].alive = false; /* ECHILD: already gone */
				r->w[i].status = 0;
			}
		}
	}
}

/* After the workers are reaped: no file, no directory, no socket of the load is left. */
static void cleanup(struct load_run *r)
{
	if (r->io_dir[0]) {
		for (unsigned i = 0; i < r->cfg->n_io; i++)
			unlink(r->io[i].path); /* a worker killed between open and unlink */
		rmdir(r->io_dir);	/* ENOENT: an io worker removed it already */
		r->io_dir[0] = '\0';
	}
	if (r->net_fd >= 0)
		close(r->net_fd);
	if (r->sink_fd >= 0)
		close(r->sink_fd);
	r->net_fd = r->sink_fd = -1;
}

/* Reap workers that ended by themselves; returns the index of the first, or -1. */
static long reap_dead(struct load_run *r)
{
	long first = -1;
	for (;;) {
		int st;
		pid_t p = waitpid(-1, &st, WNOHANG);
		if (p <= 0)
			return first;
		for (size_t i = 0; i < r->n; i++) {
			if (r->w[i].pid == p && r->w[i].alive) {
				r->w[i].alive = false;
				r->w[i].status = st;
				if (first < 0)
					first = (long)i;
			}
		}
	}
}

static void describe_end(const struct load_run *r, size_t i, char *buf, size_t len)
{
	const struct worker *w = &r->w[i];
	const char *kn = kind_names[w->kind];
	int code = WIFEXITED(w->status) ? WEXITSTATUS(w->status) : -1;
	int e = -r->slots[i].err;
	if (code == WORKER_EXIT_VM && e) {
		char sz[32];
		opt_format_size(w->kind == W_ALLOC ? r->cfg->alloc_bytes : r->cfg->vm_bytes, sz,
				sizeof(sz));
		snprintf(buf, len, "%s worker %d: mmap of %s failed: %s", kn, (int)w->pid, sz,
			 strerror(e));
	} else if (code == WORKER_EXIT_IO && e) {
		snprintf(buf, len, "io worker %d: writing its file in %s failed: %s", (int)w->pid,
			 r->cfg->io_dir, strerror(e));
	} else if (code == WORKER_EXIT_NET && e) {
		snprintf(buf, len, "sink worker %d: receiving on %s failed: %s", (int)w->pid,
			 r->sink_addr, strerror(e));
	} else if (WIFEXITED(w->status)) {
		snprintf(buf, len, "%s worker %d exited with status %d", kn, (int)w->pid, code);
	} else if (WIFSIGNALED(w->status)) {
		snprintf(buf, len, "%s worker %d was killed by signal %d (%s)", kn, (int)w->pid,
			 WTERMSIG(w->status), strsignal(WTERMSIG(w->status)));
	} else {
		snprintf(buf, len, "%s worker %d ended", kn, (int)w->pid);
	}
}

static void write_start(struct jsonw *w, const struct load_run *r, const struct probe_env *env)
{
	const struct load_cfg *c = r->cfg;
	out_record_begin(w, "load");
	jw_str(w, "engine_version", RTLAB_VERSION);
	jw_str(w, "engine_arch", rl_build_arch());
	jw_arr_begin(w, "argv");
	for (int i = 0; i < env->argc; i++)
		jw_str(w, NULL, env->argv[i]);
	jw_arr_end(w);
	jw_int(w, "pid", getpid());
	jw_int(w, "pgid", r->pgid);
	jw_uint(w, "starttime", sf_starttime(getpid()));
	jw_uint(w, "start_realtime_ns", rl_now_ns(CLOCK_REALTIME));
	jw_obj_begin(w, "config");
	jw_uint(w, "cpu", c->n_cpu);
	if (c->duty_period_ns) {
		jw_obj_begin(w, "cpu_duty");
		jw_uint(w, "on_ns", c->duty_on_ns);
		jw_uint(w, "period_ns", c->duty_period_ns);
		jw_str(w, "comm", LOAD_DUTY_COMM);
		jw_obj_end(w);
	} else {
		jw_null(w, "cpu_duty");
	}
	jw_uint(w, "vm", c->n_vm);
	jw_uint(w, "vm_bytes", c->vm_bytes);
	jw_uint_or_null(w, "alloc_bytes", c->alloc_bytes);
	if (c->alloc_bytes)
		jw_uint(w, "alloc_period_ns", c->alloc_period_ns);
	else
		jw_null(w, "alloc_period_ns");
	jw_uint(w, "io", c->n_io);
	if (c->n_io) {
		jw_uint(w, "io_bytes", c->io_bytes);
		jw_str(w, "io_dir", r->io_dir);
	} else {
		jw_null(w, "io_bytes");
		jw_null(w, "io_dir");
	}
	jw_str_or_null(w, "net_to", c->net_to_s);
	if (c->net_to_s) {
		jw_uint(w, "net_kbit", c->net_kbit);
		jw_uint(w, "net_size", c->net_size);
		jw_uint(w, "net_tick_ns", load_net_tick_ns(c->net_kbit, c->net_size));
	} else {
		jw_null(w, "net_kbit");
		jw_null(w, "net_size");
		jw_null(w, "net_tick_ns");
	}
	jw_str_or_null(w, "net_sink", c->sink_s ? r->sink_addr : NULL);
	if (c->have_cpus)
		jw_cpuset(w, "cpus", &c->cpus);
	else
		jw_null(w, "cpus");
	jw_uint_or_null(w, "duration_ns", c->duration_ns);
	jw_uint_or_null(w, "snapshot_interval_ns", c->snapshot_ns);
	jw_str(w, "policy", rt_policy_names[c->policy]);
	jw_int(w, "priority", c->priority);
	jw_obj_end(w);
	if (c->n_io) {
		jw_obj_begin(w, "io_priority");
		jw_str(w, "class", "idle");
		jw_bool(w, "set", r->ioprio_err == 0);
		jw_str_or_null(w, "error", r->ioprio_err ? strerror(-r->ioprio_err) : NULL);
		jw_obj_end(w);
	} else {
		jw_null(w, "io_priority");
	}
	jw_arr_begin(w, "workers");
	for (size_t i = 0; i < r->n; i++) {
		jw_obj_begin(w, NULL);
		jw_str(w, "kind", kind_names[r->w[i].kind]);
		jw_int(w, "pid", r->w[i].pid);
		/* in effect: read back after setting (the load stops when it differs) */
		jw_str(w, "policy", rt_kernel_policy_name(r->w[i].kpolicy));
		jw_int(w, "priority", r->w[i].prio);
		jw_obj_end(w);
	}
	jw_arr_end(w);
	jw_obj_end(w);
}

/* The counts summed per kind: `loops`, then `alloc`, `io`, `net`, `sink` (null: none). */
static void write_totals(struct jsonw *w, const struct load_run *r)
{
	uint64_t loops[W_KINDS] = { 0 }, bytes[W_KINDS] = { 0 }, sent[W_KINDS] = { 0 };
	uint64_t failed[W_KINDS] = { 0 }, late[W_KINDS] = { 0 };
	int last_err = 0;
	bool has[W_KINDS] = { false };
	for (size_t i = 0; i < r->n; i++) {
		const struct load_slot *s = &r->slots[i];
		enum worker_kind k = r->w[i].kind;
		has[k] = true;
		loops[k] += s->loops;
		bytes[k] += s->bytes;
		sent[k] += s->sent;
		failed[k] += s->failed;
		late[k] += s->late;
		if (k == W_NET && s->last_err)
			last_err = s->last_err;
	}
	jw_obj_begin(w, "loops");
	for (int k = 0; k < W_KINDS; k++)
		jw_uint(w, kind_names[k], loops[k]);
	jw_obj_end(w);
	if (has[W_ALLOC]) {
		jw_obj_begin(w, "alloc");
		jw_uint(w, "rounds", loops[W_ALLOC]);
		jw_uint(w, "late", late[W_ALLOC]);
		jw_obj_end(w);
	} else {
		jw_null(w, "alloc");
	}
	if (has[W_IO]) {
		jw_obj_begin(w, "io");
		jw_uint(w, "files", loops[W_IO]);
		jw_uint(w, "bytes", bytes[W_IO]);
		jw_obj_end(w);
	} else {
		jw_null(w, "io");
	}
	if (has[W_NET]) {
		jw_obj_begin(w, "net");
		jw_uint(w, "sent", sent[W_NET]);
		jw_uint(w, "bytes", bytes[W_NET]);
		jw_uint(w, "failed", failed[W_NET]);
		jw_uint(w, "late", late[W_NET]);
		jw_str_or_null(w, "last_error", last_err ? strerror(last_err) : NULL);
		jw_obj_end(w);
	} else {
		jw_null(w, "net");
	}
	if (has[W_SINK]) {
		jw_obj_begin(w, "sink");
		jw_uint(w, "received", sent[W_SINK]);
		jw_uint(w, "bytes", bytes[W_SINK]);
		jw_uint(w, "foreign", failed[W_SINK]);
		jw_obj_end(w);
	} else {
		jw_null(w, "sink");
	}
}

static void write_snapshot(struct jsonw *w, const struct load_run *r, uint64_t elapsed)
{
	out_record_begin(w, "load_snapshot");
	jw_uint(w, "elapsed_ns", elapsed);
	write_totals(w, r);
	jw_obj_end(w);
}

static void write_result(struct jsonw *w, const struct load_run *r, const char *status,
			 int code, uint64_t elapsed, const char *error)
{
	out_record_begin(w, "load_result");
	jw_str(w, "status", status);
	jw_int(w, "exit_code", code);
	jw_uint(w, "elapsed_ns", elapsed);
	jw_uint(w, "end_realtime_ns", rl_now_ns(CLOCK_REALTIME));
	jw_arr_begin(w, "workers");
	for (size_t i = 0; i < r->n; i++) {
		const struct worker *k = &r->w[i];
		const struct load_slot *s = &r->slots[i];
		jw_obj_begin(w, NULL);
		jw_str(w, "kind", kind_names[k->kind]);
		jw_int(w, "pid", k->pid);
		jw_uint(w, "loops", s->loops);
		if (k->kind == W_IO || k->kind == W_NET || k->kind == W_SINK)
			jw_uint(w, "bytes", s->bytes);
		if (k->kind == W_NET) {
			jw_uint(w, "sent", s->sent);
			jw_uint(w, "failed", s->failed);
		}
		if (k->kind == W_SINK) {
			jw_uint(w, "received", s->sent);
			jw_uint(w, "foreign", s->failed);
		}
		if (k->kind == W_ALLOC || k->kind == W_NET ||
		    (k->kind == W_CPU && r->cfg->duty_period_ns))
			jw_uint(w, "late", s->late);
		if (k->stopped)
			jw_str(w, "end", "stopped");
		else if (WIFSIGNALED(k->status))
			jw_strf(w, "end", "signal %d", WTERMSIG(k->status));
		else
			jw_strf(w, "end", "exit %d", WEXITSTATUS(k->status));
		jw_obj_end(w);
	}
	jw_arr_end(w);
	write_totals(w, r);
	jw_str_or_null(w, "error", error);
	jw_obj_end(w);
}

/*
 * What the workers share, made before they start: the io workers' private
 * directory, the net worker's connected socket, the sink's bound socket.
 * 0 or -errno with a one-line message (what was made is undone by cleanup()).
 */
static int prepare(struct load_run *r, char *err, size_t errlen)
{
	const struct load_cfg *c = r->cfg;
	if (c->n_io) {
		int n = snprintf(r->io_dir, sizeof(r->io_dir), "%s/rtlab-load-XXXXXX", c->io_dir);
		if (n < 0 || (size_t)n >= sizeof(r->io_dir) - 16 ||
		    (size_t)n + 16 >= sizeof(r->io[0].path)) {
			r->io_dir[0] = '\0';
			snprintf(err, errlen, "--io-dir %s: the path is too long", c->io_dir);
			return -ENAMETOOLONG;
		}
		if (!mkdtemp(r->io_dir)) {
			int e = -errno;
			r->io_dir[0] = '\0';
			snprintf(err, errlen, "--io-dir %s: cannot make a directory there: %s",
				 c->io_dir, strerror(-e));
			return e;
		}
		for (unsigned i = 0; i < c->n_io; i++) {
			r->io[i].dir = r->io_dir;
			r->io[i].bytes = c->io_bytes;
			int m = snprintf(r->io[i].path, sizeof(r->io[i].path), "%.*s/io-%u",
					 (int)(sizeof(r->io[i].path) - 16), r->io_dir, i);
			(void)m; /* fits: checked above */
		}
	}
	if (c->net_to_s) {
		r->net_fd = socket(c->net_to.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (r->net_fd < 0 ||
		    connect(r->net_fd, (const struct sockaddr *)&c->net_to, c->net_to_len) != 0) {
			int e = -errno;
			snprintf(err, errlen, "--net-to %s: %s", c->net_to_s, strerror(-e));
			return e;
		}
	}
	if (c->sink_s) {
		struct sockaddr_storage a;
		socklen_t al = sizeof(a);
		r->sink_fd = socket(c->sink.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (r->sink_fd < 0 ||
		    bind(r->sink_fd, (const struct sockaddr *)&c->sink, c->sink_len) != 0 ||
		    getsockname(r->sink_fd, (struct sockaddr *)&a, &al) != 0) {
			int e = -errno;
			snprintf(err, errlen, "--net-sink %s: cannot receive there: %s", c->sink_s,
				 strerror(-e));
			return e;
		}
		udp_format_addr((const struct sockaddr *)&a, r->sink_addr, sizeof(r->sink_addr));
	}
	return 0;
}

/*
 * Set a worker's scheduling (--policy, --priority) from the parent and read back
 * what took effect. 0 or -errno. Raw system calls: they name a process, which
 * some C libraries' wrappers (musl's) do not do.
 */
static int set_worker_sched(struct worker *w, const struct load_cfg *c)
{
	struct sched_param sp = { .sched_priority = c->priority };
	if (syscall(SYS_sched_setscheduler, w->pid, rt_policy_to_kernel(c->policy), &sp) != 0)
		return -errno;
	long kp = syscall(SYS_sched_getscheduler, w->pid);
	if (kp < 0 || syscall(SYS_sched_getparam, w->pid, &sp) != 0)
		return -errno;
	w->kpolicy = (int)kp & ~SCHED_RESET_ON_FORK;
	w->prio = sp.sched_priority;
	return 0;
}

static bool sched_in_effect(const struct worker *w, const struct load_cfg *c)
{
	return w->kpolicy == rt_policy_to_kernel(c->policy) && w->prio == c->priority;
}

/* Open the gate: every worker waiting there starts its work (idempotent). */
static void release_workers(struct load_run *r)
{
	if (r->gate[1] >= 0)
		close(r->gate[1]);
	r->gate[1] = -1;
}

/* Fork the workers with the --cpus affinity, each with its scheduling, all waiting at
 * the gate; 0 or -errno (those started are stopped). */
static int start_workers(struct load_run *r, size_t total, char *err, size_t errlen)
{
	const struct load_cfg *c = r->cfg;
	if (c->have_cpus) {
		if (sched_setaffinity(0, sizeof(c->cpus), &c->cpus) != 0) {
			int e = -errno;
			char l[256];
			opt_format_cpulist(&c->cpus, l, sizeof(l));
			snprintf(err, errlen, "--cpus %s: cannot run there: %s (is it in this cpuset?)",
				 l, strerror(-e));
			return e;
		}
		/* the workers inherit it, and so does the parent (it only waits) and its
		 * lifeline thread, started after: nothing of the load runs elsewhere */
	}
	/* the kinds in order, with their counts */
	const size_t count[W_KINDS] = { c->n_cpu, c->n_vm, c->alloc_bytes ? 1 : 0, c->n_io,
					c->net_to_s ? 1 : 0, c->sink_s ? 1 : 0 };
	if (pipe2(r->gate, O_CLOEXEC) != 0) {
		int e = -errno;
		r->gate[0] = r->gate[1] = -1;
		snprintf(err, errlen, "cannot make the workers' start gate: pipe: %s", strerror(-e));
		return e;
	}
	pid_t parent = getpid();
	int e = 0;
	size_t i = 0;
	for (int k = 0; k < W_KINDS && !e; k++) {
		for (size_t j = 0; j < count[k]; j++, i++) {
			pid_t p = fork();
			if (p == 0)
				worker_run(r, (enum worker_kind)k, i, j, parent);
			if (p < 0) {
				e = -errno;
				snprintf(err, errlen, "cannot start worker %zu of %zu: fork: %s", i + 1,
					 total, strerror(-e));
				break;
			}
			r->w[i] = (struct worker){ .pid = p, .kind = (enum worker_kind)k,
						   .alive = true };
			r->n = i + 1;
			/* its scheduling, while it waits at the gate: it works with nothing else */
			e = set_worker_sched(&r->w[i], c);
			if (e || !sched_in_effect(&r->w[i], c)) {
				r->sched_err = e;
				r->sched_bad = true;
				e = e ? e : -EPERM;
				break;
			}
			if (k == W_IO) {
				/* idle I/O priority, as stress-ng's --ionice-class idle; a kernel
				 * without it (no CONFIG_BLOCK) or a refusal is reported, not fatal */
				long rc = syscall(SYS_ioprio_set, LOAD_IOPRIO_WHO_PROCESS, (int)p,
						  LOAD_IOPRIO_CLASS_IDLE << LOAD_IOPRIO_CLASS_SHIFT);
				if (rc != 0 && r->ioprio_err == 0)
					r->ioprio_err = -errno;
			}
		}
	}
	close(r->gate[0]);
	r->gate[0] = -1;
	if (e) {
		stop_workers(r);
		release_workers(r);
	}
	/* the workers hold their sockets now */
	if (r->net_fd >= 0)
		close(r->net_fd);
	if (r->sink_fd >= 0)
		close(r->sink_fd);
	r->net_fd = r->sink_fd = -1;
	return e;
}

/*
 * Wait for the end: the duration, a stop signal, or a worker that died; print a
 * snapshot every --snapshot-interval meanwhile. Returns 0 (duration), 1 (stopped
 * by a signal) or 2 (a worker died: *dead is its index).
 */
static int wait_end(struct load_run *r, const sigset_t *set, uint64_t start, long *dead,
		    struct jsonw *w)
{
	uint64_t end = r->cfg->duration_ns ? start + r->cfg->duration_ns : 0;
	uint64_t snap = r->cfg->snapshot_ns ? start + r->cfg->snapshot_ns : 0;
	for (;;) {
		int sig;
		uint64_t now = rl_now_ns(CLOCK_MONOTONIC);
		if (end && now >= end)
			return 0;
		if (snap && now >= snap) {
			jw_reset(w);
			write_snapshot(w, r, now - start);
			if (jw_emit(w, STDOUT_FILENO) != 0) {
				/* nobody reads them any more: no more snapshots */
			}
			snap += r->cfg->snapshot_ns;
			if (snap <= now)
				snap = now + r->cfg->snapshot_ns;
			continue;
		}
		uint64_t wake = end;
		if (snap && (!wake || snap < wake))
			wake = snap;
		if (wake) {
			struct timespec ts = rl_ns_to_ts(wake - now);
			sig = sigtimedwait(set, NULL, &ts);
		} else {
			sig = sigwaitinfo(set, NULL);
		}
		if (sig < 0)
			continue; /* EAGAIN (timeout: checked above) or EINTR */
		if (sig != SIGCHLD)
			return 1;
		*dead = reap_dead(r);
		if (*dead >= 0) {
			const struct worker *k = &r->w[*dead];
			/* a SIGTERM/SIGINT/SIGHUP sent to the whole group reached the worker first
			 * (an io worker removes its file and exits 0 on SIGTERM) */
			if (WIFSIGNALED(k->status) && (WTERMSIG(k->status) == SIGTERM ||
						      WTERMSIG(k->status) == SIGINT ||
						      WTERMSIG(k->status) == SIGHUP))
				return 1;
			if (k->kind == W_IO && WIFEXITED(k->status) && WEXITSTATUS(k->status) == 0)
				return 1;
			return 2;
		}
	}
}

int load_main(int argc, char **argv, const struct probe_env *env, bool lifeline)
{
	struct load_cfg cfg;
	char err[768] = "";
	int r = load_parse(argc, argv, env->online, &cfg, err, sizeof(err));
	if (r == OPTS_HELP) {
		load_help(stdout);
		return RL_EXIT_OK;
	}
	if (r) {
		fprintf(stderr, "rtlab-probe load: %s\n", err);
		return RL_EXIT_USAGE;
	}

	/* Stop signals and SIGCHLD are taken by sigwaitinfo only (the workers unblock them). */
	sigset_t set;
	procgroup_wait_signals(&set);

	/* The load's own process group, which the workers join: one kill(-pgid) ends all. */
	if (getpgrp() != getpid() && setpgid(0, 0) != 0) {
		/* only a session leader cannot, and it leads its group already */
	}
	struct load_run run = { .cfg = &cfg, .pgid = getpgrp(), .net_fd = -1, .sink_fd = -1,
				.gate = { -1, -1 } };
	size_t total = (size_t)cfg.n_cpu + cfg.n_vm + (cfg.alloc_bytes ? 1 : 0) + cfg.n_io +
		       (cfg.net_to_s ? 1 : 0) + (cfg.sink_s ? 1 : 0);
	run.w = calloc(total, sizeof(*run.w));
	run.io = calloc(cfg.n_io ? cfg.n_io : 1, sizeof(*run.io));
	run.slots_len = (total * sizeof(struct load_slot) + 4095) & ~(size_t)4095;
	run.slots = mmap(NULL, run.slots_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
			 -1, 0);
	if (!run.w || !run.io || run.slots == MAP_FAILED) {
		fprintf(stderr, "rtlab-probe load: out of memory\n");
		free(run.w);
		free(run.io);
		if (run.slots != MAP_FAILED)
			munmap(run.slots, run.slots_len);
		return RL_EXIT_ERROR;
	}

	int code = RL_EXIT_ERROR;
	struct jsonw w;
	jw_init(&w);
	uint64_t start = rl_now_ns(CLOCK_MONOTONIC);
	if (prepare(&run, err, sizeof(err)) != 0 ||
	    start_workers(&run, total, err, sizeof(err)) != 0) {
		if (run.sched_bad) /* refused: no worker has worked, none is left */
			code = load_sched_refusal(&cfg, run.sched_err, err, sizeof(err));
		fprintf(stderr, "rtlab-probe load: %s\n", err);
		goto out;
	}
	if (lifeline && (r = lifeline_start()) != 0) {
		stop_workers(&run);
		fprintf(stderr, "rtlab-probe load: cannot start the stdin lifeline: %s\n",
			strerror(-r));
		goto out;
	}
	write_start(&w, &run, env);
	int out_err = jw_emit(&w, STDOUT_FILENO);
	/* the record is out (a worker at an RT policy on the parent's CPU could hold it
	 * back): the workers may work now */
	release_workers(&run);

	long dead = -1;
	int end = wait_end(&run, &set, start, &dead, &w);
	stop_workers(&run);
	cleanup(&run);
	const char *status = "completed";
	char why[768] = "";
	code = RL_EXIT_OK;
	if (end == 1) {
		status = "interrupted";
		code = RL_EXIT_INTERRUPTED;
	} else if (end == 2) {
		status = "error";
		code = RL_EXIT_ERROR;
		describe_end(&run, (size_t)dead, why, sizeof(why));
		fprintf(stderr, "rtlab-probe load: %s\n", why);
	}
	jw_reset(&w);
	write_result(&w, &run, status, code, rl_now_ns(CLOCK_MONOTONIC) - start,
		     why[0] ? why : NULL);
	int e = jw_emit(&w, STDOUT_FILENO);
	if ((e || out_err) && code == RL_EXIT_OK) {
		fprintf(stderr, "rtlab-probe load: writing the output failed: %s\n",
			strerror(-(e ? e : out_err)));
		code = RL_EXIT_ERROR;
	}
out:
	release_workers(&run);
	cleanup(&run);
	jw_free(&w);
	munmap(run.slots, run.slots_len);
	free(run.io);
	free(run.w);
	return code;
}
