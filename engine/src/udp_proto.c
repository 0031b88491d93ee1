/* SPDX-License-Identifier: MIT */
#include "udp_proto.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "le_bytes.h"

uint64_t udp_session_token(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ULL;
	}
	return h ? h : 1;
}

void udp_pkt_encode(unsigned char *b, const struct udp_pkt *p)
{
	le_put32(b, UDP_MAGIC);
	b[4] = UDP_VERSION;
	b[5] = p->type;
	le_put16(b + 6, p->flags);
	le_put64(b + 8, p->session);
	le_put64(b + 16, p->seq);
	const bool reply = p->type == UDP_TYPE_REPLY;
	le_put64(b + 24, reply && (p->flags & UDP_FLAG_CARRY_TX) ? p->carry_tx_sw : p->send_mono);
	le_put64(b + 32, reply && (p->flags & UDP_FLAG_CARRY_HW) ? p->carry_hw_resid : p->send_rt);
	le_put64(b + 40, p->r_rx_ts);
	le_put64(b + 48, p->r_app);
	le_put64(b + 56, p->r_send);
}

enum udp_verdict udp_pkt_decode(const unsigned char *b, size_t len, uint64_t session,
				uint8_t type, struct udp_pkt *out)
{
	if (len < UDP_HDR_LEN)
		return UDP_SHORT;
	if (le_get32(b) != UDP_MAGIC)
		return UDP_BAD_MAGIC;
	if (b[4] != UDP_VERSION)
		return UDP_BAD_VERSION;
	if (le_get64(b + 8) != session)
		return UDP_BAD_SESSION;
	if (b[5] != type)
		return UDP_BAD_TYPE;
	out->type = b[5];
	out->flags = le_get16(b + 6);
	out->session = session;
	out->seq = le_get64(b + 16);
	out->send_mono = le_get64(b + 24);
	out->send_rt = le_get64(b + 32);
	const bool reply = out->type == UDP_TYPE_REPLY;
	out->carry_tx_sw = reply && (out->flags & UDP_FLAG_CARRY_TX) ? out->send_mono : 0;
	out->carry_hw_resid = reply && (out->flags & UDP_FLAG_CARRY_HW) ? out->send_rt : 0;
	out->r_rx_ts = le_get64(b + 40);
	out->r_app = le_get64(b + 48);
	out->r_send = le_get64(b + 56);
	return UDP_OK;
}

void udp_bucket_init(struct udp_bucket *b, uint64_t rate, uint64_t burst, uint64_t now_ns)
{
	b->rate = rate ? rate : 1;
	b->burst = burst ? burst : 1;
	b->credit = b->burst * NS_PER_SEC;
	b->last_ns = now_ns;
}

bool udp_bucket_take(struct udp_bucket *b, uint64_t now_ns)
{
	const uint64_t cap = b->burst * NS_PER_SEC;
	if (now_ns > b->last_ns) {
		uint64_t dt = now_ns - b->last_ns;
		/* dt * rate overflows only after ~5 h at 1M/s: clamp first */
		if (dt > cap / b->rate + 1)
			b->credit = cap;
		else
			b->credit += dt * b->rate;
		if (b->credit > cap)
			b->credit = cap;
		b->last_ns = now_ns;
	}
	if (b->credit < NS_PER_SEC)
		return false;
	b->credit -= NS_PER_SEC;
	return true;
}

enum udp_seq_kind udp_seq_note(struct udp_seq *s, uint64_t seq, uint64_t expected,
			       bool *reordered)
{
	*reordered = false;
	while (s->cleared_to <= expected) {
		uint64_t slot = s->cleared_to % UDP_SEEN_BITS;
		s->seen[slot / 64] &= ~(1ULL << (slot % 64));
		s->cleared_to++;
	}
	if (seq > expected)
		return SEQ_BOGUS;
	if (expected - seq >= UDP_SEEN_BITS)
		return SEQ_TOO_OLD;
	uint64_t slot = seq % UDP_SEEN_BITS;
	uint64_t bit = 1ULL << (slot % 64);
	if (s->seen[slot / 64] & bit)
		return SEQ_DUPLICATE;
	s->seen[slot / 64] |= bit;
	if (s->highest && seq + 1 < s->highest)
		*reordered = true;
	if (seq + 1 > s->highest)
		s->highest = seq + 1;
	return seq == expected ? SEQ_CURRENT : SEQ_LATE;
}

int udp_parse_addr(const char *s, struct sockaddr_storage *out, socklen_t *len)
{
	char host[64];
	const char *colon;
	memset(out, 0, sizeof(*out));
	if (s[0] == '[') {
		const char *end = strchr(s, ']');
		if (!end || end[1] != ':' || (size_t)(end - s - 1) >= sizeof(host))
			return -EINVAL;
		memcpy(host, s + 1, (size_t)(end - s - 1));
		host[end - s - 1] = '\0';
		colon = end + 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon || (size_t)(colon - s) >= sizeof(host))
			return -EINVAL;
		memcpy(host, s, (size_t)(colon - s));
		host[colon - s] = '\0';
	}
	char *e;
	errno = 0;
	unsigned long port = strtoul(colon + 1, &e, 10);
	if (errno || e == colon + 1 || *e || port > 65535)
		return -EINVAL;
	struct sockaddr_in *a4 = (struct sockaddr_in *)out;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)out;
	if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)port);
		*len = sizeof(*a4);
		return 0;
	}
	if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)port);
		*len = sizeof(*a6);
		return 0;
	}
	return -EINVAL;
}

uint64_t udp_addr_tag(const struct sockaddr *sa)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	const unsigned char *b = NULL;
	size_t n = 0;
	uint16_t port = 0;
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)sa;
		b = (const unsigned char *)&a->sin_addr;
		n = sizeof(a->sin_addr);
		port = a->sin_port;
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)sa;
		b = (const unsigned char *)&a->sin6_addr;
		n = sizeof(a->sin6_addr);
		port = a->sin6_port;
	}
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ULL;
	h = (h ^ (port & 0xff)) * 0x100000001b3ULL;
	h = (h ^ (port >> 8)) * 0x100000001b3ULL;
	return (h ^ sa->sa_family) * 0x100000001b3ULL;
}

void udp_format_addr(const struct sockaddr *sa, char *buf, size_t len)
{
	char h[INET6_ADDRSTRLEN] = "?";
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)sa;
		inet_ntop(AF_INET, &a->sin_addr, h, sizeof(h));
		snprintf(buf, len, "%s:%u", h, ntohs(a->sin_port));
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)sa;
		inet_ntop(AF_INET6, &a->sin6_addr, h, sizeof(h));
		snprintf(buf, len, "[%s]:%u", h, ntohs(a->sin6_port));
	} else {
		snprintf(buf, len, "?");
	}
}
