/* SPDX-License-Identifier: MIT */
/*
 * The engine's global options, placed before the command:
 *   rtlab-probe [--tee FILE] [--stdin-lifeline] [--lifeline-timeout DUR] [--cgroup DIR]
 *               PROBE|load|sys|... [OPTIONS]
 * --tee FILE (or --tee=FILE): mirror every JSON line of stdout to FILE (output.h).
 * --stdin-lifeline: stop as on SIGTERM when stdin reaches EOF (lifeline.h).
 * --lifeline-timeout DUR (or =DUR): with --stdin-lifeline, stop as well when nothing
 *   came on stdin for DUR (the controller sends a heartbeat; a link so starved that
 *   no EOF can arrive still ends the engine: lifeline.h).
 * --cgroup DIR (or --cgroup=DIR): move this process into the cgroup DIR before the
 *   command runs (a cgroup v2 cpuset partition: only its tasks may use its CPUs).
 */
#ifndef RTLAB_GLOBALS_H
#define RTLAB_GLOBALS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"

struct rl_globals {
	const char *tee;	/* NULL: no tee */
	bool lifeline;
	uint64_t lifeline_timeout_ns; /* 0: none */
	const char *cgroup;	/* NULL: stay where started */
};

/*
 * Parse the global options from argv[1]. Returns the index of the command word
 * (argc when there is none), or -EINVAL with a one-line message in err (a
 * missing or empty FILE, an option given twice).
 */
int rl_globals_parse(int argc, char *const *argv, struct rl_globals *g, char *err,
		     size_t errlen) RL_WUR;

/*
 * Move the calling process into the cgroup directory `dir` (absolute) by writing 0 to
 * its cgroup.procs. 0 or -errno with a one-line message in err.
 */
int rl_join_cgroup(const char *dir, char *err, size_t errlen) RL_WUR;

#endif
