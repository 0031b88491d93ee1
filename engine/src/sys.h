/* SPDX-License-Identifier: MIT */
/*
 * `rtlab-probe sys`: journaled system changes (docs/sys-protocol.md).
 * facts | preempt | cpumodel | apply --journal FILE [--detach] [--lock FILE --owner LABEL] |
 * restore --journal FILE | status --journal FILE | journals [--dir DIR] |
 * lockinfo --lock FILE | snapshot. The host decides what to change; this
 * applies, journals (fsync before every change) and restores, and reads a
 * board's facts for a host that has no other way in.
 */
#ifndef RTLAB_SYS_H
#define RTLAB_SYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "jsonw.h"

#define SYS_SCHEMA 1

/* Exit code of `sys apply --lock` when another owner holds the target ("target busy"). */
#define SYS_EXIT_BUSY 5

/* Entry point from main(): argv[0] is the sub-command. Returns an exit code. */
int sys_main(int argc, char **argv);

/* ---- sys_json.c: the records of the protocol, and a parser for flat JSON objects
 * (op and journal lines) ---- */

/* Open an answer record, {"type":TYPE,"schema":SYS_SCHEMA, ...: the one place that
 * writes the schema number of an answer. */
void sys_record_begin(struct jsonw *w, const char *type);

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

/* ---- sys_apply.c: `sys apply` and `sys restore` ---- */
int sys_cmd_apply(const char *journal, bool detach, const char *lock, const char *owner);
int sys_cmd_restore(const char *journal);
/* Open a journal and try its lock: *held when its applier still holds it. 0 or -errno
 * (-ENOENT also when it was restored and removed meanwhile). */
int sys_open_journal(const char *journal, int *fdp, bool *held) RL_WUR;

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

/* ---- sys_snapshot.c: `sys snapshot` (copy /proc, /sys, /boot files to the host) ---- */

#define SYS_SNAP_MAX_FILE_DEFAULT (4LL << 20)
#define SYS_SNAP_MAX_TOTAL_DEFAULT (64LL << 20)

struct snap_limits {
	size_t max_file;	/* bytes of one file, then "truncated" */
	uint64_t max_total;	/* bytes of all files, then stop */
};

/*
 * Check one pattern: absolute, no ".." component, shorter than PATH_MAX, no
 * control characters. Returns 0 or -EINVAL with a reason in err.
 */
int snap_check_pattern(const char *pat, char *err, size_t errlen) RL_WUR;
/* True when the pattern has a glob(3) metacharacter: * ? [ or a backslash. */
bool snap_is_glob(const char *pat);
/* True when buf is valid UTF-8 (no overlong forms, surrogates) without NUL bytes. */
bool snap_is_text(const char *buf, size_t len);
/* Standard base64 with padding into out (4 * ((len + 2) / 3) + 1 bytes); returns its length. */
size_t snap_base64(const void *in, size_t len, char *out);
/* "EACCES" for EACCES; NULL when not in the table. */
const char *sys_errno_name(int err);
/* {"type":"error","path":…,"errno":N,"error":"EACCES"} on fd. */
int sys_emit_error(int fd, const char *path, int err) RL_WUR;

/*
 * Read patterns (one per line) from in_fd and write the snapshot as JSON Lines
 * on out_fd. Returns 0 (done, errors are lines), -EINVAL (a bad pattern: message
 * in err, nothing written), -EFBIG (stopped at max_total) or another -errno.
 */
int sys_snapshot(int in_fd, int out_fd, const struct snap_limits *lim, char *err,
		 size_t errlen) RL_WUR;

/* ---- sys_lock.c: one owner of a target at a time (`apply --lock`, `lockinfo`) ---- */

#define SYS_OWNER_MAX 128

struct sys_lock_info {
	bool valid;		/* the file held a parsable line */
	int64_t pid;
	char owner[SYS_OWNER_MAX + 1];
	int64_t since_ns;	/* CLOCK_REALTIME */
};

/* A label: 1..SYS_OWNER_MAX bytes, no control characters. */
bool sys_owner_valid(const char *owner);
/* Parse the lock file's line {"pid":N,"owner":"…","since_ns":N}. 0 or -EINVAL. */
int sys_lock_parse(const char *text, size_t len, struct sys_lock_info *li) RL_WUR;
/* "LABEL (pid N) since 2025-01-02T03:04:05Z", or "an unknown holder". */
void sys_lock_describe(const struct sys_lock_info *li, char *buf, size_t len);
/*
 * Take the lock: create path (0644), flock it exclusively without blocking
 * (retrying for about half a second, so a reader testing it does not make us
 * fail), then write our line. Returns 0 with *fdp held, -EBUSY with the
 * holder's line in *holder, or another -errno.
 */
int sys_lock_take(const char *path, const char *owner, int *fdp,
		  struct sys_lock_info *holder) RL_WUR;
/* Empty the file and close (unlock). */
void sys_lock_release(int fd);
/* Whether the lock is held, and its line. A missing file is not held. */
int sys_lock_query(const char *path, bool *held, struct sys_lock_info *li) RL_WUR;

#endif
