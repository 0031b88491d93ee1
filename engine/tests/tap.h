/* SPDX-License-Identifier: MIT */
/* A tiny TAP-ish test helper for the engine's unit tests. */
#ifndef RTLAB_TAP_H
#define RTLAB_TAP_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tap_failed;
static int tap_count;

#define CHECK(cond)                                                                  \
	do {                                                                         \
		tap_count++;                                                         \
		if (!(cond)) {                                                       \
			tap_failed++;                                                \
			fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); \
		}                                                                    \
	} while (0)

#define CHECK_EQ_U(a, b)                                                             \
	do {                                                                         \
		unsigned long long va_ = (unsigned long long)(a);                    \
		unsigned long long vb_ = (unsigned long long)(b);                    \
		tap_count++;                                                         \
		if (va_ != vb_) {                                                    \
			tap_failed++;                                                \
			fprintf(stderr, "FAIL %s:%d: %s == %s (%llu != %llu)\n", __FILE__, \
				__LINE__, #a, #b, va_, vb_);                          \
		}                                                                    \
	} while (0)

/* A parser's answer r with its message err is a refusal: -EINVAL and one line that
 * contains needle (else says what it got on stderr and returns 0). */
static inline int tap_refused(int r, const char *err, const char *needle)
{
	if (r != -EINVAL || !strstr(err, needle) || strchr(err, '\n')) {
		fprintf(stderr, "r=%d err='%s' (want '%s')\n", r, err, needle);
		return 0;
	}
	return 1;
}

/* A new temporary file named from the mkstemp template path, open for writing (a failed
 * CHECK and NULL if it cannot be made). */
static inline FILE *tap_tmpfile(char *path)
{
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	return fd < 0 ? NULL : fdopen(fd, "w");
}

static inline int tap_done(const char *name)
{
	printf("%s: %d checks, %d failed\n", name, tap_count, tap_failed);
	return tap_failed ? 1 : 0;
}

#endif
