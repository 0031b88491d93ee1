/* SPDX-License-Identifier: MIT */
/*
 * The `timer` probe: one pinned thread per measured CPU wakes on absolute
 * deadlines (clock_nanosleep TIMER_ABSTIME) every --interval and records how
 * late it woke. Missed periods are counted (period.h), never skipped.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "channel.h"
#include "crew.h"
#include "hist.h"
#include "jsonw.h"
#include "opts.h"
#include "output.h"
#include "period.h"
#include "probe.h"
#include "probe_common.h"
#include "reporter.h"
#include "rt.h"
#include "sysinfo.h"

#define THREAD_STACK (128 * 1024)
#define PREFAULT_STACK (64 * 1024)
#define START_LEAD_NS (20 * NS_PER_MS)

static const char *const clock_names[] = { "monotonic", "realtime", NULL };

enum {
	O_CPUS, O_POLICY, O_PRIORITY, O_INTERVAL, O_DURATION, O_LOOPS, O_CLOCK, O_MLOCK,
	O_DMA, O_HOUSEKEEPING, O_SNAPSHOT, O_WINDOW, O_THRESHOLD, O_SAMPLES, O_OUTPUT,
	O_ALLOW_NON_RT, O_DL_RUNTIME, O_THRESHOLD_OLD, O_COUNT
};

static const struct opt_def timer_opts[O_COUNT] = {
	[O_CPUS] = { "cpus", OPT_CPULIST, NULL, "CPUs to measure, one pinned thread each",
		     0, 0, NULL, NULL, "all online CPUs" },
	[O_POLICY] = { "policy", OPT_ENUM, "POLICY", "scheduling policy of the measuring threads",
		       0, 0, rt_policy_names, "fifo", NULL },
	[O_PRIORITY] = { "priority", OPT_INT, NULL,
			 "priority (fifo/rr: 1..99; other/deadline: 0)", 0, 99, NULL, NULL,
			 "99 for fifo/rr, 0 otherwise" },
	[O_INTERVAL] = { "interval", OPT_DURATION, NULL, "wake-up period",
			 (int64_t)NS_PER_US, (int64_t)(10 * NS_PER_SEC), NULL, "1ms", NULL },
	[O_DURATION] = { "duration", OPT_DURATION, NULL, "stop after this run time",
			 (int64_t)NS_PER_MS, (int64_t)(1000 * 3600 * NS_PER_SEC), NULL, NULL,
			 "until SIGINT/SIGTERM" },
	[O_LOOPS] = { "loops", OPT_INT, NULL, "stop after N wake-ups per thread", 1,
		      INT64_MAX / 2, NULL, NULL, "until SIGINT/SIGTERM" },
	[O_CLOCK] = { "clock", OPT_ENUM, "CLOCK", "clock of the deadlines", 0, 0, clock_names,
		      "monotonic", NULL },
	[O_MLOCK] = OPT_DEF_MLOCK,
	[O_DMA] = { "dma-latency", OPT_INT, "US",
		    "hold /dev/cpu_dma_latency at US microseconds during the run", 0, INT32_MAX,
		    NULL, NULL, "not touched" },
	[O_HOUSEKEEPING] = { "housekeeping", OPT_INT, "CPU", "CPU of the reporter thread", 0,
			     CPU_SETSIZE - 1, NULL, NULL,
			     "first online CPU not measured, else unpinned" },
	[O_SNAPSHOT] = OPT_DEF_SNAPSHOT,
	[O_WINDOW] = OPT_DEF_WINDOW,
	[O_THRESHOLD] = { "stop-threshold", OPT_DURATION, NULL,
			  "stop with exit 3 when a latency exceeds this (and stop tracing)", 1,
			  (int64_t)(3600 * NS_PER_SEC), NULL, NULL, "none" },
	[O_SAMPLES] = { "samples", OPT_STRING, "FILE", "write every sample to FILE (binary)", 0,
			0, NULL, NULL, "none" },
	[O_OUTPUT] = OPT_DEF_OUTPUT,
	[O_ALLOW_NON_RT] = { "allow-non-rt", OPT_BOOL, NULL,
			     "measure even without RT scheduling/mlock (rt_valid=false)", 0, 0,
			     NULL, "false", NULL },
	[O_DL_RUNTIME] = { "dl-runtime", OPT_DURATION, NULL,
			   "SCHED_DEADLINE runtime per period (policy deadline only)",
			   (int64_t)NS_PER_US, (int64_t)(10 * NS_PER_SEC), NULL, "100us", NULL },
	[O_THRESHOLD_OLD] = OPT_DEF_ALIAS("threshold", "stop-threshold"),
};

/* Frozen after init. */
struct timer_cfg {
	int cpus[CPU_SETSIZE];
	size_t n_cpus;
	enum rt_policy policy;
	int priority;
	uint64_t interval_ns;
	uint64_t duration_ns;	/* 0: none */
	uint64_t loops;		/* 0: none */
	int clock_idx;
	clockid_t clock;
	bool mlock;
	int64_t dma_us;		/* -1: not touched */
	int housekeeping;	/* -1: unpinned */
	uint64_t snapshot_ns;
	uint64_t window_ns;
	uint64_t threshold_ns;	/* 0: none */
	uint64_t dl_runtime_ns;
	const char *samples;
	const char *output;
	bool allow_non_rt;
};

struct timer_ctx;

/* One per measuring thread; cache-line aligned, written only by its thread. */
struct timer_thread {
	_Alignas(RL_CACHELINE) struct timer_ctx *ctx;
	struct channel *ch;
	size_t idx;
	int cpu;
	/* set-up results, read by main after the ready barrier */
	int pin_err;
	int sched_err;
	int get_err;
	int kpolicy;
	int prio;
	cpu_set_t affinity;
	int run_err;		/* clock_nanosleep failure */
};

struct timer_ctx {
	const struct timer_cfg *cfg;
	struct timer_cfg cfg_store;
	struct timer_thread *threads;
	struct channel **chans;
	struct crew crew;
	atomic_bool stop;
	atomic_int running;
	atomic_int thr_taken;
	size_t thr_chan;
	uint64_t thr_latency, thr_at;
	uint64_t start_ns;	/* run start on cfg->clock */
	struct rt_trace trace;
	bool trace_open;
	int trace_err;
};

static int timer_init(void **out, const struct opt_value *v, const struct probe_env *env,
		      char *err, size_t errlen)
{
	struct timer_ctx *ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return -ENOMEM;
	struct timer_cfg *c = &ctx->cfg_store;
	const cpu_set_t *cpus = v[O_CPUS].set ? &v[O_CPUS].cpus : env->online;
	for (int i = 0; i < CPU_SETSIZE; i++)
		if (CPU_ISSET(i, cpus))
			c->cpus[c->n_cpus++] = i;
	c->policy = (enum rt_policy)v[O_POLICY].i;
	int pmin, pmax;
	rt_priority_range(c->policy, &pmin, &pmax);
	if (v[O_PRIORITY].given) {
		if (v[O_PRIORITY].i < pmin || v[O_PRIORITY].i > pmax) {
			snprintf(err, errlen,
				 "--priority: %lld is out of range for --policy %s; allowed range %d..%d",
				 (long long)v[O_PRIORITY].i, rt_policy_names[c->policy], pmin, pmax);
			free(ctx);
			return -EINVAL;
		}
		c->priority = (int)v[O_PRIORITY].i;
	} else {
		c->priority = pmax;
	}
	c->interval_ns = (uint64_t)v[O_INTERVAL].i;
	if (v[O_DURATION].set && v[O_LOOPS].set) {
		snprintf(err, errlen, "--duration and --loops cannot be combined; give one of them");
		free(ctx);
		return -EINVAL;
	}
	c->duration_ns = v[O_DURATION].set ? (uint64_t)v[O_DURATION].i : 0;
	c->loops = v[O_LOOPS].set ? (uint64_t)v[O_LOOPS].i : 0;
	c->clock_idx = (int)v[O_CLOCK].i;
	c->clock = c->clock_idx == 1 ? CLOCK_REALTIME : CLOCK_MONOTONIC;
	c->mlock = v[O_MLOCK].i != 0;
	c->dma_us = v[O_DMA].set ? v[O_DMA].i : -1;
	if (pc_housekeeping(&v[O_HOUSEKEEPING], env->online, cpus, &c->housekeeping, err,
			    errlen) != 0) {
		free(ctx);
		return -EINVAL;
	}
	c->snapshot_ns = (uint64_t)v[O_SNAPSHOT].i;
	c->window_ns = (uint64_t)v[O_WINDOW].i;
	c->threshold_ns = v[O_THRESHOLD].set ? (uint64_t)v[O_THRESHOLD].i : 0;
	c->dl_runtime_ns = (uint64_t)v[O_DL_RUNTIME].i;
	if (c->policy == RT_DEADLINE && c->dl_runtime_ns > c->interval_ns) {
		snprintf(err, errlen, "--dl-runtime: must not exceed --interval (%llu ns)",
			 (unsigned long long)c->interval_ns);
		free(ctx);
		return -EINVAL;
	}
	c->samples = v[O_SAMPLES].set ? v[O_SAMPLES].s : NULL;
	c->output = v[O_OUTPUT].set ? v[O_OUTPUT].s : NULL;
	c->allow_non_rt = v[O_ALLOW_NON_RT].i != 0;
	ctx->cfg = c;
	*out = ctx;
	return 0;
}

static void timer_report_config(const void *p, struct jsonw *w, const char *key)
{
	const struct timer_cfg *c = ((const struct timer_ctx *)p)->cfg;
	jw_obj_begin(w, key);
	jw_arr_begin(w, "cpus");
	for (size_t i = 0; i < c->n_cpus; i++)
		jw_int(w, NULL, c->cpus[i]);
	jw_arr_end(w);
	jw_str(w, "policy", rt_policy_names[c->policy]);
	jw_int(w, "priority", c->priority);
	jw_uint(w, "interval_ns", c->interval_ns);
	if (c->duration_ns)
		jw_uint(w, "duration_ns", c->duration_ns);
	else
		jw_null(w, "duration_ns");
	if (c->loops)
		jw_uint(w, "loops", c->loops);
	else
		jw_null(w, "loops");
	jw_str(w, "clock", clock_names[c->clock_idx]);
	jw_bool(w, "mlock", c->mlock);
	jw_int_or_null(w, "dma_latency_us", c->dma_us);
	jw_int_or_null(w, "housekeeping_cpu", c->housekeeping);
	jw_uint(w, "snapshot_interval_ns", c->snapshot_ns);
	jw_uint(w, "window_ns", c->window_ns);
	if (c->threshold_ns)
		jw_uint(w, "threshold_ns", c->threshold_ns);
	else
		jw_null(w, "threshold_ns");
	jw_str_or_null(w, "samples_file", c->samples);
	jw_bool(w, "allow_non_rt", c->allow_non_rt);
	if (c->policy == RT_DEADLINE)
		jw_uint(w, "dl_runtime_ns", c->dl_runtime_ns);
	else
		jw_null(w, "dl_runtime_ns");
	jw_obj_end(w);
}

static void on_threshold(struct timer_thread *t, uint64_t at, uint64_t lat)
{
	struct timer_ctx *ctx = t->ctx;
	int expected = 0;
	if (atomic_compare_exchange_strong(&ctx->thr_taken, &expected, 1)) {
		ctx->thr_chan = t->idx;
		ctx->thr_latency = lat;
		ctx->thr_at = at;
		if (ctx->trace_open) {
			char msg[160];
			snprintf(msg, sizeof(msg),
				 "rtlab-probe: threshold exceeded on %s: latency %llu ns > %llu ns at %llu ns\n",
				 t->ch->name, (unsigned long long)lat,
				 (unsigned long long)ctx->cfg->threshold_ns, (unsigned long long)at);
			rt_trace_stop(&ctx->trace, msg);
		}
	}
	atomic_store(&ctx->stop, true);
}

static void measure(struct timer_thread *t)
{
	struct timer_ctx *ctx = t->ctx;
	const struct timer_cfg *c = ctx->cfg;
	struct channel *ch = t->ch;
	const clockid_t clk = c->clock;
	const uint64_t interval = c->interval_ns;
	const uint64_t start = ctx->start_ns;
	const uint64_t end = c->duration_ns ? start + c->duration_ns : UINT64_MAX;
	const uint64_t threshold = c->threshold_ns ? c->threshold_ns : UINT64_MAX;
	const uint64_t loops = c->loops ? c->loops : UINT64_MAX;
	uint64_t n = 0;
	uint64_t next = period_first(start, rl_now_ns(clk), interval);

	while (!atomic_load_explicit(&ctx->stop, memory_order_relaxed) && next <= end) {
		struct timespec ts = rl_ns_to_ts(next);
		int r = clock_nanosleep(clk, TIMER_ABSTIME, &ts, NULL);
		if (r == EINTR)
			continue;
		if (r) {
			t->run_err = r;
			atomic_store(&ctx->stop, true);
			break;
		}
		uint64_t now = rl_now_ns(clk);
		struct period_step s = period_advance(next, now, interval);
		uint64_t at = now > start ? now - start : 0;
		channel_record(ch, at, s.latency_ns, s.missed, s.negative);
		if (s.latency_ns > threshold) {
			on_threshold(t, at, s.latency_ns);
			break;
		}
		next = s.next_ns;
		if (++n >= loops)
			break;
	}
}

static void *thread_main(void *arg)
{
	struct timer_thread *t = arg;
	struct timer_ctx *ctx = t->ctx;
	const struct timer_cfg *c = ctx->cfg;

	atomic_store(&t->ch->tid, (int)syscall(SYS_gettid));
	t->pin_err = rt_pin_self(t->cpu);
	struct rt_sched_req req = {
		.policy = c->policy,
		.priority = c->priority,
		.dl_runtime_ns = c->dl_runtime_ns,
		.dl_deadline_ns = c->interval_ns,
		.dl_period_ns = c->interval_ns,
	};
	t->sched_err = rt_set_sched_self(&req);
	t->get_err = rt_get_sched_self(&t->kpolicy, &t->prio);
	if (rt_get_affinity_self(&t->affinity) != 0)
		CPU_ZERO(&t->affinity);
	rt_prefault_stack(PREFAULT_STACK);

	if (crew_wait_go(&ctx->crew))
		measure(t);
	if (atomic_fetch_sub(&ctx->running, 1) == 1)
		rt_notify_main(); /* tell main that every thread is done */
	return NULL;
}

static bool thread_rt_ok(const struct timer_thread *t, const struct timer_cfg *c)
{
	return !t->pin_err && !t->sched_err && !t->get_err &&
	       (t->kpolicy & ~0x40000000) == rt_policy_to_kernel(c->policy) &&
	       t->prio == c->priority && CPU_COUNT(&t->affinity) == 1 &&
	       CPU_ISSET(t->cpu, &t->affinity);
}

/* One line: why we cannot measure with real-time settings, and how to fix it. */
static bool skip_reason(const struct timer_ctx *ctx, int mlock_err, int dma_err, char *buf,
			size_t len)
{
	const struct timer_cfg *c = ctx->cfg;
	for (size_t i = 0; i < c->n_cpus; i++) {
		const struct timer_thread *t = &ctx->threads[i];
		if (t->pin_err) {
			snprintf(buf, len,
				 "cannot pin the measuring thread to CPU %d (%s): the CPU is not in this process's cpuset; run in a cpuset that contains it, or pass --allow-non-rt",
				 t->cpu, strerror(-t->pin_err));
			return true;
		}
		if (!thread_rt_ok(t, c)) {
			snprintf(buf, len,
				 "cannot set SCHED_%s priority %d on CPU %d (%s): run as root or grant CAP_SYS_NICE, raise 'ulimit -r' to %d, or use a cgroup with RT runtime (RT group scheduling: cpu.rt_runtime_us > 0); or pass --allow-non-rt",
				 c->policy == RT_FIFO ? "FIFO" : c->policy == RT_RR ? "RR"
								 : c->policy == RT_DEADLINE ? "DEADLINE" : "OTHER",
				 c->priority, t->cpu,
				 t->sched_err ? strerror(-t->sched_err) : "not in effect after setting",
				 c->priority);
			return true;
		}
	}
	if (mlock_err) {
		snprintf(buf, len,
			 "cannot lock memory with mlockall (%s): run as root or grant CAP_IPC_LOCK, raise 'ulimit -l', or pass --no-mlock or --allow-non-rt",
			 strerror(-mlock_err));
		return true;
	}
	if (dma_err) {
		snprintf(buf, len,
			 "cannot hold /dev/cpu_dma_latency (%s): run as root, or drop --dma-latency, or pass --allow-non-rt",
			 strerror(-dma_err));
		return true;
	}
	return false;
}

static void write_effective(struct jsonw *w, const struct timer_ctx *ctx, int mlock_err,
			    int dma_fd, int dma_err, const cpu_set_t *rep_aff, bool rep_pinned,
			    bool rt_valid)
{
	const struct timer_cfg *c = ctx->cfg;
	pc_effective_open(w, c->mlock, mlock_err);
	jw_obj_begin(w, "dma_latency");
	jw_int_or_null(w, "requested_us", c->dma_us);
	jw_bool(w, "held", dma_fd >= 0);
	jw_str_or_null(w, "error", dma_err ? strerror(-dma_err) : NULL);
	jw_obj_end(w);
	jw_arr_begin(w, "threads");
	for (size_t i = 0; i < c->n_cpus; i++) {
		const struct timer_thread *t = &ctx->threads[i];
		rt_write_thread_effective(w, &(struct rt_thread_view){
			.channel = t->ch->name, .cpu = t->cpu, .tid = atomic_load(&t->ch->tid),
			.kpolicy = t->kpolicy, .priority = t->prio, .affinity = &t->affinity,
			.pin_err = t->pin_err, .sched_err = t->sched_err, .get_err = t->get_err });
	}
	jw_arr_end(w);
	jw_obj_begin(w, "reporter");
	jw_cpuset(w, "affinity", rep_aff);
	jw_bool(w, "pinned", rep_pinned);
	jw_obj_end(w);
	jw_bool(w, "rt_valid", rt_valid);
	jw_obj_begin(w, "tracing");
	jw_str_or_null(w, "tracefs", ctx->trace.path);
	jw_bool(w, "marker", ctx->trace_open && ctx->trace.marker_fd >= 0);
	jw_obj_end(w);
	jw_obj_end(w);
}

static size_t ring_entries(const struct timer_cfg *c)
{
	/* room for 4 drain periods (100 ms) of samples, at least 4096 */
	uint64_t per = (400 * NS_PER_MS) / c->interval_ns + 1;
	size_t n = 4096;
	while (n < per && n < (1u << 22))
		n <<= 1;
	return n;
}

/* rt_wait_done_or_signal predicate: every measuring thread has finished. */
static bool all_threads_done(const void *arg)
{
	const struct timer_ctx *ctx = arg;
	return atomic_load(&ctx->running) == 0;
}

static int timer_run(void *p, const struct probe_env *env)
{
	struct timer_ctx *ctx = p;
	const struct timer_cfg *c = ctx->cfg;
	int out_fd = STDOUT_FILENO, smp_fd = -1, dma_fd = -1;
	int mlock_err = 0, dma_err = 0, code = RL_EXIT_ERROR;
	struct jsonw w;
	jw_init(&w);
	ctx->trace.marker_fd = ctx->trace.on_fd = -1;

	rt_block_signals(); /* inherited: signals reach only main's wait */

	int e;
	if (c->output && (e = pc_open_out(c->output, &out_fd)) != 0) {
		fprintf(stderr, "rtlab-probe timer: --output: cannot open %s: %s\n", c->output,
			strerror(-e));
		return RL_EXIT_ERROR;
	}
	if (c->samples && (e = pc_open_out(c->samples, &smp_fd)) != 0) {
		fprintf(stderr, "rtlab-probe timer: --samples: cannot open %s: %s\n", c->samples,
			strerror(-e));
		goto out;
	}

	bool rep_pinned = false;
	if (c->housekeeping >= 0)
		rep_pinned = rt_pin_self(c->housekeeping) == 0;
	cpu_set_t rep_aff;
	if (rt_get_affinity_self(&rep_aff) != 0)
		CPU_ZERO(&rep_aff);

	if (c->threshold_ns)
		ctx->trace_err = rt_trace_open(&ctx->trace);
	ctx->trace_open = c->threshold_ns && !ctx->trace_err;
	if (c->mlock)
		mlock_err = rt_mlockall();
	if (c->dma_us >= 0)
		dma_err = rt_dma_latency_hold((int32_t)c->dma_us, &dma_fd);

	ctx->threads = aligned_alloc(RL_CACHELINE,
				     ((c->n_cpus * sizeof(*ctx->threads)) + RL_CACHELINE - 1) &
					     ~(size_t)(RL_CACHELINE - 1));
	ctx->chans = calloc(c->n_cpus, sizeof(*ctx->chans));
	if (!ctx->threads || !ctx->chans) {
		fprintf(stderr, "rtlab-probe timer: out of memory\n");
		goto out;
	}
	memset(ctx->threads, 0, c->n_cpus * sizeof(*ctx->threads));
	for (size_t i = 0; i < c->n_cpus; i++) {
		char name[32];
		snprintf(name, sizeof(name), "cpu%d", c->cpus[i]);
		e = channel_create(&ctx->chans[i], name, c->cpus[i], c->window_ns,
				   smp_fd >= 0 ? ring_entries(c) : 0);
		if (e) {
			fprintf(stderr, "rtlab-probe timer: cannot allocate a channel: %s\n",
				strerror(-e));
			goto out;
		}
		ctx->threads[i].ctx = ctx;
		ctx->threads[i].ch = ctx->chans[i];
		ctx->threads[i].idx = i;
		ctx->threads[i].cpu = c->cpus[i];
	}

	atomic_init(&ctx->running, (int)c->n_cpus);
	if (crew_start(&ctx->crew, c->n_cpus, THREAD_STACK, thread_main, ctx->threads,
		       sizeof(*ctx->threads), "timer") != 0) {
		fprintf(stderr, "rtlab-probe timer: out of memory\n");
		goto out;
	}

	bool rt_valid = true;
	for (size_t i = 0; i < c->n_cpus; i++)
		rt_valid = rt_valid && thread_rt_ok(&ctx->threads[i], c);
	if (c->mlock && mlock_err)
		rt_valid = false;
	char why[512];
	bool skip = skip_reason(ctx, mlock_err, dma_err, why, sizeof(why));
	if (skip && !c->allow_non_rt) {
		crew_abort(&ctx->crew);
		fprintf(stderr, "rtlab-probe timer: skipped: %s\n", why);
		code = RL_EXIT_SKIPPED;
		goto out;
	}

	/* The header: everything is applied and read back, nothing measured yet. */
	/* The run starts START_LEAD after now, so that writing the header and
	 * releasing the threads never makes them miss the first deadline
	 * start + interval (periods before a thread's first wake are not missed). */
	uint64_t start_real = rl_now_ns(CLOCK_REALTIME) + START_LEAD_NS;
	uint64_t start_mono = rl_now_ns(CLOCK_MONOTONIC) + START_LEAD_NS;
	ctx->start_ns = c->clock == CLOCK_REALTIME ? start_real : start_mono;
	pc_header_begin(&w, "timer", env, start_real, start_mono);
	timer_report_config(ctx, &w, "config");
	write_effective(&w, ctx, mlock_err, dma_fd, dma_err, &rep_aff, rep_pinned, rt_valid);
	sysinfo_write(&w, "system");
	jw_obj_end(&w);
	int out_err = jw_emit(&w, out_fd);
	if (skip)
		out_log(&w, out_fd, "warning", "no_rt", why);
	if (c->threshold_ns && ctx->trace_err)
		out_log(&w, out_fd, "info", "no_tracefs",
			  "tracefs is not mounted (or not writable): the threshold stops the run without a trace marker");

	struct reporter *rep = NULL;
	struct reporter_cfg rc = {
		.out_fd = out_fd,
		.samples_fd = smp_fd,
		.samples_path = c->samples,
		.snapshot_ns = c->snapshot_ns,
		.start_mono_ns = start_mono,
		.chans = ctx->chans,
		.n_chans = c->n_cpus,
	};
	e = reporter_start(&rep, &rc);
	if (e) {
		crew_abort(&ctx->crew);
		fprintf(stderr, "rtlab-probe timer: cannot start the reporter: %s\n", strerror(-e));
		goto out;
	}

	crew_go(&ctx->crew); /* measuring starts */

	bool interrupted = rt_wait_done_or_signal(&ctx->stop, all_threads_done, ctx);
	crew_join(&ctx->crew);

	struct reporter_outcome o = { .status = "completed", .exit_code = RL_EXIT_OK };
	char errmsg[128] = "";
	for (size_t i = 0; i < c->n_cpus; i++) {
		if (ctx->threads[i].run_err && !errmsg[0])
			snprintf(errmsg, sizeof(errmsg), "clock_nanosleep on %s: %s",
				 ctx->chans[i]->name, strerror(ctx->threads[i].run_err));
	}
	if (atomic_load(&ctx->thr_taken)) {
		o.status = "threshold";
		o.exit_code = RL_EXIT_THRESHOLD;
		o.threshold_hit = true;
		o.thr_chan = ctx->thr_chan;
		o.thr_latency_ns = ctx->thr_latency;
		o.thr_at_ns = ctx->thr_at;
	} else {
		reporter_outcome_stopped(&o, interrupted, errmsg);
	}
	code = reporter_conclude(rep, &o, out_err, "timer");

out:
	jw_free(&w);
	crew_destroy(&ctx->crew);
	if (dma_fd >= 0)
		close(dma_fd);
	rt_trace_close(&ctx->trace);
	if (smp_fd >= 0)
		close(smp_fd);
	if (out_fd != STDOUT_FILENO)
		close(out_fd);
	return code;
}

static void timer_fini(void *p)
{
	struct timer_ctx *ctx = p;
	if (!ctx)
		return;
	if (ctx->chans)
		for (size_t i = 0; i < ctx->cfg->n_cpus; i++)
			channel_destroy(ctx->chans[i]);
	free(ctx->chans);
	free(ctx->threads);
	free(ctx);
}

const struct probe_ops timer_probe = {
	.name = "timer",
	.summary = "wake-up latency of periodic timers: one pinned RT thread per CPU",
	.usage = "Each measured CPU gets one pinned thread that sleeps on absolute deadlines\n"
		 "(clock_nanosleep TIMER_ABSTIME) every --interval and records how late it\n"
		 "woke. Missed periods are counted. JSON Lines go to stdout or --output.",
	.opts = timer_opts,
	.n_opts = O_COUNT,
	.unavailable = NULL,
	.init = timer_init,
	.report_config = timer_report_config,
	.run = timer_run,
	.fini = timer_fini,
};
