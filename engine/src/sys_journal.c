/* SPDX-License-Identifier: MIT */
/* The journal entry of a `sys` operation (written and synced before the change), its
 * answer, and the checks of its arguments (sys_op.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sys_op.h"

/* ---- journal ---- */

void sys_journal_begin(struct sys_ctx *c, const char *op)
{
	jw_reset(&c->jw);
	jw_obj_begin(&c->jw, NULL);
	jw_int(&c->jw, "schema", SYS_SCHEMA);
	jw_uint(&c->jw, "seq", c->seq);
	jw_str(&c->jw, "op", op);
}

/* Close the journal object, write it and fsync. */
int sys_journal_commit(struct sys_ctx *c)
{
	jw_uint(&c->jw, "time_ns", rl_now_ns(CLOCK_REALTIME));
	jw_obj_end(&c->jw);
	if (c->journal_fd < 0) {
		jw_reset(&c->jw);
		return 0;
	}
	int r = jw_emit(&c->jw, c->journal_fd);
	if (!r && fsync(c->journal_fd) != 0)
		r = -errno;
	return r;
}

/* The change failed after it was journaled: mark the entry void. */
int sys_journal_cancel(struct sys_ctx *c)
{
	sys_journal_begin(c, "cancel");
	return sys_journal_commit(c);
}

/* ---- answers ---- */

/* ---- answer ---- */

void sys_ans_begin(struct jsonw *a, uint64_t seq, const char *op)
{
	jw_reset(a);
	sys_record_begin(a, "applied");
	jw_uint(a, "seq", seq);
	jw_str(a, "op", op ? op : "?");
}

int sys_ans_fail(struct jsonw *a, int err, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	jw_bool(a, "ok", false);
	jw_int(a, "errno", err);
	jw_str(a, "error", msg);
	jw_obj_end(a);
	return 0;
}

int sys_ans_ok(struct jsonw *a)
{
	jw_bool(a, "ok", true);
	jw_obj_end(a);
	return 0;
}

/* ---- arguments ---- */

bool sys_path_ok(const char *p, const char *const *prefixes)
{
	if (!p || p[0] != '/' || strstr(p, "/../") || strstr(p, "/./") ||
	    strlen(p) > 1024)
		return false;
	size_t l = strlen(p);
	if (l >= 3 && strcmp(p + l - 3, "/..") == 0)
		return false;
	for (size_t k = 0; prefixes[k]; k++)
		if (strncmp(p, prefixes[k], strlen(prefixes[k])) == 0)
			return true;
	return false;
}

void sys_cpus_from_arr(const int64_t *a, size_t n, cpu_set_t *set, int *bad)
{
	CPU_ZERO(set);
	*bad = 0;
	for (size_t k = 0; k < n; k++) {
		if (a[k] < 0 || a[k] >= CPU_SETSIZE) {
			*bad = 1;
			return;
		}
		CPU_SET((int)a[k], set);
	}
}
