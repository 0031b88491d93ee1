/* SPDX-License-Identifier: MIT */
#include "lifeline.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#define LIFELINE_STACK (64 * 1024)

int lifeline_watch(int fd)
{
	char buf[512];
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n > 0)
			continue; /* whatever the host sends is ignored */
		if (n == 0)
			return 0;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK) {
			/* a non-blocking stdin (inherited file status): wait for data or EOF */
			struct pollfd p = { .fd = fd, .events = POLLIN };
			if (poll(&p, 1, -1) < 0 && errno != EINTR)
				return -errno;
			continue;
		}
		return -errno;
	}
}

static void *lifeline_main(void *arg)
{
	(void)arg;
	(void)lifeline_watch(STDIN_FILENO);
	kill(getpid(), SIGTERM); /* stop as on SIGTERM (blocked here, taken by main) */
	return NULL;
}

int lifeline_start(void)
{
	pthread_attr_t attr;
	size_t stack = LIFELINE_STACK;
	if (stack < (size_t)PTHREAD_STACK_MIN)
		stack = (size_t)PTHREAD_STACK_MIN;
	int e = pthread_attr_init(&attr);
	if (e)
		return -e;
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, stack);
	/* the thread starts with every signal blocked: no signal is ever handled there */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	pthread_t t;
	e = pthread_create(&t, &attr, lifeline_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	return -e;
}
