/* SPDX-License-Identifier: MIT */
/*
 * Missed-period arithmetic of a periodic wake-up on absolute deadlines, as a
 * pure function so it can be unit-tested.
 *
 * A thread slept until `deadline` and woke at `now`. Its latency is
 * now - deadline. Every later deadline deadline + k*interval (k >= 1) that is
 * <= now has already passed: each is one missed period, counted once. The
 * next deadline is the first one strictly after now. A wake-up before the
 * deadline (impossible with TIMER_ABSTIME unless the clock was stepped) is
 * clamped to latency 0 and flagged `negative` so it can be counted.
 */
#ifndef RTLAB_PERIOD_H
#define RTLAB_PERIOD_H

#include <stdbool.h>
#include <stdint.h>

struct period_step {
	uint64_t latency_ns;
	uint64_t missed;
	uint64_t next_ns;
	bool negative;
};

static inline struct period_step period_advance(uint64_t deadline, uint64_t now,
						uint64_t interval)
{
	struct period_step s;
	if (now < deadline) {
		s.latency_ns = 0;
		s.missed = 0;
		s.negative = true;
		s.next_ns = deadline + interval;
		return s;
	}
	s.negative = false;
	s.latency_ns = now - deadline;
	s.missed = s.latency_ns < interval ? 0 : s.latency_ns / interval;
	s.next_ns = deadline + (s.missed + 1) * interval;
	return s;
}

/* Of the `missed` deadlines deadline + k*interval (1 <= k <= missed) that a wake-up at
 * `deadline` skipped, how many are before `end` (deadline < end): a run that ends at `end`
 * counts only its own periods as missed. */
static inline uint64_t period_missed_before(uint64_t deadline, uint64_t missed, uint64_t end,
					    uint64_t interval)
{
	if (deadline >= end)
		return 0;
	uint64_t due = (end - deadline - 1) / interval;
	return missed < due ? missed : due;
}

/* period_advance for a run whose last deadline is `last` (UINT64_MAX: no end): deadlines
 * after it are not the run's, so they are never counted as missed (a late wake-up near the
 * end would otherwise make samples + missed exceed the run's periods). next_ns as ever. */
static inline struct period_step period_advance_until(uint64_t deadline, uint64_t now,
						      uint64_t interval, uint64_t last)
{
	struct period_step s = period_advance(deadline, now, interval);
	if (last != UINT64_MAX)
		s.missed = period_missed_before(deadline, s.missed, last + 1, interval);
	return s;
}

/* First deadline start + k*interval (k >= 1) strictly after now. */
static inline uint64_t period_first(uint64_t start, uint64_t now, uint64_t interval)
{
	if (now < start)
		return start + interval;
	return start + ((now - start) / interval + 1) * interval;
}

#endif
