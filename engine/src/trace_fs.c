/* SPDX-License-Identifier: MIT */
/* tracefs: discovery, journaled instances and writes, header_page (trace_fs.h). */
#include "trace_fs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "jsonw.h"
#include "sys_op.h"
#include "sysfile.h"

/* The mount point of one /proc/mounts line's file system of type fstype, unescaped. */
static bool mount_of(const char *line, const char *fstype, char *dir, size_t len)
{
	char dev[256], mnt[1024], type[64];
	if (sscanf(line, "%255s %1023s %63s", dev, mnt, type) != 3 || strcmp(type, fstype) != 0)
		return false;
	size_t o = 0;
	for (const char *p = mnt; *p && o + 1 < len; p++) {
		if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] && p[3]) {
			dir[o++] = (char)(((p[1] - '0') << 6) | ((p[2] - '0') << 3) | (p[3] - '0'));
			p += 3;
		} else {
			dir[o++] = *p;
		}
	}
	dir[o] = '\0';
	return true;
}

int tfs_find(char *root, size_t len)
{
	FILE *f = fopen("/proc/mounts", "re");
	if (!f)
		return -errno;
	char line[2048], dir[1024], debugfs[1024] = "";
	bool found = false;
	int denied = 0;
	while (!found && fgets(line, sizeof(line), f)) {
		if (mount_of(line, "tracefs", dir, sizeof(dir))) {
			struct stat st;
			char probe[1100];
			snprintf(probe, sizeof(probe), "%s/instances", dir);
			/* a tracefs mounted inside debugfs/tracing counts as well */
			if (stat(probe, &st) == 0 && S_ISDIR(st.st_mode)) {
				snprintf(root, len, "%s", dir);
				found = true;
			} else if (errno == EACCES || errno == EPERM) {
				denied = -errno;
			}
		} else if (!debugfs[0] && mount_of(line, "debugfs", dir, sizeof(dir))) {
			snprintf(debugfs, sizeof(debugfs), "%s", dir);
		}
	}
	fclose(f);
	if (found)
		return 0;
	if (debugfs[0]) {
		char t[1100];
		struct stat st;
		snprintf(t, sizeof(t), "%s/tracing/instances", debugfs);
		if (stat(t, &st) == 0 && S_ISDIR(st.st_mode)) {
			snprintf(root, len, "%s/tracing", debugfs);
			return 0;
		}
		if (errno == EACCES || errno == EPERM)
			denied = -errno;
	}
	return denied ? denied : -ENOENT;
}

bool tfs_name_ok(const char *name)
{
	size_t n = strlen(name);
	if (n == 0 || n > 64 || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		char ch = name[i];
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
		      ch == '_' || ch == '.' || ch == '-'))
			return false;
	}
	return true;
}

bool tfs_instance_path(const char *path)
{
	char root[1024];
	if (!path || tfs_find(root, sizeof(root)) != 0)
		return false;
	size_t l = strlen(root);
	static const char inst[] = "/instances/";
	if (strncmp(path, root, l) != 0 || strncmp(path + l, inst, sizeof(inst) - 1) != 0)
		return false;
	return tfs_name_ok(path + l + sizeof(inst) - 1);
}

int tfs_read(const char *path, char **buf, size_t *len)
{
	return sf_read_all(path, buf, len);
}

int tfs_write(const char *path, const char *value)
{
	return sf_write(path, value);
}

/* ---- the journal ---- */

int tfs_journal_open(struct tfs_journal *j, const char *dir, const char *stem)
{
	memset(j, 0, sizeof(*j));
	j->fd = -1;
	j->c.journal_fd = -1;
	if (mkdir(dir, 0700) != 0 && errno != EEXIST)
		return -errno;
	if (snprintf(j->path, sizeof(j->path), "%s/%s-%d.journal", dir, stem, (int)getpid()) >=
	    (int)sizeof(j->path))
		return -ENAMETOOLONG;
	char tmp[PATH_MAX + 32];
	snprintf(tmp, sizeof(tmp), "%s.%d.tmp", j->path, (int)getpid());
	/* made under a temporary name, locked and given its header, then linked to its
	 * name: a reader never sees it unlocked or empty (as `sys apply` does) */
	int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	int r = 0;
	if (flock(fd, LOCK_EX | LOCK_NB) != 0)
		r = -errno;
	jw_init(&j->c.jw);
	if (!r) {
		sys_record_begin(&j->c.jw, "journal");
		jw_int(&j->c.jw, "pid", getpid());
		jw_uint(&j->c.jw, "starttime", sf_starttime(getpid()));
		jw_bool(&j->c.jw, "detached", false);
		char owner[80];
		snprintf(owner, sizeof(owner), "rtlab-probe %s", stem);
		jw_str(&j->c.jw, "owner", owner);
		jw_str(&j->c.jw, "engine_version", RTLAB_VERSION);
		jw_uint(&j->c.jw, "time_ns", rl_now_ns(CLOCK_REALTIME));
		jw_obj_end(&j->c.jw);
		r = jw_emit(&j->c.jw, fd);
		if (!r && fsync(fd) != 0)
			r = -errno;
	}
	if (!r && link(tmp, j->path) != 0)
		r = -errno;
	unlink(tmp);
	if (r) {
		close(fd);
		jw_free(&j->c.jw);
		return r;
	}
	j->fd = fd;
	j->c.journal_fd = fd;
	return 0;
}

/* Apply one `sys` op (its JSON text) through the journal; the kernel's -errno of a
 * failed answer, -EIO when the journal failed. */
static int apply_op(struct tfs_journal *j, const char *text)
{
	struct sj_obj o, ans;
	if (j->fd < 0)
		return -EBADF;
	if (sj_parse(text, strlen(text), &o) != 0)
		return -EINVAL;
	struct jsonw a;
	jw_init(&a);
	int r = sys_apply_op(&j->c, &o, &a);
	sj_free(&o);
	if (r < 0) {
		jw_free(&a);
		return -EIO;
	}
	bool ok = false;
	int64_t e = EIO;
	if (sj_parse(jw_text(&a), a.len, &ans) == 0) {
		if (sj_bool(&ans, "ok", &ok) != 0)
			ok = false;
		if (!ok && sj_int(&ans, "errno", &e) != 0)
			e = EIO;
		sj_free(&ans);
	}
	jw_free(&a);
	return ok ? 0 : -(int)(e > 0 ? e : EIO);
}

int tfs_instance_create(struct tfs_journal *j, const char *root, const char *name, char *path,
			size_t len)
{
	if (!tfs_name_ok(name))
		return -EINVAL;
	if (snprintf(path, len, "%s/instances/%s", root, name) >= (int)len)
		return -ENAMETOOLONG;
	struct jsonw w;
	jw_init(&w);
	jw_obj_begin(&w, NULL);
	jw_str(&w, "op", "mkdir");
	jw_str(&w, "path", path);
	jw_obj_end(&w);
	int r = jw_error(&w) ? -ENOMEM : apply_op(j, jw_text(&w));
	jw_free(&w);
	return r;
}

int tfs_instance_remove(const char *path)
{
	for (int attempt = 0; attempt < 40; attempt++) {
		if (rmdir(path) == 0 || errno == ENOENT)
			return 0;
		if (errno != EBUSY)
			return -errno;
		struct timespec ts = { 0, 25 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	return -EBUSY;
}

int tfs_write_journaled(struct tfs_journal *j, const char *path, const char *value,
			const char *undo)
{
	struct jsonw w;
	jw_init(&w);
	jw_obj_begin(&w, NULL);
	jw_str(&w, "op", "write");
	jw_str(&w, "path", path);
	jw_str(&w, "value", value);
	if (undo)
		jw_str(&w, "undo", undo);
	jw_obj_end(&w);
	int r = jw_error(&w) ? -ENOMEM : apply_op(j, jw_text(&w));
	jw_free(&w);
	return r;
}

int tfs_journal_restore(struct tfs_journal *j)
{
	if (j->fd < 0)
		return 0;
	char *text = NULL;
	size_t len = 0;
	struct sys_restore_stats st = { 0 };
	int r = lseek(j->fd, 0, SEEK_SET) < 0 ? -errno : sf_slurp(j->fd, &text, &len);
	if (!r)
		r = sys_restore_text(text, len, -1, &st);
	free(text);
	if (!r && st.failed)
		r = -EIO;
	if (!r && unlink(j->path) != 0 && errno != ENOENT)
		r = -errno;
	close(j->fd);
	j->fd = -1;
	jw_free(&j->c.jw);
	return r;
}

/* ---- header_page and pages ---- */

/* The offset and size of field `name` in a format text ("field: TYPE NAME;\toffset:N;\tsize:N;"). */
static bool field_of(const char *text, const char *name, unsigned *off, unsigned *size)
{
	for (const char *p = strstr(text, "field:"); p; p = strstr(p + 1, "field:")) {
		const char *semi = strchr(p, ';');
		if (!semi)
			return false;
		/* the last word before ';' is the field's name */
		const char *w = semi;
		while (w > p && w[-1] != ' ' && w[-1] != '\t')
			w--;
		size_t nl = strlen(name);
		if ((size_t)(semi - w) != nl || strncmp(w, name, nl) != 0)
			continue;
		const char *o = strstr(semi, "offset:"), *s = strstr(semi, "size:");
		const char *eol = strchr(semi, '\n');
		if (!o || !s || (eol && (o > eol || s > eol)))
			return false;
		char *end;
		unsigned long ov = strtoul(o + 7, &end, 10);
		if (end == o + 7)
			return false;
		unsigned long sv = strtoul(s + 5, &end, 10);
		if (end == s + 5 || ov > (1UL << 20) || sv > (1UL << 24))
			return false;
		*off = (unsigned)ov;
		*size = (unsigned)sv;
		return true;
	}
	return false;
}

int tfs_page_layout_parse(const char *text, struct tfs_page_layout *l)
{
	memset(l, 0, sizeof(*l));
	if (!field_of(text, "timestamp", &l->ts_off, &l->ts_size) ||
	    !field_of(text, "commit", &l->commit_off, &l->commit_size) ||
	    !field_of(text, "data", &l->data_off, &l->data_size))
		return -EINVAL;
	if ((l->commit_size != 4 && l->commit_size != 8) || l->ts_size != 8 ||
	    l->commit_off + l->commit_size > l->data_off || l->data_size == 0)
		return -EINVAL;
	return 0;
}

size_t tfs_page_trim(const unsigned char *page, size_t n, const struct tfs_page_layout *l)
{
	if (n < l->data_off)
		return 0;
	uint64_t commit;
	if (l->commit_size == 8) {
		uint64_t v;
		memcpy(&v, page + l->commit_off, 8);
		commit = v;
	} else {
		uint32_t v;
		memcpy(&v, page + l->commit_off, 4);
		commit = v;
	}
	bool stored = commit & TFS_MISSED_STORED;
	commit &= ~(uint64_t)(TFS_MISSED_EVENTS | TFS_MISSED_STORED);
	uint64_t want = (uint64_t)l->data_off + commit + (stored ? l->commit_size : 0);
	return want < n ? (size_t)want : n;
}

void tfs_cpumask_format(const cpu_set_t *set, int ncpus, char *out, size_t len)
{
	int groups = ncpus > 0 ? (ncpus + 31) / 32 : 1;
	size_t o = 0;
	out[0] = '\0';
	for (int g = groups - 1; g >= 0; g--) {
		uint32_t word = 0;
		for (int b = 0; b < 32; b++) {
			int cpu = g * 32 + b;
			if (cpu < CPU_SETSIZE && CPU_ISSET(cpu, set))
				word |= 1u << b;
		}
		int w = g == groups - 1 ? snprintf(out + o, len - o, "%x", word)
					: snprintf(out + o, len - o, ",%08x", word);
		if (w < 0 || (size_t)w >= len - o)
			return;
		o += (size_t)w;
	}
}
