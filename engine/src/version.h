/* SPDX-License-Identifier: MIT */
/*
 * What this engine is: version, build architecture, how it was linked, what it
 * was built with. `rtlab-probe --version --json` writes it as one record for the
 * host, which refuses an engine of another architecture or version before using
 * it (rtlab/engine/builds.py); every probe header carries `engine_arch`.
 */
#ifndef RTLAB_VERSION_H
#define RTLAB_VERSION_H

#include <stdbool.h>

#include "common.h"
#include "jsonw.h"

/* Layout of the `version` record itself (it must stay readable for every engine). */
#define RL_VERSION_SCHEMA 1

/*
 * The architecture this binary was built for, from the compiler's predefined
 * macros: "x86_64", "aarch64" (little-endian), "armhf" (32-bit ARM, hard-float
 * EABI, little-endian), "ppc64" (64-bit big-endian PowerPC), "ppc" (32-bit
 * big-endian PowerPC), else "unknown".
 */
const char *rl_build_arch(void);

/* The running executable has no program interpreter (PT_INTERP): statically linked. */
bool rl_build_static(void);

/* Built with the udp probe's AF_XDP path. */
bool rl_build_af_xdp(void);

/* the C library it is linked with: "glibc", "musl", "uclibc", "bionic" or "unknown" */
const char *rl_build_libc(void);

/*
 * {"type":"version","schema":1,"engine_version","arch","machine" (uname -m of the
 * running system, null if unknown),"output_schema","sys_schema","static","af_xdp"}
 */
void rl_version_write(struct jsonw *w);

#endif
