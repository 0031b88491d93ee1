/* SPDX-License-Identifier: MIT */
/*
 * Real-time set-up primitives: scheduling policy and priority (including
 * SCHED_DEADLINE through sched_setattr), CPU affinity, read-back of what took
 * effect, mlockall, stack prefaulting, the /dev/cpu_dma_latency holder and
 * the tracefs marker used when a threshold stops a run.
 * All functions return 0 or -errno.
 */
#ifndef RTLAB_RT_H
#define RTLAB_RT_H

#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"

enum rt_policy { RT_FIFO, RT_RR, RT_OTHER, RT_DEADLINE, RT_POLICY_COUNT };

extern const char *const rt_policy_names[]; /* NULL-terminated, indexed by enum rt_policy */

/* "SCHED_FIFO" for RT_FIFO, and so on. */
const char *rt_policy_label(enum rt_policy p);
/* Name of a kernel policy number (SCHED_*), or "unknown". */
const char *rt_kernel_policy_name(int kpolicy);
int rt_policy_to_kernel(enum rt_policy p);
/* Valid priority range for a policy. */
void rt_priority_range(enum rt_policy p, int *min, int *max);

struct rt_sched_req {
	enum rt_policy policy;
	int priority;
	uint64_t dl_runtime_ns, dl_deadline_ns, dl_period_ns; /* SCHED_DEADLINE */
};

/* Set the calling thread's scheduling. */
int rt_set_sched_self(const struct rt_sched_req *req) RL_WUR;
/* Read back the calling thread's policy (SCHED_* number) and priority. */
int rt_get_sched_self(int *kpolicy, int *priority) RL_WUR;

/* Pin the calling thread to one CPU. */
int rt_pin_self(int cpu) RL_WUR;
int rt_get_affinity_self(cpu_set_t *set) RL_WUR;

int rt_mlockall(void) RL_WUR;
/* Touch `bytes` of stack below the caller so later use causes no page fault. */
void rt_prefault_stack(size_t bytes);

/* Open /dev/cpu_dma_latency and write us; *fd stays open to hold it. */
int rt_dma_latency_hold(int32_t us, int *fd) RL_WUR;

struct rt_trace {
	const char *path;	/* tracefs mount found, or NULL */
	int marker_fd;		/* -1 if not open */
	int on_fd;		/* tracing_on, -1 if not open */
};

/* Find a mounted tracefs and open trace_marker and tracing_on. */
int rt_trace_open(struct rt_trace *t) RL_WUR;
/* Write msg to trace_marker, then 0 to tracing_on (like cyclictest -b). */
void rt_trace_stop(const struct rt_trace *t, const char *msg);
void rt_trace_close(struct rt_trace *t);

/*
 * The main-thread wait every probe shares. rt_block_signals() blocks every signal in
 * the calling thread; threads created afterwards inherit the mask, so SIGINT/SIGTERM
 * reach only rt_wait_done_or_signal(). That returns when `finished(arg)` holds after a
 * measuring thread called rt_notify_main(), or, on SIGINT/SIGTERM, sets *stop and
 * returns true (interrupted).
 */
void rt_block_signals(void);
void rt_notify_main(void);
bool rt_wait_done_or_signal(atomic_bool *stop, bool (*finished)(const void *arg),
			    const void *arg);

/*
 * A thread that asks for a CPU and a scheduling, and what it got: the thread sets
 * itself up (rt_thread_setup) and reads back what took effect, so that the header
 * says what was measured with, not what was asked for.
 */
struct rt_thread {
	char role[48];			/* its name in the header (effective.threads[].channel) */
	int cpu;			/* -1: not pinned */
	struct rt_sched_req req;
	/* read back by the thread itself */
	int tid;
	int pin_err, sched_err, get_err; /* 0 or -errno */
	int kpolicy, prio;		/* as read back (valid unless get_err) */
	cpu_set_t affinity;
};

/* In the thread: note its tid, pin it (cpu >= 0), set its scheduling, read both
 * back, prefault its stack. */
void rt_thread_setup(struct rt_thread *t);
/* It runs where and how it asked to. */
bool rt_thread_ok(const struct rt_thread *t);

#endif
