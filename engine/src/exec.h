/* SPDX-License-Identifier: MIT */
/*
 * `rtlab-probe [--stdin-lifeline] exec [--cpus LIST] -- CMD [ARGS...]`: run an
 * external tool (stress-ng on a board) as a load that the engine owns. CMD is
 * started as the leader of a new process group, with PR_SET_PDEATHSIG(SIGKILL)
 * (it dies with the exec process) and, with --cpus, that CPU affinity (like
 * taskset; the exec process, which only waits, takes it too). Its stdin is
 * /dev/null, its stdout goes to stderr (stdout carries only the engine's JSON
 * lines), its stderr passes through.
 *
 * stdout: an `exec` record once CMD runs (pid, pgid and the leader's start time,
 * what a `sys` journal records as `spawned`), an `exec_done` record at the end.
 * The end is CMD exiting by itself (exit code: CMD's; 128+N when a signal N
 * killed it), or a stop: SIGINT/SIGTERM/SIGHUP, or stdin EOF with
 * --stdin-lifeline. A stop sends SIGTERM to the group, SIGKILL after
 * EXEC_GRACE_NS, reaps everything (exit code 130). The exec process is a child
 * subreaper, so workers orphaned inside the group are reaped here too. CMD not
 * found: one line on stderr, exit 4 (skipped: a tool is missing).
 */
#ifndef RTLAB_EXEC_H
#define RTLAB_EXEC_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "common.h"
#include "probe.h"

#define EXEC_GRACE_NS (2 * NS_PER_SEC)		/* SIGTERM .. SIGKILL */
#define EXEC_KILL_WAIT_NS (10 * NS_PER_SEC)	/* after SIGKILL, before giving up */

/* Frozen after parsing. */
struct exec_cfg {
	bool have_cpus;		/* --cpus LIST given */
	cpu_set_t cpus;
	int cmd_argc;		/* CMD and its arguments: argv after "--" */
	char *const *cmd_argv;	/* NULL-terminated (points into the command line) */
};

/*
 * Parse exec's options and command (argv[0] is the first word after "exec").
 * Returns 0, OPTS_HELP, or -EINVAL with a one-line message naming the problem.
 */
int exec_parse(int argc, char *const *argv, const cpu_set_t *online, struct exec_cfg *cfg,
	       char *err, size_t errlen) RL_WUR;

/* `rtlab-probe exec --help`. */
void exec_help(FILE *f);

/*
 * The path execv() should run for `name` (a name with a '/' is taken as it is;
 * otherwise the first executable regular file in `path`, a PATH string; NULL
 * means the default search path). Returns 0, or -ENOENT when there is none.
 */
int exec_resolve(const char *name, const char *path, char *out, size_t outlen) RL_WUR;

/*
 * The command. argc/argv start at the first word after "exec"; lifeline:
 * --stdin-lifeline was given. Returns the exit code (see above; 2 usage, 1 error).
 */
int exec_main(int argc, char **argv, const struct probe_env *env, bool lifeline);

#endif
