/* SPDX-License-Identifier: MIT */
/*
 * UTC calendar time without gmtime(3)/strftime(3): in a static glibc those
 * bring the time-zone code (tzset, tzfile) along, tens of KB of a board
 * engine for one timestamp in a message.
 */
#ifndef RTLAB_ISOTIME_H
#define RTLAB_ISOTIME_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

struct rl_civil {
	int year, month, day;		/* proleptic Gregorian; month 1..12, day 1..31 */
	int hour, minute, second;
};

/* Seconds since 1970-01-01T00:00:00Z (negative: before) as UTC calendar time. */
void rl_civil_from_epoch(int64_t t, struct rl_civil *c);

/*
 * "YYYY-MM-DDTHH:MM:SSZ" (ISO 8601, UTC) into buf: the length (20), or
 * -ERANGE for a year outside 0000..9999 or a buf shorter than 21 bytes.
 */
int rl_iso8601_utc(int64_t t, char *buf, size_t len) RL_WUR;

#endif
