/* SPDX-License-Identifier: MIT */
/*
 * Kernel packet timestamps of the udp probe (udp_ts.h), on the socket: deciding and
 * enabling software or hardware stamping, reading TX stamps off the error queue,
 * and what took effect, for the header. The pure parts: udp_ts.c.
 */
#include "udp_ts.h"

#include <errno.h>
#include <ifaddrs.h>
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
