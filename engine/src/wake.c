/* SPDX-License-Identifier: MIT */
/* Waking one thread from another (wake.h). */
#include "wake.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ipc.h>
#include <sys/sem.h>
#include <sys/syscall.h>
#include <unistd.h>

const char *const wake_mech_names[] = { "futex", "condvar", "pipe", "eventfd", "mq",
					"signal", "sysv-sem", NULL };

int wake_parse_mechs(const char *s, unsigned *mask, char *err, size_t errlen)
{
	unsigned m = 0;
	const char *p = s;
	if (!s || !*s)
		goto bad_empty;
	while (*p) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		bool found = false;
		if (len == 3 && strncmp(p, "all", 3) == 0) {
			m |= (1u << WAKE_MECH_COUNT) - 1;
			found = true;
		}
		for (int i = 0; !found && i < WAKE_MECH_COUNT; i++) {
			if (strlen(wake_mech_names[i]) == len && strncmp(p, wake_mech_names[i], len) == 0) {
				m |= 1u << i;
				found = true;
			}
		}
		if (!found) {
			snprintf(err, errlen,
				 "--mechanism: unknown mechanism '%.*s'; allowed: all or a comma-separated list of futex, condvar, pipe, eventfd, mq, signal, sysv-sem",
				 (int)(len > 40 ? 40 : len), p);
			return -EINVAL;
		}
		if (!e)
			break;
		p = e + 1;
		if (!*p)
			goto bad_empty;
	}
	*mask = m;
	return 0;
bad_empty:
	snprintf(err, errlen, "--mechanism: empty mechanism name; allowed: all or a comma-separated list of futex, condvar, pipe, eventfd, mq, signal, sysv-sem");
	return -EINVAL;
}

void wake_chan_name(char *buf, size_t len, const char *what, int waker_cpu, int cpu)
{
	if (waker_cpu < 0 || waker_cpu == cpu)
		snprintf(buf, len, "%s@cpu%d", what, cpu);
	else
		snprintf(buf, len, "%s@cpu%d->cpu%d", what, waker_cpu, cpu);
}

int wake_futex_wait(atomic_uint *word, unsigned val)
{
	long r = syscall(SYS_futex, (unsigned *)word, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
	return r < 0 ? -errno : 0;
}

int wake_futex_wake(atomic_uint *word, int n)
{
	long r = syscall(SYS_futex, (unsigned *)word, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
	return r < 0 ? -errno : (int)r;
}

void wake_post(atomic_uint *word)
{
	atomic_store_explicit(word, 1, memory_order_release);
	wake_futex_wake(word, 1);
}

void wake_take(atomic_uint *word)
{
	while (atomic_exchange_explicit(word, 0, memory_order_acquire) == 0)
		wake_futex_wait(word, 0);
}

void wake_spin_until(uint64_t until_ns)
{
	while (rl_now_ns(CLOCK_MONOTONIC) < until_ns)
		;
}

int wake_open(struct wake_obj *p, enum wake_mech mech, size_t idx)
{
	p->mech = mech;
	p->pfd[0] = p->pfd[1] = p->efd = p->semid = -1;
	sigemptyset(&p->sigs);
	sigaddset(&p->sigs, p->sig);
	switch (p->mech) {
	case WAKE_FUTEX:
		atomic_init(&p->fword, 0);
		return 0;
	case WAKE_CONDVAR: {
		pthread_condattr_t ca;
		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_mutex_init(&p->mx, NULL);
		pthread_cond_init(&p->cv, &ca);
		pthread_condattr_destroy(&ca);
		return 0;
	}
	case WAKE_PIPE:
		return pipe2(p->pfd, O_CLOEXEC) ? -errno : 0;
	case WAKE_EVENTFD:
		p->efd = eventfd(0, EFD_CLOEXEC);
		return p->efd < 0 ? -errno : 0;
	case WAKE_MQ: {
		char name[64];
		snprintf(name, sizeof(name), "/rtlab-switch-%d-%zu", (int)getpid(), idx);
		struct mq_attr a = { .mq_maxmsg = 4, .mq_msgsize = 8 };
		p->mq = mq_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600, &a);
		if (p->mq == (mqd_t)-1)
			return -errno;
		mq_unlink(name);
		return 0;
	}
	case WAKE_SIGNAL:
		return 0;
	case WAKE_SYSV_SEM:
		p->semid = semget(IPC_PRIVATE, 1, IPC_CREAT | 0600);
		return p->semid < 0 ? -errno : 0;
	case WAKE_MECH_COUNT:
		break;
	}
	return -EINVAL;
}

void wake_close(struct wake_obj *p)
{
	switch (p->mech) {
	case WAKE_CONDVAR:
		pthread_cond_destroy(&p->cv);
		pthread_mutex_destroy(&p->mx);
		break;
	case WAKE_PIPE:
		close(p->pfd[0]);
		close(p->pfd[1]);
		break;
	case WAKE_EVENTFD:
		close(p->efd);
		break;
	case WAKE_MQ:
		mq_close(p->mq);
		break;
	case WAKE_SYSV_SEM:
		semctl(p->semid, 0, IPC_RMID);
		break;
	case WAKE_FUTEX:
	case WAKE_SIGNAL:
	case WAKE_MECH_COUNT:
		break;
	}
}

/* The clock was read right before. */
int wake_notify(struct wake_obj *p)
{
	switch (p->mech) {
	case WAKE_FUTEX:
		atomic_store_explicit(&p->fword, 1, memory_order_release);
		return wake_futex_wake(&p->fword, 1) < 0 ? -errno : 0;
	case WAKE_CONDVAR:
		pthread_mutex_lock(&p->mx);
		p->flag = 1;
		pthread_cond_signal(&p->cv);
		pthread_mutex_unlock(&p->mx);
		return 0;
	case WAKE_PIPE: {
		char b = 1;
		return write(p->pfd[1], &b, 1) == 1 ? 0 : -errno;
	}
	case WAKE_EVENTFD: {
		uint64_t one = 1;
		return write(p->efd, &one, sizeof(one)) == sizeof(one) ? 0 : -errno;
	}
	case WAKE_MQ: {
		char m[8] = { 0 };
		return mq_send(p->mq, m, sizeof(m), 0) ? -errno : 0;
	}
	case WAKE_SIGNAL:
		return syscall(SYS_tgkill, (int)getpid(), p->tid, p->sig) ? -errno : 0;
	case WAKE_SYSV_SEM: {
		struct sembuf op = { 0, 1, 0 };
		return semop(p->semid, &op, 1) ? -errno : 0;
	}
	case WAKE_MECH_COUNT:
		break;
	}
	return -EINVAL;
}

int wake_wait(struct wake_obj *p)
{
	switch (p->mech) {
	case WAKE_FUTEX:
		while (atomic_exchange_explicit(&p->fword, 0, memory_order_acquire) == 0) {
			int e = wake_futex_wait(&p->fword, 0);
			if (e && e != -EAGAIN && e != -EINTR)
				return e;
		}
		return 0;
	case WAKE_CONDVAR:
		pthread_mutex_lock(&p->mx);
		while (!p->flag)
			pthread_cond_wait(&p->cv, &p->mx);
		p->flag = 0;
		pthread_mutex_unlock(&p->mx);
		return 0;
	case WAKE_PIPE: {
		char b;
		ssize_t r;
		while ((r = read(p->pfd[0], &b, 1)) < 0 && errno == EINTR)
			;
		return r == 1 ? 0 : -EIO;
	}
	case WAKE_EVENTFD: {
		uint64_t v;
		ssize_t r;
		while ((r = read(p->efd, &v, sizeof(v))) < 0 && errno == EINTR)
			;
		return r == sizeof(v) ? 0 : -EIO;
	}
	case WAKE_MQ: {
		char m[8];
		ssize_t r;
		while ((r = mq_receive(p->mq, m, sizeof(m), NULL)) < 0 && errno == EINTR)
			;
		return r < 0 ? -errno : 0;
	}
	case WAKE_SIGNAL: {
		int r;
		while ((r = sigwaitinfo(&p->sigs, NULL)) < 0 && errno == EINTR)
			;
		return r < 0 ? -errno : 0;
	}
	case WAKE_SYSV_SEM: {
		struct sembuf op = { 0, -1, 0 };
		int r;
		while ((r = semop(p->semid, &op, 1)) < 0 && errno == EINTR)
			;
		return r < 0 ? -errno : 0;
	}
	case WAKE_MECH_COUNT:
		break;
	}
	return -EINVAL;
}
