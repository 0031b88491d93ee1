/* SPDX-License-Identifier: MIT */
/*
 * Event source: datagrams arriving on a UDP socket, captured by the kernel's
 * software RX timestamp (SO_TIMESTAMPING, SOF_TIMESTAMPING_RX_SOFTWARE, on
 * CLOCK_REALTIME, taken when the packet enters the stack). Any datagram to
 * --bind is an event; the payload is ignored.
 */
#include <errno.h>
#include <linux/net_tstamp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "event.h"
#include "udp_proto.h"

static int net_open(struct evsrc *s, const struct evsrc_cfg *cfg, char *err, size_t len)
{
	struct sockaddr_storage a;
	socklen_t al;
	if (!cfg->bind || udp_parse_addr(cfg->bind, &a, &al) != 0) {
		snprintf(err, len, "--bind: required for --source net, a numeric ADDR:PORT");
		return -EINVAL;
	}
	s->fd = socket(a.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s->fd < 0) {
		int e = errno;
		snprintf(err, len, "socket: %s", strerror(e));
		return -e;
	}
	if (bind(s->fd, (struct sockaddr *)&a, al) != 0) {
		int e = errno;
		snprintf(err, len, "--bind %s: %s", cfg->bind, strerror(e));
		return -e;
	}
	int f = SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE;
	if (setsockopt(s->fd, SOL_SOCKET, SO_TIMESTAMPING, &f, sizeof(f)) != 0) {
		int e = errno;
		snprintf(err, len, "SO_TIMESTAMPING: %s", strerror(e));
		return -e;
	}
	s->domain = EV_REALTIME;
	return 0;
}

static int net_arm(struct evsrc *s)
{
	/* drop anything queued before the run */
	unsigned char b[64];
	while (recv(s->fd, b, sizeof(b), MSG_DONTWAIT) >= 0)
		;
	return 0;
}

static int net_wait(struct evsrc *s, uint64_t deadline, struct ev_event *ev)
{
	for (;;) {
		int r = evsrc_poll(s->fd, deadline);
		if (r <= 0)
			return r;
		unsigned char b[2048];
		char ctrl[256];
		struct iovec iov = { .iov_base = b, .iov_len = sizeof(b) };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctrl,
				     .msg_controllen = sizeof(ctrl) };
		if (recvmsg(s->fd, &mh, MSG_DONTWAIT) < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			return -errno;
		}
		for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
			if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SO_TIMESTAMPING) {
				struct timespec ts;
				memcpy(&ts, CMSG_DATA(cm), sizeof(ts));
				ev->capture_ns = rl_ts_to_ns(&ts);
				ev->lost = 0;
				return 1;
			}
		}
		/* no timestamp on this datagram: not an event we can measure */
	}
}

const struct evsrc_ops evsrc_net = EVSRC_OPS("net", net_open, net_arm, net_wait, evsrc_close_fd);
