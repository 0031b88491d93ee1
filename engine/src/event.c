/* SPDX-License-Identifier: MIT */
/*
 * The `event` probe: latency of handling an external event, measured against
 * the event's capture time (the "timer capture" method, generalised).
 *
 * A source (event.h: soft, net, gpio, ptp, pps) delivers events with the time
 * they were captured in its clock domain. One pinned RT thread waits for the
 * events; on each it reads CLOCK_MONOTONIC and records
 * latency = handling time - (capture time converted to CLOCK_MONOTONIC).
 * The conversion offset is measured (bracketed readings) at the start and
 * again at the end; both and the uncertainty are reported.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "channel.h"
#include "event.h"
#include "probe.h"

#define THREAD_STACK (256 * 1024)
#define POLL_NS (50 * NS_PER_MS)

static const char *const src_names[] = { "soft", "net", "gpio", "ptp", "pps", NULL };
static const struct evsrc_ops *const src_ops[] = { &evsrc_soft, &evsrc_net, &evsrc_gpio,
						   &evsrc_ptp, &evsrc_pps };
static const char *const edge_names[] = { "rising", "falling", "both", NULL };
static const char *const gclk_names[] = { "monotonic", "realtime", "hte", NULL };

enum {
	O_SOURCE, O_DEVICE, O_LINE, O_EDGE, O_GPIO_CLOCK, O_BIND, O_RATE, O_GEN_CPU, O_CPU,
	O_POLICY, O_PRIORITY, O_DURATION, O_COUNT_EV,
	O_CPU_OLD, O_N
};
#define EVENT_SHARED (RUN_OPTS_COMMON | RUN_OPT(HOUSEKEEPING) | RUN_OPT(WINDOW))

static const struct opt_def ev_opts[O_N] = {
	[O_SOURCE] = { "source", OPT_ENUM, "SRC", "event source", 0, 0, src_names, "soft", NULL },
	[O_DEVICE] = { "device", OPT_STRING, "PATH", "gpio/ptp/pps: the device node", 0, 0, NULL,
		       NULL, "none" },
	[O_LINE] = { "line", OPT_INT, "N", "gpio: line offset; ptp: external timestamp channel",
		     0, 65535, NULL, "0", NULL },
	[O_EDGE] = { "edge", OPT_ENUM, "EDGE", "gpio: edges that are events", 0, 0, edge_names,
		     "rising", NULL },
	[O_GPIO_CLOCK] = { "gpio-clock", OPT_ENUM, "CLOCK", "gpio: event timestamp clock", 0, 0,
			   gclk_names, "monotonic", NULL },
	[O_BIND] = { "bind", OPT_STRING, "ADDR:PORT", "net: UDP address whose datagrams are events",
		     0, 0, NULL, NULL, "none" },
	[O_RATE] = { "rate", OPT_INT, "HZ", "soft: events per second of the generator", 1,
		     100000, NULL, "1000", NULL },
	[O_GEN_CPU] = { "gen-cpu", OPT_INT, "CPU", "soft: CPU of the generator thread", 0,
			CPU_SETSIZE - 1, NULL, NULL, "not pinned" },
	[O_CPU] = { "cpus", OPT_CPULIST, "CPU", "pin the handling thread to this CPU", 0, 1,
		    NULL, NULL, "not pinned" },
	[O_POLICY] = { "policy", OPT_ENUM, "POLICY", "scheduling policy of the handling thread", 0,
		       0, rt_policy_names, "fifo", NULL },
	[O_PRIORITY] = { "priority", OPT_INT, NULL, "priority (fifo/rr: 1..99; other: 0)", 0, 99,
			 NULL, NULL, "98 for fifo/rr" },
	[O_DURATION] = { "duration", OPT_DURATION, NULL, "stop after this run time",
			 (int64_t)NS_PER_MS, (int64_t)(1000 * 3600 * NS_PER_SEC), NULL, NULL,
			 "until SIGINT/SIGTERM (or --count)" },
	[O_COUNT_EV] = { "count", OPT_INT, "N", "stop after N events", 1, INT64_MAX / 2, NULL,
			 NULL, "until --duration or SIGINT/SIGTERM" },
	[O_CPU_OLD] = OPT_DEF_ALIAS("cpu", "cpus"),
};

struct ev_cfg {
	const struct run_opts *run;
	int source;
	struct evsrc_cfg src;
	int cpu;
	enum rt_policy policy;
	int priority;
	uint64_t duration_ns, count;
};

struct ev_ctx {
	const struct ev_cfg *cfg;
	struct ev_cfg cfg_store;
	_Alignas(RL_CACHELINE) atomic_uint_least64_t events, lost;
	_Alignas(RL_CACHELINE) struct channel *ch;
	struct evsrc src;
	bool src_open;
	/* conversion capture domain -> CLOCK_MONOTONIC: mono = capture - offset */
	int64_t offset_ns;
	uint64_t unc_ns;
	const char *method;
	int64_t rt_off_start, rt_off_end;
	uint64_t rt_unc;
	bool rt_end_valid;
	uint64_t start_mono;
	atomic_bool stop;
	int run_err;
};

static int ev_init(void *p, struct probe_args *a)
{
	const struct opt_value *v = a->vals;
	struct ev_ctx *ctx = p;
	ctx->src.fd = -1;
	struct ev_cfg *c = &ctx->cfg_store;
	c->run = a->run;
	c->source = (int)v[O_SOURCE].i;
	c->src.device = v[O_DEVICE].set ? v[O_DEVICE].s : NULL;
	c->src.line = (int)v[O_LINE].i;
	c->src.edge = (int)v[O_EDGE].i;
	c->src.gpio_clock = (int)v[O_GPIO_CLOCK].i;
	c->src.bind = v[O_BIND].set ? v[O_BIND].s : NULL;
	c->src.interval_ns = NS_PER_SEC / (uint64_t)v[O_RATE].i;
	c->src.gen_cpu = v[O_GEN_CPU].set ? (int)v[O_GEN_CPU].i : -1;
	bool needs_dev = c->source >= 2;
	if (needs_dev && !c->src.device)
		return probe_refuse(a, "--device: required for --source gpio|ptp|pps");
	if (!needs_dev && c->src.device)
		return probe_refuse(a, "--device: only for --source gpio|ptp|pps");
	if (c->source == 1 && !c->src.bind)
		return probe_refuse(a, "--bind: required for --source net");
	if (c->source != 1 && c->src.bind)
		return probe_refuse(a, "--bind: only for --source net");
	c->cpu = opts_one_cpu(&v[O_CPU]);
	if ((c->cpu >= 0 && !CPU_ISSET(c->cpu, a->env->online)) ||
	    (c->src.gen_cpu >= 0 && !CPU_ISSET(c->src.gen_cpu, a->env->online)))
		return probe_refuse(a, "--gen-cpu: the CPU is not online");
	if (probe_sched_no_deadline(&v[O_POLICY], &v[O_PRIORITY], 98,
				    "--policy: deadline is not supported by event (the thread is event-driven); use fifo, rr or other",
				    &c->policy, &c->priority, a->err, a->errlen) != 0) {
		return -EINVAL;
	}
	/* the soft generator runs just below the handler */
	c->src.gen_policy = c->policy;
	c->src.gen_priority = c->priority > 1 ? c->priority - 1 : c->priority;
	c->duration_ns = v[O_DURATION].set ? (uint64_t)v[O_DURATION].i : 0;
	c->count = v[O_COUNT_EV].set ? (uint64_t)v[O_COUNT_EV].i : 0;
	if (c->cpu >= 0)
		CPU_SET(c->cpu, &a->used);
	ctx->cfg = c;
	return 0;
}

static void ev_write_config(const void *p, struct jsonw *w)
{
	const struct ev_cfg *c = ((const struct ev_ctx *)p)->cfg;
	jw_str(w, "source", src_names[c->source]);
	jw_str_or_null(w, "device", c->src.device);
	jw_int(w, "line", c->src.line);
	jw_str(w, "edge", edge_names[c->src.edge]);
	jw_str(w, "gpio_clock", gclk_names[c->src.gpio_clock]);
	jw_str_or_null(w, "bind", c->src.bind);
	jw_uint(w, "rate_hz", NS_PER_SEC / c->src.interval_ns);
	jw_int_or_null(w, "gen_cpu", c->src.gen_cpu);
	jw_int_or_null(w, "cpu", c->cpu);
	jw_str(w, "policy", rt_policy_names[c->policy]);
	jw_int(w, "priority", c->priority);
	jw_uint_or_null(w, "duration_ns", c->duration_ns);
	jw_uint_or_null(w, "count", c->count);
	probe_write_run_config(w, c->run, EVENT_SHARED & ~RUN_OPT(OUTPUT));
}

static void write_clock(struct jsonw *w, const struct ev_ctx *ctx, bool final)
{
	jw_obj_begin(w, "clock");
	jw_str(w, "source_domain", ev_domain_names[ctx->src.domain]);
	jw_str(w, "handling_clock", "monotonic");
	jw_str(w, "method", ctx->method);
	jw_int(w, "offset_ns", ctx->offset_ns);
	jw_uint(w, "uncertainty_ns", ctx->unc_ns);
	if (ctx->src.domain == EV_REALTIME || ctx->src.domain == EV_PHC) {
		jw_int(w, "realtime_minus_monotonic_start_ns", ctx->rt_off_start);
		if (final && ctx->rt_end_valid)
			jw_int(w, "realtime_minus_monotonic_end_ns", ctx->rt_off_end);
		else
			jw_null(w, "realtime_minus_monotonic_end_ns");
	}
	if (ctx->src.domain == EV_PHC) {
		jw_int(w, "phc_minus_realtime_ns", ctx->src.phc_minus_rt_ns);
		jw_uint(w, "phc_uncertainty_ns", ctx->src.phc_unc_ns);
	}
	jw_obj_end(w);
}

static void write_extra(void *arg, struct jsonw *w, bool final)
{
	struct ev_ctx *ctx = arg;
	jw_obj_begin(w, "event");
	jw_str(w, "source", src_names[ctx->cfg->source]);
	jw_uint(w, "events", atomic_load_explicit(&ctx->events, memory_order_relaxed));
	jw_uint(w, "source_lost", atomic_load_explicit(&ctx->lost, memory_order_relaxed));
	write_clock(w, ctx, final);
	jw_obj_end(w);
}

static void ev_measure(void *p, struct probe_thread *pt)
{
	struct ev_ctx *ctx = p;
	(void)pt;
	const struct ev_cfg *c = ctx->cfg;
	const uint64_t start = ctx->start_mono;
	const uint64_t end = c->duration_ns ? start + c->duration_ns : UINT64_MAX;
	const uint64_t count = c->count ? c->count : UINT64_MAX;
	const int64_t off = ctx->offset_ns;
	struct channel *ch = ctx->ch;
	uint64_t n = 0;
	while (n < count && !atomic_load_explicit(&ctx->stop, memory_order_relaxed)) {
		uint64_t now = rl_now_ns(CLOCK_MONOTONIC);
		if (now >= end)
			break;
		struct ev_event ev;
		int r = ctx->src.ops->wait(&ctx->src, now + POLL_NS < end ? now + POLL_NS : end, &ev);
		uint64_t handled = rl_now_ns(CLOCK_MONOTONIC);
		if (r < 0) {
			ctx->run_err = -r;
			break;
		}
		if (r == 0)
			continue;
		uint64_t cap = clk_convert(ev.capture_ns, off);
		uint64_t at = handled > start ? handled - start : 0;
		bool neg = handled < cap;
		channel_record(ch, at, neg ? 0 : handled - cap, 0, neg);
		atomic_store_explicit(&ctx->events,
				      atomic_load_explicit(&ctx->events, memory_order_relaxed) + 1,
				      memory_order_relaxed);
		if (ev.lost)
			atomic_store_explicit(&ctx->lost,
					      atomic_load_explicit(&ctx->lost, memory_order_relaxed) +
						      ev.lost,
					      memory_order_relaxed);
		n++;
	}
}

/* The capture -> CLOCK_MONOTONIC conversion of the source's domain. */
static int measure_conversion(struct ev_ctx *ctx)
{
	int e = clk_realtime_minus_mono(16, &ctx->rt_off_start, &ctx->rt_unc);
	if (e)
		return e;
	switch (ctx->src.domain) {
	case EV_MONOTONIC:
	case EV_HTE:
		ctx->method = "none (captured on CLOCK_MONOTONIC)";
		ctx->offset_ns = 0;
		ctx->unc_ns = 0;
		break;
	case EV_REALTIME:
		ctx->method = "CLOCK_REALTIME - CLOCK_MONOTONIC, bracketed clock_gettime";
		ctx->offset_ns = ctx->rt_off_start;
		ctx->unc_ns = ctx->rt_unc;
		break;
	case EV_PHC:
		ctx->method = ctx->src.phc_method;
		ctx->offset_ns = ctx->src.phc_minus_rt_ns + ctx->rt_off_start;
		ctx->unc_ns = ctx->src.phc_unc_ns + ctx->rt_unc;
		break;
	default:
		return -EINVAL;
	}
	return 0;
}

static int ev_prepare(void *p, struct probe_plan *plan)
{
	struct ev_ctx *ctx = p;
	const struct ev_cfg *c = ctx->cfg;
	char msg[256] = "";
	ctx->src.ops = src_ops[c->source];
	int e = ctx->src.ops->open(&ctx->src, &c->src, msg, sizeof(msg));
	if (e) {
		bool missing = e == -ENOENT || e == -ENODEV || e == -EOPNOTSUPP || e == -ENOTTY ||
			       e == -ENXIO;
		fprintf(stderr, "rtlab-probe event: %s%s\n", missing ? "skipped: " : "", msg);
		ctx->src.ops->close(&ctx->src);
		return missing ? RL_EXIT_SKIPPED : e == -EINVAL ? RL_EXIT_USAGE : RL_EXIT_ERROR;
	}
	ctx->src_open = true;
	e = measure_conversion(ctx);
	if (!e)
		e = channel_create(&ctx->ch, "latency", c->cpu, c->run->window_ns, 0);
	struct probe_thread *pt = e ? NULL : probe_plan_threads(plan, 1);
	if (!e && !pt)
		e = -ENOMEM;
	if (e) {
		fprintf(stderr, "rtlab-probe event: set-up failed: %s\n", strerror(-e));
		return RL_EXIT_ERROR;
	}
	probe_thread_place(pt, c->cpu, c->policy, c->priority, "%s", ctx->ch->name);
	probe_plan_channels(plan, &ctx->ch, 1, &ctx->stop, NULL);
	return 0;
}

static void ev_thread_ready(void *p, struct probe_thread *pt)
{
	struct ev_ctx *ctx = p;
	atomic_store(&ctx->ch->tid, pt->rt.tid);
}

/* The source starts delivering events now. */
static int ev_start(void *p, const struct probe_start *s)
{
	struct ev_ctx *ctx = p;
	int e = ctx->src.ops->arm(&ctx->src);
	if (e) {
		fprintf(stderr, "rtlab-probe event: cannot arm the %s source: %s\n",
			ctx->src.ops->name, strerror(-e));
		return e == -EOPNOTSUPP || e == -ENOTTY ? RL_EXIT_SKIPPED : RL_EXIT_ERROR;
	}
	ctx->start_mono = s->monotonic_ns;
	return 0;
}

static void ev_write_effective(const void *p, struct jsonw *w)
{
	const struct ev_ctx *ctx = p;
	write_clock(w, ctx, false);
	jw_str_or_null(w, "source_note", ctx->src.note[0] ? ctx->src.note : NULL);
}

/* The conversion offset is measured again at the end. */
static void ev_ended(void *p, struct probe_end *e)
{
	struct ev_ctx *ctx = p;
	uint64_t unc_end;
	ctx->rt_end_valid = clk_realtime_minus_mono(16, &ctx->rt_off_end, &unc_end) == 0;
	if (ctx->run_err)
		snprintf(e->err, e->errlen, "%s source: %s", ctx->src.ops->name,
			 strerror(ctx->run_err));
}

static void ev_fini(void *p)
{
	struct ev_ctx *ctx = p;
	if (ctx->src_open)
		ctx->src.ops->close(&ctx->src);
	if (ctx->ch)
		channel_destroy(ctx->ch);
}

const struct probe_ops event_probe = {
	.name = "event",
	.summary = "external event latency against its capture timestamp (soft|net|gpio|ptp|pps)",
	.usage = "An event source delivers events with the time they were captured (by hardware\n"
		 "or by the kernel at interrupt time); a pinned RT thread handles each one and\n"
		 "records latency = handling time - capture time (converted to CLOCK_MONOTONIC\n"
		 "with a measured offset, reported with its uncertainty). See docs/probes/event.md.",
	PROBE_OPTIONS(ev_opts, EVENT_SHARED, O_CPU_OLD),
	.housekeeping_help = "first online CPU other than --cpus",
	.stack = THREAD_STACK,
	.ctx_size = sizeof(struct ev_ctx),
	PROBE_HOOKS(ev),
	.thread_ready = ev_thread_ready,
	.write_effective_end = ev_write_effective,
	.write_extra = write_extra,
	.ended = ev_ended,
};
