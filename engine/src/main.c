/* SPDX-License-Identifier: MIT */
/* rtlab-probe: command dispatch. The only place that exits. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "exec.h"
#include "globals.h"
#include "jsonw.h"
#include "lifecycle.h"
#include "lifeline.h"
#include "load.h"
#include "opts.h"
#include "output.h"
#include "probe.h"
#include "sys.h"
#include "sysinfo.h"
#include "version.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: rtlab-probe [GLOBAL] PROBE [OPTIONS]   measure (see `rtlab-probe PROBE --help`)\n"
		"       rtlab-probe list [--json]     list the probes (--json: with their options)\n"
		"       rtlab-probe sys facts|apply|restore|status  journaled system changes\n"
		"       rtlab-probe [GLOBAL] load [OPTIONS]  CPU, memory, I/O, UDP load without stress-ng (load --help)\n"
		"       rtlab-probe [GLOBAL] exec [--cpus LIST] -- CMD [ARGS...]  run a load tool in its\n"
		"                      own process group, stopped with it (exec --help)\n"
		"       rtlab-probe --version [--json]  print the engine version (--json: one JSON line)\n"
		"\n"
		"GLOBAL options (before the command):\n"
		"  --tee FILE          also write every JSON line of stdout to FILE (a regular file\n"
		"                      or a new one: 0600, replaced at the first line, none if\n"
		"                      the command is refused; fdatasync'ed line by line); when stdout fails\n"
		"                      (the reader or the SSH connection went away) the run goes on\n"
		"                      writing FILE alone\n"
		"  --stdin-lifeline    stop as on SIGTERM when stdin reaches EOF (the controller\n"
		"                      went away); probes, load and exec\n"
		"  --lifeline-timeout DUR  with --stdin-lifeline: stop as well when nothing came\n"
		"                      on stdin for DUR (the controller's heartbeat; a starved link)\n"
		"  --cgroup DIR        move into the cgroup DIR first (a cgroup v2 shield partition,\n"
		"                      whose CPUs only its own tasks may use)\n"
		"\n"
		"Output: JSON Lines (schema %d) on stdout, see docs/engine-output.md.\n"
		"Exit codes: 0 completed, 1 error, 2 usage, 3 threshold exceeded,\n"
		"            4 skipped (privilege or kernel feature missing), 130 interrupted.\n",
		RL_OUTPUT_SCHEMA);
}

static void list_probes(void)
{
	for (size_t i = 0; probe_table[i]; i++) {
		const struct probe_ops *p = probe_table[i];
		printf("%-12s %s%s%s\n", p->name, p->summary, p->unavailable ? " (unavailable: " : "",
		       p->unavailable ? p->unavailable : "");
		if (p->unavailable)
			printf(")\n");
	}
}

static const char *const opt_type_names[] = {
	[OPT_INT] = "int", [OPT_DURATION] = "duration", [OPT_CPULIST] = "cpulist",
	[OPT_ENUM] = "enum", [OPT_BOOL] = "bool", [OPT_STRING] = "string",
	[OPT_SIZE] = "size", /* used by no probe (load is not one): never listed */
	[OPT_ALIAS] = "alias", /* never listed: an alias is listed as its option */
};

/* `list --json`: the probe table and every option table, for the host (never --help). */
static int list_probes_json(void)
{
	struct jsonw w;
	jw_init(&w);
	out_record_begin(&w, "probes");
	jw_str(&w, "engine_version", RTLAB_VERSION);
	jw_arr_begin(&w, "probes");
	for (size_t i = 0; probe_table[i]; i++) {
		const struct probe_ops *p = probe_table[i];
		struct probe_opt_table t;
		probe_opt_table(p, &t);
		jw_obj_begin(&w, NULL);
		jw_str(&w, "name", p->name);
		jw_str(&w, "summary", p->summary);
		jw_str_or_null(&w, "unavailable", p->unavailable);
		jw_str_or_null(&w, "positional", p->positional);
		jw_arr_begin(&w, "options");
		for (size_t k = 0; k < t.n; k++) {
			/* an old spelling: listed like the option it stands for, with alias_of */
			const struct opt_def *d = opts_target(t.defs, t.n, k);
			if (!d)
				continue;
			jw_obj_begin(&w, NULL);
			jw_str(&w, "name", t.defs[k].name);
			jw_str(&w, "type", opt_type_names[d->type]);
			jw_str(&w, "help", d->help);
			if (d->type == OPT_INT || d->type == OPT_DURATION || d->type == OPT_SIZE ||
			    (d->type == OPT_CPULIST && d->max > 0)) {
				jw_int(&w, "min", d->min);
				jw_int(&w, "max", d->max);
			}
			if (d->type == OPT_ENUM && d->choices) {
				jw_arr_begin(&w, "choices");
				for (const char *const *c = d->choices; *c; c++)
					jw_str(&w, NULL, *c);
				jw_arr_end(&w);
			}
			jw_str_or_null(&w, "default", d->def);
			if (d != &t.defs[k]) {
				jw_str(&w, "alias_of", d->name);
			} else {
				jw_arr_begin(&w, "aliases");
				for (size_t a = 0; a < t.n; a++)
					if (t.defs[a].type == OPT_ALIAS &&
					    opts_target(t.defs, t.n, a) == d)
						jw_str(&w, NULL, t.defs[a].name);
				jw_arr_end(&w);
			}
			jw_obj_end(&w);
		}
		jw_arr_end(&w);
		jw_obj_end(&w);
	}
	jw_arr_end(&w);
	jw_obj_end(&w);
	int e = jw_emit(&w, 1);
	jw_free(&w);
	return e;
}

static void probe_help(const struct probe_ops *p, const struct probe_opt_table *t)
{
	printf("usage: rtlab-probe %s [OPTIONS]\n\n%s\n\noptions:\n", p->name,
	       p->usage ? p->usage : p->summary);
	opts_help(stdout, t->defs, t->n);
	printf("  %-28s show this help\n", "--help");
}

/* `--version [--json]`. */
static int print_version(int argc, char **argv)
{
	if (argc == 1) {
		printf("rtlab-probe %s\n", RTLAB_VERSION);
		return RL_EXIT_OK;
	}
	if (argc > 2 || strcmp(argv[1], "--json") != 0) {
		const char *bad = strcmp(argv[1], "--json") != 0 ? argv[1] : argv[2];
		char shown[OPT_SHOWN_LEN];
		fprintf(stderr, "rtlab-probe %s: unknown argument %s (only --json)\n", argv[0],
			opt_shown(bad, shown, sizeof(shown)));
		return RL_EXIT_USAGE;
	}
	struct jsonw w;
	jw_init(&w);
	rl_version_write(&w);
	int e = jw_emit(&w, STDOUT_FILENO);
	jw_free(&w);
	return e ? RL_EXIT_ERROR : RL_EXIT_OK;
}

/*
 * --stdin-lifeline for a probe or load: SIGINT/SIGTERM are blocked first, so an
 * EOF that comes before the probe waits for signals is kept pending, not fatal.
 */
static int start_lifeline(const char *who)
{
	sigset_t stop;
	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &stop, NULL);
	int e = lifeline_start();
	if (e)
		fprintf(stderr, "rtlab-probe %s: cannot start the stdin lifeline: %s\n", who,
			strerror(-e));
	return e;
}

/*
 * The options of a probe that name a file it writes (found by name in its table): each
 * is checked before anything is done (output.h); --output takes "-" for stdout.
 */
static const char *const file_options[] = { "output", "samples" };

static int check_file_options(const struct probe_opt_table *t, const struct opt_value *vals,
			      char *err, size_t errlen)
{
	for (size_t k = 0; k < sizeof(file_options) / sizeof(file_options[0]); k++) {
		int i = opts_find(t->defs, t->n, file_options[k]);
		if (i < 0 || !vals[i].given || t->defs[i].type != OPT_STRING)
			continue;
		if (strcmp(file_options[k], "output") == 0 && strcmp(vals[i].s, "-") == 0)
			continue;
		char opt[64];
		snprintf(opt, sizeof(opt), "--%s", file_options[k]);
		if (out_path_check(opt, vals[i].s, err, errlen) != 0)
			return -EINVAL;
	}
	return 0;
}

/* argv[0] is the command word (after the global options); full_* is the whole line. */
static int run_command(int argc, char **argv, int full_argc, char **full_argv,
		       const struct rl_globals *g)
{
	const char *cmd = argv[0];
	if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0)
		return print_version(argc, argv);
	if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
		usage(stdout);
		return RL_EXIT_OK;
	}
	if (strcmp(cmd, "list") == 0) {
		if (argc > 1 && strcmp(argv[1], "--json") == 0)
			return list_probes_json() == 0 ? RL_EXIT_OK : RL_EXIT_ERROR;
		if (argc > 1) {
			char shown[OPT_SHOWN_LEN];
			fprintf(stderr, "rtlab-probe list: unknown argument %s (only --json)\n",
				opt_shown(argv[1], shown, sizeof(shown)));
			return RL_EXIT_USAGE;
		}
		list_probes();
		return RL_EXIT_OK;
	}
	/*
	 * journaled system changes: sys_main.c. --stdin-lifeline starts nothing there:
	 * `apply` reads stdin itself and restores at its EOF; the other sub-commands are
	 * short and must run to the end (a restore is never cut short).
	 */
	if (strcmp(cmd, "sys") == 0)
		return sys_main(argc - 1, argv + 1);

	cpu_set_t online;
	if (sysinfo_online_cpus(&online) != 0) {
		fprintf(stderr, "rtlab-probe: cannot read the online CPUs\n");
		return RL_EXIT_ERROR;
	}
	struct probe_env env = { .argc = full_argc, .argv = full_argv, .online = &online };
	if (strcmp(cmd, "load") == 0) /* not a probe: load.c */
		return load_main(argc - 1, argv + 1, &env, g->lifeline);
	if (strcmp(cmd, "exec") == 0) /* not a probe: exec.c */
		return exec_main(argc - 1, argv + 1, &env, g->lifeline);

	const struct probe_ops *p = probe_find(cmd);
	if (!p) {
		char shown[OPT_SHOWN_LEN];
		fprintf(stderr, "rtlab-probe: unknown probe or command %s (see `rtlab-probe list`)\n",
			opt_shown(cmd, shown, sizeof(shown)));
		return RL_EXIT_USAGE;
	}
	struct probe_opt_table table;
	probe_opt_table(p, &table);
	struct opt_value *vals = calloc(table.n + p->n_opts + 1, sizeof(*vals));
	if (!vals) {
		fprintf(stderr, "rtlab-probe: out of memory\n");
		return RL_EXIT_ERROR;
	}
	char err[1280] = "";
	/* `PROBE WORD ...` is `PROBE --<positional> WORD ...` for probes with a sub-mode */
	char *const *pargv = argv + 1;
	int pargc = argc - 1;
	char **rewritten = NULL;
	char posopt[64];
	if (p->positional && pargc > 0 && pargv[0][0] != '-') {
		rewritten = calloc((size_t)pargc + 2, sizeof(*rewritten));
		if (!rewritten) {
			free(vals);
			return RL_EXIT_ERROR;
		}
		snprintf(posopt, sizeof(posopt), "--%s", p->positional);
		rewritten[0] = posopt;
		for (int i = 0; i < pargc; i++)
			rewritten[i + 1] = pargv[i];
		pargv = rewritten;
		pargc++;
	}
	int r = opts_parse(table.defs, table.n, pargc, pargv, &online, vals, err, sizeof(err));
	free(rewritten); /* option values point into argv, not into this array */
	if (r == OPTS_HELP) {
		probe_help(p, &table);
		free(vals);
		return RL_EXIT_OK;
	}
	if (r || check_file_options(&table, vals, err, sizeof(err)) != 0) {
		fprintf(stderr, "rtlab-probe %s: %s\n", p->name, err);
		free(vals);
		return RL_EXIT_USAGE;
	}
	if (p->unavailable) {
		fprintf(stderr, "rtlab-probe %s: skipped: %s\n", p->name, p->unavailable);
		free(vals);
		return RL_EXIT_SKIPPED;
	}

	/* the shared options into run, the probe's own after the merged table's values */
	struct run_opts run;
	struct opt_value *own = vals + table.n;
	probe_opt_split(&table, vals, own, &run);
	struct probe_args args = {
		.vals = own, .run = &run, .env = &env, .err = err, .errlen = sizeof(err),
	};
	CPU_ZERO(&args.used);
	void *ctx = probe_ctx_new(p);
	r = ctx ? p->init(ctx, &args) : -ENOMEM;
	if (r)
		free(ctx);
	else if ((r = probe_housekeeping(&table, vals, &online, &args.used, &run.housekeeping,
					 err, sizeof(err))) != 0)
		probe_ctx_free(p, ctx);
	free(vals);
	if (r == -EINVAL) {
		fprintf(stderr, "rtlab-probe %s: %s\n", p->name, err);
		return RL_EXIT_USAGE;
	}
	if (r) {
		fprintf(stderr, "rtlab-probe %s: %s\n", p->name, err[0] ? err : strerror(-r));
		return RL_EXIT_ERROR;
	}
	if (g->lifeline && start_lifeline(p->name) != 0) {
		probe_ctx_free(p, ctx);
		return RL_EXIT_ERROR;
	}
	int code = lifecycle_run(p, ctx, &run, &env);
	probe_ctx_free(p, ctx);
	return code;
}

int main(int argc, char **argv)
{
	/* a reader that went away is EPIPE, not death: --tee goes on, sys apply restores */
	signal(SIGPIPE, SIG_IGN);
	struct rl_globals g;
	char err[1280];
	int first = rl_globals_parse(argc, argv, &g, err, sizeof(err));
	if (first < 0) {
		fprintf(stderr, "rtlab-probe: %s\n", err);
		return RL_EXIT_USAGE;
	}
	if (first >= argc) {
		usage(stderr);
		return RL_EXIT_USAGE;
	}
	lifeline_set_timeout(g.lifeline_timeout_ns);
	if (g.tee) {
		/* created beside its name, which it takes at its first line: a refused command
		 * leaves no file */
		if (out_path_check("--tee", g.tee, err, sizeof(err)) != 0) {
			fprintf(stderr, "rtlab-probe: %s\n", err);
			return RL_EXIT_USAGE;
		}
		int e = out_tee_open(g.tee);
		if (e) {
			char shown[OPT_SHOWN_LEN];
			fprintf(stderr, "rtlab-probe: --tee %s: cannot create it: %s\n",
				opt_shown(g.tee, shown, sizeof(shown)), strerror(-e));
			return RL_EXIT_ERROR;
		}
	}
	if (g.cgroup) {
		int e = rl_join_cgroup(g.cgroup, err, sizeof(err));
		if (e) {
			fprintf(stderr, "rtlab-probe: %s\n", err);
			if (out_tee_close() != 0) {
				/* nothing was written to it: it is removed */
			}
			return e == -EACCES || e == -EPERM ? RL_EXIT_SKIPPED : RL_EXIT_ERROR;
		}
	}
	int code = run_command(argc - first, argv + first, argc, argv, &g);
	if (g.tee) {
		int e = out_tee_close();
		if (e) {
			char shown[OPT_SHOWN_LEN];
			fprintf(stderr, "rtlab-probe: --tee %s: %s: the file is incomplete\n",
				opt_shown(g.tee, shown, sizeof(shown)), strerror(-e));
		}
	}
	return code;
}
