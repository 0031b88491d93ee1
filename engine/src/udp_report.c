/* SPDX-License-Identifier: MIT */
/*
 * What the `udp` probe writes (udp_probe.h): its configuration and the socket as it
 * was set up, in the header; the log records of what could not be had as asked; the
 * counters in every snapshot and the result, and a pinger's diagnosis when nothing
 * came back.
 */

#include <string.h>
#include <sys/resource.h>

#include "output.h"
#include "udp_probe.h"

/* The names of the option values, counters and channels, as written. */
const char *const udp_mode_names[] = { "reflect", "ping", NULL };
const char *const udp_recv_names[] = { "recv", "recvmmsg", NULL };
const char *const udp_wait_names[] = { "block", "epoll", "busy", NULL };
/* --pace: how the pinger waits for its next send deadline (--wait: for the reply) */
const char *const udp_pace_names[] = { "sleep", "busy", NULL };
const char *const udp_path_names[] = { "socket", "xdp", NULL };
const char *const udp_xdp_mode_names[] = { "auto", "native", "generic", NULL };
const char *const udp_counter_names[C_N] = {
	"sent", "replies", "lost", "late", "reordered", "duplicate", "invalid", "missed_sends",
	"send_errors", "no_timestamp", "no_carry", "received", "replied", "short", "bad_magic",
	"bad_version", "bad_session", "bad_type", "oversize", "rate_limited", "tx_stamps",
	"tx_stamp_missing", "tx_stamp_unmatched", "no_hw_timestamp",
};

const char *const udp_chan_names[K_N] = {
	"rtt", "stack", "wakeup", "peer.wakeup", "peer.turn", "stack.out", "stack.back", "turn",
	"tx", "peer.tx", "link", "hw.wire", "hw.rx", "hw.tx",
};

void udp_write_config(const void *p, struct jsonw *w)
{
	const struct udp_cfg *c = ((const struct udp_ctx *)p)->cfg;
	jw_str(w, "mode", udp_mode_names[c->mode]);
	jw_str_or_null(w, "bind", c->bind_s);
	jw_str_or_null(w, "peer", c->peer_s);
	jw_strf(w, "session_token", "%016llx", (unsigned long long)c->session);
	jw_uint(w, "rate_hz", c->rate);
	jw_uint(w, "size", c->size);
	jw_uint_or_null(w, "duration_ns", c->duration_ns);
	jw_uint_or_null(w, "count", c->count);
	jw_uint(w, "timeout_ns", c->timeout_ns);
	jw_int_or_null(w, "cpu", c->cpu);
	jw_str(w, "policy", rt_policy_names[c->policy]);
	jw_int(w, "priority", c->priority);
	jw_int_or_null(w, "busy_poll_us", c->busy_poll);
	jw_str(w, "recv", udp_recv_names[c->recv_call]);
	jw_str(w, "wait", udp_wait_names[c->wait_how]);
	jw_str(w, "pace", udp_pace_names[c->pace]);
	jw_str(w, "timestamps", uts_kind_names[c->ts]);
	jw_bool(w, "shared_clock", c->shared_clock);
	jw_uint(w, "max_rate_pps", c->max_rate);
	jw_uint(w, "burst", c->burst);
	probe_write_run_config(w, c->run, UDP_SHARED & ~RUN_OPT(OUTPUT));
	jw_str(w, "path", udp_path_names[c->path]);
	jw_str_or_null(w, "ifname", c->ifname);
	jw_uint(w, "xdp_queue", c->xdp_queue);
	jw_str(w, "xdp_mode", udp_xdp_mode_names[c->xdp_mode]);
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
			 c->policy == RT_FIFO ? "FIFO" : "RR", c->priority, udp_wait_names[c->wait_how],
			 udp_pace_names[c->pace], leaves, cpu, cpu);
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

void udp_write_counters(void *arg, struct jsonw *w, bool final)
{
	struct udp_ctx *ctx = arg;
	bool ping = ctx->cfg->mode == MODE_PING;
	jw_obj_begin(w, "udp");
	jw_str(w, "mode", udp_mode_names[ctx->cfg->mode]);
	for (int i = 0; i < C_N; i++) {
		bool mine = i >= C_TX_STAMPS || (ping ? i < C_RECEIVED : i >= C_RECEIVED);
		if (mine)
			jw_uint(w, udp_counter_names[i],
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

void udp_write_effective(const void *p, struct jsonw *w)
{
	const struct udp_ctx *ctx = p;
	const struct udp_cfg *c = ctx->cfg;
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
}

/* What the set-up could not have as asked: timestamps, busy polling, XDP queues. */
void udp_write_logs(const void *p, struct jsonw *w, int fd)
{
	const struct udp_ctx *ctx = p;
	const struct udp_cfg *c = ctx->cfg;
	if (ctx->xdp) { /* no socket stamps on this path: the XDP program's, RX only */
		if (c->ts != UTS_NONE && !uxdp_stamping(ctx->xdp))
			out_log(w, fd, "warning", "no_rx_timestamps",
				"the XDP program could not stamp frames (no XDP metadata here): no stack/wakeup split");
		if (uxdp_warning(ctx->xdp))
			out_log(w, fd, "warning", "xdp_queues", uxdp_warning(ctx->xdp));
	} else if (c->ts != UTS_NONE && ctx->ts.rx == UTS_EFF_NONE) {
		out_log(w, fd, "warning", "no_rx_timestamps",
			"SO_TIMESTAMPING software RX timestamps are not available: no stack/wakeup split");
	} else if (c->ts != UTS_NONE && c->ts != UTS_SOFTWARE_RX && ctx->ts.tx == UTS_EFF_NONE) {
		out_log(w, fd, "warning", "no_tx_timestamps",
			"SO_TIMESTAMPING TX timestamps (OPT_ID, OPT_TSONLY) are not available: no send-side split (tx, peer.tx, link)");
	}
	if (ctx->ts.reason[0])
		out_log(w, fd, "info", "hw_timestamps", ctx->ts.reason);
	if (ctx->busy_err || ctx->prefer_err)
		out_log(w, fd, "warning", "busy_poll",
			"SO_BUSY_POLL/SO_PREFER_BUSY_POLL could not be set as requested (see effective.socket.errors; raising it needs CAP_NET_ADMIN)");
}
