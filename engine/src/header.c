/* SPDX-License-Identifier: MIT */
/* The header record of a probe's run (header.h). */
#include "header.h"

#include <string.h>

#include "output.h"
#include "sysinfo.h"
#include "version.h"

/* One effective.threads[] entry: the thread as it was read back. */
static void write_thread(struct jsonw *w, const struct rt_thread *t)
{
	jw_obj_begin(w, NULL);
	jw_str(w, "channel", t->role);
	jw_int_or_null(w, "cpu", t->cpu);
	if (t->tid > 0)
		jw_int(w, "tid", t->tid);
	else
		jw_null(w, "tid");
	if (t->get_err) {
		jw_null(w, "policy");
		jw_null(w, "priority");
	} else {
		jw_str(w, "policy", rt_kernel_policy_name(t->kpolicy));
		jw_int(w, "priority", t->prio);
	}
	jw_cpuset(w, "affinity", &t->affinity);
	jw_arr_begin(w, "errors");
	if (t->pin_err)
		jw_strf(w, NULL, "sched_setaffinity: %s", strerror(-t->pin_err));
	if (t->sched_err)
		jw_strf(w, NULL, "sched_setattr: %s", strerror(-t->sched_err));
	if (t->get_err)
		jw_strf(w, NULL, "sched_getattr: %s", strerror(-t->get_err));
	jw_arr_end(w);
	jw_obj_end(w);
}

static void write_effective(struct jsonw *w, const struct probe_ops *p, const void *ctx,
			    const struct header_facts *f)
{
	const struct run_opts *run = f->run;
	jw_obj_begin(w, "effective");
	jw_obj_begin(w, "mlock");
	jw_bool(w, "requested", run->mlock);
	jw_bool(w, "locked", run->mlock && !f->mlock_err);
	jw_str_or_null(w, "error", f->mlock_err ? strerror(-f->mlock_err) : NULL);
	jw_obj_end(w);
	jw_obj_begin(w, "dma_latency");
	jw_int_or_null(w, "requested_us", run->dma_us);
	jw_bool(w, "held", f->dma_held);
	jw_str_or_null(w, "error", f->dma_err ? strerror(-f->dma_err) : NULL);
	jw_obj_end(w);
	jw_arr_begin(w, "threads");
	for (size_t i = 0; i < f->plan->n_threads; i++)
		if (!f->plan->threads[i].helper)
			write_thread(w, &f->plan->threads[i].rt);
	jw_arr_end(w);
	if (p->write_effective)
		p->write_effective(ctx, w);
	jw_obj_begin(w, "reporter");
	jw_cpuset(w, "affinity", f->rep_aff);
	jw_bool(w, "pinned", f->rep_pinned);
	jw_obj_end(w);
	jw_bool(w, "rt_valid", f->rt_valid);
	jw_obj_begin(w, "tracing");
	jw_str_or_null(w, "tracefs", f->trace ? f->trace->path : NULL);
	jw_bool(w, "marker", f->trace && f->trace->marker_fd >= 0);
	jw_obj_end(w);
	if (p->write_effective_end)
		p->write_effective_end(ctx, w);
	jw_obj_end(w);
}

void header_build(struct jsonw *w, const struct probe_ops *p, const void *ctx,
		  const struct probe_env *env, const struct header_facts *f)
{
	out_record_begin(w, "header");
	jw_str(w, "engine_version", RTLAB_VERSION);
	jw_str(w, "engine_arch", rl_build_arch());
	jw_str(w, "probe", p->name);
	jw_arr_begin(w, "argv");
	for (int i = 0; i < env->argc; i++)
		jw_str(w, NULL, env->argv[i]);
	jw_arr_end(w);
	jw_uint(w, "start_realtime_ns", f->start->realtime_ns);
	jw_uint(w, "start_monotonic_ns", f->start->monotonic_ns);
	jw_obj_begin(w, "config");
	p->write_config(ctx, w);
	jw_obj_end(w);
	write_effective(w, p, ctx, f);
	if (f->rec)
		trace_rec_header(f->rec, w);
	jw_raw(w, "system", f->system);
	jw_obj_end(w);
}
