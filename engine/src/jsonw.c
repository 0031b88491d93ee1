/* SPDX-License-Identifier: MIT */
#include "jsonw.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <unistd.h>


void jw_init(struct jsonw *w)
{
	memset(w, 0, sizeof(*w));
	w->first[0] = true;
}

void jw_free(struct jsonw *w)
{
	free(w->buf);
	jw_init(w);
}

void jw_reset(struct jsonw *w)
{
	w->len = 0;
	if (w->buf)
		w->buf[0] = '\0';
	w->err = 0;
	w->depth = 0;
	w->first[0] = true;
}

int jw_error(const struct jsonw *w)
{
	return w->err;
}

const char *jw_text(const struct jsonw *w)
{
	return w->buf ? w->buf : "";
}

static int reserve(struct jsonw *w, size_t extra)
{
	if (w->err)
		return w->err;
	if (w->len + extra + 1 <= w->cap)
		return 0;
	size_t cap = w->cap ? w->cap : 1024;
	while (cap < w->len + extra + 1)
		cap *= 2;
	char *nb = realloc(w->buf, cap);
	if (!nb) {
		w->err = -ENOMEM;
		return w->err;
	}
	w->buf = nb;
	w->cap = cap;
	return 0;
}

static void put(struct jsonw *w, const char *s, size_t n)
{
	if (reserve(w, n))
		return;
	memcpy(w->buf + w->len, s, n);
	w->len += n;
	w->buf[w->len] = '\0';
}

static void putc_(struct jsonw *w, char c)
{
	put(w, &c, 1);
}

size_t jw_utf8_len(const void *buf, size_t n)
{
	const unsigned char *s = buf;
	unsigned c = s[0];
	size_t len;
	uint32_t cp;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2;
		cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		cp = c & 0x07;
	} else {
		return 0; /* continuation byte, C0/C1 lead, or beyond U+10FFFF */
	}
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0; /* overlong or out of range */
	if (cp >= 0xd800 && cp <= 0xdfff)
		return 0; /* surrogates are not valid UTF-8 */
	return len;
}

static void put_escaped(struct jsonw *w, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	putc_(w, '"');
	size_t i = 0;
	while (i < n) {
		unsigned char c = p[i];
		char tmp[8];
		if (c == '"' || c == '\\') {
			tmp[0] = '\\';
			tmp[1] = (char)c;
			put(w, tmp, 2);
			i++;
		} else if (c < 0x20 || c == 0x7f) {
			switch (c) {
			case '\n': put(w, "\\n", 2); break;
			case '\t': put(w, "\\t", 2); break;
			case '\r': put(w, "\\r", 2); break;
			case '\b': put(w, "\\b", 2); break;
			case '\f': put(w, "\\f", 2); break;
			default:
				snprintf(tmp, sizeof(tmp), "\\u%04x", c);
				put(w, tmp, 6);
			}
			i++;
		} else if (c < 0x80) {
			/* copy a run of plain ASCII at once */
			size_t j = i;
			while (j < n && p[j] >= 0x20 && p[j] < 0x7f && p[j] != '"' && p[j] != '\\')
				j++;
			put(w, s + i, j - i);
			i = j;
		} else {
			size_t l = jw_utf8_len(p + i, n - i); /* c >= 0x80: 2 to 4, or 0 */
			if (l) {
				put(w, s + i, l);
				i += l;
			} else {
				put(w, "\\ufffd", 6); /* invalid byte: replacement character */
				i++;
			}
		}
	}
	putc_(w, '"');
}

/* Comma and key before a value. */
static void prefix(struct jsonw *w, const char *key)
{
	if (w->err)
		return;
	if (!w->first[w->depth])
		putc_(w, ',');
	w->first[w->depth] = false;
	if (key) {
		put_escaped(w, key, strlen(key));
		putc_(w, ':');
	}
}

static void open_(struct jsonw *w, const char *key, char c)
{
	prefix(w, key);
	if (w->err)
		return;
	if (w->depth + 1 >= JW_MAX_DEPTH) {
		w->err = -E2BIG;
		return;
	}
	putc_(w, c);
	w->depth++;
	w->first[w->depth] = true;
}

static void close_(struct jsonw *w, char c)
{
	if (w->err)
		return;
	if (w->depth == 0) {
		w->err = -EINVAL;
		return;
	}
	putc_(w, c);
	w->depth--;
}

void jw_obj_begin(struct jsonw *w, const char *key) { open_(w, key, '{'); }

void jw_raw(struct jsonw *w, const char *key, const char *json)
{
	prefix(w, key);
	put(w, json, strlen(json));
}

void jw_obj_end(struct jsonw *w) { close_(w, '}'); }
void jw_arr_begin(struct jsonw *w, const char *key) { open_(w, key, '['); }
void jw_arr_end(struct jsonw *w) { close_(w, ']'); }

void jw_strn(struct jsonw *w, const char *key, const char *s, size_t len)
{
	prefix(w, key);
	put_escaped(w, s, len);
}

void jw_str(struct jsonw *w, const char *key, const char *s)
{
	jw_strn(w, key, s, strlen(s));
}

void jw_str_or_null(struct jsonw *w, const char *key, const char *s)
{
	if (s)
		jw_str(w, key, s);
	else
		jw_null(w, key);
}

void jw_int_or_null(struct jsonw *w, const char *key, int64_t v)
{
	if (v >= 0)
		jw_int(w, key, v);
	else
		jw_null(w, key);
}

void jw_uint_or_null(struct jsonw *w, const char *key, uint64_t v)
{
	if (v)
		jw_uint(w, key, v);
	else
		jw_null(w, key);
}

void jw_strf(struct jsonw *w, const char *key, const char *fmt, ...)
{
	char tmp[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n >= sizeof(tmp))
		n = (int)sizeof(tmp) - 1;
	jw_strn(w, key, tmp, (size_t)n);
}

void jw_int(struct jsonw *w, const char *key, int64_t v)
{
	char tmp[32];
	prefix(w, key);
	int n = snprintf(tmp, sizeof(tmp), "%" PRId64, v);
	put(w, tmp, (size_t)n);
}

void jw_uint(struct jsonw *w, const char *key, uint64_t v)
{
	char tmp[32];
	prefix(w, key);
	int n = snprintf(tmp, sizeof(tmp), "%" PRIu64, v);
	put(w, tmp, (size_t)n);
}

void jw_bool(struct jsonw *w, const char *key, bool v)
{
	prefix(w, key);
	put(w, v ? "true" : "false", v ? 4 : 5);
}

void jw_null(struct jsonw *w, const char *key)
{
	prefix(w, key);
	put(w, "null", 4);
}

void jw_cpuset(struct jsonw *w, const char *key, const cpu_set_t *set)
{
	jw_arr_begin(w, key);
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, set))
			jw_int(w, NULL, c);
	jw_arr_end(w);
}

int rl_write_raw(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* who writes stdout instead of rl_write_raw (output.c's --tee mirror), or NULL */
static _Atomic(rl_stdout_writer) stdout_writer;

void rl_set_stdout_writer(rl_stdout_writer writer)
{
	atomic_store(&stdout_writer, writer);
}

int rl_write_all(int fd, const void *buf, size_t len)
{
	rl_stdout_writer writer = fd == STDOUT_FILENO ? atomic_load(&stdout_writer) : NULL;
	return writer ? writer(buf, len) : rl_write_raw(fd, buf, len);
}

int jw_emit(struct jsonw *w, int fd)
{
	if (!w->err && w->depth != 0)
		w->err = -EINVAL;
	putc_(w, '\n');
	int ret = w->err;
	if (!ret)
		ret = rl_write_all(fd, w->buf, w->len);
	jw_reset(w);
	return ret;
}
