/* SPDX-License-Identifier: MIT */
/*
 * Declarative option parser. A probe declares a table of struct opt_def
 * (name, type, range, default, help); parsing, validation, error messages and
 * --help are all generated from that table. Values land in an array of
 * struct opt_value parallel to the table; the probe then freezes them into its
 * own const configuration.
 *
 * Syntax: --name VALUE, --name=VALUE; booleans: --name / --no-name.
 *
 * An old spelling stays accepted through an OPT_ALIAS entry in the same table
 * (OPT_DEF_ALIAS("old", "new")): it parses exactly like the option it names,
 * shares its value slot, is shown beside it in --help and listed (with
 * "alias_of") by `rtlab-probe list --json`. docs/vocabulary.md has the names.
 */
#ifndef RTLAB_OPTS_H
#define RTLAB_OPTS_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common.h"

enum opt_type {
	OPT_INT,	/* signed integer, [min, max] */
	OPT_DURATION,	/* nanoseconds from "<number><unit>", unit ns|us|ms|s|m|h, [min, max] */
	OPT_CPULIST,	/* "0-3,6", every CPU must be online */
	OPT_ENUM,	/* one of choices; value is the index */
	OPT_BOOL,	/* --x / --no-x */
	OPT_STRING,	/* non-empty string (path, name), at most OPT_STRING_MAX bytes */
	OPT_SIZE,	/* bytes from "<integer>[k|M|G|T]" (binary: k = 1024), [min, max] */
	OPT_ALIAS,	/* another spelling of the option named by `metavar` (its value slot unused) */
};

struct opt_def {
	const char *name;	/* without leading dashes */
	enum opt_type type;
	const char *metavar;	/* e.g. "DUR"; NULL: derived from type */
	const char *help;
	int64_t min, max;	/* INT, DURATION and SIZE; CPULIST: max > 0 = at most max CPUs */
	const char *const *choices; /* ENUM, NULL-terminated */
	const char *def;	/* default, written like user input; NULL: unset */
	const char *def_help;	/* help text for a computed default (when def is NULL) */
};

struct opt_value {
	bool set;	/* has a value (given or default) */
	bool given;	/* given on the command line */
	int64_t i;	/* INT, DURATION (ns), ENUM (index), BOOL (0/1), SIZE (bytes) */
	const char *s;	/* STRING (points into argv or def) */
	cpu_set_t cpus;	/* CPULIST */
};

/* Parse results. */
#define OPTS_HELP 1

/*
 * Parse argv[0..argc) (argv[0] is the first option, not the program name).
 * online: the CPUs a cpu list may name. Returns 0, OPTS_HELP when --help/-h
 * was given, or -EINVAL with a one-line message in err naming the option and
 * its allowed values or range.
 */
int opts_parse(const struct opt_def *defs, size_t n, int argc, char *const *argv,
	       const cpu_set_t *online, struct opt_value *vals, char *err,
	       size_t errlen) RL_WUR;

/* Help text generated from the table. */
void opts_help(FILE *f, const struct opt_def *defs, size_t n);

/* Index of option name in defs, or -1. */
int opts_find(const struct opt_def *defs, size_t n, const char *name);

/* Building blocks, exported for tests and for other parsers (sys command). */
int opt_parse_int(const char *s, int64_t *out) RL_WUR;
int opt_parse_duration(const char *s, uint64_t *out) RL_WUR;
int opt_parse_cpulist(const char *s, cpu_set_t *out) RL_WUR;
/* "256M", "4k", "1G", "4096": bytes; suffixes k|K, m|M, g|G, t|T are powers of 1024. */
int opt_parse_size(const char *s, uint64_t *out) RL_WUR;
/* "256M", "4k", "1000": the largest suffix that divides exactly. */
void opt_format_size(uint64_t bytes, char *buf, size_t len);
/* "1ms", "1500us", "0ns": the largest unit that divides exactly. */
void opt_format_duration(uint64_t ns, char *buf, size_t len);
/*
 * A value as a message quotes it: in single quotes, control characters, quotes,
 * backslashes and bytes that are not UTF-8 escaped (\n, \xNN), cut after
 * OPT_SHOWN_CHARS characters with the whole length named ("'AAAA'... (100000
 * characters)"), so a huge argument is one short line. Returns buf
 * (OPT_SHOWN_LEN bytes are always enough).
 */
#define OPT_SHOWN_CHARS 60
/* The longest OPT_STRING value: a path (PATH_MAX - 1), an address, a name. */
#define OPT_STRING_MAX 4095
#define OPT_SHOWN_LEN 320
const char *opt_shown(const char *s, char *buf, size_t len);
/* The same for a path, cut after OPT_SHOWN_PATH_CHARS characters (a path names where,
 * and paths are often longer than 60); OPT_SHOWN_PATH_LEN bytes are always enough. */
#define OPT_SHOWN_PATH_CHARS 200
#define OPT_SHOWN_PATH_LEN 1024
const char *opt_shown_path(const char *s, char *buf, size_t len);
/* "0-3,6" */
void opt_format_cpulist(const cpu_set_t *set, char *buf, size_t len);

/* `old` is accepted as another spelling of the option `name` (in the same table). */
#define OPT_DEF_ALIAS(old, name) { old, OPT_ALIAS, name, NULL, 0, 0, NULL, NULL, NULL }

/* The option an OPT_ALIAS entry stands for (defs[i] itself for any other); NULL: none. */
const struct opt_def *opts_target(const struct opt_def *defs, size_t n, size_t i);

/* The single CPU of a CPULIST option limited to one CPU (max 1); -1 if not set. */
int opts_one_cpu(const struct opt_value *v);

#endif
