/* SPDX-License-Identifier: MIT */
#include "lifeline.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#define LIFELINE_STACK (64 * 1024)

static uint64_t timeout_ns; /* 0: wait for EOF however long stdin stays silent */

void lifeline_set_timeout(uint64_t ns)
{
	timeout_ns = ns;
}

int lifeline_watch(int fd, uint64_t silence_ns)
{
	char buf[512];
	if (fd < 0)
		return -EBADF;
	/* poll's timeout in ms; -1: none */
	const int wait_ms = silence_ns ? (int)(silence_ns / 1000000ULL) : -1;
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int r = poll(&p, 1, wait_ms);
		if (r == 0)
			return -ETIMEDOUT; /* nothing, not even a heartbeat, for silence_ns */
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n > 0)
			continue; /* whatever the host sends is ignored: a heartbeat at most */
		if (n == 0)
			return 0;
		if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
			continue; /* a non-blocking stdin (inherited file status): poll again */
		return -errno;
	}
}

static void *lifeline_main(void *arg)
{
	(void)arg;
	if (lifeline_watch(STDIN_FILENO, timeout_ns) == -ETIMEDOUT)
		fprintf(stderr, "rtlab-probe: no word from the controller on stdin for %llu s "
			"(--lifeline-timeout): the link is gone or starved; stopping\n",
			(unsigned long long)(timeout_ns / 1000000000ULL));
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
