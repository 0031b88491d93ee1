/* SPDX-License-Identifier: MIT */
/*
 * gzip (RFC 1952) around deflate (RFC 1951): just enough to read the kernel's
 * /proc/config.gz without zlib. Whole buffer in, whole buffer out; the CRC-32
 * and length of the gzip trailer are checked.
 */
#ifndef RTLAB_INFLATE_H
#define RTLAB_INFLATE_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

/*
 * Decode the first gzip member of in[0..len). On success *out is a malloc'd
 * buffer of *out_len bytes plus a terminating NUL (not counted). Returns 0,
 * -EINVAL (not gzip, corrupt or truncated data, CRC or length mismatch),
 * -E2BIG (the output would exceed max_out) or -ENOMEM.
 */
int gz_inflate(const uint8_t *in, size_t len, size_t max_out, char **out,
	       size_t *out_len) RL_WUR;

/* CRC-32 (IEEE 802.3, as in gzip) of buf, continuing from crc (0 to start). */
uint32_t gz_crc32(uint32_t crc, const uint8_t *buf, size_t len);

#endif
