/* SPDX-License-Identifier: MIT */
/* Unit tests of the switch/overhead arithmetic: mechanism lists, names, verdicts. */
#include <string.h>

#include "switch_checks.h"
#include "wake.h"
#include "tap.h"

int main(void)
{
	unsigned m = 0;
	char err[256];
	CHECK(wake_parse_mechs("futex", &m, err, sizeof(err)) == 0);
	CHECK_EQ_U(m, 1u << WAKE_FUTEX);
	CHECK(wake_parse_mechs("pipe,sysv-sem,futex", &m, err, sizeof(err)) == 0);
	CHECK_EQ_U(m, (1u << WAKE_PIPE) | (1u << WAKE_SYSV_SEM) | (1u << WAKE_FUTEX));
	CHECK(wake_parse_mechs("all", &m, err, sizeof(err)) == 0);
	CHECK_EQ_U(m, (1u << WAKE_MECH_COUNT) - 1);
	CHECK(wake_parse_mechs("futex,bogus", &m, err, sizeof(err)) < 0);
	CHECK(strstr(err, "bogus") != NULL);
	CHECK(wake_parse_mechs("futex,", &m, err, sizeof(err)) < 0);
	CHECK(wake_parse_mechs("", &m, err, sizeof(err)) < 0);
	CHECK(wake_parse_mechs("fut", &m, err, sizeof(err)) < 0);

	char name[32];
	wake_chan_name(name, sizeof(name), "futex", -1, 1);
	CHECK(strcmp(name, "futex@cpu1") == 0);
	wake_chan_name(name, sizeof(name), "futex", 1, 1);
	CHECK(strcmp(name, "futex@cpu1") == 0);
	wake_chan_name(name, sizeof(name), "mq", 0, 1);
	CHECK(strcmp(name, "mq@cpu0->cpu1") == 0);

	int good[] = { 25, 24, 23, 22 };
	int bad[] = { 25, 23, 24, 22 };
	int tie[] = { 25, 25 };
	CHECK(sw_order_passed(good, 4));
	CHECK(!sw_order_passed(bad, 4));
	CHECK(!sw_order_passed(tie, 2));
	CHECK(sw_order_passed(good, 1));

	uint64_t v[] = { 30, 10, 20 }, s[4];
	CHECK_EQ_U(sw_median(v, 3, s), 20);
	uint64_t v2[] = { 7, 1, 3, 5 };
	CHECK_EQ_U(sw_median(v2, 4, s), 4);
	uint64_t v3[] = { UINT64_MAX, UINT64_MAX };
	CHECK_EQ_U(sw_median(v3, 2, s), UINT64_MAX);

	const uint64_t busy = 20000000;
	CHECK(sw_pi_bounded(600000, busy));
	CHECK(!sw_pi_bounded(10000000, busy));
	CHECK(sw_pi_inversion_shown(16000000, busy));
	CHECK(!sw_pi_inversion_shown(15999999, busy));
	CHECK(sw_pi_inversion_shown(20100000, busy));
	CHECK(sw_pi_inversion_shown(8, 10));
	CHECK(!sw_pi_inversion_shown(7, 10));
	return tap_done("switch");
}
