/* SPDX-License-Identifier: MIT */
/* Unit tests of the gzip inflater and of the preemption-model decision. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "inflate.h"
#include "preempt.h"
#include "tap.h"

/* Made with Python's zlib: one stored block; fixed Huffman codes behind a header
 * with FEXTRA, FCOMMENT and FHCRC; dynamic codes with FNAME; and a stream of a
 * block, an empty stored block (sync flush) and a final block. */
static const uint8_t gz_stored[] = {
	0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x01, 0x12,
	0x00, 0xed, 0xff, 0x73, 0x74, 0x6f, 0x72, 0x65, 0x64, 0x20, 0x62, 0x6c,
	0x6f, 0x63, 0x6b, 0x20, 0x74, 0x65, 0x78, 0x74, 0x0a, 0x16, 0x76, 0x33,
	0xf5, 0x12, 0x00, 0x00, 0x00,
};
static const uint8_t gz_fixed[] = {
	0x1f, 0x8b, 0x08, 0x16, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x02, 0x00,
	0x61, 0x62, 0x63, 0x00, 0x5f, 0x2f, 0x73, 0xf6, 0xf7, 0x73, 0xf3, 0x74,
	0x8f, 0x0f, 0x08, 0x72, 0x75, 0xf5, 0x0d, 0x08, 0xb1, 0xad, 0xe4, 0x72,
	0x46, 0x17, 0x00, 0x00, 0x5f, 0x0d, 0x63, 0x58, 0x22, 0x00, 0x00, 0x00,
};
static const uint8_t gz_dynamic[] = {
	0x1f, 0x8b, 0x08, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x63, 0x6f,
	0x6e, 0x66, 0x69, 0x67, 0x00, 0x7d, 0xd2, 0x3d, 0x4e, 0xc3, 0x40, 0x10,
	0x05, 0xe0, 0x9e, 0x53, 0x58, 0xca, 0x05, 0xb2, 0xf3, 0xb3, 0xeb, 0x14,
	0x14, 0x28, 0x31, 0xc1, 0x45, 0xd6, 0x16, 0x72, 0x61, 0xaa, 0xa9, 0x28,
	0x68, 0xa0, 0x48, 0x9a, 0xdc, 0x1e, 0x90, 0x12, 0x09, 0xec, 0x37, 0xd3,
	0xce, 0x6a, 0xdf, 0xee, 0x7c, 0x7a, 0x9b, 0x66, 0x3f, 0xd4, 0xe7, 0xfe,
	0x68, 0xd3, 0x4b, 0x5f, 0x8f, 0xb6, 0x6d, 0x3e, 0xce, 0xcd, 0xe7, 0xd7,
	0xa5, 0x39, 0xbf, 0x5f, 0x1e, 0x6e, 0x27, 0xc3, 0x38, 0xf5, 0x43, 0xb5,
	0x62, 0xf3, 0xe3, 0x75, 0x31, 0x4b, 0x62, 0xf3, 0xef, 0x74, 0xf3, 0x3f,
	0x85, 0xfd, 0x14, 0x6a, 0x7f, 0x6e, 0xcc, 0xeb, 0x24, 0x56, 0x5b, 0xe7,
	0x64, 0x3f, 0x47, 0x76, 0x86, 0x52, 0x6c, 0x46, 0xff, 0xd9, 0xf9, 0x39,
	0xa9, 0xd8, 0x2a, 0x85, 0xc4, 0x40, 0x48, 0x22, 0x3f, 0x85, 0x5b, 0x43,
	0x4b, 0x89, 0xde, 0x97, 0x5d, 0x66, 0xa9, 0x9f, 0x95, 0x91, 0x33, 0x43,
	0xe7, 0xd4, 0x06, 0xd0, 0x65, 0x01, 0x3d, 0xbe, 0x76, 0xdd, 0x69, 0x9c,
	0xec, 0xf0, 0x56, 0x9f, 0x4e, 0xfd, 0x7e, 0x7d, 0x50, 0x87, 0xda, 0xfd,
	0x7d, 0xe3, 0x36, 0x0f, 0x9e, 0xc0, 0xda, 0x24, 0x01, 0x77, 0x06, 0xdc,
	0x8c, 0xb8, 0xa9, 0x04, 0xdc, 0x05, 0x73, 0x8b, 0xc3, 0xcd, 0x41, 0xad,
	0x15, 0x71, 0x13, 0xae, 0x75, 0xd4, 0xeb, 0xec, 0xf4, 0x9a, 0x41, 0xaf,
	0x39, 0x2a, 0x76, 0x41, 0xc5, 0x4e, 0x98, 0x9a, 0xa3, 0x66, 0x2b, 0xa0,
	0x26, 0x44, 0x2d, 0x51, 0xb3, 0x33, 0xa6, 0x66, 0x87, 0x5a, 0x82, 0x66,
	0x0b, 0xa2, 0x4e, 0x90, 0x5a, 0xa2, 0x66, 0xab, 0x43, 0x4d, 0x80, 0x5a,
	0x53, 0xf0, 0x9f, 0x8c, 0xa8, 0xb7, 0x98, 0x5a, 0xa3, 0x56, 0x0b, 0xa0,
	0x4e, 0x88, 0x5a, 0xa3, 0x56, 0x2b, 0xa6, 0xa6, 0xfb, 0xba, 0xdf, 0xce,
	0x8c, 0xfe, 0xea, 0xac, 0x05, 0x00, 0x00,
};
static const char gz_dynamic_text[] =
	"# CONFIG_THING_0 is not set\n"
	"CONFIG_OPTION_7_X=y\n"
	"CONFIG_OPTION_14_XX=y\n"
	"# CONFIG_THING_3 is not set\n"
	"CONFIG_OPTION_28_XXXX=y\n"
	"CONFIG_OPTION_35_=y\n"
	"# CONFIG_THING_6 is not set\n"
	"CONFIG_OPTION_49_XX=y\n"
	"CONFIG_OPTION_3_XXX=y\n"
	"# CONFIG_THING_9 is not set\n"
	"CONFIG_OPTION_17_=y\n"
	"CONFIG_OPTION_24_X=y\n"
	"# CONFIG_THING_12 is not set\n"
	"CONFIG_OPTION_38_XXX=y\n"
	"CONFIG_OPTION_45_XXXX=y\n"
	"# CONFIG_THING_15 is not set\n"
	"CONFIG_OPTION_6_X=y\n"
	"CONFIG_OPTION_13_XX=y\n"
	"# CONFIG_THING_18 is not set\n"
	"CONFIG_OPTION_27_XXXX=y\n"
	"CONFIG_PREEMPT_DYNAMIC=y\n"
	"CONFIG_PREEMPT_NONE=y\n"
	"# CONFIG_PREEMPT is not set\n"
	"CONFIG_OPTION_2_XXX=y\n"
	"# CONFIG_THING_24 is not set\n"
	"CONFIG_OPTION_16_=y\n"
	"CONFIG_OPTION_23_X=y\n"
	"# CONFIG_THING_27 is not set\n"
	"CONFIG_OPTION_37_XXX=y\n"
	"CONFIG_OPTION_44_XXXX=y\n"
	"# CONFIG_THING_30 is not set\n"
	"CONFIG_OPTION_5_X=y\n"
	"CONFIG_OPTION_12_XX=y\n"
	"# CONFIG_THING_33 is not set\n"
	"CONFIG_OPTION_26_XXXX=y\n"
	"CONFIG_OPTION_33_=y\n"
	"# CONFIG_THING_36 is not set\n"
	"CONFIG_OPTION_47_XX=y\n"
	"CONFIG_OPTION_1_XXX=y\n"
	"# CONFIG_THING_39 is not set\n"
	"CONFIG_OPTION_15_=y\n"
	"CONFIG_OPTION_22_X=y\n"
	"# CONFIG_THING_42 is not set\n"
	"CONFIG_OPTION_36_XXX=y\n"
	"CONFIG_OPTION_43_XXXX=y\n"
	"# CONFIG_THING_45 is not set\n"
	"CONFIG_OPTION_4_X=y\n"
	"CONFIG_OPTION_11_XX=y\n"
	"# CONFIG_THING_48 is not set\n"
	"CONFIG_OPTION_25_XXXX=y\n"
	"CONFIG_OPTION_32_=y\n"
	"# CONFIG_THING_51 is not set\n"
	"CONFIG_OPTION_46_XX=y\n"
	"CONFIG_OPTION_0_XXX=y\n"
	"# CONFIG_THING_54 is not set\n"
	"CONFIG_OPTION_14_=y\n"
	"CONFIG_OPTION_21_X=y\n"
	"# CONFIG_THING_57 is not set\n"
	"CONFIG_OPTION_35_XXX=y\n"
	"CONFIG_OPTION_42_XXXX=y\n";
static const uint8_t gz_multi[] = {
	0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x4a, 0xcb,
	0x2c, 0x2a, 0x2e, 0x51, 0x28, 0x48, 0x2c, 0x2a, 0xd1, 0x51, 0x48, 0xc3,
	0xca, 0xe6, 0x02, 0x00, 0x00, 0x00, 0xff, 0xff, 0x2b, 0x4e, 0x4d, 0xce,
	0xcf, 0x4b, 0x81, 0xb0, 0x01, 0x75, 0xdd, 0x3b, 0xa7, 0x2f, 0x00, 0x00,
	0x00,
};

static int eq(const char *a, const char *b)
{
	return a && strcmp(a, b) == 0;
}

static int inflates_to(const uint8_t *gz, size_t len, const char *want)
{
	char *out;
	size_t n;
	if (gz_inflate(gz, len, 1 << 20, &out, &n) != 0)
		return 0;
	int ok = n == strlen(want) && memcmp(out, want, n) == 0 && out[n] == '\0';
	free(out);
	return ok;
}

static int inflate_err(const uint8_t *gz, size_t len, size_t max)
{
	char *out = (char *)1;
	size_t n = 1;
	int r = gz_inflate(gz, len, max, &out, &n);
	if (r == 0)
		free(out);
	else if (out != NULL || n != 0)
		return 1;	/* outputs must be cleared on error */
	return r;
}

static void test_inflate(void)
{
	CHECK(inflates_to(gz_stored, sizeof(gz_stored), "stored block text\n"));
	CHECK(inflates_to(gz_fixed, sizeof(gz_fixed), "CONFIG_PREEMPT=y\nCONFIG_PREEMPT=y\n"));
	CHECK(inflates_to(gz_dynamic, sizeof(gz_dynamic), gz_dynamic_text));
	CHECK(inflates_to(gz_multi, sizeof(gz_multi),
			  "first part, first part, first part\nsecond part\n"));
	CHECK_EQ_U(gz_crc32(0, (const uint8_t *)"123456789", 9), 0xcbf43926u);

	uint8_t bad[sizeof(gz_dynamic)];
	memcpy(bad, gz_dynamic, sizeof(bad));
	bad[sizeof(bad) - 8] ^= 1;	/* CRC */
	CHECK(inflate_err(bad, sizeof(bad), 1 << 20) == -EINVAL);
	memcpy(bad, gz_dynamic, sizeof(bad));
	bad[sizeof(bad) - 4] ^= 1;	/* length */
	CHECK(inflate_err(bad, sizeof(bad), 1 << 20) == -EINVAL);
	memcpy(bad, gz_dynamic, sizeof(bad));
	bad[0] = 0x1e;	/* magic */
	CHECK(inflate_err(bad, sizeof(bad), 1 << 20) == -EINVAL);
	for (size_t cut = 0; cut < sizeof(gz_dynamic); cut += 7)	/* truncated anywhere */
		CHECK(inflate_err(gz_dynamic, cut, 1 << 20) == -EINVAL);
	memcpy(bad, gz_dynamic, sizeof(bad));
	for (size_t i = 20; i < sizeof(bad) - 8; i += 5)	/* corrupt data: an error, never a crash */
		bad[i] ^= 0x5a;
	CHECK(inflate_err(bad, sizeof(bad), 1 << 20) != 0);
	CHECK(inflate_err(gz_dynamic, sizeof(gz_dynamic), 100) == -E2BIG);
	CHECK(inflate_err(gz_dynamic, sizeof(gz_dynamic), strlen(gz_dynamic_text)) == 0);
}

static void test_parsers(void)
{
	CHECK(eq(preempt_parse_live("none voluntary (full) lazy"), "full"));
	CHECK(eq(preempt_parse_live("(none) voluntary full"), "none"));
	CHECK(preempt_parse_live("none voluntary full") == NULL);
	CHECK(preempt_parse_live("(bogus) full") == NULL);
	CHECK(preempt_parse_live(NULL) == NULL);

	CHECK(eq(preempt_parse_cmdline("quiet preempt=none preempt=full"), "full"));
	CHECK(eq(preempt_parse_cmdline("preempt=voluntary"), "voluntary"));
	CHECK(preempt_parse_cmdline("quiet -- preempt=full") == NULL);	/* init's argument */
	CHECK(preempt_parse_cmdline("xpreempt=full nopreempt=none") == NULL);
	CHECK(preempt_parse_cmdline("preempt=fullish") == NULL);
	CHECK(preempt_parse_cmdline("preempt=") == NULL);
	CHECK(preempt_parse_cmdline(NULL) == NULL);

	const char *sym = NULL;
	const char *cfg = "CONFIG_PREEMPT_BUILD=y\nCONFIG_PREEMPT_NONE=y\n# CONFIG_PREEMPT is not set\n"
			  "CONFIG_PREEMPTION=y\nCONFIG_PREEMPT_DYNAMIC=y\n";
	CHECK(eq(preempt_config_choice(cfg, &sym), "none") &&
	      strcmp(sym, "PREEMPT_NONE") == 0);
	CHECK(preempt_config_set(cfg, "PREEMPT_DYNAMIC") && !preempt_config_set(cfg, "PREEMPT"));
	CHECK(!preempt_config_set(cfg, "PREEMPT_RT") && !preempt_config_set(NULL, "X"));
	CHECK(eq(preempt_config_choice("CONFIG_PREEMPT=y", &sym), "full"));
	CHECK(eq(preempt_config_choice("\n\nCONFIG_PREEMPT_LAZY=y\r\n", &sym), "lazy"));
	CHECK(preempt_config_choice("CONFIG_PREEMPT=m\nCONFIG_PREEMPT_NONEX=y\n", &sym) == NULL);
}

static const char *decide(const struct preempt_inputs *in, struct preempt_info *p)
{
	preempt_decide(in, p);
	return p->model ? p->model : "unknown";
}

static void test_decide(void)
{
	const char *dyn_none = "CONFIG_PREEMPT_DYNAMIC=y\nCONFIG_PREEMPT_NONE=y\n";
	const char *dyn_v = "#1 SMP PREEMPT_DYNAMIC Debian";
	struct preempt_info p;
	/* this machine: dynamic, no debugfs, no preempt= -> the config default */
	struct preempt_inputs in = { .version = dyn_v, .cmdline = "quiet -- preempt=full",
				     .live_error = "debugfs not mounted", .config = dyn_none,
				     .config_path = "/proc/config.gz" };
	CHECK(strcmp(decide(&in, &p), "none") == 0 && p.dynamic == 1);
	CHECK(strcmp(p.source, "kernel config default: /proc/config.gz (CONFIG_PREEMPT_NONE=y)") == 0);
	CHECK(strcmp(p.live_error, "debugfs not mounted") == 0);
	/* the boot parameter beats the default */
	in.cmdline = "quiet preempt=full";
	CHECK(strcmp(decide(&in, &p), "full") == 0 &&
	      strcmp(p.source, "/proc/cmdline (preempt=full)") == 0);
	/* the live mode beats both */
	in.live = "none (voluntary) full lazy";
	CHECK(strcmp(decide(&in, &p), "voluntary") == 0 &&
	      strcmp(p.source, "/sys/kernel/debug/sched/preempt") == 0 && p.live_error[0] == 0);
	/* dynamic from the config alone; nothing readable -> unknown, with the reason */
	struct preempt_inputs bare = { .config = "CONFIG_PREEMPT_DYNAMIC=y\n",
				       .live_error = "EPERM" };
	CHECK(strcmp(decide(&bare, &p), "unknown") == 0 && p.dynamic == 1 &&
	      p.source[0] == 0 && strcmp(p.live_error, "EPERM") == 0);
	/* PREEMPT_RT, three ways */
	struct preempt_inputs rt = { .realtime = "1", .version = dyn_v, .config = dyn_none };
	CHECK(strcmp(decide(&rt, &p), "rt") == 0 && strcmp(p.source, "/sys/kernel/realtime") == 0);
	struct preempt_inputs rt2 = { .version = "#1 SMP PREEMPT_RT Fri" };
	CHECK(strcmp(decide(&rt2, &p), "rt") == 0 && strcmp(p.source, "uname -v") == 0 &&
	      p.dynamic == 0);
	struct preempt_inputs rt3 = { .realtime = "0", .config = "CONFIG_PREEMPT_RT=y\n",
				      .config_path = "/boot/config-6.6" };
	CHECK(strcmp(decide(&rt3, &p), "rt") == 0 &&
	      strcmp(p.source, "/boot/config-6.6 (CONFIG_PREEMPT_RT=y)") == 0);
	/* not dynamic: the config, else uname -v's PREEMPT word, else unknown */
	struct preempt_inputs fixed = { .version = "#1 SMP PREEMPT Mon", .cmdline = "preempt=none",
					.config = "CONFIG_PREEMPT_VOLUNTARY=y\n" };
	CHECK(strcmp(decide(&fixed, &p), "voluntary") == 0 && p.dynamic == 0 &&
	      strcmp(p.source, "kernel config (CONFIG_PREEMPT_VOLUNTARY=y)") == 0 &&
	      p.live_error[0] == 0);
	fixed.config = NULL;
	CHECK(strcmp(decide(&fixed, &p), "full") == 0 && strcmp(p.source, "uname -v") == 0);
	fixed.version = "#1 SMP PREEMPTX";
	CHECK(strcmp(decide(&fixed, &p), "unknown") == 0 && p.source[0] == 0);
	struct preempt_inputs nothing = { 0 };
	CHECK(strcmp(decide(&nothing, &p), "unknown") == 0 && p.dynamic == -1);
}

int main(void)
{
	test_inflate();
	test_parsers();
	test_decide();
	return tap_done("preempt");
}
