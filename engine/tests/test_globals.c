/* SPDX-License-Identifier: MIT */
/* The global options before the command: --tee FILE, --stdin-lifeline. */
#include <errno.h>
#include <string.h>

#include "globals.h"
#include "tap.h"

static struct rl_globals g;
static char err[256];

static int parse(int argc, char **argv)
{
	err[0] = '\0';
	return rl_globals_parse(argc, argv, &g, err, sizeof(err));
}

int main(void)
{
	char *none[] = { "rtlab-probe", "timer", "--tee", "x" };
	CHECK(parse(4, none) == 1 && !g.tee && !g.lifeline); /* after the command: the probe's */

	char *both[] = { "rtlab-probe", "--tee", "/tmp/r.jsonl", "--stdin-lifeline", "timer" };
	CHECK(parse(5, both) == 4 && g.tee && strcmp(g.tee, "/tmp/r.jsonl") == 0 && g.lifeline);

	char *eq[] = { "rtlab-probe", "--stdin-lifeline", "--tee=/tmp/a", "load", "--cpu", "1" };
	CHECK(parse(6, eq) == 3 && strcmp(g.tee, "/tmp/a") == 0 && g.lifeline);

	char *only[] = { "rtlab-probe", "--stdin-lifeline" };
	CHECK(parse(2, only) == 2 && g.lifeline); /* no command: argc */

	char *version[] = { "rtlab-probe", "--version", "--json" };
	CHECK(parse(3, version) == 1);

	char *cg[] = { "rtlab-probe", "--cgroup", "/sys/fs/cgroup/rtlab-shield", "--tee=/t", "timer" };
	CHECK(parse(5, cg) == 4 && strcmp(g.cgroup, "/sys/fs/cgroup/rtlab-shield") == 0 && g.tee);
	char *cgeq[] = { "rtlab-probe", "--cgroup=/x", "timer" };
	CHECK(parse(3, cgeq) == 2 && strcmp(g.cgroup, "/x") == 0);
	char *cgrel[] = { "rtlab-probe", "--cgroup", "rel", "timer" };
	CHECK(parse(4, cgrel) == -EINVAL && strstr(err, "absolute"));
	char *cgnone[] = { "rtlab-probe", "--cgroup" };
	CHECK(parse(2, cgnone) == -EINVAL);
	char *cgtwice[] = { "rtlab-probe", "--cgroup=/a", "--cgroup=/b", "timer" };
	CHECK(parse(4, cgtwice) == -EINVAL && strstr(err, "more than once"));
	CHECK(rl_join_cgroup("/nonexistent-rtlab", err, sizeof(err)) == -ENOENT &&
	      strstr(err, "cannot open cgroup.procs"));

	char *missing[] = { "rtlab-probe", "--tee" };
	CHECK(parse(2, missing) == -EINVAL && strstr(err, "--tee: missing value FILE"));

	char *empty[] = { "rtlab-probe", "--tee=", "timer" };
	CHECK(parse(3, empty) == -EINVAL && strstr(err, "must not be empty"));

	char *twice[] = { "rtlab-probe", "--tee", "a", "--tee=b", "timer" };
	CHECK(parse(5, twice) == -EINVAL && strstr(err, "--tee: given more than once"));

	char *twice2[] = { "rtlab-probe", "--stdin-lifeline", "--stdin-lifeline", "timer" };
	CHECK(parse(4, twice2) == -EINVAL && strstr(err, "--stdin-lifeline: given more than once"));
	return tap_done("globals");
}
