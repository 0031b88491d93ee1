/* SPDX-License-Identifier: MIT */
/*
 * The probe interface. Every probe is one file that defines one
 * `const struct probe_ops`, listed once in probes.c. main() looks the probe
 * up, parses its options from the declarative table, then calls
 * init -> run -> fini. Only main() exits.
 */
#ifndef RTLAB_PROBE_H
#define RTLAB_PROBE_H

#include <sched.h>
#include <stddef.h>

#include "common.h"
#include "jsonw.h"
#include "opts.h"

struct probe_env {
	int argc;		/* the whole command line, for the header */
	char *const *argv;
	const cpu_set_t *online;
};

struct probe_ops {
	const char *name;
	const char *summary;	/* one line, for `rtlab-probe list` */
	const char *usage;	/* short description printed above the options */
	const struct opt_def *opts;
	size_t n_opts;
	/* NULL, or why this build/platform cannot run the probe (exit 4). */
	const char *unavailable;
	/*
	 * NULL, or the name of an option that a first bare argument sets:
	 * `rtlab-probe udp ping ...` is `rtlab-probe udp --mode ping ...`.
	 */
	const char *positional;

	/*
	 * Freeze the parsed values into the probe's const configuration and
	 * allocate its context. Returns 0, or -EINVAL with a one-line message
	 * naming the option (usage error, exit 2), or another -errno.
	 */
	int (*init)(void **ctx, const struct opt_value *vals, const struct probe_env *env,
		    char *err, size_t errlen);
	/* Write the probe's `config` object (header) under key. */
	void (*report_config)(const void *ctx, struct jsonw *w, const char *key);
	/* Measure; returns an exit code (enum rl_exit). */
	int (*run)(void *ctx, const struct probe_env *env);
	void (*fini)(void *ctx);
};

/* NULL-terminated table, in probes.c. */
extern const struct probe_ops *const probe_table[];

const struct probe_ops *probe_find(const char *name);

/* Probes. */
extern const struct probe_ops timer_probe;
extern const struct probe_ops switch_probe;
extern const struct probe_ops overhead_probe;
extern const struct probe_ops noise_probe;
extern const struct probe_ops interfere_probe;
extern const struct probe_ops udp_probe;
extern const struct probe_ops event_probe;

#endif
