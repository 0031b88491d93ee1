/* SPDX-License-Identifier: MIT */
/*
 * The operations of `sys` (docs/sys-protocol.md), one entry each in the table of
 * sys_ops.c: how one is applied (validate, journal the old state and fsync, change,
 * read back, answer) and how its journal entry is restored. Internal to the sys_op*.c
 * files.
 */
#ifndef RTLAB_SYS_OP_H
#define RTLAB_SYS_OP_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "jsonw.h"
#include "sys.h"

/* What restoring one journal entry came to. */
enum rres { RS_OK, RS_GONE, RS_SKIPPED, RS_FAILED };

/* What restoring an entry may need to know about the rest of the journal. */
struct sys_restore_env {
	char **created;		/* directories the journal created (mkdir), removed with it */
	size_t n_created;
};

struct sys_op {
	const char *name;
	/* Apply o, answer in a; 0, SYS_OP_RELEASE, or -errno when the journal failed. */
	int (*apply)(struct sys_ctx *c, const struct sj_obj *o, struct jsonw *a);
	/* Undo journal entry e (err: the errno of RS_FAILED); NULL: never journaled. */
	enum rres (*restore)(const struct sj_obj *e, const struct sys_restore_env *env, int *err);
};

/* ---- sys_journal.c: the journal entry (written first) and the answer of an op ---- */

/* Start the entry of op in c->jw; the op adds its fields (the old state). */
void sys_journal_begin(struct sys_ctx *c, const char *op);
/* Close the entry, write it and fsync before the change. 0 or -errno. */
int sys_journal_commit(struct sys_ctx *c) RL_WUR;
/* The change failed after it was journaled: an entry that voids it. 0 or -errno. */
int sys_journal_cancel(struct sys_ctx *c) RL_WUR;

void sys_ans_begin(struct jsonw *a, uint64_t seq, const char *op);
/* Close the answer as failed (errno err, a message); returns 0. */
int sys_ans_fail(struct jsonw *a, int err, const char *fmt, ...) RL_PRINTF(3, 4);
/* Close the answer as done; returns 0. */
int sys_ans_ok(struct jsonw *a);

/* An absolute path without . or .. components below one of the prefixes. */
bool sys_path_ok(const char *p, const char *const *prefixes);
/* CPU numbers (0..CPU_SETSIZE-1) into a set; *bad when one is out of range. */
void sys_cpus_from_arr(const int64_t *a, size_t n, cpu_set_t *set, int *bad);

/* ---- sys_op_task.c: what a task runs on and how (affinity, sched, cgroups) ---- */

int sys_apply_affinity(struct sys_ctx *c, const struct sj_obj *o, struct jsonw *a);
int sys_apply_sched(struct sys_ctx *c, const struct sj_obj *o, struct jsonw *a);
int sys_apply_mkdir(struct sys_ctx *c, const struct sj_obj *o, struct jsonw *a);
int sys_apply_move(struct sys_ctx *c, const struct sj_obj *o, struct jsonw *a);
int sys_apply_spawned(struct sys_ctx *c, const struct sj_obj *o, struct jsonw *a);
enum rres sys_restore_affinity(const struct sj_obj *e, const struct sys_restore_env *env,
			       int *err);
enum rres sys_restore_sched(const struct sj_obj *e, const struct sys_restore_env *env, int *err);
enum rres sys_restore_mkdir(const struct sj_obj *e, const struct sys_restore_env *env, int *err);
enum rres sys_restore_move(const struct sj_obj *e, const struct sys_restore_env *env, int *err);
enum rres sys_restore_spawned(const struct sj_obj *e, const struct sys_restore_env *env,
			      int *err);

/* ---- sys_op_dev.c: kernel settings and devices (write, hold, netns, hwtstamp) ---- */

int sys_apply_write(struct sys_ctx *c, const struct sj_obj *o, struct jsonw *a);
int sys_apply_hold(struct sys_ctx *c, const struct sj_obj *o, struct jsonw *a);
int sys_apply_netns(struct sys_ctx *c, const struct sj_obj *o, struct jsonw *a);
int sys_apply_hwtstamp(struct sys_ctx *c, const struct sj_obj *o, struct jsonw *a);
enum rres sys_restore_write(const struct sj_obj *e, const struct sys_restore_env *env, int *err);
enum rres sys_restore_hold(const struct sj_obj *e, const struct sys_restore_env *env, int *err);
enum rres sys_restore_netns(const struct sj_obj *e, const struct sys_restore_env *env, int *err);
enum rres sys_restore_hwtstamp(const struct sj_obj *e, const struct sys_restore_env *env,
			       int *err);

#endif
