/* SPDX-License-Identifier: MIT */
#include "cpuname.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * Cores by MIDR implementer and part number, as the kernel's cputype.h headers name
 * them (arch/arm and arch/arm64): Arm's own cores, then the other implementers' that
 * are certain. A part not listed here is shown by its numbers, never guessed.
 */
static const struct arm_core {
	uint8_t implementer;
	uint16_t part;
	const char *name;
} arm_cores[] = {
	/* 0x41 Arm */
	{ 0x41, 0xb02, "ARM11 MPCore" },
	{ 0x41, 0xb36, "ARM1136" },
	{ 0x41, 0xb56, "ARM1156" },
	{ 0x41, 0xb76, "ARM1176" },
	{ 0x41, 0xc05, "Cortex-A5" },
	{ 0x41, 0xc07, "Cortex-A7" },
	{ 0x41, 0xc08, "Cortex-A8" },
	{ 0x41, 0xc09, "Cortex-A9" },
	{ 0x41, 0xc0d, "Cortex-A12" },
	{ 0x41, 0xc0e, "Cortex-A17" },
	{ 0x41, 0xc0f, "Cortex-A15" },
	{ 0x41, 0xd00, "Arm Foundation Model" },
	{ 0x41, 0xd01, "Cortex-A32" },
	{ 0x41, 0xd02, "Cortex-A34" },
	{ 0x41, 0xd03, "Cortex-A53" },
	{ 0x41, 0xd04, "Cortex-A35" },
	{ 0x41, 0xd05, "Cortex-A55" },
	{ 0x41, 0xd06, "Cortex-A65" },
	{ 0x41, 0xd07, "Cortex-A57" },
	{ 0x41, 0xd08, "Cortex-A72" },
	{ 0x41, 0xd09, "Cortex-A73" },
	{ 0x41, 0xd0a, "Cortex-A75" },
	{ 0x41, 0xd0b, "Cortex-A76" },
	{ 0x41, 0xd0c, "Neoverse N1" },
	{ 0x41, 0xd0d, "Cortex-A77" },
	{ 0x41, 0xd0e, "Cortex-A76AE" },
	{ 0x41, 0xd0f, "Arm AEMv8 Model" },
	{ 0x41, 0xd40, "Neoverse V1" },
	{ 0x41, 0xd41, "Cortex-A78" },
	{ 0x41, 0xd42, "Cortex-A78AE" },
	{ 0x41, 0xd43, "Cortex-A65AE" },
	{ 0x41, 0xd44, "Cortex-X1" },
	{ 0x41, 0xd46, "Cortex-A510" },
	{ 0x41, 0xd47, "Cortex-A710" },
	{ 0x41, 0xd48, "Cortex-X2" },
	{ 0x41, 0xd49, "Neoverse N2" },
	{ 0x41, 0xd4a, "Neoverse E1" },
	{ 0x41, 0xd4b, "Cortex-A78C" },
	{ 0x41, 0xd4c, "Cortex-X1C" },
	{ 0x41, 0xd4d, "Cortex-A715" },
	{ 0x41, 0xd4e, "Cortex-X3" },
	{ 0x41, 0xd4f, "Neoverse V2" },
	{ 0x41, 0xd80, "Cortex-A520" },
	{ 0x41, 0xd81, "Cortex-A720" },
	{ 0x41, 0xd82, "Cortex-X4" },
	{ 0x41, 0xd83, "Neoverse V3AE" },
	{ 0x41, 0xd84, "Neoverse V3" },
	{ 0x41, 0xd85, "Cortex-X925" },
	{ 0x41, 0xd87, "Cortex-A725" },
	{ 0x41, 0xd89, "Cortex-A720AE" },
	{ 0x41, 0xd8e, "Neoverse N3" },
	/* 0x42 Broadcom */
	{ 0x42, 0x00f, "Broadcom Brahma-B15" },
	{ 0x42, 0x100, "Broadcom Brahma-B53" },
	{ 0x42, 0x516, "Broadcom Vulcan" },
	/* 0x43 Cavium (Marvell) */
	{ 0x43, 0x0a1, "Cavium ThunderX" },
	{ 0x43, 0x0a2, "Cavium ThunderX 81xx" },
	{ 0x43, 0x0a3, "Cavium ThunderX 83xx" },
	{ 0x43, 0x0af, "Cavium ThunderX2" },
	{ 0x43, 0x0b1, "Marvell OcteonTX2 98xx" },
	{ 0x43, 0x0b2, "Marvell OcteonTX2 96xx" },
	{ 0x43, 0x0b3, "Marvell OcteonTX2 95xx" },
	{ 0x43, 0x0b4, "Marvell OcteonTX2 95xxN" },
	{ 0x43, 0x0b5, "Marvell OcteonTX2 95xxMM" },
	{ 0x43, 0x0b6, "Marvell OcteonTX2 95xxO" },
	/* 0x46 Fujitsu */
	{ 0x46, 0x001, "Fujitsu A64FX" },
	/* 0x48 HiSilicon */
	{ 0x48, 0xd01, "HiSilicon TaiShan v110" },
	{ 0x48, 0xd02, "HiSilicon HIP09" },
	{ 0x48, 0xd06, "HiSilicon HIP12" },
	/* 0x4e NVIDIA */
	{ 0x4e, 0x003, "NVIDIA Denver" },
	{ 0x4e, 0x004, "NVIDIA Carmel" },
	{ 0x4e, 0x010, "NVIDIA Olympus" },
	/* 0x50 Applied Micro */
	{ 0x50, 0x000, "APM X-Gene" },
	/* 0x51 Qualcomm: Kryo 5xx and later report Arm's part numbers */
	{ 0x51, 0x001, "Qualcomm Oryon" },
	{ 0x51, 0x200, "Qualcomm Kryo" },
	{ 0x51, 0x800, "Qualcomm Falkor V1 / Kryo 2xx Gold" },
	{ 0x51, 0x801, "Qualcomm Kryo 2xx Silver" },
	{ 0x51, 0x802, "Qualcomm Kryo 3xx Gold" },
	{ 0x51, 0x803, "Qualcomm Kryo 3xx Silver" },
	{ 0x51, 0x804, "Qualcomm Kryo 4xx Gold" },
	{ 0x51, 0x805, "Qualcomm Kryo 4xx Silver" },
	{ 0x51, 0xc00, "Qualcomm Falkor" },
	/* 0x61 Apple */
	{ 0x61, 0x022, "Apple M1 Icestorm" },
	{ 0x61, 0x023, "Apple M1 Firestorm" },
	{ 0x61, 0x024, "Apple M1 Pro Icestorm" },
	{ 0x61, 0x025, "Apple M1 Pro Firestorm" },
	{ 0x61, 0x028, "Apple M1 Max Icestorm" },
	{ 0x61, 0x029, "Apple M1 Max Firestorm" },
	{ 0x61, 0x032, "Apple M2 Blizzard" },
	{ 0x61, 0x033, "Apple M2 Avalanche" },
	{ 0x61, 0x034, "Apple M2 Pro Blizzard" },
	{ 0x61, 0x035, "Apple M2 Pro Avalanche" },
	{ 0x61, 0x038, "Apple M2 Max Blizzard" },
	{ 0x61, 0x039, "Apple M2 Max Avalanche" },
	/* 0x6d Microsoft */
	{ 0x6d, 0xd49, "Microsoft Azure Cobalt 100" },
	/* 0xc0 Ampere */
	{ 0xc0, 0xac3, "AmpereOne" },
	{ 0xc0, 0xac4, "AmpereOne AC04" },
};

const char *cpuname_arm(unsigned implementer, unsigned part)
{
	for (size_t k = 0; k < sizeof(arm_cores) / sizeof(arm_cores[0]); k++)
		if (arm_cores[k].implementer == implementer && arm_cores[k].part == part)
			return arm_cores[k].name;
	return NULL;
}

/* Where a block's name came from, best first. */
enum name_rank { RANK_MODEL_NAME, RANK_MIPS, RANK_PPC, RANK_UARCH, RANK_NONE };

/* One "processor : N" block while it is read. */
struct block {
	long cpu;			/* -1: before the first block, or not a number */
	bool have_impl, have_part;
	unsigned long impl, part;
	enum name_rank rank;
	char name[CPUNAME_LEN];
};

struct parse {
	char names[CPUNAME_MAX_GROUPS][CPUNAME_LEN];
	size_t nnames;
	signed char idx[CPU_SETSIZE];	/* per CPU: index into names, -1 unnamed */
	cpu_set_t seen;			/* every block's CPU */
	long last_cpu;
	size_t named_blocks;
	bool last_named;
	char machine[CPUNAME_LEN];	/* "Hardware" / "Model": the fallback */
};

static void copy_value(char *dst, size_t cap, const char *v, size_t n)
{
	if (n >= cap)
		n = cap - 1;
	memcpy(dst, v, n);
	dst[n] = '\0';
}

static bool parse_hex(const char *v, size_t n, unsigned long *out)
{
	char buf[32];
	if (n == 0 || n >= sizeof(buf))
		return false;
	memcpy(buf, v, n);
	buf[n] = '\0';
	char *end;
	errno = 0;
	unsigned long x = strtoul(buf, &end, 0);
	if (errno || *end || end == buf)
		return false;
	*out = x;
	return true;
}

static void block_name(const struct block *b, char *out, size_t cap)
{
	if (b->have_impl && b->have_part) {
		const char *n = cpuname_arm((unsigned)b->impl, (unsigned)b->part);
		if (n)
			snprintf(out, cap, "%s", n);
		else
			snprintf(out, cap, "ARM implementer 0x%02lx part 0x%03lx", b->impl, b->part);
		return;
	}
	snprintf(out, cap, "%s", b->rank != RANK_NONE ? b->name : "");
}

static void flush(struct parse *p, struct block *b)
{
	if (b->cpu < 0 || b->cpu >= CPU_SETSIZE) {
		b->cpu = -1;
		return;
	}
	CPU_SET((int)b->cpu, &p->seen);
	p->last_cpu = b->cpu;
	char name[CPUNAME_LEN];
	block_name(b, name, sizeof(name));
	p->last_named = name[0] != '\0';
	if (!name[0])
		return;
	p->named_blocks++;
	size_t k = 0;
	while (k < p->nnames && strcmp(p->names[k], name) != 0)
		k++;
	if (k == p->nnames) {
		if (p->nnames == CPUNAME_MAX_GROUPS)
			return;
		snprintf(p->names[p->nnames++], CPUNAME_LEN, "%s", name);
	}
	p->idx[b->cpu] = (signed char)k;
}

static void take_name(struct block *b, enum name_rank rank, const char *v, size_t n)
{
	if (rank >= b->rank || n == 0)
		return;
	b->rank = rank;
	copy_value(b->name, sizeof(b->name), v, n);
}

/* One "key : value" line (key and value trimmed). */
static void parse_line(struct parse *p, struct block *b, const char *key, size_t kl,
		       const char *v, size_t vl)
{
#define KEY(s) (kl == sizeof(s) - 1 && memcmp(key, s, kl) == 0)
	if (KEY("processor")) {
		flush(p, b);
		unsigned long cpu;
		char buf[24];
		char *end;
		long n = -1;
		if (vl && vl < sizeof(buf)) {
			memcpy(buf, v, vl);
			buf[vl] = '\0';
			errno = 0;
			cpu = strtoul(buf, &end, 10);
			if (!errno && !*end && buf[0] >= '0' && buf[0] <= '9' && cpu < CPU_SETSIZE)
				n = (long)cpu;
		}
		*b = (struct block){ .cpu = n, .rank = RANK_NONE };
	} else if (KEY("CPU implementer")) {
		b->have_impl = parse_hex(v, vl, &b->impl);
	} else if (KEY("CPU part")) {
		b->have_part = parse_hex(v, vl, &b->part);
	} else if (KEY("model name")) {
		take_name(b, RANK_MODEL_NAME, v, vl);
	} else if (KEY("cpu model")) {
		take_name(b, RANK_MIPS, v, vl);
	} else if (KEY("cpu")) {
		const char *comma = memchr(v, ',', vl);
		size_t n = comma ? (size_t)(comma - v) : vl;
		while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
			n--;
		take_name(b, RANK_PPC, v, n);
	} else if (KEY("uarch")) {
		take_name(b, RANK_UARCH, v, vl);
	} else if ((KEY("Hardware") || KEY("Model")) && !p->machine[0]) {
		copy_value(p->machine, sizeof(p->machine), v, vl);
	}
#undef KEY
}

static bool blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

void cpuname_parse(const char *text, size_t len, struct cpunames *out)
{
	struct parse parse = { .last_cpu = -1 };
	struct parse *p = &parse;
	memset(out, 0, sizeof(*out));
	memset(p->idx, -1, sizeof(p->idx));
	struct block b = { .cpu = -1, .rank = RANK_NONE };
	size_t at = 0;
	while (at < len) {
		const char *line = text + at;
		const char *nl = memchr(line, '\n', len - at);
		size_t ll = nl ? (size_t)(nl - line) : len - at;
		at += ll + (nl ? 1 : 0);
		const char *colon = memchr(line, ':', ll);
		if (!colon)
			continue;
		size_t kl = (size_t)(colon - line);
		while (kl && blank(line[kl - 1]))
			kl--;
		const char *v = colon + 1;
		size_t vl = ll - (size_t)(v - line);
		while (vl && blank(*v)) {
			v++;
			vl--;
		}
		while (vl && blank(v[vl - 1]))
			vl--;
		parse_line(p, &b, line, kl, v, vl);
	}
	flush(p, &b);
	/* Old 32-bit ARM kernels print the ids once, after the last block: they name all. */
	if (p->named_blocks == 1 && p->last_named && CPU_COUNT(&p->seen) > 1) {
		signed char k = p->idx[p->last_cpu];
		for (int c = 0; c < CPU_SETSIZE; c++)
			if (CPU_ISSET(c, &p->seen))
				p->idx[c] = k;
	}
	signed char group_of[CPUNAME_MAX_GROUPS];
	memset(group_of, -1, sizeof(group_of));
	for (int c = 0; c < CPU_SETSIZE; c++) {
		if (p->idx[c] < 0)
			continue;
		int k = p->idx[c];
		if (group_of[k] < 0) {
			group_of[k] = (signed char)out->ngroups;
			struct cpuname_group *g = &out->group[out->ngroups++];
			snprintf(g->model, sizeof(g->model), "%s", p->names[k]);
			CPU_ZERO(&g->cpus);
		}
		struct cpuname_group *g = &out->group[group_of[k]];
		CPU_SET(c, &g->cpus);
		g->count++;
	}
	if (out->ngroups == 1) {
		snprintf(out->summary, sizeof(out->summary), "%s", out->group[0].model);
	} else if (out->ngroups > 1) {
		size_t used = 0;
		for (size_t k = 0; k < out->ngroups && used < sizeof(out->summary); k++) {
			int w = snprintf(out->summary + used, sizeof(out->summary) - used, "%s%dx %s",
					 k ? " + " : "", out->group[k].count, out->group[k].model);
			if (w < 0)
				break;
			used += (size_t)w;
		}
	} else {
		snprintf(out->summary, sizeof(out->summary), "%s", p->machine);
	}
}

int cpuname_read(const char *path, struct cpunames *out)
{
	memset(out, 0, sizeof(*out));
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t cap = 16384, n = 0;
	char *buf = malloc(cap);
	int r = buf ? 0 : -ENOMEM;
	while (!r && n < CPUNAME_READ_MAX) {
		if (n == cap) {
			size_t nc = cap * 2 > CPUNAME_READ_MAX ? CPUNAME_READ_MAX : cap * 2;
			char *nb = realloc(buf, nc);
			if (!nb) {
				r = -ENOMEM;
				break;
			}
			buf = nb;
			cap = nc;
		}
		ssize_t got = read(fd, buf + n, cap - n);
		if (got < 0) {
			if (errno != EINTR)
				r = -errno;
			continue;
		}
		if (got == 0)
			break;
		n += (size_t)got;
	}
	close(fd);
	if (!r) {
		if (n == CPUNAME_READ_MAX) {	/* cut: parse whole lines only */
			const char *last = memrchr(buf, '\n', n);
			n = last ? (size_t)(last - buf) + 1 : 0;
		}
		cpuname_parse(buf, n, out);
	}
	free(buf);
	return r;
}

void cpuname_write(struct jsonw *w, const struct cpunames *n, bool known)
{
	jw_str_or_null(w, "cpu_model", known && n->summary[0] ? n->summary : NULL);
	if (!known) {
		jw_null(w, "cpu_models");
		return;
	}
	jw_arr_begin(w, "cpu_models");
	for (size_t k = 0; k < n->ngroups; k++) {
		jw_obj_begin(w, NULL);
		jw_cpuset(w, "cpus", &n->group[k].cpus);
		jw_str(w, "model", n->group[k].model);
		jw_obj_end(w);
	}
	jw_arr_end(w);
}
