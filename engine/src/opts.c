/* SPDX-License-Identifier: MIT */
#include "opts.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <string.h>

#include "jsonw.h"

static const struct {
	const char *name;
	uint64_t ns;
} units[] = {
	{ "h", 3600ull * NS_PER_SEC },
	{ "m", 60ull * NS_PER_SEC },
	{ "s", NS_PER_SEC },
	{ "ms", NS_PER_MS },
	{ "us", NS_PER_US },
	{ "ns", 1 },
};

int opt_parse_int(const char *s, int64_t *out)
{
	const char *p = s;
	bool neg = false;
	if (*p == '+' || *p == '-')
		neg = *p++ == '-';
	if (*p < '0' || *p > '9')
		return -EINVAL;
	uint64_t v = 0;
	for (; *p; p++) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		unsigned d = (unsigned)(*p - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -ERANGE;
		v = v * 10 + d;
	}
	if (neg) {
		if (v > (uint64_t)INT64_MAX + 1)
			return -ERANGE;
		*out = v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
	} else {
		if (v > (uint64_t)INT64_MAX)
			return -ERANGE;
		*out = (int64_t)v;
	}
	return 0;
}

int opt_parse_duration(const char *s, uint64_t *out)
{
	const char *p = s;
	uint64_t ip = 0, frac = 0, scale = 1;
	bool digits = false;
	while (*p >= '0' && *p <= '9') {
		unsigned d = (unsigned)(*p++ - '0');
		if (ip > (UINT64_MAX - d) / 10)
			return -ERANGE;
		ip = ip * 10 + d;
		digits = true;
	}
	if (*p == '.') {
		p++;
		while (*p >= '0' && *p <= '9') {
			if (scale >= NS_PER_SEC)
				return -EINVAL; /* more than 9 fractional digits */
			frac = frac * 10 + (unsigned)(*p++ - '0');
			scale *= 10;
			digits = true;
		}
	}
	if (!digits)
		return -EINVAL;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(p, units[i].name) != 0)
			continue;
		uint64_t u = units[i].ns;
		if (ip > UINT64_MAX / u)
			return -ERANGE;
		uint64_t v = ip * u;
		/* fractional part: frac/scale * u must be a whole number of ns */
		if (frac) {
			if (u % scale != 0 && (frac * (u % scale)) % scale != 0)
				return -EINVAL;
			uint64_t fv = (u / scale) * frac + (frac * (u % scale)) / scale;
			if (v > UINT64_MAX - fv)
				return -ERANGE;
			v += fv;
		}
		*out = v;
		return 0;
	}
	return -EINVAL;
}

void opt_format_duration(uint64_t ns, char *buf, size_t len)
{
	if (ns == 0) {
		snprintf(buf, len, "0ns");
		return;
	}
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (ns % units[i].ns == 0) {
			snprintf(buf, len, "%" PRIu64 "%s", ns / units[i].ns, units[i].name);
			return;
		}
	}
}

static const struct {
	char lower, upper;
	unsigned shift;
} size_units[] = { { 't', 'T', 40 }, { 'g', 'G', 30 }, { 'm', 'M', 20 }, { 'k', 'K', 10 } };

int opt_parse_size(const char *s, uint64_t *out)
{
	const char *p = s;
	uint64_t v = 0;
	if (*p < '0' || *p > '9')
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		unsigned d = (unsigned)(*p - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -ERANGE;
		v = v * 10 + d;
	}
	if (*p == '\0') {
		*out = v;
		return 0;
	}
	for (size_t i = 0; i < sizeof(size_units) / sizeof(size_units[0]); i++) {
		if ((*p != size_units[i].lower && *p != size_units[i].upper) || p[1] != '\0')
			continue;
		if (v > (UINT64_MAX >> size_units[i].shift))
			return -ERANGE;
		*out = v << size_units[i].shift;
		return 0;
	}
	return -EINVAL;
}

void opt_format_size(uint64_t bytes, char *buf, size_t len)
{
	static const char names[] = { 'T', 'G', 'M', 'k' };
	for (size_t i = 0; bytes && i < sizeof(size_units) / sizeof(size_units[0]); i++) {
		uint64_t u = 1ull << size_units[i].shift;
		if (bytes % u == 0) {
			snprintf(buf, len, "%" PRIu64 "%c", bytes / u, names[i]);
			return;
		}
	}
	snprintf(buf, len, "%" PRIu64, bytes);
}

static int parse_uint_prefix(const char **pp, unsigned *out)
{
	const char *p = *pp;
	unsigned long v = 0;
	if (*p < '0' || *p > '9')
		return -EINVAL;
	while (*p >= '0' && *p <= '9') {
		v = v * 10 + (unsigned long)(*p++ - '0');
		if (v >= CPU_SETSIZE)
			return -ERANGE;
	}
	*pp = p;
	*out = (unsigned)v;
	return 0;
}

int opt_parse_cpulist(const char *s, cpu_set_t *out)
{
	const char *p = s;
	CPU_ZERO(out);
	if (!*p)
		return -EINVAL;
	for (;;) {
		unsigned a, b;
		int r = parse_uint_prefix(&p, &a);
		if (r)
			return r;
		b = a;
		if (*p == '-') {
			p++;
			r = parse_uint_prefix(&p, &b);
			if (r)
				return r;
			if (b < a)
				return -EINVAL;
		}
		for (unsigned c = a; c <= b; c++)
			CPU_SET(c, out);
		if (*p == '\0')
			return 0;
		if (*p != ',')
			return -EINVAL;
		p++;
	}
}

/* Append the escaped form of one character (l bytes at p, l = 0: an invalid byte). */
static size_t shown_char(const unsigned char *p, size_t l, char *o)
{
	static const char hex[] = "0123456789abcdef";
	if (l > 1) {
		memcpy(o, p, l);
		return l;
	}
	unsigned c = p[0];
	const char *esc = NULL;
	switch (c) {
	case '\n': esc = "\\n"; break;
	case '\t': esc = "\\t"; break;
	case '\r': esc = "\\r"; break;
	case '\\': esc = "\\\\"; break;
	case '\'': esc = "\\'"; break;
	}
	if (esc) {
		memcpy(o, esc, 2);
		return 2;
	}
	if (l == 0 || c < 0x20 || c == 0x7f) {
		o[0] = '\\';
		o[1] = 'x';
		o[2] = hex[c >> 4];
		o[3] = hex[c & 15];
		return 4;
	}
	o[0] = (char)c;
	return 1;
}

static const char *shown_n(const char *s, char *buf, size_t len, size_t limit);

const char *opt_shown(const char *s, char *buf, size_t len)
{
	return shown_n(s, buf, len, OPT_SHOWN_CHARS);
}

const char *opt_shown_path(const char *s, char *buf, size_t len)
{
	return shown_n(s, buf, len, OPT_SHOWN_PATH_CHARS);
}

static const char *shown_n(const char *s, char *buf, size_t len, size_t limit)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s), chars = 0, off = 0;
	char o[8];
	if (len < 2) {
		if (len)
			buf[0] = '\0';
		return buf;
	}
	buf[off++] = '\'';
	for (size_t i = 0; i < n; chars++) {
		size_t l = p[i] < 0x80 ? 1 : jw_utf8_len(p + i, n - i);
		if (chars < limit) {
			size_t k = shown_char(p + i, l, o);
			if (off + k + 1 < len) {
				memcpy(buf + off, o, k);
				off += k;
			}
		}
		i += l ? l : 1;
	}
	if (off + 1 < len)
		buf[off++] = '\'';
	buf[off] = '\0';
	if (chars > limit)
		snprintf(buf + off, len - off, "... (%zu characters)", chars);
	return buf;
}

/* A number as an out-of-range message shows it: bare when short and plain, else opt_shown. */
static const char *shown_number(const char *s, char *buf, size_t len)
{
	size_t n = strlen(s);
	bool plain = n <= OPT_SHOWN_CHARS && n < len;
	for (size_t i = 0; plain && i < n; i++)
		plain = s[i] > 0x20 && s[i] < 0x7f && s[i] != '\'';
	if (!plain)
		return opt_shown(s, buf, len);
	memcpy(buf, s, n + 1);
	return buf;
}

void opt_format_cpulist(const cpu_set_t *set, char *buf, size_t len)
{
	size_t off = 0;
	buf[0] = '\0';
	for (int c = 0; c < CPU_SETSIZE; c++) {
		if (!CPU_ISSET(c, set))
			continue;
		int e = c;
		while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, set))
			e++;
		int n = e == c ? snprintf(buf + off, len - off, "%s%d", off ? "," : "", c)
			       : snprintf(buf + off, len - off, "%s%d-%d", off ? "," : "", c, e);
		if (n < 0 || (size_t)n >= len - off)
			return;
		off += (size_t)n;
		c = e;
	}
}

int opts_find(const struct opt_def *defs, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(defs[i].name, name) == 0)
			return (int)i;
	return -1;
}

const struct opt_def *opts_target(const struct opt_def *defs, size_t n, size_t i)
{
	if (i >= n)
		return NULL;
	if (defs[i].type != OPT_ALIAS)
		return &defs[i];
	int t = defs[i].metavar ? opts_find(defs, n, defs[i].metavar) : -1;
	return t < 0 || defs[t].type == OPT_ALIAS ? NULL : &defs[t];
}

static int first_cpu(const cpu_set_t *set)
{
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, set))
			return c;
	return -1;
}

int opts_one_cpu(const struct opt_value *v)
{
	return v->set ? first_cpu(&v->cpus) : -1;
}

static const char *metavar(const struct opt_def *d)
{
	if (d->metavar)
		return d->metavar;
	switch (d->type) {
	case OPT_INT: return "N";
	case OPT_DURATION: return "DUR";
	case OPT_CPULIST: return "LIST";
	case OPT_ENUM: return "CHOICE";
	case OPT_BOOL: return "";
	case OPT_STRING: return "STR";
	case OPT_SIZE: return "SIZE";
	case OPT_ALIAS: return "";
	}
	return "";
}

/* "1us..10s", "4K..1G": the range with its unit, written by fmt */
static void unit_range(const struct opt_def *d, void (*fmt)(uint64_t, char *, size_t), char *buf,
		       size_t len)
{
	char a[32], b[32];
	fmt((uint64_t)d->min, a, sizeof(a));
	fmt((uint64_t)d->max, b, sizeof(b));
	snprintf(buf, len, "%s..%s", a, b);
}

/* "1..99", "1us..10s", "fifo|rr|other" */
static void allowed(const struct opt_def *d, char *buf, size_t len)
{
	size_t off = 0;
	switch (d->type) {
	case OPT_INT:
		snprintf(buf, len, "%" PRId64 "..%" PRId64, d->min, d->max);
		return;
	case OPT_DURATION:
		unit_range(d, opt_format_duration, buf, len);
		return;
	case OPT_ENUM:
		buf[0] = '\0';
		for (size_t i = 0; d->choices[i]; i++) {
			int n = snprintf(buf + off, len - off, "%s%s", i ? "|" : "", d->choices[i]);
			if (n < 0 || (size_t)n >= len - off)
				return;
			off += (size_t)n;
		}
		return;
	case OPT_SIZE:
		unit_range(d, opt_format_size, buf, len);
		return;
	case OPT_CPULIST:
		if (d->max == 1)
			snprintf(buf, len, "one online CPU");
		else if (d->max > 1)
			snprintf(buf, len, "at most %" PRId64 " online CPUs", d->max);
		else
			snprintf(buf, len, "online CPUs");
		return;
	case OPT_BOOL:
	case OPT_STRING:
	case OPT_ALIAS:
		buf[0] = '\0';
		return;
	}
}

static void set_err(char *err, size_t errlen, const char *fmt, ...) RL_PRINTF(3, 4);
static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/*
 * An OPT_DURATION or OPT_SIZE value: `parse` reads it (-EINVAL: not of that kind,
 * described by `what`; -ERANGE: too large), then it must lie in [min, max].
 */
static int parse_unsigned(const struct opt_def *d, const char *s,
			  int (*parse)(const char *, uint64_t *), const char *what,
			  const char *range, struct opt_value *v, char *err, size_t errlen)
{
	uint64_t x;
	char shown[OPT_SHOWN_LEN];
	int r = parse(s, &x);
	if (r == -EINVAL) {
		set_err(err, errlen, "--%s: %s is not %s; allowed range %s", d->name,
			opt_shown(s, shown, sizeof(shown)), what, range);
		return -EINVAL;
	}
	if (r || x < (uint64_t)d->min || x > (uint64_t)d->max) {
		set_err(err, errlen, "--%s: %s is out of range; allowed range %s", d->name,
			shown_number(s, shown, sizeof(shown)), range);
		return -EINVAL;
	}
	v->i = (int64_t)x;
	return 0;
}

static int parse_value(const struct opt_def *d, const char *s, const cpu_set_t *online,
		       struct opt_value *v, char *err, size_t errlen)
{
	char range[256], shown[OPT_SHOWN_LEN];
	allowed(d, range, sizeof(range));
	opt_shown(s, shown, sizeof(shown));
	switch (d->type) {
	case OPT_INT: {
		int64_t x;
		int r = opt_parse_int(s, &x);
		if (r == -EINVAL) {
			set_err(err, errlen, "--%s: %s is not an integer; allowed range %s",
				d->name, shown, range);
			return -EINVAL;
		}
		if (r || x < d->min || x > d->max) {
			set_err(err, errlen, "--%s: %s is out of range; allowed range %s",
				d->name, shown_number(s, shown, sizeof(shown)), range);
			return -EINVAL;
		}
		v->i = x;
		return 0;
	}
	case OPT_DURATION:
		return parse_unsigned(d, s, opt_parse_duration,
				      "a duration (a number with a unit ns, us, ms, s, m or h, e.g. 500us)",
				      range, v, err, errlen);
	case OPT_SIZE:
		return parse_unsigned(d, s, opt_parse_size,
				      "a size (bytes, or a number with k, M, G or T, e.g. 256M)", range,
				      v, err, errlen);
	case OPT_CPULIST: {
		char on[256];
		opt_format_cpulist(online, on, sizeof(on));
		if (opt_parse_cpulist(s, &v->cpus)) {
			set_err(err, errlen,
				"--%s: %s is not a CPU list (e.g. 0-3,6); online CPUs are %s",
				d->name, shown, on);
			return -EINVAL;
		}
		for (int c = 0; c < CPU_SETSIZE; c++) {
			if (CPU_ISSET(c, &v->cpus) && !CPU_ISSET(c, online)) {
				set_err(err, errlen, "--%s: CPU %d is not online; online CPUs are %s",
					d->name, c, on);
				return -EINVAL;
			}
		}
		if (d->max > 0 && CPU_COUNT(&v->cpus) > d->max) {
			if (d->max == 1)
				set_err(err, errlen,
					"--%s: %s names %d CPUs; this probe runs on one CPU (e.g. --%s %d)",
					d->name, shown, CPU_COUNT(&v->cpus), d->name, first_cpu(&v->cpus));
			else
				set_err(err, errlen, "--%s: %s names %d CPUs; at most %" PRId64,
					d->name, shown, CPU_COUNT(&v->cpus), d->max);
			return -EINVAL;
		}
		return 0;
	}
	case OPT_ENUM:
		for (size_t i = 0; d->choices[i]; i++) {
			if (strcmp(s, d->choices[i]) == 0) {
				v->i = (int64_t)i;
				return 0;
			}
		}
		set_err(err, errlen, "--%s: %s is not one of %s", d->name, shown, range);
		return -EINVAL;
	case OPT_STRING:
		if (!*s) {
			set_err(err, errlen, "--%s: the value must not be empty", d->name);
			return -EINVAL;
		}
		if (strlen(s) > OPT_STRING_MAX) {
			set_err(err, errlen, "--%s: %s is too long (at most %d bytes)", d->name, shown,
				OPT_STRING_MAX);
			return -EINVAL;
		}
		v->s = s;
		return 0;
	case OPT_BOOL:
	case OPT_ALIAS:
		break;
	}
	set_err(err, errlen, "--%s: internal error: bad option type", d->name);
	return -EINVAL;
}

/* Index of the option `name` stands for (through an alias); -1 unknown, -2 bad alias. */
static int resolve(const struct opt_def *defs, size_t n, const char *name)
{
	int idx = opts_find(defs, n, name);
	if (idx < 0 || defs[idx].type != OPT_ALIAS)
		return idx;
	const struct opt_def *t = opts_target(defs, n, (size_t)idx);
	return t ? (int)(t - defs) : -2;
}

int opts_parse(const struct opt_def *defs, size_t n, int argc, char *const *argv,
	       const cpu_set_t *online, struct opt_value *vals, char *err, size_t errlen)
{
	memset(vals, 0, n * sizeof(*vals));
	for (size_t i = 0; i < n; i++) {
		if (!defs[i].def)
			continue;
		if (defs[i].type == OPT_BOOL) {
			vals[i].i = strcmp(defs[i].def, "true") == 0;
		} else if (parse_value(&defs[i], defs[i].def, online, &vals[i], err, errlen)) {
			return -EINVAL; /* a bad default is a bug in the table */
		}
		vals[i].set = true;
	}
	for (int a = 0; a < argc; a++) {
		const char *arg = argv[a];
		if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0)
			return OPTS_HELP;
		if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0') {
			char shown[OPT_SHOWN_LEN];
			set_err(err, errlen, "unexpected argument %s (options start with --; see --help)",
				opt_shown(arg, shown, sizeof(shown)));
			return -EINVAL;
		}
		const char *name = arg + 2;
		const char *eq = strchr(name, '=');
		size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
		char buf[128];
		if (nlen >= sizeof(buf)) {
			char shown[OPT_SHOWN_LEN], dashed[sizeof(buf) + 2];
			snprintf(dashed, sizeof(dashed), "--%s", buf);
			set_err(err, errlen, "unknown option %s (see --help)",
				opt_shown(dashed, shown, sizeof(shown)));
			return -EINVAL;
		}
		memcpy(buf, name, nlen);
		buf[nlen] = '\0';
		bool negated = false;
		int idx = resolve(defs, n, buf);
		if (idx < 0 && strncmp(buf, "no-", 3) == 0) {
			idx = resolve(defs, n, buf + 3);
			negated = true;
			if (idx >= 0 && defs[idx].type != OPT_BOOL)
				idx = -1;
		}
		if (idx == -2) {
			set_err(err, errlen, "--%s: internal error: alias of no option", buf);
			return -EINVAL;
		}
		if (idx < 0) {
			char shown[OPT_SHOWN_LEN], dashed[sizeof(buf) + 2];
			snprintf(dashed, sizeof(dashed), "--%s", buf);
			set_err(err, errlen, "unknown option %s (see --help)",
				opt_shown(dashed, shown, sizeof(shown)));
			return -EINVAL;
		}
		/* messages name the option as the user spelled it (an old spelling too) */
		struct opt_def spelled = defs[idx];
		spelled.name = buf + (negated ? 3 : 0);
		const struct opt_def *d = &spelled;
		struct opt_value *v = &vals[idx];
		if (v->given) {
			if (strcmp(d->name, defs[idx].name) != 0)
				set_err(err, errlen, "--%s: given more than once (it is --%s)", d->name,
					defs[idx].name);
			else
				set_err(err, errlen, "--%s: given more than once", d->name);
			return -EINVAL;
		}
		if (d->type == OPT_BOOL) {
			if (eq) {
				set_err(err, errlen, "--%s takes no value (use --%s or --no-%s)",
					buf, d->name, d->name);
				return -EINVAL;
			}
			v->i = !negated;
		} else {
			const char *val;
			if (eq) {
				val = eq + 1;
			} else if (a + 1 < argc) {
				val = argv[++a];
			} else {
				char range[256];
				allowed(d, range, sizeof(range));
				set_err(err, errlen, "--%s: missing value %s%s%s", d->name, metavar(d),
					range[0] ? "; allowed " : "", range);
				return -EINVAL;
			}
			if (parse_value(d, val, online, v, err, errlen))
				return -EINVAL;
		}
		v->set = true;
		v->given = true;
	}
	return 0;
}

void opts_help(FILE *f, const struct opt_def *defs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct opt_def *d = &defs[i];
		char left[96], range[256];
		if (d->type == OPT_ALIAS)
			continue; /* shown beside the option it stands for */
		if (d->type == OPT_BOOL)
			snprintf(left, sizeof(left), "--%s, --no-%s", d->name, d->name);
		else
			snprintf(left, sizeof(left), "--%s %s", d->name, metavar(d));
		fprintf(f, "  %-28s %s\n", left, d->help);
		allowed(d, range, sizeof(range));
		const char *type = "";
		switch (d->type) {
		case OPT_INT: type = "integer"; break;
		case OPT_DURATION: type = "duration (ns|us|ms|s|m|h)"; break;
		case OPT_CPULIST: type = d->max == 1 ? "CPU number, e.g. 3," : "CPU list, e.g. 0-3,6"; break;
		case OPT_ENUM: type = "one of"; break;
		case OPT_BOOL: type = "flag"; break;
		case OPT_STRING: type = "string"; break;
		case OPT_SIZE: type = "size in bytes (k|M|G|T: x1024)"; break;
		case OPT_ALIAS: break;
		}
		fprintf(f, "  %-28s [%s%s%s", "", type, range[0] ? " " : "", range);
		if (d->def)
			fprintf(f, "; default %s", d->def);
		else if (d->def_help)
			fprintf(f, "; default: %s", d->def_help);
		for (size_t k = 0; k < n; k++)
			if (defs[k].type == OPT_ALIAS && opts_target(defs, n, k) == d)
				fprintf(f, "; also --%s", defs[k].name);
		fprintf(f, "]\n");
	}
}
