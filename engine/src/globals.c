/* SPDX-License-Identifier: MIT */
#include "globals.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "opts.h"

/*
 * `NAME VALUE` or `NAME=VALUE` at argv[*i]: 1, with *val the VALUE (NULL when it is
 * missing) and *i past it; 0 when argv[*i] is another word.
 */
static int value_option(const char *name, int argc, char *const *argv, int *i,
			const char **val)
{
	const char *a = argv[*i];
	size_t n = strlen(name);
	if (strncmp(a, name, n) != 0 || (a[n] != '\0' && a[n] != '='))
		return 0;
	if (a[n] == '=') {
		*val = a + n + 1;
		*i += 1;
	} else {
		*val = *i + 1 < argc ? argv[*i + 1] : NULL;
		*i += 2;
	}
	return 1;
}

int rl_globals_parse(int argc, char *const *argv, struct rl_globals *g, char *err,
		     size_t errlen)
{
	g->tee = NULL;
	g->lifeline = false;
	g->lifeline_timeout_ns = 0;
	g->cgroup = NULL;
	int i = 1;
	while (i < argc) {
		const char *val;
		if (strcmp(argv[i], "--stdin-lifeline") == 0) {
			if (g->lifeline) {
				snprintf(err, errlen, "--stdin-lifeline: given more than once");
				return -EINVAL;
			}
			g->lifeline = true;
			i++;
		} else if (value_option("--lifeline-timeout", argc, argv, &i, &val)) {
			uint64_t ns = 0;
			if (!val || opt_parse_duration(val, &ns) != 0 || ns < NS_PER_SEC) {
				snprintf(err, errlen, "--lifeline-timeout: expects a duration of at "
					 "least 1s, e.g. 30s");
				return -EINVAL;
			}
			if (g->lifeline_timeout_ns) {
				snprintf(err, errlen, "--lifeline-timeout: given more than once");
				return -EINVAL;
			}
			g->lifeline_timeout_ns = ns;
		} else if (value_option("--cgroup", argc, argv, &i, &val)) {
			if (!val || val[0] != '/') {
				snprintf(err, errlen, "--cgroup: expects an absolute cgroup directory");
				return -EINVAL;
			}
			if (g->cgroup) {
				snprintf(err, errlen, "--cgroup: given more than once");
				return -EINVAL;
			}
			g->cgroup = val;
		} else if (value_option("--tee", argc, argv, &i, &val)) {
			if (!val) {
				snprintf(err, errlen, "--tee: missing value FILE");
				return -EINVAL;
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
		} else {
			break; /* the command */
		}
	}
	if (g->lifeline_timeout_ns && !g->lifeline) {
		snprintf(err, errlen, "--lifeline-timeout: needs --stdin-lifeline");
		return -EINVAL;
	}
	return i;
}

int rl_join_cgroup(const char *dir, char *err, size_t errlen)
{
	char path[4096];
	int n = snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	if (n < 0 || (size_t)n >= sizeof(path)) {
		snprintf(err, errlen, "--cgroup %s: path too long", dir);
		return -ENAMETOOLONG;
	}
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		snprintf(err, errlen, "--cgroup %s: cannot open cgroup.procs: %s", dir, strerror(e));
		return -e;
	}
	/* "0": the writing process itself (cgroup v1 and v2) */
	ssize_t w = write(fd, "0\n", 2);
	int e = w == 2 ? 0 : (w < 0 ? errno : EIO);
	close(fd);
	if (e) {
		snprintf(err, errlen, "--cgroup %s: cannot move into it: %s", dir, strerror(e));
		return -e;
	}
	return 0;
}
