/* SPDX-License-Identifier: MIT */
/* `rtlab-probe sys`: the command line, and the sub-commands that only read (status,
 * journals, lockinfo, snapshot, preempt, cpumodel, facts); apply and restore: sys_apply.c. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cpuname.h"
#include "opts.h"
#include "pathmatch.h"
#include "preempt.h"
#include "sys.h"
#include "sysfile.h"

/* Indices into sys_opts. */
enum { SO_JOURNAL, SO_DETACH, SO_ROOT, SO_MAX_FILE, SO_MAX_TOTAL, SO_DIR, SO_LOCK, SO_OWNER };

static const struct opt_def sys_opts[] = {
	[SO_JOURNAL] = { .name = "journal", .type = OPT_STRING, .metavar = "FILE",
	  .help = "journal file (e.g. /run/rtlab/NAME.journal)" },
	[SO_DETACH] = { .name = "detach", .type = OPT_BOOL,
	  .help = "apply: exit after the last operation, leaving the changes" },
	[SO_ROOT] = { .name = "root", .type = OPT_STRING, .metavar = "DIR",
	  .help = "preempt, cpumodel: read a copy of a board's /proc, /sys and /boot below DIR" },
	[SO_MAX_FILE] = { .name = "max-file", .type = OPT_INT, .metavar = "BYTES",
	  .help = "snapshot: bytes of one file, then \"truncated\"", .min = 1,
	  .max = 1LL << 30, .def_help = "4194304 (4 MiB)" },
	[SO_MAX_TOTAL] = { .name = "max-total", .type = OPT_INT, .metavar = "BYTES",
	  .help = "snapshot: bytes of all files, then stop with an error", .min = 1,
	  .max = 1LL << 40, .def_help = "67108864 (64 MiB)" },
	[SO_DIR] = { .name = "dir", .type = OPT_STRING, .metavar = "DIR",
	  .help = "journals: the journal directory", .def_help = "/run/rtlab" },
	[SO_LOCK] = { .name = "lock", .type = OPT_STRING, .metavar = "FILE",
	  .help = "apply, lockinfo: the target lock (e.g. /run/rtlab/target.lock)" },
	[SO_OWNER] = { .name = "owner", .type = OPT_STRING, .metavar = "LABEL",
	  .help = "apply: who holds the target lock (with --lock)" },
};
#define N_SYS_OPTS (sizeof(sys_opts) / sizeof(sys_opts[0]))

#define SO_BIT(o) (1u << (o))

/* The sub-commands, the options each takes, and whether they need root. */
static const struct sys_sub {
	const char *name;
	unsigned opts;
	bool root;
} sys_subs[] = {
	{ "facts", 0, false },
	{ "preempt", SO_BIT(SO_ROOT), false },
	{ "cpumodel", SO_BIT(SO_ROOT), false },
	{ "apply", SO_BIT(SO_JOURNAL) | SO_BIT(SO_DETACH) | SO_BIT(SO_LOCK) | SO_BIT(SO_OWNER), true },
	{ "restore", SO_BIT(SO_JOURNAL), true },
	{ "status", SO_BIT(SO_JOURNAL), false },
	{ "journals", SO_BIT(SO_DIR), false },
	{ "lockinfo", SO_BIT(SO_LOCK), false },
	{ "snapshot", SO_BIT(SO_MAX_FILE) | SO_BIT(SO_MAX_TOTAL), false },
};

static void sys_usage(FILE *f)
{
	fprintf(f,
		"usage: rtlab-probe sys facts\n"
		"       rtlab-probe sys preempt [--root DIR]             the preemption model\n"
		"       rtlab-probe sys cpumodel [--root DIR]            every CPU's core name\n"
		"       rtlab-probe sys apply --journal FILE [--detach] [--lock FILE --owner LABEL]\n"
		"                                                        ops (JSON Lines) on stdin\n"
		"       rtlab-probe sys restore --journal FILE\n"
		"       rtlab-probe sys status --journal FILE\n"
		"       rtlab-probe sys journals [--dir DIR]             status of every DIR/*.journal\n"
		"       rtlab-probe sys lockinfo --lock FILE             who holds the target lock\n"
		"       rtlab-probe sys snapshot [--max-file BYTES] [--max-total BYTES]\n"
		"                                                        files named by patterns on stdin\n"
		"\nJournaled system changes, see docs/sys-protocol.md.\n\noptions:\n");
	opts_help(f, sys_opts, N_SYS_OPTS);
}

static int emit_line(struct jsonw *w, int fd)
{
	int r = jw_emit(w, fd);
	if (r)
		jw_reset(w);
	return r;
}

/*
 * Whether every complete line of a journal's text is a journal record (a flat JSON
 * object in UTF-8), the first its header of schema SYS_SCHEMA: only then are its
 * lines passed on verbatim. A torn last line (no newline) is not looked at.
 */
static bool journal_text_valid(const char *text, size_t len)
{
	const char *p = text, *end = text + len;
	bool first = true;
	while (p < end) {
		const char *q = memchr(p, '\n', (size_t)(end - p));
		if (!q)
			break;
		for (const char *c = p; c < q;) {
			size_t l = jw_utf8_len(c, (size_t)(q - c));
			if (!l)
				return false;
			c += l;
		}
		struct sj_obj o;
		if (sj_parse(p, (size_t)(q - p), &o) != 0)
			return false;
		int64_t schema = 0;
		bool ok = !first || (sj_int(&o, "schema", &schema) == 0 && schema == SYS_SCHEMA);
		sj_free(&o);
		if (!ok)
			return false;
		first = false;
		p = q + 1;
	}
	return true;
}

/* The message of an error of reading a journal. */
static const char *journal_error(int e)
{
	return e == -EBADMSG ? "not an rtlab journal (a line is not a journal record)"
			     : strerror(-e);
}

/*
 * The status line ("path" added when listing) and the journal's complete lines,
 * verbatim (a torn last line is left out). Returns 0, or -errno with nothing
 * written when the journal cannot be opened or read (-EBADMSG: a line of it is not a
 * journal record, or it is not a regular file).
 */
static int write_status(const char *journal, bool listing)
{
	int fd = -1;
	bool held = false;
	int r = sys_open_journal(journal, &fd, &held);
	if (r)
		return r;
	char *text;
	size_t len;
	r = sf_slurp(fd, &text, &len);
	if (!held)
		flock(fd, LOCK_UN);
	close(fd);
	if (r)
		return r;
	if (!journal_text_valid(text, len)) {
		free(text);
		return -EBADMSG;
	}
	struct jsonw w;
	jw_init(&w);
	sys_record_begin(&w, "status");
	jw_str(&w, "journal", journal);
	if (listing)
		jw_str(&w, "path", journal);
	jw_bool(&w, "held", held);
	jw_obj_end(&w);
	r = emit_line(&w, STDOUT_FILENO);
	jw_free(&w);
	const char *last = len ? memrchr(text, '\n', len) : NULL;
	if (!r && last)
		r = rl_write_all(STDOUT_FILENO, text, (size_t)(last - text) + 1);
	free(text);
	return r ? -EPIPE : 0;
}

static int cmd_status(const char *journal)
{
	int r = write_status(journal, false);
	if (r == -EPIPE)
		return RL_EXIT_ERROR;
	if (r) {
		char shown[OPT_SHOWN_LEN];
		fprintf(stderr, "rtlab-probe sys status: cannot read %s: %s\n",
			opt_shown(journal, shown, sizeof(shown)), journal_error(r));
		return r == -ENOENT ? RL_EXIT_SKIPPED : RL_EXIT_ERROR;
	}
	return RL_EXIT_OK;
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The regular files DIR/NAME.journal, sorted by name, into the empty list names. 0 or
 * -errno (names then empty). */
static int list_journals(const char *dir, struct pm_list *names)
{
	DIR *d = opendir(dir);
	if (!d)
		return -errno;
	int r = 0;
	struct dirent *e;
	while (!r && (e = readdir(d))) {
		size_t l = strlen(e->d_name);
		if (l <= 8 || strcmp(e->d_name + l - 8, ".journal") != 0)
			continue;
		if (e->d_type != DT_REG && e->d_type != DT_UNKNOWN)
			continue;
		r = pm_list_add(names, strdup(e->d_name));
	}
	closedir(d);
	if (r)
		pm_list_free(names);
	else if (names->n)
		qsort(names->v, names->n, sizeof(*names->v), cmp_name);
	return r;
}

/* journals: the status of every journal (NAME.journal) in DIR, then journals_done. Read-only. */
static int cmd_journals(const char *dir)
{
	struct pm_list names = { 0 };
	int r = list_journals(dir, &names);
	if (r && r != -ENOENT) {
		char shown[OPT_SHOWN_LEN];
		fprintf(stderr, "rtlab-probe sys journals: cannot read %s: %s\n",
			opt_shown(dir, shown, sizeof(shown)), strerror(-r));
		return r == -EACCES || r == -EPERM ? RL_EXIT_SKIPPED : RL_EXIT_ERROR;
	}
	size_t dl = strlen(dir);
	bool slash = dl && dir[dl - 1] == '/';
	uint64_t count = 0, errors = 0;
	bool out_ok = true;
	for (size_t k = 0; k < names.n && out_ok; k++) {
		char path[PATH_MAX];
		snprintf(path, sizeof(path), "%s%s%s", dir, slash ? "" : "/", names.v[k]);
		int e = write_status(path, true);
		if (e == 0) {
			count++;
		} else if (e == -EPIPE) {
			out_ok = false;
		} else if (e != -ENOENT) {	/* ENOENT: restored meanwhile */
			errors++;
			char shown[OPT_SHOWN_LEN];
			fprintf(stderr, "rtlab-probe sys journals: cannot read %s: %s\n",
				opt_shown(path, shown, sizeof(shown)), journal_error(e));
			if (sys_emit_error(STDOUT_FILENO, path, -e) != 0)
				out_ok = false;
		}
	}
	pm_list_free(&names);
	if (!out_ok)
		return RL_EXIT_ERROR;
	struct jsonw w;
	jw_init(&w);
	sys_record_begin(&w, "journals_done");
	jw_str(&w, "dir", dir);
	jw_uint(&w, "count", count);
	jw_uint(&w, "errors", errors);
	jw_obj_end(&w);
	r = emit_line(&w, STDOUT_FILENO);
	jw_free(&w);
	return r || errors ? RL_EXIT_ERROR : RL_EXIT_OK;
}

/* lockinfo: who holds the target lock, as one line. Read-only. */
static int cmd_lockinfo(const char *lock)
{
	bool held;
	struct sys_lock_info li;
	int r = sys_lock_query(lock, &held, &li);
	if (r) {
		char shown[OPT_SHOWN_LEN];
		fprintf(stderr, "rtlab-probe sys lockinfo: cannot read %s: %s\n",
			opt_shown(lock, shown, sizeof(shown)), strerror(-r));
		return RL_EXIT_ERROR;
	}
	struct jsonw w;
	jw_init(&w);
	sys_record_begin(&w, "lock");
	jw_str(&w, "lock", lock);
	jw_bool(&w, "held", held);
	if (li.valid) {
		jw_int(&w, "pid", li.pid);
		jw_str(&w, "owner", li.owner);
		jw_int(&w, "since_ns", li.since_ns);
	} else {
		jw_null(&w, "pid");
		jw_null(&w, "owner");
		jw_null(&w, "since_ns");
	}
	jw_obj_end(&w);
	r = emit_line(&w, STDOUT_FILENO);
	jw_free(&w);
	return r ? RL_EXIT_ERROR : RL_EXIT_OK;
}

static int cmd_snapshot(const struct opt_value *vals)
{
	struct snap_limits lim = {
		.max_file = (size_t)(vals[SO_MAX_FILE].given ? vals[SO_MAX_FILE].i
							  : SYS_SNAP_MAX_FILE_DEFAULT),
		.max_total = (uint64_t)(vals[SO_MAX_TOTAL].given ? vals[SO_MAX_TOTAL].i
							   : SYS_SNAP_MAX_TOTAL_DEFAULT),
	};
	char err[512] = "";
	int r = sys_snapshot(STDIN_FILENO, STDOUT_FILENO, &lim, err, sizeof(err));
	if (r == -EINVAL) {
		fprintf(stderr, "rtlab-probe sys snapshot: %s\n", err);
		return RL_EXIT_USAGE;
	}
	if (r == -EFBIG) {
		fprintf(stderr, "rtlab-probe sys snapshot: stopped at --max-total %llu bytes\n",
			(unsigned long long)lim.max_total);
		return RL_EXIT_ERROR;
	}
	if (r) {
		fprintf(stderr, "rtlab-probe sys snapshot: %s\n", err[0] ? err : strerror(-r));
		return RL_EXIT_ERROR;
	}
	return RL_EXIT_OK;
}

/* `sys preempt [--root DIR]`: the model and the inputs it was decided from. */
static int cmd_preempt(const char *root)
{
	struct preempt_read *g = preempt_read(root);
	if (!g)
		return -ENOMEM;
	const struct preempt_inputs *in = preempt_read_inputs(g);
	struct preempt_info p;
	preempt_decide(in, &p);
	struct jsonw w;
	jw_init(&w);
	sys_record_begin(&w, "preempt");
	jw_str(&w, "engine_version", RTLAB_VERSION);
	jw_str(&w, "root", preempt_is_live(root) ? "/" : root);
	preempt_write(&w, &p);
	jw_str_or_null(&w, "version", in->version);
	jw_str_or_null(&w, "realtime", in->realtime);
	jw_str_or_null(&w, "live", in->live);
	jw_str_or_null(&w, "config", in->config_path);
	jw_obj_end(&w);
	int r = jw_emit(&w, STDOUT_FILENO);
	jw_free(&w);
	preempt_read_free(g);
	return r;
}

/* `sys cpumodel [--root DIR]`: the core names a probe's header records (cpuname.c). */
static int cmd_cpumodel(const char *root)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/proc/cpuinfo", root ? root : "");
	struct cpunames names;
	int e = cpuname_read(path, &names);
	struct jsonw w;
	jw_init(&w);
	sys_record_begin(&w, "cpumodel");
	jw_str(&w, "engine_version", RTLAB_VERSION);
	jw_str(&w, "root", root ? root : "/");
	jw_str(&w, "cpuinfo", path);
	jw_str_or_null(&w, "error", e ? strerror(-e) : NULL);
	cpuname_write(&w, &names, e == 0);
	jw_obj_end(&w);
	int r = jw_emit(&w, STDOUT_FILENO);
	jw_free(&w);
	return r;
}

int sys_main(int argc, char **argv)
{
	if (argc < 1 || strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0) {
		sys_usage(argc < 1 ? stderr : stdout);
		return argc < 1 ? RL_EXIT_USAGE : RL_EXIT_OK;
	}
	const char *sub = argv[0];
	struct opt_value vals[N_SYS_OPTS];
	cpu_set_t none;
	CPU_ZERO(&none);
	char err[512] = "";
	memset(vals, 0, sizeof(vals));
	int r = opts_parse(sys_opts, N_SYS_OPTS, argc - 1, argv + 1, &none, vals, err, sizeof(err));
	if (r == OPTS_HELP) {
		sys_usage(stdout);
		return RL_EXIT_OK;
	}
	if (r) {
		fprintf(stderr, "rtlab-probe sys %s: %s\n", sub, err);
		return RL_EXIT_USAGE;
	}
	const struct sys_sub *sc = NULL;
	for (size_t k = 0; k < sizeof(sys_subs) / sizeof(sys_subs[0]); k++)
		if (strcmp(sub, sys_subs[k].name) == 0)
			sc = &sys_subs[k];
	if (!sc) {
		char shown[OPT_SHOWN_LEN];
		fprintf(stderr, "rtlab-probe sys: unknown sub-command %s (facts, preempt, cpumodel, "
			"apply, restore, status, journals, lockinfo, snapshot)\n",
			opt_shown(sub, shown, sizeof(shown)));
		return RL_EXIT_USAGE;
	}
	for (size_t k = 0; k < N_SYS_OPTS; k++)
		if (vals[k].given && !(sc->opts & SO_BIT(k))) {
			fprintf(stderr, "rtlab-probe sys %s: --%s is not an option of %s\n", sub,
				sys_opts[k].name, sub);
			return RL_EXIT_USAGE;
		}
	const char *journal = vals[SO_JOURNAL].given ? vals[SO_JOURNAL].s : NULL;
	bool detach = vals[SO_DETACH].given && vals[SO_DETACH].i;
	const char *root = vals[SO_ROOT].given ? vals[SO_ROOT].s : NULL;
	const char *lock = vals[SO_LOCK].given ? vals[SO_LOCK].s : NULL;
	const char *owner = vals[SO_OWNER].given ? vals[SO_OWNER].s : NULL;
	if (strcmp(sub, "preempt") == 0 || strcmp(sub, "cpumodel") == 0) {
		struct stat st;
		if (root && (stat(root, &st) != 0 || !S_ISDIR(st.st_mode))) {
			char shown[OPT_SHOWN_LEN];
			fprintf(stderr, "rtlab-probe sys %s: --root %s is not a directory\n", sub,
				opt_shown(root, shown, sizeof(shown)));
			return RL_EXIT_USAGE;
		}
		if ((strcmp(sub, "preempt") == 0 ? cmd_preempt(root) : cmd_cpumodel(root)) != 0) {
			fprintf(stderr, "rtlab-probe sys %s: cannot write the answer\n", sub);
			return RL_EXIT_ERROR;
		}
		return RL_EXIT_OK;
	}
	if (strcmp(sub, "facts") == 0) {
		r = sys_facts(STDOUT_FILENO);
		if (r) {
			fprintf(stderr, "rtlab-probe sys facts: %s\n", strerror(-r));
			return RL_EXIT_ERROR;
		}
		return RL_EXIT_OK;
	}
	if (strcmp(sub, "snapshot") == 0)
		return cmd_snapshot(vals);
	if (strcmp(sub, "journals") == 0)
		return cmd_journals(vals[SO_DIR].given ? vals[SO_DIR].s : "/run/rtlab");
	if ((sc->opts & SO_BIT(SO_JOURNAL)) && (!journal || journal[0] != '/')) {
		fprintf(stderr, "rtlab-probe sys %s: --journal FILE (an absolute path) is required\n", sub);
		return RL_EXIT_USAGE;
	}
	if (strcmp(sub, "lockinfo") == 0 && !lock) {
		fprintf(stderr, "rtlab-probe sys lockinfo: --lock FILE is required\n");
		return RL_EXIT_USAGE;
	}
	if (lock && lock[0] != '/') {
		fprintf(stderr, "rtlab-probe sys %s: --lock FILE must be an absolute path\n", sub);
		return RL_EXIT_USAGE;
	}
	const struct { const char *opt, *path; } named[] = { { "--journal", journal },
							     { "--lock", lock } };
	for (size_t k = 0; k < sizeof(named) / sizeof(named[0]); k++) {
		struct stat st;
		if (named[k].path && stat(named[k].path, &st) == 0 && !S_ISREG(st.st_mode)) {
			char shown[OPT_SHOWN_LEN];
			fprintf(stderr, "rtlab-probe sys %s: %s %s: not a regular file; name the "
				"rtlab file (e.g. /run/rtlab/%s)\n", sub, named[k].opt,
				opt_shown(named[k].path, shown, sizeof(shown)),
				k == 0 ? "NAME.journal" : "target.lock");
			return RL_EXIT_USAGE;
		}
	}
	if (strcmp(sub, "lockinfo") == 0)
		return cmd_lockinfo(lock);
	if (!lock != !owner) {
		fprintf(stderr, "rtlab-probe sys apply: --lock FILE and --owner LABEL go together\n");
		return RL_EXIT_USAGE;
	}
	if (owner && !sys_owner_valid(owner)) {
		fprintf(stderr, "rtlab-probe sys apply: --owner: 1 to %d bytes without control "
			"characters\n", SYS_OWNER_MAX);
		return RL_EXIT_USAGE;
	}
	if (sc->root && geteuid() != 0) {
		fprintf(stderr, "rtlab-probe sys %s: skipped: needs root\n", sub);
		return RL_EXIT_SKIPPED;
	}
	if (strcmp(sub, "apply") == 0)
		return sys_cmd_apply(journal, detach, lock, owner);
	if (strcmp(sub, "restore") == 0)
		return sys_cmd_restore(journal);
	return cmd_status(journal);
}
