/* SPDX-License-Identifier: MIT */
/* Unit tests of the target lock: its line, its description, take/query/release. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sys.h"
#include "tap.h"

static int parse(const char *s, struct sys_lock_info *li)
{
	return sys_lock_parse(s, strlen(s), li);
}

/* Lock lines sys_lock_parse refuses. */
static const char *const refused[] = {
	"\n",
	"{\"pid\":42,\"owner\":\"a\"",					/* torn */
	"{\"pid\":42,\"owner\":\"a\"}",					/* no since_ns */
	"{\"pid\":\"42\",\"owner\":\"a\",\"since_ns\":1}",		/* pid a string */
	"{\"pid\":0,\"owner\":\"a\",\"since_ns\":1}",			/* pid 0 */
	"{\"pid\":1,\"owner\":\"\",\"since_ns\":1}",			/* owner empty */
	"{\"pid\":1,\"owner\":\"a\\nb\",\"since_ns\":1}",		/* owner with a newline */
	"{\"pid\":1,\"owner\":\"a\",\"since_ns\":1}\n{\"pid\":2}\n",	/* two lines */
};

int main(void)
{
	struct sys_lock_info li;
	CHECK(parse("{\"pid\":42,\"owner\":\"host-a run 7\",\"since_ns\":1700000000123456789}\n",
		    &li) == 0);
	CHECK(li.valid && li.pid == 42 && strcmp(li.owner, "host-a run 7") == 0 &&
	      li.since_ns == 1700000000123456789LL);
	CHECK(parse("{\"since_ns\":0,\"owner\":\"x\",\"pid\":1}", &li) == 0 && li.valid);
	CHECK(parse("", &li) == -EINVAL && !li.valid);
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
		CHECK(parse(refused[i], &li) == -EINVAL);
	char big[400];
	memset(big, 'x', sizeof(big));
	int n = snprintf(big, sizeof(big), "{\"pid\":1,\"since_ns\":1,\"owner\":\"");
	memset(big + n, 'o', SYS_OWNER_MAX + 1);
	snprintf(big + n + SYS_OWNER_MAX + 1, sizeof(big) - (size_t)n - SYS_OWNER_MAX - 1, "\"}");
	CHECK(parse(big, &li) == -EINVAL);

	CHECK(sys_owner_valid("host-a:run 3"));
	CHECK(sys_owner_valid("\xc3\xa9t\xc3\xa9"));
	CHECK(!sys_owner_valid(""));
	CHECK(!sys_owner_valid("a\tb"));
	CHECK(!sys_owner_valid("a\x1b[31m"));

	char buf[256];
	CHECK(parse("{\"pid\":42,\"owner\":\"lab-pc\",\"since_ns\":1700000000123456789}", &li) == 0);
	sys_lock_describe(&li, buf, sizeof(buf));
	CHECK(strcmp(buf, "lab-pc (pid 42) since 2023-11-14T22:13:20Z") == 0);
	memset(&li, 0, sizeof(li));
	sys_lock_describe(&li, buf, sizeof(buf));
	CHECK(strstr(buf, "unknown holder") != NULL);

	/* take, query from another open file, refuse a second taker, release */
	char dir[] = "/tmp/rtlab-lock-XXXXXX";
	CHECK(mkdtemp(dir) != NULL);
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/target.lock", dir);
	bool held = true;
	CHECK(sys_lock_query(path, &held, &li) == 0 && !held && !li.valid);	/* no file */
	int fd = -1;
	struct sys_lock_info holder;
	CHECK(sys_lock_take(path, "first owner", &fd, &holder) == 0 && fd >= 0);
	struct stat st;
	CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0644);
	CHECK(sys_lock_query(path, &held, &li) == 0 && held && li.valid);
	CHECK(li.pid == getpid() && strcmp(li.owner, "first owner") == 0 && li.since_ns > 0);
	int fd2 = -1;
	CHECK(sys_lock_take(path, "second", &fd2, &holder) == -EBUSY && fd2 == -1);
	CHECK(holder.valid && strcmp(holder.owner, "first owner") == 0);
	sys_lock_release(fd);
	CHECK(sys_lock_query(path, &held, &li) == 0 && !held && !li.valid);	/* emptied */
	CHECK(sys_lock_take(path, "second", &fd2, &holder) == 0 && fd2 >= 0);
	CHECK(sys_lock_query(path, &held, &li) == 0 && held && strcmp(li.owner, "second") == 0);
	sys_lock_release(fd2);
	unlink(path);
	rmdir(dir);
	return tap_done("sys_lock");
}
