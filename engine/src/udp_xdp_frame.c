/* SPDX-License-Identifier: MIT */
/* Frames and the XDP filter program of the udp probe's AF_XDP path: udp_xdp_frame.h. */
#include "udp_xdp_frame.h"

#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <string.h>
#include <sys/socket.h>

static uint16_t get_be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static void put_be16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

/* ---- checksums ----------------------------------------------------------- */

uint64_t uxf_csum_add(uint64_t sum, const void *data, size_t len)
{
	const uint8_t *p = data;
	/* 16-bit words in memory order: their sum folds to the checksum in network order
	 * whatever the CPU's byte order (RFC 1071, 2.(B)) */
	for (; len >= 2; p += 2, len -= 2) {
		uint16_t h;
		memcpy(&h, p, 2);
		sum += h;
	}
	if (len) {
		uint8_t last[2] = { p[0], 0 }; /* an odd byte is padded with a zero */
		uint16_t h;
		memcpy(&h, last, 2);
		sum += h;
	}
	return sum;
}

uint16_t uxf_csum_fold(uint64_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

static uint16_t udp_csum(const uint8_t *f, size_t udp_len, size_t summed)
{
	uint8_t pseudo[12];
	memcpy(pseudo, f + 26, 8); /* source and destination address */
	pseudo[8] = 0;
	pseudo[9] = 17;
	put_be16(pseudo + 10, (uint16_t)udp_len);
	uint64_t s = uxf_csum_add(0, pseudo, sizeof(pseudo));
	s = uxf_csum_add(s, f + UXF_ETH_LEN + UXF_IP_LEN, summed);
	uint16_t c = uxf_csum_fold(s);
	return c ? c : 0xffff; /* 0 means "no checksum" in UDP over IPv4 */
}

static void set_ip_csum(uint8_t *f)
{
	memset(f + 24, 0, 2);
	uint16_t c = uxf_csum_fold(uxf_csum_add(0, f + UXF_ETH_LEN, UXF_IP_LEN));
	memcpy(f + 24, &c, 2);
}

/* ---- frames -------------------------------------------------------------- */

enum uxf_verdict uxf_parse(const uint8_t *f, size_t len, struct uxf_frame *out)
{
	if (len < UXF_HDRS || f[12] != 0x08 || f[13] != 0x00 || f[14] != 0x45 ||
	    (f[20] & 0x3f) || f[21] || f[23] != 17)
		return UXF_NOT_IPV4_UDP;
	size_t ip_len = get_be16(f + 16);
	size_t udp_len = get_be16(f + 38);
	if (ip_len < UXF_IP_LEN + UXF_UDP_LEN || UXF_ETH_LEN + ip_len > len ||
	    udp_len < UXF_UDP_LEN || udp_len > ip_len - UXF_IP_LEN)
		return UXF_MALFORMED;
	if (uxf_csum_fold(uxf_csum_add(0, f + UXF_ETH_LEN, UXF_IP_LEN)) != 0)
		return UXF_MALFORMED;
	memcpy(out->dst.mac, f, 6);
	memcpy(out->src.mac, f + 6, 6);
	memcpy(&out->src.ip, f + 26, 4);
	memcpy(&out->dst.ip, f + 30, 4);
	memcpy(&out->src.port, f + 34, 2);
	memcpy(&out->dst.port, f + 36, 2);
	out->payload_off = UXF_HDRS;
	out->payload_len = udp_len - UXF_UDP_LEN;
	out->ip_len = ip_len;
	return UXF_OK;
}

bool uxf_unicast_source(const struct uxf_frame *fr)
{
	const uint8_t *a = (const uint8_t *)&fr->src.ip;
	if (fr->src.mac[0] & 1) /* group (multicast/broadcast) MAC */
		return false;
	/* 0/8 "this network", 127/8 loopback, 224/4 multicast, 240/4 and broadcast */
	if (a[0] == 0 || a[0] == 127 || a[0] >= 224)
		return false;
	return true;
}

void uxf_make_reply(uint8_t *f, const struct uxf_frame *fr)
{
	memcpy(f, fr->src.mac, 6);
	memcpy(f + 6, fr->dst.mac, 6);
	memcpy(f + 26, &fr->dst.ip, 4);
	memcpy(f + 30, &fr->src.ip, 4);
	memcpy(f + 34, &fr->dst.port, 2);
	memcpy(f + 36, &fr->src.port, 2);
	f[22] = UXF_TTL;
	set_ip_csum(f);
	memset(f + 40, 0, 2);
	size_t udp_len = fr->payload_len + UXF_UDP_LEN;
	uint16_t c = udp_csum(f, udp_len, udp_len);
	memcpy(f + 40, &c, 2);
}

size_t uxf_build(uint8_t *f, const struct uxf_end *src, const struct uxf_end *dst,
		 uint16_t ip_id, size_t payload_len)
{
	memcpy(f, dst->mac, 6);
	memcpy(f + 6, src->mac, 6);
	f[12] = 0x08;
	f[13] = 0x00;
	uint8_t *ip = f + UXF_ETH_LEN;
	ip[0] = 0x45;
	ip[1] = 0;
	put_be16(ip + 2, (uint16_t)(UXF_IP_LEN + UXF_UDP_LEN + payload_len));
	put_be16(ip + 4, ip_id);
	put_be16(ip + 6, 0x4000); /* don't fragment */
	ip[8] = UXF_TTL;
	ip[9] = 17;
	memcpy(ip + 12, &src->ip, 4);
	memcpy(ip + 16, &dst->ip, 4);
	set_ip_csum(f);
	uint8_t *udp = ip + UXF_IP_LEN;
	memcpy(udp, &src->port, 2);
	memcpy(udp + 2, &dst->port, 2);
	put_be16(udp + 4, (uint16_t)(UXF_UDP_LEN + payload_len));
	memset(udp + 6, 0, 2);
	return UXF_HDRS + payload_len;
}

void uxf_udp_csum(uint8_t *f, size_t nonzero)
{
	size_t udp_len = get_be16(f + 38);
	size_t payload = udp_len - UXF_UDP_LEN;
	memset(f + 40, 0, 2);
	uint16_t c = udp_csum(f, udp_len, UXF_UDP_LEN + (nonzero < payload ? nonzero : payload));
	memcpy(f + 40, &c, 2);
}

/* ---- the filter program -------------------------------------------------- */

struct asm_ {
	struct bpf_insn *out;
	size_t n;
};

static void emit(struct asm_ *a, uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm)
{
	if (a->n < UXF_PROG_MAX)
		a->out[a->n] = (struct bpf_insn){ .code = code, .dst_reg = dst, .src_reg = src,
						  .off = off, .imm = imm };
	a->n++;
}

/* A forward jump whose target is patched by land(). */
static size_t jump(struct asm_ *a, uint8_t code, uint8_t dst, uint8_t src, int32_t imm)
{
	emit(a, code, dst, src, 0, imm);
	return a->n - 1;
}

static void land(struct asm_ *a, const size_t *from, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (from[i] < UXF_PROG_MAX)
			a->out[from[i]].off = (int16_t)(a->n - from[i] - 1);
}

/* The 16-bit value a BPF load of these two bytes yields (the host's byte order). */
static int32_t mem16(uint8_t b0, uint8_t b1)
{
	uint8_t b[2] = { b0, b1 };
	uint16_t v;
	memcpy(&v, b, 2);
	return v;
}

enum { R0, R1, R2, R3, R4, R5, R6, R7 };
#define LDX(size) (BPF_LDX | BPF_MEM | (size))
#define JNE32_K (BPF_JMP32 | BPF_JNE | BPF_K)
/* struct xdp_md */
#define MD_DATA 0
#define MD_DATA_END 4
#define MD_DATA_META 8
#define MD_RX_QUEUE 16

size_t uxf_filter_prog(struct bpf_insn *out, uint32_t ip, uint16_t port, bool stamp, int map_fd,
		       int miss_action)
{
	struct asm_ a = { out, 0 };
	size_t pass[8], redir[2];
	size_t np = 0, nr = 0;

	emit(&a, BPF_ALU64 | BPF_MOV | BPF_X, R6, R1, 0, 0); /* r6 = ctx */
	emit(&a, LDX(BPF_W), R2, R6, MD_DATA, 0);
	emit(&a, LDX(BPF_W), R3, R6, MD_DATA_END, 0);
	emit(&a, BPF_ALU64 | BPF_MOV | BPF_X, R4, R2, 0, 0);
	emit(&a, BPF_ALU64 | BPF_ADD | BPF_K, R4, 0, 0, (int32_t)UXF_HDRS);
	pass[np++] = jump(&a, BPF_JMP | BPF_JGT | BPF_X, R4, R3, 0); /* shorter than the headers */
	emit(&a, LDX(BPF_H), R4, R2, 12, 0);
	pass[np++] = jump(&a, JNE32_K, R4, 0, mem16(0x08, 0x00)); /* ethertype IPv4 */
	emit(&a, LDX(BPF_B), R4, R2, 14, 0);
	pass[np++] = jump(&a, JNE32_K, R4, 0, 0x45); /* version 4, no options */
	emit(&a, LDX(BPF_H), R4, R2, 20, 0);
	emit(&a, BPF_ALU | BPF_AND | BPF_K, R4, 0, 0, mem16(0x3f, 0xff)); /* MF + offset */
	pass[np++] = jump(&a, JNE32_K, R4, 0, 0); /* a fragment */
	emit(&a, LDX(BPF_B), R4, R2, 23, 0);
	pass[np++] = jump(&a, JNE32_K, R4, 0, 17); /* UDP */
	emit(&a, LDX(BPF_W), R4, R2, 30, 0);
	pass[np++] = jump(&a, JNE32_K, R4, 0, (int32_t)ip); /* destination address */
	emit(&a, LDX(BPF_H), R4, R2, 36, 0);
	pass[np++] = jump(&a, JNE32_K, R4, 0, (int32_t)port); /* destination port */
	if (stamp) {
		emit(&a, BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_ktime_get_ns);
		emit(&a, BPF_ALU64 | BPF_MOV | BPF_X, R7, R0, 0, 0);
		emit(&a, BPF_ALU64 | BPF_MOV | BPF_X, R1, R6, 0, 0);
		emit(&a, BPF_ALU64 | BPF_MOV | BPF_K, R2, 0, 0, -(int32_t)UXF_META_LEN);
		emit(&a, BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_xdp_adjust_meta);
		redir[nr++] = jump(&a, BPF_JMP | BPF_JNE | BPF_K, R0, 0, 0); /* no room: no stamp */
		emit(&a, LDX(BPF_W), R2, R6, MD_DATA_META, 0);
		emit(&a, LDX(BPF_W), R3, R6, MD_DATA, 0);
		emit(&a, BPF_ALU64 | BPF_MOV | BPF_X, R4, R2, 0, 0);
		emit(&a, BPF_ALU64 | BPF_ADD | BPF_K, R4, 0, 0, (int32_t)UXF_META_LEN);
		redir[nr++] = jump(&a, BPF_JMP | BPF_JGT | BPF_X, R4, R3, 0);
		emit(&a, BPF_STX | BPF_MEM | BPF_DW, R2, R7, 0, 0);
		emit(&a, BPF_ALU64 | BPF_XOR | BPF_K, R7, 0, 0, -1);
		emit(&a, BPF_STX | BPF_MEM | BPF_DW, R2, R7, 8, 0);
	}
	land(&a, redir, nr);
	emit(&a, BPF_LD | BPF_IMM | BPF_DW, R1, BPF_PSEUDO_MAP_FD, 0, map_fd);
	emit(&a, 0, 0, 0, 0, 0); /* second half of the 64-bit immediate */
	emit(&a, LDX(BPF_W), R2, R6, MD_RX_QUEUE, 0);
	emit(&a, BPF_ALU64 | BPF_MOV | BPF_K, R3, 0, 0, miss_action);
	emit(&a, BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_redirect_map);
	emit(&a, BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
	land(&a, pass, np);
	emit(&a, BPF_ALU64 | BPF_MOV | BPF_K, R0, 0, 0, XDP_PASS);
	emit(&a, BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
	return a.n <= UXF_PROG_MAX ? a.n : 0;
}

/* ---- the route answer ------------------------------------------------------ */

int uxf_parse_route(const void *buf, size_t len, int *oif, uint32_t *gateway, unsigned *type)
{
	/* nlmsghdr is 4-byte aligned in the kernel's answer; NLMSG_* keep that */
	const struct nlmsghdr *nh = buf;
	int left = len > INT32_MAX ? INT32_MAX : (int)len;
	for (; NLMSG_OK(nh, left); nh = NLMSG_NEXT(nh, left)) {
		if (nh->nlmsg_type == NLMSG_ERROR) {
			if (nh->nlmsg_len < NLMSG_LENGTH(sizeof(struct nlmsgerr)))
				return -EBADMSG;
			const struct nlmsgerr *e = NLMSG_DATA(nh);
			if (e->error)
				return e->error < 0 ? e->error : -e->error;
			continue; /* an acknowledgement */
		}
		if (nh->nlmsg_type != RTM_NEWROUTE ||
		    nh->nlmsg_len < NLMSG_LENGTH(sizeof(struct rtmsg)))
			continue;
		const struct rtmsg *rt = NLMSG_DATA(nh);
		if (rt->rtm_family != AF_INET)
			continue;
		*oif = 0;
		*gateway = 0;
		*type = rt->rtm_type;
		int alen = (int)RTM_PAYLOAD(nh);
		for (const struct rtattr *a = RTM_RTA(rt); RTA_OK(a, alen); a = RTA_NEXT(a, alen)) {
			if (a->rta_type == RTA_OIF && RTA_PAYLOAD(a) >= sizeof(int))
				memcpy(oif, RTA_DATA(a), sizeof(int));
			else if (a->rta_type == RTA_GATEWAY && RTA_PAYLOAD(a) == 4)
				memcpy(gateway, RTA_DATA(a), 4);
		}
		return 0;
	}
	return -EBADMSG;
}
