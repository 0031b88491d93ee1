/* SPDX-License-Identifier: MIT */
#include "cpuuse.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
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

/* One complete line of /proc/stat: when it is the line of one of `cpus`, parse it. */
static int take_line(const char *line, const int *cpus, size_t n, uint64_t *busy_ticks,
		     bool *found)
{
	if (line[3] < '0' || line[3] > '9')
		return 0;	/* the "cpu " total */
	char *end;
	long id = strtol(line + 3, &end, 10);
	if (*end != ' ')
		return 0;
	for (size_t i = 0; i < n; i++) {
		if (cpus[i] != id || found[i])
			continue;
		int rc = parse_cpu_line(end, &busy_ticks[i]);
		if (rc)
			return rc;
		found[i] = true;
	}
	return 0;
}

int cpuuse_read_stat_many(const char *path, const int *cpus, size_t n, uint64_t *busy_ticks,
			  bool *found)
{
	for (size_t i = 0; i < n; i++)
		found[i] = false;
	/* read in chunks, keeping the unfinished line, so a machine with thousands of CPUs
	 * needs no big buffer (and no stdio: the static engine stays small) */
	char buf[1024];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t have = 0;
	int rc = 0;
	for (;;) {
		ssize_t got = read(fd, buf + have, sizeof(buf) - 1 - have);
		if (got < 0) {
			rc = -errno;
			break;
		}
		have += (size_t)got;
		buf[have] = '\0';
		char *line = buf, *nl;
		while ((nl = strchr(line, '\n')) != NULL) {
			if (strncmp(line, "cpu", 3) != 0)
				goto done;	/* past the cpu lines */
			*nl = '\0';
			rc = take_line(line, cpus, n, busy_ticks, found);
			if (rc)
				goto done;
			line = nl + 1;
		}
		if (got == 0 || (line == buf && have == sizeof(buf) - 1))
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
	bool found;
	int rc = cpuuse_read_stat_many(path, &cpu, 1, busy_ticks, &found);
	return rc ? rc : found ? 0 : -ENOENT;
}

int cpuuse_cpus_busy_ns(const int *cpus, size_t n, uint64_t *busy_ns, bool *found)
{
	long hz = sysconf(_SC_CLK_TCK);
	if (hz <= 0)
		return -EINVAL;
	int rc = cpuuse_read_stat_many("/proc/stat", cpus, n, busy_ns, found);
	if (rc)
		return rc;
	for (size_t i = 0; i < n; i++)
		busy_ns[i] *= UINT64_C(1000000000) / (uint64_t)hz;
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
