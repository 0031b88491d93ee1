/* SPDX-License-Identifier: MIT */
/*
 * `rtlab-probe sys snapshot`: copy selected files of a board's /proc, /sys and
 * /boot to the host as JSON Lines, so the host's doctor reads them as a tree
 * (docs/sys-protocol.md). Read-only: regular files are read, symlinks are
 * reported (not followed), directories are listed on request; devices, FIFOs
 * and sockets are never opened.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jsonw.h"
#include "opts.h"
#include "pathmatch.h"
#include "sys.h"
#include "sysfile.h"

#define SNAP_FIRST_BUF (64 * 1024)

/* ---- building blocks (unit-tested) ---- */

int snap_check_pattern(const char *pat, char *err, size_t errlen)
{
	size_t len = strlen(pat);
	const char *why = NULL;
	if (len == 0)
		why = "empty";
	else if (pat[0] != '/')
		why = "not an absolute path";
	else if (len >= PATH_MAX)
		why = "longer than PATH_MAX";
	for (size_t k = 0; !why && k < len; k++)
		if ((unsigned char)pat[k] < 0x20 || pat[k] == 0x7f)
			why = "contains a control character";
	for (const char *c = pat; !why && c && *c;) {
		while (*c == '/')
			c++;
		size_t cl = strcspn(c, "/");
		if (cl == 2 && c[0] == '.' && c[1] == '.')
			why = "has a '..' component";
		c += cl;
	}
	if (why) {
		snprintf(err, errlen, "%s", why);
		return -EINVAL;
	}
	return 0;
}

bool snap_is_glob(const char *pat)
{
	return strpbrk(pat, "*?[\\") != NULL;
}

bool snap_is_text(const char *buf, size_t len)
{
	const unsigned char *p = (const unsigned char *)buf;
	size_t k = 0;
	while (k < len) {
		if (p[k] == 0)
			return false;
		size_t l = jw_utf8_len(p + k, len - k);
		if (!l)
			return false;
		k += l;
	}
	return true;
}

size_t snap_base64(const void *in, size_t len, char *out)
{
	static const char abc[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const unsigned char *p = in;
	size_t o = 0, k = 0;
	for (; k + 3 <= len; k += 3) {
		uint32_t v = (uint32_t)p[k] << 16 | (uint32_t)p[k + 1] << 8 | p[k + 2];
		out[o++] = abc[v >> 18];
		out[o++] = abc[(v >> 12) & 63];
		out[o++] = abc[(v >> 6) & 63];
		out[o++] = abc[v & 63];
	}
	if (len - k == 1) {
		uint32_t v = (uint32_t)p[k] << 16;
		out[o++] = abc[v >> 18];
		out[o++] = abc[(v >> 12) & 63];
		out[o++] = '=';
		out[o++] = '=';
	} else if (len - k == 2) {
		uint32_t v = (uint32_t)p[k] << 16 | (uint32_t)p[k + 1] << 8;
		out[o++] = abc[v >> 18];
		out[o++] = abc[(v >> 12) & 63];
		out[o++] = abc[(v >> 6) & 63];
		out[o++] = '=';
	}
	out[o] = '\0';
	return o;
}

const char *sys_errno_name(int err)
{
	switch (err) {
	case EPERM: return "EPERM";
	case ENOENT: return "ENOENT";
	case ESRCH: return "ESRCH";
	case EINTR: return "EINTR";
	case EIO: return "EIO";
	case ENXIO: return "ENXIO";
	case E2BIG: return "E2BIG";
	case EBADF: return "EBADF";
	case EAGAIN: return "EAGAIN";
	case ENOMEM: return "ENOMEM";
	case EACCES: return "EACCES";
	case EFAULT: return "EFAULT";
	case EBUSY: return "EBUSY";
	case EEXIST: return "EEXIST";
	case ENODEV: return "ENODEV";
	case ENOTDIR: return "ENOTDIR";
	case EISDIR: return "EISDIR";
	case EINVAL: return "EINVAL";
	case ENFILE: return "ENFILE";
	case EMFILE: return "EMFILE";
	case EFBIG: return "EFBIG";
	case ENOSPC: return "ENOSPC";
	case ESPIPE: return "ESPIPE";
	case EBADMSG: return "EBADMSG";
	case EROFS: return "EROFS";
	case ERANGE: return "ERANGE";
	case ENAMETOOLONG: return "ENAMETOOLONG";
	case ENOSYS: return "ENOSYS";
	case ELOOP: return "ELOOP";
	case ENODATA: return "ENODATA";
	case EOVERFLOW: return "EOVERFLOW";
	case EOPNOTSUPP: return "EOPNOTSUPP";
	case ETIMEDOUT: return "ETIMEDOUT";
	case ESTALE: return "ESTALE";
	default: return NULL;
	}
}

int sys_emit_error(int fd, const char *path, int err)
{
	struct jsonw w;
	jw_init(&w);
	jw_obj_begin(&w, NULL);
	jw_str(&w, "type", "error");
	jw_str(&w, "path", path);
	jw_int(&w, "errno", err);
	const char *name = sys_errno_name(err);
	if (name)
		jw_str(&w, "error", name);
	else
		jw_strf(&w, "error", "E%d", err);
	jw_obj_end(&w);
	int r = jw_emit(&w, fd);
	jw_free(&w);
	return r;
}

/* ---- the snapshot ---- */

struct snap {
	int out;
	const struct snap_limits *lim;
	struct jsonw w;
	uint64_t files, errors, bytes;
	bool stopped;		/* max_total reached */
	int werr;		/* writing out failed: stop */
	char self[32];		/* "/proc/PID": our own process, left out of pattern matches */
	size_t self_len;
	char *buf;		/* file content */
	size_t cap;
};

static void emit(struct snap *s)
{
	if (s->werr) {
		jw_reset(&s->w);
		return;
	}
	int r = jw_emit(&s->w, s->out);
	if (r) {
		jw_reset(&s->w);
		s->werr = r;
	}
}

static void emit_error(struct snap *s, const char *path, int err)
{
	s->errors++;
	if (!s->werr) {
		int r = sys_emit_error(s->out, path, err);
		if (r)
			s->werr = r;
	}
}

/* A directory the pattern's expansion could not read. */
static void on_dir_error(void *ctx, const char *dir, int err)
{
	/* A directory that vanished while matching (an exited task) is not an error. */
	if (err != ENOENT && err != ENOTDIR && err != ESRCH)
		emit_error(ctx, dir, err);
}

/* Files whose reading consumes what they hold (or blocks): never read. */
static bool consuming(const char *path)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	return strcmp(path, "/proc/kmsg") == 0 || strcmp(base, "trace_pipe") == 0 ||
	       strcmp(base, "trace_pipe_raw") == 0;
}

/* Read fd to EOF, at most max bytes; *more when there was more. 0 or -errno. */
static int read_capped(struct snap *s, int fd, size_t max, size_t *len, bool *more)
{
	size_t n = 0;
	*more = false;
	for (;;) {
		if (n == max) {
			char one;
			ssize_t r = read(fd, &one, 1);
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0)
				return -errno;
			*more = r > 0;
			break;
		}
		if (n == s->cap) {
			size_t nc = s->cap ? s->cap * 2 : SNAP_FIRST_BUF;
			if (nc > max)
				nc = max;
			char *nb = realloc(s->buf, nc);
			if (!nb)
				return -ENOMEM;
			s->buf = nb;
			s->cap = nc;
		}
		size_t want = (s->cap < max ? s->cap : max) - n;
		ssize_t r = read(fd, s->buf + n, want);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		n += (size_t)r;
	}
	*len = n;
	return 0;
}

static void snap_file(struct snap *s, const char *path, bool matched)
{
	if (consuming(path)) {
		emit_error(s, path, EPERM);
		return;
	}
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		if (!(matched && errno == ENOENT))
			emit_error(s, path, errno);
		return;
	}
	struct stat st;
	if (fstat(fd, &st) != 0) {
		emit_error(s, path, errno);
		close(fd);
		return;
	}
	if (!S_ISREG(st.st_mode)) {	/* replaced by something else since lstat() */
		emit_error(s, path, S_ISDIR(st.st_mode) ? EISDIR : EOPNOTSUPP);
		close(fd);
		return;
	}
	size_t len = 0;
	bool more = false;
	int r = read_capped(s, fd, s->lim->max_file, &len, &more);
	close(fd);
	if (r) {
		if (!(matched && (r == -ENOENT || r == -ESRCH)))
			emit_error(s, path, -r);
		return;
	}
	if (s->bytes + len > s->lim->max_total) {
		emit_error(s, path, EFBIG);
		s->stopped = true;
		return;
	}
	s->bytes += len;
	s->files++;
	jw_obj_begin(&s->w, NULL);
	jw_str(&s->w, "type", "file");
	jw_str(&s->w, "path", path);
	jw_uint(&s->w, "size", len);
	if (snap_is_text(s->buf, len)) {
		jw_strn(&s->w, "text", s->buf, len);
	} else {
		char *b64 = malloc(4 * ((len + 2) / 3) + 1);
		if (!b64) {
			jw_reset(&s->w);
			s->files--;
			s->bytes -= len;
			emit_error(s, path, ENOMEM);
			return;
		}
		size_t bl = snap_base64(s->buf, len, b64);
		jw_strn(&s->w, "base64", b64, bl);
		free(b64);
	}
	if (more)
		jw_bool(&s->w, "truncated", true);
	jw_obj_end(&s->w);
	emit(s);
}

static void snap_link(struct snap *s, const char *path, bool matched)
{
	char target[PATH_MAX + 1];
	ssize_t n = readlink(path, target, sizeof(target));
	if (n < 0) {
		if (!(matched && errno == ENOENT))
			emit_error(s, path, errno);
		return;
	}
	if ((size_t)n >= sizeof(target)) {
		emit_error(s, path, ENAMETOOLONG);
		return;
	}
	s->files++;
	jw_obj_begin(&s->w, NULL);
	jw_str(&s->w, "type", "link");
	jw_str(&s->w, "path", path);
	jw_strn(&s->w, "target", target, (size_t)n);
	jw_obj_end(&s->w);
	emit(s);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void snap_dir(struct snap *s, const char *path, bool matched)
{
	DIR *d = opendir(path);
	if (!d) {
		if (!(matched && errno == ENOENT))
			emit_error(s, path, errno);
		return;
	}
	struct pm_list names = { 0 };
	int err = 0;
	struct dirent *e;
	while (!err) {
		errno = 0;
		e = readdir(d);
		if (!e) {
			err = errno;
			break;
		}
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		err = -pm_list_add(&names, strdup(e->d_name));
	}
	closedir(d);
	if (err && !(matched && err == ENOENT)) {
		emit_error(s, path, err);
	} else if (!err) {
		if (names.n)
			qsort(names.v, names.n, sizeof(*names.v), cmp_str);
		s->files++;
		jw_obj_begin(&s->w, NULL);
		jw_str(&s->w, "type", "dir");
		jw_str(&s->w, "path", path);
		jw_arr_begin(&s->w, "entries");
		for (size_t k = 0; k < names.n; k++)
			jw_str(&s->w, NULL, names.v[k]);
		jw_arr_end(&s->w);
		jw_obj_end(&s->w);
		emit(s);
	}
	pm_list_free(&names);
}

/* One path: a symlink, a regular file, or (list) a directory to list. */
static void snap_path(struct snap *s, const char *path, bool list, bool matched)
{
	if (list) {
		snap_dir(s, path, matched);
		return;
	}
	struct stat st;
	if (lstat(path, &st) != 0) {
		if (!(matched && errno == ENOENT))
			emit_error(s, path, errno);
		return;
	}
	if (S_ISLNK(st.st_mode))
		snap_link(s, path, matched);
	else if (S_ISREG(st.st_mode))
		snap_file(s, path, matched);
	else	/* a directory needs a trailing '/'; devices, FIFOs, sockets are not opened */
		emit_error(s, path, S_ISDIR(st.st_mode) ? EISDIR : EOPNOTSUPP);
}

/* A glob match with a "." or ".." component ("/proc/.*" matches those). */
static bool dot_component(const char *path)
{
	for (const char *c = path; *c;) {
		while (*c == '/')
			c++;
		size_t cl = strcspn(c, "/");
		if ((cl == 1 && c[0] == '.') || (cl == 2 && c[0] == '.' && c[1] == '.'))
			return true;
		c += cl;
	}
	return false;
}

/* Copy path without trailing slashes ("/" stays "/"). */
static void strip_slashes(char *out, size_t outlen, const char *path)
{
	snprintf(out, outlen, "%s", path);
	size_t l = strlen(out);
	while (l > 1 && out[l - 1] == '/')
		out[--l] = '\0';
}

static int snap_pattern(struct snap *s, const char *pat)
{
	size_t pl = strlen(pat);
	bool list = pat[pl - 1] == '/';
	char path[PATH_MAX];
	if (!snap_is_glob(pat)) {
		strip_slashes(path, sizeof(path), pat);
		snap_path(s, path, list, false);
		return 0;
	}
	struct pm_list g = { 0 };
	int r = pm_glob(pat, on_dir_error, s, &g);
	for (size_t k = 0; !r && k < g.n && !s->stopped && !s->werr; k++) {
		const char *m = g.v[k];
		if (dot_component(m))
			continue;
		if (strncmp(m, s->self, s->self_len) == 0 &&
		    (m[s->self_len] == '/' || m[s->self_len] == '\0'))
			continue;	/* ourselves: gone before anyone reads the copy */
		strip_slashes(path, sizeof(path), m);
		snap_path(s, path, list, true);
	}
	pm_list_free(&g);	/* a pattern that matches nothing is no error */
	return r;
}

int sys_snapshot(int in_fd, int out_fd, const struct snap_limits *lim, char *err, size_t errlen)
{
	char *text;
	size_t len;
	int r = sf_slurp(in_fd, &text, &len);
	if (r) {
		snprintf(err, errlen, "cannot read the patterns: %s", strerror(-r));
		return r == -EFBIG ? -EINVAL : r;
	}
	/* Split into lines and check every pattern before writing anything. */
	struct pm_list pats = { 0 };
	size_t lineno = 0;
	for (char *line = text; line < text + len;) {
		char *nl = memchr(line, '\n', (size_t)(text + len - line));
		char *end = nl ? nl : text + len;
		lineno++;
		if (memchr(line, '\0', (size_t)(end - line))) {
			snprintf(err, errlen, "pattern on line %zu: contains a NUL byte", lineno);
			r = -EINVAL;
			break;
		}
		*end = '\0';
		if (end > line && end[-1] == '\r')
			end[-1] = '\0';
		if (*line) {
			char why[64];
			if (snap_check_pattern(line, why, sizeof(why)) != 0) {
				char shown[OPT_SHOWN_LEN];
				snprintf(err, errlen, "pattern on line %zu %s: %s", lineno,
					 opt_shown(line, shown, sizeof(shown)), why);
				r = -EINVAL;
				break;
			}
			r = pm_list_add(&pats, strdup(line));
			if (r)
				break;
		}
		line = end + 1;
	}
	free(text);
	if (r) {
		pm_list_free(&pats);
		return r;
	}

	struct snap s = { .out = out_fd, .lim = lim };
	jw_init(&s.w);
	int sl = snprintf(s.self, sizeof(s.self), "/proc/%d", (int)getpid());
	s.self_len = (size_t)sl;
	for (size_t k = 0; k < pats.n && !s.stopped && !s.werr; k++) {
		r = snap_pattern(&s, pats.v[k]);
		if (r)
			break;
	}
	pm_list_free(&pats);
	free(s.buf);
	if (!r && !s.werr) {
		sys_record_begin(&s.w, "snapshot_done");
		jw_uint(&s.w, "files", s.files);
		jw_uint(&s.w, "errors", s.errors);
		jw_uint(&s.w, "bytes", s.bytes);
		jw_bool(&s.w, "complete", !s.stopped);
		jw_obj_end(&s.w);
		emit(&s);
	}
	jw_free(&s.w);
	if (r)
		return r;
	if (s.werr)
		return s.werr;
	return s.stopped ? -EFBIG : 0;
}
