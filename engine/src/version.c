/* SPDX-License-Identifier: MIT */
#include "version.h"

#include <elf.h>
#include <stdio.h> /* musl's defines __DEFINED_FILE (rl_build_libc) */
#include <link.h>
#include <sys/auxv.h>
#include <sys/utsname.h>

#include "sys.h"

const char *rl_build_arch(void)
{
#if defined(__x86_64__) && !defined(__ILP32__)
	return "x86_64";
#elif defined(__aarch64__) && defined(__AARCH64EL__)
	return "aarch64";
#elif defined(__arm__) && defined(__ARM_PCS_VFP) && defined(__ARMEL__)
	return "armhf";
#elif defined(__powerpc64__) && defined(__BIG_ENDIAN__)
	return "ppc64";
#elif defined(__powerpc__) && !defined(__powerpc64__) && defined(__BIG_ENDIAN__)
	return "ppc";
#else
	return "unknown";
#endif
}

bool rl_build_static(void)
{
	const ElfW(Phdr) *ph = (const ElfW(Phdr) *)getauxval(AT_PHDR);
	unsigned long n = getauxval(AT_PHNUM);
	if (!ph)
		return false; /* unknown: do not claim it */
	for (unsigned long i = 0; i < n; i++)
		if (ph[i].p_type == PT_INTERP)
			return false;
	return true;
}

const char *rl_build_libc(void)
{
	/* uClibc-ng also defines __GLIBC__; musl defines no macro of its own, but its
	 * bits/alltypes.h marks every type it has defined (__DEFINED_FILE by stdio.h) */
#if defined(__UCLIBC__)
	return "uclibc";
#elif defined(__GLIBC__)
	return "glibc";
#elif defined(__BIONIC__)
	return "bionic";
#elif defined(__DEFINED_FILE)
	return "musl";
#else
	return "unknown";
#endif
}

bool rl_build_af_xdp(void)
{
#ifdef RTLAB_AF_XDP
	return true;
#else
	return false;
#endif
}

void rl_version_write(struct jsonw *w)
{
	struct utsname u;
	bool have_u = uname(&u) == 0;
	jw_obj_begin(w, NULL);
	jw_str(w, "type", "version");
	jw_int(w, "schema", RL_VERSION_SCHEMA);
	jw_str(w, "engine_version", RTLAB_VERSION);
	jw_str(w, "arch", rl_build_arch());
	jw_str_or_null(w, "machine", have_u ? u.machine : NULL);
	jw_int(w, "output_schema", RL_OUTPUT_SCHEMA);
	jw_int(w, "sys_schema", SYS_SCHEMA);
	jw_bool(w, "static", rl_build_static());
	jw_bool(w, "af_xdp", rl_build_af_xdp());
	jw_str(w, "libc", rl_build_libc());
	jw_obj_end(w);
}
