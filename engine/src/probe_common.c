/* SPDX-License-Identifier: MIT */
#include "probe_common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "output.h"
#include "version.h"

#define PC_PREFAULT_STACK (64 * 1024)

void pc_setup_self(struct pc_setup *s, int cpu, enum rt_policy policy, int priority)
{
	s->cpu = cpu;
	s->pin_err = rt_pin_self(cpu);
	struct rt_sched_req req = { .policy = policy, .priority = priority };
	s->sched_err = rt_set_sched_self(&req);
	s->get_err = rt_get_sched_self(&s->kpolicy, &s->prio);
	if (rt_get_affinity_self(&s->affinity) != 0)
		CPU_ZERO(&s->affinity);
	rt_prefault_stack(PC_PREFAULT_STACK);
}

bool pc_setup_ok(const struct pc_setup *s, enum rt_policy policy, int priority)
{
	return !s->pin_err && !s->sched_err && !s->get_err &&
	       (s->kpolicy & ~0x40000000) == rt_policy_to_kernel(policy) &&
	       s->prio == priority && CPU_COUNT(&s->affinity) == 1 &&
	       CPU_ISSET(s->cpu, &s->affinity);
}

void pc_setup_why(const struct pc_setup *s, enum rt_policy policy, int priority, char *buf,
		  size_t len)
{
	if (s->pin_err) {
		snprintf(buf, len,
			 "cannot pin a measuring thread to CPU %d (%s): run in a cpuset that contains it, or pass --allow-non-rt",
			 s->cpu, strerror(-s->pin_err));
		return;
	}
	snprintf(buf, len,
		 "cannot set policy %s priority %d on CPU %d (%s): run as root or grant CAP_SYS_NICE, or use --policy other, or pass --allow-non-rt",
		 rt_policy_names[policy], priority, s->cpu,
		 s->sched_err ? strerror(-s->sched_err) : "not in effect after setting");
}

int pc_open_out(const char *path, int *fd)
{
	int f = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (f < 0)
		return -errno;
	*fd = f;
	return 0;
}

void pc_header_begin(struct jsonw *w, const char *probe, const struct probe_env *env,
		     uint64_t start_real, uint64_t start_mono)
{
	out_record_begin(w, "header");
	jw_str(w, "engine_version", RTLAB_VERSION);
	jw_str(w, "engine_arch", rl_build_arch());
	jw_str(w, "probe", probe);
	jw_arr_begin(w, "argv");
	for (int i = 0; i < env->argc; i++)
		jw_str(w, NULL, env->argv[i]);
	jw_arr_end(w);
	jw_uint(w, "start_realtime_ns", start_real);
	jw_uint(w, "start_monotonic_ns", start_mono);
}

void pc_effective_open(struct jsonw *w, bool mlock_req, int mlock_err)
{
	jw_obj_begin(w, "effective");
	jw_obj_begin(w, "mlock");
	jw_bool(w, "requested", mlock_req);
	jw_bool(w, "locked", mlock_req && !mlock_err);
	jw_str_or_null(w, "error", mlock_err ? strerror(-mlock_err) : NULL);
	jw_obj_end(w);
}

void pc_effective_begin(struct jsonw *w, bool mlock_req, int mlock_err)
{
	pc_effective_open(w, mlock_req, mlock_err);
	jw_obj_begin(w, "dma_latency");
	jw_null(w, "requested_us");
	jw_bool(w, "held", false);
	jw_null(w, "error");
	jw_obj_end(w);
	jw_arr_begin(w, "threads");
}

void pc_effective_thread(struct jsonw *w, const char *channel, int tid,
			 const struct pc_setup *s)
{
	rt_write_thread_effective(w, &(struct rt_thread_view){
		.channel = channel, .cpu = s->cpu, .tid = tid,
		.kpolicy = s->kpolicy, .priority = s->prio, .affinity = &s->affinity,
		.pin_err = s->pin_err, .sched_err = s->sched_err, .get_err = s->get_err });
}

void pc_effective_reporter(struct jsonw *w, const cpu_set_t *rep_aff, bool rep_pinned,
			   bool rt_valid)
{
	jw_obj_begin(w, "reporter");
	jw_cpuset(w, "affinity", rep_aff);
	jw_bool(w, "pinned", rep_pinned);
	jw_obj_end(w);
	jw_bool(w, "rt_valid", rt_valid);
	jw_obj_begin(w, "tracing");
	jw_null(w, "tracefs");
	jw_bool(w, "marker", false);
	jw_obj_end(w);
}

void pc_effective_end(struct jsonw *w, const cpu_set_t *rep_aff, bool rep_pinned,
		      bool rt_valid)
{
	pc_effective_reporter(w, rep_aff, rep_pinned, rt_valid);
	jw_obj_end(w);
}

int pc_priority(enum rt_policy policy, bool given, int64_t value, int *out, char *err,
		size_t errlen)
{
	int pmin, pmax;
	rt_priority_range(policy, &pmin, &pmax);
	if (!given) {
		*out = policy == RT_FIFO || policy == RT_RR ? 1 : pmin;
		return 0;
	}
	if (value < pmin || value > pmax) {
		snprintf(err, errlen,
			 "--priority: %lld is out of range for --policy %s; allowed range %d..%d",
			 (long long)value, rt_policy_names[policy], pmin, pmax);
		return -EINVAL;
	}
	*out = (int)value;
	return 0;
}

int pc_housekeeping(const struct opt_value *v, const cpu_set_t *online, const cpu_set_t *used,
		    int *out, char *err, size_t errlen)
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
