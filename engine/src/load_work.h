/* SPDX-License-Identifier: MIT */
/*
 * The workers of `rtlab-probe load` that the OSADL "mid load" needs (load.h has
 * the command): a periodic allocation, synced small file I/O, a UDP sender at a
 * bounded rate and a UDP sink that counts what arrives. Each worker is a forked
 * process that counts its work in its own slot of a page shared with the parent
 * (written by the worker only, read by the parent for snapshots and after the
 * reaping) and ends only by a signal, or by _exit with WORKER_EXIT_* when a
 * system call it cannot do without fails (the errno is in its slot).
 *
 * The pure parts (the sender's pacing, the payload) are unit-tested in
 * tests/test_load_work.c.
 */
#ifndef RTLAB_LOAD_WORK_H
#define RTLAB_LOAD_WORK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "common.h"

#define LOAD_IO_WRITE 4096		/* bytes of one synced write of an io worker */
#define LOAD_NET_HDR 16			/* magic, sender tag, sequence number */
#define LOAD_NET_MIN_SIZE LOAD_NET_HDR
#define LOAD_NET_MAX_SIZE 65000
#define LOAD_NET_MAX_KBIT 10000000	/* 10 Gbit/s */
#define LOAD_NET_MIN_TICK (NS_PER_MS)	/* the sender wakes at most every 1 ms */
#define LOAD_NET_BURST 256		/* messages sent at most in one wake-up */

/* Exit codes of a worker that failed (the errno is in its slot). */
#define WORKER_EXIT_VM 3	/* vm, alloc: mmap failed */
#define WORKER_EXIT_IO 4	/* io: open/write/fsync failed */
#define WORKER_EXIT_NET 5	/* net, sink: the socket failed for good */

/* One worker's counters, in a MAP_SHARED page: written by the worker only. */
struct load_slot {
	_Alignas(RL_CACHELINE) volatile uint64_t loops;	/* rounds: see each kind */
	volatile uint64_t bytes;	/* io: bytes written; net: sent; sink: received */
	volatile uint64_t sent;		/* net: messages sent; sink: messages received */
	volatile uint64_t failed;	/* net: sends that failed; sink: not ours */
	volatile uint64_t late;		/* alloc: periods missed; net: messages dropped behind */
	volatile int last_err;		/* net: errno of the last failed send */
	volatile int err;		/* -errno that ended the worker */
	volatile double sink;		/* cpu: the last loop's result */
};

/* How the parent prepared an io worker: its file's name in the load's private dir. */
struct load_io_job {
	const char *dir;	/* the private directory */
	char path[512];		/* dir/io-N */
	uint64_t bytes;		/* file size: --io-bytes */
};

/*
 * The UDP sender's pacing: it wakes every load_net_tick_ns (one message's time at
 * the rate, at least LOAD_NET_MIN_TICK) and sends what load_net_due says is due
 * since its start, at most LOAD_NET_BURST at a time (the rest is dropped and
 * counted as late: the rate is a bound, never exceeded to catch up).
 */
uint64_t load_net_tick_ns(uint64_t kbit, uint64_t size);

/*
 * Messages of `size` payload bytes due `elapsed_ns` after the start at `kbit`
 * kbit/s of payload: floor(elapsed_ns * kbit * 1000 / 1e9 / (8 * size)), without
 * overflow for any elapsed time up to 1000 h at up to LOAD_NET_MAX_KBIT.
 */
uint64_t load_net_due(uint64_t elapsed_ns, uint64_t kbit, uint64_t size);

/* Messages per second at the rate (rounded down; at least one message may be due). */
double load_net_mps(uint64_t kbit, uint64_t size);

/* Write the header of message `seq` from `tag` into buf (at least LOAD_NET_HDR bytes). */
void load_net_encode(unsigned char *buf, uint32_t tag, uint64_t seq);

/* True if buf (len bytes) is a message of a load's sender (magic and length). */
bool load_net_ours(const unsigned char *buf, size_t len);

/*
 * The duty-cycle cpu worker (--cpu-duty ON/PERIOD): it spins ON, then sleeps until the
 * next period's start (absolute CLOCK_MONOTONIC deadlines), so it takes about ON/PERIOD
 * of its CPU; at an RT policy on the measured CPU it is the seed's "SCHED_FIFO task
 * spinning D ms every P ms". Its comm is LOAD_DUTY_COMM, which a trace shows.
 */
#define LOAD_DUTY_COMM "rtlab-spin"
#define LOAD_DUTY_MIN_ON (NS_PER_US)			/* 1us */
#define LOAD_DUTY_MIN_PERIOD (100 * NS_PER_US)		/* 100us */
#define LOAD_DUTY_MAX_PERIOD (10 * NS_PER_SEC)		/* 10s */

/*
 * Parse "ON/PERIOD" (two durations, e.g. "2ms/20ms"): 0 or -EINVAL with a one-line
 * message naming --cpu-duty, what is wrong and the allowed form and ranges.
 */
int load_parse_duty(const char *s, uint64_t *on_ns, uint64_t *period_ns, char *err,
		    size_t errlen) RL_WUR;

/*
 * The start of the burst after the one that started at `start`, when it ended at `now`:
 * start + PERIOD, or, when that has passed already, the first period start after `now`
 * (missed bursts are skipped, never caught up: *missed counts them).
 */
uint64_t load_duty_next(uint64_t start, uint64_t now, uint64_t period_ns, uint64_t *missed);

/* The worker bodies; none returns. */
void load_duty_worker(struct load_slot *slot, uint64_t on_ns, uint64_t period_ns)
	__attribute__((noreturn));
void load_alloc_worker(struct load_slot *slot, uint64_t bytes, uint64_t period_ns)
	__attribute__((noreturn));
void load_io_worker(struct load_slot *slot, const struct load_io_job *job)
	__attribute__((noreturn));
void load_net_worker(struct load_slot *slot, int fd, uint64_t kbit, uint64_t size)
	__attribute__((noreturn));
void load_sink_worker(struct load_slot *slot, int fd) __attribute__((noreturn));

/*
 * One loop of a vm worker: map `bytes` of anonymous memory, write one byte in
 * every page of `page` bytes (each write faults a fresh page in), unmap.
 * Returns 0 or -errno (mmap failed).
 */
int load_vm_round(size_t bytes, size_t page) RL_WUR;

#endif
