/* SPDX-License-Identifier: MIT */
/*
 * The `udp` probe's run, shared by udp.c (options, set-up, header, counters, the
 * watchdog) and udp_io.c (the socket thread: receiving, replying, pinging, and what
 * each exchange measures): its configuration, context, counters and channels.
 */
#ifndef RTLAB_UDP_PROBE_H
#define RTLAB_UDP_PROBE_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "channel.h"
#include "probe.h"
#include "udp_proto.h"
#include "udp_ts.h"
#include "udp_xdp.h"

#define BATCH 8
/*
 * Blocking receives carry no timeout (SO_RCVTIMEO would arm and cancel a kernel timer
 * around every packet, on the measured path). The main thread is the watchdog: it
 * interrupts a blocked receive with WAKE_SIG when the ping's reply timeout or the end
 * of the run has come (repeating every WATCH_MAX_NS until the thread has noticed).
 * SIGINT/SIGTERM and the socket thread's end wake the watchdog at once.
 */
#define WAKE_SIG (SIGRTMIN + 1)

enum { MODE_REFLECT, MODE_PING };
enum { RECV_RECV, RECV_MMSG };
enum { WAIT_BLOCK, WAIT_EPOLL, WAIT_BUSY };
enum { PACE_SLEEP, PACE_BUSY };
enum { PATH_SOCKET, PATH_XDP };

extern const char *const udp_mode_names[], *const udp_recv_names[], *const udp_wait_names[],
	*const udp_pace_names[], *const udp_path_names[], *const udp_xdp_mode_names[];

/* the shared options udp takes (probe.h) */
#define UDP_SHARED (RUN_OPTS_COMMON | RUN_OPT(DMA) | RUN_OPT(HOUSEKEEPING) | RUN_OPT(WINDOW))

struct udp_cfg {
	const struct run_opts *run;
	int mode;
	struct sockaddr_storage bind, peer;
	socklen_t bind_len, peer_len;
	bool has_bind;
	const char *bind_s, *peer_s;
	uint64_t session;
	uint64_t rate;
	uint64_t interval_ns;	/* 0: back to back */
	size_t size;
	uint64_t duration_ns;	/* 0: none */
	uint64_t count;		/* 0: none */
	uint64_t timeout_ns;
	int cpu;		/* -1: not pinned */
	enum rt_policy policy;
	int priority;
	int busy_poll;		/* -1: not set */
	int recv_call, wait_how, pace, ts;
	bool shared_clock;
	uint64_t max_rate, burst;
	int path, xdp_mode;
	const char *ifname;	/* xdp: NULL = derived */
	uint32_t xdp_queue;
};

/* Counters: written only by the socket thread (relaxed), read by the reporter. */
enum {
	C_SENT, C_REPLIES, C_LOST, C_LATE, C_REORDERED, C_DUPLICATE, C_INVALID, C_MISSED_SENDS,
	C_SEND_ERRORS, C_NO_TIMESTAMP, C_NO_CARRY, /* ping */
	C_RECEIVED, C_REPLIED, C_SHORT, C_BAD_MAGIC, C_BAD_VERSION, C_BAD_SESSION, C_BAD_TYPE,
	C_OVERSIZE, C_RATE_LIMITED, /* reflect */
	C_TX_STAMPS, C_TX_MISSING, C_TX_UNMATCHED, C_NO_HW_STAMP, /* both */
	C_N
};

extern const char *const udp_counter_names[C_N];

/* channels: ping rtt stack wakeup peer.wakeup peer.turn [stack.out stack.back]
 * [tx peer.tx link] [hw.wire hw.rx hw.tx]; reflect wakeup turn [tx] [hw.rx hw.tx] */
enum {
	K_RTT, K_STACK, K_WAKEUP, K_PEER_WAKEUP, K_PEER_TURN, K_STACK_OUT, K_STACK_BACK, K_TURN,
	K_TX, K_PEER_TX, K_LINK, K_HW_WIRE, K_HW_RX, K_HW_TX, K_N
};
extern const char *const udp_chan_names[K_N];

struct rxmsg {
	unsigned char buf[UDP_MAX_SIZE + 1];
	struct sockaddr_storage from;
	char ctrl[256];
	struct iovec iov;
	size_t len;
	int flags;
	struct uts_stamps ts;	/* kernel RX timestamps (software REALTIME, hardware PHC); 0: none */
};

struct udp_ctx {
	const struct udp_cfg *cfg;
	struct udp_cfg cfg_store;
	/* the socket thread's state: one cache line group, written only by it */
	_Alignas(RL_CACHELINE) atomic_uint_least64_t cnt[C_N];
	_Alignas(RL_CACHELINE) struct channel *chans[K_N];
	size_t n_chans;
	struct channel *ch[K_N]; /* by K_*; NULL: not measured in this run */
	int fd, ep;
	struct rxmsg *rx;	/* BATCH entries */
	struct mmsghdr *mm;
	unsigned char *txbuf;
	struct udp_seq *seq;
	uint64_t start_mono;
	pthread_t thread;	/* the socket thread, for the watchdog's signal */
	atomic_bool stop;
	/* blocking receive in progress until this CLOCK_MONOTONIC time (0: not waiting) */
	_Alignas(RL_CACHELINE) atomic_uint_least64_t wait_until;
	int run_err;
	/* socket facts */
	int busy_err, prefer_err, busy_eff;
	bool prefer_eff;
	char local_s[80];
	/* kernel timestamps: effective kinds, the exchanges ring (socket thread), the PHC */
	struct uts_state ts;
	struct uxdp *xdp;	/* --path xdp: the AF_XDP socket instead of fd */
	/* the socket thread's own use of its CPU, read by it when it ends (RUSAGE_THREAD) */
	struct rusage ru;
	bool have_ru;
	/* for the final diagnosis (written before the result) */
	int out_fd;
	bool interrupted;
};

/* a counter is written only by the socket thread and read by the reporter */
static inline void add(struct udp_ctx *c, int i, uint64_t n)
{
	atomic_store_explicit(&c->cnt[i], atomic_load_explicit(&c->cnt[i], memory_order_relaxed) + n,
			      memory_order_relaxed);
}

static inline void inc(struct udp_ctx *c, int i)
{
	add(c, i, 1);
}

/* udp_report.c: the header's config and effective members, the logs, the counters */
void udp_write_config(const void *p, struct jsonw *w);
void udp_write_effective(const void *p, struct jsonw *w);
void udp_write_logs(const void *p, struct jsonw *w, int fd);
void udp_write_counters(void *p, struct jsonw *w, bool final);

/* udp_io.c: the socket (or the AF_XDP socket) set up, and the socket thread's loops */
int udp_setup_socket(struct udp_ctx *ctx, char *msg, size_t len);
int udp_setup_xdp(struct udp_ctx *ctx, char *msg, size_t len, int *code);
void udp_reflect_loop(struct udp_ctx *ctx);
void udp_ping_loop(struct udp_ctx *ctx);

#endif
