/* SPDX-License-Identifier: MIT */
/* The flight recorder (trace_flight.h). */
#include "trace_flight.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "le_bytes.h"

#define TFL_QUEUE_MAX ((size_t)1 << 16)	/* triggers waiting for the reader */

/* ---- the token bucket ---- */

void tfl_bucket_init(struct tfl_bucket *b, uint64_t rate, uint64_t now_ns)
{
	*b = (struct tfl_bucket){ .rate = rate, .tokens = rate * TFL_BURST_S, .last_ns = now_ns };
}

static void bucket_earn(struct tfl_bucket *b, uint64_t now_ns)
{
	if (now_ns <= b->last_ns)
		return;
	uint64_t burst = b->rate * TFL_BURST_S;
	uint64_t dt = now_ns - b->last_ns;
	b->last_ns = now_ns;
	if (dt >= (uint64_t)TFL_BURST_S * NS_PER_SEC) {
		b->tokens = burst;
		b->rem = 0;
		return;
	}
	/* rate <= 2^30 and dt < 10 s < 2^34: the product fits in 64 bits */
	uint64_t earned = b->rate * dt + b->rem;
	b->tokens += earned / NS_PER_SEC;
	b->rem = earned % NS_PER_SEC;
	if (b->tokens >= burst) {
		b->tokens = burst;
		b->rem = 0;
	}
}

bool tfl_bucket_take(struct tfl_bucket *b, uint64_t now_ns, uint64_t bytes)
{
	if (!b->rate)
		return true;
	bucket_earn(b, now_ns);
	if (bytes > b->tokens)
		return false;
	b->tokens -= bytes;
	return true;
}

void tfl_bucket_refund(struct tfl_bucket *b, uint64_t bytes)
{
	if (!b->rate)
		return;
	uint64_t burst = b->rate * TFL_BURST_S;
	b->tokens = bytes > burst - b->tokens ? burst : b->tokens + bytes;
}

/* ---- triggers ---- */

struct tfl_trigger tfl_trigger_of(uint32_t chan, int cpu, uint64_t start_ns, uint64_t at_ns,
				  uint64_t value_ns)
{
	uint64_t wake = start_ns + at_ns;
	return (struct tfl_trigger){
		.chan = chan, .cpu = cpu, .wake_ns = wake, .value_ns = value_ns,
		.deadline_ns = wake > value_ns ? wake - value_ns : 0,
	};
}

void tfl_span(const struct tfl_trigger *t, uint64_t before_ns, uint64_t after_ns, uint64_t *from,
	      uint64_t *to)
{
	*from = t->deadline_ns > before_ns ? t->deadline_ns - before_ns : 0;
	*to = t->wake_ns > UINT64_MAX - after_ns ? UINT64_MAX : t->wake_ns + after_ns;
}

/* ---- the ring ---- */

int tfl_ring_init(struct tfl_ring *r, int cpu, size_t cap, size_t page_size)
{
	*r = (struct tfl_ring){ .cpu = cpu, .cap = cap ? cap : 1, .page_size = page_size };
	r->slot = calloc(r->cap, sizeof(*r->slot));
	r->mem = malloc(r->cap * page_size);	/* touched as pages arrive */
	if (!r->slot || !r->mem) {
		tfl_ring_free(r);
		return -ENOMEM;
	}
	return 0;
}

void tfl_ring_free(struct tfl_ring *r)
{
	free(r->slot);
	free(r->mem);
	r->slot = NULL;
	r->mem = NULL;
}

struct tfl_page *tfl_ring_at(struct tfl_ring *r, size_t i)
{
	return &r->slot[(r->first + i) % r->cap];
}

unsigned char *tfl_ring_data(struct tfl_ring *r, size_t i)
{
	return r->mem + ((r->first + i) % r->cap) * r->page_size;
}

static const struct tfl_page *ring_at_c(const struct tfl_ring *r, size_t i)
{
	return &r->slot[(r->first + i) % r->cap];
}

void tfl_ring_push(struct tfl_ring *r, const unsigned char *page, size_t len, uint64_t ts)
{
	if (len > r->page_size)
		len = r->page_size;
	if (r->n == r->cap) {
		if (!r->slot[r->first].done)
			r->aged++;
		r->first = (r->first + 1) % r->cap;
		r->n--;
		r->evicted = true;
	}
	size_t k = (r->first + r->n) % r->cap;
	memcpy(r->mem + k * r->page_size, page, len);
	r->slot[k] = (struct tfl_page){ .ts = ts, .len = (uint32_t)len };
	r->n++;
	r->read++;
}

void tfl_ring_age_all(struct tfl_ring *r)
{
	for (size_t i = 0; i < r->n; i++) {
		struct tfl_page *p = tfl_ring_at(r, i);
		if (!p->done) {
			p->done = true;
			r->aged++;
		}
	}
}

void tfl_ring_select(const struct tfl_ring *r, uint64_t from, uint64_t to, size_t *first,
		     size_t *count, bool *partial, bool *gone)
{
	*first = *count = 0;
	*partial = r->evicted && r->n && ring_at_c(r, 0)->ts > from;
	*gone = r->evicted && (!r->n || ring_at_c(r, 0)->ts > to);
	bool found = false;
	for (size_t i = 0; i < r->n; i++) {
		const struct tfl_page *p = ring_at_c(r, i);
		if (p->ts > to)
			break;
		uint64_t end = i + 1 < r->n ? ring_at_c(r, i + 1)->ts : UINT64_MAX;
		if (end <= from)
			continue;	/* before the window; end > from below */
		if (!found) {
			*first = i;
			found = true;
		}
		*count = i - *first + 1;
	}
}

/* ---- the recorder ---- */

/* A window's pages in one CPU's ring, when it is closed (struct tfl.scratch). */
struct sel {
	size_t first, count;
	uint64_t pages, bytes;	/* the pages not written yet, framed */
	bool partial, gone;
	bool file;		/* written into a file */
};

int tfl_init(struct tfl *f, const struct tfl_opts *o, const char *dir, const int *cpus,
	     size_t n_cpus, size_t page_size, uint64_t now_ns)
{
	*f = (struct tfl){ .o = *o, .dir = dir, .lines_fd = -1, .next_seq = 1 };
	f->rings = calloc(n_cpus ? n_cpus : 1, sizeof(*f->rings));
	f->scratch = calloc(n_cpus ? n_cpus : 1, sizeof(struct sel));
	if (!f->rings || !f->scratch) {
		free(f->rings);
		free(f->scratch);
		return -ENOMEM;
	}
	size_t cap = (size_t)((o->keep_mb << 20) / page_size);
	for (size_t i = 0; i < n_cpus; i++) {
		if (tfl_ring_init(&f->rings[i], cpus[i], cap, page_size) != 0) {
			for (size_t k = 0; k < i; k++)
				tfl_ring_free(&f->rings[k]);
			free(f->rings);
			free(f->scratch);
			f->rings = NULL;
			f->scratch = NULL;
			return -ENOMEM;
		}
		f->n_rings++;
	}
	tfl_bucket_init(&f->bucket, o->rate, now_ns);
	pthread_mutex_init(&f->lock, NULL);
	return 0;
}

void tfl_free(struct tfl *f)
{
	for (size_t i = 0; i < f->n_rings; i++)
		tfl_ring_free(&f->rings[i]);
	free(f->rings);
	free(f->scratch);
	f->scratch = NULL;
	for (size_t i = 0; i < f->n_open; i++)
		free(f->open[i].trig);
	free(f->open);
	free(f->queue);
	if (f->lines_fd >= 0)
		close(f->lines_fd);
	pthread_mutex_destroy(&f->lock);
	f->rings = NULL;
	f->open = NULL;
	f->queue = NULL;
	f->n_rings = f->n_open = 0;
	f->lines_fd = -1;
}

int tfl_open_lines(struct tfl *f)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/windows.jsonl", f->dir);
	f->lines_fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
	return f->lines_fd < 0 ? -errno : 0;
}

struct tfl_ring *tfl_ring_of(struct tfl *f, int cpu)
{
	for (size_t i = 0; i < f->n_rings; i++)
		if (f->rings[i].cpu == cpu)
			return &f->rings[i];
	return NULL;
}

void tfl_push_samples(struct tfl *f, uint32_t chan, int cpu, uint64_t start_ns,
		      const struct sample_rec *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (s[i].value_ns <= f->o.trigger_ns)
			continue;
		struct tfl_trigger t = tfl_trigger_of(chan, cpu, start_ns, s[i].at_ns, s[i].value_ns);
		pthread_mutex_lock(&f->lock);
		if (f->n_queue == f->cap_queue && f->cap_queue < TFL_QUEUE_MAX) {
			size_t cap = f->cap_queue ? f->cap_queue * 2 : 64;
			struct tfl_trigger *q = realloc(f->queue, cap * sizeof(*q));
			if (q) {
				f->queue = q;
				f->cap_queue = cap;
			}
		}
		if (f->n_queue < f->cap_queue) {
			t.seq = f->next_seq++;
			f->queue[f->n_queue++] = t;
		} else {
			f->lost++;
		}
		pthread_mutex_unlock(&f->lock);
	}
}

static bool meets(const struct tfl_window *w, uint64_t from, uint64_t to)
{
	return from <= w->to && to >= w->from;
}

static int window_append(struct tfl_window *w, const struct tfl_trigger *t, size_t n)
{
	if (w->n_trig + n > w->cap_trig) {
		size_t cap = w->cap_trig ? w->cap_trig : 4;
		while (cap < w->n_trig + n)
			cap *= 2;
		struct tfl_trigger *p = realloc(w->trig, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		w->trig = p;
		w->cap_trig = cap;
	}
	memcpy(w->trig + w->n_trig, t, n * sizeof(*t));
	w->n_trig += n;
	return 0;
}

int tfl_add(struct tfl *f, const struct tfl_trigger *t)
{
	uint64_t from, to;
	tfl_span(t, f->o.before_ns, f->o.after_ns, &from, &to);
	f->k.triggers++;
	size_t at = f->n_open;
	for (size_t i = 0; i < f->n_open && at == f->n_open; i++)
		if (meets(&f->open[i], from, to))
			at = i;
	if (at == f->n_open) {
		if (f->n_open == f->cap_open) {
			size_t cap = f->cap_open ? f->cap_open * 2 : 8;
			struct tfl_window *p = realloc(f->open, cap * sizeof(*p));
			if (!p) {
				f->k.triggers_lost++;
				return -ENOMEM;
			}
			f->open = p;
			f->cap_open = cap;
		}
		f->open[at] = (struct tfl_window){ .from = from, .to = to };
		if (window_append(&f->open[at], t, 1) != 0) {
			f->k.triggers_lost++;
			return -ENOMEM;
		}
		f->n_open++;
		return 0;
	}
	struct tfl_window *w = &f->open[at];
	if (window_append(w, t, 1) != 0) {
		f->k.triggers_lost++;
		return -ENOMEM;
	}
	w->from = from < w->from ? from : w->from;
	w->to = to > w->to ? to : w->to;
	/* widened: it may now meet other open windows, which join it (their triggers too) */
	for (size_t i = 0; i < f->n_open;) {
		struct tfl_window *o = &f->open[i];
		if (i == at || !meets(o, w->from, w->to)) {
			i++;
			continue;
		}
		if (window_append(w, o->trig, o->n_trig) != 0) {
			i++;
			continue;	/* out of memory: they stay apart */
		}
		w->from = o->from < w->from ? o->from : w->from;
		w->to = o->to > w->to ? o->to : w->to;
		free(o->trig);
		f->open[i] = f->open[--f->n_open];
		if (at == f->n_open)
			at = i;	/* w was the last: moved into i */
		w = &f->open[at];
		i = 0;
	}
	return 0;
}

void tfl_take_queue(struct tfl *f)
{
	pthread_mutex_lock(&f->lock);
	struct tfl_trigger *q = f->queue;
	size_t n = f->n_queue;
	f->queue = NULL;
	f->n_queue = f->cap_queue = 0;
	f->k.triggers += f->lost;
	f->k.triggers_lost += f->lost;
	f->lost = 0;
	pthread_mutex_unlock(&f->lock);
	for (size_t i = 0; i < n; i++)
		if (tfl_add(f, &q[i]) != 0)
			continue;	/* counted as lost */
	free(q);
}

/* ---- closing a window ---- */

enum why { WHY_NONE, WHY_RATE, WHY_AGED, WHY_DISK };
static const char *const why_names[] = { NULL, "rate", "aged", "disk" };


static int write_frames(struct tfl_ring *r, const struct sel *s, const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	int e = 0;
	for (size_t i = s->first; !e && i < s->first + s->count; i++) {
		struct tfl_page *p = tfl_ring_at(r, i);
		if (p->done)
			continue;
		unsigned char len[4];
		le_put32(len, p->len);
		e = rl_write_raw(fd, len, 4);
		if (!e)
			e = rl_write_raw(fd, tfl_ring_data(r, i), p->len);
	}
	if (close(fd) != 0 && !e)
		e = -errno;
	return e;
}

static void file_names(const struct tfl *f, uint64_t seq, int cpu, char *tmp, char *dst, size_t len)
{
	snprintf(tmp, len, "%s/.w%llu-cpu%d.pages.tmp", f->dir, (unsigned long long)seq, cpu);
	snprintf(dst, len, "%s/w%llu-cpu%d.pages", f->dir, (unsigned long long)seq, cpu);
}

/* Write the window's pages: every CPU's temporary file, then the renames. 0 or -errno
 * (nothing left behind). */
static int write_window(struct tfl *f, uint64_t seq, struct sel *sel)
{
	char tmp[PATH_MAX], dst[PATH_MAX];
	int e = 0;
	for (size_t k = 0; k < f->n_rings && !e; k++) {
		if (!sel[k].pages)
			continue;
		file_names(f, seq, f->rings[k].cpu, tmp, dst, sizeof(tmp));
		e = write_frames(&f->rings[k], &sel[k], tmp);
		sel[k].file = true;
	}
	for (size_t k = 0; k < f->n_rings && !e; k++) {
		if (!sel[k].file)
			continue;
		file_names(f, seq, f->rings[k].cpu, tmp, dst, sizeof(tmp));
		if (rename(tmp, dst) != 0)
			e = -errno;
	}
	if (e) {
		for (size_t k = 0; k < f->n_rings; k++) {
			if (!sel[k].file)
				continue;
			file_names(f, seq, f->rings[k].cpu, tmp, dst, sizeof(tmp));
			(void)unlink(tmp);
			(void)unlink(dst);
			sel[k].file = false;
		}
	}
	return e;
}

/* One line of windows.jsonl. `merged`/`worst_ns`: on the line of a window that was not
 * kept, the triggers merged into it (they get no line of their own: a storm of triggers
 * whose windows are dropped writes one line per window, not per trigger) and the largest
 * value among all its triggers; 0 elsewhere, and then not written. */
static void write_line(struct tfl *f, const struct tfl_trigger *t, bool kept, const char *why,
		       bool partial, uint64_t pages, uint64_t bytes, const char *file,
		       uint64_t seq, const struct sel *sel, uint64_t merged, uint64_t worst_ns)
{
	struct jsonw w;
	jw_init(&w);
	jw_obj_begin(&w, NULL);
	jw_uint(&w, "seq", t->seq);
	jw_uint(&w, "channel", t->chan);
	jw_int_or_null(&w, "cpu", t->cpu);
	jw_uint(&w, "deadline_ns", t->deadline_ns);
	jw_uint(&w, "wake_ns", t->wake_ns);
	jw_uint(&w, "value_ns", t->value_ns);
	jw_bool(&w, "kept", kept);
	jw_str_or_null(&w, "why", why);
	jw_bool(&w, "partial", partial);
	jw_uint(&w, "pages", pages);
	jw_uint(&w, "bytes", bytes);
	jw_str_or_null(&w, "file", file);
	if (merged) {
		jw_uint(&w, "merged", merged);
		jw_uint(&w, "worst_ns", worst_ns);
	}
	jw_arr_begin(&w, "files");
	for (size_t k = 0; sel && k < f->n_rings; k++)
		if (sel[k].file)
			jw_strf(&w, NULL, "w%llu-cpu%d.pages", (unsigned long long)seq, f->rings[k].cpu);
	jw_arr_end(&w);
	jw_obj_end(&w);
	int e = jw_error(&w) ? -ENOMEM : (f->lines_fd >= 0 ? jw_emit(&w, f->lines_fd) : -EBADF);
	if (e) {
		f->k.lines_lost += 1 + merged;	/* the triggers this line stood for */
		if (!f->error[0])
			snprintf(f->error, sizeof(f->error), "writing %s/windows.jsonl: %s", f->dir,
				 strerror(-e));
	}
	jw_free(&w);
}

/* Close open window i: write or drop it, then its lines. */
static void close_one(struct tfl *f, size_t i, uint64_t now_ns)
{
	struct tfl_window w = f->open[i];
	f->open[i] = f->open[--f->n_open];
	struct sel *sel = f->scratch;
	uint64_t pages = 0, bytes = 0;
	bool partial = false, gone = f->n_rings > 0;
	for (size_t k = 0; k < f->n_rings; k++) {
		struct tfl_ring *r = &f->rings[k];
		struct sel *s = &sel[k];
		*s = (struct sel){ 0 };
		tfl_ring_select(r, w.from, w.to, &s->first, &s->count, &s->partial, &s->gone);
		for (size_t j = s->first; j < s->first + s->count; j++) {
			const struct tfl_page *p = tfl_ring_at(r, j);
			if (!p->done) {
				s->pages++;
				s->bytes += (uint64_t)p->len + 4;
			}
		}
		pages += s->pages;
		bytes += s->bytes;
		partial = partial || s->partial;
		gone = gone && s->gone;
	}
	enum why why = WHY_NONE;
	int e = 0;
	if (gone && !pages)
		why = WHY_AGED;
	else if (!tfl_bucket_take(&f->bucket, now_ns, bytes))
		why = WHY_RATE;
	else if (pages && (e = write_window(f, w.trig[0].seq, sel)) != 0) {
		why = WHY_DISK;
		tfl_bucket_refund(&f->bucket, bytes);
		if (!f->error[0])
			snprintf(f->error, sizeof(f->error), "writing window %llu into %s: %s",
				 (unsigned long long)w.trig[0].seq, f->dir, strerror(-e));
	}
	/* the pages: written, or dropped with the window (counted either way) */
	for (size_t k = 0; k < f->n_rings; k++) {
		struct tfl_ring *r = &f->rings[k];
		for (size_t j = sel[k].first; j < sel[k].first + sel[k].count; j++) {
			struct tfl_page *p = tfl_ring_at(r, j);
			if (p->done)
				continue;
			p->done = true;
			if (why == WHY_NONE) {
				r->written++;
				r->bytes_written += (uint64_t)p->len + 4;
			} else {
				r->dropped++;
			}
		}
	}
	bool kept = why == WHY_NONE;
	switch (why) {
	case WHY_NONE: f->k.windows_kept++; break;
	case WHY_RATE: f->k.windows_dropped_rate++; break;
	case WHY_DISK: f->k.windows_dropped_disk++; break;
	case WHY_AGED: f->k.windows_dropped_aged++; break;
	}
	if (kept && partial)
		f->k.windows_partial++;
	/* the file named on the lines: the first trigger's CPU's, else the first written */
	char file[64] = "";
	const struct tfl_trigger *t0 = &w.trig[0];
	for (size_t k = 0; kept && k < f->n_rings; k++)
		if (sel[k].file && (!file[0] || f->rings[k].cpu == t0->cpu))
			snprintf(file, sizeof(file), "w%llu-cpu%d.pages", (unsigned long long)t0->seq,
				 f->rings[k].cpu);
	uint64_t worst = 0;
	for (size_t m = 0; m < w.n_trig; m++)
		worst = w.trig[m].value_ns > worst ? w.trig[m].value_ns : worst;
	f->k.triggers_merged += w.n_trig - 1;
	/* a kept window: a line per trigger (each spike is explained from its own deadline
	 * and wake); a dropped one: one line, counting the triggers merged into it */
	write_line(f, t0, kept, why_names[why], partial, pages, kept ? bytes : 0,
		   file[0] ? file : NULL, t0->seq, kept ? sel : NULL, kept ? 0 : w.n_trig - 1,
		   worst);
	for (size_t m = 1; kept && m < w.n_trig; m++)
		write_line(f, &w.trig[m], kept, "merged", partial, 0, 0, file[0] ? file : NULL,
			   t0->seq, sel, 0, 0);
	free(w.trig);
}

void tfl_close(struct tfl *f, uint64_t read_to, uint64_t now_ns)
{
	for (;;) {
		/* the earliest closable window first: pages go out in time order */
		size_t best = f->n_open;
		for (size_t i = 0; i < f->n_open; i++)
			if ((read_to == UINT64_MAX || f->open[i].to < read_to) &&
			    (best == f->n_open || f->open[i].from < f->open[best].from))
				best = i;
		if (best == f->n_open)
			return;
		close_one(f, best, now_ns);
	}
}

void tfl_write_meta(const struct tfl *f, struct jsonw *w)
{
	uint64_t written = 0, aged = 0, dropped = 0, read = 0, bytes = 0;
	for (size_t k = 0; k < f->n_rings; k++) {
		written += f->rings[k].written;
		aged += f->rings[k].aged;
		dropped += f->rings[k].dropped;
		read += f->rings[k].read;
		bytes += f->rings[k].bytes_written;
	}
	jw_obj_begin(w, "flight");
	jw_uint(w, "trigger_ns", f->o.trigger_ns);
	jw_uint(w, "before_ns", f->o.before_ns);
	jw_uint(w, "after_ns", f->o.after_ns);
	jw_uint(w, "rate_bytes_per_s", f->o.rate);
	jw_uint(w, "burst_bytes", f->o.rate * TFL_BURST_S);
	jw_uint(w, "keep_mb", f->o.keep_mb);
	jw_uint(w, "triggers", f->k.triggers);
	jw_uint(w, "triggers_merged", f->k.triggers_merged);
	jw_uint(w, "triggers_lost", f->k.triggers_lost);
	jw_uint(w, "windows_open", f->n_open);
	jw_uint(w, "windows_kept", f->k.windows_kept);
	jw_uint(w, "windows_dropped_rate", f->k.windows_dropped_rate);
	jw_uint(w, "windows_dropped_disk", f->k.windows_dropped_disk);
	jw_uint(w, "windows_dropped_aged", f->k.windows_dropped_aged);
	jw_uint(w, "windows_partial", f->k.windows_partial);
	jw_uint(w, "pages_read", read);
	jw_uint(w, "pages_written", written);
	jw_uint(w, "pages_dropped", dropped);
	jw_uint(w, "pages_aged", aged);
	jw_uint(w, "bytes_written", bytes);
	jw_uint(w, "lines_lost", f->k.lines_lost);
	jw_obj_end(w);
}
