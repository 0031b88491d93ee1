/* SPDX-License-Identifier: MIT */
#include "output.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jsonw.h"

/* The one stdout of the process and its mirror (see output.h). */
static struct {
	atomic_int tee_fd;		/* -1: no tee */
	atomic_int stdout_err;		/* first error of stdout, 0 while it works */
	atomic_int tee_err;		/* first error of the tee, 0 while it works */
	const char *tee_path;
} out = { .tee_fd = -1 };

static int mirror_stdout(const void *buf, size_t len);

int out_tee_open(const char *path)
{
	if (atomic_load(&out.tee_fd) >= 0)
		return -EBUSY;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	out.tee_path = path;
	atomic_store(&out.stdout_err, 0);
	atomic_store(&out.tee_err, 0);
	atomic_store(&out.tee_fd, fd);
	rl_set_stdout_writer(mirror_stdout);
	return 0;
}

static int write_raw(int fd, const void *p, size_t len)
{
	return rl_write_raw(fd, p, len);
}

/* fdatasync; files that cannot be synced (a FIFO, /dev/null) are not an error. */
static int sync_fd(int fd)
{
	if (fdatasync(fd) == 0 || errno == EINVAL || errno == EROFS)
		return 0;
	return -errno;
}

void out_record_begin(struct jsonw *w, const char *type)
{
	jw_obj_begin(w, NULL);
	jw_str(w, "type", type);
	jw_int(w, "schema", RL_OUTPUT_SCHEMA);
}

static void log_record(struct jsonw *w, const char *level, const char *code, const char *msg)
{
	out_record_begin(w, "log");
	jw_str(w, "level", level);
	jw_str(w, "code", code);
	jw_str(w, "msg", msg);
	jw_obj_end(w);
}

void out_log(struct jsonw *w, int fd, const char *level, const char *code, const char *msg)
{
	log_record(w, level, code, msg);
	if (jw_emit(w, fd) != 0) {
		/* the next write of the output (the reporter's) reports the error */
	}
}

/*
 * A `log` record about the output itself, written past the stdout writer (which is
 * what failed, or what would call back here) as one line with its newline.
 */
static void write_log_line(int fd, const char *code, const char *msg)
{
	struct jsonw w;
	jw_init(&w);
	log_record(&w, "warning", code, msg);
	if (!jw_error(&w)) {
		size_t n = strlen(jw_text(&w));
		char *line = malloc(n + 1);
		if (line) {
			memcpy(line, jw_text(&w), n);
			line[n] = '\n';
			if (write_raw(fd, line, n + 1) != 0) {
				/* the caller's next write finds the same error */
			}
			free(line);
		}
	}
	jw_free(&w);
}

static void give_up_stdout(int tee_fd, int e)
{
	int expected = 0;
	if (!atomic_compare_exchange_strong(&out.stdout_err, &expected, e))
		return;
	if (atomic_load(&out.tee_err))
		return;
	char msg[256];
	snprintf(msg, sizeof(msg),
		 "writing stdout failed (%s): the output goes on in the --tee file only",
		 strerror(-e));
	write_log_line(tee_fd, "stdout_lost", msg);
}

static void give_up_tee(int e)
{
	int expected = 0;
	if (!atomic_compare_exchange_strong(&out.tee_err, &expected, e))
		return;
	if (atomic_load(&out.stdout_err))
		return;
	char msg[512];
	snprintf(msg, sizeof(msg),
		 "--tee %s: write failed (%s): the file ends before this record; stdout has the whole output",
		 out.tee_path ? out.tee_path : "?", strerror(-e));
	write_log_line(STDOUT_FILENO, "tee_failed", msg);
}

int out_write(int fd, const void *buf, size_t len)
{
	int tee_fd = atomic_load(&out.tee_fd);
	if (fd != STDOUT_FILENO || tee_fd < 0)
		return write_raw(fd, buf, len);
	if (!atomic_load(&out.stdout_err)) {
		int e = write_raw(STDOUT_FILENO, buf, len);
		if (e)
			give_up_stdout(tee_fd, e);
	}
	if (!atomic_load(&out.tee_err)) {
		int e = write_raw(tee_fd, buf, len);
		if (!e)
			e = sync_fd(tee_fd);
		if (e)
			give_up_tee(e);
	}
	int se = atomic_load(&out.stdout_err), te = atomic_load(&out.tee_err);
	return se && te ? se : 0;
}

/* jsonw's writer of stdout while --tee is open */
static int mirror_stdout(const void *buf, size_t len)
{
	return out_write(STDOUT_FILENO, buf, len);
}

void out_get_status(struct out_status *st)
{
	st->tee = atomic_load(&out.tee_fd) >= 0;
	st->stdout_err = atomic_load(&out.stdout_err);
	st->tee_err = atomic_load(&out.tee_err);
}

int out_tee_close(void)
{
	int fd = atomic_exchange(&out.tee_fd, -1);
	if (fd < 0)
		return 0;
	rl_set_stdout_writer(NULL);
	int e = atomic_load(&out.tee_err);
	if (!e)
		e = sync_fd(fd);
	if (close(fd) != 0 && !e && errno != EINTR)
		e = -errno;
	out.tee_path = NULL;
	return e;
}
