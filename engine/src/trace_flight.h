/* SPDX-License-Identifier: MIT */
/*
 * The flight recorder of the trace recorder (--trace-mode flight, trace_rec.h): the
 * pages read from each traced CPU's trace_pipe_raw are kept in a bounded memory ring
 * per CPU (--trace-keep-mb); a sample above --trace-trigger opens a window
 * [deadline - before, wake + after] around it; windows that overlap are merged; once
 * the pages up to a window's end have been read, the window's pages are written
 * (each page once) into DIR/w<SEQ>-cpu<N>.pages, under a temporary name renamed when
 * whole, if the token bucket (--trace-rate, a burst of 10 s worth) has room for them,
 * else dropped whole and counted. Every trigger is in DIR/windows.jsonl: a line each in a
 * kept window; a dropped window has one line whose `merged` counts the triggers merged
 * into it (the lines stay bounded by the windows when every sample triggers);
 * every page read is written, dropped (counted) or aged out of the ring (counted).
 *
 * The pure parts (the bucket, the ring, the windows) are separate functions for the
 * unit tests; only tfl_close() does I/O. Everything but tfl_push_trigger() (the
 * reporter thread's, under the queue's lock) runs on the recorder's reader thread.
 */
#ifndef RTLAB_TRACE_FLIGHT_H
#define RTLAB_TRACE_FLIGHT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "channel.h"
#include "common.h"
#include "jsonw.h"

/* The burst of the token bucket: this many seconds' worth of --trace-rate. */
#define TFL_BURST_S 10u
/* The highest --trace-rate (bytes per second). */
#define TFL_RATE_MAX ((int64_t)1 << 30)

/* ---- the token bucket (bytes per second, a burst of TFL_BURST_S seconds) ---- */

struct tfl_bucket {
	uint64_t rate;		/* bytes per second; 0: no cap */
	uint64_t tokens;	/* bytes that may be written now */
	uint64_t rem;		/* the fraction of a byte earned (rate * ns mod 1e9) */
	uint64_t last_ns;	/* when tokens were last earned */
};

/* A full bucket at now_ns. */
void tfl_bucket_init(struct tfl_bucket *b, uint64_t rate, uint64_t now_ns);
/* Earn the tokens of the time up to now_ns, then take bytes if there are enough:
 * true when taken (always with no cap). */
bool tfl_bucket_take(struct tfl_bucket *b, uint64_t now_ns, uint64_t bytes);
/* Give back bytes taken for a window that could not be written. */
void tfl_bucket_refund(struct tfl_bucket *b, uint64_t bytes);

/* ---- a trigger and its window ---- */

struct tfl_trigger {
	uint64_t seq;		/* 1, 2, ... in the order they reached the recorder */
	uint32_t chan;
	int cpu;		/* the channel's CPU, -1: none */
	uint64_t deadline_ns, wake_ns, value_ns;	/* absolute CLOCK_MONOTONIC */
};

/* A trigger from a sample: at_ns is the sample's time into the run that started at
 * start_ns (absolute CLOCK_MONOTONIC), the wake; the deadline is wake - value (at
 * least 0). */
struct tfl_trigger tfl_trigger_of(uint32_t chan, int cpu, uint64_t start_ns, uint64_t at_ns,
				  uint64_t value_ns);

/* The window kept around a trigger: [deadline - before, wake + after] (saturating). */
void tfl_span(const struct tfl_trigger *t, uint64_t before_ns, uint64_t after_ns, uint64_t *from,
	      uint64_t *to);

/* ---- the ring of one CPU's pages ---- */

struct tfl_page {
	uint64_t ts;		/* the page header's timestamp: its first event */
	uint32_t len;		/* meaningful bytes (tfs_page_trim) */
	bool done;		/* written in a window, or dropped with one (counted) */
};

struct tfl_ring {
	int cpu;
	size_t cap, page_size;
	struct tfl_page *slot;	/* cap slots */
	unsigned char *mem;	/* cap * page_size bytes */
	size_t first, n;	/* the oldest page's slot, how many are held */
	bool evicted;		/* a page was pushed out (the ring does not reach back to the start) */
	uint64_t read, aged, written, dropped;	/* pages */
	uint64_t bytes_written;	/* framed (each page with its u32 length) */
};

/* A ring of cap pages of page_size bytes. 0 or -ENOMEM. */
int tfl_ring_init(struct tfl_ring *r, int cpu, size_t cap, size_t page_size) RL_WUR;
void tfl_ring_free(struct tfl_ring *r);
/* The i-th held page (0: the oldest) and its bytes. */
struct tfl_page *tfl_ring_at(struct tfl_ring *r, size_t i);
unsigned char *tfl_ring_data(struct tfl_ring *r, size_t i);
/* Keep a page (len bytes, timestamp ts); the oldest is pushed out when the ring is
 * full, counted as aged unless it was written or dropped with a window. */
void tfl_ring_push(struct tfl_ring *r, const unsigned char *page, size_t len, uint64_t ts);
/* Count every held page not written or dropped as aged (the end of the run). */
void tfl_ring_age_all(struct tfl_ring *r);

/*
 * The held pages of the window [from, to] not yet written: page i covers
 * [ts_i, ts_i+1) (the newest: up to now). Sets *first and *count to the range of held
 * pages (indices for tfl_ring_at) that meet the window (skipping none: callers skip
 * the done ones), *partial when pages of the window were aged out (the ring's oldest
 * page starts after `from` and pages were pushed out), *gone when all of it was.
 */
void tfl_ring_select(const struct tfl_ring *r, uint64_t from, uint64_t to, size_t *first,
		     size_t *count, bool *partial, bool *gone);

/* ---- the flight recorder ---- */

struct tfl_opts {
	uint64_t trigger_ns, before_ns, after_ns;
	uint64_t rate;		/* bytes per second; 0: no cap */
	uint64_t keep_mb;	/* per traced CPU */
};

/* An open window: its span and the triggers in it (the first opened it). */
struct tfl_window {
	uint64_t from, to;
	struct tfl_trigger *trig;
	size_t n_trig, cap_trig;
};

struct tfl_counters {
	uint64_t triggers, triggers_merged, triggers_lost;
	uint64_t windows_kept, windows_dropped_rate, windows_dropped_disk, windows_dropped_aged;
	uint64_t windows_partial;
	uint64_t lines_lost;	/* triggers whose line of windows.jsonl could not be written */
};

struct tfl {
	struct tfl_opts o;
	const char *dir;
	struct tfl_ring *rings;
	size_t n_rings;
	void *scratch;			/* n_rings selections, for closing a window */
	struct tfl_bucket bucket;
	struct tfl_window *open;
	size_t n_open, cap_open;
	struct tfl_counters k;
	int lines_fd;			/* DIR/windows.jsonl, -1 before tfl_open_lines */
	char error[256];		/* the first write error, one line */
	/* the reporter's queue of triggers, under lock */
	pthread_mutex_t lock;
	struct tfl_trigger *queue;
	size_t n_queue, cap_queue;
	uint64_t next_seq;		/* under lock */
	uint64_t lost;			/* under lock: triggers the full queue could not take */
};

/* Set up for the CPUs (rings of keep_mb each, page_size bytes a page) at now_ns.
 * 0 or -ENOMEM (nothing to free then). */
int tfl_init(struct tfl *f, const struct tfl_opts *o, const char *dir, const int *cpus,
	     size_t n_cpus, size_t page_size, uint64_t now_ns) RL_WUR;
void tfl_free(struct tfl *f);
/* Create DIR/windows.jsonl (empty). 0 or -errno. */
int tfl_open_lines(struct tfl *f) RL_WUR;

/* The reporter thread's: samples of one channel; those above the trigger are queued. */
void tfl_push_samples(struct tfl *f, uint32_t chan, int cpu, uint64_t start_ns,
		      const struct sample_rec *s, size_t n);

/* The ring of CPU cpu, or NULL. */
struct tfl_ring *tfl_ring_of(struct tfl *f, int cpu);

/* Take a trigger into the open windows: merged into the first open window its span
 * meets (widened), else a new window. 0 or -ENOMEM (the trigger counted as lost). */
int tfl_add(struct tfl *f, const struct tfl_trigger *t) RL_WUR;

/* Move the queued triggers into the windows. */
void tfl_take_queue(struct tfl *f);

/*
 * Close the open windows whose end is before read_to (every page up to read_to has
 * been read; UINT64_MAX: all of them, at the end): write their pages or drop them,
 * and their triggers' lines. now_ns: for the bucket.
 */
void tfl_close(struct tfl *f, uint64_t read_to, uint64_t now_ns);

/* meta.flight. */
void tfl_write_meta(const struct tfl *f, struct jsonw *w);

#endif
