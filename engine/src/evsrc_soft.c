/* SPDX-License-Identifier: MIT */
/*
 * Event source for tests and demos: a generator thread wakes on absolute
 * deadlines, records a capture time on CLOCK_MONOTONIC and writes it into a
 * pipe; the measuring thread blocks reading the pipe. The latency is then the
 * time from "event" to the handling thread running: a pipe wake-up across
 * threads (and CPUs, with --gen-cpu).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "crew.h"
#include "event.h"
#include "rt.h"

/* The generator's stack: a small one like every thread of the engine (pthread's
 * default of 8 MiB would have to be locked by mlockall, beyond an unprivileged
 * RLIMIT_MEMLOCK). */
#define GENERATOR_STACK (128 * 1024)

struct soft_priv {
	int pipe_rd, pipe_wr;
	uint64_t interval_ns;
	int cpu, policy, priority;
	struct crew crew;	/* the generator, started as every thread is (crew.c) */
	bool started;
	atomic_bool stop;
	uint64_t lost; /* writes that failed (pipe full) */
};

static struct soft_priv soft_store;

static void *generator(void *arg)
{
	struct soft_priv *p = arg;
	if (p->cpu >= 0 && rt_pin_self(p->cpu) != 0) {
		/* reported through the header as the generator's placement */
	}
	struct rt_sched_req req = { .policy = (enum rt_policy)p->policy, .priority = p->priority };
	if (rt_set_sched_self(&req) != 0) {
		/* the generator runs as it can; only the handler's scheduling is checked */
	}
	if (!crew_wait_go(&p->crew))
		return NULL;
	uint64_t next = rl_now_ns(CLOCK_MONOTONIC) + p->interval_ns;
	while (!atomic_load_explicit(&p->stop, memory_order_relaxed)) {
		struct timespec ts = rl_ns_to_ts(next);
		if (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			continue;
		uint64_t cap = rl_now_ns(CLOCK_MONOTONIC);
		if (write(p->pipe_wr, &cap, sizeof(cap)) != (ssize_t)sizeof(cap))
			p->lost++;
		next += p->interval_ns;
		uint64_t now = rl_now_ns(CLOCK_MONOTONIC);
		if (next <= now) /* overran: restart the schedule (generator only) */
			next = now + p->interval_ns;
	}
	return NULL;
}

static int soft_open(struct evsrc *s, const struct evsrc_cfg *cfg, char *err, size_t len)
{
	struct soft_priv *p = &soft_store;
	memset(p, 0, sizeof(*p));
	int fds[2];
	if (pipe2(fds, O_CLOEXEC) != 0) {
		int e = errno;
		snprintf(err, len, "pipe: %s", strerror(e));
		return -e;
	}
	p->pipe_rd = fds[0];
	p->pipe_wr = fds[1];
	int fl = fcntl(p->pipe_wr, F_GETFL);
	if (fl >= 0 && fcntl(p->pipe_wr, F_SETFL, fl | O_NONBLOCK) != 0) {
		/* a full pipe then blocks the generator: still correct */
	}
	p->interval_ns = cfg->interval_ns;
	p->cpu = cfg->gen_cpu;
	p->policy = cfg->gen_policy;
	p->priority = cfg->gen_priority;
	s->fd = p->pipe_rd;
	s->domain = EV_MONOTONIC;
	s->priv = p;
	return 0;
}

static int soft_arm(struct evsrc *s)
{
	struct soft_priv *p = s->priv;
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	int e = crew_start(&p->crew, 1, GENERATOR_STACK, generator, p, 0);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (e)
		return e;
	p->started = true;
	crew_go(&p->crew);
	return 0;
}

static int soft_wait(struct evsrc *s, uint64_t deadline, struct ev_event *ev)
{
	struct soft_priv *p = s->priv;
	for (;;) {
		int r = evsrc_poll(p->pipe_rd, deadline);
		if (r <= 0)
			return r;
		uint64_t cap;
		ssize_t got = read(p->pipe_rd, &cap, sizeof(cap));
		if (got == (ssize_t)sizeof(cap)) {
			ev->capture_ns = cap;
			ev->lost = 0;
			return 1;
		}
		if (got < 0 && errno != EINTR && errno != EAGAIN)
			return -errno;
	}
}

static void soft_close(struct evsrc *s)
{
	struct soft_priv *p = s->priv;
	if (!p)
		return;
	if (p->started) {
		atomic_store(&p->stop, true);
		crew_join(&p->crew);
		p->started = false;
	}
	crew_destroy(&p->crew);
	close(p->pipe_rd);
	close(p->pipe_wr);
	s->fd = -1;
	s->priv = NULL;
}

const struct evsrc_ops evsrc_soft = EVSRC_OPS("soft", soft_open, soft_arm, soft_wait, soft_close);
