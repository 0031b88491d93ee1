/* SPDX-License-Identifier: MIT */
/* Unit tests: topology classification from a fake sysfs, the work split, the chase cycle. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "interfere_topo.h"
#include "tap.h"

static void put(const char *root, const char *rel, const char *text)
{
	char path[512], dir[512];
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	snprintf(dir, sizeof(dir), "%s", path);
	for (char *p = dir + strlen(root) + 1; *p; p++) {
		if (*p == '/') {
			*p = 0;
			mkdir(dir, 0755);
			*p = '/';
		}
	}
	FILE *f = fopen(path, "w");
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

/* cpu0's cache index: its level, type and the CPUs that share it. */
static void put_cache(const char *root, int index, const char *level, const char *type,
		      const char *cpus)
{
	static const char *const files[3] = { "level", "type", "shared_cpu_list" };
	const char *values[3] = { level, type, cpus };
	for (int k = 0; k < 3; k++) {
		char rel[64], text[64];
		snprintf(rel, sizeof(rel), "cpu0/cache/index%d/%s", index, files[k]);
		snprintf(text, sizeof(text), "%s\n", values[k]);
		put(root, rel, text);
	}
}

static void test_topology(void)
{
	char root[] = "/tmp/rtlab-topo-XXXXXX";
	if (!mkdtemp(root)) {
		CHECK(0);
		return;
	}
	/* cpu0: SMT sibling 4, L2 shared with 1 (and 4), L3 shared with 0-3,4-7 */
	put(root, "cpu0/topology/thread_siblings_list", "0,4\n");
	put_cache(root, 0, "1", "Data", "0,4");
	put_cache(root, 1, "1", "Instruction", "0,4");
	put_cache(root, 2, "2", "Unified", "0-1,4-5");
	put_cache(root, 3, "3", "Unified", "0-3,4-7");
	struct ifr_topo t;
	CHECK(ifr_topo_read(root, 0, &t) == 0);
	CHECK(t.has_l3);
	CHECK(ifr_classify(&t, 4) == IFR_SMT);
	CHECK(ifr_classify(&t, 1) == IFR_SAME_L2);
	CHECK(ifr_classify(&t, 2) == IFR_SAME_L3);
	CHECK(ifr_classify(&t, 8) == IFR_CROSS_L3);
	CHECK(ifr_classify(&t, -1) == -1);
	CHECK(strcmp(ifr_class_names[IFR_SAME_L3], "same_l3") == 0);
	/* no cache description: only SMT can be told */
	put(root, "cpu1/topology/thread_siblings_list", "1\n");
	CHECK(ifr_topo_read(root, 1, &t) == 0);
	CHECK(!t.has_l3);
	CHECK(ifr_classify(&t, 2) == -1);
	CHECK(ifr_topo_read(root, 9, &t) != 0);
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	CHECK(system(cmd) == 0);
}

static void test_split(void)
{
	uint64_t s, p;
	ifr_split(1000, 300, 2, &s, &p);
	CHECK_EQ_U(s, 300);
	CHECK_EQ_U(p, 350);
	ifr_split(1000, 300, 1, &s, &p);
	CHECK_EQ_U(s + p, 1000);
	ifr_split(1000, 0, 3, &s, &p);
	CHECK_EQ_U(s, 0);
	CHECK_EQ_U(p, 334);
	ifr_split(1000, 1000, 4, &s, &p);
	CHECK_EQ_U(s, 1000);
	CHECK_EQ_U(p, 0);
}

static void test_cycle(void)
{
	enum { N = 1000 };
	static uint32_t next[N];
	static unsigned char seen[N];
	ifr_make_cycle(next, N, 42);
	uint32_t i = 0;
	size_t steps = 0;
	do {
		CHECK(next[i] < N);
		if (seen[i])
			break;
		seen[i] = 1;
		i = next[i];
		steps++;
	} while (i != 0);
	CHECK_EQ_U(steps, N); /* one single cycle through every slot */
}

int main(void)
{
	test_topology();
	test_split();
	test_cycle();
	return tap_done("interfere");
}
