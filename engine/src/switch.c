/* SPDX-License-Identifier: MIT */
/*
 * The `switch` probe: task-switch and wake-up latency. A high-priority
 * waiter thread blocks in one wake mechanism (futex, condition variable,
 * pipe, eventfd, POSIX message queue, signal, SysV semaphore: wake.h) while a
 * lower-priority thread busy-runs on its CPU. A waker thread, one priority
 * below the waiter, sleeps on absolute deadlines and, every period, wakes one
 * waiter (round robin over the mechanisms). Latency = waiter running (clock
 * read right after its wait returns) - wake request (clock read right before
 * the waking call). Same-CPU waker: switch latency; other-CPU waker: cross-CPU
 * wake-up latency. Afterwards two checks: priority order and priority
 * inheritance (switch_checks.h; results in result.checks).
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "channel.h"
#include "period.h"
#include "probe.h"
#include "switch_checks.h"
#include "wake.h"


static const char *const placement_names[] = { "same", "cross", "both", NULL };
enum { PL_SAME, PL_CROSS, PL_BOTH };

enum {
	O_MECH, O_PLACEMENT, O_CPU, O_WAKER_CPU, O_PRIORITY, O_INTERVAL, O_DURATION, O_LOOPS,
	O_BUSY, O_ORDER, O_ORDER_WORKERS, O_ORDER_ROUNDS, O_ORDER_WORK, O_PI, O_PI_BUSY,
	O_PI_HOLD, O_PI_ROUNDS, O_STRICT,
	O_CPU_OLD, O_COUNT
};
#define SWITCH_SHARED (RUN_OPTS_COMMON | RUN_OPT(HOUSEKEEPING) | RUN_OPT(WINDOW))

static const struct opt_def switch_opts[O_COUNT] = {
	[O_MECH] = { "mechanism", OPT_STRING, "LIST",
		     "wake mechanisms, comma-separated: futex,condvar,pipe,eventfd,mq,signal,sysv-sem, or all",
		     0, 0, NULL, "all", NULL },
	[O_PLACEMENT] = { "placement", OPT_ENUM, "WHERE",
			  "waker on the waiter's CPU (same), on another CPU (cross), or both", 0, 0,
			  placement_names, "same", NULL },
	[O_CPU] = { "cpus", OPT_CPULIST, "CPU",
		    "CPU of the woken (waiter) threads and the busy runner", 0, 1, NULL, NULL,
		    "last online CPU" },
	[O_WAKER_CPU] = { "waker-cpu", OPT_INT, "CPU", "CPU of the cross-CPU waker", 0,
			  CPU_SETSIZE - 1, NULL, NULL, "first online CPU other than --cpus" },
	[O_PRIORITY] = { "priority", OPT_INT, NULL,
			 "SCHED_FIFO priority of the waiters; wakers run one below", 2, 99, NULL, "90",
			 NULL },
	[O_INTERVAL] = { "interval", OPT_DURATION, NULL, "period of the waker (one wake per period)",
			 (int64_t)(20 * NS_PER_US), (int64_t)(10 * NS_PER_SEC), NULL, "1ms", NULL },
	[O_DURATION] = { "duration", OPT_DURATION, NULL, "stop measuring after this run time",
			 (int64_t)NS_PER_MS, (int64_t)(1000 * 3600 * NS_PER_SEC), NULL, NULL,
			 "until SIGINT/SIGTERM" },
	[O_LOOPS] = { "loops", OPT_INT, NULL, "stop after N wake-ups per channel", 1,
		      INT64_MAX / 64, NULL, NULL, "until SIGINT/SIGTERM" },
	[O_BUSY] = { "busy", OPT_BOOL, NULL,
		     "a SCHED_OTHER thread busy-runs on --cpus while measuring (preempt-test condition)",
		     0, 0, NULL, "true", NULL },
	[O_ORDER] = { "order-check", OPT_BOOL, NULL,
		      "after measuring, check that higher priorities finish first", 0, 0, NULL,
		      "true", NULL },
	[O_ORDER_WORKERS] = { "order-workers", OPT_INT, NULL,
			      "workers (distinct priorities) of the order check", 2,
			      SW_MAX_ORDER_WORKERS, NULL, "5", NULL },
	[O_ORDER_ROUNDS] = { "order-rounds", OPT_INT, NULL, "rounds of the order check", 1,
			     SW_MAX_ORDER_ROUNDS, NULL, "5", NULL },
	[O_ORDER_WORK] = { "order-work", OPT_DURATION, NULL,
			   "CPU time each order-check worker burns", (int64_t)(10 * NS_PER_US),
			   (int64_t)(100 * NS_PER_MS), NULL, "200us", NULL },
	[O_PI] = { "pi-check", OPT_BOOL, NULL,
		   "after measuring, check priority inheritance (PI mutex vs plain mutex)", 0, 0,
		   NULL, "true", NULL },
	[O_PI_BUSY] = { "pi-busy", OPT_DURATION, NULL,
			"how long the medium-priority thread busy-runs in the PI check",
			(int64_t)NS_PER_MS, (int64_t)(500 * NS_PER_MS), NULL, "20ms", NULL },
	[O_PI_HOLD] = { "pi-hold", OPT_DURATION, NULL,
			"critical section of the low-priority lock holder in the PI check",
			(int64_t)(10 * NS_PER_US), (int64_t)(100 * NS_PER_MS), NULL, "500us", NULL },
	[O_PI_ROUNDS] = { "pi-rounds", OPT_INT, NULL, "rounds of the PI check per mutex kind", 1,
			  SW_MAX_PI_ROUNDS, NULL, "3", NULL },
	[O_STRICT] = { "check-strict", OPT_BOOL, NULL,
		       "exit 3 (status check_failed) when the order or PI check fails", 0, 0, NULL,
		       "false", NULL },
	[O_CPU_OLD] = OPT_DEF_ALIAS("cpu", "cpus"),
};

struct sw_cfg {
	const struct run_opts *run;
	unsigned mechs;
	int placement;
	int cpu;
	int waker_cpu;		/* -1: no cross placement */
	int priority;
	uint64_t interval_ns;
	uint64_t duration_ns;	/* 0: none */
	uint64_t loops;		/* 0: none */
	bool busy;
	struct sw_check_cfg check;
	bool strict;
};

struct sw_ctx;

/* What a thread of the probe is (the first member of its object). */
enum sw_kind { SW_WAITER, SW_WAKER, SW_BUSY };

/* One waiter (and its channel and mechanism objects). */
struct sw_pair {
	_Alignas(RL_CACHELINE) enum sw_kind kind;
	struct sw_ctx *ctx;
	struct channel *ch;
	int waker_cpu;
	int run_err;
	bool open;		/* wo is open */
	struct wake_obj wo;
	/* hand-over from waker to waiter */
	_Alignas(RL_CACHELINE) _Atomic uint64_t t_wake;
	_Atomic uint64_t pending_missed;
	atomic_bool armed;
	atomic_bool quit;
};

struct sw_waker {
	enum sw_kind kind;
	struct sw_ctx *ctx;
	int cpu;
	struct sw_pair **pairs;
	size_t n_pairs;
	uint64_t phase_ns;
	int run_err;
};

struct sw_ctx {
	const struct sw_cfg *cfg;
	struct sw_cfg cfg_store;
	struct sw_pair *pairs;
	size_t n_pairs;
	struct sw_waker wakers[2];
	size_t n_wakers;
	enum sw_kind busy;	/* the busy runner's object */
	struct channel **chans;
	atomic_bool stop;
	atomic_bool busy_stop;
	uint64_t start_ns;
	int sig;
	struct sw_checks checks;
};

static int first_other(const cpu_set_t *s, int not)
{
	for (int i = 0; i < CPU_SETSIZE; i++)
		if (CPU_ISSET(i, s) && i != not)
			return i;
	return -1;
}

static int switch_init(void *p, struct probe_args *a)
{
	const struct opt_value *v = a->vals;
	struct sw_ctx *ctx = p;
	struct sw_cfg *c = &ctx->cfg_store;
	c->run = a->run;
	if (wake_parse_mechs(v[O_MECH].s, &c->mechs, a->err, a->errlen) != 0)
		return -EINVAL;
	c->placement = (int)v[O_PLACEMENT].i;
	int last = -1;
	for (int i = 0; i < CPU_SETSIZE; i++)
		if (CPU_ISSET(i, a->env->online))
			last = i;
	c->cpu = v[O_CPU].set ? opts_one_cpu(&v[O_CPU]) : last;
	c->waker_cpu = -1;
	if (c->placement != PL_SAME) {
		c->waker_cpu = v[O_WAKER_CPU].set ? (int)v[O_WAKER_CPU].i
						  : first_other(a->env->online, c->cpu);
		if (c->waker_cpu < 0) {
			snprintf(a->err, a->errlen,
				 "--placement %s: needs a second online CPU for the waker; only CPU %d is online",
				 placement_names[c->placement], c->cpu);
			return -EINVAL;
		}
		if (c->waker_cpu == c->cpu || !CPU_ISSET(c->waker_cpu, a->env->online)) {
			snprintf(a->err, a->errlen,
				 "--waker-cpu: must be an online CPU other than --cpus %d", c->cpu);
			return -EINVAL;
		}
	}
	c->priority = (int)v[O_PRIORITY].i;
	c->interval_ns = (uint64_t)v[O_INTERVAL].i;
	if (probe_run_length(&v[O_DURATION], &v[O_LOOPS], c->interval_ns, &c->duration_ns,
			     &c->loops, a->err, a->errlen) != 0)
		return -EINVAL;
	c->busy = v[O_BUSY].i != 0;
	struct sw_check_cfg *k = &c->check;
	k->cpu = c->cpu;
	k->order = v[O_ORDER].i != 0;
	k->order_workers = (int)v[O_ORDER_WORKERS].i;
	k->order_rounds = (int)v[O_ORDER_ROUNDS].i;
	k->order_work_ns = (uint64_t)v[O_ORDER_WORK].i;
	k->pi = v[O_PI].i != 0;
	k->pi_busy_ns = (uint64_t)v[O_PI_BUSY].i;
	k->pi_hold_ns = (uint64_t)v[O_PI_HOLD].i;
	k->pi_rounds = (int)v[O_PI_ROUNDS].i;
	if (k->pi && k->pi_hold_ns * 4 > k->pi_busy_ns) {
		snprintf(a->err, a->errlen,
			 "--pi-hold: must be at most a quarter of --pi-busy (%llu ns) to tell bounded from unbounded waits",
			 (unsigned long long)k->pi_busy_ns);
		return -EINVAL;
	}
	c->strict = v[O_STRICT].i != 0;
	CPU_SET(c->cpu, &a->used);
	if (c->waker_cpu >= 0)
		CPU_SET(c->waker_cpu, &a->used);
	ctx->cfg = c;
	return 0;
}

static void switch_write_config(const void *p, struct jsonw *w)
{
	const struct sw_cfg *c = ((const struct sw_ctx *)p)->cfg;
	const struct sw_check_cfg *k = &c->check;
	jw_arr_begin(w, "mechanisms");
	for (int i = 0; i < WAKE_MECH_COUNT; i++)
		if (c->mechs & (1u << i))
			jw_str(w, NULL, wake_mech_names[i]);
	jw_arr_end(w);
	jw_str(w, "placement", placement_names[c->placement]);
	jw_int(w, "cpu", c->cpu);
	jw_int_or_null(w, "waker_cpu", c->waker_cpu);
	jw_str(w, "policy", "fifo");
	jw_int(w, "priority", c->priority);
	jw_int(w, "waker_priority", c->priority - 1);
	jw_uint(w, "interval_ns", c->interval_ns);
	jw_uint_or_null(w, "duration_ns", c->duration_ns);
	jw_uint_or_null(w, "loops", c->loops);
	jw_bool(w, "busy", c->busy);
	jw_bool(w, "order_check", k->order);
	jw_int(w, "order_workers", k->order_workers);
	jw_int(w, "order_rounds", k->order_rounds);
	jw_uint(w, "order_work_ns", k->order_work_ns);
	jw_bool(w, "pi_check", k->pi);
	jw_uint(w, "pi_busy_ns", k->pi_busy_ns);
	jw_uint(w, "pi_hold_ns", k->pi_hold_ns);
	jw_int(w, "pi_rounds", k->pi_rounds);
	jw_bool(w, "check_strict", c->strict);
	probe_write_run_config(w, c->run, SWITCH_SHARED & ~RUN_OPT(OUTPUT));
}

/* ---- measuring threads ---- */

/* ---- measuring threads ---- */

static void waiter_main(struct sw_pair *p, int tid)
{
	struct channel *ch = p->ch;
	const uint64_t start = p->ctx->start_ns;
	atomic_store(&ch->tid, tid);

	for (;;) {
		atomic_store_explicit(&p->armed, true, memory_order_release);
		int e = wake_wait(&p->wo);
		uint64_t now = rl_now_ns(CLOCK_MONOTONIC);
		if (atomic_load_explicit(&p->quit, memory_order_acquire))
			break;
		if (e) {
			p->run_err = -e;
			atomic_store(&p->ctx->stop, true);
			break;
		}
		uint64_t t0 = atomic_load_explicit(&p->t_wake, memory_order_acquire);
		uint64_t missed = atomic_exchange_explicit(&p->pending_missed, 0,
							   memory_order_relaxed);
		uint64_t at = now > start ? now - start : 0;
		bool neg = now < t0;
		channel_record(ch, at, neg ? 0 : now - t0, missed, neg);
	}
}

static void waker_main(struct sw_waker *wk)
{
	struct sw_ctx *ctx = wk->ctx;
	const struct sw_cfg *c = ctx->cfg;
	const uint64_t interval = c->interval_ns;
	const uint64_t base = ctx->start_ns + wk->phase_ns;
	const uint64_t end = c->duration_ns ? ctx->start_ns + c->duration_ns : UINT64_MAX;
	const uint64_t total = c->loops ? c->loops * wk->n_pairs : UINT64_MAX;
	uint64_t k = 0;
	uint64_t next = period_first(base, rl_now_ns(CLOCK_MONOTONIC), interval);

	while (!atomic_load_explicit(&ctx->stop, memory_order_relaxed) && next <= end &&
	       k < total) {
		struct timespec ts = rl_ns_to_ts(next);
		int r = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
		if (r == EINTR)
			continue;
		if (r) {
			wk->run_err = r;
			atomic_store(&ctx->stop, true);
			break;
		}
		struct period_step s =
			period_advance_until(next, rl_now_ns(CLOCK_MONOTONIC), interval, end);
		next = s.next_ns;
		struct sw_pair *p = wk->pairs[k % wk->n_pairs];
		if (!atomic_load_explicit(&p->armed, memory_order_acquire)) {
			/* the waiter has not gone back to waiting: this wake is missed */
			atomic_fetch_add_explicit(&p->pending_missed, s.missed + 1,
						  memory_order_relaxed);
			continue; /* k unchanged: the same waiter is woken next period */
		}
		if (s.missed)
			atomic_fetch_add_explicit(&p->pending_missed, s.missed,
						  memory_order_relaxed);
		atomic_store_explicit(&p->armed, false, memory_order_relaxed);
		uint64_t t0 = rl_now_ns(CLOCK_MONOTONIC);
		atomic_store_explicit(&p->t_wake, t0, memory_order_release);
		int e = wake_notify(&p->wo);
		if (e) {
			wk->run_err = -e;
			atomic_store(&ctx->stop, true);
			break;
		}
		k++;
	}
}

static void busy_main(struct sw_ctx *ctx)
{
	while (!atomic_load_explicit(&ctx->busy_stop, memory_order_relaxed))
		;
}

/* ---- the run ---- */

/* The waiters and wakers of every placement, their channels and mechanism objects. */
static int switch_setup(struct sw_ctx *ctx)
{
	const struct sw_cfg *c = ctx->cfg;
	size_t nm = (size_t)__builtin_popcount(c->mechs);
	size_t np = c->placement == PL_BOTH ? 2 : 1;
	ctx->n_pairs = nm * np;
	ctx->pairs = aligned_alloc(RL_CACHELINE, ((ctx->n_pairs * sizeof(*ctx->pairs)) +
						  RL_CACHELINE - 1) & ~(size_t)(RL_CACHELINE - 1));
	ctx->chans = calloc(ctx->n_pairs, sizeof(*ctx->chans));
	if (!ctx->pairs || !ctx->chans)
		return -ENOMEM;
	memset(ctx->pairs, 0, ctx->n_pairs * sizeof(*ctx->pairs));
	ctx->sig = SIGRTMIN + 2;
	size_t i = 0;
	ctx->n_wakers = np;
	for (size_t pl = 0; pl < np; pl++) {
		bool cross = c->placement == PL_CROSS || (c->placement == PL_BOTH && pl == 1);
		struct sw_waker *wk = &ctx->wakers[pl];
		wk->kind = SW_WAKER;
		wk->ctx = ctx;
		wk->pairs = calloc(nm, sizeof(*wk->pairs));
		if (!wk->pairs)
			return -ENOMEM;
		wk->phase_ns = pl ? c->interval_ns / 2 : 0;
		wk->cpu = cross ? c->waker_cpu : c->cpu;
		for (int m = 0; m < WAKE_MECH_COUNT; m++) {
			if (!(c->mechs & (1u << m)))
				continue;
			struct sw_pair *p = &ctx->pairs[i];
			p->kind = SW_WAITER;
			p->ctx = ctx;
			p->waker_cpu = wk->cpu;
			p->wo.sig = ctx->sig;
			char name[32];
			wake_chan_name(name, sizeof(name), wake_mech_names[m], wk->cpu, c->cpu);
			int e = wake_open(&p->wo, (enum wake_mech)m, i);
			if (e)
				return e;
			p->open = true;
			e = channel_create(&ctx->chans[i], name, c->cpu, c->run->window_ns, 0);
			if (e)
				return e;
			p->ch = ctx->chans[i];
			wk->pairs[wk->n_pairs++] = p;
			i++;
		}
	}
	ctx->busy = SW_BUSY;
	return 0;
}

static int switch_prepare(void *p, struct probe_plan *plan)
{
	struct sw_ctx *ctx = p;
	const struct sw_cfg *c = ctx->cfg;
	int e = switch_setup(ctx);
	if (e) {
		fprintf(stderr, "rtlab-probe switch: cannot set up the wake mechanisms: %s\n",
			strerror(-e));
		return RL_EXIT_ERROR;
	}
	/* every measuring thread: waiters, wakers, busy runner */
	size_t nt = ctx->n_pairs + ctx->n_wakers + (c->busy ? 1 : 0), i = 0;
	struct probe_thread *pt = probe_plan_threads(plan, nt);
	if (!pt) {
		fprintf(stderr, "rtlab-probe switch: out of memory\n");
		return RL_EXIT_ERROR;
	}
	for (size_t k = 0; k < ctx->n_pairs; k++, i++) {
		probe_thread_place(&pt[i], c->cpu, RT_FIFO, c->priority, "%s", ctx->pairs[k].ch->name);
		pt[i].arg = &ctx->pairs[k];
		pt[i].until_stopped = true;
	}
	for (size_t k = 0; k < ctx->n_wakers; k++, i++) {
		snprintf(pt[i].rt.role, sizeof(pt[i].rt.role), "waker@cpu%d", ctx->wakers[k].cpu);
		pt[i].rt.cpu = ctx->wakers[k].cpu;
		pt[i].rt.req = (struct rt_sched_req){ .policy = RT_FIFO,
						      .priority = c->priority - 1 };
		pt[i].arg = &ctx->wakers[k];
	}
	if (c->busy) {
		probe_thread_place(&pt[i], c->cpu, RT_OTHER, 0, "busy@cpu%d", c->cpu);
		pt[i].arg = &ctx->busy;
		pt[i].until_stopped = true;
	}
	probe_plan_channels(plan, ctx->chans, ctx->n_pairs, &ctx->stop, NULL);
	return 0;
}

/* A waiter's tid is where its signal goes (WAKE_SIGNAL). */
static void switch_thread_ready(void *p, struct probe_thread *pt)
{
	(void)p;
	if (*(const enum sw_kind *)pt->arg == SW_WAITER)
		((struct sw_pair *)pt->arg)->wo.tid = pt->rt.tid;
}

static int switch_start(void *p, const struct probe_start *s)
{
	struct sw_ctx *ctx = p;
	ctx->start_ns = s->monotonic_ns;
	return 0;
}

static void switch_measure(void *p, struct probe_thread *pt)
{
	switch (*(const enum sw_kind *)pt->arg) {
	case SW_WAITER:
		waiter_main(pt->arg, pt->rt.tid);
		break;
	case SW_WAKER:
		waker_main(pt->arg);
		break;
	case SW_BUSY:
		busy_main(p);
		break;
	}
}

/* The wakers have ended: wake each waiter one last time, into its quit; stop the busy runner. */
static void switch_stop(void *p)
{
	struct sw_ctx *ctx = p;
	for (size_t i = 0; i < ctx->n_pairs; i++) {
		struct sw_pair *pp = &ctx->pairs[i];
		atomic_store_explicit(&pp->quit, true, memory_order_release);
		if (wake_notify(&pp->wo) != 0) {
			/* cannot happen for a healthy object; the join would hang */
			fprintf(stderr, "rtlab-probe switch: cannot stop a waiter\n");
			_exit(RL_EXIT_ERROR);
		}
	}
	atomic_store(&ctx->busy_stop, true);
}

static void switch_write_checks(void *p, struct jsonw *w, bool final)
{
	const struct sw_ctx *ctx = p;
	if (final)
		sw_checks_write(w, &ctx->cfg->check, &ctx->checks);
}

/* The checks run now, on the measured CPU, after measuring. */
static void switch_ended(void *p, struct probe_end *e)
{
	struct sw_ctx *ctx = p;
	const struct sw_cfg *c = ctx->cfg;
	if (!e->interrupted && (c->check.order || c->check.pi)) {
		sw_checks_run(&c->check, &ctx->checks);
		/* a signal that arrived meanwhile still counts */
		sigset_t pend;
		sigpending(&pend);
		if (sigismember(&pend, SIGINT) || sigismember(&pend, SIGTERM))
			e->interrupted = true;
	}
	for (size_t i = 0; i < ctx->n_pairs && !e->err[0]; i++)
		if (ctx->pairs[i].run_err)
			snprintf(e->err, e->errlen, "waiting on %s: %s", ctx->chans[i]->name,
				 strerror(ctx->pairs[i].run_err));
	for (size_t i = 0; i < ctx->n_wakers && !e->err[0]; i++)
		if (ctx->wakers[i].run_err)
			snprintf(e->err, e->errlen, "waker on CPU %d: %s", ctx->wakers[i].cpu,
				 strerror(ctx->wakers[i].run_err));
	e->check_failed = c->strict && sw_checks_failed(&ctx->checks);
}

static void switch_fini(void *p)
{
	struct sw_ctx *ctx = p;
	if (ctx->pairs) {
		for (size_t i = 0; i < ctx->n_pairs; i++) {
			if (ctx->pairs[i].open)
				wake_close(&ctx->pairs[i].wo);
			if (ctx->chans[i])
				channel_destroy(ctx->chans[i]);
		}
	}
	for (size_t i = 0; i < 2; i++)
		free(ctx->wakers[i].pairs);
	free(ctx->chans);
	free(ctx->pairs);
}

const struct probe_ops switch_probe = {
	.name = "switch",
	.summary = "task-switch and wake-up latency per wake mechanism, priority-order and PI checks",
	.usage = "A high-priority waiter blocks in a wake mechanism while a SCHED_OTHER thread\n"
		 "busy-runs on its CPU; a waker one priority below sleeps on absolute deadlines\n"
		 "and wakes one waiter per --interval (round robin over the mechanisms).\n"
		 "Latency = waiter running - wake request; one channel per mechanism and\n"
		 "placement (futex@cpu1, futex@cpu0->cpu1). Then a priority-order check and a\n"
		 "priority-inheritance check (result.checks). JSON Lines go to stdout or --output.",
	PROBE_OPTIONS(switch_opts, SWITCH_SHARED, O_CPU_OLD),
	.housekeeping_help = "first online CPU not used, else unpinned",
	.ctx_size = sizeof(struct sw_ctx),
	PROBE_HOOKS(switch),
	.thread_ready = switch_thread_ready,
	.write_extra = switch_write_checks,
	.stop = switch_stop,
	.ended = switch_ended,
};
