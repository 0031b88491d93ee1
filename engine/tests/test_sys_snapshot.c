/* SPDX-License-Identifier: MIT */
/* Unit tests of `sys snapshot`: pattern checks, text detection, base64, and a run. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sys.h"
#include "sysfile.h"
#include "tap.h"

static int check(const char *pat)
{
	char why[64] = "";
	return snap_check_pattern(pat, why, sizeof(why));
}

static int b64_is(const char *in, size_t len, const char *want)
{
	char out[64];
	size_t n = snap_base64(in, len, out);
	return n == strlen(want) && strcmp(out, want) == 0;
}

static void write_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	if (fd < 0)
		return;
	CHECK(write(fd, data, len) == (ssize_t)len);
	close(fd);
}

static char *read_all(int fd)
{
	char *text = NULL;
	size_t len = 0;
	if (lseek(fd, 0, SEEK_SET) < 0 || sf_slurp(fd, &text, &len) != 0)
		return NULL;
	return text;
}

/* Whether out contains the text that fmt makes (a record of the run). */
static int has(const char *out, const char *fmt, ...) RL_PRINTF(2, 3);
static int has(const char *out, const char *fmt, ...)
{
	char want[PATH_MAX + 128];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(want, sizeof(want), fmt, ap);
	va_end(ap);
	return strstr(out, want) != NULL;
}

/* Run a snapshot of the patterns text; the output (malloc'ed) or NULL. */
static char *run(const char *patterns, size_t max_file, uint64_t max_total, int *ret)
{
	char in_path[] = "/tmp/rtlab-snap-in-XXXXXX", out_path[] = "/tmp/rtlab-snap-out-XXXXXX";
	int in = mkstemp(in_path), out = mkstemp(out_path);
	CHECK(in >= 0 && out >= 0);
	if (in < 0 || out < 0)
		return NULL;
	unlink(in_path);
	unlink(out_path);
	CHECK(write(in, patterns, strlen(patterns)) == (ssize_t)strlen(patterns));
	CHECK(lseek(in, 0, SEEK_SET) == 0);
	struct snap_limits lim = { .max_file = max_file, .max_total = max_total };
	char err[256] = "";
	*ret = sys_snapshot(in, out, &lim, err, sizeof(err));
	char *text = read_all(out);
	close(in);
	close(out);
	return text;
}

int main(void)
{
	/* patterns */
	CHECK(check("/proc/cmdline") == 0);
	CHECK(check("/proc/[0-9]*/comm") == 0);
	CHECK(check("/sys/class/net/") == 0);
	CHECK(check("/") == 0);
	CHECK(check("/a/..b/c..") == 0);
	CHECK(check("/a/./b") == 0);
	CHECK(check("") == -EINVAL);
	CHECK(check("proc/cmdline") == -EINVAL);
	CHECK(check("./x") == -EINVAL);
	CHECK(check("/proc/../etc/shadow") == -EINVAL);
	CHECK(check("/proc/..") == -EINVAL);
	CHECK(check("/proc/../") == -EINVAL);
	CHECK(check("/..") == -EINVAL);
	CHECK(check("//..//x") == -EINVAL);
	CHECK(check("/proc/x\ty") == -EINVAL);
	char why[64];
	CHECK(snap_check_pattern("/a/../b", why, sizeof(why)) == -EINVAL &&
	      strstr(why, "..") != NULL);
	CHECK(snap_check_pattern("x", why, sizeof(why)) == -EINVAL && strstr(why, "absolute"));
	char *longp = malloc(PATH_MAX + 2);
	CHECK(longp != NULL);
	if (longp) {
		longp[0] = '/';
		memset(longp + 1, 'a', PATH_MAX);
		longp[PATH_MAX + 1] = '\0';
		CHECK(check(longp) == -EINVAL);
		free(longp);
	}
	CHECK(snap_is_glob("/proc/[0-9]*/comm"));
	CHECK(snap_is_glob("/a/b?"));
	CHECK(snap_is_glob("/a/b\\*"));
	CHECK(!snap_is_glob("/proc/cmdline"));

	/* text or binary */
	CHECK(snap_is_text("", 0));
	CHECK(snap_is_text("quiet splash\n", 13));
	CHECK(snap_is_text("tab\there\x01\x7f", 10));
	CHECK(snap_is_text("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9));
	CHECK(!snap_is_text("a\0b", 3));
	CHECK(!snap_is_text("\xff", 1));
	CHECK(!snap_is_text("\xc3", 1));		/* cut sequence */
	CHECK(!snap_is_text("\xc0\xaf", 2));		/* overlong '/' */
	CHECK(!snap_is_text("\xe0\x80\xaf", 3));	/* overlong */
	CHECK(!snap_is_text("\xed\xa0\x80", 3));	/* surrogate */
	CHECK(!snap_is_text("\xf4\x90\x80\x80", 4));	/* beyond U+10FFFF */
	CHECK(!snap_is_text("\x80", 1));
	CHECK(!snap_is_text("\x1f\x8b\x08\x00", 4));	/* gzip magic */

	/* base64 (RFC 4648 test vectors) */
	CHECK(b64_is("", 0, ""));
	CHECK(b64_is("f", 1, "Zg=="));
	CHECK(b64_is("fo", 2, "Zm8="));
	CHECK(b64_is("foo", 3, "Zm9v"));
	CHECK(b64_is("foob", 4, "Zm9vYg=="));
	CHECK(b64_is("fooba", 5, "Zm9vYmE="));
	CHECK(b64_is("foobar", 6, "Zm9vYmFy"));
	CHECK(b64_is("\0\xff\xfe", 3, "AP/+"));

	/* errno names */
	CHECK(strcmp(sys_errno_name(EACCES), "EACCES") == 0);
	CHECK(strcmp(sys_errno_name(ENOENT), "ENOENT") == 0);
	CHECK(strcmp(sys_errno_name(EISDIR), "EISDIR") == 0);
	CHECK(sys_errno_name(0) == NULL);
	CHECK(sys_errno_name(100000) == NULL);

	/* a run over a private tree */
	char dir[] = "/tmp/rtlab-snap-XXXXXX";
	CHECK(mkdtemp(dir) != NULL);
	char p[PATH_MAX], pats[8192];
	snprintf(p, sizeof(p), "%s/a.txt", dir);
	write_file(p, "hello\n", 6);
	snprintf(p, sizeof(p), "%s/b.bin", dir);
	write_file(p, "\0\xff\xfe", 3);
	snprintf(p, sizeof(p), "%s/big", dir);
	write_file(p, "0123456789", 10);
	snprintf(p, sizeof(p), "%s/sub", dir);
	CHECK(mkdir(p, 0755) == 0);
	snprintf(p, sizeof(p), "%s/link", dir);
	CHECK(symlink("a.txt", p) == 0);
	snprintf(pats, sizeof(pats),
		 "%s/a.txt\n%s/b.bin\n\n%s/link\n%s/sub/\n%s/missing\n%s/nomatch*\n%s/sub\n%s/big\r\n",
		 dir, dir, dir, dir, dir, dir, dir, dir);
	int r = -1;
	char *out = run(pats, 4, 1 << 20, &r);
	CHECK(r == 0);
	CHECK(out != NULL);
	if (out) {
		CHECK(has(out, "{\"type\":\"file\",\"path\":\"%s/a.txt\",\"size\":4,\"text\":\"hell\","
			  "\"truncated\":true}\n", dir));
		CHECK(has(out, "{\"type\":\"file\",\"path\":\"%s/b.bin\",\"size\":3,"
			  "\"base64\":\"AP/+\"}\n", dir));
		CHECK(has(out, "{\"type\":\"link\",\"path\":\"%s/link\",\"target\":\"a.txt\"}\n",
			  dir));
		CHECK(has(out, "{\"type\":\"dir\",\"path\":\"%s/sub\",\"entries\":[]}\n", dir));
		CHECK(has(out, "{\"type\":\"error\",\"path\":\"%s/missing\",\"errno\":%d,"
			  "\"error\":\"ENOENT\"}\n", dir, ENOENT));
		CHECK(has(out, "{\"type\":\"error\",\"path\":\"%s/sub\",\"errno\":%d,"
			  "\"error\":\"EISDIR\"}\n", dir, EISDIR));
		CHECK(has(out, "\"path\":\"%s/big\",\"size\":4,\"text\":\"0123\"", dir));
		CHECK(strstr(out, "nomatch") == NULL);
		CHECK(strstr(out, "{\"type\":\"snapshot_done\",\"schema\":1,\"files\":5,\"errors\":2,"
				  "\"bytes\":11,\"complete\":true}\n") != NULL);
		free(out);
	}

	/* the total cap stops with an error line */
	snprintf(pats, sizeof(pats), "%s/a.txt\n%s/big\n%s/b.bin\n", dir, dir, dir);
	out = run(pats, 1 << 20, 10, &r);
	CHECK(r == -EFBIG);
	CHECK(out != NULL);
	if (out) {
		CHECK(has(out, "{\"type\":\"error\",\"path\":\"%s/big\",\"errno\":%d,"
			  "\"error\":\"EFBIG\"}\n", dir, EFBIG));
		CHECK(strstr(out, "b.bin") == NULL);
		CHECK(strstr(out, "\"files\":1,\"errors\":1,\"bytes\":6,\"complete\":false}\n") != NULL);
		free(out);
	}

	/* bad patterns: refused before anything is written */
	out = run("/proc/cmdline\nrelative\n", 1 << 20, 1 << 20, &r);
	CHECK(r == -EINVAL);
	CHECK(out != NULL && out[0] == '\0');
	free(out);
	out = run("/proc/cmdline\n/proc/../etc/shadow\n", 1 << 20, 1 << 20, &r);
	CHECK(r == -EINVAL);
	CHECK(out != NULL && out[0] == '\0');
	free(out);
	/* an empty request is a complete, empty snapshot */
	out = run("", 1 << 20, 1 << 20, &r);
	CHECK(r == 0);
	CHECK(out && strstr(out, "\"files\":0,\"errors\":0,\"bytes\":0,\"complete\":true"));
	free(out);

	snprintf(p, sizeof(p), "%s/link", dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/a.txt", dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/b.bin", dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/big", dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/sub", dir);
	rmdir(p);
	rmdir(dir);
	return tap_done("sys_snapshot");
}
