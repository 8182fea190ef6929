/* Folded stacks ("comm;root;...;leaf count"), the input of flamegraph.pl and
 * speedscope. Stacks that differ only by pid/tid are merged; counts are samples of
 * opts->sort_event. Layers are marked with the suffixes flamegraph.pl colours by
 * (perf script conventions): _[k] kernel, _[j] JIT, _[i] inlined, _[0] interpreted.
 * `viprof report -f folded --event steal` draws steal time: each victim thread's most
 * frequent sampled stack ending in a "[hypervisor: steal]" leaf (idle: "[idle]"), its
 * count the stolen time in periods of the recording's time event (1 ms when none),
 * as postproc/session.c computes it; no suffix, flamegraph.pl has no hypervisor colour. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "postproc/report.h"
#include "common/util.h"

struct line {
	char *s;
	uint64_t count;
};

static const char *suffix(int layer)
{
	switch (layer) {
	case VP_LAYER_KERNEL: return "_[k]";
	case VP_LAYER_JIT: return "_[j]";
	case VP_LAYER_INLINED: return "_[i]";
	case VP_LAYER_INTERPRETED: return "_[0]";
	default: return "";
	}
}

struct buf {
	char *s;
	size_t len, cap;
};

static int put(struct buf *b, const char *s, bool sanitize)
{
	size_t n = strlen(s);
	if (b->len + n + 1 > b->cap) {
		size_t cap = (b->len + n + 1) * 2;
		char *ns = realloc(b->s, cap);
		if (!ns)
			return -ENOMEM;
		b->s = ns;
		b->cap = cap;
	}
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		/* ';' separates frames and a newline ends the line: neither may be in a name. */
		if (sanitize && c == ';')
			c = ':';
		else if (sanitize && (c == '\n' || c == '\r'))
			c = ' ';
		b->s[b->len++] = c;
	}
	b->s[b->len] = '\0';
	return 0;
}

static int cmp_line(const void *a, const void *b)
{
	return strcmp(((const struct line *)a)->s, ((const struct line *)b)->s);
}

int report_folded(const struct vp_profile *p, struct vp_out *o, const struct vp_report_opts *opts)
{
	int ev = opts ? opts->sort_event : 0, ret = 0;
	if (ev < 0 || ev >= p->nevents)
		ev = 0;
	if (!p->nevents)
		return o->err;
	struct line *lines = calloc(p->nstacks + 1, sizeof(*lines));
	size_t n = 0;
	if (!lines)
		return -ENOMEM;
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct vp_stack *s = &p->stacks[i];
		if (!s->samples[ev])
			continue;
		struct buf b = { 0 };
		ret = put(&b, s->comm && *s->comm ? s->comm : "[unknown]", true);
		for (uint32_t k = 0; !ret && k < s->nframes; k++) {
			const struct vp_frame *f = &p->frames[s->frames[k]];
			ret = put(&b, ";", false);
			if (!ret)
				ret = put(&b, f->name, true);
			if (!ret)
				ret = put(&b, suffix(f->layer), false);
		}
		if (ret) {
			free(b.s);
			goto cleanup;
		}
		lines[n].s = b.s;
		lines[n].count = s->samples[ev];
		n++;
	}
	vp_sort(lines, n, sizeof(*lines), cmp_line);
	for (size_t i = 0; i < n;) {
		size_t j = i + 1;
		uint64_t c = lines[i].count;
		while (j < n && !strcmp(lines[j].s, lines[i].s))
			c += lines[j++].count;
		vp_out__printf(o, "%s %llu\n", lines[i].s, (unsigned long long)c);
		i = j;
	}
cleanup:
	for (size_t i = 0; i < n; i++)
		free(lines[i].s);
	free(lines);
	return ret ? ret : o->err;
}
