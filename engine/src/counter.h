/* SPDX-License-Identifier: MIT */
/*
 * A fast, monotonic cycle/tick counter for busy loops, calibrated against
 * CLOCK_MONOTONIC.
 *
 *   x86-64/i386: rdtsc (lfence-ordered in counter_read_ordered), used only
 *                when /proc/cpuinfo says constant_tsc and nonstop_tsc;
 *   aarch64:     cntvct_el0 after an isb (architected, constant frequency);
 *   otherwise:   clock_gettime(CLOCK_MONOTONIC) through the vDSO (1 tick = 1 ns).
 *
 * counter_read() is for the hot loop (no system call on the fast paths);
 * convert ticks to ns outside it with the calibration.
 */
#ifndef RTLAB_COUNTER_H
#define RTLAB_COUNTER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common.h"

enum counter_kind { COUNTER_MONO = 0, COUNTER_TSC, COUNTER_CNTVCT };

#if defined(__x86_64__) || defined(__i386__)
#define COUNTER_HW_KIND COUNTER_TSC
static inline uint64_t counter_hw_read(void)
{
	uint32_t lo, hi;
	__asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
	return ((uint64_t)hi << 32) | lo;
}
static inline uint64_t counter_hw_read_ordered(void)
{
	uint32_t lo, hi;
	__asm__ __volatile__("lfence\n\trdtsc" : "=a"(lo), "=d"(hi) : : "memory");
	return ((uint64_t)hi << 32) | lo;
}
#elif defined(__aarch64__)
#define COUNTER_HW_KIND COUNTER_CNTVCT
static inline uint64_t counter_hw_read(void)
{
	uint64_t v;
	__asm__ __volatile__("isb\n\tmrs %0, cntvct_el0" : "=r"(v) : : "memory");
	return v;
}
static inline uint64_t counter_hw_read_ordered(void)
{
	return counter_hw_read();
}
#else
#define COUNTER_HW_KIND COUNTER_MONO
static inline uint64_t counter_hw_read(void)
{
	return rl_now_ns(CLOCK_MONOTONIC);
}
static inline uint64_t counter_hw_read_ordered(void)
{
	return rl_now_ns(CLOCK_MONOTONIC);
}
#endif

struct counter {
	enum counter_kind kind;
	double ns_per_tick;	/* 1.0 for COUNTER_MONO */
	uint64_t ref_ticks;	/* calibration end point: ticks ... */
	uint64_t ref_mono_ns;	/* ... and CLOCK_MONOTONIC at the same instant */
	uint64_t cal_span_ns;	/* length of the calibration */
	const char *why;	/* why the hardware counter is (not) used */
};

static inline uint64_t counter_read(const struct counter *c)
{
	if (c->kind == COUNTER_MONO)
		return rl_now_ns(CLOCK_MONOTONIC);
	return counter_hw_read();
}

static inline uint64_t counter_read_ordered(const struct counter *c)
{
	if (c->kind == COUNTER_MONO)
		return rl_now_ns(CLOCK_MONOTONIC);
	return counter_hw_read_ordered();
}

/* Ticks to ns (outside hot loops). */
static inline uint64_t counter_ticks_to_ns(const struct counter *c, uint64_t ticks)
{
	if (c->kind == COUNTER_MONO)
		return ticks;
	return (uint64_t)((double)ticks * c->ns_per_tick + 0.5);
}

/* ns to ticks, rounded up (a threshold in ticks never undercuts the ns value). */
static inline uint64_t counter_ns_to_ticks(const struct counter *c, uint64_t ns)
{
	if (c->kind == COUNTER_MONO)
		return ns;
	double t = (double)ns / c->ns_per_tick;
	uint64_t r = (uint64_t)t;
	return (double)r < t ? r + 1 : r;
}

/* A counter reading expressed on CLOCK_MONOTONIC (ns). */
static inline uint64_t counter_to_mono(const struct counter *c, uint64_t ticks)
{
	if (c->kind == COUNTER_MONO)
		return ticks;
	if (ticks >= c->ref_ticks)
		return c->ref_mono_ns + counter_ticks_to_ns(c, ticks - c->ref_ticks);
	return c->ref_mono_ns - counter_ticks_to_ns(c, c->ref_ticks - ticks);
}

/* Is the hardware counter safe to use here (invariant TSC on x86)? */
static inline bool counter_hw_safe(const char **why)
{
#if COUNTER_HW_KIND == COUNTER_TSC
	FILE *f = fopen("/proc/cpuinfo", "r");
	if (!f) {
		*why = "cannot read /proc/cpuinfo: TSC invariance unknown";
		return false;
	}
	char line[4096];
	bool constant = false, nonstop = false;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "flags", 5) != 0)
			continue;
		constant = strstr(line, " constant_tsc") != NULL;
		nonstop = strstr(line, " nonstop_tsc") != NULL;
		break;
	}
	fclose(f);
	if (!constant || !nonstop) {
		*why = "TSC is not invariant (constant_tsc/nonstop_tsc missing)";
		return false;
	}
	*why = "invariant TSC (constant_tsc, nonstop_tsc)";
	return true;
#elif COUNTER_HW_KIND == COUNTER_CNTVCT
	*why = "architected counter cntvct_el0";
	return true;
#else
	*why = "no hardware counter on this architecture";
	return false;
#endif
}

/*
 * Calibrate: take (mono, ticks) pairs span_ns apart, each pair bracketed by
 * two monotonic reads so that the pair with the tightest bracket wins.
 * use_hw false forces COUNTER_MONO. Returns 0 or -EINVAL (span 0).
 */
static inline int counter_calibrate(struct counter *c, bool use_hw, uint64_t span_ns)
{
	memset(c, 0, sizeof(*c));
	c->ns_per_tick = 1.0;
	if (span_ns == 0)
		return -22; /* -EINVAL */
	if (!use_hw || COUNTER_HW_KIND == COUNTER_MONO) {
		c->kind = COUNTER_MONO;
		c->why = use_hw ? "no hardware counter on this architecture"
				: "CLOCK_MONOTONIC requested";
		c->ref_mono_ns = rl_now_ns(CLOCK_MONOTONIC);
		return 0;
	}
	c->kind = COUNTER_HW_KIND;
	uint64_t t[2], m[2];
	for (int k = 0; k < 2; k++) {
		uint64_t best = UINT64_MAX;
		for (int i = 0; i < 16; i++) {
			uint64_t a = rl_now_ns(CLOCK_MONOTONIC);
			uint64_t x = counter_hw_read_ordered();
			uint64_t b = rl_now_ns(CLOCK_MONOTONIC);
			if (b - a < best) {
				best = b - a;
				t[k] = x;
				m[k] = a + (b - a) / 2;
			}
		}
		if (k == 0) {
			struct timespec ts = rl_ns_to_ts(span_ns);
			while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) != 0) {
			}
		}
	}
	if (t[1] <= t[0] || m[1] <= m[0]) {
		c->kind = COUNTER_MONO;
		c->why = "hardware counter did not advance during calibration";
		c->ref_mono_ns = rl_now_ns(CLOCK_MONOTONIC);
		return 0;
	}
	c->ns_per_tick = (double)(m[1] - m[0]) / (double)(t[1] - t[0]);
	c->ref_ticks = t[1];
	c->ref_mono_ns = m[1];
	c->cal_span_ns = m[1] - m[0];
	return 0;
}

static inline const char *counter_kind_name(enum counter_kind k)
{
	return k == COUNTER_TSC ? "tsc" : k == COUNTER_CNTVCT ? "cntvct" : "monotonic";
}

struct jsonw;

/*
 * The header's `effective.counter` object of a probe that spins on the counter:
 * {"kind", "why" (why the hardware counter is or is not used; "" when NULL),
 * "ps_per_tick"} and, with_calibration, "calibration_ns" (counter.c).
 */
void counter_write_effective(struct jsonw *w, const struct counter *c, const char *why,
			     bool with_calibration);

#endif
