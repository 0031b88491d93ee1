/* SPDX-License-Identifier: MIT */
/* `rtlab-probe sys`: command line, the apply/hold loop, restore and status. */
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

#include "opts.h"
#include "preempt.h"
#include "sys.h"

static volatile sig_atomic_t sys_stop;

static void on_signal(int sig)
{
	sys_stop = sig;
}

static const struct opt_def sys_opts[] = {
	{ .name = "journal", .type = OPT_STRING, .metavar = "FILE",
	  .help = "journal file (e.g. /run/rtlab/NAME.journal)" },
	{ .name = "detach", .type = OPT_BOOL,
	  .help = "apply: exit after the last operation, leaving the changes" },
	{ .name = "root", .type = OPT_STRING, .metavar = "DIR",
	  .help = "preempt: read a copy of a board's /proc, /sys and /boot below DIR" },
};
#define N_SYS_OPTS (sizeof(sys_opts) / sizeof(sys_opts[0]))

static void sys_usage(FILE *f)
{
	fprintf(f,
		"usage: rtlab-probe sys facts\n"
		"       rtlab-probe sys preempt [--root DIR]             the preemption model\n"
		"       rtlab-probe sys apply --journal FILE [--detach]   ops (JSON Lines) on stdin\n"
		"       rtlab-probe sys restore --journal FILE\n"
		"       rtlab-probe sys status --journal FILE\n"
		"\nJournaled system changes, see docs/sys-protocol.md.\n\noptions:\n");
	opts_help(f, sys_opts, N_SYS_OPTS);
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
	int r = sys_slurp(fd, &text, &len);
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
	jw_obj_begin(&w, NULL);
	jw_str(&w, "type", type);
	jw_int(&w, "schema", SYS_SCHEMA);
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

static int cmd_apply(const char *journal, bool detach)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal; /* no SA_RESTART: read() returns EINTR */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN); /* a dead host must not kill us before we restore */

	int r = ensure_dir(journal);
	if (r) {
		fprintf(stderr, "rtlab-probe sys apply: cannot create the directory of %s: %s\n", journal,
			strerror(-r));
		return RL_EXIT_ERROR;
	}
	int fd = open(journal, O_RDWR | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0) {
		if (errno == EEXIST)
			fprintf(stderr,
				"rtlab-probe sys apply: %s exists: a live session or stale changes "
				"(restore them: rtlab restore, or rtlab-probe sys restore --journal %s)\n",
				journal, journal);
		else
			fprintf(stderr, "rtlab-probe sys apply: cannot create %s: %s\n", journal,
				strerror(errno));
		return RL_EXIT_ERROR;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		fprintf(stderr, "rtlab-probe sys apply: cannot lock %s: %s\n", journal, strerror(errno));
		close(fd);
		return RL_EXIT_ERROR;
	}
	struct sys_ctx c = { .journal_fd = fd, .detached = detach };
	jw_init(&c.jw);
	jw_obj_begin(&c.jw, NULL);
	jw_str(&c.jw, "type", "journal");
	jw_int(&c.jw, "schema", SYS_SCHEMA);
	jw_int(&c.jw, "pid", getpid());
	jw_uint(&c.jw, "starttime", sys_starttime(getpid()));
	jw_bool(&c.jw, "detached", detach);
	jw_str(&c.jw, "engine_version", RTLAB_VERSION);
	jw_uint(&c.jw, "time_ns", rl_now_ns(CLOCK_REALTIME));
	jw_obj_end(&c.jw);
	r = jw_emit(&c.jw, fd);
	if (!r && fsync(fd) != 0)
		r = -errno;
	if (r) {
		fprintf(stderr, "rtlab-probe sys apply: cannot write %s: %s\n", journal, strerror(-r));
		unlink(journal);
		close(fd);
		jw_free(&c.jw);
		return RL_EXIT_ERROR;
	}

	struct jsonw ans;
	jw_init(&ans);
	jw_obj_begin(&ans, NULL);
	jw_str(&ans, "type", "ready");
	jw_int(&ans, "schema", SYS_SCHEMA);
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
				jw_obj_begin(&ans, NULL);
				jw_str(&ans, "type", "applied");
				jw_int(&ans, "schema", SYS_SCHEMA);
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

static int open_locked(const char *journal, int *fdp, bool *held)
{
	int fd = open(journal, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
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
	*fdp = fd;
	return 0;
}

static int cmd_restore(const char *journal)
{
	int fd = -1;
	bool held = false;
	int r = open_locked(journal, &fd, &held);
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

static int cmd_status(const char *journal)
{
	int fd = -1;
	bool held = false;
	int r = open_locked(journal, &fd, &held);
	if (r) {
		fprintf(stderr, "rtlab-probe sys status: cannot open %s: %s\n", journal, strerror(-r));
		return r == -ENOENT ? RL_EXIT_SKIPPED : RL_EXIT_ERROR;
	}
	char *text;
	size_t len;
	r = sys_slurp(fd, &text, &len);
	if (!held)
		flock(fd, LOCK_UN);
	close(fd);
	if (r) {
		fprintf(stderr, "rtlab-probe sys status: cannot read %s: %s\n", journal, strerror(-r));
		return RL_EXIT_ERROR;
	}
	struct jsonw w;
	jw_init(&w);
	jw_obj_begin(&w, NULL);
	jw_str(&w, "type", "status");
	jw_int(&w, "schema", SYS_SCHEMA);
	jw_str(&w, "journal", journal);
	jw_bool(&w, "held", held);
	jw_obj_end(&w);
	(void)emit_line(&w, STDOUT_FILENO);
	jw_free(&w);
	/* The complete lines, verbatim (a torn last line is left out). */
	const char *last = len ? memrchr(text, '\n', len) : NULL;
	if (last)
		r = rl_write_all(STDOUT_FILENO, text, (size_t)(last - text) + 1);
	free(text);
	return r ? RL_EXIT_ERROR : RL_EXIT_OK;
}

int sys_main(int argc, char **argv)
{
	if (argc < 1 || strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0) {
		sys_usage(argc < 1 ? stderr : stdout);
		return argc < 1 ? RL_EXIT_USAGE : RL_EXIT_OK;
	}
	const char *sub = argv[0];
	struct opt_value vals[N_SYS_OPTS];
	cpu_set_t none;
	CPU_ZERO(&none);
	char err[512] = "";
	memset(vals, 0, sizeof(vals));
	int r = opts_parse(sys_opts, N_SYS_OPTS, argc - 1, argv + 1, &none, vals, err, sizeof(err));
	if (r == OPTS_HELP) {
		sys_usage(stdout);
		return RL_EXIT_OK;
	}
	if (r) {
		fprintf(stderr, "rtlab-probe sys %s: %s\n", sub, err);
		return RL_EXIT_USAGE;
	}
	const char *journal = vals[0].set ? vals[0].s : NULL;
	bool detach = vals[1].set && vals[1].i;
	const char *root = vals[2].set ? vals[2].s : NULL;
	if (root && strcmp(sub, "preempt") != 0) {
		fprintf(stderr, "rtlab-probe sys %s: --root is only for preempt\n", sub);
		return RL_EXIT_USAGE;
	}
	if (strcmp(sub, "preempt") == 0) {
		struct stat st;
		if (root && (stat(root, &st) != 0 || !S_ISDIR(st.st_mode))) {
			fprintf(stderr, "rtlab-probe sys preempt: --root %s is not a directory\n", root);
			return RL_EXIT_USAGE;
		}
		if (preempt_sys(root, STDOUT_FILENO) != 0) {
			fprintf(stderr, "rtlab-probe sys preempt: cannot write the answer\n");
			return RL_EXIT_ERROR;
		}
		return RL_EXIT_OK;
	}
	if (strcmp(sub, "facts") == 0) {
		r = sys_facts(STDOUT_FILENO);
		if (r) {
			fprintf(stderr, "rtlab-probe sys facts: %s\n", strerror(-r));
			return RL_EXIT_ERROR;
		}
		return RL_EXIT_OK;
	}
	bool known = strcmp(sub, "apply") == 0 || strcmp(sub, "restore") == 0 ||
		     strcmp(sub, "status") == 0;
	if (!known) {
		fprintf(stderr, "rtlab-probe sys: unknown sub-command '%s' (facts, preempt, apply, restore, status)\n",
			sub);
		return RL_EXIT_USAGE;
	}
	if (!journal || journal[0] != '/') {
		fprintf(stderr, "rtlab-probe sys %s: --journal FILE (an absolute path) is required\n", sub);
		return RL_EXIT_USAGE;
	}
	if (detach && strcmp(sub, "apply") != 0) {
		fprintf(stderr, "rtlab-probe sys %s: --detach is only for apply\n", sub);
		return RL_EXIT_USAGE;
	}
	if (geteuid() != 0 && strcmp(sub, "status") != 0) {
		fprintf(stderr, "rtlab-probe sys %s: skipped: needs root\n", sub);
		return RL_EXIT_SKIPPED;
	}
	if (strcmp(sub, "apply") == 0)
		return cmd_apply(journal, detach);
	if (strcmp(sub, "restore") == 0)
		return cmd_restore(journal);
	return cmd_status(journal);
}
