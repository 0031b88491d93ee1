/* SPDX-License-Identifier: MIT */
/*
 * The `interfere` probe: multi-core scaling and interference.
 *
 *   --mode amdahl   a reference job (serial part + parallel part, each unit
 *                   touches one cache line of a per-thread working set) run
 *                   on 1..N CPUs, --repeats times each, interleaved; channel
 *                   amdahl.n<N> holds the execution times, the result lists
 *                   them raw for the host's Amdahl fit (rtlab.probes.interfere).
 *   --mode pairs    a pointer chase over --working-set (cache-sensitive) and a
 *                   compute loop, run on cpu A alone and next to the same
 *                   workload on a partner of every topology class found in
 *                   sysfs (smt, same_l2, same_l3, cross_l3).
 *   --mode sharing  atomic increments of one shared counter, of per-CPU
 *                   counters on their own cache lines and of per-CPU counters
 *                   packed into one line (false sharing), on 1..N threads;
 *                   channel values are the time of --batch operations.
 *
 * Workers are pinned, one per CPU; a coordinator (the reporter's CPU) hands
 * them jobs and sleeps. Only workers time work, with the ordered counter.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "channel.h"
#include "counter.h"
#include "interfere.h"
#include "probe_common.h"
#include "opts.h"
#include "output.h"
#include "probe.h"
#include "reporter.h"
#include "rt.h"
#include "sysinfo.h"

#define IFR_STACK (256 * 1024)
#define IFR_MAX_CH 512
#define IFR_START_LEAD_NS (20 * NS_PER_MS)
#if defined(__x86_64__) || defined(__i386__)
#define CPU_RELAX() __asm__ __volatile__("pause" ::: "memory")
#elif defined(__aarch64__) || (defined(__arm__) && __ARM_ARCH >= 7)
#define CPU_RELAX() __asm__ __volatile__("yield" ::: "memory")
#else
#define CPU_RELAX() atomic_signal_fence(memory_order_seq_cst)
#endif

static const char *const mode_names[] = { "amdahl", "pairs", "sharing", NULL };
enum { MODE_AMDAHL, MODE_PAIRS, MODE_SHARING };

enum {
	O_MODE, O_CPUS, O_POLICY, O_PRIORITY, O_REPEATS, O_SERIAL, O_WS, O_RUN_LEN, O_OPS,
	O_BATCH, O_MLOCK, O_SNAPSHOT, O_OUTPUT, O_ALLOW_NON_RT, O_COUNT
};

static const struct opt_def ifr_opts[O_COUNT] = {
	[O_MODE] = { "mode", OPT_ENUM, "MODE", "experiment: amdahl scaling, topology pairs, sharing",
		     0, 0, mode_names, "amdahl", NULL },
	[O_CPUS] = { "cpus", OPT_CPULIST, NULL, "CPUs to use (N = their count; pairs: first is A)",
		     0, 0, NULL, NULL, "all online CPUs" },
	[O_POLICY] = { "policy", OPT_ENUM, "POLICY", "scheduling policy of the workers", 0, 0,
		       rt_policy_names, "other", NULL },
	[O_PRIORITY] = { "priority", OPT_INT, NULL, "priority (fifo/rr: 1..99; other: 0)", 0, 99,
			 NULL, NULL, "1 for fifo/rr, 0 otherwise" },
	[O_REPEATS] = { "repeats", OPT_INT, "R", "runs per configuration (amdahl, pairs)", 1,
			10000, NULL, "11", NULL },
	[O_SERIAL] = { "serial-permille", OPT_INT, "P",
		       "amdahl: serial share of the job in 1/1000 (300 = 30 %)", 0, 1000, NULL,
		       "300", NULL },
	[O_WS] = { "working-set", OPT_INT, "KIB",
		   "working set per thread in KiB (amdahl default 64, pairs default 16384)", 4,
		   4 * 1024 * 1024, NULL, NULL, "by mode" },
	[O_RUN_LEN] = { "run-length", OPT_DURATION, NULL,
			"amdahl/pairs: length of one run on one CPU (sets the work units)",
			(int64_t)NS_PER_MS, (int64_t)(60 * NS_PER_SEC), NULL, "20ms", NULL },
	[O_OPS] = { "ops", OPT_INT, "N", "sharing: operations per thread per run", 1000,
		    1000000000, NULL, "200000", NULL },
	[O_BATCH] = { "batch", OPT_INT, "N", "sharing: operations per recorded value", 1, 100000,
		      NULL, "100", NULL },
	[O_MLOCK] = OPT_DEF_MLOCK,
	[O_SNAPSHOT] = OPT_DEF_SNAPSHOT,
	[O_OUTPUT] = OPT_DEF_OUTPUT,
	[O_ALLOW_NON_RT] = { "allow-non-rt", OPT_BOOL, NULL,
			     "run even if the policy/pinning/mlock did not take effect", 0, 0, NULL,
			     "false", NULL },
};

struct ifr_cfg {
	int mode;
	int cpus[CPU_SETSIZE];
	size_t n_cpus;
	enum rt_policy policy;
	int priority;
	unsigned repeats;
	unsigned serial_pm;
	size_t ws_bytes;
	uint64_t run_ns;
	uint64_t ops;
	uint64_t batch;
	bool mlock;
	uint64_t snapshot_ns;
	const char *output;
	bool allow_non_rt;
};

enum job_kind { JOB_NONE, JOB_AMDAHL, JOB_CHASE, JOB_COMPUTE, JOB_SHARE, JOB_EXIT };
enum share_kind { SH_SHARED, SH_PERCPU, SH_FALSE, SH_COUNT };
static const char *const share_names[] = { "shared", "percpu", "false" };
static const char *const wl_names[] = { "chase", "compute" };

struct ifr_ctx;

struct ifr_worker {
	_Alignas(RL_CACHELINE) struct ifr_ctx *ctx;
	size_t idx;
	int cpu;
	pthread_t thread;
	struct pc_setup setup;
	atomic_int tid;
	uint8_t *buf;		/* working set (amdahl) */
	uint32_t *chase;	/* pointer-chase cycle (pairs) */
	size_t chase_n;
	/* the current job, written by the coordinator before the generation bump */
	int kind;
	uint64_t units;
	bool timed;		/* record the time of this job */
	struct channel *ch;
	uint64_t *raw;		/* where to store the time (ns), or NULL */
	int share;
	uint64_t result_ns;
	uint64_t sink;
};

/* Counters for the sharing mode, each in its own line or packed in one. */
struct padded_counter {
	_Alignas(RL_CACHELINE) atomic_uint_least64_t v;
};
struct packed_counters {
	_Alignas(RL_CACHELINE) atomic_uint_least64_t v[8];
};

struct ifr_ctx {
	const struct ifr_cfg *cfg;
	struct ifr_cfg cfg_store;
	struct counter cnt;
	struct ifr_worker *w;

	pthread_mutex_t lock;
	pthread_cond_t cond_work, cond_done;
	uint64_t gen;		/* under lock: job generation */
	unsigned active;	/* under lock: workers in the current job */
	unsigned pending;	/* under lock: not yet finished */

	_Alignas(RL_CACHELINE) atomic_uint_least64_t par_go;	/* amdahl: parallel phase id */
	_Alignas(RL_CACHELINE) atomic_uint par_done;
	_Alignas(RL_CACHELINE) atomic_uint start_gate;		/* sharing/pairs: common start */
	_Alignas(RL_CACHELINE) atomic_bool aggr_stop;		/* pairs: stop the aggressor */
	_Alignas(RL_CACHELINE) atomic_uint_least64_t shared_ctr;
	struct padded_counter percpu[64];
	struct packed_counters packed;

	atomic_bool stop;
	atomic_bool done;
	struct channel *chans[IFR_MAX_CH];
	size_t n_ch;
	/* raw times: amdahl [n][repeat]; pairs [config][repeat] */
	uint64_t *raw;
	size_t raw_rows;
	uint64_t *raw_count;	/* per row */
	int pair_partner[IFR_CLASS_COUNT];	/* -1: class missing */
	uint64_t units_amdahl, units_wl[2];
	uint64_t start_mono;
	bool failed;
};

static int ifr_init(void **out, const struct opt_value *v, const struct probe_env *env,
		    char *err, size_t errlen)
{
	struct ifr_ctx *ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return -ENOMEM;
	struct ifr_cfg *c = &ctx->cfg_store;
	c->mode = (int)v[O_MODE].i;
	const cpu_set_t *cpus = v[O_CPUS].set ? &v[O_CPUS].cpus : env->online;
	for (int i = 0; i < CPU_SETSIZE; i++)
		if (CPU_ISSET(i, cpus))
			c->cpus[c->n_cpus++] = i;
	if (c->n_cpus > 64) {
		snprintf(err, errlen, "--cpus: at most 64 CPUs");
		free(ctx);
		return -EINVAL;
	}
	if (c->mode == MODE_PAIRS && c->n_cpus < 2) {
		snprintf(err, errlen, "--cpus: --mode pairs needs at least 2 CPUs");
		free(ctx);
		return -EINVAL;
	}
	c->policy = (enum rt_policy)v[O_POLICY].i;
	if (c->policy == RT_DEADLINE) {
		snprintf(err, errlen, "--policy: deadline is not supported here; use other, fifo or rr");
		free(ctx);
		return -EINVAL;
	}
	int e = pc_priority(c->policy, v[O_PRIORITY].given, v[O_PRIORITY].i, &c->priority, err,
			    errlen);
	if (e) {
		free(ctx);
		return e;
	}
	c->repeats = (unsigned)v[O_REPEATS].i;
	c->serial_pm = (unsigned)v[O_SERIAL].i;
	int64_t kib = v[O_WS].set ? v[O_WS].i : c->mode == MODE_PAIRS ? 16384 : 64;
	c->ws_bytes = (size_t)kib * 1024;
	c->run_ns = (uint64_t)v[O_RUN_LEN].i;
	c->ops = (uint64_t)v[O_OPS].i;
	c->batch = (uint64_t)v[O_BATCH].i;
	c->mlock = v[O_MLOCK].i != 0;
	c->snapshot_ns = (uint64_t)v[O_SNAPSHOT].i;
	c->output = v[O_OUTPUT].set ? v[O_OUTPUT].s : NULL;
	c->allow_non_rt = v[O_ALLOW_NON_RT].i != 0;
	ctx->cfg = c;
	*out = ctx;
	return 0;
}

static void ifr_report_config(const void *p, struct jsonw *w, const char *key)
{
	const struct ifr_cfg *c = ((const struct ifr_ctx *)p)->cfg;
	jw_obj_begin(w, key);
	jw_str(w, "mode", mode_names[c->mode]);
	jw_arr_begin(w, "cpus");
	for (size_t i = 0; i < c->n_cpus; i++)
		jw_int(w, NULL, c->cpus[i]);
	jw_arr_end(w);
	jw_str(w, "policy", rt_policy_names[c->policy]);
	jw_int(w, "priority", c->priority);
	jw_uint(w, "repeats", c->repeats);
	jw_uint(w, "serial_permille", c->serial_pm);
	jw_uint(w, "working_set_bytes", c->ws_bytes);
	jw_uint(w, "run_length_ns", c->run_ns);
	jw_uint(w, "ops", c->ops);
	jw_uint(w, "batch", c->batch);
	jw_bool(w, "mlock", c->mlock);
	jw_uint(w, "snapshot_interval_ns", c->snapshot_ns);
	jw_str_or_null(w, "output", c->output);
	jw_bool(w, "allow_non_rt", c->allow_non_rt);
	jw_obj_end(w);
}

/* ---- workloads (only these run between the two counter reads) ---- */

/* One unit: read-modify-write one cache line of the working set, a little math. */
static uint64_t work_lines(uint8_t *buf, size_t bytes, size_t *pos, uint64_t units, uint64_t x)
{
	size_t p = *pos;
	for (uint64_t i = 0; i < units; i++) {
		uint64_t *line = (uint64_t *)(void *)(buf + p);
		x = x * 6364136223846793005ull + line[0];
		line[0] = x >> 17;
		p += RL_CACHELINE;
		if (p >= bytes)
			p = 0;
	}
	*pos = p;
	return x;
}

static uint64_t work_chase(const uint32_t *next, uint64_t units, uint32_t *at)
{
	uint32_t i = *at;
	for (uint64_t k = 0; k < units; k++)
		i = next[(size_t)i * (RL_CACHELINE / sizeof(uint32_t))];
	*at = i;
	return i;
}

static uint64_t work_compute(uint64_t units, uint64_t x)
{
	for (uint64_t i = 0; i < units; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		x ^= x >> 29;
	}
	return x;
}

/* ---- jobs ---- */

static void finish_timed(struct ifr_worker *wk, uint64_t t0, uint64_t t1)
{
	const struct counter *cnt = &wk->ctx->cnt;
	uint64_t ns = counter_ticks_to_ns(cnt, t1 - t0);
	wk->result_ns = ns;
	if (wk->ch) {
		uint64_t now = rl_now_ns(CLOCK_MONOTONIC);
		uint64_t at = now > wk->ctx->start_mono ? now - wk->ctx->start_mono : 0;
		channel_record(wk->ch, at, ns, 0, false);
	}
	if (wk->raw)
		*wk->raw = ns;
}

static void job_amdahl(struct ifr_worker *wk)
{
	struct ifr_ctx *ctx = wk->ctx;
	const struct ifr_cfg *c = ctx->cfg;
	unsigned n = ctx->active;
	uint64_t serial, share;
	ifr_split(wk->units, c->serial_pm, n, &serial, &share);
	size_t pos = 0;
	if (wk->idx == 0) {
		uint64_t id = atomic_load(&ctx->par_go) + 1;
		uint64_t t0 = counter_read_ordered(&ctx->cnt);
		wk->sink += work_lines(wk->buf, c->ws_bytes, &pos, serial, t0);
		atomic_store_explicit(&ctx->par_go, id, memory_order_release);
		wk->sink += work_lines(wk->buf, c->ws_bytes, &pos, share, wk->sink);
		atomic_fetch_add(&ctx->par_done, 1);
		while (atomic_load_explicit(&ctx->par_done, memory_order_acquire) < n)
			CPU_RELAX();
		uint64_t t1 = counter_read_ordered(&ctx->cnt);
		finish_timed(wk, t0, t1);
	} else {
		while (atomic_load_explicit(&ctx->par_go, memory_order_acquire) != wk->result_ns)
			CPU_RELAX();
		wk->sink += work_lines(wk->buf, c->ws_bytes, &pos, share, wk->sink);
		atomic_fetch_add(&ctx->par_done, 1);
	}
}

static void job_workload(struct ifr_worker *wk)
{
	struct ifr_ctx *ctx = wk->ctx;
	uint32_t at = 0;
	/* common start: the aggressor (untimed) begins first */
	if (!wk->timed) {
		atomic_fetch_add(&ctx->start_gate, 1);
		while (!atomic_load_explicit(&ctx->aggr_stop, memory_order_relaxed)) {
			if (wk->kind == JOB_CHASE)
				wk->sink += work_chase(wk->chase, 4096, &at);
			else
				wk->sink += work_compute(4096, wk->sink);
		}
		return;
	}
	while (atomic_load_explicit(&ctx->start_gate, memory_order_acquire) < ctx->active - 1)
		CPU_RELAX();
	uint64_t t0 = counter_read_ordered(&ctx->cnt);
	if (wk->kind == JOB_CHASE)
		wk->sink += work_chase(wk->chase, wk->units, &at);
	else
		wk->sink += work_compute(wk->units, wk->sink);
	uint64_t t1 = counter_read_ordered(&ctx->cnt);
	atomic_store(&ctx->aggr_stop, true);
	finish_timed(wk, t0, t1);
}

static void job_share(struct ifr_worker *wk)
{
	struct ifr_ctx *ctx = wk->ctx;
	const struct ifr_cfg *c = ctx->cfg;
	atomic_uint_least64_t *ctr = wk->share == SH_SHARED   ? &ctx->shared_ctr
				     : wk->share == SH_PERCPU ? &ctx->percpu[wk->idx].v
							      : &ctx->packed.v[wk->idx % 8];
	const struct counter *cnt = &ctx->cnt;
	atomic_fetch_add(&ctx->start_gate, 1);
	while (atomic_load_explicit(&ctx->start_gate, memory_order_acquire) < ctx->active)
		CPU_RELAX();
	uint64_t batches = c->ops / c->batch;
	uint64_t mono0 = rl_now_ns(CLOCK_MONOTONIC);
	uint64_t at0 = mono0 > ctx->start_mono ? mono0 - ctx->start_mono : 0;
	uint64_t first = counter_read_ordered(cnt);
	for (uint64_t b = 0; b < batches; b++) {
		uint64_t t0 = counter_read_ordered(cnt);
		for (uint64_t i = 0; i < c->batch; i++)
			atomic_fetch_add_explicit(ctr, 1, memory_order_relaxed);
		uint64_t t1 = counter_read_ordered(cnt);
		channel_record(wk->ch, at0 + counter_ticks_to_ns(cnt, t1 - first),
			       counter_ticks_to_ns(cnt, t1 - t0), 0, false);
	}
}

static void *worker_main(void *arg)
{
	struct ifr_worker *wk = arg;
	struct ifr_ctx *ctx = wk->ctx;
	atomic_store(&wk->tid, (int)syscall(SYS_gettid));
	pc_setup_self(&wk->setup, wk->cpu, ctx->cfg->policy, ctx->cfg->priority);
	uint64_t gen = 0;
	pthread_mutex_lock(&ctx->lock);
	ctx->pending--;
	pthread_cond_broadcast(&ctx->cond_done);
	for (;;) {
		while (ctx->gen == gen)
			pthread_cond_wait(&ctx->cond_work, &ctx->lock);
		gen = ctx->gen;
		int kind = wk->kind;
		pthread_mutex_unlock(&ctx->lock);
		if (kind == JOB_EXIT)
			return NULL;
		if (kind == JOB_AMDAHL)
			job_amdahl(wk);
		else if (kind == JOB_CHASE || kind == JOB_COMPUTE)
			job_workload(wk);
		else if (kind == JOB_SHARE)
			job_share(wk);
		pthread_mutex_lock(&ctx->lock);
		wk->kind = JOB_NONE;
		if (kind != JOB_NONE && --ctx->pending == 0)
			pthread_cond_broadcast(&ctx->cond_done);
	}
}

/* Coordinator: start the jobs set in w[].kind (JOB_NONE = idle) and wait. */
static void dispatch(struct ifr_ctx *ctx)
{
	unsigned n = 0;
	for (size_t i = 0; i < ctx->cfg->n_cpus; i++)
		n += ctx->w[i].kind != JOB_NONE;
	atomic_store(&ctx->par_done, 0);
	atomic_store(&ctx->start_gate, 0);
	atomic_store(&ctx->aggr_stop, false);
	pthread_mutex_lock(&ctx->lock);
	ctx->active = n;
	ctx->pending = n;
	ctx->gen++;
	pthread_cond_broadcast(&ctx->cond_work);
	while (ctx->pending)
		pthread_cond_wait(&ctx->cond_done, &ctx->lock);
	pthread_mutex_unlock(&ctx->lock);
}

static void clear_jobs(struct ifr_ctx *ctx)
{
	for (size_t i = 0; i < ctx->cfg->n_cpus; i++) {
		struct ifr_worker *wk = &ctx->w[i];
		wk->kind = JOB_NONE;
		wk->timed = false;
		wk->ch = NULL;
		wk->raw = NULL;
	}
}

static int add_channel(struct ifr_ctx *ctx, const char *name, int cpu, struct channel **out)
{
	if (ctx->n_ch >= IFR_MAX_CH)
		return -ENOSPC;
	int e = channel_create(&ctx->chans[ctx->n_ch], name, cpu, 3600 * NS_PER_SEC, 0);
	if (e)
		return e;
	*out = ctx->chans[ctx->n_ch++];
	return 0;
}

/* Work units so that one run on one CPU lasts about run_ns. */
static uint64_t calibrate_units(struct ifr_ctx *ctx, int kind)
{
	struct ifr_worker *wk = &ctx->w[0];
	uint64_t units = 10000;
	for (int round = 0; round < 6; round++) {
		clear_jobs(ctx);
		wk->kind = kind;
		wk->units = units;
		wk->timed = true;
		if (kind == JOB_AMDAHL)
			wk->result_ns = atomic_load(&ctx->par_go) + 1;
		dispatch(ctx);
		uint64_t ns = wk->result_ns ? wk->result_ns : 1;
		if (ns >= ctx->cfg->run_ns / 4)
			return (uint64_t)((double)units * (double)ctx->cfg->run_ns / (double)ns) + 1;
		units *= 8;
	}
	return units;
}

static void run_amdahl(struct ifr_ctx *ctx)
{
	const struct ifr_cfg *c = ctx->cfg;
	ctx->units_amdahl = calibrate_units(ctx, JOB_AMDAHL);
	for (unsigned r = 0; r <= c->repeats && !atomic_load(&ctx->stop); r++) {
		for (size_t n = 1; n <= c->n_cpus && !atomic_load(&ctx->stop); n++) {
			clear_jobs(ctx);
			uint64_t id = atomic_load(&ctx->par_go) + 1;
			for (size_t i = 0; i < n; i++) {
				ctx->w[i].kind = JOB_AMDAHL;
				ctx->w[i].units = ctx->units_amdahl;
				ctx->w[i].result_ns = id; /* non-coordinators wait for this id */
			}
			if (r > 0) { /* round 0 warms up */
				ctx->w[0].ch = ctx->chans[n - 1];
				ctx->w[0].raw = &ctx->raw[(n - 1) * c->repeats + (r - 1)];
			}
			dispatch(ctx);
			if (r > 0)
				ctx->raw_count[n - 1]++;
		}
	}
}

/* pairs: rows = 2 workloads x (1 solo + classes) */
static void run_pairs(struct ifr_ctx *ctx)
{
	const struct ifr_cfg *c = ctx->cfg;
	for (int wl = 0; wl < 2; wl++)
		ctx->units_wl[wl] = calibrate_units(ctx, wl == 0 ? JOB_CHASE : JOB_COMPUTE);
	for (unsigned r = 0; r <= c->repeats && !atomic_load(&ctx->stop); r++) {
		for (int wl = 0; wl < 2; wl++) {
			for (int k = -1; k < IFR_CLASS_COUNT && !atomic_load(&ctx->stop); k++) {
				if (k >= 0 && ctx->pair_partner[k] < 0)
					continue;
				size_t row = (size_t)wl * (IFR_CLASS_COUNT + 1) + (size_t)(k + 1);
				clear_jobs(ctx);
				struct ifr_worker *a = &ctx->w[0];
				a->kind = wl == 0 ? JOB_CHASE : JOB_COMPUTE;
				a->units = ctx->units_wl[wl];
				a->timed = true;
				if (r > 0) {
					a->ch = ctx->chans[row];
					a->raw = &ctx->raw[row * c->repeats + (r - 1)];
				}
				if (k >= 0) {
					struct ifr_worker *b = &ctx->w[ctx->pair_partner[k]];
					b->kind = a->kind;
				}
				dispatch(ctx);
				if (r > 0)
					ctx->raw_count[row]++;
			}
		}
	}
}

static void run_sharing(struct ifr_ctx *ctx)
{
	const struct ifr_cfg *c = ctx->cfg;
	size_t chi = 0;
	for (int s = 0; s < SH_COUNT; s++) {
		for (size_t n = 1; n <= c->n_cpus; n++) {
			clear_jobs(ctx);
			for (size_t i = 0; i < n; i++) {
				ctx->w[i].kind = JOB_SHARE;
				ctx->w[i].share = s;
				ctx->w[i].ch = ctx->chans[chi++];
			}
			if (!atomic_load(&ctx->stop))
				dispatch(ctx);
		}
	}
}

static void *coord_main(void *arg)
{
	struct ifr_ctx *ctx = arg;
	if (ctx->cfg->mode == MODE_AMDAHL)
		run_amdahl(ctx);
	else if (ctx->cfg->mode == MODE_PAIRS)
		run_pairs(ctx);
	else
		run_sharing(ctx);
	atomic_store(&ctx->done, true);
	rt_notify_main();
	return NULL;
}

static void write_raw(struct jsonw *w, const char *key, const uint64_t *v, uint64_t n)
{
	jw_arr_begin(w, key);
	for (uint64_t i = 0; i < n; i++)
		jw_uint(w, NULL, v[i]);
	jw_arr_end(w);
}

/* Reporter hook: the raw timings and set-up facts, in the result only. */
static void ifr_extra(void *arg, struct jsonw *w, bool final)
{
	struct ifr_ctx *ctx = arg;
	const struct ifr_cfg *c = ctx->cfg;
	if (!final)
		return;
	jw_obj_begin(w, "interfere");
	jw_str(w, "mode", mode_names[c->mode]);
	if (c->mode == MODE_AMDAHL) {
		jw_uint(w, "serial_permille", c->serial_pm);
		jw_uint(w, "units", ctx->units_amdahl);
		jw_arr_begin(w, "runs");
		for (size_t n = 1; n <= c->n_cpus; n++) {
			jw_obj_begin(w, NULL);
			jw_uint(w, "n", n);
			jw_str(w, "channel", ctx->chans[n - 1]->name);
			write_raw(w, "ns", &ctx->raw[(n - 1) * c->repeats], ctx->raw_count[n - 1]);
			jw_obj_end(w);
		}
		jw_arr_end(w);
	} else if (c->mode == MODE_PAIRS) {
		jw_int(w, "cpu_a", c->cpus[0]);
		jw_arr_begin(w, "runs");
		for (int wl = 0; wl < 2; wl++) {
			for (int k = -1; k < IFR_CLASS_COUNT; k++) {
				if (k >= 0 && ctx->pair_partner[k] < 0)
					continue;
				size_t row = (size_t)wl * (IFR_CLASS_COUNT + 1) + (size_t)(k + 1);
				jw_obj_begin(w, NULL);
				jw_str(w, "workload", wl_names[wl]);
				jw_str(w, "class", k < 0 ? "solo" : ifr_class_names[k]);
				if (k < 0)
					jw_null(w, "cpu_b");
				else
					jw_int(w, "cpu_b", c->cpus[ctx->pair_partner[k]]);
				jw_uint(w, "units", ctx->units_wl[wl]);
				jw_str(w, "channel", ctx->chans[row]->name);
				write_raw(w, "ns", &ctx->raw[row * c->repeats], ctx->raw_count[row]);
				jw_obj_end(w);
			}
		}
		jw_arr_end(w);
		jw_arr_begin(w, "classes_present");
		for (int k = 0; k < IFR_CLASS_COUNT; k++)
			if (ctx->pair_partner[k] >= 0)
				jw_str(w, NULL, ifr_class_names[k]);
		jw_arr_end(w);
		jw_arr_begin(w, "classes_missing");
		for (int k = 0; k < IFR_CLASS_COUNT; k++)
			if (ctx->pair_partner[k] < 0)
				jw_str(w, NULL, ifr_class_names[k]);
		jw_arr_end(w);
	} else {
		jw_uint(w, "batch", c->batch);
		jw_uint(w, "ops", c->ops);
		jw_arr_begin(w, "runs");
		size_t chi = 0;
		for (int s = 0; s < SH_COUNT; s++) {
			for (size_t n = 1; n <= c->n_cpus; n++) {
				jw_obj_begin(w, NULL);
				jw_str(w, "variant", share_names[s]);
				jw_uint(w, "threads", n);
				jw_arr_begin(w, "channels");
				for (size_t i = 0; i < n; i++)
					jw_str(w, NULL, ctx->chans[chi++]->name);
				jw_arr_end(w);
				jw_obj_end(w);
			}
		}
		jw_arr_end(w);
	}
	jw_obj_end(w);
}

static int make_channels(struct ifr_ctx *ctx)
{
	const struct ifr_cfg *c = ctx->cfg;
	char name[32];
	struct channel *ch;
	int e = 0;
	if (c->mode == MODE_AMDAHL) {
		for (size_t n = 1; n <= c->n_cpus && !e; n++) {
			snprintf(name, sizeof(name), "amdahl.n%u", (unsigned)n);
			e = add_channel(ctx, name, c->cpus[0], &ch);
		}
		ctx->raw_rows = c->n_cpus;
	} else if (c->mode == MODE_PAIRS) {
		for (int wl = 0; wl < 2 && !e; wl++) {
			for (int k = -1; k < IFR_CLASS_COUNT && !e; k++) {
				snprintf(name, sizeof(name), "%s.%s", wl_names[wl],
					 k < 0 ? "solo" : ifr_class_names[k]);
				e = add_channel(ctx, name, c->cpus[0], &ch);
			}
		}
		ctx->raw_rows = 2 * (IFR_CLASS_COUNT + 1);
	} else {
		for (int s = 0; s < SH_COUNT && !e; s++)
			for (size_t n = 1; n <= c->n_cpus && !e; n++)
				for (size_t i = 0; i < n && !e; i++) {
					snprintf(name, sizeof(name), "%s.n%u.t%u", share_names[s],
						 (unsigned)n, (unsigned)i);
					e = add_channel(ctx, name, c->cpus[i], &ch);
				}
		ctx->raw_rows = 1;
	}
	if (e)
		return e;
	ctx->raw = calloc(ctx->raw_rows * c->repeats, sizeof(uint64_t));
	ctx->raw_count = calloc(ctx->raw_rows, sizeof(uint64_t));
	return ctx->raw && ctx->raw_count ? 0 : -ENOMEM;
}

static int alloc_worker_memory(struct ifr_ctx *ctx, struct ifr_worker *wk)
{
	const struct ifr_cfg *c = ctx->cfg;
	size_t bytes = (c->ws_bytes + RL_CACHELINE - 1) & ~(size_t)(RL_CACHELINE - 1);
	if (c->mode == MODE_AMDAHL) {
		wk->buf = aligned_alloc(RL_CACHELINE, bytes);
		if (!wk->buf)
			return -ENOMEM;
		memset(wk->buf, (int)wk->idx, bytes);
	} else if (c->mode == MODE_PAIRS) {
		/* one uint32 "next" per cache line: every hop is a new line */
		wk->chase_n = bytes / RL_CACHELINE;
		uint32_t *order = malloc(wk->chase_n * sizeof(uint32_t));
		wk->chase = aligned_alloc(RL_CACHELINE, bytes);
		if (!order || !wk->chase) {
			free(order);
			return -ENOMEM;
		}
		memset(wk->chase, 0, bytes);
		ifr_make_cycle(order, wk->chase_n, 0x9e3779b97f4a7c15ull + wk->idx);
		for (size_t i = 0; i < wk->chase_n; i++)
			wk->chase[i * (RL_CACHELINE / sizeof(uint32_t))] = order[i];
		free(order);
	}
	return 0;
}

/* rt_wait_done_or_signal predicate: the measurement has finished. */
static bool measurement_done(const void *arg)
{
	const struct ifr_ctx *ctx = arg;
	return atomic_load(&ctx->done);
}

static int ifr_run(void *p, const struct probe_env *env)
{
	struct ifr_ctx *ctx = p;
	const struct ifr_cfg *c = ctx->cfg;
	int out_fd = STDOUT_FILENO, mlock_err = 0, code = RL_EXIT_ERROR, e;
	size_t created = 0;
	struct jsonw w;
	jw_init(&w);

	rt_block_signals(); /* inherited: signals reach only main's wait */
	pthread_mutex_init(&ctx->lock, NULL);
	pthread_cond_init(&ctx->cond_work, NULL);
	pthread_cond_init(&ctx->cond_done, NULL);

	if (c->output && (e = pc_open_out(c->output, &out_fd)) != 0) {
		fprintf(stderr, "rtlab-probe interfere: --output: cannot open %s: %s\n", c->output,
			strerror(-e));
		return RL_EXIT_ERROR;
	}
	const char *why_hw = NULL;
	bool hw = counter_hw_safe(&why_hw);
	if (counter_calibrate(&ctx->cnt, hw, 50 * NS_PER_MS) != 0)
		goto out;

	for (int k = 0; k < IFR_CLASS_COUNT; k++)
		ctx->pair_partner[k] = -1;
	struct ifr_topo topo;
	bool topo_ok = ifr_topo_read("/sys/devices/system/cpu", c->cpus[0], &topo) == 0;
	if (topo_ok)
		for (size_t i = 1; i < c->n_cpus; i++) {
			int k = ifr_classify(&topo, c->cpus[i]);
			if (k >= 0 && ctx->pair_partner[k] < 0)
				ctx->pair_partner[k] = (int)i;
		}

	if (c->mlock)
		mlock_err = rt_mlockall();
	size_t wsz = (c->n_cpus * sizeof(*ctx->w) + RL_CACHELINE - 1) & ~(size_t)(RL_CACHELINE - 1);
	ctx->w = aligned_alloc(RL_CACHELINE, wsz);
	if (!ctx->w || make_channels(ctx) != 0) {
		fprintf(stderr, "rtlab-probe interfere: out of memory\n");
		goto out;
	}
	memset(ctx->w, 0, wsz);
	for (size_t i = 0; i < c->n_cpus; i++) {
		ctx->w[i].ctx = ctx;
		ctx->w[i].idx = i;
		ctx->w[i].cpu = c->cpus[i];
		if (alloc_worker_memory(ctx, &ctx->w[i]) != 0) {
			fprintf(stderr, "rtlab-probe interfere: out of memory (working set)\n");
			goto out;
		}
	}
	for (size_t i = 0; i < ctx->n_ch; i++)
		atomic_store(&ctx->chans[i]->tid, 0);

	ctx->pending = (unsigned)c->n_cpus;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, IFR_STACK);
	for (; created < c->n_cpus; created++)
		if ((e = pthread_create(&ctx->w[created].thread, &attr, worker_main,
					&ctx->w[created])) != 0)
			break;
	pthread_attr_destroy(&attr);
	if (created < c->n_cpus) {
		fprintf(stderr, "rtlab-probe interfere: cannot create a thread: %s\n", strerror(e));
		_exit(RL_EXIT_ERROR);
	}
	pthread_mutex_lock(&ctx->lock);
	while (ctx->pending)
		pthread_cond_wait(&ctx->cond_done, &ctx->lock);
	pthread_mutex_unlock(&ctx->lock);
	for (size_t i = 0; i < ctx->n_ch; i++) {
		int cpu = ctx->chans[i]->cpu;
		for (size_t k = 0; k < c->n_cpus; k++)
			if (ctx->w[k].cpu == cpu)
				atomic_store(&ctx->chans[i]->tid, atomic_load(&ctx->w[k].tid));
	}

	bool rt_valid = !(c->mlock && mlock_err);
	char why[512] = "";
	for (size_t i = 0; i < c->n_cpus; i++) {
		if (!pc_setup_ok(&ctx->w[i].setup, c->policy, c->priority)) {
			if (rt_valid)
				pc_setup_why(&ctx->w[i].setup, c->policy, c->priority, why,
					     sizeof(why));
			rt_valid = false;
		}
	}
	if (!rt_valid && !why[0])
		snprintf(why, sizeof(why),
			 "cannot lock memory with mlockall (%s): run as root, pass --no-mlock or --allow-non-rt",
			 strerror(-mlock_err));
	bool skip = !rt_valid && !c->allow_non_rt;

	cpu_set_t rep_aff;
	if (rt_get_affinity_self(&rep_aff) != 0)
		CPU_ZERO(&rep_aff);
	if (skip) {
		fprintf(stderr, "rtlab-probe interfere: skipped: %s\n", why);
		code = RL_EXIT_SKIPPED;
		goto stop_workers;
	}

	uint64_t start_real = rl_now_ns(CLOCK_REALTIME) + IFR_START_LEAD_NS;
	ctx->start_mono = rl_now_ns(CLOCK_MONOTONIC) + IFR_START_LEAD_NS;
	pc_header_begin(&w, "interfere", env, start_real, ctx->start_mono);
	ifr_report_config(ctx, &w, "config");
	pc_effective_begin(&w, c->mlock, mlock_err);
	for (size_t i = 0; i < c->n_cpus; i++) {
		char name[32];
		snprintf(name, sizeof(name), "worker@cpu%d", c->cpus[i]);
		pc_effective_thread(&w, name, atomic_load(&ctx->w[i].tid), &ctx->w[i].setup);
	}
	jw_arr_end(&w);
	jw_obj_begin(&w, "counter");
	jw_str(&w, "kind", counter_kind_name(ctx->cnt.kind));
	jw_str(&w, "why", why_hw ? why_hw : "");
	jw_uint(&w, "ps_per_tick", (uint64_t)(ctx->cnt.ns_per_tick * 1000.0 + 0.5));
	jw_obj_end(&w);
	jw_obj_begin(&w, "topology");
	jw_int(&w, "cpu_a", c->cpus[0]);
	if (topo_ok) {
		jw_cpuset(&w, "smt_siblings", &topo.smt);
		jw_cpuset(&w, "l2_shared", &topo.l2);
		jw_cpuset(&w, "l3_shared", &topo.l3);
	}
	jw_obj_begin(&w, "partners");
	for (int k = 0; k < IFR_CLASS_COUNT; k++) {
		if (ctx->pair_partner[k] >= 0)
			jw_int(&w, ifr_class_names[k], c->cpus[ctx->pair_partner[k]]);
		else
			jw_null(&w, ifr_class_names[k]);
	}
	jw_obj_end(&w);
	jw_obj_end(&w);
	pc_effective_end(&w, &rep_aff, false, rt_valid);
	sysinfo_write(&w, "system");
	jw_obj_end(&w);
	int out_err = jw_emit(&w, out_fd);
	if (!rt_valid)
		out_log(&w, out_fd, "warning", "no_rt", why);
	if (c->mode == MODE_PAIRS)
		for (int k = 0; k < IFR_CLASS_COUNT; k++)
			if (ctx->pair_partner[k] < 0) {
				char msg[160];
				snprintf(msg, sizeof(msg),
					 "pair class %s does not exist among --cpus for CPU %d on this machine",
					 ifr_class_names[k], c->cpus[0]);
				out_log(&w, out_fd, "info", "pair_class_missing", msg);
			}

	struct reporter *rep = NULL;
	struct reporter_cfg rc = {
		.out_fd = out_fd,
		.samples_fd = -1,
		.snapshot_ns = c->snapshot_ns,
		.start_mono_ns = ctx->start_mono,
		.chans = ctx->chans,
		.n_chans = ctx->n_ch,
		.extra = ifr_extra,
		.extra_arg = ctx,
	};
	if ((e = reporter_start(&rep, &rc)) != 0) {
		fprintf(stderr, "rtlab-probe interfere: cannot start the reporter: %s\n",
			strerror(-e));
		goto stop_workers;
	}
	pthread_t coord;
	if ((e = pthread_create(&coord, NULL, coord_main, ctx)) != 0) {
		fprintf(stderr, "rtlab-probe interfere: cannot create a thread: %s\n", strerror(e));
		_exit(RL_EXIT_ERROR);
	}
	bool interrupted = rt_wait_done_or_signal(&ctx->stop, measurement_done, ctx);
	pthread_join(coord, NULL);
	struct reporter_outcome o = { .status = "completed", .exit_code = RL_EXIT_OK };
	reporter_outcome_stopped(&o, interrupted, NULL);
	code = reporter_conclude(rep, &o, out_err, "interfere");

stop_workers:
	clear_jobs(ctx);
	for (size_t i = 0; i < c->n_cpus; i++)
		ctx->w[i].kind = JOB_EXIT;
	pthread_mutex_lock(&ctx->lock);
	ctx->gen++;
	pthread_cond_broadcast(&ctx->cond_work);
	pthread_mutex_unlock(&ctx->lock);
	for (size_t i = 0; i < created; i++)
		pthread_join(ctx->w[i].thread, NULL);
out:
	jw_free(&w);
	if (out_fd != STDOUT_FILENO)
		close(out_fd);
	return code;
}

static void ifr_fini(void *p)
{
	struct ifr_ctx *ctx = p;
	if (!ctx)
		return;
	for (size_t i = 0; i < ctx->n_ch; i++)
		channel_destroy(ctx->chans[i]);
	if (ctx->w)
		for (size_t i = 0; i < ctx->cfg->n_cpus; i++) {
			free(ctx->w[i].buf);
			free(ctx->w[i].chase);
		}
	free(ctx->w);
	free(ctx->raw);
	free(ctx->raw_count);
	free(ctx);
}

const struct probe_ops interfere_probe = {
	.name = "interfere",
	.summary = "multi-core scaling (Amdahl), topology-pair interference, shared-state cost",
	.usage = "--mode amdahl: a job with a --serial-permille serial part on 1..N CPUs,\n"
		 "--repeats runs each (raw times in the result for the host's Amdahl fit).\n"
		 "--mode pairs: pointer chase / compute on CPU A alone and beside a partner\n"
		 "of each topology class (smt, same_l2, same_l3, cross_l3) that exists.\n"
		 "--mode sharing: shared atomic vs per-CPU vs false-shared counters.",
	.opts = ifr_opts,
	.n_opts = O_COUNT,
	.unavailable = NULL,
	.init = ifr_init,
	.report_config = ifr_report_config,
	.run = ifr_run,
	.fini = ifr_fini,
};
