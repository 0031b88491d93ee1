/* SPDX-License-Identifier: MIT */
/* Unit tests: the counter (calibration, conversions) and the noise arithmetic. */
#include <stdbool.h>
#include <stdint.h>

#include <string.h>

#include "counter.h"
#include "jsonw.h"
#include "noise.h"
#include "tap.h"

static void test_throttle(void)
{
	CHECK_EQ_U(noise_throttle_gap_ns(950000, 1000000), 50 * NS_PER_MS);
	CHECK_EQ_U(noise_throttle_gap_ns(-1, 1000000), 0);
	CHECK_EQ_U(noise_throttle_gap_ns(1000000, 1000000), 0);
	CHECK_EQ_U(noise_throttle_gap_ns(950000, -2), 0);
	uint64_t t = 50 * NS_PER_MS;
	CHECK(noise_is_throttle_gap(t, t));
	CHECK(noise_is_throttle_gap(40 * NS_PER_MS, t));
	CHECK(!noise_is_throttle_gap(39 * NS_PER_MS, t));
	CHECK(noise_is_throttle_gap(62500 * NS_PER_US, t));
	CHECK(!noise_is_throttle_gap(63 * NS_PER_MS, t));
	CHECK(!noise_is_throttle_gap(t, 0));
}

static void test_available(void)
{
	CHECK_EQ_U(noise_available_ppm(NS_PER_SEC, 0), 1000000);
	CHECK_EQ_U(noise_available_ppm(NS_PER_SEC, 50 * NS_PER_MS), 950000);
	CHECK_EQ_U(noise_available_ppm(NS_PER_SEC, 2 * NS_PER_SEC), 0);
	CHECK_EQ_U(noise_available_ppm(0, 5), 0);
	CHECK_EQ_U(noise_per_second(300, 3 * NS_PER_SEC), 100);
	CHECK_EQ_U(noise_per_second(5, 0), 0);
}

static void test_counter_mono(void)
{
	struct counter c;
	CHECK(counter_calibrate(&c, false, NS_PER_MS) == 0);
	CHECK(c.kind == COUNTER_MONO);
	CHECK_EQ_U(counter_ticks_to_ns(&c, 12345), 12345);
	CHECK_EQ_U(counter_ns_to_ticks(&c, 12345), 12345);
	CHECK_EQ_U(counter_to_mono(&c, 777), 777);
	CHECK(counter_calibrate(&c, true, 0) != 0);
}

static void test_counter_hw(void)
{
	const char *why = NULL;
	bool safe = counter_hw_safe(&why);
	CHECK(why != NULL);
	struct counter c;
	CHECK(counter_calibrate(&c, safe, 20 * NS_PER_MS) == 0);
	/* ns -> ticks rounds up, so a threshold never undercuts its ns value */
	uint64_t t = counter_ns_to_ticks(&c, 1000);
	CHECK(counter_ticks_to_ns(&c, t) >= 1000 - 1);
	/* the counter agrees with CLOCK_MONOTONIC over ~20 ms within 0.2 % + 20 us */
	uint64_t m0 = rl_now_ns(CLOCK_MONOTONIC);
	uint64_t c0 = counter_read_ordered(&c);
	struct timespec ts = { 0, 20 * 1000 * 1000 };
	nanosleep(&ts, NULL);
	uint64_t c1 = counter_read_ordered(&c);
	uint64_t m1 = rl_now_ns(CLOCK_MONOTONIC);
	uint64_t dm = m1 - m0, dc = counter_ticks_to_ns(&c, c1 - c0);
	uint64_t diff = dm > dc ? dm - dc : dc - dm;
	CHECK(diff < dm / 500 + 20000);
	/* counter_to_mono maps a fresh reading close to CLOCK_MONOTONIC */
	uint64_t m2 = rl_now_ns(CLOCK_MONOTONIC);
	uint64_t x = counter_to_mono(&c, counter_read_ordered(&c));
	uint64_t d2 = x > m2 ? x - m2 : m2 - x;
	CHECK(d2 < 200000);
	CHECK(counter_read(&c) <= counter_read(&c) + 1000000);
}

/* The header's effective.counter object, as noise (with its calibration) and interfere write it. */
static void test_counter_effective(void)
{
	struct counter c = { .kind = COUNTER_TSC, .ns_per_tick = 0.3125, .cal_span_ns = 50000123 };
	struct jsonw w;
	jw_init(&w);
	jw_obj_begin(&w, NULL);
	counter_write_effective(&w, &c, "invariant TSC", true);
	jw_obj_end(&w);
	CHECK(strcmp(jw_text(&w), "{\"counter\":{\"kind\":\"tsc\",\"why\":\"invariant TSC\","
			 "\"ps_per_tick\":313,\"calibration_ns\":50000123}}") == 0);
	jw_reset(&w);
	c.kind = COUNTER_MONO;
	c.ns_per_tick = 1.0;
	jw_obj_begin(&w, NULL);
	counter_write_effective(&w, &c, NULL, false);
	jw_obj_end(&w);
	CHECK(strcmp(jw_text(&w), "{\"counter\":{\"kind\":\"monotonic\",\"why\":\"\","
			 "\"ps_per_tick\":1000}}") == 0);
	CHECK(jw_error(&w) == 0);
	jw_free(&w);
}

int main(void)
{
	test_throttle();
	test_available();
	test_counter_mono();
	test_counter_hw();
	test_counter_effective();
	return tap_done("noise");
}
