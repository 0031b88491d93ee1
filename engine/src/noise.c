/* SPDX-License-Identifier: MIT */
/*
 * The `noise` probe: OS noise seen by a polling core. One pinned thread per
 * measured CPU spins reading a fast counter (counter.h) and records every gap
 * between two consecutive reads above --gap-threshold into its channel
 * (histogram, exact max/sum, per-window maxima). Per channel the probe also
 * publishes loops, measured time, noise per second, "% CPU available", gaps
 * that look like RT throttling, and the CLOCK_MONOTONIC start/end of gaps
 * above --record-gaps-above (for attribution from a mono-clocked trace).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "channel.h"
#include "counter.h"
#include "noise.h"
#include "output.h"
#include "probe.h"
#include "sysfile.h"

#define NOISE_STACK (128 * 1024)
#define NOISE_GAP_RING 4096u /* power of two */
#define NOISE_CHECK_MASK 1023u /* publish and check the end every 1024 loops */

static const char *const counter_names[] = { "auto", "counter", "monotonic", NULL };

/* its own options; the shared ones (NOISE_SHARED) come before O_THRESHOLD_OLD */
enum {
	O_CPUS, O_POLICY, O_PRIORITY, O_DURATION, O_GAP, O_RECORD, O_MAX_GAPS, O_THRESHOLD,
	O_CLOCKSRC, O_THRESHOLD_OLD, O_COUNT
};
#define NOISE_SHARED (RUN_OPTS_COMMON | RUN_OPT(HOUSEKEEPING) | RUN_OPT(WINDOW))

static const struct opt_def noise_opts[O_COUNT] = {
	[O_CPUS] = { "cpus", OPT_CPULIST, NULL, "CPUs to measure, one polling thread each", 0, 0,
		     NULL, NULL, "all online CPUs but the first (the housekeeping CPU)" },
	[O_POLICY] = { "policy", OPT_ENUM, "POLICY",
		       "scheduling policy of the polling threads (fifo/rr: RT throttling shows up as gaps)",
		       0, 0, rt_policy_names, "other", NULL },
	[O_PRIORITY] = { "priority", OPT_INT, NULL, "priority (fifo/rr: 1..99; other: 0)", 0, 99,
			 NULL, NULL, "1 for fifo/rr, 0 otherwise" },
	[O_DURATION] = { "duration", OPT_DURATION, NULL, "stop after this run time",
			 (int64_t)NS_PER_MS, (int64_t)(1000 * 3600 * NS_PER_SEC), NULL, NULL,
			 "until SIGINT/SIGTERM" },
	[O_GAP] = { "gap-threshold", OPT_DURATION, NULL,
		    "record every gap between two counter reads above this",
		    (int64_t)(100), (int64_t)(10 * NS_PER_SEC), NULL, "1us", NULL },
	[O_RECORD] = { "record-gaps-above", OPT_DURATION, NULL,
		       "list start/end (CLOCK_MONOTONIC) of gaps at or above this", 100,
		       (int64_t)(3600 * NS_PER_SEC), NULL, "10us", NULL },
	[O_MAX_GAPS] = { "max-gaps", OPT_INT, "N",
			 "at most N listed gaps per channel per snapshot (the rest are counted)", 0,
			 100000, NULL, "1000", NULL },
	[O_THRESHOLD] = { "stop-threshold", OPT_DURATION, NULL,
			  "stop with exit 3 when a gap exceeds this", 1,
			  (int64_t)(3600 * NS_PER_SEC), NULL, NULL, "none" },
	[O_CLOCKSRC] = { "counter", OPT_ENUM, "SRC",
			 "what the loop reads: counter (TSC/cntvct), monotonic (vDSO clock_gettime)",
			 0, 0, counter_names, "auto", NULL },
	[O_THRESHOLD_OLD] = OPT_DEF_ALIAS("threshold", "stop-threshold"),
};

struct noise_cfg {
	const struct run_opts *run;
	int cpus[CPU_SETSIZE];
	size_t n_cpus;
	enum rt_policy policy;
	int priority;
	uint64_t duration_ns;	/* 0: none */
	uint64_t gap_ns;
	uint64_t record_ns;
	uint64_t max_gaps;
	uint64_t threshold_ns;	/* 0: none */
	int counter_idx;
	int64_t rt_runtime_us, rt_period_us; /* -2: unknown */
	uint64_t throttle_ns;	/* expected throttling gap (fifo/rr only), 0: none */
};

struct gap_rec {
	uint64_t start_mono_ns;
	uint64_t end_mono_ns;
};

struct noise_ctx;

struct noise_thread {
	/* read-mostly, set before start */
	_Alignas(RL_CACHELINE) struct noise_ctx *ctx;
	struct channel *ch;
	size_t idx;

	/* published by the thread (relaxed), read by the reporter */
	_Alignas(RL_CACHELINE) atomic_uint_least64_t loops;
	atomic_uint_least64_t measured_ns;
	atomic_uint_least64_t noise_ns;
	atomic_uint_least64_t throttle_gaps;
	atomic_uint_least64_t gaps_lost;	/* ring full */
	atomic_size_t gap_head;

	/* consumer side (reporter) */
	_Alignas(RL_CACHELINE) atomic_size_t gap_tail;
	uint64_t dropped;			/* over --max-gaps, reporter only */

	_Alignas(RL_CACHELINE) struct gap_rec ring[NOISE_GAP_RING];
};

struct noise_ctx {
	const struct noise_cfg *cfg;
	struct noise_cfg cfg_store;
	struct counter cnt;
	struct noise_thread *threads;
	struct channel **chans;
	atomic_bool stop;
	struct probe_threshold thr;
	uint64_t start_ticks;
	uint64_t end_ticks;	/* UINT64_MAX: none */
	struct gap_rec *scratch;
	const char *why_hw;	/* why the hardware counter is not used, or NULL */
};

/* A kernel setting, or -2 when it cannot be read. */
static int64_t kernel_int(const char *path)
{
	int64_t v;
	return sf_read_int(path, &v) == 0 ? v : -2;
}

static int noise_init(void *p, struct probe_args *a)
{
	const struct opt_value *v = a->vals;
	struct noise_ctx *ctx = p;
	struct noise_cfg *c = &ctx->cfg_store;
	c->run = a->run;
	c->n_cpus = probe_measured_cpus(&v[O_CPUS], a->env->online, c->cpus);
	if (probe_sched_no_deadline(&v[O_POLICY], &v[O_PRIORITY], 1,
				    "--policy: deadline cannot run a polling loop (it is throttled every period); use other, fifo or rr",
				    &c->policy, &c->priority, a->err, a->errlen) != 0) {
		return -EINVAL;
	}
	c->duration_ns = v[O_DURATION].set ? (uint64_t)v[O_DURATION].i : 0;
	c->gap_ns = (uint64_t)v[O_GAP].i;
	c->record_ns = (uint64_t)v[O_RECORD].i;
	if (c->record_ns < c->gap_ns) {
		snprintf(a->err, a->errlen,
			 "--record-gaps-above: must be at least --gap-threshold (%llu ns)",
			 (unsigned long long)c->gap_ns);
		return -EINVAL;
	}
	c->max_gaps = (uint64_t)v[O_MAX_GAPS].i;
	c->threshold_ns = v[O_THRESHOLD].set ? (uint64_t)v[O_THRESHOLD].i : 0;
	c->counter_idx = (int)v[O_CLOCKSRC].i;
	for (size_t k = 0; k < c->n_cpus; k++)
		CPU_SET(c->cpus[k], &a->used);
	c->rt_runtime_us = kernel_int("/proc/sys/kernel/sched_rt_runtime_us");
	c->rt_period_us = kernel_int("/proc/sys/kernel/sched_rt_period_us");
	if (c->policy == RT_FIFO || c->policy == RT_RR)
		c->throttle_ns = noise_throttle_gap_ns(c->rt_runtime_us, c->rt_period_us);
	ctx->cfg = c;
	return 0;
}

static void noise_write_config(const void *p, struct jsonw *w)
{
	const struct noise_cfg *c = ((const struct noise_ctx *)p)->cfg;
	probe_write_threads_config(w, c->cpus, c->n_cpus, c->policy, c->priority);
	jw_uint_or_null(w, "duration_ns", c->duration_ns);
	jw_uint(w, "gap_threshold_ns", c->gap_ns);
	jw_uint(w, "record_gaps_above_ns", c->record_ns);
	jw_uint(w, "max_gaps", c->max_gaps);
	jw_uint_or_null(w, "threshold_ns", c->threshold_ns);
	jw_str(w, "counter", counter_names[c->counter_idx]);
	probe_write_run_config(w, c->run, NOISE_SHARED);
}

/* The rare path: a gap above --gap-threshold (kept out of the loop body). */
static __attribute__((noinline)) bool on_gap(struct noise_thread *t, uint64_t now,
					      uint64_t ticks)
{
	struct noise_ctx *ctx = t->ctx;
	const struct noise_cfg *c = ctx->cfg;
	const struct counter *cnt = &ctx->cnt;
	uint64_t gap = counter_ticks_to_ns(cnt, ticks);
	uint64_t at = now > ctx->start_ticks ? counter_ticks_to_ns(cnt, now - ctx->start_ticks) : 0;
	channel_record(t->ch, at, gap, 0, false);
	atomic_store_explicit(&t->noise_ns,
			      atomic_load_explicit(&t->noise_ns, memory_order_relaxed) + gap,
			      memory_order_relaxed);
	if (noise_is_throttle_gap(gap, c->throttle_ns))
		atomic_store_explicit(
			&t->throttle_gaps,
			atomic_load_explicit(&t->throttle_gaps, memory_order_relaxed) + 1,
			memory_order_relaxed);
	if (gap >= c->record_ns) {
		/* the end on CLOCK_MONOTONIC: read it now, minus what passed since */
		uint64_t mono = rl_now_ns(CLOCK_MONOTONIC);
		uint64_t c2 = counter_read(cnt);
		uint64_t since = c2 > now ? counter_ticks_to_ns(cnt, c2 - now) : 0;
		uint64_t end = mono - since;
		size_t h = atomic_load_explicit(&t->gap_head, memory_order_relaxed);
		size_t tl = atomic_load_explicit(&t->gap_tail, memory_order_acquire);
		if (h - tl < NOISE_GAP_RING) {
			t->ring[h & (NOISE_GAP_RING - 1)] = (struct gap_rec){ end - gap, end };
			atomic_store_explicit(&t->gap_head, h + 1, memory_order_release);
		} else {
			atomic_store_explicit(
				&t->gaps_lost,
				atomic_load_explicit(&t->gaps_lost, memory_order_relaxed) + 1,
				memory_order_relaxed);
		}
	}
	if (c->threshold_ns && gap > c->threshold_ns) {
		probe_threshold_claim(&ctx->thr, t->idx, gap, at);
		atomic_store(&ctx->stop, true);
		return true;
	}
	return false;
}

static void noise_measure(void *p, struct probe_thread *pt)
{
	struct noise_ctx *ctx = p;
	struct noise_thread *t = pt->arg;
	const struct counter *cnt = &ctx->cnt;
	const uint64_t thr = counter_ns_to_ticks(cnt, ctx->cfg->gap_ns);
	const uint64_t end = ctx->end_ticks;
	uint64_t loops = 0;
	/* wait for the common start so every channel covers the same time */
	uint64_t prev = counter_read(cnt);
	while (prev < ctx->start_ticks)
		prev = counter_read(cnt);
	const uint64_t first = prev;

	for (;;) {
		uint64_t now = counter_read(cnt);
		uint64_t d = now - prev;
		prev = now;
		loops++;
		if (__builtin_expect(d > thr, 0) && on_gap(t, now, d))
			break;
		if (__builtin_expect((loops & NOISE_CHECK_MASK) == 0, 0)) {
			atomic_store_explicit(&t->loops, loops, memory_order_relaxed);
			atomic_store_explicit(&t->measured_ns, counter_ticks_to_ns(cnt, now - first),
					      memory_order_relaxed);
			if (now >= end || atomic_load_explicit(&ctx->stop, memory_order_relaxed))
				break;
		}
	}
	atomic_store_explicit(&t->loops, loops, memory_order_relaxed);
	atomic_store_explicit(&t->measured_ns, counter_ticks_to_ns(cnt, prev - first),
			      memory_order_relaxed);
}

/* Reporter hook: per-channel noise figures and the listed gaps. */
static void noise_extra(void *arg, struct jsonw *w, bool final)
{
	struct noise_ctx *ctx = arg;
	const struct noise_cfg *c = ctx->cfg;
	jw_obj_begin(w, "noise");
	jw_str(w, "counter", counter_kind_name(ctx->cnt.kind));
	jw_uint_or_null(w, "throttle_gap_ns", c->throttle_ns);
	jw_arr_begin(w, "channels");
	for (size_t i = 0; i < c->n_cpus; i++) {
		struct noise_thread *t = &ctx->threads[i];
		uint64_t loops = atomic_load_explicit(&t->loops, memory_order_relaxed);
		uint64_t meas = atomic_load_explicit(&t->measured_ns, memory_order_relaxed);
		uint64_t noise = atomic_load_explicit(&t->noise_ns, memory_order_relaxed);
		size_t tl = atomic_load_explicit(&t->gap_tail, memory_order_relaxed);
		size_t h = atomic_load_explicit(&t->gap_head, memory_order_acquire);
		size_t n = 0;
		while (tl != h) {
			if (n < c->max_gaps)
				ctx->scratch[n++] = t->ring[tl & (NOISE_GAP_RING - 1)];
			else
				t->dropped++;
			tl++;
		}
		atomic_store_explicit(&t->gap_tail, tl, memory_order_release);
		jw_obj_begin(w, NULL);
		jw_str(w, "channel", t->ch->name);
		jw_int(w, "cpu", t->ch->cpu);
		jw_uint(w, "loops", loops);
		jw_uint(w, "measured_ns", meas);
		jw_uint(w, "noise_ns", noise);
		jw_uint(w, "noise_ns_per_s", noise_per_second(noise, meas));
		jw_uint(w, "available_ppm", noise_available_ppm(meas, noise));
		jw_uint(w, "loops_per_s", noise_per_second(loops, meas));
		jw_uint(w, "throttle_gaps", atomic_load_explicit(&t->throttle_gaps,
								  memory_order_relaxed));
		jw_arr_begin(w, "gaps");
		for (size_t k = 0; k < n; k++) {
			jw_arr_begin(w, NULL);
			jw_uint(w, NULL, ctx->scratch[k].start_mono_ns);
			jw_uint(w, NULL, ctx->scratch[k].end_mono_ns);
			jw_arr_end(w);
		}
		jw_arr_end(w);
		jw_uint(w, "gaps_dropped",
			t->dropped + atomic_load_explicit(&t->gaps_lost, memory_order_relaxed));
		jw_obj_end(w);
	}
	jw_arr_end(w);
	(void)final;
	jw_obj_end(w);
}

static int noise_prepare(void *p, struct probe_plan *plan)
{
	struct noise_ctx *ctx = p;
	const struct noise_cfg *c = ctx->cfg;
	const char *why_hw = NULL;
	bool hw = c->counter_idx != 2 && counter_hw_safe(&why_hw);
	if (c->counter_idx == 1 && !hw) {
		fprintf(stderr, "rtlab-probe noise: skipped: --counter counter: %s\n", why_hw);
		return RL_EXIT_SKIPPED;
	}
	if (counter_calibrate(&ctx->cnt, hw, 50 * NS_PER_MS) != 0)
		return RL_EXIT_ERROR;
	ctx->why_hw = why_hw ? why_hw : ctx->cnt.why;

	size_t tsz = (c->n_cpus * sizeof(*ctx->threads) + RL_CACHELINE - 1) &
		     ~(size_t)(RL_CACHELINE - 1);
	ctx->threads = aligned_alloc(RL_CACHELINE, tsz);
	ctx->chans = calloc(c->n_cpus, sizeof(*ctx->chans));
	ctx->scratch = calloc(NOISE_GAP_RING, sizeof(*ctx->scratch));
	struct probe_thread *pt = probe_plan_threads(plan, c->n_cpus);
	if (!ctx->threads || !ctx->chans || !ctx->scratch || !pt) {
		fprintf(stderr, "rtlab-probe noise: out of memory\n");
		return RL_EXIT_ERROR;
	}
	memset(ctx->threads, 0, tsz);
	for (size_t i = 0; i < c->n_cpus; i++) {
		char name[32];
		snprintf(name, sizeof(name), "cpu%d", c->cpus[i]);
		int e = channel_create(&ctx->chans[i], name, c->cpus[i], c->run->window_ns, 0);
		if (e) {
			fprintf(stderr, "rtlab-probe noise: cannot allocate a channel: %s\n",
				strerror(-e));
			return RL_EXIT_ERROR;
		}
		ctx->threads[i].ctx = ctx;
		ctx->threads[i].ch = ctx->chans[i];
		ctx->threads[i].idx = i;
		probe_thread_place(&pt[i], c->cpus[i], c->policy, c->priority, "%s", name);
		pt[i].arg = &ctx->threads[i];
		pt[i].chan = ctx->chans[i];
	}
	probe_plan_channels(plan, ctx->chans, c->n_cpus, &ctx->stop, &ctx->thr);
	return 0;
}

/* Every channel starts at the same counter reading: the start on the counter's scale. */
static int noise_start(void *p, const struct probe_start *s)
{
	struct noise_ctx *ctx = p;
	const struct noise_cfg *c = ctx->cfg;
	uint64_t now_mono = rl_now_ns(CLOCK_MONOTONIC);
	uint64_t now_ticks = counter_read_ordered(&ctx->cnt);
	uint64_t lead = s->monotonic_ns > now_mono ? s->monotonic_ns - now_mono : 0;
	ctx->start_ticks = now_ticks + counter_ns_to_ticks(&ctx->cnt, lead);
	ctx->end_ticks = c->duration_ns
				 ? ctx->start_ticks + counter_ns_to_ticks(&ctx->cnt, c->duration_ns)
				 : UINT64_MAX;
	return 0;
}

static void noise_write_effective(const void *p, struct jsonw *w)
{
	const struct noise_ctx *ctx = p;
	const struct noise_cfg *c = ctx->cfg;
	counter_write_effective(w, &ctx->cnt, ctx->why_hw, true);
	if (c->rt_runtime_us > -2 && c->rt_period_us > -2) {
		jw_int(w, "sched_rt_runtime_us", c->rt_runtime_us);
		jw_int(w, "sched_rt_period_us", c->rt_period_us);
	}
	jw_uint_or_null(w, "throttle_gap_ns", c->throttle_ns);
}

static void noise_write_logs(const void *p, struct jsonw *w, int fd)
{
	const struct noise_ctx *ctx = p;
	if (ctx->cfg->throttle_ns)
		out_log(w, fd, "info", "rt_throttling",
			"a busy RT loop is throttled by sched_rt_runtime_us: expect one gap of about sched_rt_period_us - sched_rt_runtime_us per period (counted as throttle_gaps); use --policy other to measure OS noise without it");
}

static void noise_fini(void *p)
{
	struct noise_ctx *ctx = p;
	probe_free_channels(ctx->chans, ctx->cfg->n_cpus);
	free(ctx->threads);
	free(ctx->scratch);
}

const struct probe_ops noise_probe = {
	.name = "noise",
	.summary = "OS noise on polling cores: gaps in a busy loop per CPU (oslat/osnoise class)",
	.usage = "Each measured CPU gets one pinned thread that spins reading a fast counter\n"
		 "(TSC/cntvct when invariant and calibrated, else the vDSO CLOCK_MONOTONIC)\n"
		 "and records every gap above --gap-threshold. Default policy is other: a\n"
		 "busy fifo/rr loop is throttled (sched_rt_runtime_us) into ~50 ms gaps.",
	PROBE_OPTIONS(noise_opts, NOISE_SHARED, O_THRESHOLD_OLD),
	.housekeeping_help = "first online CPU not measured, else unpinned",
	.stack = NOISE_STACK,
	.ctx_size = sizeof(struct noise_ctx),
	PROBE_HOOKS(noise),
	.write_effective = noise_write_effective,
	.write_logs = noise_write_logs,
	.write_extra = noise_extra,
};
