/* SPDX-License-Identifier: MIT */
/*
 * A small escaping JSON writer. A record is built in a growable buffer and
 * written with one write(2) by jw_emit(), so readers never see half a line
 * unless the process dies inside that call. Not for the hot loop.
 *
 * Every value function takes the key it is stored under inside an object, or
 * NULL inside an array. Commas are inserted automatically. Errors (ENOMEM,
 * nesting too deep) are sticky and returned by jw_emit()/jw_error().
 */
#ifndef RTLAB_JSONW_H
#define RTLAB_JSONW_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"

#define JW_MAX_DEPTH 32

struct jsonw {
	char *buf;
	size_t len;
	size_t cap;
	int err;		/* 0 or -errno, sticky */
	int depth;
	bool first[JW_MAX_DEPTH]; /* no element written yet at this depth */
};

void jw_init(struct jsonw *w);
void jw_free(struct jsonw *w);
/* Drop the content, keep the buffer. */
void jw_reset(struct jsonw *w);
int jw_error(const struct jsonw *w) RL_WUR;

void jw_obj_begin(struct jsonw *w, const char *key);
void jw_obj_end(struct jsonw *w);
void jw_arr_begin(struct jsonw *w, const char *key);
void jw_arr_end(struct jsonw *w);

void jw_str(struct jsonw *w, const char *key, const char *s);
/* A string of len bytes (may contain NUL bytes; escaped as \u0000). */
void jw_strn(struct jsonw *w, const char *key, const char *s, size_t len);
/* A string, or null when s is NULL. */
void jw_str_or_null(struct jsonw *w, const char *key, const char *s);
void jw_strf(struct jsonw *w, const char *key, const char *fmt, ...) RL_PRINTF(3, 4);
void jw_int(struct jsonw *w, const char *key, int64_t v);
/* An integer, or null when v is negative (the engine's "not set / not known"). */
void jw_int_or_null(struct jsonw *w, const char *key, int64_t v);
void jw_uint(struct jsonw *w, const char *key, uint64_t v);
/* An unsigned integer, or null when v is 0 (a count or duration that was not given). */
void jw_uint_or_null(struct jsonw *w, const char *key, uint64_t v);
void jw_bool(struct jsonw *w, const char *key, bool v);
void jw_null(struct jsonw *w, const char *key);
/* A value that is already JSON text (another writer's complete output), as it is. */
void jw_raw(struct jsonw *w, const char *key, const char *json);
/* A CPU set as an array of CPU numbers, ascending. */
void jw_cpuset(struct jsonw *w, const char *key, const cpu_set_t *set);

/*
 * Length of the valid UTF-8 sequence at buf (n >= 1 bytes left): 1 for ASCII, 2 to 4,
 * or 0 when invalid (a continuation or C0/C1 lead byte, truncated, overlong, a
 * surrogate, beyond U+10FFFF). What jw_str passes through unescaped.
 */
size_t jw_utf8_len(const void *buf, size_t n);

/* The current text (NUL-terminated), for tests. */
const char *jw_text(const struct jsonw *w);

/*
 * Append '\n', write the whole line to fd with one write(2) (looping only on
 * a short write), then reset. Returns 0 or -errno.
 */
int jw_emit(struct jsonw *w, int fd) RL_WUR;

/* Write the whole buffer to fd, retrying short writes and EINTR. 0 or -errno. */
int rl_write_raw(int fd, const void *buf, size_t len) RL_WUR;

/*
 * rl_write_raw, except that writes to STDOUT_FILENO go to the stdout writer when one
 * is set (output.c sets its --tee mirror, output.h: jsonw knows nothing of it).
 */
int rl_write_all(int fd, const void *buf, size_t len) RL_WUR;

typedef int (*rl_stdout_writer)(const void *buf, size_t len);
void rl_set_stdout_writer(rl_stdout_writer writer);

#endif
