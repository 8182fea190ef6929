/* An interval as rows of the fleet store (see fleet.h): its distinct stacks, and its
 * samples grouped by stack, thread, event, second and GC epoch. */
#define _GNU_SOURCE
#include "fleet/fleet.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "fleet/sbuf.h"

static uint64_t fnv_add(uint64_t h, const void *data, size_t n)
{
	const unsigned char *c = data;
	for (size_t i = 0; i < n; i++)
		h = (h ^ c[i]) * 0x100000001b3ull;
	return h;
}

uint64_t vp_fleet__stack_hash(const struct vp_profile *p, const struct vp_stack *s)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (uint32_t i = 0; i < s->nframes; i++) {
		const struct vp_frame *f = &p->frames[s->frames[i]];
		/* Each string with its NUL, so that ("ab", "c") and ("a", "bc") differ. */
		h = fnv_add(h, f->name, strlen(f->name) + 1);
		h = fnv_add(h, f->image ? f->image : "", strlen(f->image ? f->image : "") + 1);
		uint8_t lt[2] = { f->layer, f->tier };
		h = fnv_add(h, lt, 2);
	}
	return h;
}

/* A string as TabSeparated wants it, and as an array's quoted element wants it: the
 * same escapes serve both (a backslash before the quote is read as the quote in both). */
static void sb_str(struct vp_sbuf *b, const char *s)
{
	for (; s && *s; s++) {
		char e = 0;
		switch (*s) {
		case '\\': e = '\\'; break;
		case '\'': e = '\''; break;
		case '\t': e = 't'; break;
		case '\n': e = 'n'; break;
		case '\r': e = 'r'; break;
		default: break;
		}
		if (e) {
			char two[2] = { '\\', e };
			vp_sbuf__put(b, two, 2);
		} else {
			vp_sbuf__put(b, s, 1);
		}
	}
}

static const char *offcpu_kind(const struct vp_profile *p, const struct vp_stack *s)
{
	if (!s->nframes)
		return "";
	const char *leaf = p->frames[s->frames[s->nframes - 1]].name;
	/* The off-CPU state is the leaf frame the loader adds ("[blocked: lock]"). */
	return !strncmp(leaf, "[blocked", 8) || !strncmp(leaf, "[runnable", 9) ? leaf : "";
}

struct row {
	uint32_t stack;
	int event;
	uint64_t sec;
	uint32_t epoch;
	uint64_t samples;
};

static int cmp_row(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	if (x->stack != y->stack)
		return x->stack < y->stack ? -1 : 1;
	if (x->event != y->event)
		return x->event < y->event ? -1 : 1;
	if (x->sec != y->sec)
		return x->sec < y->sec ? -1 : 1;
	return x->epoch < y->epoch ? -1 : x->epoch > y->epoch;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* The JVMs' epoch boundaries (the marks the loader adds at each GC or address reuse),
 * sorted by (pid, t): a sample's epoch is how many of its process's came before it,
 * within the interval. Binary searches: a JVM that collects often has many marks. */
struct mark {
	uint32_t pid;
	uint64_t t;
};

static int cmp_mark(const void *a, const void *b)
{
	const struct mark *x = a, *y = b;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->t < y->t ? -1 : x->t > y->t;
}

/* The first mark at or after (pid, t) in the sorted marks. */
static size_t lower(const struct mark *m, size_t n, uint32_t pid, uint64_t t)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (m[mid].pid < pid || (m[mid].pid == pid && m[mid].t < t))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static uint32_t epoch_at(const struct mark *m, size_t n, uint32_t pid, uint64_t t)
{
	if (!n)
		return 0;
	/* Marks at t count (the epoch began then): the first past t is the bound (t has 56
	 * bits: t + 1 does not wrap). */
	size_t end = lower(m, n, pid, t + 1);
	return (uint32_t)(end - lower(m, n, pid, 0));
}

static void sample_row(struct vp_sbuf *b, const struct vp_profile *p, const struct vp_fleet_meta *m, const struct row *r,
		       uint64_t samples, uint64_t weight)
{
	const struct vp_stack *s = &p->stacks[r->stack];
	const struct vp_frame *leaf = s->nframes ? &p->frames[s->frames[s->nframes - 1]] : NULL;
	vp_sbuf__printf(b, "%llu\t", (unsigned long long)r->sec);
	sb_str(b, m->host);
	vp_sbuf__put(b, "\t", 1);
	sb_str(b, m->service);
	vp_sbuf__put(b, "\t", 1);
	sb_str(b, m->interval);
	vp_sbuf__printf(b, "\t%u\t%u\t", s->pid, s->tid);
	sb_str(b, s->comm);
	vp_sbuf__put(b, "\t", 1);
	sb_str(b, vp_profile__container_id(p, s->pid));
	vp_sbuf__put(b, "\t", 1);
	sb_str(b, p->events[r->event].name);
	vp_sbuf__put(b, "\t", 1);
	sb_str(b, p->events[r->event].unit);
	/* The event's place in the profile: reports draw the first one by default. */
	vp_sbuf__printf(b, "\t%d\t%u\t", r->event, leaf ? leaf->layer : (unsigned)VP_LAYER_UNKNOWN);
	sb_str(b, offcpu_kind(p, s));
	vp_sbuf__printf(b, "\t%u\t%llu\t%llu\t%llu\n", r->epoch, (unsigned long long)vp_fleet__stack_hash(p, s),
		  (unsigned long long)samples, (unsigned long long)weight);
}

int vp_fleet__encode(const struct vp_profile *p, const struct vp_fleet_meta *m, char **stacks, size_t *stacks_len,
		     char **samples, size_t *samples_len)
{
	struct vp_sbuf st = { 0 }, sa = { 0 };
	struct row *rows = NULL;
	struct mark *marks = NULL;
	uint64_t *hashes = NULL;
	size_t nrows = 0;
	int e = -ENOMEM;
	*stacks = *samples = NULL;
	if (p->nmarks && !(marks = malloc(p->nmarks * sizeof(*marks))))
		goto cleanup;
	for (size_t i = 0; i < p->nmarks; i++)
		marks[i] = (struct mark){ .pid = p->marks[i].pid, .t = p->marks[i].t };
	vp_sort(marks, p->nmarks, sizeof(*marks), cmp_mark);
	/* Rows from the sample times, one per (stack, event, second, epoch). */
	if (p->ntimes && !(rows = calloc(p->ntimes, sizeof(*rows))))
		goto cleanup;
	for (size_t i = 0; i < p->ntimes; i++) {
		const struct vp_sample_time *t = &p->times[i];
		if (t->stack >= p->nstacks || t->event >= (unsigned)p->nevents)
			continue;
		rows[nrows++] = (struct row){ .stack = t->stack, .event = t->event, .sec = m->from_s + t->t / 1000000000ull,
					      .epoch = epoch_at(marks, p->nmarks, p->stacks[t->stack].pid, t->t),
					      .samples = t->samples };
	}
	vp_sort(rows, nrows, sizeof(*rows), cmp_row);
	size_t k = 0;
	for (size_t i = 0; i < nrows; i++) {
		if (k && !cmp_row(&rows[k - 1], &rows[i]))
			rows[k - 1].samples += rows[i].samples;
		else
			rows[k++] = rows[i];
	}
	nrows = k;
	/* Each (stack, event): its weight spread over its rows by their samples, the rest
	 * (rounding, samples without a time) on its last row, so that sums stay exact. */
	size_t r = 0;
	for (uint32_t si = 0; si < p->nstacks; si++) {
		const struct vp_stack *s = &p->stacks[si];
		for (int ev = 0; ev < p->nevents; ev++) {
			size_t first = r;
			uint64_t covered = 0;
			while (r < nrows && rows[r].stack == si && rows[r].event == ev)
				covered += rows[r++].samples;
			uint64_t total = s->samples[ev], weight = s->weight[ev];
			if (!total && !weight)
				continue;
			if (first == r) {
				struct row one = { .stack = si, .event = ev, .sec = m->from_s };
				sample_row(&sa, p, m, &one, total, weight);
				continue;
			}
			uint64_t denom = covered > total ? covered : total, wsum = 0, ssum = 0;
			for (size_t i = first; i < r; i++) {
				bool last = i + 1 == r;
				uint64_t w = last ? weight - wsum
						  : (uint64_t)((unsigned __int128)weight * rows[i].samples / (denom ? denom : 1));
				uint64_t n = last && total > covered ? rows[i].samples + (total - covered) : rows[i].samples;
				wsum += w;
				ssum += n;
				sample_row(&sa, p, m, &rows[i], n, w);
			}
		}
		/* Rows of stacks the loop has passed (none: rows are sorted by stack). */
		while (r < nrows && rows[r].stack == si)
			r++;
	}
	/* Stacks: each distinct hash once. */
	if (p->nstacks && !(hashes = calloc(p->nstacks, sizeof(*hashes))))
		goto cleanup;
	for (size_t i = 0; i < p->nstacks; i++)
		hashes[i] = vp_fleet__stack_hash(p, &p->stacks[i]);
	uint8_t *seen_done = NULL;
	uint64_t *sorted = NULL;
	if (p->nstacks) {
		sorted = malloc(p->nstacks * sizeof(*sorted));
		seen_done = calloc(p->nstacks, 1);
		if (!sorted || !seen_done) {
			free(sorted);
			free(seen_done);
			goto cleanup;
		}
		memcpy(sorted, hashes, p->nstacks * sizeof(*sorted));
		vp_sort(sorted, p->nstacks, sizeof(*sorted), cmp_u64);
	}
	for (size_t i = 0; i < p->nstacks; i++) {
		/* Written by its first stack; the sorted copy finds whether it was. */
		uint64_t *at = bsearch(&hashes[i], sorted, p->nstacks, sizeof(*sorted), cmp_u64);
		while (at > sorted && at[-1] == hashes[i])
			at--;
		size_t pos = (size_t)(at - sorted);
		if (seen_done[pos])
			continue;
		seen_done[pos] = 1;
		const struct vp_stack *s = &p->stacks[i];
		vp_sbuf__printf(&st, "%llu\t[", (unsigned long long)hashes[i]);
		for (uint32_t f = 0; f < s->nframes; f++) {
			vp_sbuf__put(&st, f ? ",'" : "'", f ? 2 : 1);
			sb_str(&st, p->frames[s->frames[f]].name);
			vp_sbuf__put(&st, "'", 1);
		}
		vp_sbuf__put(&st, "]\t[", 3);
		for (uint32_t f = 0; f < s->nframes; f++) {
			const char *img = p->frames[s->frames[f]].image;
			vp_sbuf__put(&st, f ? ",'" : "'", f ? 2 : 1);
			sb_str(&st, img ? img : "");
			vp_sbuf__put(&st, "'", 1);
		}
		vp_sbuf__put(&st, "]\t[", 3);
		for (uint32_t f = 0; f < s->nframes; f++)
			vp_sbuf__printf(&st, "%s%u", f ? "," : "", p->frames[s->frames[f]].layer);
		vp_sbuf__put(&st, "]\t[", 3);
		for (uint32_t f = 0; f < s->nframes; f++)
			vp_sbuf__printf(&st, "%s%u", f ? "," : "", p->frames[s->frames[f]].tier);
		vp_sbuf__put(&st, "]\n", 2);
	}
	free(sorted);
	free(seen_done);
	if (st.err || sa.err)
		goto cleanup;
	*stacks = st.p ? st.p : strdup("");
	*samples = sa.p ? sa.p : strdup("");
	if (!*stacks || !*samples) {
		free(*stacks);
		free(*samples);
		*stacks = *samples = NULL;
		st.p = sa.p = NULL;
		goto cleanup;
	}
	*stacks_len = st.n;
	*samples_len = sa.n;
	st.p = sa.p = NULL;
	e = 0;
cleanup:
	free(st.p);
	free(sa.p);
	free(rows);
	free(marks);
	free(hashes);
	return e;
}
