/* SPDX-License-Identifier: MIT */
/* Unit tests of the udp probe's pure parts: wire format, token bucket, sequence tracker. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "tap.h"
#include "udp_proto.h"

static void test_packet(void)
{
	unsigned char b[128];
	memset(b, 0xee, sizeof(b));
	uint64_t tok = udp_session_token("abc");
	CHECK(tok != 0);
	CHECK(tok != udp_session_token("abd"));
	struct udp_pkt p = { .type = UDP_TYPE_PING, .flags = 1, .session = tok, .seq = 42,
			     .send_mono = 7, .send_rt = 8, .r_rx_ts = 9, .r_app = 10, .r_send = 11 };
	udp_pkt_encode(b, &p);
	CHECK(memcmp(b, "RTLU", 4) == 0);
	struct udp_pkt q;
	CHECK_EQ_U(udp_pkt_decode(b, UDP_HDR_LEN, tok, UDP_TYPE_PING, &q), UDP_OK);
	CHECK_EQ_U(q.seq, 42);
	CHECK_EQ_U(q.send_mono, 7);
	CHECK_EQ_U(q.r_send, 11);
	CHECK_EQ_U(q.flags, 1);
	CHECK_EQ_U(udp_pkt_decode(b, UDP_HDR_LEN - 1, tok, UDP_TYPE_PING, &q), UDP_SHORT);
	CHECK_EQ_U(udp_pkt_decode(b, 0, tok, UDP_TYPE_PING, &q), UDP_SHORT);
	CHECK_EQ_U(udp_pkt_decode(b, sizeof(b), tok + 1, UDP_TYPE_PING, &q), UDP_BAD_SESSION);
	CHECK_EQ_U(udp_pkt_decode(b, sizeof(b), tok, UDP_TYPE_REPLY, &q), UDP_BAD_TYPE);
	b[4] = 2;
	CHECK_EQ_U(udp_pkt_decode(b, sizeof(b), tok, UDP_TYPE_PING, &q), UDP_BAD_VERSION);
	b[4] = 1;
	b[0] = 'X';
	CHECK_EQ_U(udp_pkt_decode(b, sizeof(b), tok, UDP_TYPE_PING, &q), UDP_BAD_MAGIC);
}

static void test_bucket(void)
{
	struct udp_bucket tb;
	udp_bucket_init(&tb, 1000, 10, 0); /* 1000/s, burst 10 */
	int ok = 0;
	for (int i = 0; i < 100; i++)
		ok += udp_bucket_take(&tb, 0);
	CHECK_EQ_U(ok, 10); /* the burst, then nothing at the same instant */
	CHECK(!udp_bucket_take(&tb, 500 * NS_PER_US)); /* half a token later */
	CHECK(udp_bucket_take(&tb, NS_PER_MS));	       /* one token per ms */
	CHECK(!udp_bucket_take(&tb, NS_PER_MS));
	/* over one second at 10 kHz offered: about 1000 pass (+ the refilled burst) */
	udp_bucket_init(&tb, 1000, 10, 0);
	ok = 0;
	for (uint64_t t = 0; t < NS_PER_SEC; t += 100 * NS_PER_US)
		ok += udp_bucket_take(&tb, t);
	CHECK(ok >= 1000 && ok <= 1010);
	/* a long idle time refills only up to the burst, without overflow */
	CHECK(udp_bucket_take(&tb, UINT64_MAX / 2));
	ok = 1;
	while (udp_bucket_take(&tb, UINT64_MAX / 2))
		ok++;
	CHECK_EQ_U(ok, 10);
}

static void test_seq(void)
{
	static struct udp_seq s;
	bool reo;
	CHECK_EQ_U(udp_seq_note(&s, 0, 0, &reo), SEQ_CURRENT);
	CHECK(!reo);
	CHECK_EQ_U(udp_seq_note(&s, 0, 0, &reo), SEQ_DUPLICATE);
	/* seq 1 timed out; seq 2 is outstanding; then 2 arrives, then 1 (late) */
	CHECK_EQ_U(udp_seq_note(&s, 2, 2, &reo), SEQ_CURRENT);
	CHECK(!reo);
	CHECK_EQ_U(udp_seq_note(&s, 1, 3, &reo), SEQ_LATE);
	CHECK(reo);
	CHECK_EQ_U(udp_seq_note(&s, 1, 3, &reo), SEQ_DUPLICATE);
	CHECK_EQ_U(udp_seq_note(&s, 9, 3, &reo), SEQ_BOGUS);
	/* slots are reused after UDP_SEEN_BITS sequence numbers */
	uint64_t far = 3 + UDP_SEEN_BITS;
	CHECK_EQ_U(udp_seq_note(&s, far, far, &reo), SEQ_CURRENT);
	CHECK_EQ_U(udp_seq_note(&s, 2, far, &reo), SEQ_TOO_OLD);
	CHECK_EQ_U(udp_seq_note(&s, far - 1, far + 1, &reo), SEQ_LATE);
}

static void test_addr(void)
{
	struct sockaddr_storage a;
	socklen_t l;
	char buf[80];
	CHECK_EQ_U(udp_parse_addr("10.1.2.3:7000", &a, &l), 0);
	CHECK_EQ_U(a.ss_family, AF_INET);
	udp_format_addr((struct sockaddr *)&a, buf, sizeof(buf));
	CHECK(strcmp(buf, "10.1.2.3:7000") == 0);
	CHECK_EQ_U(udp_parse_addr("[fd00::1]:9", &a, &l), 0);
	CHECK_EQ_U(a.ss_family, AF_INET6);
	udp_format_addr((struct sockaddr *)&a, buf, sizeof(buf));
	CHECK(strcmp(buf, "[fd00::1]:9") == 0);
	CHECK_EQ_U(udp_parse_addr("10.1.2.3", &a, &l), -EINVAL);
	CHECK_EQ_U(udp_parse_addr("10.1.2.3:70000", &a, &l), -EINVAL);
	CHECK_EQ_U(udp_parse_addr("host.example:80", &a, &l), -EINVAL);
	CHECK_EQ_U(udp_parse_addr("10.1.2.3:", &a, &l), -EINVAL);
}

static void test_addr_tag(void)
{
	struct sockaddr_storage a, b;
	socklen_t l;
	CHECK_EQ_U(udp_parse_addr("10.1.2.3:7000", &a, &l), 0);
	CHECK_EQ_U(udp_parse_addr("10.1.2.3:7000", &b, &l), 0);
	uint64_t t = udp_addr_tag((struct sockaddr *)&a);
	CHECK_EQ_U(t, udp_addr_tag((struct sockaddr *)&b));
	CHECK_EQ_U(udp_parse_addr("10.1.2.3:7001", &b, &l), 0); /* another port */
	CHECK(t != udp_addr_tag((struct sockaddr *)&b));
	CHECK_EQ_U(udp_parse_addr("10.1.2.4:7000", &b, &l), 0); /* another host */
	CHECK(t != udp_addr_tag((struct sockaddr *)&b));
	CHECK_EQ_U(udp_parse_addr("[fd00::1]:7000", &a, &l), 0);
	CHECK_EQ_U(udp_parse_addr("[fd00::2]:7000", &b, &l), 0);
	CHECK(udp_addr_tag((struct sockaddr *)&a) != udp_addr_tag((struct sockaddr *)&b));
}

int main(void)
{
	test_packet();
	test_bucket();
	test_seq();
	test_addr();
	test_addr_tag();
	return tap_done("udp");
}
