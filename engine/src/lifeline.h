/* SPDX-License-Identifier: MIT */
/*
 * `--stdin-lifeline`: the engine stops when its controller disappears. A
 * detached thread (all signals blocked, SCHED_OTHER, asleep in read(2) until
 * then) reads and discards stdin; when stdin reaches EOF or fails (the host
 * exited or was killed, the SSH connection dropped) it sends SIGTERM to the
 * process, which then stops exactly as on a real SIGTERM (probes: result with
 * status "interrupted", exit 130). The measuring threads are not involved.
 */
#ifndef RTLAB_LIFELINE_H
#define RTLAB_LIFELINE_H

#include "common.h"

/*
 * Start the lifeline thread on stdin. Call it with SIGINT/SIGTERM blocked in the
 * calling thread (they are taken by sigwaitinfo later), so that an EOF that comes
 * early is still seen as a stop and not as the default SIGTERM death. Returns 0
 * or -errno.
 */
int lifeline_start(void) RL_WUR;

/*
 * Read and discard fd until EOF (returns 0) or an error (returns -errno; EINTR is
 * retried, EAGAIN waits with poll). The body of the lifeline thread.
 */
int lifeline_watch(int fd);

#endif
