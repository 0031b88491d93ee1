/* SPDX-License-Identifier: MIT */
/* Unit tests of the flight recorder's pure parts (trace_flight.h): the token bucket, the
 * trigger arithmetic, the ring's aging and selection, the merging of windows, and the
 * closing of windows into files and lines in a temporary directory. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tap.h"
#include "trace_flight.h"

#define MS NS_PER_MS
#define US NS_PER_US

static void test_bucket(void)
{
	struct tfl_bucket b;
	tfl_bucket_init(&b, 1000, 0);
	CHECK_EQ_U(b.tokens, 10000);		/* a burst of 10 s */
	CHECK(tfl_bucket_take(&b, 0, 9000));
	CHECK(!tfl_bucket_take(&b, 0, 1001));	/* 1000 left */
	CHECK_EQ_U(b.tokens, 1000);		/* a refusal takes nothing */
	CHECK(tfl_bucket_take(&b, NS_PER_SEC / 2, 1500));	/* +500 earned */
	CHECK_EQ_U(b.tokens, 0);
	/* fractions of a byte are carried: 3 x 1/3 s earn 1000 */
	tfl_bucket_init(&b, 1000, 0);
	b.tokens = 0;
	for (int k = 1; k <= 3; k++)
		CHECK(tfl_bucket_take(&b, (uint64_t)k * 333333333u + (k == 3), 0));
	CHECK_EQ_U(b.tokens, 1000);
	/* never above the burst, however long the wait */
	CHECK(tfl_bucket_take(&b, 1000 * NS_PER_SEC, 0));
	CHECK_EQ_U(b.tokens, 10000);
	CHECK(!tfl_bucket_take(&b, 1000 * NS_PER_SEC, 10001));	/* bigger than the burst: never */
	tfl_bucket_refund(&b, 5);
	CHECK_EQ_U(b.tokens, 10000);
	CHECK(tfl_bucket_take(&b, 1000 * NS_PER_SEC, 4000));
	tfl_bucket_refund(&b, 4000);
	CHECK_EQ_U(b.tokens, 10000);
	/* no cap */
	tfl_bucket_init(&b, 0, 0);
	CHECK(tfl_bucket_take(&b, 0, UINT64_MAX));
	/* the largest rate over almost 10 s does not overflow */
	tfl_bucket_init(&b, (uint64_t)TFL_RATE_MAX, 0);
	b.tokens = 0;
	CHECK(tfl_bucket_take(&b, 9 * NS_PER_SEC + NS_PER_SEC / 2, 0));
	CHECK_EQ_U(b.tokens, (uint64_t)TFL_RATE_MAX * 19 / 2);
}

static void test_trigger(void)
{
	struct tfl_trigger t = tfl_trigger_of(2, 1, 1000 * MS, 50 * MS, 300 * US);
	CHECK_EQ_U(t.wake_ns, 1050 * MS);
	CHECK_EQ_U(t.deadline_ns, 1050 * MS - 300 * US);
	CHECK_EQ_U(t.chan, 2);
	CHECK(t.cpu == 1);
	uint64_t a, b;
	tfl_span(&t, 20 * MS, 2 * MS, &a, &b);
	CHECK_EQ_U(a, 1030 * MS - 300 * US);
	CHECK_EQ_U(b, 1052 * MS);
	/* saturation at both ends */
	t = tfl_trigger_of(0, -1, 0, 5, 10);
	CHECK_EQ_U(t.deadline_ns, 0);
	tfl_span(&t, 20 * MS, UINT64_MAX, &a, &b);
	CHECK_EQ_U(a, 0);
	CHECK_EQ_U(b, UINT64_MAX);
}

static void push(struct tfl_ring *r, uint64_t ts, unsigned char fill)
{
	unsigned char page[64];
	memset(page, fill, sizeof(page));
	tfl_ring_push(r, page, 40, ts);
}

static void test_ring(void)
{
	struct tfl_ring r;
	CHECK(tfl_ring_init(&r, 3, 4, 64) == 0);
	size_t first, count;
	bool partial, gone;
	tfl_ring_select(&r, 0, 100, &first, &count, &partial, &gone);
	CHECK_EQ_U(count, 0);
	CHECK(!partial && !gone);
	for (unsigned k = 1; k <= 4; k++)
		push(&r, k * 100, (unsigned char)k);	/* pages at 100, 200, 300, 400 */
	CHECK_EQ_U(r.n, 4);
	CHECK_EQ_U(r.aged, 0);
	/* [250, 320]: the page of 200 (it reaches 300) and the page of 300 */
	tfl_ring_select(&r, 250, 320, &first, &count, &partial, &gone);
	CHECK_EQ_U(first, 1);
	CHECK_EQ_U(count, 2);
	CHECK(!partial && !gone);
	/* the newest page reaches now */
	tfl_ring_select(&r, 5000, 6000, &first, &count, &partial, &gone);
	CHECK_EQ_U(first, 3);
	CHECK_EQ_U(count, 1);
	/* a window between page starts: only the page that covers it */
	tfl_ring_select(&r, 210, 220, &first, &count, &partial, &gone);
	CHECK_EQ_U(first, 1);
	CHECK_EQ_U(count, 1);
	/* full: the oldest ages out, counted once; a page done (written) is not aged */
	tfl_ring_at(&r, 1)->done = true;
	push(&r, 500, 5);
	push(&r, 600, 6);
	CHECK_EQ_U(r.aged, 1);		/* 100 aged, 200 was written */
	CHECK_EQ_U(r.read, 6);
	CHECK_EQ_U(tfl_ring_at(&r, 0)->ts, 300);
	CHECK(tfl_ring_data(&r, 0)[0] == 3 && tfl_ring_data(&r, 3)[39] == 6);
	/* a window that starts before the oldest page held: partial; all before it: gone */
	tfl_ring_select(&r, 150, 350, &first, &count, &partial, &gone);
	CHECK(partial && !gone);
	CHECK_EQ_U(first, 0);
	CHECK_EQ_U(count, 1);
	tfl_ring_select(&r, 50, 150, &first, &count, &partial, &gone);
	CHECK(partial && gone);
	CHECK_EQ_U(count, 0);
	/* the end of the run: what is left and not done ages */
	tfl_ring_at(&r, 2)->done = true;
	tfl_ring_age_all(&r);
	CHECK_EQ_U(r.aged, 4);
	tfl_ring_free(&r);
}

static int new_flight(struct tfl *f, const char *dir, uint64_t rate, size_t pages)
{
	const struct tfl_opts o = { .trigger_ns = 100 * US, .before_ns = 20 * MS, .after_ns = 2 * MS,
				    .rate = rate, .keep_mb = 1 };
	int cpus[2] = { 0, 1 };
	int e = tfl_init(f, &o, dir, cpus, 2, 4096, 0);
	if (e)
		return e;
	/* the tests' rings are smaller than keep_mb */
	for (size_t k = 0; k < 2; k++) {
		tfl_ring_free(&f->rings[k]);
		e = tfl_ring_init(&f->rings[k], cpus[k], pages, 64);
		if (e)
			return e;
	}
	return 0;
}

static struct tfl_trigger trig(uint64_t seq, int cpu, uint64_t wake_ms, uint64_t value_us)
{
	struct tfl_trigger t = tfl_trigger_of((uint32_t)cpu, cpu, 0, wake_ms * MS, value_us * US);
	t.seq = seq;
	return t;
}

static void test_merge(void)
{
	struct tfl f;
	CHECK(new_flight(&f, "/nonexistent", 0, 8) == 0);
	/* 100 ms: [80 - 0.2, 102]; 110 ms meets it; 200 ms does not */
	CHECK(tfl_add(&f, &(struct tfl_trigger){ 0 }) == 0); /* a trigger at 0 */
	struct tfl_trigger a = trig(2, 0, 100, 200), b = trig(3, 1, 110, 200), c = trig(4, 0, 200, 200);
	CHECK(tfl_add(&f, &a) == 0);
	CHECK(tfl_add(&f, &b) == 0);
	CHECK(tfl_add(&f, &c) == 0);
	CHECK_EQ_U(f.n_open, 3);
	CHECK_EQ_U(f.k.triggers, 4);
	const struct tfl_window *w = &f.open[1];
	CHECK_EQ_U(w->n_trig, 2);
	CHECK_EQ_U(w->from, 80 * MS - 200 * US);
	CHECK_EQ_U(w->to, 112 * MS);
	/* a trigger that meets two windows joins them into one */
	struct tfl_trigger d = trig(5, 1, 180, 60000);	/* [100 ms, 182 ms] */
	CHECK(tfl_add(&f, &d) == 0);
	CHECK_EQ_U(f.n_open, 2);
	size_t big = f.open[0].n_trig > 1 ? 0 : 1;
	CHECK_EQ_U(f.open[big].n_trig, 4);
	CHECK_EQ_U(f.open[big].from, 80 * MS - 200 * US);
	CHECK_EQ_U(f.open[big].to, 202 * MS);
	tfl_free(&f);
}

static size_t count_files(const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	size_t n = 0;
	struct dirent *de;
	while (d && (de = readdir(d)))
		n += strncmp(de->d_name, prefix, strlen(prefix)) == 0;
	if (d)
		closedir(d);
	return n;
}

static char *slurp(const char *path, size_t *len)
{
	FILE *fp = fopen(path, "rb");
	if (!fp)
		return NULL;
	char *buf = calloc(1, 1 << 16);
	*len = fread(buf, 1, (1 << 16) - 1, fp);
	fclose(fp);
	return buf;
}

static void test_close(void)
{
	char dir[] = "/tmp/rtlab-tfl-XXXXXX";
	CHECK(mkdtemp(dir) != NULL);
	struct tfl f;
	/* 44 bytes a framed page; a rate of 60 B/s: a burst of 600 bytes */
	CHECK(new_flight(&f, dir, 60, 16) == 0);
	CHECK(tfl_open_lines(&f) == 0);
	for (unsigned k = 0; k < 12; k++) {	/* pages every 10 ms from 0 on both CPUs */
		push(&f.rings[0], k * 10 * MS, (unsigned char)k);
		push(&f.rings[1], k * 10 * MS + 5 * MS, (unsigned char)(100 + k));
	}
	/* trigger 1: wake 50 ms, 1 ms late: [29 ms, 52 ms]: CPU 0 pages 20..50, CPU 1 25..45 */
	struct tfl_trigger t1 = trig(1, 0, 50, 1000), t2 = trig(2, 1, 51, 500);
	CHECK(tfl_add(&f, &t1) == 0);
	CHECK(tfl_add(&f, &t2) == 0);
	tfl_close(&f, 52 * MS, 0);	/* its end is not read yet */
	CHECK_EQ_U(f.n_open, 1);
	tfl_close(&f, 60 * MS, 0);
	CHECK_EQ_U(f.n_open, 0);
	CHECK_EQ_U(f.k.windows_kept, 1);
	CHECK_EQ_U(f.k.triggers_merged, 1);
	CHECK_EQ_U(f.rings[0].written, 4);
	CHECK_EQ_U(f.rings[1].written, 3);
	char p[512];
	size_t len;
	snprintf(p, sizeof(p), "%s/w1-cpu0.pages", dir);
	char *text = slurp(p, &len);
	CHECK(text && len == 4 * 44);
	CHECK(text && (unsigned char)text[0] == 40 && (unsigned char)text[4] == 2 &&
	      (unsigned char)text[44 + 4] == 3);	/* framed, in time order */
	free(text);
	snprintf(p, sizeof(p), "%s/w1-cpu1.pages", dir);
	struct stat st;
	CHECK(stat(p, &st) == 0 && st.st_size == 3 * 44);
	CHECK_EQ_U(count_files(dir, ".w"), 0);	/* no temporary file left */
	/* a window overlapping pages already written writes only the new ones (5 pages,
	 * 220 bytes: 72 left of 600); the next one (220 bytes) does not fit: dropped */
	struct tfl_trigger t3 = trig(3, 0, 75, 100);
	CHECK(tfl_add(&f, &t3) == 0);
	tfl_close(&f, 100 * MS, 0);
	CHECK_EQ_U(f.k.windows_kept, 2);
	CHECK_EQ_U(f.rings[0].written, 6);	/* 60 and 70 (50 was written with window 1) */
	CHECK_EQ_U(f.rings[1].written, 6);	/* 55, 65, 75 (45 was) */
	struct tfl_trigger t4 = trig(4, 1, 100, 100);
	CHECK(tfl_add(&f, &t4) == 0);
	tfl_close(&f, 200 * MS, 0);
	CHECK_EQ_U(f.k.windows_dropped_rate, 1);
	CHECK(f.rings[0].dropped + f.rings[1].dropped > 0);
	/* a window wholly aged out */
	for (unsigned k = 12; k < 40; k++) {
		push(&f.rings[0], k * 10 * MS, 0);
		push(&f.rings[1], k * 10 * MS + 5 * MS, 0);
	}
	struct tfl_trigger t5 = trig(5, 0, 30, 100);
	CHECK(tfl_add(&f, &t5) == 0);
	tfl_close(&f, UINT64_MAX, 0);
	CHECK_EQ_U(f.k.windows_dropped_aged, 1);
	for (size_t k = 0; k < 2; k++) {
		tfl_ring_age_all(&f.rings[k]);
		const struct tfl_ring *r = &f.rings[k];
		CHECK_EQ_U(r->read, r->written + r->dropped + r->aged);	/* every page counted */
	}
	CHECK_EQ_U(f.k.triggers, f.k.windows_kept + f.k.windows_dropped_rate +
				   f.k.windows_dropped_aged + f.k.windows_dropped_disk +
				   f.k.triggers_merged);
	/* one line per trigger, the merged one naming its window's file */
	snprintf(p, sizeof(p), "%s/windows.jsonl", dir);
	text = slurp(p, &len);
	size_t lines = 0;
	for (size_t i = 0; text && i < len; i++)
		lines += text[i] == '\n';
	CHECK_EQ_U(lines, 5);
	CHECK(text && strstr(text, "\"seq\":2,\"channel\":1,\"cpu\":1,") &&
	      strstr(text, "\"why\":\"merged\",\"partial\":false,\"pages\":0,\"bytes\":0,\"file\":\"w1-cpu0.pages\""));
	CHECK(text && strstr(text, "\"seq\":4,") && strstr(text, "\"kept\":false,\"why\":\"rate\""));
	CHECK(text && strstr(text, "\"why\":\"aged\""));
	free(text);
	tfl_free(&f);
	/* clean up */
	DIR *d = opendir(dir);
	struct dirent *de;
	while (d && (de = readdir(d)))
		if (de->d_name[0] != '.') {
			snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
			unlink(p);
		}
	if (d)
		closedir(d);
	rmdir(dir);
}

/* A window that is not kept has one line for all its triggers: `merged` counts the later
 * ones, `worst_ns` is the largest value; a storm of dropped triggers writes one line per
 * window, and a line is still there for every trigger of a kept window. */
static void test_dropped_window_one_line(void)
{
	char dir[] = "/tmp/rtlab-tfl-XXXXXX";
	CHECK(mkdtemp(dir) != NULL);
	struct tfl f;
	CHECK(new_flight(&f, dir, 1, 16) == 0);	/* 1 B/s: a burst of 10 bytes, no window fits */
	CHECK(tfl_open_lines(&f) == 0);
	for (unsigned k = 0; k < 12; k++) {
		push(&f.rings[0], k * 10 * MS, (unsigned char)k);
		push(&f.rings[1], k * 10 * MS + 5 * MS, (unsigned char)k);
	}
	struct tfl_trigger a = trig(1, 0, 50, 1000), b = trig(2, 1, 51, 3000),
			   c = trig(3, 0, 52, 500);
	CHECK(tfl_add(&f, &a) == 0);
	CHECK(tfl_add(&f, &b) == 0);
	CHECK(tfl_add(&f, &c) == 0);
	tfl_close(&f, UINT64_MAX, 0);
	CHECK_EQ_U(f.k.triggers, 3);
	CHECK_EQ_U(f.k.windows_dropped_rate, 1);
	CHECK_EQ_U(f.k.triggers_merged, 2);
	CHECK_EQ_U(f.k.lines_lost, 0);
	char p[512];
	size_t len;
	snprintf(p, sizeof(p), "%s/windows.jsonl", dir);
	char *text = slurp(p, &len);
	size_t lines = 0;
	for (size_t i = 0; text && i < len; i++)
		lines += text[i] == '\n';
	CHECK_EQ_U(lines, 1);
	CHECK(text && strstr(text, "\"seq\":1,") && strstr(text, "\"why\":\"rate\"") &&
	      strstr(text, "\"merged\":2,\"worst_ns\":3000000,"));
	free(text);
	tfl_free(&f);
	unlink(p);
	rmdir(dir);
}

static void test_queue(void)
{
	struct tfl f;
	CHECK(new_flight(&f, "/nonexistent", 0, 4) == 0);
	struct sample_rec s[4] = { { 10 * MS, 50 * US }, { 20 * MS, 100 * US }, { 30 * MS, 101 * US },
				   { 40 * MS, 5 * MS } };
	tfl_push_samples(&f, 1, 1, 1000 * MS, s, 4);	/* above 100 us: two */
	CHECK_EQ_U(f.n_queue, 2);
	CHECK_EQ_U(f.queue[0].seq, 1);
	CHECK_EQ_U(f.queue[1].wake_ns, 1040 * MS);
	CHECK_EQ_U(f.queue[1].deadline_ns, 1035 * MS);
	tfl_take_queue(&f);
	CHECK_EQ_U(f.n_queue, 0);
	CHECK_EQ_U(f.k.triggers, 2);
	CHECK_EQ_U(f.n_open, 1);		/* 1030 and 1040 overlap */
	tfl_free(&f);
}

int main(void)
{
	test_bucket();
	test_trigger();
	test_ring();
	test_merge();
	test_close();
	test_dropped_window_one_line();
	test_queue();
	printf("%d checks, %d failed\n", tap_count, tap_failed);
	return tap_failed ? 1 : 0;
}
