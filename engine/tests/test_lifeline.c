/* SPDX-License-Identifier: MIT */
/* --stdin-lifeline: what the host sends is ignored; EOF or an error ends the watch. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include "lifeline.h"
#include "tap.h"

static void *close_later(void *arg)
{
	int fd = *(int *)arg;
	usleep(20000);
	if (write(fd, "more\n", 5) != 5) {
		/* the watch then ends at EOF all the same */
	}
	close(fd);
	return NULL;
}

int main(void)
{
	int p[2];
	/* data, then EOF */
	CHECK(pipe(p) == 0);
	CHECK(write(p[1], "ignored\n", 8) == 8);
	close(p[1]);
	CHECK(lifeline_watch(p[0], 0) == 0);
	close(p[0]);

	/* a non-blocking stdin: waits (poll) instead of taking EAGAIN for an error */
	CHECK(pipe(p) == 0);
	fcntl(p[0], F_SETFL, O_NONBLOCK);
	pthread_t t;
	CHECK(pthread_create(&t, NULL, close_later, &p[1]) == 0);
	CHECK(lifeline_watch(p[0], 0) == 0);
	pthread_join(t, NULL);
	close(p[0]);

	/* heartbeats keep it going; silence longer than the timeout ends it */
	CHECK(pipe(p) == 0);
	CHECK(pthread_create(&t, NULL, close_later, &p[1]) == 0);
	CHECK(lifeline_watch(p[0], 500000000ULL) == 0); /* data at 20 ms, then EOF */
	pthread_join(t, NULL);
	close(p[0]);
	CHECK(pipe(p) == 0);
	CHECK(write(p[1], "beat\n", 5) == 5);
	CHECK(lifeline_watch(p[0], 50000000ULL) == -ETIMEDOUT); /* open, silent */
	close(p[1]);
	close(p[0]);

	/* an error ends it too */
	CHECK(lifeline_watch(-1, 0) == -EBADF);
	return tap_done("lifeline");
}
