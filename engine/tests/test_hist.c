/* SPDX-License-Identifier: MIT */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hist.h"
#include "tap.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void)
{
	/* xorshift64* */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 2685821657736338717ull;
}

/* The contract's formula, written independently of hist_index(). */
static unsigned ref_index(uint64_t v)
{
	if (v < 128)
		return (unsigned)v;
	unsigned e = 0;
	while ((v >> e) > 1)
		e++;
	return 128 + (e - 7) * 128 + (unsigned)((v >> (e - 7)) - 128);
}

static void check_value(uint64_t v)
{
	unsigned i = hist_index(v);
	CHECK(i < HIST_BUCKETS);
	CHECK_EQ_U(i, ref_index(v));
	CHECK(hist_bucket_lo(i) <= v);
	CHECK(v <= hist_bucket_hi(i));
	/* relative width bound: width / lo <= 2^-7 */
	CHECK(hist_bucket_width(i) == 1 || hist_bucket_width(i) * 128 <= hist_bucket_lo(i));
}

int main(void)
{
	CHECK_EQ_U(HIST_BUCKETS, 7424);
	/* exact region */
	CHECK_EQ_U(hist_index(0), 0);
	CHECK_EQ_U(hist_index(1), 1);
	CHECK_EQ_U(hist_index(127), 127);
	CHECK_EQ_U(hist_index(128), 128);
	CHECK_EQ_U(hist_index(129), 129);
	CHECK_EQ_U(hist_index(255), 255);
	CHECK_EQ_U(hist_index(256), 256);
	CHECK_EQ_U(hist_index(257), 256); /* width 2 from 256 */
	CHECK_EQ_U(hist_index(258), 257);
	CHECK_EQ_U(hist_bucket_lo(256), 256);
	CHECK_EQ_U(hist_bucket_width(256), 2);
	CHECK_EQ_U(hist_index(UINT64_MAX), HIST_BUCKETS - 1);
	CHECK_EQ_U(hist_bucket_hi(HIST_BUCKETS - 1), UINT64_MAX);
	CHECK_EQ_U(hist_bucket_lo(HIST_BUCKETS - 1), UINT64_MAX - ((1ull << 56) - 1));
	/* >= 60 s */
	check_value(60ull * 1000000000ull);
	check_value(3600ull * 1000000000ull);
	/* every bucket: lo maps to itself, hi maps to itself, hi + 1 is the next */
	for (unsigned i = 0; i < HIST_BUCKETS; i++) {
		CHECK_EQ_U(hist_index(hist_bucket_lo(i)), i);
		CHECK_EQ_U(hist_index(hist_bucket_hi(i)), i);
		if (i + 1 < HIST_BUCKETS)
			CHECK_EQ_U(hist_bucket_hi(i) + 1, hist_bucket_lo(i + 1));
	}
	/* powers of two and neighbours */
	for (unsigned e = 0; e < 64; e++) {
		uint64_t p = 1ull << e;
		check_value(p);
		check_value(p - 1);
		check_value(p + 1);
	}
	/* random values over all magnitudes: relative error of the bucket lower
	 * bound (what a reader reports) < 2^-7 */
	for (int k = 0; k < 200000; k++) {
		uint64_t v = rng() >> (rng() % 64);
		check_value(v);
		unsigned i = hist_index(v);
		double err = (double)(v - hist_bucket_lo(i)) / (double)(v ? v : 1);
		CHECK(err < 1.0 / 128.0);
	}

	/* exact merge */
	struct hist *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b));
	struct hist *all = calloc(1, sizeof(*all));
	uint64_t n = 0;
	for (int k = 0; k < 50000; k++) {
		uint64_t v = rng() >> (rng() % 64);
		hist_record(k % 3 ? a : b, v);
		hist_record(all, v);
		n++;
	}
	hist_record(a, 0);
	hist_record(all, 0);
	hist_record(b, UINT64_MAX);
	hist_record(all, UINT64_MAX);
	n += 2;
	hist_merge(a, b);
	CHECK(memcmp(a->counts, all->counts, sizeof(a->counts)) == 0);
	CHECK_EQ_U(hist_total(a), n);
	CHECK_EQ_U(a->counts[0], all->counts[0]);

	/* quantiles */
	hist_clear(b);
	CHECK(hist_quantile_index(b, 0.5) == -1);
	for (uint64_t v = 1; v <= 100; v++)
		hist_record(b, v);
	CHECK_EQ_U(hist_quantile_index(b, 0.5), 50);
	CHECK_EQ_U(hist_quantile_index(b, 0.99), 99);
	CHECK_EQ_U(hist_quantile_index(b, 1.0), 100);
	CHECK_EQ_U(hist_quantile_index(b, 0.0), 1);
	free(a);
	free(b);
	free(all);
	return tap_done("hist");
}
