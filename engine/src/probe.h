/* SPDX-License-Identifier: MIT */
/*
 * The probe interface. A probe is one file that defines one `const struct probe_ops`,
 * listed once in probes.def. main() looks the probe up, parses its options from the
 * declarative table and calls init; the lifecycle (lifecycle.h) then runs it: the
 * output, the threads and their set-up, the real-time check, the header, the
 * reporter, the wait and the outcome are the lifecycle's; what the probe measures,
 * and what it adds to the header, the snapshots and the outcome, come from the
 * functions below. Only main() exits.
 */
#ifndef RTLAB_PROBE_H
#define RTLAB_PROBE_H

#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "channel.h"
#include "common.h"
#include "jsonw.h"
#include "opts.h"
#include "reporter.h"
#include "rt.h"

struct probe_env {
	int argc;		/* the whole command line, for the header */
	char *const *argv;
	const cpu_set_t *online;
};

/* The options of a run that every probe has (or lacks: the neutral value), frozen by init. */
struct run_opts {
	const char *output;	/* --output; NULL: stdout */
	const char *samples;	/* --samples; NULL: none */
	bool mlock;		/* --mlock */
	int64_t dma_us;		/* --dma-latency; -1: not touched */
	int housekeeping;	/* the reporter's CPU; -1: not pinned */
	uint64_t snapshot_ns;	/* --snapshot-interval */
	bool trace;		/* open tracefs: a threshold stops the trace (probe_plan.trace) */
	bool allow_non_rt;	/* measure even when the real-time set-up failed */
};

/* A thread of the probe, described by prepare(). */
struct probe_thread {
	struct rt_thread rt;	/* role, CPU and scheduling asked for; read back */
	void *arg;		/* the probe's own per-thread object */
	/* runs until the probe's stop() ends it; the other threads end the run when all
	 * of them have returned from measure() */
	bool until_stopped;
	/* not a measuring thread: keeps its creator's CPUs and scheduling, is neither in
	 * the header nor checked */
	bool helper;
};

/* What prepare() declares for the run. */
struct probe_plan {
	struct channel *const *chans;	/* reported in snapshots and the result, in order */
	size_t n_chans;
	atomic_bool *stop;		/* the probe's stop flag, set on SIGINT/SIGTERM */
	struct probe_thread *threads;	/* from probe_plan_threads() */
	size_t n_threads;
	/* set by the lifecycle before prepare: the open tracefs of run_opts.trace, or NULL */
	const struct rt_trace *trace;
};

/* n zeroed threads (cpu -1) for prepare() to describe; the run owns them. NULL: no memory. */
struct probe_thread *probe_plan_threads(struct probe_plan *plan, size_t n);

/* Why a run is not real-time, for probe_ops.explain (what is 0 or NULL is fine). */
struct rt_verdict {
	const struct probe_thread *thread;	/* the first that does not run as it asked */
	int mlock_err;
	int dma_err;
};

/*
 * The usual words for a measuring thread that does not run as it asked: "cannot pin
 * a measuring thread to CPU N (why): ..." or "cannot set policy P priority N on CPU N
 * (why): ...", for an explain() that uses them.
 */
void probe_explain_thread(const struct rt_thread *t, char *buf, size_t len);

/* When the measurement starts (lifecycle: now + 20 ms, so no thread misses it). */
struct probe_start {
	uint64_t realtime_ns, monotonic_ns;
	int out_fd;		/* the output, for a probe's own log records */
};

/* The parts of the header's `effective` object that a probe adds. */
enum effective_part {
	EFFECTIVE_AFTER_THREADS,	/* after "threads" */
	EFFECTIVE_END,			/* after "tracing", last */
};

struct probe_ops {
	const char *name;
	const char *summary;	/* one line, for `rtlab-probe list` */
	const char *usage;	/* short description printed above the options */
	const struct opt_def *opts;
	size_t n_opts;
	/* NULL, or why this build/platform cannot run the probe (exit 4). */
	const char *unavailable;
	/*
	 * NULL, or the name of an option that a first bare argument sets:
	 * `rtlab-probe udp ping ...` is `rtlab-probe udp --mode ping ...`.
	 */
	const char *positional;
	size_t stack;		/* stack size of the probe's threads */

	/*
	 * Freeze the parsed values into the probe's const configuration, allocate its
	 * context, and point *run at the shared options in it. Returns 0, or -EINVAL with a
	 * one-line message naming the option (usage error, exit 2), or another -errno.
	 */
	int (*init)(void **ctx, const struct run_opts **run, const struct opt_value *vals,
		    const struct probe_env *env, char *err, size_t errlen);
	void (*fini)(void *ctx);

	/* ---- the run, in the lifecycle's order; NULL where marked optional ---- */

	/* Set up what is the probe's (sockets, counters, channels) and describe its threads
	 * and channels in plan. 0, or an exit code after one line on stderr. */
	int (*prepare)(void *ctx, struct probe_plan *plan);
	/* Optional. In each thread, after its set-up, before it waits for the start. */
	void (*thread_ready)(void *ctx, struct probe_thread *t);
	/* Optional. One line: why the run is not real-time and how to fix it (the probe's
	 * own words; default: lifecycle.c). */
	void (*explain)(const void *ctx, const struct rt_verdict *v, char *buf, size_t len);
	/* The start is decided (the threads are still waiting): note it. 0, or an exit code
	 * after one line on stderr (the run is abandoned). */
	int (*start)(void *ctx, const struct probe_start *s);
	/* The members of the header's `config` object. */
	void (*write_config)(const void *ctx, struct jsonw *w);
	/* Optional. The probe's members of the header's `effective` object. */
	void (*write_effective)(const void *ctx, struct jsonw *w, enum effective_part part);
	/* Optional. The probe's `log` records after the header. */
	void (*write_logs)(const void *ctx, struct jsonw *w, int fd);
	/* Optional. The probe's members of every snapshot (final false) and of the result
	 * (final true); on the reporter thread. */
	void (*write_extra)(void *ctx, struct jsonw *w, bool final);
	/* In each thread, once released: the measurement. */
	void (*measure)(void *ctx, struct probe_thread *t);
	/* Optional. Wait instead of the lifecycle until finished(arg) or a signal (which
	 * sets the stop flag); returns true when interrupted. */
	bool (*wait)(void *ctx, bool (*finished)(const void *arg), const void *arg);
	/* Optional. End the threads that run until stopped (the others have returned). */
	void (*stop)(void *ctx);
	/* Optional. What the run came to, after every thread was joined: fill o (completed,
	 * exit 0 on entry; err: room for a message). Default: interrupted or completed. */
	void (*outcome)(void *ctx, bool interrupted, struct reporter_outcome *o, char *err,
			size_t errlen);
};

/* The probes of probes.def, and the NULL-terminated table of them (probe.c). */
#define PROBE(name) extern const struct probe_ops name##_probe;
#include "probes.def"
#undef PROBE
extern const struct probe_ops *const probe_table[];

const struct probe_ops *probe_find(const char *name);

/* ---- what the probes' init functions share (probe_opts.c) ---- */

/*
 * --priority: the value given (v), which must be in the policy's range (else -EINVAL
 * with a one-line message), else rt_default for fifo/rr and the policy's minimum (0)
 * for the others.
 */
int probe_priority(enum rt_policy policy, const struct opt_value *v, int rt_default, int *out,
		   char *err, size_t errlen) RL_WUR;

/*
 * --duration and --loops of a periodic probe (timer, switch): at most one of them, and
 * a duration of at least one --interval (else no period would be measured). Sets
 * *duration_ns and *loops (0: not given). Returns 0 or -EINVAL with a one-line message.
 */
int probe_run_length(const struct opt_value *duration, const struct opt_value *loops,
		     uint64_t interval_ns, uint64_t *duration_ns, uint64_t *loops_out,
		     char *err, size_t errlen) RL_WUR;

/*
 * --housekeeping (the reporter thread's CPU): the given CPU, which must be online,
 * else the first online CPU not in `used`, else -1 (the reporter is not pinned).
 * With `used` NULL nothing is chosen automatically. Returns 0 or -EINVAL with a
 * one-line message.
 */
int probe_housekeeping(const struct opt_value *v, const cpu_set_t *online,
		       const cpu_set_t *used, int *out, char *err, size_t errlen) RL_WUR;

#endif
