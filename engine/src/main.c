/* SPDX-License-Identifier: MIT */
/* rtlab-probe: command dispatch. The only place that exits. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "jsonw.h"
#include "opts.h"
#include "probe.h"
#include "sys.h"
#include "sysinfo.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: rtlab-probe PROBE [OPTIONS]   measure (see `rtlab-probe PROBE --help`)\n"
		"       rtlab-probe list [--json]     list the probes (--json: with their options)\n"
		"       rtlab-probe sys facts|apply|restore|status  journaled system changes\n"
		"       rtlab-probe --version         print the engine version\n"
		"\n"
		"Output: JSON Lines (schema 1) on stdout, see docs/engine-output.md.\n"
		"Exit codes: 0 completed, 1 error, 2 usage, 3 threshold exceeded,\n"
		"            4 skipped (privilege or kernel feature missing), 130 interrupted.\n");
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
};

/* `list --json`: the probe table and every option table, for the host (never --help). */
static int list_probes_json(void)
{
	struct jsonw w;
	jw_init(&w);
	jw_obj_begin(&w, NULL);
	jw_str(&w, "type", "probes");
	jw_int(&w, "schema", 1);
	jw_str(&w, "engine_version", RTLAB_VERSION);
	jw_arr_begin(&w, "probes");
	for (size_t i = 0; probe_table[i]; i++) {
		const struct probe_ops *p = probe_table[i];
		jw_obj_begin(&w, NULL);
		jw_str(&w, "name", p->name);
		jw_str(&w, "summary", p->summary);
		jw_str_or_null(&w, "unavailable", p->unavailable);
		jw_str_or_null(&w, "positional", p->positional);
		jw_arr_begin(&w, "options");
		for (size_t k = 0; k < p->n_opts; k++) {
			const struct opt_def *d = &p->opts[k];
			jw_obj_begin(&w, NULL);
			jw_str(&w, "name", d->name);
			jw_str(&w, "type", opt_type_names[d->type]);
			jw_str(&w, "help", d->help);
			if (d->type == OPT_INT || d->type == OPT_DURATION) {
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

static void probe_help(const struct probe_ops *p)
{
	printf("usage: rtlab-probe %s [OPTIONS]\n\n%s\n\noptions:\n", p->name,
	       p->usage ? p->usage : p->summary);
	opts_help(stdout, p->opts, p->n_opts);
	printf("  %-28s show this help\n", "--help");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return RL_EXIT_USAGE;
	}
	const char *cmd = argv[1];
	if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
		printf("rtlab-probe %s\n", RTLAB_VERSION);
		return RL_EXIT_OK;
	}
	if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
		usage(stdout);
		return RL_EXIT_OK;
	}
	if (strcmp(cmd, "list") == 0) {
		if (argc > 2 && strcmp(argv[2], "--json") == 0)
			return list_probes_json() == 0 ? RL_EXIT_OK : RL_EXIT_ERROR;
		if (argc > 2) {
			fprintf(stderr, "rtlab-probe list: unknown argument '%s' (only --json)\n",
				argv[2]);
			return RL_EXIT_USAGE;
		}
		list_probes();
		return RL_EXIT_OK;
	}
	if (strcmp(cmd, "sys") == 0) /* journaled system changes: sys_main.c */
		return sys_main(argc - 2, argv + 2);
	const struct probe_ops *p = probe_find(cmd);
	if (!p) {
		fprintf(stderr, "rtlab-probe: unknown probe or command '%s' (see `rtlab-probe list`)\n",
			cmd);
		return RL_EXIT_USAGE;
	}

	cpu_set_t online;
	if (sysinfo_online_cpus(&online) != 0) {
		fprintf(stderr, "rtlab-probe: cannot read the online CPUs\n");
		return RL_EXIT_ERROR;
	}
	struct opt_value *vals = calloc(p->n_opts ? p->n_opts : 1, sizeof(*vals));
	if (!vals) {
		fprintf(stderr, "rtlab-probe: out of memory\n");
		return RL_EXIT_ERROR;
	}
	char err[512] = "";
	/* `PROBE WORD ...` is `PROBE --<positional> WORD ...` for probes with a sub-mode */
	char *const *pargv = argv + 2;
	int pargc = argc - 2;
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
	int r = opts_parse(p->opts, p->n_opts, pargc, pargv, &online, vals, err, sizeof(err));
	free(rewritten); /* option values point into argv, not into this array */
	if (r == OPTS_HELP) {
		probe_help(p);
		free(vals);
		return RL_EXIT_OK;
	}
	if (r) {
		fprintf(stderr, "rtlab-probe %s: %s\n", p->name, err);
		free(vals);
		return RL_EXIT_USAGE;
	}
	if (p->unavailable) {
		fprintf(stderr, "rtlab-probe %s: skipped: %s\n", p->name, p->unavailable);
		free(vals);
		return RL_EXIT_SKIPPED;
	}

	struct probe_env env = { .argc = argc, .argv = argv, .online = &online };
	void *ctx = NULL;
	r = p->init(&ctx, vals, &env, err, sizeof(err));
	free(vals);
	if (r == -EINVAL) {
		fprintf(stderr, "rtlab-probe %s: %s\n", p->name, err);
		return RL_EXIT_USAGE;
	}
	if (r) {
		fprintf(stderr, "rtlab-probe %s: %s\n", p->name, err[0] ? err : strerror(-r));
		return RL_EXIT_ERROR;
	}
	int code = p->run(ctx, &env);
	p->fini(ctx);
	return code;
}
