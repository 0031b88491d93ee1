/* SPDX-License-Identifier: MIT */
/*
 * Inside the udp probe's AF_XDP path (udp_xdp.h): the socket's state, shared by
 * udp_xdp.c (open, the hot path, facts, close), udp_xdp_setup.c (the set-up steps:
 * the reserved UDP socket, route, interface, the peer's MAC, UMEM and rings) and
 * udp_xdp_bpf.c (the XSKMAP, the filter program and its link).
 */
#ifndef RTLAB_UDP_XDP_SETUP_H
#define RTLAB_UDP_XDP_SETUP_H

#include <linux/if_xdp.h>
#include <net/if.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "udp_xdp.h"
#include "udp_xdp_frame.h"
#include "udp_xdp_ring.h"

#ifndef AF_XDP
#define AF_XDP 44
#endif
#ifndef SOL_XDP
#define SOL_XDP 283
#endif
#ifndef SO_BUSY_POLL
#define SO_BUSY_POLL 46
#endif

#define CHUNK 4096u			/* UMEM frame size (aligned mode: a page) */
#define NFRAMES 128u
#define RING 64u			/* entries of each of the four rings */
#define FRAME_CAP (CHUNK - XDP_PACKET_HEADROOM) /* the kernel reserves the headroom */
#define ARP_WAIT_NS (3 * NS_PER_SEC)
#define DISCARD_PORT 9			/* where the neighbour-resolving datagram goes */
#define TX_RESERVE 8			/* ping: free frames the fill ring leaves for sending */

enum {
	XC_FRAMES, XC_BAD_FRAME, XC_NOT_FOR_US, XC_NOT_UNICAST, XC_NO_STAMP, XC_TX_BUSY,
	XC_TX_DROPPED, XC_TX_DEFERRED, XC_KICK_ERRORS, XC_N
};

struct uxdp {
	_Alignas(RL_CACHELINE) atomic_uint_least64_t cnt[XC_N];
	_Alignas(RL_CACHELINE) bool ping, stamp, need_wakeup, native, zerocopy;
	int udp, xsk, map, prog, link;
	unsigned char *umem;
	void *ring_map[4];
	size_t ring_len[4];
	struct uxr rx, tx, fr, cr;
	struct uxf_stack free;
	uint64_t free_addr[NFRAMES];
	struct uxf_end local, peer;
	uint32_t next_hop;
	uint16_t ip_id;
	/* the last batch of uxdp_recv */
	unsigned batch_n;
	uint64_t batch_addr[UXDP_BATCH];
	uint32_t batch_len[UXDP_BATCH];
	struct uxf_frame batch_fr[UXDP_BATCH];
	bool batch_sent[UXDP_BATCH];
	/* facts for the header */
	int ifindex, mtu, rx_queues, busy_eff, busy_err, mode_req;
	uint32_t queue, prog_id;
	char ifname[IF_NAMESIZE];
	char local_s[32];
	char native_err[160];
	char warning[384];
};


static inline void xinc(struct uxdp *x, int i)
{
	atomic_store_explicit(&x->cnt[i], atomic_load_explicit(&x->cnt[i], memory_order_relaxed) + 1,
			      memory_order_relaxed);
}

/* Where a set-up step reports its failure. */
struct oops {
	char *err;
	size_t len;
	int *code;
};

/* Record a failure: message, exit code; returns -e for `return uxdp_fail(...)`. */
int uxdp_fail(const struct oops *o, int e, int code, const char *fmt, ...) RL_PRINTF(4, 5);
/* The usual reason of an EPERM from the set-up: which capability is missing. */
int uxdp_priv_fail(const struct oops *o, int e, const char *what, const char *caps);
void uxdp_fmt_mac(const uint8_t *m, char *buf, size_t len);
void uxdp_fmt_ip(uint32_t ip, char *buf, size_t len);

/* ---- udp_xdp_setup.c: the set-up steps, in uxdp_open's order ---- */

/* The reserved UDP socket: bound (and for ping connected); the local address. */
int uxdp_reserve(struct uxdp *x, const struct uxdp_cfg *cfg, const struct oops *o);
/* The route to the peer: output interface and next hop. */
int uxdp_route_to(uint32_t dst, int *oif, uint32_t *next_hop, const struct oops *o);
/* The interface that carries a local address. */
int uxdp_iface_of(uint32_t ip, char *name, const struct oops *o);
/* Index, MAC, MTU and RX queues of x->ifname. */
int uxdp_iface_facts(struct uxdp *x, const struct oops *o);
/* The next hop's MAC for the pinger (resolved through the UDP socket when needed). */
int uxdp_resolve_peer_mac(struct uxdp *x, uint32_t peer_ip, const struct oops *o);
/* UMEM, the AF_XDP socket, its rings, bound to x->queue. */
int uxdp_make_socket(struct uxdp *x, int busy_poll, const struct oops *o);

/* ---- udp_xdp_bpf.c ---- */

/* The XSKMAP, the filter program and its link to the interface. */
int uxdp_attach_program(struct uxdp *x, const struct oops *o);

#endif
