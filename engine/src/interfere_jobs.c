/* SPDX-License-Identifier: MIT */
/*
 * The `interfere` probe's work: the workloads (only these run between the two counter
 * reads), the jobs the workers run, and the coordinator that hands them out for the
 * experiment of the mode and sleeps meanwhile (interfere_jobs.h).
 */
#include "interfere_jobs.h"

#include <stdatomic.h>

#if defined(__x86_64__) || defined(__i386__)
#define CPU_RELAX() __asm__ __volatile__("pause" ::: "memory")
#elif defined(__aarch64__) || (defined(__arm__) && __ARM_ARCH >= 7)
#define CPU_RELAX() __asm__ __volatile__("yield" ::: "memory")
#else
#define CPU_RELAX() atomic_signal_fence(memory_order_seq_cst)
#endif

const char *const ifr_share_names[] = { "shared", "percpu", "false" };
const char *const ifr_wl_names[] = { "chase", "compute" };

/* ---- workloads ---- */

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

void ifr_worker_loop(struct ifr_worker *wk)
{
	struct ifr_ctx *ctx = wk->ctx;
	uint64_t gen = 0;
	pthread_mutex_lock(&ctx->lock);
	for (;;) {
		while (ctx->gen == gen)
			pthread_cond_wait(&ctx->cond_work, &ctx->lock);
		gen = ctx->gen;
		int kind = wk->kind;
		pthread_mutex_unlock(&ctx->lock);
		if (kind == JOB_EXIT)
			return;
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

/* ---- the coordinator ---- */

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

void ifr_coordinate(struct ifr_ctx *ctx)
{
	if (ctx->cfg->mode == MODE_AMDAHL)
		run_amdahl(ctx);
	else if (ctx->cfg->mode == MODE_PAIRS)
		run_pairs(ctx);
	else
		run_sharing(ctx);
}

void ifr_stop_workers(struct ifr_ctx *ctx)
{
	clear_jobs(ctx);
	for (size_t i = 0; i < ctx->cfg->n_cpus; i++)
		ctx->w[i].kind = JOB_EXIT;
	pthread_mutex_lock(&ctx->lock);
	ctx->gen++;
	pthread_cond_broadcast(&ctx->cond_work);
	pthread_mutex_unlock(&ctx->lock);
}
