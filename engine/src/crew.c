/* SPDX-License-Identifier: MIT */
/* A crew of threads started together (crew.h). */
#include "crew.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Move every waiting thread on, into its work (CREW_GO) or out (CREW_ABORT). */
static void release(struct crew *c, enum crew_state to)
{
	pthread_mutex_lock(&c->lock);
	if (c->state == CREW_WAIT) {
		c->state = to;
		pthread_cond_broadcast(&c->cond);
	}
	pthread_mutex_unlock(&c->lock);
}

int crew_start(struct crew *c, size_t n, size_t stack, void *(*fn)(void *), void *args,
	       size_t stride)
{
	memset(c, 0, sizeof(*c));
	c->tids = calloc(n ? n : 1, sizeof(*c->tids));
	c->joined = calloc(n ? n : 1, sizeof(*c->joined));
	if (!c->tids || !c->joined) {
		free(c->tids);
		free(c->joined);
		c->tids = NULL;
		c->joined = NULL;
		return -ENOMEM;
	}
	c->n = n;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond, NULL);
	c->inited = true;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	if (stack)
		pthread_attr_setstacksize(&attr, stack);
	int e = 0;
	for (; c->started < n && !e; c->started++) {
		void *arg = (char *)args + c->started * stride;
		e = pthread_create(&c->tids[c->started], &attr, fn, arg);
		if (e)
			break;
	}
	pthread_attr_destroy(&attr);
	if (e) {
		crew_abort(c);
		return -e;
	}
	pthread_mutex_lock(&c->lock);
	while (c->ready < n)
		pthread_cond_wait(&c->cond, &c->lock);
	pthread_mutex_unlock(&c->lock);
	return 0;
}

bool crew_wait_go(struct crew *c)
{
	pthread_mutex_lock(&c->lock);
	if (++c->ready == c->n)
		pthread_cond_broadcast(&c->cond);
	while (c->state == CREW_WAIT)
		pthread_cond_wait(&c->cond, &c->lock);
	bool go = c->state == CREW_GO;
	pthread_mutex_unlock(&c->lock);
	return go;
}

void crew_go(struct crew *c)
{
	release(c, CREW_GO);
}

void crew_join_one(struct crew *c, size_t i)
{
	if (i >= c->started || c->joined[i])
		return;
	c->joined[i] = true;
	pthread_join(c->tids[i], NULL);
}

void crew_join(struct crew *c)
{
	for (size_t i = 0; i < c->started; i++)
		crew_join_one(c, i);
}

void crew_abort(struct crew *c)
{
	release(c, CREW_ABORT);
	crew_join(c);
}

void crew_destroy(struct crew *c)
{
	if (c->inited) {
		crew_abort(c);
		pthread_cond_destroy(&c->cond);
		pthread_mutex_destroy(&c->lock);
		c->inited = false;
	}
	free(c->tids);
	free(c->joined);
	c->tids = NULL;
	c->joined = NULL;
}
