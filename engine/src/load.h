/* SPDX-License-Identifier: MIT */
/*
 * `rtlab-probe load`: a minimal CPU + memory load for boards without stress-ng,
 * the equivalent of `stress --cpu N --vm M --vm-bytes SIZE`, and the parts of
 * the OSADL mid load for boards without stress-ng or sockperf (load_work.h: a
 * periodic allocation, synced file I/O, UDP at a bounded rate, a UDP sink). It
 * measures nothing (it is not a probe). The parent process leads its own process group,
 * forks the workers into it, prints a `load` record (pids, pgid) and, when it
 * stops (--duration, SIGINT/SIGTERM/SIGHUP, stdin EOF with --stdin-lifeline, or a
 * worker that died), kills and reaps every worker and prints a `load_result`
 * record with the loop counts. Workers die with the parent (PR_SET_PDEATHSIG).
 * With --policy, the parent sets every worker's scheduling just after its fork,
 * while the worker still waits at a gate, and releases the workers only once all
 * have it (the parent's own scheduling is never changed).
 */
#ifndef RTLAB_LOAD_H
#define RTLAB_LOAD_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#include "common.h"
#include "probe.h"
#include "rt.h"

#define LOAD_MAX_WORKERS 1024	/* of each kind */
#define LOAD_CPU_ROUND 1024	/* square roots in one loop of a cpu worker */
#define LOAD_MAX_IO 64		/* io workers */

/* Frozen after parsing. */
struct load_cfg {
	unsigned n_cpu;		/* --cpu N */
	uint64_t duty_on_ns;	/* --cpu-duty ON/PERIOD: the cpu workers spin ON every */
	uint64_t duty_period_ns; /* PERIOD (0: no --cpu-duty, they spin all the time) */
	unsigned n_vm;		/* --vm M */
	uint64_t vm_bytes;	/* --vm-bytes SIZE */
	uint64_t alloc_bytes;	/* --alloc-bytes SIZE; 0: no alloc worker */
	uint64_t alloc_period_ns; /* --alloc-period DUR */
	unsigned n_io;		/* --io N */
	uint64_t io_bytes;	/* --io-bytes SIZE */
	const char *io_dir;	/* --io-dir DIR */
	const char *net_to_s;	/* --net-to ADDR:PORT; NULL: no net worker */
	struct sockaddr_storage net_to;
	socklen_t net_to_len;
	uint64_t net_kbit;	/* --net-kbit N */
	uint64_t net_size;	/* --net-size BYTES */
	const char *sink_s;	/* --net-sink [ADDR:]PORT; NULL: no sink worker */
	struct sockaddr_storage sink;
	socklen_t sink_len;
	uint64_t snapshot_ns;	/* --snapshot-interval; 0: no snapshots */
	bool have_cpus;		/* --cpus LIST given */
	cpu_set_t cpus;
	uint64_t duration_ns;	/* 0: until stopped */
	enum rt_policy policy;	/* --policy: RT_OTHER, RT_FIFO or RT_RR, of every worker */
	int priority;		/* --priority: 1..99 for fifo/rr, 0 for other */
};

/*
 * Parse load's options (argv[0] is the first option, not "load"). Returns 0,
 * OPTS_HELP, or -EINVAL with a one-line message naming the option.
 */
int load_parse(int argc, char *const *argv, const cpu_set_t *online, struct load_cfg *cfg,
	       char *err, size_t errlen) RL_WUR;

/*
 * The one line that says why the workers' scheduling could not be set (e: the
 * -errno of sched_setscheduler, or 0: set but not in effect when read back) and
 * how to fix it. Returns the exit code: RL_EXIT_SKIPPED for a refusal (EPERM,
 * EACCES: no privilege, or an RT group without runtime), RL_EXIT_ERROR otherwise.
 */
int load_sched_refusal(const struct load_cfg *cfg, int e, char *buf, size_t len);

/* `rtlab-probe load --help`. */
void load_help(FILE *f);

/*
 * One loop of a cpu worker: LOAD_CPU_ROUND square roots of seed+1 .. seed+N by
 * Newton's iteration (divides and multiplies, like stress's sqrt() hog); returns
 * their sum so the work cannot be optimised away.
 */
double load_cpu_round(double seed);

/*
 * The command. argc/argv start at the first option; env has the whole command
 * line (for the record) and the online CPUs. lifeline: --stdin-lifeline was
 * given. Returns the exit code: 0 duration reached, 1 error (a worker died, fork
 * failed), 2 usage, 4 skipped (--policy refused), 130 stopped by a signal or stdin EOF.
 */
int load_main(int argc, char **argv, const struct probe_env *env, bool lifeline);

#endif
