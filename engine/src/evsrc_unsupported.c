/* SPDX-License-Identifier: MIT */
/* The event sources a build has no kernel uAPI for (event.h). */
#include <errno.h>
#include <stdio.h>

#include "event.h"

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
