/* SPDX-License-Identifier: MIT */
/*
 * The `interfere` probe's run, shared by interfere.c (options, header, result) and
 * interfere_jobs.c (the workloads, and the coordinator that hands them to the
 * workers): its configuration and context.
 */
#ifndef RTLAB_INTERFERE_JOBS_H
#define RTLAB_INTERFERE_JOBS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "channel.h"
#include "counter.h"
#include "interfere_topo.h"
#include "probe.h"

#define IFR_MAX_CH 512

enum { MODE_AMDAHL, MODE_PAIRS, MODE_SHARING };

struct ifr_cfg {
	const struct run_opts *run;
	int mode;
	int cpus[CPU_SETSIZE];
	size_t n_cpus;
	enum rt_policy policy;
	int priority;
	unsigned repeats;
	unsigned serial_pm;
	size_t ws_bytes;
	uint64_t run_ns;
	uint64_t ops;
	uint64_t batch;
};

enum job_kind { JOB_NONE, JOB_AMDAHL, JOB_CHASE, JOB_COMPUTE, JOB_SHARE, JOB_EXIT };
enum share_kind { SH_SHARED, SH_PERCPU, SH_FALSE, SH_COUNT };
extern const char *const ifr_share_names[]; /* by enum share_kind */
extern const char *const ifr_wl_names[];    /* chase, compute */

struct ifr_ctx;

struct ifr_worker {
	_Alignas(RL_CACHELINE) struct ifr_ctx *ctx;
	size_t idx;
	int cpu;
	uint8_t *buf;		/* working set (amdahl) */
	uint32_t *chase;	/* pointer-chase cycle (pairs) */
	size_t chase_n;
	/* the current job, written by the coordinator before the generation bump */
	int kind;
	uint64_t units;
	bool timed;		/* record the time of this job */
	struct channel *ch;
	uint64_t *raw;		/* where to store the time (ns), or NULL */
	int share;
	uint64_t result_ns;
	uint64_t sink;
};

/* Counters for the sharing mode, each in its own line or packed in one. */
struct padded_counter {
	_Alignas(RL_CACHELINE) atomic_uint_least64_t v;
};
struct packed_counters {
	_Alignas(RL_CACHELINE) atomic_uint_least64_t v[8];
};

struct ifr_ctx {
	const struct ifr_cfg *cfg;
	struct ifr_cfg cfg_store;
	struct counter cnt;
	const char *why_hw;	/* why the hardware counter is not used, or NULL */
	struct ifr_topo topo;
	bool topo_ok;
	struct ifr_worker *w;

	pthread_mutex_t lock;
	pthread_cond_t cond_work, cond_done;
	bool sync_init;		/* lock and conditions initialised */
	uint64_t gen;		/* under lock: job generation */
	unsigned active;	/* under lock: workers in the current job */
	unsigned pending;	/* under lock: not yet finished */

	_Alignas(RL_CACHELINE) atomic_uint_least64_t par_go;	/* amdahl: parallel phase id */
	_Alignas(RL_CACHELINE) atomic_uint par_done;
	_Alignas(RL_CACHELINE) atomic_uint start_gate;		/* sharing/pairs: common start */
	_Alignas(RL_CACHELINE) atomic_bool aggr_stop;		/* pairs: stop the aggressor */
	_Alignas(RL_CACHELINE) atomic_uint_least64_t shared_ctr;
	struct padded_counter percpu[64];
	struct packed_counters packed;

	atomic_bool stop;
	struct channel *chans[IFR_MAX_CH];
	size_t n_ch;
	/* raw times: amdahl [n][repeat]; pairs [config][repeat] */
	uint64_t *raw;
	size_t raw_rows;
	uint64_t *raw_count;	/* per row */
	int pair_partner[IFR_CLASS_COUNT];	/* -1: class missing */
	uint64_t units_amdahl, units_wl[2];
	uint64_t start_mono;
};

/* A worker, once released: run the jobs the coordinator hands out until JOB_EXIT. */
void ifr_worker_loop(struct ifr_worker *wk);
/* The coordinator: the experiment of the mode, job by job, until done or stopped. */
void ifr_coordinate(struct ifr_ctx *ctx);
/* End every worker (JOB_EXIT). */
void ifr_stop_workers(struct ifr_ctx *ctx);

#endif
