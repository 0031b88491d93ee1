/* SPDX-License-Identifier: MIT */
/* --tee: stdout mirrored to a file; either side may fail and the other goes on.
 * Output files: what may be written, and a file is in place only after its first record. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jsonw.h"
#include "output.h"
#include "tap.h"

static char dir[] = "/tmp/rtlab-test-output-XXXXXX";
static char path[256];

/* The whole content of a file (static buffer). */
static const char *slurp(const char *p)
{
	static char buf[8192];
	buf[0] = '\0';
	int fd = open(p, O_RDONLY);
	if (fd < 0)
		return buf;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

/* Entries of a directory (without . and ..). */
static int count_entries(const char *d)
{
	DIR *dd = opendir(d);
	int n = 0;
	if (!dd)
		return -1;
	for (struct dirent *e; (e = readdir(dd));)
		n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
	closedir(dd);
	return n;
}

/* What is waiting in a pipe (non-blocking read end). */
static const char *drain(int fd)
{
	static char buf[8192];
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

/* Make fd 1 the write end of a new pipe; returns the read end (non-blocking). */
static int stdout_to_pipe(void)
{
	int p[2];
	if (pipe(p) != 0)
		return -1;
	dup2(p[1], STDOUT_FILENO);
	close(p[1]);
	fcntl(p[0], F_SETFL, O_NONBLOCK);
	return p[0];
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN); /* as main() does */
	int saved = dup(STDOUT_FILENO);
	CHECK(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/run.jsonl", dir);

	/* no tee: a plain write */
	int rd = stdout_to_pipe();
	CHECK(out_write(STDOUT_FILENO, "a\n", 2) == 0);
	CHECK(strcmp(drain(rd), "a\n") == 0);
	struct out_status st;
	out_get_status(&st);
	CHECK(!st.tee && !st.stdout_err && !st.tee_err);

	/* a FILE that cannot be created changes nothing */
	char bad[300];
	snprintf(bad, sizeof(bad), "%s/missing/run.jsonl", dir);
	CHECK(out_tee_open(bad) == -ENOENT);
	out_get_status(&st);
	CHECK(!st.tee);

	/* tee: an existing file stays as it is until the first line, then that line and
	 * the next are the whole file (a new file, 0600, renamed over it) */
	int fd = open(path, O_WRONLY | O_CREAT, 0644);
	CHECK(write(fd, "old old old\n", 12) == 12);
	close(fd);
	CHECK(out_tee_open(path) == 0);
	CHECK(out_tee_open(path) == -EBUSY);
	CHECK(strcmp(slurp(path), "old old old\n") == 0);
	CHECK(count_entries(dir) == 2); /* the file and the tee's temporary file beside it */
	CHECK(out_write(STDOUT_FILENO, "{\"type\":\"header\"}\n", 18) == 0);
	CHECK(count_entries(dir) == 1);
	struct jsonw w;
	jw_init(&w);
	jw_obj_begin(&w, NULL);
	jw_str(&w, "type", "snapshot");
	jw_obj_end(&w);
	CHECK(jw_emit(&w, STDOUT_FILENO) == 0);
	const char *both = "{\"type\":\"header\"}\n{\"type\":\"snapshot\"}\n";
	CHECK(strcmp(drain(rd), both) == 0);
	CHECK(strcmp(slurp(path), both) == 0);
	struct stat sb;
	CHECK(stat(path, &sb) == 0 && (sb.st_mode & 0777) == 0600);

	/* stdout goes away (EPIPE): the tee goes on and says so, no error */
	close(rd);
	CHECK(out_write(STDOUT_FILENO, "{\"type\":\"result\"}\n", 18) == 0);
	out_get_status(&st);
	CHECK(st.tee && st.stdout_err == -EPIPE && !st.tee_err);
	CHECK(out_write(STDOUT_FILENO, "{\"type\":\"log\"}\n", 15) == 0);
	const char *t = slurp(path);
	CHECK(strncmp(t, both, strlen(both)) == 0);
	const char *lost = strstr(t, "\"code\":\"stdout_lost\"");
	const char *res = strstr(t, "{\"type\":\"result\"}\n");
	CHECK(lost && res && lost < res);
	CHECK(strstr(t, "{\"type\":\"log\"}\n") != NULL);
	CHECK(out_tee_close() == 0);
	out_get_status(&st);
	CHECK(!st.tee);

	/* a tee nothing was written to leaves no file (a refused command) */
	unlink(path);
	rd = stdout_to_pipe();
	CHECK(out_tee_open(path) == 0);
	CHECK(access(path, F_OK) != 0);
	CHECK(out_tee_close() == 0);
	CHECK(access(path, F_OK) != 0 && count_entries(dir) == 0);

	/* the tee fails (EFBIG: a file size limit): stdout goes on and gets a tee_failed record */
	struct rlimit old_fsize;
	signal(SIGXFSZ, SIG_IGN);
	CHECK(getrlimit(RLIMIT_FSIZE, &old_fsize) == 0);
	struct rlimit small = { 4, old_fsize.rlim_max }; /* the soft limit only: undone below */
	CHECK(out_tee_open(path) == 0);
	CHECK(setrlimit(RLIMIT_FSIZE, &small) == 0);
	CHECK(out_write(STDOUT_FILENO, "xxxxxxxx\n", 9) == 0);
	out_get_status(&st);
	CHECK(st.tee_err == -EFBIG && !st.stdout_err);
	const char *o = drain(rd);
	CHECK(strstr(o, "\"code\":\"tee_failed\"") != NULL);
	CHECK(strstr(o, "xxxxxxxx\n") != NULL);
	CHECK(out_write(STDOUT_FILENO, "y\n", 2) == 0);
	CHECK(strcmp(drain(rd), "y\n") == 0);
	/* both gone: now it is an error */
	close(rd);
	CHECK(out_write(STDOUT_FILENO, "z\n", 2) == -EPIPE);
	CHECK(out_tee_close() == -EFBIG);
	CHECK(setrlimit(RLIMIT_FSIZE, &old_fsize) == 0);
	CHECK(count_entries(dir) == 0); /* a tee that never got a line is not left */

	/* output paths: a regular file or a new name in a directory; nothing else */
	char err[512];
	CHECK(out_path_check("--output", path, err, sizeof(err)) == 0);	/* new */
	CHECK(out_path_check("--output", "/dev/null", err, sizeof(err)) == 0);
	CHECK(out_path_check("--output", dir, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "--output '") == err && strstr(err, "is a directory") != NULL);
	CHECK(out_path_check("--samples", "-", err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "--samples -:") == err);
	if (access("/dev/full", F_OK) == 0) {
		CHECK(out_path_check("--tee", "/dev/full", err, sizeof(err)) == -EINVAL);
		CHECK(strstr(err, "a character device") != NULL);
		struct out_file df;
		CHECK(out_file_open(&df, "/dev/full", 0644) == -EINVAL);
	}
	char fifo[300];
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	CHECK(mkfifo(fifo, 0600) == 0);
	CHECK(out_path_check("--output", fifo, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "a FIFO") != NULL);
	unlink(fifo);
	snprintf(bad, sizeof(bad), "%s/missing/x", dir);
	CHECK(out_path_check("--output", bad, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "its directory does not exist") != NULL);
	if (access("/proc/self/comm", F_OK) == 0) {
		CHECK(out_path_check("--output", "/proc/self/comm", err, sizeof(err)) == -EINVAL);
		CHECK(strstr(err, "procfs") != NULL);
	}

	/* an output file: placed over an existing file, or discarded without a trace */
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK(write(fd, "old\n", 4) == 4);
	close(fd);
	struct out_file of;
	CHECK(out_file_open(&of, path, 0644) == 0);
	CHECK(write(of.fd, "new\n", 4) == 4);
	out_file_discard(&of);
	CHECK(strcmp(slurp(path), "old\n") == 0 && count_entries(dir) == 1);
	CHECK(out_file_open(&of, path, 0644) == 0);
	CHECK(write(of.fd, "new\n", 4) == 4);
	CHECK(out_file_place(&of) == 0);
	CHECK(out_file_place(&of) == 0); /* once */
	out_file_discard(&of);
	CHECK(strcmp(slurp(path), "new\n") == 0 && count_entries(dir) == 1);
	/* the path turned into a FIFO meanwhile: it is not replaced */
	CHECK(out_file_open(&of, path, 0644) == 0);
	unlink(path);
	CHECK(mkfifo(path, 0600) == 0);
	CHECK(out_file_place(&of) == -EEXIST);
	out_file_discard(&of);
	struct stat fs;
	CHECK(lstat(path, &fs) == 0 && S_ISFIFO(fs.st_mode) && count_entries(dir) == 1);

	dup2(saved, STDOUT_FILENO);
	close(saved);
	jw_free(&w);
	unlink(path);
	rmdir(dir);
	return tap_done("output");
}
