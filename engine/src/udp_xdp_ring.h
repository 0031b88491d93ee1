/* SPDX-License-Identifier: MIT */
/*
 * The single-producer/single-consumer rings an AF_XDP socket shares with the
 * kernel (fill, completion, RX, TX), and the stack of free UMEM frames. Pure
 * memory operations (the rings are mmap'd by udp_xdp.c), so they are unit-tested
 * on ordinary memory in tests/test_udp_xdp.c.
 *
 * A ring is `size` (a power of two) entries and two free-running 32-bit
 * indices; this side owns one of them (the producer index of fill/TX, the
 * consumer index of completion/RX) and keeps a private copy of it. Entries are
 * published with a release store of the owned index and observed with an
 * acquire load of the other side's, as the kernel's side (xsk_queue.h) expects.
 */
#ifndef RTLAB_UDP_XDP_RING_H
#define RTLAB_UDP_XDP_RING_H

#include <stdbool.h>
#include <stdint.h>

struct uxr {
	uint32_t *producer, *consumer, *flags;
	void *ring;		/* uint64_t entries (fill, completion) or struct xdp_desc (RX, TX) */
	uint32_t size, mask;
	uint32_t local;		/* our copy of the index this side owns */
};

static inline void uxr_init_prod(struct uxr *r)
{
	r->mask = r->size - 1;
	r->local = __atomic_load_n(r->producer, __ATOMIC_RELAXED);
}

static inline void uxr_init_cons(struct uxr *r)
{
	r->mask = r->size - 1;
	r->local = __atomic_load_n(r->consumer, __ATOMIC_RELAXED);
}

/* Producer: how many entries can be written now. */
static inline uint32_t uxr_space(const struct uxr *r)
{
	return r->size - (r->local - __atomic_load_n(r->consumer, __ATOMIC_ACQUIRE));
}

/* Producer: the slot of the i-th entry after the published ones. */
static inline uint32_t uxr_prod_slot(const struct uxr *r, uint32_t i)
{
	return (r->local + i) & r->mask;
}

/* Producer: publish n written entries. */
static inline void uxr_submit(struct uxr *r, uint32_t n)
{
	r->local += n;
	__atomic_store_n(r->producer, r->local, __ATOMIC_RELEASE);
}

/* Consumer: how many entries are ready. */
static inline uint32_t uxr_avail(const struct uxr *r)
{
	return __atomic_load_n(r->producer, __ATOMIC_ACQUIRE) - r->local;
}

/* Consumer: the slot of the i-th ready entry. */
static inline uint32_t uxr_cons_slot(const struct uxr *r, uint32_t i)
{
	return (r->local + i) & r->mask;
}

/* Consumer: hand n read entries back. */
static inline void uxr_release(struct uxr *r, uint32_t n)
{
	r->local += n;
	__atomic_store_n(r->consumer, r->local, __ATOMIC_RELEASE);
}

static inline bool uxr_needs_wakeup(const struct uxr *r, uint32_t flag)
{
	return __atomic_load_n(r->flags, __ATOMIC_RELAXED) & flag;
}

/* The UMEM frames this side holds (neither in a ring nor in flight). */
struct uxf_stack {
	uint64_t *addr;
	uint32_t n, cap;
};

static inline bool uxf_push(struct uxf_stack *s, uint64_t a)
{
	if (s->n >= s->cap)
		return false; /* a frame twice: never happens unless the kernel misbehaves */
	s->addr[s->n++] = a;
	return true;
}

static inline bool uxf_pop(struct uxf_stack *s, uint64_t *a)
{
	if (!s->n)
		return false;
	*a = s->addr[--s->n];
	return true;
}

#endif
