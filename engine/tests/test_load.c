/* SPDX-License-Identifier: MIT */
/* `load`: its options (frozen config, one-line errors) and one loop of each worker. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "load.h"
#include "load_parse.h"
#include "load_work.h"
#include "opts.h"
#include "tap.h"

int main(void)
{
	CPU_ZERO(&online);
	for (int c = 0; c < 4; c++)
		CPU_SET(c, &online);

	char *cpu[] = { "--cpu", "2" };
	CHECK(parse(2, cpu) == 0);
	CHECK(cfg.n_cpu == 2 && cfg.n_vm == 0 && !cfg.have_cpus && cfg.duration_ns == 0);
	CHECK(cfg.vm_bytes == 256ull << 20); /* stress's default */

	char *all[] = { "--cpu", "1", "--vm", "3", "--vm-bytes", "64M", "--cpus", "1-2",
			"--duration", "5s" };
	CHECK(parse(10, all) == 0);
	CHECK(cfg.n_cpu == 1 && cfg.n_vm == 3 && cfg.vm_bytes == 64ull << 20);
	CHECK(cfg.have_cpus && CPU_COUNT(&cfg.cpus) == 2 && CPU_ISSET(2, &cfg.cpus));
	CHECK(cfg.duration_ns == 5000000000ull);

	char *zero[] = { "--vm", "1", "--vm-bytes", "4k", "--duration", "0s" };
	CHECK(parse(6, zero) == 0 && cfg.duration_ns == 0 && cfg.vm_bytes == 4096);

	char *help[] = { "--cpu", "1", "--help" };
	CHECK(parse(3, help) == OPTS_HELP);

	CHECK(bad(0, NULL, "give --cpu N and/or --vm M"));
	CHECK(refused("--cpu: -1 is out of range; allowed range 0..1024", "--cpu", "-1", NULL));
	CHECK(refused("--vm-bytes: 12 is out of range; allowed range 4k..",
		      "--vm", "1", "--vm-bytes", "12", NULL));
	CHECK(refused("--vm-bytes: '1.5G' is not a size", "--vm", "1", "--vm-bytes", "1.5G", NULL));
	CHECK(refused("--cpus: CPU 7 is not online", "--cpu", "1", "--cpus", "7", NULL));
	CHECK(refused("--vm-bytes: only with --vm M", "--cpu", "1", "--vm-bytes", "1M", NULL));
	CHECK(refused("--duration: '5' is not a duration", "--cpu", "1", "--duration", "5", NULL));
	CHECK(refused("unknown option '--bogus'", "--cpu", "1", "--bogus", NULL));

	/* --cpu-duty ON/PERIOD: the cpu workers spin ON every PERIOD */
	CHECK(parse(2, cpu) == 0 && cfg.duty_on_ns == 0 && cfg.duty_period_ns == 0);
	char *duty[] = { "--cpu", "1", "--cpu-duty", "2ms/20ms", "--policy", "fifo",
			 "--priority", "97", "--cpus", "1" };
	CHECK(parse(10, duty) == 0 && cfg.duty_on_ns == 2000000 && cfg.duty_period_ns == 20000000);
	CHECK(cfg.policy == RT_FIFO && cfg.priority == 97 && CPU_COUNT(&cfg.cpus) == 1);
	char *duty_us[] = { "--cpu", "2", "--cpu-duty", "1us/100us" };
	CHECK(parse(4, duty_us) == 0 && cfg.duty_on_ns == 1000 && cfg.duty_period_ns == 100000);
	CHECK(refused("--cpu-duty: only with --cpu N", "--vm", "1", "--cpu-duty", "2ms/20ms",
		      NULL));
	CHECK(refused("--cpu-duty: '2ms' is not ON/PERIOD", "--cpu", "1", "--cpu-duty", "2ms",
		      NULL));
	CHECK(refused("--cpu-duty: '/20ms' is not ON/PERIOD", "--cpu", "1", "--cpu-duty", "/20ms",
		      NULL));
	CHECK(refused("--cpu-duty: '2ms/' is not ON/PERIOD", "--cpu", "1", "--cpu-duty", "2ms/",
		      NULL));
	CHECK(refused("--cpu-duty: '1ms/2ms/3ms' is not ON/PERIOD", "--cpu", "1", "--cpu-duty",
		      "1ms/2ms/3ms", NULL));
	CHECK(refused("--cpu-duty: '2/20' is not ON/PERIOD (two durations with a unit", "--cpu",
		      "1", "--cpu-duty", "2/20", NULL));
	CHECK(refused("--cpu-duty: the period of '1us/50us' is out of range; allowed range "
		      "100us..10s", "--cpu", "1", "--cpu-duty", "1us/50us", NULL));
	CHECK(refused("--cpu-duty: the period of '1s/11s' is out of range", "--cpu", "1",
		      "--cpu-duty", "1s/11s", NULL));
	CHECK(refused("--cpu-duty: ON of '20ms/20ms' must be at least 1us and shorter than the "
		      "period", "--cpu", "1", "--cpu-duty", "20ms/20ms", NULL));
	CHECK(refused("--cpu-duty: ON of '0ns/20ms' must be at least 1us", "--cpu", "1",
		      "--cpu-duty", "0ns/20ms", NULL));
	CHECK(refused("--cpu-duty: ON of '500ns/1ms' must be at least 1us", "--cpu", "1",
		      "--cpu-duty", "500ns/1ms", NULL));

	/* --policy / --priority: every worker's scheduling */
	char *cpu1[] = { "--cpu", "1" };
	CHECK(parse(2, cpu1) == 0 && cfg.policy == RT_OTHER && cfg.priority == 0);
	char *fifo[] = { "--cpu", "1", "--policy", "fifo", "--priority", "97" };
	CHECK(parse(6, fifo) == 0 && cfg.policy == RT_FIFO && cfg.priority == 97);
	char *rr[] = { "--vm", "1", "--policy", "rr" };
	CHECK(parse(4, rr) == 0 && cfg.policy == RT_RR && cfg.priority == 1);
	char *other0[] = { "--cpu", "1", "--policy", "other", "--priority", "0" };
	CHECK(parse(6, other0) == 0 && cfg.policy == RT_OTHER && cfg.priority == 0);
	CHECK(refused("--priority: 0 is out of range for --policy fifo; allowed range 1..99",
		      "--cpu", "1", "--policy", "fifo", "--priority", "0", NULL));
	CHECK(refused("--priority: 100 is out of range; allowed range 0..99",
		      "--cpu", "1", "--policy", "rr", "--priority", "100", NULL));
	CHECK(refused("--priority: only with --policy fifo or rr (1..99)",
		      "--cpu", "1", "--priority", "97", NULL));
	CHECK(refused("--policy: 'deadline' is not one of other|fifo|rr",
		      "--cpu", "1", "--policy", "deadline", NULL));
	CHECK(refused("--priority: 'x' is not an integer",
		      "--cpu", "1", "--policy", "fifo", "--priority", "x", NULL));

	/* the refusal: one line naming the option and the fix; EPERM/EACCES are a skip */
	char why[512];
	CHECK(parse(6, fifo) == 0);
	CHECK(load_sched_refusal(&cfg, -EPERM, why, sizeof(why)) == RL_EXIT_SKIPPED);
	CHECK(strncmp(why, "--policy fifo --priority 97: cannot set SCHED_FIFO priority 97 on "
		      "the workers (", 66) == 0);
	CHECK(strstr(why, "CAP_SYS_NICE") && strstr(why, "'ulimit -r' to 97") &&
	      strstr(why, "cpu.rt_runtime_us > 0") && strstr(why, "--policy other") &&
	      !strchr(why, '\n'));
	CHECK(load_sched_refusal(&cfg, -EACCES, why, sizeof(why)) == RL_EXIT_SKIPPED);
	CHECK(load_sched_refusal(&cfg, -EINVAL, why, sizeof(why)) == RL_EXIT_ERROR);
	CHECK(strstr(why, "SCHED_FIFO priority 97") && !strstr(why, "CAP_SYS_NICE"));
	CHECK(load_sched_refusal(&cfg, 0, why, sizeof(why)) == RL_EXIT_ERROR);
	CHECK(strstr(why, "(not in effect after setting)") != NULL);

	/* one cpu loop: sum of sqrt(1..1024) = 21861.1 (Newton converges to < 1%) */
	double s = load_cpu_round(0);
	CHECK(s > 21861.1 * 0.99 && s < 21861.1 * 1.01);
	CHECK(load_cpu_round(1) != s);

	/* one vm loop: map, write each page, unmap */
	CHECK(load_vm_round(1 << 20, 4096) == 0);
	CHECK(load_vm_round(SIZE_MAX & ~(size_t)4095, 4096) < 0);
	return tap_done("load");
}
