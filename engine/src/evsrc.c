/* SPDX-License-Identifier: MIT */
/* What the event sources share (event.h): the wait for a readable descriptor, and the
 * operations of a source a build has no kernel uAPI for. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>

#include "event.h"

int evsrc_poll(int fd, uint64_t deadline)
{
	for (;;) {
		uint64_t now = rl_now_ns(CLOCK_MONOTONIC);
		if (now >= deadline)
			return 0;
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int r = poll(&pfd, 1, (int)((deadline - now + NS_PER_MS - 1) / NS_PER_MS));
		if (r < 0 && errno != EINTR)
			return -errno;
		if (r > 0)
			return 1;
	}
}

int evsrc_unsupported_open(char *err, size_t len, const char *uapi)
{
	snprintf(err, len, "this build's kernel headers have no %s", uapi);
	return -EOPNOTSUPP;
}

int evsrc_unsupported_arm(struct evsrc *s)
{
	(void)s;
	return -EOPNOTSUPP;
}

int evsrc_unsupported_wait(struct evsrc *s, uint64_t deadline, struct ev_event *ev)
{
	(void)s, (void)deadline, (void)ev;
	return -EOPNOTSUPP;
}

void evsrc_unsupported_close(struct evsrc *s)
{
	(void)s;
}
