/* SPDX-License-Identifier: MIT */
/* What the probes' init functions share (probe.h): --priority, --duration/--loops and
 * --housekeeping. */
#include <errno.h>
#include <stdio.h>

#include "probe.h"

int probe_priority(enum rt_policy policy, const struct opt_value *v, int rt_default, int *out,
		   char *err, size_t errlen)
{
	int pmin, pmax;
	rt_priority_range(policy, &pmin, &pmax);
	if (!v->given) {
		*out = policy == RT_FIFO || policy == RT_RR ? rt_default : pmin;
		return 0;
	}
	if (v->i < pmin || v->i > pmax) {
		snprintf(err, errlen,
			 "--priority: %lld is out of range for --policy %s; allowed range %d..%d",
			 (long long)v->i, rt_policy_names[policy], pmin, pmax);
		return -EINVAL;
	}
	*out = (int)v->i;
	return 0;
}

int probe_run_length(const struct opt_value *duration, const struct opt_value *loops,
		     uint64_t interval_ns, uint64_t *duration_ns, uint64_t *loops_out,
		     char *err, size_t errlen)
{
	if (duration->set && loops->set) {
		snprintf(err, errlen, "--duration and --loops cannot be combined; give one of them");
		return -EINVAL;
	}
	if (duration->set && (uint64_t)duration->i < interval_ns) {
		char d[32], i[32];
		opt_format_duration((uint64_t)duration->i, d, sizeof(d));
		opt_format_duration(interval_ns, i, sizeof(i));
		snprintf(err, errlen, "--duration %s is shorter than --interval %s: no period would "
			 "be measured; give a longer --duration or a shorter --interval", d, i);
		return -EINVAL;
	}
	*duration_ns = duration->set ? (uint64_t)duration->i : 0;
	*loops_out = loops->set ? (uint64_t)loops->i : 0;
	return 0;
}

int probe_housekeeping(const struct opt_value *v, const cpu_set_t *online,
		       const cpu_set_t *used, int *out, char *err, size_t errlen)
{
	*out = -1;
	if (v->set) {
		int hk = (int)v->i;
		if (!CPU_ISSET(hk, online)) {
			char on[256];
			opt_format_cpulist(online, on, sizeof(on));
			snprintf(err, errlen,
				 "--housekeeping: CPU %d is not online; online CPUs are %s", hk, on);
			return -EINVAL;
		}
		*out = hk;
		return 0;
	}
	if (!used)
		return 0;
	for (int i = 0; i < CPU_SETSIZE; i++)
		if (CPU_ISSET(i, online) && !CPU_ISSET(i, used)) {
			*out = i;
			break;
		}
	return 0;
}
