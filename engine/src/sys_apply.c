/* SPDX-License-Identifier: MIT */
/*
 * `sys apply` and `sys restore`: a journal created locked, the ops read from stdin and
 * applied (sys_ops.c) until EOF, `release` or a signal, then restored in reverse
 * order unless detached; and the restore of a journal its applier left behind.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sys.h"
#include "sysfile.h"

static volatile sig_atomic_t sys_stop;

static void on_signal(int sig)
{
	sys_stop = sig;
}

static int emit_line(struct jsonw *w, int fd)
{
	int r = jw_emit(w, fd);
	if (r)
		jw_reset(w);
	return r;
}

/* mkdir -p of the journal's directory (last component only, mode 0700). */
static int ensure_dir(const char *journal)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", journal);
	char *slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return 0;
	*slash = '\0';
	if (mkdir(dir, 0700) != 0 && errno != EEXIST)
		return -errno;
	return 0;
}

static int restore_fd(int fd, int out_fd, struct sys_restore_stats *st)
{
	char *text;
	size_t len;
	if (lseek(fd, 0, SEEK_SET) < 0)
		return -errno;
	int r = sf_slurp(fd, &text, &len);
	if (r)
		return r;
	r = sys_restore_text(text, len, out_fd, st);
	free(text);
	return r;
}

static void emit_done(const char *type, const char *journal, const struct sys_restore_stats *st,
		      bool kept)
{
	struct jsonw w;
	jw_init(&w);
	sys_record_begin(&w, type);
	jw_str(&w, "journal", journal);
	jw_uint(&w, "restored", st->restored);
	jw_uint(&w, "gone", st->gone);
	jw_uint(&w, "skipped", st->skipped);
	jw_uint(&w, "failed", st->failed);
	jw_bool(&w, "journal_kept", kept);
	jw_obj_end(&w);
	(void)emit_line(&w, STDOUT_FILENO);
	jw_free(&w);
}

/* Restore from the locked journal, then delete it unless something failed. */
static int restore_locked(int fd, const char *journal, const char *type)
{
	struct sys_restore_stats st;
	int r = restore_fd(fd, STDOUT_FILENO, &st);
	if (r) {
		fprintf(stderr, "rtlab-probe sys: cannot restore %s: %s\n", journal,
			r == -EINVAL ? "not a schema 1 journal" : strerror(-r));
		return RL_EXIT_ERROR;
	}
	bool keep = st.failed > 0;
	if (!keep && unlink(journal) != 0 && errno != ENOENT)
		keep = true;
	emit_done(type, journal, &st, keep);
	return keep ? RL_EXIT_ERROR : RL_EXIT_OK;
}

static int apply_journaled(const char *journal, bool detach, const char *owner)
{
	int r = ensure_dir(journal);
	if (r) {
		fprintf(stderr, "rtlab-probe sys apply: cannot create the directory of %s: %s\n", journal,
			strerror(-r));
		return RL_EXIT_ERROR;
	}
	/*
	 * The journal appears under its name already locked and with its header: made
	 * under a temporary name (not *.journal: never listed), locked, written, then
	 * linked to its name (link(2) refuses an existing name, like O_EXCL). A reader
	 * (`journals`, a stale check) never sees it unlocked or empty.
	 */
	char tmp[PATH_MAX];
	if (snprintf(tmp, sizeof(tmp), "%s.%d.tmp", journal, (int)getpid()) >= (int)sizeof(tmp)) {
		fprintf(stderr, "rtlab-probe sys apply: journal path too long: %s\n", journal);
		return RL_EXIT_ERROR;
	}
	if (access(journal, F_OK) == 0) {
		fprintf(stderr,
			"rtlab-probe sys apply: %s exists: a live session or stale changes "
			"(restore them: rtlab restore, or rtlab-probe sys restore --journal %s)\n",
			journal, journal);
		return RL_EXIT_ERROR;
	}
	int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0) {
		fprintf(stderr, "rtlab-probe sys apply: cannot create %s: %s\n", journal,
			strerror(errno));
		return RL_EXIT_ERROR;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		fprintf(stderr, "rtlab-probe sys apply: cannot lock %s: %s\n", journal, strerror(errno));
		unlink(tmp);
		close(fd);
		return RL_EXIT_ERROR;
	}
	struct sys_ctx c = { .journal_fd = fd, .detached = detach };
	jw_init(&c.jw);
	sys_record_begin(&c.jw, "journal");
	jw_int(&c.jw, "pid", getpid());
	jw_uint(&c.jw, "starttime", sf_starttime(getpid()));
	jw_bool(&c.jw, "detached", detach);
	if (owner)
		jw_str(&c.jw, "owner", owner);
	jw_str(&c.jw, "engine_version", RTLAB_VERSION);
	jw_uint(&c.jw, "time_ns", rl_now_ns(CLOCK_REALTIME));
	jw_obj_end(&c.jw);
	r = jw_emit(&c.jw, fd);
	if (!r && fsync(fd) != 0)
		r = -errno;
	if (r) {
		fprintf(stderr, "rtlab-probe sys apply: cannot write %s: %s\n", journal, strerror(-r));
		unlink(tmp);
		close(fd);
		jw_free(&c.jw);
		return RL_EXIT_ERROR;
	}
	if (link(tmp, journal) != 0) {
		int e = errno;
		unlink(tmp);
		close(fd);
		jw_free(&c.jw);
		if (e == EEXIST)
			fprintf(stderr,
				"rtlab-probe sys apply: %s exists: a live session or stale changes "
				"(restore them: rtlab restore, or rtlab-probe sys restore --journal %s)\n",
				journal, journal);
		else
			fprintf(stderr, "rtlab-probe sys apply: cannot create %s: %s\n", journal,
				strerror(e));
		return RL_EXIT_ERROR;
	}
	unlink(tmp);

	struct jsonw ans;
	jw_init(&ans);
	sys_record_begin(&ans, "ready");
	jw_int(&ans, "pid", getpid());
	jw_str(&ans, "journal", journal);
	jw_bool(&ans, "detached", detach);
	jw_obj_end(&ans);
	(void)emit_line(&ans, STDOUT_FILENO);

	/* Read ops line by line from stdin (raw read: EINTR must reach us). */
	size_t cap = 1 << 16, len = 0;
	char *buf = malloc(cap);
	bool release = false, eof = false;
	int code = RL_EXIT_OK;
	while (buf && !release && !sys_stop && !eof) {
		char *nlp = memchr(buf, '\n', len);
		if (!nlp) {
			if (len == cap) {
				if (cap >= (1 << 24)) {
					fprintf(stderr, "rtlab-probe sys apply: op line too long\n");
					code = RL_EXIT_ERROR;
					break;
				}
				char *nb = realloc(buf, cap * 2);
				if (!nb)
					break;
				buf = nb;
				cap *= 2;
			}
			ssize_t n = read(STDIN_FILENO, buf + len, cap - len);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				eof = true;
				break;
			}
			len += (size_t)n;
			continue;
		}
		size_t ll = (size_t)(nlp - buf);
		struct sj_obj o;
		bool blank = true;
		for (size_t k = 0; k < ll; k++)
			if (buf[k] != ' ' && buf[k] != '\t' && buf[k] != '\r')
				blank = false;
		if (!blank) {
			if (sj_parse(buf, ll, &o) != 0) {
				c.seq++;
				jw_reset(&ans);
				sys_record_begin(&ans, "applied");
				jw_uint(&ans, "seq", c.seq);
				jw_null(&ans, "op");
				jw_bool(&ans, "ok", false);
				jw_int(&ans, "errno", EINVAL);
				jw_str(&ans, "error", "not a flat JSON object");
				jw_obj_end(&ans);
			} else {
				r = sys_apply_op(&c, &o, &ans);
				sj_free(&o);
				if (r < 0) {
					fprintf(stderr, "rtlab-probe sys apply: journal write failed: %s; restoring\n",
						strerror(-r));
					code = RL_EXIT_ERROR;
					release = true;
					jw_reset(&ans);
				} else if (r == SYS_OP_RELEASE) {
					release = true;
				}
			}
			if (ans.len)
				(void)emit_line(&ans, STDOUT_FILENO);
		}
		memmove(buf, nlp + 1, len - ll - 1);
		len -= ll + 1;
	}
	if (!buf)
		code = RL_EXIT_ERROR;
	free(buf);
	jw_free(&ans);
	jw_free(&c.jw);

	if (detach && eof && code == RL_EXIT_OK) {
		close(fd); /* the changes and the journal stay; the lock goes */
		return RL_EXIT_OK;
	}
	int rc = restore_locked(fd, journal, "released");
	for (size_t k = 0; k < c.n_hold; k++)
		close(c.hold_fd[k]);
	close(fd);
	if (code != RL_EXIT_OK)
		return code;
	return rc;
}

/*
 * apply: with a lock, take the target lock first (before anything is journaled
 * or changed), hold it while applying and holding, release it at exit.
 */
int sys_cmd_apply(const char *journal, bool detach, const char *lock, const char *owner)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal; /* no SA_RESTART: read() returns EINTR */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN); /* a dead host must not kill us before we restore */

	int lock_fd = -1;
	if (lock) {
		int r = ensure_dir(lock);
		struct sys_lock_info holder;
		if (!r)
			r = sys_lock_take(lock, owner, &lock_fd, &holder);
		if (r == -EBUSY) {
			char who[SYS_OWNER_MAX + 128];
			sys_lock_describe(&holder, who, sizeof(who));
			fprintf(stderr, "rtlab-probe sys apply: the target is in use by %s (lock %s)\n",
				who, lock);
			return SYS_EXIT_BUSY;
		}
		if (r) {
			fprintf(stderr, "rtlab-probe sys apply: cannot take the lock %s: %s\n", lock,
				strerror(-r));
			return RL_EXIT_ERROR;
		}
	}
	int rc = apply_journaled(journal, detach, owner);
	sys_lock_release(lock_fd);
	return rc;
}

int sys_open_journal(const char *journal, int *fdp, bool *held)
{
	int fd = open(journal, O_RDWR | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct stat rs;
	if (fstat(fd, &rs) != 0 || !S_ISREG(rs.st_mode)) {
		close(fd); /* a FIFO would block the read, a device is no journal */
		return -EBADMSG;
	}
	*held = false;
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		if (errno == EWOULDBLOCK)
			*held = true;
		else {
			int e = -errno;
			close(fd);
			return e;
		}
	}
	struct stat st;
	if (!*held && fstat(fd, &st) == 0 && st.st_nlink == 0) {
		/* its applier restored and removed it between our open and flock: gone, not stale */
		close(fd);
		return -ENOENT;
	}
	*fdp = fd;
	return 0;
}

int sys_cmd_restore(const char *journal)
{
	int fd = -1;
	bool held = false;
	int r = sys_open_journal(journal, &fd, &held);
	if (r == -ENOENT) {
		struct sys_restore_stats st = { 0 };
		emit_done("restore_done", journal, &st, false);
		return RL_EXIT_OK; /* idempotent: nothing to restore */
	}
	if (r) {
		fprintf(stderr, "rtlab-probe sys restore: cannot open %s: %s\n", journal, strerror(-r));
		return RL_EXIT_ERROR;
	}
	if (held) {
		fprintf(stderr,
			"rtlab-probe sys restore: %s is held by a live applier; stop that session "
			"(it restores by itself) instead\n",
			journal);
		close(fd);
		return RL_EXIT_ERROR;
	}
	signal(SIGPIPE, SIG_IGN);
	r = restore_locked(fd, journal, "restore_done");
	close(fd);
	return r;
}

