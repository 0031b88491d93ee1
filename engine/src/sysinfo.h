/* SPDX-License-Identifier: MIT */
/* System facts for the header record. Missing facts are null, never guessed. */
#ifndef RTLAB_SYSINFO_H
#define RTLAB_SYSINFO_H

#include <sched.h>
#include <stddef.h>

#include "common.h"
#include "jsonw.h"

/* Online CPUs (sysfs, falling back to the affinity mask of the process). */
int sysinfo_online_cpus(cpu_set_t *set) RL_WUR;

/* Read a small text file, strip the trailing newline. */
int sysinfo_read_file(const char *path, char *buf, size_t len) RL_WUR;

/* Write the "system" object (docs/engine-output.md) under key. */
void sysinfo_write(struct jsonw *w, const char *key);

/* Write a CPU set as a JSON array of ints. */
void sysinfo_write_cpuset(struct jsonw *w, const char *key, const cpu_set_t *set);

#endif
