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
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "channel.h"
#include "jsonw.h"
#include "opts.h"
#include "output.h"
#include "probe.h"
#include "reporter.h"
#include "rt.h"
#include "switch_util.h"
#include "sysinfo.h"

#define START_LEAD_NS (20 * NS_PER_MS)

enum { T_CLOCK, T_SYSCALL, T_TIMER, T_SWITCH, T_WAKE, T_COUNT };
static const char *const test_names[T_COUNT] = { "clock", "syscall", "timer", "switch", "wake" };

enum {
	O_CPU, O_OTHER_CPU, O_PRIORITY, O_LOOPS, O_DURATION, O_MLOCK, O_HOUSEKEEPING,
	O_SNAPSHOT, O_WINDOW, O_OUTPUT, O_ALLOW_NON_RT, O_TEST_DURATION, O_CPU_OLD,
	O_OTHER_CPU_OLD, O_COUNT
};

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
	[O_MLOCK] = OPT_DEF_MLOCK,
	[O_HOUSEKEEPING] = { "housekeeping", OPT_INT, "CPU", "CPU of the reporter thread", 0,
			     CPU_SETSIZE - 1, NULL, NULL, "first online CPU not used, else unpinned" },
	[O_SNAPSHOT] = OPT_DEF_SNAPSHOT,
	[O_WINDOW] = OPT_DEF_WINDOW,
	[O_OUTPUT] = OPT_DEF_OUTPUT,
	[O_ALLOW_NON_RT] = { "allow-non-rt", OPT_BOOL, NULL,
			     "measure even without RT scheduling/mlock (rt_valid=false)", 0, 0,
			     NULL, "false", NULL },
	[O_TEST_DURATION] = { "test-duration", OPT_DURATION, NULL,
			      "run each test for this long instead of --loops", (int64_t)NS_PER_MS,
			      (int64_t)(3600 * NS_PER_SEC), NULL, NULL, "use --loops" },
	[O_CPU_OLD] = OPT_DEF_ALIAS("cpu", "cpus"),
	[O_OTHER_CPU_OLD] = OPT_DEF_ALIAS("other-cpu", "waker-cpu"),
};

struct ov_cfg {
	int cpu, other_cpu;	/* other_cpu -1: no wake test */
	int priority;
	uint64_t loops;
	uint64_t duration_ns;	/* per test; 0: use loops */
	uint64_t total_ns;	/* all the tests (duration_ns x tests) */
	bool mlock;
	int housekeeping;
	uint64_t snapshot_ns, window_ns;
	const char *output;
	bool allow_non_rt;
};

struct ov_ctx {
	const struct ov_cfg *cfg;
	struct ov_cfg cfg_store;
	struct sw_thread driver, same, cross;
	struct channel *chans[T_COUNT];
	size_t n_chans;
	pthread_barrier_t ready, go;
	atomic_bool abort;
	atomic_bool stop;
	atomic_bool done;
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

static int overhead_init(void **out, const struct opt_value *v, const struct probe_env *env,
			 char *err, size_t errlen)
{
	struct ov_ctx *ctx = aligned_alloc(RL_CACHELINE, (sizeof(struct ov_ctx) + RL_CACHELINE - 1) &
							   ~(size_t)(RL_CACHELINE - 1));
	if (!ctx)
		return -ENOMEM;
	memset(ctx, 0, sizeof(*ctx));
	struct ov_cfg *c = &ctx->cfg_store;
	int last = -1;
	for (int i = 0; i < CPU_SETSIZE; i++)
		if (CPU_ISSET(i, env->online))
			last = i;
	c->cpu = v[O_CPU].set ? opts_one_cpu(&v[O_CPU]) : last;
	c->other_cpu = -1;
	if (v[O_OTHER_CPU].set) {
		c->other_cpu = (int)v[O_OTHER_CPU].i;
		if (c->other_cpu == c->cpu || !CPU_ISSET(c->other_cpu, env->online)) {
			snprintf(err, errlen, "--waker-cpu: must be an online CPU other than --cpus %d",
				 c->cpu);
			goto bad;
		}
	} else {
		for (int i = 0; i < CPU_SETSIZE && c->other_cpu < 0; i++)
			if (CPU_ISSET(i, env->online) && i != c->cpu)
				c->other_cpu = i;
	}
	c->priority = (int)v[O_PRIORITY].i;
	if (v[O_DURATION].set + v[O_TEST_DURATION].set + v[O_LOOPS].given > 1) {
		snprintf(err, errlen,
			 "--duration, --test-duration and --loops cannot be combined; give one of them");
		goto bad;
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
	c->mlock = v[O_MLOCK].i != 0;
	cpu_set_t used;
	CPU_ZERO(&used);
	CPU_SET(c->cpu, &used);
	if (c->other_cpu >= 0)
		CPU_SET(c->other_cpu, &used);
	if (pc_housekeeping(&v[O_HOUSEKEEPING], env->online, &used, &c->housekeeping, err,
			    errlen) != 0)
		goto bad;
	c->snapshot_ns = (uint64_t)v[O_SNAPSHOT].i;
	c->window_ns = (uint64_t)v[O_WINDOW].i;
	c->output = v[O_OUTPUT].set ? v[O_OUTPUT].s : NULL;
	c->allow_non_rt = v[O_ALLOW_NON_RT].i != 0;
	ctx->cfg = c;
	*out = ctx;
	return 0;
bad:
	free(ctx);
	return -EINVAL;
}

static void overhead_report_config(const void *p, struct jsonw *w, const char *key)
{
	const struct ov_ctx *ctx = p;
	const struct ov_cfg *c = ctx->cfg;
	jw_obj_begin(w, key);
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
	jw_bool(w, "mlock", c->mlock);
	jw_int_or_null(w, "housekeeping_cpu", c->housekeeping);
	jw_uint(w, "snapshot_interval_ns", c->snapshot_ns);
	jw_uint(w, "window_ns", c->window_ns);
	jw_bool(w, "allow_non_rt", c->allow_non_rt);
	jw_obj_end(w);
}

/* Wait until *word is non-zero, then clear it. */
static void ov_wait(atomic_uint *word)
{
	while (atomic_exchange_explicit(word, 0, memory_order_acquire) == 0)
		sw_futex_wait(word, 0);
}

static void ov_post(atomic_uint *word)
{
	atomic_store_explicit(word, 1, memory_order_release);
	sw_futex_wake(word, 1);
}

static void same_main(struct sw_thread *t)
{
	struct ov_ctx *ctx = t->arg;
	for (;;) {
		ov_wait(&ctx->to_partner);
		if (atomic_load(&ctx->quit))
			break;
		ov_post(&ctx->to_driver);
	}
}

static void cross_main(struct sw_thread *t)
{
	struct ov_ctx *ctx = t->arg;
	for (;;) {
		ov_wait(&ctx->x_go);
		if (atomic_load(&ctx->quit))
			break;
		/* give the driver time to block again, then wake it */
		uint64_t t0 = rl_now_ns(CLOCK_MONOTONIC);
		sw_spin_until(t0 + 20 * NS_PER_US);
		t0 = rl_now_ns(CLOCK_MONOTONIC);
		atomic_store_explicit(&ctx->x_t0, t0, memory_order_release);
		ov_post(&ctx->x_wake);
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

static void driver_main(struct sw_thread *t)
{
	struct ov_ctx *ctx = t->arg;
	const struct ov_cfg *c = ctx->cfg;
	struct timespec st = rl_ns_to_ts(ctx->start_ns);
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &st, NULL) == EINTR)
		;
	for (int k = 0; k < T_COUNT && ctx->chans[k]; k++) {
		struct channel *ch = ctx->chans[k];
		atomic_store(&ch->tid, t->tid);
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
				ov_post(&ctx->to_partner);
				ov_wait(&ctx->to_driver);
				t1 = rl_now_ns(CLOCK_MONOTONIC);
				t1 = t0 + (t1 - t0) / 2; /* half the round trip */
				break;
			default: /* T_WAKE */
				ov_post(&ctx->x_go);
				ov_wait(&ctx->x_wake);
				t1 = rl_now_ns(CLOCK_MONOTONIC);
				t0 = atomic_load_explicit(&ctx->x_t0, memory_order_acquire);
				break;
			}
			record(ctx, ch, t0, t1);
		}
		if (tfd >= 0)
			close(tfd);
	}
	atomic_store(&ctx->done, true);
	rt_notify_main();
}

static void init_thread(struct sw_thread *t, struct ov_ctx *ctx, int cpu, const char *role,
			void (*fn)(struct sw_thread *))
{
	t->cpu = cpu;
	t->req = (struct rt_sched_req){ .policy = RT_FIFO, .priority = ctx->cfg->priority };
	t->fn = fn;
	t->arg = ctx;
	t->ready = &ctx->ready;
	t->go = &ctx->go;
	t->abort = &ctx->abort;
	snprintf(t->role, sizeof(t->role), "%s", role);
}

/* rt_wait_done_or_signal predicate: the measurement has finished. */
static bool measurement_done(const void *arg)
{
	const struct ov_ctx *ctx = arg;
	return atomic_load(&ctx->done);
}

static int overhead_run(void *p, const struct probe_env *env)
{
	struct ov_ctx *ctx = p;
	const struct ov_cfg *c = ctx->cfg;
	int out_fd = STDOUT_FILENO, mlock_err = 0, code = RL_EXIT_ERROR, e;
	struct jsonw w;
	jw_init(&w);

	rt_block_signals(); /* inherited: signals reach only main's wait */
	if (c->output && (e = pc_open_out(c->output, &out_fd)) != 0) {
		fprintf(stderr, "rtlab-probe overhead: --output: cannot open %s: %s\n", c->output,
			strerror(-e));
		return RL_EXIT_ERROR;
	}
	bool rep_pinned = c->housekeeping >= 0 && rt_pin_self(c->housekeeping) == 0;
	cpu_set_t rep_aff;
	if (rt_get_affinity_self(&rep_aff) != 0)
		CPU_ZERO(&rep_aff);
	if (c->mlock)
		mlock_err = rt_mlockall();

	for (int k = 0; k < T_COUNT; k++) {
		char name[32];
		if (k == T_WAKE && c->other_cpu < 0)
			break;
		sw_chan_name(name, sizeof(name), test_names[k], k == T_WAKE ? c->other_cpu : -1,
			     c->cpu);
		e = channel_create(&ctx->chans[k], name, c->cpu, c->window_ns, 0);
		if (e) {
			fprintf(stderr, "rtlab-probe overhead: cannot allocate a channel: %s\n",
				strerror(-e));
			goto out;
		}
		ctx->n_chans++;
	}

	char role[48];
	struct sw_thread *threads[3];
	size_t nt = 0;
	snprintf(role, sizeof(role), "driver@cpu%d", c->cpu);
	init_thread(&ctx->driver, ctx, c->cpu, role, driver_main);
	threads[nt++] = &ctx->driver;
	snprintf(role, sizeof(role), "switch-partner@cpu%d", c->cpu);
	init_thread(&ctx->same, ctx, c->cpu, role, same_main);
	threads[nt++] = &ctx->same;
	if (c->other_cpu >= 0) {
		snprintf(role, sizeof(role), "waker@cpu%d", c->other_cpu);
		init_thread(&ctx->cross, ctx, c->other_cpu, role, cross_main);
		threads[nt++] = &ctx->cross;
	}
	pthread_barrier_init(&ctx->ready, NULL, (unsigned)nt + 1);
	pthread_barrier_init(&ctx->go, NULL, (unsigned)nt + 1);
	for (size_t i = 0; i < nt; i++) {
		e = sw_thread_start(threads[i]);
		if (e) {
			fprintf(stderr, "rtlab-probe overhead: cannot create a thread: %s\n",
				strerror(-e));
			_exit(RL_EXIT_ERROR);
		}
	}
	pthread_barrier_wait(&ctx->ready);

	bool rt_valid = !(c->mlock && mlock_err);
	const struct sw_thread *bad = NULL;
	for (size_t i = 0; i < nt; i++)
		if (!sw_thread_rt_ok(threads[i])) {
			rt_valid = false;
			if (!bad)
				bad = threads[i];
		}
	char why[512] = "";
	if (bad)
		snprintf(why, sizeof(why),
			 "cannot set SCHED_FIFO priority %d on CPU %d for %s (%s): run as root or grant CAP_SYS_NICE, or pass --allow-non-rt",
			 bad->req.priority, bad->cpu, bad->role,
			 bad->pin_err ? strerror(-bad->pin_err)
			 : bad->sched_err ? strerror(-bad->sched_err) : "not in effect after setting");
	else if (c->mlock && mlock_err)
		snprintf(why, sizeof(why),
			 "cannot lock memory with mlockall (%s): run as root or grant CAP_IPC_LOCK, or pass --no-mlock or --allow-non-rt",
			 strerror(-mlock_err));
	bool started = false;
	if (why[0] && !c->allow_non_rt) {
		fprintf(stderr, "rtlab-probe overhead: skipped: %s\n", why);
		code = RL_EXIT_SKIPPED;
		goto stop_threads;
	}

	uint64_t start_real = rl_now_ns(CLOCK_REALTIME) + START_LEAD_NS;
	uint64_t start_mono = rl_now_ns(CLOCK_MONOTONIC) + START_LEAD_NS;
	ctx->start_ns = start_mono;
	pc_header_begin(&w, "overhead", env, start_real, start_mono);
	overhead_report_config(ctx, &w, "config");
	sw_write_effective(&w, threads, nt, c->mlock, mlock_err, &rep_aff, rep_pinned, rt_valid);
	sysinfo_write(&w, "system");
	jw_obj_end(&w);
	int out_err = jw_emit(&w, out_fd);
	if (why[0])
		out_log(&w, out_fd, "warning", "no_rt", why);

	struct reporter *rep = NULL;
	struct reporter_cfg rc = {
		.out_fd = out_fd,
		.samples_fd = -1,
		.snapshot_ns = c->snapshot_ns,
		.start_mono_ns = start_mono,
		.chans = ctx->chans,
		.n_chans = ctx->n_chans,
	};
	e = reporter_start(&rep, &rc);
	if (e) {
		fprintf(stderr, "rtlab-probe overhead: cannot start the reporter: %s\n", strerror(-e));
		goto stop_threads;
	}
	started = true;
	pthread_barrier_wait(&ctx->go);

	bool interrupted = rt_wait_done_or_signal(&ctx->stop, measurement_done, ctx);
	pthread_join(ctx->driver.th, NULL);
	atomic_store(&ctx->quit, true);
	ov_post(&ctx->to_partner);
	pthread_join(ctx->same.th, NULL);
	if (c->other_cpu >= 0) {
		ov_post(&ctx->x_go);
		pthread_join(ctx->cross.th, NULL);
	}

	struct reporter_outcome o = { .status = "completed", .exit_code = RL_EXIT_OK };
	char errmsg[128] = "";
	if (ctx->run_err)
		snprintf(errmsg, sizeof(errmsg), "timerfd: %s", strerror(ctx->run_err));
	reporter_outcome_stopped(&o, interrupted, errmsg);
	code = reporter_conclude(rep, &o, out_err, "overhead");
stop_threads:
	if (!started) {
		atomic_store(&ctx->abort, true);
		pthread_barrier_wait(&ctx->go);
		for (size_t i = 0; i < nt; i++)
			pthread_join(threads[i]->th, NULL);
	}
	pthread_barrier_destroy(&ctx->ready);
	pthread_barrier_destroy(&ctx->go);
out:
	jw_free(&w);
	if (out_fd != STDOUT_FILENO)
		close(out_fd);
	return code;
}

static void overhead_fini(void *p)
{
	struct ov_ctx *ctx = p;
	if (!ctx)
		return;
	for (int k = 0; k < T_COUNT; k++)
		if (ctx->chans[k])
			channel_destroy(ctx->chans[k]);
	free(ctx);
}

const struct probe_ops overhead_probe = {
	.name = "overhead",
	.summary = "OS overhead as distributions: syscall, context switch, timer arm+fire, cross-CPU wake",
	.usage = "One pinned SCHED_FIFO driver thread runs each test --loops times (or for\n"
		 "--test-duration; --duration is the whole run, shared equally by the tests) and\n"
		 "records every iteration: clock read pair, syscall round trip\n"
		 "(getppid), timerfd arm+fire, same-CPU futex ping-pong (half round trip) and a\n"
		 "wake-up from another CPU. JSON Lines go to stdout or --output.",
	.opts = overhead_opts,
	.n_opts = O_COUNT,
	.unavailable = NULL,
	.init = overhead_init,
	.report_config = overhead_report_config,
	.run = overhead_run,
	.fini = overhead_fini,
};
