/* SPDX-License-Identifier: MIT */
/*
 * Small helpers shared by the probes: per-thread set-up with read-back (noise,
 * interfere), the common parts of the header (type/schema/argv/start times and
 * `effective`), log records and the output file.
 */
#ifndef RTLAB_PROBE_COMMON_H
#define RTLAB_PROBE_COMMON_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "jsonw.h"
#include "probe.h"
#include "rt.h"

/* What a measuring thread asked for and what it got (read back). */
struct pc_setup {
	int cpu;
	int pin_err;
	int sched_err;
	int get_err;
	int kpolicy;
	int prio;
	cpu_set_t affinity;
};

/* Pin, set the scheduling, read both back, prefault the stack. */
void pc_setup_self(struct pc_setup *s, int cpu, enum rt_policy policy, int priority);
bool pc_setup_ok(const struct pc_setup *s, enum rt_policy policy, int priority);
/* One line: why the requested set-up did not take effect and how to fix it. */
void pc_setup_why(const struct pc_setup *s, enum rt_policy policy, int priority, char *buf,
		  size_t len);

int pc_open_out(const char *path, int *fd) RL_WUR;

/* {"type":"header", ... "argv", "start_*"} left open for config/effective/system. */
void pc_header_begin(struct jsonw *w, const char *probe, const struct probe_env *env,
		     uint64_t start_real, uint64_t start_mono);
/* "effective": { "mlock", "dma_latency" (not used), "threads": [ ... left open. */
/* Opens "effective" and writes its "mlock" member. */
void pc_effective_open(struct jsonw *w, bool mlock_req, int mlock_err);
/* pc_effective_open, "dma_latency" as not requested, and opens "threads". */
void pc_effective_begin(struct jsonw *w, bool mlock_req, int mlock_err);
void pc_effective_thread(struct jsonw *w, const char *channel, int tid,
			 const struct pc_setup *s);
/* after the caller closed "threads" (and added its own members): "reporter", "rt_valid", "tracing" } */
/* "reporter", "rt_valid" and "tracing" (not used), inside an open "effective". */
void pc_effective_reporter(struct jsonw *w, const cpu_set_t *rep_aff, bool rep_pinned,
			   bool rt_valid);
/* pc_effective_reporter, then closes "effective" (the caller closed "threads"). */
void pc_effective_end(struct jsonw *w, const cpu_set_t *rep_aff, bool rep_pinned,
		      bool rt_valid);

/* The priority to use: given, else the policy's maximum; -EINVAL if out of range. */
/*
 * --housekeeping (the reporter thread's CPU): the given CPU, which must be online,
 * else the first online CPU not in `used`, else -1 (the reporter is not pinned).
 * With `used` NULL nothing is chosen automatically. Returns 0 or -EINVAL with a
 * one-line message.
 */
int pc_housekeeping(const struct opt_value *v, const cpu_set_t *online, const cpu_set_t *used,
		    int *out, char *err, size_t errlen) RL_WUR;

int pc_priority(enum rt_policy policy, bool given, int64_t value, int *out, char *err,
		size_t errlen) RL_WUR;

#endif
