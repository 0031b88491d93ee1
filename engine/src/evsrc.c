/* SPDX-License-Identifier: MIT */
/* What the event sources share (event.h): the opening of a device, the wait for a readable
 * descriptor, the close of a descriptor, and the operations of a source a build has no kernel uAPI for. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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

void evsrc_close_fd(struct evsrc *s)
{
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
}

int evsrc_open_device(const struct evsrc_cfg *cfg, int flags, const char *source,
		      const char *example, const char *what, char *err, size_t len)
{
	if (!cfg->device) {
		snprintf(err, len, "--device: required for --source %s (e.g. %s)", source, example);
		return -EINVAL;
	}
	int fd = open(cfg->device, flags | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		snprintf(err, len, "%s: %s (no %s here)", cfg->device, strerror(e), what);
		return -e;
	}
	return fd;
}

int evsrc_unsupported_open(struct evsrc *s, const struct evsrc_cfg *cfg, char *err, size_t len)
{
	(void)cfg;
	snprintf(err, len, "this build's kernel headers have no %s", s->ops->missing_uapi);
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
