/* SPDX-License-Identifier: MIT */
#include "channel.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int channel_create(struct channel **out, const char *name, int cpu, uint64_t window_ns,
		   size_t sample_ring)
{
	if (window_ns == 0 || (sample_ring & (sample_ring - 1)) != 0)
		return -EINVAL;
	size_t sz = (sizeof(struct channel) + RL_CACHELINE - 1) & ~(size_t)(RL_CACHELINE - 1);
	struct channel *ch = aligned_alloc(RL_CACHELINE, sz);
	if (!ch)
		return -ENOMEM;
	memset(ch, 0, sz); /* also faults every page in */
	atomic_init(&ch->seq, 0);
	atomic_init(&ch->win_head, 0);
	atomic_init(&ch->win_tail, 0);
	atomic_init(&ch->smp_head, 0);
	atomic_init(&ch->smp_tail, 0);
	atomic_init(&ch->tid, 0);
	ch->window_ns = window_ns;
	snprintf(ch->name, sizeof(ch->name), "%s", name);
	ch->cpu = cpu;
	if (sample_ring) {
		ch->smp_ring = aligned_alloc(RL_CACHELINE, sample_ring * sizeof(struct sample_rec));
		if (!ch->smp_ring) {
			free(ch);
			return -ENOMEM;
		}
		memset(ch->smp_ring, 0, sample_ring * sizeof(struct sample_rec));
		ch->smp_mask = sample_ring - 1;
	}
	*out = ch;
	return 0;
}

int channel_enable_samples(struct channel *ch, size_t entries)
{
	if (ch->smp_ring)
		return 0;
	if (entries == 0 || (entries & (entries - 1)) != 0)
		return -EINVAL;
	struct sample_rec *ring = aligned_alloc(RL_CACHELINE, entries * sizeof(*ring));
	if (!ring)
		return -ENOMEM;
	memset(ring, 0, entries * sizeof(*ring));
	ch->smp_mask = entries - 1;
	ch->smp_ring = ring;
	return 0;
}

void channel_destroy(struct channel *ch)
{
	if (!ch)
		return;
	free(ch->smp_ring);
	free(ch);
}

void channel_snapshot(struct channel *ch, struct chan_state *out)
{
	for (;;) {
		unsigned s1 = atomic_load_explicit(&ch->seq, memory_order_acquire);
		if (s1 & 1) {
			sched_yield();
			continue;
		}
		memcpy(out, &ch->st, sizeof(*out));
		atomic_thread_fence(memory_order_acquire);
		unsigned s2 = atomic_load_explicit(&ch->seq, memory_order_relaxed);
		if (s1 == s2)
			return;
	}
}

size_t channel_pop_windows(struct channel *ch, struct win_rec *out, size_t max)
{
	size_t t = atomic_load_explicit(&ch->win_tail, memory_order_relaxed);
	size_t h = atomic_load_explicit(&ch->win_head, memory_order_acquire);
	size_t n = 0;
	while (t != h && n < max) {
		out[n++] = ch->win_ring[t & (CHANNEL_WIN_RING - 1)];
		t++;
	}
	atomic_store_explicit(&ch->win_tail, t, memory_order_release);
	return n;
}

size_t channel_drain_samples(struct channel *ch, struct sample_rec *out, size_t max)
{
	if (!ch->smp_ring)
		return 0;
	size_t t = atomic_load_explicit(&ch->smp_tail, memory_order_relaxed);
	size_t h = atomic_load_explicit(&ch->smp_head, memory_order_acquire);
	size_t n = 0;
	while (t != h && n < max) {
		out[n++] = ch->smp_ring[t & ch->smp_mask];
		t++;
	}
	atomic_store_explicit(&ch->smp_tail, t, memory_order_release);
	return n;
}
