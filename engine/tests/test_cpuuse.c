/* SPDX-License-Identifier: MIT */
/* Unit tests of cpuuse.c: /proc/stat and schedstat text as the kernel writes them, then
 * the live files of this process and machine. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cpuuse.h"
#include "tap.h"

static const char STAT[] =
	"cpu  2255 34 2290 22625563 6290 127 456 0 0 0\n"
	"cpu0 1132 34 1441 11311718 3675 127 438 7 0 0\n"
	"cpu1 1123 0 849 11313845 2614 0 18 0 0 0\n"
	"cpu12 5 0 1 100 0 0 0 0 0 0\n"
	"intr 114930548 113199788 3 0 5 263 0 4 [...]\n"
	"ctxt 1990473\n";

static void test_stat(void)
{
	uint64_t t = 0;
	CHECK_EQ_U(cpuuse_parse_stat(STAT, 0, &t), 0);
	CHECK_EQ_U(t, 1132 + 34 + 1441 + 127 + 438 + 7);	/* idle, iowait out */
	CHECK_EQ_U(cpuuse_parse_stat(STAT, 1, &t), 0);
	CHECK_EQ_U(t, 1123 + 849 + 18);
	CHECK_EQ_U(cpuuse_parse_stat(STAT, 12, &t), 0);	/* not cpu1's prefix */
	CHECK_EQ_U(t, 6);
	CHECK_EQ_U(cpuuse_parse_stat(STAT, 2, &t), (unsigned long long)-ENOENT);
	/* an old kernel's line: only up to iowait */
	CHECK_EQ_U(cpuuse_parse_stat("cpu3 10 1 2 500 4\n", 3, &t), 0);
	CHECK_EQ_U(t, 13);
	CHECK_EQ_U(cpuuse_parse_stat("cpu3 10 1\n", 3, &t), (unsigned long long)-EINVAL);
	CHECK_EQ_U(cpuuse_parse_stat("cpu3 x\n", 3, &t), (unsigned long long)-EINVAL);
	CHECK_EQ_U(cpuuse_parse_stat("", 0, &t), (unsigned long long)-ENOENT);
}

/* A machine with 1000 CPUs: its cpu lines span many read chunks. */
static void test_big_file(void)
{
	char path[] = "/tmp/rtlab-cpuuse-XXXXXX";
	FILE *f = tap_tmpfile(path);
	if (!f)
		return;
	fprintf(f, "cpu  1 2 3 4 5 6 7 8 0 0\n");
	for (int c = 0; c < 1000; c++)
		fprintf(f, "cpu%d %d 1 %d 123456789 7 2 3 0 0 0\n", c, c, 1000 - c);
	fprintf(f, "intr 1 2 3\nctxt 5\n");
	fclose(f);
	uint64_t t = 0;
	for (int c = 0; c < 1000; c += 37) {
		CHECK_EQ_U(cpuuse_read_stat(path, c, &t), 0);
		CHECK_EQ_U(t, (uint64_t)c + 1 + (uint64_t)(1000 - c) + 2 + 3);
	}
	CHECK_EQ_U(cpuuse_read_stat(path, 999, &t), 0);
	CHECK_EQ_U(cpuuse_read_stat(path, 1000, &t), (unsigned long long)-ENOENT);
	/* many CPUs in one pass, in any order, with repeats and missing ones */
	int cpus[] = { 998, 3, -1, 1000, 3, 0, 512 };
	enum { N = sizeof(cpus) / sizeof(cpus[0]) };
	uint64_t many[N];
	bool found[N];
	CHECK_EQ_U(cpuuse_read_stat_many(path, cpus, N, many, found), 0);
	for (int i = 0; i < N; i++) {
		int c = cpus[i];
		CHECK_EQ_U(found[i], c >= 0 && c < 1000);
		if (found[i])
			CHECK_EQ_U(many[i], (uint64_t)c + 1 + (uint64_t)(1000 - c) + 2 + 3);
	}
	unlink(path);
}

static void test_schedstat(void)
{
	uint64_t run = 0, wait = 0;
	CHECK_EQ_U(cpuuse_parse_schedstat("5096836 40853 28\n", &run, &wait), 0);
	CHECK_EQ_U(run, 5096836);
	CHECK_EQ_U(wait, 40853);
	CHECK_EQ_U(cpuuse_parse_schedstat("garbage\n", &run, &wait),
		   (unsigned long long)-EINVAL);
}

static void test_live(void)
{
	/* this thread spins 20 ms: its run time grows by about that much */
	int tid = (int)syscall(SYS_gettid);
	uint64_t run0, run1, wait;
	int e = cpuuse_thread_ns(tid, &run0, &wait);
	if (e == -ENOENT) {
		printf("# no schedstat (CONFIG_SCHED_INFO off): live thread check skipped\n");
	} else {
		CHECK_EQ_U(e, 0);
		struct timespec t0, t;
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
		do
			clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
		while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 20000000L);
		CHECK_EQ_U(cpuuse_thread_ns(tid, &run1, &wait), 0);
		CHECK(run1 >= run0 + 19000000u);
	}
	int cpus[] = { 0, -1, 1 << 20 };	/* every machine has a CPU 0 line */
	uint64_t busy[3];
	bool found[3];
	CHECK_EQ_U(cpuuse_cpus_busy_ns(cpus, 3, busy, found), 0);
	CHECK(found[0] && !found[1] && !found[2]);
	CHECK(busy[0] > 0);
	CHECK_EQ_U(cpuuse_thread_ns(1 << 30, &run0, &wait), (unsigned long long)-ENOENT);
}

int main(void)
{
	test_stat();
	test_big_file();
	test_schedstat();
	test_live();
	return tap_done("cpuuse");
}
