/* SPDX-License-Identifier: MIT */
/*
 * The trace recorder every probe can run beside its measurement (--trace-dir): a
 * tracefs instance of its own (journaled: trace_fs.h) on the measured CPUs, with the
 * mono clock and the asked events (and tracer), drained by a reader thread on a
 * housekeeping CPU into DIR/cpuN.pages (each page framed by a u32 little-endian
 * length), DIR/formats/ and DIR/meta.json (docs/engine-output.md: "Trace capture"); or,
 * with --trace-mode flight, only the pages around the spikes (trace_flight.h).
 */
#ifndef RTLAB_TRACE_REC_H
#define RTLAB_TRACE_REC_H

#include <sched.h>
#include <stdbool.h>
#include <stdint.h>

#include "channel.h"
#include "common.h"
#include "jsonw.h"

/* The options (--trace-*); dir NULL: no recording. */
struct trace_opts {
	const char *dir;
	const char *events;	/* comma list of SYSTEM/NAME (NAME may be *); NULL: the default list */
	const char *instance;	/* NULL: rtlab-PID */
	const char *tracer;	/* NULL: none */
	const char *journal_dir;
	int64_t buffer_kb, limit_mb;
	int reader_cpu;		/* -1: the first online CPU not traced */
	const char *orphan;	/* a --trace-* option given without --trace-dir (refused), or NULL */
	/* --trace-mode flight: the flight recorder (trace_flight.h) */
	bool flight;
	uint64_t trigger_ns, before_ns, after_ns;
	int64_t rate, keep_mb;
	const char *flight_orphan;	/* a flight option given with --trace-mode full, or NULL */
};

/* The default event list (one list, shared with the host's DEFAULT_EVENTS). */
extern const char trace_default_events[];

/* The usage checks, before anything is created: DIR new in an existing directory, the
 * event list, the names, the reader CPU online. 0 or -EINVAL with one line in err. */
int trace_rec_check(const struct trace_opts *o, const cpu_set_t *online, char *err,
		    size_t errlen) RL_WUR;

struct trace_rec;

/*
 * Set up the instance on cpus, create DIR, start the reader and turn tracing on.
 * Returns 0 with *out, or an exit code (1 error, 4 skipped) after one line on stderr
 * ("rtlab-probe PROBE: ..."), with nothing left: no instance, no journal, no DIR.
 */
int trace_rec_start(struct trace_rec **out, const struct trace_opts *o, const cpu_set_t *cpus,
		    const cpu_set_t *online, const char *probe);

/* The header's "trace" object (dir, instance, reader_cpu, events_missing, tracer). */
void trace_rec_header(const struct trace_rec *r, struct jsonw *w);

/*
 * Turn tracing off, drain the last pages, write the final meta.json, remove the
 * instance and the journal, free r (NULL: nothing). 0, or -errno after one line on
 * stderr (an instance that could not be removed: its journal is kept).
 */
int trace_rec_finish(struct trace_rec *r, const char *probe);

/* Whether r records in flight mode (its triggers come from the samples). */
bool trace_rec_flight(const struct trace_rec *r);

/*
 * The reporter's sink of samples (reporter_cfg.sink) in flight mode: samples of channel
 * chan (on CPU cpu, -1: none) of the run started at start_ns (CLOCK_MONOTONIC); those
 * above --trace-trigger are queued as triggers for the reader. arg is the trace_rec.
 */
void trace_rec_samples(void *arg, size_t chan, int cpu, uint64_t start_ns,
		       const struct sample_rec *s, size_t n);

/* Whether recording met an error (a full disk): its one line, else NULL. */
const char *trace_rec_error(const struct trace_rec *r);

#endif
