/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the event probe's pure parts: clock-offset brackets and the
 * GPIO v2 / PTP EXTTS / PTP_SYS_OFFSET_EXTENDED / PPS_FETCH decoders, driven
 * by synthetic binary event streams in tests/data (uAPI layouts, little-endian
 * 64-bit; generated as documented in docs/probes/event.md).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "event.h"
#include "tap.h"

#ifndef RTLAB_TEST_DATA
#define RTLAB_TEST_DATA "tests/data"
#endif

static size_t load(const char *name, unsigned char *buf, size_t max)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", RTLAB_TEST_DATA, name);
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "cannot open %s\n", path);
		return 0;
	}
	size_t n = fread(buf, 1, max, f);
	fclose(f);
	return n;
}

static void test_brackets(void)
{
	struct clk_sample s[3] = {
		{ 1000, 5000, 1400 }, /* width 400 */
		{ 2000, 6100, 2100 }, /* width 100: the best, mid 2050 */
		{ 3000, 7000, 3900 },
	};
	int64_t off;
	uint64_t unc;
	CHECK_EQ_U(clk_offset_best(s, 3, &off, &unc), 0);
	CHECK_EQ_U(off, 6100 - 2050);
	CHECK_EQ_U(unc, 50);
	CHECK_EQ_U(clk_offset_best(s, 0, &off, &unc), -EINVAL);
	struct clk_sample bad = { 10, 0, 5 };
	CHECK_EQ_U(clk_offset_best(&bad, 1, &off, &unc), -EINVAL);
	/* negative offsets and the conversion */
	struct clk_sample neg = { 10000, 100, 10000 };
	CHECK_EQ_U(clk_offset_best(&neg, 1, &off, &unc), 0);
	CHECK(off == -9900);
	CHECK_EQ_U(clk_convert(100, off), 10000);
	CHECK_EQ_U(clk_convert(5000, 4000), 1000);
	CHECK_EQ_U(clk_convert(5, 10), 0);
	/* the live REALTIME - MONOTONIC measurement is narrow */
	CHECK_EQ_U(clk_realtime_minus_mono(16, &off, &unc), 0);
	CHECK(unc < 1000000);
}

static void test_gpio(void)
{
	unsigned char buf[4096];
	size_t n = load("gpio_events.bin", buf, sizeof(buf));
	CHECK_EQ_U(n, 4 * gpio_event_size());
	struct gpio_state st = { 0 };
	struct ev_event ev[8];
	int k = gpio_decode(&st, buf, n, ev, 8);
	CHECK_EQ_U(k, 4);
	CHECK_EQ_U(ev[0].capture_ns, 1000000000ULL);
	CHECK_EQ_U(ev[3].capture_ns, 1003000500ULL);
	CHECK_EQ_U(ev[0].lost + ev[1].lost + ev[3].lost, 0);
	CHECK_EQ_U(ev[2].lost, 2); /* line_seqno 2 -> 5 */
	CHECK_EQ_U(gpio_decode(&st, buf, n - 1, ev, 8), -EINVAL);
	/* max limits the count */
	struct gpio_state st2 = { 0 };
	CHECK_EQ_U(gpio_decode(&st2, buf, n, ev, 2), 2);
}

static void test_ptp(void)
{
	unsigned char buf[4096];
	size_t n = load("ptp_extts.bin", buf, sizeof(buf));
	CHECK_EQ_U(n, 3 * ptp_event_size());
	struct ptp_state st = { .index = 0 };
	struct ev_event ev[8];
	CHECK_EQ_U(ptp_decode(&st, buf, n, ev, 8), 2);
	CHECK_EQ_U(ev[0].capture_ns, 100 * NS_PER_SEC + 250);
	CHECK_EQ_U(ev[1].capture_ns, 101 * NS_PER_SEC + 250);
	CHECK_EQ_U(st.other, 1);
	n = load("ptp_sysoff_ext.bin", buf, sizeof(buf));
	CHECK_EQ_U(n, 1216);
	int64_t off;
	uint64_t unc;
	CHECK_EQ_U(ptp_offset_from_extended(buf, &off, &unc), 0);
	/* best bracket: 10 s + 2000..2100 ns around PHC 15 s + 2150 ns */
	CHECK_EQ_U(off, 5 * NS_PER_SEC + 100);
	CHECK_EQ_U(unc, 50);
}

static void test_pps(void)
{
	unsigned char buf[4096];
	size_t n = load("pps_fetch.bin", buf, sizeof(buf));
	size_t sz = pps_fdata_size();
	CHECK_EQ_U(n, 4 * sz);
	struct pps_state st = { 0 };
	struct ev_event ev;
	CHECK_EQ_U(pps_decode(&st, buf, &ev), 1);
	CHECK_EQ_U(ev.capture_ns, 1700000000ULL * NS_PER_SEC + 123);
	CHECK_EQ_U(pps_decode(&st, buf + sz, &ev), 0); /* same sequence: no new edge */
	CHECK_EQ_U(pps_decode(&st, buf + 2 * sz, &ev), 1);
	CHECK_EQ_U(ev.lost, 0);
	CHECK_EQ_U(ev.capture_ns, 1700000001ULL * NS_PER_SEC + 456);
	CHECK_EQ_U(pps_decode(&st, buf + 3 * sz, &ev), 1);
	CHECK_EQ_U(ev.lost, 2); /* 8 -> 11 */
}

int main(void)
{
	test_brackets();
	test_gpio();
	test_ptp();
	test_pps();
	return tap_done("event");
}
