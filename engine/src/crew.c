/* SPDX-License-Identifier: MIT */
/* A crew of measuring threads started together (crew.h). */
#include "crew.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int crew_start(struct crew *c, size_t n, size_t stack, void *(*fn)(void *), void *args,
	       size_t stride, const char *who)
{
	memset(c, 0, sizeof(*c));
	atomic_init(&c->abort, false);
	c->tids = calloc(n ? n : 1, sizeof(*c->tids));
	if (!c->tids)
		return -ENOMEM;
	c->n = n;
	pthread_barrier_init(&c->ready, NULL, (unsigned)n + 1);
	pthread_barrier_init(&c->go, NULL, (unsigned)n + 1);
	c->barriers = true;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	if (stack)
		pthread_attr_setstacksize(&attr, stack);
	for (; c->started < n; c->started++) {
		void *arg = (char *)args + c->started * stride;
		int e = pthread_create(&c->tids[c->started], &attr, fn, arg);
		if (e) {
			pthread_attr_destroy(&attr);
			/* the threads created so far wait at `ready` forever */
			fprintf(stderr, "rtlab-probe %s: cannot create a thread: %s; aborting\n", who,
				strerror(e));
			_exit(RL_EXIT_ERROR);
		}
	}
	pthread_attr_destroy(&attr);
	pthread_barrier_wait(&c->ready);
	return 0;
}

bool crew_wait_go(struct crew *c)
{
	pthread_barrier_wait(&c->ready);
	pthread_barrier_wait(&c->go);
	return !atomic_load(&c->abort);
}

void crew_go(struct crew *c)
{
	if (c->released)
		return;
	c->released = true;
	pthread_barrier_wait(&c->go);
}

void crew_join(struct crew *c)
{
	if (c->joined)
		return;
	c->joined = true;
	for (size_t i = 0; i < c->started; i++)
		pthread_join(c->tids[i], NULL);
}

void crew_abort(struct crew *c)
{
	if (!c->released) {
		atomic_store(&c->abort, true);
		crew_go(c);
	}
	crew_join(c);
}

void crew_destroy(struct crew *c)
{
	if (c->barriers) {
		if (c->started)
			crew_abort(c);
		pthread_barrier_destroy(&c->ready);
		pthread_barrier_destroy(&c->go);
		c->barriers = false;
	}
	free(c->tids);
	c->tids = NULL;
}
