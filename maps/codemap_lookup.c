/* Looking things up in a code map already read (maps/codemap.h): names, lines, epochs,
 * threads and the HotSpot Method* table. Only the map's public tables are read here; the
 * flat map, which the reader owns, is searched in maps/codemap.c. */
#define _GNU_SOURCE
#include "maps/codemap.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "maps/codemap_format.h"

const char *vp_cm_reason_name(uint32_t reason)
{
	switch (reason) {
	case VP_EPOCH_START: return "start";
	case VP_EPOCH_GC: return "gc";
	case VP_EPOCH_REUSE: return "reuse";
	case VP_EPOCH_ATTACH: return "attach";
	case VP_EPOCH_IMPORT: return "import";
	default: return "unknown";
	}
}

const char *vp_cm_gc_kind_name(uint32_t kind)
{
	switch (kind) {
	case VP_GC_YOUNG: return "young";
	case VP_GC_FULL: return "full";
	case VP_GC_CONCURRENT: return "concurrent";
	default: return "unknown";
	}
}

const char *vp_codemap__gc_text(const struct vp_codemap *m, size_t e, char *buf, size_t len)
{
	const struct vp_cm_epoch_info *ep = e < m->nepochs ? &m->epochs[e] : NULL;
	if (!ep || !ep->gc_known) {
		snprintf(buf, len, "%s", "");
		return buf;
	}
	char id[16] = "";
	if (ep->gc_id)
		snprintf(id, sizeof(id), " %u", ep->gc_id);
	snprintf(buf, len, "GC%s (%s%s%s)", id, vp_cm_gc_kind_name(ep->gc_kind), ep->gc_name[0] ? ", " : "", ep->gc_name);
	return buf;
}

uint64_t vp_codemap__method_at(const struct vp_codemap *m, uint64_t method_ptr, uint64_t t)
{
	size_t lo = 0, hi = m->nptrs;

	/* The first entry for method_ptr. */
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (m->ptrs[mid].method_ptr < method_ptr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == m->nptrs || m->ptrs[lo].method_ptr != method_ptr)
		return 0;
	size_t best = SIZE_MAX;
	for (size_t i = lo; i < m->nptrs && m->ptrs[i].method_ptr == method_ptr && m->ptrs[i].time <= t; i++)
		best = i;
	if (best != SIZE_MAX)
		return m->ptrs[best].method_id;
	return m->ptrs[lo].preexisting ? m->ptrs[lo].method_id : 0;
}

const char *vp_codemap__thread_name(const struct vp_codemap *m, uint32_t tid, uint64_t t)
{
	size_t lo = 0, hi = m->nthreads;

	while (lo < hi) {   /* the first record of tid */
		size_t mid = (lo + hi) / 2;

		if (m->threads[mid].tid < tid)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == m->nthreads || m->threads[lo].tid != tid)
		return NULL;
	size_t best = SIZE_MAX;
	for (size_t i = lo; i < m->nthreads && m->threads[i].tid == tid && m->threads[i].time <= t; i++)
		best = i;
	const struct vp_cm_thread_info *x = best != SIZE_MAX ? &m->threads[best]
					    : (m->threads[lo].flags & VP_CM_THREAD_PREEXISTING) ? &m->threads[lo] : NULL;
	/* A sample a moment before its thread's ThreadStart reached the agent: the thread
	 * ran already (the record is written from the thread itself). */
	if (!x && t + VP_CM_THREAD_EARLY_NS >= m->threads[lo].time)
		x = &m->threads[lo];
	return x && !(x->flags & VP_CM_THREAD_ENDED) && x->name[0] ? x->name : NULL;
}

const struct vp_cm_name_info *vp_codemap__name(const struct vp_codemap *m, uint64_t id)
{
	size_t lo = 0, hi = m->nnames; /* last with method_id <= id */
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (m->names[mid].method_id <= id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo && m->names[lo - 1].method_id == id ? &m->names[lo - 1] : NULL;
}

uint32_t vp_codemap__line(const struct vp_cm_name_info *n, int32_t bci)
{
	uint32_t line = 0, best = 0;
	bool have = false;
	if (!n || bci < 0)
		return 0;
	for (uint32_t i = 0; i < n->nlines; i++) {
		if (n->lines[i].start_bci <= (uint32_t)bci && (!have || n->lines[i].start_bci >= best)) {
			best = n->lines[i].start_bci;
			line = n->lines[i].line;
			have = true;
		}
	}
	return line;
}

const struct vp_cm_method_info *vp_codemap__in_epoch(const struct vp_codemap *m, size_t e, uint64_t addr)
{
	if (e >= m->nepochs)
		return NULL;
	const struct vp_cm_epoch_info *ep = &m->epochs[e];
	size_t lo = 0, hi = ep->nloads; /* last with start <= addr */
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (m->methods[ep->by_addr[mid]].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* Within one epoch ranges do not overlap, except in damaged or imported maps: look a
	 * few entries back so a long range is still found behind a short one. */
	for (size_t k = lo, n = 0; k-- > 0 && n < 8; n++) {
		const struct vp_cm_method_info *x = &m->methods[ep->by_addr[k]];
		if (addr < x->start + (x->size ? x->size : 1))
			return x;
	}
	return NULL;
}

const struct vp_cm_blob_info *vp_codemap__blob(const struct vp_codemap *m, uint64_t addr)
{
	size_t lo = 0, hi = m->nblobs;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (m->blobs[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t k = lo, n = 0; k-- > 0 && n < 8; n++)
		if (addr < m->blobs[k].start + m->blobs[k].size)
			return &m->blobs[k];
	return NULL;
}

size_t vp_codemap__epoch_at(const struct vp_codemap *m, uint64_t t)
{
	size_t lo = 0, hi = m->nepochs; /* last with t_begin <= t */
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (m->epochs[mid].t_begin <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? lo - 1 : 0;
}

void vp_cm_class_name(const char *sig, char *out, size_t len)
{
	static const struct { char c; const char *name; } prim[] = {
		{ 'Z', "boolean" }, { 'B', "byte" }, { 'C', "char" }, { 'S', "short" }, { 'I', "int" },
		{ 'J', "long" }, { 'F', "float" }, { 'D', "double" }, { 'V', "void" },
	};
	int dims = 0;
	size_t o = 0;
	if (!len)
		return;
	while (sig[dims] == '[')
		dims++;
	const char *b = sig + dims;
	if (*b == 'L') {
		size_t n = strcspn(b + 1, ";");
		for (size_t k = 0; k < n && o + 1 < len; k++)
			out[o++] = b[1 + k] == '/' ? '.' : b[1 + k];
	} else {
		const char *name = NULL;
		for (size_t k = 0; k < sizeof(prim) / sizeof(prim[0]); k++)
			if (*b == prim[k].c && !b[1])
				name = prim[k].name;
		if (!name)
			name = *sig ? sig : "[unknown class]";
		for (; *name && o + 1 < len; name++)
			out[o++] = *name;
	}
	for (int d = 0; d < dims && o + 2 < len; d++) {
		out[o++] = '[';
		out[o++] = ']';
	}
	out[o] = '\0';
}
