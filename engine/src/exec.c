/* SPDX-License-Identifier: MIT */
/*
 * `rtlab-probe exec` (exec.h): an external tool as a load the engine owns. The
 * parent forks CMD into a new process group and then only waits in
 * sigwaitinfo: for CMD's end (SIGCHLD) or for a stop (SIGINT/SIGTERM/SIGHUP; the
 * lifeline thread turns stdin EOF into a SIGTERM). Whatever the end, nothing of
 * the group is left when it exits: leftovers get SIGTERM, then SIGKILL.
 */
#include "exec.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "jsonw.h"
#include "lifeline.h"
#include "opts.h"
#include "output.h"
#include "procgroup.h"
#include "sysfile.h"
#include "version.h"

/* execvp's search path when PATH is not set */
#define EXEC_DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define EXEC_POLL_NS (50 * NS_PER_MS)
#define EXEC_CHILD_FAILED 127

enum { X_CPUS, X_COUNT };

static const struct opt_def exec_opts[X_COUNT] = {
	[X_CPUS] = { "cpus", OPT_CPULIST, NULL,
		     "CPU affinity of CMD, of what it starts and of this process (like taskset)",
		     0, 0, NULL, NULL, "those of exec" },
};

/* What the child tells the parent, through a close-on-exec pipe, when CMD did not start. */
enum child_stage { STAGE_STDIO = 1, STAGE_EXEC };
struct child_report {
	int stage;
	int err;
};

struct exec_run {
	pid_t pid;		/* CMD: leader of the group pid */
	bool leader_done;	/* reaped */
	int leader_status;	/* its waitpid status */
	bool killed;		/* SIGKILL was needed */
};

int exec_parse(int argc, char *const *argv, const cpu_set_t *online, struct exec_cfg *cfg,
	       char *err, size_t errlen)
{
	int dd = -1;
	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0) {
			dd = i;
			break;
		}
	}
	if (dd < 0 && argc > 0 && argv[0][0] != '-') {
		snprintf(err, errlen, "give the command after --, e.g. exec -- %s ...", argv[0]);
		return -EINVAL;
	}
	struct opt_value v[X_COUNT];
	int r = opts_parse(exec_opts, X_COUNT, dd < 0 ? argc : dd, argv, online, v, err, errlen);
	if (r)
		return r;
	memset(cfg, 0, sizeof(*cfg));
	cfg->have_cpus = v[X_CPUS].given;
	if (cfg->have_cpus)
		cfg->cpus = v[X_CPUS].cpus;
	if (dd < 0 || dd + 1 >= argc || argv[dd + 1][0] == '\0') {
		snprintf(err, errlen, "give the command after --, e.g. exec -- stress-ng --cpu 1");
		return -EINVAL;
	}
	cfg->cmd_argc = argc - dd - 1;
	cfg->cmd_argv = argv + dd + 1;
	return 0;
}

void exec_help(FILE *f)
{
	fprintf(f,
		"usage: rtlab-probe [--tee FILE] [--stdin-lifeline] exec [OPTIONS] -- CMD [ARGS...]\n\n"
		"Run CMD (a load tool such as stress-ng) as the leader of its own process group,\n"
		"killed when this process dies. JSON lines on stdout: an `exec` record (pid, pgid,\n"
		"starttime) once CMD runs, an `exec_done` record at the end. CMD's stdout goes to\n"
		"stderr. A stop (SIGINT/SIGTERM/SIGHUP, or stdin EOF with --stdin-lifeline) sends\n"
		"SIGTERM to the group, SIGKILL after 2 s. Exit code: CMD's (128+N: signal N),\n"
		"130 when stopped, 4 when CMD is not found (see docs/engine.md).\n\noptions:\n");
	opts_help(f, exec_opts, X_COUNT);
	fprintf(f, "  %-28s show this help\n", "--help");
}

int exec_resolve(const char *name, const char *path, char *out, size_t outlen)
{
	if (!name[0])
		return -ENOENT;
	if (strchr(name, '/')) {
		int n = snprintf(out, outlen, "%s", name);
		return n > 0 && (size_t)n < outlen ? 0 : -ENAMETOOLONG;
	}
	const char *p = path ? path : EXEC_DEFAULT_PATH;
	for (;;) {
		const char *colon = strchr(p, ':');
		size_t len = colon ? (size_t)(colon - p) : strlen(p);
		const char *dir = len ? p : "."; /* an empty element is the current directory */
		int n = snprintf(out, outlen, "%.*s/%s", (int)(len ? len : 1), dir, name);
		struct stat st;
		if (n > 0 && (size_t)n < outlen && stat(out, &st) == 0 && S_ISREG(st.st_mode) &&
		    access(out, X_OK) == 0)
			return 0;
		if (!colon)
			return -ENOENT;
		p = colon + 1;
	}
}

/*
 * The child between fork and exec: only async-signal-safe calls. Never returns. It
 * inherits the --cpus affinity from the parent.
 */
static void child_run(const struct exec_cfg *c, const char *path, int report_fd, pid_t parent)
{
	struct child_report rep = { 0, 0 };
	(void)setpgid(0, 0);
	if (!procgroup_child_tie(parent)) /* dies with the exec process, even after kill -9 */
		_exit(EXEC_CHILD_FAILED);
	/* stdin: not the host's lifeline; stdout: kept for the engine's JSON lines */
	int nul = open("/dev/null", O_RDWR);
	if (nul < 0 || dup2(nul, STDIN_FILENO) < 0) {
		rep = (struct child_report){ STAGE_STDIO, errno };
		goto fail;
	}
	if (dup2(STDERR_FILENO, STDOUT_FILENO) < 0 && dup2(nul, STDOUT_FILENO) < 0) {
		rep = (struct child_report){ STAGE_STDIO, errno };
		goto fail;
	}
	if (nul > STDERR_FILENO)
		close(nul);
	/* what the engine changed must not reach CMD (an ignored SIGPIPE survives exec) */
	signal(SIGPIPE, SIG_DFL);
	procgroup_child_signals();
	execv(path, c->cmd_argv);
	rep = (struct child_report){ STAGE_EXEC, errno };
fail:
	if (write(report_fd, &rep, sizeof(rep)) != (ssize_t)sizeof(rep)) {
		/* the parent then sees the exit status only */
	}
	_exit(EXEC_CHILD_FAILED);
}

/* Reap every child that ended: CMD, and workers of its group orphaned to us. */
static void reap(struct exec_run *r)
{
	for (;;) {
		int st;
		pid_t p = waitpid(-1, &st, WNOHANG);
		if (p < 0 && errno == EINTR)
			continue;
		if (p <= 0)
			return;
		if (p == r->pid) {
			r->leader_done = true;
			r->leader_status = st;
		}
	}
}

static bool group_empty(struct exec_run *r)
{
	reap(r);
	return kill(-r->pid, 0) != 0 && errno == ESRCH;
}

/* Wait until no process of the group is left, or wait_ns passed; true when empty. */
static bool wait_group_empty(struct exec_run *r, uint64_t wait_ns)
{
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	uint64_t end = rl_now_ns(CLOCK_MONOTONIC) + wait_ns;
	for (;;) {
		if (group_empty(r))
			return true;
		uint64_t now = rl_now_ns(CLOCK_MONOTONIC);
		if (now >= end)
			return false;
		/* SIGCHLD for our children; a poll for members reaped by their own parents */
		struct timespec ts = rl_ns_to_ts(end - now < EXEC_POLL_NS ? end - now : EXEC_POLL_NS);
		(void)sigtimedwait(&chld, NULL, &ts);
	}
}

/* End whatever is left of the group: SIGTERM, SIGKILL after the grace time. */
static bool end_group(struct exec_run *r)
{
	if (group_empty(r))
		return true;
	kill(-r->pid, SIGTERM);
	kill(-r->pid, SIGCONT); /* a stopped member must see the SIGTERM */
	if (wait_group_empty(r, EXEC_GRACE_NS))
		return true;
	r->killed = true;
	kill(-r->pid, SIGKILL);
	return wait_group_empty(r, EXEC_KILL_WAIT_NS);
}

/*
 * Wait for CMD's end (returns 0) or a stop signal (returns that signal; *eof when
 * it came from the lifeline thread, i.e. stdin reached EOF).
 */
static int wait_end(struct exec_run *r, const sigset_t *set, bool *eof)
{
	for (;;) {
		siginfo_t si;
		int sig = sigwaitinfo(set, &si);
		if (sig < 0)
			continue; /* EINTR */
		if (sig == SIGCHLD) {
			reap(r);
			if (r->leader_done)
				return 0;
			continue;
		}
		*eof = si.si_code == SI_USER && si.si_pid == getpid();
		return sig;
	}
}

static void write_start(struct jsonw *w, const struct exec_cfg *c, const char *path, pid_t pid)
{
	out_record_begin(w, "exec");
	jw_str(w, "engine_version", RTLAB_VERSION);
	jw_int(w, "pid", pid);
	jw_int(w, "pgid", pid);
	jw_uint(w, "starttime", sf_starttime(pid));
	jw_int(w, "exec_pid", getpid());
	jw_uint(w, "start_realtime_ns", rl_now_ns(CLOCK_REALTIME));
	jw_str(w, "path", path);
	if (c->have_cpus)
		jw_cpuset(w, "cpus", &c->cpus);
	else
		jw_null(w, "cpus");
	jw_arr_begin(w, "argv");
	for (int i = 0; i < c->cmd_argc; i++)
		jw_str(w, NULL, c->cmd_argv[i]);
	jw_arr_end(w);
	jw_obj_end(w);
}

static const char *stop_name(int sig)
{
	switch (sig) {
	case SIGINT:
		return "SIGINT";
	case SIGHUP:
		return "SIGHUP";
	default:
		return "SIGTERM";
	}
}

static void write_done(struct jsonw *w, const struct exec_run *r, int stop, bool eof,
		       bool empty, int code, uint64_t elapsed)
{
	int st = r->leader_status;
	out_record_begin(w, "exec_done");
	jw_int(w, "pid", r->pid);
	jw_int_or_null(w, "status", r->leader_done && WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	jw_int_or_null(w, "signal", r->leader_done && WIFSIGNALED(st) ? WTERMSIG(st) : -1);
	jw_bool(w, "stopped", stop != 0);
	if (stop)
		jw_str(w, "stop", eof ? "stdin_eof" : stop_name(stop));
	else
		jw_null(w, "stop");
	jw_bool(w, "killed", r->killed);
	jw_bool(w, "group_empty", empty);
	jw_int(w, "exit_code", code);
	jw_uint(w, "elapsed_ns", elapsed);
	jw_uint(w, "end_realtime_ns", rl_now_ns(CLOCK_REALTIME));
	jw_obj_end(w);
}

/* CMD did not start: one line naming it; the exit code. */
static int start_failed(const struct exec_cfg *c, const struct child_report *rep)
{
	const char *name = c->cmd_argv[0];
	if (rep->stage == STAGE_EXEC && (rep->err == ENOENT || rep->err == ENOTDIR)) {
		fprintf(stderr, "rtlab-probe exec: %s: not found on this machine\n", name);
		return RL_EXIT_SKIPPED;
	}
	if (rep->stage == STAGE_EXEC && (rep->err == EACCES || rep->err == ENOEXEC)) {
		fprintf(stderr, "rtlab-probe exec: %s: cannot be run on this machine: %s\n", name,
			strerror(rep->err));
		return RL_EXIT_SKIPPED;
	}
	fprintf(stderr, "rtlab-probe exec: cannot start %s: %s\n", name, strerror(rep->err));
	return RL_EXIT_ERROR;
}

int exec_main(int argc, char **argv, const struct probe_env *env, bool lifeline)
{
	struct exec_cfg cfg;
	char err[512] = "";
	int r = exec_parse(argc, argv, env->online, &cfg, err, sizeof(err));
	if (r == OPTS_HELP) {
		exec_help(stdout);
		return RL_EXIT_OK;
	}
	if (r) {
		fprintf(stderr, "rtlab-probe exec: %s\n", err);
		return RL_EXIT_USAGE;
	}
	char path[4096];
	if (exec_resolve(cfg.cmd_argv[0], getenv("PATH"), path, sizeof(path)) != 0) {
		fprintf(stderr, "rtlab-probe exec: %s: not found on this machine (not in PATH)\n",
			cfg.cmd_argv[0]);
		return RL_EXIT_SKIPPED;
	}

	/*
	 * --cpus: this process too (it only waits, beside its load), set before the lifeline
	 * thread exists (affinity is per thread) and inherited by CMD.
	 */
	if (cfg.have_cpus && sched_setaffinity(0, sizeof(cfg.cpus), &cfg.cpus) != 0) {
		char l[256];
		opt_format_cpulist(&cfg.cpus, l, sizeof(l));
		fprintf(stderr, "rtlab-probe exec: --cpus %s: cannot run there: %s (is it in this "
			"cpuset?)\n", l, strerror(errno));
		return RL_EXIT_ERROR;
	}

	/* Stop signals and SIGCHLD are taken by sigwaitinfo only (the child unblocks them). */
	sigset_t set;
	procgroup_wait_signals(&set);
	/* workers orphaned inside the group become our children: reaped, counted as gone */
	(void)prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
	if (lifeline && (r = lifeline_start()) != 0) {
		fprintf(stderr, "rtlab-probe exec: cannot start the stdin lifeline: %s\n",
			strerror(-r));
		return RL_EXIT_ERROR;
	}

	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) != 0) {
		fprintf(stderr, "rtlab-probe exec: pipe: %s\n", strerror(errno));
		return RL_EXIT_ERROR;
	}
	uint64_t start = rl_now_ns(CLOCK_MONOTONIC);
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "rtlab-probe exec: fork: %s\n", strerror(errno));
		close(pfd[0]);
		close(pfd[1]);
		return RL_EXIT_ERROR;
	}
	if (pid == 0)
		child_run(&cfg, path, pfd[1], parent);
	close(pfd[1]);
	(void)setpgid(pid, pid); /* as the child does: the group exists before any kill(-pid) */
	struct child_report rep;
	ssize_t n;
	do
		n = read(pfd[0], &rep, sizeof(rep));
	while (n < 0 && errno == EINTR);
	close(pfd[0]);
	struct exec_run run = { .pid = pid };
	if (n != 0) { /* EOF means the exec succeeded (the pipe was close-on-exec) */
		if (n != (ssize_t)sizeof(rep))
			rep = (struct child_report){ STAGE_EXEC, EIO };
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
		}
		return start_failed(&cfg, &rep);
	}

	struct jsonw w;
	jw_init(&w);
	write_start(&w, &cfg, path, pid); /* CMD is not reaped yet: its start time is readable */
	if (jw_emit(&w, STDOUT_FILENO) != 0) {
		/* a lost stdout (the host went away) changes nothing here: the lifeline stops us */
	}

	bool eof = false;
	int stop = wait_end(&run, &set, &eof);
	bool empty = end_group(&run);
	int code;
	if (stop)
		code = RL_EXIT_INTERRUPTED;
	else if (WIFEXITED(run.leader_status))
		code = WEXITSTATUS(run.leader_status);
	else
		code = 128 + WTERMSIG(run.leader_status);
	if (!empty) {
		fprintf(stderr, "rtlab-probe exec: processes of group %d are still there after "
			"SIGKILL\n", (int)pid);
		code = RL_EXIT_ERROR;
	}
	write_done(&w, &run, stop, eof, empty, code, rl_now_ns(CLOCK_MONOTONIC) - start);
	if (jw_emit(&w, STDOUT_FILENO) != 0) {
		/* nobody to tell: the exit code still says how CMD ended */
	}
	jw_free(&w);
	return code;
}
