/* SPDX-License-Identifier: MIT */
/* Unit tests: the line parsers of sysfile.c (/proc/PID/cgroup, /proc/self/mountinfo). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "sysfile.h"
#include "tap.h"

/* Lines of /proc/PID/cgroup and the controllers and path sf_cgroup_line finds in them. */
static const struct {
	const char *line, *ctrl, *path;
} cgroup_lines[] = {
	{ "0::/user.slice/session-3.scope\n", "", "/user.slice/session-3.scope" },	/* v2 */
	{ "4:cpuset:/", "cpuset", "/" },					/* v1 */
	{ "7:cpu,cpuacct:/system.slice/rtlab.service\n", "cpu,cpuacct",			/* joint */
	  "/system.slice/rtlab.service" },
	{ "1:name=systemd:/init.scope", "name=systemd", "/init.scope" },		/* named */
	{ "0::/a:b", "", "/a:b" },	/* only the first two colons split: a path may hold more */
};

static void test_cgroup_line(void)
{
	char *ctrl = NULL, *path = NULL;
	for (size_t i = 0; i < sizeof(cgroup_lines) / sizeof(cgroup_lines[0]); i++) {
		char line[128];
		snprintf(line, sizeof(line), "%s", cgroup_lines[i].line);
		CHECK(sf_cgroup_line(line, &ctrl, &path) == 0);
		CHECK(strcmp(ctrl, cgroup_lines[i].ctrl) == 0);
		CHECK(strcmp(path, cgroup_lines[i].path) == 0);
	}

	char one[] = "0:cpuset\n", none[] = "", text[] = "garbage";
	CHECK(sf_cgroup_line(one, &ctrl, &path) == -EINVAL);
	CHECK(sf_cgroup_line(none, &ctrl, &path) == -EINVAL);
	CHECK(sf_cgroup_line(text, &ctrl, &path) == -EINVAL);
}

static void test_mountinfo_line(void)
{
	struct sf_mount m;
	CHECK(sf_mountinfo_line("29 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime "
				"shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n",
				&m) == 0);
	CHECK(strcmp(m.dir, "/sys/fs/cgroup") == 0);
	CHECK(strcmp(m.fstype, "cgroup2") == 0);
	CHECK(strcmp(m.opts, "rw,nsdelegate,memory_recursiveprot") == 0);

	/* no optional fields; a v1 hierarchy names its controllers in the super options */
	CHECK(sf_mountinfo_line("40 30 0:35 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup "
				"rw,cpuset", &m) == 0);
	CHECK(strcmp(m.dir, "/sys/fs/cgroup/cpuset") == 0);
	CHECK(strcmp(m.fstype, "cgroup") == 0 && strcmp(m.opts, "rw,cpuset") == 0);

	/* several optional fields before the separator */
	CHECK(sf_mountinfo_line("36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 shared:2 - ext3 "
				"/dev/root rw,errors=continue", &m) == 0);
	CHECK(strcmp(m.dir, "/mnt2") == 0 && strcmp(m.fstype, "ext3") == 0);
	CHECK(strcmp(m.opts, "rw,errors=continue") == 0);

	CHECK(sf_mountinfo_line("no separator here at all", &m) == -EINVAL);
	CHECK(sf_mountinfo_line("1 2 3:4 / /x rw - cgroup", &m) == -EINVAL);
	CHECK(sf_mountinfo_line("", &m) == -EINVAL);
}

/* This process's own files parse, line by line (as sys facts and sys apply read them). */
static void test_own_files(void)
{
	char line[4096];
	FILE *f = fopen("/proc/self/cgroup", "re");
	if (f) {
		int ok = 0, bad = 0;
		while (fgets(line, sizeof(line), f)) {
			char *ctrl, *path;
			if (sf_cgroup_line(line, &ctrl, &path) == 0 && path[0] == '/')
				ok++;
			else
				bad++;
		}
		fclose(f);
		CHECK(ok > 0 && bad == 0);
	}
	f = fopen("/proc/self/mountinfo", "re");
	if (f) {
		int root = 0;
		while (fgets(line, sizeof(line), f)) {
			struct sf_mount m;
			if (sf_mountinfo_line(line, &m) == 0 && strcmp(m.dir, "/") == 0)
				root++;
		}
		fclose(f);
		CHECK(root > 0);
	}
}

int main(void)
{
	test_cgroup_line();
	test_mountinfo_line();
	test_own_files();
	return tap_done("sysfile");
}
