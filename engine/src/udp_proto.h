/* SPDX-License-Identifier: MIT */
/*
 * The rtlab UDP ping-pong wire format and the pure pieces of the `udp` probe
 * (packet encode/validate, session token, the reflector's token bucket, the
 * pinger's sequence tracker, address parsing). No system calls except in
 * udp_parse_addr (none either: numeric addresses only), so all of it is
 * unit-tested in tests/test_udp.c.
 *
 * Packet (all fields little-endian), UDP_HDR_LEN bytes, then padding up to
 * --size bytes (zeros):
 *
 *   0  u32 magic "RTLU"        24 u64 ping: send time, CLOCK_MONOTONIC   | reply: see below
 *   4  u8  version (1)         32 u64 ping: send time, CLOCK_REALTIME    | reply: see below
 *   5  u8  type 1 ping/2 reply 40 u64 reflector: kernel RX timestamp (REALTIME, 0: none)
 *   6  u16 flags               48 u64 reflector: application running (REALTIME)
 *   8  u64 session token       56 u64 reflector: just before send (REALTIME)
 *  16  u64 sequence number
 *
 * Flags: ping UDP_FLAG_WANT_CARRY: the pinger reads carried data. Reply
 * UDP_FLAG_RX_TS: offset 40 holds a kernel RX timestamp. A reflector's TX
 * timestamps of a reply are known only after it was sent, so they travel in the
 * NEXT reply to the same sender ("carried"), and only when the ping asked for it:
 *   UDP_FLAG_CARRY_TX: offset 24 = the reflector's software TX timestamp
 *       (REALTIME) of its reply to ping seq-1 of the same sender;
 *   UDP_FLAG_CARRY_HW: offset 32 = hardware TX timestamp of that reply minus
 *       hardware RX timestamp of ping seq-1 (ns, both on the reflector's PHC:
 *       t3 - t2 needs no clock conversion).
 * Without a carry flag a reply echoes offsets 24/32 of the ping. Compatibility:
 * a version-1 reflector that predates carrying ignores WANT_CARRY and echoes
 * (the pinger then counts no_carry and has no peer.tx/link/hw.wire); a pinger
 * that predates it never sets WANT_CARRY and gets the plain echo. So the version
 * stays 1: both old and new peers interoperate.
 */
#ifndef RTLAB_UDP_PROTO_H
#define RTLAB_UDP_PROTO_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "common.h"

#define UDP_MAGIC 0x554c5452u /* "RTLU" read as little-endian u32 */
#define UDP_VERSION 1u
#define UDP_HDR_LEN 64u
#define UDP_MAX_SIZE 9000u
#define UDP_TYPE_PING 1u
#define UDP_TYPE_REPLY 2u
#define UDP_FLAG_RX_TS 1u	    /* reply: reflector had a kernel RX timestamp */
#define UDP_FLAG_WANT_CARRY 2u	    /* ping: the pinger reads carried TX data */
#define UDP_FLAG_CARRY_TX 4u	    /* reply: carry_tx_sw valid (offset 24) */
#define UDP_FLAG_CARRY_HW 8u	    /* reply: carry_hw_resid valid (offset 32) */

struct udp_pkt {
	uint8_t type;
	uint16_t flags;
	uint64_t session;
	uint64_t seq;
	uint64_t send_mono;	/* offset 24 unless UDP_FLAG_CARRY_TX */
	uint64_t send_rt;	/* offset 32 unless UDP_FLAG_CARRY_HW */
	uint64_t carry_tx_sw;	/* reply with UDP_FLAG_CARRY_TX: offset 24 */
	uint64_t carry_hw_resid; /* reply with UDP_FLAG_CARRY_HW: offset 32 */
	uint64_t r_rx_ts;
	uint64_t r_app;
	uint64_t r_send;
};

enum udp_verdict {
	UDP_OK = 0,
	UDP_SHORT,	  /* fewer than UDP_HDR_LEN bytes */
	UDP_BAD_MAGIC,
	UDP_BAD_VERSION,
	UDP_BAD_SESSION,
	UDP_BAD_TYPE,
};

/* 64-bit session token of a --session string (FNV-1a; never 0). */
uint64_t udp_session_token(const char *s);

/* Write the header into buf (len >= UDP_HDR_LEN). Offsets 24/32 of a reply hold the
 * carried fields when their flag is set, else send_mono/send_rt. */
void udp_pkt_encode(unsigned char *buf, const struct udp_pkt *p);

/* Check and decode a received datagram of len bytes expected to be of type. */
enum udp_verdict udp_pkt_decode(const unsigned char *buf, size_t len, uint64_t session,
				uint8_t type, struct udp_pkt *out);

/*
 * Token bucket of the reflector: rate tokens per second, burst at most.
 * Integer arithmetic in nanoseconds; credit is kept in units of 1/1e9 token.
 */
struct udp_bucket {
	uint64_t rate;		/* tokens per second (>= 1) */
	uint64_t burst;		/* bucket size in tokens (>= 1) */
	uint64_t credit;	/* tokens * 1e9 */
	uint64_t last_ns;
};

void udp_bucket_init(struct udp_bucket *b, uint64_t rate, uint64_t burst, uint64_t now_ns);
/* Take one token at now_ns; false: over the rate (drop). */
bool udp_bucket_take(struct udp_bucket *b, uint64_t now_ns);

/*
 * The pinger's view of the replies. Sequence numbers start at 0 and the
 * pinger has at most one packet outstanding at a time (it waits for the
 * reply or the timeout before the next send), so a reply is:
 *   current:   seq == expected  -> an RTT sample
 *   late:      seq <  expected and not seen before (arrived after --timeout)
 *   duplicate: seq seen before
 *   reordered: a reply whose seq is lower than the highest seq received
 *              before it (late replies are reordered by definition too)
 *   bogus:     seq > expected (never sent)
 */
#define UDP_SEEN_BITS 65536u

struct udp_seq {
	uint64_t highest;	/* highest seq received + 1 (0: none yet) */
	uint64_t seen[UDP_SEEN_BITS / 64];
	uint64_t cleared_to;	/* slots of seqs < cleared_to belong to them */
};

enum udp_seq_kind { SEQ_CURRENT, SEQ_LATE, SEQ_DUPLICATE, SEQ_BOGUS, SEQ_TOO_OLD };

/* Classify a reply; *reordered is set when it arrived out of order. */
enum udp_seq_kind udp_seq_note(struct udp_seq *s, uint64_t seq, uint64_t expected,
			       bool *reordered);

/*
 * Parse "A.B.C.D:PORT" or "[v6]:PORT" (numeric only, no name lookup).
 * Returns 0 or -EINVAL.
 */
int udp_parse_addr(const char *s, struct sockaddr_storage *out, socklen_t *len) RL_WUR;

/* A 64-bit tag of a sender's address and port (to tell senders apart; not a secret). */
uint64_t udp_addr_tag(const struct sockaddr *sa);

/* Format an address as "A.B.C.D:PORT" / "[v6]:PORT". */
void udp_format_addr(const struct sockaddr *sa, char *buf, size_t len);

#endif
