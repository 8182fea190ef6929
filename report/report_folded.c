/* Folded stacks ("root;...;leaf count"), the input of flamegraph.pl and speedscope, as
 * async-profiler's collapsed output: stacks that differ only by thread are merged, unless
 * opts->threads asks for a thread level ("comm;root;...;leaf count", async-profiler's -t;
 * stacks that differ only by pid/tid are merged then); opts->reverse writes each line
 * leaf first (async-profiler's --reverse: the callers of each hot frame together); counts are samples of
 * opts->sort_event; for time measured at context switches (off-cpu, steal) and the wall
 * view's events a sample is that time in periods of the recording's time event (1.001 ms
 * at 999 Hz), so counts read as milliseconds (docs/offcpu.md, "Units"). Layers are marked with the suffixes flamegraph.pl colours by
 * (perf script conventions): _[k] kernel, _[j] JIT, _[i] inlined, _[0] interpreted,
 * and, as async-profiler writes them, _[1] for C1-compiled code (_[j] is then C2's).
 * `viprof report -f folded --event steal` draws steal time: each victim thread's most
 * frequent sampled stack ending in a "[hypervisor: steal]" leaf (idle: "[idle]"), its
 * count the stolen time in periods of the recording's time event (1 ms when none),
 * as postproc/session_steal.c computes it; no suffix, flamegraph.pl has no hypervisor colour. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "report/report.h"
#include "common/util.h"

static const char *suffix(int layer, uint8_t tier)
{
	switch (layer) {
	case VP_LAYER_KERNEL: return "_[k]";
	case VP_LAYER_JIT: return vp_tier_is_c1(tier) ? "_[1]" : "_[j]";
	case VP_LAYER_INLINED: return "_[i]";
	case VP_LAYER_INTERPRETED: return "_[0]";
	default: return "";
	}
}

/* ';' separates frames and a newline ends the line: neither may be in a name. */
static char clean(char c)
{
	return c == ';' ? ':' : (c == '\n' || c == '\r') ? ' ' : c;
}

/* Each frame's part of a line, ";name_[x]", made once per frame: a line is its thread's
 * name followed by these, and is never built as one string (a deep Java profile's lines
 * took 3 KB each, 350 MB for 100k stacks). */
static char **frame_parts(const struct vp_profile *p)
{
	char **v = calloc(p->nframes ? p->nframes : 1, sizeof(*v));
	if (!v)
		return NULL;
	for (size_t i = 0; i < p->nframes; i++) {
		const char *name = p->frames[i].name, *sfx = suffix(p->frames[i].layer, p->frames[i].tier);
		size_t n = strlen(name), m = strlen(sfx);
		char *s = malloc(n + m + 2);
		if (!s) {
			for (size_t k = 0; k < i; k++)
				free(v[k]);
			free(v);
			return NULL;
		}
		s[0] = ';';
		for (size_t k = 0; k < n; k++)
			s[k + 1] = clean(name[k]);
		memcpy(s + n + 1, sfx, m + 1);
		v[i] = s;
	}
	return v;
}

static const char *comm_of(const struct vp_stack *s)
{
	return s->comm && *s->comm ? s->comm : "[unknown]";
}

/* The k-th frame of a line: root first, or leaf first when reversed (--reverse). */
static uint32_t frame_at(const struct vp_stack *s, uint32_t k, bool reverse)
{
	return s->frames[reverse ? s->nframes - 1 - k : k];
}

/* A cursor over one stack's line, character by character. */
struct cursor {
	const struct vp_stack *s;
	char *const *parts;
	uint32_t k;          /* 0: in the thread name; k: in frame k - 1 */
	const char *p;
	bool reverse;
};

static int cursor_next(struct cursor *c)
{
	while (!*c->p) {
		if (c->k >= c->s->nframes)
			return -1;
		c->p = c->parts[frame_at(c->s, c->k++, c->reverse)];
	}
	char ch = *c->p++;
	return (unsigned char)(c->k == 0 ? clean(ch) : ch);
}

struct sort_ctx {
	const struct vp_profile *p;
	char *const *parts;
	bool threads;        /* lines start with the thread's name */
	bool reverse;        /* frames leaf first */
};

/* The order strcmp gives the lines, computed without them. */
static int cmp_line(const void *a, const void *b, void *arg)
{
	const struct sort_ctx *x = arg;
	const struct vp_stack *sa = &x->p->stacks[*(const uint32_t *)a], *sb = &x->p->stacks[*(const uint32_t *)b];
	struct cursor ca = { sa, x->parts, 0, x->threads ? comm_of(sa) : "", x->reverse },
		      cb = { sb, x->parts, 0, x->threads ? comm_of(sb) : "", x->reverse };
	if (!strcmp(ca.p, cb.p)) {
		/* The same thread name and the same leading frames make the same characters:
		 * start at the first frame that differs. */
		uint32_t k = 0;
		while (k < sa->nframes && k < sb->nframes && frame_at(sa, k, x->reverse) == frame_at(sb, k, x->reverse))
			k++;
		ca.k = cb.k = k;
		ca.p = cb.p = "";
	}
	for (;;) {
		int u = cursor_next(&ca), v = cursor_next(&cb);
		if (u != v)
			return u < v ? -1 : 1;
		if (u < 0)
			return 0;
	}
}

static void write_line(struct vp_out *o, const struct vp_stack *s, char *const *parts, bool threads, bool reverse,
		       uint64_t count)
{
	char comm[256];
	size_t n = 0;
	for (const char *c = comm_of(s); threads && *c; c++) {
		comm[n++] = clean(*c);
		if (n == sizeof(comm) - 1 || !c[1]) {
			vp_out__write(o, comm, n);
			n = 0;
		}
	}
	if (!threads && !s->nframes)
		vp_out__puts(o, "[no frames]");
	/* Without the thread's name the line starts at the root frame, without its ';'. */
	for (uint32_t k = 0; k < s->nframes; k++)
		vp_out__puts(o, parts[frame_at(s, k, reverse)] + (!threads && k == 0));
	vp_out__printf(o, " %llu\n", (unsigned long long)count);
}

int report_folded(const struct vp_profile *p, struct vp_out *o, const struct vp_report_opts *opts)
{
	int ev = opts ? opts->sort_event : 0, ret = 0;
	if (ev < 0 || ev >= p->nevents)
		ev = 0;
	if (!p->nevents)
		return o->err;
	uint32_t *idx = malloc((p->nstacks + 1) * sizeof(*idx));
	char **parts = frame_parts(p);
	size_t n = 0;
	if (!idx || !parts) {
		ret = -ENOMEM;
		goto cleanup;
	}
	for (size_t i = 0; i < p->nstacks; i++)
		if (p->stacks[i].samples[ev])
			idx[n++] = (uint32_t)i;
	/* Sorted, equal lines (stacks that differ only by thread, or by pid/tid) merged into one. */
	struct sort_ctx sc = { p, parts, opts && opts->threads, opts && opts->reverse };
	if (n > 1)
		qsort_r(idx, n, sizeof(*idx), cmp_line, &sc);
	for (size_t i = 0; i < n;) {
		size_t j = i + 1;
		uint64_t c = p->stacks[idx[i]].samples[ev];
		while (j < n && !cmp_line(&idx[j], &idx[i], &sc))
			c += p->stacks[idx[j++]].samples[ev];
		write_line(o, &p->stacks[idx[i]], parts, sc.threads, sc.reverse, c);
		i = j;
	}
cleanup:
	for (size_t i = 0; parts && i < p->nframes; i++)
		free(parts[i]);
	free(parts);
	free(idx);
	return ret ? ret : o->err;
}
