/* Reading code maps (maps/codemap_format.h) into struct vp_codemap (perf maps and jitdump
 * are imported and exported in maps/codemap_io.c; lookups are in maps/codemap_lookup.c).
 * Every length inside a record is checked against the record; a bad record is an error
 * naming the file and offset, never a crash. */
#define _GNU_SOURCE /* qsort_r */
#include "maps/codemap.h"
#include "maps/codemap_build.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/chunkfile.h"
#include "common/util.h"
#include "maps/codemap_budget.h"
#include "maps/codemap_flat.h"
#include "maps/codemap_format.h"
#include "maps/epoch_rule.h"

struct priv {
	char **strs;           /* every string we own */
	size_t nstrs, capstrs;
	/* start address -> index of the last method loaded there (open addressing). */
	uint64_t *hkeys;
	uint32_t *hvals;
	size_t hcap, hn;
	struct vp_cm_flat flat;
	size_t cap_methods, cap_blobs, cap_epochs, cap_names, cap_inlines, cap_ptrs, cap_threads;
	size_t cap_allocs, cap_alloc_frames, cap_vthreads;
	int32_t cur_epoch;     /* -1 before the first EPOCH_BEGIN */
	uint32_t *unnamed;     /* METHOD_LOAD2 methods, named from METHOD_NAME in finish() */
	size_t nunnamed, cap_unnamed;
	uint32_t file;
	struct vp_cm_budget budget;   /* maps/codemap_budget.h */
};

#define GROW(arr, cap, need) vp_cm_budget__grow(&pv->budget, (void **)&(arr), &(cap), (need), sizeof(*(arr)))

/* malloc(n), charged to the map's budget; NULL with errno E2BIG or ENOMEM. */
static void *cm_alloc(struct priv *pv, size_t n)
{
	return vp_cm_budget__alloc(&pv->budget, n);
}

static const char *own_str(struct priv *pv, const char *s, size_t len)
{
	if (GROW(pv->strs, pv->capstrs, pv->nstrs + 1))
		return NULL;
	char *c = cm_alloc(pv, len + 1);
	if (!c)
		return NULL;
	memcpy(c, s, len);
	c[len] = '\0';
	pv->strs[pv->nstrs++] = c;
	return c;
}

static size_t hslot(const struct priv *pv, uint64_t k)
{
	return (size_t)((k * 0x9e3779b97f4a7c15ull) >> 17) & (pv->hcap - 1);
}

static int hput(struct priv *pv, uint64_t k, uint32_t v)
{
	if ((pv->hn + 1) * 2 > pv->hcap) {
		size_t oc = pv->hcap, nc = oc ? oc * 2 : 1024;
		uint64_t *ok = pv->hkeys;
		uint32_t *ov = pv->hvals;
		pv->hkeys = cm_alloc(pv, nc * sizeof(uint64_t));
		pv->hvals = cm_alloc(pv, nc * sizeof(uint32_t));
		if (!pv->hkeys || !pv->hvals) {
			free(pv->hkeys);
			free(pv->hvals);
			pv->hkeys = ok;
			pv->hvals = ov;
			return -ENOMEM;
		}
		memset(pv->hvals, 0xff, nc * sizeof(uint32_t));
		pv->hcap = nc;
		pv->hn = 0;
		for (size_t i = 0; i < oc; i++)
			if (ov[i] != UINT32_MAX)
				hput(pv, ok[i], ov[i]);
		free(ok);
		free(ov);
	}
	size_t i = hslot(pv, k);
	while (pv->hvals[i] != UINT32_MAX && pv->hkeys[i] != k)
		i = (i + 1) & (pv->hcap - 1);
	if (pv->hvals[i] == UINT32_MAX)
		pv->hn++;
	pv->hkeys[i] = k;
	pv->hvals[i] = v;
	return 0;
}

static uint32_t hget(const struct priv *pv, uint64_t k)
{
	if (!pv->hcap)
		return UINT32_MAX;
	for (size_t i = hslot(pv, k);; i = (i + 1) & (pv->hcap - 1)) {
		if (pv->hvals[i] == UINT32_MAX)
			return UINT32_MAX;
		if (pv->hkeys[i] == k)
			return pv->hvals[i];
	}
}

static struct vp_codemap *codemap_new(void)
{
	struct vp_codemap *m = calloc(1, sizeof(*m));
	struct priv *pv = calloc(1, sizeof(*pv));
	if (!m || !pv) {
		free(m);
		free(pv);
		errno = ENOMEM;
		return NULL;
	}
	pv->cur_epoch = -1;
	m->priv = pv;
	return m;
}

void vp_codemap__free(struct vp_codemap *m)
{
	if (!m)
		return;
	struct priv *pv = m->priv;
	for (size_t i = 0; i < pv->nstrs; i++)
		free(pv->strs[i]);
	free(pv->strs);
	free(pv->hkeys);
	free(pv->hvals);
	vp_cm_flat__free(&pv->flat);
	free(pv->unnamed);
	for (size_t i = 0; i < m->nepochs; i++)
		free(m->epochs[i].by_addr);
	for (size_t i = 0; i < m->ninlines; i++) {
		free(m->inlines[i].pcs);
		free(m->inlines[i].frames);
	}
	for (size_t i = 0; i < m->nnames; i++)
		free(m->names[i].lines);
	free(m->methods);
	free(m->blobs);
	free(m->epochs);
	free(m->names);
	free(m->inlines);
	free(m->ptrs);
	free(m->threads);
	free(m->allocs);
	free(m->alloc_frames);
	free(m->vthreads);
	free(pv);
	free(m);
}

/* ---- building ---- */

static int begin_epoch(struct vp_codemap *m, uint32_t id, uint32_t reason, uint64_t t)
{
	struct priv *pv = m->priv;
	if (GROW(m->epochs, pv->cap_epochs, m->nepochs + 1))
		return -ENOMEM;
	m->epochs[m->nepochs] = (struct vp_cm_epoch_info){ .id = id, .reason = reason, .t_begin = t,
							    .file = pv->file };
	pv->cur_epoch = (int32_t)m->nepochs++;
	return 0;
}

static int ensure_epoch(struct vp_codemap *m, uint64_t t)
{
	struct priv *pv = m->priv;
	return pv->cur_epoch < 0 ? begin_epoch(m, 0, VP_EPOCH_START, t) : 0;
}

static int add_method(struct vp_codemap *m, uint64_t start, uint32_t size, uint64_t id, uint64_t t,
		      const char *name, size_t nl, const char *klass, size_t cl, const char *mname,
		      size_t ml, const char *sig, size_t sl)
{
	struct priv *pv = m->priv;
	int err = ensure_epoch(m, t);
	if (err || (err = GROW(m->methods, pv->cap_methods, m->nmethods + 1)))
		return err ? err : -ENOMEM;
	struct vp_cm_method_info *x = &m->methods[m->nmethods];
	*x = (struct vp_cm_method_info){ .start = start, .size = size, .epoch = (uint32_t)pv->cur_epoch,
					 .method_id = id, .load_time = t, .unload_time = VP_CM_NEVER, .inl = -1,
					 .level = VP_CM_LEVEL_UNKNOWN };
	x->name = own_str(pv, name, nl);
	x->klass = own_str(pv, klass, cl);
	x->mname = own_str(pv, mname, ml);
	x->sig = own_str(pv, sig, sl);
	if (!x->name || !x->klass || !x->mname || !x->sig)
		return -ENOMEM;
	if ((err = hput(pv, start, (uint32_t)m->nmethods)))
		return err;
	m->epochs[pv->cur_epoch].nloads++;
	m->nmethods++;
	return 0;
}

static int bad(char *err, size_t errlen, const char *path, const char *what, uint64_t n)
{
	vp_set_err(err, errlen, "%s: corrupt code map: %s in record %" PRIu64 "; the file is damaged, re-record it",
		path, what, n);
	return -EBADMSG;
}

/* One unsigned LEB128 number of the INLINE2 stream; -1 when it runs past end or over
 * 64 bits. */
static int uleb(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	uint64_t x = 0;

	for (unsigned shift = 0; shift < 64; shift += 7) {
		if (*p >= end)
			return -1;
		uint8_t b = *(*p)++;
		x |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*v = x;
			return 0;
		}
	}
	return -1;
}

static int64_t unzigzag(uint64_t v) { return (int64_t)(v >> 1) ^ -(int64_t)(v & 1); }

/* Expands an INLINE2 body (after its fixed part) into in's pc and frame tables, checking
 * every number against the record; the tables are then what INLINE gives. 0 or -EBADMSG. */
static int decode_inline2(const struct vp_cm_inline2 *x, const uint8_t *b, struct vp_cm_inline_info *in)
{
	const uint8_t *ids = b, *p = b + (size_t)x->nmethods * 8, *end = p + x->bytes;
	int64_t off = 0;
	uint32_t nf = 0;

	for (uint32_t i = 0; i < x->npcs; i++) {
		uint64_t delta, keep, fresh;

		if (uleb(&p, end, &delta) || uleb(&p, end, &keep) || uleb(&p, end, &fresh))
			return -EBADMSG;
		off += unzigzag(delta);
		uint32_t prev_depth = i ? in->pcs[i - 1].depth : 0;
		if (off < 0 || off > UINT32_MAX || keep > prev_depth || fresh > UINT16_MAX ||
		    keep + fresh == 0 || keep + fresh > UINT16_MAX || nf + keep + fresh > x->nframes)
			return -EBADMSG;
		struct vp_cm_pc *pc = &in->pcs[i];
		*pc = (struct vp_cm_pc){ .pc_offset = (uint32_t)off, .depth = (uint16_t)(keep + fresh), .first = nf };
		for (uint64_t k = 0; k < fresh; k++) {
			uint64_t mi, bci;

			if (uleb(&p, end, &mi) || uleb(&p, end, &bci) || mi >= x->nmethods)
				return -EBADMSG;
			int64_t sb = unzigzag(bci);
			if (sb < INT32_MIN || sb > INT32_MAX)
				return -EBADMSG;
			struct vp_cm_frame *f = &in->frames[nf++];
			*f = (struct vp_cm_frame){ .bci = (int32_t)sb };
			memcpy(&f->method_id, ids + mi * 8, 8);
		}
		/* The outer frames the previous pc had. */
		if (keep) {
			memcpy(&in->frames[nf], &in->frames[in->pcs[i - 1].first + prev_depth - keep],
			       keep * sizeof(*in->frames));
			nf += (uint32_t)keep;
		}
	}
	if (nf != x->nframes || p != end)
		return -EBADMSG;
	return 0;
}

/* Reads a METHOD_NAMES body (after its fixed part) into m->names. 0, -EBADMSG or -ENOMEM. */
static int read_method_names(struct vp_codemap *m, const struct vp_cm_method_names *x, const uint8_t *b)
{
	struct priv *pv = m->priv;
	const char *klass = (const char *)b, *file = klass + x->class_len;
	const uint8_t *p = b + x->class_len + x->file_len, *end = p + x->bytes;
	char *name = NULL;
	uint64_t id = 0;
	int err = 0;

	const char *own_file = own_str(pv, file, x->file_len);
	if (!own_file || GROW(m->names, pv->cap_names, m->nnames + x->n))
		return -ENOMEM;
	if (!(name = malloc((size_t)x->class_len + 1 + 65536)))
		return -ENOMEM;
	memcpy(name, klass, x->class_len);
	name[x->class_len] = '.';
	for (uint32_t i = 0; i < x->n; i++) {
		uint64_t d, len, nlines, sb, ln;
		int64_t bci = 0, line = 0;

		if (uleb(&p, end, &d) || uleb(&p, end, &len) || len > 65535 || len > (uint64_t)(end - p)) {
			err = -EBADMSG;
			goto cleanup;
		}
		id += (uint64_t)unzigzag(d);
		memcpy(name + x->class_len + 1, p, len);
		p += len;
		/* Each line entry takes at least 2 bytes of what is left. */
		if (uleb(&p, end, &nlines) || nlines > (uint64_t)(end - p) / 2) {
			err = -EBADMSG;
			goto cleanup;
		}
		struct vp_cm_name_info ni = { .method_id = id, .nlines = (uint32_t)nlines, .file = own_file };
		ni.lines = cm_alloc(pv, ((size_t)nlines + 1) * sizeof(*ni.lines));
		ni.name = own_str(pv, name, x->class_len + 1 + len);
		if (!ni.lines || !ni.name) {
			free(ni.lines);
			err = -ENOMEM;
			goto cleanup;
		}
		for (uint64_t k = 0; k < nlines; k++) {
			if (uleb(&p, end, &sb) || uleb(&p, end, &ln)) {
				free(ni.lines);
				err = -EBADMSG;
				goto cleanup;
			}
			bci += unzigzag(sb);
			line += unzigzag(ln);
			ni.lines[k] = (struct vp_cm_line){ .start_bci = (uint32_t)bci, .line = (uint32_t)line };
		}
		m->names[m->nnames++] = ni;
	}
	if (p != end)
		err = -EBADMSG;
cleanup:
	free(name);
	return err;
}

static int cmp_pc(const void *a, const void *b)
{
	const struct vp_cm_pc *x = a, *y = b;

	if (x->pc_offset != y->pc_offset)
		return x->pc_offset < y->pc_offset ? -1 : 1;
	return x->first < y->first ? -1 : x->first > y->first; /* stable: the stream's order */
}

/* The method loaded at code_start with method_id, which an INLINE or INLINE2 record
 * describes; UINT32_MAX when no such load was seen. */
static uint32_t inline_owner(const struct vp_codemap *m, uint64_t code_start, uint64_t method_id)
{
	uint32_t mi = hget(m->priv, code_start);
	return mi != UINT32_MAX && m->methods[mi].method_id == method_id ? mi : UINT32_MAX;
}

/* Tables for an inlining of npcs pcs and nframes frames, and room for it in m. */
static int inline_alloc(struct vp_codemap *m, uint32_t npcs, uint32_t nframes, struct vp_cm_inline_info *in)
{
	struct priv *pv = m->priv;
	*in = (struct vp_cm_inline_info){ .npcs = npcs, .nframes = nframes };
	in->pcs = cm_alloc(pv, ((size_t)npcs + 1) * sizeof(*in->pcs));
	in->frames = in->pcs ? cm_alloc(pv, ((size_t)nframes + 1) * sizeof(*in->frames)) : NULL;
	if (!in->pcs || !in->frames || GROW(m->inlines, pv->cap_inlines, m->ninlines + 1)) {
		free(in->pcs);
		free(in->frames);
		return -ENOMEM;
	}
	return 0;
}

static void inline_free(struct vp_cm_inline_info *in)
{
	free(in->pcs);
	free(in->frames);
}

/* Makes in (from inline_alloc) the inlining of method mi. */
static void inline_attach(struct vp_codemap *m, uint32_t mi, const struct vp_cm_inline_info *in)
{
	m->methods[mi].inl = (int32_t)m->ninlines;
	m->inlines[m->ninlines++] = *in;
}

/* ---- the records, one reader each ----
 * Each reader gets a body at least its table entry's min_len long (the fixed part,
 * copied out: bodies need not be aligned) and returns 0, -ENOMEM, or -EBADMSG with *why
 * saying what is malformed. A record is all or nothing: a reader that fails leaves m as
 * it found it, but for memory it may have grown. */
struct rec {
	uint32_t type;
	uint64_t time;
	const uint8_t *b;        /* the body */
	size_t len;
};

static int rd_meta(struct vp_codemap *m, const struct rec *r, const char **why)
{
	struct vp_cm_meta x;
	memcpy(&x, r->b, sizeof(x));
	if (x.vm_len > r->len - sizeof(x)) {
		*why = "META string overruns the record";
		return -EBADMSG;
	}
	m->pid = x.pid;
	m->flags = x.flags;
	size_t vl = x.vm_len < sizeof(m->vm) - 1 ? x.vm_len : sizeof(m->vm) - 1;
	memcpy(m->vm, r->b + sizeof(x), vl);
	m->vm[vl] = '\0';
	return 0;
}

static int rd_epoch_begin(struct vp_codemap *m, const struct rec *r, const char **why)
{
	struct vp_cm_epoch_begin x;
	(void)why;
	memcpy(&x, r->b, sizeof(x));
	return begin_epoch(m, x.epoch, x.reason, r->time);
}

static int rd_gc(struct vp_codemap *m, const struct rec *r, const char **why)
{
	struct priv *pv = m->priv;
	struct vp_cm_gc x;
	memcpy(&x, r->b, sizeof(x));
	if (x.name_len > r->len - sizeof(x)) {
		*why = "GC name overruns the record";
		return -EBADMSG;
	}
	/* It explains the epoch just begun; one that names another is ignored. */
	if (pv->cur_epoch < 0 || m->epochs[pv->cur_epoch].id != x.epoch)
		return 0;
	struct vp_cm_epoch_info *ep = &m->epochs[pv->cur_epoch];
	size_t nl = x.name_len < sizeof(ep->gc_name) - 1 ? x.name_len : sizeof(ep->gc_name) - 1;
	ep->gc_known = true;
	ep->gc_kind = x.kind;
	ep->gc_id = x.gc_id;
	ep->gc_full = x.full_gcs;
	ep->gc_count = x.gcs;
	memcpy(ep->gc_name, r->b + sizeof(x), nl);
	ep->gc_name[nl] = '\0';
	return 0;
}

static int rd_epoch_end(struct vp_codemap *m, const struct rec *r, const char **why)
{
	struct priv *pv = m->priv;
	struct vp_cm_epoch_end x;
	(void)why;
	memcpy(&x, r->b, sizeof(x));
	if (pv->cur_epoch >= 0) {
		struct vp_cm_epoch_info *ep = &m->epochs[pv->cur_epoch];
		ep->ended = true;
		ep->t_end = r->time;
		ep->live_methods = x.live_methods;
		ep->live_bytes = x.live_bytes;
		ep->dropped = x.dropped;
	}
	return 0;
}

/* The compile level and flags of the method add_method just added. */
static void set_level(struct vp_codemap *m, uint8_t level, uint8_t flags)
{
	m->methods[m->nmethods - 1].level = level;
	m->methods[m->nmethods - 1].flags = flags;
}

static int rd_method_load(struct vp_codemap *m, const struct rec *r, const char **why)
{
	struct vp_cm_method_load x;
	memcpy(&x, r->b, sizeof(x));
	if ((size_t)x.name_len + x.class_len + x.mname_len + x.sig_len > r->len - sizeof(x)) {
		*why = "METHOD_LOAD strings overrun the record";
		return -EBADMSG;
	}
	const char *s = (const char *)r->b + sizeof(x), *cl = s + x.name_len, *mn = cl + x.class_len,
		   *sig = mn + x.mname_len;
	int e = add_method(m, x.code_start, x.code_size, x.method_id, r->time, s, x.name_len, cl, x.class_len, mn,
			   x.mname_len, sig, x.sig_len);
	if (!e)
		set_level(m, x.level, x.flags);
	return e;
}

static int rd_method_load2(struct vp_codemap *m, const struct rec *r, const char **why)
{
	struct priv *pv = m->priv;
	struct vp_cm_method_load2 x;
	(void)why;
	memcpy(&x, r->b, sizeof(x));
	if (GROW(pv->unnamed, pv->cap_unnamed, pv->nunnamed + 1))
		return -ENOMEM;
	pv->unnamed[pv->nunnamed] = (uint32_t)m->nmethods;
	int e = add_method(m, x.code_start, x.code_size, x.method_id, r->time, "", 0, "", 0, "", 0, "", 0);
	if (!e) {
		pv->nunnamed++;
		set_level(m, x.level, x.flags);
	}
	return e;
}

static int rd_method_unload(struct vp_codemap *m, const struct rec *r, const char **why)
{
	struct priv *pv = m->priv;
	struct vp_cm_method_unload x;
	(void)why;
	memcpy(&x, r->b, sizeof(x));
	uint32_t i = hget(pv, x.code_start);
	if (i != UINT32_MAX && m->methods[i].method_id == x.method_id && m->methods[i].unload_time == VP_CM_NEVER)
		m->methods[i].unload_time = r->time;
	int e = ensure_epoch(m, r->time);
	if (!e)
		m->epochs[pv->cur_epoch].nunloads++;
	return e;
}

static int rd_inline(struct vp_codemap *m, const struct rec *r, const char **why)
{
	struct vp_cm_inline x;
	memcpy(&x, r->b, sizeof(x));
	if ((uint64_t)x.npcs * sizeof(struct vp_cm_pc) + (uint64_t)x.nframes * sizeof(struct vp_cm_frame) >
	    r->len - sizeof(x)) {
		*why = "INLINE tables overrun the record";
		return -EBADMSG;
	}
	uint32_t mi = inline_owner(m, x.code_start, x.method_id);
	if (mi == UINT32_MAX)
		return 0; /* inlining of code we never saw loaded: nothing to attach it to */
	struct vp_cm_inline_info in;
	if (inline_alloc(m, x.npcs, x.nframes, &in))
		return -ENOMEM;
	memcpy(in.pcs, r->b + sizeof(x), (size_t)x.npcs * sizeof(*in.pcs));
	memcpy(in.frames, r->b + sizeof(x) + (size_t)x.npcs * sizeof(*in.pcs), (size_t)x.nframes * sizeof(*in.frames));
	for (uint32_t i = 0; i < x.npcs; i++) {
		if ((uint64_t)in.pcs[i].first + in.pcs[i].depth > x.nframes ||
		    (i && in.pcs[i].pc_offset < in.pcs[i - 1].pc_offset)) {
			inline_free(&in);
			*why = "INLINE pc table out of range or unsorted";
			return -EBADMSG;
		}
	}
	inline_attach(m, mi, &in);
	return 0;
}

static int rd_inline2(struct vp_codemap *m, const struct rec *r, const char **why)
{
	struct vp_cm_inline2 x;
	memcpy(&x, r->b, sizeof(x));
	if ((uint64_t)x.nmethods * 8 + x.bytes > r->len - sizeof(x)) {
		*why = "INLINE2 tables overrun the record";
		return -EBADMSG;
	}
	/* Each pc takes at least 3 bytes of the stream. Kept frames cost no bytes, so the
	 * frame count is capped (HotSpot's largest methods have a few 100k) to keep a
	 * damaged record from asking for gigabytes. */
	if ((uint64_t)x.npcs * 3 > x.bytes || x.nframes > VP_CM_INLINE2_MAX_FRAMES) {
		*why = "INLINE2 counts do not fit the record";
		return -EBADMSG;
	}
	uint32_t mi = inline_owner(m, x.code_start, x.method_id);
	if (mi == UINT32_MAX)
		return 0; /* as for INLINE */
	struct vp_cm_inline_info in;
	if (inline_alloc(m, x.npcs, x.nframes, &in))
		return -ENOMEM;
	if (decode_inline2(&x, r->b + sizeof(x), &in)) {
		inline_free(&in);
		*why = "INLINE2 stream is malformed";
		return -EBADMSG;
	}
	/* Readers look pcs up by offset; HotSpot gives them in address order already. */
	for (uint32_t i = 1; i < in.npcs; i++) {
		if (in.pcs[i].pc_offset < in.pcs[i - 1].pc_offset) {
			qsort(in.pcs, in.npcs, sizeof(*in.pcs), cmp_pc);
			break;
		}
	}
	inline_attach(m, mi, &in);
	return 0;
}

static int rd_method_names(struct vp_codemap *m, const struct rec *r, const char **why)
{
	struct vp_cm_method_names x;
	memcpy(&x, r->b, sizeof(x));
	if ((uint64_t)x.class_len + x.file_len + x.bytes > r->len - sizeof(x)) {
		*why = "METHOD_NAMES overruns the record";
		return -EBADMSG;
	}
	/* Each method takes at least 3 bytes. */
	if ((uint64_t)x.n * 3 > x.bytes) {
		*why = "METHOD_NAMES count does not fit the record";
		return -EBADMSG;
	}
	size_t before = m->nnames;
	int e = read_method_names(m, &x, r->b + sizeof(x));
	if (e == -EBADMSG) {
		/* A record is all or nothing: drop the names read before the damage. */
		for (size_t i = before; i < m->nnames; i++)
			free(m->names[i].lines);
		m->nnames = before;
		*why = "METHOD_NAMES stream is malformed";
	}
	return e;
}

static int rd_method_name(struct vp_codemap *m, const struct rec *r, const char **why)
{
	struct priv *pv = m->priv;
	struct vp_cm_method_name x;
	memcpy(&x, r->b, sizeof(x));
	if ((uint64_t)x.name_len + x.file_len + (uint64_t)x.nlines * sizeof(struct vp_cm_line) > r->len - sizeof(x)) {
		*why = "METHOD_NAME overruns the record";
		return -EBADMSG;
	}
	if (GROW(m->names, pv->cap_names, m->nnames + 1))
		return -ENOMEM;
	const char *s = (const char *)r->b + sizeof(x);
	struct vp_cm_name_info ni = { .method_id = x.method_id, .nlines = x.nlines };
	ni.name = own_str(pv, s, x.name_len);
	ni.file = own_str(pv, s + x.name_len, x.file_len);
	ni.lines = cm_alloc(pv, ((size_t)x.nlines + 1) * sizeof(*ni.lines));
	if (!ni.name || !ni.file || !ni.lines) {
		free(ni.lines);
		return -ENOMEM;
	}
	memcpy(ni.lines, s + x.name_len + x.file_len, (size_t)x.nlines * sizeof(*ni.lines));
	m->names[m->nnames++] = ni;
	return 0;
}

static int rd_method_ptr(struct vp_codemap *m, const struct rec *r, const char **why)
{
	struct priv *pv = m->priv;
	struct vp_cm_method_ptrs x;
	memcpy(&x, r->b, sizeof(x));
	if ((uint64_t)x.n * sizeof(struct vp_cm_method_ptr) > r->len - sizeof(x)) {
		*why = "METHOD_PTR overruns the record";
		return -EBADMSG;
	}
	if (GROW(m->ptrs, pv->cap_ptrs, m->nptrs + x.n))
		return -ENOMEM;
	for (uint32_t i = 0; i < x.n; i++) {
		struct vp_cm_method_ptr p;

		memcpy(&p, r->b + sizeof(x) + (size_t)i * sizeof(p), sizeof(p));
		if (!p.method_ptr || !p.method_id)
			continue;
		m->ptrs[m->nptrs++] = (struct vp_cm_ptr_info){ .method_ptr = p.method_ptr, .method_id = p.method_id,
			.time = r->time, .preexisting = (x.flags & VP_CM_PTRS_PREEXISTING) != 0 };
	}
	return 0;
}

static int rd_thread_name(struct vp_codemap *m, const struct rec *r, const char **why)
{
	struct priv *pv = m->priv;
	struct vp_cm_thread_name x;
	memcpy(&x, r->b, sizeof(x));
	if (x.name_len > r->len - sizeof(x)) {
		*why = "THREAD_NAME overruns the record";
		return -EBADMSG;
	}
	if (GROW(m->threads, pv->cap_threads, m->nthreads + 1))
		return -ENOMEM;
	const char *name = own_str(pv, (const char *)r->b + sizeof(x), x.name_len);
	if (!name)
		return -ENOMEM;
	m->threads[m->nthreads++] = (struct vp_cm_thread_info){ .tid = x.tid, .time = r->time, .flags = x.flags,
								 .name = name };
	return 0;
}

/* The layout ALLOC_SAMPLE, LOCK_SAMPLE and the VTHREAD records share after their fixed
 * part of hl bytes: nframes struct vp_cm_alloc_frame, then a string of slen bytes. The
 * frames go to m->alloc_frames (their first index into *first), the string is owned.
 * The caller then grows its own array: failing that ends the whole load (-ENOMEM or the
 * budget), so no frames are left behind in a map that is used. */
static int rd_frames_and_string(struct vp_codemap *m, const struct rec *r, size_t hl, uint32_t nframes,
				uint32_t slen, size_t *first, const char **str, const char **why)
{
	struct priv *pv = m->priv;
	size_t fl = (size_t)nframes * sizeof(struct vp_cm_alloc_frame);

	if (fl + slen > r->len - hl) {
		*why = r->type == VP_CM_ALLOC_SAMPLE || r->type == VP_CM_LOCK_SAMPLE ?
			       "ALLOC_SAMPLE frames or class overrun the record" : "VTHREAD frames or name overrun the record";
		return -EBADMSG;
	}
	if (GROW(m->alloc_frames, pv->cap_alloc_frames, m->nalloc_frames + nframes))
		return -ENOMEM;
	if (!(*str = own_str(pv, (const char *)r->b + hl + fl, slen)))
		return -ENOMEM;
	if (fl)   /* a sample with no frame: alloc_frames may still be NULL */
		memcpy(m->alloc_frames + m->nalloc_frames, r->b + hl, fl);
	*first = m->nalloc_frames;
	m->nalloc_frames += nframes;
	return 0;
}

/* ALLOC_SAMPLE and LOCK_SAMPLE. */
static int rd_sample(struct vp_codemap *m, const struct rec *r, const char **why)
{
	struct priv *pv = m->priv;
	struct vp_cm_alloc_sample x;
	const char *klass;
	size_t first;
	memcpy(&x, r->b, sizeof(x));
	int e = rd_frames_and_string(m, r, sizeof(x), x.nframes, x.class_len, &first, &klass, why);
	if (!e && GROW(m->allocs, pv->cap_allocs, m->nallocs + 1))
		e = -ENOMEM;
	if (!e)
		m->allocs[m->nallocs++] = (struct vp_cm_alloc_info){ .time = r->time, .kind = r->type, .tid = x.tid,
			.nframes = x.nframes, .first = first, .size = x.size, .weight = x.weight, .klass = klass };
	return e;
}

/* VTHREAD_MOUNT and VTHREAD_UNMOUNT. */
static int rd_vthread(struct vp_codemap *m, const struct rec *r, const char **why)
{
	struct priv *pv = m->priv;
	struct vp_cm_vthread x;
	const char *name;
	size_t first;
	memcpy(&x, r->b, sizeof(x));
	int e = rd_frames_and_string(m, r, sizeof(x), x.nframes, x.name_len, &first, &name, why);
	if (!e && GROW(m->vthreads, pv->cap_vthreads, m->nvthreads + 1))
		e = -ENOMEM;
	if (!e)
		m->vthreads[m->nvthreads++] = (struct vp_cm_vthread_info){ .time = r->time, .id = x.vthread_id,
			.carrier = x.carrier_tid, .kind = r->type, .flags = x.flags, .nframes = x.nframes,
			.first = first, .name = name };
	return e;
}

static int rd_code_blob(struct vp_codemap *m, const struct rec *r, const char **why)
{
	struct priv *pv = m->priv;
	struct vp_cm_code_blob x;
	int e;
	memcpy(&x, r->b, sizeof(x));
	if (x.name_len > r->len - sizeof(x)) {
		*why = "CODE_BLOB name overruns the record";
		return -EBADMSG;
	}
	if ((e = ensure_epoch(m, r->time)) || (e = GROW(m->blobs, pv->cap_blobs, m->nblobs + 1)))
		return e;
	struct vp_cm_blob_info bi = { .start = x.code_start, .size = x.code_size, .kind = x.kind, .time = r->time,
				      .epoch = (uint32_t)pv->cur_epoch };
	if (!(bi.name = own_str(pv, (const char *)r->b + sizeof(x), x.name_len)))
		return -ENOMEM;
	m->blobs[m->nblobs++] = bi;
	return 0;
}

/* Every record type this reader knows: its fixed part's size and its reader. Unknown
 * types are skipped (newer writers may add some). */
static const struct rec_kind {
	uint32_t type;
	size_t min_len;
	const char *name;
	int (*fn)(struct vp_codemap *m, const struct rec *r, const char **why);
} rec_kinds[] = {
	{ VP_CM_META, sizeof(struct vp_cm_meta), "META", rd_meta },
	{ VP_CM_EPOCH_BEGIN, sizeof(struct vp_cm_epoch_begin), "EPOCH_BEGIN", rd_epoch_begin },
	{ VP_CM_METHOD_LOAD, sizeof(struct vp_cm_method_load), "METHOD_LOAD", rd_method_load },
	{ VP_CM_METHOD_UNLOAD, sizeof(struct vp_cm_method_unload), "METHOD_UNLOAD", rd_method_unload },
	{ VP_CM_INLINE, sizeof(struct vp_cm_inline), "INLINE", rd_inline },
	{ VP_CM_METHOD_NAME, sizeof(struct vp_cm_method_name), "METHOD_NAME", rd_method_name },
	{ VP_CM_CODE_BLOB, sizeof(struct vp_cm_code_blob), "CODE_BLOB", rd_code_blob },
	{ VP_CM_EPOCH_END, sizeof(struct vp_cm_epoch_end), "EPOCH_END", rd_epoch_end },
	{ VP_CM_METHOD_PTR, sizeof(struct vp_cm_method_ptrs), "METHOD_PTR", rd_method_ptr },
	{ VP_CM_INLINE2, sizeof(struct vp_cm_inline2), "INLINE2", rd_inline2 },
	{ VP_CM_METHOD_LOAD2, sizeof(struct vp_cm_method_load2), "METHOD_LOAD2", rd_method_load2 },
	{ VP_CM_METHOD_NAMES, sizeof(struct vp_cm_method_names), "METHOD_NAMES", rd_method_names },
	{ VP_CM_THREAD_NAME, sizeof(struct vp_cm_thread_name), "THREAD_NAME", rd_thread_name },
	{ VP_CM_ALLOC_SAMPLE, sizeof(struct vp_cm_alloc_sample), "ALLOC_SAMPLE", rd_sample },
	{ VP_CM_LOCK_SAMPLE, sizeof(struct vp_cm_alloc_sample), "LOCK_SAMPLE", rd_sample },
	{ VP_CM_VTHREAD_MOUNT, sizeof(struct vp_cm_vthread), "VTHREAD_MOUNT", rd_vthread },
	{ VP_CM_VTHREAD_UNMOUNT, sizeof(struct vp_cm_vthread), "VTHREAD_UNMOUNT", rd_vthread },
	{ VP_CM_GC, sizeof(struct vp_cm_gc), "GC", rd_gc },
};

/* Reads one record (record n of path). 0, or -errno with err set. */
static int parse_record(struct vp_codemap *m, const struct vp_record *r, const char *path, uint64_t n,
			char *err, size_t errlen)
{
	const struct rec_kind *k = NULL;
	struct rec x = { .type = r->type, .time = r->time, .b = vp_record_body(r), .len = vp_record_body_len(r) };
	const char *why = NULL;
	char what[64];

	for (size_t i = 0; i < sizeof(rec_kinds) / sizeof(rec_kinds[0]) && !k; i++)
		if (rec_kinds[i].type == r->type)
			k = &rec_kinds[i];
	if (!k)
		return 0;
	if (x.len < k->min_len) {
		snprintf(what, sizeof(what), "short %s", k->name);
		return bad(err, errlen, path, what, n);
	}
	int e = k->fn(m, &x, &why);
	if (e == -EBADMSG)
		return bad(err, errlen, path, why ? why : k->name, n);
	if (e == -ENOMEM)
		vp_set_err(err, errlen, "%s: out of memory reading the code map", path);
	return e;
}

static int cmp_u64(uint64_t a, uint64_t b) { return a < b ? -1 : a > b; }

/* qsort_r, not a static context: maps may be loaded on several threads at once. */
static int cmp_by_start(const void *a, const void *b, void *ctx)
{
	const struct vp_codemap *m = ctx;
	const struct vp_cm_method_info *x = &m->methods[*(const uint32_t *)a],
				       *y = &m->methods[*(const uint32_t *)b];
	int c = cmp_u64(x->start, y->start);
	return c ? c : cmp_u64(*(const uint32_t *)a, *(const uint32_t *)b);
}
static int cmp_blob(const void *a, const void *b)
{
	const struct vp_cm_blob_info *x = a, *y = b;
	int c = cmp_u64(x->start, y->start);
	return c ? c : cmp_u64(x->time, y->time);
}
static int cmp_name(const void *a, const void *b)
{
	const struct vp_cm_name_info *x = a, *y = b;
	int c = cmp_u64(x->method_id, y->method_id);
	/* Equal ids keep file order (the pointers say it); the last one wins in lookups. */
	return c ? c : (x->name < y->name ? -1 : x->name > y->name);
}

static int cmp_ptr(const void *a, const void *b)
{
	const struct vp_cm_ptr_info *x = a, *y = b;

	if (x->method_ptr != y->method_ptr)
		return x->method_ptr < y->method_ptr ? -1 : 1;
	return x->time < y->time ? -1 : x->time > y->time;
}

static int cmp_thread(const void *a, const void *b)
{
	const struct vp_cm_thread_info *x = a, *y = b;

	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	return x->time < y->time ? -1 : x->time > y->time;
}

static int finish(struct vp_codemap *m, char *err, size_t errlen)
{
	struct priv *pv = m->priv;
	for (size_t e = 0; e < m->nepochs; e++) {
		struct vp_cm_epoch_info *ep = &m->epochs[e];
		ep->by_addr = cm_alloc(pv, (ep->nloads + 1) * sizeof(uint32_t));
		if (!ep->by_addr)
			goto nomem;
		ep->nloads = 0;
	}
	for (size_t i = 0; i < m->nmethods; i++) {
		struct vp_cm_epoch_info *ep = &m->epochs[m->methods[i].epoch];
		ep->by_addr[ep->nloads++] = (uint32_t)i;
	}
	for (size_t e = 0; e < m->nepochs; e++)
		if (m->epochs[e].nloads)  /* an empty epoch may have no array: qsort_r(NULL) is UB */
			qsort_r(m->epochs[e].by_addr, m->epochs[e].nloads, sizeof(uint32_t), cmp_by_start, m);
	vp_sort(m->blobs, m->nblobs, sizeof(*m->blobs), cmp_blob);
	vp_sort(m->names, m->nnames, sizeof(*m->names), cmp_name);
	if (m->nthreads)
		vp_sort(m->threads, m->nthreads, sizeof(*m->threads), cmp_thread);
	if (m->nptrs)
		vp_sort(m->ptrs, m->nptrs, sizeof(*m->ptrs), cmp_ptr);
	/* METHOD_LOAD2 carries no name: it is the METHOD_NAME of its method id. */
	for (size_t i = 0; i < pv->nunnamed; i++) {
		struct vp_cm_method_info *x = &m->methods[pv->unnamed[i]];
		const struct vp_cm_name_info *ni = vp_codemap__name(m, x->method_id);
		x->name = ni ? ni->name : "[unknown compiled method]";
	}
	pv->nunnamed = 0;
	if (vp_cm_flat__build(&pv->flat, m->methods, m->nmethods, &pv->budget))
		goto nomem;
	return 0;
nomem:
	vp_set_err(err, errlen, "out of memory indexing the code map");
	return -ENOMEM;
}

/* The one line for a map over its budget (VP_CM_READ_*). */
static int over_budget(const struct vp_codemap *m, const char *path, char *err, size_t errlen)
{
	const struct priv *pv = m->priv;
	uint64_t read = vp_cm_budget__read(&pv->budget);

	vp_set_err(err, errlen, "%s: code map not read: its records ask for over %llu MiB from %llu KiB of file (a map may "
		   "take %u times its size, at most %llu MiB); it is damaged or made to exhaust its reader",
		   path, (unsigned long long)(pv->budget.spent >> 20), (unsigned long long)(read >> 10), VP_CM_READ_RATIO,
		   (unsigned long long)(VP_CM_READ_CAP >> 20));
	return -E2BIG;
}

static int load_one(struct vp_codemap *m, const char *path, char *err, size_t errlen)
{
	struct priv *pv = m->priv;
	struct cfile_reader *r = cfile_reader__open(path, VP_KIND_CODEMAP, err, errlen);
	if (!r)
		return -errno;
	int ret = 0;
	pv->budget.bounded = true;
	pv->budget.rd = r;
	const struct vp_file_header *h = cfile_reader__header(r);
	if (h->format_version != VP_CODEMAP_FORMAT_VERSION) {
		vp_set_err(err, errlen, "%s: code map format version %u, this viprof reads %u; use a matching viprof",
			path, h->format_version, VP_CODEMAP_FORMAT_VERSION);
		ret = -EPROTO;
		goto cleanup;
	}
	if (!m->created_ns)
		m->created_ns = h->created_ns;
	((struct priv *)m->priv)->cur_epoch = -1;
	const struct vp_record *rec;
	uint64_t n = 0, skipped_before = m->skipped_records;
	int k;
	while ((k = cfile_reader__next(r, &rec)) > 0) {
		/* A malformed record is skipped (counted); only running out of memory ends
		 * the load. */
		if ((ret = parse_record(m, rec, path, n++, err, errlen))) {
			if (pv->budget.over)
				ret = over_budget(m, path, err, errlen);
			if (ret != -EBADMSG)
				goto cleanup;
			m->skipped_records++;
			ret = 0;
		}
	}
	if (k == -ENOMEM) {
		vp_set_err(err, errlen, "%s", cfile_reader__error(r));
		ret = k;
		goto cleanup;
	}
	/* Damage costs the chunks and records it covers, not the map: the names that were
	 * read are used, and m->damage says in one line what was not. */
	uint64_t sc, sb;
	char what[sizeof(m->damage)];
	size_t used = strlen(m->damage);
	if (cfile_reader__skipped(r, &sc, &sb))
		m->skipped_chunks += sc;
	if (!cfile_reader__damage(r, what, sizeof(what)) && k < 0)
		snprintf(what, sizeof(what), "%s; the records before it are used", cfile_reader__error(r));
	if (m->skipped_records > skipped_before)
		snprintf(what + strlen(what), sizeof(what) - strlen(what), "%s%s: skipped %llu malformed record(s)",
			 what[0] ? "; " : "", path, (unsigned long long)(m->skipped_records - skipped_before));
	if (what[0] && used + 2 < sizeof(m->damage))
		snprintf(m->damage + used, sizeof(m->damage) - used, "%s%s", used ? "; " : "", what);
	if (k < 0)
		m->truncated = true;
	if (cfile_reader__truncated(r))
		m->truncated = true;
cleanup:
	pv->budget.read_before += cfile_reader__offset(r);
	pv->budget.rd = NULL;
	cfile_reader__close(r);
	return ret;
}

struct vp_codemap *vp_codemap__load_file(const char *path, char *err, size_t errlen)
{
	struct vp_codemap *m = codemap_new();
	if (!m)
		return NULL;
	int ret = load_one(m, path, err, errlen);
	if (!ret && (ret = finish(m, err, errlen)) && ((struct priv *)m->priv)->budget.over)
		ret = over_budget(m, path, err, errlen);
	if (ret) {
		vp_codemap__free(m);
		errno = -ret;
		return NULL;
	}
	return m;
}

struct cand {
	char name[256];
	uint64_t created;
};
static int cmp_cand(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;
	int c = cmp_u64(x->created, y->created);
	return c ? c : strcmp(x->name, y->name);
}

struct vp_codemap *vp_codemap__load_dir(const char *dir, char *err, size_t errlen)
{
	DIR *d = opendir(dir);
	struct cand *c = NULL;
	size_t n = 0, cap = 0;
	struct vp_codemap *m = NULL;
	int ret = 0;
	if (!d) {
		ret = -errno;
		vp_set_err(err, errlen, "%s: %s; no code maps for this process (was the agent loaded?)", dir, strerror(errno));
		goto cleanup;
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		size_t l = strlen(de->d_name);
		if (strncmp(de->d_name, "codemap", 7) || l < 11 || strcmp(de->d_name + l - 4, ".vpm") ||
		    l >= sizeof(c->name))
			continue;
		if (vp_grow((void **)&c, &cap, n + 1, sizeof(*c))) {
			ret = -ENOMEM;
			goto cleanup;
		}
		snprintf(c[n].name, sizeof(c[n].name), "%s", de->d_name);
		char p[4096];
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		struct cfile_reader *r = cfile_reader__open(p, VP_KIND_CODEMAP, NULL, 0);
		c[n].created = r ? cfile_reader__header(r)->created_ns : 0;
		cfile_reader__close(r);
		n++;
	}
	if (!n) {
		ret = -ENOENT;
		vp_set_err(err, errlen, "%s: no codemap*.vpm files; run the JVM with the viprof agent", dir);
		goto cleanup;
	}
	vp_sort(c, n, sizeof(*c), cmp_cand);
	if (!(m = codemap_new())) {
		ret = -ENOMEM;
		goto cleanup;
	}
	for (size_t i = 0; i < n && !ret; i++) {
		char p[4096];
		snprintf(p, sizeof(p), "%s/%s", dir, c[i].name);
		((struct priv *)m->priv)->file = (uint32_t)i;
		ret = load_one(m, p, err, errlen);
	}
	if (!ret && (ret = finish(m, err, errlen)) && ((struct priv *)m->priv)->budget.over)
		ret = over_budget(m, dir, err, errlen);
cleanup:
	if (d)
		closedir(d);
	free(c);
	if (ret) {
		vp_codemap__free(m);
		errno = -ret;
		return NULL;
	}
	return m;
}

/* ---- building, for the importers (maps/codemap_build.h) ---- */

struct vp_codemap *vp_cm_build__new(void)
{
	return codemap_new();
}

int vp_cm_build__epoch(struct vp_codemap *m, uint32_t id, uint32_t reason, uint64_t t)
{
	return begin_epoch(m, id, reason, t);
}

int vp_cm_build__method(struct vp_codemap *m, uint64_t start, uint32_t size, uint64_t id, uint64_t t, const char *name,
			size_t name_len)
{
	return add_method(m, start, size, id, t, name, name_len, "", 0, "", 0, "", 0);
}

uint32_t vp_cm_build__last_at(const struct vp_codemap *m, uint64_t start)
{
	return hget(m->priv, start);
}

int vp_cm_build__finish(struct vp_codemap *m, char *err, size_t errlen)
{
	return finish(m, err, errlen);
}

const struct vp_cm_flat *vp_cm_build__flat(const struct vp_codemap *m)
{
	return &((const struct priv *)m->priv)->flat;
}

/* ---- lookups ---- */

const struct vp_cm_method_info *vp_codemap__flat(const struct vp_codemap *m, uint64_t addr)
{
	const struct vp_cm_flat_iv *f = vp_cm_flat__find(&((const struct priv *)m->priv)->flat, addr);
	return f ? &m->methods[f->method] : NULL;
}
