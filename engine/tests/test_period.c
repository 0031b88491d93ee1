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

	CHECK_EQ_U(period_first(10 * I, 10 * I, I), 11 * I);
	CHECK_EQ_U(period_first(10 * I, 10 * I + 1, I), 11 * I);
	CHECK_EQ_U(period_first(10 * I, 13 * I, I), 14 * I);
	CHECK_EQ_U(period_first(10 * I, 9 * I, I), 11 * I);
	return tap_done("period");
}
