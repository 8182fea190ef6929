/* Writing code maps: the record encoders and the epoch-placing writer
 * (maps/codemap_writer.h). */
#include "maps/codemap_writer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/chunkfile.h"
#include "maps/epoch_rule.h"

/* ---- METHOD_NAME ---- */

size_t vp_cm_method_name__size(const char *name, const char *file, uint32_t nlines)
{
	return sizeof(struct vp_cm_method_name) + strlen(name) + strlen(file) + (size_t)nlines * sizeof(struct vp_cm_line);
}

void vp_cm_method_name__fill(void *dst, uint64_t id, const char *name, const char *file,
			     const struct vp_cm_line *lines, uint32_t nlines)
{
	struct vp_cm_method_name h = { .method_id = id, .name_len = (uint16_t)strlen(name),
				       .file_len = (uint16_t)strlen(file), .nlines = nlines };
	uint8_t *p = dst;

	memcpy(p, &h, sizeof(h));
	p += sizeof(h);
	memcpy(p, name, h.name_len);
	memcpy(p + h.name_len, file, h.file_len);
	/* Lines follow the strings unaligned; readers memcpy them out. */
	if (nlines)
		memcpy(p + h.name_len + h.file_len, lines, (size_t)nlines * sizeof(*lines));
}

/* ---- METHOD_NAMES ---- */

int vp_cm_names_enc__begin(struct vp_cm_names_enc *e, void *buf, size_t cap, const char *klass, const char *file)
{
	size_t cl = strlen(klass), fl = strlen(file);

	if (cl > UINT16_MAX || fl > UINT16_MAX || sizeof(e->h) + cl + fl > cap)
		return -ENOSPC;
	*e = (struct vp_cm_names_enc){ .buf = buf, .cap = cap,
				       .h = { .class_len = (uint16_t)cl, .file_len = (uint16_t)fl } };
	e->q = e->buf + sizeof(e->h);
	memcpy(e->q, klass, cl);
	memcpy(e->q + cl, file, fl);
	e->q += cl + fl;
	e->start = e->q;
	return 0;
}

/* Per method at most: id 10, name length 10 and the name, line count 5, 10 bytes a line. */
size_t vp_cm_names_enc__need(size_t ml, uint32_t nlines)
{
	return 25 + ml + (size_t)nlines * 20;
}

int vp_cm_names_enc__add(struct vp_cm_names_enc *e, uint64_t id, const char *mpart, const struct vp_cm_line *lines,
			 uint32_t nlines)
{
	size_t ml = strlen(mpart);
	int64_t bci = 0, line = 0;

	if (vp_cm_names_enc__need(ml, nlines) > (size_t)(e->buf + e->cap - e->q))
		return -ENOSPC;
	e->q += vp_cm_uleb_put(e->q, vp_cm_zigzag((int64_t)(id - e->prev_id)));
	e->q += vp_cm_uleb_put(e->q, ml);
	memcpy(e->q, mpart, ml);
	e->q += ml;
	e->q += vp_cm_uleb_put(e->q, nlines);
	for (uint32_t k = 0; k < nlines; k++) {
		struct vp_cm_line l;

		memcpy(&l, &lines[k], sizeof(l));
		e->q += vp_cm_uleb_put(e->q, vp_cm_zigzag((int64_t)l.start_bci - bci));
		e->q += vp_cm_uleb_put(e->q, vp_cm_zigzag((int64_t)l.line - line));
		bci = l.start_bci;
		line = l.line;
	}
	e->prev_id = id;
	e->h.n++;
	return 0;
}

size_t vp_cm_names_enc__end(struct vp_cm_names_enc *e)
{
	e->h.bytes = (uint32_t)(e->q - e->start);
	memcpy(e->buf, &e->h, sizeof(e->h));
	return (size_t)(e->q - e->buf);
}

/* ---- INLINE2 ---- */

void vp_cm_inl_table__init(struct vp_cm_inl_table *t)
{
	t->n = 0;
	memset(t->slot, 0, sizeof(t->slot));
}

/* The slot that holds id, or the empty slot where it would go. */
static size_t inl_slot(const struct vp_cm_inl_table *t, uint64_t id)
{
	size_t mask = VP_CM_INL_METHODS * 2 - 1, h = (size_t)(id * 0x9e3779b97f4a7c15ull >> 40) & mask;

	while (t->slot[h] && t->id[t->slot[h] - 1] != id)
		h = (h + 1) & mask;
	return h;
}

int vp_cm_inl_table__index(struct vp_cm_inl_table *t, uint64_t id, bool *fresh)
{
	size_t h = inl_slot(t, id);

	*fresh = false;
	if (t->slot[h])
		return t->slot[h] - 1;
	if (t->n == VP_CM_INL_METHODS)
		return -1;
	t->id[t->n] = id;
	t->slot[h] = (uint16_t)++t->n;
	*fresh = true;
	return (int)t->n - 1;
}

/* Pc i's depth, 0 when it is left out (outside the code, no frames, too deep). */
static uint32_t pc_depth(const struct vp_cm_inl_src *s, uint32_t i, uint64_t *pc)
{
	uint32_t d = 0;

	s->pc(s->ctx, i, pc, &d);
	return *pc >= s->code_start && *pc - s->code_start <= s->code_size && d <= UINT16_MAX ? d : 0;
}

size_t vp_cm_inline2__plan(struct vp_cm_inl_table *t, const struct vp_cm_inl_src *src, struct vp_cm_inl_plan *plan,
			   void (*fresh)(void *fctx, uint64_t id), void *fctx)
{
	*plan = (struct vp_cm_inl_plan){ 0 };
	for (uint32_t i = 0; i < src->npcs; i++) {
		uint64_t pc;
		uint32_t d = pc_depth(src, i, &pc);

		if (!d)
			continue;
		for (uint32_t k = 0; k < d && !plan->full; k++) {
			uint64_t m;
			int32_t bci;
			bool isnew;

			src->frame(src->ctx, i, k, &m, &bci);
			plan->full = vp_cm_inl_table__index(t, m, &isnew) < 0;
			if (isnew && fresh)
				fresh(fctx, m);
		}
		plan->nframes += d;
		plan->npcs++;
	}
	if (!plan->npcs || plan->full || plan->nframes > VP_CM_INLINE2_MAX_FRAMES)
		return 0;
	/* Per pc at most 10 + 3 + 3 bytes, per frame 2 + 5: far above what the encoding
	 * uses; the caller trims the record to what encode used. */
	return sizeof(struct vp_cm_inline2) + (size_t)t->n * 8 + (size_t)plan->npcs * 16 + (size_t)plan->nframes * 7;
}

/* How many outermost frames pc i shares (method and bci) with pc j. */
static uint32_t shared_outer(const struct vp_cm_inl_src *s, uint32_t i, uint32_t d, uint32_t j, uint32_t pd)
{
	uint32_t keep = 0;

	while (keep < d && keep < pd) {
		uint64_t m1, m2;
		int32_t b1, b2;

		s->frame(s->ctx, i, d - 1 - keep, &m1, &b1);
		s->frame(s->ctx, j, pd - 1 - keep, &m2, &b2);
		if (m1 != m2 || b1 != b2)
			break;
		keep++;
	}
	return keep;
}

size_t vp_cm_inline2__encode(uint8_t *b, const struct vp_cm_inl_src *src, const struct vp_cm_inl_table *t,
			     uint64_t method_id, const struct vp_cm_inl_plan *plan)
{
	struct vp_cm_inline2 h;
	uint8_t *ids = b + sizeof(h), *p = ids + (size_t)t->n * 8, *start = p;
	int64_t prev_off = 0;
	uint32_t npcs = 0, prev = 0, prev_depth = 0;

	memcpy(ids, t->id, (size_t)t->n * 8);
	for (uint32_t i = 0; i < src->npcs; i++) {
		uint64_t pc;
		uint32_t d = pc_depth(src, i, &pc);

		if (!d)
			continue;
		int64_t off = (int64_t)(pc - src->code_start);
		uint32_t keep = npcs ? shared_outer(src, i, d, prev, prev_depth) : 0;
		p += vp_cm_uleb_put(p, vp_cm_zigzag(off - prev_off));
		p += vp_cm_uleb_put(p, keep);
		p += vp_cm_uleb_put(p, d - keep);
		for (uint32_t k = 0; k < d - keep; k++) {
			uint64_t m;
			int32_t bci;

			src->frame(src->ctx, i, k, &m, &bci);
			p += vp_cm_uleb_put(p, (uint64_t)(t->slot[inl_slot(t, m)] - 1));
			p += vp_cm_uleb_put(p, vp_cm_zigzag(bci));
		}
		prev = i;
		prev_depth = d;
		prev_off = off;
		npcs++;
	}
	h = (struct vp_cm_inline2){ .code_start = src->code_start, .method_id = method_id, .npcs = npcs,
				    .nframes = (uint32_t)plan->nframes, .nmethods = t->n, .bytes = (uint32_t)(p - start) };
	memcpy(b, &h, sizeof(h));
	return (size_t)(p - b);
}

/* ---- the writer ---- */

struct vp_cm_writer {
	struct cfile_writer *w;
	uint32_t epoch;
	uint64_t epoch_t;          /* when the current epoch began */
	bool dirty;                /* the current epoch holds loads or unloads */
	uint32_t gc_since;         /* GCs since the current epoch began */
	struct vp_cm_ranges used;  /* loads of this epoch (maps/epoch_rule.h) */
	struct vp_cm_ranges live;  /* code loaded and not unloaded */
	uint64_t (*dropped)(void *ctx);
	void *dropped_ctx;
	uint64_t rec_n[16], rec_bytes[16];
};

static struct vp_cm_writer *writer_new(struct cfile_writer *cw)
{
	struct vp_cm_writer *w;

	if (!cw)
		return NULL;
	if (!(w = calloc(1, sizeof(*w)))) {
		cfile_writer__close(cw);
		errno = ENOMEM;
		return NULL;
	}
	cfile_writer__set_level(cw, 0);
	w->w = cw;
	return w;
}

struct vp_cm_writer *vp_cm_writer__create_at(int dirfd, const char *name)
{
	return writer_new(cfile_writer__create_at(dirfd, name, VP_KIND_CODEMAP, VP_CODEMAP_FORMAT_VERSION, 0, true));
}

struct vp_cm_writer *vp_cm_writer__create(const char *path)
{
	return writer_new(cfile_writer__create(path, VP_KIND_CODEMAP, VP_CODEMAP_FORMAT_VERSION, 0, true));
}

void vp_cm_writer__on_dropped(struct vp_cm_writer *w, uint64_t (*dropped)(void *ctx), void *ctx)
{
	w->dropped = dropped;
	w->dropped_ctx = ctx;
}

/* Every record goes out here, counted by type. */
static int emit(struct vp_cm_writer *w, uint32_t type, uint64_t t, const void *body, size_t len)
{
	w->rec_n[type & 15]++;
	w->rec_bytes[type & 15] += sizeof(struct vp_record) + len;
	return cfile_writer__append(w->w, type, t, body, len);
}

static int begin_epoch(struct vp_cm_writer *w, uint32_t reason, uint64_t t)
{
	struct vp_cm_epoch_begin b = { .epoch = w->epoch, .reason = reason };

	/* Epochs follow one another in time, also when a walked load dated before the
	 * current epoch's start overlaps code of this epoch. */
	if (t < w->epoch_t)
		t = w->epoch_t;
	w->epoch_t = t;
	w->gc_since = 0;
	vp_cm_ranges__clear(&w->used);
	w->dirty = false;
	return emit(w, VP_CM_EPOCH_BEGIN, t, &b, sizeof(b));
}

/* Between two epochs the chunk is not flushed: the next EPOCH_BEGIN goes out in the same
 * chunk, so a reader never sees a map whose last epoch ended while its session goes on. */
static int end_epoch(struct vp_cm_writer *w, uint64_t t)
{
	uint64_t bytes = 0;

	for (size_t i = 0; i < w->live.n; i++)
		bytes += w->live.v[i].end - w->live.v[i].start;
	struct vp_cm_epoch_end e = { .epoch = w->epoch, .live_methods = (uint32_t)w->live.n, .live_bytes = bytes,
				     .dropped = w->dropped ? w->dropped(w->dropped_ctx) : 0 };
	return emit(w, VP_CM_EPOCH_END, t, &e, sizeof(e));
}

static int next_epoch(struct vp_cm_writer *w, uint32_t reason, uint64_t t)
{
	int err = end_epoch(w, t);

	if (err)
		return err;
	w->epoch++;
	return begin_epoch(w, reason, t);
}

int vp_cm_writer__start(struct vp_cm_writer *w, uint64_t t, uint32_t pid, uint32_t flags, const char *vm)
{
	uint8_t body[sizeof(struct vp_cm_meta) + 256];
	size_t vl = strnlen(vm, 255);
	struct vp_cm_meta m = { .pid = pid, .flags = flags, .agent_version = VP_AGENT_VERSION, .vm_len = (uint16_t)vl };
	int err;

	memcpy(body, &m, sizeof(m));
	memcpy(body + sizeof(m), vm, vl);
	if ((err = emit(w, VP_CM_META, t, body, sizeof(m) + vl)) ||
	    (err = begin_epoch(w, (flags & VP_CM_META_LATE_ATTACH) ? VP_EPOCH_ATTACH : VP_EPOCH_START, t)))
		return err;
	return cfile_writer__flush(w->w);
}

int vp_cm_writer__put(struct vp_cm_writer *w, uint32_t type, uint64_t t, const void *body, size_t len)
{
	int err;

	if (type == VP_CM_METHOD_LOAD2 && len >= sizeof(struct vp_cm_method_load2)) {
		struct vp_cm_method_load2 l;

		memcpy(&l, body, sizeof(l));
		uint64_t s = l.code_start, e = vp_cm_load_end(s, l.code_size);
		if (vp_cm_load_reuses(&w->used, s, l.code_size) && (err = next_epoch(w, VP_EPOCH_REUSE, t)))
			return err;
		if ((err = vp_cm_ranges__insert(&w->used, s, e)))
			return err;
		vp_cm_ranges__remove_start(&w->live, s); /* a missed unload must not double count */
		if ((err = vp_cm_ranges__insert(&w->live, s, e)))
			return err;
		w->dirty = true;
	} else if (type == VP_CM_METHOD_UNLOAD && len >= sizeof(struct vp_cm_method_unload)) {
		struct vp_cm_method_unload u;

		memcpy(&u, body, sizeof(u));
		vp_cm_ranges__remove_start(&w->live, u.code_start);
		w->dirty = true;
	}
	return emit(w, type, t, body, len);
}

int vp_cm_writer__gc(struct vp_cm_writer *w, uint64_t t, uint32_t gc_id, uint32_t full_gcs, uint8_t kind,
		     const char *name)
{
	uint32_t since = ++w->gc_since;
	uint8_t b[sizeof(struct vp_cm_gc) + 64];
	int err;

	/* An epoch that saw no code change needs no successor: idle GCs add no epochs. */
	if (!w->dirty)
		return 0;
	if ((err = next_epoch(w, VP_EPOCH_GC, t)))   /* resets gc_since */
		return err;
	/* Which GC it was, right after the EPOCH_BEGIN it explains. */
	struct vp_cm_gc x = { .epoch = w->epoch, .gc_id = gc_id, .full_gcs = full_gcs, .gcs = since, .kind = kind,
			      .name_len = (uint16_t)strnlen(name ? name : "", 64) };
	memcpy(b, &x, sizeof(x));
	memcpy(b + sizeof(x), name, x.name_len);
	return emit(w, VP_CM_GC, t, b, sizeof(x) + x.name_len);
}

int vp_cm_writer__flush(struct vp_cm_writer *w)
{
	return cfile_writer__flush(w->w);
}

uint32_t vp_cm_writer__epoch(const struct vp_cm_writer *w)
{
	return w->epoch;
}

void vp_cm_writer__counts(const struct vp_cm_writer *w, uint64_t n[16], uint64_t bytes[16])
{
	for (int i = 0; i < 16; i++) {
		n[i] += w->rec_n[i];
		bytes[i] += w->rec_bytes[i];
	}
}

int vp_cm_writer__close(struct vp_cm_writer *w, uint64_t t)
{
	if (!w)
		return 0;
	int err = end_epoch(w, t);
	int cerr = cfile_writer__close(w->w);   /* flushes */

	vp_cm_ranges__free(&w->used);
	vp_cm_ranges__free(&w->live);
	free(w);
	return err ? err : cerr;
}
