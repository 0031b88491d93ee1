/* SPDX-License-Identifier: MIT */
/*
 * The reporter: a non-real-time thread (it inherits the housekeeping affinity
 * of its creator) that every snapshot interval copies each channel's state
 * through its seqlock and writes a `snapshot` record, drains the sample rings
 * into the --samples file, and at the end writes the `result` record.
 * It is the only writer of the output after the header.
 */
#ifndef RTLAB_REPORTER_H
#define RTLAB_REPORTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "channel.h"
#include "common.h"
#include "jsonw.h"

struct reporter_cfg {
	int out_fd;
	int samples_fd;			/* -1: no --samples */
	const char *samples_path;
	uint64_t snapshot_ns;
	uint64_t start_mono_ns;		/* run start on CLOCK_MONOTONIC */
	struct channel *const *chans;
	size_t n_chans;
	/*
	 * Optional (NULL: none): write probe-specific members into every
	 * snapshot (final false) and into the result (final true), after
	 * "channels". Runs on the reporter thread.
	 */
	void (*extra)(void *arg, struct jsonw *w, bool final);
	void *extra_arg;
	/*
	 * Optional (NULL: none): every drained sample also goes here, a batch of channel
	 * chan (its CPU, -1: none) at a time, on the reporter thread (the flight recorder's
	 * triggers, trace_rec_samples). The sample rings are drained with or without --samples.
	 */
	void (*sink)(void *arg, size_t chan, int cpu, uint64_t start_mono_ns,
		     const struct sample_rec *s, size_t n);
	void *sink_arg;
};

struct reporter_outcome {
	const char *status;		/* completed|threshold|interrupted|error */
	int exit_code;
	bool threshold_hit;
	size_t thr_chan;
	uint64_t thr_latency_ns;
	uint64_t thr_at_ns;
	const char *error;		/* NULL or a message */
};

struct reporter;

/* Write the samples file header (if any) and start the thread. */
int reporter_start(struct reporter **out, const struct reporter_cfg *cfg) RL_WUR;

/*
 * Have the reporter drain the sample rings now and wait until it has (after the
 * measuring threads stopped: the sink sees every sample before the recorder ends).
 */
void reporter_sync_samples(struct reporter *r);

/*
 * Call after every measuring thread has stopped: wakes the reporter, which
 * drains what is left, writes the `result` record and exits; joins and frees
 * it. Returns 0 or the first output error (-errno).
 */
int reporter_finish(struct reporter *r, const struct reporter_outcome *o) RL_WUR;

/*
 * The outcome of a run that was stopped early: "interrupted" (SIGINT/SIGTERM)
 * or, failing that, "error" with `error` when it is a non-empty message. Returns
 * whether it set one; probes with their own outcomes (threshold, check_failed)
 * order theirs around it.
 */
bool reporter_outcome_stopped(struct reporter_outcome *o, bool interrupted, const char *error);

/* The outcome of a run that a threshold stopped: channel `chan` saw `latency_ns` at
 * `at_ns` into the run ("threshold", exit code 3). */
void reporter_outcome_threshold(struct reporter_outcome *o, size_t chan, uint64_t latency_ns,
				uint64_t at_ns);

/*
 * reporter_finish(), then the probe's exit code: the outcome's, or RL_EXIT_ERROR
 * with one line on stderr when the header (`out_err`) or the result could not be
 * written.
 */
int reporter_conclude(struct reporter *r, const struct reporter_outcome *o, int out_err,
		      const char *probe);

/* Write one channel state object (used by snapshots and results), with the channel's
 * `cpu_use` (NULL: null; cpuuse.h). */
struct chan_use;
void reporter_write_channel(struct jsonw *w, const struct channel *ch,
			    const struct chan_state *st, const struct win_rec *wins,
			    size_t n_wins, bool with_current, const struct chan_use *use);

/* Samples file layout (docs/engine-output.md). */
#define SAMPLES_MAGIC "RTLABSMP"
#define SAMPLES_VERSION 1u
#define SAMPLES_RECORD_SIZE 24u

#endif
