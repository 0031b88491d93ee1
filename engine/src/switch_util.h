/* SPDX-License-Identifier: MIT */
/*
 * Shared pieces of the `switch` and `overhead` probes: the wake mechanism
 * list, futex helpers, a pinned real-time thread launcher that reads back
 * what took effect, the header writer, and the pure arithmetic of the
 * priority-order and priority-inheritance verdicts (unit-tested).
 */
#ifndef RTLAB_SWITCH_UTIL_H
#define RTLAB_SWITCH_UTIL_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "jsonw.h"
#include "probe_common.h"
#include "probe.h"
#include "rt.h"

enum sw_mech { SW_FUTEX, SW_CONDVAR, SW_PIPE, SW_EVENTFD, SW_MQ, SW_SIGNAL, SW_SYSV_SEM,
	       SW_MECH_COUNT };

extern const char *const sw_mech_names[]; /* indexed by enum sw_mech, NULL-terminated */

/*
 * Parse "futex,pipe" or "all" into a bit mask of (1 << enum sw_mech).
 * Returns 0, or -EINVAL with a message naming the bad word and the choices.
 */
int sw_parse_mechs(const char *s, unsigned *mask, char *err, size_t errlen) RL_WUR;

/* Channel name: "futex@cpu1" (waker_cpu < 0 or == cpu) or "futex@cpu0->cpu1". */
void sw_chan_name(char *buf, size_t len, const char *what, int waker_cpu, int cpu);

/*
 * Priority-order verdict: prio[i] is the priority of the worker that finished
 * i-th. Passed when priorities are strictly decreasing in finishing order.
 */
bool sw_order_passed(const int *prio_in_finish_order, size_t n);

/* Median of n values (sorted copy in scratch; n >= 1). */
uint64_t sw_median(const uint64_t *v, size_t n, uint64_t *scratch);

/*
 * PI verdict: with PI the median wait must stay below half the medium
 * thread's busy time (bounded by the critical section, not by the medium
 * thread); inversion_shown: the median wait without PI is at least 80 % of it.
 */
bool sw_pi_bounded(uint64_t pi_median_ns, uint64_t busy_ns);
bool sw_pi_inversion_shown(uint64_t nopi_median_ns, uint64_t busy_ns);

/* futex on a 32-bit word (private). */
int sw_futex_wait(atomic_uint *word, unsigned val);
int sw_futex_wake(atomic_uint *word, int n);

/* Spin (reading CLOCK_MONOTONIC) until now >= until_ns. */
void sw_spin_until(uint64_t until_ns);

/* A pinned thread with a requested scheduling, launched by sw_thread_start. */
struct sw_thread {
	_Alignas(RL_CACHELINE) pthread_t th;
	bool started;
	int cpu;
	struct rt_sched_req req;
	char role[48];			/* e.g. "waiter futex@cpu1" */
	void (*fn)(struct sw_thread *);
	void *arg;
	pthread_barrier_t *ready, *go;	/* NULL: none */
	atomic_bool *abort;		/* checked after go */
	/* results of the set-up, valid after ready */
	int pin_err, sched_err, get_err, kpolicy, kprio, tid;
	cpu_set_t aff;
};

int sw_thread_start(struct sw_thread *t) RL_WUR;
/* The thread runs where and how it was asked to. */
bool sw_thread_rt_ok(const struct sw_thread *t);
/* One effective thread object (schema thread_effective). */
void sw_thread_write(struct jsonw *w, const struct sw_thread *t);

/* The `effective` object for probes built on sw_thread. */
void sw_write_effective(struct jsonw *w, struct sw_thread *const *threads, size_t n,
			bool mlock_req, int mlock_err, const cpu_set_t *rep_aff, bool rep_pinned,
			bool rt_valid);



#endif
