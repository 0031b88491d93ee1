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
 * them jobs and sleeps (interfere_jobs.c). Only workers time work, with the
 * ordered counter.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interfere_jobs.h"
#include "output.h"

#define IFR_STACK (256 * 1024)

static const char *const mode_names[] = { "amdahl", "pairs", "sharing", NULL };

enum {
	O_MODE, O_CPUS, O_POLICY, O_PRIORITY, O_REPEATS, O_SERIAL, O_WS, O_RUN_LEN, O_OPS,
	O_BATCH, O_COUNT
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
};

static int ifr_init(void *p, struct probe_args *a)
{
	const struct opt_value *v = a->vals;
	struct ifr_ctx *ctx = p;
	struct ifr_cfg *c = &ctx->cfg_store;
	c->run = a->run; /* no --housekeeping: the coordinator sleeps, the reporter shares its CPUs */
	c->mode = (int)v[O_MODE].i;
	const cpu_set_t *cpus = v[O_CPUS].set ? &v[O_CPUS].cpus : a->env->online;
	for (int i = 0; i < CPU_SETSIZE; i++)
		if (CPU_ISSET(i, cpus))
			c->cpus[c->n_cpus++] = i;
	if (c->n_cpus > 64) {
		snprintf(a->err, a->errlen, "--cpus: at most 64 CPUs");
		return -EINVAL;
	}
	if (c->mode == MODE_PAIRS && c->n_cpus < 2) {
		snprintf(a->err, a->errlen, "--cpus: --mode pairs needs at least 2 CPUs");
		return -EINVAL;
	}
	if (probe_sched_no_deadline(&v[O_POLICY], &v[O_PRIORITY], 1,
				    "--policy: deadline is not supported here; use other, fifo or rr",
				    &c->policy, &c->priority, a->err, a->errlen) != 0) {
		return -EINVAL;
	}
	c->repeats = (unsigned)v[O_REPEATS].i;
	c->serial_pm = (unsigned)v[O_SERIAL].i;
	int64_t kib = v[O_WS].set ? v[O_WS].i : c->mode == MODE_PAIRS ? 16384 : 64;
	c->ws_bytes = (size_t)kib * 1024;
	c->run_ns = (uint64_t)v[O_RUN_LEN].i;
	c->ops = (uint64_t)v[O_OPS].i;
	c->batch = (uint64_t)v[O_BATCH].i;
	ctx->cfg = c;
	return 0;
}

static void ifr_write_config(const void *p, struct jsonw *w)
{
	const struct ifr_cfg *c = ((const struct ifr_ctx *)p)->cfg;
	jw_str(w, "mode", mode_names[c->mode]);
	probe_write_threads_config(w, c->cpus, c->n_cpus, c->policy, c->priority);
	jw_uint(w, "repeats", c->repeats);
	jw_uint(w, "serial_permille", c->serial_pm);
	jw_uint(w, "working_set_bytes", c->ws_bytes);
	jw_uint(w, "run_length_ns", c->run_ns);
	jw_uint(w, "ops", c->ops);
	jw_uint(w, "batch", c->batch);
	probe_write_run_config(w, c->run, RUN_OPTS_COMMON);
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
				jw_str(w, "workload", ifr_wl_names[wl]);
				jw_str(w, "class", k < 0 ? "solo" : ifr_class_names[k]);
				jw_int_or_null(w, "cpu_b", k < 0 ? -1 : c->cpus[ctx->pair_partner[k]]);
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
				jw_str(w, "variant", ifr_share_names[s]);
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
				snprintf(name, sizeof(name), "%s.%s", ifr_wl_names[wl],
					 k < 0 ? "solo" : ifr_class_names[k]);
				e = add_channel(ctx, name, c->cpus[0], &ch);
			}
		}
		ctx->raw_rows = 2 * (IFR_CLASS_COUNT + 1);
	} else {
		for (int s = 0; s < SH_COUNT && !e; s++)
			for (size_t n = 1; n <= c->n_cpus && !e; n++)
				for (size_t i = 0; i < n && !e; i++) {
					snprintf(name, sizeof(name), "%s.n%u.t%u", ifr_share_names[s],
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

static int ifr_prepare(void *p, struct probe_plan *plan)
{
	struct ifr_ctx *ctx = p;
	const struct ifr_cfg *c = ctx->cfg;
	pthread_mutex_init(&ctx->lock, NULL);
	pthread_cond_init(&ctx->cond_work, NULL);
	pthread_cond_init(&ctx->cond_done, NULL);
	ctx->sync_init = true;
	ctx->why_hw = NULL;
	bool hw = counter_hw_safe(&ctx->why_hw);
	if (counter_calibrate(&ctx->cnt, hw, 50 * NS_PER_MS) != 0)
		return RL_EXIT_ERROR;

	for (int k = 0; k < IFR_CLASS_COUNT; k++)
		ctx->pair_partner[k] = -1;
	ctx->topo_ok = ifr_topo_read("/sys/devices/system/cpu", c->cpus[0], &ctx->topo) == 0;
	if (ctx->topo_ok)
		for (size_t i = 1; i < c->n_cpus; i++) {
			int k = ifr_classify(&ctx->topo, c->cpus[i]);
			if (k >= 0 && ctx->pair_partner[k] < 0)
				ctx->pair_partner[k] = (int)i;
		}

	size_t wsz = (c->n_cpus * sizeof(*ctx->w) + RL_CACHELINE - 1) & ~(size_t)(RL_CACHELINE - 1);
	ctx->w = aligned_alloc(RL_CACHELINE, wsz);
	/* one worker per CPU, and the coordinator */
	struct probe_thread *pt = probe_plan_threads(plan, c->n_cpus + 1);
	if (!ctx->w || !pt || make_channels(ctx) != 0) {
		fprintf(stderr, "rtlab-probe interfere: out of memory\n");
		return RL_EXIT_ERROR;
	}
	memset(ctx->w, 0, wsz);
	for (size_t i = 0; i < c->n_cpus; i++) {
		ctx->w[i].ctx = ctx;
		ctx->w[i].idx = i;
		ctx->w[i].cpu = c->cpus[i];
		if (alloc_worker_memory(ctx, &ctx->w[i]) != 0) {
			fprintf(stderr, "rtlab-probe interfere: out of memory (working set)\n");
			return RL_EXIT_ERROR;
		}
		probe_thread_place(&pt[i], c->cpus[i], c->policy, c->priority, "worker@cpu%d",
				   c->cpus[i]);
		pt[i].arg = &ctx->w[i];
		pt[i].until_stopped = true;
	}
	pt[c->n_cpus].helper = true; /* the coordinator: arg NULL */
	probe_plan_channels(plan, ctx->chans, ctx->n_ch, &ctx->stop, NULL);
	return 0;
}

/* A worker's channels are those on its CPU. */
static void ifr_thread_ready(void *p, struct probe_thread *pt)
{
	struct ifr_ctx *ctx = p;
	const struct ifr_worker *wk = pt->arg;
	if (!wk)
		return;
	for (size_t i = 0; i < ctx->n_ch; i++)
		if (ctx->chans[i]->cpu == wk->cpu)
			atomic_store(&ctx->chans[i]->tid, pt->rt.tid);
}

static int ifr_start(void *p, const struct probe_start *s)
{
	struct ifr_ctx *ctx = p;
	ctx->start_mono = s->monotonic_ns;
	return 0;
}

static void ifr_write_effective(const void *p, struct jsonw *w)
{
	const struct ifr_ctx *ctx = p;
	const struct ifr_cfg *c = ctx->cfg;
	counter_write_effective(w, &ctx->cnt, ctx->why_hw, false);
	jw_obj_begin(w, "topology");
	jw_int(w, "cpu_a", c->cpus[0]);
	if (ctx->topo_ok) {
		jw_cpuset(w, "smt_siblings", &ctx->topo.smt);
		jw_cpuset(w, "l2_shared", &ctx->topo.l2);
		jw_cpuset(w, "l3_shared", &ctx->topo.l3);
	}
	jw_obj_begin(w, "partners");
	for (int k = 0; k < IFR_CLASS_COUNT; k++) {
		jw_int_or_null(w, ifr_class_names[k],
			       ctx->pair_partner[k] >= 0 ? c->cpus[ctx->pair_partner[k]] : -1);
	}
	jw_obj_end(w);
	jw_obj_end(w);
}

static void ifr_write_logs(const void *p, struct jsonw *w, int fd)
{
	const struct ifr_ctx *ctx = p;
	const struct ifr_cfg *c = ctx->cfg;
	if (c->mode != MODE_PAIRS)
		return;
	for (int k = 0; k < IFR_CLASS_COUNT; k++)
		if (ctx->pair_partner[k] < 0) {
			char msg[160];
			snprintf(msg, sizeof(msg),
				 "pair class %s does not exist among --cpus for CPU %d on this machine",
				 ifr_class_names[k], c->cpus[0]);
			out_log(w, fd, "info", "pair_class_missing", msg);
		}
}

/* The workers run jobs until stopped; the coordinator's end is the run's. */
static void ifr_measure(void *p, struct probe_thread *pt)
{
	if (pt->arg)
		ifr_worker_loop(pt->arg);
	else
		ifr_coordinate(p);
}

static void ifr_stop(void *p)
{
	ifr_stop_workers(p);
}

static void ifr_fini(void *p)
{
	struct ifr_ctx *ctx = p;
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
	if (ctx->sync_init) {
		pthread_cond_destroy(&ctx->cond_done);
		pthread_cond_destroy(&ctx->cond_work);
		pthread_mutex_destroy(&ctx->lock);
	}
}

const struct probe_ops interfere_probe = {
	.name = "interfere",
	.summary = "multi-core scaling (Amdahl), topology-pair interference, shared-state cost",
	.usage = "--mode amdahl: a job with a --serial-permille serial part on 1..N CPUs,\n"
		 "--repeats runs each (raw times in the result for the host's Amdahl fit).\n"
		 "--mode pairs: pointer chase / compute on CPU A alone and beside a partner\n"
		 "of each topology class (smt, same_l2, same_l3, cross_l3) that exists.\n"
		 "--mode sharing: shared atomic vs per-CPU vs false-shared counters.",
	PROBE_OPTIONS(ifr_opts, RUN_OPTS_COMMON, O_COUNT),
	.stack = IFR_STACK,
	.ctx_size = sizeof(struct ifr_ctx),
	PROBE_HOOKS(ifr),
	.thread_ready = ifr_thread_ready,
	.write_effective = ifr_write_effective,
	.write_logs = ifr_write_logs,
	.write_extra = ifr_extra,
	.stop = ifr_stop,
};
