/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of pathmatch.c, the glob(3)/fnmatch(3) stand-ins of `sys
 * snapshot`: known cases, then the same answers as this glibc's fnmatch() on
 * generated patterns (fixed seed) and as its glob() on a tree built here.
 */
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <glob.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pathmatch.h"
#include "tap.h"

static void test_known(void)
{
	CHECK(pm_match("cpu[0-9]*", "cpu12"));
	CHECK(!pm_match("cpu[0-9]*", "cpufreq"));
	CHECK(pm_match("[0-9]*", "4711"));
	CHECK(!pm_match("[0-9]*", "self"));
	CHECK(pm_match("index*", "index3"));
	CHECK(pm_match("*", "x"));
	CHECK(pm_match("*", ""));
	CHECK(!pm_match("?", ""));
	/* a leading '.' only by a literal '.' */
	CHECK(!pm_match("*", ".hidden"));
	CHECK(!pm_match("?hidden", ".hidden"));
	CHECK(!pm_match("[.]hidden", ".hidden"));
	CHECK(pm_match(".*", ".hidden"));
	CHECK(pm_match("x*", "x.y"));
	CHECK(pm_match("x[.]y", "x.y"));
	/* brackets */
	CHECK(pm_match("[!a]", "b"));
	CHECK(!pm_match("[!a]", "a"));
	CHECK(pm_match("[^a]", "b"));
	CHECK(pm_match("[]]", "]"));
	CHECK(pm_match("[!]]", "a"));
	CHECK(pm_match("[a-]", "-"));
	CHECK(!pm_match("[z-a]", "m"));
	CHECK(pm_match("[[:upper:][:digit:]]", "7"));
	CHECK(!pm_match("[[:foo:]]", "a"));	/* unknown class: no match */
	CHECK(pm_match("[[=a=]]", "a"));
	CHECK(pm_match("[[.-.]]", "-"));
	CHECK(!pm_match("[[.ab.]]", "a"));
	CHECK(pm_match("[ab", "[ab"));	/* unterminated: a literal '[' */
	CHECK(pm_match("[*[", "[x["));
	/* quoting */
	CHECK(pm_match("a\\*", "a*"));
	CHECK(!pm_match("a\\*", "ab"));
	CHECK(!pm_match("a\\", "a\\"));	/* a trailing backslash never matches */
	CHECK(pm_match("[\\]]", "]"));
	/* magic */
	CHECK(pm_has_magic("/proc/[0-9]*/stat"));
	CHECK(pm_has_magic("/a/b["));
	CHECK(!pm_has_magic("/proc/cmdline"));
	CHECK(!pm_has_magic("/a/\\*"));
}

/* ---- the same answers as glibc's fnmatch(FNM_PERIOD) ---- */

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static unsigned next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (unsigned)(rng >> 16);
}

static void test_like_fnmatch(void)
{
	static const char *const tokens[] = {
		"[:alpha:]", "[:digit:]", "[:upper:]", "[:punct:]", "[:foo:]", "[=a=]", "[.a.]",
		"[.ab.]", "[:", "[=", "[.", ":]", "=]", ".]", "a-c", "\\", "[", "]", "*", "?", "!",
		"^", "-", ".", "a", "b", "z",
	};
	static const char pchars[] = "ab.*?[]!^-\\:=z";
	static const char nchars[] = "ab.[]!-\\:=zA1 \t\x80\xff^*?";
	unsigned diffs = 0;
	for (int i = 0; i < 200000; i++) {
		char pat[96] = "", name[12];
		int np = (int)(next_rand() % 8);
		for (int k = 0; k < np; k++) {
			size_t l = strlen(pat);
			if (next_rand() % 3 == 0)
				snprintf(pat + l, sizeof(pat) - l, "%s",
					 tokens[next_rand() % (sizeof(tokens) / sizeof(*tokens))]);
			else if (l + 1 < sizeof(pat))
				pat[l] = pchars[next_rand() % (sizeof(pchars) - 1)], pat[l + 1] = '\0';
		}
		int nn = (int)(next_rand() % 6);
		for (int k = 0; k < nn; k++)
			name[k] = nchars[next_rand() % (sizeof(nchars) - 1)];
		name[nn] = '\0';
		bool want = fnmatch(pat, name, FNM_PERIOD) == 0;
		if (pm_match(pat, name) != want && diffs++ < 10)
			fprintf(stderr, "pm_match(\"%s\", \"%s\") != %d (fnmatch)\n", pat, name, want);
	}
	CHECK_EQ_U(diffs, 0);
}

/* ---- the same answers as glibc's glob(flags 0) ---- */

static char root[] = "/tmp/rtlab-pathmatch-XXXXXX";

static void mk(const char *rel, int kind, const char *target)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", root, rel);
	int r = 0;
	if (kind == 'd') {
		r = mkdir(p, 0755);
	} else if (kind == 'l') {
		r = symlink(target, p);
	} else {
		int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		r = fd < 0 ? -1 : close(fd);
	}
	CHECK(r == 0);
}

static void collect(void *ctx, const char *dir, int err)
{
	(void)ctx;
	(void)dir;
	(void)err;
}

static void same_as_glob(const char *rel)
{
	char pat[512];
	snprintf(pat, sizeof(pat), "%s/%s", root, rel);
	glob_t g;
	memset(&g, 0, sizeof(g));
	int gr = glob(pat, 0, NULL, &g);
	struct pm_list l = { 0 };
	int r = pm_glob(pat, collect, NULL, &l);
	CHECK_EQ_U(r, 0);
	size_t gn = gr == 0 ? g.gl_pathc : 0;
	bool same = gn == l.n;
	for (size_t k = 0; same && k < gn; k++)
		same = strcmp(g.gl_pathv[k], l.v[k]) == 0;
	CHECK(same);
	if (!same) {
		fprintf(stderr, "pattern %s: glob %zu matches, pm_glob %zu:\n", rel, gn, l.n);
		for (size_t k = 0; k < gn || k < l.n; k++)
			fprintf(stderr, "  %-40s %s\n", k < gn ? g.gl_pathv[k] : "",
				k < l.n ? l.v[k] : "");
	}
	globfree(&g);
	pm_list_free(&l);
}

static void test_like_glob(void)
{
	if (!mkdtemp(root)) {
		CHECK(0);
		return;
	}
	mk("a", 'd', NULL);
	mk("a/x", 'f', NULL);
	mk("a/.hid", 'f', NULL);
	mk("a/y1", 'f', NULL);
	mk("a/y2", 'f', NULL);
	mk("a/sub", 'd', NULL);
	mk("a/sub/z", 'f', NULL);
	mk("b", 'd', NULL);
	mk("b/x", 'f', NULL);
	mk("b-c", 'd', NULL);
	mk("b-c/x", 'f', NULL);
	mk(".dot", 'd', NULL);
	mk(".dot/x", 'f', NULL);
	mk("f", 'f', NULL);
	mk("lnkdir", 'l', "a");
	mk("lnkfile", 'l', "f");
	mk("dangling", 'l', "nowhere");
	mk("br[ack", 'f', NULL);
	mk("q?x", 'f', NULL);
	mk("st*r", 'f', NULL);
	mk("back\\slash", 'f', NULL);
	mk("sp ace", 'f', NULL);

	static const char *const pats[] = {
		"*", "*/", "*//", "*/x", "*//x", "*/*", "*/*/", "?", "[ab]*", "[!a]*", "[^a]*",
		".*", ".*/x", "*/.*", "a/y[0-9]", "a/y[[:digit:]]", "a/*/", "a/sub/*", "*/sub/z",
		"*/sub/", "br[ack", "br\\[ack", "b[r]\\[ack", "q\\?x", "q?x", "st\\*r",
		"back\\\\slash", "*\\", "a\\/x*", "a\\//x*", "l*/x", "l*/", "dang*", "dangling*",
		"nonexist/*", "*/nonexist", "f/*", "f*/x", "a/x*/", "a//x*", "[a]//x",
		"*/y?", "a/[xy]*", "b*/x", "[[:alpha:]]*", "a/\\x*", "\\a/x*", "b[-]c/*",
		"[b]-c/*", "*/[!x]*", "[a-b]/*", "*[", "a[/*", "*/sub//*", "l*//*", "[.]*",
		"*[.]*", "s?\\ ace", "sp[ ]ace", "*/s*/z", "*/*/z", "?/*", "??????*/*",
	};
	for (size_t k = 0; k < sizeof(pats) / sizeof(*pats); k++)
		same_as_glob(pats[k]);
	/* generated ones from the tree's names and wildcards */
	static const char *const parts[] = {
		"a", "b", "b-c", ".dot", "f", "x", "sub", "z", "lnkdir", "*", "?", "[ab]",
		"[!a]*", ".*", "*/", "y?", "l*", "", "[", "\\x", "*x",
	};
	for (int i = 0; i < 3000; i++) {
		char rel[256] = "";
		int depth = 1 + (int)(next_rand() % 3);
		for (int d = 0; d < depth; d++) {
			size_t l = strlen(rel);
			snprintf(rel + l, sizeof(rel) - l, "%s%s", d ? "/" : "",
				 parts[next_rand() % (sizeof(parts) / sizeof(*parts))]);
		}
		if (pm_has_magic(rel) || strchr(rel, '\\'))
			same_as_glob(rel);
	}
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	CHECK(system(cmd) == 0);
}

/* A directory that cannot be read is reported (not as root: root reads all). */
struct seen {
	int calls, err;
	char dir[512];
};

static void note(void *ctx, const char *dir, int err)
{
	struct seen *s = ctx;
	s->calls++;
	s->err = err;
	snprintf(s->dir, sizeof(s->dir), "%s", dir);
}

static void test_errors(void)
{
	struct pm_list l = { 0 };
	struct seen s = { 0 };
	/* a directory that is not there: ENOENT (the snapshot ignores it) */
	CHECK_EQ_U(pm_glob("/nonexistent-rtlab/*", note, &s, &l), 0);
	CHECK_EQ_U(l.n, 0);
	CHECK_EQ_U(s.calls, 1);
	CHECK_EQ_U(s.err, ENOENT);
	CHECK(strcmp(s.dir, "/nonexistent-rtlab") == 0);
	/* a file as directory: ENOTDIR is not reported, as with glob */
	memset(&s, 0, sizeof(s));
	CHECK_EQ_U(pm_glob("/proc/self/stat/*", note, &s, &l), 0);
	CHECK_EQ_U(s.calls, 0);
	/* a literal last component is looked up, not listed */
	CHECK_EQ_U(pm_glob("/proc/sel[f]/stat", note, &s, &l), 0);
	CHECK_EQ_U(l.n, 1);
	CHECK(l.n == 1 && strcmp(l.v[0], "/proc/self/stat") == 0);
	pm_list_free(&l);
	if (geteuid() != 0) {
		char dir[] = "/tmp/rtlab-pathmatch-noread-XXXXXX";
		if (mkdtemp(dir) && chmod(dir, 0) == 0) {
			char pat[64];
			snprintf(pat, sizeof(pat), "%s/*", dir);
			memset(&s, 0, sizeof(s));
			CHECK_EQ_U(pm_glob(pat, note, &s, &l), 0);
			CHECK_EQ_U(s.calls, 1);
			CHECK_EQ_U(s.err, EACCES);
			CHECK(strcmp(s.dir, dir) == 0);
			CHECK(rmdir(dir) == 0);
		}
	}
}

int main(void)
{
	test_known();
	test_like_fnmatch();
	test_like_glob();
	test_errors();
	return tap_done("pathmatch");
}
