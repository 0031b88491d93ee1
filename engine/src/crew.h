/* SPDX-License-Identifier: MIT */
/*
 * A crew of measuring threads started together: every probe creates its threads,
 * lets each set itself up (pin, scheduling policy, read-back), inspects the set-up
 * from main, then either releases them all at once into the measurement or into an
 * abort. The two barriers, the abort flag, thread creation and joining live here.
 *
 *   main                               crew thread
 *   crew_start(n, fn, args) ---------> set up; crew_wait_go()
 *     (returns when all are set up)       |
 *   inspect set-up, write header          |
 *   crew_go() or crew_abort() --------> true: measure / false: return
 *   crew_join(); crew_destroy()
 */
#ifndef RTLAB_CREW_H
#define RTLAB_CREW_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "common.h"

struct crew {
	pthread_barrier_t ready, go;
	atomic_bool abort;
	pthread_t *tids;
	size_t n, started;
	bool barriers, released, joined;
};

/*
 * Create `n` threads running fn(args + i * stride) with a `stack`-byte stack, and
 * wait until every one has reached crew_wait_go (its set-up done). A thread that
 * cannot be created is fatal: the others wait at a barrier that can never complete,
 * so this prints one line prefixed with `who` and _exit()s with RL_EXIT_ERROR.
 * Returns 0, or -ENOMEM before any thread was created.
 */
int crew_start(struct crew *c, size_t n, size_t stack, void *(*fn)(void *), void *args,
	       size_t stride, const char *who) RL_WUR;

/* In a crew thread, after its set-up: false when main aborted (do not measure). */
bool crew_wait_go(struct crew *c);

/* main: release the threads into the measurement. */
void crew_go(struct crew *c);
/* main: release the threads into an abort and join them. */
void crew_abort(struct crew *c);
/* main: join every started thread (once). */
void crew_join(struct crew *c);
/* Aborts and joins threads still waiting, then frees the crew (safe on a zeroed crew). */
void crew_destroy(struct crew *c);

#endif
