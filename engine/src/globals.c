/* SPDX-License-Identifier: MIT */
#include "globals.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int rl_globals_parse(int argc, char *const *argv, struct rl_globals *g, char *err,
		     size_t errlen)
{
	g->tee = NULL;
	g->lifeline = false;
	int i = 1;
	while (i < argc) {
		const char *a = argv[i];
		if (strcmp(a, "--stdin-lifeline") == 0) {
			if (g->lifeline) {
				snprintf(err, errlen, "--stdin-lifeline: given more than once");
				return -EINVAL;
			}
			g->lifeline = true;
			i++;
			continue;
		}
		const char *val = NULL;
		if (strcmp(a, "--tee") == 0) {
			if (i + 1 >= argc) {
				snprintf(err, errlen, "--tee: missing value FILE");
				return -EINVAL;
			}
			val = argv[i + 1];
			i += 2;
		} else if (strncmp(a, "--tee=", 6) == 0) {
			val = a + 6;
			i++;
		} else {
			break; /* the command */
		}
		if (g->tee) {
			snprintf(err, errlen, "--tee: given more than once");
			return -EINVAL;
		}
		if (!val[0]) {
			snprintf(err, errlen, "--tee: the file name must not be empty");
			return -EINVAL;
		}
		g->tee = val;
	}
	return i;
}
