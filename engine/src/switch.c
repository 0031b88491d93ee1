/* SPDX-License-Identifier: MIT */
/*
 * The `switch` probe: task-switch and wake-up latency. A high-priority
 * waiter thread blocks in one wake mechanism (futex, condition variable,
 * pipe, eventfd, POSIX message queue, signal, SysV semaphore) while a
 * lower-priority thread busy-runs on its CPU. A waker thread, one priority
 * below the waiter, sleeps on absolute deadlines and, every period, wakes one
 * waiter (round robin over the mechanisms). Latency = waiter running (clock
 * read right after its wait returns) - wake request (clock read right before
 * the waking call). Same-CPU waker: switch latency; other-CPU waker: cross-CPU
 * wake-up latency. Afterwards two checks: priority order and priority
 * inheritance (results in result.checks).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <mqueue.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ipc.h>
#include <sys/sem.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "channel.h"
#include "jsonw.h"
#include "opts.h"
#include "output.h"
#include "period.h"
#include "probe.h"
#include "reporter.h"
#include "rt.h"
#include "switch_util.h"
#include "sysinfo.h"

#define START_LEAD_NS (20 * NS_PER_MS)
#define MAX_ORDER_WORKERS 16
#define MAX_ORDER_ROUNDS 50
#define MAX_PI_ROUNDS 20
#define PRIO_CHECK_CTRL 60	/* checks: controller above every worker */
#define PRIO_ORDER_BASE 20	/* order workers: 21..20+N */
#define PRIO_PI_LOW 10
#define PRIO_PI_MED 20
#define PRIO_PI_HIGH 30

static const char *const placement_names[] = { "same", "cross", "both", NULL };
enum { PL_SAME, PL_CROSS, PL_BOTH };

enum {
	O_MECH, O_PLACEMENT, O_CPU, O_WAKER_CPU, O_PRIORITY, O_INTERVAL, O_DURATION, O_LOOPS,
	O_BUSY, O_ORDER, O_ORDER_WORKERS, O_ORDER_ROUNDS, O_ORDER_WORK, O_PI, O_PI_BUSY,
	O_PI_HOLD, O_PI_ROUNDS, O_STRICT, O_MLOCK, O_HOUSEKEEPING, O_SNAPSHOT, O_WINDOW,
	O_OUTPUT, O_ALLOW_NON_RT, O_CPU_OLD, O_COUNT
};

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
			      MAX_ORDER_WORKERS, NULL, "5", NULL },
	[O_ORDER_ROUNDS] = { "order-rounds", OPT_INT, NULL, "rounds of the order check", 1,
			     MAX_ORDER_ROUNDS, NULL, "5", NULL },
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
			  MAX_PI_ROUNDS, NULL, "3", NULL },
	[O_STRICT] = { "check-strict", OPT_BOOL, NULL,
		       "exit 3 (status check_failed) when the order or PI check fails", 0, 0, NULL,
		       "false", NULL },
	[O_MLOCK] = OPT_DEF_MLOCK,
	[O_HOUSEKEEPING] = { "housekeeping", OPT_INT, "CPU", "CPU of the reporter thread", 0,
			     CPU_SETSIZE - 1, NULL, NULL, "first online CPU not used, else unpinned" },
	[O_SNAPSHOT] = OPT_DEF_SNAPSHOT,
	[O_WINDOW] = OPT_DEF_WINDOW,
	[O_OUTPUT] = OPT_DEF_OUTPUT,
	[O_ALLOW_NON_RT] = { "allow-non-rt", OPT_BOOL, NULL,
			     "measure even without RT scheduling/mlock (rt_valid=false)", 0, 0,
			     NULL, "false", NULL },
	[O_CPU_OLD] = OPT_DEF_ALIAS("cpu", "cpus"),
};

struct sw_cfg {
	unsigned mechs;
	int placement;
	int cpu;
	int waker_cpu;		/* -1: no cross placement */
	int priority;
	uint64_t interval_ns;
	uint64_t duration_ns;	/* 0: none */
	uint64_t loops;		/* 0: none */
	bool busy;
	bool order;
	int order_workers, order_rounds;
	uint64_t order_work_ns;
	bool pi;
	uint64_t pi_busy_ns, pi_hold_ns;
	int pi_rounds;
	bool strict;
	bool mlock;
	int housekeeping;
	uint64_t snapshot_ns, window_ns;
	const char *output;
	bool allow_non_rt;
};

struct sw_ctx;

/* One waiter (and its channel and mechanism objects). */
struct sw_pair {
	struct sw_thread waiter;	/* first: cache-line aligned */
	struct sw_ctx *ctx;
	struct channel *ch;
	enum sw_mech mech;
	int waker_cpu;
	int run_err;
	/* mechanism objects */
	_Alignas(RL_CACHELINE) atomic_uint fword;
	pthread_mutex_t mx;
	pthread_cond_t cv;
	int flag;
	int pfd[2];
	int efd;
	mqd_t mq;
	int semid;
	/* hand-over from waker to waiter */
	_Alignas(RL_CACHELINE) _Atomic uint64_t t_wake;
	_Atomic uint64_t pending_missed;
	atomic_bool armed;
	atomic_bool quit;
};

struct sw_waker {
	struct sw_thread t;
	struct sw_ctx *ctx;
	struct sw_pair **pairs;
	size_t n_pairs;
	uint64_t phase_ns;
	int run_err;
};

struct order_result {
	int finish_prio[MAX_ORDER_WORKERS];
	uint64_t finish_ns[MAX_ORDER_WORKERS];
};

struct sw_checks {
	bool order_done, pi_done;
	int order_cpu;
	struct order_result order[MAX_ORDER_ROUNDS];
	int order_passed_rounds;
	bool order_passed;
	uint64_t pi_wait[2][MAX_PI_ROUNDS];	/* [0] with PI, [1] without */
	uint64_t pi_median[2];
	bool pi_bounded, pi_inversion;
	int err;
};

struct sw_ctx {
	const struct sw_cfg *cfg;
	struct sw_cfg cfg_store;
	struct sw_pair *pairs;
	size_t n_pairs;
	struct sw_waker wakers[2];
	size_t n_wakers;
	struct sw_thread busy;
	struct channel **chans;
	pthread_barrier_t ready, go;
	atomic_bool abort;
	atomic_bool stop;
	atomic_bool busy_stop;
	atomic_int running;
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

static int switch_init(void **out, const struct opt_value *v, const struct probe_env *env,
		       char *err, size_t errlen)
{
	struct sw_ctx *ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return -ENOMEM;
	struct sw_cfg *c = &ctx->cfg_store;
	int e = sw_parse_mechs(v[O_MECH].s, &c->mechs, err, errlen);
	if (e)
		goto bad;
	c->placement = (int)v[O_PLACEMENT].i;
	int last = -1;
	for (int i = 0; i < CPU_SETSIZE; i++)
		if (CPU_ISSET(i, env->online))
			last = i;
	c->cpu = v[O_CPU].set ? opts_one_cpu(&v[O_CPU]) : last;
	c->waker_cpu = -1;
	if (c->placement != PL_SAME) {
		c->waker_cpu = v[O_WAKER_CPU].set ? (int)v[O_WAKER_CPU].i
						  : first_other(env->online, c->cpu);
		if (c->waker_cpu < 0) {
			snprintf(err, errlen,
				 "--placement %s: needs a second online CPU for the waker; only CPU %d is online",
				 placement_names[c->placement], c->cpu);
			goto bad;
		}
		if (c->waker_cpu == c->cpu || !CPU_ISSET(c->waker_cpu, env->online)) {
			snprintf(err, errlen,
				 "--waker-cpu: must be an online CPU other than --cpus %d", c->cpu);
			goto bad;
		}
	}
	c->priority = (int)v[O_PRIORITY].i;
	c->interval_ns = (uint64_t)v[O_INTERVAL].i;
	if (v[O_DURATION].set && v[O_LOOPS].set) {
		snprintf(err, errlen, "--duration and --loops cannot be combined; give one of them");
		goto bad;
	}
	c->duration_ns = v[O_DURATION].set ? (uint64_t)v[O_DURATION].i : 0;
	c->loops = v[O_LOOPS].set ? (uint64_t)v[O_LOOPS].i : 0;
	c->busy = v[O_BUSY].i != 0;
	c->order = v[O_ORDER].i != 0;
	c->order_workers = (int)v[O_ORDER_WORKERS].i;
	c->order_rounds = (int)v[O_ORDER_ROUNDS].i;
	c->order_work_ns = (uint64_t)v[O_ORDER_WORK].i;
	c->pi = v[O_PI].i != 0;
	c->pi_busy_ns = (uint64_t)v[O_PI_BUSY].i;
	c->pi_hold_ns = (uint64_t)v[O_PI_HOLD].i;
	c->pi_rounds = (int)v[O_PI_ROUNDS].i;
	if (c->pi && c->pi_hold_ns * 4 > c->pi_busy_ns) {
		snprintf(err, errlen,
			 "--pi-hold: must be at most a quarter of --pi-busy (%llu ns) to tell bounded from unbounded waits",
			 (unsigned long long)c->pi_busy_ns);
		goto bad;
	}
	c->strict = v[O_STRICT].i != 0;
	c->mlock = v[O_MLOCK].i != 0;
	cpu_set_t used;
	CPU_ZERO(&used);
	CPU_SET(c->cpu, &used);
	if (c->waker_cpu >= 0)
		CPU_SET(c->waker_cpu, &used);
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

static void switch_report_config(const void *p, struct jsonw *w, const char *key)
{
	const struct sw_cfg *c = ((const struct sw_ctx *)p)->cfg;
	jw_obj_begin(w, key);
	jw_arr_begin(w, "mechanisms");
	for (int i = 0; i < SW_MECH_COUNT; i++)
		if (c->mechs & (1u << i))
			jw_str(w, NULL, sw_mech_names[i]);
	jw_arr_end(w);
	jw_str(w, "placement", placement_names[c->placement]);
	jw_int(w, "cpu", c->cpu);
	jw_int_or_null(w, "waker_cpu", c->waker_cpu);
	jw_str(w, "policy", "fifo");
	jw_int(w, "priority", c->priority);
	jw_int(w, "waker_priority", c->priority - 1);
	jw_uint(w, "interval_ns", c->interval_ns);
	if (c->duration_ns)
		jw_uint(w, "duration_ns", c->duration_ns);
	else
		jw_null(w, "duration_ns");
	if (c->loops)
		jw_uint(w, "loops", c->loops);
	else
		jw_null(w, "loops");
	jw_bool(w, "busy", c->busy);
	jw_bool(w, "order_check", c->order);
	jw_int(w, "order_workers", c->order_workers);
	jw_int(w, "order_rounds", c->order_rounds);
	jw_uint(w, "order_work_ns", c->order_work_ns);
	jw_bool(w, "pi_check", c->pi);
	jw_uint(w, "pi_busy_ns", c->pi_busy_ns);
	jw_uint(w, "pi_hold_ns", c->pi_hold_ns);
	jw_int(w, "pi_rounds", c->pi_rounds);
	jw_bool(w, "check_strict", c->strict);
	jw_bool(w, "mlock", c->mlock);
	jw_int_or_null(w, "housekeeping_cpu", c->housekeeping);
	jw_uint(w, "snapshot_interval_ns", c->snapshot_ns);
	jw_uint(w, "window_ns", c->window_ns);
	jw_bool(w, "allow_non_rt", c->allow_non_rt);
	jw_obj_end(w);
}

/* ---- mechanisms ---- */

static int mech_open(struct sw_pair *p, size_t idx)
{
	switch (p->mech) {
	case SW_FUTEX:
		atomic_init(&p->fword, 0);
		return 0;
	case SW_CONDVAR: {
		pthread_condattr_t ca;
		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_mutex_init(&p->mx, NULL);
		pthread_cond_init(&p->cv, &ca);
		pthread_condattr_destroy(&ca);
		return 0;
	}
	case SW_PIPE:
		return pipe2(p->pfd, O_CLOEXEC) ? -errno : 0;
	case SW_EVENTFD:
		p->efd = eventfd(0, EFD_CLOEXEC);
		return p->efd < 0 ? -errno : 0;
	case SW_MQ: {
		char name[64];
		snprintf(name, sizeof(name), "/rtlab-switch-%d-%zu", (int)getpid(), idx);
		struct mq_attr a = { .mq_maxmsg = 4, .mq_msgsize = 8 };
		p->mq = mq_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600, &a);
		if (p->mq == (mqd_t)-1)
			return -errno;
		mq_unlink(name);
		return 0;
	}
	case SW_SIGNAL:
		return 0;
	case SW_SYSV_SEM:
		p->semid = semget(IPC_PRIVATE, 1, IPC_CREAT | 0600);
		return p->semid < 0 ? -errno : 0;
	case SW_MECH_COUNT:
		break;
	}
	return -EINVAL;
}

static void mech_close(struct sw_pair *p)
{
	switch (p->mech) {
	case SW_CONDVAR:
		pthread_cond_destroy(&p->cv);
		pthread_mutex_destroy(&p->mx);
		break;
	case SW_PIPE:
		close(p->pfd[0]);
		close(p->pfd[1]);
		break;
	case SW_EVENTFD:
		close(p->efd);
		break;
	case SW_MQ:
		mq_close(p->mq);
		break;
	case SW_SYSV_SEM:
		semctl(p->semid, 0, IPC_RMID);
		break;
	case SW_FUTEX:
	case SW_SIGNAL:
	case SW_MECH_COUNT:
		break;
	}
}

/* The waking call (the clock was read right before). */
static int mech_wake(struct sw_pair *p)
{
	switch (p->mech) {
	case SW_FUTEX:
		atomic_store_explicit(&p->fword, 1, memory_order_release);
		return sw_futex_wake(&p->fword, 1) < 0 ? -errno : 0;
	case SW_CONDVAR:
		pthread_mutex_lock(&p->mx);
		p->flag = 1;
		pthread_cond_signal(&p->cv);
		pthread_mutex_unlock(&p->mx);
		return 0;
	case SW_PIPE: {
		char b = 1;
		return write(p->pfd[1], &b, 1) == 1 ? 0 : -errno;
	}
	case SW_EVENTFD: {
		uint64_t one = 1;
		return write(p->efd, &one, sizeof(one)) == sizeof(one) ? 0 : -errno;
	}
	case SW_MQ: {
		char m[8] = { 0 };
		return mq_send(p->mq, m, sizeof(m), 0) ? -errno : 0;
	}
	case SW_SIGNAL:
		return syscall(SYS_tgkill, (int)getpid(), p->waiter.tid, p->ctx->sig) ? -errno : 0;
	case SW_SYSV_SEM: {
		struct sembuf op = { 0, 1, 0 };
		return semop(p->semid, &op, 1) ? -errno : 0;
	}
	case SW_MECH_COUNT:
		break;
	}
	return -EINVAL;
}

/* Block until woken; returns 0 or -errno. */
static int mech_wait(struct sw_pair *p, const sigset_t *sigs)
{
	switch (p->mech) {
	case SW_FUTEX:
		while (atomic_exchange_explicit(&p->fword, 0, memory_order_acquire) == 0) {
			int e = sw_futex_wait(&p->fword, 0);
			if (e && e != -EAGAIN && e != -EINTR)
				return e;
		}
		return 0;
	case SW_CONDVAR:
		pthread_mutex_lock(&p->mx);
		while (!p->flag)
			pthread_cond_wait(&p->cv, &p->mx);
		p->flag = 0;
		pthread_mutex_unlock(&p->mx);
		return 0;
	case SW_PIPE: {
		char b;
		ssize_t r;
		while ((r = read(p->pfd[0], &b, 1)) < 0 && errno == EINTR)
			;
		return r == 1 ? 0 : -EIO;
	}
	case SW_EVENTFD: {
		uint64_t v;
		ssize_t r;
		while ((r = read(p->efd, &v, sizeof(v))) < 0 && errno == EINTR)
			;
		return r == sizeof(v) ? 0 : -EIO;
	}
	case SW_MQ: {
		char m[8];
		ssize_t r;
		while ((r = mq_receive(p->mq, m, sizeof(m), NULL)) < 0 && errno == EINTR)
			;
		return r < 0 ? -errno : 0;
	}
	case SW_SIGNAL: {
		int r;
		while ((r = sigwaitinfo(sigs, NULL)) < 0 && errno == EINTR)
			;
		return r < 0 ? -errno : 0;
	}
	case SW_SYSV_SEM: {
		struct sembuf op = { 0, -1, 0 };
		int r;
		while ((r = semop(p->semid, &op, 1)) < 0 && errno == EINTR)
			;
		return r < 0 ? -errno : 0;
	}
	case SW_MECH_COUNT:
		break;
	}
	return -EINVAL;
}

/* ---- measuring threads ---- */

static void waiter_main(struct sw_thread *t)
{
	struct sw_pair *p = (struct sw_pair *)t;
	struct channel *ch = p->ch;
	const uint64_t start = p->ctx->start_ns;
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, p->ctx->sig);
	atomic_store(&ch->tid, t->tid);

	for (;;) {
		atomic_store_explicit(&p->armed, true, memory_order_release);
		int e = mech_wait(p, &sigs);
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

static void waker_main(struct sw_thread *t)
{
	struct sw_waker *wk = (struct sw_waker *)t;
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
		struct period_step s = period_advance(next, rl_now_ns(CLOCK_MONOTONIC), interval);
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
		int e = mech_wake(p);
		if (e) {
			wk->run_err = -e;
			atomic_store(&ctx->stop, true);
			break;
		}
		k++;
	}
	if (atomic_fetch_sub(&ctx->running, 1) == 1)
		rt_notify_main();
}

static void busy_main(struct sw_thread *t)
{
	struct sw_ctx *ctx = t->arg;
	while (!atomic_load_explicit(&ctx->busy_stop, memory_order_relaxed))
		;
}

/* ---- checks ---- */

struct order_worker {
	struct sw_thread t;
	atomic_uint *go;
	atomic_uint *ticket;
	struct order_result *res;
	uint64_t work_ns;
};

static uint64_t thread_cpu_ns(void)
{
	return rl_now_ns(CLOCK_THREAD_CPUTIME_ID);
}

static void order_worker_main(struct sw_thread *t)
{
	struct order_worker *w = (struct order_worker *)t;
	while (atomic_load(w->go) == 0)
		sw_futex_wait(w->go, 0);
	uint64_t until = thread_cpu_ns() + w->work_ns;
	while (thread_cpu_ns() < until)
		;
	unsigned i = atomic_fetch_add(w->ticket, 1);
	w->res->finish_prio[i] = t->req.priority;
	w->res->finish_ns[i] = rl_now_ns(CLOCK_MONOTONIC);
}

/* One round; runs on the controller (highest priority, same CPU). */
static int order_round(const struct sw_cfg *c, struct order_result *res)
{
	struct order_worker w[MAX_ORDER_WORKERS];
	atomic_uint go = 0, ticket = 0;
	pthread_barrier_t ready;
	int n = c->order_workers, e = 0, started = 0;
	memset(w, 0, sizeof(w));
	pthread_barrier_init(&ready, NULL, (unsigned)n + 1);
	/* created in ascending priority so creation order cannot explain the result */
	for (int i = 0; i < n; i++) {
		w[i].t.cpu = c->cpu;
		w[i].t.req = (struct rt_sched_req){ .policy = RT_FIFO,
						    .priority = PRIO_ORDER_BASE + 1 + i };
		w[i].t.fn = order_worker_main;
		w[i].t.ready = &ready;
		w[i].go = &go;
		w[i].ticket = &ticket;
		w[i].res = res;
		w[i].work_ns = c->order_work_ns;
		e = sw_thread_start(&w[i].t);
		if (e)
			break;
		started++;
	}
	if (started < n) {
		/* the barrier can never complete: this is fatal for the check */
		return e;
	}
	pthread_barrier_wait(&ready);
	/* let every worker reach its futex wait, then release them together */
	struct timespec d = { 0, 5 * 1000 * 1000 };
	nanosleep(&d, NULL);
	atomic_store(&go, 1);
	sw_futex_wake(&go, INT_MAX);
	for (int i = 0; i < n; i++)
		pthread_join(w[i].t.th, NULL);
	pthread_barrier_destroy(&ready);
	return 0;
}

struct pi_thread {
	struct sw_thread t;
	struct pi_shared *s;
};

struct pi_shared {
	pthread_mutex_t m;
	atomic_uint locked;
	atomic_uint release;
	uint64_t hold_ns, busy_ns;
	uint64_t wait_ns;
};

static void pi_low_main(struct sw_thread *t)
{
	struct pi_shared *s = ((struct pi_thread *)t)->s;
	pthread_mutex_lock(&s->m);
	uint64_t until = rl_now_ns(CLOCK_MONOTONIC) + s->hold_ns;
	atomic_store(&s->locked, 1);
	sw_futex_wake(&s->locked, 1); /* the controller preempts us here */
	sw_spin_until(until);
	pthread_mutex_unlock(&s->m);
}

static void pi_high_main(struct sw_thread *t)
{
	struct pi_shared *s = ((struct pi_thread *)t)->s;
	while (atomic_load(&s->release) == 0)
		sw_futex_wait(&s->release, 0);
	uint64_t t0 = rl_now_ns(CLOCK_MONOTONIC);
	pthread_mutex_lock(&s->m);
	uint64_t t1 = rl_now_ns(CLOCK_MONOTONIC);
	pthread_mutex_unlock(&s->m);
	s->wait_ns = t1 - t0;
}

static void pi_med_main(struct sw_thread *t)
{
	struct pi_shared *s = ((struct pi_thread *)t)->s;
	while (atomic_load(&s->release) == 0)
		sw_futex_wait(&s->release, 0);
	sw_spin_until(rl_now_ns(CLOCK_MONOTONIC) + s->busy_ns);
}

static int pi_round(const struct sw_cfg *c, bool pi, uint64_t *wait)
{
	struct pi_shared s;
	struct pi_thread th[3];
	memset(&s, 0, sizeof(s));
	memset(th, 0, sizeof(th));
	pthread_mutexattr_t ma;
	pthread_mutexattr_init(&ma);
	int e = pthread_mutexattr_setprotocol(&ma, pi ? PTHREAD_PRIO_INHERIT : PTHREAD_PRIO_NONE);
	if (e) {
		pthread_mutexattr_destroy(&ma);
		return -e;
	}
	pthread_mutex_init(&s.m, &ma);
	pthread_mutexattr_destroy(&ma);
	s.hold_ns = c->pi_hold_ns;
	s.busy_ns = c->pi_busy_ns;
	pthread_barrier_t ready;
	pthread_barrier_init(&ready, NULL, 4);
	static void (*const fns[3])(struct sw_thread *) = { pi_low_main, pi_med_main,
							    pi_high_main };
	static const int prios[3] = { PRIO_PI_LOW, PRIO_PI_MED, PRIO_PI_HIGH };
	for (int i = 0; i < 3; i++) {
		th[i].t.cpu = c->cpu;
		th[i].t.req = (struct rt_sched_req){ .policy = RT_FIFO, .priority = prios[i] };
		th[i].t.fn = fns[i];
		th[i].t.ready = &ready;
		th[i].s = &s;
		e = sw_thread_start(&th[i].t);
		if (e)
			return e; /* fatal for the check, see order_round */
	}
	pthread_barrier_wait(&ready);
	while (atomic_load(&s.locked) == 0)
		sw_futex_wait(&s.locked, 0);
	atomic_store(&s.release, 1);
	sw_futex_wake(&s.release, INT_MAX);
	for (int i = 0; i < 3; i++)
		pthread_join(th[i].t.th, NULL);
	pthread_barrier_destroy(&ready);
	pthread_mutex_destroy(&s.m);
	*wait = s.wait_ns;
	return 0;
}

static void checks_main(struct sw_thread *t)
{
	struct sw_ctx *ctx = t->arg;
	const struct sw_cfg *c = ctx->cfg;
	struct sw_checks *k = &ctx->checks;
	k->order_cpu = c->cpu;
	if (c->order) {
		int passed = 0;
		for (int r = 0; r < c->order_rounds && !k->err; r++) {
			k->err = order_round(c, &k->order[r]);
			if (!k->err && sw_order_passed(k->order[r].finish_prio,
						       (size_t)c->order_workers))
				passed++;
		}
		k->order_passed_rounds = passed;
		k->order_passed = !k->err && passed == c->order_rounds;
		k->order_done = !k->err;
	}
	if (c->pi && !k->err) {
		uint64_t scratch[MAX_PI_ROUNDS];
		for (int mode = 0; mode < 2 && !k->err; mode++)
			for (int r = 0; r < c->pi_rounds && !k->err; r++)
				k->err = pi_round(c, mode == 0, &k->pi_wait[mode][r]);
		if (!k->err) {
			for (int mode = 0; mode < 2; mode++)
				k->pi_median[mode] = sw_median(k->pi_wait[mode], (size_t)c->pi_rounds,
							       scratch);
			k->pi_bounded = sw_pi_bounded(k->pi_median[0], c->pi_busy_ns);
			k->pi_inversion = sw_pi_inversion_shown(k->pi_median[1], c->pi_busy_ns);
			k->pi_done = true;
		}
	}
}

static void write_checks(void *arg, struct jsonw *w, bool final)
{
	const struct sw_ctx *ctx = arg;
	const struct sw_cfg *c = ctx->cfg;
	const struct sw_checks *k = &ctx->checks;
	if (!final)
		return;
	jw_obj_begin(w, "checks");
	if (k->order_done) {
		jw_obj_begin(w, "order");
		jw_int(w, "cpu", k->order_cpu);
		jw_int(w, "workers", c->order_workers);
		jw_int(w, "rounds", c->order_rounds);
		jw_uint(w, "work_ns", c->order_work_ns);
		jw_arr_begin(w, "priorities");
		for (int i = c->order_workers - 1; i >= 0; i--)
			jw_int(w, NULL, PRIO_ORDER_BASE + 1 + i);
		jw_arr_end(w);
		jw_arr_begin(w, "finish_order");
		for (int r = 0; r < c->order_rounds; r++) {
			jw_arr_begin(w, NULL);
			for (int i = 0; i < c->order_workers; i++)
				jw_int(w, NULL, k->order[r].finish_prio[i]);
			jw_arr_end(w);
		}
		jw_arr_end(w);
		jw_int(w, "passed_rounds", k->order_passed_rounds);
		jw_str(w, "verdict", k->order_passed ? "passed" : "failed");
		jw_obj_end(w);
	} else {
		jw_null(w, "order");
	}
	if (k->pi_done) {
		jw_obj_begin(w, "pi");
		jw_int(w, "cpu", c->cpu);
		jw_uint(w, "hold_ns", c->pi_hold_ns);
		jw_uint(w, "busy_ns", c->pi_busy_ns);
		jw_int(w, "rounds", c->pi_rounds);
		static const char *const keys[2] = { "with_pi_ns", "without_pi_ns" };
		for (int mode = 0; mode < 2; mode++) {
			jw_arr_begin(w, keys[mode]);
			for (int r = 0; r < c->pi_rounds; r++)
				jw_uint(w, NULL, k->pi_wait[mode][r]);
			jw_arr_end(w);
		}
		jw_uint(w, "with_pi_median_ns", k->pi_median[0]);
		jw_uint(w, "without_pi_median_ns", k->pi_median[1]);
		jw_bool(w, "bounded", k->pi_bounded);
		jw_bool(w, "inversion_shown", k->pi_inversion);
		jw_str(w, "verdict", k->pi_bounded ? "passed" : "failed");
		jw_obj_end(w);
	} else {
		jw_null(w, "pi");
	}
	if (k->err)
		jw_strf(w, "error", "cannot run the check threads: %s", strerror(-k->err));
	else
		jw_null(w, "error");
	jw_obj_end(w);
}

/* ---- run ---- */

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
		wk->ctx = ctx;
		wk->pairs = calloc(nm, sizeof(*wk->pairs));
		if (!wk->pairs)
			return -ENOMEM;
		wk->phase_ns = pl ? c->interval_ns / 2 : 0;
		wk->t.cpu = cross ? c->waker_cpu : c->cpu;
		wk->t.req = (struct rt_sched_req){ .policy = RT_FIFO, .priority = c->priority - 1 };
		wk->t.fn = waker_main;
		snprintf(wk->t.role, sizeof(wk->t.role), "waker@cpu%d", wk->t.cpu);
		for (int m = 0; m < SW_MECH_COUNT; m++) {
			if (!(c->mechs & (1u << m)))
				continue;
			struct sw_pair *p = &ctx->pairs[i];
			p->ctx = ctx;
			p->mech = (enum sw_mech)m;
			p->waker_cpu = wk->t.cpu;
			p->pfd[0] = p->pfd[1] = p->efd = p->semid = -1;
			char name[32];
			sw_chan_name(name, sizeof(name), sw_mech_names[m], wk->t.cpu, c->cpu);
			int e = mech_open(p, i);
			if (e)
				return e;
			e = channel_create(&ctx->chans[i], name, c->cpu, c->window_ns, 0);
			if (e)
				return e;
			p->ch = ctx->chans[i];
			p->waiter.cpu = c->cpu;
			p->waiter.req = (struct rt_sched_req){ .policy = RT_FIFO,
							       .priority = c->priority };
			p->waiter.fn = waiter_main;
			snprintf(p->waiter.role, sizeof(p->waiter.role), "%s", name);
			wk->pairs[wk->n_pairs++] = p;
			i++;
		}
	}
	ctx->busy.cpu = c->cpu;
	ctx->busy.req = (struct rt_sched_req){ .policy = RT_OTHER, .priority = 0 };
	ctx->busy.fn = busy_main;
	ctx->busy.arg = ctx;
	snprintf(ctx->busy.role, sizeof(ctx->busy.role), "busy@cpu%d", c->cpu);
	return 0;
}

/* rt_wait_done_or_signal predicate: every measuring thread has finished. */
static bool all_threads_done(const void *arg)
{
	const struct sw_ctx *ctx = arg;
	return atomic_load(&ctx->running) == 0;
}

static int switch_run(void *p, const struct probe_env *env)
{
	struct sw_ctx *ctx = p;
	const struct sw_cfg *c = ctx->cfg;
	int out_fd = STDOUT_FILENO, mlock_err = 0, code = RL_EXIT_ERROR, e;
	struct jsonw w;
	jw_init(&w);

	rt_block_signals(); /* inherited: signals reach only main's wait */

	if (c->output && (e = pc_open_out(c->output, &out_fd)) != 0) {
		fprintf(stderr, "rtlab-probe switch: --output: cannot open %s: %s\n", c->output,
			strerror(-e));
		return RL_EXIT_ERROR;
	}
	bool rep_pinned = c->housekeeping >= 0 && rt_pin_self(c->housekeeping) == 0;
	cpu_set_t rep_aff;
	if (rt_get_affinity_self(&rep_aff) != 0)
		CPU_ZERO(&rep_aff);
	if (c->mlock)
		mlock_err = rt_mlockall();
	e = switch_setup(ctx);
	if (e) {
		fprintf(stderr, "rtlab-probe switch: cannot set up the wake mechanisms: %s\n",
			strerror(-e));
		goto out;
	}

	/* every measuring thread: waiters, wakers, busy runner */
	struct sw_thread *threads[2 * SW_MECH_COUNT + 3];
	size_t nt = 0;
	for (size_t i = 0; i < ctx->n_pairs; i++)
		threads[nt++] = &ctx->pairs[i].waiter;
	for (size_t i = 0; i < ctx->n_wakers; i++)
		threads[nt++] = &ctx->wakers[i].t;
	if (c->busy)
		threads[nt++] = &ctx->busy;
	pthread_barrier_init(&ctx->ready, NULL, (unsigned)nt + 1);
	pthread_barrier_init(&ctx->go, NULL, (unsigned)nt + 1);
	atomic_init(&ctx->running, (int)ctx->n_wakers);
	for (size_t i = 0; i < nt; i++) {
		threads[i]->ready = &ctx->ready;
		threads[i]->go = &ctx->go;
		threads[i]->abort = &ctx->abort;
		e = sw_thread_start(threads[i]);
		if (e) {
			fprintf(stderr, "rtlab-probe switch: cannot create a thread: %s\n",
				strerror(-e));
			_exit(RL_EXIT_ERROR); /* the barrier can never complete */
		}
	}
	pthread_barrier_wait(&ctx->ready);

	bool rt_valid = !(c->mlock && mlock_err);
	const struct sw_thread *bad = NULL;
	for (size_t i = 0; i < nt; i++) {
		if (!sw_thread_rt_ok(threads[i])) {
			rt_valid = false;
			if (!bad)
				bad = threads[i];
		}
	}
	char why[512] = "";
	if (bad)
		snprintf(why, sizeof(why),
			 "cannot set %s priority %d on CPU %d for %s (%s): run as root or grant CAP_SYS_NICE, or pass --allow-non-rt",
			 bad->req.policy == RT_OTHER ? "SCHED_OTHER" : "SCHED_FIFO",
			 bad->req.priority, bad->cpu, bad->role,
			 bad->pin_err ? strerror(-bad->pin_err)
			 : bad->sched_err ? strerror(-bad->sched_err) : "not in effect after setting");
	else if (c->mlock && mlock_err)
		snprintf(why, sizeof(why),
			 "cannot lock memory with mlockall (%s): run as root or grant CAP_IPC_LOCK, or pass --no-mlock or --allow-non-rt",
			 strerror(-mlock_err));
	if (why[0] && !c->allow_non_rt) {
		atomic_store(&ctx->abort, true);
		pthread_barrier_wait(&ctx->go);
		for (size_t i = 0; i < nt; i++)
			pthread_join(threads[i]->th, NULL);
		fprintf(stderr, "rtlab-probe switch: skipped: %s\n", why);
		code = RL_EXIT_SKIPPED;
		goto out;
	}

	uint64_t start_real = rl_now_ns(CLOCK_REALTIME) + START_LEAD_NS;
	uint64_t start_mono = rl_now_ns(CLOCK_MONOTONIC) + START_LEAD_NS;
	ctx->start_ns = start_mono;
	pc_header_begin(&w, "switch", env, start_real, start_mono);
	switch_report_config(ctx, &w, "config");
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
		.n_chans = ctx->n_pairs,
		.extra = write_checks,
		.extra_arg = ctx,
	};
	e = reporter_start(&rep, &rc);
	if (e) {
		atomic_store(&ctx->abort, true);
		pthread_barrier_wait(&ctx->go);
		for (size_t i = 0; i < nt; i++)
			pthread_join(threads[i]->th, NULL);
		fprintf(stderr, "rtlab-probe switch: cannot start the reporter: %s\n", strerror(-e));
		goto out;
	}
	pthread_barrier_wait(&ctx->go);

	bool interrupted = rt_wait_done_or_signal(&ctx->stop, all_threads_done, ctx);
	for (size_t i = 0; i < ctx->n_wakers; i++)
		pthread_join(ctx->wakers[i].t.th, NULL);
	for (size_t i = 0; i < ctx->n_pairs; i++) {
		struct sw_pair *pp = &ctx->pairs[i];
		atomic_store_explicit(&pp->quit, true, memory_order_release);
		if (mech_wake(pp) != 0) {
			/* cannot happen for a healthy object; the join below would hang */
			fprintf(stderr, "rtlab-probe switch: cannot stop a waiter\n");
			_exit(RL_EXIT_ERROR);
		}
		pthread_join(pp->waiter.th, NULL);
	}
	atomic_store(&ctx->busy_stop, true);
	if (c->busy)
		pthread_join(ctx->busy.th, NULL);

	/* the checks, on the measured CPU, after measuring */
	if (!interrupted && (c->order || c->pi)) {
		struct sw_thread ct;
		memset(&ct, 0, sizeof(ct));
		ct.cpu = c->cpu;
		ct.req = (struct rt_sched_req){ .policy = RT_FIFO, .priority = PRIO_CHECK_CTRL };
		ct.fn = checks_main;
		ct.arg = ctx;
		e = sw_thread_start(&ct);
		if (e)
			ctx->checks.err = e;
		else
			pthread_join(ct.th, NULL);
		/* a signal that arrived meanwhile still counts */
		sigset_t pend;
		sigpending(&pend);
		if (sigismember(&pend, SIGINT) || sigismember(&pend, SIGTERM))
			interrupted = true;
	}

	struct reporter_outcome o = { .status = "completed", .exit_code = RL_EXIT_OK };
	char errmsg[160] = "";
	for (size_t i = 0; i < ctx->n_pairs && !errmsg[0]; i++)
		if (ctx->pairs[i].run_err)
			snprintf(errmsg, sizeof(errmsg), "waiting on %s: %s", ctx->chans[i]->name,
				 strerror(ctx->pairs[i].run_err));
	for (size_t i = 0; i < ctx->n_wakers && !errmsg[0]; i++)
		if (ctx->wakers[i].run_err)
			snprintf(errmsg, sizeof(errmsg), "waker on CPU %d: %s",
				 ctx->wakers[i].t.cpu, strerror(ctx->wakers[i].run_err));
	bool check_failed = (ctx->checks.order_done && !ctx->checks.order_passed) ||
			    (ctx->checks.pi_done && !ctx->checks.pi_bounded);
	if (!reporter_outcome_stopped(&o, interrupted, errmsg) && c->strict && check_failed) {
		o.status = "check_failed";
		o.exit_code = RL_EXIT_THRESHOLD;
	}
	code = reporter_conclude(rep, &o, out_err, "switch");
	pthread_barrier_destroy(&ctx->ready);
	pthread_barrier_destroy(&ctx->go);
out:
	jw_free(&w);
	if (out_fd != STDOUT_FILENO)
		close(out_fd);
	return code;
}

static void switch_fini(void *p)
{
	struct sw_ctx *ctx = p;
	if (!ctx)
		return;
	if (ctx->pairs) {
		for (size_t i = 0; i < ctx->n_pairs; i++) {
			if (ctx->pairs[i].ch)
				mech_close(&ctx->pairs[i]);
			if (ctx->chans[i])
				channel_destroy(ctx->chans[i]);
		}
	}
	for (size_t i = 0; i < 2; i++)
		free(ctx->wakers[i].pairs);
	free(ctx->chans);
	free(ctx->pairs);
	free(ctx);
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
	.opts = switch_opts,
	.n_opts = O_COUNT,
	.unavailable = NULL,
	.init = switch_init,
	.report_config = switch_report_config,
	.run = switch_run,
	.fini = switch_fini,
};
