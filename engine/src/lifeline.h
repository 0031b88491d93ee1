/* SPDX-License-Identifier: MIT */
/*
 * `--stdin-lifeline`: the engine stops when its controller disappears. A
 * detached thread (all signals blocked, SCHED_OTHER, asleep in read(2) until
 * then) reads and discards stdin; when stdin reaches EOF or fails (the host
 * exited or was killed, the SSH connection dropped) it sends SIGTERM to the
 * process, which then stops exactly as on a real SIGTERM (probes: result with
 * status "interrupted", exit 130). The measuring threads are not involved.
 *
 * With `--lifeline-timeout DUR` the thread also stops the engine when nothing at all
 * came on stdin for DUR: the controller writes a heartbeat more often than that. A
 * link that is alive but starved (a SCHED_FIFO load above the NIC's interrupt thread
 * on a board: no packet, so no EOF either, ever) still ends the engine, and with it
 * the load that starved the link.
 */
#ifndef RTLAB_LIFELINE_H
#define RTLAB_LIFELINE_H

#include <stdint.h>

#include "common.h"

/* The silence after which the lifeline stops the engine (0: none, the default). Set
 * before lifeline_start. */
void lifeline_set_timeout(uint64_t ns);

/*
 * Start the lifeline thread on stdin. Call it with SIGINT/SIGTERM blocked in the
 * calling thread (they are taken by sigwaitinfo later), so that an EOF that comes
 * early is still seen as a stop and not as the default SIGTERM death. Returns 0
 * or -errno.
 */
int lifeline_start(void) RL_WUR;

/*
 * Read and discard fd until EOF (returns 0), an error (returns -errno; EINTR and
 * EAGAIN wait again) or, when silence_ns is not 0, silence_ns without a byte
 * (returns -ETIMEDOUT). The body of the lifeline thread.
 */
int lifeline_watch(int fd, uint64_t silence_ns);

#endif
