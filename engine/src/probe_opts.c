/* SPDX-License-Identifier: MIT */
/*
 * What the probes share (probe.h): the shared options, declared once and merged into each
 * probe's table; --priority, --duration/--loops and --housekeeping; the stop threshold;
 * the words that explain a run that is not real-time.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "probe.h"
#include "trace_flight.h"

static const char *const trace_modes[] = { "full", "flight", NULL };

/* The shared options, in the order --help lists them (housekeeping's default: the probe's). */
static const struct opt_def run_opt_defs[RUN_OPT_COUNT] = {
	[RUN_MLOCK] = { "mlock", OPT_BOOL, NULL, "lock all memory (mlockall)", 0, 0, NULL, "true",
			NULL },
	[RUN_DMA] = { "dma-latency", OPT_INT, "US",
		      "hold /dev/cpu_dma_latency at US microseconds during the run", 0, INT32_MAX,
		      NULL, NULL, "not touched" },
	[RUN_HOUSEKEEPING] = { "housekeeping", OPT_INT, "CPU", "CPU of the reporter thread", 0,
			       CPU_SETSIZE - 1, NULL, NULL, NULL },
	[RUN_SNAPSHOT] = { "snapshot-interval", OPT_DURATION, NULL, "period of snapshot records",
			   (int64_t)(10 * NS_PER_MS), (int64_t)(3600 * NS_PER_SEC), NULL, "1s",
			   NULL },
	[RUN_WINDOW] = { "window", OPT_DURATION, NULL, "length of a per-window maximum",
			 (int64_t)NS_PER_MS, (int64_t)(3600 * NS_PER_SEC), NULL, "1s", NULL },
	[RUN_THRESHOLD] = { "stop-threshold", OPT_DURATION, NULL,
			    "stop with exit 3 when a latency exceeds this (and stop tracing)", 1,
			    (int64_t)(3600 * NS_PER_SEC), NULL, NULL, "none" },
	[RUN_SAMPLES] = { "samples", OPT_STRING, "FILE", "write every sample to FILE (binary)", 0,
			  0, NULL, NULL, "none" },
	[RUN_OUTPUT] = { "output", OPT_STRING, "FILE",
			 "write the JSON Lines to FILE (a regular file or a new one; - is stdout)",
			 0, 0, NULL, NULL, "stdout" },
	[RUN_ALLOW_NON_RT] = { "allow-non-rt", OPT_BOOL, NULL,
			       "measure even without RT scheduling/mlock (rt_valid=false)", 0, 0,
			       NULL, "false", NULL },
	[RUN_TRACE_DIR] = { "trace-dir", OPT_STRING, "DIR",
			    "record the measured CPUs' tracepoints into DIR (new; its parent must exist): "
			    "a tracefs instance of the engine's own, drained on a housekeeping CPU",
			    0, 0, NULL, NULL, "no recording" },
	[RUN_TRACE_EVENTS] = { "trace-events", OPT_STRING, "LIST",
			       "with --trace-dir: comma list of SYSTEM/NAME (or SYSTEM/*) events to record; "
			       "sched/sched_switch is required, events the kernel lacks are skipped",
			       0, 0, NULL, NULL, "sched, irq, timer, ipi, irq_vectors, power/cpu_idle events" },
	[RUN_TRACE_BUFFER_KB] = { "trace-buffer-kb", OPT_INT, "KB",
				  "with --trace-dir: the instance's ring buffer per CPU (the kernel may refuse a size)",
				  16, (int64_t)64 << 20, NULL, "4096", NULL },
	[RUN_TRACE_READER_CPU] = { "trace-reader-cpu", OPT_INT, "CPU",
				   "with --trace-dir: CPU of the reader thread (a housekeeping CPU)", 0,
				   CPU_SETSIZE - 1, NULL, NULL,
				   "the first online CPU not measured; unpinned when all are" },
	[RUN_TRACE_LIMIT_MB] = { "trace-limit-mb", OPT_INT, "MB",
				 "with --trace-dir: at most MB written per CPU; further pages are counted as dropped",
				 1, 1024 * 1024, NULL, "128", NULL },
	[RUN_TRACE_INSTANCE] = { "trace-instance", OPT_STRING, "NAME",
				 "with --trace-dir: the tracefs instance (refused when it exists)", 0, 0,
				 NULL, NULL, "rtlab-PID" },
	[RUN_TRACE_TRACER] = { "trace-tracer", OPT_STRING, "NAME",
			       "with --trace-dir: the instance's tracer (e.g. timerlat, osnoise; their "
			       "osnoise/cpus is set to the measured CPUs, journaled)",
			       0, 0, NULL, NULL, "none" },
	[RUN_TRACE_JOURNAL_DIR] = { "trace-journal-dir", OPT_STRING, "DIR",
				    "with --trace-dir: where the journal of the instance lives", 0, 0,
				    NULL, "/run/rtlab", NULL },
	[RUN_TRACE_MODE] = { "trace-mode", OPT_ENUM, NULL,
			     "with --trace-dir: full (every page) or flight (a memory ring; only the "
			     "pages around each sample above --trace-trigger are written)",
			     0, 0, trace_modes, "full", NULL },
	[RUN_TRACE_TRIGGER] = { "trace-trigger", OPT_DURATION, NULL,
				"flight: a sample above this keeps a window of pages around it", 1,
				(int64_t)(3600 * NS_PER_SEC), NULL, "100us", NULL },
	[RUN_TRACE_BEFORE] = { "trace-before", OPT_DURATION, NULL,
			       "flight: the window starts this long before the spike's deadline", 0,
			       (int64_t)(60 * NS_PER_SEC), NULL, "20ms", NULL },
	[RUN_TRACE_AFTER] = { "trace-after", OPT_DURATION, NULL,
			      "flight: the window ends this long after the spike's wake-up", 0,
			      (int64_t)(60 * NS_PER_SEC), NULL, "2ms", NULL },
	[RUN_TRACE_RATE] = { "trace-rate", OPT_SIZE, "BYTES",
			     "flight: at most BYTES written per second (a burst of 10 s worth; 0: no cap); "
			     "a window that does not fit is dropped whole and counted",
			     0, TFL_RATE_MAX, NULL, "256k", NULL },
	[RUN_TRACE_KEEP_MB] = { "trace-keep-mb", OPT_INT, "MB",
				"flight: the memory ring of pages per traced CPU; older pages age out (counted)",
				1, 4096, NULL, "8", NULL },
};

static void add_def(struct probe_opt_table *t, const struct opt_def *d, int own)
{
	if (t->n < PROBE_OPTS_MAX) {
		t->defs[t->n] = *d;
		t->own[t->n++] = own;
	}
}

void probe_opt_table(const struct probe_ops *p, struct probe_opt_table *t)
{
	t->n = 0;
	for (size_t i = 0; i <= p->n_opts; i++) {
		if (i == p->shared_at)
			for (int k = 0; k < RUN_OPT_COUNT; k++) {
				t->shared[k] = -1;
				if (!(p->shared & (1u << k)))
					continue;
				t->shared[k] = (int)t->n;
				add_def(t, &run_opt_defs[k], -1);
				if (k == RUN_HOUSEKEEPING)
					t->defs[t->n - 1].def_help = p->housekeeping_help;
			}
		if (i < p->n_opts)
			add_def(t, &p->opts[i], (int)i);
	}
}

/* The value of shared option k, or NULL where the probe does not take it. */
static const struct opt_value *shared_val(const struct probe_opt_table *t,
					  const struct opt_value *vals, enum run_opt k)
{
	return t->shared[k] >= 0 && vals[t->shared[k]].set ? &vals[t->shared[k]] : NULL;
}

void probe_opt_split(const struct probe_opt_table *t, const struct opt_value *vals,
		     struct opt_value *own, struct run_opts *run)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->own[i] >= 0)
			own[t->own[i]] = vals[i];
	const struct opt_value *v;
	*run = (struct run_opts){ .dma_us = -1, .housekeeping = -1 };
	run->mlock = (v = shared_val(t, vals, RUN_MLOCK)) && v->i;
	if ((v = shared_val(t, vals, RUN_DMA)))
		run->dma_us = v->i;
	if ((v = shared_val(t, vals, RUN_SNAPSHOT)))
		run->snapshot_ns = (uint64_t)v->i;
	if ((v = shared_val(t, vals, RUN_WINDOW)))
		run->window_ns = (uint64_t)v->i;
	if ((v = shared_val(t, vals, RUN_THRESHOLD)))
		run->threshold_ns = (uint64_t)v->i;
	run->trace = run->threshold_ns != 0; /* the threshold stops the trace too */
	if ((v = shared_val(t, vals, RUN_SAMPLES)))
		run->samples = v->s;
	if ((v = shared_val(t, vals, RUN_OUTPUT)))
		run->output = v->s;
	run->allow_non_rt = (v = shared_val(t, vals, RUN_ALLOW_NON_RT)) && v->i;
	run->rec = (struct trace_opts){ .buffer_kb = 4096, .limit_mb = 128, .reader_cpu = -1,
					.journal_dir = "/run/rtlab" };
	if ((v = shared_val(t, vals, RUN_TRACE_DIR)))
		run->rec.dir = v->s;
	if ((v = shared_val(t, vals, RUN_TRACE_EVENTS)))
		run->rec.events = v->s;
	if ((v = shared_val(t, vals, RUN_TRACE_BUFFER_KB)))
		run->rec.buffer_kb = v->i;
	if ((v = shared_val(t, vals, RUN_TRACE_READER_CPU)))
		run->rec.reader_cpu = (int)v->i;
	if ((v = shared_val(t, vals, RUN_TRACE_LIMIT_MB)))
		run->rec.limit_mb = v->i;
	if ((v = shared_val(t, vals, RUN_TRACE_INSTANCE)))
		run->rec.instance = v->s;
	if ((v = shared_val(t, vals, RUN_TRACE_TRACER)))
		run->rec.tracer = v->s;
	if ((v = shared_val(t, vals, RUN_TRACE_JOURNAL_DIR)))
		run->rec.journal_dir = v->s;
	run->rec.trigger_ns = 100 * NS_PER_US;
	run->rec.before_ns = 20 * NS_PER_MS;
	run->rec.after_ns = 2 * NS_PER_MS;
	run->rec.rate = 256 * 1024;
	run->rec.keep_mb = 8;
	if ((v = shared_val(t, vals, RUN_TRACE_MODE)))
		run->rec.flight = v->i == 1;
	if ((v = shared_val(t, vals, RUN_TRACE_TRIGGER)))
		run->rec.trigger_ns = (uint64_t)v->i;
	if ((v = shared_val(t, vals, RUN_TRACE_BEFORE)))
		run->rec.before_ns = (uint64_t)v->i;
	if ((v = shared_val(t, vals, RUN_TRACE_AFTER)))
		run->rec.after_ns = (uint64_t)v->i;
	if ((v = shared_val(t, vals, RUN_TRACE_RATE)))
		run->rec.rate = v->i;
	if ((v = shared_val(t, vals, RUN_TRACE_KEEP_MB)))
		run->rec.keep_mb = v->i;
	for (int k = RUN_TRACE_EVENTS; k < RUN_OPT_COUNT && !run->rec.orphan; k++)
		if (t->shared[k] >= 0 && vals[t->shared[k]].given)
			run->rec.orphan = run_opt_defs[k].name;
	for (int k = RUN_TRACE_TRIGGER; k < RUN_OPT_COUNT && !run->rec.flight_orphan; k++)
		if (t->shared[k] >= 0 && vals[t->shared[k]].given)
			run->rec.flight_orphan = run_opt_defs[k].name;
}

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

int probe_sched_no_deadline(const struct opt_value *v_policy, const struct opt_value *v_priority,
			    int rt_default, const char *deadline_refusal, enum rt_policy *policy,
			    int *priority, char *err, size_t errlen)
{
	*policy = (enum rt_policy)v_policy->i;
	if (*policy == RT_DEADLINE) {
		snprintf(err, errlen, "%s", deadline_refusal);
		return -EINVAL;
	}
	return probe_priority(*policy, v_priority, rt_default, priority, err, errlen);
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

size_t probe_measured_cpus(const struct opt_value *v_cpus, const cpu_set_t *online, int *cpus)
{
	size_t n = 0;
	bool skip_first = CPU_COUNT(online) > 1;
	for (int i = 0; i < CPU_SETSIZE; i++) {
		bool take = v_cpus->set ? CPU_ISSET(i, &v_cpus->cpus) : CPU_ISSET(i, online);
		if (take && !v_cpus->set && skip_first) {
			skip_first = false;
			take = false;
		}
		if (take)
			cpus[n++] = i;
	}
	return n;
}

int probe_refuse(struct probe_args *a, const char *msg)
{
	snprintf(a->err, a->errlen, "%s", msg);
	return -EINVAL;
}

int probe_housekeeping(const struct probe_opt_table *t, const struct opt_value *vals,
		       const cpu_set_t *online, const cpu_set_t *used, int *out, char *err,
		       size_t errlen)
{
	*out = -1;
	if (t->shared[RUN_HOUSEKEEPING] < 0)
		return 0;
	const struct opt_value *v = shared_val(t, vals, RUN_HOUSEKEEPING);
	if (v) {
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
	if (CPU_COUNT(used) == 0)
		return 0;
	for (int i = 0; i < CPU_SETSIZE; i++)
		if (CPU_ISSET(i, online) && !CPU_ISSET(i, used)) {
			*out = i;
			break;
		}
	return 0;
}

bool probe_threshold_claim(struct probe_threshold *t, size_t chan, uint64_t value_ns,
			   uint64_t at_ns)
{
	int expected = 0;
	if (!atomic_compare_exchange_strong(&t->taken, &expected, 1))
		return false;
	t->chan = chan;
	t->value_ns = value_ns;
	t->at_ns = at_ns;
	return true;
}

void probe_explain(const struct rt_verdict *v, char *buf, size_t len)
{
	const struct rt_thread *t = v->thread ? &v->thread->rt : NULL;
	if (t && t->pin_err) {
		snprintf(buf, len,
			 "cannot pin the measuring thread to CPU %d (%s): the CPU is not in this process's cpuset; run in a cpuset that contains it, or pass --allow-non-rt",
			 t->cpu, strerror(-t->pin_err));
	} else if (t && t->req.policy == RT_DEADLINE &&
		   (t->sched_err == -EPERM || t->sched_err == -EBUSY) && geteuid() == 0) {
		/* privileged, yet refused: the kernel's own conditions for deadline tasks */
		snprintf(buf, len,
			 t->sched_err == -EPERM
				 ? "cannot set SCHED_DEADLINE on CPU %d (%s) although privileged: the kernel admits a deadline thread only with an affinity that covers its whole root domain, so a thread pinned to one CPU needs a root domain of that CPU alone (an exclusive cpuset: cgroup v2 cpuset.cpus.partition = root, v1 cpu_exclusive with load balancing off above it); measure with SCHED_FIFO instead, or pass --allow-non-rt"
				 : "cannot set SCHED_DEADLINE on CPU %d (%s): the deadline bandwidth of its root domain is used up (admission control); lower --dl-runtime, raise /proc/sys/kernel/sched_rt_runtime_us, or pass --allow-non-rt",
			 t->cpu, strerror(-t->sched_err));
	} else if (t) {
		char where[64];
		if (t->cpu >= 0)
			snprintf(where, sizeof(where), "CPU %d", t->cpu);
		else
			snprintf(where, sizeof(where), "the %s thread", t->role);
		snprintf(buf, len,
			 "cannot set %s priority %d on %s (%s): run as root or grant CAP_SYS_NICE, raise 'ulimit -r' to %d, or use a cgroup with RT runtime (RT group scheduling: cpu.rt_runtime_us > 0); or pass --allow-non-rt",
			 rt_policy_label(t->req.policy), t->req.priority, where,
			 t->sched_err ? strerror(-t->sched_err) : "not in effect after setting",
			 t->req.priority);
	} else if (v->mlock_err) {
		snprintf(buf, len,
			 "cannot lock memory with mlockall (%s): run as root or grant CAP_IPC_LOCK, raise 'ulimit -l', or pass --no-mlock or --allow-non-rt",
			 strerror(-v->mlock_err));
	} else {
		snprintf(buf, len,
			 "cannot hold /dev/cpu_dma_latency (%s): run as root, or drop --dma-latency, or pass --allow-non-rt",
			 strerror(-v->dma_err));
	}
}

/* How a shared option's config member is written: its C type and JSON form. */
enum run_member_kind { M_BOOL, M_INT64_OR_NULL, M_INT_OR_NULL, M_UINT, M_UINT_OR_NULL, M_STR_OR_NULL };

/* The shared options' config members, by enum run_opt. */
static const struct {
	const char *key;
	enum run_member_kind kind;
	size_t at;	/* offset in struct run_opts */
} run_members[RUN_OPT_COUNT] = {
	[RUN_MLOCK] = { "mlock", M_BOOL, offsetof(struct run_opts, mlock) },
	[RUN_DMA] = { "dma_latency_us", M_INT64_OR_NULL, offsetof(struct run_opts, dma_us) },
	[RUN_HOUSEKEEPING] = { "housekeeping_cpu", M_INT_OR_NULL, offsetof(struct run_opts, housekeeping) },
	[RUN_SNAPSHOT] = { "snapshot_interval_ns", M_UINT, offsetof(struct run_opts, snapshot_ns) },
	[RUN_WINDOW] = { "window_ns", M_UINT, offsetof(struct run_opts, window_ns) },
	[RUN_THRESHOLD] = { "threshold_ns", M_UINT_OR_NULL, offsetof(struct run_opts, threshold_ns) },
	[RUN_SAMPLES] = { "samples_file", M_STR_OR_NULL, offsetof(struct run_opts, samples) },
	[RUN_OUTPUT] = { "output", M_STR_OR_NULL, offsetof(struct run_opts, output) },
	[RUN_ALLOW_NON_RT] = { "allow_non_rt", M_BOOL, offsetof(struct run_opts, allow_non_rt) },
};

void probe_write_run_config(struct jsonw *w, const struct run_opts *run, unsigned which)
{
	for (int k = 0; k < RUN_OPT_COUNT; k++) {
		if (!(which & (1u << k)))
			continue;
		const char *key = run_members[k].key;
		if (!key)
			continue; /* the trace recorder's: the header's "trace" object */
		const void *v = (const char *)run + run_members[k].at;
		switch (run_members[k].kind) {
		case M_BOOL: jw_bool(w, key, *(const bool *)v); break;
		case M_INT64_OR_NULL: jw_int_or_null(w, key, *(const int64_t *)v); break;
		case M_INT_OR_NULL: jw_int_or_null(w, key, *(const int *)v); break;
		case M_UINT: jw_uint(w, key, *(const uint64_t *)v); break;
		case M_UINT_OR_NULL: jw_uint_or_null(w, key, *(const uint64_t *)v); break;
		case M_STR_OR_NULL: jw_str_or_null(w, key, *(const char *const *)v); break;
		}
	}
}

void probe_write_threads_config(struct jsonw *w, const int *cpus, size_t n, enum rt_policy policy,
				int priority)
{
	jw_arr_begin(w, "cpus");
	for (size_t i = 0; i < n; i++)
		jw_int(w, NULL, cpus[i]);
	jw_arr_end(w);
	jw_str(w, "policy", rt_policy_names[policy]);
	jw_int(w, "priority", priority);
}

void probe_free_channels(struct channel **chans, size_t n)
{
	if (chans)
		for (size_t i = 0; i < n; i++)
			channel_destroy(chans[i]);
	free(chans);
}
