/* SPDX-License-Identifier: MIT */
#include "cpuuse.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* /proc/stat columns after "cpuN": user nice system idle iowait irq softirq steal ... */
enum { C_USER, C_NICE, C_SYSTEM, C_IDLE, C_IOWAIT, C_IRQ, C_SOFTIRQ, C_STEAL, C_N };

static int parse_cpu_line(const char *p, uint64_t *busy_ticks)
{
	uint64_t v[C_N] = { 0 };
	int n = 0;
	while (n < C_N) {
		while (*p == ' ')
			p++;
		if (*p < '0' || *p > '9')
			break;
		char *end;
		errno = 0;
		unsigned long long x = strtoull(p, &end, 10);
		if (errno)
			return -EINVAL;
		v[n++] = x;
		p = end;
	}
	if (n < C_IOWAIT + 1)	/* every kernel since 2.6 has at least these */
		return -EINVAL;
	*busy_ticks = v[C_USER] + v[C_NICE] + v[C_SYSTEM] + v[C_IRQ] + v[C_SOFTIRQ] +
		      v[C_STEAL];
	return 0;
}

int cpuuse_parse_stat(const char *text, int cpu, uint64_t *busy_ticks)
{
	char want[24];
	snprintf(want, sizeof(want), "cpu%d ", cpu);
	size_t len = strlen(want);
	/* the cpu lines come first: stop at the first other one */
	for (const char *line = text; line && strncmp(line, "cpu", 3) == 0; ) {
		if (strncmp(line, want, len) == 0)
			return parse_cpu_line(line + len, busy_ticks);
		line = strchr(line, '\n');
		if (line)
			line++;
	}
	return -ENOENT;
}

int cpuuse_parse_schedstat(const char *text, uint64_t *run_ns, uint64_t *wait_ns)
{
	unsigned long long run, wait;
	if (sscanf(text, "%llu %llu", &run, &wait) != 2)
		return -EINVAL;
	*run_ns = run;
	*wait_ns = wait;
	return 0;
}

/* The "cpuN ..." line of /proc/stat into buf (NUL-terminated): read in chunks, keeping
 * the unfinished line, so a machine with thousands of CPUs needs no big buffer (and no
 * stdio: the static engine stays small). 0, -ENOENT or a negative errno. */
static int stat_line(const char *path, int cpu, char *buf, size_t len)
{
	char want[24];
	snprintf(want, sizeof(want), "cpu%d ", cpu);
	size_t wlen = strlen(want);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t have = 0;
	int rc = -ENOENT;
	for (;;) {
		ssize_t n = read(fd, buf + have, len - 1 - have);
		if (n < 0) {
			rc = -errno;
			break;
		}
		have += (size_t)n;
		buf[have] = '\0';
		char *line = buf, *nl;
		while ((nl = strchr(line, '\n')) != NULL) {
			if (strncmp(line, "cpu", 3) != 0)
				goto done;	/* past the cpu lines */
			if (strncmp(line, want, wlen) == 0) {
				nl[1] = '\0';
				memmove(buf, line, (size_t)(nl - line) + 2);
				rc = 0;
				goto done;
			}
			line = nl + 1;
		}
		if (n == 0 || (line == buf && have == len - 1))
			break;	/* end of file, or a line longer than the buffer */
		have -= (size_t)(line - buf);
		memmove(buf, line, have);
	}
done:
	close(fd);
	return rc;
}

int cpuuse_read_stat(const char *path, int cpu, uint64_t *busy_ticks)
{
	if (cpu < 0)
		return -EINVAL;
	char buf[1024];
	int rc = stat_line(path, cpu, buf, sizeof(buf));
	return rc ? rc : cpuuse_parse_stat(buf, cpu, busy_ticks);
}

int cpuuse_cpu_busy_ns(int cpu, uint64_t *busy_ns)
{
	uint64_t ticks = 0;
	int rc = cpuuse_read_stat("/proc/stat", cpu, &ticks);
	if (rc)
		return rc;
	long hz = sysconf(_SC_CLK_TCK);
	if (hz <= 0)
		return -EINVAL;
	*busy_ns = ticks * (UINT64_C(1000000000) / (uint64_t)hz);
	return 0;
}

int cpuuse_thread_ns(int tid, uint64_t *run_ns, uint64_t *wait_ns)
{
	char path[64], buf[128];
	snprintf(path, sizeof(path), "/proc/self/task/%d/schedstat", tid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	int e = n < 0 ? -errno : 0;
	close(fd);
	if (e)
		return e;
	buf[n] = '\0';
	return cpuuse_parse_schedstat(buf, run_ns, wait_ns);
}
