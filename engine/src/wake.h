/* SPDX-License-Identifier: MIT */
/*
 * Waking one thread from another: what the `switch` and `overhead` probes measure.
 * Futex words (a post/take flag, the raw wait and wake), a spin on the clock, and
 * switch's wake mechanisms (futex, condition variable, pipe, eventfd, POSIX message
 * queue, signal, SysV semaphore) behind one object: open, notify, wait, close.
 */
#ifndef RTLAB_WAKE_H
#define RTLAB_WAKE_H

#include <mqueue.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"

enum wake_mech { WAKE_FUTEX, WAKE_CONDVAR, WAKE_PIPE, WAKE_EVENTFD, WAKE_MQ, WAKE_SIGNAL,
		 WAKE_SYSV_SEM, WAKE_MECH_COUNT };

extern const char *const wake_mech_names[]; /* indexed by enum wake_mech, NULL-terminated */

/*
 * Parse "futex,pipe" or "all" into a bit mask of (1 << enum wake_mech).
 * Returns 0, or -EINVAL with a message naming the bad word and the choices.
 */
int wake_parse_mechs(const char *s, unsigned *mask, char *err, size_t errlen) RL_WUR;

/* Channel name: "futex@cpu1" (waker_cpu < 0 or == cpu) or "futex@cpu0->cpu1". */
void wake_chan_name(char *buf, size_t len, const char *what, int waker_cpu, int cpu);

/* futex on a 32-bit word (private). */
int wake_futex_wait(atomic_uint *word, unsigned val);
int wake_futex_wake(atomic_uint *word, int n);

/* A one-shot flag on a futex word: post sets it and wakes the taker; take waits
 * until it is set, then clears it. */
void wake_post(atomic_uint *word);
void wake_take(atomic_uint *word);

/* Spin (reading CLOCK_MONOTONIC) until now >= until_ns. */
void wake_spin_until(uint64_t until_ns);

/* One waiter's mechanism and its kernel objects. */
struct wake_obj {
	enum wake_mech mech;
	int sig;		/* WAKE_SIGNAL: the signal (blocked in the waiter), set before open */
	int tid;		/* WAKE_SIGNAL: the waiter, set before the first notify */
	sigset_t sigs;
	_Alignas(RL_CACHELINE) atomic_uint fword;
	pthread_mutex_t mx;
	pthread_cond_t cv;
	int flag;
	int pfd[2];
	int efd;
	mqd_t mq;
	int semid;
};

/* Open the objects of mech (idx: a number unique in the process, for the mq name). */
int wake_open(struct wake_obj *p, enum wake_mech mech, size_t idx) RL_WUR;
void wake_close(struct wake_obj *p);
/* The waking call. 0 or -errno. */
int wake_notify(struct wake_obj *p);
/* Block until woken. 0 or -errno. */
int wake_wait(struct wake_obj *p);

#endif
