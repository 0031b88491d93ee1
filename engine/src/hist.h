/* SPDX-License-Identifier: MIT */
/*
 * Log-linear (HDR-style) histogram over the whole uint64 range, exactly as
 * docs/engine-output.md describes: sub_bits 7, 7424 buckets, 64-bit counters.
 * Values below 128 have their own bucket; above, each power of two is split
 * into 128 equal buckets, so the relative bucket width is at most 2^-7.
 */
#ifndef RTLAB_HIST_H
#define RTLAB_HIST_H

#include <stdint.h>
#include <stddef.h>

#define HIST_SUB_BITS 7u
#define HIST_SUB_COUNT (1u << HIST_SUB_BITS)
#define HIST_BUCKETS (HIST_SUB_COUNT + (64u - HIST_SUB_BITS) * HIST_SUB_COUNT)

struct hist {
	uint64_t counts[HIST_BUCKETS];
};

/*
 * Bucket index of a value in a log-linear histogram of 2^sub_bits buckets per power of
 * two (unbounded: the caller caps it); pure, branch-light, used in hot loops.
 */
static inline unsigned loglin_index(uint64_t v, unsigned sub_bits)
{
	unsigned sub_count = 1u << sub_bits;
	if (v < sub_count)
		return (unsigned)v;
	unsigned e = 63u - (unsigned)__builtin_clzll(v);
	unsigned shift = e - sub_bits;
	return sub_count + shift * sub_count + (unsigned)((v >> shift) - sub_count);
}

/* Bucket index of a value in struct hist. */
static inline unsigned hist_index(uint64_t v)
{
	return loglin_index(v, HIST_SUB_BITS);
}

static inline void hist_record(struct hist *h, uint64_t v)
{
	h->counts[hist_index(v)]++;
}

/* Lowest value of bucket idx (idx < HIST_BUCKETS). */
uint64_t hist_bucket_lo(unsigned idx);
/* Width of bucket idx: the bucket covers [lo, lo + width). */
uint64_t hist_bucket_width(unsigned idx);
/* Highest value of bucket idx (inclusive; no overflow for the last bucket). */
uint64_t hist_bucket_hi(unsigned idx);

void hist_clear(struct hist *h);
/* Exact merge: dst += src. */
void hist_merge(struct hist *dst, const struct hist *src);
uint64_t hist_total(const struct hist *h);
/* Bucket index holding the q-quantile (0 <= q <= 1); -1 if empty. */
int hist_quantile_index(const struct hist *h, double q);

#endif
