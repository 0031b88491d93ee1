/* SPDX-License-Identifier: MIT */
/*
 * The `sys` operations, in one table (sys_op.h): apply one operation (journal first,
 * then change, then read back) and restore a journal's entries in reverse order.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sys_op.h"

static int apply_release(struct sys_ctx *c, const struct sj_obj *o, struct jsonw *a)
{
	(void)c;
	(void)o;
	sys_ans_ok(a);
	return SYS_OP_RELEASE;
}

static const struct sys_op ops[] = {
	{ "write", sys_apply_write, sys_restore_write },
	{ "affinity", sys_apply_affinity, sys_restore_affinity },
	{ "sched", sys_apply_sched, sys_restore_sched },
	{ "mkdir", sys_apply_mkdir, sys_restore_mkdir },
	{ "move", sys_apply_move, sys_restore_move },
	{ "hold", sys_apply_hold, sys_restore_hold },
	{ "spawned", sys_apply_spawned, sys_restore_spawned },
	{ "netns", sys_apply_netns, sys_restore_netns },
	{ "hwtstamp", sys_apply_hwtstamp, sys_restore_hwtstamp },
	{ "release", apply_release, NULL }, /* ends the applier; never journaled */
};

static const struct sys_op *find_op(const char *name)
{
	for (size_t k = 0; k < sizeof(ops) / sizeof(ops[0]); k++)
		if (strcmp(ops[k].name, name) == 0)
			return &ops[k];
	return NULL;
}

int sys_apply_op(struct sys_ctx *c, const struct sj_obj *o, struct jsonw *a)
{
	const char *op = NULL;
	int have = sj_str(o, "op", &op);
	c->seq++;
	sys_ans_begin(a, c->seq, have ? NULL : op);
	if (have)
		return sys_ans_fail(a, EINVAL, "missing string field op");
	const struct sys_op *so = find_op(op);
	if (!so)
		return sys_ans_fail(a, EINVAL, "unknown op '%s'", op);
	return so->apply(c, o, a);
}

static const char *const rres_name[] = { "ok", "gone", "skipped", "failed" };

struct jline {
	struct sj_obj o;
	bool ok;
};

int sys_restore_text(const char *text, size_t len, int out_fd, struct sys_restore_stats *st)
{
	memset(st, 0, sizeof(*st));
	size_t nl = 0;
	for (size_t k = 0; k < len; k++)
		nl += text[k] == '\n';
	struct jline *lines = calloc(nl + 1, sizeof(*lines));
	if (!lines)
		return -ENOMEM;
	size_t n = 0;
	const char *p = text, *end = text + len;
	while (p < end) {
		const char *q = memchr(p, '\n', (size_t)(end - p));
		if (!q)
			break; /* a torn last line: its change was never applied */
		if (q > p) {
			lines[n].ok = sj_parse(p, (size_t)(q - p), &lines[n].o) == 0;
			n++;
		}
		p = q + 1;
	}
	/* Header check. */
	int64_t schema;
	if (n == 0 || !lines[0].ok || sj_int(&lines[0].o, "schema", &schema) || schema != SYS_SCHEMA) {
		for (size_t k = 0; k < n; k++)
			sj_free(&lines[k].o);
		free(lines);
		return n == 0 ? 0 : -EINVAL;
	}
	/* Cancelled sequence numbers and created directories. */
	char **created = calloc(n, sizeof(*created));
	size_t ncreated = 0;
	if (!created) {
		for (size_t k = 0; k < n; k++)
			sj_free(&lines[k].o);
		free(lines);
		return -ENOMEM;
	}
	for (size_t k = 1; k < n; k++) {
		const char *op, *path;
		if (lines[k].ok && sj_str(&lines[k].o, "op", &op) == 0 && strcmp(op, "mkdir") == 0 &&
		    sj_str(&lines[k].o, "path", &path) == 0)
			created[ncreated++] = (char *)path;
	}
	const struct sys_restore_env env = { .created = created, .n_created = ncreated };
	struct jsonw w;
	jw_init(&w);
	for (size_t k = n; k-- > 1;) {
		const struct sj_obj *e = &lines[k].o;
		const char *op = "?";
		int64_t seq = -1;
		enum rres res = RS_FAILED;
		int err = 0;
		if (!lines[k].ok || sj_str(e, "op", &op) || sj_int(e, "seq", &seq)) {
			err = EINVAL;
		} else if (strcmp(op, "cancel") == 0) {
			continue;
		} else {
			/* Skip an entry whose seq was cancelled by a later line. */
			bool cancelled = false;
			for (size_t j = k + 1; j < n; j++) {
				const char *op2;
				int64_t s2;
				if (lines[j].ok && sj_str(&lines[j].o, "op", &op2) == 0 &&
				    strcmp(op2, "cancel") == 0 && sj_int(&lines[j].o, "seq", &s2) == 0 &&
				    s2 == seq)
					cancelled = true;
			}
			if (cancelled)
				continue;
			const struct sys_op *so = find_op(op);
			if (so && so->restore)
				res = so->restore(e, &env, &err);
			else
				err = EINVAL;
		}
		switch (res) {
		case RS_OK: st->restored++; break;
		case RS_GONE: st->gone++; break;
		case RS_SKIPPED: st->skipped++; break;
		case RS_FAILED: st->failed++; break;
		}
		if (out_fd >= 0) {
			sys_record_begin(&w, "restored");
			jw_int(&w, "seq", seq);
			jw_str(&w, "op", op);
			jw_str(&w, "result", rres_name[res]);
			if (res == RS_FAILED) {
				jw_int(&w, "errno", err);
				jw_str(&w, "error", strerror(err));
			}
			jw_obj_end(&w);
			if (jw_emit(&w, out_fd) != 0) {
				jw_reset(&w);
				out_fd = -1; /* the reader went away: keep restoring */
			}
		}
	}
	jw_free(&w);
	free(created);
	for (size_t k = 0; k < n; k++)
		sj_free(&lines[k].o);
	free(lines);
	return 0;
}
