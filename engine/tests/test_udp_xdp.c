/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the udp probe's AF_XDP path: frames and checksums, the filter
 * program (run here by a small interpreter of the instructions it uses, and, when
 * the kernel lets this process load it, by the kernel itself through
 * BPF_PROG_TEST_RUN), the route-answer parser, the rings and the frame stack.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/bpf.h>
#include <linux/rtnetlink.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tap.h"
#include "udp_xdp.h"
#include "udp_xdp_frame.h"
#include "udp_xdp_ring.h"

/* ---- a reference checksum: 16-bit big-endian words, the RFC 1071 way ------------ */

static uint16_t ref_csum(const uint8_t *p, size_t len, uint32_t start)
{
	uint32_t s = start;
	for (size_t i = 0; i + 1 < len; i += 2)
		s += (uint32_t)(p[i] << 8 | p[i + 1]);
	if (len & 1)
		s += (uint32_t)(p[len - 1] << 8);
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

static uint16_t be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

/* The UDP checksum a receiver checks: over pseudo header + UDP header + data is 0. */
static bool udp_csum_ok(const uint8_t *f)
{
	size_t ulen = be16(f + 38);
	uint32_t pseudo = 17u + (uint32_t)ulen;
	for (int i = 26; i < 34; i += 2)
		pseudo += be16(f + i);
	return ref_csum(f + 34, ulen, pseudo) == 0;
}

static void test_csum(void)
{
	/* RFC 1071's example: 0001 f203 f4f5 f6f7 sums to ddf2 */
	const uint8_t ex[8] = { 0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7 };
	uint16_t c = uxf_csum_fold(uxf_csum_add(0, ex, sizeof(ex)));
	uint8_t b[2];
	memcpy(b, &c, 2); /* stored as-is: network order in memory */
	CHECK_EQ_U(be16(b), 0x220d);
	/* any length, odd or even, any start (split sums add up) */
	uint8_t buf[301];
	srand(7);
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)rand();
	for (size_t len = 0; len <= sizeof(buf); len += 37) {
		c = uxf_csum_fold(uxf_csum_add(0, buf, len));
		memcpy(b, &c, 2);
		CHECK_EQ_U(be16(b), ref_csum(buf, len, 0));
		if (len >= 12 && len % 2 == 0) {
			uint64_t s = uxf_csum_add(uxf_csum_add(0, buf, 12), buf + 12, len - 12);
			CHECK_EQ_U(uxf_csum_fold(s), c);
		}
	}
}

static const struct uxf_end A = { { 0x02, 0, 0, 0, 0, 0x0a }, 0, 0 };
static const struct uxf_end B = { { 0x02, 0, 0, 0, 0, 0x0b }, 0, 0 };

static void ends(struct uxf_end *a, struct uxf_end *b)
{
	*a = A;
	*b = B;
	a->ip = inet_addr("10.231.0.2");
	b->ip = inet_addr("10.231.0.1");
	a->port = htons(40000);
	b->port = htons(7301);
}

static size_t sample_frame(uint8_t *f, size_t payload)
{
	struct uxf_end a, b;
	ends(&a, &b);
	size_t n = uxf_build(f, &a, &b, 0x1234, payload);
	for (size_t i = 0; i < payload; i++)
		f[UXF_HDRS + i] = i < 64 ? (uint8_t)(i * 7 + 1) : 0;
	uxf_udp_csum(f, payload < 64 ? payload : 64);
	return n;
}

static void test_build_parse(void)
{
	uint8_t f[2048];
	memset(f, 0xee, sizeof(f));
	size_t n = sample_frame(f, 100);
	CHECK_EQ_U(n, UXF_HDRS + 100);
	CHECK_EQ_U(be16(f + 12), 0x0800);
	CHECK_EQ_U(f[14], 0x45);
	CHECK_EQ_U(be16(f + 16), 20 + 8 + 100);
	CHECK_EQ_U(be16(f + 18), 0x1234);
	CHECK_EQ_U(be16(f + 20), 0x4000); /* DF, no fragment */
	CHECK_EQ_U(f[22], UXF_TTL);
	CHECK_EQ_U(f[23], 17);
	CHECK_EQ_U(ref_csum(f + 14, 20, 0), 0); /* the IPv4 header checksum checks */
	CHECK(udp_csum_ok(f));
	/* summing only the nonzero head equals summing it all when the tail is zero */
	uint8_t g[2048];
	memcpy(g, f, n);
	uxf_udp_csum(g, 100);
	CHECK(memcmp(f, g, n) == 0);
	/* an odd payload length */
	size_t n2 = sample_frame(g, 65);
	CHECK(udp_csum_ok(g) && n2 == UXF_HDRS + 65);

	struct uxf_frame fr;
	CHECK_EQ_U(uxf_parse(f, n, &fr), UXF_OK);
	struct uxf_end a, b;
	ends(&a, &b);
	CHECK(memcmp(fr.src.mac, a.mac, 6) == 0 && memcmp(fr.dst.mac, b.mac, 6) == 0);
	CHECK(fr.src.ip == a.ip && fr.dst.ip == b.ip);
	CHECK(fr.src.port == a.port && fr.dst.port == b.port);
	CHECK_EQ_U(fr.payload_off, UXF_HDRS);
	CHECK_EQ_U(fr.payload_len, 100);
	CHECK_EQ_U(fr.ip_len, 128);
	/* trailing bytes after the IPv4 packet (Ethernet padding) are allowed */
	CHECK_EQ_U(uxf_parse(f, n + 10, &fr), UXF_OK);
	CHECK_EQ_U(fr.payload_len, 100);
	/* never beyond len */
	CHECK_EQ_U(uxf_parse(f, n - 1, &fr), UXF_MALFORMED);
	CHECK_EQ_U(uxf_parse(f, UXF_HDRS - 1, &fr), UXF_NOT_IPV4_UDP);
	CHECK_EQ_U(uxf_parse(f, 0, &fr), UXF_NOT_IPV4_UDP);

	struct {
		size_t at;
		uint8_t val;
		enum uxf_verdict v;
	} bad[] = {
		{ 12, 0x86, UXF_NOT_IPV4_UDP }, /* ethertype IPv6 */
		{ 13, 0x06, UXF_NOT_IPV4_UDP }, /* ARP */
		{ 14, 0x46, UXF_NOT_IPV4_UDP }, /* IPv4 options */
		{ 14, 0x65, UXF_NOT_IPV4_UDP }, /* version 6 */
		{ 20, 0x60, UXF_NOT_IPV4_UDP }, /* DF + more fragments */
		{ 21, 0x01, UXF_NOT_IPV4_UDP }, /* fragment offset */
		{ 23, 6, UXF_NOT_IPV4_UDP },	/* TCP */
		{ 16, 0x08, UXF_MALFORMED },	/* IP length > frame */
		{ 17, 20, UXF_MALFORMED },	/* IP length < IP + UDP headers */
		{ 38, 0x08, UXF_MALFORMED },	/* UDP length > IP payload */
		{ 39, 4, UXF_MALFORMED },	/* UDP length < 8 */
		{ 26, 11, UXF_MALFORMED },	/* source changed: IP checksum wrong */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memcpy(g, f, n);
		if (bad[i].at == 38 || bad[i].at == 39)
			g[38] = 0;
		if (bad[i].at == 16 || bad[i].at == 17)
			g[16] = 0;
		g[bad[i].at] = bad[i].val;
		if (bad[i].at == 16 || bad[i].at == 17) { /* a valid header checksum for it */
			memset(g + 24, 0, 2);
			uint16_t c = uxf_csum_fold(uxf_csum_add(0, g + 14, 20));
			memcpy(g + 24, &c, 2);
		}
		enum uxf_verdict v = uxf_parse(g, n, &fr);
		if (v != bad[i].v)
			fprintf(stderr, "bad frame %zu: byte %zu = %#x\n", i, bad[i].at, bad[i].val);
		CHECK_EQ_U(v, bad[i].v);
	}
}

static void test_unicast_and_reply(void)
{
	uint8_t f[256], g[256];
	size_t n = sample_frame(f, 100);
	struct uxf_frame fr;
	CHECK_EQ_U(uxf_parse(f, n, &fr), UXF_OK);
	CHECK(uxf_unicast_source(&fr));
	const char *martians[] = { "0.1.2.3", "127.0.0.1", "224.0.0.1", "239.1.1.1",
				   "240.0.0.1", "255.255.255.255" };
	for (size_t i = 0; i < sizeof(martians) / sizeof(martians[0]); i++) {
		struct uxf_frame m = fr;
		m.src.ip = inet_addr(martians[i]);
		CHECK(!uxf_unicast_source(&m));
	}
	struct uxf_frame m = fr;
	m.src.mac[0] |= 1; /* a group MAC */
	CHECK(!uxf_unicast_source(&m));

	memcpy(g, f, n);
	uxf_make_reply(g, &fr);
	struct uxf_frame r;
	CHECK_EQ_U(uxf_parse(g, n, &r), UXF_OK);
	CHECK(memcmp(r.src.mac, fr.dst.mac, 6) == 0 && memcmp(r.dst.mac, fr.src.mac, 6) == 0);
	CHECK(r.src.ip == fr.dst.ip && r.dst.ip == fr.src.ip);
	CHECK(r.src.port == fr.dst.port && r.dst.port == fr.src.port);
	CHECK_EQ_U(r.payload_len, fr.payload_len);
	CHECK_EQ_U(r.ip_len, fr.ip_len);
	CHECK(memcmp(g + UXF_HDRS, f + UXF_HDRS, 100) == 0);
	CHECK(udp_csum_ok(g));
	CHECK_EQ_U(ref_csum(g + 14, 20, 0), 0);
	/* a request whose UDP checksum was left partial (veth offload) still gets a
	 * correct reply: the reply's checksum is computed from scratch */
	memcpy(g, f, n);
	g[40] = 0x12;
	g[41] = 0x34;
	g[22] = 3; /* and any TTL */
	memset(g + 24, 0, 2);
	uint16_t c = uxf_csum_fold(uxf_csum_add(0, g + 14, 20));
	memcpy(g + 24, &c, 2);
	CHECK_EQ_U(uxf_parse(g, n, &r), UXF_OK);
	uxf_make_reply(g, &r);
	CHECK(udp_csum_ok(g));
	CHECK_EQ_U(g[22], UXF_TTL);
}

/* ---- the filter program, interpreted ---------------------------------------------- */

#define CTX_TAG 0xc0ffee00c0ffee00ULL
#define TEST_MAP_FD 42

struct vm {
	uint8_t *lo, *hi;	/* the packet buffer: headroom + frame */
	uint8_t *meta, *data, *end;
	uint32_t rx_queue;
	bool map_has_queue, meta_fails;
	/* what the program did */
	bool redirect_called, bad_access;
	uint64_t key, flags, map;
	unsigned steps;
};

static bool in_bounds(const struct vm *m, uint64_t addr, unsigned size)
{
	uintptr_t a = (uintptr_t)addr;
	return a >= (uintptr_t)m->meta && a + size <= (uintptr_t)m->end;
}

static uint64_t load(struct vm *m, uint64_t addr, unsigned size)
{
	if (!in_bounds(m, addr, size)) {
		m->bad_access = true;
		return 0;
	}
	const void *p = (const void *)(uintptr_t)addr;
	uint8_t v8;
	uint16_t v16;
	uint32_t v32;
	uint64_t v64;
	switch (size) { /* host byte order, as the machine's load does */
	case 1: memcpy(&v8, p, 1); return v8;
	case 2: memcpy(&v16, p, 2); return v16;
	case 4: memcpy(&v32, p, 4); return v32;
	default: memcpy(&v64, p, 8); return v64;
	}
}

static int size_of(uint8_t code)
{
	switch (BPF_SIZE(code)) {
	case BPF_B: return 1;
	case BPF_H: return 2;
	case BPF_W: return 4;
	default: return 8;
	}
}

/* Run prog; returns r0 at exit, or -1 on an instruction this interpreter does not know. */
static int64_t run(const struct bpf_insn *p, size_t n, struct vm *m)
{
	uint64_t r[11] = { 0 };
	r[1] = CTX_TAG;
	size_t pc = 0;
	while (pc < n && m->steps++ < 1000) {
		const struct bpf_insn *i = &p[pc];
		uint8_t cls = BPF_CLASS(i->code), op = BPF_OP(i->code);
		uint64_t src = BPF_SRC(i->code) == BPF_X ? r[i->src_reg] : (uint64_t)(int64_t)i->imm;
		pc++;
		if (cls == BPF_ALU64 || cls == BPF_ALU) {
			uint64_t d = r[i->dst_reg];
			switch (op) {
			case BPF_MOV: d = src; break;
			case BPF_ADD: d += src; break;
			case BPF_AND: d &= src; break;
			case BPF_XOR: d ^= src; break;
			default: return -1;
			}
			r[i->dst_reg] = cls == BPF_ALU ? (uint32_t)d : d;
		} else if (cls == BPF_LDX && BPF_MODE(i->code) == BPF_MEM) {
			if (r[i->src_reg] == CTX_TAG) { /* struct xdp_md: pointers */
				if (BPF_SIZE(i->code) != BPF_W)
					return -1;
				switch (i->off) {
				case 0: r[i->dst_reg] = (uintptr_t)m->data; break;
				case 4: r[i->dst_reg] = (uintptr_t)m->end; break;
				case 8: r[i->dst_reg] = (uintptr_t)m->meta; break;
				case 16: r[i->dst_reg] = m->rx_queue; break;
				default: return -1;
				}
			} else {
				r[i->dst_reg] = load(m, r[i->src_reg] + (uint64_t)(int64_t)i->off,
						     (unsigned)size_of(i->code));
			}
		} else if (cls == BPF_STX && BPF_MODE(i->code) == BPF_MEM) {
			uint64_t a = r[i->dst_reg] + (uint64_t)(int64_t)i->off;
			unsigned sz = (unsigned)size_of(i->code);
			if (!in_bounds(m, a, sz) || sz != 8) {
				m->bad_access = true;
				return -1;
			}
			memcpy((void *)(uintptr_t)a, &r[i->src_reg], 8);
		} else if (cls == BPF_LD && i->code == (BPF_LD | BPF_IMM | BPF_DW)) {
			if (pc >= n)
				return -1;
			r[i->dst_reg] = (uint32_t)i->imm | (uint64_t)(uint32_t)p[pc].imm << 32;
			if (i->src_reg == BPF_PSEUDO_MAP_FD)
				m->map = r[i->dst_reg];
			pc++;
		} else if ((cls == BPF_JMP || cls == BPF_JMP32) && op == BPF_EXIT) {
			return (int64_t)r[0];
		} else if (cls == BPF_JMP && op == BPF_CALL) {
			switch (i->imm) {
			case BPF_FUNC_ktime_get_ns:
				r[0] = 123456789012ULL;
				break;
			case BPF_FUNC_xdp_adjust_meta: {
				int64_t delta = (int64_t)r[2];
				uint8_t *nm = m->meta + delta;
				if (m->meta_fails || nm < m->lo || nm > m->data || (m->data - nm) % 4) {
					r[0] = (uint64_t)-EACCES;
				} else {
					m->meta = nm;
					r[0] = 0;
				}
				break;
			}
			case BPF_FUNC_redirect_map:
				m->redirect_called = true;
				m->map = r[1];
				m->key = r[2];
				m->flags = r[3];
				r[0] = m->map_has_queue ? XDP_REDIRECT : r[3] & 3;
				break;
			default:
				return -1;
			}
			/* caller-saved registers are clobbered */
			r[1] = r[2] = r[3] = r[4] = r[5] = 0xdeadbeef;
		} else if (cls == BPF_JMP || cls == BPF_JMP32) {
			uint64_t d = r[i->dst_reg], s = src;
			if (cls == BPF_JMP32) {
				d = (uint32_t)d;
				s = (uint32_t)s;
			}
			bool t;
			switch (op) {
			case BPF_JNE: t = d != s; break;
			case BPF_JGT: t = d > s; break;
			default: return -1;
			}
			if (t)
				pc += (size_t)(int64_t)i->off;
		} else {
			return -1;
		}
	}
	return -1;
}

struct prog_case {
	const char *what;
	int at;		/* byte to change (-1: none) */
	uint8_t val;
	size_t len;	/* frame length (0: whole) */
	bool match;
};

static void test_filter_interpreted(void)
{
	struct uxf_end a, b;
	ends(&a, &b);
	const struct prog_case cases[] = {
		{ "the probe's flow", -1, 0, 0, true },
		{ "other port", 37, 0x99, 0, false },
		{ "other address", 33, 9, 0, false },
		{ "TCP", 23, 6, 0, false },
		{ "ARP", 13, 0x06, 0, false },
		{ "IPv4 options", 14, 0x46, 0, false },
		{ "a fragment", 21, 0x08, 0, false },
		{ "more fragments", 20, 0x20, 0, false },
		{ "DF only", 20, 0x40, 0, true },
		{ "shorter than the headers", -1, 0, UXF_HDRS - 1, false },
		{ "headers only", -1, 0, UXF_HDRS, true },
	};
	for (int stamp = 0; stamp < 2; stamp++) {
		struct bpf_insn prog[UXF_PROG_MAX];
		size_t n = uxf_filter_prog(prog, b.ip, b.port, stamp, TEST_MAP_FD, XDP_PASS);
		CHECK(n > 0 && n <= UXF_PROG_MAX);
		CHECK_EQ_U(prog[n - 1].code, BPF_JMP | BPF_EXIT);
		/* every jump lands inside the program */
		for (size_t i = 0; i < n; i++) {
			uint8_t cls = BPF_CLASS(prog[i].code), op = BPF_OP(prog[i].code);
			if ((cls == BPF_JMP || cls == BPF_JMP32) && op != BPF_CALL && op != BPF_EXIT)
				CHECK((int64_t)i + 1 + prog[i].off >= 0 &&
				      (int64_t)i + 1 + prog[i].off < (int64_t)n);
		}
		for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
			for (int fails = 0; fails <= stamp; fails++) {
				const int failed_before = tap_failed;
				uint8_t buf[256 + 512];
				memset(buf, 0, sizeof(buf));
				uint8_t *f = buf + 256;
				size_t len = sample_frame(f, 100);
				if (cases[k].at >= 0)
					f[cases[k].at] = cases[k].val;
				if (cases[k].len)
					len = cases[k].len;
				struct vm m = { .lo = buf, .hi = buf + sizeof(buf), .meta = f, .data = f,
						.end = f + len, .rx_queue = 3, .map_has_queue = false,
						.meta_fails = fails };
				int64_t rc = run(prog, n, &m);
				if (cases[k].match) {
					CHECK_EQ_U(rc, XDP_PASS); /* the miss action: no socket in the map */
					CHECK(m.redirect_called);
					CHECK_EQ_U(m.key, 3);
					CHECK_EQ_U(m.flags, XDP_PASS);
					CHECK_EQ_U(m.map, TEST_MAP_FD);
					m.map_has_queue = true;
					m.meta = m.data;
					m.redirect_called = false;
					CHECK_EQ_U(run(prog, n, &m), XDP_REDIRECT);
				} else {
					CHECK_EQ_U(rc, XDP_PASS);
					CHECK(!m.redirect_called);
				}
				CHECK(!m.bad_access);
				/* the stamp and its complement in the metadata, when asked and possible */
				bool stamped = cases[k].match && stamp && !fails;
				CHECK_EQ_U(m.data - m.meta, stamped ? UXF_META_LEN : 0);
				if (stamped) {
					uint64_t meta[2];
					memcpy(meta, f - UXF_META_LEN, sizeof(meta));
					CHECK_EQ_U(meta[0], 123456789012ULL);
					CHECK_EQ_U(meta[1], ~123456789012ULL);
				}
				if (tap_failed != failed_before)
					fprintf(stderr, "  case '%s' stamp %d meta fails %d\n",
						cases[k].what, stamp, fails);
			}
		}
	}
	/* the program the probe's own miss action uses for tests: XDP_DROP */
	struct bpf_insn prog[UXF_PROG_MAX];
	size_t n = uxf_filter_prog(prog, b.ip, b.port, false, TEST_MAP_FD, XDP_DROP);
	uint8_t buf[512];
	size_t len = sample_frame(buf + 256, 100);
	struct vm m = { .lo = buf, .meta = buf + 256, .data = buf + 256, .end = buf + 256 + len };
	CHECK_EQ_U(run(prog, n, &m), XDP_DROP);
}

/* ---- the filter program, run by the kernel ------------------------------------------ */

static void test_filter_kernel(void)
{
	int map = uxdp_make_xskmap(1);
	if (map < 0) {
		printf("# skipped: the kernel's run of the filter program (XSKMAP: %s; needs root)\n",
		       strerror(-map));
		return;
	}
	struct uxf_end a, b;
	ends(&a, &b);
	for (int stamp = 0; stamp < 2; stamp++) {
		char why[200];
		/* miss action DROP: with no socket in the map, DROP means "matched" */
		int prog = uxdp_load_filter(b.ip, b.port, stamp, map, XDP_DROP, why, sizeof(why));
		if (prog < 0)
			fprintf(stderr, "the kernel refused the filter program: %s\n", why);
		CHECK(prog >= 0);
		if (prog < 0)
			continue;
		struct {
			int at;
			uint8_t val;
			uint32_t expect;
		} cases[] = {
			{ -1, 0, XDP_DROP }, { 37, 0x99, XDP_PASS }, { 33, 9, XDP_PASS },
			{ 23, 6, XDP_PASS }, { 13, 0x06, XDP_PASS }, { 21, 0x08, XDP_PASS },
		};
		for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
			uint8_t f[256];
			size_t len = sample_frame(f, 100);
			if (cases[k].at >= 0)
				f[cases[k].at] = cases[k].val;
			union bpf_attr at;
			memset(&at, 0, sizeof(at));
			at.test.prog_fd = (uint32_t)prog;
			at.test.data_in = (uintptr_t)f;
			at.test.data_size_in = (uint32_t)len;
			at.test.repeat = 1;
			long r = syscall(__NR_bpf, BPF_PROG_TEST_RUN, &at, sizeof(at));
			CHECK_EQ_U(r, 0);
			CHECK_EQ_U(at.test.retval, cases[k].expect);
		}
		close(prog);
	}
	close(map);
}

/* ---- the route answer --------------------------------------------------------------- */

static size_t put_attr(uint8_t *p, unsigned short type, const void *v, size_t len)
{
	struct rtattr a = { .rta_len = (unsigned short)RTA_LENGTH(len), .rta_type = type };
	memcpy(p, &a, sizeof(a));
	memcpy(p + RTA_LENGTH(0), v, len);
	return RTA_SPACE(len);
}

static size_t route_msg(uint8_t *buf, unsigned char type, int oif, uint32_t gw)
{
	struct nlmsghdr nh = { .nlmsg_type = RTM_NEWROUTE };
	struct rtmsg rt = { .rtm_family = AF_INET, .rtm_dst_len = 32, .rtm_type = type };
	size_t off = NLMSG_LENGTH(sizeof(rt));
	memcpy(buf + NLMSG_HDRLEN, &rt, sizeof(rt));
	uint32_t dst = inet_addr("10.0.0.9");
	off = NLMSG_ALIGN(off);
	off += put_attr(buf + off, RTA_DST, &dst, 4);
	if (gw)
		off += put_attr(buf + off, RTA_GATEWAY, &gw, 4);
	off += put_attr(buf + off, RTA_OIF, &oif, sizeof(oif));
	nh.nlmsg_len = (uint32_t)off;
	memcpy(buf, &nh, sizeof(nh));
	return off;
}

static void test_route(void)
{
	_Alignas(struct nlmsghdr) uint8_t buf[512];
	int oif = -1;
	uint32_t gw = 1;
	unsigned type = 0;
	size_t n = route_msg(buf, RTN_UNICAST, 7, inet_addr("10.0.0.1"));
	CHECK_EQ_U(uxf_parse_route(buf, n, &oif, &gw, &type), 0);
	CHECK_EQ_U(oif, 7);
	CHECK_EQ_U(gw, inet_addr("10.0.0.1"));
	CHECK_EQ_U(type, RTN_UNICAST);
	n = route_msg(buf, RTN_LOCAL, 1, 0);
	CHECK_EQ_U(uxf_parse_route(buf, n, &oif, &gw, &type), 0);
	CHECK_EQ_U(gw, 0);
	CHECK_EQ_U(type, RTN_LOCAL);
	/* cut short: no route */
	CHECK_EQ_U(uxf_parse_route(buf, 10, &oif, &gw, &type), -EBADMSG);
	CHECK_EQ_U(uxf_parse_route(buf, 0, &oif, &gw, &type), -EBADMSG);
	/* the kernel's error */
	struct nlmsghdr nh = { .nlmsg_len = NLMSG_LENGTH(sizeof(struct nlmsgerr)),
			       .nlmsg_type = NLMSG_ERROR };
	struct nlmsgerr e = { .error = -ENETUNREACH };
	memcpy(buf, &nh, sizeof(nh));
	memcpy(buf + NLMSG_HDRLEN, &e, sizeof(e));
	CHECK_EQ_U(uxf_parse_route(buf, nh.nlmsg_len, &oif, &gw, &type), -ENETUNREACH);
	/* an attribute claiming more than the message holds is not read */
	n = route_msg(buf, RTN_UNICAST, 7, 0);
	struct rtattr last;
	size_t at = n - RTA_SPACE(sizeof(int));
	memcpy(&last, buf + at, sizeof(last));
	last.rta_len = 200;
	memcpy(buf + at, &last, sizeof(last));
	oif = -1;
	CHECK_EQ_U(uxf_parse_route(buf, n, &oif, &gw, &type), 0);
	CHECK_EQ_U(oif, 0);
}

/* ---- rings and the frame stack ------------------------------------------------------ */

static void test_rings(void)
{
	/* start near the wrap of the 32-bit indices */
	uint32_t prod = UINT32_MAX - 5, cons = UINT32_MAX - 5, flags = 0;
	uint64_t ring[8];
	struct uxr p = { .producer = &prod, .consumer = &cons, .flags = &flags, .ring = ring,
			 .size = 8 };
	struct uxr c = p;
	uxr_init_prod(&p);
	uxr_init_cons(&c);
	CHECK_EQ_U(uxr_space(&p), 8);
	CHECK_EQ_U(uxr_avail(&c), 0);
	uint64_t next = 100, want = 100;
	for (int round = 0; round < 10; round++) {
		uint32_t k = uxr_space(&p) < 5 ? uxr_space(&p) : 5;
		for (uint32_t i = 0; i < k; i++)
			ring[uxr_prod_slot(&p, i)] = next++;
		uxr_submit(&p, k);
		CHECK_EQ_U(prod, p.local);
		uint32_t av = uxr_avail(&c);
		CHECK_EQ_U(av + uxr_space(&p), 8);
		uint32_t take = av < 3 ? av : 3;
		for (uint32_t i = 0; i < take; i++)
			CHECK_EQ_U(ring[uxr_cons_slot(&c, i)], want++);
		uxr_release(&c, take);
		CHECK_EQ_U(cons, c.local);
	}
	CHECK(prod < 100); /* wrapped */
	CHECK_EQ_U(uxr_avail(&c) + uxr_space(&p), 8);
	flags = 1;
	CHECK(uxr_needs_wakeup(&p, 1));

	uint64_t st[3];
	struct uxf_stack s = { st, 0, 3 };
	uint64_t v = 0;
	CHECK(!uxf_pop(&s, &v));
	CHECK(uxf_push(&s, 1) && uxf_push(&s, 2) && uxf_push(&s, 3));
	CHECK(!uxf_push(&s, 4)); /* full: refused, nothing overwritten */
	CHECK(uxf_pop(&s, &v) && v == 3);
	CHECK(uxf_pop(&s, &v) && v == 2);
	CHECK(uxf_pop(&s, &v) && v == 1);
	CHECK(!uxf_pop(&s, &v));
}

int main(void)
{
	test_csum();
	test_build_parse();
	test_unicast_and_reply();
	test_filter_interpreted();
	test_filter_kernel();
	test_route();
	test_rings();
	return tap_done("udp_xdp");
}
