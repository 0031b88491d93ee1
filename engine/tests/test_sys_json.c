/* SPDX-License-Identifier: MIT */
/* Unit tests of the flat JSON parser of `sys` op and journal lines. */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "sys.h"
#include "tap.h"

static int parses(const char *s)
{
	struct sj_obj o;
	int r = sj_parse(s, strlen(s), &o);
	if (r == 0)
		sj_free(&o);
	return r == 0;
}

int main(void)
{
	struct sj_obj o;
	const char *line = " {\"op\":\"write\", \"path\":\"/proc/irq/24/smp_affinity_list\","
			   "\"value\":\"0\",\"n\":-42,\"b\":true,\"z\":null,\"cpus\":[0, 1,17],"
			   "\"e\":[],\"esc\":\"a\\\"b\\\\c\\n\\u00e9\\ud83d\\ude00\"} ";
	CHECK(sj_parse(line, strlen(line), &o) == 0);
	const char *s;
	int64_t i;
	bool b;
	const int64_t *arr;
	size_t n;
	CHECK(sj_str(&o, "op", &s) == 0 && strcmp(s, "write") == 0);
	CHECK(sj_str(&o, "path", &s) == 0 && strcmp(s, "/proc/irq/24/smp_affinity_list") == 0);
	CHECK(sj_int(&o, "n", &i) == 0 && i == -42);
	CHECK(sj_bool(&o, "b", &b) == 0 && b);
	CHECK(sj_get(&o, "z") && sj_get(&o, "z")->type == SJ_NULL);
	CHECK(sj_intarr(&o, "cpus", &arr, &n) == 0 && n == 3 && arr[0] == 0 && arr[2] == 17);
	CHECK(sj_intarr(&o, "e", &arr, &n) == 0 && n == 0);
	CHECK(sj_str(&o, "esc", &s) == 0 && strcmp(s, "a\"b\\c\n\xc3\xa9\xf0\x9f\x98\x80") == 0);
	CHECK(sj_str(&o, "missing", &s) == -ENOENT);
	CHECK(sj_int(&o, "op", &i) == -EINVAL);
	sj_free(&o);

	CHECK(parses("{}"));
	CHECK(parses("{\"big\":9223372036854775807,\"small\":-9223372036854775808}"));
	CHECK(!parses("{\"big\":9223372036854775808}"));
	CHECK(!parses(""));
	CHECK(!parses("[]"));
	CHECK(!parses("{\"a\":1"));          /* torn line */
	CHECK(!parses("{\"a\":1,}"));
	CHECK(!parses("{\"a\":1} x"));
	CHECK(!parses("{\"a\":{\"b\":1}}"));  /* nested object */
	CHECK(!parses("{\"a\":[\"x\"]}"));    /* array of strings */
	CHECK(!parses("{\"a\":1.5}"));
	CHECK(!parses("{\"a\":01}"));
	CHECK(!parses("{\"a\":1,\"a\":2}"));  /* duplicate key */
	CHECK(!parses("{\"a\":\"\\u0000\"}"));
	CHECK(!parses("{\"a\":\"\\ud83d\"}")); /* lone surrogate */
	CHECK(!parses("{\"a\":\"tab\there\"}"));
	CHECK(!parses("{\"a\":tru}"));
	CHECK(!parses("{\"a_key_that_is_far_too_long_for_us\":1}"));
	return tap_done("sys_json");
}
