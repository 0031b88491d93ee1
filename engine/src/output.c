/* SPDX-License-Identifier: MIT */
#include "output.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "jsonw.h"
#include "opts.h"

/* Kernel file systems whose files are interfaces, not outputs (linux/magic.h). */
static const struct {
	unsigned long magic;
	const char *name;
} kernel_fs[] = {
	{ 0x9fa0, "/proc (procfs)" },
	{ 0x62656572, "/sys (sysfs)" },
	{ 0x64626720, "debugfs" },
	{ 0x74726163, "tracefs" },
	{ 0x63677270, "a cgroup v2 file system" },
	{ 0x27e0eb, "a cgroup file system" },
	{ 0x1cd1, "devpts" },
	{ 0x73636673, "securityfs" },
	{ 0xcafe4a11, "the BPF file system" },
	{ 0x62656570, "configfs" },
};

static const char *kind_of(mode_t m)
{
	if (S_ISDIR(m))
		return "a directory";
	if (S_ISCHR(m))
		return "a character device";
	if (S_ISBLK(m))
		return "a block device";
	if (S_ISFIFO(m))
		return "a FIFO";
	if (S_ISSOCK(m))
		return "a socket";
	return "not a regular file";
}

/* The directory part of path ("." for a bare name) in buf; false if too long. */
static bool dir_of(const char *path, char *buf, size_t len)
{
	const char *slash = strrchr(path, '/');
	int n = !slash ? snprintf(buf, len, ".")
		: slash == path ? snprintf(buf, len, "/")
		: snprintf(buf, len, "%.*s", (int)(slash - path), path);
	return n > 0 && (size_t)n < len;
}

/* /dev/null (the null device, whatever its name): the one device written to, in place */
static bool is_null_device(const struct stat *st)
{
	return S_ISCHR(st->st_mode) && major(st->st_rdev) == 1 && minor(st->st_rdev) == 3;
}

int out_path_check(const char *opt, const char *path, char *err, size_t errlen)
{
	char shown[OPT_SHOWN_PATH_LEN], dir[4096];
	opt_shown_path(path, shown, sizeof(shown));
	if (strcmp(path, "-") == 0) {
		snprintf(err, errlen, "%s -: standard output is not allowed here; name a file", opt);
		return -EINVAL;
	}
	struct stat st;
	struct statfs fs;
	const char *where = path;
	if (stat(path, &st) == 0) {
		if (is_null_device(&st))
			return 0;
		if (!S_ISREG(st.st_mode)) {
			snprintf(err, errlen,
				 "%s %s: is %s; name a regular file or a new file in an existing directory%s",
				 opt, shown, kind_of(st.st_mode),
				 strcmp(opt, "--output") == 0 ? " (- is standard output)" : "");
			return -EINVAL;
		}
	} else if (errno == ENOENT) {
		struct stat ds;
		if (!dir_of(path, dir, sizeof(dir)) || stat(dir, &ds) != 0 || !S_ISDIR(ds.st_mode)) {
			snprintf(err, errlen, "%s %s: its directory does not exist; create it first",
				 opt, shown);
			return -EINVAL;
		}
		where = dir;
	} else {
		snprintf(err, errlen, "%s %s: %s", opt, shown, strerror(errno));
		return -EINVAL;
	}
	if (statfs(where, &fs) == 0) {
		for (size_t i = 0; i < sizeof(kernel_fs) / sizeof(kernel_fs[0]); i++) {
			if ((unsigned long)fs.f_type == kernel_fs[i].magic) {
				snprintf(err, errlen, "%s %s: is on %s, not a file to write an output to",
					 opt, shown, kernel_fs[i].name);
				return -EINVAL;
			}
		}
	}
	return 0;
}

int out_file_open(struct out_file *f, const char *path, mode_t mode)
{
	f->fd = -1;
	f->tmp = NULL;
	atomic_init(&f->placed, false);
	struct stat st;
	if (stat(path, &st) == 0 && is_null_device(&st)) {
		/* output thrown away: opened as it is, never replaced */
		f->path = NULL;
		f->fd = open(path, O_WRONLY | O_CLOEXEC);
		return f->fd >= 0 ? 0 : -errno;
	}
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
		return -EINVAL; /* out_path_check() says why; nothing else is ever replaced */
	/* an existing file through a symbolic link: the link stays, its target is replaced */
	f->path = realpath(path, NULL);
	if (!f->path && errno != ENOENT)
		return -errno;
	if (!f->path && !(f->path = strdup(path)))
		return -ENOMEM;
	const char *slash = strrchr(f->path, '/');
	size_t dlen = slash ? (size_t)(slash - f->path) + 1 : 0;
	const char *base = f->path + dlen;
	size_t cap = strlen(f->path) + 48;
	f->tmp = malloc(cap);
	if (!f->tmp) {
		out_file_discard(f);
		return -ENOMEM;
	}
	for (unsigned k = 0;; k++) {
		snprintf(f->tmp, cap, "%.*s.%s.%ld-%u.rtlab-tmp", (int)dlen, f->path, base,
			 (long)getpid(), k);
		f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_APPEND | O_CLOEXEC,
			     mode);
		if (f->fd >= 0)
			return 0;
		if (errno != EEXIST || k >= 100) {
			int e = -errno;
			free(f->tmp);
			f->tmp = NULL;
			out_file_discard(f);
			return e;
		}
	}
}

int out_file_place(struct out_file *f)
{
	bool expected = false;
	if (!f->tmp || !atomic_compare_exchange_strong(&f->placed, &expected, true))
		return 0;
	struct stat st;
	if (lstat(f->path, &st) == 0 && !S_ISREG(st.st_mode)) {
		atomic_store(&f->placed, false);
		return -EEXIST; /* never rename over a device, FIFO or directory */
	}
	if (rename(f->tmp, f->path) != 0) {
		int e = -errno;
		atomic_store(&f->placed, false);
		return e;
	}
	return 0;
}

void out_file_discard(struct out_file *f)
{
	if (f->fd >= 0)
		close(f->fd);
	f->fd = -1;
	if (f->tmp && !atomic_load(&f->placed))
		unlink(f->tmp);
	free(f->tmp);
	free(f->path);
	f->tmp = NULL;
	f->path = NULL;
}

/* The one stdout of the process and its mirror (see output.h). */
static struct {
	atomic_int tee_fd;		/* -1: no tee */
	struct out_file tee_file;	/* its file, placed at the first line */
	atomic_int stdout_err;		/* first error of stdout, 0 while it works */
	atomic_int tee_err;		/* first error of the tee, 0 while it works */
	const char *tee_path;
} out = { .tee_fd = -1, .tee_file = { .fd = -1 } };

static int mirror_stdout(const void *buf, size_t len);

int out_tee_open(const char *path)
{
	if (atomic_load(&out.tee_fd) >= 0)
		return -EBUSY;
	int e = out_file_open(&out.tee_file, path, 0600);
	if (e)
		return e;
	int fd = out.tee_file.fd;
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

/* The first error e of one output (its error slot `mine`): true when it is the first and
 * the other output still works, so that one says so in a log record. */
static bool first_failure(atomic_int *mine, atomic_int *other, int e)
{
	int expected = 0;
	return atomic_compare_exchange_strong(mine, &expected, e) && !atomic_load(other);
}

static void give_up_stdout(int tee_fd, int e)
{
	if (!first_failure(&out.stdout_err, &out.tee_err, e))
		return;
	char msg[256];
	snprintf(msg, sizeof(msg),
		 "writing stdout failed (%s): the output goes on in the --tee file only",
		 strerror(-e));
	write_log_line(tee_fd, "stdout_lost", msg);
}

static void give_up_tee(int e)
{
	if (!first_failure(&out.tee_err, &out.stdout_err, e))
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
		if (!e)
			e = out_file_place(&out.tee_file); /* the first line: the file is there */
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
	(void)fd; /* closed by out_file_discard, which also removes a tee never written */
	out_file_discard(&out.tee_file);
	out.tee_path = NULL;
	return e;
}
