/* SPDX-License-Identifier: MIT */
/*
 * Little-endian integers in byte buffers, whatever the CPU's byte order: the UDP
 * probe's wire format, the samples file and load's UDP messages all store them so.
 */
#ifndef RTLAB_LE_BYTES_H
#define RTLAB_LE_BYTES_H

#include <stdint.h>

/* The low `bytes` bytes of v into p, least significant first. */
static inline void le_put(unsigned char *p, uint64_t v, int bytes)
{
	for (int i = 0; i < bytes; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

/* `bytes` bytes at p, least significant first. */
static inline uint64_t le_get(const unsigned char *p, int bytes)
{
	uint64_t v = 0;
	for (int i = bytes - 1; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static inline void le_put16(unsigned char *p, uint16_t v) { le_put(p, v, 2); }
static inline void le_put32(unsigned char *p, uint32_t v) { le_put(p, v, 4); }
static inline void le_put64(unsigned char *p, uint64_t v) { le_put(p, v, 8); }
static inline uint16_t le_get16(const unsigned char *p) { return (uint16_t)le_get(p, 2); }
static inline uint32_t le_get32(const unsigned char *p) { return (uint32_t)le_get(p, 4); }
static inline uint64_t le_get64(const unsigned char *p) { return le_get(p, 8); }

#endif
