/* SPDX-License-Identifier: MIT */
#include "sysfile.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "opts.h"

#define SF_MAX_WHOLE (16u << 20)

int sf_read(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, len - 1);
	int e = errno;
	close(fd);
	if (n < 0)
		return -e;
	buf[n] = '\0';
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = '\0';
	return 0;
}

int sf_read_int(const char *path, int64_t *v)
{
	char buf[64];
	int r = sf_read(path, buf, sizeof(buf));
	return r ? r : opt_parse_int(buf, v);
}

int sf_slurp(int fd, char **buf, size_t *len)
{
	size_t cap = 4096, n = 0;
	char *b = malloc(cap);
	if (!b)
		return -ENOMEM;
	for (;;) {
		if (cap - n < 2) {
			if (cap >= SF_MAX_WHOLE) {
				free(b);
				return -EFBIG;
			}
			cap *= 2;
			char *nb = realloc(b, cap);
			if (!nb) {
				free(b);
				return -ENOMEM;
			}
			b = nb;
		}
		ssize_t r = read(fd, b + n, cap - n - 1);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			int e = -errno;
			free(b);
			return e;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	b[n] = '\0';
	*buf = b;
	*len = n;
	return 0;
}

int sf_read_all(const char *path, char **buf, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int r = sf_slurp(fd, buf, len);
	close(fd);
	return r;
}

int sf_read_text(const char *path, char **out)
{
	size_t n;
	int r = sf_read_all(path, out, &n);
	if (r)
		return r;
	while (n && (*out)[n - 1] == '\n')
		(*out)[--n] = '\0';
	return 0;
}

int sf_write(const char *path, const char *value)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t len = strlen(value);
	ssize_t r = write(fd, value, len);
	int e = r < 0 ? -errno : ((size_t)r != len ? -EIO : 0);
	if (close(fd) != 0 && !e)
		e = -errno;
	return e;
}

uint64_t sf_starttime(int tid)
{
	char path[64], buf[2048];
	snprintf(path, sizeof(path), "/proc/%d/stat", tid);
	if (tid <= 0 || sf_read(path, buf, sizeof(buf)) != 0)
		return 0;
	/* the command name (field 2) may hold blanks and parentheses: count after its end */
	char *rp = strrchr(buf, ')');
	if (!rp)
		return 0;
	int field = 3;
	char *save = NULL;
	for (char *t = strtok_r(rp + 2, " ", &save); t; t = strtok_r(NULL, " ", &save), field++)
		if (field == 22)
			return strtoull(t, NULL, 10);
	return 0;
}

int sf_cgroup_line(char *line, char **controllers, char **path)
{
	line[strcspn(line, "\n")] = '\0';
	char *c1 = strchr(line, ':');
	char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
	if (!c2)
		return -EINVAL;
	*c2 = '\0';
	*controllers = c1 + 1;
	*path = c2 + 1;
	return 0;
}

int sf_mountinfo_line(const char *line, struct sf_mount *m)
{
	const char *sep = strstr(line, " - ");
	char src[256];
	if (!sep || sscanf(line, "%*s %*s %*s %*s %511s", m->dir) != 1 ||
	    sscanf(sep + 3, "%63s %255s %1023s", m->fstype, src, m->opts) != 3)
		return -EINVAL;
	return 0;
}

void sf_json_str(struct jsonw *w, const char *key, const char *path)
{
	char buf[4096];
	if (sf_read(path, buf, sizeof(buf)) == 0)
		jw_str(w, key, buf);
	else
		jw_null(w, key);
}

void sf_json_int(struct jsonw *w, const char *key, const char *path)
{
	int64_t v;
	if (sf_read_int(path, &v) == 0)
		jw_int(w, key, v);
	else
		jw_null(w, key);
}

void sf_json_cpulist(struct jsonw *w, const char *key, const char *path)
{
	char buf[4096];
	cpu_set_t set;
	if (sf_read(path, buf, sizeof(buf)) != 0) {
		jw_null(w, key);
		return;
	}
	CPU_ZERO(&set);
	/* an empty mask reads "" (isolated) or "(null)" (nohz_full on some kernels) */
	if (buf[0] && strcmp(buf, "(null)") != 0 && opt_parse_cpulist(buf, &set) != 0) {
		jw_null(w, key);
		return;
	}
	jw_cpuset(w, key, &set);
}
