/* SPDX-License-Identifier: MIT */
/*
 * The `sys` primitives: apply one operation (journal first, then change, then
 * read back) and restore journal entries in reverse order.
 */
#include <errno.h>
#include <net/if.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "opts.h"
#include "sys.h"
#include "sys_hwts.h"
#include "sysfile.h"

static bool path_ok(const char *p, const char *const *prefixes)
{
	if (!p || p[0] != '/' || strstr(p, "/../") || strstr(p, "/./") ||
	    strlen(p) > 1024)
		return false;
	size_t l = strlen(p);
	if (l >= 3 && strcmp(p + l - 3, "/..") == 0)
		return false;
	for (size_t k = 0; prefixes[k]; k++)
		if (strncmp(p, prefixes[k], strlen(prefixes[k])) == 0)
			return true;
	return false;
}

static const char *const write_prefixes[] = { "/proc/sys/", "/proc/irq/", "/sys/", NULL };
static const char *const cgroup_prefixes[] = { "/sys/fs/cgroup/", NULL };
static const char *const hold_prefixes[] = { "/dev/cpu_dma_latency", NULL };

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
		char *sep = strstr(line, " - ");
		char mnt[512], fstype[64], src[256], sopts[1024];
		if (!sep || sscanf(line, "%*s %*s %*s %*s %511s", mnt) != 1 ||
		    sscanf(sep + 3, "%63s %255s %1023s", fstype, src, sopts) != 3)
			continue;
		if (strcmp(fstype, "cgroup") != 0 && strcmp(fstype, "cgroup2") != 0)
			continue;
		size_t ml = strlen(mnt);
		if (strncmp(dir, mnt, ml) != 0 || (dir[ml] != '/' && dir[ml] != '\0'))
			continue;
		if (ml > strlen(best_mnt)) {
			snprintf(best_mnt, sizeof(best_mnt), "%s", mnt);
			if (snprintf(best_opts, sizeof(best_opts), ",%s,", sopts) >=
			    (int)sizeof(best_opts))
				continue;
			best_v2 = strcmp(fstype, "cgroup2") == 0;
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
		line[strcspn(line, "\n")] = '\0';
		char *c1 = strchr(line, ':');
		char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		*c2 = '\0';
		char *ctrl = c1 + 1;
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
			const char *rel = c2 + 1;
			snprintf(out, len, "%s%s", best_mnt, strcmp(rel, "/") == 0 ? "" : rel);
			r = 0;
			break;
		}
	}
	fclose(f);
	return r;
}

static void cpus_from_arr(const int64_t *a, size_t n, cpu_set_t *set, int *bad)
{
	CPU_ZERO(set);
	*bad = 0;
	for (size_t k = 0; k < n; k++) {
		if (a[k] < 0 || a[k] >= CPU_SETSIZE) {
			*bad = 1;
			return;
		}
		CPU_SET((int)a[k], set);
	}
}

/* ---- journal ---- */

static void jhead(struct sys_ctx *c, const char *op)
{
	jw_reset(&c->jw);
	jw_obj_begin(&c->jw, NULL);
	jw_int(&c->jw, "schema", SYS_SCHEMA);
	jw_uint(&c->jw, "seq", c->seq);
	jw_str(&c->jw, "op", op);
}

/* Close the journal object, write it and fsync. */
static int jcommit(struct sys_ctx *c)
{
	jw_uint(&c->jw, "time_ns", rl_now_ns(CLOCK_REALTIME));
	jw_obj_end(&c->jw);
	if (c->journal_fd < 0) {
		jw_reset(&c->jw);
		return 0;
	}
	int r = jw_emit(&c->jw, c->journal_fd);
	if (!r && fsync(c->journal_fd) != 0)
		r = -errno;
	return r;
}

/* The change failed after it was journaled: mark the entry void. */
static int jcancel(struct sys_ctx *c)
{
	jhead(c, "cancel");
	return jcommit(c);
}

/* ---- answers ---- */

static void ans_begin(struct jsonw *a, uint64_t seq, const char *op)
{
	jw_reset(a);
	sys_record_begin(a, "applied");
	jw_uint(a, "seq", seq);
	jw_str(a, "op", op ? op : "?");
}

static int ans_fail(struct jsonw *a, int err, const char *fmt, ...) RL_PRINTF(3, 4);
static int ans_fail(struct jsonw *a, int err, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	jw_bool(a, "ok", false);
	jw_int(a, "errno", err);
	jw_str(a, "error", msg);
	jw_obj_end(a);
	return 0;
}

static int ans_ok(struct jsonw *a)
{
	jw_bool(a, "ok", true);
	jw_obj_end(a);
	return 0;
}

/* ---- operations ---- */

static int op_write(struct sys_ctx *c, const struct sj_obj *o, struct jsonw *a)
{
	const char *path, *value, *undo = NULL;
	if (sj_str(o, "path", &path) || sj_str(o, "value", &value) ||
	    (sj_get(o, "undo") && sj_str(o, "undo", &undo)))
		return ans_fail(a, EINVAL, "write needs string fields path and value (and optional undo)");
	if (!path_ok(path, write_prefixes))
		return ans_fail(a, EINVAL, "write: path must be under /proc/sys, /proc/irq or /sys: %s", path);
	char *old = NULL;
	int r = sf_read_text(path, &old);
	if (r)
		return ans_fail(a, -r, "cannot read %s: %s", path, strerror(-r));
	jhead(c, "write");
	jw_str(&c->jw, "path", path);
	jw_str(&c->jw, "value", value);
	if (undo)
		jw_str(&c->jw, "undo", undo);
	jw_str(&c->jw, "old", old);
	r = jcommit(c);
	if (r) {
		free(old);
		return r;
	}
	r = sf_write(path, value);
	if (r) {
		free(old);
		int jr = jcancel(c);
		if (jr)
			return jr;
		return ans_fail(a, -r, "cannot write %s: %s", path, strerror(-r));
	}
	char *now = NULL;
	jw_str(a, "old", old);
	if (sf_read_text(path, &now) == 0)
		jw_str(a, "new", now);
	else
		jw_null(a, "new");
	free(old);
	free(now);
	return ans_ok(a);
}

static int op_affinity(struct sys_ctx *c, const struct sj_obj *o, struct jsonw *a)
{
	int64_t tid;
	const int64_t *arr;
	size_t n;
	int bad;
	cpu_set_t want, old, now;
	if (sj_int(o, "tid", &tid) || tid <= 0 || tid > INT32_MAX || sj_intarr(o, "cpus", &arr, &n) || !n)
		return ans_fail(a, EINVAL, "affinity needs tid (>0) and a non-empty cpus array");
	cpus_from_arr(arr, n, &want, &bad);
	if (bad)
		return ans_fail(a, EINVAL, "affinity: cpu number out of range");
	if (sched_getaffinity((pid_t)tid, sizeof(old), &old) != 0)
		return ans_fail(a, errno, "cannot read affinity of %lld: %s", (long long)tid, strerror(errno));
	jhead(c, "affinity");
	jw_int(&c->jw, "tid", tid);
	jw_uint(&c->jw, "starttime", sf_starttime((int)tid));
	jw_cpuset(&c->jw, "cpus", &want);
	jw_cpuset(&c->jw, "old", &old);
	int r = jcommit(c);
	if (r)
		return r;
	if (sched_setaffinity((pid_t)tid, sizeof(want), &want) != 0) {
		int e = errno;
		if ((r = jcancel(c)))
			return r;
		return ans_fail(a, e, "cannot set affinity of %lld: %s", (long long)tid, strerror(e));
	}
	jw_cpuset(a, "old", &old);
	if (sched_getaffinity((pid_t)tid, sizeof(now), &now) == 0)
		jw_cpuset(a, "new", &now);
	else
		jw_null(a, "new");
	return ans_ok(a);
}

static int set_sched(pid_t tid, int policy, int prio)
{
	struct sched_param sp = { .sched_priority = prio };
	return sched_setscheduler(tid, policy, &sp) == 0 ? 0 : -errno;
}

static int op_sched(struct sys_ctx *c, const struct sj_obj *o, struct jsonw *a)
{
	int64_t tid, prio;
	const char *pol;
	if (sj_int(o, "tid", &tid) || tid <= 0 || tid > INT32_MAX || sj_str(o, "policy", &pol) ||
	    sj_int(o, "priority", &prio))
		return ans_fail(a, EINVAL, "sched needs tid, policy and priority");
	int policy = policy_from_name(pol);
	if (policy < 0)
		return ans_fail(a, EINVAL, "sched: policy must be fifo, rr, other, batch or idle: %s", pol);
	bool rt = policy == SCHED_FIFO || policy == SCHED_RR;
	if ((rt && (prio < 1 || prio > 99)) || (!rt && prio != 0))
		return ans_fail(a, EINVAL, "sched: priority must be 1..99 for fifo/rr, 0 otherwise");
	int oldp = sched_getscheduler((pid_t)tid);
	struct sched_param osp;
	if (oldp < 0 || sched_getparam((pid_t)tid, &osp) != 0)
		return ans_fail(a, errno, "cannot read scheduling of %lld: %s", (long long)tid, strerror(errno));
	jhead(c, "sched");
	jw_int(&c->jw, "tid", tid);
	jw_uint(&c->jw, "starttime", sf_starttime((int)tid));
	jw_str(&c->jw, "policy", pol);
	jw_int(&c->jw, "priority", prio);
	jw_str(&c->jw, "old_policy", policy_to_name(oldp));
	jw_int(&c->jw, "old_priority", osp.sched_priority);
	int r = jcommit(c);
	if (r)
		return r;
	r = set_sched((pid_t)tid, policy, (int)prio);
	if (r) {
		int jr = jcancel(c);
		if (jr)
			return jr;
		return ans_fail(a, -r, "cannot set scheduling of %lld: %s", (long long)tid, strerror(-r));
	}
	jw_str(a, "old_policy", policy_to_name(oldp));
	jw_int(a, "old_priority", osp.sched_priority);
	int np = sched_getscheduler((pid_t)tid);
	struct sched_param nsp = { 0 };
	if (np >= 0 && sched_getparam((pid_t)tid, &nsp) == 0) {
		jw_str(a, "new_policy", policy_to_name(np));
		jw_int(a, "new_priority", nsp.sched_priority);
	}
	return ans_ok(a);
}

static int op_mkdir(struct sys_ctx *c, const struct sj_obj *o, struct jsonw *a)
{
	const char *path;
	if (sj_str(o, "path", &path) || !path_ok(path, cgroup_prefixes))
		return ans_fail(a, EINVAL, "mkdir needs a path under /sys/fs/cgroup/");
	struct stat st;
	if (stat(path, &st) == 0)
		return ans_fail(a, EEXIST, "%s exists already (left over? run `rtlab restore`)", path);
	jhead(c, "mkdir");
	jw_str(&c->jw, "path", path);
	int r = jcommit(c);
	if (r)
		return r;
	if (mkdir(path, 0755) != 0) {
		int e = errno;
		if ((r = jcancel(c)))
			return r;
		return ans_fail(a, e, "cannot create %s: %s", path, strerror(e));
	}
	return ans_ok(a);
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

static int op_move(struct sys_ctx *c, const struct sj_obj *o, struct jsonw *a)
{
	int64_t tid;
	const char *dir;
	if (sj_int(o, "tid", &tid) || tid <= 0 || tid > INT32_MAX || sj_str(o, "cgroup", &dir) ||
	    !path_ok(dir, cgroup_prefixes))
		return ans_fail(a, EINVAL, "move needs tid and a cgroup directory under /sys/fs/cgroup/");
	char old[1024];
	int r = task_cgroup_dir((int)tid, dir, old, sizeof(old));
	if (r)
		return ans_fail(a, -r, "cannot find the cgroup of %lld for %s: %s", (long long)tid, dir,
				strerror(-r));
	cpu_set_t oaff;
	if (sched_getaffinity((pid_t)tid, sizeof(oaff), &oaff) != 0)
		return ans_fail(a, errno, "cannot read affinity of %lld: %s", (long long)tid, strerror(errno));
	jhead(c, "move");
	jw_int(&c->jw, "tid", tid);
	jw_uint(&c->jw, "starttime", sf_starttime((int)tid));
	jw_str(&c->jw, "cgroup", dir);
	jw_str(&c->jw, "old", old);
	jw_cpuset(&c->jw, "old_affinity", &oaff);
	if ((r = jcommit(c)))
		return r;
	r = move_task((int)tid, dir);
	if (r) {
		int jr = jcancel(c);
		if (jr)
			return jr;
		return ans_fail(a, -r, "cannot move %lld to %s: %s", (long long)tid, dir, strerror(-r));
	}
	jw_str(a, "old", old);
	cpu_set_t now;
	if (sched_getaffinity((pid_t)tid, sizeof(now), &now) == 0)
		jw_cpuset(a, "affinity", &now);
	return ans_ok(a);
}

static int op_hold(struct sys_ctx *c, const struct sj_obj *o, struct jsonw *a)
{
	const char *path;
	int64_t v;
	if (sj_str(o, "path", &path) || !path_ok(path, hold_prefixes) || sj_int(o, "value", &v) ||
	    v < 0 || v > INT32_MAX)
		return ans_fail(a, EINVAL, "hold needs path /dev/cpu_dma_latency and value 0..2147483647");
	if (c->detached)
		return ans_fail(a, EINVAL, "hold needs a holding applier (not --detach)");
	if (c->n_hold >= sizeof(c->hold_fd) / sizeof(c->hold_fd[0]))
		return ans_fail(a, ENOSPC, "too many holds");
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return ans_fail(a, errno, "cannot open %s: %s", path, strerror(errno));
	int32_t val = (int32_t)v;
	if (write(fd, &val, sizeof(val)) != (ssize_t)sizeof(val)) {
		int e = errno ? errno : EIO;
		close(fd);
		return ans_fail(a, e, "cannot write %s: %s", path, strerror(e));
	}
	c->hold_fd[c->n_hold++] = fd;
	jhead(c, "hold");
	jw_str(&c->jw, "path", path);
	jw_int(&c->jw, "value", v);
	int r = jcommit(c);
	if (r)
		return r;
	return ans_ok(a);
}

static int op_spawned(struct sys_ctx *c, const struct sj_obj *o, struct jsonw *a)
{
	int64_t pgid, st;
	if (sj_int(o, "pgid", &pgid) || pgid <= 1 || pgid > INT32_MAX || sj_int(o, "starttime", &st) || st < 0)
		return ans_fail(a, EINVAL, "spawned needs pgid (>1) and starttime");
	if (pgid == getpgrp())
		return ans_fail(a, EINVAL, "spawned: pgid %lld is the applier's own group", (long long)pgid);
	jhead(c, "spawned");
	jw_int(&c->jw, "pgid", pgid);
	jw_int(&c->jw, "starttime", st);
	int r = jcommit(c);
	return r ? r : ans_ok(a);
}

static int op_netns(struct sys_ctx *c, const struct sj_obj *o, struct jsonw *a)
{
	const char *name;
	if (sj_str(o, "name", &name) || !name[0] || strchr(name, '/') || strcmp(name, ".") == 0 ||
	    strcmp(name, "..") == 0 || strlen(name) > 200)
		return ans_fail(a, EINVAL, "netns needs a name without '/'");
	jhead(c, "netns");
	jw_str(&c->jw, "name", name);
	int r = jcommit(c);
	return r ? r : ans_ok(a);
}

/*
 * Hardware timestamping of a network interface: the old configuration is read
 * (SIOCGHWTSTAMP) and journaled first; a driver that cannot report it is refused,
 * because the change could not be undone. The answer says what the driver applied.
 */
static int op_hwtstamp(struct sys_ctx *c, const struct sj_obj *o, struct jsonw *a)
{
	const char *ifname, *txs, *rxs;
	if (sj_str(o, "ifname", &ifname) || sj_str(o, "tx", &txs) || sj_str(o, "rx_filter", &rxs))
		return ans_fail(a, EINVAL, "hwtstamp needs string fields ifname, tx and rx_filter");
	if (!hwts_ifname_ok(ifname))
		return ans_fail(a, EINVAL, "hwtstamp: not an interface name: '%s'", ifname);
	int tx = hwts_tx_from_name(txs), rx = hwts_rx_from_name(rxs);
	if (tx < 0)
		return ans_fail(a, EINVAL, "hwtstamp: unknown tx '%s' (off, on, onestep_sync, onestep_p2p)", txs);
	if (rx < 0)
		return ans_fail(a, EINVAL, "hwtstamp: unknown rx_filter '%s' (none, all, ptp_v2_event, ... see docs/sys-protocol.md)", rxs);
	unsigned idx = if_nametoindex(ifname);
	if (!idx)
		return ans_fail(a, errno, "hwtstamp: no interface %s: %s", ifname, strerror(errno));
	struct hwtstamp_config old;
	int r = hwts_get(ifname, &old);
	if (r)
		return ans_fail(a, -r,
				"hwtstamp: cannot read the timestamping configuration of %s (SIOCGHWTSTAMP: %s); not changed, because it could not be restored",
				ifname, strerror(-r));
	jhead(c, "hwtstamp");
	jw_str(&c->jw, "ifname", ifname);
	jw_uint(&c->jw, "ifindex", idx);
	jw_int(&c->jw, "old_tx", old.tx_type);
	jw_int(&c->jw, "old_rx_filter", old.rx_filter);
	jw_int(&c->jw, "tx", tx);
	jw_int(&c->jw, "rx_filter", rx);
	r = jcommit(c);
	if (r)
		return r;
	struct hwtstamp_config want = { .tx_type = tx, .rx_filter = rx };
	r = hwts_set(ifname, &want);
	if (r) {
		int jr = jcancel(c);
		if (jr)
			return jr;
		return ans_fail(a, -r, "hwtstamp: %s refused tx %s rx_filter %s (SIOCSHWTSTAMP: %s)",
				ifname, txs, rxs, strerror(-r));
	}
	const char *on = hwts_tx_name(old.tx_type), *orx = hwts_rx_name(old.rx_filter);
	const char *nt = hwts_tx_name(want.tx_type), *nrx = hwts_rx_name(want.rx_filter);
	jw_obj_begin(a, "old");
	on ? jw_str(a, "tx", on) : jw_int(a, "tx", old.tx_type);
	orx ? jw_str(a, "rx_filter", orx) : jw_int(a, "rx_filter", old.rx_filter);
	jw_obj_end(a);
	jw_obj_begin(a, "new");
	nt ? jw_str(a, "tx", nt) : jw_int(a, "tx", want.tx_type);
	nrx ? jw_str(a, "rx_filter", nrx) : jw_int(a, "rx_filter", want.rx_filter);
	jw_obj_end(a);
	return ans_ok(a);
}

int sys_apply_op(struct sys_ctx *c, const struct sj_obj *o, struct jsonw *a)
{
	const char *op = NULL;
	int have = sj_str(o, "op", &op);
	c->seq++;
	ans_begin(a, c->seq, have ? NULL : op);
	if (have)
		return ans_fail(a, EINVAL, "missing string field op");
	if (strcmp(op, "write") == 0)
		return op_write(c, o, a);
	if (strcmp(op, "affinity") == 0)
		return op_affinity(c, o, a);
	if (strcmp(op, "sched") == 0)
		return op_sched(c, o, a);
	if (strcmp(op, "mkdir") == 0)
		return op_mkdir(c, o, a);
	if (strcmp(op, "move") == 0)
		return op_move(c, o, a);
	if (strcmp(op, "hold") == 0)
		return op_hold(c, o, a);
	if (strcmp(op, "spawned") == 0)
		return op_spawned(c, o, a);
	if (strcmp(op, "netns") == 0)
		return op_netns(c, o, a);
	if (strcmp(op, "hwtstamp") == 0)
		return op_hwtstamp(c, o, a);
	if (strcmp(op, "release") == 0) {
		jw_bool(a, "ok", true);
		jw_obj_end(a);
		return SYS_OP_RELEASE;
	}
	return ans_fail(a, EINVAL, "unknown op '%s'", op);
}

/* ---- restore ---- */

enum rres { RS_OK, RS_GONE, RS_SKIPPED, RS_FAILED };
static const char *const rres_name[] = { "ok", "gone", "skipped", "failed" };

/* The task still is the one journaled (same start time)? */
static bool same_task(const struct sj_obj *e, int tid)
{
	int64_t st;
	if (sj_int(e, "starttime", &st))
		return true; /* not recorded */
	uint64_t now = sf_starttime(tid);
	return now != 0 && (int64_t)now == st;
}

static enum rres restore_write(const struct sj_obj *e, char **created, size_t ncreated, int *err)
{
	const char *path, *old, *undo = NULL;
	if (sj_str(e, "path", &path) || sj_str(e, "old", &old))
		return *err = EINVAL, RS_FAILED;
	for (size_t k = 0; k < ncreated; k++) {
		size_t l = strlen(created[k]);
		if (strncmp(path, created[k], l) == 0 && path[l] == '/')
			return RS_SKIPPED; /* inside a directory we created: removed with it */
	}
	if (sj_get(e, "undo") && sj_str(e, "undo", &undo))
		return *err = EINVAL, RS_FAILED;
	int r = sf_write(path, undo ? undo : old);
	if (r == -ENOENT)
		return RS_GONE;
	/* Writing an empty mask/list back: nothing to restore for empty files. */
	if (r && !undo && old[0] == '\0')
		return RS_SKIPPED;
	return r ? (*err = -r, RS_FAILED) : RS_OK;
}

static enum rres restore_affinity(const struct sj_obj *e, const char *key, int *err)
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
	cpus_from_arr(arr, n, &set, &bad);
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

static enum rres restore_sched(const struct sj_obj *e, int *err)
{
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

static enum rres restore_move(const struct sj_obj *e, int *err)
{
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
		enum rres rr = restore_affinity(e, "old_affinity", err);
		if (rr == RS_FAILED)
			return rr;
	}
	return RS_OK;
}

/* Move what is left in dir to its parent, then remove it. */
static enum rres restore_mkdir(const struct sj_obj *e, int *err)
{
	const char *path;
	if (sj_str(e, "path", &path))
		return *err = EINVAL, RS_FAILED;
	struct stat st;
	if (stat(path, &st) != 0)
		return RS_GONE;
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

static enum rres restore_spawned(const struct sj_obj *e, int *err)
{
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

static enum rres restore_hwtstamp(const struct sj_obj *e, int *err)
{
	const char *ifname;
	int64_t idx, tx, rx;
	if (sj_str(e, "ifname", &ifname) || sj_int(e, "ifindex", &idx) ||
	    sj_int(e, "old_tx", &tx) || sj_int(e, "old_rx_filter", &rx) || !hwts_ifname_ok(ifname))
		return *err = EINVAL, RS_FAILED;
	/* gone, or another interface under that name now: nothing of ours to undo */
	if ((int64_t)if_nametoindex(ifname) != idx)
		return RS_GONE;
	struct hwtstamp_config cfg = { .tx_type = (int)tx, .rx_filter = (int)rx };
	int r = hwts_set(ifname, &cfg);
	if (r == -ENODEV)
		return RS_GONE;
	return r ? (*err = -r, RS_FAILED) : RS_OK;
}

static enum rres restore_netns(const struct sj_obj *e, int *err)
{
	const char *name;
	if (sj_str(e, "name", &name) || strchr(name, '/'))
		return *err = EINVAL, RS_FAILED;
	char path[300];
	snprintf(path, sizeof(path), "/run/netns/%s", name);
	if (access(path, F_OK) != 0)
		return RS_GONE;
	if (umount2(path, MNT_DETACH) != 0 && errno != EINVAL && errno != ENOENT)
		return *err = errno, RS_FAILED;
	if (unlink(path) != 0 && errno != ENOENT)
		return *err = errno, RS_FAILED;
	return RS_OK;
}

struct jline {
	struct sj_obj o;
	bool ok;
};

int sys_restore_text(const char *text, size_t len, int out_fd, struct sys_restore_stats *st)
{
	memset(st, 0, sizeof(*st));
	size_t nl = 0;
	for (size_t k = 0; k < len; k++)
		nl += text[k] == '\n';
	struct jline *lines = calloc(nl + 1, sizeof(*lines));
	if (!lines)
		return -ENOMEM;
	size_t n = 0;
	const char *p = text, *end = text + len;
	while (p < end) {
		const char *q = memchr(p, '\n', (size_t)(end - p));
		if (!q)
			break; /* a torn last line: its change was never applied */
		if (q > p) {
			lines[n].ok = sj_parse(p, (size_t)(q - p), &lines[n].o) == 0;
			n++;
		}
		p = q + 1;
	}
	/* Header check. */
	int64_t schema;
	if (n == 0 || !lines[0].ok || sj_int(&lines[0].o, "schema", &schema) || schema != SYS_SCHEMA) {
		for (size_t k = 0; k < n; k++)
			sj_free(&lines[k].o);
		free(lines);
		return n == 0 ? 0 : -EINVAL;
	}
	/* Cancelled sequence numbers and created directories. */
	char **created = calloc(n, sizeof(*created));
	size_t ncreated = 0;
	if (!created) {
		for (size_t k = 0; k < n; k++)
			sj_free(&lines[k].o);
		free(lines);
		return -ENOMEM;
	}
	for (size_t k = 1; k < n; k++) {
		const char *op, *path;
		if (lines[k].ok && sj_str(&lines[k].o, "op", &op) == 0 && strcmp(op, "mkdir") == 0 &&
		    sj_str(&lines[k].o, "path", &path) == 0)
			created[ncreated++] = (char *)path;
	}
	struct jsonw w;
	jw_init(&w);
	for (size_t k = n; k-- > 1;) {
		const struct sj_obj *e = &lines[k].o;
		const char *op = "?";
		int64_t seq = -1;
		enum rres res = RS_FAILED;
		int err = 0;
		if (!lines[k].ok || sj_str(e, "op", &op) || sj_int(e, "seq", &seq)) {
			err = EINVAL;
		} else if (strcmp(op, "cancel") == 0) {
			continue;
		} else {
			/* Skip an entry whose seq was cancelled by a later line. */
			bool cancelled = false;
			for (size_t j = k + 1; j < n; j++) {
				const char *op2;
				int64_t s2;
				if (lines[j].ok && sj_str(&lines[j].o, "op", &op2) == 0 &&
				    strcmp(op2, "cancel") == 0 && sj_int(&lines[j].o, "seq", &s2) == 0 &&
				    s2 == seq)
					cancelled = true;
			}
			if (cancelled)
				continue;
			if (strcmp(op, "write") == 0)
				res = restore_write(e, created, ncreated, &err);
			else if (strcmp(op, "affinity") == 0)
				res = restore_affinity(e, "old", &err);
			else if (strcmp(op, "sched") == 0)
				res = restore_sched(e, &err);
			else if (strcmp(op, "mkdir") == 0)
				res = restore_mkdir(e, &err);
			else if (strcmp(op, "move") == 0)
				res = restore_move(e, &err);
			else if (strcmp(op, "hold") == 0)
				res = RS_OK; /* the fd closes with the applier */
			else if (strcmp(op, "spawned") == 0)
				res = restore_spawned(e, &err);
			else if (strcmp(op, "netns") == 0)
				res = restore_netns(e, &err);
			else if (strcmp(op, "hwtstamp") == 0)
				res = restore_hwtstamp(e, &err);
			else
				err = EINVAL;
		}
		switch (res) {
		case RS_OK: st->restored++; break;
		case RS_GONE: st->gone++; break;
		case RS_SKIPPED: st->skipped++; break;
		case RS_FAILED: st->failed++; break;
		}
		if (out_fd >= 0) {
			sys_record_begin(&w, "restored");
			jw_int(&w, "seq", seq);
			jw_str(&w, "op", op);
			jw_str(&w, "result", rres_name[res]);
			if (res == RS_FAILED) {
				jw_int(&w, "errno", err);
				jw_str(&w, "error", strerror(err));
			}
			jw_obj_end(&w);
			if (jw_emit(&w, out_fd) != 0) {
				jw_reset(&w);
				out_fd = -1; /* the reader went away: keep restoring */
			}
		}
	}
	jw_free(&w);
	free(created);
	for (size_t k = 0; k < n; k++)
		sj_free(&lines[k].o);
	free(lines);
	return 0;
}
