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
 * format and the pure parts: udp_proto.h; timestamps: udp_ts.h; the socket
 * thread: udp_io.c. Safety: docs/probes/udp.md.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "output.h"
#include "udp_probe.h"

#define THREAD_STACK (256 * 1024)
#define WATCH_MIN_NS (100 * NS_PER_US)
#define WATCH_MAX_NS (10 * NS_PER_MS)
#define WATCH_IDLE_NS NS_PER_SEC /* nothing to watch but signals and the end */
#define PHC_REFRESH_NS NS_PER_SEC /* hardware timestamps: PHC offset measured this often */

enum {
	O_MODE, O_BIND, O_PEER, O_SESSION, O_RATE, O_SIZE, O_DURATION, O_COUNT_PKTS, O_TIMEOUT,
	O_CPU, O_POLICY, O_PRIORITY, O_BUSY_POLL, O_RECV, O_WAIT, O_TIMESTAMPS, O_SHARED_CLOCK,
	O_MAX_RATE, O_BURST,
	O_PACE, O_CPU_OLD,
	O_DATAPATH, O_IFNAME, O_XDP_QUEUE, O_XDP_MODE, /* the AF_XDP path: udp_xdp.h */
	O_N
};

static const struct opt_def udp_opts[O_N] = {
	[O_MODE] = { "mode", OPT_ENUM, "MODE",
		     "reflect (answer pings) or ping (measure); also the first bare argument", 0,
		     0, udp_mode_names, NULL, "required" },
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
		     udp_recv_names, "recv", NULL },
	[O_WAIT] = { "wait", OPT_ENUM, "HOW",
		     "wait in a blocking receive, in epoll_wait, or spin (non-blocking)", 0, 0,
		     udp_wait_names, "block", NULL },
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
	[O_CPU_OLD] = OPT_DEF_ALIAS("cpu", "cpus"),
	[O_PACE] = { "pace", OPT_ENUM, "HOW",
		     "ping with --rate: wait for each send deadline in clock_nanosleep (sleep, as a control loop does) or spin reading the clock (busy, as a polling loop does: the CPU never idles)",
		     0, 0, udp_pace_names, "sleep", NULL },
	[O_DATAPATH] = { "path", OPT_ENUM, "PATH",
		     "socket (UDP socket) or xdp (AF_XDP socket + XDP filter; IPv4, needs CAP_NET_ADMIN/CAP_BPF)",
		     0, 0, udp_path_names, "socket", NULL },
	[O_IFNAME] = { "ifname", OPT_STRING, "IF", "xdp: the interface to attach to", 0, 0, NULL,
		       NULL, "the interface of --bind (reflect) or of the route to --peer (ping)" },
	[O_XDP_QUEUE] = { "xdp-queue", OPT_INT, "N", "xdp: the RX queue the AF_XDP socket serves",
			  0, 1023, NULL, "0", NULL },
	[O_XDP_MODE] = { "xdp-mode", OPT_ENUM, "MODE",
			 "xdp: attach the program in the driver (native), generic (skb) mode, or native if possible else generic",
			 0, 0, udp_xdp_mode_names, "auto", NULL },
};

static bool is_wildcard(const struct sockaddr_storage *a)
{
	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr == htonl(INADDR_ANY);
	const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)a;
	return IN6_IS_ADDR_UNSPECIFIED(&a6->sin6_addr);
}

static int udp_init(void *p, struct probe_args *a)
{
	const struct opt_value *v = a->vals;
	struct udp_ctx *ctx = p;
	ctx->fd = ctx->ep = -1;
	ctx->ts.phc.fd = -1;
	struct udp_cfg *c = &ctx->cfg_store;
	c->run = a->run;
	if (!v[O_MODE].set)
		return probe_refuse(a, "give the mode: `udp reflect ...` or `udp ping ...` (--mode reflect|ping)");
	c->mode = (int)v[O_MODE].i;
	if (!v[O_SESSION].set)
		return probe_refuse(a, "--session: required (a token both ends share)");
	c->session = udp_session_token(v[O_SESSION].s);
	if (v[O_BIND].set) {
		c->bind_s = v[O_BIND].s;
		if (udp_parse_addr(c->bind_s, &c->bind, &c->bind_len) != 0)
			return probe_refuse(a, "--bind: expected a numeric ADDR:PORT (e.g. 10.0.0.1:7000 or [fd00::1]:7000)");
		c->has_bind = true;
	}
	if (c->mode == MODE_REFLECT) {
		if (!c->has_bind)
			return probe_refuse(a, "--bind: required for reflect");
		if (is_wildcard(&c->bind))
			return probe_refuse(a, "--bind: give a specific address; the reflector never binds a wildcard address");
		if (v[O_PEER].set)
			return probe_refuse(a, "--peer: only for ping");
		if (v[O_COUNT_PKTS].set)
			return probe_refuse(a, "--count: only for ping");
	} else {
		if (!v[O_PEER].set)
			return probe_refuse(a, "--peer: required for ping");
		c->peer_s = v[O_PEER].s;
		if (udp_parse_addr(c->peer_s, &c->peer, &c->peer_len) != 0)
			return probe_refuse(a, "--peer: expected a numeric ADDR:PORT (e.g. 10.0.0.1:7000 or [fd00::1]:7000)");
		if (c->has_bind && c->bind.ss_family != c->peer.ss_family)
			return probe_refuse(a, "--bind and --peer: must be the same address family");
	}
	c->rate = (uint64_t)v[O_RATE].i;
	c->interval_ns = c->rate ? NS_PER_SEC / c->rate : 0;
	c->size = (size_t)v[O_SIZE].i;
	c->duration_ns = v[O_DURATION].set ? (uint64_t)v[O_DURATION].i : 0;
	c->count = v[O_COUNT_PKTS].set ? (uint64_t)v[O_COUNT_PKTS].i : 0;
	c->timeout_ns = (uint64_t)v[O_TIMEOUT].i;
	c->cpu = opts_one_cpu(&v[O_CPU]);	/* online: checked by the parser */
	if (probe_sched_no_deadline(&v[O_POLICY], &v[O_PRIORITY], 98,
				    "--policy: deadline is not supported by udp (the socket thread is event-driven); use fifo, rr or other",
				    &c->policy, &c->priority, a->err, a->errlen) != 0) {
		return -EINVAL;
	}
	c->busy_poll = v[O_BUSY_POLL].set ? (int)v[O_BUSY_POLL].i : -1;
	c->recv_call = (int)v[O_RECV].i;
	c->wait_how = (int)v[O_WAIT].i;
	c->pace = (int)v[O_PACE].i;
	if (c->mode == MODE_REFLECT && v[O_PACE].given)
		return probe_refuse(a, "--pace: only for ping (it paces the sends; the reflector only waits: --wait)");
	c->ts = (int)v[O_TIMESTAMPS].i;
	c->shared_clock = v[O_SHARED_CLOCK].i != 0;
	if (c->shared_clock && c->mode != MODE_PING)
		return probe_refuse(a, "--shared-clock: only for ping");
	c->max_rate = (uint64_t)v[O_MAX_RATE].i;
	c->burst = (uint64_t)v[O_BURST].i;
	if (c->cpu >= 0)
		CPU_SET(c->cpu, &a->used);
	c->path = (int)v[O_DATAPATH].i;
	c->ifname = v[O_IFNAME].set ? v[O_IFNAME].s : NULL;
	c->xdp_queue = (uint32_t)v[O_XDP_QUEUE].i;
	c->xdp_mode = (int)v[O_XDP_MODE].i;
	if (c->path == PATH_XDP) {
		if ((c->has_bind && c->bind.ss_family != AF_INET) ||
		    (c->mode == MODE_PING && c->peer.ss_family != AF_INET))
			return probe_refuse(a, "--path xdp: IPv4 addresses only (use --path socket for IPv6)");
		if (v[O_RECV].given)
			return probe_refuse(a, "--recv: only for --path socket (the xdp path takes up to 8 frames from its ring per wakeup)");
		if (c->ts == UTS_HARDWARE)
			return probe_refuse(a, "--timestamps hardware: only for --path socket (the xdp path stamps frames in its XDP program; use software or auto)");
	} else if (v[O_IFNAME].given || v[O_XDP_QUEUE].given || v[O_XDP_MODE].given) {
		return probe_refuse(a, "--ifname, --xdp-queue, --xdp-mode: only with --path xdp");
	}
	ctx->cfg = c;
	return 0;
}

static void on_wake(int sig)
{
	(void)sig;
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
		int e = channel_create(&ctx->ch[k], udp_chan_names[k], c->cpu, c->run->window_ns, 0);
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
static bool udp_wait(void *p, bool (*finished)(const void *arg), const void *arg)
{
	struct udp_ctx *ctx = p;
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
	while (!finished(arg)) {
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

static void udp_fini(void *p)
{
	struct udp_ctx *ctx = p;
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
}

/* The socket (or the AF_XDP socket), the buffers and the channels; one socket thread. */
static int udp_prepare(void *p, struct probe_plan *plan)
{
	struct udp_ctx *ctx = p;
	const struct udp_cfg *c = ctx->cfg;
	char msg[512];
	int xcode = 0;
	int e = c->path == PATH_XDP ? udp_setup_xdp(ctx, msg, sizeof(msg), &xcode)
				    : udp_setup_socket(ctx, msg, sizeof(msg));
	if (e == -EOPNOTSUPP && !xcode) { /* --timestamps hardware where there is none */
		fprintf(stderr, "rtlab-probe udp: skipped: %s\n", msg);
		return RL_EXIT_SKIPPED;
	}
	if (e) {
		fprintf(stderr, "rtlab-probe udp: %s\n", msg);
		return xcode ? xcode
		       : e == -EADDRNOTAVAIL || e == -EACCES ? RL_EXIT_USAGE : RL_EXIT_ERROR;
	}
	ctx->rx = calloc(BATCH, sizeof(*ctx->rx));
	ctx->mm = calloc(BATCH, sizeof(*ctx->mm));
	ctx->txbuf = calloc(1, UDP_MAX_SIZE);
	ctx->seq = calloc(1, sizeof(*ctx->seq));
	struct probe_thread *pt = probe_plan_threads(plan, 1);
	if (!ctx->rx || !ctx->mm || !ctx->txbuf || !ctx->seq || !pt || make_channels(ctx) != 0) {
		fprintf(stderr, "rtlab-probe udp: out of memory\n");
		return RL_EXIT_ERROR;
	}
	probe_thread_place(pt, c->cpu, c->policy, c->priority, "%s", ctx->chans[0]->name);
	probe_plan_channels(plan, ctx->chans, ctx->n_chans, &ctx->stop, NULL);
	return 0;
}

static void udp_thread_ready(void *p, struct probe_thread *pt)
{
	struct udp_ctx *ctx = p;
	ctx->thread = pthread_self();
	for (size_t i = 0; i < ctx->n_chans; i++)
		atomic_store(&ctx->chans[i]->tid, pt->rt.tid);
	if (ctx->cfg->wait_how == WAIT_BLOCK) {
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
}

static int udp_start(void *p, const struct probe_start *s)
{
	struct udp_ctx *ctx = p;
	ctx->start_mono = s->monotonic_ns;
	ctx->out_fd = s->out_fd;
	return 0;
}

static void udp_measure(void *p, struct probe_thread *pt)
{
	struct udp_ctx *ctx = p;
	(void)pt;
	if (ctx->cfg->mode == MODE_PING)
		udp_ping_loop(ctx);
	else
		udp_reflect_loop(ctx);
	ctx->have_ru = getrusage(RUSAGE_THREAD, &ctx->ru) == 0; /* the result reads it */
}

static void udp_ended(void *p, struct probe_end *e)
{
	struct udp_ctx *ctx = p;
	ctx->interrupted = e->interrupted; /* the reporter reads it after reporter_finish's lock */
	if (ctx->run_err)
		snprintf(e->err, e->errlen, "socket thread: %s", strerror(ctx->run_err));
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
	PROBE_OPTIONS(udp_opts, UDP_SHARED, O_PACE),
	.housekeeping_help = "first online CPU other than --cpu",
	.positional = "mode",
	.stack = THREAD_STACK,
	.ctx_size = sizeof(struct udp_ctx),
	PROBE_HOOKS(udp),
	.thread_ready = udp_thread_ready,
	.write_effective_end = udp_write_effective,
	.write_logs = udp_write_logs,
	.write_extra = udp_write_counters,
	.wait = udp_wait,
	.ended = udp_ended,
};
