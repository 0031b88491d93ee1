/* SPDX-License-Identifier: MIT */
/* UTC calendar time from epoch seconds (isotime.h). */
#include <errno.h>
#include <stdio.h>

#include "isotime.h"

#define SECS_PER_DAY 86400
#define DAYS_PER_400Y 146097	/* 400 * 365 + 97 leap days */
#define DAYS_PER_100Y 36524	/* 100 * 365 + 24: a century year is not leap... */
#define DAYS_PER_4Y 1461	/* 4 * 365 + 1 */
#define MARCH_2000 11017	/* days from 1970-01-01 to 2000-03-01 */

/* Floor division and its non-negative remainder (C's '/' truncates toward zero). */
static int64_t floor_div(int64_t a, int64_t b, int64_t *rem)
{
	int64_t q = a / b, r = a % b;
	if (r < 0) {
		q--;
		r += b;
	}
	*rem = r;
	return q;
}

void rl_civil_from_epoch(int64_t t, struct rl_civil *c)
{
	/* Lengths of the months of a year that starts in March: February, with
	 * the leap day, comes last, so every cycle below ends with the leap day. */
	static const int month_days[12] = { 31, 30, 31, 30, 31, 31, 30, 31, 30, 31, 31, 29 };
	int64_t secs, days = floor_div(t, SECS_PER_DAY, &secs);
	c->hour = (int)(secs / 3600);
	c->minute = (int)(secs / 60 % 60);
	c->second = (int)(secs % 60);

	int64_t d;	/* days into the 400-year cycle that starts 2000-03-01 */
	int64_t cycles = floor_div(days - MARCH_2000, DAYS_PER_400Y, &d);
	int64_t centuries = d / DAYS_PER_100Y;
	if (centuries == 4)
		centuries = 3;	/* ...except every 400th: the cycle's last day */
	d -= centuries * DAYS_PER_100Y;
	int64_t quads = d / DAYS_PER_4Y;
	d -= quads * DAYS_PER_4Y;
	int64_t years = d / 365;
	if (years == 4)
		years = 3;	/* the leap day at the end of a 4-year run */
	d -= years * 365;	/* day of the March-based year, 0..365 */

	int m = 0;
	while (d >= month_days[m]) {
		d -= month_days[m];
		m++;
	}
	int64_t year = 2000 + 400 * cycles + 100 * centuries + 4 * quads + years;
	/* m: 0 = March ... 9 = December, 10 = January, 11 = February (next year) */
	c->month = m < 10 ? m + 3 : m - 9;
	if (m >= 10)
		year++;
	c->year = (int)year;
	c->day = (int)d + 1;
}

int rl_iso8601_utc(int64_t t, char *buf, size_t len)
{
	/* 0000-01-01T00:00:00Z .. 9999-12-31T23:59:59Z */
	if (len < 21 || t < -62167219200LL || t > 253402300799LL)
		return -ERANGE;
	struct rl_civil c;
	rl_civil_from_epoch(t, &c);
	return snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02dZ", c.year, c.month, c.day,
			c.hour, c.minute, c.second);
}
