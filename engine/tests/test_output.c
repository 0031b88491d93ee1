/* SPDX-License-Identifier: MIT */
/* --tee: stdout mirrored to a file; either side may fail and the other goes on. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

	/* tee: truncated, 0600, every line on both sides (also through jw_emit) */
	int fd = open(path, O_WRONLY | O_CREAT, 0644);
	CHECK(write(fd, "old old old\n", 12) == 12);
	close(fd);
	CHECK(out_tee_open(path) == 0);
	CHECK(out_tee_open(path) == -EBUSY);
	CHECK(out_write(STDOUT_FILENO, "{\"type\":\"header\"}\n", 18) == 0);
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
	CHECK(stat(path, &sb) == 0 && (sb.st_mode & 0777) == 0644); /* existing file: mode kept */

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

	/* a new file is created 0600 */
	unlink(path);
	rd = stdout_to_pipe();
	CHECK(out_tee_open(path) == 0);
	CHECK(stat(path, &sb) == 0 && (sb.st_mode & 0777) == 0600);
	CHECK(out_tee_close() == 0);

	/* the tee fails (ENOSPC): stdout goes on and gets a tee_failed record */
	if (access("/dev/full", W_OK) == 0) {
		CHECK(out_tee_open("/dev/full") == 0);
		CHECK(out_write(STDOUT_FILENO, "x\n", 2) == 0);
		out_get_status(&st);
		CHECK(st.tee_err == -ENOSPC && !st.stdout_err);
		const char *o = drain(rd);
		CHECK(strstr(o, "\"code\":\"tee_failed\"") != NULL);
		CHECK(strstr(o, "x\n") != NULL);
		CHECK(out_write(STDOUT_FILENO, "y\n", 2) == 0);
		CHECK(strcmp(drain(rd), "y\n") == 0);
		/* both gone: now it is an error */
		close(rd);
		CHECK(out_write(STDOUT_FILENO, "z\n", 2) == -EPIPE);
		CHECK(out_tee_close() == -ENOSPC);
	}

	dup2(saved, STDOUT_FILENO);
	close(saved);
	jw_free(&w);
	unlink(path);
	rmdir(dir);
	return tap_done("output");
}
