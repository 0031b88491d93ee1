/* SPDX-License-Identifier: MIT */
/* Crew: all threads set up before main goes on; go runs them, abort does not. */
#include <stdatomic.h>
#include <string.h>

#include "crew.h"
#include "tap.h"

#define N 4

struct member {
	struct crew *crew;
	atomic_int *set_up;
	int ran;
};

static void *member_main(void *arg)
{
	struct member *m = arg;
	atomic_fetch_add(m->set_up, 1);
	if (crew_wait_go(m->crew))
		m->ran = 1;
	return NULL;
}

static int run(bool go)
{
	struct crew crew;
	atomic_int set_up = 0;
	struct member ms[N];
	memset(ms, 0, sizeof(ms));
	for (int i = 0; i < N; i++) {
		ms[i].crew = &crew;
		ms[i].set_up = &set_up;
	}
	CHECK(crew_start(&crew, N, 64 * 1024, member_main, ms, sizeof(ms[0])) == 0);
	CHECK_EQ_U(atomic_load(&set_up), N); /* every set-up done before crew_start returns */
	CHECK_EQ_U(crew.started, N);
	if (go) {
		crew_go(&crew);
		crew_join(&crew);
		crew_join(&crew); /* idempotent */
	} else {
		crew_abort(&crew);
	}
	crew_destroy(&crew);
	int ran = 0;
	for (int i = 0; i < N; i++)
		ran += ms[i].ran;
	return ran;
}

int main(void)
{
	CHECK_EQ_U(run(true), N);
	CHECK_EQ_U(run(false), 0);

	/* destroy without start (a probe that failed before creating threads) */
	struct crew zero;
	memset(&zero, 0, sizeof(zero));
	crew_destroy(&zero);

	/* destroy of a started crew that was never released aborts and joins it */
	struct crew crew;
	atomic_int set_up = 0;
	struct member m = { .crew = &crew, .set_up = &set_up };
	CHECK(crew_start(&crew, 1, 0, member_main, &m, 0) == 0);
	crew_destroy(&crew);
	CHECK_EQ_U(m.ran, 0);

	return tap_done("crew");
}
