/* SPDX-License-Identifier: MIT */
/*
 * The name of every CPU's core, from /proc/cpuinfo: the one table of ARM implementer
 * and part numbers (an aarch64 kernel prints no "model name", only "CPU implementer
 * 0x41" and "CPU part 0xd03": a Cortex-A53), PowerPC's "cpu" line, x86's "model name".
 * Used by every probe's header (system.cpu_model, system.cpu_models) and by
 * `rtlab-probe sys cpumodel [--root DIR]`, which the doctor asks, so a run's
 * provenance and the doctor name a core alike (docs/engine-output.md#cpu-model).
 */
#ifndef RTLAB_CPUNAME_H
#define RTLAB_CPUNAME_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>

#include "common.h"
#include "jsonw.h"

/* At most this much of /proc/cpuinfo is read (a 1024-CPU x86 machine prints ~2.5 MiB). */
#define CPUNAME_READ_MAX (4u << 20)
/* Distinct core names kept per machine; CPUs of a further name are left unnamed. */
#define CPUNAME_MAX_GROUPS 16
#define CPUNAME_LEN 96
#define CPUNAME_SUMMARY_LEN 256

/* The CPUs of one core name, e.g. CPUs 0-3 "Cortex-A55". */
struct cpuname_group {
	char model[CPUNAME_LEN];
	cpu_set_t cpus;
	int count;
};

/* What /proc/cpuinfo says about the cores: groups in order of their first CPU. */
struct cpunames {
	struct cpuname_group group[CPUNAME_MAX_GROUPS];
	size_t ngroups;
	/* One line for the machine: the one core name, "4x Cortex-A55 + 4x Cortex-A76",
	 * or, when no CPU is named, the machine-wide "Hardware"/"Model" line; "" if none. */
	char summary[CPUNAME_SUMMARY_LEN];
};

/*
 * The name of the core an ARM CPU reports as implementer/part (MIDR fields as
 * /proc/cpuinfo prints them), e.g. 0x41/0xd03 -> "Cortex-A53". NULL when the table
 * does not know it (cpuname_parse then says "ARM implementer 0x41 part 0xd99").
 */
const char *cpuname_arm(unsigned implementer, unsigned part);

/*
 * Parse len bytes of /proc/cpuinfo text (need not be NUL-terminated). Per
 * "processor : N" block the name is, first that applies: the decoded ARM
 * implementer/part, "model name" (x86), "cpu model" (MIPS), "cpu" up to its first
 * comma (PowerPC: "e6500", "POWER9 (raw)"), "uarch" (RISC-V). Processor numbers at or
 * above CPU_SETSIZE are ignored. Never fails: a text that names nothing gives
 * ngroups 0.
 */
void cpuname_parse(const char *text, size_t len, struct cpunames *out);

/* Read (at most CPUNAME_READ_MAX bytes of) path and parse it. 0 or -errno. */
int cpuname_read(const char *path, struct cpunames *out) RL_WUR;

/* The members "cpu_model" (string or null) and "cpu_models" ([{"cpus": [int],
 * "model": string}], or null when known is false: cpuinfo was not readable). */
void cpuname_write(struct jsonw *w, const struct cpunames *n, bool known);

#endif
