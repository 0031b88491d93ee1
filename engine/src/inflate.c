/* SPDX-License-Identifier: MIT */
/*
 * A small, slow-but-simple inflater: canonical Huffman codes decoded bit by
 * bit from per-length counts. Used once per run on /proc/config.gz (~25 KB),
 * never in a measuring loop.
 */
#include "inflate.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BITS 15
#define MAX_LITLEN 288
#define MAX_DIST 30

struct inf {
	const uint8_t *in;
	size_t in_len, in_pos;
	uint32_t bitbuf;
	unsigned bitcnt;
	uint8_t *out;
	size_t out_len, out_cap, max_out;
};

struct huff {
	uint16_t count[MAX_BITS + 1];	/* number of codes of each length */
	uint16_t symbol[MAX_LITLEN];	/* symbols ordered by code */
};

static int bits(struct inf *s, unsigned n, unsigned *v)
{
	while (s->bitcnt < n) {
		if (s->in_pos >= s->in_len)
			return -EINVAL;
		s->bitbuf |= (uint32_t)s->in[s->in_pos++] << s->bitcnt;
		s->bitcnt += 8;
	}
	*v = (unsigned)(s->bitbuf & ((1u << n) - 1u));
	s->bitbuf >>= n;
	s->bitcnt -= n;
	return 0;
}

static int put(struct inf *s, uint8_t c)
{
	if (s->out_len == s->max_out)
		return -E2BIG;
	if (s->out_len + 1 >= s->out_cap) {	/* keep room for the NUL */
		size_t cap = s->out_cap * 2;
		if (cap > s->max_out + 1)
			cap = s->max_out + 1;
		uint8_t *n = realloc(s->out, cap);
		if (!n)
			return -ENOMEM;
		s->out = n;
		s->out_cap = cap;
	}
	s->out[s->out_len++] = c;
	return 0;
}

/* Returns 0 (complete), >0 (incomplete) or -EINVAL (over-subscribed). */
static int huff_build(struct huff *h, const uint8_t *lengths, unsigned n)
{
	uint16_t offs[MAX_BITS + 1];
	memset(h->count, 0, sizeof(h->count));
	for (unsigned i = 0; i < n; i++)
		h->count[lengths[i]]++;
	if (h->count[0] == n)
		return 1;	/* no codes at all */
	int left = 1;
	for (unsigned len = 1; len <= MAX_BITS; len++) {
		left <<= 1;
		left -= h->count[len];
		if (left < 0)
			return -EINVAL;
	}
	offs[1] = 0;
	for (unsigned len = 1; len < MAX_BITS; len++)
		offs[len + 1] = (uint16_t)(offs[len] + h->count[len]);
	for (unsigned sym = 0; sym < n; sym++)
		if (lengths[sym])
			h->symbol[offs[lengths[sym]]++] = (uint16_t)sym;
	return left;
}

static int huff_decode(struct inf *s, const struct huff *h, unsigned *sym)
{
	int code = 0, first = 0, index = 0;
	for (unsigned len = 1; len <= MAX_BITS; len++) {
		unsigned b;
		if (bits(s, 1, &b))
			return -EINVAL;
		code |= (int)b;
		int count = h->count[len];
		if (code - count < first) {
			*sym = h->symbol[index + (code - first)];
			return 0;
		}
		index += count;
		first = (first + count) << 1;
		code <<= 1;
	}
	return -EINVAL;	/* a code the table does not have */
}

static const uint16_t len_base[29] = { 3,  4,  5,  6,  7,  8,  9,  10, 11,  13,
				       15, 17, 19, 23, 27, 31, 35, 43, 51,  59,
				       67, 83, 99, 115, 131, 163, 195, 227, 258 };
static const uint8_t len_extra[29] = { 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
				       2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0 };
static const uint16_t dist_base[30] = { 1,    2,    3,    4,    5,    7,     9,     13,
					17,   25,   33,   49,   65,   97,    129,   193,
					257,  385,  513,  769,  1025, 1537,  2049,  3073,
					4097, 6145, 8193, 12289, 16385, 24577 };
static const uint8_t dist_extra[30] = { 0, 0, 0, 0, 1, 1, 2, 2,  3,  3,  4,  4,  5,  5,  6,
					6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13 };

static int codes(struct inf *s, const struct huff *lit, const struct huff *dist)
{
	for (;;) {
		unsigned sym, extra;
		int r = huff_decode(s, lit, &sym);
		if (r)
			return r;
		if (sym < 256) {
			r = put(s, (uint8_t)sym);
			if (r)
				return r;
			continue;
		}
		if (sym == 256)
			return 0;
		sym -= 257;
		if (sym >= 29 || bits(s, len_extra[sym], &extra))
			return -EINVAL;
		size_t len = len_base[sym] + extra;
		if (huff_decode(s, dist, &sym) || sym >= MAX_DIST ||
		    bits(s, dist_extra[sym], &extra))
			return -EINVAL;
		size_t d = dist_base[sym] + extra;
		if (d > s->out_len)
			return -EINVAL;	/* refers to before the start */
		while (len--) {
			r = put(s, s->out[s->out_len - d]);
			if (r)
				return r;
		}
	}
}

static int stored(struct inf *s)
{
	s->bitbuf = 0;	/* drop the rest of the current byte */
	s->bitcnt = 0;
	if (s->in_len - s->in_pos < 4)
		return -EINVAL;
	const uint8_t *p = s->in + s->in_pos;
	unsigned len = p[0] | (unsigned)p[1] << 8;
	unsigned nlen = p[2] | (unsigned)p[3] << 8;
	s->in_pos += 4;
	if (len != (~nlen & 0xffffu) || s->in_len - s->in_pos < len)
		return -EINVAL;
	for (unsigned i = 0; i < len; i++) {
		int r = put(s, s->in[s->in_pos + i]);
		if (r)
			return r;
	}
	s->in_pos += len;
	return 0;
}

static int fixed(struct inf *s)
{
	struct huff lit, dist;
	uint8_t lengths[MAX_LITLEN];
	unsigned sym = 0;
	for (; sym < 144; sym++)
		lengths[sym] = 8;
	for (; sym < 256; sym++)
		lengths[sym] = 9;
	for (; sym < 280; sym++)
		lengths[sym] = 7;
	for (; sym < MAX_LITLEN; sym++)
		lengths[sym] = 8;
	(void)huff_build(&lit, lengths, MAX_LITLEN);
	for (sym = 0; sym < MAX_DIST; sym++)
		lengths[sym] = 5;
	(void)huff_build(&dist, lengths, MAX_DIST);
	return codes(s, &lit, &dist);
}

static int dynamic(struct inf *s)
{
	static const uint8_t order[19] = { 16, 17, 18, 0, 8, 7, 9, 6, 10, 5,
					   11, 4, 12, 3, 13, 2, 14, 1, 15 };
	uint8_t lengths[MAX_LITLEN + MAX_DIST];
	struct huff lencode, lit, dist;
	unsigned nlit, ndist, ncode, v;
	if (bits(s, 5, &nlit) || bits(s, 5, &ndist) || bits(s, 4, &ncode))
		return -EINVAL;
	nlit += 257;
	ndist += 1;
	ncode += 4;
	if (nlit > 286 || ndist > MAX_DIST)
		return -EINVAL;
	memset(lengths, 0, sizeof(lengths));
	for (unsigned i = 0; i < ncode; i++) {
		if (bits(s, 3, &v))
			return -EINVAL;
		lengths[order[i]] = (uint8_t)v;
	}
	if (huff_build(&lencode, lengths, 19) != 0)
		return -EINVAL;	/* the code-length code must be complete */
	unsigned i = 0;
	while (i < nlit + ndist) {
		unsigned sym, rep;
		uint8_t value = 0;
		if (huff_decode(s, &lencode, &sym))
			return -EINVAL;
		if (sym < 16) {
			lengths[i++] = (uint8_t)sym;
			continue;
		}
		if (sym == 16) {
			if (i == 0 || bits(s, 2, &rep))
				return -EINVAL;
			value = lengths[i - 1];
			rep += 3;
		} else if (sym == 17) {
			if (bits(s, 3, &rep))
				return -EINVAL;
			rep += 3;
		} else {
			if (bits(s, 7, &rep))
				return -EINVAL;
			rep += 11;
		}
		if (i + rep > nlit + ndist)
			return -EINVAL;
		while (rep--)
			lengths[i++] = value;
	}
	if (lengths[256] == 0)
		return -EINVAL;	/* no end-of-block code */
	int r = huff_build(&lit, lengths, nlit);
	if (r < 0 || (r > 0 && nlit - lit.count[0] != 1))
		return -EINVAL;
	r = huff_build(&dist, lengths + nlit, ndist);
	if (r < 0 || (r > 0 && ndist - dist.count[0] != 1))
		return -EINVAL;
	return codes(s, &lit, &dist);
}

uint32_t gz_crc32(uint32_t crc, const uint8_t *buf, size_t len)
{
	uint32_t table[256];
	for (uint32_t n = 0; n < 256; n++) {
		uint32_t c = n;
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
		table[n] = c;
	}
	crc = ~crc;
	for (size_t i = 0; i < len; i++)
		crc = table[(crc ^ buf[i]) & 0xffu] ^ (crc >> 8);
	return ~crc;
}

static uint32_t le32(const uint8_t *p)
{
	return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int gz_inflate(const uint8_t *in, size_t len, size_t max_out, char **out, size_t *out_len)
{
	enum { FHCRC = 2, FEXTRA = 4, FNAME = 8, FCOMMENT = 16 };
	*out = NULL;
	*out_len = 0;
	if (len < 18 || in[0] != 0x1f || in[1] != 0x8b || in[2] != 8 || (in[3] & 0xe0))
		return -EINVAL;
	unsigned flg = in[3];
	size_t pos = 10;
	if (flg & FEXTRA) {
		if (len - pos < 2)
			return -EINVAL;
		pos += 2 + (in[pos] | (size_t)in[pos + 1] << 8);
	}
	for (unsigned f = FNAME; f <= FCOMMENT; f <<= 1) {
		if (!(flg & f))
			continue;
		while (pos < len && in[pos])
			pos++;
		pos++;
	}
	if (flg & FHCRC)
		pos += 2;
	if (pos >= len)
		return -EINVAL;

	struct inf s = { .in = in + pos, .in_len = len - pos, .max_out = max_out };
	s.out_cap = len * 4 < 4096 ? 4096 : len * 4;
	if (s.out_cap > max_out + 1)
		s.out_cap = max_out + 1;
	s.out = malloc(s.out_cap);
	if (!s.out)
		return -ENOMEM;
	unsigned last = 0, type;
	int r = 0;
	while (!r && !last) {
		if (bits(&s, 1, &last) || bits(&s, 2, &type)) {
			r = -EINVAL;
			break;
		}
		r = type == 0 ? stored(&s) : type == 1 ? fixed(&s) : type == 2 ? dynamic(&s)
									 : -EINVAL;
	}
	/* the trailer starts at the next byte boundary */
	if (!r && (s.in_len - s.in_pos < 8 ||
		   le32(s.in + s.in_pos) != gz_crc32(0, s.out, s.out_len) ||
		   le32(s.in + s.in_pos + 4) != (uint32_t)s.out_len))
		r = -EINVAL;
	if (r) {
		free(s.out);
		return r;
	}
	s.out[s.out_len] = '\0';
	*out = (char *)s.out;
	*out_len = s.out_len;
	return 0;
}
