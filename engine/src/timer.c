/* SPDX-License-Identifier: MIT */
/*
 * The `timer` probe: one pinned thread per measured CPU wakes on absolute
 * deadlines (clock_nanosleep TIMER_ABSTIME) every --interval and records how
 * late it woke. Missed periods are counted (period.h), never skipped.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "channel.h"
#include "period.h"
#include "probe.h"


static const char *const clock_names[] = { "monotonic", "realtime", NULL };

/* its own options; the shared ones (TIMER_SHARED) come before O_DL_RUNTIME */
enum {
	O_CPUS, O_POLICY, O_PRIORITY, O_INTERVAL, O_DURATION, O_LOOPS, O_CLOCK, O_DL_RUNTIME,
	O_THRESHOLD_OLD, O_COUNT
};
#define TIMER_SHARED (RUN_OPTS_COMMON | RUN_OPT(DMA) | RUN_OPT(HOUSEKEEPING) | RUN_OPT(WINDOW) | \
		      RUN_OPT(THRESHOLD) | RUN_OPT(SAMPLES))

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
	[O_DL_RUNTIME] = { "dl-runtime", OPT_DURATION, NULL,
			   "SCHED_DEADLINE runtime per period (policy deadline only)",
			   (int64_t)NS_PER_US, (int64_t)(10 * NS_PER_SEC), NULL, "100us", NULL },
	[O_THRESHOLD_OLD] = OPT_DEF_ALIAS("threshold", "stop-threshold"),
};

/* Frozen after init. */
struct timer_cfg {
	const struct run_opts *run;
	int cpus[CPU_SETSIZE];
	size_t n_cpus;
	enum rt_policy policy;
	int priority;
	uint64_t interval_ns;
	uint64_t duration_ns;	/* 0: none */
	uint64_t loops;		/* 0: none */
	int clock_idx;
	clockid_t clock;
	uint64_t dl_runtime_ns;
};

struct timer_ctx;

/* One per measuring thread; cache-line aligned, written only by its thread. */
struct timer_thread {
	_Alignas(RL_CACHELINE) struct timer_ctx *ctx;
	struct channel *ch;
	size_t idx;
	int run_err;		/* clock_nanosleep failure */
};

struct timer_ctx {
	const struct timer_cfg *cfg;
	struct timer_cfg cfg_store;
	struct timer_thread *threads;
	struct channel **chans;
	atomic_bool stop;
	struct probe_threshold thr;
	uint64_t start_ns;	/* run start on cfg->clock */
	const struct rt_trace *trace;	/* tracefs, open for the threshold; NULL: none */
};

static int timer_init(void *p, struct probe_args *a)
{
	const struct opt_value *v = a->vals;
	struct timer_ctx *ctx = p;
	struct timer_cfg *c = &ctx->cfg_store;
	c->run = a->run;
	const cpu_set_t *cpus = v[O_CPUS].set ? &v[O_CPUS].cpus : a->env->online;
	for (int i = 0; i < CPU_SETSIZE; i++)
		if (CPU_ISSET(i, cpus))
			c->cpus[c->n_cpus++] = i;
	a->used = *cpus;
	c->policy = (enum rt_policy)v[O_POLICY].i;
	if (probe_priority(c->policy, &v[O_PRIORITY], 99, &c->priority, a->err, a->errlen) != 0)
		return -EINVAL;
	c->interval_ns = (uint64_t)v[O_INTERVAL].i;
	if (probe_run_length(&v[O_DURATION], &v[O_LOOPS], c->interval_ns, &c->duration_ns,
			     &c->loops, a->err, a->errlen) != 0)
		return -EINVAL;
	c->clock_idx = (int)v[O_CLOCK].i;
	c->clock = c->clock_idx == 1 ? CLOCK_REALTIME : CLOCK_MONOTONIC;
	c->dl_runtime_ns = (uint64_t)v[O_DL_RUNTIME].i;
	if (c->policy == RT_DEADLINE && c->dl_runtime_ns > c->interval_ns) {
		snprintf(a->err, a->errlen, "--dl-runtime: must not exceed --interval (%llu ns)",
			 (unsigned long long)c->interval_ns);
		return -EINVAL;
	}
	ctx->cfg = c;
	return 0;
}

static void timer_write_config(const void *p, struct jsonw *w)
{
	const struct timer_cfg *c = ((const struct timer_ctx *)p)->cfg;
	probe_write_threads_config(w, c->cpus, c->n_cpus, c->policy, c->priority);
	jw_uint(w, "interval_ns", c->interval_ns);
	jw_uint_or_null(w, "duration_ns", c->duration_ns);
	jw_uint_or_null(w, "loops", c->loops);
	jw_str(w, "clock", clock_names[c->clock_idx]);
	probe_write_run_config(w, c->run, TIMER_SHARED & ~RUN_OPT(OUTPUT));
	if (c->policy == RT_DEADLINE)
		jw_uint(w, "dl_runtime_ns", c->dl_runtime_ns);
	else
		jw_null(w, "dl_runtime_ns");
}

static void on_threshold(struct timer_thread *t, uint64_t at, uint64_t lat)
{
	struct timer_ctx *ctx = t->ctx;
	if (probe_threshold_claim(&ctx->thr, t->idx, lat, at)) {
		if (ctx->trace) {
			char msg[160];
			snprintf(msg, sizeof(msg),
				 "rtlab-probe: threshold exceeded on %s: latency %llu ns > %llu ns at %llu ns\n",
				 t->ch->name, (unsigned long long)lat,
				 (unsigned long long)ctx->cfg->run->threshold_ns, (unsigned long long)at);
			rt_trace_stop(ctx->trace, msg);
		}
	}
	atomic_store(&ctx->stop, true);
}

static void timer_measure(void *p, struct probe_thread *pt)
{
	struct timer_ctx *ctx = p;
	struct timer_thread *t = pt->arg;
	const struct timer_cfg *c = ctx->cfg;
	struct channel *ch = t->ch;
	const clockid_t clk = c->clock;
	const uint64_t interval = c->interval_ns;
	const uint64_t start = ctx->start_ns;
	const uint64_t end = c->duration_ns ? start + c->duration_ns : UINT64_MAX;
	const uint64_t threshold = c->run->threshold_ns ? c->run->threshold_ns : UINT64_MAX;
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
		struct period_step s = period_advance_until(next, now, interval, end);
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

static size_t ring_entries(const struct timer_cfg *c)
{
	/* room for 4 drain periods (100 ms) of samples, at least 4096 */
	uint64_t per = (400 * NS_PER_MS) / c->interval_ns + 1;
	size_t n = 4096;
	while (n < per && n < (1u << 22))
		n <<= 1;
	return n;
}

static int timer_prepare(void *p, struct probe_plan *plan)
{
	struct timer_ctx *ctx = p;
	const struct timer_cfg *c = ctx->cfg;
	ctx->trace = plan->trace;
	ctx->threads = aligned_alloc(RL_CACHELINE,
				     ((c->n_cpus * sizeof(*ctx->threads)) + RL_CACHELINE - 1) &
					     ~(size_t)(RL_CACHELINE - 1));
	ctx->chans = calloc(c->n_cpus, sizeof(*ctx->chans));
	struct probe_thread *pt = probe_plan_threads(plan, c->n_cpus);
	if (!ctx->threads || !ctx->chans || !pt) {
		fprintf(stderr, "rtlab-probe timer: out of memory\n");
		return RL_EXIT_ERROR;
	}
	memset(ctx->threads, 0, c->n_cpus * sizeof(*ctx->threads));
	for (size_t i = 0; i < c->n_cpus; i++) {
		char name[32];
		snprintf(name, sizeof(name), "cpu%d", c->cpus[i]);
		int e = channel_create(&ctx->chans[i], name, c->cpus[i], c->run->window_ns,
				       c->run->samples ? ring_entries(c) : 0);
		if (e) {
			fprintf(stderr, "rtlab-probe timer: cannot allocate a channel: %s\n",
				strerror(-e));
			return RL_EXIT_ERROR;
		}
		ctx->threads[i] = (struct timer_thread){ .ctx = ctx, .ch = ctx->chans[i], .idx = i };
		snprintf(pt[i].rt.role, sizeof(pt[i].rt.role), "%s", name);
		pt[i].rt.cpu = c->cpus[i];
		pt[i].rt.req = (struct rt_sched_req){
			.policy = c->policy,
			.priority = c->priority,
			.dl_runtime_ns = c->dl_runtime_ns,
			.dl_deadline_ns = c->interval_ns,
			.dl_period_ns = c->interval_ns,
		};
		pt[i].arg = &ctx->threads[i];
		pt[i].chan = ctx->chans[i];
	}
	probe_plan_channels(plan, ctx->chans, c->n_cpus, &ctx->stop, &ctx->thr);
	return 0;
}

static int timer_start(void *p, const struct probe_start *s)
{
	struct timer_ctx *ctx = p;
	ctx->start_ns = ctx->cfg->clock == CLOCK_REALTIME ? s->realtime_ns : s->monotonic_ns;
	return 0;
}

/* A thread's clock_nanosleep that failed is the run's error. */
static void timer_ended(void *p, struct probe_end *e)
{
	struct timer_ctx *ctx = p;
	for (size_t i = 0; i < ctx->cfg->n_cpus && !e->err[0]; i++)
		if (ctx->threads[i].run_err)
			snprintf(e->err, e->errlen, "clock_nanosleep on %s: %s", ctx->chans[i]->name,
				 strerror(ctx->threads[i].run_err));
}

static void timer_fini(void *p)
{
	struct timer_ctx *ctx = p;
	probe_free_channels(ctx->chans, ctx->cfg->n_cpus);
	free(ctx->threads);
}

const struct probe_ops timer_probe = {
	.name = "timer",
	.summary = "wake-up latency of periodic timers: one pinned RT thread per CPU",
	.usage = "Each measured CPU gets one pinned thread that sleeps on absolute deadlines\n"
		 "(clock_nanosleep TIMER_ABSTIME) every --interval and records how late it\n"
		 "woke. Missed periods are counted. JSON Lines go to stdout or --output.",
	PROBE_OPTIONS(timer_opts, TIMER_SHARED, O_DL_RUNTIME),
	.housekeeping_help = "first online CPU not measured, else unpinned",
	.ctx_size = sizeof(struct timer_ctx),
	PROBE_HOOKS(timer),
	.ended = timer_ended,
};
