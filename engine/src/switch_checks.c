/* SPDX-License-Identifier: MIT */
/* The `switch` probe's priority-order and priority-inheritance checks (switch_checks.h). */
#include "switch_checks.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "crew.h"
#include "rt.h"
#include "wake.h"

#define CHECK_STACK (128 * 1024)
#define PRIO_CHECK_CTRL 60	/* the controller: above every worker */
#define PRIO_ORDER_BASE 20	/* order workers: 21..20+N */
#define PRIO_PI_LOW 10
#define PRIO_PI_MED 20
#define PRIO_PI_HIGH 30

/* A thread of a check: it sets itself up, then, once released, runs fn. */
struct check_thread {
	struct rt_thread rt;
	struct crew *crew;
	void (*fn)(struct check_thread *t);
	/* the controller's */
	const struct sw_check_cfg *cfg;
	struct sw_checks *checks;
};

static void *check_thread_main(void *arg)
{
	struct check_thread *t = arg;
	rt_thread_setup(&t->rt);
	if (crew_wait_go(t->crew))
		t->fn(t);
	return NULL;
}

/* ---- verdicts ---- */

bool sw_order_passed(const int *prio, size_t n)
{
	for (size_t i = 1; i < n; i++)
		if (prio[i] >= prio[i - 1])
			return false;
	return true;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

uint64_t sw_median(const uint64_t *v, size_t n, uint64_t *scratch)
{
	memcpy(scratch, v, n * sizeof(*v));
	qsort(scratch, n, sizeof(*scratch), cmp_u64);
	return n % 2 ? scratch[n / 2] : scratch[n / 2 - 1] / 2 + scratch[n / 2] / 2 +
						(scratch[n / 2 - 1] % 2 + scratch[n / 2] % 2) / 2;
}

bool sw_pi_bounded(uint64_t pi_median_ns, uint64_t busy_ns)
{
	return pi_median_ns < busy_ns / 2;
}

bool sw_pi_inversion_shown(uint64_t nopi_median_ns, uint64_t busy_ns)
{
	return nopi_median_ns >= busy_ns / 10 * 8 + (busy_ns % 10) * 8 / 10;
}

/* ---- priority order ---- */

struct order_worker {
	struct check_thread t;
	atomic_uint *go;
	atomic_uint *ticket;
	struct sw_order_result *res;
	uint64_t work_ns;
};

static uint64_t thread_cpu_ns(void)
{
	return rl_now_ns(CLOCK_THREAD_CPUTIME_ID);
}

static void order_worker_main(struct check_thread *t)
{
	struct order_worker *w = (struct order_worker *)t;
	while (atomic_load(w->go) == 0)
		wake_futex_wait(w->go, 0);
	uint64_t until = thread_cpu_ns() + w->work_ns;
	while (thread_cpu_ns() < until)
		;
	unsigned i = atomic_fetch_add(w->ticket, 1);
	w->res->finish_prio[i] = t->rt.req.priority;
	w->res->finish_ns[i] = rl_now_ns(CLOCK_MONOTONIC);
}

/* One round; runs on the controller (highest priority, same CPU). */
static int order_round(const struct sw_check_cfg *c, struct sw_order_result *res)
{
	struct order_worker w[SW_MAX_ORDER_WORKERS];
	atomic_uint go = 0, ticket = 0;
	struct crew crew;
	int n = c->order_workers;
	memset(w, 0, sizeof(w));
	/* created in ascending priority so creation order cannot explain the result */
	for (int i = 0; i < n; i++) {
		w[i].t.rt.cpu = c->cpu;
		w[i].t.rt.req = (struct rt_sched_req){ .policy = RT_FIFO,
						       .priority = PRIO_ORDER_BASE + 1 + i };
		w[i].t.fn = order_worker_main;
		w[i].t.crew = &crew;
		w[i].go = &go;
		w[i].ticket = &ticket;
		w[i].res = res;
		w[i].work_ns = c->order_work_ns;
	}
	int e = crew_start(&crew, (size_t)n, CHECK_STACK, check_thread_main, w, sizeof(w[0]));
	if (e)
		return e; /* fatal for the check */
	crew_go(&crew);
	/* let every worker reach its futex wait, then release them together */
	struct timespec d = { 0, 5 * 1000 * 1000 };
	nanosleep(&d, NULL);
	atomic_store(&go, 1);
	wake_futex_wake(&go, INT_MAX);
	crew_join(&crew);
	crew_destroy(&crew);
	return 0;
}

/* ---- priority inheritance ---- */

struct pi_shared {
	pthread_mutex_t m;
	atomic_uint locked;
	atomic_uint release;
	uint64_t hold_ns, busy_ns;
	uint64_t wait_ns;
};

struct pi_thread {
	struct check_thread t;
	struct pi_shared *s;
};

static void pi_low_main(struct check_thread *t)
{
	struct pi_shared *s = ((struct pi_thread *)t)->s;
	pthread_mutex_lock(&s->m);
	uint64_t until = rl_now_ns(CLOCK_MONOTONIC) + s->hold_ns;
	atomic_store(&s->locked, 1);
	wake_futex_wake(&s->locked, 1); /* the controller preempts us here */
	wake_spin_until(until);
	pthread_mutex_unlock(&s->m);
}

static void pi_high_main(struct check_thread *t)
{
	struct pi_shared *s = ((struct pi_thread *)t)->s;
	while (atomic_load(&s->release) == 0)
		wake_futex_wait(&s->release, 0);
	uint64_t t0 = rl_now_ns(CLOCK_MONOTONIC);
	pthread_mutex_lock(&s->m);
	uint64_t t1 = rl_now_ns(CLOCK_MONOTONIC);
	pthread_mutex_unlock(&s->m);
	s->wait_ns = t1 - t0;
}

static void pi_med_main(struct check_thread *t)
{
	struct pi_shared *s = ((struct pi_thread *)t)->s;
	while (atomic_load(&s->release) == 0)
		wake_futex_wait(&s->release, 0);
	wake_spin_until(rl_now_ns(CLOCK_MONOTONIC) + s->busy_ns);
}

static int pi_round(const struct sw_check_cfg *c, bool pi, uint64_t *wait)
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
	static void (*const fns[3])(struct check_thread *) = { pi_low_main, pi_med_main,
							       pi_high_main };
	static const int prios[3] = { PRIO_PI_LOW, PRIO_PI_MED, PRIO_PI_HIGH };
	struct crew crew;
	for (int i = 0; i < 3; i++) {
		th[i].t.rt.cpu = c->cpu;
		th[i].t.rt.req = (struct rt_sched_req){ .policy = RT_FIFO, .priority = prios[i] };
		th[i].t.fn = fns[i];
		th[i].t.crew = &crew;
		th[i].s = &s;
	}
	e = crew_start(&crew, 3, CHECK_STACK, check_thread_main, th, sizeof(th[0]));
	if (e) {
		pthread_mutex_destroy(&s.m);
		return e; /* fatal for the check */
	}
	crew_go(&crew);
	while (atomic_load(&s.locked) == 0)
		wake_futex_wait(&s.locked, 0);
	atomic_store(&s.release, 1);
	wake_futex_wake(&s.release, INT_MAX);
	crew_join(&crew);
	crew_destroy(&crew);
	pthread_mutex_destroy(&s.m);
	*wait = s.wait_ns;
	return 0;
}

/* ---- both, from the controller ---- */

static void controller_main(struct check_thread *t)
{
	const struct sw_check_cfg *c = t->cfg;
	struct sw_checks *k = t->checks;
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
		uint64_t scratch[SW_MAX_PI_ROUNDS];
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

void sw_checks_run(const struct sw_check_cfg *c, struct sw_checks *k)
{
	struct crew crew;
	struct check_thread ctl = {
		.rt = { .cpu = c->cpu,
			.req = { .policy = RT_FIFO, .priority = PRIO_CHECK_CTRL } },
		.crew = &crew,
		.fn = controller_main,
		.cfg = c,
		.checks = k,
	};
	int e = crew_start(&crew, 1, CHECK_STACK, check_thread_main, &ctl, 0);
	if (e) {
		k->err = e;
		return;
	}
	crew_go(&crew);
	crew_join(&crew);
	crew_destroy(&crew);
}

bool sw_checks_failed(const struct sw_checks *k)
{
	return (k->order_done && !k->order_passed) || (k->pi_done && !k->pi_bounded);
}

void sw_checks_write(struct jsonw *w, const struct sw_check_cfg *c, const struct sw_checks *k)
{
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
