/* SPDX-License-Identifier: MIT */
/*
 * The `hwnoise` probe: time stolen from a CPU while its interrupts are off
 * (hardware, firmware/SMI, hypervisor), measured by the kernel's own tracers as
 * `rtla hwnoise` and `hwlatdetect` do. Where the osnoise tracer has the option
 * OSNOISE_IRQ_DISABLE (kernels >= 6.3) it runs the osnoise tracer with interrupts
 * off and records every noise sample above the threshold (osnoise/sample_threshold)
 * and the tracer's per-period summaries (ftrace/osnoise); else the hwlat tracer (per
 * CPU where hwlat_detector/mode offers it) and records its per-window samples
 * (ftrace/hwlat). Both tracers run in the top-level tracefs instance only (hwlat
 * always; osnoise's settings are global), so every file written there
 * (tracing_thresh, tracing_cpumask, the tracer's own files, tracing_on,
 * current_tracer) is journaled first in a `sys` journal (JOURNAL_DIR/hwnoise-PID.journal,
 * locked while the probe runs) and restored at the end, or by `rtlab-probe sys
 * restore` / `rtlab restore` after kill -9.
 *
 * One reader thread (SCHED_OTHER, unpinned) drains the measured CPUs'
 * per_cpu/cpuN/trace_pipe_raw, decodes the ring-buffer pages in this machine's
 * own byte order (the engine runs on the target) from the kernel's header_page
 * and format files, and records each sample into its CPU's channel.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "channel.h"
#include "output.h"
#include "probe.h"
#include "sysfile.h"
#include "trace_fs.h"

#define HW_PATH 512
#define HW_POLL_MS 100
#define HW_MAX_PAGE 65536

static const char *const tracer_names[] = { "auto", "osnoise", "hwlat", NULL };
enum { TR_AUTO, TR_OSNOISE, TR_HWLAT };

enum {
	O_CPUS, O_DURATION, O_TRACER, O_THRESH, O_WIDTH, O_WINDOW_HW, O_PERIOD, O_RUNTIME,
	O_STOP, O_JOURNAL_DIR, O_COUNT
};
#define HW_SHARED (RUN_OPTS_COMMON | RUN_OPT(HOUSEKEEPING) | RUN_OPT(WINDOW))

static const struct opt_def hw_opts[O_COUNT] = {
	[O_CPUS] = { "cpus", OPT_CPULIST, NULL, "CPUs the tracer measures", 0, 0, NULL, NULL,
		     "all online CPUs but the first (the housekeeping CPU)" },
	[O_DURATION] = { "duration", OPT_DURATION, NULL, "stop after this run time",
			 (int64_t)NS_PER_MS * 100, (int64_t)(1000 * 3600 * NS_PER_SEC), NULL, NULL,
			 "until SIGINT/SIGTERM" },
	[O_TRACER] = { "tracer", OPT_ENUM, "TRACER",
		       "auto: osnoise with interrupts off where the kernel offers it, else hwlat",
		       0, 0, tracer_names, "auto", NULL },
	[O_THRESH] = { "threshold", OPT_DURATION, NULL,
		       "the tracer's minimum noise (tracing_thresh, whole microseconds)",
		       (int64_t)NS_PER_US, (int64_t)(10 * NS_PER_SEC), NULL, NULL,
		       "5us (osnoise, as rtla hwnoise), 10us (hwlat, as hwlatdetect)" },
	[O_WIDTH] = { "width", OPT_DURATION, NULL,
		      "hwlat: time spun with interrupts off in each window", (int64_t)NS_PER_MS,
		      (int64_t)(3600 * NS_PER_SEC), NULL, "500ms", NULL },
	[O_WINDOW_HW] = { "hwlat-window", OPT_DURATION, NULL, "hwlat: the period of one sample",
			  (int64_t)NS_PER_MS, (int64_t)(3600 * NS_PER_SEC), NULL, "1s", NULL },
	[O_PERIOD] = { "period", OPT_DURATION, NULL, "osnoise: the tracer's period",
		       (int64_t)NS_PER_MS, (int64_t)(3600 * NS_PER_SEC), NULL, "1s", NULL },
	[O_RUNTIME] = { "runtime", OPT_DURATION, NULL,
			"osnoise: time spun with interrupts off in each period (rtla hwnoise: 75 %)",
			(int64_t)NS_PER_MS, (int64_t)(3600 * NS_PER_SEC), NULL, "750ms", NULL },
	[O_STOP] = { "stop-threshold", OPT_DURATION, NULL,
		     "stop with exit 3 when a sample exceeds this", 1,
		     (int64_t)(3600 * NS_PER_SEC), NULL, NULL, "none" },
	[O_JOURNAL_DIR] = { "journal-dir", OPT_STRING, "DIR",
			    "where the journal of the tracefs changes lives", 0, 0, NULL,
			    "/run/rtlab", NULL },
};

struct hw_cfg {
	const struct run_opts *run;
	int cpus[CPU_SETSIZE];
	size_t n_cpus;
	uint64_t duration_ns;	/* 0: none */
	int tracer;		/* TR_* asked */
	uint64_t thresh_ns;	/* 0: the tracer's default */
	uint64_t width_ns, window_ns, period_ns, runtime_ns;
	uint64_t stop_ns;	/* 0: none */
	const char *journal_dir;
};

/* Where a field lies in an event record (its format file). */
struct hw_field {
	unsigned off, size;
};

/* Per measured CPU: the reader's counters, published to the reporter. */
struct hw_cpu {
	_Alignas(RL_CACHELINE) struct channel *ch;
	int fd;			/* trace_pipe_raw, -1: closed */
	atomic_uint_least64_t nmi_count, nmi_ns, above, periods, runtime_ns, sum_noise_ns;
	atomic_uint_least64_t max_inner_ns, max_outer_ns, hw_count, irq_count, softirq_count,
		thread_count;
};

struct hw_ctx {
	const struct hw_cfg *cfg;
	struct hw_cfg cfg_store;
	struct hw_cpu *cpu;
	struct channel **chans;
	atomic_bool stop;
	struct probe_threshold thr;
	char tracefs[HW_PATH];
	int tracer;		/* TR_OSNOISE or TR_HWLAT, as run */
	char hwlat_mode[32];	/* "per-cpu", "round-robin", or "" (no mode file) */
	uint64_t thresh_ns;	/* as set */
	/* the ring buffer's page layout (header_page) and the events read */
	unsigned commit_off, commit_size, data_off, page_size;
	int id_sample, id_summary;	/* event ids (-1: none) */
	struct hw_field f[10];
	struct tfs_journal j;	/* j.fd -1: not open */
	uint64_t start_rt_ns, start_mono_ns;
	atomic_uint_least64_t pages, lost_pages, decode_errors;
	unsigned char *page;
};

/* hwlat: duration outer nmi_total nmi_count count; osnoise: duration | noise runtime
 * max_sample hw nmi irq softirq thread */
enum { F_DUR, F_OUTER, F_NMI_TS, F_NMI_CNT, F_COUNT, F_RUNTIME, F_MAXS, F_HW, F_IRQ, F_SOFTIRQ };

static int hw_init(void *p, struct probe_args *a)
{
	const struct opt_value *v = a->vals;
	struct hw_ctx *ctx = p;
	struct hw_cfg *c = &ctx->cfg_store;
	c->run = a->run;
	c->n_cpus = probe_measured_cpus(&v[O_CPUS], a->env->online, c->cpus);
	c->duration_ns = v[O_DURATION].set ? (uint64_t)v[O_DURATION].i : 0;
	c->tracer = (int)v[O_TRACER].i;
	c->thresh_ns = v[O_THRESH].set ? (uint64_t)v[O_THRESH].i : 0;
	if (c->thresh_ns % NS_PER_US)
		return probe_refuse(a, "--threshold: the tracers take whole microseconds (e.g. 5us)");
	c->width_ns = (uint64_t)v[O_WIDTH].i;
	c->window_ns = (uint64_t)v[O_WINDOW_HW].i;
	if (c->width_ns >= c->window_ns)
		return probe_refuse(a, "--width: must be shorter than --hwlat-window");
	c->period_ns = (uint64_t)v[O_PERIOD].i;
	c->runtime_ns = (uint64_t)v[O_RUNTIME].i;
	if (c->runtime_ns > c->period_ns)
		return probe_refuse(a, "--runtime: must not be longer than --period");
	if (c->width_ns % NS_PER_US || c->window_ns % NS_PER_US || c->period_ns % NS_PER_US ||
	    c->runtime_ns % NS_PER_US)
		return probe_refuse(a, "--width, --hwlat-window, --period, --runtime: whole microseconds");
	c->stop_ns = v[O_STOP].set ? (uint64_t)v[O_STOP].i : 0;
	c->journal_dir = v[O_JOURNAL_DIR].s;
	if (!c->journal_dir || c->journal_dir[0] != '/')
		return probe_refuse(a, "--journal-dir: an absolute directory");
	for (size_t k = 0; k < c->n_cpus; k++)
		CPU_SET(c->cpus[k], &a->used);
	ctx->j.fd = -1;
	ctx->cfg = c;
	return 0;
}

static void hw_write_config(const void *p, struct jsonw *w)
{
	const struct hw_cfg *c = ((const struct hw_ctx *)p)->cfg;
	jw_arr_begin(w, "cpus");
	for (size_t k = 0; k < c->n_cpus; k++)
		jw_int(w, NULL, c->cpus[k]);
	jw_arr_end(w);
	jw_uint_or_null(w, "duration_ns", c->duration_ns);
	jw_str(w, "tracer", tracer_names[c->tracer]);
	jw_uint_or_null(w, "threshold_ns", c->thresh_ns);
	jw_uint(w, "width_ns", c->width_ns);
	jw_uint(w, "hwlat_window_ns", c->window_ns);
	jw_uint(w, "period_ns", c->period_ns);
	jw_uint(w, "runtime_ns", c->runtime_ns);
	jw_uint_or_null(w, "stop_threshold_ns", c->stop_ns);
	jw_str(w, "journal_dir", c->journal_dir);
	probe_write_run_config(w, c->run, HW_SHARED);
}

/* ---- tracefs files ---- */

static void tpath(const struct hw_ctx *ctx, char *buf, size_t len, const char *rel)
{
	int n = snprintf(buf, len, "%s/%s", ctx->tracefs, rel);
	if (n < 0 || (size_t)n >= len)
		buf[0] = '\0'; /* no such file */
}

static bool texists(const struct hw_ctx *ctx, const char *rel)
{
	char p[HW_PATH];
	tpath(ctx, p, sizeof(p), rel);
	return access(p, F_OK) == 0;
}

/* The file's text (trailing newline cut), or NULL. The caller frees it. */
static char *tread(const struct hw_ctx *ctx, const char *rel)
{
	char p[HW_PATH], *s = NULL;
	tpath(ctx, p, sizeof(p), rel);
	return sf_read_text(p, &s) == 0 ? s : NULL;
}

/* Is word (space-separated) in the file's text? */
static bool tword(const struct hw_ctx *ctx, const char *rel, const char *word)
{
	char *s = tread(ctx, rel);
	bool found = false;
	for (char *save = NULL, *t = s ? strtok_r(s, " \t\n[]", &save) : NULL; t && !found;
	     t = strtok_r(NULL, " \t\n[]", &save))
		found = strcmp(t, word) == 0;
	free(s);
	return found;
}

/* The bracketed choice of a file like "none [round-robin] per-cpu" into out. */
static void tchosen(const struct hw_ctx *ctx, const char *rel, char *out, size_t len)
{
	char *s = tread(ctx, rel);
	char *l = s ? strchr(s, '[') : NULL, *r = l ? strchr(l, ']') : NULL;
	out[0] = '\0';
	if (l && r)
		snprintf(out, len, "%.*s", (int)(r - l - 1), l + 1);
	free(s);
}

static int find_tracefs(struct hw_ctx *ctx)
{
	static const char *const paths[] = { "/sys/kernel/tracing", "/sys/kernel/debug/tracing" };
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		char p[HW_PATH];
		snprintf(p, sizeof(p), "%s/available_tracers", paths[i]);
		if (access(p, F_OK) == 0) {
			snprintf(ctx->tracefs, sizeof(ctx->tracefs), "%s", paths[i]);
			return 0;
		}
	}
	return -ENOENT;
}

/* ---- the journal (a `sys` journal through trace_fs: `sys restore` undoes it) ---- */

/* Journal the old value (or undo: what restores it), then write. 0 or -errno. */
static int jwrite(struct hw_ctx *ctx, const char *rel, const char *value, const char *undo)
{
	char p[HW_PATH];
	tpath(ctx, p, sizeof(p), rel);
	return tfs_write_journaled(&ctx->j, p, value, undo);
}

/* Undo every journaled write (reverse order), then remove the journal. */
static void journal_restore(struct hw_ctx *ctx)
{
	if (ctx->j.fd < 0)
		return;
	if (tfs_journal_restore(&ctx->j) != 0)
		fprintf(stderr,
			"rtlab-probe hwnoise: the tracefs changes were not all undone; "
			"restore them: rtlab-probe sys restore --journal %s\n", ctx->j.path);
}

/* ---- page and format decoding ---- */

/* "field:TYPE NAME;\toffset:N;\tsize:M;" of name in a format text. 0 or -ENOENT. */
static int format_field(const char *text, const char *name, struct hw_field *f)
{
	size_t nl = strlen(name);
	for (const char *s = strstr(text, "field:"); s; s = strstr(s + 1, "field:")) {
		const char *semi = strchr(s, ';');
		if (!semi || (size_t)(semi - s) < nl + 1 || memcmp(semi - nl, name, nl) != 0 ||
		    (semi[-(long)nl - 1] != ' ' && semi[-(long)nl - 1] != '\t'))
			continue;
		const char *o = strstr(semi, "offset:"), *z = strstr(semi, "size:");
		if (!o || !z)
			return -ENOENT;
		f->off = (unsigned)strtoul(o + 7, NULL, 10);
		f->size = (unsigned)strtoul(z + 5, NULL, 10);
		return 0;
	}
	return -ENOENT;
}

/* An event's id and the listed fields' places; -ENOENT when one is missing. */
static int event_format(struct hw_ctx *ctx, const char *event, const char *const *names,
			const int *slots, size_t n, int *id)
{
	char rel[128];
	snprintf(rel, sizeof(rel), "events/%s/format", event);
	char *t = tread(ctx, rel);
	if (!t)
		return -ENOENT;
	const char *ids = strstr(t, "ID:");
	int r = ids ? 0 : -ENOENT;
	if (ids)
		*id = atoi(ids + 3);
	for (size_t k = 0; k < n && !r; k++)
		r = format_field(t, names[k], &ctx->f[slots[k]]);
	free(t);
	return r;
}

static int page_layout(struct hw_ctx *ctx)
{
	char *t = tread(ctx, "events/header_page");
	struct hw_field commit, data;
	int r = t && format_field(t, "commit", &commit) == 0 && format_field(t, "data", &data) == 0
			? 0 : -ENOENT;
	free(t);
	if (r)
		return r;
	ctx->commit_off = commit.off;
	ctx->commit_size = commit.size;
	ctx->data_off = data.off;
	ctx->page_size = data.off + data.size;
	if ((commit.size != 4 && commit.size != 8) || ctx->page_size > HW_MAX_PAGE ||
	    ctx->data_off >= ctx->page_size)
		return -EINVAL;
	return 0;
}

static uint64_t rd(const unsigned char *p, unsigned size)
{
	uint32_t u32;
	uint64_t u64;
	switch (size) {
	case 4:
		memcpy(&u32, p, 4);
		return u32;
	case 8:
		memcpy(&u64, p, 8);
		return u64;
	case 2: {
		uint16_t u16;
		memcpy(&u16, p, 2);
		return u16;
	}
	default:
		return 0;
	}
}

static uint64_t fld(const struct hw_ctx *ctx, const unsigned char *rec, size_t len, int slot)
{
	const struct hw_field *f = &ctx->f[slot];
	return f->off + f->size <= len ? rd(rec + f->off, f->size) : 0;
}

static void atomic_max(atomic_uint_least64_t *a, uint64_t v)
{
	if (v > atomic_load_explicit(a, memory_order_relaxed))
		atomic_store_explicit(a, v, memory_order_relaxed);
}

static void atomic_addu(atomic_uint_least64_t *a, uint64_t v)
{
	atomic_store_explicit(a, atomic_load_explicit(a, memory_order_relaxed) + v,
			      memory_order_relaxed);
}

/* One event record of the measured CPU k (reader thread only). */
static void on_record(struct hw_ctx *ctx, size_t k, const unsigned char *rec, size_t len)
{
	if (len < 2)
		return;
	int id = (int)rd(rec, 2);
	struct hw_cpu *c = &ctx->cpu[k];
	uint64_t now = rl_now_ns(CLOCK_MONOTONIC);
	uint64_t at = now > ctx->start_mono_ns ? now - ctx->start_mono_ns : 0;
	uint64_t value;
	if (ctx->tracer == TR_HWLAT && id == ctx->id_sample) {
		/* hwlat writes microseconds; the sample is the larger of inner and outer */
		uint64_t inner = fld(ctx, rec, len, F_DUR) * NS_PER_US;
		uint64_t outer = fld(ctx, rec, len, F_OUTER) * NS_PER_US;
		value = inner > outer ? inner : outer;
		atomic_max(&c->max_inner_ns, inner);
		atomic_max(&c->max_outer_ns, outer);
		atomic_addu(&c->nmi_count, fld(ctx, rec, len, F_NMI_CNT));
		atomic_addu(&c->nmi_ns, fld(ctx, rec, len, F_NMI_TS) * NS_PER_US);
		atomic_addu(&c->above, fld(ctx, rec, len, F_COUNT));
	} else if (ctx->tracer == TR_OSNOISE && id == ctx->id_sample) {
		value = fld(ctx, rec, len, F_DUR); /* ns */
	} else if (ctx->tracer == TR_OSNOISE && id == ctx->id_summary) {
		/* one period's summary, in microseconds */
		atomic_addu(&c->periods, 1);
		atomic_addu(&c->runtime_ns, fld(ctx, rec, len, F_RUNTIME) * NS_PER_US);
		atomic_addu(&c->sum_noise_ns, fld(ctx, rec, len, F_OUTER) * NS_PER_US);
		atomic_max(&c->max_inner_ns, fld(ctx, rec, len, F_MAXS) * NS_PER_US);
		atomic_addu(&c->hw_count, fld(ctx, rec, len, F_HW));
		atomic_addu(&c->nmi_count, fld(ctx, rec, len, F_NMI_CNT));
		atomic_addu(&c->irq_count, fld(ctx, rec, len, F_IRQ));
		atomic_addu(&c->softirq_count, fld(ctx, rec, len, F_SOFTIRQ));
		atomic_addu(&c->thread_count, fld(ctx, rec, len, F_COUNT));
		return;
	} else {
		return;
	}
	channel_record(c->ch, at, value, 0, false);
	if (ctx->cfg->stop_ns && value > ctx->cfg->stop_ns) {
		probe_threshold_claim(&ctx->thr, k, value, at);
		atomic_store(&ctx->stop, true);
	}
}

/* One ring-buffer page (this machine's byte order) of CPU k. */
static void on_page(struct hw_ctx *ctx, size_t k, const unsigned char *pg, size_t n)
{
	if (n < ctx->data_off)
		return;
	uint64_t commit = rd(pg + ctx->commit_off, ctx->commit_size);
	if (commit & ((uint64_t)3 << 30))
		atomic_addu(&ctx->lost_pages, 1); /* RB_MISSED_EVENTS / _STORED */
	commit &= ~((uint64_t)3 << 30);
	size_t end = ctx->data_off + commit;
	if (end > n) {
		atomic_addu(&ctx->decode_errors, 1);
		return;
	}
	size_t pos = ctx->data_off;
	while (pos + 4 <= end) {
		uint32_t h = (uint32_t)rd(pg + pos, 4);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
		unsigned type_len = h >> 27;
		uint32_t delta = h & 0x7ffffff;
#else
		unsigned type_len = h & 0x1f;
		uint32_t delta = h >> 5;
#endif
		size_t size;
		if (type_len == 29) { /* padding; a null one ends the page */
			if (!delta || pos + 8 > end)
				break;
			size = 4 + (size_t)rd(pg + pos + 4, 4);
		} else if (type_len == 30 || type_len == 31) { /* time extend / stamp */
			size = 8;
		} else if (type_len == 0) {
			if (pos + 8 > end)
				break;
			size_t l = (size_t)rd(pg + pos + 4, 4);
			if (l < 4 || pos + 4 + l > end)
				break;
			on_record(ctx, k, pg + pos + 8, l - 4);
			size = 4 + l;
		} else {
			size = 4 + 4 * (size_t)type_len;
			if (pos + size > end)
				break;
			on_record(ctx, k, pg + pos + 4, 4 * (size_t)type_len);
		}
		pos += size;
	}
}

/* Read every whole page waiting on the CPUs' trace_pipe_raw. */
static void drain(struct hw_ctx *ctx)
{
	const struct hw_cfg *c = ctx->cfg;
	for (size_t k = 0; k < c->n_cpus; k++) {
		for (int i = 0; i < 4096 && ctx->cpu[k].fd >= 0; i++) {
			ssize_t n = read(ctx->cpu[k].fd, ctx->page, ctx->page_size);
			if (n <= 0)
				break;
			atomic_addu(&ctx->pages, 1);
			on_page(ctx, k, ctx->page, (size_t)n);
		}
	}
}

static void hw_measure(void *p, struct probe_thread *pt)
{
	struct hw_ctx *ctx = p;
	const struct hw_cfg *c = ctx->cfg;
	(void)pt;
	uint64_t end = c->duration_ns ? ctx->start_mono_ns + c->duration_ns : UINT64_MAX;
	while (!atomic_load_explicit(&ctx->stop, memory_order_relaxed)) {
		uint64_t now = rl_now_ns(CLOCK_MONOTONIC);
		if (now >= end)
			break;
		uint64_t left_ms = (end - now) / NS_PER_MS + 1;
		struct timespec ts = { 0, (long)(left_ms < HW_POLL_MS ? left_ms : HW_POLL_MS) *
					       (long)NS_PER_MS };
		nanosleep(&ts, NULL);
		drain(ctx);
	}
	/* stop the tracer's sampling, then read what it wrote last */
	char p0[HW_PATH];
	tpath(ctx, p0, sizeof(p0), "tracing_on");
	(void)!sf_write(p0, "0");
	drain(ctx);
}

/* Windows of hwlat (per CPU) or summed osnoise runtime: the time measured on CPU k. */
static uint64_t measured_ns(const struct hw_ctx *ctx, size_t k, uint64_t elapsed)
{
	const struct hw_cfg *c = ctx->cfg;
	if (ctx->tracer == TR_OSNOISE)
		return atomic_load_explicit(&ctx->cpu[k].runtime_ns, memory_order_relaxed);
	uint64_t windows = elapsed / c->window_ns;
	uint64_t t = windows * c->width_ns;
	return strcmp(ctx->hwlat_mode, "per-cpu") == 0 || c->n_cpus == 1 ? t : t / c->n_cpus;
}

static void hw_extra(void *arg, struct jsonw *w, bool final)
{
	struct hw_ctx *ctx = arg;
	const struct hw_cfg *c = ctx->cfg;
	uint64_t now = rl_now_ns(CLOCK_MONOTONIC);
	uint64_t elapsed = now > ctx->start_mono_ns ? now - ctx->start_mono_ns : 0;
	if (c->duration_ns && elapsed > c->duration_ns)
		elapsed = c->duration_ns;
	(void)final;
	jw_obj_begin(w, "hwnoise");
	jw_str(w, "tracer", ctx->tracer == TR_HWLAT ? "hwlat" : "osnoise");
	jw_str(w, "mode", ctx->tracer == TR_HWLAT ? (ctx->hwlat_mode[0] ? ctx->hwlat_mode : "round-robin")
						  : "irq-disable");
	jw_uint(w, "threshold_ns", ctx->thresh_ns);
	if (ctx->tracer == TR_HWLAT) {
		jw_uint(w, "width_ns", c->width_ns);
		jw_uint(w, "window_ns", c->window_ns);
	} else {
		jw_uint(w, "period_ns", c->period_ns);
		jw_uint(w, "runtime_ns", c->runtime_ns);
	}
	jw_uint(w, "pages", atomic_load(&ctx->pages));
	jw_uint(w, "pages_with_lost_events", atomic_load(&ctx->lost_pages));
	jw_uint(w, "decode_errors", atomic_load(&ctx->decode_errors));
	jw_arr_begin(w, "channels");
	for (size_t k = 0; k < c->n_cpus; k++) {
		struct hw_cpu *h = &ctx->cpu[k];
		struct chan_state st;
		channel_snapshot(h->ch, &st);
		uint64_t meas = measured_ns(ctx, k, elapsed);
		uint64_t noise = ctx->tracer == TR_OSNOISE ? atomic_load(&h->sum_noise_ns) : st.sum_ns;
		jw_obj_begin(w, NULL);
		jw_str(w, "channel", h->ch->name);
		jw_int(w, "cpu", h->ch->cpu);
		jw_uint(w, "measured_ns", meas);
		jw_uint(w, "noise_ns", noise);
		jw_uint(w, "stolen_ppm",
			meas ? (uint64_t)((double)(noise < meas ? noise : meas) * 1e6 / (double)meas + 0.5)
			     : 0);
		jw_uint(w, "nmi_count", atomic_load(&h->nmi_count));
		if (ctx->tracer == TR_HWLAT) {
			jw_uint(w, "windows", c->window_ns ? elapsed / c->window_ns : 0);
			jw_uint(w, "max_inner_ns", atomic_load(&h->max_inner_ns));
			jw_uint(w, "max_outer_ns", atomic_load(&h->max_outer_ns));
			jw_uint(w, "nmi_ns", atomic_load(&h->nmi_ns));
			jw_uint(w, "above_threshold", atomic_load(&h->above));
		} else {
			jw_uint(w, "periods", atomic_load(&h->periods));
			jw_uint(w, "max_sample_ns", atomic_load(&h->max_inner_ns));
			jw_uint(w, "hw_count", atomic_load(&h->hw_count));
			jw_uint(w, "irq_count", atomic_load(&h->irq_count));
			jw_uint(w, "softirq_count", atomic_load(&h->softirq_count));
			jw_uint(w, "thread_count", atomic_load(&h->thread_count));
		}
		jw_obj_end(w);
	}
	jw_arr_end(w);
	jw_obj_end(w);
}

/* Is another tool tracing with the tracer we need? One line in why. */
static bool tracer_busy(const struct hw_ctx *ctx, char *why, size_t len)
{
	char *cur = tread(ctx, "current_tracer");
	bool busy = cur && strcmp(cur, "nop") != 0;
	if (busy)
		snprintf(why, len, "current_tracer of %.200s is %.64s: another tool traces (rtla, hwlatdetect, "
			 "trace-cmd?); stop it first (echo nop > %.200s/current_tracer when it is left over)",
			 ctx->tracefs, cur, ctx->tracefs);
	free(cur);
	if (busy || ctx->tracer != TR_OSNOISE)
		return busy;
	/* osnoise's settings are global: an instance running osnoise/timerlat owns them */
	char dir[HW_PATH];
	tpath(ctx, dir, sizeof(dir), "instances");
	DIR *d = opendir(dir);
	for (struct dirent *e = d ? readdir(d) : NULL; e && !busy; e = readdir(d)) {
		if (e->d_name[0] == '.')
			continue;
		char rel[HW_PATH];
		snprintf(rel, sizeof(rel), "instances/%.200s/current_tracer", e->d_name);
		char *t = tread(ctx, rel);
		if (t && (strcmp(t, "osnoise") == 0 || strcmp(t, "timerlat") == 0)) {
			busy = true;
			snprintf(why, len, "the tracefs instance %s runs the %s tracer (rtla?): stop it first",
				 e->d_name, t);
		}
		free(t);
	}
	if (d)
		closedir(d);
	return busy;
}

/* tracing_cpumask of the measured CPUs: hex, comma-separated groups of 32 CPUs. */
static void cpumask_text(const struct hw_cfg *c, char *buf, size_t len)
{
	int top = 0;
	for (size_t k = 0; k < c->n_cpus; k++)
		top = c->cpus[k] > top ? c->cpus[k] : top;
	size_t pos = 0;
	buf[0] = '\0';
	for (int g = top / 32; g >= 0 && pos < len; g--) {
		uint32_t m = 0;
		for (size_t k = 0; k < c->n_cpus; k++)
			if (c->cpus[k] / 32 == g)
				m |= (uint32_t)1 << (c->cpus[k] % 32);
		pos += (size_t)snprintf(buf + pos, len - pos, g == top / 32 ? "%x" : ",%08x", m);
	}
}

static void cpulist_text(const struct hw_cfg *c, char *buf, size_t len)
{
	size_t pos = 0;
	buf[0] = '\0';
	for (size_t k = 0; k < c->n_cpus && pos < len; k++)
		pos += (size_t)snprintf(buf + pos, len - pos, k ? ",%d" : "%d", c->cpus[k]);
}

static int us_text(char *buf, size_t len, uint64_t ns)
{
	return snprintf(buf, len, "%llu", (unsigned long long)(ns / NS_PER_US));
}

/* Two settings that must keep a < b at every step: the order that does. */
static int write_pair(struct hw_ctx *ctx, const char *rel_a, uint64_t a_ns, const char *rel_b,
		      uint64_t b_ns)
{
	char va[32], vb[32], *old_b = tread(ctx, rel_b);
	uint64_t cur_b = old_b ? strtoull(old_b, NULL, 10) * NS_PER_US : 0;
	free(old_b);
	us_text(va, sizeof(va), a_ns);
	us_text(vb, sizeof(vb), b_ns);
	int r;
	if (b_ns >= cur_b) { /* grow b first */
		r = jwrite(ctx, rel_b, vb, NULL);
		if (!r)
			r = jwrite(ctx, rel_a, va, NULL);
	} else {
		r = jwrite(ctx, rel_a, va, NULL);
		if (!r)
			r = jwrite(ctx, rel_b, vb, NULL);
	}
	return r;
}

static int set_up_tracer(struct hw_ctx *ctx, const char **what)
{
	const struct hw_cfg *c = ctx->cfg;
	char v[HW_PATH];
	int r;
	us_text(v, sizeof(v), ctx->thresh_ns);
	*what = "tracing_thresh";
	if ((r = jwrite(ctx, "tracing_thresh", v, NULL)))
		return r;
	if (ctx->tracer == TR_HWLAT) {
		cpumask_text(c, v, sizeof(v));
		*what = "tracing_cpumask";
		if ((r = jwrite(ctx, "tracing_cpumask", v, NULL)))
			return r;
		if (texists(ctx, "hwlat_detector/mode")) {
			char old[32];
			tchosen(ctx, "hwlat_detector/mode", old, sizeof(old));
			snprintf(ctx->hwlat_mode, sizeof(ctx->hwlat_mode), "per-cpu");
			*what = "hwlat_detector/mode";
			if ((r = jwrite(ctx, "hwlat_detector/mode", "per-cpu", old[0] ? old : NULL)))
				return r;
		}
		*what = "hwlat_detector/width and window";
		if ((r = write_pair(ctx, "hwlat_detector/width", c->width_ns, "hwlat_detector/window",
				    c->window_ns)))
			return r;
	} else {
		cpulist_text(c, v, sizeof(v));
		*what = "osnoise/cpus";
		if ((r = jwrite(ctx, "osnoise/cpus", v, NULL)))
			return r;
		*what = "osnoise/runtime_us and period_us";
		if ((r = write_pair(ctx, "osnoise/runtime_us", c->runtime_ns, "osnoise/period_us",
				    c->period_ns)))
			return r;
		bool was = tword(ctx, "osnoise/options", "OSNOISE_IRQ_DISABLE");
		*what = "osnoise/options";
		if (!was && (r = jwrite(ctx, "osnoise/options", "OSNOISE_IRQ_DISABLE",
					"NO_OSNOISE_IRQ_DISABLE")))
			return r;
		*what = "events/osnoise/sample_threshold/enable";
		if ((r = jwrite(ctx, "events/osnoise/sample_threshold/enable", "1", NULL)))
			return r;
	}
	*what = "tracing_on";
	return jwrite(ctx, "tracing_on", "1", NULL);
}

static int hw_prepare(void *p, struct probe_plan *plan)
{
	struct hw_ctx *ctx = p;
	const struct hw_cfg *c = ctx->cfg;
	if (c->n_cpus == 0) {
		fprintf(stderr, "rtlab-probe hwnoise: no CPU to measure; give --cpus\n");
		return RL_EXIT_USAGE;
	}
	if (find_tracefs(ctx) != 0) {
		fprintf(stderr, "rtlab-probe hwnoise: skipped: tracefs is not mounted "
			"(mount -t tracefs nodev /sys/kernel/tracing)\n");
		return RL_EXIT_SKIPPED;
	}
	bool has_osn = tword(ctx, "available_tracers", "osnoise");
	bool irqoff = has_osn && (tword(ctx, "osnoise/options", "OSNOISE_IRQ_DISABLE") ||
				  tword(ctx, "osnoise/options", "NO_OSNOISE_IRQ_DISABLE"));
	bool has_hwlat = tword(ctx, "available_tracers", "hwlat");
	if (!has_osn && !has_hwlat) {
		fprintf(stderr, "rtlab-probe hwnoise: skipped: this kernel has neither the osnoise nor "
			"the hwlat tracer (CONFIG_OSNOISE_TRACER / CONFIG_HWLAT_TRACER)\n");
		return RL_EXIT_SKIPPED;
	}
	if (c->tracer == TR_OSNOISE && !irqoff) {
		fprintf(stderr, "rtlab-probe hwnoise: skipped: --tracer osnoise: this kernel's osnoise "
			"tracer has no OSNOISE_IRQ_DISABLE option (Linux >= 6.3); use --tracer hwlat\n");
		return RL_EXIT_SKIPPED;
	}
	if (c->tracer == TR_HWLAT && !has_hwlat) {
		fprintf(stderr, "rtlab-probe hwnoise: skipped: --tracer hwlat: this kernel has no "
			"hwlat tracer (CONFIG_HWLAT_TRACER)\n");
		return RL_EXIT_SKIPPED;
	}
	if (c->tracer == TR_AUTO && !irqoff && !has_hwlat) {
		fprintf(stderr, "rtlab-probe hwnoise: skipped: this kernel's osnoise tracer has no "
			"OSNOISE_IRQ_DISABLE option (Linux >= 6.3) and there is no hwlat tracer "
			"(CONFIG_HWLAT_TRACER)\n");
		return RL_EXIT_SKIPPED;
	}
	ctx->tracer = c->tracer == TR_AUTO ? (irqoff ? TR_OSNOISE : TR_HWLAT) : c->tracer;
	ctx->thresh_ns = c->thresh_ns ? c->thresh_ns
				      : (ctx->tracer == TR_OSNOISE ? 5 : 10) * NS_PER_US;
	char why[1024];
	if (tracer_busy(ctx, why, sizeof(why))) {
		fprintf(stderr, "rtlab-probe hwnoise: %s\n", why);
		return RL_EXIT_ERROR;
	}
	/* the formats: the page layout and the events read */
	int r = page_layout(ctx);
	if (!r && ctx->tracer == TR_HWLAT) {
		static const char *const n[] = { "duration", "outer_duration", "nmi_total_ts",
						 "nmi_count", "count" };
		static const int s[] = { F_DUR, F_OUTER, F_NMI_TS, F_NMI_CNT, F_COUNT };
		r = event_format(ctx, "ftrace/hwlat", n, s, 5, &ctx->id_sample);
		ctx->id_summary = -1;
	} else if (!r) {
		static const char *const n1[] = { "duration" };
		static const int s1[] = { F_DUR };
		static const char *const n2[] = { "noise", "runtime", "max_sample", "hw_count",
						  "nmi_count", "irq_count", "softirq_count",
						  "thread_count" };
		static const int s2[] = { F_OUTER, F_RUNTIME, F_MAXS, F_HW, F_NMI_CNT, F_IRQ,
					  F_SOFTIRQ, F_COUNT };
		r = event_format(ctx, "osnoise/sample_threshold", n1, s1, 1, &ctx->id_sample);
		if (!r)
			r = event_format(ctx, "ftrace/osnoise", n2, s2, 8, &ctx->id_summary);
	}
	if (r) {
		fprintf(stderr, "rtlab-probe hwnoise: cannot read the ring buffer's or the %s tracer's "
			"format files under %s/events\n", ctx->tracer == TR_HWLAT ? "hwlat" : "osnoise",
			ctx->tracefs);
		return RL_EXIT_ERROR;
	}
	ctx->page = malloc(ctx->page_size);
	size_t csz = (c->n_cpus * sizeof(*ctx->cpu) + RL_CACHELINE - 1) & ~(size_t)(RL_CACHELINE - 1);
	ctx->cpu = aligned_alloc(RL_CACHELINE, csz);
	ctx->chans = calloc(c->n_cpus, sizeof(*ctx->chans));
	struct probe_thread *pt = probe_plan_threads(plan, 1);
	if (!ctx->page || !ctx->cpu || !ctx->chans || !pt) {
		fprintf(stderr, "rtlab-probe hwnoise: out of memory\n");
		return RL_EXIT_ERROR;
	}
	memset(ctx->cpu, 0, csz);
	for (size_t k = 0; k < c->n_cpus; k++) {
		ctx->cpu[k].fd = -1;
		char name[32];
		snprintf(name, sizeof(name), "cpu%d", c->cpus[k]);
		int e = channel_create(&ctx->chans[k], name, c->cpus[k], c->run->window_ns, 0);
		if (e) {
			fprintf(stderr, "rtlab-probe hwnoise: cannot allocate a channel: %s\n",
				strerror(-e));
			return RL_EXIT_ERROR;
		}
		ctx->cpu[k].ch = ctx->chans[k];
	}
	/* the journal first: nothing changes before it exists */
	r = tfs_journal_open(&ctx->j, c->journal_dir, "hwnoise");
	if (r) {
		fprintf(stderr, "rtlab-probe hwnoise: %scannot create the journal in %s: %s\n",
			r == -EACCES || r == -EPERM ? "skipped: needs root: " : "", c->journal_dir,
			strerror(-r));
		return r == -EACCES || r == -EPERM ? RL_EXIT_SKIPPED : RL_EXIT_ERROR;
	}
	const char *what = "";
	r = set_up_tracer(ctx, &what);
	if (r) {
		journal_restore(ctx);
		fprintf(stderr, "rtlab-probe hwnoise: %scannot write %s/%s: %s\n",
			r == -EACCES || r == -EPERM ? "skipped: needs root: " : "", ctx->tracefs, what,
			strerror(-r));
		return r == -EACCES || r == -EPERM ? RL_EXIT_SKIPPED : RL_EXIT_ERROR;
	}
	probe_thread_place(&pt[0], -1, RT_OTHER, 0, "reader");
	pt[0].arg = ctx;
	probe_plan_channels(plan, ctx->chans, c->n_cpus, &ctx->stop, &ctx->thr);
	return 0;
}

/* Close the readers: a tracer cannot change while its trace_pipe is open (EBUSY). */
static void close_pipes(struct hw_ctx *ctx)
{
	if (ctx->cpu)
		for (size_t k = 0; k < ctx->cfg->n_cpus; k++)
			if (ctx->cpu[k].fd >= 0) {
				close(ctx->cpu[k].fd);
				ctx->cpu[k].fd = -1;
			}
}

/* The tracer starts now (current_tracer: the kernel resets the buffer, then samples),
 * then the readers open. */
static int hw_start(void *p, const struct probe_start *s)
{
	struct hw_ctx *ctx = p;
	const struct hw_cfg *c = ctx->cfg;
	ctx->start_mono_ns = s->monotonic_ns;
	ctx->start_rt_ns = s->realtime_ns;
	int r = jwrite(ctx, "current_tracer", ctx->tracer == TR_HWLAT ? "hwlat" : "osnoise", NULL);
	if (r) {
		fprintf(stderr, "rtlab-probe hwnoise: cannot start the %s tracer: %s%s\n",
			ctx->tracer == TR_HWLAT ? "hwlat" : "osnoise", strerror(-r),
			r == -EBUSY ? " (another tool uses it: rtla?)" : "");
		journal_restore(ctx);
		return RL_EXIT_ERROR;
	}
	for (size_t k = 0; k < c->n_cpus; k++) {
		char rel[64], path[HW_PATH];
		snprintf(rel, sizeof(rel), "per_cpu/cpu%d/trace_pipe_raw", c->cpus[k]);
		tpath(ctx, path, sizeof(path), rel);
		ctx->cpu[k].fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
		if (ctx->cpu[k].fd < 0) {
			int e = errno;
			close_pipes(ctx);
			journal_restore(ctx);
			fprintf(stderr, "rtlab-probe hwnoise: cannot open %s: %s\n", path, strerror(e));
			return RL_EXIT_ERROR;
		}
	}
	return 0;
}

static void hw_write_effective(const void *p, struct jsonw *w)
{
	const struct hw_ctx *ctx = p;
	jw_obj_begin(w, "hwnoise");
	jw_str(w, "tracer", ctx->tracer == TR_HWLAT ? "hwlat" : "osnoise");
	jw_str(w, "mode", ctx->tracer == TR_HWLAT ? (ctx->hwlat_mode[0] ? ctx->hwlat_mode : "round-robin")
						  : "irq-disable");
	jw_str(w, "tracefs", ctx->tracefs);
	jw_uint(w, "threshold_ns", ctx->thresh_ns);
	jw_str(w, "journal", ctx->j.path);
	jw_uint(w, "page_size", ctx->page_size);
	jw_obj_end(w);
}

static void hw_ended(void *p, struct probe_end *e)
{
	(void)e;
	close_pipes(p);
	journal_restore(p);
}

static void hw_fini(void *p)
{
	struct hw_ctx *ctx = p;
	close_pipes(ctx);
	journal_restore(ctx);
	probe_free_channels(ctx->chans, ctx->cfg->n_cpus);
	free(ctx->cpu);
	free(ctx->page);
}

const struct probe_ops hwnoise_probe = {
	.name = "hwnoise",
	.summary = "hardware/firmware/hypervisor noise with interrupts off, per CPU (rtla hwnoise / hwlatdetect class)",
	.usage = "Runs the kernel's osnoise tracer with interrupts off (OSNOISE_IRQ_DISABLE, Linux\n"
		 ">= 6.3), else its hwlat tracer (per-cpu mode where offered), on the measured CPUs\n"
		 "and records every sample above --threshold into the CPU's channel. The tracers'\n"
		 "settings in the top-level tracefs instance are journaled and restored; needs root\n"
		 "and a current_tracer of nop (no other tool tracing).",
	PROBE_OPTIONS(hw_opts, HW_SHARED, O_STOP),
	.housekeeping_help = "first online CPU not measured, else unpinned",
	.ctx_size = sizeof(struct hw_ctx),
	PROBE_HOOKS(hw),
	.write_effective = hw_write_effective,
	.write_extra = hw_extra,
	.ended = hw_ended,
};
