/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the udp probe's kernel timestamps (udp_ts.h): control messages
 * built as the kernel builds them (SCM_TIMESTAMPING with software ts[0] and
 * hardware ts[2], error-queue messages with sock_extended_err and OPT_ID keys),
 * matching of error-queue entries to sends (order, late hardware stamps,
 * resynchronisation after failed sends), the split arithmetic, the PHC ->
 * CLOCK_REALTIME model with a fake offset source, and a simulated run of both
 * ends in which the reflector's hardware TX stamp t3 travels in the next reply.
 * No hardware needed: this machine has no timestamping NIC.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <linux/errqueue.h>
#include <linux/net_tstamp.h>

#include "tap.h"
#include "udp_proto.h"
#include "udp_ts.h"

/* ---- control messages as the kernel writes them ------------------------ */

struct cbuf {
	_Alignas(struct cmsghdr) unsigned char b[512];
	struct msghdr mh;
	struct cmsghdr *next;
};

static void cb_init(struct cbuf *c)
{
	memset(c, 0, sizeof(*c));
	c->mh.msg_control = c->b;
	c->mh.msg_controllen = sizeof(c->b);
	c->next = CMSG_FIRSTHDR(&c->mh);
}

static void cb_add(struct cbuf *c, int level, int type, const void *data, size_t len)
{
	struct cmsghdr *cm = c->next;
	cm->cmsg_level = level;
	cm->cmsg_type = type;
	cm->cmsg_len = CMSG_LEN(len);
	memcpy(CMSG_DATA(cm), data, len);
	size_t used = (size_t)((unsigned char *)cm - c->b) + CMSG_SPACE(len);
	c->mh.msg_controllen = used;
	c->next = (struct cmsghdr *)(c->b + used);
}

static struct timespec ts_of(uint64_t ns)
{
	struct timespec t = { .tv_sec = (time_t)(ns / NS_PER_SEC), .tv_nsec = (long)(ns % NS_PER_SEC) };
	return t;
}

/* SCM_TIMESTAMPING: ts[0] software, ts[1] unused, ts[2] hardware (0: not given) */
static void cb_stamps(struct cbuf *c, uint64_t sw, uint64_t hw)
{
	struct timespec t[3] = { ts_of(sw), ts_of(0), ts_of(hw) };
	cb_add(c, SOL_SOCKET, SO_TIMESTAMPING, t, sizeof(t));
}

/* IP_RECVERR of a TX timestamp; the kernel appends the offender address (empty) */
static void cb_recverr(struct cbuf *c, bool v6, uint8_t origin, uint32_t info, uint32_t key)
{
	unsigned char d[sizeof(struct sock_extended_err) + sizeof(struct sockaddr_in6)];
	memset(d, 0, sizeof(d));
	struct sock_extended_err ee = { .ee_errno = ENOMSG, .ee_origin = origin, .ee_info = info,
					.ee_data = key };
	memcpy(d, &ee, sizeof(ee));
	cb_add(c, v6 ? SOL_IPV6 : SOL_IP, v6 ? IPV6_RECVERR : IP_RECVERR, d,
	       sizeof(ee) + (v6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in)));
}

/* one error-queue message of a TX stamp, in the kernel's order (stamps, then error) */
static int err_msg(struct uts_txstamp *out, uint32_t key, uint64_t sw, uint64_t hw)
{
	struct cbuf c;
	cb_init(&c);
	cb_stamps(&c, sw, hw);
	cb_recverr(&c, false, SO_EE_ORIGIN_TIMESTAMPING, SCM_TSTAMP_SND, key);
	return uts_err_parse(&c.mh, out);
}

static void test_rx_parse(void)
{
	struct cbuf c;
	struct uts_stamps s;
	const uint64_t sw = 1700000000123456789ULL, hw = 37000000987654321ULL;
	cb_init(&c);
	int tos = 0;
	cb_add(&c, SOL_IP, IP_TOS, &tos, 1); /* something else first */
	cb_stamps(&c, sw, hw);
	uts_rx_parse(&c.mh, &s);
	CHECK_EQ_U(s.sw, sw);
	CHECK_EQ_U(s.hw, hw);
	/* software only (hardware ts[2] zero) */
	cb_init(&c);
	cb_stamps(&c, sw, 0);
	uts_rx_parse(&c.mh, &s);
	CHECK_EQ_U(s.sw, sw);
	CHECK_EQ_U(s.hw, 0);
	/* hardware only (SOF_TIMESTAMPING_RAW_HARDWARE without software) */
	cb_init(&c);
	cb_stamps(&c, 0, hw);
	uts_rx_parse(&c.mh, &s);
	CHECK_EQ_U(s.sw, 0);
	CHECK_EQ_U(s.hw, hw);
	/* a short cmsg with only ts[0] (never the kernel's, but no over-read) */
	cb_init(&c);
	struct timespec one = ts_of(sw);
	cb_add(&c, SOL_SOCKET, SO_TIMESTAMPING, &one, sizeof(one));
	uts_rx_parse(&c.mh, &s);
	CHECK_EQ_U(s.sw, sw);
	CHECK_EQ_U(s.hw, 0);
	/* no control data */
	cb_init(&c);
	c.mh.msg_controllen = 0;
	uts_rx_parse(&c.mh, &s);
	CHECK_EQ_U(s.sw + s.hw, 0);
}

static void test_err_parse(void)
{
	struct uts_txstamp t;
	CHECK_EQ_U(err_msg(&t, 41, 5000, 0), 1);
	CHECK_EQ_U(t.key, 41);
	CHECK_EQ_U(t.ts.sw, 5000);
	CHECK_EQ_U(t.ts.hw, 0);
	CHECK_EQ_U(err_msg(&t, 7, 0, 123456), 1); /* the hardware one (OPT_TX_SWHW) */
	CHECK_EQ_U(t.key, 7);
	CHECK_EQ_U(t.ts.hw, 123456);

	struct cbuf c;
	/* IPv6 socket, error first then stamps */
	cb_init(&c);
	cb_recverr(&c, true, SO_EE_ORIGIN_TIMESTAMPING, SCM_TSTAMP_SND, 9);
	cb_stamps(&c, 777, 0);
	CHECK_EQ_U(uts_err_parse(&c.mh, &t), 1);
	CHECK_EQ_U(t.key, 9);
	CHECK_EQ_U(t.ts.sw, 777);
	/* a scheduler stamp (SCM_TSTAMP_SCHED) is not the driver's */
	cb_init(&c);
	cb_stamps(&c, 777, 0);
	cb_recverr(&c, false, SO_EE_ORIGIN_TIMESTAMPING, SCM_TSTAMP_SCHED, 9);
	CHECK_EQ_U(uts_err_parse(&c.mh, &t), 0);
	/* an ICMP error on the queue */
	cb_init(&c);
	cb_recverr(&c, false, SO_EE_ORIGIN_ICMP, 0, 0);
	CHECK_EQ_U(uts_err_parse(&c.mh, &t), 0);
	/* a timestamp error without stamps, stamps without the error */
	cb_init(&c);
	cb_recverr(&c, false, SO_EE_ORIGIN_TIMESTAMPING, SCM_TSTAMP_SND, 3);
	CHECK_EQ_U(uts_err_parse(&c.mh, &t), 0);
	cb_init(&c);
	cb_stamps(&c, 777, 0);
	CHECK_EQ_U(uts_err_parse(&c.mh, &t), 0);
	/* zero stamps */
	CHECK_EQ_U(err_msg(&t, 1, 0, 0), 0);
}

static struct uts_txstamp stamp(uint32_t key, uint64_t sw, uint64_t hw)
{
	struct uts_txstamp t;
	CHECK_EQ_U(err_msg(&t, key, sw, hw), 1);
	return t;
}

static void test_ring_matching(void)
{
	struct uts_ring r;
	bool ev;
	uts_ring_init(&r, UTS_WANT_SW | UTS_WANT_HW);
	/* in order: keys 0, 1, 2 = sends of seq 10, 11, 12 */
	struct uts_xchg *a = uts_ring_sent(&r, 10, 1000, &ev);
	CHECK(!ev);
	struct uts_txstamp s = stamp(0, 1100, 0);
	CHECK(uts_ring_stamp(&r, &s) == a);
	CHECK(!uts_tx_complete(&r, a)); /* hardware still missing */
	s = stamp(0, 0, 55);
	CHECK(uts_ring_stamp(&r, &s) == a);
	CHECK(uts_tx_complete(&r, a));
	CHECK_EQ_U(a->tx.sw, 1100);
	CHECK_EQ_U(a->tx.hw, 55);
	struct uts_xchg *b = uts_ring_sent(&r, 11, 2000, &ev);
	struct uts_xchg *c = uts_ring_sent(&r, 12, 3000, &ev);
	/* out of order: c's software stamp, then b's late hardware stamp, then the rest */
	s = stamp(2, 3100, 0);
	CHECK(uts_ring_stamp(&r, &s) == c);
	s = stamp(1, 0, 66);
	CHECK(uts_ring_stamp(&r, &s) == b);
	s = stamp(1, 2100, 0);
	CHECK(uts_ring_stamp(&r, &s) == b);
	CHECK(uts_tx_complete(&r, b));
	CHECK(!uts_tx_complete(&r, c));
	/* a key never sent (e.g. from before the socket's counter was ours) */
	s = stamp(99, 1, 0);
	CHECK(uts_ring_stamp(&r, &s) == NULL);
	CHECK(uts_ring_find(&r, 11) == b);
	CHECK(uts_ring_find(&r, 13) == NULL);
	/* c never gets its hardware stamp: counted when its slot is reused */
	unsigned evicted = 0;
	for (uint64_t q = 13; q < 13 + UTS_SLOTS; q++) {
		struct uts_xchg *x = uts_ring_sent(&r, q, q * 1000, &ev);
		evicted += ev;
		if (q != 13 + UTS_SLOTS - 1) { /* all but the last get both stamps */
			s = stamp(x->key, q * 1000 + 100, q);
			CHECK(uts_ring_stamp(&r, &s) == x);
			s = stamp(x->key, 0, q);
			CHECK(uts_ring_stamp(&r, &s) == x);
		}
	}
	CHECK_EQ_U(evicted, 1); /* c (a, b were complete) */
	CHECK(uts_ring_find(&r, 10) == NULL);
	/* a stamp of an evicted send is unmatched */
	s = stamp(2, 0, 77);
	CHECK(uts_ring_stamp(&r, &s) == NULL);
}

static void test_ring_resync(void)
{
	struct uts_ring r;
	bool ev;
	struct uts_txstamp s;
	uts_ring_init(&r, UTS_WANT_SW);
	struct uts_xchg *x = uts_ring_sent(&r, 0, 100, &ev); /* key 0 */
	s = stamp(0, 150, 0);
	CHECK(uts_ring_stamp(&r, &s) == x);
	/* send 1 failed after the kernel had counted it (e.g. ENOBUFS from the qdisc) */
	uts_ring_send_failed(&r);
	x = uts_ring_sent(&r, 2, 300, &ev); /* we think key 1; the kernel used key 2 */
	CHECK_EQ_U(x->key, 1);
	s = stamp(2, 350, 0);
	struct uts_xchg *y = uts_ring_stamp(&r, &s);
	CHECK(y != NULL);
	CHECK_EQ_U(y->seq, 2);
	CHECK_EQ_U(y->key, 2);
	CHECK_EQ_U(y->tx.sw, 350);
	CHECK(uts_ring_find(&r, 2) == y);
	/* and the counter follows the kernel's from now on */
	x = uts_ring_sent(&r, 3, 400, &ev);
	CHECK_EQ_U(x->key, 3);
	s = stamp(3, 450, 0);
	CHECK(uts_ring_stamp(&r, &s) == x);
	/* a failed send that the kernel did not count: the next stamp matches as is */
	uts_ring_send_failed(&r);
	x = uts_ring_sent(&r, 5, 600, &ev);
	s = stamp(4, 650, 0);
	CHECK(uts_ring_stamp(&r, &s) == x);
	CHECK_EQ_U(x->seq, 5);
	/* without a failed send, a key ahead is not adopted */
	x = uts_ring_sent(&r, 6, 700, &ev);
	s = stamp(7, 750, 0);
	CHECK(uts_ring_stamp(&r, &s) == NULL);
	/* beyond the number of failed sends, neither */
	uts_ring_send_failed(&r);
	x = uts_ring_sent(&r, 8, 800, &ev); /* key 6 */
	s = stamp(9, 850, 0);		    /* 3 ahead, 1 failure */
	CHECK(uts_ring_stamp(&r, &s) == NULL);
	s = stamp(7, 850, 0); /* 1 ahead: adopted */
	CHECK(uts_ring_stamp(&r, &s) != NULL);
	/* the counter wraps like the kernel's u32 */
	uts_ring_init(&r, UTS_WANT_SW);
	r.next_key = UINT32_MAX;
	x = uts_ring_sent(&r, 1, 10, &ev);
	y = uts_ring_sent(&r, 2, 20, &ev);
	CHECK_EQ_U(y->key, 0);
	s = stamp(UINT32_MAX, 15, 0);
	CHECK(uts_ring_stamp(&r, &s) == x);
	s = stamp(0, 25, 0);
	CHECK(uts_ring_stamp(&r, &s) == y);
}

static void test_take(void)
{
	struct uts_xchg x;
	struct uts_vals v;
	memset(&x, 0, sizeof(x));
	x.used = true;
	x.send_rt = 1000;
	x.stack = UTS_NO_STACK;
	uts_take(&x, NULL, &v);
	CHECK_EQ_U(v.have, 0);
	x.tx.sw = 1400;
	uts_take(&x, NULL, &v);
	CHECK_EQ_U(v.have, 1u << UTS_V_TX);
	CHECK_EQ_U(v.v[UTS_V_TX], 400);
	uts_take(&x, NULL, &v); /* once */
	CHECK_EQ_U(v.have, 0);
	/* the reply: stack 10000 (both directions), reflector's send at 50000 */
	x.have_rx = true;
	x.rx.sw = 90000;
	x.peer_send = 50000;
	x.stack = 10000;
	uts_take(&x, NULL, &v);
	CHECK_EQ_U(v.have, 0); /* peer.tx and link need the carried stamp */
	x.have_carry_tx = true;
	x.peer_tx_sw = 53000;
	uts_take(&x, NULL, &v);
	CHECK_EQ_U(v.have, (1u << UTS_V_PEER_TX) | (1u << UTS_V_LINK));
	CHECK_EQ_U(v.v[UTS_V_PEER_TX], 3000);
	CHECK_EQ_U(v.v[UTS_V_LINK], 10000 - 400 - 3000);
	/* a link that comes out negative (the parts' clocks disagree) stays negative */
	struct uts_xchg y = x;
	y.taken = 0;
	y.stack = 1000;
	uts_take(&y, NULL, &v);
	CHECK(v.v[UTS_V_LINK] == 1000 - 400 - 3000);
	/* so does a negative stack (a clock step): link follows, the channel counts it */
	y.taken = 0;
	y.stack = -500;
	uts_take(&y, NULL, &v);
	CHECK(v.have & (1u << UTS_V_LINK));
	CHECK(v.v[UTS_V_LINK] == -500 - 400 - 3000);
	/* hardware: PHC = REALTIME + 37 s (TAI-like), no drift */
	struct uts_phc_model m = { .t_ref = 1, .off = 37 * (int64_t)NS_PER_SEC };
	x.tx.hw = 1900 + 37 * NS_PER_SEC;  /* t1: 500 after the driver */
	x.rx.hw = 88000 + 37 * NS_PER_SEC; /* t4: 2000 before the software RX stamp */
	uts_take(&x, NULL, &v);
	CHECK_EQ_U(v.have, 0); /* no conversion: nothing hardware */
	uts_take(&x, &m, &v);
	CHECK_EQ_U(v.have, (1u << UTS_V_HW_TX) | (1u << UTS_V_HW_RX));
	CHECK_EQ_U(v.v[UTS_V_HW_TX], 500);
	CHECK_EQ_U(v.v[UTS_V_HW_RX], 2000);
	/* the wire: (t4 - t1) - (t3 - t2) with the reflector's 40000 ns residence */
	x.have_carry_hw = true;
	x.peer_resid = 40000;
	uts_take(&x, &m, &v);
	CHECK_EQ_U(v.have, 1u << UTS_V_WIRE);
	CHECK_EQ_U(v.v[UTS_V_WIRE], (88000 - 1900) - 40000);
}

static void test_phc_model(void)
{
	struct uts_phc_model m;
	uint64_t pe;
	memset(&m, 0, sizeof(m));
	const uint64_t T = 1700000000ULL * NS_PER_SEC;
	/* PHC runs 20 ppm fast and started 5 s behind REALTIME */
	const int64_t off0 = -5 * (int64_t)NS_PER_SEC;
	for (int i = 0; i < 5; i++) {
		uint64_t t = T + (uint64_t)i * NS_PER_SEC;
		uts_phc_update(&m, t, off0 + 20000 * i, 40, &pe);
		CHECK_EQ_U(pe, 0); /* linear drift: predicted exactly */
	}
	CHECK_EQ_U(m.rate_ppb, 20000);
	CHECK_EQ_U(m.n, 5);
	/* a PHC time 0.5 s after the last measurement converts with the drift */
	uint64_t rt = T + 4 * NS_PER_SEC + NS_PER_SEC / 2;
	uint64_t phc = rt + (uint64_t)(off0 + 20000 * 4 + 10000);
	CHECK_EQ_U(uts_phc_to_rt(&m, phc), rt);
	CHECK_EQ_U(uts_phc_to_rt(&m, 0), 0);
	/* a step (someone set the PHC): the next measurement shows the prediction error */
	uts_phc_update(&m, T + 5 * NS_PER_SEC, off0 + 100000 + 1000000, 40, &pe);
	CHECK_EQ_U(pe, 1000000);
	/* a stepped second is no rate (> 1000 ppm) */
	uts_phc_update(&m, T + 6 * NS_PER_SEC, off0 + 3 * (int64_t)NS_PER_SEC, 40, &pe);
	CHECK_EQ_U(m.rate_ppb, 0);
}

struct fake_src {
	int calls, fail_at;
	int64_t off[8];
	uint64_t unc[8];
};

static int fake_measure(void *arg, int64_t *off, uint64_t *unc, const char **method)
{
	struct fake_src *f = arg;
	int i = f->calls++;
	if (i == f->fail_at)
		return -EIO;
	*off = f->off[i];
	*unc = f->unc[i];
	*method = "fake";
	return 0;
}

static void test_phc_refresh(void)
{
	struct uts_phc p;
	memset(&p, 0, sizeof(p));
	struct fake_src f = { .fail_at = 2, .off = { 1000, 1100, 0, 1300, 1900 },
			      .unc = { 30, 50, 0, 20, 25 } };
	p.measure = fake_measure;
	p.arg = &f;
	p.index = 3;
	struct uts_phc_model m;
	CHECK(!uts_phc_read(&p, &m));
	const uint64_t T = 1000 * NS_PER_SEC;
	CHECK_EQ_U(uts_phc_refresh(&p, T), 0);
	CHECK(uts_phc_read(&p, &m));
	CHECK_EQ_U(m.off, 1000);
	CHECK_EQ_U(m.unc, 30);
	CHECK_EQ_U(uts_phc_refresh(&p, T + NS_PER_SEC), 0); /* +100 ns/s: 100 ppb */
	CHECK(uts_phc_read(&p, &m));
	CHECK_EQ_U(m.rate_ppb, 100);
	CHECK_EQ_U((uint64_t)uts_phc_refresh(&p, T + 2 * NS_PER_SEC), (uint64_t)-EIO);
	CHECK_EQ_U(uts_phc_refresh(&p, T + 3 * NS_PER_SEC), 0); /* as predicted */
	CHECK_EQ_U(uts_phc_refresh(&p, T + 4 * NS_PER_SEC), 0); /* 500 off the prediction */
	CHECK_EQ_U(atomic_load(&p.n), 4);
	CHECK_EQ_U(atomic_load(&p.errors), 1);
	CHECK_EQ_U(atomic_load(&p.first_off), 1000);
	CHECK_EQ_U(atomic_load(&p.max_unc), 50);
	CHECK_EQ_U(atomic_load(&p.max_pred_err), 500);
	CHECK(strcmp(p.method, "fake") == 0);
	CHECK(uts_phc_read(&p, &m));
	CHECK_EQ_U(m.off, 1900);
}

static void test_carry_decision(void)
{
	struct uts_xchg last;
	memset(&last, 0, sizeof(last));
	last.used = true;
	last.seq = 41;
	last.tag = 0xabc;
	last.tx.sw = 5000;
	uint16_t fl = UDP_FLAG_RX_TS;
	uint64_t tx, resid;
	uts_carry(&last, 42, 0xabc, &fl, &tx, &resid);
	CHECK_EQ_U(fl, UDP_FLAG_RX_TS | UDP_FLAG_CARRY_TX);
	CHECK_EQ_U(tx, 5000);
	/* hardware: t2 = 100, t3 = 250 */
	last.have_rx = true;
	last.rx.hw = 100;
	last.tx.hw = 250;
	uts_carry(&last, 42, 0xabc, &fl, &tx, &resid);
	CHECK_EQ_U(fl, UDP_FLAG_RX_TS | UDP_FLAG_CARRY_TX | UDP_FLAG_CARRY_HW);
	CHECK_EQ_U(resid, 150);
	/* another sender, a gap, nothing before, an impossible residence */
	uts_carry(&last, 42, 0xabd, &fl, &tx, &resid);
	CHECK_EQ_U(fl, UDP_FLAG_RX_TS);
	uts_carry(&last, 43, 0xabc, &fl, &tx, &resid);
	CHECK_EQ_U(fl, UDP_FLAG_RX_TS);
	uts_carry(NULL, 42, 0xabc, &fl, &tx, &resid);
	CHECK_EQ_U(fl | tx | resid, UDP_FLAG_RX_TS);
	last.tx.hw = 50;
	uts_carry(&last, 42, 0xabc, &fl, &tx, &resid);
	CHECK_EQ_U(fl, UDP_FLAG_RX_TS | UDP_FLAG_CARRY_TX);
}

static void test_wire_carry_fields(void)
{
	unsigned char b[UDP_HDR_LEN];
	struct udp_pkt p = { .type = UDP_TYPE_PING, .flags = UDP_FLAG_WANT_CARRY, .session = 5,
			     .seq = 3, .send_mono = 111, .send_rt = 222 };
	udp_pkt_encode(b, &p);
	struct udp_pkt q;
	CHECK_EQ_U(udp_pkt_decode(b, sizeof(b), 5, UDP_TYPE_PING, &q), UDP_OK);
	CHECK_EQ_U(q.flags, UDP_FLAG_WANT_CARRY);
	CHECK_EQ_U(q.send_mono, 111);
	CHECK_EQ_U(q.carry_tx_sw, 0); /* a ping carries nothing */
	/* the reply of a carrying reflector */
	q.type = UDP_TYPE_REPLY;
	q.flags = UDP_FLAG_RX_TS | UDP_FLAG_CARRY_TX | UDP_FLAG_CARRY_HW;
	q.carry_tx_sw = 987654321;
	q.carry_hw_resid = 4242;
	udp_pkt_encode(b, &q);
	struct udp_pkt r;
	CHECK_EQ_U(udp_pkt_decode(b, sizeof(b), 5, UDP_TYPE_REPLY, &r), UDP_OK);
	CHECK_EQ_U(r.carry_tx_sw, 987654321);
	CHECK_EQ_U(r.carry_hw_resid, 4242);
	CHECK_EQ_U(b[24], 987654321 & 0xff); /* little-endian at offset 24 */
	CHECK_EQ_U(b[32], 4242 & 0xff);
	/* a reflector that predates carrying echoes offsets 24/32 and sets RX_TS only */
	q.flags = UDP_FLAG_RX_TS;
	udp_pkt_encode(b, &q);
	CHECK_EQ_U(udp_pkt_decode(b, sizeof(b), 5, UDP_TYPE_REPLY, &r), UDP_OK);
	CHECK_EQ_U(r.carry_tx_sw, 0);
	CHECK_EQ_U(r.carry_hw_resid, 0);
	CHECK_EQ_U(r.send_mono, 111);
	CHECK_EQ_U(r.send_rt, 222);
}

/*
 * Both ends over a simulated wire with hardware stamps. One true time line (ns);
 * the pinger's REALTIME = true + 0, its PHC = true + 37 s; the reflector's
 * REALTIME = true + 3 ms (not synchronised), its PHC = true - 2 s. Per exchange:
 * send() -> +A driver (sw TX) -> +B NIC TX (t1) -> +W_OUT wire -> NIC RX (t2) ->
 * +C sw RX -> +D app -> +E send() -> +F sw TX -> +G NIC TX (t3) -> +W_BACK ->
 * NIC RX (t4) -> +H sw RX -> +I app. Every stamp goes through the control
 * message parsers; the reflector's t3 reaches the pinger in the next reply.
 */
enum { A = 3000, B = 700, W_OUT = 1500 + 100, C = 2500, D = 9000, E = 400, F = 3300, G = 800,
       W_BACK = 1500 - 100, H = 2700, I = 11000 };

static void test_simulated_exchange(void)
{
	const int64_t p_phc = 37 * (int64_t)NS_PER_SEC, r_rt = 3 * (int64_t)NS_PER_MS,
		      r_phc = -2 * (int64_t)NS_PER_SEC;
	struct uts_phc_model pm = { .t_ref = 1, .off = p_phc }; /* pinger's PHC - REALTIME */
	struct uts_phc_model rm = { .t_ref = 1, .off = r_phc - r_rt };
	struct uts_ring pr, rr;
	uts_ring_init(&pr, UTS_WANT_SW | UTS_WANT_HW);
	uts_ring_init(&rr, UTS_WANT_SW | UTS_WANT_HW);
	const uint64_t tag = 0x1234;
	unsigned n_wire = 0, n_link = 0, n_ptx = 0, n_tx = 0, n_rhwrx = 0, no_carry = 0;
	for (uint64_t seq = 0; seq < 6; seq++) {
		uint64_t t = 1700000000ULL * NS_PER_SEC + seq * NS_PER_MS; /* true send() time */
		bool ev;
		/* pinger sends */
		struct uts_xchg *px = uts_ring_sent(&pr, seq, t, &ev);
		unsigned char pkt[UDP_HDR_LEN];
		struct udp_pkt ping = { .type = UDP_TYPE_PING, .flags = UDP_FLAG_WANT_CARRY,
					.session = 9, .seq = seq, .send_rt = t };
		udp_pkt_encode(pkt, &ping);
		uint64_t t1 = t + A + B;
		/* the reflector gets it */
		struct cbuf c;
		cb_init(&c);
		uint64_t t2 = t1 + W_OUT;
		cb_stamps(&c, t2 + C + (uint64_t)r_rt, (uint64_t)((int64_t)t2 + r_phc));
		struct uts_stamps rrx;
		uts_rx_parse(&c.mh, &rrx);
		struct udp_pkt in;
		CHECK_EQ_U(udp_pkt_decode(pkt, sizeof(pkt), 9, UDP_TYPE_PING, &in), UDP_OK);
		uint64_t r_app = t2 + C + D + (uint64_t)r_rt, r_send = r_app + E;
		struct udp_pkt rep = in;
		rep.type = UDP_TYPE_REPLY;
		rep.flags = UDP_FLAG_RX_TS;
		rep.r_rx_ts = rrx.sw;
		rep.r_app = r_app;
		rep.r_send = r_send;
		if (in.flags & UDP_FLAG_WANT_CARRY)
			uts_carry(rr.last, in.seq, tag, &rep.flags, &rep.carry_tx_sw,
				  &rep.carry_hw_resid);
		CHECK_EQ_U(!!(rep.flags & UDP_FLAG_CARRY_HW), seq > 0);
		udp_pkt_encode(pkt, &rep);
		struct uts_xchg *rx = uts_ring_sent(&rr, in.seq, r_send, &ev);
		rx->tag = tag;
		rx->have_rx = true;
		rx->rx = rrx;
		/* the reflector's TX stamps come back on its error queue: software, then
		 * (later) hardware */
		uint64_t t3 = r_send - (uint64_t)r_rt + F + G;
		struct uts_txstamp s = stamp(rx->key, r_send + F, 0);
		CHECK(uts_ring_stamp(&rr, &s) == rx);
		s = stamp(rx->key, 0, (uint64_t)((int64_t)t3 + r_phc));
		CHECK(uts_ring_stamp(&rr, &s) == rx);
		struct uts_vals v;
		uts_take(rx, &rm, &v);
		CHECK(v.have & (1u << UTS_V_HW_RX));
		CHECK_EQ_U(v.v[UTS_V_HW_RX], C);
		CHECK_EQ_U(v.v[UTS_V_HW_TX], G);
		CHECK_EQ_U(v.v[UTS_V_TX], F);
		n_rhwrx++;
		/* the pinger: its TX stamps (read after the reply), then the reply */
		uint64_t t4 = t3 + W_BACK, app = t4 + H + I;
		s = stamp(px->key, t + A, 0);
		CHECK(uts_ring_stamp(&pr, &s) == px);
		s = stamp(px->key, 0, (uint64_t)((int64_t)t1 + p_phc));
		CHECK(uts_ring_stamp(&pr, &s) == px);
		cb_init(&c);
		cb_stamps(&c, t4 + H, (uint64_t)((int64_t)t4 + p_phc));
		struct uts_stamps prx;
		uts_rx_parse(&c.mh, &prx);
		struct udp_pkt got;
		CHECK_EQ_U(udp_pkt_decode(pkt, sizeof(pkt), 9, UDP_TYPE_REPLY, &got), UDP_OK);
		/* stack as the probe computes it: rtt - wakeup - peer.wakeup - peer.turn */
		int64_t rtt = (int64_t)(app - t);
		int64_t stack = rtt - (int64_t)(app - prx.sw) - (int64_t)(got.r_app - got.r_rx_ts) -
				(int64_t)(got.r_send - got.r_app);
		CHECK_EQ_U(stack, A + B + W_OUT + C + F + G + W_BACK + H);
		struct uts_xchg *cur, *prev;
		no_carry += uts_ping_reply(&pr, &got, &prx, stack, &cur, &prev);
		CHECK(cur == px);
		CHECK(seq == 0 ? prev == NULL : prev != NULL);
		uts_take(cur, &pm, &v);
		CHECK_EQ_U(v.v[UTS_V_TX], A);
		CHECK_EQ_U(v.v[UTS_V_HW_TX], B);
		CHECK_EQ_U(v.v[UTS_V_HW_RX], H);
		CHECK(!(v.have & (1u << UTS_V_WIRE))); /* t3 comes with the next reply */
		n_tx++;
		if (prev) {
			uts_take(prev, &pm, &v);
			CHECK(v.have & (1u << UTS_V_WIRE));
			CHECK_EQ_U(v.v[UTS_V_WIRE], W_OUT + W_BACK);
			CHECK_EQ_U(v.v[UTS_V_PEER_TX], F);
			CHECK_EQ_U(v.v[UTS_V_LINK], B + W_OUT + C + G + W_BACK + H);
			n_wire++;
			n_link++;
			n_ptx++;
		}
	}
	CHECK_EQ_U(n_wire, 5); /* the last exchange's t3 never travels */
	CHECK_EQ_U(n_link + n_ptx + n_tx + n_rhwrx, 5 + 5 + 6 + 6);
	CHECK_EQ_U(no_carry, 0);
}

static void test_no_carry_from_old_reflector(void)
{
	struct uts_ring pr;
	uts_ring_init(&pr, UTS_WANT_SW);
	bool ev;
	struct uts_xchg *cur, *prev;
	struct uts_stamps rx = { .sw = 5000 };
	for (uint64_t seq = 0; seq < 3; seq++) {
		struct uts_xchg *x = uts_ring_sent(&pr, seq, 1000, &ev);
		struct uts_txstamp s = stamp(x->key, 1200, 0);
		CHECK(uts_ring_stamp(&pr, &s) == x);
		/* an old reflector: RX_TS only, offsets 24/32 echoed */
		struct udp_pkt p = { .type = UDP_TYPE_REPLY, .flags = UDP_FLAG_RX_TS, .seq = seq,
				     .send_mono = 1, .send_rt = 2, .r_send = 3000 };
		bool nc = uts_ping_reply(&pr, &p, &rx, 800, &cur, &prev);
		CHECK_EQ_U(nc, seq > 0);
		struct uts_vals v;
		uts_take(cur, NULL, &v);
		CHECK_EQ_U(v.have, 1u << UTS_V_TX);
		if (prev) {
			uts_take(prev, NULL, &v);
			CHECK_EQ_U(v.have, 0);
		}
	}
	/* a lost reply (seq 3 never answered) means no carry expected for it */
	uts_ring_sent(&pr, 3, 1000, &ev);
	uts_ring_sent(&pr, 4, 1000, &ev);
	struct udp_pkt p = { .type = UDP_TYPE_REPLY, .flags = UDP_FLAG_RX_TS, .seq = 4 };
	CHECK(!uts_ping_reply(&pr, &p, &rx, 800, &cur, &prev));
	CHECK(prev == NULL);
}

/* The decision of uts_setup for NICs this machine does not have. */
static bool decide(struct uts_state *st, const char *ifname, unsigned caps, int phc, int cfg_err,
		   int tx, int rx, bool want)
{
	memset(st, 0, sizeof(*st));
	snprintf(st->ifname, sizeof(st->ifname), "%s", ifname);
	st->hw_cfg_err = cfg_err;
	st->hw_tx_type = tx;
	st->hw_rx_filter = rx;
	return uts_hw_decide(st, caps, phc, want);
}

static void test_hw_decision(void)
{
	struct uts_state st;
	const unsigned sw = SOF_TIMESTAMPING_TX_SOFTWARE | SOF_TIMESTAMPING_RX_SOFTWARE |
			    SOF_TIMESTAMPING_SOFTWARE; /* what veth and lo report */
	const unsigned hw = sw | SOF_TIMESTAMPING_TX_HARDWARE | SOF_TIMESTAMPING_RX_HARDWARE |
			    SOF_TIMESTAMPING_RAW_HARDWARE;
	/* veth: no hardware, no PHC, SIOCGHWTSTAMP not supported */
	CHECK(!decide(&st, "veth0", sw, -1, -EOPNOTSUPP, -1, -1, true));
	CHECK(strstr(st.reason, "veth0 has no hardware timestamping") != NULL);
	CHECK(strstr(st.reason, "RX no, TX no, PHC none") != NULL);
	CHECK(!st.hw_rx_capable && !st.hw_tx_capable);
	/* RX only (some PHYs) */
	CHECK(!decide(&st, "eth0", sw | SOF_TIMESTAMPING_RX_HARDWARE | SOF_TIMESTAMPING_RAW_HARDWARE,
		      0, 0, HWTSTAMP_TX_ON, HWTSTAMP_FILTER_ALL, true));
	CHECK(strstr(st.reason, "RX yes, TX no") != NULL);
	/* capable, but the driver cannot report its configuration */
	CHECK(!decide(&st, "eth0", hw, 2, -EOPNOTSUPP, -1, -1, true));
	CHECK(strstr(st.reason, "SIOCGHWTSTAMP") != NULL);
	/* capable, not enabled (the default) */
	CHECK(!decide(&st, "eth0", hw, 2, 0, HWTSTAMP_TX_OFF, HWTSTAMP_FILTER_NONE, true));
	CHECK(strstr(st.reason, "set to tx off, rx_filter none") != NULL);
	CHECK(strstr(st.reason, "hwtstamp") != NULL);
	CHECK_EQ_U(st.phc_index, 2);
	/* enabled by ptp4l for PTP only: our UDP packets would get no RX stamp */
	CHECK(!decide(&st, "eth0", hw, 2, 0, HWTSTAMP_TX_ON, HWTSTAMP_FILTER_PTP_V2_EVENT, true));
	CHECK(strstr(st.reason, "rx_filter ptp_v2_event") != NULL);
	/* enabled: used when wanted, reported when not */
	CHECK(decide(&st, "eth0", hw, 2, 0, HWTSTAMP_TX_ON, HWTSTAMP_FILTER_ALL, true));
	CHECK(st.hw_rx_capable && st.hw_tx_capable);
	CHECK(!decide(&st, "eth0", hw, 2, 0, HWTSTAMP_TX_ON, HWTSTAMP_FILTER_ALL, false));
	CHECK(strstr(st.reason, "--timestamps hardware or auto would use it") != NULL);
}

int main(void)
{
	test_rx_parse();
	test_err_parse();
	test_ring_matching();
	test_ring_resync();
	test_take();
	test_phc_model();
	test_phc_refresh();
	test_carry_decision();
	test_wire_carry_fields();
	test_simulated_exchange();
	test_no_carry_from_old_reflector();
	test_hw_decision();
	return tap_done("udp_ts");
}
