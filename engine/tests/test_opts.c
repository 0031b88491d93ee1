/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opts.h"
#include "tap.h"

static const char *const colours[] = { "red", "green", NULL };

static const struct opt_def defs[] = {
	{ "count", OPT_INT, NULL, "a count", 1, 99, NULL, "5", NULL },
	{ "interval", OPT_DURATION, NULL, "a period", 1000, 10000000000, NULL, "1ms", NULL },
	{ "cpus", OPT_CPULIST, NULL, "cpus", 0, 0, NULL, NULL, "all" },
	{ "colour", OPT_ENUM, NULL, "colour", 0, 0, colours, "red", NULL },
	{ "mlock", OPT_BOOL, NULL, "lock", 0, 0, NULL, "true", NULL },
	{ "out", OPT_STRING, "FILE", "output", 0, 0, NULL, NULL, "stdout" },
	{ "bytes", OPT_SIZE, NULL, "a size", 4096, 1LL << 30, NULL, "1M", NULL },
};
#define N (sizeof(defs) / sizeof(defs[0]))

static cpu_set_t online;
static struct opt_value vals[N];
static char err[512];

static int parse(int argc, char **argv)
{
	err[0] = '\0';
	return opts_parse(defs, N, argc, argv, &online, vals, err, sizeof(err));
}

static int bad(const char *a, const char *b, const char *needle)
{
	char *argv[2] = { (char *)a, (char *)b };
	return tap_refused(parse(b ? 2 : 1, argv), err, needle);
}

/* old spellings: OPT_ALIAS entries, and a CPU list limited to one CPU */
static const struct opt_def adefs[] = {
	{ "stop-threshold", OPT_DURATION, NULL, "stop", 1, 1000000000, NULL, NULL, "none" },
	{ "cpus", OPT_CPULIST, "CPU", "one cpu", 0, 1, NULL, NULL, "last" },
	{ "mlock", OPT_BOOL, NULL, "lock", 0, 0, NULL, "true", NULL },
	OPT_DEF_ALIAS("threshold", "stop-threshold"),
	OPT_DEF_ALIAS("cpu", "cpus"),
	OPT_DEF_ALIAS("lock", "mlock"),
	OPT_DEF_ALIAS("dangling", "nope"),
};
#define AN (sizeof(adefs) / sizeof(adefs[0]))
static struct opt_value avals[AN];

static int aparse(int argc, char **argv)
{
	err[0] = '\0';
	return opts_parse(adefs, AN, argc, argv, &online, avals, err, sizeof(err));
}

static int abad(int argc, char **argv, const char *needle)
{
	return tap_refused(aparse(argc, argv), err, needle);
}

static void test_aliases(void)
{
	char *old[] = { "--threshold", "5us", "--cpu", "3", "--no-lock" };
	CHECK(aparse(5, old) == 0);
	CHECK(avals[0].given && avals[0].i == 5000);
	CHECK(avals[1].given && opts_one_cpu(&avals[1]) == 3 && CPU_COUNT(&avals[1].cpus) == 1);
	CHECK(avals[2].given && avals[2].i == 0);
	CHECK(!avals[3].set && !avals[4].set && !avals[5].set); /* alias slots stay unused */
	char *cur[] = { "--stop-threshold=5us", "--cpus", "3", "--no-mlock" };
	CHECK(aparse(4, cur) == 0);
	CHECK(avals[0].i == 5000 && opts_one_cpu(&avals[1]) == 3 && avals[2].i == 0);
	char *both[] = { "--threshold", "5us", "--stop-threshold", "6us" };
	CHECK(abad(4, both, "--stop-threshold: given more than once"));
	char *both2[] = { "--stop-threshold", "5us", "--threshold", "6us" };
	CHECK(abad(4, both2, "--threshold: given more than once (it is --stop-threshold)"));
	char *two[] = { "--cpu", "1,3" };
	CHECK(abad(2, two, "--cpu: '1,3' names 2 CPUs; this probe runs on one CPU (e.g. --cpu 1)"));
	char *off[] = { "--cpu", "5" };
	CHECK(abad(2, off, "--cpu: CPU 5 is not online"));
	char *range[] = { "--threshold", "2s" };
	CHECK(abad(2, range, "--threshold: 2s is out of range"));
	char *dang[] = { "--dangling", "1" };
	CHECK(abad(2, dang, "internal error"));
	CHECK(opts_target(adefs, AN, 3) == &adefs[0]);
	CHECK(opts_target(adefs, AN, 0) == &adefs[0]);
	CHECK(opts_target(adefs, AN, 6) == NULL);
	CHECK(opts_one_cpu(&(struct opt_value){ 0 }) == -1);

	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	opts_help(f, adefs, AN);
	fclose(f);
	CHECK(strstr(buf, "--stop-threshold DUR") && strstr(buf, "also --threshold"));
	CHECK(strstr(buf, "one online CPU") && strstr(buf, "also --cpu"));
	CHECK(!strstr(buf, "  --threshold ")); /* an alias has no line of its own */
	free(buf);
}

int main(void)
{
	uint64_t d;
	int64_t i;
	CPU_ZERO(&online);
	for (int c = 0; c < 4; c++)
		CPU_SET(c, &online);
	CPU_SET(6, &online);

	/* durations */
	CHECK(opt_parse_duration("1ms", &d) == 0 && d == 1000000);
	CHECK(opt_parse_duration("250us", &d) == 0 && d == 250000);
	CHECK(opt_parse_duration("7ns", &d) == 0 && d == 7);
	CHECK(opt_parse_duration("2s", &d) == 0 && d == 2000000000);
	CHECK(opt_parse_duration("3m", &d) == 0 && d == 180000000000ull);
	CHECK(opt_parse_duration("1h", &d) == 0 && d == 3600000000000ull);
	CHECK(opt_parse_duration("1.5ms", &d) == 0 && d == 1500000);
	CHECK(opt_parse_duration("0.25s", &d) == 0 && d == 250000000);
	CHECK(opt_parse_duration(".5us", &d) == 0 && d == 500);
	CHECK(opt_parse_duration("0ns", &d) == 0 && d == 0);
	CHECK(opt_parse_duration("1.5ns", &d) == -EINVAL); /* not whole ns */
	CHECK(opt_parse_duration("10", &d) == -EINVAL);	/* unit required */
	CHECK(opt_parse_duration("ms", &d) == -EINVAL);
	CHECK(opt_parse_duration("-1ms", &d) == -EINVAL);
	CHECK(opt_parse_duration("1 ms", &d) == -EINVAL);
	CHECK(opt_parse_duration("1msx", &d) == -EINVAL);
	CHECK(opt_parse_duration("", &d) == -EINVAL);
	CHECK(opt_parse_duration("99999999999h", &d) == -ERANGE);
	CHECK(opt_parse_duration("99999999999999999999999ns", &d) == -ERANGE);
	char buf[64];
	opt_format_duration(1000000, buf, sizeof(buf));
	CHECK(strcmp(buf, "1ms") == 0);
	opt_format_duration(1500000, buf, sizeof(buf));
	CHECK(strcmp(buf, "1500us") == 0);
	opt_format_duration(3600000000000ull, buf, sizeof(buf));
	CHECK(strcmp(buf, "1h") == 0);

	/* integers */
	CHECK(opt_parse_int("42", &i) == 0 && i == 42);
	CHECK(opt_parse_int("-7", &i) == 0 && i == -7);
	CHECK(opt_parse_int("9223372036854775807", &i) == 0 && i == INT64_MAX);
	CHECK(opt_parse_int("-9223372036854775808", &i) == 0 && i == INT64_MIN);
	CHECK(opt_parse_int("9223372036854775808", &i) == -ERANGE);
	CHECK(opt_parse_int("4x", &i) == -EINVAL);
	CHECK(opt_parse_int("", &i) == -EINVAL);
	CHECK(opt_parse_int("-", &i) == -EINVAL);

	/* cpu lists */
	cpu_set_t s;
	CHECK(opt_parse_cpulist("0-3,6", &s) == 0 && CPU_COUNT(&s) == 5 && CPU_ISSET(6, &s));
	CHECK(opt_parse_cpulist("2", &s) == 0 && CPU_COUNT(&s) == 1 && CPU_ISSET(2, &s));
	CHECK(opt_parse_cpulist("1,1,1-2", &s) == 0 && CPU_COUNT(&s) == 2);
	CHECK(opt_parse_cpulist("3-1", &s) == -EINVAL);
	CHECK(opt_parse_cpulist("1,", &s) == -EINVAL);
	CHECK(opt_parse_cpulist(",1", &s) == -EINVAL);
	CHECK(opt_parse_cpulist("a", &s) == -EINVAL);
	CHECK(opt_parse_cpulist("", &s) == -EINVAL);
	CHECK(opt_parse_cpulist("1-", &s) == -EINVAL);
	CHECK(opt_parse_cpulist("99999", &s) == -ERANGE);
	CHECK(opt_parse_cpulist("0-3,6,8-9", &s) == 0);
	opt_format_cpulist(&s, buf, sizeof(buf));
	CHECK(strcmp(buf, "0-3,6,8-9") == 0);

	/* sizes: bytes, binary suffixes */
	uint64_t z;
	CHECK(opt_parse_size("4096", &z) == 0 && z == 4096);
	CHECK(opt_parse_size("4k", &z) == 0 && z == 4096);
	CHECK(opt_parse_size("4K", &z) == 0 && z == 4096);
	CHECK(opt_parse_size("256M", &z) == 0 && z == 256ull << 20);
	CHECK(opt_parse_size("256m", &z) == 0 && z == 256ull << 20);
	CHECK(opt_parse_size("2G", &z) == 0 && z == 2ull << 30);
	CHECK(opt_parse_size("1T", &z) == 0 && z == 1ull << 40);
	CHECK(opt_parse_size("0", &z) == 0 && z == 0);
	CHECK(opt_parse_size("", &z) == -EINVAL);
	CHECK(opt_parse_size("M", &z) == -EINVAL);
	CHECK(opt_parse_size("1.5G", &z) == -EINVAL);
	CHECK(opt_parse_size("-1M", &z) == -EINVAL);
	CHECK(opt_parse_size("1MB", &z) == -EINVAL);
	CHECK(opt_parse_size("1 M", &z) == -EINVAL);
	CHECK(opt_parse_size("1x", &z) == -EINVAL);
	CHECK(opt_parse_size("99999999999T", &z) == -ERANGE);
	CHECK(opt_parse_size("99999999999999999999", &z) == -ERANGE);
	opt_format_size(256ull << 20, buf, sizeof(buf));
	CHECK(strcmp(buf, "256M") == 0);
	opt_format_size(4096, buf, sizeof(buf));
	CHECK(strcmp(buf, "4k") == 0);
	opt_format_size(1ull << 40, buf, sizeof(buf));
	CHECK(strcmp(buf, "1T") == 0);
	opt_format_size(1000, buf, sizeof(buf));
	CHECK(strcmp(buf, "1000") == 0);
	opt_format_size(0, buf, sizeof(buf));
	CHECK(strcmp(buf, "0") == 0);

	/* full parser: defaults */
	CHECK(parse(0, NULL) == 0);
	CHECK(vals[0].set && !vals[0].given && vals[0].i == 5);
	CHECK(vals[1].i == 1000000);
	CHECK(!vals[2].set);
	CHECK(vals[3].i == 0);
	CHECK(vals[4].i == 1);
	CHECK(!vals[5].set);
	CHECK(vals[6].set && vals[6].i == 1 << 20);

	char *ok[] = { "--count", "7", "--interval=250us", "--cpus", "1-2", "--colour", "green",
		       "--no-mlock", "--out", "x.json" };
	CHECK(parse(10, ok) == 0);
	CHECK(vals[0].given && vals[0].i == 7);
	CHECK(vals[1].i == 250000);
	CHECK(CPU_COUNT(&vals[2].cpus) == 2 && CPU_ISSET(1, &vals[2].cpus));
	CHECK(vals[3].i == 1);
	CHECK(vals[4].i == 0 && vals[4].given);
	CHECK(strcmp(vals[5].s, "x.json") == 0);
	char *m[] = { "--mlock" };
	CHECK(parse(1, m) == 0 && vals[4].i == 1);

	char *h[] = { "--count", "3", "--help" };
	CHECK(parse(3, h) == OPTS_HELP);

	/* bad input: message names the option and its range */
	CHECK(bad("--count", "0", "--count: 0 is out of range; allowed range 1..99"));
	CHECK(bad("--count", "100", "allowed range 1..99"));
	CHECK(bad("--count", "x", "--count: 'x' is not an integer"));
	CHECK(bad("--count", NULL, "--count: missing value"));
	CHECK(bad("--interval", "5x", "--interval: '5x' is not a duration"));
	CHECK(bad("--interval", "10", "allowed range 1us..10s"));
	CHECK(bad("--interval", "20s", "--interval: 20s is out of range; allowed range 1us..10s"));
	CHECK(bad("--interval", "999ns", "out of range"));
	CHECK(bad("--cpus", "5", "--cpus: CPU 5 is not online; online CPUs are 0-3,6"));
	CHECK(bad("--cpus", "1-", "--cpus: '1-' is not a CPU list"));
	CHECK(bad("--colour", "blue", "--colour: 'blue' is not one of red|green"));
	CHECK(bad("--mlock=1", NULL, "--mlock takes no value"));
	CHECK(bad("--no-count", NULL, "unknown option '--no-count'"));
	CHECK(bad("--bogus", NULL, "unknown option '--bogus'"));
	CHECK(bad("stray", NULL, "unexpected argument 'stray'"));
	CHECK(bad("--out", "", "--out: the value must not be empty"));
	CHECK(bad("--count=3", "--count=4", "--count: given more than once"));
	CHECK(bad("--bytes", "1k", "--bytes: 1k is out of range; allowed range 4k..1G"));
	CHECK(bad("--bytes", "2G", "allowed range 4k..1G"));
	CHECK(bad("--bytes", "lots", "--bytes: 'lots' is not a size"));
	char *sz[] = { "--bytes=64M" };
	CHECK(parse(1, sz) == 0 && vals[6].given && vals[6].i == 64 << 20);

	/* hostile values: empty list items, negatives, reversed ranges, overflow */
	CHECK(bad("--cpus", "1,,2", "--cpus: '1,,2' is not a CPU list"));
	CHECK(bad("--cpus", "-1", "--cpus: '-1' is not a CPU list"));
	CHECK(bad("--cpus", "3-1", "--cpus: '3-1' is not a CPU list"));
	CHECK(bad("--cpus", "0,", "--cpus: '0,' is not a CPU list"));
	CHECK(bad("--cpus", "99999999999999999999", "is not a CPU list"));
	CHECK(bad("--count", "-1", "--count: -1 is out of range; allowed range 1..99"));
	CHECK(bad("--count", "99999999999999999999999", "is out of range; allowed range 1..99"));
	CHECK(bad("--interval", "1000001h", "--interval: 1000001h is out of range"));
	CHECK(bad("--interval", "99999999999999999999s", "is out of range"));
	CHECK(bad("--interval", "-1s", "--interval: '-1s' is not a duration"));
	CHECK(bad("--bytes", "99999999999999999999T", "is out of range"));
	CHECK(bad("--colour", "\x01\xff\n", "--colour: '\\x01\\xff\\n' is not one of"));

	/* a huge value is shown cut, with its length */
	static char huge[100001];
	memset(huge, 'A', sizeof(huge) - 1);
	CHECK(bad("--colour", huge, "... (100000 characters) is not one of red|green"));
	CHECK(strlen(err) < 200);
	memset(huge, '9', sizeof(huge) - 1);
	CHECK(bad("--count", huge, "... (100000 characters) is out of range"));
	memset(huge, 'A', 5);
	huge[5] = '\0';
	CHECK(bad(huge, NULL, "unexpected argument 'AAAAA'"));
	char shown[OPT_SHOWN_LEN];
	CHECK(strcmp(opt_shown("ab'c\\", shown, sizeof(shown)), "'ab\\'c\\\\'") == 0);
	CHECK(strcmp(opt_shown("\xc3\xa9t\xc3\xa9", shown, sizeof(shown)), "'\xc3\xa9t\xc3\xa9'") == 0);
	char many[200];
	for (int k = 0; k < 61; k++)
		memcpy(many + 2 * k, "\xc3\xa9", 2);
	many[122] = '\0';
	opt_shown(many, shown, sizeof(shown));
	CHECK(strstr(shown, "'... (61 characters)") != NULL);
	char tiny[8];
	CHECK(strlen(opt_shown(huge, tiny, sizeof(tiny))) < sizeof(tiny));

	CHECK(opts_find(defs, N, "colour") == 3);
	CHECK(opts_find(defs, N, "nope") == -1);
	test_aliases();
	return tap_done("opts");
}
