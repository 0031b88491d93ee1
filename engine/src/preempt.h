/* SPDX-License-Identifier: MIT */
/*
 * The kernel's preemption model, decided once, here, for every consumer: the
 * header of every probe (system.preempt), `rtlab-probe sys preempt` and
 * through it `rtlab doctor`. Order (docs/engine-output.md#preemption-model):
 * PREEMPT_RT; on PREEMPT_DYNAMIC kernels the live mode (debugfs
 * sched/preempt), else the boot `preempt=`, else the config default; on
 * other kernels the config, else `uname -v`.
 */
#ifndef RTLAB_PREEMPT_H
#define RTLAB_PREEMPT_H

#include <stdbool.h>
#include <stddef.h>

#include "jsonw.h"

struct preempt_inputs {
	const char *realtime;	/* /sys/kernel/realtime, or NULL */
	const char *version;	/* uname -v, or NULL */
	const char *cmdline;	/* /proc/cmdline, or NULL */
	const char *live;	/* debugfs sched/preempt, or NULL */
	const char *live_error;	/* why live is NULL ("debugfs not mounted", "EPERM"), or NULL */
	const char *config;	/* kernel config text, or NULL */
	const char *config_path; /* where config was read ("/proc/config.gz") */
};

struct preempt_info {
	const char *model;	/* rt|full|lazy|voluntary|none, NULL = unknown */
	char source[160];	/* where model was read ("" when unknown) */
	int dynamic;		/* PREEMPT_DYNAMIC: 1, 0, -1 unknown */
	char live_error[96];	/* dynamic only: why the live mode was not read, else "" */
};

/* The decision from gathered inputs (pure; unit-tested). */
void preempt_decide(const struct preempt_inputs *in, struct preempt_info *out);

/* "none voluntary (full) lazy" -> "full"; NULL when no known mode is marked. */
const char *preempt_parse_live(const char *text);

/* The last preempt=MODE before "--"; NULL when absent or not a known mode. */
const char *preempt_parse_cmdline(const char *cmdline);

/* The model the config's "Preemption Model" choice selects (CONFIG_PREEMPT_NONE=y
 * -> "none"), and that symbol in *symbol; NULL when none is set. */
const char *preempt_config_choice(const char *config, const char **symbol);

/* Whether the config text sets CONFIG_<name>=y. */
bool preempt_config_set(const char *config, const char *name);

/*
 * Read the inputs below root ("" or "/" for this system; a copy of a board's
 * /proc, /sys and /boot otherwise) and decide. Never fails: what cannot be
 * read stays NULL.
 */
void preempt_detect(const char *root, struct preempt_info *out);

/* The fields "preempt", "preempt_source", "preempt_dynamic", "preempt_live_error". */
void preempt_write(struct jsonw *w, const struct preempt_info *p);

/* Whether root names this system ("" or "/", or NULL) rather than a copy of a board's files. */
bool preempt_is_live(const char *root);

/*
 * The inputs as read below root, kept for a caller that reports them too (`sys
 * preempt`); NULL when out of memory. preempt_detect() is read, decide, free.
 */
struct preempt_read;
struct preempt_read *preempt_read(const char *root);
const struct preempt_inputs *preempt_read_inputs(const struct preempt_read *r);
void preempt_read_free(struct preempt_read *r);

#endif
