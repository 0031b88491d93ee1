/* SPDX-License-Identifier: MIT */
/* The version record: its fields and the build architecture of this build. */
#include <string.h>

#include "tap.h"
#include "version.h"

int main(void)
{
	const char *arch = rl_build_arch();
	static const char *const known[] = { "x86_64", "aarch64", "armhf", "ppc64", "ppc", "unknown" };
	int found = 0;
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		found |= strcmp(arch, known[i]) == 0;
	CHECK(found);
#if defined(__x86_64__) && !defined(__ILP32__)
	CHECK(strcmp(arch, "x86_64") == 0);
#endif
	/* the unit tests are linked dynamically: they have a program interpreter */
	CHECK(!rl_build_static());

	struct jsonw w;
	jw_init(&w);
	rl_version_write(&w);
	const char *t = jw_text(&w);
	const char *head = "{\"type\":\"version\",\"schema\":1,\"engine_version\":\"";
	CHECK(strncmp(t, head, strlen(head)) == 0);
	char want[64];
	snprintf(want, sizeof(want), "\"arch\":\"%s\"", arch);
	CHECK(strstr(t, want) != NULL);
	CHECK(strstr(t, "\"machine\":\"") != NULL);
	CHECK(strstr(t, "\"output_schema\":1,") != NULL);
	CHECK(strstr(t, "\"sys_schema\":1,") != NULL);
	CHECK(strstr(t, "\"static\":false,") != NULL);
	CHECK(strstr(t, rl_build_af_xdp() ? "\"af_xdp\":true," : "\"af_xdp\":false,") != NULL);
	/* this test is built with the system's compiler and C library (glibc here; a musl
	 * build of the engine says "musl": scripts/cross-build.sh's zig builds) */
	snprintf(want, sizeof(want), "\"libc\":\"%s\"}", rl_build_libc());
	CHECK(strstr(t, want) != NULL);
	CHECK(strcmp(rl_build_libc(), "unknown") != 0);
#if defined(__GLIBC__) && !defined(__UCLIBC__)
	CHECK(strcmp(rl_build_libc(), "glibc") == 0);
#endif
	CHECK(!jw_error(&w));
	jw_free(&w);
	return tap_done("version");
}
