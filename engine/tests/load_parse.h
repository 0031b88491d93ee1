/* SPDX-License-Identifier: MIT */
/* `load`'s option parsing for its unit tests: parse ARGV into one frozen config, and
 * expect a refusal (-EINVAL) with a one-line message containing NEEDLE (bad: of ARGV,
 * refused: of the arguments after NEEDLE). */
#ifndef RTLAB_TEST_LOAD_PARSE_H
#define RTLAB_TEST_LOAD_PARSE_H

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "load.h"
#include "tap.h"

static cpu_set_t online;
static struct load_cfg cfg;
static char err[768];

static int parse(int argc, char **argv)
{
	err[0] = '\0';
	return load_parse(argc, argv, &online, &cfg, err, sizeof(err));
}

static int bad(int argc, char **argv, const char *needle)
{
	return tap_refused(parse(argc, argv), err, needle);
}

/* bad() with the arguments after needle, up to a NULL. */
static int refused(const char *needle, ...)
{
	char *argv[16];
	int argc = 0;
	va_list ap;
	va_start(ap, needle);
	for (char *a; argc < 16 && (a = va_arg(ap, char *)) != NULL;)
		argv[argc++] = a;
	va_end(ap);
	return bad(argc, argv, needle);
}

#endif
