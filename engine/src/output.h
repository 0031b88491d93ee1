/* SPDX-License-Identifier: MIT */
/*
 * The engine's standard output, optionally mirrored to a `--tee FILE`.
 *
 * Every JSON line the engine writes to stdout goes through out_write(): while a
 * tee is open, out_tee_open() has made it jsonw's stdout writer, so rl_write_all()
 * (and so jw_emit) hands it every write to STDOUT_FILENO.
 * Without a tee it is a plain write loop. With a tee each line is written
 * to stdout and then appended to FILE with one write(2) and fdatasync'ed, so the
 * last complete record (snapshot, result, sys answer) survives whatever happens
 * to the reader of stdout:
 *
 *  - stdout fails (EPIPE when the SSH connection dropped; SIGPIPE is ignored by
 *    main): stdout is given up, a `log` record `stdout_lost` is appended to FILE,
 *    and the run goes on writing FILE only;
 *  - FILE fails (ENOSPC, EIO): FILE is given up and a `log` record `tee_failed`
 *    goes to stdout, which carries on.
 *
 * out_write() returns an error only when nothing could be written anywhere. The
 * state is process-wide (there is one stdout); it is set up by main before any
 * output and safe to use from the reporter and main threads at once. Not for the
 * hot loop.
 */
#ifndef RTLAB_OUTPUT_H
#define RTLAB_OUTPUT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "common.h"
#include "jsonw.h"

/*
 * A file the user names for the engine to write (--output, --samples, --tee). The
 * rules are the host's (docs/engine-output.md, "Output files"):
 *
 *  - out_path_check(), before anything is done: the path must be a regular file
 *    (symbolic links are followed) or a new name in an existing directory, and not
 *    on a kernel file system (/proc, /sys, debugfs, tracefs, cgroup): a device, a
 *    FIFO, a socket or a directory is refused, so a device node is never replaced;
 *    the one exception is the null device (/dev/null), written in place (discarded);
 *  - out_file_open() creates a new file beside it (".NAME.PID.rtlab-tmp", O_EXCL),
 *    which the engine writes;
 *  - out_file_place() renames it over the path once its first record is written, so
 *    a command refused or failed before that leaves no file (out_file_discard()
 *    removes it), and an existing file is replaced only by a run that started.
 *
 * After out_file_place() the file is the output and grows line by line: a run
 * killed later leaves its valid prefix there.
 */
struct out_file {
	int fd;			/* -1: not open */
	char *path;		/* the final path (symbolic links resolved) */
	char *tmp;		/* the file written until placed */
	atomic_bool placed;
};

/*
 * 0 when `path` may be written as the output of option `opt` (e.g. "--output");
 * -EINVAL with one line in err (naming the option and the path) when not. "-" is
 * refused too: the caller handles "-" (standard output) before, where it allows it.
 */
int out_path_check(const char *opt, const char *path, char *err, size_t errlen) RL_WUR;

/* Create the temporary file of `path` (checked) with `mode` (& ~umask). 0 or -errno. */
int out_file_open(struct out_file *f, const char *path, mode_t mode) RL_WUR;

/*
 * Rename the temporary file over the path (once; later calls return 0). 0 or -errno
 * (-EEXIST when the path became something else than a regular file meanwhile).
 */
int out_file_place(struct out_file *f) RL_WUR;

/* Close the file; when it was never placed, remove it. Safe on a closed one. */
void out_file_discard(struct out_file *f);

/*
 * --tee: create the file of path (mode 0600, appended to line by line) as an
 * out_file, placed at the first line written to it. Returns 0 or -errno (nothing
 * is changed then). Only one tee at a time (-EBUSY).
 */
int out_tee_open(const char *path) RL_WUR;

/*
 * Write buf (one or more whole lines) to fd; when fd is STDOUT_FILENO and a tee
 * is open, as described above. Returns 0 or -errno.
 */
int out_write(int fd, const void *buf, size_t len) RL_WUR;

struct out_status {
	bool tee;		/* a tee is open */
	int stdout_err;		/* 0, or the -errno that made stdout be given up */
	int tee_err;		/* 0, or the -errno that made the tee be given up */
};

void out_get_status(struct out_status *st);

/*
 * Open a record of the engine's output, {"type":TYPE,"schema":RL_OUTPUT_SCHEMA, ...:
 * every record of it starts here, so the schema number is written in one place.
 */
void out_record_begin(struct jsonw *w, const char *type);

/* Write one `log` record (docs/engine-output.md) to fd; w is a scratch writer. */
void out_log(struct jsonw *w, int fd, const char *level, const char *code, const char *msg);

/*
 * fdatasync and close the tee (removed when no line was ever written to it). Returns
 * 0 or the first error of the tee (also an earlier write error). Safe without a tee.
 */
int out_tee_close(void) RL_WUR;

#endif
