/* SPDX-License-Identifier: MIT */
/*
 * The probe interface. A probe is one file that defines one `const struct probe_ops`,
 * listed once in probes.def. main() looks the probe up, parses its options (the probe's
 * own table merged with the shared options it takes: probe_opts.c) and calls init with
 * the shared ones already in a struct run_opts; the lifecycle (lifecycle.h) then runs it: the
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
#include "trace_rec.h"

struct probe_env {
	int argc;		/* the whole command line, for the header */
	char *const *argv;
	const cpu_set_t *online;
};

/* The options every probe may share, declared once (probe_opts.c); a probe takes a set of
 * them (probe_ops.shared) and reads their values in its struct run_opts. */
enum run_opt {
	RUN_MLOCK, RUN_DMA, RUN_HOUSEKEEPING, RUN_SNAPSHOT, RUN_WINDOW, RUN_THRESHOLD,
	RUN_SAMPLES, RUN_OUTPUT, RUN_ALLOW_NON_RT,
	/* the trace recorder beside the measurement (trace_rec.h) */
	RUN_TRACE_DIR, RUN_TRACE_EVENTS, RUN_TRACE_BUFFER_KB, RUN_TRACE_READER_CPU,
	RUN_TRACE_LIMIT_MB, RUN_TRACE_INSTANCE, RUN_TRACE_TRACER, RUN_TRACE_JOURNAL_DIR,
	/* its flight recorder (trace_flight.h) */
	RUN_TRACE_MODE, RUN_TRACE_TRIGGER, RUN_TRACE_BEFORE, RUN_TRACE_AFTER, RUN_TRACE_RATE,
	RUN_TRACE_KEEP_MB,
	RUN_OPT_COUNT
};
#define RUN_OPT(name) (1u << RUN_##name)
/* The trace recorder's options (a probe takes all or none of them) */
#define RUN_OPTS_TRACE                                                                       \
	(RUN_OPT(TRACE_DIR) | RUN_OPT(TRACE_EVENTS) | RUN_OPT(TRACE_BUFFER_KB) |              \
	 RUN_OPT(TRACE_READER_CPU) | RUN_OPT(TRACE_LIMIT_MB) | RUN_OPT(TRACE_INSTANCE) |      \
	 RUN_OPT(TRACE_TRACER) | RUN_OPT(TRACE_JOURNAL_DIR) | RUN_OPT(TRACE_MODE) |             \
	 RUN_OPT(TRACE_TRIGGER) | RUN_OPT(TRACE_BEFORE) | RUN_OPT(TRACE_AFTER) |              \
	 RUN_OPT(TRACE_RATE) | RUN_OPT(TRACE_KEEP_MB))
/* The set that every measuring probe takes */
#define RUN_OPTS_COMMON (RUN_OPT(MLOCK) | RUN_OPT(SNAPSHOT) | RUN_OPT(OUTPUT) | RUN_OPT(ALLOW_NON_RT) | \
			 RUN_OPTS_TRACE)

/* The shared options of a run, parsed by the core (the neutral value where the probe does
 * not take one); frozen before the probe's init, but for housekeeping (after it). */
struct run_opts {
	const char *output;	/* --output; NULL: stdout */
	const char *samples;	/* --samples; NULL: none */
	bool mlock;		/* --mlock */
	int64_t dma_us;		/* --dma-latency; -1: not touched */
	int housekeeping;	/* the reporter's CPU; -1: not pinned */
	uint64_t snapshot_ns;	/* --snapshot-interval */
	uint64_t window_ns;	/* --window */
	uint64_t threshold_ns;	/* --stop-threshold; 0: none */
	bool trace;		/* open tracefs: --stop-threshold stops the trace (probe_plan.trace) */
	bool allow_non_rt;	/* measure even when the real-time set-up failed */
	struct trace_opts rec;	/* --trace-*: the trace recorder; rec.dir NULL: none */
};

/* What init receives. */
struct probe_args {
	const struct opt_value *vals;	/* the probe's own options, parallel to probe_ops.opts */
	const struct run_opts *run;	/* the shared options; lives as long as the probe's context */
	const struct probe_env *env;
	char *err;			/* room for a one-line message */
	size_t errlen;
	/*
	 * Set by init: the CPUs its measuring threads are pinned to. Without --housekeeping
	 * the reporter takes the first online CPU outside them; when init leaves it empty
	 * (nothing pinned), the reporter is not pinned.
	 */
	cpu_set_t used;
};

/* A thread of the probe, described by prepare(). */
struct probe_thread {
	struct rt_thread rt;	/* role, CPU and scheduling asked for; read back */
	void *arg;		/* the probe's own per-thread object */
	struct channel *chan;	/* NULL, or the channel that records the thread's tid once set up */
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
	/* NULL, or the probe's stop threshold: a claimed one is the run's outcome */
	struct probe_threshold *threshold;
};

/* A stop threshold crossed: the first channel to claim it is the run's outcome. */
struct probe_threshold {
	atomic_int taken;
	size_t chan;
	uint64_t value_ns, at_ns;
};

/* Channel chan saw value_ns at at_ns into the run; true for the first claim only. */
bool probe_threshold_claim(struct probe_threshold *t, size_t chan, uint64_t value_ns,
			   uint64_t at_ns);

/* n zeroed threads (cpu -1) for prepare() to describe; the run owns them. NULL: no memory. */
struct probe_thread *probe_plan_threads(struct probe_plan *plan, size_t n);

/* Thread t of the plan: on cpu (-1: unpinned), with policy and priority; its role is
 * printf-like. */
void probe_thread_place(struct probe_thread *t, int cpu, enum rt_policy policy, int priority,
			const char *role_fmt, ...) RL_PRINTF(5, 6);

/* prepare()'s channels (n of them, reported in order), its stop flag and its stop
 * threshold (NULL: none). */
void probe_plan_channels(struct probe_plan *plan, struct channel *const *chans, size_t n,
			 atomic_bool *stop, struct probe_threshold *threshold);

/* Why a run is not real-time (what is 0 or NULL is fine). */
struct rt_verdict {
	const struct probe_thread *thread;	/* the first that does not run as it asked */
	int mlock_err;
	int dma_err;
};

/*
 * One line: why the run is not real-time and how to fix it, one wording per advice
 * for every probe (the thread first, then mlockall, then /dev/cpu_dma_latency).
 */
void probe_explain(const struct rt_verdict *v, char *buf, size_t len);

/* What a probe adds to the end of its run (probe_ops.ended). */
struct probe_end {
	bool interrupted;	/* SIGINT/SIGTERM; the probe may set it (a signal meanwhile) */
	char *err;		/* the probe names a failure of its threads here: an "error" */
	size_t errlen;
	bool check_failed;	/* the probe's own checks failed: "check_failed", exit 3 */
};

/* When the measurement starts (lifecycle: now + 20 ms, so no thread misses it). */
struct probe_start {
	uint64_t realtime_ns, monotonic_ns;
	int out_fd;		/* the output, for a probe's own log records */
};

struct probe_ops {
	const char *name;
	const char *summary;	/* one line, for `rtlab-probe list` */
	const char *usage;	/* short description printed above the options */
	const struct opt_def *opts;	/* the probe's own options */
	size_t n_opts;
	/* the shared options it takes (RUN_OPT bits), listed in --help before opts[shared_at] */
	unsigned shared;
	size_t shared_at;
	const char *housekeeping_help;	/* RUN_HOUSEKEEPING: which CPU the reporter takes without it */
	/* NULL, or why this build/platform cannot run the probe (exit 4). */
	const char *unavailable;
	/*
	 * NULL, or the name of an option that a first bare argument sets:
	 * `rtlab-probe udp ping ...` is `rtlab-probe udp --mode ping ...`.
	 */
	const char *positional;
	size_t stack;		/* stack size of the probe's threads; 0: PROBE_STACK */

	/* the size of the probe's context, which the core allocates zeroed and cache-line
	 * aligned before init and frees after fini */
	size_t ctx_size;

	/*
	 * Freeze the probe's own option values into its const configuration in its context
	 * (zeroed; keeping args->run), and say which CPUs it pins (args->used). Returns 0, or
	 * -EINVAL with a one-line message naming the option in args->err (usage error, exit
	 * 2), or another -errno; on an error the core frees the context without fini.
	 */
	int (*init)(void *ctx, struct probe_args *args);
	/* After a successful init, at the end: release what the probe acquired (its channels,
	 * descriptors, buffers); the core then frees the context. */
	void (*fini)(void *ctx);

	/* ---- the run, in the lifecycle's order; NULL where marked optional ---- */

	/* Set up what is the probe's (sockets, counters, channels) and describe its threads
	 * and channels in plan. 0, or an exit code after one line on stderr. */
	int (*prepare)(void *ctx, struct probe_plan *plan);
	/* Optional. In each thread, after its set-up, before it waits for the start. */
	void (*thread_ready)(void *ctx, struct probe_thread *t);
	/* The start is decided (the threads are still waiting): note it. 0, or an exit code
	 * after one line on stderr (the run is abandoned). */
	int (*start)(void *ctx, const struct probe_start *s);
	/* The members of the header's `config` object. */
	void (*write_config)(const void *ctx, struct jsonw *w);
	/* Optional. The probe's members of the header's `effective` object after "threads". */
	void (*write_effective)(const void *ctx, struct jsonw *w);
	/* Optional. Its members at the end of `effective` (after "tracing"). */
	void (*write_effective_end)(const void *ctx, struct jsonw *w);
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
	/* Optional. After every thread was joined: the probe's own end of the run (e). The
	 * outcome is then the core's: the threshold claimed, else interrupted, else e->err,
	 * else e->check_failed, else completed. */
	void (*ended)(void *ctx, struct probe_end *e);
};

/* The stack of a probe's threads where probe_ops.stack is 0. */
#define PROBE_STACK ((size_t)128 * 1024)

/* A descriptor's own options: the table (sized by its enum), the shared ones it takes and
 * where --help lists them (probe_ops.opts, n_opts, shared, shared_at). */
#define PROBE_OPTIONS(table, shared_, shared_at_)                                    \
	.opts = (table), .n_opts = sizeof(table) / sizeof((table)[0]), .shared = (shared_), \
	.shared_at = (shared_at_)

/* The hooks every probe has, named <prefix>_init, _fini, _prepare, _start, _write_config
 * and _measure; a descriptor adds its optional ones beside PROBE_HOOKS(prefix). */
#define PROBE_HOOKS(prefix)                                                            \
	.init = prefix##_init, .fini = prefix##_fini, .prepare = prefix##_prepare,     \
	.start = prefix##_start, .write_config = prefix##_write_config,                \
	.measure = prefix##_measure

/* The probes of probes.def, and the NULL-terminated table of them (probe.c). */
#define PROBE(name) extern const struct probe_ops name##_probe;
#include "probes.def"
#undef PROBE
extern const struct probe_ops *const probe_table[];

const struct probe_ops *probe_find(const char *name);

/* The zeroed context of probe p for its init (NULL: no memory). */
void *probe_ctx_new(const struct probe_ops *p);

/* After a successful init: p's fini, then the context freed. */
void probe_ctx_free(const struct probe_ops *p, void *ctx);

/* ---- the options of a probe: its own merged with the shared ones (probe_opts.c) ---- */

#define PROBE_OPTS_MAX 64

struct probe_opt_table {
	struct opt_def defs[PROBE_OPTS_MAX];
	size_t n;
	int own[PROBE_OPTS_MAX];	/* index in probe_ops.opts, or -1: a shared option */
	int shared[RUN_OPT_COUNT];	/* index in defs, or -1: not taken */
};

/* The table that --help, `list --json` and the parser see, in --help's order. */
void probe_opt_table(const struct probe_ops *p, struct probe_opt_table *t);

/* From the values parsed with t: the probe's own (n_opts of them) and the shared run options
 * (housekeeping: the CPU given, else -1 until probe_housekeeping). */
void probe_opt_split(const struct probe_opt_table *t, const struct opt_value *vals,
		     struct opt_value *own, struct run_opts *run);

/*
 * --housekeeping after init: the given CPU, which must be online, else the first online
 * CPU not in `used` (none with `used` empty), else -1 (the reporter is not pinned).
 * Returns 0 or -EINVAL with a one-line message.
 */
int probe_housekeeping(const struct probe_opt_table *t, const struct opt_value *vals,
		       const cpu_set_t *online, const cpu_set_t *used, int *out, char *err,
		       size_t errlen) RL_WUR;

/*
 * --priority: the value given (v), which must be in the policy's range (else -EINVAL
 * with a one-line message), else rt_default for fifo/rr and the policy's minimum (0)
 * for the others.
 */
int probe_priority(enum rt_policy policy, const struct opt_value *v, int rt_default, int *out,
		   char *err, size_t errlen) RL_WUR;

/*
 * --policy (v_policy) and --priority (v_priority) of a probe whose threads cannot run
 * under SCHED_DEADLINE: -EINVAL with deadline_refusal as the message for deadline, else
 * the policy and probe_priority's priority (rt_default for fifo/rr). 0 or -EINVAL.
 */
int probe_sched_no_deadline(const struct opt_value *v_policy, const struct opt_value *v_priority,
			    int rt_default, const char *deadline_refusal, enum rt_policy *policy,
			    int *priority, char *err, size_t errlen) RL_WUR;

/*
 * --duration and --loops of a periodic probe (timer, switch): at most one of them, and
 * a duration of at least one --interval (else no period would be measured). Sets
 * *duration_ns and *loops (0: not given). Returns 0 or -EINVAL with a one-line message.
 */
int probe_run_length(const struct opt_value *duration, const struct opt_value *loops,
		     uint64_t interval_ns, uint64_t *duration_ns, uint64_t *loops_out,
		     char *err, size_t errlen) RL_WUR;

/*
 * The CPUs a per-CPU probe measures, ascending, into cpus: --cpus (v_cpus) when given,
 * else every online CPU but the first (left to housekeeping; the only one when just
 * one is online). Returns how many.
 */
size_t probe_measured_cpus(const struct opt_value *v_cpus, const cpu_set_t *online, int *cpus);

/* init's usage error: msg into args->err; returns -EINVAL. */
int probe_refuse(struct probe_args *a, const char *msg);

/* The header's config members of the shared options in `which` (RUN_OPT bits), in the
 * order of enum run_opt: mlock, dma_latency_us, housekeeping_cpu, snapshot_interval_ns,
 * window_ns, threshold_ns, samples_file, output, allow_non_rt. */
void probe_write_run_config(struct jsonw *w, const struct run_opts *run, unsigned which);

/* The header's config members "cpus", "policy" and "priority" of a probe's measuring threads. */
void probe_write_threads_config(struct jsonw *w, const int *cpus, size_t n, enum rt_policy policy,
				int priority);

/* The channels of a probe destroyed and their array freed (NULL entries and array: none). */
void probe_free_channels(struct channel **chans, size_t n);

#endif
