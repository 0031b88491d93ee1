/* SPDX-License-Identifier: MIT */
/*
 * The AF_XDP path of the udp probe (`--path xdp`): one AF_XDP socket on one RX
 * queue of one interface, its UMEM and four rings, and an XDP filter program that
 * redirects only the probe's IPv4 address and UDP port to it (everything else
 * goes on to the kernel's stack). Raw kernel interfaces only (bpf(2), AF_XDP
 * socket options, mmap, rtnetlink): no libbpf/libxdp, so the engine stays one
 * static binary that cross-compiles. The program is attached through a BPF link,
 * which the kernel detaches when the process ends in any way (kill -9 included).
 *
 * Built when meson finds linux/if_xdp.h and linux/bpf.h (option `af_xdp`);
 * without it, uxdp_open() fails with -EOPNOTSUPP and says so, so that udp.c has
 * no conditional code. Not thread-safe: one thread uses it, except
 * uxdp_write_counters(), which the reporter calls.
 */
#ifndef RTLAB_UDP_XDP_H
#define RTLAB_UDP_XDP_H

#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common.h"
#include "jsonw.h"

enum uxdp_mode { UXDP_MODE_AUTO, UXDP_MODE_NATIVE, UXDP_MODE_GENERIC };

struct uxdp_cfg {
	bool ping;			  /* ping: send to `peer`; reflect: reply to senders */
	const struct sockaddr_in *bind;	  /* reflect: required; ping: NULL = the route's source */
	const struct sockaddr_in *peer;	  /* ping only */
	const char *ifname;		  /* NULL: the interface of the address (reflect) or route */
	uint32_t queue;			  /* RX queue the socket binds to */
	int mode;			  /* enum uxdp_mode: native, generic, or native then generic */
	bool stamp;			  /* the program stamps bpf_ktime_get_ns() into metadata */
	size_t payload_max;		  /* the largest UDP payload the run sends or accepts */
	int busy_poll;			  /* SO_BUSY_POLL on the socket, microseconds; -1: not set */
};

/* A received datagram of the probe's address and port; valid until the next uxdp_recv. */
struct uxdp_msg {
	const unsigned char *payload;
	size_t len;
	uint64_t rx_mono;		  /* CLOCK_MONOTONIC when the XDP program ran; 0: none */
};

struct uxdp;

#define UXDP_BATCH 8

#ifdef RTLAB_AF_XDP

/*
 * Set everything up. Returns 0, or -errno with one line in err and the exit
 * code it deserves in *exit_code: 4 when a privilege (CAP_NET_ADMIN, CAP_NET_RAW,
 * CAP_BPF) or a kernel feature (AF_XDP, XDP, BPF links) is missing, 2 for a bad
 * option (unknown interface, IPv6, a size over the MTU, a queue that does not
 * exist), 1 otherwise. Nothing stays changed on failure.
 */
int uxdp_open(struct uxdp **out, const struct uxdp_cfg *cfg, char *err, size_t errlen,
	      int *exit_code) RL_WUR;

/* The socket's file descriptor, for poll/epoll (POLLIN: the RX ring has frames). */
int uxdp_fd(const struct uxdp *x);

/* Non-blocking: up to max (<= UXDP_BATCH) datagrams from the RX ring. Frames of a
 * previous batch that were not replied to are recycled first. */
unsigned uxdp_recv(struct uxdp *x, struct uxdp_msg *out, unsigned max);

/* Reflect: answer the i-th datagram of the last batch with its own frame, its
 * first head_len payload bytes replaced by head: addresses and ports swapped,
 * exactly as many bytes as were received. 0 or -errno (-ENOBUFS: TX ring full). */
int uxdp_reply(struct uxdp *x, unsigned i, const void *head, size_t head_len) RL_WUR;

/* Ping: send len payload bytes to the peer. 0 or -errno. */
int uxdp_send(struct uxdp *x, const void *payload, size_t len) RL_WUR;

/* "A.B.C.D:PORT" of the local end, and the interface. */
const char *uxdp_local(const struct uxdp *x);
const char *uxdp_ifname(const struct uxdp *x);
bool uxdp_stamping(const struct uxdp *x);
/* SO_BUSY_POLL as read back (-1: not set or unreadable); *err: -errno of setting it. */
int uxdp_busy_poll(const struct uxdp *x, int *err);
/* Something the user should know (several RX queues), or NULL. */
const char *uxdp_warning(const struct uxdp *x);

/* Header facts (effective.xdp) and cumulative counters (udp.xdp; the kernel's socket
 * statistics only when final). */
void uxdp_write_effective(const struct uxdp *x, struct jsonw *w, const char *key);
void uxdp_write_counters(const struct uxdp *x, struct jsonw *w, const char *key, bool final);

void uxdp_close(struct uxdp *x);

/* Building blocks of uxdp_open, exported for tests/test_udp_xdp.c: an XSKMAP of
 * `entries` queues, and the filter program (uxf_filter_prog) loaded into the
 * kernel. A file descriptor, or -errno (why: the verifier's last word). */
int uxdp_make_xskmap(uint32_t entries) RL_WUR;
int uxdp_load_filter(uint32_t ip, uint16_t port, bool stamp, int map_fd, int miss_action,
		     char *why, size_t whylen) RL_WUR;

#else /* a build without AF_XDP: say so */

static inline int uxdp_open(struct uxdp **out, const struct uxdp_cfg *cfg, char *err,
			    size_t errlen, int *exit_code)
{
	(void)cfg;
	*out = NULL;
	snprintf(err, errlen,
		 "--path xdp: this rtlab-probe was not built with AF_XDP (rebuild with meson -Daf_xdp=enabled; it needs the kernel headers linux/if_xdp.h and linux/bpf.h)");
	*exit_code = RL_EXIT_SKIPPED;
	return -EOPNOTSUPP;
}
static inline int uxdp_fd(const struct uxdp *x) { (void)x; return -1; }
static inline unsigned uxdp_recv(struct uxdp *x, struct uxdp_msg *out, unsigned max)
{
	(void)x, (void)out, (void)max;
	return 0;
}
static inline int uxdp_reply(struct uxdp *x, unsigned i, const void *head, size_t head_len)
{
	(void)x, (void)i, (void)head, (void)head_len;
	return -EOPNOTSUPP;
}
static inline int uxdp_send(struct uxdp *x, const void *payload, size_t len)
{
	(void)x, (void)payload, (void)len;
	return -EOPNOTSUPP;
}
static inline const char *uxdp_local(const struct uxdp *x) { (void)x; return "?"; }
static inline const char *uxdp_ifname(const struct uxdp *x) { (void)x; return NULL; }
static inline bool uxdp_stamping(const struct uxdp *x) { (void)x; return false; }
static inline int uxdp_busy_poll(const struct uxdp *x, int *err)
{
	(void)x;
	*err = 0;
	return -1;
}
static inline const char *uxdp_warning(const struct uxdp *x) { (void)x; return NULL; }
static inline void uxdp_write_effective(const struct uxdp *x, struct jsonw *w, const char *key)
{
	(void)x, (void)w, (void)key;
}
static inline void uxdp_write_counters(const struct uxdp *x, struct jsonw *w, const char *key,
				       bool final)
{
	(void)x, (void)w, (void)key, (void)final;
}
static inline void uxdp_close(struct uxdp *x) { (void)x; }

#endif
#endif
