/* SPDX-License-Identifier: MIT */
/* Channel: statistics, windows, sample ring and a concurrent seqlock check. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "channel.h"
#include "tap.h"

static struct channel *shared;
static atomic_bool done;

static void *writer(void *arg)
{
	(void)arg;
	for (uint64_t k = 0; k < 2000000; k++)
		channel_record(shared, k * 1000, k % 5000, k % 7 == 0, false);
	atomic_store(&done, true);
	return NULL;
}

int main(void)
{
	struct channel *ch;
	CHECK(channel_create(&ch, "cpu0", 0, 1000000, 8) == 0);
	channel_destroy(ch);
	CHECK(channel_create(&ch, "x", 0, 1000000, 6) != 0); /* not a power of two */
	CHECK(channel_create(&ch, "cpu0", 0, 1000000, 8) == 0);
	struct chan_state *st = malloc(sizeof(*st));

	channel_snapshot(ch, st);
	CHECK_EQ_U(st->samples, 0);

	/* windows of 1 ms: samples at 0.1, 0.5 ms (window 0), 2.2 ms (window 2) */
	channel_record(ch, 100000, 10, 0, false);
	channel_record(ch, 500000, 30, 0, false);
	channel_record(ch, 2200000, 20, 2, false);
	channel_record(ch, 2300000, 5, 0, true);
	channel_snapshot(ch, st);
	CHECK_EQ_U(st->samples, 4);
	CHECK_EQ_U(st->min_ns, 5);
	CHECK_EQ_U(st->max_ns, 30);
	CHECK_EQ_U(st->max_at_ns, 500000);
	CHECK_EQ_U(st->sum_ns, 65);
	CHECK_EQ_U(st->missed, 2);
	CHECK_EQ_U(st->negative, 1);
	CHECK_EQ_U(hist_total(&st->hist), 4);
	CHECK_EQ_U(st->cur_win.index, 2);
	CHECK_EQ_U(st->cur_win.max_ns, 20);
	CHECK_EQ_U(st->cur_win.samples, 2);
	struct win_rec w[8];
	size_t n = channel_pop_windows(ch, w, 8);
	CHECK_EQ_U(n, 1);
	CHECK_EQ_U(w[0].index, 0);
	CHECK_EQ_U(w[0].max_ns, 30);
	CHECK_EQ_U(w[0].samples, 2);
	/* the window's sum and coarse histogram: every sample in it, once */
	uint64_t wtotal = 0;
	for (unsigned b = 0; b < WIN_HIST_BUCKETS; b++)
		wtotal += w[0].hist[b];
	CHECK_EQ_U(wtotal, 2);
	CHECK_EQ_U(w[0].hist[win_hist_index(30)], 1);
	CHECK_EQ_U(st->cur_win.sum_ns, 20 + 5);
	CHECK_EQ_U(w[0].sum_ns + st->cur_win.sum_ns, st->sum_ns);
	CHECK_EQ_U(channel_pop_windows(ch, w, 8), 0);
	/* coarse buckets: 4 per power of two, values >= 2^40 in the last */
	CHECK_EQ_U(win_hist_index(3), 3);
	CHECK_EQ_U(win_hist_index(4), 4);
	CHECK_EQ_U(win_hist_index(7), 7);
	CHECK_EQ_U(win_hist_index(8), 8);
	CHECK_EQ_U(win_hist_index(10), 9);
	CHECK_EQ_U(win_hist_index((1ull << 40) - 1), WIN_HIST_BUCKETS - 1);
	CHECK_EQ_U(win_hist_index(UINT64_MAX), WIN_HIST_BUCKETS - 1);

	/* sample ring of 8: 4 in, then 6 more -> 2 lost */
	struct sample_rec s[16];
	for (int k = 0; k < 6; k++)
		channel_record(ch, 2400000 + (uint64_t)k, 1, 0, false);
	channel_snapshot(ch, st);
	CHECK_EQ_U(st->ring_lost, 2);
	n = channel_drain_samples(ch, s, 16);
	CHECK_EQ_U(n, 8);
	CHECK_EQ_U(s[0].at_ns, 100000);
	CHECK_EQ_U(s[0].value_ns, 10);
	CHECK_EQ_U(n + st->ring_lost, st->samples);
	channel_destroy(ch);

	/* concurrent: every snapshot must be internally consistent */
	CHECK(channel_create(&shared, "cpu1", 1, 1000000, 0) == 0);
	pthread_t t;
	pthread_create(&t, NULL, writer, NULL);
	int bad = 0, snaps = 0;
	while (!atomic_load(&done) || snaps < 10) {
		channel_snapshot(shared, st);
		snaps++;
		if (hist_total(&st->hist) != st->samples)
			bad++;
		if (st->samples && st->max_ns < st->min_ns)
			bad++;
		if (atomic_load(&done) && snaps > 10)
			break;
	}
	pthread_join(t, NULL);
	CHECK_EQ_U(bad, 0);
	channel_snapshot(shared, st);
	CHECK_EQ_U(st->samples, 2000000);
	CHECK_EQ_U(st->max_ns, 4999);
	channel_destroy(shared);
	free(st);
	return tap_done("channel");
}
