/* SPDX-License-Identifier: MIT */
/*
 * The `udp` probe's socket thread (udp_probe.h): the socket set up, the receive that
 * the watchdog may interrupt, the reflector's and the pinger's loops, and what each
 * exchange measures (the channels' values, and the TX timestamps that complete them).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "period.h"
#include "phc.h"
#include "udp_probe.h"

#ifndef SO_BUSY_POLL
#define SO_BUSY_POLL 46
#endif

#define REFLECT_POLL_NS (50 * NS_PER_MS) /* epoll/busy reflector: stop flag checked this often */

/* ---- socket set-up ---------------------------------------------------- */

int udp_setup_socket(struct udp_ctx *ctx, char *msg, size_t len)
{
	const struct udp_cfg *c = ctx->cfg;
	int fam = c->mode == MODE_REFLECT ? c->bind.ss_family : c->peer.ss_family;
	ctx->fd = socket(fam, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (ctx->fd < 0) {
		snprintf(msg, len, "socket: %s", strerror(errno));
		return -errno;
	}
	if (c->has_bind && bind(ctx->fd, (const struct sockaddr *)&c->bind, c->bind_len) != 0) {
		int e = errno;
		snprintf(msg, len, "--bind %s: %s", c->bind_s, strerror(e));
		return -e;
	}
	if (c->mode == MODE_PING &&
	    connect(ctx->fd, (const struct sockaddr *)&c->peer, c->peer_len) != 0) {
		int e = errno;
		snprintf(msg, len, "--peer %s: connect: %s", c->peer_s, strerror(e));
		return -e;
	}
	if (c->busy_poll >= 0) {
		int us = c->busy_poll;
		if (setsockopt(ctx->fd, SOL_SOCKET, SO_BUSY_POLL, &us, sizeof(us)) != 0)
			ctx->busy_err = -errno;
		socklen_t l = sizeof(ctx->busy_eff);
		if (getsockopt(ctx->fd, SOL_SOCKET, SO_BUSY_POLL, &ctx->busy_eff, &l) != 0)
			ctx->busy_eff = -1;
#ifdef SO_PREFER_BUSY_POLL
		int one = c->busy_poll > 0;
		if (setsockopt(ctx->fd, SOL_SOCKET, SO_PREFER_BUSY_POLL, &one, sizeof(one)) != 0)
			ctx->prefer_err = -errno;
		else
			ctx->prefer_eff = one;
#else
		ctx->prefer_err = -ENOPROTOOPT;
#endif
	}
	int nb = c->wait_how != WAIT_BLOCK;
	if (nb) {
		int fl = fcntl(ctx->fd, F_GETFL);
		if (fl < 0 || fcntl(ctx->fd, F_SETFL, fl | O_NONBLOCK) != 0) {
			snprintf(msg, len, "fcntl O_NONBLOCK: %s", strerror(errno));
			return -errno;
		}
	}
	if (c->wait_how == WAIT_EPOLL) {
		ctx->ep = epoll_create1(EPOLL_CLOEXEC);
		struct epoll_event ev = { .events = EPOLLIN };
		if (ctx->ep < 0 || epoll_ctl(ctx->ep, EPOLL_CTL_ADD, ctx->fd, &ev) != 0) {
			snprintf(msg, len, "epoll: %s", strerror(errno));
			return -errno;
		}
	}
	struct sockaddr_storage local;
	socklen_t ll = sizeof(local);
	bool named = getsockname(ctx->fd, (struct sockaddr *)&local, &ll) == 0;
	if (named)
		udp_format_addr((const struct sockaddr *)&local, ctx->local_s, sizeof(ctx->local_s));
	/* -EOPNOTSUPP: --timestamps hardware cannot be had here (msg says why) */
	return uts_setup(&ctx->ts, ctx->fd, c->ts, named ? (const struct sockaddr *)&local : NULL,
			 msg, len);
}

/* ---- the hot path ----------------------------------------------------- */

static void prep_rx(struct udp_ctx *ctx, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		struct rxmsg *m = &ctx->rx[i];
		struct msghdr *mh = &ctx->mm[i].msg_hdr;
		m->iov.iov_base = m->buf;
		m->iov.iov_len = sizeof(m->buf);
		mh->msg_name = &m->from;
		mh->msg_namelen = sizeof(m->from);
		mh->msg_iov = &m->iov;
		mh->msg_iovlen = 1;
		mh->msg_control = m->ctrl;
		mh->msg_controllen = sizeof(m->ctrl);
		mh->msg_flags = 0;
	}
}

static void tx_drain(struct udp_ctx *ctx, bool all);

/*
 * Wait for and receive up to BATCH datagrams until deadline (CLOCK_MONOTONIC).
 * Returns how many (0: deadline passed or stop), or -errno on a hard error.
 */
static int xdp_rx_wait(struct udp_ctx *ctx, uint64_t deadline);

static int rx_wait(struct udp_ctx *ctx, uint64_t deadline)
{
	if (ctx->xdp)
		return xdp_rx_wait(ctx, deadline);
	const struct udp_cfg *c = ctx->cfg;
	const unsigned vlen = c->recv_call == RECV_MMSG ? BATCH : 1;
	for (;;) {
		if (atomic_load_explicit(&ctx->stop, memory_order_relaxed))
			return 0;
		if (c->wait_how == WAIT_EPOLL) {
			uint64_t now = rl_now_ns(CLOCK_MONOTONIC);
			if (now >= deadline)
				return 0;
			struct epoll_event ev;
			int ms = (int)((deadline - now + NS_PER_MS - 1) / NS_PER_MS);
			int r = epoll_wait(ctx->ep, &ev, 1, ms);
			if (r < 0 && errno != EINTR)
				return -errno;
			if (r <= 0)
				continue;
			/* EPOLLERR cannot be masked: TX stamps waiting on the error queue
			 * (a ping's software stamp is there as soon as send() returns) are
			 * read now, else this would spin; the receive below also clears a
			 * pending socket error */
			if (ev.events & EPOLLERR)
				tx_drain(ctx, true);
		}
		const bool block = c->wait_how == WAIT_BLOCK;
		if (block)
			atomic_store_explicit(&ctx->wait_until, deadline, memory_order_relaxed);
		int n;
		if (c->recv_call == RECV_MMSG) {
			prep_rx(ctx, vlen);
			n = recvmmsg(ctx->fd, ctx->mm, vlen, block ? MSG_WAITFORONE : MSG_DONTWAIT,
				     NULL);
		} else if (c->ts == UTS_NONE) {
			/* no control data wanted: the plain call, as lean as sockperf's */
			struct rxmsg *m = &ctx->rx[0];
			socklen_t fl = sizeof(m->from);
			bool conn = c->mode == MODE_PING;
			ssize_t r = recvfrom(ctx->fd, m->buf, sizeof(m->buf), 0,
					     conn ? NULL : (struct sockaddr *)&m->from,
					     conn ? NULL : &fl);
			if (r >= 0) {
				ctx->mm[0].msg_len = (unsigned)r;
				ctx->mm[0].msg_hdr.msg_namelen = conn ? 0 : fl;
				ctx->mm[0].msg_hdr.msg_flags = (size_t)r >= sizeof(m->buf) ? MSG_TRUNC : 0;
				ctx->mm[0].msg_hdr.msg_controllen = 0;
			}
			n = r < 0 ? -1 : 1;
		} else {
			prep_rx(ctx, 1);
			ssize_t r = recvmsg(ctx->fd, &ctx->mm[0].msg_hdr, 0);
			if (r >= 0)
				ctx->mm[0].msg_len = (unsigned)r;
			n = r < 0 ? -1 : 1;
		}
		if (block)
			atomic_store_explicit(&ctx->wait_until, 0, memory_order_relaxed);
		if (n > 0) {
			for (int i = 0; i < n; i++) {
				ctx->rx[i].len = ctx->mm[i].msg_len;
				ctx->rx[i].flags = ctx->mm[i].msg_hdr.msg_flags;
				uts_rx_parse(&ctx->mm[i].msg_hdr, &ctx->rx[i].ts);
			}
			return n;
		}
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
		    errno != ECONNREFUSED)
			return -errno;
		if (rl_now_ns(CLOCK_MONOTONIC) >= deadline)
			return 0;
	}
}

/* ---- the AF_XDP path (udp_xdp.h) ------------------------------------------ */

/* ---- the AF_XDP path (udp_xdp.h) ------------------------------------------ */

int udp_setup_xdp(struct udp_ctx *ctx, char *msg, size_t len, int *code)
{
	const struct udp_cfg *c = ctx->cfg;
	const bool ping = c->mode == MODE_PING;
	const struct uxdp_cfg xc = {
		.ping = ping,
		.bind = c->has_bind ? (const struct sockaddr_in *)&c->bind : NULL,
		.peer = ping ? (const struct sockaddr_in *)&c->peer : NULL,
		.ifname = c->ifname,
		.queue = c->xdp_queue,
		.mode = c->xdp_mode,
		.stamp = c->ts != UTS_NONE, /* hardware is refused at init; TX stamps: none */
		.payload_max = ping ? c->size : 0,
		.busy_poll = c->busy_poll,
	};
	int e = uxdp_open(&ctx->xdp, &xc, msg, len, code);
	if (e)
		return e;
	snprintf(ctx->local_s, sizeof(ctx->local_s), "%s", uxdp_local(ctx->xdp));
	snprintf(ctx->ts.ifname, sizeof(ctx->ts.ifname), "%s", uxdp_ifname(ctx->xdp));
	ctx->busy_eff = uxdp_busy_poll(ctx->xdp, &ctx->busy_err);
	if (c->wait_how == WAIT_EPOLL) {
		ctx->ep = epoll_create1(EPOLL_CLOEXEC);
		struct epoll_event ev = { .events = EPOLLIN };
		if (ctx->ep < 0 || epoll_ctl(ctx->ep, EPOLL_CTL_ADD, uxdp_fd(ctx->xdp), &ev) != 0) {
			snprintf(msg, len, "epoll: %s", strerror(errno));
			*code = RL_EXIT_ERROR;
			return -errno;
		}
	}
	return 0;
}

/* rx_wait of the xdp path: the same contract, frames from the AF_XDP RX ring. */
static int xdp_rx_wait(struct udp_ctx *ctx, uint64_t deadline)
{
	const struct udp_cfg *c = ctx->cfg;
	/* The XDP program stamps CLOCK_MONOTONIC, the wire format and the split use
	 * CLOCK_REALTIME (the two differ by a constant between clock steps): their offset,
	 * from one bracketed reading, read before waiting (outside every measured interval). */
	int64_t off = 0;
	uint64_t unc;
	if (c->ts != UTS_NONE && clk_realtime_minus_mono(1, &off, &unc) != 0)
		off = 0;
	struct uxdp_msg msg[BATCH];
	for (;;) {
		unsigned n = uxdp_recv(ctx->xdp, msg, BATCH);
		if (n) {
			for (unsigned i = 0; i < n; i++) {
				struct rxmsg *m = &ctx->rx[i];
				memcpy(m->buf, msg[i].payload, msg[i].len);
				m->len = msg[i].len;
				m->flags = 0;
				m->ts.sw = msg[i].rx_mono ? (uint64_t)((int64_t)msg[i].rx_mono + off)
							  : 0;
				m->ts.hw = 0;
			}
			return (int)n;
		}
		if (atomic_load_explicit(&ctx->stop, memory_order_relaxed))
			return 0;
		uint64_t now = rl_now_ns(CLOCK_MONOTONIC);
		if (now >= deadline)
			return 0;
		int r = 0;
		if (c->wait_how == WAIT_EPOLL) {
			struct epoll_event ev;
			r = epoll_wait(ctx->ep, &ev, 1,
				       (int)((deadline - now + NS_PER_MS - 1) / NS_PER_MS));
		} else if (c->wait_how == WAIT_BLOCK) {
			/* no timeout: the watchdog's signal ends the wait (see WAKE_SIG) */
			struct pollfd pfd = { .fd = uxdp_fd(ctx->xdp), .events = POLLIN };
			atomic_store_explicit(&ctx->wait_until, deadline, memory_order_relaxed);
			r = poll(&pfd, 1, -1);
			atomic_store_explicit(&ctx->wait_until, 0, memory_order_relaxed);
		}
		if (r < 0 && errno != EINTR)
			return -errno;
	}
}

/* The i-th datagram's reply in its own frame; the length sent, or -1. */
static ssize_t xdp_reply(struct udp_ctx *ctx, int i, const struct rxmsg *m)
{
	return uxdp_reply(ctx->xdp, (unsigned)i, m->buf, UDP_HDR_LEN) == 0 ? (ssize_t)m->len : -1;
}

static ssize_t xdp_send(struct udp_ctx *ctx)
{
	const size_t n = ctx->cfg->size;
	return uxdp_send(ctx->xdp, ctx->txbuf, n) == 0 ? (ssize_t)n : -1;
}

static void record(struct udp_ctx *ctx, int k, uint64_t at, uint64_t later, uint64_t earlier)
{
	bool neg = later < earlier;
	if (ctx->ch[k])
		channel_record(ctx->ch[k], at, neg ? 0 : later - earlier, 0, neg);
}

static void record_signed(struct udp_ctx *ctx, int k, uint64_t at, int64_t v)
{
	if (ctx->ch[k])
		channel_record(ctx->ch[k], at, v < 0 ? 0 : (uint64_t)v, 0, v < 0);
}

/* Record the values of exchange x that became computable (each once). */
static void take(struct udp_ctx *ctx, struct uts_xchg *x)
{
	static const int chan_of[UTS_V_N] = {
		[UTS_V_TX] = K_TX, [UTS_V_HW_TX] = K_HW_TX, [UTS_V_HW_RX] = K_HW_RX,
		[UTS_V_PEER_TX] = K_PEER_TX, [UTS_V_LINK] = K_LINK, [UTS_V_WIRE] = K_HW_WIRE,
	};
	struct uts_phc_model m;
	bool conv = ctx->ts.rx == UTS_EFF_HARDWARE && uts_phc_read(&ctx->ts.phc, &m);
	struct uts_vals v;
	uts_take(x, conv ? &m : NULL, &v);
	for (int i = 0; i < UTS_V_N; i++)
		if (v.have & (1u << i))
			record_signed(ctx, chan_of[i], x->at, v.v[i]);
}

/* Read TX timestamps off the error queue (non-blocking) and record what they complete. */
static void tx_drain(struct udp_ctx *ctx, bool all)
{
	struct uts_drain d;
	if (ctx->ts.tx == UTS_EFF_NONE || uts_drain(&ctx->ts, ctx->fd, all, &d) != 0)
		return;
	for (unsigned i = 0; i < d.matched; i++)
		inc(ctx, C_TX_STAMPS);
	for (unsigned i = 0; i < d.unmatched; i++)
		inc(ctx, C_TX_UNMATCHED);
	for (unsigned i = 0; i < d.n_upd; i++)
		take(ctx, d.upd[i]);
}

/* A datagram was sent (ok) or not: the exchange it starts in the ring, or NULL. */
static struct uts_xchg *tx_sent(struct udp_ctx *ctx, bool ok, uint64_t seq, uint64_t send_rt,
				uint64_t at)
{
	if (ctx->ts.tx == UTS_EFF_NONE)
		return NULL;
	if (!ok) {
		uts_ring_send_failed(&ctx->ts.ring);
		return NULL;
	}
	bool evicted;
	struct uts_xchg *x = uts_ring_sent(&ctx->ts.ring, seq, send_rt, &evicted);
	if (evicted)
		inc(ctx, C_TX_MISSING);
	x->at = at;
	return x;
}

void udp_reflect_loop(struct udp_ctx *ctx)
{
	const struct udp_cfg *c = ctx->cfg;
	const uint64_t end = c->duration_ns ? ctx->start_mono + c->duration_ns : UINT64_MAX;
	const bool block = c->wait_how == WAIT_BLOCK;
	const bool stamps = c->ts != UTS_NONE;
	const bool txs = ctx->ts.tx != UTS_EFF_NONE;
	const bool hw = ctx->ts.rx == UTS_EFF_HARDWARE;
	struct uts_ring *ring = &ctx->ts.ring;
	struct udp_bucket tb;
	uint64_t app_mono = rl_now_ns(CLOCK_MONOTONIC);
	udp_bucket_init(&tb, c->max_rate, c->burst, app_mono);
	for (;;) {
		/* blocking: the watchdog ends the wait at `end`; the time of the last packet
		 * is recent enough for this check and costs no clock read */
		uint64_t now = block ? app_mono : rl_now_ns(CLOCK_MONOTONIC);
		if (now >= end || atomic_load_explicit(&ctx->stop, memory_order_relaxed))
			break;
		uint64_t dl = block ? end : now + REFLECT_POLL_NS < end ? now + REFLECT_POLL_NS : end;
		int n = rx_wait(ctx, dl);
		app_mono = rl_now_ns(CLOCK_MONOTONIC);
		/* REALTIME only to compare with the kernel's RX timestamps (and for the
		 * pinger's split, which needs them): without timestamps, one clock read */
		uint64_t app_rt = stamps ? rl_now_ns(CLOCK_REALTIME) : 0;
		if (n < 0) {
			ctx->run_err = -n;
			break;
		}
		for (int i = 0; i < n; i++) {
			struct rxmsg *m = &ctx->rx[i];
			struct udp_pkt p;
			inc(ctx, C_RECEIVED);
			if (m->flags & MSG_TRUNC || m->len > UDP_MAX_SIZE) {
				inc(ctx, C_OVERSIZE);
				continue;
			}
			enum udp_verdict vd = udp_pkt_decode(m->buf, m->len, c->session,
							     UDP_TYPE_PING, &p);
			if (vd != UDP_OK) {
				inc(ctx, vd == UDP_SHORT ? C_SHORT : vd == UDP_BAD_MAGIC ? C_BAD_MAGIC
					 : vd == UDP_BAD_VERSION ? C_BAD_VERSION
					 : vd == UDP_BAD_SESSION ? C_BAD_SESSION : C_BAD_TYPE);
				continue;
			}
			if (!udp_bucket_take(&tb, app_mono)) {
				inc(ctx, C_RATE_LIMITED);
				continue;
			}
			const bool carry = txs && (p.flags & UDP_FLAG_WANT_CARRY);
			const uint64_t tag = txs ? udp_addr_tag((struct sockaddr *)&m->from) : 0;
			p.type = UDP_TYPE_REPLY;
			p.flags = m->ts.sw ? UDP_FLAG_RX_TS : 0;
			p.r_rx_ts = m->ts.sw;
			p.r_app = app_rt;
			if (carry) {
				/* the previous reply's TX stamps: normally read right after it was
				 * sent; only a stamp still missing (hardware) costs a read here */
				if (ring->last && !uts_tx_complete(ring, ring->last))
					tx_drain(ctx, false);
				uts_carry(ring->last, p.seq, tag, &p.flags, &p.carry_tx_sw,
					  &p.carry_hw_resid);
			}
			uint64_t send_t = rl_now_ns(stamps ? CLOCK_REALTIME : CLOCK_MONOTONIC);
			p.r_send = stamps ? send_t : 0;
			udp_pkt_encode(m->buf, &p);
			/* the reply is exactly as long as the ping: never an amplifier */
			ssize_t s = ctx->xdp ? xdp_reply(ctx, i, m)
					     : sendto(ctx->fd, m->buf, m->len, 0,
						      (struct sockaddr *)&m->from,
						      ctx->mm[i].msg_hdr.msg_namelen);
			uint64_t at = app_mono > ctx->start_mono ? app_mono - ctx->start_mono : 0;
			struct uts_xchg *x = tx_sent(ctx, s == (ssize_t)m->len, p.seq, send_t, at);
			if (s != (ssize_t)m->len) {
				inc(ctx, C_SEND_ERRORS);
				continue;
			}
			inc(ctx, C_REPLIED);
			if (m->ts.sw)
				record(ctx, K_WAKEUP, at, app_rt, m->ts.sw);
			record(ctx, K_TURN, at, send_t, stamps ? app_rt : app_mono);
			if (hw && !m->ts.hw)
				inc(ctx, C_NO_HW_STAMP);
			if (x) {
				x->tag = tag;
				x->have_rx = true;
				x->rx = m->ts;
				/* the reply is on its way: its software TX stamp is queued already
				 * (veth, loopback: during sendto) */
				tx_drain(ctx, false);
				take(ctx, x);
			}
		}
	}
	tx_drain(ctx, true);
}

static void ping_reply(struct udp_ctx *ctx, const struct udp_pkt *p, const struct rxmsg *m,
		       const struct udp_pkt *sent, uint64_t app_mono, uint64_t app_rt)
{
	uint64_t at = app_mono > ctx->start_mono ? app_mono - ctx->start_mono : 0;
	record(ctx, K_RTT, at, app_mono, sent->send_mono);
	int64_t stack = UTS_NO_STACK;
	if (!m->ts.sw || !(p->flags & UDP_FLAG_RX_TS)) {
		inc(ctx, C_NO_TIMESTAMP);
	} else {
		uint64_t w_near = app_rt > m->ts.sw ? app_rt - m->ts.sw : 0;
		uint64_t w_far = p->r_app > p->r_rx_ts ? p->r_app - p->r_rx_ts : 0;
		uint64_t turn = p->r_send > p->r_app ? p->r_send - p->r_app : 0;
		record(ctx, K_WAKEUP, at, app_rt, m->ts.sw);
		record(ctx, K_PEER_WAKEUP, at, p->r_app, p->r_rx_ts);
		record(ctx, K_PEER_TURN, at, p->r_send, p->r_app);
		/* both directions: send() call -> kernel RX timestamp of the other end. On
		 * CLOCK_REALTIME, the stamps' clock: a vCPU paused between this end's two
		 * clock reads (MONOTONIC for rtt, REALTIME for the split) cannot skew it;
		 * negative (a clock step) is counted, not clamped */
		uint64_t rtt_rt = app_rt - sent->send_rt;
		uint64_t rest = w_near + w_far + turn;
		record(ctx, K_STACK, at, rtt_rt, rest);
		stack = (int64_t)(rtt_rt - rest);
		record(ctx, K_STACK_OUT, at, p->r_rx_ts, sent->send_rt);
		record(ctx, K_STACK_BACK, at, m->ts.sw, p->r_send);
	}
	if (ctx->ts.tx == UTS_EFF_NONE)
		return;
	/* the reply is in: now (off the measured path) the ping's own TX stamps */
	tx_drain(ctx, false);
	if (ctx->ts.rx == UTS_EFF_HARDWARE && !m->ts.hw)
		inc(ctx, C_NO_HW_STAMP);
	/* this reply also carries the reflector's TX stamps of the previous exchange */
	struct uts_xchg *x, *prev;
	if (uts_ping_reply(&ctx->ts.ring, p, &m->ts, stack, &x, &prev))
		inc(ctx, C_NO_CARRY);
	if (x)
		take(ctx, x);
	if (prev)
		take(ctx, prev);
}

/*
 * --pace busy: spin reading CLOCK_MONOTONIC (vDSO: no system call) until the send
 * deadline, so the CPU never enters an idle state between pings (as a polling loop,
 * or sockperf's paced client). false: the run was stopped meanwhile.
 */
static bool spin_until(struct udp_ctx *ctx, uint64_t deadline)
{
	while (rl_now_ns(CLOCK_MONOTONIC) < deadline)
		if (atomic_load_explicit(&ctx->stop, memory_order_relaxed))
			return false;
	return true;
}

void udp_ping_loop(struct udp_ctx *ctx)
{
	const struct udp_cfg *c = ctx->cfg;
	const uint64_t start = ctx->start_mono;
	const uint64_t end = c->duration_ns ? start + c->duration_ns : UINT64_MAX;
	const uint64_t count = c->count ? c->count : UINT64_MAX;
	const uint16_t want = ctx->ts.tx != UTS_EFF_NONE ? UDP_FLAG_WANT_CARRY : 0;
	uint64_t next = start;
	uint64_t seq;
	for (seq = 0; seq < count; seq++) {
		if (atomic_load_explicit(&ctx->stop, memory_order_relaxed))
			break;
		if (c->interval_ns) {
			if (next >= end)
				break;
			if (c->pace == PACE_BUSY) {
				if (!spin_until(ctx, next))
					break;
			} else {
				struct timespec ts = rl_ns_to_ts(next);
				int r;
				while ((r = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts,
							    NULL)) == EINTR)
					;
				if (r) {
					ctx->run_err = r;
					break;
				}
			}
			struct period_step s = period_advance(next, rl_now_ns(CLOCK_MONOTONIC),
							      c->interval_ns);
			/* the slots passed meanwhile, but only those due before the end: every
			 * slot of the run is sent or counted missed, exactly once */
			add(ctx, C_MISSED_SENDS,
			    period_missed_before(next, s.missed, end, c->interval_ns));
			next = s.next_ns;
		}
		struct udp_pkt p = { .type = UDP_TYPE_PING, .flags = want, .session = c->session,
				     .seq = seq };
		p.send_rt = rl_now_ns(CLOCK_REALTIME);
		p.send_mono = rl_now_ns(CLOCK_MONOTONIC);
		if (p.send_mono >= end) {
			/* this slot was due before the end but its send came after it */
			if (c->interval_ns)
				inc(ctx, C_MISSED_SENDS);
			break;
		}
		udp_pkt_encode(ctx->txbuf, &p);
		bool ok = (ctx->xdp ? xdp_send(ctx) : send(ctx->fd, ctx->txbuf, c->size, 0)) ==
			  (ssize_t)c->size;
		tx_sent(ctx, ok, seq, p.send_rt, p.send_mono - start);
		if (!ok) {
			inc(ctx, C_SEND_ERRORS);
			inc(ctx, C_SENT);
			inc(ctx, C_LOST);
			continue;
		}
		inc(ctx, C_SENT);
		const uint64_t dl = p.send_mono + c->timeout_ns;
		bool got = false;
		while (!got) {
			int n = rx_wait(ctx, dl);
			uint64_t app_mono = rl_now_ns(CLOCK_MONOTONIC);
			uint64_t app_rt = rl_now_ns(CLOCK_REALTIME);
			if (n < 0) {
				ctx->run_err = -n;
				return;
			}
			if (n == 0)
				break;
			for (int i = 0; i < n; i++) {
				struct rxmsg *m = &ctx->rx[i];
				struct udp_pkt r;
				if (m->flags & MSG_TRUNC ||
				    udp_pkt_decode(m->buf, m->len, c->session, UDP_TYPE_REPLY, &r) !=
					    UDP_OK) {
					inc(ctx, C_INVALID);
					continue;
				}
				bool reo;
				enum udp_seq_kind k = udp_seq_note(ctx->seq, r.seq, seq, &reo);
				if (reo)
					inc(ctx, C_REORDERED);
				switch (k) {
				case SEQ_CURRENT:
					inc(ctx, C_REPLIES);
					ping_reply(ctx, &r, m, &p, app_mono, app_rt);
					got = true;
					break;
				case SEQ_LATE:
				case SEQ_TOO_OLD:
					inc(ctx, C_LATE);
					break;
				case SEQ_DUPLICATE:
					inc(ctx, C_DUPLICATE);
					break;
				case SEQ_BOGUS:
					inc(ctx, C_INVALID);
					break;
				}
			}
		}
		/* no reply (also when stopped while waiting): lost; and no read after it: TX
		 * stamps share the socket's receive buffer with the replies, so drain them
		 * here lest they pile up */
		if (!got) {
			inc(ctx, C_LOST);
			tx_drain(ctx, false);
		}
	}
	/* stopped (the end of the run, or a signal) while sleeping or waiting for a reply:
	 * the slots from `next` on that came due before the end and before now were
	 * neither sent nor counted yet */
	if (c->interval_ns && seq < count) {
		uint64_t now = rl_now_ns(CLOCK_MONOTONIC);
		uint64_t limit = now < end ? now : end;
		if (next < limit) {
			add(ctx, C_MISSED_SENDS,
			    1 + period_missed_before(next, UINT64_MAX, limit, c->interval_ns));
		}
	}
	tx_drain(ctx, true);
}
