/* SPDX-License-Identifier: MIT */
/* Unit tests of the trace recorder's pure parts: header_page parsing (64- and 32-bit
 * kernels), page trimming with the missed-events flags, tracing_cpumask formatting,
 * instance names and the --trace-* checks. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tap.h"
#include "trace_fs.h"
#include "trace_rec.h"

static const char hp64[] =
	"\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n"
	"\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n"
	"\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n"
	"\tfield: char data;\toffset:16;\tsize:4080;\tsigned:1;\n";

static const char hp32[] =
	"\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n"
	"\tfield: local_t commit;\toffset:8;\tsize:4;\tsigned:1;\n"
	"\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n"
	"\tfield: char data;\toffset:12;\tsize:4084;\tsigned:1;\n";

static void test_layout(void)
{
	struct tfs_page_layout l;
	CHECK(tfs_page_layout_parse(hp64, &l) == 0);
	CHECK_EQ_U(l.commit_off, 8);
	CHECK_EQ_U(l.commit_size, 8);
	CHECK_EQ_U(l.data_off, 16);
	CHECK_EQ_U(tfs_page_size(&l), 4096);
	CHECK(tfs_page_layout_parse(hp32, &l) == 0);
	CHECK_EQ_U(l.commit_size, 4);
	CHECK_EQ_U(l.data_off, 12);
	CHECK_EQ_U(tfs_page_size(&l), 4096);
	/* a 64 KiB sub-buffer */
	char big[sizeof(hp64) + 8];
	snprintf(big, sizeof(big), "%.*ssize:65520;\tsigned:1;\n", (int)(strstr(hp64, "size:4080") - hp64), hp64);
	CHECK(tfs_page_layout_parse(big, &l) == 0);
	CHECK_EQ_U(tfs_page_size(&l), 65536);
	/* missing fields, nonsense sizes */
	CHECK(tfs_page_layout_parse("", &l) == -EINVAL);
	CHECK(tfs_page_layout_parse("\tfield: u64 timestamp;\toffset:0;\tsize:8;\n", &l) == -EINVAL);
	CHECK(tfs_page_layout_parse("\tfield: u64 timestamp;\toffset:0;\tsize:8;\n"
				    "\tfield: local_t commit;\toffset:8;\tsize:3;\n"
				    "\tfield: char data;\toffset:16;\tsize:4080;\n", &l) == -EINVAL);
	CHECK(tfs_page_layout_parse("\tfield: u64 timestamp;\toffset:0;\tsize:8;\n"
				    "\tfield: local_t commit;\toffset:8;\tsize:8;\n"
				    "\tfield: char data;\toffset:4;\tsize:4080;\n", &l) == -EINVAL);
}

static void put_commit(unsigned char *page, const struct tfs_page_layout *l, uint64_t v)
{
	if (l->commit_size == 8)
		memcpy(page + l->commit_off, &v, 8);
	else {
		uint32_t w = (uint32_t)v;
		memcpy(page + l->commit_off, &w, 4);
	}
}

static void test_trim(void)
{
	unsigned char page[4096];
	struct tfs_page_layout l;
	const char *texts[] = { hp64, hp32 };
	for (int k = 0; k < 2; k++) {
		CHECK(tfs_page_layout_parse(texts[k], &l) == 0);
		memset(page, 0xab, sizeof(page));
		put_commit(page, &l, 100);
		CHECK_EQ_U(tfs_page_trim(page, sizeof(page), &l), l.data_off + 100);
		/* events were lost before the page, count not stored: the length alone */
		put_commit(page, &l, 100 | TFS_MISSED_EVENTS);
		CHECK_EQ_U(tfs_page_trim(page, sizeof(page), &l), l.data_off + 100);
		/* the count stored after the data: one more word */
		put_commit(page, &l, 100 | TFS_MISSED_EVENTS | TFS_MISSED_STORED);
		CHECK_EQ_U(tfs_page_trim(page, sizeof(page), &l), l.data_off + 100 + l.commit_size);
		/* never beyond what was read */
		put_commit(page, &l, 4000);
		CHECK_EQ_U(tfs_page_trim(page, 200, &l), 200);
		CHECK_EQ_U(tfs_page_trim(page, l.data_off - 1, &l), 0);
		put_commit(page, &l, 0);
		CHECK_EQ_U(tfs_page_trim(page, sizeof(page), &l), l.data_off);
	}
}

static int mask_is(const int *cpus, size_t n, int ncpus, const char *want)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	for (size_t i = 0; i < n; i++)
		CPU_SET(cpus[i], &s);
	char out[512];
	tfs_cpumask_format(&s, ncpus, out, sizeof(out));
	if (strcmp(out, want) != 0) {
		fprintf(stderr, "mask: got %s, want %s\n", out, want);
		return 0;
	}
	return 1;
}

static void test_cpumask(void)
{
	CHECK(mask_is((int[]){ 1 }, 1, 2, "2"));
	CHECK(mask_is((int[]){ 0, 1 }, 2, 2, "3"));
	CHECK(mask_is((int[]){ 3, 7 }, 2, 8, "88"));
	CHECK(mask_is((int[]){ 31 }, 1, 32, "80000000"));
	CHECK(mask_is((int[]){ 32 }, 1, 33, "1,00000000"));
	CHECK(mask_is((int[]){ 0, 64 }, 2, 65, "1,00000000,00000001"));
	CHECK(mask_is((int[]){ 5 }, 1, 96, "0,00000000,00000020"));
}

static void test_names(void)
{
	CHECK(tfs_name_ok("rtlab-123"));
	CHECK(tfs_name_ok("a_b.c"));
	CHECK(!tfs_name_ok(""));
	CHECK(!tfs_name_ok("."));
	CHECK(!tfs_name_ok(".."));
	CHECK(!tfs_name_ok("a/b"));
	CHECK(!tfs_name_ok("a b"));
	char long_name[80];
	memset(long_name, 'x', 65);
	long_name[65] = '\0';
	CHECK(!tfs_name_ok(long_name));
	CHECK(!tfs_instance_path("/tmp/instances/x"));
}

static void test_check(void)
{
	char dir[] = "/tmp/rtlab-trace-check-XXXXXX", err[512], path[PATH_MAX];
	CHECK(mkdtemp(dir) != NULL);
	cpu_set_t online;
	CPU_ZERO(&online);
	CPU_SET(0, &online);
	snprintf(path, sizeof(path), "%s/new", dir);
	struct trace_opts o = { .dir = path, .journal_dir = "/run/rtlab", .buffer_kb = 4096,
				.limit_mb = 128, .reader_cpu = -1 };
	CHECK(trace_rec_check(&o, &online, err, sizeof(err)) == 0);
	o.dir = dir;
	CHECK(tap_refused(trace_rec_check(&o, &online, err, sizeof(err)), err, "exists already"));
	snprintf(path, sizeof(path), "%s/missing/new", dir);
	o.dir = path;
	CHECK(tap_refused(trace_rec_check(&o, &online, err, sizeof(err)), err, "parent directory"));
	snprintf(path, sizeof(path), "%s/new", dir);
	o.events = "sched/sched_switch,bad";
	CHECK(tap_refused(trace_rec_check(&o, &online, err, sizeof(err)), err, "'bad'"));
	o.events = "sched/sched_switch,a/b/c";
	CHECK(tap_refused(trace_rec_check(&o, &online, err, sizeof(err)), err, "SYSTEM/NAME"));
	o.events = "sched/sched_switch,";
	CHECK(tap_refused(trace_rec_check(&o, &online, err, sizeof(err)), err, "SYSTEM/NAME"));
	o.events = "irq/irq_handler_entry";
	CHECK(tap_refused(trace_rec_check(&o, &online, err, sizeof(err)), err, "sched/sched_switch"));
	o.events = "irq/irq_handler_entry,sched/sched_switch,osnoise/*";
	CHECK(trace_rec_check(&o, &online, err, sizeof(err)) == 0);
	o.events = "sched/*";
	CHECK(trace_rec_check(&o, &online, err, sizeof(err)) == 0);
	o.events = NULL;
	o.instance = "../x";
	CHECK(tap_refused(trace_rec_check(&o, &online, err, sizeof(err)), err, "--trace-instance"));
	o.instance = NULL;
	o.tracer = "time rlat";
	CHECK(tap_refused(trace_rec_check(&o, &online, err, sizeof(err)), err, "--trace-tracer"));
	o.tracer = NULL;
	o.journal_dir = "run/rtlab";
	CHECK(tap_refused(trace_rec_check(&o, &online, err, sizeof(err)), err, "absolute"));
	o.journal_dir = "/run/rtlab";
	o.reader_cpu = 1;
	CHECK(tap_refused(trace_rec_check(&o, &online, err, sizeof(err)), err, "not online"));
	/* the default list names sched_switch and parses */
	CHECK(strstr(trace_default_events, "sched/sched_switch") == trace_default_events);
	rmdir(dir);
}

int main(void)
{
	test_layout();
	test_trim();
	test_cpumask();
	test_names();
	test_check();
	return tap_done("trace_fs");
}
