/* SPDX-License-Identifier: MIT */
/* Kernel packet timestamps of the udp probe (udp_ts.h). */
#include "udp_ts.h"

#include <errno.h>
#include <ifaddrs.h>
#include <linux/errqueue.h>
#include <linux/ethtool.h>
#include <linux/net_tstamp.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "jsonw.h"
#include "phc.h"
#include "sys_hwts.h"
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

/* ---- the socket ----------------------------------------------------------- */

static bool same_ip(const struct sockaddr *a, const struct sockaddr *b)
{
	if (a->sa_family != b->sa_family)
		return false;
	if (a->sa_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
		      &((const struct sockaddr_in6 *)b)->sin6_addr, sizeof(struct in6_addr)) == 0;
}

static int phc_fd_measure(void *arg, int64_t *off, uint64_t *unc, const char **method)
{
	return phc_measure(*(const int *)arg, off, unc, method);
}

bool uts_hw_decide(struct uts_state *st, unsigned caps, int phc_index, bool want)
{
	st->hw_rx_capable = caps & SOF_TIMESTAMPING_RX_HARDWARE;
	st->hw_tx_capable = caps & SOF_TIMESTAMPING_TX_HARDWARE;
	st->phc_index = phc_index;
	if (!st->hw_rx_capable || !st->hw_tx_capable || phc_index < 0 ||
	    !(caps & SOF_TIMESTAMPING_RAW_HARDWARE)) {
		snprintf(st->reason, sizeof(st->reason),
			 "%s has no hardware timestamping (ETHTOOL_GET_TS_INFO: hardware RX %s, TX %s, PHC %s)",
			 st->ifname, st->hw_rx_capable ? "yes" : "no",
			 st->hw_tx_capable ? "yes" : "no", phc_index >= 0 ? "yes" : "none");
		return false;
	}
	if (st->hw_cfg_err) {
		snprintf(st->reason, sizeof(st->reason),
			 "%s: cannot read its hardware timestamping configuration (SIOCGHWTSTAMP: %s)",
			 st->ifname, strerror(-st->hw_cfg_err));
		return false;
	}
	if (st->hw_tx_type != HWTSTAMP_TX_ON || st->hw_rx_filter != HWTSTAMP_FILTER_ALL) {
		const char *tx = hwts_tx_name(st->hw_tx_type), *rx = hwts_rx_name(st->hw_rx_filter);
		snprintf(st->reason, sizeof(st->reason),
			 "%s can timestamp in hardware (PHC %d) but is set to tx %s, rx_filter %s; it needs tx on, rx_filter all: the journaled `hwtstamp` operation of `rtlab-probe sys apply` (rtlab run does it for timestamps = \"hardware\")",
			 st->ifname, phc_index, tx ? tx : "?", rx ? rx : "?");
		return false;
	}
	if (!want) {
		snprintf(st->reason, sizeof(st->reason),
			 "%s has hardware timestamping enabled (PHC %d); --timestamps hardware or auto would use it",
			 st->ifname, phc_index);
		return false;
	}
	return true;
}

/* The interface of `local` and what it can do; st->reason: why it cannot do hardware.
 * The PHC is opened and measured only when hardware stamps are wanted. */
static bool hw_usable(struct uts_state *st, int fd, const struct sockaddr *local, bool want)
{
	struct ifaddrs *ifa = NULL;
	if (getifaddrs(&ifa) != 0) {
		snprintf(st->reason, sizeof(st->reason), "getifaddrs: %s", strerror(errno));
		return false;
	}
	for (struct ifaddrs *i = ifa; i; i = i->ifa_next)
		if (i->ifa_addr && same_ip(i->ifa_addr, local)) {
			snprintf(st->ifname, sizeof(st->ifname), "%s", i->ifa_name);
			break;
		}
	freeifaddrs(ifa);
	if (!st->ifname[0]) {
		snprintf(st->reason, sizeof(st->reason), "no interface carries the local address");
		return false;
	}
	struct ethtool_ts_info info = { .cmd = ETHTOOL_GET_TS_INFO };
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", st->ifname);
	ifr.ifr_data = (char *)&info;
	if (ioctl(fd, SIOCETHTOOL, &ifr) != 0) {
		snprintf(st->reason, sizeof(st->reason), "%s: ETHTOOL_GET_TS_INFO: %s", st->ifname,
			 strerror(errno));
		return false;
	}
	struct hwtstamp_config cfg;
	st->hw_cfg_err = hwts_get(st->ifname, &cfg);
	if (!st->hw_cfg_err) {
		st->hw_tx_type = cfg.tx_type;
		st->hw_rx_filter = cfg.rx_filter;
	}
	if (!uts_hw_decide(st, info.so_timestamping, info.phc_index, want))
		return false;
	int pfd = phc_open(st->phc_index);
	if (pfd < 0) {
		snprintf(st->reason, sizeof(st->reason), "/dev/ptp%d (PHC of %s): %s",
			 st->phc_index, st->ifname, strerror(-pfd));
		return false;
	}
	st->phc.fd = pfd;
	st->phc.index = st->phc_index;
	st->phc.measure = phc_fd_measure;
	st->phc.arg = &st->phc.fd;
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	int e = uts_phc_refresh(&st->phc, rl_ts_to_ns(&now));
	if (e) {
		snprintf(st->reason, sizeof(st->reason),
			 "/dev/ptp%d (PHC of %s): cannot measure its offset to CLOCK_REALTIME: %s",
			 st->phc_index, st->ifname, strerror(-e));
		return false;
	}
	return true;
}

/*
 * Software RX stamps are taken only while the kernel's netstamp static key is on. The
 * first SO_TIMESTAMPING socket of a machine turns it on through deferred work
 * (net_enable_timestamp -> netstamp_work, run by a kworker): until that work has
 * run, datagrams arrive without a stamp. Under load (a CPU hog; an RT thread of
 * ours not yet sleeping) that took long enough for a run's first replies to miss
 * their split. So before the socket is reported ready, wait (bounded, sleeping so the
 * kworker can run) until a datagram sent to ourselves on the same local address is
 * stamped. Best effort: whatever fails here leaves the run as it was (replies without
 * a stamp are counted, never guessed).
 */
#define UTS_SW_WAIT_TRIES 1000 /* x ~2 ms: past a 1 s RT throttling period */
static void wait_sw_rx_effective(const struct sockaddr *local)
{
	if (!local || (local->sa_family != AF_INET && local->sa_family != AF_INET6))
		return;
	socklen_t al = local->sa_family == AF_INET ? sizeof(struct sockaddr_in)
						   : sizeof(struct sockaddr_in6);
	struct sockaddr_storage a;
	memset(&a, 0, sizeof(a));
	memcpy(&a, local, al);
	if (a.ss_family == AF_INET)
		((struct sockaddr_in *)&a)->sin_port = 0;
	else
		((struct sockaddr_in6 *)&a)->sin6_port = 0;
	int fd = socket(a.ss_family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return;
	int f = SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE;
	if (bind(fd, (struct sockaddr *)&a, al) != 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPING, &f, sizeof(f)) != 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &al) != 0) {
		close(fd);
		return;
	}
	const struct timespec pause = { 0, 2 * 1000 * 1000 };
	for (int i = 0; i < UTS_SW_WAIT_TRIES; i++) {
		if (sendto(fd, "t", 1, 0, (struct sockaddr *)&a, al) != 1)
			break;
		for (;;) { /* every datagram queued so far (one per try, or none yet) */
			char b[8], ctrl[256];
			struct iovec io = { .iov_base = b, .iov_len = sizeof(b) };
			struct msghdr mh;
			memset(&mh, 0, sizeof(mh));
			mh.msg_iov = &io;
			mh.msg_iovlen = 1;
			mh.msg_control = ctrl;
			mh.msg_controllen = sizeof(ctrl);
			if (recvmsg(fd, &mh, 0) < 0)
				break;
			struct uts_stamps got;
			uts_rx_parse(&mh, &got);
			if (got.sw) {
				close(fd);
				return;
			}
		}
		nanosleep(&pause, NULL);
	}
	close(fd);
}

int uts_setup(struct uts_state *st, int fd, int kind, const struct sockaddr *local,
	      char *err, size_t errlen)
{
	memset(st, 0, sizeof(*st));
	st->kind = kind;
	st->phc_index = -1;
	st->phc.fd = -1;
	st->hw_tx_type = st->hw_rx_filter = -1;
	st->hw_cfg_err = -ENODATA; /* not read (yet) */
	const bool want = kind == UTS_HARDWARE || kind == UTS_AUTO;
	bool hw = local && hw_usable(st, fd, local, want);
	if (!local)
		snprintf(st->reason, sizeof(st->reason), "the socket has no local address yet");
	if (kind == UTS_HARDWARE && !hw) {
		snprintf(err, errlen,
			 "--timestamps hardware: %s; use --timestamps software (or auto: hardware where the interface has it, else software)",
			 st->reason);
		uts_close(st);
		return -EOPNOTSUPP;
	}
	if (!hw)
		uts_close(st); /* a PHC opened but then not usable */
	if (kind == UTS_NONE)
		return 0;
	unsigned f = SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE;
	if (kind != UTS_SOFTWARE_RX)
		f |= SOF_TIMESTAMPING_TX_SOFTWARE | SOF_TIMESTAMPING_OPT_ID |
		     SOF_TIMESTAMPING_OPT_TSONLY;
	if (hw)
		f |= SOF_TIMESTAMPING_RX_HARDWARE | SOF_TIMESTAMPING_TX_HARDWARE |
		     SOF_TIMESTAMPING_RAW_HARDWARE | SOF_TIMESTAMPING_OPT_TX_SWHW;
	int fi = (int)f;
	if (setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPING, &fi, sizeof(fi)) != 0) {
		st->so_err = -errno;
		if (hw) /* the stamps this asks for are the point: say so */ {
			snprintf(err, errlen, "--timestamps %s: SO_TIMESTAMPING 0x%x: %s",
				 uts_kind_names[kind], f, strerror(-st->so_err));
			return -EOPNOTSUPP;
		}
		/* an old kernel without TX stamp options: RX only */
		fi = SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE;
		if (kind == UTS_SOFTWARE_RX ||
		    setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPING, &fi, sizeof(fi)) != 0)
			return 0;
		f = (unsigned)fi;
	}
	st->so_flags = f;
	wait_sw_rx_effective(local);
	st->rx = hw ? UTS_EFF_HARDWARE : UTS_EFF_SOFTWARE;
	st->tx = !(f & SOF_TIMESTAMPING_TX_SOFTWARE) ? UTS_EFF_NONE
		 : hw				      ? UTS_EFF_HARDWARE
						      : UTS_EFF_SOFTWARE;
	uts_ring_init(&st->ring, st->tx == UTS_EFF_NONE	      ? 0
				 : st->tx == UTS_EFF_HARDWARE ? UTS_WANT_SW | UTS_WANT_HW
							      : UTS_WANT_SW);
	return 0;
}

void uts_close(struct uts_state *st)
{
	if (st->phc.fd >= 0)
		close(st->phc.fd);
	st->phc.fd = -1;
}

int uts_drain(struct uts_state *st, int fd, bool all, struct uts_drain *d)
{
	memset(d, 0, sizeof(*d));
	for (unsigned i = 0; i < UTS_DRAIN_MAX; i++) {
		if (!all && st->ring.last && uts_tx_complete(&st->ring, st->ring.last))
			break;
		char ctrl[256];
		struct msghdr mh;
		memset(&mh, 0, sizeof(mh));
		mh.msg_control = ctrl;
		mh.msg_controllen = sizeof(ctrl);
		if (recvmsg(fd, &mh, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
				return 0;
			return -errno;
		}
		struct uts_txstamp s;
		if (!uts_err_parse(&mh, &s))
			continue;
		struct uts_xchg *x = uts_ring_stamp(&st->ring, &s);
		if (!x) {
			d->unmatched++;
			continue;
		}
		d->matched++;
		if (d->n_upd < sizeof(d->upd) / sizeof(d->upd[0]))
			d->upd[d->n_upd++] = x;
	}
	return 0;
}

/* ---- output --------------------------------------------------------------- */

void uts_write_phc(struct jsonw *w, const struct uts_phc *p, const char *key)
{
	struct uts_phc_model m;
	bool have = uts_phc_read(p, &m);
	jw_obj_begin(w, key);
	jw_strf(w, "device", "/dev/ptp%d", p->index);
	jw_str_or_null(w, "method", p->method);
	jw_uint(w, "measurements", atomic_load_explicit(&p->n, memory_order_relaxed));
	jw_uint(w, "errors", atomic_load_explicit(&p->errors, memory_order_relaxed));
	if (have) {
		jw_int(w, "offset_ns", m.off);
		jw_int(w, "rate_ppb", m.rate_ppb);
		jw_uint(w, "uncertainty_ns", m.unc);
	} else {
		jw_null(w, "offset_ns");
		jw_null(w, "rate_ppb");
		jw_null(w, "uncertainty_ns");
	}
	jw_uint(w, "max_uncertainty_ns", atomic_load_explicit(&p->max_unc, memory_order_relaxed));
	jw_uint(w, "max_prediction_error_ns",
		atomic_load_explicit(&p->max_pred_err, memory_order_relaxed));
	jw_obj_end(w);
}

void uts_write_effective(struct jsonw *w, const struct uts_state *st, const char *rx_kind)
{
	jw_str_or_null(w, "interface", st->ifname[0] ? st->ifname : NULL);
	jw_str(w, "rx_timestamps", rx_kind ? rx_kind : uts_eff_names[st->rx]);
	jw_str(w, "tx_timestamps", uts_eff_names[st->tx]);
	jw_str_or_null(w, "timestamp_error", st->so_err ? strerror(-st->so_err) : NULL);
	jw_bool(w, "hw_rx_capable", st->hw_rx_capable);
	jw_bool(w, "hw_tx_capable", st->hw_tx_capable);
	jw_int_or_null(w, "phc_index", st->phc_index);
	if (st->ifname[0] && !st->hw_cfg_err) {
		const char *tx = hwts_tx_name(st->hw_tx_type), *rx = hwts_rx_name(st->hw_rx_filter);
		jw_obj_begin(w, "hw_config");
		jw_str_or_null(w, "tx", tx);
		jw_str_or_null(w, "rx_filter", rx);
		jw_obj_end(w);
	} else {
		jw_null(w, "hw_config");
	}
	jw_str_or_null(w, "hw_reason", st->reason[0] ? st->reason : NULL);
	if (st->phc.fd >= 0)
		uts_write_phc(w, &st->phc, "phc");
	else
		jw_null(w, "phc");
}
