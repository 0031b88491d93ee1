/* SPDX-License-Identifier: MIT */
#include "hist.h"

#include <string.h>

uint64_t hist_bucket_lo(unsigned idx)
{
	if (idx < HIST_SUB_COUNT)
		return idx;
	unsigned g = (idx - HIST_SUB_COUNT) / HIST_SUB_COUNT;
	unsigned m = (idx - HIST_SUB_COUNT) % HIST_SUB_COUNT;
	return ((uint64_t)HIST_SUB_COUNT + m) << g;
}

uint64_t hist_bucket_width(unsigned idx)
{
	if (idx < HIST_SUB_COUNT)
		return 1;
	return 1ull << ((idx - HIST_SUB_COUNT) / HIST_SUB_COUNT);
}

uint64_t hist_bucket_hi(unsigned idx)
{
	return hist_bucket_lo(idx) + (hist_bucket_width(idx) - 1);
}

void hist_clear(struct hist *h)
{
	memset(h, 0, sizeof(*h));
}

void hist_merge(struct hist *dst, const struct hist *src)
{
	for (unsigned i = 0; i < HIST_BUCKETS; i++)
		dst->counts[i] += src->counts[i];
}

uint64_t hist_total(const struct hist *h)
{
	uint64_t n = 0;
	for (unsigned i = 0; i < HIST_BUCKETS; i++)
		n += h->counts[i];
	return n;
}

int hist_quantile_index(const struct hist *h, double q)
{
	uint64_t total = hist_total(h);
	if (total == 0)
		return -1;
	if (q < 0)
		q = 0;
	if (q > 1)
		q = 1;
	/* rank of the wanted sample, 1-based, at least 1 */
	uint64_t rank = (uint64_t)(q * (double)total + 0.5);
	if (rank < 1)
		rank = 1;
	if (rank > total)
		rank = total;
	uint64_t seen = 0;
	for (unsigned i = 0; i < HIST_BUCKETS; i++) {
		seen += h->counts[i];
		if (seen >= rank)
			return (int)i;
	}
	return (int)HIST_BUCKETS - 1;
}
