/* SPDX-License-Identifier: MIT */
#include "reporter.h"

#include "cpuuse.h"
#include "output.h"
#include "le_bytes.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DRAIN_NS (100 * NS_PER_MS)	/* sample rings are drained this often */
#define USE_NS (100 * NS_PER_MS)	/* CPU use is read this often */
#define WIN_BATCH CHANNEL_WIN_RING
#define SMP_BATCH 4096
#define REPORTER_STACK (256 * 1024)

/*
 * Per channel: who used its CPU (cpuuse.h). The CPU's busy time and the measuring
 * thread's run and wait times are read together, every USE_NS and at each snapshot,
 * and the last pair read while the thread lived is kept: a thread that has exited
 * has no schedstat, so the result carries the pair of at most USE_NS before the end,
 * with the time it covers (`span_ns`).
 */
struct chan_use {
	bool cpu_ok, thread_ok;
	uint64_t busy0_ns, busy_ns;	/* the CPU's busy time at start and at the last read */
	uint64_t run_ns, wait_ns;	/* the measuring thread's, at the last read */
	uint64_t start_ns, at_ns;	/* CLOCK_MONOTONIC of the start and the last read */
};

struct reporter {
	struct reporter_cfg cfg;
	struct chan_use *use;
	int *use_cpu;			/* per channel: its CPU (-1: none), for one /proc/stat read */
	uint64_t *use_busy;		/* per channel: the CPU's busy ns at the last read */
	bool *use_found;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool finish;			/* under lock */
	uint64_t sync_req, sync_done;	/* under lock: reporter_sync_samples */
	pthread_cond_t synced;
	struct reporter_outcome outcome;	/* valid once finish is set */
	struct jsonw w;
	struct chan_state *scratch;
	struct win_rec *wins;		/* n_chans * WIN_BATCH */
	size_t *n_wins;
	struct sample_rec *smp;
	unsigned char *smp_out;
	uint64_t seq;
	uint64_t written;
	uint64_t ring_lost;
	int err;			/* first output error */
};

static void note_err(struct reporter *r, int e)
{
	if (e && !r->err)
		r->err = e;
}

/* Read every measured CPU's busy time (one read of /proc/stat) and each channel's
 * thread times, as one pair per channel (see struct chan_use). */
static void read_uses(struct reporter *r)
{
	size_t n = r->cfg.n_chans;
	bool busy_ok = cpuuse_cpus_busy_ns(r->use_cpu, n, r->use_busy, r->use_found) == 0;
	uint64_t now = rl_now_ns(CLOCK_MONOTONIC);
	for (size_t c = 0; c < n; c++) {
		struct chan_use *u = &r->use[c];
		struct channel *ch = r->cfg.chans[c];
		uint64_t run, wait;
		int tid = atomic_load_explicit(&ch->tid, memory_order_relaxed);
		if (tid <= 0 || cpuuse_thread_ns(tid, &run, &wait) != 0)
			continue;	/* no thread (yet, or any more): keep the last pair */
		if (u->cpu_ok && !(busy_ok && r->use_found[c]))
			continue;
		u->busy_ns = u->cpu_ok ? r->use_busy[c] : 0;
		u->run_ns = run;
		u->wait_ns = wait;
		u->thread_ok = true;
		u->at_ns = now;
	}
}

static void write_use(struct jsonw *w, const struct chan_use *u)
{
	if (!u || !u->thread_ok) {
		jw_null(w, "cpu_use");
		return;
	}
	jw_obj_begin(w, "cpu_use");
	jw_uint(w, "span_ns", u->at_ns > u->start_ns ? u->at_ns - u->start_ns : 0);
	if (u->cpu_ok)
		jw_uint(w, "cpu_busy_ns", u->busy_ns >= u->busy0_ns ? u->busy_ns - u->busy0_ns : 0);
	else
		jw_null(w, "cpu_busy_ns");
	{
		jw_uint(w, "thread_run_ns", u->run_ns);
		jw_uint(w, "thread_wait_ns", u->wait_ns);
	}
	jw_obj_end(w);
}

/* [window_index, sum_ns, [[bucket, count], ...]]: the window's coarse histogram. */
static void write_window_hist(struct jsonw *w, const struct win_rec *win)
{
	jw_arr_begin(w, NULL);
	jw_uint(w, NULL, win->index);
	jw_uint(w, NULL, win->sum_ns);
	jw_arr_begin(w, NULL);
	for (unsigned b = 0; b < WIN_HIST_BUCKETS; b++) {
		if (!win->hist[b])
			continue;
		jw_arr_begin(w, NULL);
		jw_uint(w, NULL, b);
		jw_uint(w, NULL, win->hist[b]);
		jw_arr_end(w);
	}
	jw_arr_end(w);
	jw_arr_end(w);
}

void reporter_write_channel(struct jsonw *w, const struct channel *ch,
			    const struct chan_state *st, const struct win_rec *wins,
			    size_t n_wins, bool with_current, const struct chan_use *use)
{
	int tid = atomic_load_explicit(&((struct channel *)ch)->tid, memory_order_relaxed);
	jw_obj_begin(w, NULL);
	jw_str(w, "name", ch->name);
	jw_int_or_null(w, "cpu", ch->cpu);
	if (tid > 0)
		jw_int(w, "tid", tid);
	else
		jw_null(w, "tid");
	jw_uint(w, "samples", st->samples);
	jw_uint(w, "missed", st->missed);
	jw_uint(w, "negative", st->negative);
	if (st->samples) {
		jw_uint(w, "min_ns", st->min_ns);
		jw_uint(w, "max_ns", st->max_ns);
	} else {
		jw_null(w, "min_ns");
		jw_null(w, "max_ns");
	}
	jw_uint(w, "sum_ns", st->sum_ns);
	if (st->samples)
		jw_uint(w, "max_at_ns", st->max_at_ns);
	else
		jw_null(w, "max_at_ns");
	jw_obj_begin(w, "hist");
	jw_str(w, "layout", "loglin");
	jw_uint(w, "sub_bits", HIST_SUB_BITS);
	jw_arr_begin(w, "buckets");
	for (unsigned i = 0; i < HIST_BUCKETS; i++) {
		if (!st->hist.counts[i])
			continue;
		jw_arr_begin(w, NULL);
		jw_uint(w, NULL, i);
		jw_uint(w, NULL, st->hist.counts[i]);
		jw_arr_end(w);
	}
	jw_arr_end(w);
	jw_obj_end(w);
	jw_arr_begin(w, "windows");
	for (size_t i = 0; i < n_wins; i++) {
		jw_arr_begin(w, NULL);
		jw_uint(w, NULL, wins[i].index);
		jw_uint(w, NULL, wins[i].max_ns);
		jw_uint(w, NULL, wins[i].samples);
		jw_arr_end(w);
	}
	if (with_current && st->cur_win.samples) {
		jw_arr_begin(w, NULL);
		jw_uint(w, NULL, st->cur_win.index);
		jw_uint(w, NULL, st->cur_win.max_ns);
		jw_uint(w, NULL, st->cur_win.samples);
		jw_arr_end(w);
	}
	jw_arr_end(w);
	jw_obj_begin(w, "window_hist");
	jw_uint(w, "sub_bits", WIN_HIST_SUB_BITS);
	jw_arr_begin(w, "windows");
	for (size_t i = 0; i < n_wins; i++)
		write_window_hist(w, &wins[i]);
	if (with_current && st->cur_win.samples)
		write_window_hist(w, &st->cur_win);
	jw_arr_end(w);
	jw_obj_end(w);
	jw_uint(w, "windows_lost", st->windows_lost);
	jw_uint(w, "ring_lost", st->ring_lost);
	write_use(w, use);
	jw_obj_end(w);
}

static void drain_samples(struct reporter *r)
{
	if (r->cfg.samples_fd < 0 && !r->cfg.sink)
		return;
	for (size_t c = 0; c < r->cfg.n_chans; c++) {
		size_t n;
		while ((n = channel_drain_samples(r->cfg.chans[c], r->smp, SMP_BATCH)) > 0) {
			if (r->cfg.sink)
				r->cfg.sink(r->cfg.sink_arg, c, r->cfg.chans[c]->cpu,
					    r->cfg.start_mono_ns, r->smp, n);
			if (r->cfg.samples_fd < 0)
				continue;
			for (size_t i = 0; i < n; i++) {
				unsigned char *p = r->smp_out + i * SAMPLES_RECORD_SIZE;
				le_put32(p, (uint32_t)c);
				le_put32(p + 4, 0);
				le_put64(p + 8, r->smp[i].at_ns);
				le_put64(p + 16, r->smp[i].value_ns);
			}
			int e = rl_write_all(r->cfg.samples_fd, r->smp_out, n * SAMPLES_RECORD_SIZE);
			note_err(r, e);
			if (!e)
				r->written += n;
		}
	}
}

/* Pop windows first, then copy state: every popped window is inside the copy. */
static void collect(struct reporter *r, size_t c)
{
	struct channel *ch = r->cfg.chans[c];
	struct win_rec *wins = r->wins + c * WIN_BATCH;
	r->n_wins[c] = channel_pop_windows(ch, wins, WIN_BATCH);
	channel_snapshot(ch, &r->scratch[c]);
}

static uint64_t elapsed(const struct reporter *r, uint64_t now)
{
	return now > r->cfg.start_mono_ns ? now - r->cfg.start_mono_ns : 0;
}

/* The "channels" array of a snapshot or (final) the result, then the probe's members. */
static void write_channels(struct reporter *r, bool final)
{
	jw_arr_begin(&r->w, "channels");
	for (size_t c = 0; c < r->cfg.n_chans; c++)
		reporter_write_channel(&r->w, r->cfg.chans[c], &r->scratch[c],
				       r->wins + c * WIN_BATCH, r->n_wins[c], final, &r->use[c]);
	jw_arr_end(&r->w);
	if (r->cfg.extra)
		r->cfg.extra(r->cfg.extra_arg, &r->w, final);
}

static void write_snapshot(struct reporter *r, uint64_t now)
{
	for (size_t c = 0; c < r->cfg.n_chans; c++)
		collect(r, c);
	read_uses(r);
	out_record_begin(&r->w, "snapshot");
	jw_uint(&r->w, "seq", ++r->seq);
	jw_uint(&r->w, "elapsed_ns", elapsed(r, now));
	write_channels(r, false);
	jw_obj_end(&r->w);
	note_err(r, jw_emit(&r->w, r->cfg.out_fd));
}

static void write_result(struct reporter *r)
{
	const struct reporter_outcome *o = &r->outcome;
	uint64_t now = rl_now_ns(CLOCK_MONOTONIC);
	uint64_t lost = 0;
	for (size_t c = 0; c < r->cfg.n_chans; c++) {
		collect(r, c);
		lost += r->scratch[c].ring_lost;
	}
	out_record_begin(&r->w, "result");
	jw_str(&r->w, "status", o->status);
	jw_int(&r->w, "exit_code", o->exit_code);
	jw_uint(&r->w, "elapsed_ns", elapsed(r, now));
	jw_uint(&r->w, "end_realtime_ns", rl_now_ns(CLOCK_REALTIME));
	write_channels(r, true);
	if (o->threshold_hit && o->thr_chan < r->cfg.n_chans) {
		const struct channel *ch = r->cfg.chans[o->thr_chan];
		jw_obj_begin(&r->w, "threshold_hit");
		jw_str(&r->w, "channel", ch->name);
		jw_int_or_null(&r->w, "cpu", ch->cpu);
		jw_uint(&r->w, "latency_ns", o->thr_latency_ns);
		jw_uint(&r->w, "at_ns", o->thr_at_ns);
		jw_obj_end(&r->w);
	} else {
		jw_null(&r->w, "threshold_hit");
	}
	if (r->cfg.samples_fd >= 0) {
		jw_obj_begin(&r->w, "samples_file");
		jw_str(&r->w, "path", r->cfg.samples_path ? r->cfg.samples_path : "");
		jw_uint(&r->w, "written", r->written);
		jw_uint(&r->w, "lost", lost);
		jw_obj_end(&r->w);
	} else {
		jw_null(&r->w, "samples_file");
	}
	jw_str_or_null(&r->w, "error", o->error);
	jw_obj_end(&r->w);
	note_err(r, jw_emit(&r->w, r->cfg.out_fd));
}

static void *reporter_main(void *arg)
{
	struct reporter *r = arg;
	uint64_t next_snap = r->cfg.start_mono_ns + r->cfg.snapshot_ns;
	uint64_t step = (r->cfg.samples_fd >= 0 || r->cfg.sink) && DRAIN_NS < r->cfg.snapshot_ns ? DRAIN_NS
										   : r->cfg.snapshot_ns;
	if (step > USE_NS)
		step = USE_NS;
	uint64_t next_wake = r->cfg.start_mono_ns + step;

	pthread_mutex_lock(&r->lock);
	for (;;) {
		while (!r->finish && r->sync_req == r->sync_done) {
			struct timespec ts = rl_ns_to_ts(next_wake);
			int e = pthread_cond_timedwait(&r->cond, &r->lock, &ts);
			if (e == ETIMEDOUT)
				break;
		}
		if (r->finish)
			break;
		uint64_t req = r->sync_req;
		pthread_mutex_unlock(&r->lock);

		uint64_t now = rl_now_ns(CLOCK_MONOTONIC);
		drain_samples(r);
		if (req != r->sync_done) {
			pthread_mutex_lock(&r->lock);
			r->sync_done = req;
			pthread_cond_broadcast(&r->synced);
			pthread_mutex_unlock(&r->lock);
		}
		if (now >= next_snap) {
			write_snapshot(r, now);
			while (next_snap <= now)
				next_snap += r->cfg.snapshot_ns;
		} else {
			read_uses(r);	/* keeps the last pair before a thread exits */
		}
		while (next_wake <= now)
			next_wake += step;

		pthread_mutex_lock(&r->lock);
	}
	pthread_mutex_unlock(&r->lock);

	drain_samples(r);
	write_result(r);
	return NULL;
}

static void reporter_free(struct reporter *r)
{
	jw_free(&r->w);
	free(r->scratch);
	free(r->use);
	free(r->use_cpu);
	free(r->use_busy);
	free(r->use_found);
	free(r->wins);
	free(r->n_wins);
	free(r->smp);
	free(r->smp_out);
	pthread_cond_destroy(&r->cond);
	pthread_cond_destroy(&r->synced);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

int reporter_start(struct reporter **out, const struct reporter_cfg *cfg)
{
	struct reporter *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->cfg = *cfg;
	jw_init(&r->w);
	pthread_mutex_init(&r->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&r->cond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_cond_init(&r->synced, NULL);

	size_t n = cfg->n_chans ? cfg->n_chans : 1;
	r->scratch = calloc(n, sizeof(*r->scratch));
	r->wins = calloc(n * WIN_BATCH, sizeof(*r->wins));
	r->n_wins = calloc(n, sizeof(*r->n_wins));
	r->use = calloc(n, sizeof(*r->use));
	r->use_cpu = calloc(n, sizeof(*r->use_cpu));
	r->use_busy = calloc(n, sizeof(*r->use_busy));
	r->use_found = calloc(n, sizeof(*r->use_found));
	if (cfg->samples_fd >= 0 || cfg->sink) {
		r->smp = calloc(SMP_BATCH, sizeof(*r->smp));
		r->smp_out = calloc(SMP_BATCH, SAMPLES_RECORD_SIZE);
	}
	if (!r->scratch || !r->wins || !r->n_wins || !r->use || !r->use_cpu || !r->use_busy ||
	    !r->use_found || ((cfg->samples_fd >= 0 || cfg->sink) && (!r->smp || !r->smp_out))) {
		reporter_free(r);
		return -ENOMEM;
	}
	for (size_t c = 0; c < cfg->n_chans; c++)
		r->use_cpu[c] = cfg->chans[c]->cpu >= 0 ? cfg->chans[c]->cpu : -1;
	/* the CPUs' busy time at the start */
	bool busy_ok = cpuuse_cpus_busy_ns(r->use_cpu, cfg->n_chans, r->use_busy,
					   r->use_found) == 0;
	uint64_t start = rl_now_ns(CLOCK_MONOTONIC);
	for (size_t c = 0; c < cfg->n_chans; c++) {
		struct chan_use *u = &r->use[c];
		u->cpu_ok = busy_ok && r->use_cpu[c] >= 0 && r->use_found[c];
		u->busy0_ns = u->cpu_ok ? r->use_busy[c] : 0;
		u->busy_ns = u->busy0_ns;
		u->start_ns = start;
	}
	if (cfg->samples_fd >= 0) {
		unsigned char hdr[16];
		memcpy(hdr, SAMPLES_MAGIC, 8);
		le_put32(hdr + 8, SAMPLES_VERSION);
		le_put32(hdr + 12, SAMPLES_RECORD_SIZE);
		int e = rl_write_all(cfg->samples_fd, hdr, sizeof(hdr));
		if (e) {
			reporter_free(r);
			return e;
		}
	}

	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, REPORTER_STACK);
	int e = pthread_create(&r->thread, &attr, reporter_main, r);
	pthread_attr_destroy(&attr);
	if (e) {
		reporter_free(r);
		return -e;
	}
	*out = r;
	return 0;
}

void reporter_sync_samples(struct reporter *r)
{
	pthread_mutex_lock(&r->lock);
	uint64_t req = ++r->sync_req;
	pthread_cond_signal(&r->cond);
	while (r->sync_done < req && !r->finish)
		pthread_cond_wait(&r->synced, &r->lock);
	pthread_mutex_unlock(&r->lock);
}

int reporter_finish(struct reporter *r, const struct reporter_outcome *o)
{
	pthread_mutex_lock(&r->lock);
	r->outcome = *o;
	r->finish = true;
	pthread_cond_signal(&r->cond);
	pthread_mutex_unlock(&r->lock);
	pthread_join(r->thread, NULL);
	int err = r->err;
	reporter_free(r);
	return err;
}

bool reporter_outcome_stopped(struct reporter_outcome *o, bool interrupted, const char *error)
{
	if (interrupted) {
		o->status = "interrupted";
		o->exit_code = RL_EXIT_INTERRUPTED;
		return true;
	}
	if (error && error[0]) {
		o->status = "error";
		o->exit_code = RL_EXIT_ERROR;
		o->error = error;
		return true;
	}
	return false;
}

void reporter_outcome_threshold(struct reporter_outcome *o, size_t chan, uint64_t latency_ns,
				uint64_t at_ns)
{
	o->status = "threshold";
	o->exit_code = RL_EXIT_THRESHOLD;
	o->threshold_hit = true;
	o->thr_chan = chan;
	o->thr_latency_ns = latency_ns;
	o->thr_at_ns = at_ns;
}

int reporter_conclude(struct reporter *r, const struct reporter_outcome *o, int out_err,
		      const char *probe)
{
	int e = reporter_finish(r, o);
	if (e || out_err) {
		fprintf(stderr, "rtlab-probe %s: writing the output failed: %s\n", probe,
			strerror(-(e ? e : out_err)));
		return o->exit_code == RL_EXIT_OK ? RL_EXIT_ERROR : o->exit_code;
	}
	return o->exit_code;
}
