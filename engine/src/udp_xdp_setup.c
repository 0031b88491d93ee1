/* SPDX-License-Identifier: MIT */
/* The set-up steps of the udp probe's AF_XDP path (udp_xdp_setup.h, udp_xdp.c). */
#include "udp_xdp_setup.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <linux/ethtool.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sockios.h>
#include <net/if_arp.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "udp_proto.h"

/* Record a failure: message, exit code; returns -e for `return uxdp_fail(...)`. */
int uxdp_fail(const struct oops *o, int e, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(o->err, o->len, fmt, ap);
	va_end(ap);
	*o->code = code;
	return -e;
}

/* The usual reason of an EPERM from the set-up: which capability is missing. */
int uxdp_priv_fail(const struct oops *o, int e, const char *what, const char *caps)
{
	if (e == EPERM || e == EACCES)
		return uxdp_fail(o, e, RL_EXIT_SKIPPED, "--path xdp: %s: %s (run as root or grant %s)",
			    what, strerror(e), caps);
	return uxdp_fail(o, e, RL_EXIT_ERROR, "--path xdp: %s: %s", what, strerror(e));
}

void uxdp_fmt_mac(const uint8_t *m, char *buf, size_t len)
{
	snprintf(buf, len, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
}

void uxdp_fmt_ip(uint32_t ip, char *buf, size_t len)
{
	struct in_addr a = { .s_addr = ip };
	if (!inet_ntop(AF_INET, &a, buf, (socklen_t)len))
		snprintf(buf, len, "?");
}

/* The route to the peer: output interface and next hop. */
int uxdp_route_to(uint32_t dst, int *oif, uint32_t *next_hop, const struct oops *o)
{
	char dst_s[INET_ADDRSTRLEN];
	uxdp_fmt_ip(dst, dst_s, sizeof(dst_s));
	int nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (nl < 0)
		return uxdp_fail(o, errno, RL_EXIT_ERROR, "--path xdp: netlink socket: %s", strerror(errno));
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
		return uxdp_fail(o, e, RL_EXIT_ERROR, "--path xdp: route to %s: %s", dst_s, strerror(e));
	unsigned type = 0;
	uint32_t gw = 0;
	int r = uxf_parse_route(buf, (size_t)n, oif, &gw, &type);
	if (r)
		return uxdp_fail(o, -r, RL_EXIT_ERROR, "--path xdp: no route to %s: %s", dst_s,
			    strerror(-r));
	if (type == RTN_LOCAL)
		return uxdp_fail(o, EINVAL, RL_EXIT_USAGE,
			    "--peer %s: a local address; --path xdp needs the peer behind a network interface (use --path socket)",
			    dst_s);
	if (type != RTN_UNICAST || !*oif)
		return uxdp_fail(o, EHOSTUNREACH, RL_EXIT_ERROR,
			    "--path xdp: no unicast route to %s (route type %u)", dst_s, type);
	*next_hop = gw ? gw : dst;
	return 0;
}

/* The interface that carries a local address. */
int uxdp_iface_of(uint32_t ip, char *name, const struct oops *o)
{
	struct ifaddrs *ifa = NULL;
	if (getifaddrs(&ifa) != 0)
		return uxdp_fail(o, errno, RL_EXIT_ERROR, "--path xdp: getifaddrs: %s", strerror(errno));
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
		uxdp_fmt_ip(ip, s, sizeof(s));
		return uxdp_fail(o, ENODEV, RL_EXIT_USAGE,
			    "--path xdp: no interface carries %s; give it with --ifname", s);
	}
	return 0;
}

/* Index, MAC, MTU and RX queues of x->ifname. */
int uxdp_iface_facts(struct uxdp *x, const struct oops *o)
{
	x->ifindex = (int)if_nametoindex(x->ifname);
	if (!x->ifindex)
		return uxdp_fail(o, ENODEV, RL_EXIT_USAGE,
			    "--ifname %s: no such interface in this network namespace (ip link)",
			    x->ifname);
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", x->ifname);
	if (ioctl(x->udp, SIOCGIFHWADDR, &ifr) != 0)
		return uxdp_fail(o, errno, RL_EXIT_ERROR, "--path xdp: %s: SIOCGIFHWADDR: %s", x->ifname,
			    strerror(errno));
	if (ifr.ifr_hwaddr.sa_family != ARPHRD_ETHER)
		return uxdp_fail(o, EINVAL, RL_EXIT_USAGE,
			    "--path xdp: %s is not an Ethernet interface (link type %u); the xdp path builds Ethernet frames (use --path socket)",
			    x->ifname, ifr.ifr_hwaddr.sa_family);
	memcpy(x->local.mac, ifr.ifr_hwaddr.sa_data, 6);
	if (ioctl(x->udp, SIOCGIFMTU, &ifr) != 0)
		return uxdp_fail(o, errno, RL_EXIT_ERROR, "--path xdp: %s: SIOCGIFMTU: %s", x->ifname,
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
int uxdp_resolve_peer_mac(struct uxdp *x, uint32_t peer_ip, const struct oops *o)
{
	if (neigh_mac(x->udp, x->next_hop, x->ifname, x->peer.mac))
		return 0;
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return uxdp_fail(o, errno, RL_EXIT_ERROR, "--path xdp: socket: %s", strerror(errno));
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
	uxdp_fmt_ip(x->next_hop, nh, sizeof(nh));
	return uxdp_fail(o, EHOSTUNREACH, RL_EXIT_ERROR,
		    "--path xdp: the MAC address of %s on %s is not known (no ARP answer within 3 s%s%s)",
		    nh, x->ifname, se ? "; sending the resolving datagram: " : "",
		    se ? strerror(se) : "");
}

/* UMEM, the AF_XDP socket, its rings, bound to x->queue. */
int uxdp_make_socket(struct uxdp *x, int busy_poll, const struct oops *o)
{
	x->xsk = socket(AF_XDP, SOCK_RAW | SOCK_CLOEXEC, 0);
	if (x->xsk < 0) {
		int e = errno;
		if (e == EAFNOSUPPORT || e == EPROTONOSUPPORT)
			return uxdp_fail(o, e, RL_EXIT_SKIPPED,
				    "--path xdp: this kernel has no AF_XDP sockets (CONFIG_XDP_SOCKETS)");
		return uxdp_priv_fail(o, e, "AF_XDP socket", "CAP_NET_RAW");
	}
	x->umem = mmap(NULL, (size_t)NFRAMES * CHUNK, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (x->umem == MAP_FAILED) {
		x->umem = NULL;
		return uxdp_fail(o, errno, RL_EXIT_ERROR, "--path xdp: UMEM: %s", strerror(errno));
	}
	struct xdp_umem_reg reg = { .addr = (uintptr_t)x->umem, .len = (uint64_t)NFRAMES * CHUNK,
				    .chunk_size = CHUNK, .headroom = 0 };
	if (setsockopt(x->xsk, SOL_XDP, XDP_UMEM_REG, &reg, sizeof(reg)) != 0)
		return uxdp_priv_fail(o, errno, "registering the UMEM", "CAP_IPC_LOCK or a higher RLIMIT_MEMLOCK");
	static const int opt[4] = { XDP_RX_RING, XDP_TX_RING, XDP_UMEM_FILL_RING,
				    XDP_UMEM_COMPLETION_RING };
	for (int i = 0; i < 4; i++) {
		unsigned n = RING;
		if (setsockopt(x->xsk, SOL_XDP, opt[i], &n, sizeof(n)) != 0)
			return uxdp_fail(o, errno, RL_EXIT_ERROR, "--path xdp: ring size: %s", strerror(errno));
	}
	struct xdp_mmap_offsets off;
	socklen_t ol = sizeof(off);
	if (getsockopt(x->xsk, SOL_XDP, XDP_MMAP_OFFSETS, &off, &ol) != 0)
		return uxdp_fail(o, errno, RL_EXIT_ERROR, "--path xdp: XDP_MMAP_OFFSETS: %s", strerror(errno));
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
			return uxdp_fail(o, errno, RL_EXIT_ERROR, "--path xdp: mapping a ring: %s",
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
			return uxdp_fail(o, e, RL_EXIT_USAGE, "--xdp-queue %u: %s has RX queues 0..%d",
				    x->queue, x->ifname, x->rx_queues - 1);
		if (e == EBUSY)
			return uxdp_fail(o, e, RL_EXIT_ERROR,
				    "--path xdp: queue %u of %s already has an AF_XDP socket",
				    x->queue, x->ifname);
		return uxdp_fail(o, e, RL_EXIT_ERROR, "--path xdp: binding to %s queue %u: %s",
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

/* The reserved UDP socket: bound (and for ping connected); the local address. */
int uxdp_reserve(struct uxdp *x, const struct uxdp_cfg *cfg, const struct oops *o)
{
	x->udp = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (x->udp < 0)
		return uxdp_fail(o, errno, RL_EXIT_ERROR, "--path xdp: socket: %s", strerror(errno));
	if (cfg->bind && bind(x->udp, (const struct sockaddr *)cfg->bind, sizeof(*cfg->bind)) != 0) {
		int e = errno;
		char s[40];
		udp_format_addr((const struct sockaddr *)cfg->bind, s, sizeof(s));
		return uxdp_fail(o, e, e == EADDRNOTAVAIL || e == EACCES ? RL_EXIT_USAGE : RL_EXIT_ERROR,
			    "--bind %s: %s", s, strerror(e));
	}
	if (cfg->ping &&
	    connect(x->udp, (const struct sockaddr *)cfg->peer, sizeof(*cfg->peer)) != 0) {
		int e = errno;
		char s[40];
		udp_format_addr((const struct sockaddr *)cfg->peer, s, sizeof(s));
		return uxdp_fail(o, e, RL_EXIT_ERROR, "--peer %s: connect: %s", s, strerror(e));
	}
	struct sockaddr_in me;
	socklen_t ml = sizeof(me);
	if (getsockname(x->udp, (struct sockaddr *)&me, &ml) != 0)
		return uxdp_fail(o, errno, RL_EXIT_ERROR, "--path xdp: getsockname: %s", strerror(errno));
	x->local.ip = me.sin_addr.s_addr;
	x->local.port = me.sin_port;
	udp_format_addr((const struct sockaddr *)&me, x->local_s, sizeof(x->local_s));
	return 0;
}
