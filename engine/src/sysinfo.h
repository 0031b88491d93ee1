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

/* Write the "system" object (docs/engine-output.md) under key. */
void sysinfo_write(struct jsonw *w, const char *key);

#endif
