/* SPDX-License-Identifier: MIT */
#include "rt.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "jsonw.h"

#ifndef SCHED_DEADLINE
#define SCHED_DEADLINE 6
#endif
#ifndef SCHED_RESET_ON_FORK
#define SCHED_RESET_ON_FORK 0x40000000
#endif

const char *const rt_policy_names[] = { "fifo", "rr", "other", "deadline", NULL };

/* The kernel's struct sched_attr (glibc < 2.41 has no wrapper). */
struct rl_sched_attr {
	uint32_t size;
	uint32_t sched_policy;
	uint64_t sched_flags;
	int32_t sched_nice;
	uint32_t sched_priority;
	uint64_t sched_runtime;
	uint64_t sched_deadline;
	uint64_t sched_period;
};

const char *rt_policy_label(enum rt_policy p)
{
	static const char *const labels[] = { "SCHED_FIFO", "SCHED_RR", "SCHED_OTHER",
					      "SCHED_DEADLINE" };
	return p < RT_POLICY_COUNT ? labels[p] : "SCHED_?";
}

const char *rt_kernel_policy_name(int kpolicy)
{
	switch (kpolicy & ~SCHED_RESET_ON_FORK) {
	case SCHED_FIFO: return "fifo";
	case SCHED_RR: return "rr";
	case SCHED_OTHER: return "other";
	case SCHED_DEADLINE: return "deadline";
#ifdef SCHED_BATCH
	case SCHED_BATCH: return "batch";
#endif
#ifdef SCHED_IDLE
	case SCHED_IDLE: return "idle";
#endif
	}
	return "unknown";
}

int rt_policy_to_kernel(enum rt_policy p)
{
	switch (p) {
	case RT_FIFO: return SCHED_FIFO;
	case RT_RR: return SCHED_RR;
	case RT_DEADLINE: return SCHED_DEADLINE;
	case RT_OTHER:
	case RT_POLICY_COUNT:
		break;
	}
	return SCHED_OTHER;
}

void rt_priority_range(enum rt_policy p, int *min, int *max)
{
	if (p == RT_FIFO || p == RT_RR) {
		*min = 1;
		*max = 99;
	} else {
		*min = 0;
		*max = 0;
	}
}

int rt_set_sched_self(const struct rt_sched_req *req)
{
	struct rl_sched_attr a;
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.sched_policy = (uint32_t)rt_policy_to_kernel(req->policy);
	a.sched_priority = (uint32_t)req->priority;
	if (req->policy == RT_DEADLINE) {
		a.sched_runtime = req->dl_runtime_ns;
		a.sched_deadline = req->dl_deadline_ns;
		a.sched_period = req->dl_period_ns;
	}
	if (syscall(SYS_sched_setattr, 0, &a, 0) != 0)
		return -errno;
	return 0;
}

int rt_get_sched_self(int *kpolicy, int *priority)
{
	struct rl_sched_attr a;
	memset(&a, 0, sizeof(a));
	if (syscall(SYS_sched_getattr, 0, &a, sizeof(a), 0) != 0)
		return -errno;
	*kpolicy = (int)a.sched_policy;
	*priority = (int)a.sched_priority;
	return 0;
}

int rt_pin_self(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return -pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

int rt_get_affinity_self(cpu_set_t *set)
{
	CPU_ZERO(set);
	return -pthread_getaffinity_np(pthread_self(), sizeof(*set), set);
}

int rt_mlockall(void)
{
	if (mlockall(MCL_CURRENT | MCL_FUTURE) != 0)
		return -errno;
	return 0;
}

void rt_prefault_stack(size_t bytes)
{
	unsigned char buf[bytes];
	memset(buf, 0, bytes);
	/* keep the stores: the compiler must assume buf is read */
	__asm__ __volatile__("" : : "r"(buf) : "memory");
}

int rt_dma_latency_hold(int32_t us, int *fd)
{
	int f = open("/dev/cpu_dma_latency", O_WRONLY | O_CLOEXEC);
	if (f < 0)
		return -errno;
	if (write(f, &us, sizeof(us)) != (ssize_t)sizeof(us)) {
		int e = errno ? errno : EIO;
		close(f);
		return -e;
	}
	*fd = f;
	return 0;
}

int rt_trace_open(struct rt_trace *t)
{
	static const char *const paths[] = { "/sys/kernel/tracing", "/sys/kernel/debug/tracing" };
	char buf[128];
	t->path = NULL;
	t->marker_fd = -1;
	t->on_fd = -1;
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		snprintf(buf, sizeof(buf), "%s/trace_marker", paths[i]);
		if (access(buf, F_OK) != 0)
			continue;
		t->path = paths[i];
		t->marker_fd = open(buf, O_WRONLY | O_CLOEXEC);
		snprintf(buf, sizeof(buf), "%s/tracing_on", paths[i]);
		t->on_fd = open(buf, O_WRONLY | O_CLOEXEC);
		if (t->marker_fd < 0 || t->on_fd < 0) {
			int e = errno;
			rt_trace_close(t);
			t->path = paths[i];
			return -e;
		}
		return 0;
	}
	return -ENOENT;
}

void rt_trace_stop(const struct rt_trace *t, const char *msg)
{
	if (t->marker_fd >= 0 && rl_write_all(t->marker_fd, msg, strlen(msg)) != 0) {
		/* nothing more to do: the trace still stops below */
	}
	if (t->on_fd >= 0 && rl_write_all(t->on_fd, "0", 1) != 0) {
		/* best effort */
	}
}

void rt_trace_close(struct rt_trace *t)
{
	if (t->marker_fd >= 0)
		close(t->marker_fd);
	if (t->on_fd >= 0)
		close(t->on_fd);
	t->marker_fd = -1;
	t->on_fd = -1;
}

void rt_block_signals(void)
{
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
}

void rt_notify_main(void)
{
	kill(getpid(), SIGUSR1);
}

bool rt_wait_done_or_signal(atomic_bool *stop, bool (*finished)(const void *arg),
			    const void *arg)
{
	sigset_t wait;
	sigemptyset(&wait);
	sigaddset(&wait, SIGINT);
	sigaddset(&wait, SIGTERM);
	sigaddset(&wait, SIGUSR1);
	for (;;) {
		int sig = sigwaitinfo(&wait, NULL);
		if (sig == SIGINT || sig == SIGTERM) {
			atomic_store(stop, true);
			return true;
		}
		if (sig == SIGUSR1 && finished(arg))
			return false;
	}
}

#define RT_PREFAULT_STACK (64 * 1024)

void rt_thread_setup(struct rt_thread *t)
{
	t->tid = (int)syscall(SYS_gettid);
	t->pin_err = t->cpu >= 0 ? rt_pin_self(t->cpu) : 0;
	t->sched_err = rt_set_sched_self(&t->req);
	t->get_err = rt_get_sched_self(&t->kpolicy, &t->prio);
	if (rt_get_affinity_self(&t->affinity) != 0)
		CPU_ZERO(&t->affinity);
	rt_prefault_stack(RT_PREFAULT_STACK);
}

bool rt_thread_ok(const struct rt_thread *t)
{
	return !t->pin_err && !t->sched_err && !t->get_err &&
	       (t->kpolicy & ~SCHED_RESET_ON_FORK) == rt_policy_to_kernel(t->req.policy) &&
	       t->prio == t->req.priority &&
	       (t->cpu < 0 || (CPU_COUNT(&t->affinity) == 1 && CPU_ISSET(t->cpu, &t->affinity)));
}
