/* SPDX-License-Identifier: MIT */
#include "sysinfo.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "cpuname.h"
#include "opts.h"
#include "preempt.h"
#include "sysfile.h"

int sysinfo_online_cpus(cpu_set_t *set)
{
	char buf[1024];
	if (sf_read("/sys/devices/system/cpu/online", buf, sizeof(buf)) == 0 &&
	    opt_parse_cpulist(buf, set) == 0)
		return 0;
	if (sched_getaffinity(0, sizeof(*set), set) != 0)
		return -errno;
	return 0;
}

/* cpu_model and cpu_models: every CPU's core, decoded by cpuname.c. */
static void write_cpu_model(struct jsonw *w)
{
	struct cpunames names;
	bool known = cpuname_read("/proc/cpuinfo", &names) == 0;
	cpuname_write(w, &names, known);
}

void sysinfo_write(struct jsonw *w, const char *key)
{
	struct utsname u;
	bool have_u = uname(&u) == 0;
	char host[256];
	static char cmdline[4096];
	bool have_cmd = sf_read("/proc/cmdline", cmdline, sizeof(cmdline)) == 0;

	jw_obj_begin(w, key);
	if (gethostname(host, sizeof(host)) == 0) {
		host[sizeof(host) - 1] = '\0';
		jw_str(w, "hostname", host);
	} else {
		jw_null(w, "hostname");
	}
	jw_str_or_null(w, "sysname", have_u ? u.sysname : NULL);
	jw_str_or_null(w, "release", have_u ? u.release : NULL);
	jw_str_or_null(w, "version", have_u ? u.version : NULL);
	jw_str_or_null(w, "machine", have_u ? u.machine : NULL);
	jw_str_or_null(w, "cmdline", have_cmd ? cmdline : NULL);
	/* changes at every boot: a monitor tells a reboot from a dropped connection */
	sf_json_str(w, "boot_id", "/proc/sys/kernel/random/boot_id");
	{
		struct preempt_info p;
		preempt_detect(NULL, &p);
		preempt_write(w, &p);
	}
	{
		char buf[16];
		if (sf_read("/sys/kernel/realtime", buf, sizeof(buf)) == 0)
			jw_bool(w, "realtime", strcmp(buf, "1") == 0);
		else
			jw_bool(w, "realtime", false);
	}
	write_cpu_model(w);
	{
		cpu_set_t on;
		if (sysinfo_online_cpus(&on) == 0)
			jw_cpuset(w, "cpus_online", &on);
		else
			jw_null(w, "cpus_online");
	}
	sf_json_cpulist(w, "cpus_isolated", "/sys/devices/system/cpu/isolated");
	sf_json_cpulist(w, "nohz_full", "/sys/devices/system/cpu/nohz_full");
	sf_json_str(w, "clocksource",
		       "/sys/devices/system/clocksource/clocksource0/current_clocksource");
	sf_json_int(w, "sched_rt_runtime_us", "/proc/sys/kernel/sched_rt_runtime_us");
	sf_json_int(w, "sched_rt_period_us", "/proc/sys/kernel/sched_rt_period_us");
	long ps = sysconf(_SC_PAGESIZE);
	if (ps > 0)
		jw_int(w, "page_size", ps);
	else
		jw_null(w, "page_size");
	jw_obj_end(w);
}
