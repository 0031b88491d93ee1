/* SPDX-License-Identifier: MIT */
#include "interfere_topo.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "opts.h"
#include "sysfile.h"

const char *const ifr_class_names[] = { "smt", "same_l2", "same_l3", "cross_l3" };

static int read_list(const char *path, cpu_set_t *set)
{
	char buf[1024];
	int e = sf_read(path, buf, sizeof(buf));
	if (e)
		return e;
	return opt_parse_cpulist(buf, set);
}

int ifr_topo_read(const char *root, int cpu, struct ifr_topo *t)
{
	char path[512];
	memset(t, 0, sizeof(*t));
	CPU_ZERO(&t->smt);
	CPU_ZERO(&t->l2);
	CPU_ZERO(&t->l3);
	snprintf(path, sizeof(path), "%s/cpu%d/topology/thread_siblings_list", root, cpu);
	int e = read_list(path, &t->smt);
	if (e)
		return e;
	for (int i = 0; i < 16; i++) {
		char lv[32];
		snprintf(path, sizeof(path), "%s/cpu%d/cache/index%d/level", root, cpu, i);
		if (sf_read(path, lv, sizeof(lv)) != 0)
			break;
		snprintf(path, sizeof(path), "%s/cpu%d/cache/index%d/type", root, cpu, i);
		char ty[32] = "";
		if (sf_read(path, ty, sizeof(ty)) == 0 && strcmp(ty, "Instruction") == 0)
			continue;
		cpu_set_t *dst = strcmp(lv, "2") == 0 ? &t->l2 : strcmp(lv, "3") == 0 ? &t->l3 : NULL;
		if (!dst)
			continue;
		snprintf(path, sizeof(path), "%s/cpu%d/cache/index%d/shared_cpu_list", root, cpu, i);
		if (read_list(path, dst) == 0 && dst == &t->l3)
			t->has_l3 = 1;
	}
	return 0;
}

int ifr_classify(const struct ifr_topo *a, int b)
{
	if (b < 0 || b >= CPU_SETSIZE)
		return -1;
	if (CPU_ISSET(b, &a->smt))
		return IFR_SMT;
	if (CPU_ISSET(b, &a->l2))
		return IFR_SAME_L2;
	if (CPU_ISSET(b, &a->l3))
		return IFR_SAME_L3;
	if (a->has_l3)
		return IFR_CROSS_L3;
	return -1;
}

void ifr_split(uint64_t units, unsigned serial_permille, unsigned n, uint64_t *serial,
	       uint64_t *share)
{
	if (serial_permille > 1000)
		serial_permille = 1000;
	if (!n)
		n = 1;
	*serial = units * serial_permille / 1000;
	*share = (units - *serial + n - 1) / n;
}

void ifr_make_cycle(uint32_t *next, size_t n, uint64_t seed)
{
	if (!n)
		return;
	uint32_t *perm = next; /* build the order in place, then link it */
	for (size_t i = 0; i < n; i++)
		perm[i] = (uint32_t)i;
	uint64_t x = seed | 1;
	for (size_t i = n - 1; i > 0; i--) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		size_t j = (size_t)(x % i); /* j < i: Sattolo, one single cycle */
		uint32_t tmp = perm[i];
		perm[i] = perm[j];
		perm[j] = tmp;
	}
	/* perm is now a cyclic permutation: i -> perm[i] visits every slot once */
}
