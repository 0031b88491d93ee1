/* SPDX-License-Identifier: MIT */
/* The JSON of the `sys` protocol: the head of an answer, and a parser for the flat
 * objects of op and journal lines. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sys.h"

struct sj_cur {
	const char *p, *end;
};

static void skip_ws(struct sj_cur *c)
{
	while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
		c->p++;
}

static int hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

static int read_hex4(struct sj_cur *c, unsigned *out)
{
	if (c->end - c->p < 4)
		return -EINVAL;
	unsigned v = 0;
	for (int k = 0; k < 4; k++) {
		int h = hexval(c->p[k]);
		if (h < 0)
			return -EINVAL;
		v = v * 16 + (unsigned)h;
	}
	c->p += 4;
	*out = v;
	return 0;
}

static size_t put_utf8(char *o, unsigned cp)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xC0 | (cp >> 6));
		o[1] = (char)(0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xE0 | (cp >> 12));
		o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
		o[2] = (char)(0x80 | (cp & 0x3F));
		return 3;
	}
	o[0] = (char)(0xF0 | (cp >> 18));
	o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
	o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
	o[3] = (char)(0x80 | (cp & 0x3F));
	return 4;
}

/* At the opening quote. Returns a malloc'ed string. */
static int parse_string(struct sj_cur *c, char **out)
{
	if (c->p >= c->end || *c->p != '"')
		return -EINVAL;
	c->p++;
	/* Unescaped text is never longer than the escaped text. */
	const char *q = c->p;
	while (q < c->end && *q != '"') {
		if (*q == '\\')
			q++;
		q++;
	}
	if (q >= c->end)
		return -EINVAL;
	char *s = malloc((size_t)(q - c->p) + 1);
	if (!s)
		return -ENOMEM;
	size_t n = 0;
	while (c->p < c->end && *c->p != '"') {
		unsigned char ch = (unsigned char)*c->p++;
		if (ch < 0x20)
			goto bad;
		if (ch != '\\') {
			s[n++] = (char)ch;
			continue;
		}
		if (c->p >= c->end)
			goto bad;
		char e = *c->p++;
		switch (e) {
		case '"': s[n++] = '"'; break;
		case '\\': s[n++] = '\\'; break;
		case '/': s[n++] = '/'; break;
		case 'b': s[n++] = '\b'; break;
		case 'f': s[n++] = '\f'; break;
		case 'n': s[n++] = '\n'; break;
		case 'r': s[n++] = '\r'; break;
		case 't': s[n++] = '\t'; break;
		case 'u': {
			unsigned cp;
			if (read_hex4(c, &cp))
				goto bad;
			if (cp >= 0xD800 && cp <= 0xDBFF) {
				unsigned lo;
				if (c->end - c->p < 6 || c->p[0] != '\\' || c->p[1] != 'u')
					goto bad;
				c->p += 2;
				if (read_hex4(c, &lo) || lo < 0xDC00 || lo > 0xDFFF)
					goto bad;
				cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
			} else if (cp >= 0xDC00 && cp <= 0xDFFF) {
				goto bad;
			}
			if (cp == 0)
				goto bad; /* no NUL inside C strings */
			n += put_utf8(s + n, cp);
			break;
		}
		default:
			goto bad;
		}
	}
	if (c->p >= c->end)
		goto bad;
	c->p++; /* closing quote */
	s[n] = '\0';
	*out = s;
	return 0;
bad:
	free(s);
	return -EINVAL;
}

static int parse_int(struct sj_cur *c, int64_t *out)
{
	const char *start = c->p;
	bool neg = false;
	if (c->p < c->end && *c->p == '-') {
		neg = true;
		c->p++;
	}
	if (c->p >= c->end || *c->p < '0' || *c->p > '9')
		return -EINVAL;
	if (*c->p == '0' && c->p + 1 < c->end && c->p[1] >= '0' && c->p[1] <= '9')
		return -EINVAL; /* leading zero */
	uint64_t v = 0;
	while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
		unsigned d = (unsigned)(*c->p - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -EINVAL;
		v = v * 10 + d;
		c->p++;
	}
	if (c->p < c->end && (*c->p == '.' || *c->p == 'e' || *c->p == 'E'))
		return -EINVAL; /* integers only */
	if ((!neg && v > INT64_MAX) || (neg && v > (uint64_t)INT64_MAX + 1))
		return -EINVAL;
	*out = neg ? (int64_t)(0 - v) : (int64_t)v;
	(void)start;
	return 0;
}

static bool lit(struct sj_cur *c, const char *word)
{
	size_t n = strlen(word);
	if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n) != 0)
		return false;
	c->p += n;
	return true;
}

static int parse_value(struct sj_cur *c, struct sj_val *v)
{
	if (c->p >= c->end)
		return -EINVAL;
	switch (*c->p) {
	case '"':
		v->type = SJ_STR;
		return parse_string(c, &v->s);
	case 't':
	case 'f':
		v->type = SJ_BOOL;
		v->i = *c->p == 't';
		return lit(c, v->i ? "true" : "false") ? 0 : -EINVAL;
	case 'n':
		v->type = SJ_NULL;
		return lit(c, "null") ? 0 : -EINVAL;
	case '[': {
		v->type = SJ_INTARR;
		c->p++;
		size_t cap = 0;
		skip_ws(c);
		if (c->p < c->end && *c->p == ']') {
			c->p++;
			return 0;
		}
		for (;;) {
			int64_t x;
			skip_ws(c);
			if (parse_int(c, &x))
				return -EINVAL;
			if (v->n == cap) {
				cap = cap ? cap * 2 : 8;
				int64_t *na = realloc(v->arr, cap * sizeof(*na));
				if (!na)
					return -ENOMEM;
				v->arr = na;
			}
			v->arr[v->n++] = x;
			skip_ws(c);
			if (c->p < c->end && *c->p == ',') {
				c->p++;
				continue;
			}
			if (c->p < c->end && *c->p == ']') {
				c->p++;
				return 0;
			}
			return -EINVAL;
		}
	}
	default:
		v->type = SJ_INT;
		return parse_int(c, &v->i);
	}
}

void sj_free(struct sj_obj *o)
{
	for (size_t k = 0; k < o->n; k++) {
		free(o->v[k].s);
		free(o->v[k].arr);
	}
	memset(o, 0, sizeof(*o));
}

int sj_parse(const char *text, size_t len, struct sj_obj *o)
{
	struct sj_cur c = { text, text + len };
	int r = -EINVAL;
	memset(o, 0, sizeof(*o));
	skip_ws(&c);
	if (c.p >= c.end || *c.p != '{')
		goto fail;
	c.p++;
	skip_ws(&c);
	if (c.p < c.end && *c.p == '}') {
		c.p++;
		goto done;
	}
	for (;;) {
		char *key = NULL;
		skip_ws(&c);
		r = parse_string(&c, &key);
		if (r)
			goto fail;
		r = -EINVAL;
		if (strlen(key) >= sizeof(o->v[0].key) || o->n >= SJ_MAX_FIELDS || sj_get(o, key)) {
			free(key);
			goto fail;
		}
		struct sj_val *v = &o->v[o->n++];
		strcpy(v->key, key);
		free(key);
		skip_ws(&c);
		if (c.p >= c.end || *c.p != ':')
			goto fail;
		c.p++;
		skip_ws(&c);
		r = parse_value(&c, v);
		if (r)
			goto fail;
		r = -EINVAL;
		skip_ws(&c);
		if (c.p < c.end && *c.p == ',') {
			c.p++;
			continue;
		}
		if (c.p < c.end && *c.p == '}') {
			c.p++;
			break;
		}
		goto fail;
	}
done:
	skip_ws(&c);
	if (c.p != c.end) {
		r = -EINVAL;
		goto fail;
	}
	return 0;
fail:
	sj_free(o);
	return r;
}

const struct sj_val *sj_get(const struct sj_obj *o, const char *key)
{
	for (size_t k = 0; k < o->n; k++)
		if (strcmp(o->v[k].key, key) == 0)
			return &o->v[k];
	return NULL;
}

/* The member `key` of o if it has the type t: 0, -ENOENT (no such member) or -EINVAL. */
static int sj_typed(const struct sj_obj *o, const char *key, enum sj_type t,
		    const struct sj_val **out)
{
	const struct sj_val *v = sj_get(o, key);
	if (!v)
		return -ENOENT;
	if (v->type != t)
		return -EINVAL;
	*out = v;
	return 0;
}

int sj_str(const struct sj_obj *o, const char *key, const char **out)
{
	const struct sj_val *v;
	int r = sj_typed(o, key, SJ_STR, &v);
	if (!r)
		*out = v->s;
	return r;
}

int sj_int(const struct sj_obj *o, const char *key, int64_t *out)
{
	const struct sj_val *v;
	int r = sj_typed(o, key, SJ_INT, &v);
	if (!r)
		*out = v->i;
	return r;
}

int sj_bool(const struct sj_obj *o, const char *key, bool *out)
{
	const struct sj_val *v;
	int r = sj_typed(o, key, SJ_BOOL, &v);
	if (!r)
		*out = v->i != 0;
	return r;
}

int sj_intarr(const struct sj_obj *o, const char *key, const int64_t **arr, size_t *n)
{
	const struct sj_val *v;
	int r = sj_typed(o, key, SJ_INTARR, &v);
	if (!r) {
		*arr = v->arr;
		*n = v->n;
	}
	return r;
}

void sys_record_begin(struct jsonw *w, const char *type)
{
	jw_obj_begin(w, NULL);
	jw_str(w, "type", type);
	jw_int(w, "schema", SYS_SCHEMA);
}
