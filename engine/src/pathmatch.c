/* SPDX-License-Identifier: MIT */
/*
 * Path patterns of `sys snapshot` (pathmatch.h): a matcher for one path
 * component and an expansion of absolute patterns, both byte-for-byte what
 * glibc's fnmatch(FNM_PERIOD) and glob(flags 0) give in the C locale.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pathmatch.h"

/* ---- one component ---- */

#define PM_CLASS_MAX 256	/* longest [:name:] looked at (glibc: then ill-formed) */

static bool in_range(unsigned c, unsigned lo, unsigned hi)
{
	return c >= lo && c <= hi;
}

/* Is c in the C locale's class name? *known = false for an unknown name. */
static bool in_class(const char *name, unsigned c, bool *known)
{
	bool upper = in_range(c, 'A', 'Z'), lower = in_range(c, 'a', 'z');
	bool digit = in_range(c, '0', '9'), graph = in_range(c, 0x21, 0x7e);
	*known = true;
	if (strcmp(name, "alpha") == 0)
		return upper || lower;
	if (strcmp(name, "digit") == 0)
		return digit;
	if (strcmp(name, "alnum") == 0)
		return upper || lower || digit;
	if (strcmp(name, "upper") == 0)
		return upper;
	if (strcmp(name, "lower") == 0)
		return lower;
	if (strcmp(name, "xdigit") == 0)
		return digit || in_range(c, 'a', 'f') || in_range(c, 'A', 'F');
	if (strcmp(name, "space") == 0)
		return c == ' ' || in_range(c, '\t', '\r');
	if (strcmp(name, "blank") == 0)
		return c == ' ' || c == '\t';
	if (strcmp(name, "cntrl") == 0)
		return c < 0x20 || c == 0x7f;
	if (strcmp(name, "graph") == 0)
		return graph;
	if (strcmp(name, "print") == 0)
		return graph || c == ' ';
	if (strcmp(name, "punct") == 0)
		return graph && !(upper || lower || digit);
	*known = false;
	return false;
}

/*
 * A collating symbol "[.x.]" at p (pointing at the '.' after '['): in the C
 * locale only a single byte names one. 1 with *sym and p moved past ".]",
 * 0 when ill-formed (unterminated or longer than one byte).
 */
static int collating_symbol(const char **pp, unsigned char *sym)
{
	const char *start = *pp, *p = *pp;
	size_t len = 0;
	for (;;) {
		char c = *++p;
		if (c == '.' && p[1] == ']')
			break;
		if (c == '\0')
			return 0;
		len++;
	}
	if (len != 1)
		return 0;
	*sym = (unsigned char)start[1];
	*pp = p + 2;
	return 1;
}

enum bracket { BR_NO, BR_YES, BR_LITERAL };

/*
 * After a member matched: skip to the bracket's closing ']' (*pp past it).
 * BR_YES, BR_LITERAL when the bracket is unterminated after all, BR_NO
 * when it is ill-formed.
 */
static enum bracket skip_rest(const char **pp)
{
	const char *p = *pp;
	char c;
	while ((c = *p++) != ']') {
		if (c == '\\') {
			if (*p == '\0')
				return BR_NO;
			p++;
		} else if (c == '[' && *p == ':') {
			const char *start = p;
			size_t len = 0;
			for (;;) {
				char k = *++p;
				if (++len == PM_CLASS_MAX)
					return BR_NO;
				if (k == ':' && p[1] == ']')
					break;
				if (k < 'a' || k >= 'z') {
					p = start - 2;	/* not a class: go on after the '[' */
					break;
				}
			}
			p += 2;
		} else if (c == '[' && *p == '=') {
			if (p[1] == '\0' || p[2] != '=' || p[3] != ']')
				return BR_NO;
			p += 4;
		} else if (c == '[' && *p == '.') {
			for (;;) {
				char k = *++p;
				if (k == '\0')
					return BR_NO;
				if (k == '.' && p[1] == ']')
					break;
			}
			p += 2;
		} else if (c == '\0') {
			return BR_LITERAL;
		}
	}
	*pp = p;
	return BR_YES;
}

/*
 * The bracket expression starting at p (just after its '[') against byte ch.
 * BR_YES/BR_NO (ill-formed counts as no) with *end past the ']', or
 * BR_LITERAL: the '[' is unterminated and stands for itself.
 */
static enum bracket bracket(const char *p, unsigned char ch, const char **end)
{
	bool neg = *p == '!' || (*p == '^' && !getenv("POSIXLY_CORRECT"));
	if (neg)
		p++;
	unsigned char c = (unsigned char)*p++;
	for (;;) {
		unsigned char lo;
		bool is_range;
		if (c == '\\') {
			if (*p == '\0')
				return BR_NO;
			c = (unsigned char)*p++;
			goto single;
		} else if (c == '[' && *p == ':') {
			char name[PM_CLASS_MAX + 1];
			const char *start = p;
			size_t len = 0;
			for (;;) {
				if (len == PM_CLASS_MAX)
					return BR_NO;
				char k = *++p;
				if (k == ':' && p[1] == ']') {
					p += 2;
					break;
				}
				if (k < 'a' || k >= 'z') {
					p = start;	/* no class name: '[' is an ordinary member */
					c = '[';
					goto single;
				}
				name[len++] = k;
			}
			name[len] = '\0';
			bool known;
			bool in = in_class(name, ch, &known);
			if (!known)
				return BR_NO;
			if (in)
				goto matched;
			c = (unsigned char)*p++;
			goto next;
		} else if (c == '[' && *p == '=') {
			/* an equivalence class "[=x=]": in the C locale just x */
			if (p[1] == '\0' || p[2] != '=' || p[3] != ']') {
				c = '[';
				goto single;
			}
			unsigned char eq = (unsigned char)p[1];
			p += 4;
			if (ch == eq)
				goto matched;
			c = (unsigned char)*p++;
			goto next;
		} else if (c == '\0') {
			return BR_LITERAL;
		} else if (c == '[' && *p == '.') {
			unsigned char sym;
			if (!collating_symbol(&p, &sym))
				return BR_NO;
			is_range = *p == '-' && p[1] != '\0';
			if (!is_range && ch == sym)
				goto matched;
			lo = sym;
			c = (unsigned char)*p++;
			goto range;
		}
single:
		is_range = *p == '-' && p[1] != '\0' && p[1] != ']';
		if (!is_range && c == ch)
			goto matched;
		lo = c;
		c = (unsigned char)*p++;
range:
		if (c == '-' && *p != ']') {
			unsigned char hi = (unsigned char)*p++;
			if (hi == '[' && *p == '.') {
				if (!collating_symbol(&p, &hi))
					return BR_NO;
			} else {
				if (hi == '\\')
					hi = (unsigned char)*p++;
				if (hi == '\0')
					return BR_NO;
			}
			if (lo <= ch && ch <= hi)
				goto matched;
			c = (unsigned char)*p++;
		}
next:
		if (c == ']')
			break;
	}
	*end = p;
	return neg ? BR_YES : BR_NO;
matched: {
		enum bracket r = skip_rest(&p);
		if (r != BR_YES)
			return r;
		*end = p;
		return neg ? BR_NO : BR_YES;
	}
}

/*
 * Match from p against n; lead: n is the start of the name, where a '.' must
 * be matched by a literal '.'.
 */
static bool match_from(const char *p, const char *n, bool lead)
{
	char c;
	while ((c = *p++) != '\0') {
		switch (c) {
		case '?':
			if (*n == '\0' || (*n == '.' && lead))
				return false;
			break;
		case '\\':
			c = *p++;
			if (c == '\0' || *n != c)
				return false;
			break;
		case '*': {
			if (*n == '.' && lead)
				return false;
			for (c = *p++; c == '?' || c == '*'; c = *p++) {
				if (c == '?') {
					if (*n == '\0')
						return false;
					n++;
				}
			}
			if (c == '\0')
				return true;
			/*
			 * Try the rest at every place; glibc keeps `lead` for the
			 * first try, even after a '?' took the leading '.'.
			 */
			char want = c == '\\' ? *p : c;
			for (p--; *n != '\0'; n++, lead = false)
				if ((c == '[' || *n == want) && match_from(p, n, lead))
					return true;
			return false;
		}
		case '[': {
			if (*n == '\0' || (*n == '.' && lead))
				return false;
			const char *end = p;
			enum bracket b = bracket(p, (unsigned char)*n, &end);
			if (b == BR_NO)
				return false;
			if (b == BR_LITERAL) {
				if (*n != '[')
					return false;
			} else {
				p = end;
			}
			break;
		}
		default:
			if (*n != c)
				return false;
			break;
		}
		lead = false;
		n++;
	}
	return *n == '\0';
}

bool pm_match(const char *pat, const char *name)
{
	return match_from(pat, name, true);
}

/* ---- expansion ---- */

enum { PT_NONE = 0, PT_SPECIAL = 1, PT_BACKSLASH = 2, PT_BRACKET = 4 };

/* What kind of pattern: PT_SPECIAL (`*`, `?`, `[...]`), or flags of '\' and a lone '['. */
static int pattern_type(const char *p)
{
	int t = PT_NONE;
	for (; *p; p++) {
		switch (*p) {
		case '*':
		case '?':
			return PT_SPECIAL;
		case '\\':
			if (p[1] != '\0')
				p++;
			t |= PT_BACKSLASH;
			break;
		case '[':
			t |= PT_BRACKET;
			break;
		case ']':
			if (t & PT_BRACKET)
				return PT_SPECIAL;
			break;
		default:
			break;
		}
	}
	return t;
}

bool pm_has_magic(const char *pat)
{
	return (pattern_type(pat) & (PT_SPECIAL | PT_BRACKET)) != 0;
}

#define PM_MARK 1	/* append '/' to directories */
#define PM_ONLYDIR 2	/* only directories (and symlinks to them) among listed names */
#define PM_NOSORT 4

struct pm_ctx {
	pm_error_fn on_error;
	void *ctx;
};

int pm_list_add(struct pm_list *l, char *s)
{
	if (!s)
		return -ENOMEM;
	if (l->n == l->cap) {
		size_t nc = l->cap ? 2 * l->cap : 16;
		char **nv = realloc(l->v, nc * sizeof(*nv));
		if (!nv) {
			free(s);
			return -ENOMEM;
		}
		l->v = nv;
		l->cap = nc;
	}
	l->v[l->n++] = s;
	return 0;
}

void pm_list_free(struct pm_list *l)
{
	for (size_t k = 0; k < l->n; k++)
		free(l->v[k]);
	free(l->v);
	l->v = NULL;
	l->n = l->cap = 0;
}

/* dir + "/" + name, or "/" + name when dir is "/" (glibc's prefix rule). */
static char *join(const char *dir, const char *name)
{
	size_t dl = strlen(dir), nl = strlen(name);
	if (dl == 1 && dir[0] == '/')
		dl = 0;
	char *s = malloc(dl + nl + 2);
	if (s) {
		memcpy(s, dir, dl);
		s[dl] = '/';
		memcpy(s + dl + 1, name, nl + 1);
	}
	return s;
}

/* The names in dir that match pat (one component), as dir-prefixed paths. */
static int in_dir(const char *pat, const char *dir, int flags, const struct pm_ctx *c,
		  struct pm_list *out)
{
	if (pattern_type(pat) == PT_NONE) {
		/* nothing to match: the name is there or not */
		char *full = malloc(strlen(dir) + strlen(pat) + 2);
		if (!full)
			return -ENOMEM;
		strcpy(full, dir);
		strcat(full, "/");
		strcat(full, pat);
		struct stat st;
		bool there = lstat(full, &st) == 0 || errno == EOVERFLOW;
		free(full);
		return there ? pm_list_add(out, join(dir, pat)) : 0;
	}
	DIR *d = opendir(dir);
	if (!d) {
		if (errno != ENOTDIR && c->on_error)
			c->on_error(c->ctx, dir, errno);
		return 0;
	}
	int r = 0;
	struct dirent *e;
	while (!r && (e = readdir(d)) != NULL) {
		if ((flags & PM_ONLYDIR) && e->d_type != DT_DIR) {
			struct stat st;
			if ((e->d_type != DT_LNK && e->d_type != DT_UNKNOWN) ||
			    fstatat(dirfd(d), e->d_name, &st, 0) != 0 || !S_ISDIR(st.st_mode))
				continue;
		}
		if (pm_match(pat, e->d_name))
			r = pm_list_add(out, join(dir, e->d_name));
	}
	closedir(d);
	return r;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Mark directories, then sort, the entries from `from` on (as glob's end does). */
static int finish(struct pm_list *out, size_t from, int flags)
{
	if (flags & PM_MARK) {
		for (size_t k = from; k < out->n; k++) {
			struct stat st;
			if (stat(out->v[k], &st) != 0 || !S_ISDIR(st.st_mode))
				continue;
			size_t l = strlen(out->v[k]);
			char *s = realloc(out->v[k], l + 2);
			if (!s)
				return -ENOMEM;
			s[l] = '/';
			s[l + 1] = '\0';
			out->v[k] = s;
		}
	}
	if (!(flags & PM_NOSORT) && out->n - from > 1)
		qsort(out->v + from, out->n - from, sizeof(*out->v), cmp_str);
	return 0;
}

static int expand(const char *pattern, int flags, const struct pm_ctx *c, struct pm_list *out)
{
	size_t from = out->n;
	const char *slash = strrchr(pattern, '/');
	if (!slash)
		return -EINVAL;	/* absolute patterns only */
	size_t dirlen = (size_t)(slash - pattern);
	const char *file = slash + 1;
	char *dir;
	if (dirlen == 0) {
		dir = strdup("/");
	} else {
		dir = strndup(pattern, dirlen);
		if (dir && file[0] == '\0' && dirlen > 1) {
			/* "pattern/": the directories pattern matches, marked */
			size_t bs = 0;
			while (bs < dirlen && dir[dirlen - 1 - bs] == '\\')
				bs++;
			if (bs & 1)
				dir[--dirlen] = '\0';	/* it quoted the '/' */
			for (char *q = dir + dirlen - 1; q > dir && q[0] == '/' && q[-1] == '/'; q--)
				q[0] = '\0';	/* "a///": as "a/" */
			int r = expand(dir, flags | PM_MARK | PM_ONLYDIR, c, out);
			free(dir);
			return r;
		}
	}
	if (!dir)
		return -ENOMEM;
	int r = 0;
	int dtype = pattern_type(dir);
	if (dtype & (PT_SPECIAL | PT_BRACKET)) {
		/* the directory part has wildcards too: expand it, then look in each */
		struct pm_list dirs = { 0 };
		r = expand(dir, PM_NOSORT | PM_ONLYDIR, c, &dirs);
		for (size_t k = 0; !r && k < dirs.n; k++)
			r = in_dir(file, dirs.v[k], flags, c, out);
		pm_list_free(&dirs);
	} else {
		if (dtype & PT_BACKSLASH) {
			/* unquote a literal directory part */
			char *q = dir;
			for (const char *p = dir; *p; p++) {
				if (*p == '\\') {
					p++;
					if (*p == '\0')
						break;
				}
				*q++ = *p;
			}
			*q = '\0';
		}
		r = in_dir(file, dir, flags, c, out);
	}
	free(dir);
	if (!r)
		r = finish(out, from, flags);
	return r;
}

int pm_glob(const char *pattern, pm_error_fn on_error, void *ctx, struct pm_list *out)
{
	struct pm_ctx c = { .on_error = on_error, .ctx = ctx };
	size_t from = out->n;
	int r = expand(pattern, 0, &c, out);
	if (r) {
		while (out->n > from)
			free(out->v[--out->n]);
	}
	return r;
}
