/* SPDX-License-Identifier: MIT */
/* `rtlab-probe sys facts`: what the host needs to plan a shield, as JSON. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "opts.h"
#include "sys.h"
#include "sysfile.h"

#define PF_KTHREAD_FLAG 0x00200000UL
#define PF_NO_SETAFFINITY_FLAG 0x04000000UL

struct task_fact {
	int pid, tid;
	char comm[64];
};

static const char *policy_name(int p)
{
	switch (p & ~SCHED_RESET_ON_FORK) {
	case SCHED_OTHER: return "other";
	case SCHED_FIFO: return "fifo";
	case SCHED_RR: return "rr";
	case SCHED_BATCH: return "batch";
	case SCHED_IDLE: return "idle";
#ifdef SCHED_DEADLINE
	case SCHED_DEADLINE: return "deadline";
#endif
	default: return "unknown";
	}
}

/* The cgroups of a task: {"cpuset": "/", "v2": "/user.slice", ...}. */
static void write_cgroups(struct jsonw *w, int pid, int tid)
{
	char path[96], line[4096];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/cgroup", pid, tid);
	FILE *f = fopen(path, "re");
	jw_obj_begin(w, "cgroups");
	if (f) {
		while (fgets(line, sizeof(line), f)) {
			char *ctrl, *cg;
			if (sf_cgroup_line(line, &ctrl, &cg) == 0)
				jw_str(w, *ctrl ? ctrl : "v2", cg);
		}
		fclose(f);
	}
	jw_obj_end(w);
}

/* One task; returns 0, or -ENOENT when it vanished while being read. */
static int write_task(struct jsonw *w, int pid, int tid, struct task_fact *tf)
{
	char path[96], buf[2048];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", pid, tid);
	if (sf_read(path, buf, sizeof(buf)) != 0)
		return -ENOENT;
	char *lp = strchr(buf, '(');
	char *rp = strrchr(buf, ')');
	if (!lp || !rp || rp < lp)
		return -ENOENT;
	size_t cl = (size_t)(rp - lp - 1);
	if (cl >= sizeof(tf->comm))
		cl = sizeof(tf->comm) - 1;
	memcpy(tf->comm, lp + 1, cl);
	tf->comm[cl] = '\0';
	tf->pid = pid;
	tf->tid = tid;
	/* Fields after ")": state is field 3. flags 9, rt_priority 40, policy 41. */
	unsigned long flags = 0;
	long rtprio = 0, policy = 0;
	unsigned long long starttime = 0;
	char *s = rp + 2;
	int field = 3;
	for (char *tok = strtok(s, " "); tok; tok = strtok(NULL, " "), field++) {
		if (field == 9)
			flags = strtoul(tok, NULL, 10);
		else if (field == 22)
			starttime = strtoull(tok, NULL, 10);
		else if (field == 40)
			rtprio = strtol(tok, NULL, 10);
		else if (field == 41)
			policy = strtol(tok, NULL, 10);
	}
	cpu_set_t aff;
	bool have_aff = sched_getaffinity(tid, sizeof(aff), &aff) == 0;

	jw_obj_begin(w, NULL);
	jw_int(w, "pid", pid);
	jw_int(w, "tid", tid);
	jw_str(w, "comm", tf->comm);
	jw_bool(w, "kthread", (flags & PF_KTHREAD_FLAG) != 0);
	jw_bool(w, "per_cpu", (flags & PF_NO_SETAFFINITY_FLAG) != 0);
	jw_uint(w, "starttime", starttime);
	if (have_aff)
		jw_cpuset(w, "affinity", &aff);
	else
		jw_null(w, "affinity");
	jw_str(w, "policy", policy_name((int)policy));
	jw_int(w, "priority", rtprio);
	write_cgroups(w, pid, tid);
	jw_obj_end(w);
	return 0;
}

static int is_num(const char *s)
{
	if (!*s)
		return 0;
	for (; *s; s++)
		if (!isdigit((unsigned char)*s))
			return 0;
	return 1;
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

/* Sorted numeric entries of a directory. */
static int numeric_dir(const char *path, int **out, size_t *n)
{
	DIR *d = opendir(path);
	if (!d)
		return -errno;
	size_t cap = 64, k = 0;
	int *v = malloc(cap * sizeof(*v));
	if (!v) {
		closedir(d);
		return -ENOMEM;
	}
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!is_num(e->d_name))
			continue;
		if (k == cap) {
			cap *= 2;
			int *nv = realloc(v, cap * sizeof(*nv));
			if (!nv) {
				free(v);
				closedir(d);
				return -ENOMEM;
			}
			v = nv;
		}
		v[k++] = atoi(e->d_name);
	}
	closedir(d);
	qsort(v, k, sizeof(*v), cmp_int);
	*out = v;
	*n = k;
	return 0;
}

/* Per-CPU counts of IRQ irq from /proc/interrupts text (NULL: absent). */
static void write_irq_counts(struct jsonw *w, const char *interrupts, int irq, int ncols)
{
	char pat[32];
	snprintf(pat, sizeof(pat), "%d:", irq);
	const char *p = interrupts;
	while (p && *p) {
		const char *q = p;
		while (*q == ' ')
			q++;
		if (strncmp(q, pat, strlen(pat)) == 0) {
			q += strlen(pat);
			jw_arr_begin(w, "counts");
			for (int k = 0; k < ncols; k++) {
				char *e;
				unsigned long long v = strtoull(q, &e, 10);
				if (e == q)
					break;
				jw_uint(w, NULL, v);
				q = e;
			}
			jw_arr_end(w);
			return;
		}
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	jw_null(w, "counts");
}

static void write_irqs(struct jsonw *w, const struct task_fact *tasks, size_t ntasks)
{
	int *irqs = NULL;
	size_t n = 0;
	char *interrupts = NULL;
	size_t ilen = 0;
	int ncols = 0;
	int fd = open("/proc/interrupts", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		if (sf_slurp(fd, &interrupts, &ilen) != 0)
			interrupts = NULL;
		close(fd);
	}
	if (interrupts) {
		for (const char *p = interrupts; *p && *p != '\n'; p++)
			if (p[0] == 'C' && p[1] == 'P' && p[2] == 'U')
				ncols++;
	}
	jw_arr_begin(w, "irqs");
	if (numeric_dir("/proc/irq", &irqs, &n) == 0) {
		for (size_t k = 0; k < n; k++) {
			char path[128], name[256] = "";
			jw_obj_begin(w, NULL);
			jw_int(w, "irq", irqs[k]);
			snprintf(path, sizeof(path), "/proc/irq/%d", irqs[k]);
			DIR *d = opendir(path);
			if (d) {
				struct dirent *e;
				while ((e = readdir(d))) {
					if (e->d_type != DT_DIR || e->d_name[0] == '.')
						continue;
					size_t l = strlen(name), dl = strlen(e->d_name);
					if (l + dl + 2 > sizeof(name))
						continue;
					if (l)
						name[l++] = ',';
					memcpy(name + l, e->d_name, dl + 1);
				}
				closedir(d);
			}
			if (name[0])
				jw_str(w, "name", name);
			else
				jw_null(w, "name");
			snprintf(path, sizeof(path), "/proc/irq/%d/smp_affinity_list", irqs[k]);
			sf_json_cpulist(w, "affinity", path);
			snprintf(path, sizeof(path), "/proc/irq/%d/effective_affinity_list", irqs[k]);
			sf_json_cpulist(w, "effective", path);
			/* Not visible without debugfs; apply answers EIO/EPERM instead. */
			jw_null(w, "managed");
			char pre[32];
			int pl = snprintf(pre, sizeof(pre), "irq/%d-", irqs[k]);
			int tpid = -1;
			for (size_t t = 0; t < ntasks; t++)
				if (strncmp(tasks[t].comm, pre, (size_t)pl) == 0) {
					tpid = tasks[t].tid;
					break;
				}
			if (tpid > 0)
				jw_int(w, "threaded_pid", tpid);
			else
				jw_null(w, "threaded_pid");
			if (interrupts)
				write_irq_counts(w, interrupts, irqs[k], ncols);
			else
				jw_null(w, "counts");
			jw_obj_end(w);
		}
		free(irqs);
	}
	jw_arr_end(w);
	free(interrupts);
}

static bool under_cgroup_dir(const char *dir)
{
	return strncmp(dir, "/sys/fs/cgroup/", 15) == 0 || strcmp(dir, "/sys/fs/cgroup") == 0;
}

/*
 * The cpusets directly below a cpuset hierarchy's root (where a shield makes its
 * own), as they are: {"hierarchy": "v1"|"v2", "path", "cpus", "cpus_effective",
 * "partition"} (partition: v2 only; null where a file cannot be read). A child
 * that is the mount point of another hierarchy is not one of them.
 */
static void write_cpusets(struct jsonw *w, const char *root, bool v2)
{
	struct stat rst;
	DIR *d = opendir(root);
	if (!d || fstat(dirfd(d), &rst) != 0) {
		if (d)
			closedir(d);
		return;
	}
	struct dirent *e;
	while ((e = readdir(d))) {
		char dir[1024], path[1100];
		struct stat st;
		if (e->d_name[0] == '.' || (e->d_type != DT_DIR && e->d_type != DT_UNKNOWN))
			continue;
		if (snprintf(dir, sizeof(dir), "%s/%s", root, e->d_name) >= (int)sizeof(dir))
			continue;
		if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_dev != rst.st_dev)
			continue;
		snprintf(path, sizeof(path), "%s/cpuset.cpus", dir);
		if (access(path, F_OK) != 0)
			continue;	/* v2: cpuset is not enabled for this child */
		jw_obj_begin(w, NULL);
		jw_str(w, "hierarchy", v2 ? "v2" : "v1");
		jw_str(w, "path", dir);
		sf_json_str(w, "cpus", path);
		snprintf(path, sizeof(path), "%s/%s", dir,
			 v2 ? "cpuset.cpus.effective" : "cpuset.effective_cpus");
		sf_json_str(w, "cpus_effective", path);
		if (v2) {
			snprintf(path, sizeof(path), "%s/cpuset.cpus.partition", dir);
			sf_json_str(w, "partition", path);
		} else {
			jw_null(w, "partition");
		}
		jw_obj_end(w);
	}
	closedir(d);
}

static void write_cgroup_facts(struct jsonw *w)
{
	char v1[512] = "", v2[512] = "";
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (f) {
		char line[4096];
		while (fgets(line, sizeof(line), f)) {
			struct sf_mount m;
			if (sf_mountinfo_line(line, &m) != 0)
				continue;
			if (strcmp(m.fstype, "cgroup2") == 0 && !v2[0]) {
				snprintf(v2, sizeof(v2), "%s", m.dir);
			} else if (strcmp(m.fstype, "cgroup") == 0 &&
				   (!v1[0] || !under_cgroup_dir(v1))) {
				/* The one v1 hierarchy with cpuset may be mounted more than once:
				 * a mount below /sys/fs/cgroup/ is preferred (where `sys apply`
				 * makes cpusets). */
				char *save = NULL;
				for (char *t = strtok_r(m.opts, ",", &save); t;
				     t = strtok_r(NULL, ",", &save))
					if (strcmp(t, "cpuset") == 0)
						snprintf(v1, sizeof(v1), "%s", m.dir);
			}
		}
		fclose(f);
	}
	bool v2_cpuset = false, v2_partition = false;
	if (v2[0]) {
		char path[600], buf[1024];
		snprintf(path, sizeof(path), "%s/cgroup.controllers", v2);
		if (sf_read(path, buf, sizeof(buf)) == 0) {
			char *save = NULL;
			for (char *t = strtok_r(buf, " ", &save); t; t = strtok_r(NULL, " ", &save))
				if (strcmp(t, "cpuset") == 0)
					v2_cpuset = true;
		}
		/* The root has no partition file; its children do once cpuset is enabled. */
		snprintf(path, sizeof(path), "%s/cpuset.cpus.isolated", v2);
		v2_partition = v2_cpuset && access(path, F_OK) == 0;
		if (v2_cpuset && !v2_partition) {
			/* Kernels 5.11..6.6 have partitions but no cpuset.cpus.isolated. */
			snprintf(path, sizeof(path), "%s/cpuset.cpus.effective", v2);
			v2_partition = access(path, F_OK) == 0;
		}
	}
	jw_obj_begin(w, "cgroup");
	jw_str_or_null(w, "v1_cpuset", v1[0] ? v1 : NULL);
	jw_str_or_null(w, "v2", v2[0] ? v2 : NULL);
	jw_bool(w, "v2_cpuset", v2_cpuset);
	jw_bool(w, "v2_partition", v2_partition);
	char path[600], buf[1024];
	snprintf(path, sizeof(path), "%s/cpuset.mems", v1);
	if (v1[0] && sf_read(path, buf, sizeof(buf)) == 0)
		jw_str(w, "v1_mems", buf);
	else
		jw_null(w, "v1_mems");
	snprintf(path, sizeof(path), "%s/cgroup.subtree_control", v2);
	if (v2[0] && sf_read(path, buf, sizeof(buf)) == 0)
		jw_str(w, "v2_subtree_control", buf);
	else
		jw_null(w, "v2_subtree_control");
	jw_arr_begin(w, "cpusets");
	if (v1[0])
		write_cpusets(w, v1, false);
	if (v2[0] && v2_cpuset)
		write_cpusets(w, v2, true);
	jw_arr_end(w);
	jw_obj_end(w);
}

int sys_facts(int fd)
{
	struct jsonw w;
	jw_init(&w);
	sys_record_begin(&w, "facts");
	jw_str(&w, "engine_version", RTLAB_VERSION);
	sf_json_cpulist(&w, "cpus_online", "/sys/devices/system/cpu/online");
	sf_json_cpulist(&w, "cpus_possible", "/sys/devices/system/cpu/possible");
	sf_json_cpulist(&w, "cpus_isolated", "/sys/devices/system/cpu/isolated");

	size_t cap = 256, nt = 0;
	struct task_fact *tasks = malloc(cap * sizeof(*tasks));
	int *pids = NULL;
	size_t np = 0;
	int r = tasks ? numeric_dir("/proc", &pids, &np) : -ENOMEM;
	if (r) {
		free(tasks);
		jw_free(&w);
		return r;
	}
	jw_arr_begin(&w, "tasks");
	pid_t self = getpid();
	for (size_t k = 0; k < np; k++) {
		char path[64];
		if (pids[k] == self)
			continue;	/* the reader: gone before anyone acts on the facts */
		int *tids = NULL;
		size_t ntid = 0;
		snprintf(path, sizeof(path), "/proc/%d/task", pids[k]);
		if (numeric_dir(path, &tids, &ntid) != 0)
			continue;
		for (size_t t = 0; t < ntid; t++) {
			if (nt == cap) {
				cap *= 2;
				struct task_fact *n2 = realloc(tasks, cap * sizeof(*n2));
				if (!n2)
					break;
				tasks = n2;
			}
			if (write_task(&w, pids[k], tids[t], &tasks[nt]) == 0)
				nt++;
		}
		free(tids);
	}
	jw_arr_end(&w);
	free(pids);
	write_irqs(&w, tasks, nt);
	free(tasks);
	sf_json_str(&w, "default_smp_affinity", "/proc/irq/default_smp_affinity");
	sf_json_str(&w, "workqueue_cpumask", "/sys/devices/virtual/workqueue/cpumask");
	write_cgroup_facts(&w);
	jw_obj_begin(&w, "sysctl");
	sf_json_int(&w, "kernel.sched_rt_runtime_us", "/proc/sys/kernel/sched_rt_runtime_us");
	sf_json_int(&w, "kernel.sched_rt_period_us", "/proc/sys/kernel/sched_rt_period_us");
	jw_obj_end(&w);
	jw_obj_end(&w);
	r = jw_emit(&w, fd);
	jw_free(&w);
	return r;
}
