/* SPDX-License-Identifier: MIT */
/*
 * String scans that stop where they find, for builds against the Zig toolchain's C
 * library (RL_OWN_STRING_SCANS: scripts/cross-build.sh defines it there). Zig 0.17's
 * strchr, strchrnul, strspn, strcspn and strpbrk first measure the whole rest of the
 * string: a walk over the lines of a 200 KB kernel config with strchr became quadratic
 * (0.2 s of CPU and seconds of wall time at every engine start). Its definitions are
 * weak symbols; these, linked into the program, take their place. Byte at a time:
 * nothing here is on a measuring path.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#ifdef RL_OWN_STRING_SCANS

char *strchrnul(const char *s, int c)
{
	const char ch = (char)c;
	while (*s && *s != ch)
		s++;
	return (char *)s;
}

char *strchr(const char *s, int c)
{
	char *p = strchrnul(s, c);
	return *p == (char)c ? p : NULL;
}

/* set[b] for every byte b of `chars` (and for the NUL, so that scans stop there) */
static void byte_set(bool set[256], const char *chars)
{
	memset(set, 0, 256 * sizeof(bool));
	for (const unsigned char *p = (const unsigned char *)chars; *p; p++)
		set[*p] = true;
}

size_t strspn(const char *s, const char *accept)
{
	bool set[256];
	byte_set(set, accept);
	const unsigned char *p = (const unsigned char *)s;
	while (*p && set[*p])
		p++;
	return (size_t)(p - (const unsigned char *)s);
}

size_t strcspn(const char *s, const char *reject)
{
	bool set[256];
	byte_set(set, reject);
	set[0] = true;
	const unsigned char *p = (const unsigned char *)s;
	while (!set[*p])
		p++;
	return (size_t)(p - (const unsigned char *)s);
}

char *strpbrk(const char *s, const char *accept)
{
	s += strcspn(s, accept);
	return *s ? (char *)s : NULL;
}

#else
typedef int rl_strscan_libc_s_own; /* the C library's scans are used */
#endif
