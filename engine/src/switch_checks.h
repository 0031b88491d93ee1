/* SPDX-License-Identifier: MIT */
/*
 * The `switch` probe's checks, run after measuring on the measured CPU: priority
 * order (workers of distinct priorities released together finish highest first) and
 * priority inheritance (a high-priority thread waiting for a PI mutex held by a
 * low-priority one is not held up by a busy medium-priority thread); their verdicts
 * are pure arithmetic (unit-tested). Results in result.checks.
 */
#ifndef RTLAB_SWITCH_CHECKS_H
#define RTLAB_SWITCH_CHECKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jsonw.h"

#define SW_MAX_ORDER_WORKERS 16
#define SW_MAX_ORDER_ROUNDS 50
#define SW_MAX_PI_ROUNDS 20

/* What to check, and where. */
struct sw_check_cfg {
	int cpu;
	bool order;
	int order_workers, order_rounds;
	uint64_t order_work_ns;
	bool pi;
	uint64_t pi_busy_ns, pi_hold_ns;
	int pi_rounds;
};

struct sw_order_result {
	int finish_prio[SW_MAX_ORDER_WORKERS];
	uint64_t finish_ns[SW_MAX_ORDER_WORKERS];
};

struct sw_checks {
	bool order_done, pi_done;
	int order_cpu;
	struct sw_order_result order[SW_MAX_ORDER_ROUNDS];
	int order_passed_rounds;
	bool order_passed;
	uint64_t pi_wait[2][SW_MAX_PI_ROUNDS];	/* [0] with PI, [1] without */
	uint64_t pi_median[2];
	bool pi_bounded, pi_inversion;
	int err;				/* the check threads could not run: -errno */
};

/* Run the checks of c (from a controller thread of its own, above every worker). */
void sw_checks_run(const struct sw_check_cfg *c, struct sw_checks *k);
/* Whether a check ran and failed. */
bool sw_checks_failed(const struct sw_checks *k);
/* The result's "checks" object. */
void sw_checks_write(struct jsonw *w, const struct sw_check_cfg *c, const struct sw_checks *k);

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

#endif
