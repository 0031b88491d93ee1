/* SPDX-License-Identifier: MIT */
#include "procgroup.h"

#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

static void noop_handler(int sig)
{
	(void)sig;
}

void procgroup_wait_signals(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGHUP);
	sigaddset(set, SIGCHLD);
	pthread_sigmask(SIG_BLOCK, set, NULL);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = noop_handler; /* SIGCHLD must not be discarded as "ignored" */
	sa.sa_flags = SA_NOCLDSTOP;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGCHLD, &sa, NULL);
}

bool procgroup_child_tie(pid_t parent)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	return getppid() == parent; /* else the parent died before the prctl */
}

void procgroup_child_signals(void)
{
	signal(SIGCHLD, SIG_DFL);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}
