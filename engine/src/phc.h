/* SPDX-License-Identifier: MIT */
/*
 * Offsets between clock domains, measured with bracketed readings: a PTP
 * hardware clock (PHC, /dev/ptpN) against CLOCK_REALTIME with
 * PTP_SYS_OFFSET_EXTENDED (fallback PTP_SYS_OFFSET), and CLOCK_REALTIME against
 * CLOCK_MONOTONIC. Used by the `event` probe (PTP_EXTTS captures) and the `udp`
 * probe (hardware packet timestamps). The arithmetic is pure and unit-tested with
 * recorded ioctl results (tests/test_event.c, tests/test_udp_ts.c).
 */
#ifndef RTLAB_PHC_H
#define RTLAB_PHC_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

/* One bracketed reading: before/after on clock A, ref on clock B. */
struct clk_sample {
	uint64_t before, ref, after;
};

/*
 * From n bracketed readings pick the narrowest bracket; offset = ref - mid
 * (B - A), uncertainty = half its width. 0, or -EINVAL (n == 0 or a bracket
 * with after < before).
 */
int clk_offset_best(const struct clk_sample *s, size_t n, int64_t *offset,
		    uint64_t *uncertainty) RL_WUR;

/* Measure CLOCK_REALTIME - CLOCK_MONOTONIC (best of n brackets). */
int clk_realtime_minus_mono(size_t n, int64_t *offset, uint64_t *uncertainty) RL_WUR;

/* Convert a time t of a domain into the target clock, given offset = domain -
 * target (e.g. PHC - CLOCK_REALTIME); clamps at 0. */
static inline uint64_t clk_convert(uint64_t t, int64_t offset)
{
	if (offset >= 0)
		return t >= (uint64_t)offset ? t - (uint64_t)offset : 0;
	return t + (uint64_t)(-offset);
}

/* Offset PHC - system from a PTP_SYS_OFFSET_EXTENDED result (raw struct). */
int ptp_offset_from_extended(const void *sysoff_ext, int64_t *offset, uint64_t *unc) RL_WUR;
/* Offset PHC - system from a PTP_SYS_OFFSET result (raw struct): ts[2k]
 * system, ts[2k+1] PHC, ts[2k+2] system. */
int ptp_offset_from_basic(const void *sysoff, int64_t *offset, uint64_t *unc) RL_WUR;

/*
 * Measure PHC - CLOCK_REALTIME on an open /dev/ptpN (10 brackets):
 * PTP_SYS_OFFSET_EXTENDED, else PTP_SYS_OFFSET. *method names the ioctl used.
 * 0 or -errno (-EOPNOTSUPP: no PTP clock uAPI in this build).
 */
int phc_measure(int fd, int64_t *phc_minus_rt, uint64_t *unc, const char **method) RL_WUR;

/* Open /dev/ptp<index> read-only; the fd or -errno. */
int phc_open(int index) RL_WUR;

#endif
