/* SPDX-License-Identifier: MIT */
/*
 * A process that only waits on its children and on stop signals (`exec`, `load`):
 * the parent takes SIGINT/SIGTERM/SIGHUP and SIGCHLD with sigwaitinfo/sigtimedwait
 * alone, and each child it forks ties its life to the parent and gets the default
 * signal state back before it runs.
 */
#ifndef RTLAB_PROCGROUP_H
#define RTLAB_PROCGROUP_H

#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>

/*
 * In the parent, before any fork and before lifeline_start(): fill *set with
 * SIGINT, SIGTERM, SIGHUP and SIGCHLD, block them in the calling thread (they are
 * then taken by sigwaitinfo(set) only), and give SIGCHLD a handler that does
 * nothing, with SA_NOCLDSTOP (an ignored SIGCHLD would be discarded, never
 * pending; a child that stops is not an end).
 */
void procgroup_wait_signals(sigset_t *set);

/*
 * In a child just forked from parent: die with it (PR_SET_PDEATHSIG SIGKILL, even
 * when it is killed with SIGKILL). False when the parent is gone already (the
 * child then exits at once).
 */
bool procgroup_child_tie(pid_t parent);

/*
 * In a child: the signal state that procgroup_wait_signals changed back to the default
 * (SIGCHLD's disposition, every signal unblocked), so that a SIGTERM to the
 * group ends it.
 */
void procgroup_child_signals(void);

#endif
