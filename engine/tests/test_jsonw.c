/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "jsonw.h"
#include "tap.h"

static int eq(struct jsonw *w, const char *want)
{
	int ok = strcmp(jw_text(w), want) == 0;
	if (!ok)
		fprintf(stderr, "got  %s\nwant %s\n", jw_text(w), want);
	jw_reset(w);
	return ok;
}

int main(void)
{
	struct jsonw w;
	jw_init(&w);

	jw_obj_begin(&w, NULL);
	jw_str(&w, "a", "x");
	jw_int(&w, "b", -5);
	jw_uint(&w, "c", UINT64_MAX);
	jw_bool(&w, "d", true);
	jw_null(&w, "e");
	jw_arr_begin(&w, "f");
	jw_int(&w, NULL, 1);
	jw_arr_begin(&w, NULL);
	jw_arr_end(&w);
	jw_obj_begin(&w, NULL);
	jw_obj_end(&w);
	jw_arr_end(&w);
	jw_obj_end(&w);
	CHECK(eq(&w, "{\"a\":\"x\",\"b\":-5,\"c\":18446744073709551615,\"d\":true,\"e\":null,"
		     "\"f\":[1,[],{}]}"));

	jw_str(&w, NULL, "q\"b\\s/\n\t\r\b\f\x01\x1f\x7f");
	CHECK(eq(&w, "\"q\\\"b\\\\s/\\n\\t\\r\\b\\f\\u0001\\u001f\\u007f\""));

	/* another writer's output spliced in as a value, commas as for any value */
	struct jsonw inner;
	jw_init(&inner);
	jw_obj_begin(&inner, NULL);
	jw_uint(&inner, "n", 1);
	jw_obj_end(&inner);
	jw_obj_begin(&w, NULL);
	jw_int(&w, "a", 0);
	jw_raw(&w, "sys", jw_text(&inner));
	jw_raw(&w, "none", "null");
	jw_obj_end(&w);
	CHECK(eq(&w, "{\"a\":0,\"sys\":{\"n\":1},\"none\":null}"));
	jw_free(&inner);

	jw_strn(&w, NULL, "a\0b", 3);
	CHECK(eq(&w, "\"a\\u0000b\""));

	/* valid UTF-8 passes through; invalid bytes become U+FFFD */
	jw_str(&w, NULL, "\xc2\xb5s \xe2\x82\xac \xf0\x9f\x98\x80");
	CHECK(eq(&w, "\"\xc2\xb5s \xe2\x82\xac \xf0\x9f\x98\x80\""));
	jw_str(&w, NULL, "a\xff" "b\xc0\xaf" "c\xe2\x82");
	CHECK(eq(&w, "\"a\\ufffdb\\ufffd\\ufffdc\\ufffd\\ufffd\""));
	jw_str(&w, NULL, "\xed\xa0\x80"); /* surrogate */
	CHECK(eq(&w, "\"\\ufffd\\ufffd\\ufffd\""));

	/* not set / not known (negative) is null; 0 is a value */
	jw_obj_begin(&w, NULL);
	jw_int_or_null(&w, "cpu", 0);
	jw_int_or_null(&w, "hk", -1);
	jw_int_or_null(&w, "us", 250);
	jw_obj_end(&w);
	CHECK(eq(&w, "{\"cpu\":0,\"hk\":null,\"us\":250}"));

	/* a count or duration not given (0) is null; any other value is written whole */
	jw_obj_begin(&w, NULL);
	jw_uint_or_null(&w, "count", 0);
	jw_uint_or_null(&w, "loops", 1);
	jw_uint_or_null(&w, "duration_ns", UINT64_MAX);
	jw_obj_end(&w);
	CHECK(eq(&w, "{\"count\":null,\"loops\":1,\"duration_ns\":18446744073709551615}"));

	/* keys are escaped too */
	jw_obj_begin(&w, NULL);
	jw_int(&w, "k\"1", 1);
	jw_obj_end(&w);
	CHECK(eq(&w, "{\"k\\\"1\":1}"));

	jw_strf(&w, NULL, "%d-%s", 7, "x");
	CHECK(eq(&w, "\"7-x\""));

	/* emit: one line to a pipe, unbalanced -> error */
	int p[2];
	CHECK(pipe(p) == 0);
	jw_obj_begin(&w, NULL);
	jw_str(&w, "type", "t");
	jw_obj_end(&w);
	CHECK(jw_emit(&w, p[1]) == 0);
	char buf[64] = "";
	ssize_t n = read(p[0], buf, sizeof(buf) - 1);
	CHECK(n == 13);
	CHECK(strcmp(buf, "{\"type\":\"t\"}\n") == 0);
	jw_obj_begin(&w, NULL);
	CHECK(jw_emit(&w, p[1]) == -EINVAL);
	jw_obj_end(&w); /* closing at depth 0 is an error */
	CHECK(jw_error(&w) == -EINVAL);
	close(p[0]);
	close(p[1]);

	/* deep nesting is refused, not overflowed */
	jw_reset(&w);
	for (int i = 0; i < JW_MAX_DEPTH + 4; i++)
		jw_arr_begin(&w, NULL);
	CHECK(jw_error(&w) == -E2BIG);

	/* large records grow the buffer */
	jw_reset(&w);
	jw_arr_begin(&w, NULL);
	for (int i = 0; i < 100000; i++)
		jw_int(&w, NULL, i);
	jw_arr_end(&w);
	CHECK(jw_error(&w) == 0);
	CHECK(strlen(jw_text(&w)) > 500000);
	jw_free(&w);
	return tap_done("jsonw");
}
