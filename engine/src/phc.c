/* SPDX-License-Identifier: MIT */
/* Clock-domain offsets with bracketed readings (phc.h). */
#include "phc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>

#if defined(__has_include)
#if __has_include(<linux/ptp_clock.h>)
#include <linux/ptp_clock.h>
#endif
#endif

int clk_offset_best(const struct clk_sample *s, size_t n, int64_t *offset, uint64_t *unc)
{
	if (!n)
		return -EINVAL;
	size_t best = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i].after < s[i].before)
			return -EINVAL;
		if (s[i].after - s[i].before < s[best].after - s[best].before)
			best = i;
	}
	uint64_t w = s[best].after - s[best].before;
	uint64_t mid = s[best].before + w / 2;
	*offset = (int64_t)(s[best].ref - mid);
	*unc = (w + 1) / 2;
	return 0;
}

int clk_realtime_minus_mono(size_t n, int64_t *offset, uint64_t *unc)
{
	struct clk_sample s[32];
	if (n > 32)
		n = 32;
	for (size_t i = 0; i < n; i++) {
		s[i].before = rl_now_ns(CLOCK_MONOTONIC);
		s[i].ref = rl_now_ns(CLOCK_REALTIME);
		s[i].after = rl_now_ns(CLOCK_MONOTONIC);
	}
	return clk_offset_best(s, n, offset, unc);
}

int phc_open(int index)
{
	char dev[32];
	if (index < 0)
		return -ENODEV;
	snprintf(dev, sizeof(dev), "/dev/ptp%d", index);
	int fd = open(dev, O_RDONLY | O_CLOEXEC);
	return fd >= 0 ? fd : -errno;
}

#ifdef PTP_SYS_OFFSET_EXTENDED

static uint64_t pct_ns(const struct ptp_clock_time *t)
{
	return (uint64_t)t->sec * NS_PER_SEC + t->nsec;
}

/* The offset from n (before, ref, after) triples: triple i starts at ts[stride * i]. */
static int offset_from_triples(const struct ptp_clock_time *ts, unsigned n, unsigned stride,
			       int64_t *offset, uint64_t *unc)
{
	if (!n || n > PTP_MAX_SAMPLES)
		return -EINVAL;
	struct clk_sample s[PTP_MAX_SAMPLES];
	for (unsigned i = 0; i < n; i++) {
		const struct ptp_clock_time *t = ts + stride * i;
		s[i].before = pct_ns(&t[0]);
		s[i].ref = pct_ns(&t[1]);
		s[i].after = pct_ns(&t[2]);
	}
	return clk_offset_best(s, n, offset, unc);
}

/* PTP_SYS_OFFSET_EXTENDED: the triples one after the other. */
int ptp_offset_from_extended(const void *raw, int64_t *offset, uint64_t *unc)
{
	struct ptp_sys_offset_extended x;
	memcpy(&x, raw, sizeof(x));
	return offset_from_triples(&x.ts[0][0], x.n_samples, 3, offset, unc);
}

/* PTP_SYS_OFFSET: system, PHC, system, PHC, ... system; neighbouring triples share a reading. */
int ptp_offset_from_basic(const void *raw, int64_t *offset, uint64_t *unc)
{
	struct ptp_sys_offset x;
	memcpy(&x, raw, sizeof(x));
	return offset_from_triples(x.ts, x.n_samples, 2, offset, unc);
}

int phc_measure(int fd, int64_t *phc_minus_rt, uint64_t *unc, const char **method)
{
	struct ptp_sys_offset_extended x;
	memset(&x, 0, sizeof(x));
	x.n_samples = 10;
	errno = 0;
	if (ioctl(fd, PTP_SYS_OFFSET_EXTENDED, &x) == 0 &&
	    ptp_offset_from_extended(&x, phc_minus_rt, unc) == 0) {
		*method = "PTP_SYS_OFFSET_EXTENDED";
		return 0;
	}
	struct ptp_sys_offset b;
	memset(&b, 0, sizeof(b));
	b.n_samples = 10;
	if (ioctl(fd, PTP_SYS_OFFSET, &b) == 0 &&
	    ptp_offset_from_basic(&b, phc_minus_rt, unc) == 0) {
		*method = "PTP_SYS_OFFSET";
		return 0;
	}
	return errno ? -errno : -EINVAL;
}

#else

int ptp_offset_from_extended(const void *raw, int64_t *offset, uint64_t *unc)
{
	(void)raw, (void)offset, (void)unc;
	return -EOPNOTSUPP;
}

int ptp_offset_from_basic(const void *raw, int64_t *offset, uint64_t *unc)
{
	(void)raw, (void)offset, (void)unc;
	return -EOPNOTSUPP;
}

int phc_measure(int fd, int64_t *phc_minus_rt, uint64_t *unc, const char **method)
{
	(void)fd, (void)phc_minus_rt, (void)unc, (void)method;
	return -EOPNOTSUPP;
}

#endif
