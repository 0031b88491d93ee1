/* SPDX-License-Identifier: MIT */
/*
 * Kernel packet timestamps of the `udp` probe (SO_TIMESTAMPING,
 * Documentation/networking/timestamping.rst): software RX and TX, and hardware
 * RX/TX where the NIC has them, converted from the NIC's PTP hardware clock
 * (PHC) to CLOCK_REALTIME with a measured, extrapolated offset (phc.h).
 *
 * RX stamps come with each datagram (SCM_TIMESTAMPING: ts[0] software, ts[2]
 * hardware). TX stamps come back on the socket's error queue, one message per
 * stamp (SOF_TIMESTAMPING_OPT_TSONLY: no payload), matched to the send by the
 * key of SOF_TIMESTAMPING_OPT_ID (a per-socket counter of datagrams sent).
 * Each end keeps a small ring of its recent exchanges, keyed by that counter;
 * the values that need stamps arriving later (its own TX stamps, and the
 * peer's TX data carried in the next reply, udp_proto.h) are computed once
 * their inputs are all there (uts_take).
 *
 * Everything except uts_setup/uts_drain/uts_phc_refresh is pure and
 * unit-tested with control messages built as the kernel builds them
 * (tests/test_udp_ts.c).
 */
#ifndef RTLAB_UDP_TS_H
#define RTLAB_UDP_TS_H

#include <net/if.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "common.h"

/* --timestamps (requested) */
enum uts_kind { UTS_SOFTWARE, UTS_SOFTWARE_RX, UTS_HARDWARE, UTS_AUTO, UTS_NONE };
extern const char *const uts_kind_names[]; /* "software", "software-rx", "hardware", "auto", "none" */

/* what is in effect, per direction */
enum uts_eff { UTS_EFF_NONE, UTS_EFF_SOFTWARE, UTS_EFF_HARDWARE };
extern const char *const uts_eff_names[]; /* "none", "software", "hardware" */

/* ---- control messages (pure) ------------------------------------------ */

/* Stamps of one packet: software (CLOCK_REALTIME) and hardware (PHC) ns; 0: none. */
struct uts_stamps {
	uint64_t sw, hw;
};

/* The SCM_TIMESTAMPING of a received datagram. */
void uts_rx_parse(struct msghdr *mh, struct uts_stamps *out);

/* One error-queue message: a TX timestamp (SCM_TSTAMP_SND) with its OPT_ID key.
 * Returns 1 for a TX timestamp, 0 for anything else (other stamp types, errors). */
struct uts_txstamp {
	uint32_t key;
	struct uts_stamps ts;
};
int uts_err_parse(struct msghdr *mh, struct uts_txstamp *out);

/* ---- PHC -> CLOCK_REALTIME -------------------------------------------- */

/*
 * A linear model of PHC - CLOCK_REALTIME: off at REALTIME t_ref, changing by
 * rate_ppb (the two clocks' frequency difference, from the last two
 * measurements). A PHC not steered by phc2sys drifts by tens of ppm; the
 * model keeps the conversion error between measurements small, and every new
 * measurement checks the model (pred_err).
 */
struct uts_phc_model {
	uint64_t t_ref;		/* CLOCK_REALTIME of the measurement; 0: no model yet */
	int64_t off;		/* PHC - REALTIME at t_ref */
	int64_t rate_ppb;
	uint64_t unc;		/* the measurement's uncertainty */
	unsigned n;		/* measurements so far */
};

/* PHC time -> CLOCK_REALTIME with the model (0 stays 0). */
uint64_t uts_phc_to_rt(const struct uts_phc_model *m, uint64_t t_phc);

/* A new measurement (offset at REALTIME t, uncertainty unc) updates the model;
 * *pred_err = |predicted - measured| offset (0 for the first two). */
void uts_phc_update(struct uts_phc_model *m, uint64_t t, int64_t off, uint64_t unc,
		    uint64_t *pred_err);

/* The offset source: the real one is phc_measure() on /dev/ptpN; tests pass a fake. */
typedef int (*uts_offset_fn)(void *arg, int64_t *phc_minus_rt, uint64_t *unc,
			     const char **method);

/* Published by the main thread (uts_phc_refresh), read by the socket thread and the
 * reporter (seqlock). */
struct uts_phc {
	int fd, index;
	uts_offset_fn measure;
	void *arg;
	const char *method;
	atomic_uint seq;	/* odd while writing */
	atomic_uint_least64_t t_ref, off, rate_ppb, unc; /* the model; off/rate: int64 bits */
	/* statistics (written by the refresher only) */
	atomic_uint_least64_t n, errors, max_unc, max_pred_err, first_off;
	struct uts_phc_model model; /* the refresher's own copy */
};

/* Measure once more and publish; 0 or -errno (counted in errors). */
int uts_phc_refresh(struct uts_phc *p, uint64_t now_rt);
/* The current model; false: none yet. */
bool uts_phc_read(const struct uts_phc *p, struct uts_phc_model *m);

/* ---- exchanges ---------------------------------------------------------- */

/* Values computed from an exchange (once each): */
enum {
	UTS_V_TX,	/* own send() call -> own software TX stamp */
	UTS_V_HW_TX,	/* own software TX stamp -> own hardware TX stamp (converted) */
	UTS_V_HW_RX,	/* hardware RX stamp (converted) -> software RX stamp */
	UTS_V_PEER_TX,	/* pinger: reflector's send() -> its software TX stamp (carried) */
	UTS_V_LINK,	/* pinger: stack - tx - peer.tx */
	UTS_V_WIRE,	/* pinger: (t4 - t1) - (t3 - t2), hardware stamps only */
	UTS_V_N
};

#define UTS_NO_STACK INT64_MIN

struct uts_xchg {
	bool used;
	uint32_t key;		/* OPT_ID of its send */
	uint64_t seq;		/* pinger: the ping; reflector: the ping answered */
	uint64_t tag;		/* reflector: the sender's address (hash) */
	uint64_t at;		/* run-relative time for the channels' windows */
	/* own send: REALTIME just before send(), and its TX stamps */
	uint64_t send_rt;
	struct uts_stamps tx;
	/* the receive of this exchange (pinger: the reply; reflector: the ping) */
	bool have_rx;
	struct uts_stamps rx;
	/* pinger: from the reply and the next one */
	uint64_t peer_send;	/* reflector just before send (REALTIME) */
	int64_t stack;		/* the stack channel's value (may be < 0); UTS_NO_STACK: none */
	bool have_carry_tx, have_carry_hw;
	uint64_t peer_tx_sw;	/* reflector's software TX stamp of its reply */
	uint64_t peer_resid;	/* reflector's t3 - t2 */
	unsigned taken;		/* UTS_V_* already computed */
};

struct uts_vals {
	unsigned have;		/* bit UTS_V_*: v[] valid */
	int64_t v[UTS_V_N];
};

/* The values of x whose inputs are all there and that were not taken before;
 * marks them taken. m: PHC model (NULL: no hardware conversion). */
void uts_take(struct uts_xchg *x, const struct uts_phc_model *m, struct uts_vals *out);

/* The ring of recent exchanges, keyed by the OPT_ID counter. */
#define UTS_SLOTS 16u
#define UTS_WANT_SW 1u
#define UTS_WANT_HW 2u

struct uts_ring {
	unsigned want;		/* UTS_WANT_*: the TX stamps each send should get */
	uint32_t next_key;	/* the key the kernel gives the next datagram */
	unsigned uncertain;	/* failed sends since the last matched stamp */
	struct uts_xchg *last;	/* the latest send */
	struct uts_xchg slot[UTS_SLOTS];
};

void uts_ring_init(struct uts_ring *r, unsigned want);
/* A datagram was sent: the exchange it starts. *evicted_incomplete: the slot
 * reused still lacked a wanted TX stamp (a missing stamp). */
struct uts_xchg *uts_ring_sent(struct uts_ring *r, uint64_t seq, uint64_t send_rt,
			       bool *evicted_incomplete);
/* A send failed: the kernel may or may not have used a key for it. The next
 * stamp resynchronises (it belongs to the latest send). */
void uts_ring_send_failed(struct uts_ring *r);
/* Attach a TX stamp; the exchange, or NULL (no send of that key: unmatched). */
struct uts_xchg *uts_ring_stamp(struct uts_ring *r, const struct uts_txstamp *s);
/* The latest exchange of seq (NULL: none in the ring). */
struct uts_xchg *uts_ring_find(struct uts_ring *r, uint64_t seq);
/* All wanted TX stamps of x are there. */
bool uts_tx_complete(const struct uts_ring *r, const struct uts_xchg *x);

/*
 * Reflector: what the reply to ping `seq` of sender `tag` carries about the
 * previous exchange (`last`, may be NULL): sets UDP_FLAG_CARRY_* in *flags
 * and the two values.
 */
void uts_carry(const struct uts_xchg *last, uint64_t seq, uint64_t tag, uint16_t *flags,
	       uint64_t *tx_sw, uint64_t *hw_resid);

/*
 * Pinger: the reply p to ping p->seq arrived with RX stamps rx; stack is that
 * exchange's stack value (UTS_NO_STACK: none). Fills the exchange of p->seq and
 * hands the carried data to the exchange of seq-1. *cur / *prev: the exchanges to take
 * (NULL: not in the ring, or seq-1 had no reply here). Returns true when the
 * previous exchange got no carried TX stamp (a no_carry).
 */
struct udp_pkt;
bool uts_ping_reply(struct uts_ring *r, const struct udp_pkt *p, const struct uts_stamps *rx,
		    int64_t stack, struct uts_xchg **cur, struct uts_xchg **prev);

/* ---- the socket (system calls) ------------------------------------------ */

struct uts_state {
	int kind;		/* requested, enum uts_kind */
	int rx, tx;		/* in effect, enum uts_eff */
	unsigned so_flags;	/* SO_TIMESTAMPING flags set */
	int so_err;		/* setsockopt error (-errno), 0 */
	char ifname[IF_NAMESIZE];
	bool hw_rx_capable, hw_tx_capable;
	int phc_index;		/* -1: none */
	int hw_tx_type, hw_rx_filter, hw_cfg_err; /* SIOCGHWTSTAMP (hw_cfg_err -errno) */
	char reason[400];	/* why not hardware (or "" when hardware is used) */
	struct uts_phc phc;
	struct uts_ring ring;
};

/*
 * The decision of uts_setup, pure: with the interface's ETHTOOL_GET_TS_INFO
 * capabilities and PHC index, and its SIOCGHWTSTAMP result already in st
 * (ifname, hw_cfg_err, hw_tx_type, hw_rx_filter): can hardware stamps be used,
 * and are they wanted? Fills hw_*_capable, phc_index and, when false, reason.
 */
bool uts_hw_decide(struct uts_state *st, unsigned caps, int phc_index, bool want);

/*
 * Look at the interface of `local`, decide what is used and set SO_TIMESTAMPING
 * on fd. -EOPNOTSUPP with a one-line reason in err when --timestamps hardware
 * cannot be had (the caller skips, exit 4); other failures are recorded in
 * st (software stamps missing is not fatal).
 */
int uts_setup(struct uts_state *st, int fd, int kind, const struct sockaddr *local,
	      char *err, size_t errlen) RL_WUR;
void uts_close(struct uts_state *st);

/* Read the error queue without blocking, at most UTS_DRAIN_MAX messages; unless
 * `all`, stop as soon as the latest send has all its stamps (usually one system
 * call). d->upd: the exchanges that got a stamp (duplicates possible). */
#define UTS_DRAIN_MAX 32u
struct uts_drain {
	unsigned matched, unmatched, n_upd;
	struct uts_xchg *upd[UTS_DRAIN_MAX];
};
int uts_drain(struct uts_state *st, int fd, bool all, struct uts_drain *d) RL_WUR;

/* ---- output ------------------------------------------------------------- */

struct jsonw;
/* The timestamp fields of the header's effective.socket. */
/* rx_kind: what to report as rx_timestamps instead of st's (the xdp path: "xdp"), or NULL */
void uts_write_effective(struct jsonw *w, const struct uts_state *st, const char *rx_kind);
/* The PHC conversion's state: {device, method, measurements, errors, offset_ns,
 * rate_ppb, uncertainty_ns, max_uncertainty_ns, max_prediction_error_ns}. */
void uts_write_phc(struct jsonw *w, const struct uts_phc *p, const char *key);

#endif
