/* SPDX-License-Identifier: MIT */
/*
 * Who else used a measured CPU? Read by the reporter thread (never in a hot loop):
 *
 *   - a CPU's busy time from /proc/stat (user + nice + system + irq + softirq +
 *     steal; idle and iowait excluded), in ns (ticks of USER_HZ: the kernel's
 *     accounting is tick-based, so it is exact to about one tick per read);
 *   - a thread's time on a CPU and time waiting for it (runnable, another task
 *     running) from /proc/self/task/TID/schedstat (exact ns, CONFIG_SCHED_INFO).
 *
 * The host subtracts the measuring threads' own time from the CPU's busy time: the
 * rest is other work on a CPU that was meant for the measurement
 * (docs/engine-output.md, channel `cpu_use`).
 */
#ifndef RTLAB_CPUUSE_H
#define RTLAB_CPUUSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"

/* Busy ticks of `cpu` in the text of /proc/stat. 0, or -ENOENT (no such line), -EINVAL. */
int cpuuse_parse_stat(const char *text, int cpu, uint64_t *busy_ticks) RL_WUR;

/* Run and wait ns from the text of a schedstat file. 0 or -EINVAL. */
int cpuuse_parse_schedstat(const char *text, uint64_t *run_ns, uint64_t *wait_ns) RL_WUR;

/* Busy ticks of each of cpus[0..n) from a file in /proc/stat's format, in one pass
 * (read in small chunks); found[i]: cpus[i] has a line. 0 or a negative errno. */
int cpuuse_read_stat_many(const char *path, const int *cpus, size_t n, uint64_t *busy_ticks,
			  bool *found) RL_WUR;

/* Busy ticks of `cpu` from a file in /proc/stat's format. 0, -ENOENT or a negative errno. */
int cpuuse_read_stat(const char *path, int cpu, uint64_t *busy_ticks) RL_WUR;

/* The busy time so far (ns) of each of cpus[0..n), from one read of /proc/stat;
 * found[i] as above. 0 or a negative errno. */
int cpuuse_cpus_busy_ns(const int *cpus, size_t n, uint64_t *busy_ns, bool *found) RL_WUR;

/* Time thread `tid` of this process ran and waited to run (ns). 0 or a negative errno
 * (-ENOENT once the thread has exited). */
int cpuuse_thread_ns(int tid, uint64_t *run_ns, uint64_t *wait_ns) RL_WUR;

#endif
