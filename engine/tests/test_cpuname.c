/* SPDX-License-Identifier: MIT */
/* Unit tests: core names from /proc/cpuinfo texts of x86, arm64 (one cluster and
 * big.LITTLE), armv7 (new and old layout) and PowerPC; the bounded reader. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpuname.h"
#include "tap.h"

static void parse(const char *text, struct cpunames *n)
{
	cpuname_parse(text, strlen(text), n);
}

/* The CPUs of group k as "0-3"-style text, for comparisons. */
static const char *cpus_of(const struct cpunames *n, size_t k)
{
	static char buf[256];
	size_t used = 0;
	buf[0] = '\0';
	for (int c = 0; c < CPU_SETSIZE; c++) {
		if (!CPU_ISSET(c, &n->group[k].cpus))
			continue;
		int e = c;
		while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, &n->group[k].cpus))
			e++;
		used += (size_t)snprintf(buf + used, sizeof(buf) - used, "%s%d", used ? "," : "", c);
		if (e > c)
			used += (size_t)snprintf(buf + used, sizeof(buf) - used, "-%d", e);
		c = e;
	}
	return buf;
}

/* An arm64 block as the kernel prints it (no "model name"). */
static char *arm64_block(char *at, int cpu, const char *part)
{
	return at + sprintf(at,
			    "processor\t: %d\n"
			    "BogoMIPS\t: 48.00\n"
			    "Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp "
			    "asimdhp cpuid asimdrdm lrcpc dcpop asimddp\n"
			    "CPU implementer\t: 0x41\n"
			    "CPU architecture: 8\n"
			    "CPU variant\t: 0x2\n"
			    "CPU part\t: %s\n"
			    "CPU revision\t: 0\n\n", cpu, part);
}

static void test_x86(void)
{
	char text[4096], *at = text;
	for (int cpu = 0; cpu < 2; cpu++)
		at += sprintf(at,
			      "processor\t: %d\n"
			      "vendor_id\t: GenuineIntel\n"
			      "cpu family\t: 6\n"
			      "model\t\t: 85\n"
			      "model name\t: Intel(R) Xeon(R) Gold 6230 CPU @ 2.10GHz\n"
			      "stepping\t: 7\n"
			      "cpu MHz\t\t: 2095.078\n"
			      "cache size\t: 28160 KB\n"
			      "cpu cores\t: 2\n"
			      "flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic hypervisor\n"
			      "bogomips\t: 4190.15\n"
			      "power management:\n\n", cpu);
	struct cpunames n;
	parse(text, &n);
	CHECK_EQ_U(n.ngroups, 1);
	CHECK(strcmp(n.summary, "Intel(R) Xeon(R) Gold 6230 CPU @ 2.10GHz") == 0);
	CHECK(strcmp(cpus_of(&n, 0), "0-1") == 0);
	CHECK_EQ_U(n.group[0].count, 2);
}

static void test_a53(void)
{
	char text[4096], *at = text;
	for (int cpu = 0; cpu < 4; cpu++)
		at = arm64_block(at, cpu, "0xd03");
	struct cpunames n;
	parse(text, &n);
	CHECK_EQ_U(n.ngroups, 1);
	CHECK(strcmp(n.summary, "Cortex-A53") == 0);
	CHECK(strcmp(n.group[0].model, "Cortex-A53") == 0);
	CHECK(strcmp(cpus_of(&n, 0), "0-3") == 0);
}

static void test_big_little(void)
{
	char text[8192], *at = text;
	for (int cpu = 0; cpu < 8; cpu++)
		at = arm64_block(at, cpu, cpu < 4 ? "0xd05" : "0xd0b");
	struct cpunames n;
	parse(text, &n);
	CHECK_EQ_U(n.ngroups, 2);
	CHECK(strcmp(n.summary, "4x Cortex-A55 + 4x Cortex-A76") == 0);
	CHECK(strcmp(n.group[0].model, "Cortex-A55") == 0);
	CHECK(strcmp(cpus_of(&n, 0), "0-3") == 0);
	CHECK(strcmp(n.group[1].model, "Cortex-A76") == 0);
	CHECK(strcmp(cpus_of(&n, 1), "4-7") == 0);

	/* the header's members */
	struct jsonw w;
	jw_init(&w);
	jw_obj_begin(&w, NULL);
	cpuname_write(&w, &n, true);
	jw_obj_end(&w);
	const char *want = "{\"cpu_model\":\"4x Cortex-A55 + 4x Cortex-A76\",\"cpu_models\":["
			   "{\"cpus\":[0,1,2,3],\"model\":\"Cortex-A55\"},"
			   "{\"cpus\":[4,5,6,7],\"model\":\"Cortex-A76\"}]}";
	CHECK(strlen(want) == w.len && memcmp(w.buf, want, w.len) == 0);
	jw_reset(&w);
	jw_obj_begin(&w, NULL);
	cpuname_write(&w, &n, false);	/* cpuinfo unreadable */
	jw_obj_end(&w);
	want = "{\"cpu_model\":null,\"cpu_models\":null}";
	CHECK(strlen(want) == w.len && memcmp(w.buf, want, w.len) == 0);
	jw_free(&w);

	/* RK3399-like: 4 little, 2 big; and clusters that interleave */
	at = text;
	for (int cpu = 0; cpu < 6; cpu++)
		at = arm64_block(at, cpu, cpu < 4 ? "0xd03" : "0xd08");
	parse(text, &n);
	CHECK(strcmp(n.summary, "4x Cortex-A53 + 2x Cortex-A72") == 0);
	at = text;
	for (int cpu = 0; cpu < 4; cpu++)
		at = arm64_block(at, cpu, cpu % 2 ? "0xd0b" : "0xd05");
	parse(text, &n);
	CHECK_EQ_U(n.ngroups, 2);
	CHECK(strcmp(cpus_of(&n, 0), "0,2") == 0 && strcmp(cpus_of(&n, 1), "1,3") == 0);
	CHECK(strcmp(n.summary, "2x Cortex-A55 + 2x Cortex-A76") == 0);
}

static void test_armv7_a9(void)
{
	char text[4096], *at = text;
	for (int cpu = 0; cpu < 2; cpu++)
		at += sprintf(at,
			      "processor\t: %d\n"
			      "model name\t: ARMv7 Processor rev 0 (v7l)\n"
			      "BogoMIPS\t: 1990.65\n"
			      "Features\t: half thumb fastmult vfp edsp neon vfpv3 tls vfpd32\n"
			      "CPU implementer\t: 0x41\n"
			      "CPU architecture: 7\n"
			      "CPU variant\t: 0x3\n"
			      "CPU part\t: 0xc09\n"
			      "CPU revision\t: 0\n\n", cpu);
	sprintf(at, "Hardware\t: Freescale i.MX6 Quad/DualLite (Device Tree)\n"
		    "Revision\t: 0000\n"
		    "Serial\t\t: 0000000000000000\n");
	struct cpunames n;
	parse(text, &n);
	CHECK_EQ_U(n.ngroups, 1);
	CHECK(strcmp(n.summary, "Cortex-A9") == 0);	/* the part, not "ARMv7 Processor" */
	CHECK(strcmp(cpus_of(&n, 0), "0-1") == 0);

	/* Kernels before 3.8 printed the ids once, after the last processor line. */
	const char *old = "Processor\t: ARMv7 Processor rev 10 (v7l)\n"
			  "processor\t: 0\n"
			  "BogoMIPS\t: 790.52\n\n"
			  "processor\t: 1\n"
			  "BogoMIPS\t: 790.52\n\n"
			  "Features\t: swp half thumb fastmult vfp edsp neon vfpv3 tls\n"
			  "CPU implementer\t: 0x41\n"
			  "CPU architecture: 7\n"
			  "CPU variant\t: 0x2\n"
			  "CPU part\t: 0xc09\n"
			  "CPU revision\t: 10\n\n"
			  "Hardware\t: Freescale i.MX 6Quad SABRE Smart Device Board\n";
	parse(old, &n);
	CHECK_EQ_U(n.ngroups, 1);
	CHECK(strcmp(n.summary, "Cortex-A9") == 0);
	CHECK(strcmp(cpus_of(&n, 0), "0-1") == 0);
}

static void test_powerpc(void)
{
	char text[4096], *at = text;
	for (int cpu = 0; cpu < 4; cpu++)
		at += sprintf(at,
			      "processor\t: %d\n"
			      "cpu\t\t: e6500\n"
			      "clock\t\t: 1666.666660MHz\n"
			      "revision\t: 2.0 (pvr 8040 0120)\n\n", cpu);
	sprintf(at, "total CPUs\t: 4\n"
		    "timebase\t: 41666666\n"
		    "platform\t: CoreNet Generic\n"
		    "model\t\t: fsl,T4240QDS\n"
		    "Memory\t\t: 4096 MB\n");
	struct cpunames n;
	parse(text, &n);
	CHECK_EQ_U(n.ngroups, 1);
	CHECK(strcmp(n.summary, "e6500") == 0);
	CHECK(strcmp(cpus_of(&n, 0), "0-3") == 0);

	parse("processor\t: 0\ncpu\t\t: POWER9 (raw), altivec supported\nclock\t\t: 2300MHz\n"
	      "revision\t: 2.2 (pvr 004e 1202)\n\n"
	      "processor\t: 1\ncpu\t\t: POWER9 (raw), altivec supported\nclock\t\t: 2300MHz\n",
	      &n);
	CHECK(strcmp(n.summary, "POWER9 (raw)") == 0);
	CHECK_EQ_U(n.group[0].count, 2);
}

static void test_unknown_and_others(void)
{
	char text[4096], *at = text;
	at = arm64_block(at, 0, "0xd99");
	struct cpunames n;
	parse(text, &n);
	CHECK(strcmp(n.summary, "ARM implementer 0x41 part 0xd99") == 0);

	parse("processor\t: 0\nCPU implementer\t: 0x43\nCPU part\t: 0x0af\n", &n);
	CHECK(strcmp(n.summary, "Cavium ThunderX2") == 0);
	parse("processor\t: 0\nCPU implementer\t: 0x4e\nCPU part\t: 0x004\n", &n);
	CHECK(strcmp(n.summary, "NVIDIA Carmel") == 0);
	parse("processor\t: 0\nCPU implementer\t: 0x46\nCPU part\t: 0x001\n", &n);
	CHECK(strcmp(n.summary, "Fujitsu A64FX") == 0);
	parse("processor\t: 0\nCPU implementer\t: 0x99\nCPU part\t: 0x001\n", &n);
	CHECK(strcmp(n.summary, "ARM implementer 0x99 part 0x001") == 0);
	CHECK(cpuname_arm(0x41, 0xd0c) && strcmp(cpuname_arm(0x41, 0xd0c), "Neoverse N1") == 0);
	CHECK(cpuname_arm(0x41, 0xfff) == NULL);

	/* MIPS and RISC-V name their cores per processor too */
	parse("system type\t\t: MediaTek MT7621 ver:1 eco:3\nmachine\t\t\t: ZBT WG3526\n"
	      "processor\t\t: 0\ncpu model\t\t: MIPS 1004Kc V2.15\nBogoMIPS\t\t: 586.13\n", &n);
	CHECK(strcmp(n.summary, "MIPS 1004Kc V2.15") == 0);
	parse("processor\t: 0\nhart\t\t: 1\nisa\t\t: rv64imafdc\nmmu\t\t: sv39\n"
	      "uarch\t\t: sifive,u74-mc\n", &n);
	CHECK(strcmp(n.summary, "sifive,u74-mc") == 0);

	/* nothing per CPU: the machine's line, and no groups */
	parse("processor\t: 0\nBogoMIPS\t: 38.40\n\nHardware\t: BCM2835\n", &n);
	CHECK_EQ_U(n.ngroups, 0);
	CHECK(strcmp(n.summary, "BCM2835") == 0);
	parse("", &n);
	CHECK_EQ_U(n.ngroups, 0);
	CHECK(n.summary[0] == '\0');
	/* a processor number beyond CPU_SETSIZE, a garbled one, a line without a colon */
	parse("processor\t: 99999\nmodel name\t: Far\n\nprocessor\t: x\nmodel name\t: Bad\n\n"
	      "garbage line\nprocessor\t: 2\nmodel name\t: Near\n", &n);
	CHECK_EQ_U(n.ngroups, 1);
	CHECK(strcmp(n.summary, "Near") == 0 && strcmp(cpus_of(&n, 0), "2") == 0);
	/* not NUL-terminated: only len bytes are read */
	const char *t = "processor\t: 0\nmodel name\t: Abc-TAIL";
	cpuname_parse(t, strlen(t) - 5, &n);
	CHECK(strcmp(n.summary, "Abc") == 0);
}

/* A file larger than the limit: read up to it, whole lines only, no error. */
static void test_read_bounded(void)
{
	char path[] = "/tmp/rtlab-test-cpuinfo-XXXXXX";
	FILE *f = tap_tmpfile(path);
	if (!f)
		return;
	size_t written = 0;
	int cpu = 0;
	char block[512];
	while (written <= CPUNAME_READ_MAX + 4096) {
		int l = snprintf(block, sizeof(block), "processor\t: %d\nmodel name\t: Core %s\n"
				 "flags\t\t: %0200d\n\n", cpu, cpu < 64 ? "Big" : "Small", 0);
		fwrite(block, 1, (size_t)l, f);
		written += (size_t)l;
		cpu = (cpu + 1) % 1024;
	}
	fclose(f);
	struct cpunames n;
	CHECK(cpuname_read(path, &n) == 0);
	CHECK_EQ_U(n.ngroups, 2);
	CHECK(strcmp(n.summary, "64x Core Big + 960x Core Small") == 0);
	unlink(path);
	CHECK(cpuname_read(path, &n) == -ENOENT);
	CHECK(n.summary[0] == '\0' && n.ngroups == 0);
}

int main(void)
{
	test_x86();
	test_a53();
	test_big_little();
	test_armv7_a9();
	test_powerpc();
	test_unknown_and_others();
	test_read_bounded();
	return tap_done("cpuname");
}
