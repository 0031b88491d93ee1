/* SPDX-License-Identifier: MIT */
/*
 * A measurement channel: the state one measuring thread owns (histogram,
 * exact min/max/sum/count, missed periods, per-window maxima) published to
 * the reporter through a seqlock, plus two single-producer/single-consumer
 * rings: completed windows, and (optionally) raw samples for --samples.
 *
 * Only the owning thread calls channel_record(); only the reporter calls
 * channel_snapshot(), channel_pop_windows() and channel_drain_samples().
 * channel_record() does no system call, no lock and no allocation.
 */
#ifndef RTLAB_CHANNEL_H
#define RTLAB_CHANNEL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common.h"
#include "hist.h"

#define CHANNEL_WIN_RING 256 /* power of two */

/*
 * Per window, beside its maximum: the sum of its values and a coarse
 * log-linear histogram (sub_bits 2: 4 buckets per power of two, each at most
 * 25 % wide; values of 2^40 ns and more share the last bucket). The host
 * uses them to measure how strongly samples depend on each other
 * (docs/report.md#comparisons); the run's own histogram stays the fine one.
 */
#define WIN_HIST_SUB_BITS 2u
#define WIN_HIST_SUB_COUNT (1u << WIN_HIST_SUB_BITS)
#define WIN_HIST_BUCKETS (WIN_HIST_SUB_COUNT + (40u - WIN_HIST_SUB_BITS) * WIN_HIST_SUB_COUNT)

struct win_rec {
	uint64_t index;
	uint64_t max_ns;
	uint64_t samples;
	uint64_t sum_ns;
	uint32_t hist[WIN_HIST_BUCKETS];
};

static inline unsigned win_hist_index(uint64_t v)
{
	unsigned i = loglin_index(v, WIN_HIST_SUB_BITS);
	return i < WIN_HIST_BUCKETS ? i : WIN_HIST_BUCKETS - 1;
}

struct sample_rec {
	uint64_t at_ns;
	uint64_t value_ns;
};

/* The seqlock-protected, cumulative part. */
struct chan_state {
	uint64_t samples;
	uint64_t missed;
	uint64_t negative;	/* clamped negative deltas (clock stepped back) */
	uint64_t sum_ns;
	uint64_t min_ns;
	uint64_t max_ns;
	uint64_t max_at_ns;
	struct win_rec cur_win;	/* the window being filled (samples 0: none) */
	uint64_t windows_lost;
	uint64_t ring_lost;
	struct hist hist;
};

struct channel {
	/* writer-hot part */
	_Alignas(RL_CACHELINE) atomic_uint seq;
	uint64_t window_ns;
	struct chan_state st;

	/* window ring: producer writes win_head, consumer win_tail */
	_Alignas(RL_CACHELINE) atomic_size_t win_head;
	_Alignas(RL_CACHELINE) atomic_size_t win_tail;
	struct win_rec win_ring[CHANNEL_WIN_RING];

	/* sample ring (NULL without --samples) */
	_Alignas(RL_CACHELINE) atomic_size_t smp_head;
	_Alignas(RL_CACHELINE) atomic_size_t smp_tail;
	struct sample_rec *smp_ring;
	size_t smp_mask;

	/* identity (set before the thread starts; tid set by the thread) */
	_Alignas(RL_CACHELINE) char name[32];
	int cpu;		/* -1: none */
	atomic_int tid;		/* 0: unknown */
};

/*
 * Allocate a channel (cache-line aligned, zeroed, pages touched).
 * sample_ring: 0 for none, else a power of two number of entries.
 */
int channel_create(struct channel **out, const char *name, int cpu, uint64_t window_ns,
		   size_t sample_ring) RL_WUR;
void channel_destroy(struct channel *ch);

/*
 * Give a channel created without one a sample ring of entries (a power of two; the
 * flight recorder's triggers come from it). Only before its thread records; 0 (also
 * when it has one), -EINVAL or -ENOMEM.
 */
int channel_enable_samples(struct channel *ch, size_t entries) RL_WUR;

/* Hot path: record one value measured at run time at_ns. */
static inline void channel_record(struct channel *ch, uint64_t at_ns, uint64_t value_ns,
				  uint64_t missed, bool negative)
{
	unsigned s = atomic_load_explicit(&ch->seq, memory_order_relaxed);
	atomic_store_explicit(&ch->seq, s + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);

	struct chan_state *st = &ch->st;
	uint64_t widx = at_ns / ch->window_ns;
	if (st->cur_win.samples && widx != st->cur_win.index) {
		size_t h = atomic_load_explicit(&ch->win_head, memory_order_relaxed);
		size_t t = atomic_load_explicit(&ch->win_tail, memory_order_acquire);
		if (h - t < CHANNEL_WIN_RING) {
			ch->win_ring[h & (CHANNEL_WIN_RING - 1)] = st->cur_win;
			atomic_store_explicit(&ch->win_head, h + 1, memory_order_release);
		} else {
			st->windows_lost++;
		}
		st->cur_win.samples = 0;
		st->cur_win.max_ns = 0;
		st->cur_win.sum_ns = 0;
		memset(st->cur_win.hist, 0, sizeof(st->cur_win.hist));
	}
	if (!st->cur_win.samples)
		st->cur_win.index = widx;
	st->cur_win.samples++;
	if (value_ns > st->cur_win.max_ns)
		st->cur_win.max_ns = value_ns;
	st->cur_win.sum_ns += value_ns;
	st->cur_win.hist[win_hist_index(value_ns)]++;

	if (!st->samples || value_ns < st->min_ns)
		st->min_ns = value_ns;
	if (!st->samples || value_ns > st->max_ns) {
		st->max_ns = value_ns;
		st->max_at_ns = at_ns;
	}
	st->samples++;
	st->sum_ns += value_ns;
	st->missed += missed;
	st->negative += negative;
	hist_record(&st->hist, value_ns);

	if (ch->smp_ring) {
		size_t h = atomic_load_explicit(&ch->smp_head, memory_order_relaxed);
		size_t t = atomic_load_explicit(&ch->smp_tail, memory_order_acquire);
		if (h - t <= ch->smp_mask) {
			ch->smp_ring[h & ch->smp_mask] = (struct sample_rec){ at_ns, value_ns };
			atomic_store_explicit(&ch->smp_head, h + 1, memory_order_release);
		} else {
			st->ring_lost++;
		}
	}

	atomic_store_explicit(&ch->seq, s + 2, memory_order_release);
}

/* Copy a consistent state (retries while the writer is inside an update). */
void channel_snapshot(struct channel *ch, struct chan_state *out);

/* Pop up to max completed windows; returns how many. */
size_t channel_pop_windows(struct channel *ch, struct win_rec *out, size_t max);

/* Pop up to max samples; returns how many. */
size_t channel_drain_samples(struct channel *ch, struct sample_rec *out, size_t max);

#endif
