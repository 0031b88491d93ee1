/* SPDX-License-Identifier: MIT */
/*
 * The engine's global options, placed before the command:
 *   rtlab-probe [--tee FILE] [--stdin-lifeline] PROBE|load|sys|list|... [OPTIONS]
 * --tee FILE (or --tee=FILE): mirror every JSON line of stdout to FILE (output.h).
 * --stdin-lifeline: stop as on SIGTERM when stdin reaches EOF (lifeline.h).
 */
#ifndef RTLAB_GLOBALS_H
#define RTLAB_GLOBALS_H

#include <stdbool.h>
#include <stddef.h>

#include "common.h"

struct rl_globals {
	const char *tee;	/* NULL: no tee */
	bool lifeline;
};

/*
 * Parse the global options from argv[1]. Returns the index of the command word
 * (argc when there is none), or -EINVAL with a one-line message in err (a
 * missing or empty FILE, an option given twice).
 */
int rl_globals_parse(int argc, char *const *argv, struct rl_globals *g, char *err,
		     size_t errlen) RL_WUR;

#endif
