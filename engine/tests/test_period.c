/* SPDX-License-Identifier: MIT */
#include "period.h"
#include "tap.h"

int main(void)
{
	const uint64_t I = 1000000; /* 1 ms */
	struct period_step s;

	s = period_advance(5 * I, 5 * I + 12000, I); /* on time-ish */
	CHECK_EQ_U(s.latency_ns, 12000);
	CHECK_EQ_U(s.missed, 0);
	CHECK_EQ_U(s.next_ns, 6 * I);
	CHECK(!s.negative);

	s = period_advance(5 * I, 5 * I, I); /* exactly on the deadline */
	CHECK_EQ_U(s.latency_ns, 0);
	CHECK_EQ_U(s.missed, 0);
	CHECK_EQ_U(s.next_ns, 6 * I);

	s = period_advance(5 * I, 6 * I - 1, I); /* just under one period late */
	CHECK_EQ_U(s.missed, 0);
	CHECK_EQ_U(s.next_ns, 6 * I);

	s = period_advance(5 * I, 6 * I, I); /* next deadline is now: passed, missed */
	CHECK_EQ_U(s.missed, 1);
	CHECK_EQ_U(s.next_ns, 7 * I);

	s = period_advance(5 * I, 5 * I + 2950000, I); /* 2.95 ms burst */
	CHECK_EQ_U(s.latency_ns, 2950000);
	CHECK_EQ_U(s.missed, 2);
	CHECK_EQ_U(s.next_ns, 8 * I);
	CHECK(s.next_ns > 5 * I + 2950000);

	s = period_advance(5 * I, 5 * I + 45 * I + 7, I); /* 45 ms host stall */
	CHECK_EQ_U(s.missed, 45);
	CHECK_EQ_U(s.next_ns, 51 * I);

	s = period_advance(5 * I, 5 * I - 300, I); /* clock stepped back */
	CHECK(s.negative);
	CHECK_EQ_U(s.latency_ns, 0);
	CHECK_EQ_U(s.missed, 0);
	CHECK_EQ_U(s.next_ns, 6 * I);

	/* invariant over many cases: next > now, next - deadline = (missed+1)*I */
	for (uint64_t lat = 0; lat < 20 * I; lat += 7919) {
		for (uint64_t iv = 1000; iv <= 3 * I; iv *= 3) {
			s = period_advance(100 * I, 100 * I + lat, iv);
			CHECK(s.next_ns > 100 * I + lat);
			CHECK(s.next_ns - iv <= 100 * I + lat);
			CHECK_EQ_U(s.next_ns - 100 * I, (s.missed + 1) * iv);
		}
	}

	/* skipped deadlines 11..15 (x I): only those before the end count */
	CHECK_EQ_U(period_missed_before(10 * I, 5, 100 * I, I), 5);
	CHECK_EQ_U(period_missed_before(10 * I, 5, 13 * I, I), 2);     /* 11, 12 */
	CHECK_EQ_U(period_missed_before(10 * I, 5, 13 * I + 1, I), 3); /* 11, 12, 13 */
	CHECK_EQ_U(period_missed_before(10 * I, 5, 11 * I, I), 0);
	CHECK_EQ_U(period_missed_before(10 * I, 5, 10 * I, I), 0);
	CHECK_EQ_U(period_missed_before(10 * I, 5, UINT64_MAX, I), 5);
	/* a run whose last deadline is 12 I: a wake-up at 14.5 I for deadline 11 I skips 12,
	 * 13 and 14, of which only 12 is the run's */
	s = period_advance_until(11 * I, 14 * I + I / 2, I, 12 * I);
	CHECK_EQ_U(s.missed, 1);
	CHECK_EQ_U(s.next_ns, 15 * I);
	CHECK_EQ_U(s.latency_ns, 3 * I + I / 2);
	s = period_advance_until(11 * I, 14 * I + I / 2, I, UINT64_MAX);
	CHECK_EQ_U(s.missed, 3);
	s = period_advance_until(12 * I, 14 * I + I / 2, I, 12 * I); /* the last deadline */
	CHECK_EQ_U(s.missed, 0);

	/* slots start + k*I before start + N*I: a deadline plus its skipped ones before the
	 * end never exceed the N slots */
	for (uint64_t d = 0; d < 10; d++)
		for (uint64_t m = 0; m < 15; m++)
			CHECK(d + 1 + period_missed_before(d * I, m, 10 * I, I) <= 10);

	CHECK_EQ_U(period_first(10 * I, 10 * I, I), 11 * I);
	CHECK_EQ_U(period_first(10 * I, 10 * I + 1, I), 11 * I);
	CHECK_EQ_U(period_first(10 * I, 13 * I, I), 14 * I);
	CHECK_EQ_U(period_first(10 * I, 9 * I, I), 11 * I);
	return tap_done("period");
}
