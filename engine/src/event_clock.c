/* SPDX-License-Identifier: MIT */
/* Clock-domain arithmetic of the event probe: bracketed offset estimates. */
#include <errno.h>

#include "event.h"

const char *const ev_domain_names[] = { "monotonic", "realtime", "phc", "hte", NULL };

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
