/* SPDX-License-Identifier: MIT */
/*
 * The target lock: one owner drives a target's system state at a time
 * (`sys apply --lock FILE --owner LABEL`, `sys lockinfo --lock FILE`). An
 * exclusive flock(2) on FILE is the truth (the kernel drops it when the holder
 * dies, however it dies); the one JSON line in the file only names the holder.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "isotime.h"
#include "sys.h"

#define LOCK_LINE_MAX 1024
#define LOCK_TRIES 25		/* flock attempts, LOCK_PAUSE_NS apart */
#define LOCK_READ_TRIES 10	/* re-reads of a holder's line that is not written yet */
#define LOCK_PAUSE_NS (20 * NS_PER_MS)

bool sys_owner_valid(const char *owner)
{
	size_t n = strlen(owner);
	if (n == 0 || n > SYS_OWNER_MAX)
		return false;
	for (size_t k = 0; k < n; k++)
		if ((unsigned char)owner[k] < 0x20 || owner[k] == 0x7f)
			return false;
	return true;
}

int sys_lock_parse(const char *text, size_t len, struct sys_lock_info *li)
{
	memset(li, 0, sizeof(*li));
	while (len && (text[len - 1] == '\n' || text[len - 1] == ' ' || text[len - 1] == '\r'))
		len--;
	if (len == 0 || memchr(text, '\n', len))
		return -EINVAL;
	struct sj_obj o;
	if (sj_parse(text, len, &o) != 0)
		return -EINVAL;
	int64_t pid, since;
	const char *owner;
	int r = -EINVAL;
	if (sj_int(&o, "pid", &pid) == 0 && sj_str(&o, "owner", &owner) == 0 &&
	    sj_int(&o, "since_ns", &since) == 0 && pid > 0 && since >= 0 &&
	    sys_owner_valid(owner)) {
		li->valid = true;
		li->pid = pid;
		li->since_ns = since;
		snprintf(li->owner, sizeof(li->owner), "%s", owner);
		r = 0;
	}
	sj_free(&o);
	return r;
}

void sys_lock_describe(const struct sys_lock_info *li, char *buf, size_t len)
{
	if (!li->valid) {
		snprintf(buf, len, "an unknown holder (the lock file names none)");
		return;
	}
	char when[64];
	if (rl_iso8601_utc(li->since_ns / (int64_t)NS_PER_SEC, when, sizeof(when)) < 0)
		snprintf(when, sizeof(when), "an unknown time");
	snprintf(buf, len, "%s (pid %lld) since %s", li->owner, (long long)li->pid, when);
}

static void pause_a_little(void)
{
	struct timespec ts = rl_ns_to_ts(LOCK_PAUSE_NS);
	nanosleep(&ts, NULL);
}

/* The holder's line; retried while it is not (yet) parsable when retry is set. */
static void read_holder(int fd, struct sys_lock_info *li, bool retry)
{
	for (int k = 0;; k++) {
		char buf[LOCK_LINE_MAX];
		ssize_t n = pread(fd, buf, sizeof(buf), 0);
		if (n > 0 && sys_lock_parse(buf, (size_t)n, li) == 0)
			return;
		memset(li, 0, sizeof(*li));
		if (!retry || k + 1 >= LOCK_READ_TRIES)
			return;
		pause_a_little();	/* the holder took the lock and is writing its line */
	}
}

/* flock(fd, op | LOCK_NB), EINTR retried: 0, -EWOULDBLOCK (held by another) or -errno. */
static int try_flock(int fd, int op)
{
	while (flock(fd, op | LOCK_NB) != 0) {
		if (errno != EINTR)
			return -errno;
	}
	return 0;
}

/* mkdir of path's directory (last component only, mode 0700), as `apply` makes it. */
static void make_parent(const char *path)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = '\0';
		(void)mkdir(dir, 0700);
	}
}

/* Whether fd is still the file at path (`rtlab board clean` unlinks a free lock while
 * it holds it: a taker that opened it before must open the new one). */
static bool still_linked(int fd, const char *path)
{
	struct stat a, b;
	return fstat(fd, &a) == 0 && a.st_nlink > 0 && stat(path, &b) == 0 &&
	       a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* Open (create) the lock file; its directory is made again if it was removed. */
static int open_lock(const char *path)
{
	int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0 && errno == ENOENT) {
		make_parent(path);
		fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
	}
	if (fd < 0)
		return -errno;
	struct stat st;
	/* Readable by everyone (lockinfo), whatever the umask was. */
	if (fstat(fd, &st) == 0 && st.st_uid == geteuid() && (st.st_mode & 07777) != 0644)
		(void)fchmod(fd, 0644);
	return fd;
}

int sys_lock_take(const char *path, const char *owner, int *fdp, struct sys_lock_info *holder)
{
	memset(holder, 0, sizeof(*holder));
	int fd = open_lock(path);
	if (fd < 0)
		return fd;
	for (int k = 0, relinks = 0;; k++) {
		int e = try_flock(fd, LOCK_EX);
		if (e == 0) {
			if (still_linked(fd, path) || ++relinks > LOCK_TRIES)
				break;
			/* removed (and maybe made again) while we waited: lock the file there now */
			close(fd);
			fd = open_lock(path);
			if (fd < 0)
				return fd;
			k = -1;
			continue;
		}
		if (e != -EWOULDBLOCK) {
			close(fd);
			return e;
		}
		/* lockinfo tests it with a shared lock for an instant: try again */
		if (k + 1 >= LOCK_TRIES) {
			read_holder(fd, holder, true);
			close(fd);
			return -EBUSY;
		}
		pause_a_little();
	}
	struct jsonw w;
	jw_init(&w);
	jw_obj_begin(&w, NULL);
	jw_int(&w, "pid", getpid());
	jw_str(&w, "owner", owner);
	jw_uint(&w, "since_ns", rl_now_ns(CLOCK_REALTIME));
	jw_obj_end(&w);
	int r = 0;
	if (ftruncate(fd, 0) != 0 || lseek(fd, 0, SEEK_SET) < 0)
		r = -errno;
	if (!r)
		r = jw_emit(&w, fd);
	jw_free(&w);
	if (r) {
		close(fd);
		return r;
	}
	*fdp = fd;
	return 0;
}

void sys_lock_release(int fd)
{
	if (fd < 0)
		return;
	/* A clean exit leaves no name behind; the kernel drops the lock at close. */
	if (ftruncate(fd, 0) != 0) {
		/* nothing to do: the lock goes anyway */
	}
	close(fd);
}

int sys_lock_query(const char *path, bool *held, struct sys_lock_info *li)
{
	memset(li, 0, sizeof(*li));
	*held = false;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd); /* a FIFO or a device is no lock file */
		return -EBADMSG;
	}
	int e = try_flock(fd, LOCK_SH);
	if (e == 0) {
		flock(fd, LOCK_UN);
	} else if (e == -EWOULDBLOCK) {
		*held = true;
	} else {
		close(fd);
		return e;
	}
	read_holder(fd, li, *held);
	close(fd);
	return 0;
}
