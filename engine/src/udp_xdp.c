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
 */
#include "udp_xdp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <linux/bpf.h>
#include <linux/ethtool.h>
#include <linux/if_link.h>
#include <linux/if_xdp.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "udp_proto.h"
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
static const char *const xc_names[XC_N] = {
	"frames", "bad_frames", "not_for_us", "not_unicast", "no_stamp", "tx_busy",
	"tx_dropped", "tx_deferred", "kick_errors",
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

static long sys_bpf(int cmd, union bpf_attr *attr)
{
	return syscall(__NR_bpf, cmd, attr, sizeof(*attr));
}

static void fmt_mac(const uint8_t *m, char *buf, size_t len)
{
	snprintf(buf, len, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
}

static void fmt_ip(uint32_t ip, char *buf, size_t len)
{
	struct in_addr a = { .s_addr = ip };
	if (!inet_ntop(AF_INET, &a, buf, (socklen_t)len))
		snprintf(buf, len, "?");
}

/* ---- set-up steps ----------------------------------------------------------- */

struct oops {
	char *err;
	size_t len;
	int *code;
};

/* Record a failure: message, exit code; returns -e for `return fail(...)`. */
static int fail(const struct oops *o, int e, int code, const char *fmt, ...) RL_PRINTF(4, 5);
static int fail(const struct oops *o, int e, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(o->err, o->len, fmt, ap);
	va_end(ap);
	*o->code = code;
	return -e;
}

/* The usual reason of an EPERM from the set-up: which capability is missing. */
static int priv_fail(const struct oops *o, int e, const char *what, const char *caps)
{
	if (e == EPERM || e == EACCES)
		return fail(o, e, RL_EXIT_SKIPPED, "--path xdp: %s: %s (run as root or grant %s)",
			    what, strerror(e), caps);
	return fail(o, e, RL_EXIT_ERROR, "--path xdp: %s: %s", what, strerror(e));
}

/* The route to the peer: output interface and next hop. */
static int route_to(uint32_t dst, int *oif, uint32_t *next_hop, const struct oops *o)
{
	char dst_s[INET_ADDRSTRLEN];
	fmt_ip(dst, dst_s, sizeof(dst_s));
	int nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (nl < 0)
		return fail(o, errno, RL_EXIT_ERROR, "--path xdp: netlink socket: %s", strerror(errno));
	struct {
		struct nlmsghdr nh;
		struct rtmsg rt;
		struct rtattr dst_a;
		uint32_t dst;
	} req;
	memset(&req, 0, sizeof(req));
	req.nh.nlmsg_len = sizeof(req);
	req.nh.nlmsg_type = RTM_GETROUTE;
	req.nh.nlmsg_flags = NLM_F_REQUEST;
	req.nh.nlmsg_seq = 1;
	req.rt.rtm_family = AF_INET;
	req.rt.rtm_dst_len = 32;
	req.dst_a.rta_type = RTA_DST;
	req.dst_a.rta_len = RTA_LENGTH(4);
	req.dst = dst;
	_Alignas(struct nlmsghdr) unsigned char buf[4096];
	ssize_t n = -1;
	if (send(nl, &req, sizeof(req), 0) == (ssize_t)sizeof(req))
		n = recv(nl, buf, sizeof(buf), 0);
	int e = n < 0 ? errno : 0;
	close(nl);
	if (n < 0)
		return fail(o, e, RL_EXIT_ERROR, "--path xdp: route to %s: %s", dst_s, strerror(e));
	unsigned type = 0;
	uint32_t gw = 0;
	int r = uxf_parse_route(buf, (size_t)n, oif, &gw, &type);
	if (r)
		return fail(o, -r, RL_EXIT_ERROR, "--path xdp: no route to %s: %s", dst_s,
			    strerror(-r));
	if (type == RTN_LOCAL)
		return fail(o, EINVAL, RL_EXIT_USAGE,
			    "--peer %s: a local address; --path xdp needs the peer behind a network interface (use --path socket)",
			    dst_s);
	if (type != RTN_UNICAST || !*oif)
		return fail(o, EHOSTUNREACH, RL_EXIT_ERROR,
			    "--path xdp: no unicast route to %s (route type %u)", dst_s, type);
	*next_hop = gw ? gw : dst;
	return 0;
}

/* The interface that carries a local address. */
static int iface_of(uint32_t ip, char *name, const struct oops *o)
{
	struct ifaddrs *ifa = NULL;
	if (getifaddrs(&ifa) != 0)
		return fail(o, errno, RL_EXIT_ERROR, "--path xdp: getifaddrs: %s", strerror(errno));
	name[0] = '\0';
	for (struct ifaddrs *i = ifa; i; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
		    ((const struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr == ip) {
			snprintf(name, IF_NAMESIZE, "%s", i->ifa_name);
			break;
		}
	freeifaddrs(ifa);
	if (!name[0]) {
		char s[INET_ADDRSTRLEN];
		fmt_ip(ip, s, sizeof(s));
		return fail(o, ENODEV, RL_EXIT_USAGE,
			    "--path xdp: no interface carries %s; give it with --ifname", s);
	}
	return 0;
}

/* Index, MAC, MTU and RX queues of x->ifname. */
static int iface_facts(struct uxdp *x, const struct oops *o)
{
	x->ifindex = (int)if_nametoindex(x->ifname);
	if (!x->ifindex)
		return fail(o, ENODEV, RL_EXIT_USAGE,
			    "--ifname %s: no such interface in this network namespace (ip link)",
			    x->ifname);
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", x->ifname);
	if (ioctl(x->udp, SIOCGIFHWADDR, &ifr) != 0)
		return fail(o, errno, RL_EXIT_ERROR, "--path xdp: %s: SIOCGIFHWADDR: %s", x->ifname,
			    strerror(errno));
	if (ifr.ifr_hwaddr.sa_family != ARPHRD_ETHER)
		return fail(o, EINVAL, RL_EXIT_USAGE,
			    "--path xdp: %s is not an Ethernet interface (link type %u); the xdp path builds Ethernet frames (use --path socket)",
			    x->ifname, ifr.ifr_hwaddr.sa_family);
	memcpy(x->local.mac, ifr.ifr_hwaddr.sa_data, 6);
	if (ioctl(x->udp, SIOCGIFMTU, &ifr) != 0)
		return fail(o, errno, RL_EXIT_ERROR, "--path xdp: %s: SIOCGIFMTU: %s", x->ifname,
			    strerror(errno));
	x->mtu = ifr.ifr_mtu;
	struct ethtool_channels ch = { .cmd = ETHTOOL_GCHANNELS };
	ifr.ifr_data = (char *)&ch;
	x->rx_queues = ioctl(x->udp, SIOCETHTOOL, &ifr) == 0 ? (int)(ch.rx_count + ch.combined_count)
							      : -1;
	return 0;
}

static bool neigh_mac(int fd, uint32_t ip, const char *ifname, uint8_t *mac)
{
	struct arpreq req;
	memset(&req, 0, sizeof(req));
	struct sockaddr_in *sin = (struct sockaddr_in *)&req.arp_pa;
	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = ip;
	snprintf(req.arp_dev, sizeof(req.arp_dev), "%s", ifname);
	if (ioctl(fd, SIOCGARP, &req) != 0 || !(req.arp_flags & ATF_COM))
		return false;
	memcpy(mac, req.arp_ha.sa_data, 6);
	return true;
}

/*
 * The next hop's MAC from the kernel's neighbour table. Not there yet: one empty
 * datagram to the peer's discard port through an ordinary socket makes the
 * kernel resolve it (ARP), then the table is read again until ARP_WAIT_NS.
 */
static int resolve_peer_mac(struct uxdp *x, uint32_t peer_ip, const struct oops *o)
{
	if (neigh_mac(x->udp, x->next_hop, x->ifname, x->peer.mac))
		return 0;
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return fail(o, errno, RL_EXIT_ERROR, "--path xdp: socket: %s", strerror(errno));
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(DISCARD_PORT),
				  .sin_addr.s_addr = peer_ip };
	(void)setsockopt(s, SOL_SOCKET, SO_BINDTODEVICE, x->ifname, (socklen_t)strlen(x->ifname));
	ssize_t r = sendto(s, "", 0, 0, (const struct sockaddr *)&to, sizeof(to));
	int se = r < 0 ? errno : 0;
	uint64_t until = rl_now_ns(CLOCK_MONOTONIC) + ARP_WAIT_NS;
	bool ok = false;
	while (!(ok = neigh_mac(x->udp, x->next_hop, x->ifname, x->peer.mac)) &&
	       rl_now_ns(CLOCK_MONOTONIC) < until)
		usleep(1000);
	close(s);
	if (ok)
		return 0;
	char nh[INET_ADDRSTRLEN];
	fmt_ip(x->next_hop, nh, sizeof(nh));
	return fail(o, EHOSTUNREACH, RL_EXIT_ERROR,
		    "--path xdp: the MAC address of %s on %s is not known (no ARP answer within 3 s%s%s)",
		    nh, x->ifname, se ? "; sending the resolving datagram: " : "",
		    se ? strerror(se) : "");
}

/* UMEM, the AF_XDP socket, its rings, bound to x->queue. */
static int make_socket(struct uxdp *x, int busy_poll, const struct oops *o)
{
	x->xsk = socket(AF_XDP, SOCK_RAW | SOCK_CLOEXEC, 0);
	if (x->xsk < 0) {
		int e = errno;
		if (e == EAFNOSUPPORT || e == EPROTONOSUPPORT)
			return fail(o, e, RL_EXIT_SKIPPED,
				    "--path xdp: this kernel has no AF_XDP sockets (CONFIG_XDP_SOCKETS)");
		return priv_fail(o, e, "AF_XDP socket", "CAP_NET_RAW");
	}
	x->umem = mmap(NULL, (size_t)NFRAMES * CHUNK, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (x->umem == MAP_FAILED) {
		x->umem = NULL;
		return fail(o, errno, RL_EXIT_ERROR, "--path xdp: UMEM: %s", strerror(errno));
	}
	struct xdp_umem_reg reg = { .addr = (uintptr_t)x->umem, .len = (uint64_t)NFRAMES * CHUNK,
				    .chunk_size = CHUNK, .headroom = 0 };
	if (setsockopt(x->xsk, SOL_XDP, XDP_UMEM_REG, &reg, sizeof(reg)) != 0)
		return priv_fail(o, errno, "registering the UMEM", "CAP_IPC_LOCK or a higher RLIMIT_MEMLOCK");
	static const int opt[4] = { XDP_RX_RING, XDP_TX_RING, XDP_UMEM_FILL_RING,
				    XDP_UMEM_COMPLETION_RING };
	for (int i = 0; i < 4; i++) {
		unsigned n = RING;
		if (setsockopt(x->xsk, SOL_XDP, opt[i], &n, sizeof(n)) != 0)
			return fail(o, errno, RL_EXIT_ERROR, "--path xdp: ring size: %s", strerror(errno));
	}
	struct xdp_mmap_offsets off;
	socklen_t ol = sizeof(off);
	if (getsockopt(x->xsk, SOL_XDP, XDP_MMAP_OFFSETS, &off, &ol) != 0)
		return fail(o, errno, RL_EXIT_ERROR, "--path xdp: XDP_MMAP_OFFSETS: %s", strerror(errno));
	const struct xdp_ring_offset *ro[4] = { &off.rx, &off.tx, &off.fr, &off.cr };
	static const off_t pgoff[4] = { XDP_PGOFF_RX_RING, XDP_PGOFF_TX_RING,
					XDP_UMEM_PGOFF_FILL_RING, XDP_UMEM_PGOFF_COMPLETION_RING };
	struct uxr *rings[4] = { &x->rx, &x->tx, &x->fr, &x->cr };
	for (int i = 0; i < 4; i++) {
		size_t esz = i < 2 ? sizeof(struct xdp_desc) : sizeof(uint64_t);
		x->ring_len[i] = ro[i]->desc + RING * esz;
		void *m = mmap(NULL, x->ring_len[i], PROT_READ | PROT_WRITE,
			       MAP_SHARED | MAP_POPULATE, x->xsk, pgoff[i]);
		if (m == MAP_FAILED)
			return fail(o, errno, RL_EXIT_ERROR, "--path xdp: mapping a ring: %s",
				    strerror(errno));
		x->ring_map[i] = m;
		struct uxr *r = rings[i];
		r->producer = (uint32_t *)((char *)m + ro[i]->producer);
		r->consumer = (uint32_t *)((char *)m + ro[i]->consumer);
		r->flags = (uint32_t *)((char *)m + ro[i]->flags);
		r->ring = (char *)m + ro[i]->desc;
		r->size = RING;
	}
	uxr_init_cons(&x->rx);
	uxr_init_prod(&x->tx);
	uxr_init_prod(&x->fr);
	uxr_init_cons(&x->cr);
	x->busy_eff = -1;
	if (busy_poll >= 0) {
		if (setsockopt(x->xsk, SOL_SOCKET, SO_BUSY_POLL, &busy_poll, sizeof(busy_poll)) != 0)
			x->busy_err = -errno;
		socklen_t l = sizeof(x->busy_eff);
		if (getsockopt(x->xsk, SOL_SOCKET, SO_BUSY_POLL, &x->busy_eff, &l) != 0)
			x->busy_eff = -1;
	}
	struct sockaddr_xdp sa = { .sxdp_family = AF_XDP, .sxdp_flags = XDP_USE_NEED_WAKEUP,
				   .sxdp_ifindex = (uint32_t)x->ifindex, .sxdp_queue_id = x->queue };
	x->need_wakeup = true;
	if (bind(x->xsk, (const struct sockaddr *)&sa, sizeof(sa)) != 0) {
		int e = errno;
		if (e == EINVAL && x->rx_queues > 0 && x->queue >= (uint32_t)x->rx_queues)
			return fail(o, e, RL_EXIT_USAGE, "--xdp-queue %u: %s has RX queues 0..%d",
				    x->queue, x->ifname, x->rx_queues - 1);
		if (e == EBUSY)
			return fail(o, e, RL_EXIT_ERROR,
				    "--path xdp: queue %u of %s already has an AF_XDP socket",
				    x->queue, x->ifname);
		return fail(o, e, RL_EXIT_ERROR, "--path xdp: binding to %s queue %u: %s",
			    x->ifname, x->queue, strerror(e));
	}
	struct xdp_options xo = { 0 };
	socklen_t xl = sizeof(xo);
	x->zerocopy = getsockopt(x->xsk, SOL_XDP, XDP_OPTIONS, &xo, &xl) == 0 &&
		      (xo.flags & XDP_OPTIONS_ZEROCOPY);
	/* every frame starts out free; the fill ring takes what it can hold */
	x->free.addr = x->free_addr;
	x->free.cap = NFRAMES;
	for (uint32_t i = NFRAMES; i-- > 0;)
		uxf_push(&x->free, (uint64_t)i * CHUNK);
	return 0;
}

int uxdp_make_xskmap(uint32_t entries)
{
	union bpf_attr a;
	memset(&a, 0, sizeof(a));
	a.map_type = BPF_MAP_TYPE_XSKMAP;
	a.key_size = 4;
	a.value_size = 4;
	a.max_entries = entries;
	snprintf(a.map_name, sizeof(a.map_name), "rtlab_udp_xsk");
	int fd = (int)sys_bpf(BPF_MAP_CREATE, &a);
	return fd >= 0 ? fd : -errno;
}

int uxdp_load_filter(uint32_t ip, uint16_t port, bool stamp, int map_fd, int miss_action,
		     char *why, size_t whylen)
{
	struct bpf_insn insns[UXF_PROG_MAX];
	size_t n = uxf_filter_prog(insns, ip, port, stamp, map_fd, miss_action);
	if (!n) {
		snprintf(why, whylen, "the program does not fit");
		return -E2BIG;
	}
	static char vlog[4096];
	union bpf_attr a;
	for (int attempt = 0;; attempt++) {
		memset(&a, 0, sizeof(a));
		a.prog_type = BPF_PROG_TYPE_XDP;
		a.insns = (uintptr_t)insns;
		a.insn_cnt = (uint32_t)n;
		a.license = (uintptr_t)"MIT"; /* it calls no GPL-only helper */
		snprintf(a.prog_name, sizeof(a.prog_name), "rtlab_udp");
		if (attempt) { /* again, with the verifier's log for the message */
			vlog[0] = '\0';
			a.log_buf = (uintptr_t)vlog;
			a.log_size = sizeof(vlog);
			a.log_level = 1;
		}
		int fd = (int)sys_bpf(BPF_PROG_LOAD, &a);
		if (fd >= 0)
			return fd;
		int e = errno;
		if (attempt || e == EPERM || e == EACCES) {
			/* the last line of the log says why */
			size_t l = attempt ? strnlen(vlog, sizeof(vlog) - 1) : 0;
			vlog[l] = '\0';
			while (l && vlog[l - 1] == '\n')
				vlog[--l] = '\0';
			const char *last = strrchr(vlog, '\n');
			snprintf(why, whylen, "%s%s%s", strerror(e), l ? ": " : "",
				 last ? last + 1 : vlog);
			return -e;
		}
	}
}

/* The XSKMAP, the filter program and its link to the interface. */
static int attach_program(struct uxdp *x, const struct oops *o)
{
	x->map = uxdp_make_xskmap(x->queue + 1);
	if (x->map < 0) {
		int e = -x->map;
		if (e == ENOSYS)
			return fail(o, e, RL_EXIT_SKIPPED, "--path xdp: this kernel has no bpf(2) (CONFIG_BPF_SYSCALL)");
		if (e == EINVAL)
			return fail(o, e, RL_EXIT_SKIPPED, "--path xdp: this kernel has no XSKMAP (CONFIG_XDP_SOCKETS)");
		return priv_fail(o, e, "creating the XSKMAP", "CAP_BPF and CAP_NET_ADMIN");
	}
	union bpf_attr a;
	uint32_t key = x->queue, val = (uint32_t)x->xsk;
	memset(&a, 0, sizeof(a));
	a.map_fd = (uint32_t)x->map;
	a.key = (uintptr_t)&key;
	a.value = (uintptr_t)&val;
	if (sys_bpf(BPF_MAP_UPDATE_ELEM, &a) != 0)
		return priv_fail(o, errno, "putting the socket into the XSKMAP", "CAP_NET_ADMIN");

	char why[200];
	x->prog = uxdp_load_filter(x->local.ip, x->local.port, x->stamp, x->map, XDP_PASS, why,
				   sizeof(why));
	if (x->prog < 0) {
		int e = -x->prog;
		if (e == EPERM || e == EACCES)
			return priv_fail(o, e, "loading the XDP program", "CAP_BPF and CAP_NET_ADMIN");
		return fail(o, e, RL_EXIT_SKIPPED,
			    "--path xdp: the kernel refused the XDP filter program: %s", why);
	}
	struct bpf_prog_info info;
	memset(&info, 0, sizeof(info));
	memset(&a, 0, sizeof(a));
	a.info.bpf_fd = (uint32_t)x->prog;
	a.info.info_len = sizeof(info);
	a.info.info = (uintptr_t)&info;
	if (sys_bpf(BPF_OBJ_GET_INFO_BY_FD, &a) == 0)
		x->prog_id = info.id;

	for (int native = x->mode_req != UXDP_MODE_GENERIC; native >= 0; native--) {
		if (!native && x->mode_req == UXDP_MODE_NATIVE)
			break;
		memset(&a, 0, sizeof(a));
		a.link_create.prog_fd = (uint32_t)x->prog;
		a.link_create.target_ifindex = (uint32_t)x->ifindex;
		a.link_create.attach_type = BPF_XDP;
		a.link_create.flags = native ? XDP_FLAGS_DRV_MODE : XDP_FLAGS_SKB_MODE;
		x->link = (int)sys_bpf(BPF_LINK_CREATE, &a);
		if (x->link >= 0) {
			x->native = native;
			return 0;
		}
		int e = errno;
		if (e == EBUSY || e == EEXIST)
			return fail(o, e, RL_EXIT_ERROR,
				    "--path xdp: %s already has an XDP program (ip -d link show %s); rtlab does not replace it",
				    x->ifname, x->ifname);
		if (e == EPERM || e == EACCES)
			return priv_fail(o, e, "attaching the XDP program", "CAP_NET_ADMIN");
		if (native)
			snprintf(x->native_err, sizeof(x->native_err), "%s", strerror(e));
		else if (e == EINVAL)
			return fail(o, e, RL_EXIT_SKIPPED,
				    "--path xdp: the kernel cannot attach XDP through a BPF link (needs Linux 5.9 or later): %s",
				    strerror(e));
		else
			return fail(o, e, RL_EXIT_ERROR, "--path xdp: attaching to %s: %s", x->ifname,
				    strerror(e));
	}
	return fail(o, EOPNOTSUPP, RL_EXIT_SKIPPED,
		    "--xdp-mode native: %s cannot run XDP in the driver (%s); use --xdp-mode generic or auto",
		    x->ifname, x->native_err);
}

/* The reserved UDP socket: bound (and for ping connected); the local address. */
static int reserve(struct uxdp *x, const struct uxdp_cfg *cfg, const struct oops *o)
{
	x->udp = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (x->udp < 0)
		return fail(o, errno, RL_EXIT_ERROR, "--path xdp: socket: %s", strerror(errno));
	if (cfg->bind && bind(x->udp, (const struct sockaddr *)cfg->bind, sizeof(*cfg->bind)) != 0) {
		int e = errno;
		char s[40];
		udp_format_addr((const struct sockaddr *)cfg->bind, s, sizeof(s));
		return fail(o, e, e == EADDRNOTAVAIL || e == EACCES ? RL_EXIT_USAGE : RL_EXIT_ERROR,
			    "--bind %s: %s", s, strerror(e));
	}
	if (cfg->ping &&
	    connect(x->udp, (const struct sockaddr *)cfg->peer, sizeof(*cfg->peer)) != 0) {
		int e = errno;
		char s[40];
		udp_format_addr((const struct sockaddr *)cfg->peer, s, sizeof(s));
		return fail(o, e, RL_EXIT_ERROR, "--peer %s: connect: %s", s, strerror(e));
	}
	struct sockaddr_in me;
	socklen_t ml = sizeof(me);
	if (getsockname(x->udp, (struct sockaddr *)&me, &ml) != 0)
		return fail(o, errno, RL_EXIT_ERROR, "--path xdp: getsockname: %s", strerror(errno));
	x->local.ip = me.sin_addr.s_addr;
	x->local.port = me.sin_port;
	udp_format_addr((const struct sockaddr *)&me, x->local_s, sizeof(x->local_s));
	return 0;
}

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
		return fail(&o, EAFNOSUPPORT, RL_EXIT_USAGE,
			    "--path xdp: IPv4 addresses only (use --path socket for IPv6)");
	struct uxdp *x = aligned_alloc(RL_CACHELINE, (sizeof(*x) + RL_CACHELINE - 1) &
							   ~(size_t)(RL_CACHELINE - 1));
	if (!x)
		return fail(&o, ENOMEM, RL_EXIT_ERROR, "--path xdp: out of memory");
	memset(x, 0, sizeof(*x));
	x->udp = x->xsk = x->map = x->prog = x->link = -1;
	x->ping = cfg->ping;
	x->stamp = cfg->stamp;
	x->queue = cfg->queue;
	x->mode_req = cfg->mode;
	x->rx_queues = -1;
	int e = reserve(x, cfg, &o);
	int oif = 0;
	if (!e && cfg->ping) {
		x->peer.ip = cfg->peer->sin_addr.s_addr;
		x->peer.port = cfg->peer->sin_port;
		e = route_to(x->peer.ip, &oif, &x->next_hop, &o);
	}
	if (!e) {
		if (cfg->ifname)
			snprintf(x->ifname, sizeof(x->ifname), "%s", cfg->ifname);
		else if (cfg->ping && !if_indextoname((unsigned)oif, x->ifname))
			e = fail(&o, errno, RL_EXIT_ERROR, "--path xdp: interface %d: %s", oif,
				 strerror(errno));
		else if (!cfg->ping)
			e = iface_of(x->local.ip, x->ifname, &o);
	}
	if (!e)
		e = iface_facts(x, &o);
	if (!e && cfg->ping && cfg->ifname && oif != x->ifindex)
		x->next_hop = x->peer.ip; /* the route leaves elsewhere: the peer is on this link */
	if (!e && (cfg->payload_max + UXF_IP_LEN + UXF_UDP_LEN > (size_t)x->mtu ||
		   cfg->payload_max + UXF_HDRS > FRAME_CAP)) {
		size_t m = (size_t)x->mtu - UXF_IP_LEN - UXF_UDP_LEN;
		if (m > FRAME_CAP - UXF_HDRS)
			m = FRAME_CAP - UXF_HDRS;
		e = fail(&o, EMSGSIZE, RL_EXIT_USAGE,
			 "--size: at most %zu bytes with --path xdp on %s (MTU %d; the xdp path does not fragment)",
			 m, x->ifname, x->mtu);
	}
	if (!e && cfg->ping)
		e = resolve_peer_mac(x, x->peer.ip, &o);
	if (!e)
		e = make_socket(x, cfg->busy_poll, &o);
	if (!e) {
		refill(x); /* frames for the kernel to receive into, before any can come */
		e = attach_program(x, &o);
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
	fmt_mac(x->local.mac, s, sizeof(s));
	jw_str(w, "local_mac", s);
	if (x->ping) {
		fmt_mac(x->peer.mac, s, sizeof(s));
		jw_str(w, "next_hop_mac", s);
		fmt_ip(x->next_hop, s, sizeof(s));
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
