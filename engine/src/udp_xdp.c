/* SPDX-License-Identifier: MIT */
/*
 * The udp probe's AF_XDP path: udp_xdp.h. Set-up order (nothing is attached to
 * the interface until the socket is ready, and every step undoes on failure):
 *
 *   1. an ordinary UDP socket bound to the probe's address and port (it reserves
 *      the port, refuses addresses that are not local, and for the pinger finds the
 *      route and source address);
 *   2. interface facts: index, MAC, MTU, RX queues; for the pinger the next hop's
 *      MAC from the neighbour table (resolved through the UDP socket if needed);
 *   3. UMEM and the AF_XDP socket with its fill/completion/RX/TX rings, bound to
 *      one RX queue;
 *   4. an XSKMAP holding the socket, the filter program (udp_xdp_frame.c), and a
 *      BPF link attaching it to the interface, native mode first, then generic.
 *
 * The link is the only thing that changes the interface, and the kernel removes
 * it with the last file descriptor: when the process ends, however it ends.
 * Steps 1 and 2 and the socket of 3: udp_xdp_setup.c; 4: udp_xdp_bpf.c; here the
 * order, the hot path, the facts and the close.
 */
#include "udp_xdp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "udp_proto.h"
#include "udp_xdp_setup.h"

static const char *const xc_names[XC_N] = {
	"frames", "bad_frames", "not_for_us", "not_unicast", "no_stamp", "tx_busy",
	"tx_dropped", "tx_deferred", "kick_errors",
};

static void reclaim(struct uxdp *x);
static void refill(struct uxdp *x);

int uxdp_open(struct uxdp **out, const struct uxdp_cfg *cfg, char *err, size_t errlen,
	      int *exit_code)
{
	const struct oops o = { err, errlen, exit_code };
	*out = NULL;
	*exit_code = RL_EXIT_ERROR;
	if ((cfg->bind && cfg->bind->sin_family != AF_INET) ||
	    (cfg->ping && (!cfg->peer || cfg->peer->sin_family != AF_INET)))
		return uxdp_fail(&o, EAFNOSUPPORT, RL_EXIT_USAGE,
			    "--path xdp: IPv4 addresses only (use --path socket for IPv6)");
	struct uxdp *x = aligned_alloc(RL_CACHELINE, (sizeof(*x) + RL_CACHELINE - 1) &
							   ~(size_t)(RL_CACHELINE - 1));
	if (!x)
		return uxdp_fail(&o, ENOMEM, RL_EXIT_ERROR, "--path xdp: out of memory");
	memset(x, 0, sizeof(*x));
	x->udp = x->xsk = x->map = x->prog = x->link = -1;
	x->ping = cfg->ping;
	x->stamp = cfg->stamp;
	x->queue = cfg->queue;
	x->mode_req = cfg->mode;
	x->rx_queues = -1;
	int e = uxdp_reserve(x, cfg, &o);
	int oif = 0;
	if (!e && cfg->ping) {
		x->peer.ip = cfg->peer->sin_addr.s_addr;
		x->peer.port = cfg->peer->sin_port;
		e = uxdp_route_to(x->peer.ip, &oif, &x->next_hop, &o);
	}
	if (!e) {
		if (cfg->ifname)
			snprintf(x->ifname, sizeof(x->ifname), "%s", cfg->ifname);
		else if (cfg->ping && !if_indextoname((unsigned)oif, x->ifname))
			e = uxdp_fail(&o, errno, RL_EXIT_ERROR, "--path xdp: interface %d: %s", oif,
				 strerror(errno));
		else if (!cfg->ping)
			e = uxdp_iface_of(x->local.ip, x->ifname, &o);
	}
	if (!e)
		e = uxdp_iface_facts(x, &o);
	if (!e && cfg->ping && cfg->ifname && oif != x->ifindex)
		x->next_hop = x->peer.ip; /* the route leaves elsewhere: the peer is on this link */
	if (!e && (cfg->payload_max + UXF_IP_LEN + UXF_UDP_LEN > (size_t)x->mtu ||
		   cfg->payload_max + UXF_HDRS > FRAME_CAP)) {
		size_t m = (size_t)x->mtu - UXF_IP_LEN - UXF_UDP_LEN;
		if (m > FRAME_CAP - UXF_HDRS)
			m = FRAME_CAP - UXF_HDRS;
		e = uxdp_fail(&o, EMSGSIZE, RL_EXIT_USAGE,
			 "--size: at most %zu bytes with --path xdp on %s (MTU %d; the xdp path does not fragment)",
			 m, x->ifname, x->mtu);
	}
	if (!e && cfg->ping)
		e = uxdp_resolve_peer_mac(x, x->peer.ip, &o);
	if (!e)
		e = uxdp_make_socket(x, cfg->busy_poll, &o);
	if (!e) {
		refill(x); /* frames for the kernel to receive into, before any can come */
		e = uxdp_attach_program(x, &o);
	}
	if (e) {
		uxdp_close(x);
		return e;
	}
	if (x->rx_queues > 1)
		snprintf(x->warning, sizeof(x->warning),
			 "%s has %d RX queues and the AF_XDP socket serves queue %u only: the probe's frames on other queues go to the kernel stack, unanswered; steer the flow to queue %u (ethtool -N %s flow-type udp4 dst-port %u action %u) or use one queue (ethtool -L)",
			 x->ifname, x->rx_queues, x->queue, x->queue, x->ifname, ntohs(x->local.port), x->queue);
	*out = x;
	*exit_code = RL_EXIT_OK;
	return 0;
}

/* ---- the hot path ------------------------------------------------------------ */

/* Descriptors in the TX ring the kernel has not taken yet. */
static inline bool tx_pending(const struct uxdp *x)
{
	return uxr_space(&x->tx) != x->tx.size;
}

/*
 * Make the kernel transmit what the TX ring holds (copy mode: within this call).
 * 0; -EBUSY: the device dropped a frame (counted); -EAGAIN: frames are still in
 * the ring (the completion ring was full, or the queue busy) and go with the next
 * kick; another -errno: the call failed.
 */
static int kick(struct uxdp *x)
{
	if (x->need_wakeup && !uxr_needs_wakeup(&x->tx, XDP_RING_NEED_WAKEUP))
		return 0;
	if (x->zerocopy) { /* the driver transmits on its own time after this wake-up */
		if (sendto(x->xsk, NULL, 0, MSG_DONTWAIT, NULL, 0) < 0 && errno != EAGAIN &&
		    errno != EBUSY && errno != ENOBUFS && errno != ENETDOWN) {
			xinc(x, XC_KICK_ERRORS);
			return -errno;
		}
		return 0;
	}
	int rc = 0;
	for (int tries = 0; tries < 4 && tx_pending(x); tries++) {
		if (sendto(x->xsk, NULL, 0, MSG_DONTWAIT, NULL, 0) >= 0)
			continue;
		int e = errno;
		if (e == EBUSY) { /* NET_XMIT_DROP: that frame is gone (and completed) */
			xinc(x, XC_TX_DROPPED);
			rc = -EBUSY;
		} else if (e == EAGAIN || e == ENOBUFS) {
			reclaim(x); /* room in the completion ring */
		} else {
			xinc(x, XC_KICK_ERRORS);
			return -e;
		}
	}
	if (!rc && tx_pending(x)) {
		xinc(x, XC_TX_DEFERRED);
		rc = -EAGAIN;
	}
	return rc;
}

/* Completed transmissions -> free frames. */
static void reclaim(struct uxdp *x)
{
	uint32_t n = uxr_avail(&x->cr);
	const uint64_t *c = x->cr.ring;
	for (uint32_t i = 0; i < n; i++)
		uxf_push(&x->free, c[uxr_cons_slot(&x->cr, i)] & ~(uint64_t)(CHUNK - 1));
	if (n)
		uxr_release(&x->cr, n);
}

/* Free frames -> the fill ring (the pinger keeps a few for sending). */
static void refill(struct uxdp *x)
{
	uint32_t n = uxr_space(&x->fr);
	uint64_t *f = x->fr.ring;
	uint32_t i = 0;
	uint64_t a;
	while (i < n && x->free.n > (x->ping ? TX_RESERVE : 0u) && uxf_pop(&x->free, &a))
		f[uxr_prod_slot(&x->fr, i++)] = a;
	if (i)
		uxr_submit(&x->fr, i);
}

static void recycle_batch(struct uxdp *x)
{
	for (unsigned i = 0; i < x->batch_n; i++)
		if (!x->batch_sent[i])
			uxf_push(&x->free, x->batch_addr[i] & ~(uint64_t)(CHUNK - 1));
	x->batch_n = 0;
}

unsigned uxdp_recv(struct uxdp *x, struct uxdp_msg *out, unsigned max)
{
	recycle_batch(x);
	reclaim(x);
	refill(x);
	if (!x->zerocopy && tx_pending(x))
		(void)kick(x); /* a frame left behind by an earlier busy queue */
	uint32_t avail = uxr_avail(&x->rx);
	if (!avail)
		return 0;
	if (max > UXDP_BATCH)
		max = UXDP_BATCH;
	uint32_t take = avail < max ? avail : max;
	const struct xdp_desc *d = x->rx.ring;
	unsigned n = 0;
	for (uint32_t i = 0; i < take; i++) {
		const struct xdp_desc *desc = &d[uxr_cons_slot(&x->rx, i)];
		uint64_t addr = desc->addr;
		uint32_t len = desc->len;
		unsigned char *f = x->umem + addr;
		struct uxf_frame fr;
		xinc(x, XC_FRAMES);
		bool ok = false;
		if (uxf_parse(f, len, &fr) != UXF_OK)
			xinc(x, XC_BAD_FRAME);
		else if (memcmp(fr.dst.mac, x->local.mac, 6) != 0 || fr.dst.ip != x->local.ip ||
			 fr.dst.port != x->local.port ||
			 (x->ping && (fr.src.ip != x->peer.ip || fr.src.port != x->peer.port)))
			xinc(x, XC_NOT_FOR_US);
		else if (!uxf_unicast_source(&fr) || !fr.src.port || fr.src.ip == x->local.ip ||
			 memcmp(fr.src.mac, x->local.mac, 6) == 0)
			xinc(x, XC_NOT_UNICAST); /* what the kernel would drop as a martian */
		else
			ok = true;
		if (!ok) {
			uxf_push(&x->free, addr & ~(uint64_t)(CHUNK - 1));
			continue;
		}
		uint64_t stamp = 0;
		if (x->stamp) {
			uint64_t meta[2];
			if ((addr & (CHUNK - 1)) >= UXF_META_LEN) {
				memcpy(meta, f - UXF_META_LEN, sizeof(meta));
				if (meta[1] == ~meta[0])
					stamp = meta[0];
				/* a later frame in this buffer without metadata must not
				 * find this stamp */
				memset(f - UXF_META_LEN, 0, UXF_META_LEN);
			}
			if (!stamp)
				xinc(x, XC_NO_STAMP);
		}
		x->batch_addr[n] = addr;
		x->batch_len[n] = len;
		x->batch_fr[n] = fr;
		x->batch_sent[n] = false;
		out[n] = (struct uxdp_msg){ .payload = f + fr.payload_off, .len = fr.payload_len,
					    .rx_mono = stamp };
		n++;
	}
	uxr_release(&x->rx, take);
	x->batch_n = n;
	return n;
}

int uxdp_reply(struct uxdp *x, unsigned i, const void *head, size_t head_len)
{
	if (i >= x->batch_n || x->batch_sent[i])
		return -EINVAL;
	const struct uxf_frame *fr = &x->batch_fr[i];
	unsigned char *f = x->umem + x->batch_addr[i];
	if (uxr_space(&x->tx) == 0) {
		reclaim(x);
		xinc(x, XC_TX_BUSY);
		return -ENOBUFS;
	}
	memcpy(f + fr->payload_off, head, head_len < fr->payload_len ? head_len : fr->payload_len);
	uxf_make_reply(f, fr);
	struct xdp_desc *d = x->tx.ring;
	/* the frame as received, same length: never more bytes than came in */
	d[uxr_prod_slot(&x->tx, 0)] = (struct xdp_desc){ .addr = x->batch_addr[i],
							 .len = x->batch_len[i] };
	uxr_submit(&x->tx, 1);
	x->batch_sent[i] = true;
	int e = kick(x);
	return e == -EAGAIN ? 0 : e; /* deferred: still goes out */
}

int uxdp_send(struct uxdp *x, const void *payload, size_t len)
{
	reclaim(x);
	uint64_t a;
	if (len + UXF_HDRS > FRAME_CAP)
		return -EMSGSIZE;
	if (uxr_space(&x->tx) == 0 || !uxf_pop(&x->free, &a)) {
		xinc(x, XC_TX_BUSY);
		return -ENOBUFS;
	}
	unsigned char *f = x->umem + a;
	size_t flen = uxf_build(f, &x->local, &x->peer, x->ip_id++, len);
	memcpy(f + UXF_HDRS, payload, len);
	uxf_udp_csum(f, len);
	struct xdp_desc *d = x->tx.ring;
	d[uxr_prod_slot(&x->tx, 0)] = (struct xdp_desc){ .addr = a, .len = (uint32_t)flen };
	uxr_submit(&x->tx, 1);
	int e = kick(x);
	return e == -EAGAIN ? 0 : e; /* deferred: still goes out */
}

/* ---- facts and counters ------------------------------------------------------- */

int uxdp_fd(const struct uxdp *x)
{
	return x->xsk;
}

const char *uxdp_local(const struct uxdp *x)
{
	return x->local_s;
}

const char *uxdp_ifname(const struct uxdp *x)
{
	return x->ifname;
}

bool uxdp_stamping(const struct uxdp *x)
{
	return x->stamp;
}

int uxdp_busy_poll(const struct uxdp *x, int *err)
{
	*err = x->busy_err;
	return x->busy_eff;
}

const char *uxdp_warning(const struct uxdp *x)
{
	return x->warning[0] ? x->warning : NULL;
}

void uxdp_write_effective(const struct uxdp *x, struct jsonw *w, const char *key)
{
	char s[40];
	jw_obj_begin(w, key);
	jw_str(w, "interface", x->ifname);
	jw_int(w, "ifindex", x->ifindex);
	jw_int(w, "mtu", x->mtu);
	jw_int_or_null(w, "rx_queues", x->rx_queues);
	jw_uint(w, "queue", x->queue);
	jw_str(w, "attach", x->native ? "native" : "generic");
	jw_str_or_null(w, "native_error", x->native_err[0] ? x->native_err : NULL);
	jw_str(w, "bind", x->zerocopy ? "zerocopy" : "copy");
	jw_bool(w, "need_wakeup", x->need_wakeup);
	jw_uint(w, "prog_id", x->prog_id);
	jw_bool(w, "rx_timestamps", x->stamp);
	uxdp_fmt_mac(x->local.mac, s, sizeof(s));
	jw_str(w, "local_mac", s);
	if (x->ping) {
		uxdp_fmt_mac(x->peer.mac, s, sizeof(s));
		jw_str(w, "next_hop_mac", s);
		uxdp_fmt_ip(x->next_hop, s, sizeof(s));
		jw_str(w, "next_hop", s);
	}
	jw_uint(w, "umem_frames", NFRAMES);
	jw_uint(w, "frame_size", CHUNK);
	jw_uint(w, "ring_size", RING);
	jw_obj_end(w);
}

void uxdp_write_counters(const struct uxdp *x, struct jsonw *w, const char *key, bool final)
{
	jw_obj_begin(w, key);
	for (int i = 0; i < XC_N; i++)
		jw_uint(w, xc_names[i], atomic_load_explicit(&x->cnt[i], memory_order_relaxed));
	/* the kernel's own counters of this socket: at the end only (reading them takes
	 * the socket's mutex, which every transmit takes too) */
	if (!final) {
		jw_obj_end(w);
		return;
	}
	struct xdp_statistics st;
	socklen_t l = sizeof(st);
	memset(&st, 0, sizeof(st));
	if (getsockopt(x->xsk, SOL_XDP, XDP_STATISTICS, &st, &l) == 0) {
		jw_uint(w, "kernel_rx_dropped", st.rx_dropped);
		jw_uint(w, "kernel_rx_ring_full", st.rx_ring_full);
		jw_uint(w, "kernel_fill_ring_empty", st.rx_fill_ring_empty_descs);
		jw_uint(w, "kernel_rx_invalid", st.rx_invalid_descs);
		jw_uint(w, "kernel_tx_invalid", st.tx_invalid_descs);
	}
	jw_obj_end(w);
}

void uxdp_close(struct uxdp *x)
{
	if (!x)
		return;
	if (x->link >= 0)
		close(x->link); /* detaches the program */
	if (x->prog >= 0)
		close(x->prog);
	if (x->map >= 0)
		close(x->map);
	for (int i = 0; i < 4; i++)
		if (x->ring_map[i])
			munmap(x->ring_map[i], x->ring_len[i]);
	if (x->xsk >= 0)
		close(x->xsk);
	if (x->umem)
		munmap(x->umem, (size_t)NFRAMES * CHUNK);
	if (x->udp >= 0)
		close(x->udp);
	free(x);
}
