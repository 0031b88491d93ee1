/* SPDX-License-Identifier: MIT */
#include "preempt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "inflate.h"
#include "sysfile.h"

#define CONFIG_MAX (16u << 20)

static const char *const modes[] = { "none", "voluntary", "full", "lazy", NULL };

static const char *known_mode(const char *s, size_t len)
{
	for (size_t i = 0; modes[i]; i++)
		if (strlen(modes[i]) == len && strncmp(s, modes[i], len) == 0)
			return modes[i];
	return NULL;
}

const char *preempt_parse_live(const char *text)
{
	const char *o = text ? strchr(text, '(') : NULL;
	const char *c = o ? strchr(o, ')') : NULL;
	return c ? known_mode(o + 1, (size_t)(c - o - 1)) : NULL;
}

const char *preempt_parse_cmdline(const char *cmdline)
{
	const char *found = NULL;
	size_t found_len = 0;
	const char *p = cmdline;
	while (p && *p) {
		p += strspn(p, " \t\n");
		size_t len = strcspn(p, " \t\n");
		if (len == 0)
			break;
		if (len == 2 && strncmp(p, "--", 2) == 0)
			break;	/* the rest belongs to init */
		if (len > 8 && strncmp(p, "preempt=", 8) == 0) {
			found = p + 8;
			found_len = len - 8;	/* the last one wins, as in the kernel */
		}
		p += len;
	}
	return found ? known_mode(found, found_len) : NULL;
}

bool preempt_config_set(const char *config, const char *name)
{
	char needle[64];
	int n = snprintf(needle, sizeof(needle), "CONFIG_%s=y", name);
	if (!config || n <= 0 || (size_t)n >= sizeof(needle))
		return false;
	for (const char *line = config; line; line = strchr(line, '\n')) {
		if (*line == '\n')
			line++;
		if (strncmp(line, needle, (size_t)n) == 0 &&
		    (line[n] == '\n' || line[n] == '\r' || line[n] == '\0'))
			return true;
	}
	return false;
}

const char *preempt_config_choice(const char *config, const char **symbol)
{
	static const struct {
		const char *sym, *mode;
	} choice[] = {
		{ "PREEMPT_LAZY", "lazy" },
		{ "PREEMPT", "full" },
		{ "PREEMPT_VOLUNTARY", "voluntary" },
		{ "PREEMPT_NONE", "none" },
	};
	for (size_t i = 0; i < sizeof(choice) / sizeof(choice[0]); i++) {
		if (preempt_config_set(config, choice[i].sym)) {
			if (symbol)
				*symbol = choice[i].sym;
			return choice[i].mode;
		}
	}
	return NULL;
}

/* Whether uname -v has this word ("PREEMPT", "PREEMPT_RT", ...). */
static bool version_word(const char *version, const char *word)
{
	size_t wl = strlen(word);
	for (const char *p = version; p && (p = strstr(p, word)); p += wl) {
		bool start = p == version || p[-1] == ' ';
		bool end = p[wl] == ' ' || p[wl] == '\0';
		if (start && end)
			return true;
	}
	return false;
}

void preempt_decide(const struct preempt_inputs *in, struct preempt_info *out)
{
	const char *cpath = in->config_path ? in->config_path : "kernel config";
	const char *sym = NULL;
	memset(out, 0, sizeof(*out));
	bool cfg_dynamic = preempt_config_set(in->config, "PREEMPT_DYNAMIC");
	if ((in->version && version_word(in->version, "PREEMPT_DYNAMIC")) || cfg_dynamic)
		out->dynamic = 1;
	else
		out->dynamic = in->version || in->config ? 0 : -1;

	if (in->realtime && strcmp(in->realtime, "1") == 0) {
		out->model = "rt";
		snprintf(out->source, sizeof(out->source), "/sys/kernel/realtime");
		return;
	}
	if (in->version && (version_word(in->version, "PREEMPT_RT") ||
			    strstr(in->version, "PREEMPT RT"))) {
		out->model = "rt";
		snprintf(out->source, sizeof(out->source), "uname -v");
		return;
	}
	if (preempt_config_set(in->config, "PREEMPT_RT")) {
		out->model = "rt";
		snprintf(out->source, sizeof(out->source), "%s (CONFIG_PREEMPT_RT=y)", cpath);
		return;
	}
	if (out->dynamic == 1) {
		const char *m = preempt_parse_live(in->live);
		if (m) {
			out->model = m;
			snprintf(out->source, sizeof(out->source), "/sys/kernel/debug/sched/preempt");
			return;
		}
		snprintf(out->live_error, sizeof(out->live_error), "%s",
			 in->live ? "sched/preempt marks no known mode"
			 : in->live_error ? in->live_error : "not read");
		m = preempt_parse_cmdline(in->cmdline);
		if (m) {
			out->model = m;
			snprintf(out->source, sizeof(out->source), "/proc/cmdline (preempt=%s)", m);
			return;
		}
		m = preempt_config_choice(in->config, &sym);
		if (m) {
			out->model = m;
			snprintf(out->source, sizeof(out->source),
				 "kernel config default: %s (CONFIG_%s=y)", cpath, sym);
		}
		return;
	}
	const char *m = preempt_config_choice(in->config, &sym);
	if (m) {
		out->model = m;
		snprintf(out->source, sizeof(out->source), "%s (CONFIG_%s=y)", cpath, sym);
		return;
	}
	if (in->version && version_word(in->version, "PREEMPT_LAZY")) {
		out->model = "lazy";
		snprintf(out->source, sizeof(out->source), "uname -v");
	} else if (in->version && version_word(in->version, "PREEMPT")) {
		out->model = "full";
		snprintf(out->source, sizeof(out->source), "uname -v");
	}
}

/* ---- reading the inputs ---------------------------------------------------- */

struct preempt_read {
	struct preempt_inputs in;
	char realtime[16];
	char version[512];
	char cmdline[4096];
	char live[256];
	char live_error[96];
	char config_path[320];
	char *config;
};

static void path_of(char *buf, size_t len, const char *root, const char *rel)
{
	size_t rl = root ? strlen(root) : 0;
	while (rl > 0 && root[rl - 1] == '/')
		rl--;
	snprintf(buf, len, "%.*s%s", (int)rl, root ? root : "", rel);
}

bool preempt_is_live(const char *root)
{
	return !root || !root[0] || strspn(root, "/") == strlen(root);
}

static const char *read_into(const char *root, const char *rel, char *buf, size_t len, int *err)
{
	char path[4096];
	path_of(path, sizeof(path), root, rel);
	int r = sf_read(path, buf, len);
	if (err)
		*err = r;
	return r == 0 ? buf : NULL;
}

static char *slurp(const char *path, size_t *len)
{
	char *text = NULL;
	return sf_read_all(path, &text, len) == 0 ? text : NULL;
}

static void read_config(const char *root, const char *release, struct preempt_read *g)
{
	char path[4096];
	size_t len;
	path_of(path, sizeof(path), root, "/proc/config.gz");
	char *gz = slurp(path, &len);
	if (gz) {
		char *text;
		size_t tlen;
		int r = gz_inflate((const uint8_t *)gz, len, CONFIG_MAX, &text, &tlen);
		free(gz);
		if (r == 0) {
			g->config = text;
			snprintf(g->config_path, sizeof(g->config_path), "/proc/config.gz");
			return;
		}
	}
	if (!release)
		return;
	char rel[300];
	snprintf(rel, sizeof(rel), "/boot/config-%s", release);
	path_of(path, sizeof(path), root, rel);
	g->config = slurp(path, &len);
	if (g->config)
		snprintf(g->config_path, sizeof(g->config_path), "%s", rel);
}

static void read_live(const char *root, struct preempt_read *g)
{
	int err = 0;
	g->in.live = read_into(root, "/sys/kernel/debug/sched/preempt", g->live,
			       sizeof(g->live), &err);
	if (g->in.live)
		return;
	const char *why;
	if (err == -ENOENT || err == -ENOTDIR) {
		char path[4096];
		path_of(path, sizeof(path), root, "/sys/kernel/debug");
		DIR *d = opendir(path);
		bool empty = true;
		for (struct dirent *e; d && (e = readdir(d));)
			if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
				empty = false;
		if (d)
			closedir(d);
		why = empty ? "debugfs not mounted" : "no sched/preempt in debugfs";
	} else if (err == -EPERM) {
		why = "EPERM";
	} else if (err == -EACCES) {
		why = "EACCES";
	} else {
		why = strerror(-err);
	}
	snprintf(g->live_error, sizeof(g->live_error), "%s", why);
	g->in.live_error = g->live_error;
}

static void gather(const char *root, struct preempt_read *g)
{
	memset(g, 0, sizeof(*g));
	struct utsname u;
	char release[256];
	const char *rel = NULL;
	if (preempt_is_live(root) && uname(&u) == 0) {
		snprintf(g->version, sizeof(g->version), "%s", u.version);
		g->in.version = g->version;
		snprintf(release, sizeof(release), "%s", u.release);
		rel = release;
	} else if (!preempt_is_live(root)) {
		g->in.version = read_into(root, "/proc/sys/kernel/version", g->version,
					  sizeof(g->version), NULL);
		rel = read_into(root, "/proc/sys/kernel/osrelease", release, sizeof(release), NULL);
	}
	g->in.realtime = read_into(root, "/sys/kernel/realtime", g->realtime,
				   sizeof(g->realtime), NULL);
	g->in.cmdline = read_into(root, "/proc/cmdline", g->cmdline, sizeof(g->cmdline), NULL);
	read_live(root, g);
	read_config(root, rel, g);
	g->in.config = g->config;
	g->in.config_path = g->config ? g->config_path : NULL;
}

struct preempt_read *preempt_read(const char *root)
{
	struct preempt_read *g = malloc(sizeof(*g));
	if (g)
		gather(root, g);
	return g;
}

const struct preempt_inputs *preempt_read_inputs(const struct preempt_read *r)
{
	return &r->in;
}

void preempt_read_free(struct preempt_read *r)
{
	if (!r)
		return;
	free(r->config);
	free(r);
}

void preempt_detect(const char *root, struct preempt_info *out)
{
	struct preempt_read *g = preempt_read(root);
	static const struct preempt_inputs none;
	preempt_decide(g ? &g->in : &none, out);
	preempt_read_free(g);
}

void preempt_write(struct jsonw *w, const struct preempt_info *p)
{
	jw_str(w, "preempt", p->model ? p->model : "unknown");
	jw_str_or_null(w, "preempt_source", p->source[0] ? p->source : NULL);
	if (p->dynamic < 0)
		jw_null(w, "preempt_dynamic");
	else
		jw_bool(w, "preempt_dynamic", p->dynamic == 1);
	jw_str_or_null(w, "preempt_live_error", p->live_error[0] ? p->live_error : NULL);
}
