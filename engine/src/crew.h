/* SPDX-License-Identifier: MIT */
/*
 * A crew of threads started together: the threads are created, each sets itself up
 * (pin, scheduling policy, read-back), main goes on once all of them are set up,
 * inspects the set-up, and then releases them all at once into their work or into
 * an abort. Every thread of a probe starts here: the measuring threads of the
 * lifecycle (lifecycle.c) and the worker threads of switch's checks.
 *
 *   main                               crew thread
 *   crew_start(n, fn, args) ---------> set up; crew_wait_go()
 *     (returns when all are set up)       |
 *   inspect set-up, write header          |
 *   crew_go() or crew_abort() --------> true: work / false: return
 *   crew_join(); crew_destroy()
 */
#ifndef RTLAB_CREW_H
#define RTLAB_CREW_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "common.h"

enum crew_state { CREW_WAIT, CREW_GO, CREW_ABORT };

struct crew {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	size_t ready;			/* under lock: threads in crew_wait_go */
	enum crew_state state;		/* under lock */
	pthread_t *tids;
	bool *joined;
	size_t n, started;
	bool inited;
};

/*
 * Create `n` threads running fn(args + i * stride) with a `stack`-byte stack (0: the
 * default), and wait until every one has reached crew_wait_go (its set-up done).
 * Returns 0; -ENOMEM; or, when a thread cannot be created, the error of
 * pthread_create after the threads created so far were aborted and joined.
 */
int crew_start(struct crew *c, size_t n, size_t stack, void *(*fn)(void *), void *args,
	       size_t stride) RL_WUR;

/* In a crew thread, after its set-up: false when main aborted (do not work). */
bool crew_wait_go(struct crew *c);

/* main: release the threads into their work. */
void crew_go(struct crew *c);
/* main: release the threads into an abort and join them. */
void crew_abort(struct crew *c);
/* main: join thread i (once). */
void crew_join_one(struct crew *c, size_t i);
/* main: join every started thread not joined yet. */
void crew_join(struct crew *c);
/* Aborts and joins threads still waiting, then frees the crew (safe on a zeroed crew). */
void crew_destroy(struct crew *c);

#endif
