/* SPDX-License-Identifier: MIT */
/* Kernel packet timestamps of the udp probe (udp_ts.h): control messages, the PHC
 * clock model, the exchanges they complete; the socket side: udp_ts_socket.c. */
#include "udp_ts.h"

#include <errno.h>
#include <linux/errqueue.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "phc.h"
#include "udp_proto.h"

const char *const uts_kind_names[] = { "software", "software-rx", "hardware", "auto", "none",
				       NULL };
const char *const uts_eff_names[] = { "none", "software", "hardware", NULL };

/* ---- control messages --------------------------------------------------- */

static uint64_t ts_ns(const struct timespec *t)
{
	if (t->tv_sec < 0 || (t->tv_sec == 0 && t->tv_nsec == 0))
		return 0;
	return (uint64_t)t->tv_sec * NS_PER_SEC + (uint64_t)t->tv_nsec;
}

/* SCM_TIMESTAMPING: three struct timespec, [0] software, [1] legacy, [2] hardware */
static bool scm_stamps(struct cmsghdr *cm, struct uts_stamps *out)
{
	if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SO_TIMESTAMPING ||
	    cm->cmsg_len < CMSG_LEN(sizeof(struct timespec)))
		return false;
	struct timespec ts[3];
	memset(ts, 0, sizeof(ts));
	size_t n = cm->cmsg_len - CMSG_LEN(0);
	memcpy(ts, CMSG_DATA(cm), n < sizeof(ts) ? n : sizeof(ts));
	out->sw = ts_ns(&ts[0]);
	out->hw = n >= sizeof(ts) ? ts_ns(&ts[2]) : 0;
	return true;
}

void uts_rx_parse(struct msghdr *mh, struct uts_stamps *out)
{
	out->sw = out->hw = 0;
	if (!mh->msg_controllen)
		return;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm))
		if (scm_stamps(cm, out))
			return;
}

int uts_err_parse(struct msghdr *mh, struct uts_txstamp *out)
{
	bool have_ts = false, have_ee = false;
	memset(out, 0, sizeof(*out));
	if (!mh->msg_controllen)
		return 0;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm)) {
		if (scm_stamps(cm, &out->ts)) {
			have_ts = true;
			continue;
		}
		bool recverr = (cm->cmsg_level == SOL_IP && cm->cmsg_type == IP_RECVERR) ||
			       (cm->cmsg_level == SOL_IPV6 && cm->cmsg_type == IPV6_RECVERR);
		if (!recverr || cm->cmsg_len < CMSG_LEN(sizeof(struct sock_extended_err)))
			continue;
		struct sock_extended_err ee;
		memcpy(&ee, CMSG_DATA(cm), sizeof(ee));
		if (ee.ee_errno != ENOMSG || ee.ee_origin != SO_EE_ORIGIN_TIMESTAMPING ||
		    ee.ee_info != SCM_TSTAMP_SND)
			return 0;
		out->key = ee.ee_data;
		have_ee = true;
	}
	return have_ts && have_ee && (out->ts.sw || out->ts.hw);
}

/* ---- PHC -> CLOCK_REALTIME ---------------------------------------------- */

/* How much the offset changed from t_ref to REALTIME t (double: no overflow on 32-bit
 * targets either; |rate| <= UTS_MAX_RATE_PPB). */
#define UTS_MAX_RATE_PPB 1000000 /* 1000 ppm: more is a stepped clock, not a rate */

static int64_t drift(const struct uts_phc_model *m, uint64_t t)
{
	double dt = t >= m->t_ref ? (double)(t - m->t_ref) : -(double)(m->t_ref - t);
	return (int64_t)(dt * (double)m->rate_ppb / 1e9);
}

uint64_t uts_phc_to_rt(const struct uts_phc_model *m, uint64_t t_phc)
{
	if (!t_phc)
		return 0;
	int64_t off = m->off;
	if (m->rate_ppb) {
		uint64_t approx = clk_convert(t_phc, off);
		off += drift(m, approx);
	}
	return clk_convert(t_phc, off);
}

static uint64_t absdiff(int64_t a, int64_t b)
{
	return a > b ? (uint64_t)(a - b) : (uint64_t)(b - a);
}

void uts_phc_update(struct uts_phc_model *m, uint64_t t, int64_t off, uint64_t unc,
		    uint64_t *pred_err)
{
	*pred_err = 0;
	if (m->t_ref && t > m->t_ref) {
		if (m->n >= 2) /* from the 3rd measurement on, the model has a rate */
			*pred_err = absdiff(m->off + drift(m, t), off);
		double rate = (double)(off - m->off) * 1e9 / (double)(t - m->t_ref);
		m->rate_ppb = rate > UTS_MAX_RATE_PPB || rate < -UTS_MAX_RATE_PPB ? 0 : (int64_t)rate;
	}
	m->t_ref = t;
	m->off = off;
	m->unc = unc;
	m->n++;
}

int uts_phc_refresh(struct uts_phc *p, uint64_t now_rt)
{
	int64_t off;
	uint64_t unc, pred;
	const char *method = NULL;
	int e = p->measure(p->arg, &off, &unc, &method);
	if (e) {
		atomic_fetch_add_explicit(&p->errors, 1, memory_order_relaxed);
		return e;
	}
	if (method && !p->method) /* set once, before the reporter reads it */
		p->method = method;
	uts_phc_update(&p->model, now_rt, off, unc, &pred);
	unsigned s = atomic_load_explicit(&p->seq, memory_order_relaxed);
	atomic_store_explicit(&p->seq, s + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	atomic_store_explicit(&p->t_ref, p->model.t_ref, memory_order_relaxed);
	atomic_store_explicit(&p->off, (uint64_t)p->model.off, memory_order_relaxed);
	atomic_store_explicit(&p->rate_ppb, (uint64_t)p->model.rate_ppb, memory_order_relaxed);
	atomic_store_explicit(&p->unc, unc, memory_order_relaxed);
	atomic_store_explicit(&p->seq, s + 2, memory_order_release);
	uint64_t n = atomic_load_explicit(&p->n, memory_order_relaxed);
	if (!n)
		atomic_store_explicit(&p->first_off, (uint64_t)off, memory_order_relaxed);
	atomic_store_explicit(&p->n, n + 1, memory_order_relaxed);
	if (unc > atomic_load_explicit(&p->max_unc, memory_order_relaxed))
		atomic_store_explicit(&p->max_unc, unc, memory_order_relaxed);
	if (pred > atomic_load_explicit(&p->max_pred_err, memory_order_relaxed))
		atomic_store_explicit(&p->max_pred_err, pred, memory_order_relaxed);
	return 0;
}

bool uts_phc_read(const struct uts_phc *p, struct uts_phc_model *m)
{
	for (;;) {
		unsigned s1 = atomic_load_explicit(&p->seq, memory_order_acquire);
		if (s1 & 1)
			continue;
		m->t_ref = atomic_load_explicit(&p->t_ref, memory_order_relaxed);
		m->off = (int64_t)atomic_load_explicit(&p->off, memory_order_relaxed);
		m->rate_ppb = (int64_t)atomic_load_explicit(&p->rate_ppb, memory_order_relaxed);
		m->unc = atomic_load_explicit(&p->unc, memory_order_relaxed);
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&p->seq, memory_order_relaxed) == s1)
			return m->t_ref != 0;
	}
}

/* ---- exchanges ------------------------------------------------------------ */

static int64_t sdiff(uint64_t a, uint64_t b)
{
	return (int64_t)(a - b);
}

void uts_take(struct uts_xchg *x, const struct uts_phc_model *m, struct uts_vals *o)
{
	int64_t v[UTS_V_N];
	unsigned can = 0;
	const bool conv = m && m->t_ref;
	if (x->tx.sw && x->send_rt) {
		v[UTS_V_TX] = sdiff(x->tx.sw, x->send_rt);
		can |= 1u << UTS_V_TX;
	}
	if (conv && x->tx.hw && x->tx.sw) {
		v[UTS_V_HW_TX] = sdiff(uts_phc_to_rt(m, x->tx.hw), x->tx.sw);
		can |= 1u << UTS_V_HW_TX;
	}
	if (conv && x->have_rx && x->rx.hw && x->rx.sw) {
		v[UTS_V_HW_RX] = sdiff(x->rx.sw, uts_phc_to_rt(m, x->rx.hw));
		can |= 1u << UTS_V_HW_RX;
	}
	if (x->have_rx && x->have_carry_tx && x->peer_send) {
		v[UTS_V_PEER_TX] = sdiff(x->peer_tx_sw, x->peer_send);
		can |= 1u << UTS_V_PEER_TX;
		if (x->stack != UTS_NO_STACK && (can & (1u << UTS_V_TX))) {
			v[UTS_V_LINK] = x->stack - v[UTS_V_TX] - v[UTS_V_PEER_TX];
			can |= 1u << UTS_V_LINK;
		}
	}
	if (x->have_rx && x->have_carry_hw && x->tx.hw && x->rx.hw) {
		v[UTS_V_WIRE] = sdiff(x->rx.hw, x->tx.hw) - (int64_t)x->peer_resid;
		can |= 1u << UTS_V_WIRE;
	}
	o->have = can & ~x->taken;
	x->taken |= can;
	for (int i = 0; i < UTS_V_N; i++)
		o->v[i] = o->have & (1u << i) ? v[i] : 0;
}

void uts_ring_init(struct uts_ring *r, unsigned want)
{
	memset(r, 0, sizeof(*r));
	r->want = want;
}

struct uts_xchg *uts_ring_sent(struct uts_ring *r, uint64_t seq, uint64_t send_rt,
			       bool *evicted_incomplete)
{
	struct uts_xchg *x = &r->slot[r->next_key % UTS_SLOTS];
	*evicted_incomplete = x->used && !uts_tx_complete(r, x);
	memset(x, 0, sizeof(*x));
	x->used = true;
	x->key = r->next_key++;
	x->seq = seq;
	x->send_rt = send_rt;
	x->stack = UTS_NO_STACK;
	r->last = x;
	return x;
}

void uts_ring_send_failed(struct uts_ring *r)
{
	r->uncertain++;
}

struct uts_xchg *uts_ring_stamp(struct uts_ring *r, const struct uts_txstamp *s)
{
	struct uts_xchg *x = &r->slot[s->key % UTS_SLOTS];
	if (!(x->used && x->key == s->key)) {
		/* after failed sends the kernel may have counted keys we did not: a stamp
		 * up to `uncertain` keys beyond the latest send belongs to that send */
		struct uts_xchg *l = r->last;
		uint32_t ahead = l ? s->key - l->key : 0;
		if (!l || !r->uncertain || ahead == 0 || ahead > r->uncertain)
			return NULL;
		struct uts_xchg moved = *l;
		memset(l, 0, sizeof(*l));
		moved.key = s->key;
		x = &r->slot[s->key % UTS_SLOTS];
		*x = moved;
		r->next_key = s->key + 1;
		r->last = x;
	}
	if (x == r->last)
		r->uncertain = 0;
	if (s->ts.sw)
		x->tx.sw = s->ts.sw;
	if (s->ts.hw)
		x->tx.hw = s->ts.hw;
	return x;
}

struct uts_xchg *uts_ring_find(struct uts_ring *r, uint64_t seq)
{
	struct uts_xchg *best = NULL;
	for (unsigned i = 0; i < UTS_SLOTS; i++) {
		struct uts_xchg *x = &r->slot[i];
		if (!x->used || x->seq != seq)
			continue;
		if (!best || (uint32_t)(r->next_key - x->key) < (uint32_t)(r->next_key - best->key))
			best = x;
	}
	return best;
}

bool uts_tx_complete(const struct uts_ring *r, const struct uts_xchg *x)
{
	if ((r->want & UTS_WANT_SW) && !x->tx.sw)
		return false;
	if ((r->want & UTS_WANT_HW) && !x->tx.hw)
		return false;
	return true;
}

void uts_carry(const struct uts_xchg *last, uint64_t seq, uint64_t tag, uint16_t *flags,
	       uint64_t *tx_sw, uint64_t *hw_resid)
{
	*tx_sw = *hw_resid = 0;
	*flags &= (uint16_t)~(UDP_FLAG_CARRY_TX | UDP_FLAG_CARRY_HW);
	if (!last || !last->used || last->tag != tag || last->seq + 1 != seq)
		return;
	if (last->tx.sw) {
		*flags |= UDP_FLAG_CARRY_TX;
		*tx_sw = last->tx.sw;
	}
	if (last->tx.hw && last->have_rx && last->rx.hw && last->tx.hw >= last->rx.hw) {
		*flags |= UDP_FLAG_CARRY_HW;
		*hw_resid = last->tx.hw - last->rx.hw;
	}
}

bool uts_ping_reply(struct uts_ring *r, const struct udp_pkt *p, const struct uts_stamps *rx,
		    int64_t stack, struct uts_xchg **cur, struct uts_xchg **prev)
{
	struct uts_xchg *x = uts_ring_find(r, p->seq);
	if (x) {
		x->have_rx = true;
		x->rx = *rx;
		x->peer_send = p->r_send;
		x->stack = stack;
	}
	*cur = x;
	struct uts_xchg *q = p->seq ? uts_ring_find(r, p->seq - 1) : NULL;
	*prev = NULL;
	if (!q || !q->have_rx)
		return false; /* no reply of seq-1 here: nothing to complete */
	*prev = q;
	if (p->flags & UDP_FLAG_CARRY_HW) {
		q->have_carry_hw = true;
		q->peer_resid = p->carry_hw_resid;
	}
	if (!(p->flags & UDP_FLAG_CARRY_TX))
		return true;
	q->have_carry_tx = true;
	q->peer_tx_sw = p->carry_tx_sw;
	return false;
}
