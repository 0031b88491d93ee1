/* SPDX-License-Identifier: MIT */
/* Small shared definitions of the engine: attributes, time helpers. */
#ifndef RTLAB_COMMON_H
#define RTLAB_COMMON_H

#include <stdint.h>
#include <time.h>

#define RL_WUR __attribute__((warn_unused_result))
#define RL_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#define RL_UNUSED __attribute__((unused))
#define RL_CACHELINE 64

#define NS_PER_US 1000ULL
#define NS_PER_MS 1000000ULL
#define NS_PER_SEC 1000000000ULL

#ifndef RTLAB_VERSION
#define RTLAB_VERSION "0.0.0-unknown"
#endif

/*
 * The schema of the JSON Lines a probe writes (header, log, snapshot, result;
 * docs/engine-output.md) and of `list --json`: every record's "schema".
 */
#define RL_OUTPUT_SCHEMA 1

/* Process exit codes (docs/engine-output.md). */
enum rl_exit {
	RL_EXIT_OK = 0,
	RL_EXIT_ERROR = 1,
	RL_EXIT_USAGE = 2,
	RL_EXIT_THRESHOLD = 3,
	RL_EXIT_SKIPPED = 4,
	RL_EXIT_INTERRUPTED = 130,
};

static inline uint64_t rl_ts_to_ns(const struct timespec *ts)
{
	return (uint64_t)ts->tv_sec * NS_PER_SEC + (uint64_t)ts->tv_nsec;
}

static inline struct timespec rl_ns_to_ts(uint64_t ns)
{
	struct timespec ts;
	ts.tv_sec = (time_t)(ns / NS_PER_SEC);
	ts.tv_nsec = (long)(ns % NS_PER_SEC);
	return ts;
}

static inline uint64_t rl_now_ns(clockid_t clk)
{
	struct timespec ts;
	clock_gettime(clk, &ts);
	return rl_ts_to_ns(&ts);
}

#endif
