/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the event probe's pure parts: clock-offset brackets and the
 * GPIO v2 / PTP EXTTS / PTP_SYS_OFFSET_EXTENDED / PPS_FETCH decoders, driven
 * by synthetic event streams built here in the kernel's uAPI structs, so in
 * the byte order and layout of the machine (and qemu-user guest) they run on.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "event.h"
#include "tap.h"

#if defined(__has_include)
#if __has_include(<linux/gpio.h>)
#include <linux/gpio.h>
#endif
#if __has_include(<linux/ptp_clock.h>)
#include <linux/ptp_clock.h>
#endif
#if __has_include(<linux/pps.h>)
#include <linux/pps.h>
#endif
#endif

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

#ifdef GPIO_V2_GET_LINE_IOCTL
static void test_gpio(void)
{
	/* four edges of line 5; line_seqno jumps 2 -> 5: two were dropped */
	static const struct {
		unsigned long long ts;
		unsigned id, seqno, line_seqno;
	} e[4] = {
		{ 1000000000ULL, GPIO_V2_LINE_EVENT_RISING_EDGE, 1, 1 },
		{ 1001000000ULL, GPIO_V2_LINE_EVENT_FALLING_EDGE, 2, 2 },
		{ 1002000000ULL, GPIO_V2_LINE_EVENT_RISING_EDGE, 3, 5 },
		{ 1003000500ULL, GPIO_V2_LINE_EVENT_FALLING_EDGE, 4, 6 },
	};
	struct gpio_v2_line_event buf[4];
	memset(buf, 0, sizeof(buf));
	for (int k = 0; k < 4; k++) {
		buf[k].timestamp_ns = e[k].ts;
		buf[k].id = e[k].id;
		buf[k].offset = 5;
		buf[k].seqno = e[k].seqno;
		buf[k].line_seqno = e[k].line_seqno;
	}
	size_t n = sizeof(buf);
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
#endif

#ifdef PTP_EXTTS_REQUEST
static void set_pct(struct ptp_clock_time *t, long long sec, unsigned nsec)
{
	t->sec = sec;
	t->nsec = nsec;
}

static void test_ptp(void)
{
	/* three external timestamps, the second on channel 1 (not ours) */
	struct ptp_extts_event x[3];
	memset(x, 0, sizeof(x));
	set_pct(&x[0].t, 100, 250);
	set_pct(&x[1].t, 100, 500000250);
	x[1].index = 1;
	set_pct(&x[2].t, 101, 250);
	size_t n = sizeof(x);
	CHECK_EQ_U(n, 3 * ptp_event_size());
	struct ptp_state st = { .index = 0 };
	struct ev_event ev[8];
	CHECK_EQ_U(ptp_decode(&st, x, n, ev, 8), 2);
	CHECK_EQ_U(ev[0].capture_ns, 100 * NS_PER_SEC + 250);
	CHECK_EQ_U(ev[1].capture_ns, 101 * NS_PER_SEC + 250);
	CHECK_EQ_U(st.other, 1);

	/* three [system, PHC, system] brackets; the PHC runs 5 s ahead */
	struct ptp_sys_offset_extended *so = calloc(1, sizeof(*so));
	CHECK(so != NULL);
	if (!so)
		return;
	static const unsigned ns[3][3] = {
		{ 1000, 1600, 1400 }, { 2000, 2150, 2100 }, { 3000, 3700, 3900 },
	};
	so->n_samples = 3;
	for (int k = 0; k < 3; k++) {
		set_pct(&so->ts[k][0], 10, ns[k][0]);
		set_pct(&so->ts[k][1], 15, ns[k][1]);
		set_pct(&so->ts[k][2], 10, ns[k][2]);
	}
	CHECK_EQ_U(sizeof(*so), 1216);
	int64_t off;
	uint64_t unc;
	CHECK_EQ_U(ptp_offset_from_extended(so, &off, &unc), 0);
	/* best bracket: 10 s + 2000..2100 ns around PHC 15 s + 2150 ns */
	CHECK_EQ_U(off, 5 * NS_PER_SEC + 100);
	CHECK_EQ_U(unc, 50);
	so->n_samples = 0;
	CHECK_EQ_U(ptp_offset_from_extended(so, &off, &unc), -EINVAL);
	free(so);
}
#endif

#ifdef PPS_FETCH
static void test_pps(void)
{
	/* PPS_FETCH results: an edge, the same again (a timeout), the next, then 8 -> 11 */
	static const struct {
		unsigned seq;
		long long sec;
		int nsec;
	} r[4] = {
		{ 7, 1700000000, 123 }, { 7, 1700000000, 123 },
		{ 8, 1700000001, 456 }, { 11, 1700000004, 789 },
	};
	struct pps_fdata buf[4];
	memset(buf, 0, sizeof(buf));
	for (int k = 0; k < 4; k++) {
		buf[k].info.assert_sequence = r[k].seq;
		buf[k].info.assert_tu.sec = r[k].sec;
		buf[k].info.assert_tu.nsec = r[k].nsec;
	}
	size_t sz = pps_fdata_size();
	CHECK_EQ_U(sizeof(buf), 4 * sz);
	const unsigned char *b = (const unsigned char *)buf;
	struct pps_state st = { 0 };
	struct ev_event ev;
	CHECK_EQ_U(pps_decode(&st, b, &ev), 1);
	CHECK_EQ_U(ev.capture_ns, 1700000000ULL * NS_PER_SEC + 123);
	CHECK_EQ_U(pps_decode(&st, b + sz, &ev), 0); /* same sequence: no new edge */
	CHECK_EQ_U(pps_decode(&st, b + 2 * sz, &ev), 1);
	CHECK_EQ_U(ev.lost, 0);
	CHECK_EQ_U(ev.capture_ns, 1700000001ULL * NS_PER_SEC + 456);
	CHECK_EQ_U(pps_decode(&st, b + 3 * sz, &ev), 1);
	CHECK_EQ_U(ev.lost, 2); /* 8 -> 11 */
	CHECK_EQ_U(ev.capture_ns, 1700000004ULL * NS_PER_SEC + 789);
}
#endif

/* A source the build has no uAPI for: opening it says which, every operation refuses. */
static void test_unsupported(void)
{
	static const struct evsrc_ops none = EVSRC_UNSUPPORTED_OPS("none", "PPS uAPI");
	char err[128] = "";
	struct evsrc s = { .ops = &none, .fd = -1 };
	struct evsrc_cfg cfg = { .device = "/dev/pps0" };
	CHECK(none.open(&s, &cfg, err, sizeof(err)) == -EOPNOTSUPP);
	CHECK(strcmp(err, "this build's kernel headers have no PPS uAPI") == 0);
	struct ev_event ev;
	CHECK(none.arm(&s) == -EOPNOTSUPP);
	CHECK(none.wait(&s, 0, &ev) == -EOPNOTSUPP);
	none.close(&s);
	CHECK(s.fd == -1);
}

/* A device source's open: --device required, a path that cannot be opened named. */
static void test_open_device(void)
{
	char err[160] = "";
	struct evsrc_cfg cfg = { .device = NULL };
	CHECK(evsrc_open_device(&cfg, O_RDWR, "pps", "/dev/pps0", "PPS device", err,
				sizeof(err)) == -EINVAL);
	CHECK(strcmp(err, "--device: required for --source pps (e.g. /dev/pps0)") == 0);
	cfg.device = "/nonexistent/pps9";
	CHECK(evsrc_open_device(&cfg, O_RDWR, "pps", "/dev/pps0", "PPS device", err,
				sizeof(err)) == -ENOENT);
	CHECK(strcmp(err, "/nonexistent/pps9: No such file or directory (no PPS device here)") == 0);
	cfg.device = "/dev/null";
	int fd = evsrc_open_device(&cfg, O_RDONLY, "gpio", "/dev/gpiochip0", "GPIO chip", err,
				   sizeof(err));
	CHECK(fd >= 0 && (fcntl(fd, F_GETFD) & FD_CLOEXEC));
	struct evsrc s = { .fd = fd };
	evsrc_close_fd(&s);
	CHECK(s.fd == -1);
	evsrc_close_fd(&s); /* closed once */
	CHECK(s.fd == -1);
}

/* The sources' wait: readable at once, or nothing until the deadline. */
static void test_poll(void)
{
	int p[2];
	CHECK(pipe(p) == 0);
	uint64_t t0 = rl_now_ns(CLOCK_MONOTONIC);
	CHECK(evsrc_poll(p[0], t0) == 0); /* deadline already passed */
	CHECK(evsrc_poll(p[0], t0 + 20 * NS_PER_MS) == 0);
	CHECK(rl_now_ns(CLOCK_MONOTONIC) >= t0 + 20 * NS_PER_MS);
	CHECK(write(p[1], "x", 1) == 1);
	CHECK(evsrc_poll(p[0], rl_now_ns(CLOCK_MONOTONIC) + NS_PER_SEC) == 1);
	close(p[0]);
	close(p[1]);
}

int main(void)
{
	test_brackets();
	test_unsupported();
	test_open_device();
	test_poll();
#ifdef GPIO_V2_GET_LINE_IOCTL
	test_gpio();
#endif
#ifdef PTP_EXTTS_REQUEST
	test_ptp();
#endif
#ifdef PPS_FETCH
	test_pps();
#endif
	return tap_done("event");
}
