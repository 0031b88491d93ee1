/* SPDX-License-Identifier: MIT */
/*
 * The `sys` operations on tasks: affinity, scheduling, cgroup directories and moves
 * into them, and process groups the host spawned (sys_op.h).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "sys_op.h"
#include "trace_fs.h"
#include "sysfile.h"

static const char *const cgroup_prefixes[] = { "/sys/fs/cgroup/", NULL };

static const char *const policy_names[] = { "other", "fifo", "rr", "batch", NULL, "idle" };

static int policy_from_name(const char *s)
{
	for (int k = 0; k < 6; k++)
		if (policy_names[k] && strcmp(policy_names[k], s) == 0)
			return k;
	return -1;
}

static const char *policy_to_name(int p)
{
	p &= ~SCHED_RESET_ON_FORK;
	return (p >= 0 && p < 6 && policy_names[p]) ? policy_names[p] : "unknown";
}

/* The procs file of a cgroup directory: v1 `tasks` (per thread) or v2 `cgroup.procs`. */
static int procs_file(const char *dir, char *out, size_t len)
{
	if (snprintf(out, len, "%s/tasks", dir) >= (int)len)
		return -ENAMETOOLONG;
	if (access(out, F_OK) != 0 && snprintf(out, len, "%s/cgroup.procs", dir) >= (int)len)
		return -ENAMETOOLONG;
	return 0;
}

/*
 * The directory of tid's cgroup in the hierarchy mounted above `dir`:
 * longest cgroup mount point that prefixes dir, then tid's line whose
 * controllers are all among that mount's super options (v2: the "0::" line).
 */
static int task_cgroup_dir(int tid, const char *dir, char *out, size_t len)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return -errno;
	char line[4096], best_mnt[512] = "", best_opts[1024] = "";
	bool best_v2 = false;
	while (fgets(line, sizeof(line), f)) {
		struct sf_mount m;
		if (sf_mountinfo_line(line, &m) != 0)
			continue;
		if (strcmp(m.fstype, "cgroup") != 0 && strcmp(m.fstype, "cgroup2") != 0)
			continue;
		size_t ml = strlen(m.dir);
		if (strncmp(dir, m.dir, ml) != 0 || (dir[ml] != '/' && dir[ml] != '\0'))
			continue;
		if (ml > strlen(best_mnt)) {
			snprintf(best_mnt, sizeof(best_mnt), "%s", m.dir);
			if (snprintf(best_opts, sizeof(best_opts), ",%s,", m.opts) >=
			    (int)sizeof(best_opts))
				continue;
			best_v2 = strcmp(m.fstype, "cgroup2") == 0;
		}
	}
	fclose(f);
	if (!best_mnt[0])
		return -EINVAL;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/cgroup", tid);
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	int r = -ENOENT;
	while (fgets(line, sizeof(line), f)) {
		char *ctrl, *rel;
		if (sf_cgroup_line(line, &ctrl, &rel) != 0)
			continue;
		bool match;
		if (best_v2) {
			match = *ctrl == '\0';
		} else {
			match = *ctrl != '\0';
			char *save = NULL;
			for (char *t = strtok_r(ctrl, ",", &save); t && match;
			     t = strtok_r(NULL, ",", &save)) {
				char tok[128];
				if (snprintf(tok, sizeof(tok), ",%s,", t) >= (int)sizeof(tok) ||
				    !strstr(best_opts, tok))
					match = false;
			}
		}
		if (match) {
			snprintf(out, len, "%s%s", best_mnt, strcmp(rel, "/") == 0 ? "" : rel);
			r = 0;
			break;
		}
	}
	fclose(f);
	return r;
}

static int move_task(int tid, const char *dir)
{
	char pf[1100], num[32];
	int r = procs_file(dir, pf, sizeof(pf));
	if (r)
		return r;
	snprintf(num, sizeof(num), "%d", tid);
	return sf_write(pf, num);
}

/* The task still is the one journaled (same start time)? */
static bool same_task(const struct sj_obj *e, int tid)
{
	int64_t st;
	if (sj_int(e, "starttime", &st))
		return true; /* not recorded */
	uint64_t now = sf_starttime(tid);
	return now != 0 && (int64_t)now == st;
}

/* A journal record of a change to task tid: its op, the tid and its start time (the
 * restore leaves a task alone whose tid was reused by another). */
static void journal_task_begin(struct sys_ctx *c, const char *op, int64_t tid)
{
	sys_journal_begin(c, op);
	jw_int(&c->jw, "tid", tid);
	jw_uint(&c->jw, "starttime", sf_starttime((int)tid));
}

int sys_apply_affinity(struct sys_ctx *c, const struct sj_obj *o, struct jsonw *a)
{
	int64_t tid;
	const int64_t *arr;
	size_t n;
	int bad;
	cpu_set_t want, old, now;
	if (sj_int(o, "tid", &tid) || tid <= 0 || tid > INT32_MAX || sj_intarr(o, "cpus", &arr, &n) || !n)
		return sys_ans_fail(a, EINVAL, "affinity needs tid (>0) and a non-empty cpus array");
	sys_cpus_from_arr(arr, n, &want, &bad);
	if (bad)
		return sys_ans_fail(a, EINVAL, "affinity: cpu number out of range");
	if (sched_getaffinity((pid_t)tid, sizeof(old), &old) != 0)
		return sys_ans_fail(a, errno, "cannot read affinity of %lld: %s", (long long)tid, strerror(errno));
	journal_task_begin(c, "affinity", tid);
	jw_cpuset(&c->jw, "cpus", &want);
	jw_cpuset(&c->jw, "old", &old);
	int r = sys_journal_commit(c);
	if (r)
		return r;
	if (sched_setaffinity((pid_t)tid, sizeof(want), &want) != 0) {
		int e = errno;
		if ((r = sys_journal_cancel(c)))
			return r;
		return sys_ans_fail(a, e, "cannot set affinity of %lld: %s", (long long)tid, strerror(e));
	}
	jw_cpuset(a, "old", &old);
	if (sched_getaffinity((pid_t)tid, sizeof(now), &now) == 0)
		jw_cpuset(a, "new", &now);
	else
		jw_null(a, "new");
	return sys_ans_ok(a);
}

/* key: the journal field with the CPUs to put back */
static enum rres set_affinity_back(const struct sj_obj *e, const char *key, int *err)
{
	int64_t tid;
	const int64_t *arr;
	size_t n;
	int bad;
	cpu_set_t set;
	if (sj_int(e, "tid", &tid) || sj_intarr(e, key, &arr, &n))
		return *err = EINVAL, RS_FAILED;
	if (!same_task(e, (int)tid))
		return RS_GONE;
	sys_cpus_from_arr(arr, n, &set, &bad);
	if (bad || !n)
		return *err = EINVAL, RS_FAILED;
	/* EINVAL: no CPU of the set is in the task's cpuset yet. A cgroup removed just
	 * before (the shield's partition, restored first) gives its CPUs back to its
	 * parent asynchronously, once the kernel has taken it offline: retry for 1 s. */
	for (int tries = 0;; tries++) {
		if (sched_setaffinity((pid_t)tid, sizeof(set), &set) == 0)
			return RS_OK;
		if (errno == ESRCH)
			return RS_GONE;
		if (errno != EINVAL || tries >= 100)
			return *err = errno, RS_FAILED;
		struct timespec ts = { .tv_sec = 0, .tv_nsec = 10 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
}

enum rres sys_restore_affinity(const struct sj_obj *e, const struct sys_restore_env *env,
			       int *err)
{
	(void)env;
	return set_affinity_back(e, "old", err);
}

/*
 * Another thread's scheduling by the raw system calls: musl's sched_setscheduler,
 * sched_getscheduler and sched_getparam fail with ENOSYS by design (POSIX means the
 * process, Linux the thread), and the board engines are built against musl. -errno.
 */
static int set_sched(pid_t tid, int policy, int prio)
{
	struct sched_param sp = { .sched_priority = prio };
	return syscall(SYS_sched_setscheduler, tid, policy, &sp) == 0 ? 0 : -errno;
}

static int get_sched(pid_t tid, int *policy, struct sched_param *sp)
{
	long p = syscall(SYS_sched_getscheduler, tid);
	if (p < 0 || syscall(SYS_sched_getparam, tid, sp) != 0)
		return -errno;
	*policy = (int)p;
	return 0;
}

int sys_apply_sched(struct sys_ctx *c, const struct sj_obj *o, struct jsonw *a)
{
	int64_t tid, prio;
	const char *pol;
	if (sj_int(o, "tid", &tid) || tid <= 0 || tid > INT32_MAX || sj_str(o, "policy", &pol) ||
	    sj_int(o, "priority", &prio))
		return sys_ans_fail(a, EINVAL, "sched needs tid, policy and priority");
	int policy = policy_from_name(pol);
	if (policy < 0)
		return sys_ans_fail(a, EINVAL, "sched: policy must be fifo, rr, other, batch or idle: %s", pol);
	bool rt = policy == SCHED_FIFO || policy == SCHED_RR;
	if ((rt && (prio < 1 || prio > 99)) || (!rt && prio != 0))
		return sys_ans_fail(a, EINVAL, "sched: priority must be 1..99 for fifo/rr, 0 otherwise");
	int oldp;
	struct sched_param osp;
	int ge = get_sched((pid_t)tid, &oldp, &osp);
	if (ge)
		return sys_ans_fail(a, -ge, "cannot read scheduling of %lld: %s", (long long)tid, strerror(-ge));
	journal_task_begin(c, "sched", tid);
	jw_str(&c->jw, "policy", pol);
	jw_int(&c->jw, "priority", prio);
	jw_str(&c->jw, "old_policy", policy_to_name(oldp));
	jw_int(&c->jw, "old_priority", osp.sched_priority);
	int r = sys_journal_commit(c);
	if (r)
		return r;
	r = set_sched((pid_t)tid, policy, (int)prio);
	if (r) {
		int jr = sys_journal_cancel(c);
		if (jr)
			return jr;
		return sys_ans_fail(a, -r, "cannot set scheduling of %lld: %s", (long long)tid, strerror(-r));
	}
	jw_str(a, "old_policy", policy_to_name(oldp));
	jw_int(a, "old_priority", osp.sched_priority);
	int np;
	struct sched_param nsp = { 0 };
	if (get_sched((pid_t)tid, &np, &nsp) == 0) {
		jw_str(a, "new_policy", policy_to_name(np));
		jw_int(a, "new_priority", nsp.sched_priority);
	}
	return sys_ans_ok(a);
}

enum rres sys_restore_sched(const struct sj_obj *e, const struct sys_restore_env *env, int *err)
{
	(void)env;
	int64_t tid, prio;
	const char *pol;
	if (sj_int(e, "tid", &tid) || sj_str(e, "old_policy", &pol) || sj_int(e, "old_priority", &prio))
		return *err = EINVAL, RS_FAILED;
	if (!same_task(e, (int)tid))
		return RS_GONE;
	int p = policy_from_name(pol);
	if (p < 0)
		return *err = EINVAL, RS_FAILED;
	int r = set_sched((pid_t)tid, p, (int)prio);
	if (r == -ESRCH)
		return RS_GONE;
	return r ? (*err = -r, RS_FAILED) : RS_OK;
}

int sys_apply_mkdir(struct sys_ctx *c, const struct sj_obj *o, struct jsonw *a)
{
	const char *path;
	if (sj_str(o, "path", &path) ||
	    (!sys_path_ok(path, cgroup_prefixes) && !tfs_instance_path(path)))
		return sys_ans_fail(a, EINVAL,
				    "mkdir needs a path under /sys/fs/cgroup/ or a tracefs instance (TRACEFS/instances/NAME)");
	struct stat st;
	if (stat(path, &st) == 0)
		return sys_ans_fail(a, EEXIST, "%s exists already (left over? run `rtlab restore`)", path);
	sys_journal_begin(c, "mkdir");
	jw_str(&c->jw, "path", path);
	int r = sys_journal_commit(c);
	if (r)
		return r;
	if (mkdir(path, 0755) != 0) {
		int e = errno;
		if ((r = sys_journal_cancel(c)))
			return r;
		return sys_ans_fail(a, e, "cannot create %s: %s", path, strerror(e));
	}
	return sys_ans_ok(a);
}

/* Move what is left in dir to its parent, then remove it. */
enum rres sys_restore_mkdir(const struct sj_obj *e, const struct sys_restore_env *env, int *err)
{
	(void)env;
	const char *path;
	if (sj_str(e, "path", &path))
		return *err = EINVAL, RS_FAILED;
	struct stat st;
	if (stat(path, &st) != 0)
		return RS_GONE;
	if (tfs_instance_path(path)) {
		/* a tracefs instance: rmdir removes its events, buffers and files */
		int r = tfs_instance_remove(path);
		return r ? (*err = -r, RS_FAILED) : RS_OK;
	}
	char parent[1100];
	snprintf(parent, sizeof(parent), "%s", path);
	char *slash = strrchr(parent, '/');
	if (!slash || slash == parent)
		return *err = EINVAL, RS_FAILED;
	*slash = '\0';
	for (int attempt = 0; attempt < 40; attempt++) {
		char pf[1100], *text = NULL;
		if (procs_file(path, pf, sizeof(pf)) == 0 && sf_read_text(pf, &text) == 0) {
			char *save = NULL;
			for (char *t = strtok_r(text, "\n", &save); t; t = strtok_r(NULL, "\n", &save)) {
				int r = move_task(atoi(t), parent);
				(void)r; /* exited meanwhile, or a per-CPU thread: rmdir tells */
			}
			free(text);
		}
		if (rmdir(path) == 0 || errno == ENOENT)
			return RS_OK;
		*err = errno;
		struct timespec ts = { 0, 25 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	return RS_FAILED;
}

int sys_apply_move(struct sys_ctx *c, const struct sj_obj *o, struct jsonw *a)
{
	int64_t tid;
	const char *dir;
	if (sj_int(o, "tid", &tid) || tid <= 0 || tid > INT32_MAX || sj_str(o, "cgroup", &dir) ||
	    !sys_path_ok(dir, cgroup_prefixes))
		return sys_ans_fail(a, EINVAL, "move needs tid and a cgroup directory under /sys/fs/cgroup/");
	char old[1024];
	int r = task_cgroup_dir((int)tid, dir, old, sizeof(old));
	if (r)
		return sys_ans_fail(a, -r, "cannot find the cgroup of %lld for %s: %s", (long long)tid, dir,
				strerror(-r));
	cpu_set_t oaff;
	if (sched_getaffinity((pid_t)tid, sizeof(oaff), &oaff) != 0)
		return sys_ans_fail(a, errno, "cannot read affinity of %lld: %s", (long long)tid, strerror(errno));
	journal_task_begin(c, "move", tid);
	jw_str(&c->jw, "cgroup", dir);
	jw_str(&c->jw, "old", old);
	jw_cpuset(&c->jw, "old_affinity", &oaff);
	if ((r = sys_journal_commit(c)))
		return r;
	r = move_task((int)tid, dir);
	if (r) {
		int jr = sys_journal_cancel(c);
		if (jr)
			return jr;
		return sys_ans_fail(a, -r, "cannot move %lld to %s: %s", (long long)tid, dir, strerror(-r));
	}
	jw_str(a, "old", old);
	cpu_set_t now;
	if (sched_getaffinity((pid_t)tid, sizeof(now), &now) == 0)
		jw_cpuset(a, "affinity", &now);
	return sys_ans_ok(a);
}

enum rres sys_restore_move(const struct sj_obj *e, const struct sys_restore_env *env, int *err)
{
	(void)env;
	int64_t tid;
	const char *old;
	if (sj_int(e, "tid", &tid) || sj_str(e, "old", &old))
		return *err = EINVAL, RS_FAILED;
	if (!same_task(e, (int)tid))
		return RS_GONE;
	int r = move_task((int)tid, old);
	if (r == -ESRCH)
		return RS_GONE;
	if (r)
		return *err = -r, RS_FAILED;
	/* Attaching to a v1 cpuset resets the affinity: put the old one back. */
	if (sj_get(e, "old_affinity")) {
		enum rres rr = set_affinity_back(e, "old_affinity", err);
		if (rr == RS_FAILED)
			return rr;
	}
	return RS_OK;
}

int sys_apply_spawned(struct sys_ctx *c, const struct sj_obj *o, struct jsonw *a)
{
	int64_t pgid, st;
	if (sj_int(o, "pgid", &pgid) || pgid <= 1 || pgid > INT32_MAX || sj_int(o, "starttime", &st) || st < 0)
		return sys_ans_fail(a, EINVAL, "spawned needs pgid (>1) and starttime");
	if (pgid == getpgrp())
		return sys_ans_fail(a, EINVAL, "spawned: pgid %lld is the applier's own group", (long long)pgid);
	sys_journal_begin(c, "spawned");
	jw_int(&c->jw, "pgid", pgid);
	jw_int(&c->jw, "starttime", st);
	int r = sys_journal_commit(c);
	return r ? r : sys_ans_ok(a);
}

enum rres sys_restore_spawned(const struct sj_obj *e, const struct sys_restore_env *env,
			      int *err)
{
	(void)env;
	int64_t pgid, st;
	if (sj_int(e, "pgid", &pgid) || sj_int(e, "starttime", &st) || pgid <= 1)
		return *err = EINVAL, RS_FAILED;
	uint64_t now = sf_starttime((int)pgid);
	if (now == 0 || (int64_t)now != st) {
		/* Leader gone (or a new process with that pid): is the group alive? */
		if (now != 0 || kill(-(pid_t)pgid, 0) != 0)
			return RS_GONE;
	}
	if (kill(-(pid_t)pgid, SIGTERM) != 0)
		return errno == ESRCH ? RS_GONE : (*err = errno, RS_FAILED);
	for (int k = 0; k < 40; k++) {
		struct timespec ts = { 0, 50 * 1000 * 1000 };
		nanosleep(&ts, NULL);
		if (kill(-(pid_t)pgid, 0) != 0)
			return RS_OK;
	}
	if (kill(-(pid_t)pgid, SIGKILL) != 0 && errno != ESRCH)
		return *err = errno, RS_FAILED;
	return RS_OK;
}
