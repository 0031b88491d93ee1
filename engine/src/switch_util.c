/* SPDX-License-Identifier: MIT */
#include "switch_util.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sysinfo.h"

#define PREFAULT_STACK (32 * 1024)
#define THREAD_STACK (128 * 1024)

const char *const sw_mech_names[] = { "futex", "condvar", "pipe", "eventfd", "mq",
				      "signal", "sysv-sem", NULL };

int sw_parse_mechs(const char *s, unsigned *mask, char *err, size_t errlen)
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
			m |= (1u << SW_MECH_COUNT) - 1;
			found = true;
		}
		for (int i = 0; !found && i < SW_MECH_COUNT; i++) {
			if (strlen(sw_mech_names[i]) == len && strncmp(p, sw_mech_names[i], len) == 0) {
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

void sw_chan_name(char *buf, size_t len, const char *what, int waker_cpu, int cpu)
{
	if (waker_cpu < 0 || waker_cpu == cpu)
		snprintf(buf, len, "%s@cpu%d", what, cpu);
	else
		snprintf(buf, len, "%s@cpu%d->cpu%d", what, waker_cpu, cpu);
}

bool sw_order_passed(const int *prio, size_t n)
{
	for (size_t i = 1; i < n; i++)
		if (prio[i] >= prio[i - 1])
			return false;
	return true;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

uint64_t sw_median(const uint64_t *v, size_t n, uint64_t *scratch)
{
	memcpy(scratch, v, n * sizeof(*v));
	qsort(scratch, n, sizeof(*scratch), cmp_u64);
	return n % 2 ? scratch[n / 2] : scratch[n / 2 - 1] / 2 + scratch[n / 2] / 2 +
						(scratch[n / 2 - 1] % 2 + scratch[n / 2] % 2) / 2;
}

bool sw_pi_bounded(uint64_t pi_median_ns, uint64_t busy_ns)
{
	return pi_median_ns < busy_ns / 2;
}

bool sw_pi_inversion_shown(uint64_t nopi_median_ns, uint64_t busy_ns)
{
	return nopi_median_ns >= busy_ns / 10 * 8 + (busy_ns % 10) * 8 / 10;
}

int sw_futex_wait(atomic_uint *word, unsigned val)
{
	long r = syscall(SYS_futex, (unsigned *)word, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
	return r < 0 ? -errno : 0;
}

int sw_futex_wake(atomic_uint *word, int n)
{
	long r = syscall(SYS_futex, (unsigned *)word, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
	return r < 0 ? -errno : (int)r;
}

void sw_spin_until(uint64_t until_ns)
{
	while (rl_now_ns(CLOCK_MONOTONIC) < until_ns)
		;
}

static void *trampoline(void *arg)
{
	struct sw_thread *t = arg;
	t->tid = (int)syscall(SYS_gettid);
	t->pin_err = t->cpu >= 0 ? rt_pin_self(t->cpu) : 0;
	t->sched_err = rt_set_sched_self(&t->req);
	t->get_err = rt_get_sched_self(&t->kpolicy, &t->kprio);
	if (rt_get_affinity_self(&t->aff) != 0)
		CPU_ZERO(&t->aff);
	rt_prefault_stack(PREFAULT_STACK);
	if (t->ready)
		pthread_barrier_wait(t->ready);
	if (t->go)
		pthread_barrier_wait(t->go);
	if (!t->abort || !atomic_load(t->abort))
		t->fn(t);
	return NULL;
}

int sw_thread_start(struct sw_thread *t)
{
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, THREAD_STACK);
	int e = pthread_create(&t->th, &attr, trampoline, t);
	pthread_attr_destroy(&attr);
	if (e)
		return -e;
	t->started = true;
	return 0;
}

bool sw_thread_rt_ok(const struct sw_thread *t)
{
	if (t->pin_err || t->sched_err || t->get_err)
		return false;
	if ((t->kpolicy & ~0x40000000) != rt_policy_to_kernel(t->req.policy))
		return false;
	if (t->req.policy != RT_OTHER && t->kprio != t->req.priority)
		return false;
	return t->cpu < 0 || (CPU_COUNT(&t->aff) == 1 && CPU_ISSET(t->cpu, &t->aff));
}

void sw_thread_write(struct jsonw *w, const struct sw_thread *t)
{
	rt_write_thread_effective(w, &(struct rt_thread_view){
		.channel = t->role, .cpu = t->cpu, .tid = t->tid,
		.kpolicy = t->kpolicy, .priority = t->kprio, .affinity = &t->aff,
		.pin_err = t->pin_err, .sched_err = t->sched_err, .get_err = t->get_err });
}

void sw_write_effective(struct jsonw *w, struct sw_thread *const *threads, size_t n,
			bool mlock_req, int mlock_err, const cpu_set_t *rep_aff, bool rep_pinned,
			bool rt_valid)
{
	pc_effective_begin(w, mlock_req, mlock_err);
	for (size_t i = 0; i < n; i++)
		sw_thread_write(w, threads[i]);
	jw_arr_end(w);
	pc_effective_end(w, rep_aff, rep_pinned, rt_valid);
}

