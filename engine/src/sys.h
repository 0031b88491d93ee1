/* SPDX-License-Identifier: MIT */
/*
 * `rtlab-probe sys`: journaled system changes (docs/sys-protocol.md).
 * facts | apply --journal FILE [--detach] | restore --journal FILE |
 * status --journal FILE. The host decides what to change; this applies,
 * journals (fsync before every change) and restores.
 */
#ifndef RTLAB_SYS_H
#define RTLAB_SYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "jsonw.h"

#define SYS_SCHEMA 1

/* Entry point from main(): argv[0] is the sub-command. Returns an exit code. */
int sys_main(int argc, char **argv);

/* ---- sys_json.c: parser for flat JSON objects (op and journal lines) ---- */

enum sj_type { SJ_NULL, SJ_BOOL, SJ_INT, SJ_STR, SJ_INTARR };

struct sj_val {
	char key[32];
	enum sj_type type;
	int64_t i;		/* BOOL (0/1), INT */
	char *s;		/* STR: unescaped, NUL-terminated (no NUL inside) */
	int64_t *arr;		/* INTARR */
	size_t n;		/* INTARR length */
};

#define SJ_MAX_FIELDS 24

struct sj_obj {
	struct sj_val v[SJ_MAX_FIELDS];
	size_t n;
};

/*
 * Parse one flat object: values are strings, integers, booleans, null or
 * arrays of integers. Returns 0 or -EINVAL (syntax, nesting, duplicate or
 * too long key, too many fields) or -ENOMEM. On error o is left empty.
 */
int sj_parse(const char *text, size_t len, struct sj_obj *o) RL_WUR;
void sj_free(struct sj_obj *o);
const struct sj_val *sj_get(const struct sj_obj *o, const char *key);
/* 0, -ENOENT when absent, -EINVAL when of another type. */
int sj_str(const struct sj_obj *o, const char *key, const char **out) RL_WUR;
int sj_int(const struct sj_obj *o, const char *key, int64_t *out) RL_WUR;
int sj_bool(const struct sj_obj *o, const char *key, bool *out) RL_WUR;
int sj_intarr(const struct sj_obj *o, const char *key, const int64_t **arr,
	      size_t *n) RL_WUR;

/* ---- sys_facts.c ---- */
int sys_facts(int fd) RL_WUR;

/* ---- sys_ops.c: applying and restoring single operations ---- */

struct sys_ctx {
	int journal_fd;		/* -1: not journaling */
	bool detached;
	uint64_t seq;
	int hold_fd[16];
	size_t n_hold;
	struct jsonw jw;	/* journal line */
};

/* Result of sys_apply_op(). */
#define SYS_OP_RELEASE 1

/*
 * Validate and apply one operation, journaling the old value first, and
 * write the answer object into ans (not emitted). Returns 0 (answer written,
 * ok or not), SYS_OP_RELEASE, or -errno when the journal cannot be written
 * (fatal: the caller must restore and stop).
 */
int sys_apply_op(struct sys_ctx *c, const struct sj_obj *op, struct jsonw *ans) RL_WUR;

struct sys_restore_stats {
	unsigned restored, gone, skipped, failed;
};

/*
 * Restore the journal text (all lines) in reverse order, one JSON line per
 * entry on out_fd (-1: silent). Returns 0 or -EINVAL for a bad journal.
 */
int sys_restore_text(const char *text, size_t len, int out_fd,
		     struct sys_restore_stats *st) RL_WUR;

/* Read a whole file into a malloc'ed NUL-terminated buffer. */
int sys_slurp(int fd, char **buf, size_t *len) RL_WUR;

/* Field 22 of /proc/TID/stat; 0 when the task does not exist. */
uint64_t sys_starttime(int tid);

#endif
