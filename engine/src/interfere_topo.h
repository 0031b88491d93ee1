/* SPDX-License-Identifier: MIT */
/* The `interfere` probe's CPU topology and pure arithmetic, kept apart for unit tests. */
#ifndef RTLAB_INTERFERE_TOPO_H
#define RTLAB_INTERFERE_TOPO_H

#include <sched.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"

/* Pair classes, from the closest to the farthest. */
enum ifr_class { IFR_SMT, IFR_SAME_L2, IFR_SAME_L3, IFR_CROSS_L3, IFR_CLASS_COUNT };

extern const char *const ifr_class_names[]; /* indexed by enum ifr_class */

/* What CPU a shares with others, from sysfs (empty sets when unknown). */
struct ifr_topo {
	cpu_set_t smt;	/* thread_siblings_list */
	cpu_set_t l2;	/* shared_cpu_list of the level-2 cache */
	cpu_set_t l3;	/* shared_cpu_list of the level-3 cache */
	int has_l3;	/* an L3 cache is described */
};

/* Read the topology of cpu below sysfs_root (normally "/sys/devices/system/cpu"). */
int ifr_topo_read(const char *sysfs_root, int cpu, struct ifr_topo *t) RL_WUR;

/* Class of the pair (a, b) given a's topology; -1 when it cannot be told. */
int ifr_classify(const struct ifr_topo *a, int b);

/* Split `units` of work: serial part (permille of all) and each of n shares. */
void ifr_split(uint64_t units, unsigned serial_permille, unsigned n, uint64_t *serial,
	       uint64_t *share);

/* Sattolo's algorithm: a single cycle over n slots (next[i] is the successor). */
void ifr_make_cycle(uint32_t *next, size_t n, uint64_t seed);

#endif
