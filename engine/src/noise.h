/* SPDX-License-Identifier: MIT */
/* Arithmetic of the `noise` probe, kept pure for unit tests. */
#ifndef RTLAB_NOISE_H
#define RTLAB_NOISE_H

#include <stdbool.h>
#include <stdint.h>

#include "common.h"

/*
 * The gap RT throttling produces on a CPU whose only runnable task is a
 * busy SCHED_FIFO/RR loop: period - runtime (e.g. 1 s - 0.95 s = 50 ms).
 * 0 when throttling is off (runtime -1 or >= period) or unknown (< 0 period).
 */
static inline uint64_t noise_throttle_gap_ns(int64_t rt_runtime_us, int64_t rt_period_us)
{
	if (rt_period_us <= 0 || rt_runtime_us < 0 || rt_runtime_us >= rt_period_us)
		return 0;
	return (uint64_t)(rt_period_us - rt_runtime_us) * NS_PER_US;
}

/* A gap within [0.8, 1.25] x the throttling gap is counted as throttling. */
static inline bool noise_is_throttle_gap(uint64_t gap_ns, uint64_t throttle_ns)
{
	if (!throttle_ns)
		return false;
	return gap_ns >= throttle_ns - throttle_ns / 5 && gap_ns <= throttle_ns + throttle_ns / 4;
}

/* Share of the measured time left to the loop, in parts per million. */
static inline uint64_t noise_available_ppm(uint64_t measured_ns, uint64_t noise_ns)
{
	if (!measured_ns)
		return 0;
	if (noise_ns >= measured_ns)
		return 0;
	return (uint64_t)((double)(measured_ns - noise_ns) * 1e6 / (double)measured_ns + 0.5);
}

/* x per second of measured time (rounded). */
static inline uint64_t noise_per_second(uint64_t x, uint64_t measured_ns)
{
	if (!measured_ns)
		return 0;
	return (uint64_t)((double)x * 1e9 / (double)measured_ns + 0.5);
}

#endif
