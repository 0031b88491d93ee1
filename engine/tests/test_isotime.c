/* SPDX-License-Identifier: MIT */
/* Unit tests of isotime.c: known dates, then the same as gmtime_r() over 0000..9999. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "isotime.h"
#include "tap.h"

static int is(int64_t t, const char *want)
{
	char buf[32];
	int n = rl_iso8601_utc(t, buf, sizeof(buf));
	if (n != (int)strlen(want) || strcmp(buf, want) != 0) {
		fprintf(stderr, "%lld: got %s, want %s\n", (long long)t, n > 0 ? buf : "(error)", want);
		return 0;
	}
	return 1;
}

static void test_known(void)
{
	CHECK(is(0, "1970-01-01T00:00:00Z"));
	CHECK(is(-1, "1969-12-31T23:59:59Z"));
	CHECK(is(951782400, "2000-02-29T00:00:00Z"));
	CHECK(is(951868800, "2000-03-01T00:00:00Z"));
	CHECK(is(68169600, "1972-02-29T00:00:00Z"));
	CHECK(is(4107456000LL, "2100-02-28T00:00:00Z"));
	CHECK(is(4107542400LL, "2100-03-01T00:00:00Z"));	/* 2100: no leap day */
	CHECK(is(13574563200LL, "2400-02-29T00:00:00Z"));
	CHECK(is(1700000000, "2023-11-14T22:13:20Z"));
	CHECK(is(9223372036LL, "2262-04-11T23:47:16Z"));	/* INT64_MAX ns */
	CHECK(is(253402300799LL, "9999-12-31T23:59:59Z"));
	CHECK(is(-62167219200LL, "0000-01-01T00:00:00Z"));
	CHECK(is(-62162121600LL, "0000-02-29T00:00:00Z"));	/* year 0 is leap */
	char buf[32];
	CHECK_EQ_U(rl_iso8601_utc(253402300800LL, buf, sizeof(buf)), -ERANGE);
	CHECK_EQ_U(rl_iso8601_utc(-62167219201LL, buf, sizeof(buf)), -ERANGE);
	CHECK_EQ_U(rl_iso8601_utc(0, buf, 20), -ERANGE);
	CHECK_EQ_U(rl_iso8601_utc(0, buf, 21), 20);
}

static unsigned check_one(int64_t t)
{
	time_t tt = (time_t)t;
	struct tm tm;
	struct rl_civil c;
	if ((int64_t)tt != t || !gmtime_r(&tt, &tm))
		return 0;
	rl_civil_from_epoch(t, &c);
	if (c.year == tm.tm_year + 1900 && c.month == tm.tm_mon + 1 && c.day == tm.tm_mday &&
	    c.hour == tm.tm_hour && c.minute == tm.tm_min && c.second == tm.tm_sec)
		return 0;
	fprintf(stderr, "%lld: %04d-%02d-%02d %02d:%02d:%02d, gmtime %d-%d-%d %d:%d:%d\n",
		(long long)t, c.year, c.month, c.day, c.hour, c.minute, c.second,
		tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
	return 1;
}

/*
 * Years 0..9999 in steps of 2.3 days (the time of day moves along), and every
 * midnight of 1900..2300 with the second before it.
 */
static void test_like_gmtime(void)
{
	unsigned diffs = 0;
	for (int64_t t = -62167219200LL; t <= 253402300799LL && diffs < 10; t += 200003)
		diffs += check_one(t);
	for (int64_t t = -2208988800LL; t <= 10413792000LL && diffs < 10; t += 86400)
		diffs += check_one(t) + check_one(t - 1);
	CHECK_EQ_U(diffs, 0);
}

int main(void)
{
	test_known();
	if (sizeof(time_t) >= 8)
		test_like_gmtime();
	return tap_done("isotime");
}
