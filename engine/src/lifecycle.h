/* SPDX-License-Identifier: MIT */
/*
 * The run of a probe, the same for every probe; the probe supplies what is its own
 * through its struct probe_ops (probe.h). In order:
 *
 *   1. signals blocked (they reach only the wait in 9); --output and --samples opened;
 *      the reporter's CPU (--housekeeping) pinned; tracefs (run_opts.trace), mlockall
 *      and /dev/cpu_dma_latency as asked;
 *   2. prepare(): the probe's own set-up, its channels and its threads;
 *   3. the threads started together (crew.h); each sets itself up and reads it back
 *      (rt_thread_setup), then thread_ready();
 *   4. the real-time check: every measuring thread runs as it asked, memory is locked,
 *      the DMA latency is held; if not, one line from probe_explain() and exit 4 (skipped),
 *      or with --allow-non-rt rt_valid false and that line as a `no_rt` log;
 *   4b. with --trace-dir, the trace recorder (trace_rec.h) set up on the measured CPUs
 *      and tracing on (its checks, exit 2, come before step 1);
 *   5. the start (now + 20 ms) decided: start();
 *   6. the header (header.h) and the log records (no_rt, no_tracefs, write_logs());
 *   7. the reporter started (snapshots with write_extra());
 *   8. the threads released into measure();
 *   9. the wait, until the threads that end the run have returned or SIGINT/SIGTERM
 *      (which sets the probe's stop flag): rt_wait_done_or_signal, or wait();
 *  10. those threads joined, stop() for the ones that run until stopped, all joined;
 *      tracing off, the last pages drained, the instance and its journal removed;
 *  11. ended(), the outcome (a claimed threshold, interrupted, an error, a failed check
 *      or completed), then the result (reporter_conclude) and the exit code.
 */
#ifndef RTLAB_LIFECYCLE_H
#define RTLAB_LIFECYCLE_H

#include "probe.h"

/* Run probe p with its context ctx (from init) and its shared run options; returns
 * the exit code (enum rl_exit). */
int lifecycle_run(const struct probe_ops *p, void *ctx, const struct run_opts *run,
		  const struct probe_env *env);

#endif
