/* SPDX-License-Identifier: MIT */
/* The run of a probe (lifecycle.h). */
#include "lifecycle.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crew.h"
#include "header.h"
#include "output.h"
#include "reporter.h"
#include "sysinfo.h"

/* The start is at least this far after the header is decided, so that writing the header
 * and releasing the threads never makes one miss the first deadline. The slow part of the
 * header, reading the system's facts (/proc/config.gz, CPU lists, ...: tens of ms on an
 * emulated board), is done before the start is decided, and the time it took, a measure
 * of how slow this machine is right now, is added twice (at most START_LEAD_MAX_NS). */
#define START_LEAD_NS (20 * NS_PER_MS)
#define START_LEAD_MAX_NS (1000 * NS_PER_MS)
/* Flight mode: the sample ring of a channel made without one (4 drains of the reporter
 * at 40 kHz); a sample that finds it full is counted in the channel's ring_lost. */
#define FLIGHT_SAMPLE_RING 16384

struct run;

/* What a crew thread is given: its run and which of the plan's threads it is. */
struct member {
	struct run *run;
	size_t index;
};

struct run {
	const struct probe_ops *p;
	void *ctx;
	const struct run_opts *opts;
	const struct probe_env *env;
	/* step 1: the process's set-up */
	int out_fd, smp_fd;
	struct out_file out_file, smp_file;	/* --output, --samples: placed after the header */
	struct rt_trace trace;
	int trace_err;
	struct trace_rec *rec;	/* --trace-dir: recording from before the start to after the end */
	int mlock_err;
	int dma_fd, dma_err;
	cpu_set_t rep_aff;
	bool rep_pinned;
	/* steps 2 and 3: the probe's plan, its threads */
	struct probe_plan plan;
	struct member *members;
	struct crew crew;
	atomic_int ending;	/* threads that end the run, not returned from measure() yet */
};

struct probe_thread *probe_plan_threads(struct probe_plan *plan, size_t n)
{
	plan->threads = calloc(n ? n : 1, sizeof(*plan->threads));
	if (!plan->threads)
		return NULL;
	plan->n_threads = n;
	for (size_t i = 0; i < n; i++)
		plan->threads[i].rt.cpu = -1;
	return plan->threads;
}

void probe_thread_place(struct probe_thread *t, int cpu, enum rt_policy policy, int priority,
			const char *role_fmt, ...)
{
	va_list ap;
	va_start(ap, role_fmt);
	vsnprintf(t->rt.role, sizeof(t->rt.role), role_fmt, ap);
	va_end(ap);
	t->rt.cpu = cpu;
	t->rt.req = (struct rt_sched_req){ .policy = policy, .priority = priority };
}

void probe_plan_channels(struct probe_plan *plan, struct channel *const *chans, size_t n,
			 atomic_bool *stop, struct probe_threshold *threshold)
{
	plan->chans = chans;
	plan->n_chans = n;
	plan->stop = stop;
	plan->threshold = threshold;
}

static void *thread_main(void *arg)
{
	const struct member *m = arg;
	struct run *r = m->run;
	struct probe_thread *t = &r->plan.threads[m->index];
	if (!t->helper)
		rt_thread_setup(&t->rt);
	if (t->chan)
		atomic_store(&t->chan->tid, t->rt.tid);
	if (r->p->thread_ready)
		r->p->thread_ready(r->ctx, t);
	if (crew_wait_go(&r->crew))
		r->p->measure(r->ctx, t);
	if (!t->until_stopped && atomic_fetch_sub(&r->ending, 1) == 1)
		rt_notify_main(); /* the last thread that ends the run has ended */
	return NULL;
}

/* rt_wait_done_or_signal predicate: every thread that ends the run has returned. */
static bool run_finished(const void *arg)
{
	const struct run *r = arg;
	return atomic_load(&r->ending) == 0;
}

/*
 * Step 4, the real-time check: rt_valid when every measuring thread runs as it asked
 * and memory is locked (if asked). why (empty when all is well) also names a DMA
 * latency that could not be held, which skips the run but leaves it real-time.
 */
static bool check_rt(const struct run *r, char *why, size_t len)
{
	struct rt_verdict v = { .mlock_err = r->mlock_err, .dma_err = r->dma_err };
	for (size_t i = 0; i < r->plan.n_threads && !v.thread; i++) {
		const struct probe_thread *t = &r->plan.threads[i];
		if (!t->helper && !rt_thread_ok(&t->rt))
			v.thread = t;
	}
	why[0] = '\0';
	if (v.thread || v.mlock_err || v.dma_err)
		probe_explain(&v, why, len);
	return !v.thread && !v.mlock_err;
}

/* The file of --output or --samples (checked by main), not yet in its place. */
static int open_out(const char *probe, const char *what, const char *path, struct out_file *f,
		    int *fd)
{
	int e = out_file_open(f, path, 0644);
	if (e) {
		char shown[OPT_SHOWN_LEN];
		fprintf(stderr, "rtlab-probe %s: --%s %s: cannot create it: %s\n", probe, what,
			opt_shown(path, shown, sizeof(shown)), strerror(-e));
		return RL_EXIT_ERROR;
	}
	*fd = f->fd;
	return 0;
}

/* The header is out: the output files take their names (before that, nothing is left). */
static int place_outputs(struct run *r)
{
	const struct { struct out_file *f; const char *what; } files[] = {
		{ &r->out_file, "output" }, { &r->smp_file, "samples" },
	};
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		int e = out_file_place(files[i].f);
		if (e) {
			char shown[OPT_SHOWN_LEN];
			fprintf(stderr, "rtlab-probe %s: --%s %s: cannot put the file in place: %s\n",
				r->p->name, files[i].what,
				opt_shown(files[i].f->path, shown, sizeof(shown)),
				e == -EEXIST ? "it is no longer a regular file" : strerror(-e));
			return e;
		}
	}
	return 0;
}

/* Steps 2 and 3: the probe's set-up, then its threads, started and set up. 0 or an exit code. */
static int start_threads(struct run *r)
{
	const struct probe_ops *p = r->p;
	r->plan.trace = r->opts->trace && !r->trace_err ? &r->trace : NULL;
	int code = p->prepare(r->ctx, &r->plan);
	if (code)
		return code;
	size_t n = r->plan.n_threads;
	r->members = calloc(n ? n : 1, sizeof(*r->members));
	if (!r->members) {
		fprintf(stderr, "rtlab-probe %s: out of memory\n", p->name);
		return RL_EXIT_ERROR;
	}
	int ending = 0;
	for (size_t i = 0; i < n; i++) {
		r->members[i] = (struct member){ .run = r, .index = i };
		ending += !r->plan.threads[i].until_stopped;
	}
	atomic_init(&r->ending, ending);
	int e = crew_start(&r->crew, n, p->stack ? p->stack : PROBE_STACK, thread_main, r->members,
			   sizeof(*r->members));
	if (e) {
		fprintf(stderr, "rtlab-probe %s: cannot create a thread: %s\n", p->name,
			strerror(-e));
		return RL_EXIT_ERROR;
	}
	return 0;
}

/* Step 6: the header and the log records after it. 0 or the error of writing the header. */
static int write_header(const struct run *r, const struct probe_start *start,
			const char *system, const char *why, bool rt_valid)
{
	const struct probe_ops *p = r->p;
	const struct rt_trace *trace = r->opts->trace ? &r->trace : NULL;
	struct jsonw w;
	jw_init(&w);
	const struct header_facts facts = {
		.start = start, .system = system, .run = r->opts, .mlock_err = r->mlock_err,
		.dma_held = r->dma_fd >= 0, .dma_err = r->dma_err, .plan = &r->plan,
		.trace = trace, .rep_aff = &r->rep_aff, .rep_pinned = r->rep_pinned,
		.rt_valid = rt_valid, .rec = r->rec,
	};
	header_build(&w, p, r->ctx, r->env, &facts);
	int out_err = jw_emit(&w, r->out_fd);
	if (why[0])
		out_log(&w, r->out_fd, "warning", "no_rt", why);
	if (trace && r->trace_err)
		out_log(&w, r->out_fd, "info", "no_tracefs",
			"tracefs is not mounted (or not writable): the threshold stops the run without a trace marker");
	if (p->write_logs)
		p->write_logs(r->ctx, &w, r->out_fd);
	jw_free(&w);
	return out_err;
}

/* Steps 9 and 10: the wait, then every thread joined. True when interrupted. */
static bool wait_and_join(struct run *r)
{
	const struct probe_ops *p = r->p;
	bool interrupted = p->wait ? p->wait(r->ctx, run_finished, r)
				   : rt_wait_done_or_signal(r->plan.stop, run_finished, r);
	for (size_t i = 0; i < r->plan.n_threads; i++)
		if (!r->plan.threads[i].until_stopped)
			crew_join_one(&r->crew, i);
	if (p->stop)
		p->stop(r->ctx);
	crew_join(&r->crew);
	return interrupted;
}

/* Steps 2 to 11, with what step 1 set up. */
static int run_probe(struct run *r)
{
	const struct probe_ops *p = r->p;
	int code = start_threads(r);
	if (code)
		return code;

	char why[512];
	bool rt_valid = check_rt(r, why, sizeof(why));
	if (why[0] && !r->opts->allow_non_rt) {
		crew_abort(&r->crew);
		fprintf(stderr, "rtlab-probe %s: skipped: %s\n", p->name, why);
		return RL_EXIT_SKIPPED;
	}

	/* the trace recorder on the measured CPUs (every online CPU when none is pinned),
	 * on before the start is decided: it records the first sample */
	if (r->opts->rec.dir) {
		cpu_set_t cpus;
		CPU_ZERO(&cpus);
		for (size_t i = 0; i < r->plan.n_threads; i++) {
			const struct probe_thread *t = &r->plan.threads[i];
			if (!t->helper && t->rt.cpu >= 0)
				CPU_SET(t->rt.cpu, &cpus);
		}
		if (CPU_COUNT(&cpus) == 0)
			cpus = *r->env->online;
		code = trace_rec_start(&r->rec, &r->opts->rec, &cpus, r->env->online, p->name);
		if (code) {
			crew_abort(&r->crew);
			return code;
		}
		/* flight mode: its triggers are the samples (a ring even without --samples);
		 * the threads wait for the go, nothing is recorded yet */
		for (size_t c = 0; trace_rec_flight(r->rec) && c < r->plan.n_chans; c++) {
			if (channel_enable_samples(r->plan.chans[c], FLIGHT_SAMPLE_RING) != 0) {
				crew_abort(&r->crew);
				fprintf(stderr, "rtlab-probe %s: out of memory\n", p->name);
				return RL_EXIT_ERROR;
			}
		}
	}

	/* the system's facts first: a measuring thread released after its first deadlines
	 * would leave those periods neither measured nor counted */
	struct jsonw sys;
	jw_init(&sys);
	const uint64_t t0 = rl_now_ns(CLOCK_MONOTONIC);
	sysinfo_write(&sys, NULL);
	const uint64_t slow = 2 * (rl_now_ns(CLOCK_MONOTONIC) - t0);
	const uint64_t lead = START_LEAD_NS + (slow < START_LEAD_MAX_NS ? slow : START_LEAD_MAX_NS);
	const struct probe_start start = {
		.realtime_ns = rl_now_ns(CLOCK_REALTIME) + lead,
		.monotonic_ns = rl_now_ns(CLOCK_MONOTONIC) + lead,
		.out_fd = r->out_fd,
	};
	code = p->start(r->ctx, &start);
	if (code) {
		jw_free(&sys);
		crew_abort(&r->crew);
		return code;
	}
	/* facts that could not be rendered (out of memory) are null, never half an object */
	int out_err = write_header(r, &start, jw_error(&sys) ? "null" : jw_text(&sys), why,
				   rt_valid);
	jw_free(&sys);
	if (!out_err && place_outputs(r) != 0) {
		crew_abort(&r->crew);
		return RL_EXIT_ERROR;
	}

	struct reporter *rep = NULL;
	const struct reporter_cfg rc = {
		.out_fd = r->out_fd,
		.samples_fd = r->smp_fd,
		.samples_path = r->opts->samples,
		.snapshot_ns = r->opts->snapshot_ns,
		.start_mono_ns = start.monotonic_ns,
		.chans = r->plan.chans,
		.n_chans = r->plan.n_chans,
		.extra = p->write_extra,
		.extra_arg = r->ctx,
		.sink = trace_rec_flight(r->rec) ? trace_rec_samples : NULL,
		.sink_arg = r->rec,
	};
	int e = reporter_start(&rep, &rc);
	if (e) {
		crew_abort(&r->crew);
		fprintf(stderr, "rtlab-probe %s: cannot start the reporter: %s\n", p->name,
			strerror(-e));
		return RL_EXIT_ERROR;
	}

	crew_go(&r->crew); /* measuring starts */
	bool interrupted = wait_and_join(r);
	if (trace_rec_flight(r->rec))
		reporter_sync_samples(rep); /* the last samples' triggers reach the recorder */
	/* off after the last sample; the final drain and meta before the result */
	(void)trace_rec_finish(r->rec, p->name);
	r->rec = NULL;

	struct reporter_outcome o = { .status = "completed", .exit_code = RL_EXIT_OK };
	char err[160] = "";
	struct probe_end end = { .interrupted = interrupted, .err = err, .errlen = sizeof(err) };
	if (p->ended)
		p->ended(r->ctx, &end);
	const struct probe_threshold *thr = r->plan.threshold;
	if (thr && atomic_load(&thr->taken)) {
		reporter_outcome_threshold(&o, thr->chan, thr->value_ns, thr->at_ns);
	} else if (!reporter_outcome_stopped(&o, end.interrupted, err) && end.check_failed) {
		o.status = "check_failed";
		o.exit_code = RL_EXIT_THRESHOLD;
	}
	return reporter_conclude(rep, &o, out_err, p->name);
}

int lifecycle_run(const struct probe_ops *p, void *ctx, const struct run_opts *run,
		  const struct probe_env *env)
{
	struct run r = {
		.p = p, .ctx = ctx, .opts = run, .env = env,
		.out_fd = STDOUT_FILENO, .smp_fd = -1, .dma_fd = -1,
		.out_file = { .fd = -1 }, .smp_file = { .fd = -1 },
		.trace = { .marker_fd = -1, .on_fd = -1 },
	};
	int code;
	char err[640];
	if ((run->rec.dir || run->rec.orphan) && trace_rec_check(&run->rec, env->online, err, sizeof(err)) != 0) {
		fprintf(stderr, "rtlab-probe %s: %s\n", p->name, err);
		return RL_EXIT_USAGE;
	}

	/* step 1 */
	rt_block_signals(); /* inherited: signals reach only the wait */
	if (run->output && strcmp(run->output, "-") != 0 &&
	    (code = open_out(p->name, "output", run->output, &r.out_file, &r.out_fd)) != 0)
		return code;
	if (run->samples &&
	    (code = open_out(p->name, "samples", run->samples, &r.smp_file, &r.smp_fd)) != 0)
		goto out;
	r.rep_pinned = run->housekeeping >= 0 && rt_pin_self(run->housekeeping) == 0;
	if (rt_get_affinity_self(&r.rep_aff) != 0)
		CPU_ZERO(&r.rep_aff);
	if (run->trace)
		r.trace_err = rt_trace_open(&r.trace);
	if (run->mlock)
		r.mlock_err = rt_mlockall();
	if (run->dma_us >= 0)
		r.dma_err = rt_dma_latency_hold((int32_t)run->dma_us, &r.dma_fd);

	code = run_probe(&r);
out:
	(void)trace_rec_finish(r.rec, p->name); /* a run that ended on an error */
	crew_destroy(&r.crew);
	free(r.members);
	free(r.plan.threads);
	if (r.dma_fd >= 0)
		close(r.dma_fd);
	rt_trace_close(&r.trace);
	/* closed; removed when the run ended before its header (a refusal, a skip) */
	out_file_discard(&r.smp_file);
	out_file_discard(&r.out_file);
	return code;
}
