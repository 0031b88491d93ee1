/* SPDX-License-Identifier: MIT */
/*
 * The `overhead` probe: what the OS costs an application, as distributions.
 * One pinned SCHED_FIFO driver thread runs the tests one after another and
 * owns every channel:
 *   clock@cpuN         two back-to-back clock reads (the floor of every figure)
 *   syscall@cpuN       one syscall round trip (getppid through syscall(2))
 *   timer@cpuN         arm a timerfd 1 ns ahead and read it: timer arm + fire
 *   switch@cpuN        futex ping-pong with a partner of the same priority on
 *                      the same CPU: half the round trip = one context switch
 *                      plus one futex wake/wait
 *   wake@cpuM->cpuN    a partner on another CPU wakes the blocked driver: wake
 *                      request (clock read before FUTEX_WAKE) -> driver running
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "channel.h"
#include "probe.h"
#include "wake.h"


enum { T_CLOCK, T_SYSCALL, T_TIMER, T_SWITCH, T_WAKE, T_COUNT };
static const char *const test_names[T_COUNT] = { "clock", "syscall", "timer", "switch", "wake" };

enum {
	O_CPU, O_OTHER_CPU, O_PRIORITY, O_LOOPS, O_DURATION,
	O_TEST_DURATION, O_CPU_OLD,
	O_OTHER_CPU_OLD, O_COUNT
};
#define OVERHEAD_SHARED (RUN_OPTS_COMMON | RUN_OPT(HOUSEKEEPING) | RUN_OPT(WINDOW))

static const struct opt_def overhead_opts[O_COUNT] = {
	[O_CPU] = { "cpus", OPT_CPULIST, "CPU", "CPU of the driver thread (and the same-CPU partner)",
		    0, 1, NULL, NULL, "last online CPU" },
	[O_OTHER_CPU] = { "waker-cpu", OPT_INT, "CPU", "CPU of the cross-CPU waker", 0,
			  CPU_SETSIZE - 1, NULL, NULL,
			  "first online CPU other than --cpus (no wake test on 1 CPU)" },
	[O_PRIORITY] = { "priority", OPT_INT, NULL, "SCHED_FIFO priority of every thread", 1, 99,
			 NULL, "90", NULL },
	[O_LOOPS] = { "loops", OPT_INT, NULL, "iterations per test", 1, INT64_MAX / 64, NULL,
		      "10000", NULL },
	[O_DURATION] = { "duration", OPT_DURATION, NULL,
			 "run all the tests for this long in total (shared equally) instead of --loops",
			 (int64_t)NS_PER_MS, (int64_t)(1000 * 3600 * NS_PER_SEC), NULL, NULL,
			 "use --loops" },
	[O_TEST_DURATION] = { "test-duration", OPT_DURATION, NULL,
			      "run each test for this long instead of --loops", (int64_t)NS_PER_MS,
			      (int64_t)(3600 * NS_PER_SEC), NULL, NULL, "use --loops" },
	[O_CPU_OLD] = OPT_DEF_ALIAS("cpu", "cpus"),
	[O_OTHER_CPU_OLD] = OPT_DEF_ALIAS("other-cpu", "waker-cpu"),
};

struct ov_cfg {
	const struct run_opts *run;
	int cpu, other_cpu;	/* other_cpu -1: no wake test */
	int priority;
	uint64_t loops;
	uint64_t duration_ns;	/* per test; 0: use loops */
	uint64_t total_ns;	/* all the tests (duration_ns x tests) */
};

struct ov_ctx {
	const struct ov_cfg *cfg;
	struct ov_cfg cfg_store;
	struct probe_thread *driver, *partner;	/* the tests; the same-CPU ping-pong */
	struct channel *chans[T_COUNT];
	size_t n_chans;
	atomic_bool stop;
	uint64_t start_ns;
	int run_err;
	/* ping-pong words, each on its own line */
	_Alignas(RL_CACHELINE) atomic_uint to_partner;
	_Alignas(RL_CACHELINE) atomic_uint to_driver;
	_Alignas(RL_CACHELINE) atomic_uint x_go;
	_Alignas(RL_CACHELINE) atomic_uint x_wake;
	_Atomic uint64_t x_t0;
	atomic_bool quit;
};

static int overhead_init(void *p, struct probe_args *a)
{
	const struct opt_value *v = a->vals;
	struct ov_ctx *ctx = p;
	struct ov_cfg *c = &ctx->cfg_store;
	c->run = a->run;
	int last = -1;
	for (int i = 0; i < CPU_SETSIZE; i++)
		if (CPU_ISSET(i, a->env->online))
			last = i;
	c->cpu = v[O_CPU].set ? opts_one_cpu(&v[O_CPU]) : last;
	c->other_cpu = -1;
	if (v[O_OTHER_CPU].set) {
		c->other_cpu = (int)v[O_OTHER_CPU].i;
		if (c->other_cpu == c->cpu || !CPU_ISSET(c->other_cpu, a->env->online)) {
			snprintf(a->err, a->errlen,
				 "--waker-cpu: must be an online CPU other than --cpus %d", c->cpu);
			return -EINVAL;
		}
	} else {
		for (int i = 0; i < CPU_SETSIZE && c->other_cpu < 0; i++)
			if (CPU_ISSET(i, a->env->online) && i != c->cpu)
				c->other_cpu = i;
	}
	c->priority = (int)v[O_PRIORITY].i;
	if (v[O_DURATION].set + v[O_TEST_DURATION].set + v[O_LOOPS].given > 1) {
		snprintf(a->err, a->errlen,
			 "--duration, --test-duration and --loops cannot be combined; give one of them");
		return -EINVAL;
	}
	c->loops = (uint64_t)v[O_LOOPS].i;
	/* --duration is the whole run, like every probe's; the tests share it equally */
	uint64_t tests = c->other_cpu >= 0 ? T_COUNT : T_COUNT - 1;
	if (v[O_DURATION].set) {
		c->total_ns = (uint64_t)v[O_DURATION].i;
		c->duration_ns = c->total_ns / tests;
	} else if (v[O_TEST_DURATION].set) {
		c->duration_ns = (uint64_t)v[O_TEST_DURATION].i;
		c->total_ns = c->duration_ns * tests;
	}
	CPU_SET(c->cpu, &a->used);
	if (c->other_cpu >= 0)
		CPU_SET(c->other_cpu, &a->used);
	ctx->cfg = c;
	return 0;
}

static void overhead_write_config(const void *p, struct jsonw *w)
{
	const struct ov_ctx *ctx = p;
	const struct ov_cfg *c = ctx->cfg;
	jw_arr_begin(w, "tests");
	for (int i = 0; i < T_COUNT; i++)
		if (i != T_WAKE || c->other_cpu >= 0)
			jw_str(w, NULL, test_names[i]);
	jw_arr_end(w);
	jw_int(w, "cpu", c->cpu);
	jw_int_or_null(w, "other_cpu", c->other_cpu);
	jw_str(w, "policy", "fifo");
	jw_int(w, "priority", c->priority);
	if (c->duration_ns) {
		jw_null(w, "loops");
		jw_uint(w, "duration_ns", c->total_ns);
		jw_uint(w, "test_duration_ns", c->duration_ns);
	} else {
		jw_uint(w, "loops", c->loops);
		jw_null(w, "duration_ns");
		jw_null(w, "test_duration_ns");
	}
	probe_write_run_config(w, c->run, OVERHEAD_SHARED & ~RUN_OPT(OUTPUT));
}

static void same_main(struct ov_ctx *ctx)
{
	for (;;) {
		wake_take(&ctx->to_partner);
		if (atomic_load(&ctx->quit))
			break;
		wake_post(&ctx->to_driver);
	}
}

static void cross_main(struct ov_ctx *ctx)
{
	for (;;) {
		wake_take(&ctx->x_go);
		if (atomic_load(&ctx->quit))
			break;
		/* give the driver time to block again, then wake it */
		uint64_t t0 = rl_now_ns(CLOCK_MONOTONIC);
		wake_spin_until(t0 + 20 * NS_PER_US);
		t0 = rl_now_ns(CLOCK_MONOTONIC);
		atomic_store_explicit(&ctx->x_t0, t0, memory_order_release);
		wake_post(&ctx->x_wake);
	}
}

static bool more(const struct ov_ctx *ctx, uint64_t n, uint64_t until)
{
	if (atomic_load_explicit(&ctx->stop, memory_order_relaxed))
		return false;
	if (ctx->cfg->duration_ns)
		return rl_now_ns(CLOCK_MONOTONIC) < until;
	return n < ctx->cfg->loops;
}

static void record(struct ov_ctx *ctx, struct channel *ch, uint64_t t0, uint64_t t1)
{
	bool neg = t1 < t0;
	channel_record(ch, t1 - ctx->start_ns, neg ? 0 : t1 - t0, 0, neg);
}

static void driver_main(struct ov_ctx *ctx, int tid)
{
	const struct ov_cfg *c = ctx->cfg;
	struct timespec st = rl_ns_to_ts(ctx->start_ns);
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &st, NULL) == EINTR)
		;
	for (int k = 0; k < T_COUNT && ctx->chans[k]; k++) {
		struct channel *ch = ctx->chans[k];
		atomic_store(&ch->tid, tid);
		uint64_t until = rl_now_ns(CLOCK_MONOTONIC) + c->duration_ns;
		uint64_t n = 0;
		int tfd = -1;
		if (k == T_TIMER) {
			tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
			if (tfd < 0) {
				ctx->run_err = errno;
				break;
			}
		}
		for (; more(ctx, n, until); n++) {
			uint64_t t0, t1;
			switch (k) {
			case T_CLOCK:
				t0 = rl_now_ns(CLOCK_MONOTONIC);
				t1 = rl_now_ns(CLOCK_MONOTONIC);
				break;
			case T_SYSCALL:
				t0 = rl_now_ns(CLOCK_MONOTONIC);
				syscall(SYS_getppid);
				t1 = rl_now_ns(CLOCK_MONOTONIC);
				break;
			case T_TIMER: {
				struct itimerspec its = { .it_value = { 0, 1 } };
				uint64_t exp;
				t0 = rl_now_ns(CLOCK_MONOTONIC);
				if (timerfd_settime(tfd, 0, &its, NULL) ||
				    read(tfd, &exp, sizeof(exp)) != sizeof(exp)) {
					ctx->run_err = errno ? errno : EIO;
					atomic_store(&ctx->stop, true);
					continue;
				}
				t1 = rl_now_ns(CLOCK_MONOTONIC);
				break;
			}
			case T_SWITCH:
				t0 = rl_now_ns(CLOCK_MONOTONIC);
				wake_post(&ctx->to_partner);
				wake_take(&ctx->to_driver);
				t1 = rl_now_ns(CLOCK_MONOTONIC);
				t1 = t0 + (t1 - t0) / 2; /* half the round trip */
				break;
			default: /* T_WAKE */
				wake_post(&ctx->x_go);
				wake_take(&ctx->x_wake);
				t1 = rl_now_ns(CLOCK_MONOTONIC);
				t0 = atomic_load_explicit(&ctx->x_t0, memory_order_acquire);
				break;
			}
			record(ctx, ch, t0, t1);
		}
		if (tfd >= 0)
			close(tfd);
	}
}

static void describe(struct probe_thread *t, const struct ov_ctx *ctx, int cpu, const char *role,
		     bool until_stopped)
{
	t->rt.cpu = cpu;
	t->rt.req = (struct rt_sched_req){ .policy = RT_FIFO, .priority = ctx->cfg->priority };
	snprintf(t->rt.role, sizeof(t->rt.role), "%s@cpu%d", role, cpu);
	t->until_stopped = until_stopped;
}

static int overhead_prepare(void *p, struct probe_plan *plan)
{
	struct ov_ctx *ctx = p;
	const struct ov_cfg *c = ctx->cfg;
	for (int k = 0; k < T_COUNT; k++) {
		char name[32];
		if (k == T_WAKE && c->other_cpu < 0)
			break;
		wake_chan_name(name, sizeof(name), test_names[k], k == T_WAKE ? c->other_cpu : -1,
			       c->cpu);
		int e = channel_create(&ctx->chans[k], name, c->cpu, c->run->window_ns, 0);
		if (e) {
			fprintf(stderr, "rtlab-probe overhead: cannot allocate a channel: %s\n",
				strerror(-e));
			return RL_EXIT_ERROR;
		}
		ctx->n_chans++;
	}
	/* the driver, its same-CPU partner, and the waker on the other CPU */
	struct probe_thread *pt = probe_plan_threads(plan, c->other_cpu >= 0 ? 3 : 2);
	if (!pt) {
		fprintf(stderr, "rtlab-probe overhead: out of memory\n");
		return RL_EXIT_ERROR;
	}
	describe(&pt[0], ctx, c->cpu, "driver", false);
	describe(&pt[1], ctx, c->cpu, "switch-partner", true);
	if (c->other_cpu >= 0)
		describe(&pt[2], ctx, c->other_cpu, "waker", true);
	ctx->driver = &pt[0];
	ctx->partner = &pt[1];
	probe_plan_channels(plan, ctx->chans, ctx->n_chans, &ctx->stop, NULL);
	return 0;
}

static int overhead_start(void *p, const struct probe_start *s)
{
	struct ov_ctx *ctx = p;
	ctx->start_ns = s->monotonic_ns;
	return 0;
}

static void overhead_measure(void *p, struct probe_thread *pt)
{
	struct ov_ctx *ctx = p;
	if (pt == ctx->driver)
		driver_main(ctx, pt->rt.tid);
	else if (pt == ctx->partner)
		same_main(ctx);
	else
		cross_main(ctx);
}

/* The driver has ended: let the partners out of their waits. */
static void overhead_stop(void *p)
{
	struct ov_ctx *ctx = p;
	atomic_store(&ctx->quit, true);
	wake_post(&ctx->to_partner);
	if (ctx->cfg->other_cpu >= 0)
		wake_post(&ctx->x_go);
}

static void overhead_ended(void *p, struct probe_end *e)
{
	struct ov_ctx *ctx = p;
	if (ctx->run_err)
		snprintf(e->err, e->errlen, "timerfd: %s", strerror(ctx->run_err));
}

static void overhead_fini(void *p)
{
	struct ov_ctx *ctx = p;
	for (int k = 0; k < T_COUNT; k++)
		if (ctx->chans[k])
			channel_destroy(ctx->chans[k]);
}

const struct probe_ops overhead_probe = {
	.name = "overhead",
	.summary = "OS overhead as distributions: syscall, context switch, timer arm+fire, cross-CPU wake",
	.usage = "One pinned SCHED_FIFO driver thread runs each test --loops times (or for\n"
		 "--test-duration; --duration is the whole run, shared equally by the tests) and\n"
		 "records every iteration: clock read pair, syscall round trip\n"
		 "(getppid), timerfd arm+fire, same-CPU futex ping-pong (half round trip) and a\n"
		 "wake-up from another CPU. JSON Lines go to stdout or --output.",
	PROBE_OPTIONS(overhead_opts, OVERHEAD_SHARED, O_TEST_DURATION),
	.housekeeping_help = "first online CPU not used, else unpinned",
	.ctx_size = sizeof(struct ov_ctx),
	PROBE_HOOKS(overhead),
	.stop = overhead_stop,
	.ended = overhead_ended,
};
