/* SPDX-License-Identifier: MIT */
/*
 * The `udp` probe: UDP ping-pong round trips, and where the time goes.
 *
 *   rtlab-probe udp reflect --bind ADDR:PORT --session TOKEN
 *   rtlab-probe udp ping --peer ADDR:PORT --session TOKEN [--rate HZ] [--size B]
 *
 * One pinned RT thread per end owns the socket. The pinger sends on absolute
 * deadlines (missed sends counted), waits for the reply up to --timeout and
 * records the round trip; with kernel RX timestamps (SO_TIMESTAMPING) both ends
 * split their receive path into "kernel RX timestamp -> application running"
 * (wakeup), and the pinger derives the time spent in the stacks and on the
 * wire; TX timestamps split the send side ("send() -> driver"). The reflector
 * reports its own split in the reply, its TX stamps in the next one. Wire
 * format and the pure parts: udp_proto.h; timestamps: udp_ts.h. Safety:
 * docs/probes/udp.md.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "channel.h"
#include "jsonw.h"
#include "opts.h"
#include "output.h"
#include "phc.h"
#include "period.h"
#include "probe.h"
#include "probe_common.h"
#include "reporter.h"
#include "rt.h"
#include "sysinfo.h"
#include "udp_proto.h"
#include "udp_ts.h"
#include "udp_xdp.h"

#ifndef SO_BUSY_POLL
#define SO_BUSY_POLL 46
#endif

#define THREAD_STACK (256 * 1024)
#define PREFAULT_STACK (64 * 1024)
#define START_LEAD_NS (20 * NS_PER_MS)
#define BATCH 8
#define REFLECT_POLL_NS (50 * NS_PER_MS) /* epoll/busy reflector: stop flag checked this often */
/*
 * Blocking receives carry no timeout (SO_RCVTIMEO would arm and cancel a kernel timer
 * around every packet, on the measured path). The main thread is the watchdog: it
 * interrupts a blocked receive with WAKE_SIG when the ping's reply timeout or the end
 * of the run has come (repeating every WATCH_MAX_NS until the thread has noticed).
 * SIGINT/SIGTERM and the socket thread's "done" wake the watchdog at once.
 */
#define WAKE_SIG (SIGRTMIN + 1)
#define WATCH_MIN_NS (100 * NS_PER_US)
#define WATCH_MAX_NS (10 * NS_PER_MS)
#define WATCH_IDLE_NS NS_PER_SEC /* nothing to watch but signals and the end */
#define PHC_REFRESH_NS NS_PER_SEC /* hardware timestamps: PHC offset measured this often */

static const char *const mode_names[] = { "reflect", "ping", NULL };
static const char *const recv_names[] = { "recv", "recvmmsg", NULL };
static const char *const wait_names[] = { "block", "epoll", "busy", NULL };
/* --pace: how the pinger waits for its next send deadline (--wait: for the reply) */
static const char *const pace_names[] = { "sleep", "busy", NULL };
static const char *const path_names[] = { "socket", "xdp", NULL };
static const char *const xdp_mode_names[] = { "auto", "native", "generic", NULL };

enum { MODE_REFLECT, MODE_PING };
enum { RECV_RECV, RECV_MMSG };
enum { WAIT_BLOCK, WAIT_EPOLL, WAIT_BUSY };
enum { PACE_SLEEP, PACE_BUSY };
enum { PATH_SOCKET, PATH_XDP };

enum {
	O_MODE, O_BIND, O_PEER, O_SESSION, O_RATE, O_SIZE, O_DURATION, O_COUNT_PKTS, O_TIMEOUT,
	O_CPU, O_POLICY, O_PRIORITY, O_BUSY_POLL, O_RECV, O_WAIT, O_TIMESTAMPS, O_SHARED_CLOCK,
	O_MAX_RATE, O_BURST, O_MLOCK, O_DMA, O_HOUSEKEEPING, O_SNAPSHOT, O_WINDOW, O_OUTPUT,
	O_ALLOW_NON_RT, O_PACE, O_CPU_OLD,
	O_DATAPATH, O_IFNAME, O_XDP_QUEUE, O_XDP_MODE, /* the AF_XDP path: udp_xdp.h */
	O_N
};

static const struct opt_def udp_opts[O_N] = {
	[O_MODE] = { "mode", OPT_ENUM, "MODE",
		     "reflect (answer pings) or ping (measure); also the first bare argument", 0,
		     0, mode_names, NULL, "required" },
	[O_BIND] = { "bind", OPT_STRING, "ADDR:PORT",
		     "local address (reflect: required, a specific address, never a wildcard)", 0,
		     0, NULL, NULL, "reflect: required; ping: any" },
	[O_PEER] = { "peer", OPT_STRING, "ADDR:PORT", "the reflector to ping (ping only)", 0, 0,
		     NULL, NULL, "required for ping" },
	[O_SESSION] = { "session", OPT_STRING, "TOKEN",
			"session token both ends share; other packets are ignored", 0, 0, NULL,
			NULL, "required" },
	[O_RATE] = { "rate", OPT_INT, "HZ",
		     "pings per second on absolute deadlines (0: back to back)", 0, 1000000,
		     NULL, "1000", NULL },
	[O_SIZE] = { "size", OPT_INT, "BYTES", "UDP payload size of a ping", UDP_HDR_LEN,
		     UDP_MAX_SIZE, NULL, "64", NULL },
	[O_DURATION] = { "duration", OPT_DURATION, NULL, "stop after this run time",
			 (int64_t)NS_PER_MS, (int64_t)(1000 * 3600 * NS_PER_SEC), NULL, NULL,
			 "until SIGINT/SIGTERM (or --count)" },
	[O_COUNT_PKTS] = { "count", OPT_INT, "N", "ping: stop after N pings", 1, INT64_MAX / 2,
			   NULL, NULL, "until --duration or SIGINT/SIGTERM" },
	[O_TIMEOUT] = { "timeout", OPT_DURATION, NULL,
			"ping: a reply later than this is lost (counted late if it comes)",
			(int64_t)NS_PER_US, (int64_t)(10 * NS_PER_SEC), NULL, "100ms", NULL },
	[O_CPU] = { "cpus", OPT_CPULIST, "CPU", "pin the socket thread to this CPU (one)", 0, 1,
		    NULL, NULL, "not pinned" },
	[O_POLICY] = { "policy", OPT_ENUM, "POLICY", "scheduling policy of the socket thread", 0,
		       0, rt_policy_names, "fifo", NULL },
	[O_PRIORITY] = { "priority", OPT_INT, NULL, "priority (fifo/rr: 1..99; other: 0)", 0, 99,
			 NULL, NULL, "98 for fifo/rr (seed: NIC IRQ 99, ping-pong 98)" },
	[O_BUSY_POLL] = { "busy-poll", OPT_INT, "USEC",
			  "SO_BUSY_POLL (and SO_PREFER_BUSY_POLL) on the socket", 0, 1000000, NULL,
			  NULL, "not set" },
	[O_RECV] = { "recv", OPT_ENUM, "CALL", "receive with recvmsg or recvmmsg", 0, 0,
		     recv_names, "recv", NULL },
	[O_WAIT] = { "wait", OPT_ENUM, "HOW",
		     "wait in a blocking receive, in epoll_wait, or spin (non-blocking)", 0, 0,
		     wait_names, "block", NULL },
	[O_TIMESTAMPS] = { "timestamps", OPT_ENUM, "KIND",
			   "kernel timestamps for the split: software (RX+TX), software-rx, hardware (NIC; refused where there is none), auto (hardware where enabled, else software), none",
			   0, 0, uts_kind_names, "software", NULL },
	[O_SHARED_CLOCK] = { "shared-clock", OPT_BOOL, NULL,
			     "ping: both ends read the same CLOCK_REALTIME (same host, or PTP-synced): split the stack time per direction",
			     0, 0, NULL, "false", NULL },
	[O_MAX_RATE] = { "max-rate", OPT_INT, "PPS", "reflect: answer at most this many per second",
			 1, 10000000, NULL, "100000", NULL },
	[O_BURST] = { "burst", OPT_INT, "N", "reflect: token bucket size", 1, 1000000, NULL, "64",
		      NULL },
	[O_MLOCK] = OPT_DEF_MLOCK,
	[O_DMA] = { "dma-latency", OPT_INT, "US",
		    "hold /dev/cpu_dma_latency at US microseconds during the run", 0, INT32_MAX,
		    NULL, NULL, "not touched" },
	[O_HOUSEKEEPING] = { "housekeeping", OPT_INT, "CPU", "CPU of the reporter thread", 0,
			     CPU_SETSIZE - 1, NULL, NULL, "first online CPU other than --cpu" },
	[O_SNAPSHOT] = OPT_DEF_SNAPSHOT,
	[O_WINDOW] = OPT_DEF_WINDOW,
	[O_OUTPUT] = OPT_DEF_OUTPUT,
	[O_ALLOW_NON_RT] = { "allow-non-rt", OPT_BOOL, NULL,
			     "measure even without RT scheduling/mlock (rt_valid=false)", 0, 0,
			     NULL, "false", NULL },
	[O_CPU_OLD] = OPT_DEF_ALIAS("cpu", "cpus"),
	[O_PACE] = { "pace", OPT_ENUM, "HOW",
		     "ping with --rate: wait for each send deadline in clock_nanosleep (sleep, as a control loop does) or spin reading the clock (busy, as a polling loop does: the CPU never idles)",
		     0, 0, pace_names, "sleep", NULL },
	[O_DATAPATH] = { "path", OPT_ENUM, "PATH",
		     "socket (UDP socket) or xdp (AF_XDP socket + XDP filter; IPv4, needs CAP_NET_ADMIN/CAP_BPF)",
		     0, 0, path_names, "socket", NULL },
	[O_IFNAME] = { "ifname", OPT_STRING, "IF", "xdp: the interface to attach to", 0, 0, NULL,
		       NULL, "the interface of --bind (reflect) or of the route to --peer (ping)" },
	[O_XDP_QUEUE] = { "xdp-queue", OPT_INT, "N", "xdp: the RX queue the AF_XDP socket serves",
			  0, 1023, NULL, "0", NULL },
	[O_XDP_MODE] = { "xdp-mode", OPT_ENUM, "MODE",
			 "xdp: attach the program in the driver (native), generic (skb) mode, or native if possible else generic",
			 0, 0, xdp_mode_names, "auto", NULL },
};

struct udp_cfg {
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
	bool mlock;
	int64_t dma_us;
	int housekeeping;
	uint64_t snapshot_ns, window_ns;
	const char *output;
	bool allow_non_rt;
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

static const char *const counter_names[C_N] = {
	"sent", "replies", "lost", "late", "reordered", "duplicate", "invalid", "missed_sends",
	"send_errors", "no_timestamp", "no_carry", "received", "replied", "short", "bad_magic",
	"bad_version", "bad_session", "bad_type", "oversize", "rate_limited", "tx_stamps",
	"tx_stamp_missing", "tx_stamp_unmatched", "no_hw_timestamp",
};

/* channels: ping rtt stack wakeup peer.wakeup peer.turn [stack.out stack.back]
 * [tx peer.tx link] [hw.wire hw.rx hw.tx]; reflect wakeup turn [tx] [hw.rx hw.tx] */
enum {
	K_RTT, K_STACK, K_WAKEUP, K_PEER_WAKEUP, K_PEER_TURN, K_STACK_OUT, K_STACK_BACK, K_TURN,
	K_TX, K_PEER_TX, K_LINK, K_HW_WIRE, K_HW_RX, K_HW_TX, K_N
};
static const char *const chan_names[K_N] = {
	"rtt", "stack", "wakeup", "peer.wakeup", "peer.turn", "stack.out", "stack.back", "turn",
	"tx", "peer.tx", "link", "hw.wire", "hw.rx", "hw.tx",
};

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
	pthread_t thread;
	pthread_barrier_t ready, go;
	atomic_bool stop, abort, done;
	/* blocking receive in progress until this CLOCK_MONOTONIC time (0: not waiting) */
	_Alignas(RL_CACHELINE) atomic_uint_least64_t wait_until;
	/* set-up results */
	int pin_err, sched_err, get_err, kpolicy, prio, run_err;
	cpu_set_t affinity;
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

static inline void inc(struct udp_ctx *c, int i)
{
	atomic_store_explicit(&c->cnt[i], atomic_load_explicit(&c->cnt[i], memory_order_relaxed) + 1,
			      memory_order_relaxed);
}

static int bad(char *err, size_t errlen, const char *msg, struct udp_ctx *ctx)
{
	snprintf(err, errlen, "%s", msg);
	free(ctx);
	return -EINVAL;
}

static bool is_wildcard(const struct sockaddr_storage *a)
{
	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr == htonl(INADDR_ANY);
	const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)a;
	return IN6_IS_ADDR_UNSPECIFIED(&a6->sin6_addr);
}

static int udp_init(void **out, const struct opt_value *v, const struct probe_env *env,
		    char *err, size_t errlen)
{
	struct udp_ctx *ctx = aligned_alloc(RL_CACHELINE, (sizeof(*ctx) + RL_CACHELINE - 1) &
							       ~(size_t)(RL_CACHELINE - 1));
	if (!ctx)
		return -ENOMEM;
	memset(ctx, 0, sizeof(*ctx));
	ctx->fd = ctx->ep = -1;
	ctx->ts.phc.fd = -1;
	struct udp_cfg *c = &ctx->cfg_store;
	if (!v[O_MODE].set)
		return bad(err, errlen, "give the mode: `udp reflect ...` or `udp ping ...` (--mode reflect|ping)", ctx);
	c->mode = (int)v[O_MODE].i;
	if (!v[O_SESSION].set)
		return bad(err, errlen, "--session: required (a token both ends share)", ctx);
	c->session = udp_session_token(v[O_SESSION].s);
	if (v[O_BIND].set) {
		c->bind_s = v[O_BIND].s;
		if (udp_parse_addr(c->bind_s, &c->bind, &c->bind_len) != 0)
			return bad(err, errlen, "--bind: expected a numeric ADDR:PORT (e.g. 10.0.0.1:7000 or [fd00::1]:7000)", ctx);
		c->has_bind = true;
	}
	if (c->mode == MODE_REFLECT) {
		if (!c->has_bind)
			return bad(err, errlen, "--bind: required for reflect", ctx);
		if (is_wildcard(&c->bind))
			return bad(err, errlen, "--bind: give a specific address; the reflector never binds a wildcard address", ctx);
		if (v[O_PEER].set)
			return bad(err, errlen, "--peer: only for ping", ctx);
		if (v[O_COUNT_PKTS].set)
			return bad(err, errlen, "--count: only for ping", ctx);
	} else {
		if (!v[O_PEER].set)
			return bad(err, errlen, "--peer: required for ping", ctx);
		c->peer_s = v[O_PEER].s;
		if (udp_parse_addr(c->peer_s, &c->peer, &c->peer_len) != 0)
			return bad(err, errlen, "--peer: expected a numeric ADDR:PORT (e.g. 10.0.0.1:7000 or [fd00::1]:7000)", ctx);
		if (c->has_bind && c->bind.ss_family != c->peer.ss_family)
			return bad(err, errlen, "--bind and --peer: must be the same address family", ctx);
	}
	c->rate = (uint64_t)v[O_RATE].i;
	c->interval_ns = c->rate ? NS_PER_SEC / c->rate : 0;
	c->size = (size_t)v[O_SIZE].i;
	c->duration_ns = v[O_DURATION].set ? (uint64_t)v[O_DURATION].i : 0;
	c->count = v[O_COUNT_PKTS].set ? (uint64_t)v[O_COUNT_PKTS].i : 0;
	c->timeout_ns = (uint64_t)v[O_TIMEOUT].i;
	c->cpu = opts_one_cpu(&v[O_CPU]);	/* online: checked by the parser */
	c->policy = (enum rt_policy)v[O_POLICY].i;
	if (c->policy == RT_DEADLINE)
		return bad(err, errlen, "--policy: deadline is not supported by udp (the socket thread is event-driven); use fifo, rr or other", ctx);
	int pmin, pmax;
	rt_priority_range(c->policy, &pmin, &pmax);
	if (v[O_PRIORITY].given) {
		if (v[O_PRIORITY].i < pmin || v[O_PRIORITY].i > pmax) {
			snprintf(err, errlen,
				 "--priority: %lld is out of range for --policy %s; allowed range %d..%d",
				 (long long)v[O_PRIORITY].i, rt_policy_names[c->policy], pmin, pmax);
			free(ctx);
			return -EINVAL;
		}
		c->priority = (int)v[O_PRIORITY].i;
	} else {
		c->priority = pmax >= 98 ? 98 : pmax;
	}
	c->busy_poll = v[O_BUSY_POLL].set ? (int)v[O_BUSY_POLL].i : -1;
	c->recv_call = (int)v[O_RECV].i;
	c->wait_how = (int)v[O_WAIT].i;
	c->pace = (int)v[O_PACE].i;
	if (c->mode == MODE_REFLECT && v[O_PACE].given)
		return bad(err, errlen, "--pace: only for ping (it paces the sends; the reflector only waits: --wait)", ctx);
	c->ts = (int)v[O_TIMESTAMPS].i;
	c->shared_clock = v[O_SHARED_CLOCK].i != 0;
	if (c->shared_clock && c->mode != MODE_PING)
		return bad(err, errlen, "--shared-clock: only for ping", ctx);
	c->max_rate = (uint64_t)v[O_MAX_RATE].i;
	c->burst = (uint64_t)v[O_BURST].i;
	c->mlock = v[O_MLOCK].i != 0;
	c->dma_us = v[O_DMA].set ? v[O_DMA].i : -1;
	cpu_set_t used;
	CPU_ZERO(&used);
	if (c->cpu >= 0)
		CPU_SET(c->cpu, &used);
	if (pc_housekeeping(&v[O_HOUSEKEEPING], env->online, c->cpu >= 0 ? &used : NULL,
			    &c->housekeeping, err, errlen) != 0) {
		free(ctx);
		return -EINVAL;
	}
	c->snapshot_ns = (uint64_t)v[O_SNAPSHOT].i;
	c->window_ns = (uint64_t)v[O_WINDOW].i;
	c->output = v[O_OUTPUT].set ? v[O_OUTPUT].s : NULL;
	c->allow_non_rt = v[O_ALLOW_NON_RT].i != 0;
	c->path = (int)v[O_DATAPATH].i;
	c->ifname = v[O_IFNAME].set ? v[O_IFNAME].s : NULL;
	c->xdp_queue = (uint32_t)v[O_XDP_QUEUE].i;
	c->xdp_mode = (int)v[O_XDP_MODE].i;
	if (c->path == PATH_XDP) {
		if ((c->has_bind && c->bind.ss_family != AF_INET) ||
		    (c->mode == MODE_PING && c->peer.ss_family != AF_INET))
			return bad(err, errlen, "--path xdp: IPv4 addresses only (use --path socket for IPv6)", ctx);
		if (v[O_RECV].given)
			return bad(err, errlen, "--recv: only for --path socket (the xdp path takes up to 8 frames from its ring per wakeup)", ctx);
		if (c->ts == UTS_HARDWARE)
			return bad(err, errlen, "--timestamps hardware: only for --path socket (the xdp path stamps frames in its XDP program; use software or auto)", ctx);
	} else if (v[O_IFNAME].given || v[O_XDP_QUEUE].given || v[O_XDP_MODE].given) {
		return bad(err, errlen, "--ifname, --xdp-queue, --xdp-mode: only with --path xdp", ctx);
	}
	ctx->cfg = c;
	*out = ctx;
	return 0;
}

static void udp_report_config(const void *p, struct jsonw *w, const char *key)
{
	const struct udp_cfg *c = ((const struct udp_ctx *)p)->cfg;
	jw_obj_begin(w, key);
	jw_str(w, "mode", mode_names[c->mode]);
	jw_str_or_null(w, "bind", c->bind_s);
	jw_str_or_null(w, "peer", c->peer_s);
	jw_strf(w, "session_token", "%016llx", (unsigned long long)c->session);
	jw_uint(w, "rate_hz", c->rate);
	jw_uint(w, "size", c->size);
	if (c->duration_ns)
		jw_uint(w, "duration_ns", c->duration_ns);
	else
		jw_null(w, "duration_ns");
	if (c->count)
		jw_uint(w, "count", c->count);
	else
		jw_null(w, "count");
	jw_uint(w, "timeout_ns", c->timeout_ns);
	jw_int_or_null(w, "cpu", c->cpu);
	jw_str(w, "policy", rt_policy_names[c->policy]);
	jw_int(w, "priority", c->priority);
	jw_int_or_null(w, "busy_poll_us", c->busy_poll);
	jw_str(w, "recv", recv_names[c->recv_call]);
	jw_str(w, "wait", wait_names[c->wait_how]);
	jw_str(w, "pace", pace_names[c->pace]);
	jw_str(w, "timestamps", uts_kind_names[c->ts]);
	jw_bool(w, "shared_clock", c->shared_clock);
	jw_uint(w, "max_rate_pps", c->max_rate);
	jw_uint(w, "burst", c->burst);
	jw_bool(w, "mlock", c->mlock);
	jw_int_or_null(w, "dma_latency_us", c->dma_us);
	jw_int_or_null(w, "housekeeping_cpu", c->housekeeping);
	jw_uint(w, "snapshot_interval_ns", c->snapshot_ns);
	jw_uint(w, "window_ns", c->window_ns);
	jw_bool(w, "allow_non_rt", c->allow_non_rt);
	jw_str(w, "path", path_names[c->path]);
	jw_str_or_null(w, "ifname", c->ifname);
	jw_uint(w, "xdp_queue", c->xdp_queue);
	jw_str(w, "xdp_mode", xdp_mode_names[c->xdp_mode]);
	jw_obj_end(w);
}

/* ---- socket set-up ---------------------------------------------------- */

static int setup_socket(struct udp_ctx *ctx, char *msg, size_t len)
{
	const struct udp_cfg *c = ctx->cfg;
	int fam = c->mode == MODE_REFLECT ? c->bind.ss_family : c->peer.ss_family;
	ctx->fd = socket(fam, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (ctx->fd < 0) {
		snprintf(msg, len, "socket: %s", strerror(errno));
		return -errno;
	}
	if (c->has_bind && bind(ctx->fd, (const struct sockaddr *)&c->bind, c->bind_len) != 0) {
		int e = errno;
		snprintf(msg, len, "--bind %s: %s", c->bind_s, strerror(e));
		return -e;
	}
	if (c->mode == MODE_PING &&
	    connect(ctx->fd, (const struct sockaddr *)&c->peer, c->peer_len) != 0) {
		int e = errno;
		snprintf(msg, len, "--peer %s: connect: %s", c->peer_s, strerror(e));
		return -e;
	}
	if (c->busy_poll >= 0) {
		int us = c->busy_poll;
		if (setsockopt(ctx->fd, SOL_SOCKET, SO_BUSY_POLL, &us, sizeof(us)) != 0)
			ctx->busy_err = -errno;
		socklen_t l = sizeof(ctx->busy_eff);
		if (getsockopt(ctx->fd, SOL_SOCKET, SO_BUSY_POLL, &ctx->busy_eff, &l) != 0)
			ctx->busy_eff = -1;
#ifdef SO_PREFER_BUSY_POLL
		int one = c->busy_poll > 0;
		if (setsockopt(ctx->fd, SOL_SOCKET, SO_PREFER_BUSY_POLL, &one, sizeof(one)) != 0)
			ctx->prefer_err = -errno;
		else
			ctx->prefer_eff = one;
#else
		ctx->prefer_err = -ENOPROTOOPT;
#endif
	}
	int nb = c->wait_how != WAIT_BLOCK;
	if (nb) {
		int fl = fcntl(ctx->fd, F_GETFL);
		if (fl < 0 || fcntl(ctx->fd, F_SETFL, fl | O_NONBLOCK) != 0) {
			snprintf(msg, len, "fcntl O_NONBLOCK: %s", strerror(errno));
			return -errno;
		}
	}
	if (c->wait_how == WAIT_EPOLL) {
		ctx->ep = epoll_create1(EPOLL_CLOEXEC);
		struct epoll_event ev = { .events = EPOLLIN };
		if (ctx->ep < 0 || epoll_ctl(ctx->ep, EPOLL_CTL_ADD, ctx->fd, &ev) != 0) {
			snprintf(msg, len, "epoll: %s", strerror(errno));
			return -errno;
		}
	}
	struct sockaddr_storage local;
	socklen_t ll = sizeof(local);
	bool named = getsockname(ctx->fd, (struct sockaddr *)&local, &ll) == 0;
	if (named)
		udp_format_addr((const struct sockaddr *)&local, ctx->local_s, sizeof(ctx->local_s));
	/* -EOPNOTSUPP: --timestamps hardware cannot be had here (msg says why) */
	return uts_setup(&ctx->ts, ctx->fd, c->ts, named ? (const struct sockaddr *)&local : NULL,
			 msg, len);
}

/* ---- the hot path ----------------------------------------------------- */

static void prep_rx(struct udp_ctx *ctx, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		struct rxmsg *m = &ctx->rx[i];
		struct msghdr *mh = &ctx->mm[i].msg_hdr;
		m->iov.iov_base = m->buf;
		m->iov.iov_len = sizeof(m->buf);
		mh->msg_name = &m->from;
		mh->msg_namelen = sizeof(m->from);
		mh->msg_iov = &m->iov;
		mh->msg_iovlen = 1;
		mh->msg_control = m->ctrl;
		mh->msg_controllen = sizeof(m->ctrl);
		mh->msg_flags = 0;
	}
}

static void tx_drain(struct udp_ctx *ctx, bool all);

/*
 * Wait for and receive up to BATCH datagrams until deadline (CLOCK_MONOTONIC).
 * Returns how many (0: deadline passed or stop), or -errno on a hard error.
 */
static int xdp_rx_wait(struct udp_ctx *ctx, uint64_t deadline);

static int rx_wait(struct udp_ctx *ctx, uint64_t deadline)
{
	if (ctx->xdp)
		return xdp_rx_wait(ctx, deadline);
	const struct udp_cfg *c = ctx->cfg;
	const unsigned vlen = c->recv_call == RECV_MMSG ? BATCH : 1;
	for (;;) {
		if (atomic_load_explicit(&ctx->stop, memory_order_relaxed))
			return 0;
		if (c->wait_how == WAIT_EPOLL) {
			uint64_t now = rl_now_ns(CLOCK_MONOTONIC);
			if (now >= deadline)
				return 0;
			struct epoll_event ev;
			int ms = (int)((deadline - now + NS_PER_MS - 1) / NS_PER_MS);
			int r = epoll_wait(ctx->ep, &ev, 1, ms);
			if (r < 0 && errno != EINTR)
				return -errno;
			if (r <= 0)
				continue;
			/* EPOLLERR cannot be masked: TX stamps waiting on the error queue
			 * (a ping's software stamp is there as soon as send() returns) are
			 * read now, else this would spin; the receive below also clears a
			 * pending socket error */
			if (ev.events & EPOLLERR)
				tx_drain(ctx, true);
		}
		const bool block = c->wait_how == WAIT_BLOCK;
		if (block)
			atomic_store_explicit(&ctx->wait_until, deadline, memory_order_relaxed);
		int n;
		if (c->recv_call == RECV_MMSG) {
			prep_rx(ctx, vlen);
			n = recvmmsg(ctx->fd, ctx->mm, vlen, block ? MSG_WAITFORONE : MSG_DONTWAIT,
				     NULL);
		} else if (c->ts == UTS_NONE) {
			/* no control data wanted: the plain call, as lean as sockperf's */
			struct rxmsg *m = &ctx->rx[0];
			socklen_t fl = sizeof(m->from);
			bool conn = c->mode == MODE_PING;
			ssize_t r = recvfrom(ctx->fd, m->buf, sizeof(m->buf), 0,
					     conn ? NULL : (struct sockaddr *)&m->from,
					     conn ? NULL : &fl);
			if (r >= 0) {
				ctx->mm[0].msg_len = (unsigned)r;
				ctx->mm[0].msg_hdr.msg_namelen = conn ? 0 : fl;
				ctx->mm[0].msg_hdr.msg_flags = (size_t)r >= sizeof(m->buf) ? MSG_TRUNC : 0;
				ctx->mm[0].msg_hdr.msg_controllen = 0;
			}
			n = r < 0 ? -1 : 1;
		} else {
			prep_rx(ctx, 1);
			ssize_t r = recvmsg(ctx->fd, &ctx->mm[0].msg_hdr, 0);
			if (r >= 0)
				ctx->mm[0].msg_len = (unsigned)r;
			n = r < 0 ? -1 : 1;
		}
		if (block)
			atomic_store_explicit(&ctx->wait_until, 0, memory_order_relaxed);
		if (n > 0) {
			for (int i = 0; i < n; i++) {
				ctx->rx[i].len = ctx->mm[i].msg_len;
				ctx->rx[i].flags = ctx->mm[i].msg_hdr.msg_flags;
				uts_rx_parse(&ctx->mm[i].msg_hdr, &ctx->rx[i].ts);
			}
			return n;
		}
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
		    errno != ECONNREFUSED)
			return -errno;
		if (rl_now_ns(CLOCK_MONOTONIC) >= deadline)
			return 0;
	}
}

/* ---- the AF_XDP path (udp_xdp.h) ------------------------------------------ */

static int setup_xdp(struct udp_ctx *ctx, char *msg, size_t len, int *code)
{
	const struct udp_cfg *c = ctx->cfg;
	const bool ping = c->mode == MODE_PING;
	const struct uxdp_cfg xc = {
		.ping = ping,
		.bind = c->has_bind ? (const struct sockaddr_in *)&c->bind : NULL,
		.peer = ping ? (const struct sockaddr_in *)&c->peer : NULL,
		.ifname = c->ifname,
		.queue = c->xdp_queue,
		.mode = c->xdp_mode,
		.stamp = c->ts != UTS_NONE, /* hardware is refused at init; TX stamps: none */
		.payload_max = ping ? c->size : 0,
		.busy_poll = c->busy_poll,
	};
	int e = uxdp_open(&ctx->xdp, &xc, msg, len, code);
	if (e)
		return e;
	snprintf(ctx->local_s, sizeof(ctx->local_s), "%s", uxdp_local(ctx->xdp));
	snprintf(ctx->ts.ifname, sizeof(ctx->ts.ifname), "%s", uxdp_ifname(ctx->xdp));
	ctx->busy_eff = uxdp_busy_poll(ctx->xdp, &ctx->busy_err);
	if (c->wait_how == WAIT_EPOLL) {
		ctx->ep = epoll_create1(EPOLL_CLOEXEC);
		struct epoll_event ev = { .events = EPOLLIN };
		if (ctx->ep < 0 || epoll_ctl(ctx->ep, EPOLL_CTL_ADD, uxdp_fd(ctx->xdp), &ev) != 0) {
			snprintf(msg, len, "epoll: %s", strerror(errno));
			*code = RL_EXIT_ERROR;
			return -errno;
		}
	}
	return 0;
}

/* rx_wait of the xdp path: the same contract, frames from the AF_XDP RX ring. */
static int xdp_rx_wait(struct udp_ctx *ctx, uint64_t deadline)
{
	const struct udp_cfg *c = ctx->cfg;
	/* The XDP program stamps CLOCK_MONOTONIC, the wire format and the split use
	 * CLOCK_REALTIME (the two differ by a constant between clock steps): their offset,
	 * from one bracketed reading, read before waiting (outside every measured interval). */
	int64_t off = 0;
	uint64_t unc;
	if (c->ts != UTS_NONE && clk_realtime_minus_mono(1, &off, &unc) != 0)
		off = 0;
	struct uxdp_msg msg[BATCH];
	for (;;) {
		unsigned n = uxdp_recv(ctx->xdp, msg, BATCH);
		if (n) {
			for (unsigned i = 0; i < n; i++) {
				struct rxmsg *m = &ctx->rx[i];
				memcpy(m->buf, msg[i].payload, msg[i].len);
				m->len = msg[i].len;
				m->flags = 0;
				m->ts.sw = msg[i].rx_mono ? (uint64_t)((int64_t)msg[i].rx_mono + off)
							  : 0;
				m->ts.hw = 0;
			}
			return (int)n;
		}
		if (atomic_load_explicit(&ctx->stop, memory_order_relaxed))
			return 0;
		uint64_t now = rl_now_ns(CLOCK_MONOTONIC);
		if (now >= deadline)
			return 0;
		int r = 0;
		if (c->wait_how == WAIT_EPOLL) {
			struct epoll_event ev;
			r = epoll_wait(ctx->ep, &ev, 1,
				       (int)((deadline - now + NS_PER_MS - 1) / NS_PER_MS));
		} else if (c->wait_how == WAIT_BLOCK) {
			/* no timeout: the watchdog's signal ends the wait (see WAKE_SIG) */
			struct pollfd pfd = { .fd = uxdp_fd(ctx->xdp), .events = POLLIN };
			atomic_store_explicit(&ctx->wait_until, deadline, memory_order_relaxed);
			r = poll(&pfd, 1, -1);
			atomic_store_explicit(&ctx->wait_until, 0, memory_order_relaxed);
		}
		if (r < 0 && errno != EINTR)
			return -errno;
	}
}

/* The i-th datagram's reply in its own frame; the length sent, or -1. */
static ssize_t xdp_reply(struct udp_ctx *ctx, int i, const struct rxmsg *m)
{
	return uxdp_reply(ctx->xdp, (unsigned)i, m->buf, UDP_HDR_LEN) == 0 ? (ssize_t)m->len : -1;
}

static ssize_t xdp_send(struct udp_ctx *ctx)
{
	const size_t n = ctx->cfg->size;
	return uxdp_send(ctx->xdp, ctx->txbuf, n) == 0 ? (ssize_t)n : -1;
}

static void record(struct udp_ctx *ctx, int k, uint64_t at, uint64_t later, uint64_t earlier)
{
	bool neg = later < earlier;
	if (ctx->ch[k])
		channel_record(ctx->ch[k], at, neg ? 0 : later - earlier, 0, neg);
}

static void record_signed(struct udp_ctx *ctx, int k, uint64_t at, int64_t v)
{
	if (ctx->ch[k])
		channel_record(ctx->ch[k], at, v < 0 ? 0 : (uint64_t)v, 0, v < 0);
}

/* Record the values of exchange x that became computable (each once). */
static void take(struct udp_ctx *ctx, struct uts_xchg *x)
{
	static const int chan_of[UTS_V_N] = {
		[UTS_V_TX] = K_TX, [UTS_V_HW_TX] = K_HW_TX, [UTS_V_HW_RX] = K_HW_RX,
		[UTS_V_PEER_TX] = K_PEER_TX, [UTS_V_LINK] = K_LINK, [UTS_V_WIRE] = K_HW_WIRE,
	};
	struct uts_phc_model m;
	bool conv = ctx->ts.rx == UTS_EFF_HARDWARE && uts_phc_read(&ctx->ts.phc, &m);
	struct uts_vals v;
	uts_take(x, conv ? &m : NULL, &v);
	for (int i = 0; i < UTS_V_N; i++)
		if (v.have & (1u << i))
			record_signed(ctx, chan_of[i], x->at, v.v[i]);
}

/* Read TX timestamps off the error queue (non-blocking) and record what they complete. */
static void tx_drain(struct udp_ctx *ctx, bool all)
{
	struct uts_drain d;
	if (ctx->ts.tx == UTS_EFF_NONE || uts_drain(&ctx->ts, ctx->fd, all, &d) != 0)
		return;
	for (unsigned i = 0; i < d.matched; i++)
		inc(ctx, C_TX_STAMPS);
	for (unsigned i = 0; i < d.unmatched; i++)
		inc(ctx, C_TX_UNMATCHED);
	for (unsigned i = 0; i < d.n_upd; i++)
		take(ctx, d.upd[i]);
}

/* A datagram was sent (ok) or not: the exchange it starts in the ring, or NULL. */
static struct uts_xchg *tx_sent(struct udp_ctx *ctx, bool ok, uint64_t seq, uint64_t send_rt,
				uint64_t at)
{
	if (ctx->ts.tx == UTS_EFF_NONE)
		return NULL;
	if (!ok) {
		uts_ring_send_failed(&ctx->ts.ring);
		return NULL;
	}
	bool evicted;
	struct uts_xchg *x = uts_ring_sent(&ctx->ts.ring, seq, send_rt, &evicted);
	if (evicted)
		inc(ctx, C_TX_MISSING);
	x->at = at;
	return x;
}

static void reflect_loop(struct udp_ctx *ctx)
{
	const struct udp_cfg *c = ctx->cfg;
	const uint64_t end = c->duration_ns ? ctx->start_mono + c->duration_ns : UINT64_MAX;
	const bool block = c->wait_how == WAIT_BLOCK;
	const bool stamps = c->ts != UTS_NONE;
	const bool txs = ctx->ts.tx != UTS_EFF_NONE;
	const bool hw = ctx->ts.rx == UTS_EFF_HARDWARE;
	struct uts_ring *ring = &ctx->ts.ring;
	struct udp_bucket tb;
	uint64_t app_mono = rl_now_ns(CLOCK_MONOTONIC);
	udp_bucket_init(&tb, c->max_rate, c->burst, app_mono);
	for (;;) {
		/* blocking: the watchdog ends the wait at `end`; the time of the last packet
		 * is recent enough for this check and costs no clock read */
		uint64_t now = block ? app_mono : rl_now_ns(CLOCK_MONOTONIC);
		if (now >= end || atomic_load_explicit(&ctx->stop, memory_order_relaxed))
			break;
		uint64_t dl = block ? end : now + REFLECT_POLL_NS < end ? now + REFLECT_POLL_NS : end;
		int n = rx_wait(ctx, dl);
		app_mono = rl_now_ns(CLOCK_MONOTONIC);
		/* REALTIME only to compare with the kernel's RX timestamps (and for the
		 * pinger's split, which needs them): without timestamps, one clock read */
		uint64_t app_rt = stamps ? rl_now_ns(CLOCK_REALTIME) : 0;
		if (n < 0) {
			ctx->run_err = -n;
			break;
		}
		for (int i = 0; i < n; i++) {
			struct rxmsg *m = &ctx->rx[i];
			struct udp_pkt p;
			inc(ctx, C_RECEIVED);
			if (m->flags & MSG_TRUNC || m->len > UDP_MAX_SIZE) {
				inc(ctx, C_OVERSIZE);
				continue;
			}
			enum udp_verdict vd = udp_pkt_decode(m->buf, m->len, c->session,
							     UDP_TYPE_PING, &p);
			if (vd != UDP_OK) {
				inc(ctx, vd == UDP_SHORT ? C_SHORT : vd == UDP_BAD_MAGIC ? C_BAD_MAGIC
					 : vd == UDP_BAD_VERSION ? C_BAD_VERSION
					 : vd == UDP_BAD_SESSION ? C_BAD_SESSION : C_BAD_TYPE);
				continue;
			}
			if (!udp_bucket_take(&tb, app_mono)) {
				inc(ctx, C_RATE_LIMITED);
				continue;
			}
			const bool carry = txs && (p.flags & UDP_FLAG_WANT_CARRY);
			const uint64_t tag = txs ? udp_addr_tag((struct sockaddr *)&m->from) : 0;
			p.type = UDP_TYPE_REPLY;
			p.flags = m->ts.sw ? UDP_FLAG_RX_TS : 0;
			p.r_rx_ts = m->ts.sw;
			p.r_app = app_rt;
			if (carry) {
				/* the previous reply's TX stamps: normally read right after it was
				 * sent; only a stamp still missing (hardware) costs a read here */
				if (ring->last && !uts_tx_complete(ring, ring->last))
					tx_drain(ctx, false);
				uts_carry(ring->last, p.seq, tag, &p.flags, &p.carry_tx_sw,
					  &p.carry_hw_resid);
			}
			uint64_t send_t = rl_now_ns(stamps ? CLOCK_REALTIME : CLOCK_MONOTONIC);
			p.r_send = stamps ? send_t : 0;
			udp_pkt_encode(m->buf, &p);
			/* the reply is exactly as long as the ping: never an amplifier */
			ssize_t s = ctx->xdp ? xdp_reply(ctx, i, m)
					     : sendto(ctx->fd, m->buf, m->len, 0,
						      (struct sockaddr *)&m->from,
						      ctx->mm[i].msg_hdr.msg_namelen);
			uint64_t at = app_mono > ctx->start_mono ? app_mono - ctx->start_mono : 0;
			struct uts_xchg *x = tx_sent(ctx, s == (ssize_t)m->len, p.seq, send_t, at);
			if (s != (ssize_t)m->len) {
				inc(ctx, C_SEND_ERRORS);
				continue;
			}
			inc(ctx, C_REPLIED);
			if (m->ts.sw)
				record(ctx, K_WAKEUP, at, app_rt, m->ts.sw);
			record(ctx, K_TURN, at, send_t, stamps ? app_rt : app_mono);
			if (hw && !m->ts.hw)
				inc(ctx, C_NO_HW_STAMP);
			if (x) {
				x->tag = tag;
				x->have_rx = true;
				x->rx = m->ts;
				/* the reply is on its way: its software TX stamp is queued already
				 * (veth, loopback: during sendto) */
				tx_drain(ctx, false);
				take(ctx, x);
			}
		}
	}
	tx_drain(ctx, true);
}

static void ping_reply(struct udp_ctx *ctx, const struct udp_pkt *p, const struct rxmsg *m,
		       const struct udp_pkt *sent, uint64_t app_mono, uint64_t app_rt)
{
	uint64_t at = app_mono > ctx->start_mono ? app_mono - ctx->start_mono : 0;
	record(ctx, K_RTT, at, app_mono, sent->send_mono);
	int64_t stack = UTS_NO_STACK;
	if (!m->ts.sw || !(p->flags & UDP_FLAG_RX_TS)) {
		inc(ctx, C_NO_TIMESTAMP);
	} else {
		uint64_t w_near = app_rt > m->ts.sw ? app_rt - m->ts.sw : 0;
		uint64_t w_far = p->r_app > p->r_rx_ts ? p->r_app - p->r_rx_ts : 0;
		uint64_t turn = p->r_send > p->r_app ? p->r_send - p->r_app : 0;
		record(ctx, K_WAKEUP, at, app_rt, m->ts.sw);
		record(ctx, K_PEER_WAKEUP, at, p->r_app, p->r_rx_ts);
		record(ctx, K_PEER_TURN, at, p->r_send, p->r_app);
		/* both directions: send() call -> kernel RX timestamp of the other end. On
		 * CLOCK_REALTIME, the stamps' clock: a vCPU paused between this end's two
		 * clock reads (MONOTONIC for rtt, REALTIME for the split) cannot skew it;
		 * negative (a clock step) is counted, not clamped */
		uint64_t rtt_rt = app_rt - sent->send_rt;
		uint64_t rest = w_near + w_far + turn;
		record(ctx, K_STACK, at, rtt_rt, rest);
		stack = (int64_t)(rtt_rt - rest);
		record(ctx, K_STACK_OUT, at, p->r_rx_ts, sent->send_rt);
		record(ctx, K_STACK_BACK, at, m->ts.sw, p->r_send);
	}
	if (ctx->ts.tx == UTS_EFF_NONE)
		return;
	/* the reply is in: now (off the measured path) the ping's own TX stamps */
	tx_drain(ctx, false);
	if (ctx->ts.rx == UTS_EFF_HARDWARE && !m->ts.hw)
		inc(ctx, C_NO_HW_STAMP);
	/* this reply also carries the reflector's TX stamps of the previous exchange */
	struct uts_xchg *x, *prev;
	if (uts_ping_reply(&ctx->ts.ring, p, &m->ts, stack, &x, &prev))
		inc(ctx, C_NO_CARRY);
	if (x)
		take(ctx, x);
	if (prev)
		take(ctx, prev);
}

/*
 * --pace busy: spin reading CLOCK_MONOTONIC (vDSO: no system call) until the send
 * deadline, so the CPU never enters an idle state between pings (as a polling loop,
 * or sockperf's paced client). false: the run was stopped meanwhile.
 */
static bool spin_until(struct udp_ctx *ctx, uint64_t deadline)
{
	while (rl_now_ns(CLOCK_MONOTONIC) < deadline)
		if (atomic_load_explicit(&ctx->stop, memory_order_relaxed))
			return false;
	return true;
}

static void ping_loop(struct udp_ctx *ctx)
{
	const struct udp_cfg *c = ctx->cfg;
	const uint64_t start = ctx->start_mono;
	const uint64_t end = c->duration_ns ? start + c->duration_ns : UINT64_MAX;
	const uint64_t count = c->count ? c->count : UINT64_MAX;
	const uint16_t want = ctx->ts.tx != UTS_EFF_NONE ? UDP_FLAG_WANT_CARRY : 0;
	uint64_t next = start;
	for (uint64_t seq = 0; seq < count; seq++) {
		if (atomic_load_explicit(&ctx->stop, memory_order_relaxed))
			break;
		if (c->interval_ns) {
			if (next >= end)
				break;
			if (c->pace == PACE_BUSY) {
				if (!spin_until(ctx, next))
					break;
			} else {
				struct timespec ts = rl_ns_to_ts(next);
				int r;
				while ((r = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts,
							    NULL)) == EINTR)
					;
				if (r) {
					ctx->run_err = r;
					break;
				}
			}
			struct period_step s = period_advance(next, rl_now_ns(CLOCK_MONOTONIC),
							      c->interval_ns);
			for (uint64_t k = 0; k < s.missed; k++)
				inc(ctx, C_MISSED_SENDS);
			next = s.next_ns;
		}
		struct udp_pkt p = { .type = UDP_TYPE_PING, .flags = want, .session = c->session,
				     .seq = seq };
		p.send_rt = rl_now_ns(CLOCK_REALTIME);
		p.send_mono = rl_now_ns(CLOCK_MONOTONIC);
		if (p.send_mono >= end)
			break;
		udp_pkt_encode(ctx->txbuf, &p);
		bool ok = (ctx->xdp ? xdp_send(ctx) : send(ctx->fd, ctx->txbuf, c->size, 0)) ==
			  (ssize_t)c->size;
		tx_sent(ctx, ok, seq, p.send_rt, p.send_mono - start);
		if (!ok) {
			inc(ctx, C_SEND_ERRORS);
			inc(ctx, C_SENT);
			inc(ctx, C_LOST);
			continue;
		}
		inc(ctx, C_SENT);
		const uint64_t dl = p.send_mono + c->timeout_ns;
		bool got = false;
		while (!got) {
			int n = rx_wait(ctx, dl);
			uint64_t app_mono = rl_now_ns(CLOCK_MONOTONIC);
			uint64_t app_rt = rl_now_ns(CLOCK_REALTIME);
			if (n < 0) {
				ctx->run_err = -n;
				return;
			}
			if (n == 0)
				break;
			for (int i = 0; i < n; i++) {
				struct rxmsg *m = &ctx->rx[i];
				struct udp_pkt r;
				if (m->flags & MSG_TRUNC ||
				    udp_pkt_decode(m->buf, m->len, c->session, UDP_TYPE_REPLY, &r) !=
					    UDP_OK) {
					inc(ctx, C_INVALID);
					continue;
				}
				bool reo;
				enum udp_seq_kind k = udp_seq_note(ctx->seq, r.seq, seq, &reo);
				if (reo)
					inc(ctx, C_REORDERED);
				switch (k) {
				case SEQ_CURRENT:
					inc(ctx, C_REPLIES);
					ping_reply(ctx, &r, m, &p, app_mono, app_rt);
					got = true;
					break;
				case SEQ_LATE:
				case SEQ_TOO_OLD:
					inc(ctx, C_LATE);
					break;
				case SEQ_DUPLICATE:
					inc(ctx, C_DUPLICATE);
					break;
				case SEQ_BOGUS:
					inc(ctx, C_INVALID);
					break;
				}
			}
		}
		if (!got && !atomic_load_explicit(&ctx->stop, memory_order_relaxed))
			inc(ctx, C_LOST);
		else if (!got)
			inc(ctx, C_LOST); /* stopped while waiting: the ping had no reply */
		/* no reply, no read after it: TX stamps share the socket's receive buffer
		 * with the replies, so they never pile up */
		if (!got)
			tx_drain(ctx, false);
	}
	tx_drain(ctx, true);
}

static void on_wake(int sig)
{
	(void)sig;
}

static void *thread_main(void *arg)
{
	struct udp_ctx *ctx = arg;
	const struct udp_cfg *c = ctx->cfg;
	for (size_t i = 0; i < ctx->n_chans; i++)
		atomic_store(&ctx->chans[i]->tid, (int)syscall(SYS_gettid));
	if (c->cpu >= 0)
		ctx->pin_err = rt_pin_self(c->cpu);
	struct rt_sched_req req = { .policy = c->policy, .priority = c->priority };
	ctx->sched_err = rt_set_sched_self(&req);
	ctx->get_err = rt_get_sched_self(&ctx->kpolicy, &ctx->prio);
	if (rt_get_affinity_self(&ctx->affinity) != 0)
		CPU_ZERO(&ctx->affinity);
	rt_prefault_stack(PREFAULT_STACK);
	if (c->wait_how == WAIT_BLOCK) {
		/* only this thread takes WAKE_SIG; its handler does nothing, so a blocked
		 * receive returns EINTR (no SA_RESTART) */
		struct sigaction sa;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_wake;
		sigemptyset(&sa.sa_mask);
		sigaction(WAKE_SIG, &sa, NULL);
		sigset_t set;
		sigemptyset(&set);
		sigaddset(&set, WAKE_SIG);
		pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	}
	pthread_barrier_wait(&ctx->ready);
	pthread_barrier_wait(&ctx->go);
	if (!atomic_load(&ctx->abort)) {
		if (c->mode == MODE_PING)
			ping_loop(ctx);
		else
			reflect_loop(ctx);
	}
	ctx->have_ru = getrusage(RUSAGE_THREAD, &ctx->ru) == 0; /* read after `done` */
	atomic_store(&ctx->done, true);
	rt_notify_main();
	return NULL;
}

/* ---- output ----------------------------------------------------------- */

static uint64_t cnt(const struct udp_ctx *ctx, int i)
{
	return atomic_load_explicit(&ctx->cnt[i], memory_order_relaxed);
}

/*
 * A pinger that measured nothing says why it believes so, in a `log` record just
 * before the result (written by the reporter thread, the only writer then). The
 * usual cause on one machine: a thread spinning at an RT priority (--wait busy,
 * --pace busy) never leaves its CPU while it waits (and never at all when
 * --timeout >= the period), so the reflector or the kernel's packet work queued
 * on that CPU at the same or a lower priority cannot run until the pinger stops.
 */
static void diagnose(struct udp_ctx *ctx)
{
	const struct udp_cfg *c = ctx->cfg;
	if (c->mode != MODE_PING || ctx->interrupted || ctx->run_err || cnt(ctx, C_REPLIES))
		return;
	const bool spins = (c->wait_how == WAIT_BUSY || c->pace == PACE_BUSY) &&
			   c->policy != RT_OTHER;
	char cpu[32] = "its CPU";
	if (c->cpu >= 0)
		snprintf(cpu, sizeof(cpu), "CPU %d", c->cpu);
	const char *leaves = c->pace == PACE_BUSY
		? (c->wait_how == WAIT_BUSY ? "never leaves" : "leaves only while it waits for a reply in")
		: "leaves only while it sleeps between pings (never when --timeout >= the period) in";
	char msg[768];
	struct jsonw w;
	jw_init(&w);
	if (!cnt(ctx, C_SENT)) {
		snprintf(msg, sizeof(msg),
			 "no ping was sent: the socket thread did not get %s during the run (an RT thread at the same or a higher priority held it, e.g. a reflector spinning with --wait busy on the same CPU)",
			 cpu);
		out_log(&w, ctx->out_fd, "warning", "nothing_sent", msg);
	} else if (spins) {
		snprintf(msg, sizeof(msg),
			 "none of the %llu pings got a reply within --timeout (%llu came later): this thread spins at SCHED_%s %d (--wait %s, --pace %s) and %s %s, so a reflector or the kernel's packet work (ksoftirqd, a NIC's IRQ/NAPI thread) queued there at the same or a lower priority cannot run: keep them off %s, give the reflector a higher priority, or use --wait block|epoll and --pace sleep",
			 (unsigned long long)cnt(ctx, C_SENT), (unsigned long long)cnt(ctx, C_LATE),
			 c->policy == RT_FIFO ? "FIFO" : "RR", c->priority, wait_names[c->wait_how],
			 pace_names[c->pace], leaves, cpu, cpu);
		out_log(&w, ctx->out_fd, "warning", "no_replies", msg);
	} else {
		snprintf(msg, sizeof(msg),
			 "none of the %llu pings got a reply within --timeout (%llu came later): is a reflector running at %s with the same --session, and reachable?",
			 (unsigned long long)cnt(ctx, C_SENT), (unsigned long long)cnt(ctx, C_LATE),
			 c->peer_s);
		out_log(&w, ctx->out_fd, "warning", "no_replies", msg);
	}
	jw_free(&w);
}

static uint64_t tv_ns(const struct timeval *t)
{
	return (uint64_t)t->tv_sec * NS_PER_SEC + (uint64_t)t->tv_usec * 1000u;
}

static void write_counters(void *arg, struct jsonw *w, bool final)
{
	struct udp_ctx *ctx = arg;
	bool ping = ctx->cfg->mode == MODE_PING;
	jw_obj_begin(w, "udp");
	jw_str(w, "mode", mode_names[ctx->cfg->mode]);
	for (int i = 0; i < C_N; i++) {
		bool mine = i >= C_TX_STAMPS || (ping ? i < C_RECEIVED : i >= C_RECEIVED);
		if (mine)
			jw_uint(w, counter_names[i],
				atomic_load_explicit(&ctx->cnt[i], memory_order_relaxed));
	}
	if (ctx->ts.phc.fd >= 0)
		uts_write_phc(w, &ctx->ts.phc, "phc");
	if (ctx->xdp)
		uxdp_write_counters(ctx->xdp, w, "xdp", final);
	if (final && ctx->have_ru) {
		/* how the socket thread used its CPU over the whole run (--pace, --wait):
		 * a thread that sleeps or blocks between packets switches out voluntarily */
		jw_obj_begin(w, "socket_thread");
		jw_uint(w, "cpu_ns", tv_ns(&ctx->ru.ru_utime) + tv_ns(&ctx->ru.ru_stime));
		jw_uint(w, "voluntary_switches", (uint64_t)ctx->ru.ru_nvcsw);
		jw_uint(w, "involuntary_switches", (uint64_t)ctx->ru.ru_nivcsw);
		jw_obj_end(w);
	}
	jw_obj_end(w);
	if (final)
		diagnose(ctx); /* its own line, written before the result's */
}

static bool rt_ok(const struct udp_ctx *ctx)
{
	const struct udp_cfg *c = ctx->cfg;
	if (ctx->pin_err || ctx->sched_err || ctx->get_err)
		return false;
	if ((ctx->kpolicy & ~0x40000000) != rt_policy_to_kernel(c->policy) ||
	    ctx->prio != c->priority)
		return false;
	return c->cpu < 0 || (CPU_COUNT(&ctx->affinity) == 1 && CPU_ISSET(c->cpu, &ctx->affinity));
}

static void write_effective(struct jsonw *w, const struct udp_ctx *ctx, int mlock_err, int dma_fd,
			    int dma_err, const cpu_set_t *rep_aff, bool rep_pinned, bool rt_valid)
{
	const struct udp_cfg *c = ctx->cfg;
	pc_effective_open(w, c->mlock, mlock_err);
	jw_obj_begin(w, "dma_latency");
	jw_int_or_null(w, "requested_us", c->dma_us);
	jw_bool(w, "held", dma_fd >= 0);
	jw_str_or_null(w, "error", dma_err ? strerror(-dma_err) : NULL);
	jw_obj_end(w);
	jw_arr_begin(w, "threads");
	rt_write_thread_effective(w, &(struct rt_thread_view){
		.channel = ctx->chans[0]->name, .cpu = c->cpu,
		.tid = atomic_load(&ctx->chans[0]->tid),
		.kpolicy = ctx->kpolicy, .priority = ctx->prio, .affinity = &ctx->affinity,
		.pin_err = ctx->pin_err, .sched_err = ctx->sched_err, .get_err = ctx->get_err });
	jw_arr_end(w);
	pc_effective_reporter(w, rep_aff, rep_pinned, rt_valid);
	jw_str(w, "path", ctx->xdp ? "xdp" : "socket");
	if (ctx->xdp)
		uxdp_write_effective(ctx->xdp, w, "xdp");
	jw_obj_begin(w, "socket");
	jw_str(w, "local", ctx->local_s);
	uts_write_effective(w, &ctx->ts,
			    ctx->xdp ? (uxdp_stamping(ctx->xdp) ? "xdp" : "none") : NULL);
	if (c->busy_poll >= 0) {
		jw_int(w, "busy_poll_us", ctx->busy_eff);
		jw_bool(w, "prefer_busy_poll", ctx->prefer_eff);
	} else {
		jw_null(w, "busy_poll_us");
		jw_null(w, "prefer_busy_poll");
	}
	jw_arr_begin(w, "errors");
	if (ctx->busy_err)
		jw_strf(w, NULL, "SO_BUSY_POLL: %s", strerror(-ctx->busy_err));
	if (ctx->prefer_err)
		jw_strf(w, NULL, "SO_PREFER_BUSY_POLL: %s", strerror(-ctx->prefer_err));
	jw_arr_end(w);
	jw_obj_end(w);
	jw_obj_end(w);
}

static int make_channels(struct udp_ctx *ctx)
{
	const struct udp_cfg *c = ctx->cfg;
	const bool ping = c->mode == MODE_PING, tx = ctx->ts.tx != UTS_EFF_NONE,
		   hw = ctx->ts.rx == UTS_EFF_HARDWARE;
	bool on[K_N] = {
		[K_RTT] = ping, [K_STACK] = ping, [K_WAKEUP] = true, [K_PEER_WAKEUP] = ping,
		[K_PEER_TURN] = ping, [K_STACK_OUT] = ping && c->shared_clock,
		[K_STACK_BACK] = ping && c->shared_clock, [K_TURN] = !ping, [K_TX] = tx,
		[K_PEER_TX] = ping && tx, [K_LINK] = ping && tx, [K_HW_WIRE] = ping && hw,
		[K_HW_RX] = hw, [K_HW_TX] = hw,
	};
	for (int k = 0; k < K_N; k++) {
		if (!on[k])
			continue;
		int e = channel_create(&ctx->ch[k], chan_names[k], c->cpu, c->window_ns, 0);
		if (e)
			return e;
		ctx->chans[ctx->n_chans++] = ctx->ch[k];
	}
	return 0;
}

/*
 * The main thread until the socket thread is done: SIGINT/SIGTERM stop the run
 * (returns true); as the watchdog of a blocking socket thread it interrupts its
 * receive when the reply timeout or the end of the run has come.
 */
static bool watch_until_done(struct udp_ctx *ctx)
{
	const struct udp_cfg *c = ctx->cfg;
	const bool block = c->wait_how == WAIT_BLOCK;
	const uint64_t end = c->duration_ns ? ctx->start_mono + c->duration_ns : UINT64_MAX;
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGUSR1);
	bool interrupted = false;
	/* hardware timestamps: the PHC - CLOCK_REALTIME model is measured again every
	 * PHC_REFRESH_NS here, never on the socket thread */
	const bool phc = ctx->ts.phc.fd >= 0;
	uint64_t next_phc = rl_now_ns(CLOCK_MONOTONIC) + PHC_REFRESH_NS;
	while (!atomic_load(&ctx->done)) {
		uint64_t now = rl_now_ns(CLOCK_MONOTONIC);
		if (now >= end)
			atomic_store(&ctx->stop, true);
		if (phc && now >= next_phc) {
			if (uts_phc_refresh(&ctx->ts.phc, rl_now_ns(CLOCK_REALTIME)) != 0) {
				/* counted in the phc object's errors */
			}
			next_phc = now + PHC_REFRESH_NS;
		}
		bool stop = atomic_load(&ctx->stop);
		uint64_t until = atomic_load_explicit(&ctx->wait_until, memory_order_relaxed);
		if (block && (stop || (until && now >= until)))
			pthread_kill(ctx->thread, WAKE_SIG);
		/* wake exactly at the reply deadline of a waiting pinger (a lost reply is
		 * counted on time, and a busy ping-pong costs ~1/timeout wake-ups per
		 * second); every WATCH_MAX_NS while stopping or between two waits; and at
		 * the end of the run */
		uint64_t wake;
		if (!block)
			wake = now + WATCH_IDLE_NS; /* the thread watches its own deadlines */
		else if (stop || !until || until <= now)
			wake = now + WATCH_MAX_NS; /* look again soon */
		else if (until == UINT64_MAX)
			wake = now + WATCH_IDLE_NS; /* a reflector waiting without deadline */
		else
			wake = until;
		if (end > now && end < wake)
			wake = end;
		if (phc && next_phc < wake)
			wake = next_phc;
		uint64_t nap = wake > now + WATCH_MIN_NS ? wake - now : WATCH_MIN_NS;
		struct timespec ts = rl_ns_to_ts(nap);
		int sig = sigtimedwait(&set, NULL, &ts);
		if (sig == SIGINT || sig == SIGTERM) {
			atomic_store(&ctx->stop, true);
			interrupted = true;
		}
	}
	return interrupted;
}

static int udp_run(void *p, const struct probe_env *env)
{
	struct udp_ctx *ctx = p;
	const struct udp_cfg *c = ctx->cfg;
	int out_fd = STDOUT_FILENO, dma_fd = -1, mlock_err = 0, dma_err = 0, code = RL_EXIT_ERROR;
	bool barriers = false, started = false;
	struct jsonw w;
	jw_init(&w);

	rt_block_signals(); /* inherited: signals reach only main's wait */

	if (c->output) {
		out_fd = open(c->output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (out_fd < 0) {
			fprintf(stderr, "rtlab-probe udp: --output: cannot open %s: %s\n", c->output,
				strerror(errno));
			return RL_EXIT_ERROR;
		}
	}
	char msg[512];
	int xcode = 0;
	int e = c->path == PATH_XDP ? setup_xdp(ctx, msg, sizeof(msg), &xcode)
				    : setup_socket(ctx, msg, sizeof(msg));
	if (e == -EOPNOTSUPP && !xcode) { /* --timestamps hardware where there is none */
		fprintf(stderr, "rtlab-probe udp: skipped: %s\n", msg);
		code = RL_EXIT_SKIPPED;
		goto out;
	}
	if (e) {
		fprintf(stderr, "rtlab-probe udp: %s\n", msg);
		code = xcode ? xcode
		       : e == -EADDRNOTAVAIL || e == -EACCES ? RL_EXIT_USAGE : RL_EXIT_ERROR;
		goto out;
	}
	ctx->rx = calloc(BATCH, sizeof(*ctx->rx));
	ctx->mm = calloc(BATCH, sizeof(*ctx->mm));
	ctx->txbuf = calloc(1, UDP_MAX_SIZE);
	ctx->seq = calloc(1, sizeof(*ctx->seq));
	if (!ctx->rx || !ctx->mm || !ctx->txbuf || !ctx->seq || make_channels(ctx) != 0) {
		fprintf(stderr, "rtlab-probe udp: out of memory\n");
		goto out;
	}

	bool rep_pinned = c->housekeeping >= 0 && rt_pin_self(c->housekeeping) == 0;
	cpu_set_t rep_aff;
	if (rt_get_affinity_self(&rep_aff) != 0)
		CPU_ZERO(&rep_aff);
	if (c->mlock)
		mlock_err = rt_mlockall();
	if (c->dma_us >= 0)
		dma_err = rt_dma_latency_hold((int32_t)c->dma_us, &dma_fd);

	pthread_barrier_init(&ctx->ready, NULL, 2);
	pthread_barrier_init(&ctx->go, NULL, 2);
	barriers = true;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, THREAD_STACK);
	e = pthread_create(&ctx->thread, &attr, thread_main, ctx);
	pthread_attr_destroy(&attr);
	if (e) {
		fprintf(stderr, "rtlab-probe udp: cannot create a thread: %s\n", strerror(e));
		goto out;
	}
	started = true;
	pthread_barrier_wait(&ctx->ready);

	bool rt_valid = rt_ok(ctx) && !(c->mlock && mlock_err);
	char why[384] = "";
	if (ctx->pin_err)
		snprintf(why, sizeof(why),
			 "cannot pin the socket thread to CPU %d (%s): run in a cpuset that contains it, or pass --allow-non-rt",
			 c->cpu, strerror(-ctx->pin_err));
	else if (!rt_ok(ctx))
		snprintf(why, sizeof(why),
			 "cannot set %s priority %d on the socket thread (%s): run as root or grant CAP_SYS_NICE, or pass --allow-non-rt",
			 rt_policy_names[c->policy], c->priority,
			 ctx->sched_err ? strerror(-ctx->sched_err) : "not in effect after setting");
	else if (c->mlock && mlock_err)
		snprintf(why, sizeof(why),
			 "cannot lock memory with mlockall (%s): run as root or grant CAP_IPC_LOCK, or pass --no-mlock or --allow-non-rt",
			 strerror(-mlock_err));
	else if (dma_err)
		snprintf(why, sizeof(why),
			 "cannot hold /dev/cpu_dma_latency (%s): run as root, drop --dma-latency, or pass --allow-non-rt",
			 strerror(-dma_err));
	if (why[0] && !c->allow_non_rt) {
		atomic_store(&ctx->abort, true);
		pthread_barrier_wait(&ctx->go);
		pthread_join(ctx->thread, NULL);
		started = false;
		fprintf(stderr, "rtlab-probe udp: skipped: %s\n", why);
		code = RL_EXIT_SKIPPED;
		goto out;
	}

	uint64_t start_real = rl_now_ns(CLOCK_REALTIME) + START_LEAD_NS;
	uint64_t start_mono = rl_now_ns(CLOCK_MONOTONIC) + START_LEAD_NS;
	ctx->start_mono = start_mono;
	ctx->out_fd = out_fd;
	pc_header_begin(&w, "udp", env, start_real, start_mono);
	udp_report_config(ctx, &w, "config");
	write_effective(&w, ctx, mlock_err, dma_fd, dma_err, &rep_aff, rep_pinned, rt_valid);
	sysinfo_write(&w, "system");
	jw_obj_end(&w);
	int out_err = jw_emit(&w, out_fd);
	if (why[0])
		out_log(&w, out_fd, "warning", "no_rt", why);
	if (ctx->xdp) { /* no socket stamps on this path: the XDP program's, RX only */
		if (c->ts != UTS_NONE && !uxdp_stamping(ctx->xdp))
			out_log(&w, out_fd, "warning", "no_rx_timestamps",
				  "the XDP program could not stamp frames (no XDP metadata here): no stack/wakeup split");
		if (uxdp_warning(ctx->xdp))
			out_log(&w, out_fd, "warning", "xdp_queues", uxdp_warning(ctx->xdp));
	} else if (c->ts != UTS_NONE && ctx->ts.rx == UTS_EFF_NONE) {
		out_log(&w, out_fd, "warning", "no_rx_timestamps",
			  "SO_TIMESTAMPING software RX timestamps are not available: no stack/wakeup split");
	} else if (c->ts != UTS_NONE && c->ts != UTS_SOFTWARE_RX && ctx->ts.tx == UTS_EFF_NONE) {
		out_log(&w, out_fd, "warning", "no_tx_timestamps",
			  "SO_TIMESTAMPING TX timestamps (OPT_ID, OPT_TSONLY) are not available: no send-side split (tx, peer.tx, link)");
	}
	if (ctx->ts.reason[0])
		out_log(&w, out_fd, "info", "hw_timestamps", ctx->ts.reason);
	if (ctx->busy_err || ctx->prefer_err)
		out_log(&w, out_fd, "warning", "busy_poll",
			  "SO_BUSY_POLL/SO_PREFER_BUSY_POLL could not be set as requested (see effective.socket.errors; raising it needs CAP_NET_ADMIN)");

	struct reporter *rep = NULL;
	struct reporter_cfg rc = {
		.out_fd = out_fd,
		.samples_fd = -1,
		.snapshot_ns = c->snapshot_ns,
		.start_mono_ns = start_mono,
		.chans = ctx->chans,
		.n_chans = ctx->n_chans,
		.extra = write_counters,
		.extra_arg = ctx,
	};
	e = reporter_start(&rep, &rc);
	if (e) {
		atomic_store(&ctx->abort, true);
		pthread_barrier_wait(&ctx->go);
		pthread_join(ctx->thread, NULL);
		started = false;
		fprintf(stderr, "rtlab-probe udp: cannot start the reporter: %s\n", strerror(-e));
		goto out;
	}
	pthread_barrier_wait(&ctx->go);

	bool interrupted = watch_until_done(ctx);
	pthread_join(ctx->thread, NULL);
	started = false;
	ctx->interrupted = interrupted; /* the reporter reads it after reporter_finish's lock */

	struct reporter_outcome o = { .status = "completed", .exit_code = RL_EXIT_OK };
	char errmsg[128] = "";
	if (ctx->run_err)
		snprintf(errmsg, sizeof(errmsg), "socket thread: %s", strerror(ctx->run_err));
	reporter_outcome_stopped(&o, interrupted, errmsg);
	code = reporter_conclude(rep, &o, out_err, "udp");
out:
	if (started) {
		atomic_store(&ctx->abort, true);
		pthread_join(ctx->thread, NULL);
	}
	jw_free(&w);
	if (barriers) {
		pthread_barrier_destroy(&ctx->ready);
		pthread_barrier_destroy(&ctx->go);
	}
	if (dma_fd >= 0)
		close(dma_fd);
	if (out_fd != STDOUT_FILENO)
		close(out_fd);
	return code;
}

static void udp_fini(void *p)
{
	struct udp_ctx *ctx = p;
	if (!ctx)
		return;
	for (size_t i = 0; i < ctx->n_chans; i++)
		channel_destroy(ctx->chans[i]);
	if (ctx->ep >= 0)
		close(ctx->ep);
	if (ctx->fd >= 0)
		close(ctx->fd);
	uts_close(&ctx->ts);
	uxdp_close(ctx->xdp);
	free(ctx->rx);
	free(ctx->mm);
	free(ctx->txbuf);
	free(ctx->seq);
	free(ctx);
}

const struct probe_ops udp_probe = {
	.name = "udp",
	.summary = "UDP ping-pong round trips with the stack/wakeup/send split (reflect | ping)",
	.usage = "rtlab-probe udp reflect --bind ADDR:PORT --session TOKEN [options]\n"
		 "rtlab-probe udp ping --peer ADDR:PORT --session TOKEN [--rate HZ] [--size B]\n"
		 "                     [--pace sleep|busy] [--wait block|epoll|busy]\n"
		 "\n"
		 "The pinger sends on absolute deadlines (sleeping until each, or spinning with\n"
		 "--pace busy) and histograms the round trip (rtt: send() -> reply, in full)\n"
		 "and, with kernel timestamps, the split: wakeup (RX timestamp -> thread\n"
		 "running) on both ends, the stack time, and with TX timestamps its send side\n"
		 "(tx, peer.tx: send() -> driver) and the rest (link); with a NIC's hardware\n"
		 "timestamps (--timestamps hardware|auto) also hw.wire, hw.rx, hw.tx.\n"
		 "--timestamps hardware where the NIC has none (veth, lo) is refused (exit 4).\n"
		 "The reflector answers only well-formed pings of its session, never with more\n"
		 "bytes than received, and at most --max-rate per second. Counters are in the\n"
		 "`udp` object of snapshots and the result.\n"
		 "\n"
		 "--path xdp sends and receives through an AF_XDP socket instead (IPv4, root):\n"
		 "an XDP program on the interface redirects only the probe's address and port\n"
		 "to it and passes all other traffic on; it is attached through a BPF link and\n"
		 "goes away with the process. The wakeup split then starts when the XDP program\n"
		 "ran (no TX or hardware stamps on this path). Either path talks to either path.\n"
		 "See docs/probes/udp.md.\n"
#ifdef RTLAB_AF_XDP
		 "This rtlab-probe is built with the AF_XDP path.",
#else
		 "This rtlab-probe is built WITHOUT the AF_XDP path (meson -Daf_xdp).",
#endif
	.opts = udp_opts,
	.n_opts = O_N,
	.unavailable = NULL,
	.positional = "mode",
	.init = udp_init,
	.report_config = udp_report_config,
	.run = udp_run,
	.fini = udp_fini,
};
