/* SPDX-License-Identifier: MIT */
/*
 * The pure parts of the udp probe's AF_XDP path (udp_xdp.c): Ethernet/IPv4/UDP
 * frames (parse, build, the reflector's in-place rewrite, Internet checksums),
 * the XDP filter program, assembled here as BPF instructions, and the parser of
 * the kernel's route answer. No system calls and no libraries beyond the
 * kernel's UAPI headers: unit-tested in tests/test_udp_xdp.c.
 *
 * Frames are untagged Ethernet II + IPv4 without options + UDP:
 *
 *   0  dst MAC, 6 src MAC, 12 ethertype 0x0800
 *  14  IPv4: 14 ver/ihl 0x45, 15 tos, 16 total length, 18 id, 20 flags/frag,
 *      22 ttl, 23 protocol 17, 24 checksum, 26 src addr, 30 dst addr
 *  34  UDP: 34 src port, 36 dst port, 38 length, 40 checksum
 *  42  payload (the udp probe's packet, udp_proto.h)
 *
 * Addresses and ports are kept in network byte order (as in the frame).
 */
#ifndef RTLAB_UDP_XDP_FRAME_H
#define RTLAB_UDP_XDP_FRAME_H

#include <linux/bpf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define UXF_ETH_LEN 14u
#define UXF_IP_LEN 20u
#define UXF_UDP_LEN 8u
#define UXF_HDRS (UXF_ETH_LEN + UXF_IP_LEN + UXF_UDP_LEN) /* 42: payload offset */
#define UXF_TTL 64u

/*
 * Metadata the filter program writes in front of a redirected frame
 * (bpf_xdp_adjust_meta): the CLOCK_MONOTONIC time it ran (bpf_ktime_get_ns),
 * and its bitwise complement as a check that the kernel carried the metadata
 * into the AF_XDP buffer.
 */
#define UXF_META_LEN 16u

/* One end of a UDP flow: MAC, IPv4 address and port (network byte order). */
struct uxf_end {
	uint8_t mac[6];
	uint32_t ip;
	uint16_t port;
};

/* What uxf_parse found. */
struct uxf_frame {
	struct uxf_end src, dst;
	size_t payload_off;	/* UXF_HDRS */
	size_t payload_len;	/* from the UDP length */
	size_t ip_len;		/* IPv4 total length */
};

enum uxf_verdict {
	UXF_OK = 0,
	UXF_NOT_IPV4_UDP,	/* not Ethernet/IPv4 (no options, unfragmented)/UDP */
	UXF_MALFORMED,		/* lengths inconsistent with the frame, bad IP checksum */
};

/* Internet checksum (RFC 1071) helpers. The partial sum is of 16-bit words in
 * memory order; uxf_csum_fold returns the complemented 16-bit result to be
 * stored as-is (memcpy) into a header. */
uint64_t uxf_csum_add(uint64_t sum, const void *data, size_t len);
uint16_t uxf_csum_fold(uint64_t sum);

/* Parse and validate a frame of len bytes (never reads beyond len). */
enum uxf_verdict uxf_parse(const uint8_t *f, size_t len, struct uxf_frame *out);

/* True if the source is a unicast sender one may answer: a unicast MAC and an
 * IPv4 address outside 0/8, 127/8 (loopback), 224/4 (multicast) and 240/4 (class E,
 * broadcast): what the kernel would not drop as a martian source. */
bool uxf_unicast_source(const struct uxf_frame *fr);

/* The reflector's reply, in place: swap the MAC addresses, IPv4 addresses and
 * UDP ports, set a fresh TTL, recompute the IPv4 header checksum and the full
 * UDP checksum (over the payload as it is now). Lengths are not changed: the
 * reply is exactly as long as the request. */
void uxf_make_reply(uint8_t *f, const struct uxf_frame *fr);

/* Write the headers of a frame from `src` to `dst` carrying payload_len bytes
 * (the payload itself goes at f + UXF_HDRS); ip_id: the IPv4 identification.
 * Returns the frame length. The UDP checksum is left 0: call uxf_udp_csum
 * once the payload is written. */
size_t uxf_build(uint8_t *f, const struct uxf_end *src, const struct uxf_end *dst,
		 uint16_t ip_id, size_t payload_len);

/* Compute and store the UDP checksum of a frame written by uxf_build. Only
 * the first `nonzero` payload bytes are summed: the rest must be zeros (they
 * add nothing to the sum). */
void uxf_udp_csum(uint8_t *f, size_t nonzero);

/*
 * The XDP filter: redirect Ethernet/IPv4 (no options, unfragmented)/UDP
 * frames to `ip`:`port` into the AF_XDP socket of their RX queue (XSKMAP
 * `map_fd`, key = rx_queue_index) and pass everything else to the kernel
 * stack. A frame whose queue has no socket gets `miss_action` (XDP_PASS in
 * use; tests use XDP_DROP to see what matched). With `stamp`, matched frames
 * get UXF_META_LEN bytes of metadata (see above).
 *
 * Writes at most UXF_PROG_MAX instructions into out; returns how many.
 */
#define UXF_PROG_MAX 64
size_t uxf_filter_prog(struct bpf_insn *out, uint32_t ip, uint16_t port, bool stamp, int map_fd,
		       int miss_action);

/*
 * The answer to an rtnetlink RTM_GETROUTE for one IPv4 destination (len bytes
 * at buf): output interface, gateway (0: the destination is on the link) and
 * route type (RTN_UNICAST, RTN_LOCAL, ...). Returns 0, the kernel's -errno, or
 * -EBADMSG when the answer has no route in it.
 */
int uxf_parse_route(const void *buf, size_t len, int *oif, uint32_t *gateway,
		    unsigned *type);

#endif
