/* SPDX-License-Identifier: MIT */
/*
 * `rtlab-probe load` (load.h): stress --cpu/--vm for boards without stress-ng.
 * The parent waits in sigwaitinfo/sigtimedwait and does nothing else; the
 * workers are forked processes that only compute or fault pages, count their
 * loops in a shared page (one cache line each, read by the parent after it has
 * reaped them), and end with _exit (each worker is its own process).
 */
#include "load.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "jsonw.h"
#include "lifeline.h"
#include "opts.h"
#include "output.h"
#include "procgroup.h"
#include "sysfile.h"
#include "version.h"

#define LOAD_VM_MIN 4096
#define LOAD_VM_MAX ((int64_t)(sizeof(void *) == 8 ? (1LL << 40) : (1LL << 31)))
#define LOAD_NEWTON_STEPS 6
#define WORKER_EXIT_VM 3	/* a vm worker's mmap failed (errno in its slot) */

enum { L_CPU, L_VM, L_VM_BYTES, L_CPUS, L_DURATION, L_COUNT };

static const struct opt_def load_opts[L_COUNT] = {
	[L_CPU] = { "cpu", OPT_INT, "N", "workers spinning on square roots (stress --cpu)", 0,
		    LOAD_MAX_WORKERS, NULL, "0", NULL },
	[L_VM] = { "vm", OPT_INT, "M",
		   "workers that map --vm-bytes, write every page, unmap, repeat (stress --vm)", 0,
		   LOAD_MAX_WORKERS, NULL, "0", NULL },
	[L_VM_BYTES] = { "vm-bytes", OPT_SIZE, NULL, "memory a vm worker maps per loop",
			 LOAD_VM_MIN, LOAD_VM_MAX, NULL, "256M", NULL },
	[L_CPUS] = { "cpus", OPT_CPULIST, NULL, "CPUs the workers may run on (their affinity)", 0,
		     0, NULL, NULL, "those of the command" },
	[L_DURATION] = { "duration", OPT_DURATION, NULL,
			 "stop after this time; 0s: until SIGINT/SIGTERM (or stdin EOF with --stdin-lifeline)",
			 0, (int64_t)(1000 * 3600 * NS_PER_SEC), NULL, "0s", NULL },
};

enum worker_kind { W_CPU, W_VM };
static const char *const kind_names[] = { "cpu", "vm" };

/* One worker's counters, in a MAP_SHARED page: written by the worker only. */
struct load_slot {
	_Alignas(RL_CACHELINE) volatile uint64_t loops;
	volatile int err;	/* vm: -errno of the failed mmap */
	volatile double sink;	/* cpu: the last loop's result */
};

struct worker {
	pid_t pid;		/* 0: not started */
	enum worker_kind kind;
	bool alive;
	int status;		/* waitpid status once reaped */
	bool stopped;		/* killed by the parent */
};

struct load_run {
	const struct load_cfg *cfg;
	struct worker *w;
	size_t n;		/* workers started */
	struct load_slot *slots;
	size_t slots_len;
	pid_t pgid;
};

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
	cfg->vm_bytes = (uint64_t)v[L_VM_BYTES].i;
	cfg->have_cpus = v[L_CPUS].set;
	if (cfg->have_cpus)
		cfg->cpus = v[L_CPUS].cpus;
	cfg->duration_ns = (uint64_t)v[L_DURATION].i;
	if (cfg->n_cpu == 0 && cfg->n_vm == 0) {
		snprintf(err, errlen, "give --cpu N and/or --vm M (at least one worker); see --help");
		return -EINVAL;
	}
	if (!v[L_VM].given && v[L_VM_BYTES].given) {
		snprintf(err, errlen, "--vm-bytes: only with --vm M");
		return -EINVAL;
	}
	return 0;
}

void load_help(FILE *f)
{
	fprintf(f,
		"usage: rtlab-probe [--tee FILE] [--stdin-lifeline] load [OPTIONS]\n\n"
		"A minimal CPU and memory load for targets without stress-ng, like\n"
		"`stress --cpu N --vm M --vm-bytes SIZE`. It measures nothing. The workers are\n"
		"processes in the load's own process group; JSON lines on stdout: a `load`\n"
		"record when they run, a `load_result` record with their loop counts when\n"
		"they have been stopped (see docs/engine.md).\n\noptions:\n");
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

/* The body of a worker process; never returns. */
static void worker_run(enum worker_kind kind, size_t index, struct load_slot *slot,
		       const struct load_cfg *c, pid_t parent)
{
	/* die with the parent, even if it is killed with SIGKILL */
	if (!procgroup_child_tie(parent))
		_exit(0);
	procgroup_child_signals(); /* SIGTERM to the group ends a worker */
	int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (nul >= 0) {
		/* the worker holds neither the host's stdin (lifeline) nor its stdout */
		dup2(nul, STDIN_FILENO);
		dup2(nul, STDOUT_FILENO);
		close(nul);
	}
	if (kind == W_CPU) {
		const double seed = (double)(index % 8);
		for (;;) {
			/* the sum goes to the shared page: the work cannot be optimised away */
			slot->sink = load_cpu_round(seed);
			slot->loops = slot->loops + 1;
		}
	}
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

/* Kill every live worker (SIGKILL: they hold nothing to clean up) and reap it. */
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
	if (WIFEXITED(w->status) && WEXITSTATUS(w->status) == WORKER_EXIT_VM && r->slots[i].err) {
		char sz[32];
		opt_format_size(r->cfg->vm_bytes, sz, sizeof(sz));
		snprintf(buf, len, "%s worker %d: mmap of %s failed: %s", kind_names[w->kind],
			 (int)w->pid, sz, strerror(-r->slots[i].err));
	} else if (WIFEXITED(w->status)) {
		snprintf(buf, len, "%s worker %d exited with status %d", kind_names[w->kind],
			 (int)w->pid, WEXITSTATUS(w->status));
	} else if (WIFSIGNALED(w->status)) {
		snprintf(buf, len, "%s worker %d was killed by signal %d (%s)", kind_names[w->kind],
			 (int)w->pid, WTERMSIG(w->status), strsignal(WTERMSIG(w->status)));
	} else {
		snprintf(buf, len, "%s worker %d ended", kind_names[w->kind], (int)w->pid);
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
	jw_uint(w, "vm", c->n_vm);
	jw_uint(w, "vm_bytes", c->vm_bytes);
	if (c->have_cpus)
		jw_cpuset(w, "cpus", &c->cpus);
	else
		jw_null(w, "cpus");
	jw_uint_or_null(w, "duration_ns", c->duration_ns);
	jw_obj_end(w);
	jw_arr_begin(w, "workers");
	for (size_t i = 0; i < r->n; i++) {
		jw_obj_begin(w, NULL);
		jw_str(w, "kind", kind_names[r->w[i].kind]);
		jw_int(w, "pid", r->w[i].pid);
		jw_obj_end(w);
	}
	jw_arr_end(w);
	jw_obj_end(w);
}

static void write_result(struct jsonw *w, const struct load_run *r, const char *status,
			 int code, uint64_t elapsed, const char *error)
{
	uint64_t sum[2] = { 0, 0 };
	out_record_begin(w, "load_result");
	jw_str(w, "status", status);
	jw_int(w, "exit_code", code);
	jw_uint(w, "elapsed_ns", elapsed);
	jw_uint(w, "end_realtime_ns", rl_now_ns(CLOCK_REALTIME));
	jw_arr_begin(w, "workers");
	for (size_t i = 0; i < r->n; i++) {
		const struct worker *k = &r->w[i];
		uint64_t loops = r->slots[i].loops;
		sum[k->kind] += loops;
		jw_obj_begin(w, NULL);
		jw_str(w, "kind", kind_names[k->kind]);
		jw_int(w, "pid", k->pid);
		jw_uint(w, "loops", loops);
		if (k->stopped)
			jw_str(w, "end", "stopped");
		else if (WIFSIGNALED(k->status))
			jw_strf(w, "end", "signal %d", WTERMSIG(k->status));
		else
			jw_strf(w, "end", "exit %d", WEXITSTATUS(k->status));
		jw_obj_end(w);
	}
	jw_arr_end(w);
	jw_obj_begin(w, "loops");
	jw_uint(w, "cpu", sum[W_CPU]);
	jw_uint(w, "vm", sum[W_VM]);
	jw_obj_end(w);
	jw_str_or_null(w, "error", error);
	jw_obj_end(w);
}

/* Fork the workers with the --cpus affinity; 0 or -errno (those started are stopped). */
static int start_workers(struct load_run *r, char *err, size_t errlen)
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
	pid_t parent = getpid();
	int e = 0;
	size_t total = (size_t)c->n_cpu + c->n_vm;
	for (size_t i = 0; i < total; i++) {
		enum worker_kind kind = i < c->n_cpu ? W_CPU : W_VM;
		pid_t p = fork();
		if (p == 0)
			worker_run(kind, i, &r->slots[i], c, parent);
		if (p < 0) {
			e = -errno;
			snprintf(err, errlen, "cannot start worker %zu of %zu: fork: %s", i + 1, total,
				 strerror(-e));
			break;
		}
		r->w[i] = (struct worker){ .pid = p, .kind = kind, .alive = true };
		r->n = i + 1;
	}
	if (e)
		stop_workers(r);
	return e;
}

/*
 * Wait for the end: the duration, a stop signal, or a worker that died. Returns
 * 0 (duration), 1 (stopped by a signal) or 2 (a worker died: *dead is its index).
 */
static int wait_end(struct load_run *r, const sigset_t *set, uint64_t start, long *dead)
{
	uint64_t end = r->cfg->duration_ns ? start + r->cfg->duration_ns : 0;
	for (;;) {
		int sig;
		if (end) {
			uint64_t now = rl_now_ns(CLOCK_MONOTONIC);
			if (now >= end)
				return 0;
			struct timespec ts = rl_ns_to_ts(end - now);
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
			const struct worker *w = &r->w[*dead];
			/* a SIGTERM/SIGINT/SIGHUP sent to the whole group reached the worker first */
			if (WIFSIGNALED(w->status) && (WTERMSIG(w->status) == SIGTERM ||
						      WTERMSIG(w->status) == SIGINT ||
						      WTERMSIG(w->status) == SIGHUP))
				return 1;
			return 2;
		}
	}
}

int load_main(int argc, char **argv, const struct probe_env *env, bool lifeline)
{
	struct load_cfg cfg;
	char err[512] = "";
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
	struct load_run run = { .cfg = &cfg, .pgid = getpgrp() };
	size_t total = (size_t)cfg.n_cpu + cfg.n_vm;
	run.w = calloc(total, sizeof(*run.w));
	run.slots_len = (total * sizeof(struct load_slot) + 4095) & ~(size_t)4095;
	run.slots = mmap(NULL, run.slots_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
			 -1, 0);
	if (!run.w || run.slots == MAP_FAILED) {
		fprintf(stderr, "rtlab-probe load: out of memory\n");
		free(run.w);
		if (run.slots != MAP_FAILED)
			munmap(run.slots, run.slots_len);
		return RL_EXIT_ERROR;
	}

	int code = RL_EXIT_ERROR;
	struct jsonw w;
	jw_init(&w);
	uint64_t start = rl_now_ns(CLOCK_MONOTONIC);
	if (start_workers(&run, err, sizeof(err)) != 0) {
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

	long dead = -1;
	int end = wait_end(&run, &set, start, &dead);
	stop_workers(&run);
	const char *status = "completed";
	char why[512] = "";
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
	write_result(&w, &run, status, code, rl_now_ns(CLOCK_MONOTONIC) - start,
		     why[0] ? why : NULL);
	int e = jw_emit(&w, STDOUT_FILENO);
	if ((e || out_err) && code == RL_EXIT_OK) {
		fprintf(stderr, "rtlab-probe load: writing the output failed: %s\n",
			strerror(-(e ? e : out_err)));
		code = RL_EXIT_ERROR;
	}
out:
	jw_free(&w);
	munmap(run.slots, run.slots_len);
	free(run.w);
	return code;
}
