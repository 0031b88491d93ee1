/* SPDX-License-Identifier: MIT */
/*
 * Path patterns of `sys snapshot` without glob(3) and fnmatch(3): a static
 * glibc's glob() brings its NSS (for `~user`), the DNS resolver, utmp and
 * strcoll, and fnmatch() its wide-character and collation code, 80-190 KB of
 * a board engine. These do what glob(pattern, 0, errfunc, ...) and
 * fnmatch(pattern, name, FNM_PERIOD) do in the C locale (the engine never
 * calls setlocale), down to the odd corners of malformed patterns; the unit
 * test compares them with glibc's on a tree and on generated patterns.
 */
#ifndef RTLAB_PATHMATCH_H
#define RTLAB_PATHMATCH_H

#include <stdbool.h>
#include <stddef.h>

#include "common.h"

/*
 * Does name (one path component) match pat? `*`, `?`, `[...]` (`!` or `^`
 * negates, ranges, `[:class:]`, `[=c=]`, `[.c.]`), a backslash quotes; a
 * leading '.' of name is matched only by a literal '.'.
 */
bool pm_match(const char *pat, const char *name);

/* Does the pattern contain `*`, `?` or `[` (unquoted), i.e. needs a directory read? */
bool pm_has_magic(const char *pat);

/* The matches of a pattern: malloc'ed strings, sorted (strcmp: the C locale). */
struct pm_list {
	char **v;
	size_t n, cap;
};

/* A directory the expansion could not read (not called for ENOTDIR). */
typedef void (*pm_error_fn)(void *ctx, const char *dir, int err);

/*
 * Expand an absolute pattern as glob(3) with flags 0: appends the matches to
 * out (a pattern ending in '/' matches as without it, directories then with a
 * trailing '/'). 0 (also when nothing matched) or -ENOMEM.
 */
int pm_glob(const char *pattern, pm_error_fn on_error, void *ctx, struct pm_list *out) RL_WUR;
void pm_list_free(struct pm_list *l);
/* Append s, a malloc'ed string the list then owns (freed here when it cannot be added).
 * 0, or -ENOMEM (also for s NULL: a failed strdup). */
int pm_list_add(struct pm_list *l, char *s) RL_WUR;

#endif
