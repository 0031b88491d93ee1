/* SPDX-License-Identifier: MIT */
#include "globals.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int rl_globals_parse(int argc, char *const *argv, struct rl_globals *g, char *err,
		     size_t errlen)
{
	g->tee = NULL;
	g->lifeline = false;
	g->cgroup = NULL;
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
		if (strcmp(a, "--cgroup") == 0 || strncmp(a, "--cgroup=", 9) == 0) {
			const char *dir = a[8] == '=' ? a + 9 : (i + 1 < argc ? argv[i + 1] : NULL);
			if (!dir || dir[0] != '/') {
				snprintf(err, errlen, "--cgroup: expects an absolute cgroup directory");
				return -EINVAL;
			}
			if (g->cgroup) {
				snprintf(err, errlen, "--cgroup: given more than once");
				return -EINVAL;
			}
			g->cgroup = dir;
			i += a[8] == '=' ? 1 : 2;
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
