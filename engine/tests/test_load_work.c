/* SPDX-License-Identifier: MIT */
/* `load`'s OSADL parts: the UDP sender's pacing, its payload, and their options. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "load.h"
#include "load_work.h"
#include "load_parse.h"
#include "opts.h"
#include "tap.h"

/* Messages sent by a sender woken every tick for `ns`, at most `burst` per wake-up. */
static uint64_t simulate(uint64_t kbit, uint64_t size, uint64_t ns, uint64_t *dropped)
{
	uint64_t tick = load_net_tick_ns(kbit, size), done = 0, sent = 0;
	*dropped = 0;
	for (uint64_t t = tick; t <= ns; t += tick) {
		uint64_t due = load_net_due(t, kbit, size);
		uint64_t n = due - done;
		done = due;
		if (n > LOAD_NET_BURST) {
			*dropped += n - LOAD_NET_BURST;
			n = LOAD_NET_BURST;
		}
		sent += n;
	}
	return sent;
}

int main(void)
{
	CPU_ZERO(&online);
	for (int c = 0; c < 4; c++)
		CPU_SET(c, &online);

	/* the OSADL rate: 1000 kbit/s of 1000-byte messages = 125 per second, one every 8 ms */
	CHECK(load_net_tick_ns(1000, 1000) == 8 * NS_PER_MS);
	CHECK(load_net_due(NS_PER_SEC, 1000, 1000) == 125);
	CHECK(load_net_due(8 * NS_PER_MS - 1, 1000, 1000) == 0);
	CHECK(load_net_due(8 * NS_PER_MS, 1000, 1000) == 1);
	CHECK(load_net_mps(1000, 1000) == 125.0);
	/* fast rates wake every 1 ms and send several: 100 Mbit/s of 1000 bytes */
	CHECK(load_net_tick_ns(100000, 1000) == NS_PER_MS);
	CHECK(load_net_due(NS_PER_SEC, 100000, 1000) == 12500);
	/* slow rates: 1 kbit/s of 65000-byte messages, one every 520 s */
	CHECK(load_net_tick_ns(1, 65000) == 520 * NS_PER_SEC);
	CHECK(load_net_due(519 * NS_PER_SEC, 1, 65000) == 0);
	CHECK(load_net_due(520 * NS_PER_SEC, 1, 65000) == 1);
	/* a rate that does not divide: 3 kbit/s of 1000 bytes = 0.375/s, never ahead of it */
	CHECK(load_net_due(8 * NS_PER_SEC, 3, 1000) == 3);
	CHECK(load_net_due(8 * NS_PER_SEC - 1, 3, 1000) == 2);
	/* no overflow: 1000 h at 10 Gbit/s of 16-byte messages */
	uint64_t h1000 = 1000ULL * 3600 * NS_PER_SEC;
	CHECK(load_net_due(h1000, LOAD_NET_MAX_KBIT, 16) ==
	      (uint64_t)3600000 * LOAD_NET_MAX_KBIT * 1000 / 128);
	CHECK(load_net_due(h1000, LOAD_NET_MAX_KBIT, 16) > load_net_due(h1000 - NS_PER_SEC,
									  LOAD_NET_MAX_KBIT, 16));
	CHECK(load_net_due(NS_PER_SEC, 1000, 0) == 0);

	/* the woken sender keeps the rate and never exceeds it */
	uint64_t dropped;
	CHECK(simulate(1000, 1000, 10 * NS_PER_SEC, &dropped) == 1250 && dropped == 0);
	CHECK(simulate(8000, 1000, 10 * NS_PER_SEC, &dropped) == 10000 && dropped == 0);
	CHECK(simulate(3, 1000, 81 * NS_PER_SEC, &dropped) == 30 && dropped == 0);
	/* 10 Gbit/s of 16 bytes is 78125 per ms: a wake-up sends LOAD_NET_BURST, the rest
	 * is dropped and counted (the bound is kept) */
	uint64_t s = simulate(LOAD_NET_MAX_KBIT, 16, 10 * NS_PER_MS, &dropped);
	CHECK(s == 10 * LOAD_NET_BURST && s + dropped == 781250);

	/* the payload: ours by its magic, foreign otherwise */
	unsigned char b[LOAD_NET_HDR + 4] = { 0 };
	load_net_encode(b, 1234, 7);
	CHECK(load_net_ours(b, sizeof(b)));
	CHECK(load_net_ours(b, LOAD_NET_HDR));
	CHECK(!load_net_ours(b, LOAD_NET_HDR - 1));
	CHECK(b[8] == 7 && b[4] == (1234 & 0xff));
	b[0] ^= 1;
	CHECK(!load_net_ours(b, sizeof(b)));

	/* the options */
	char *osadl[] = { "--alloc-bytes", "1M", "--alloc-period", "500ms", "--io", "1",
			  "--io-bytes", "64k", "--io-dir", "/var/tmp", "--cpus", "1" };
	CHECK(parse(12, osadl) == 0);
	CHECK(cfg.alloc_bytes == 1u << 20 && cfg.alloc_period_ns == 500 * NS_PER_MS);
	CHECK(cfg.n_io == 1 && cfg.io_bytes == 64u << 10 && strcmp(cfg.io_dir, "/var/tmp") == 0);
	CHECK(cfg.n_cpu == 0 && cfg.n_vm == 0 && !cfg.net_to_s && !cfg.sink_s);
	CHECK(cfg.snapshot_ns == 0);
	char *io[] = { "--io", "2" };
	CHECK(parse(2, io) == 0 && cfg.io_bytes == 1u << 20 && strcmp(cfg.io_dir, "/tmp") == 0);
	CHECK(cfg.alloc_bytes == 0);
	char *alloc[] = { "--alloc-bytes", "4k" };
	CHECK(parse(2, alloc) == 0 && cfg.alloc_period_ns == NS_PER_SEC);
	char *net[] = { "--net-to", "10.77.0.2:7500", "--net-kbit", "2000", "--net-size", "500",
			"--snapshot-interval", "250ms" };
	CHECK(parse(8, net) == 0);
	CHECK(strcmp(cfg.net_to_s, "10.77.0.2:7500") == 0 && cfg.net_to.ss_family == AF_INET);
	CHECK(cfg.net_kbit == 2000 && cfg.net_size == 500 && cfg.snapshot_ns == 250 * NS_PER_MS);
	char *net6[] = { "--net-to", "[::1]:9" };
	CHECK(parse(2, net6) == 0 && cfg.net_to.ss_family == AF_INET6 && cfg.net_kbit == 1000 &&
	      cfg.net_size == 1000);
	char *sink[] = { "--net-sink", "0" };
	CHECK(parse(2, sink) == 0 && cfg.sink.ss_family == AF_INET && !cfg.net_to_s);
	char *sink2[] = { "--net-sink", "10.77.0.2:7500" };
	CHECK(parse(2, sink2) == 0 && strcmp(cfg.sink_s, "10.77.0.2:7500") == 0);

	CHECK(bad(0, NULL, "give --cpu N and/or --vm M, or --alloc-bytes SIZE"));
	CHECK(refused("--alloc-period: only with --alloc-bytes SIZE",
		      "--alloc-period", "2s", "--cpu", "1", NULL));
	CHECK(refused("--io-dir: only with --io N", "--io-dir", "/x", "--cpu", "1", NULL));
	CHECK(refused("--io-bytes: only with --io N",
		      "--io-bytes", "1M", "--io", "0", "--cpu", "1", NULL));
	CHECK(refused("--net-kbit: only with --net-to ADDR:PORT",
		      "--net-kbit", "10", "--cpu", "1", NULL));
	CHECK(refused("--net-to: 'board2:7500' is not ADDR:PORT", "--net-to", "board2:7500", NULL));
	CHECK(refused("--net-to: '10.0.0.1:0' is not ADDR:PORT", "--net-to", "10.0.0.1:0", NULL));
	CHECK(refused("--net-sink: '70000' is not [ADDR:]PORT", "--net-sink", "70000", NULL));
	CHECK(refused("--net-size: 8 is out of range; allowed range 16..65000",
		      "--net-to", "10.0.0.1:9", "--net-size", "8", NULL));
	CHECK(refused("--io: 65 is out of range; allowed range 0..64", "--io", "65", NULL));
	CHECK(refused("--alloc-period: 100us is out of range",
		      "--alloc-bytes", "1M", "--alloc-period", "100us", NULL));
	CHECK(refused("--io-bytes: 1k is out of range", "--io", "1", "--io-bytes", "1k", NULL));

	/* the duty worker's next burst: on time, or the first period start after a late end */
	uint64_t missed = 0;
	CHECK(load_duty_next(1000, 1500, 1000, &missed) == 2000 && missed == 0);
	CHECK(load_duty_next(1000, 1999, 1000, &missed) == 2000 && missed == 0);
	CHECK(load_duty_next(1000, 2000, 1000, &missed) == 3000 && missed == 1);
	CHECK(load_duty_next(1000, 4500, 1000, &missed) == 5000 && missed == 4);
	uint64_t on = 0, period = 0;
	char e2[256];
	CHECK(load_parse_duty("500us/5ms", &on, &period, e2, sizeof(e2)) == 0 && on == 500000 &&
	      period == 5000000);
	CHECK(load_parse_duty("5ms/500us", &on, &period, e2, sizeof(e2)) == -EINVAL &&
	      strstr(e2, "shorter than the period") && !strchr(e2, '\n'));
	return tap_done("load_work");
}
