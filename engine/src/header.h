/* SPDX-License-Identifier: MIT */
/*
 * The `header` record of a probe's run (docs/engine-output.md), written once by the
 * lifecycle when everything is set up and nothing measured yet: the common part, the
 * probe's `config`, the `effective` object (what took effect, read back: memory
 * locking, /dev/cpu_dma_latency, every measuring thread, the reporter, tracing, and
 * the probe's own members) and the `system` facts.
 */
#ifndef RTLAB_HEADER_H
#define RTLAB_HEADER_H

#include <sched.h>
#include <stdbool.h>
#include <stdint.h>

#include "jsonw.h"
#include "probe.h"

/* What took effect in the lifecycle's part of the set-up. */
struct header_facts {
	const struct probe_start *start;
	const char *system;	/* the system's facts, rendered by sysinfo_write (JSON) */
	const struct run_opts *run;
	int mlock_err;
	bool dma_held;
	int dma_err;
	const struct probe_plan *plan;
	const struct rt_trace *trace;	/* tracefs as looked for (run_opts.trace), or NULL */
	const cpu_set_t *rep_aff;
	bool rep_pinned;
	bool rt_valid;
	const struct trace_rec *rec;	/* the trace recorder (--trace-dir), or NULL */
};

/* Build the header of probe p (its context ctx) in w, complete but not written. */
void header_build(struct jsonw *w, const struct probe_ops *p, const void *ctx,
		  const struct probe_env *env, const struct header_facts *f);

#endif
