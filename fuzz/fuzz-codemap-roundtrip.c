/* Write -> read for the code map: the input is a script of records (loads, unloads,
 * names, inlinings, GCs, blobs, thread names, samples, virtual threads, Method*s) that
 * the real writer (maps/codemap_writer.h) writes and the real reader (maps/codemap.h)
 * reads back; what was read must equal what was written, and the epochs must be those
 * of the rule written down here on its own (a load over code of this epoch begins a
 * REUSE epoch; a GC after a code change begins a GC epoch). Any difference aborts.
 *
 * Built as a libFuzzer target (fuzz/CMakeLists.txt), and with -DRT_MAIN as the unit test
 * test-codemap-roundtrip, which feeds it seeded random scripts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "maps/codemap.h"
#include "maps/codemap_writer.h"
#include "fuzz-util.h"

#define MAXOPS 160
#define MAXPCS 24
#define MAXF 8

#define CHECK(c)                                                                                   \
	do {                                                                                       \
		if (!(c)) {                                                                        \
			fprintf(stderr, "roundtrip: %s:%d: %s\n", __FILE__, __LINE__, #c);         \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

struct script {
	const uint8_t *p;
	size_t n;
};

static uint8_t u8(struct script *s)
{
	if (!s->n)
		return 0;
	s->n--;
	return *s->p++;
}

static uint32_t u16(struct script *s)
{
	return u8(s) | (uint32_t)u8(s) << 8;
}

/* A string of n bytes drawn from a small alphabet, NUL-ended. */
static void str(struct script *s, char *out, size_t n)
{
	static const char abc[] = "abcdefghij.()<>$_[;L/ 0123";

	for (size_t i = 0; i < n; i++)
		out[i] = abc[u8(s) % (sizeof(abc) - 1)];
	out[n] = '\0';
}

/* ---- what was written ---- */

struct inl {
	uint64_t start;
	uint32_t size, npcs;
	uint32_t off[MAXPCS], depth[MAXPCS], first[MAXPCS];
	uint64_t m[MAXPCS * MAXF];
	int32_t bci[MAXPCS * MAXF];
};

static struct load {
	uint64_t start, id, t, unload_t;
	uint32_t size, epoch;
	uint8_t level, flags;
	int inl;                 /* into inls, -1 */
} loads[MAXOPS];
static struct inl inls[MAXOPS];
static struct name {
	uint64_t id;
	char name[48], file[12];
	uint32_t nlines;
	struct vp_cm_line lines[MAXF];
} names[MAXOPS * 5];
static struct epoch {
	uint32_t reason, live_n;
	uint64_t t_begin, t_end, live_bytes, dropped;
	bool gc;
	uint32_t gc_id, full, gcs;
	uint8_t kind;
	char gname[16];
} epochs[MAXOPS + 2];
static struct vp_cm_blob_info blobs[MAXOPS];
static char blob_names[MAXOPS][32];
static struct vp_cm_thread_info threads[MAXOPS];
static char thread_names[MAXOPS][40];
static struct sample {
	uint32_t type, tid, nf;
	uint64_t id, size, weight, t;
	uint32_t flags;
	char text[24];
	struct vp_cm_alloc_frame f[MAXF];
} samples[MAXOPS];
static struct vp_cm_ptr_info ptrs[MAXOPS * 4];
static size_t nloads, ninls, nnames, nepochs, nblobs, nthreads, nsamples, nptrs;

/* The rule's state, kept apart from the writer's. */
static struct rng {
	uint64_t start, end;
} used[MAXOPS], live[MAXOPS];
static size_t nused, nlive;
static uint32_t gcs_since;
static uint64_t dropped;

static uint64_t dropped_now(void *ctx)
{
	(void)ctx;
	return dropped;
}

static void live_remove(uint64_t s)
{
	for (size_t i = 0; i < nlive; i++)
		if (live[i].start == s) {
			live[i] = live[--nlive];
			return;
		}
}

/* The current epoch ends at t; the next begins for reason. */
static void model_next_epoch(uint64_t t, uint32_t reason)
{
	struct epoch *e = &epochs[nepochs - 1];

	e->t_end = t;
	e->live_n = (uint32_t)nlive;
	e->live_bytes = 0;
	for (size_t i = 0; i < nlive; i++)
		e->live_bytes += live[i].end - live[i].start;
	e->dropped = dropped;
	epochs[nepochs++] = (struct epoch){ .reason = reason, .t_begin = t };
	nused = 0;
	gcs_since = 0;
}

static bool dirty;

static void put(struct vp_cm_writer *w, uint32_t type, uint64_t t, const void *b, size_t len)
{
	CHECK(vp_cm_writer__put(w, type, t, b, len) == 0);
	CHECK(vp_cm_writer__epoch(w) == nepochs - 1);
}

static void op_load(struct vp_cm_writer *w, struct script *s, uint64_t t)
{
	struct load *l = &loads[nloads++];
	uint64_t end;

	*l = (struct load){ .start = 0x10000 + (uint64_t)(u8(s) % 48) * 0x80, .size = (u8(s) % 6) * 0x40,
			    .id = 0x7f0000001000 + (u8(s) % 24) * 8, .level = u8(s) % 6, .flags = u8(s) & 1,
			    .t = t, .unload_t = VP_CM_NEVER, .inl = -1 };
	end = l->start + (l->size ? l->size : 1);   /* code of size 0 still takes its address */
	for (size_t i = 0; i < nused; i++)
		if (used[i].start < end && used[i].end > l->start) {
			model_next_epoch(t, VP_EPOCH_REUSE);
			break;
		}
	used[nused++] = (struct rng){ l->start, end };
	live_remove(l->start);
	live[nlive++] = (struct rng){ l->start, end };
	dirty = true;
	l->epoch = (uint32_t)nepochs - 1;
	struct vp_cm_method_load2 b = { .code_start = l->start, .method_id = l->id, .code_size = l->size,
					.level = l->level, .flags = l->flags };
	put(w, VP_CM_METHOD_LOAD2, t, &b, sizeof(b));
}

static void op_unload(struct vp_cm_writer *w, struct script *s, uint64_t t)
{
	if (!nloads)
		return;
	const struct load *u = &loads[u8(s) % nloads];
	struct vp_cm_method_unload b = { .code_start = u->start, .method_id = u->id };

	/* The reader marks the latest load at that address, if it is that method's. */
	for (size_t i = nloads; i-- > 0;)
		if (loads[i].start == u->start) {
			if (loads[i].id == u->id && loads[i].unload_t == VP_CM_NEVER)
				loads[i].unload_t = t;
			break;
		}
	live_remove(u->start);
	dirty = true;
	put(w, VP_CM_METHOD_UNLOAD, t, &b, sizeof(b));
}

static void op_name(struct vp_cm_writer *w, struct script *s, uint64_t t)
{
	static uint8_t buf[4096];
	struct name *n = &names[nnames++];

	n->id = 0x7f0000001000 + (u8(s) % 24) * 8;
	str(s, n->name, u8(s) % 40);
	str(s, n->file, u8(s) % 10);
	n->nlines = u8(s) % MAXF;
	for (uint32_t k = 0; k < n->nlines; k++)
		n->lines[k] = (struct vp_cm_line){ .start_bci = u16(s), .line = u16(s) };
	size_t len = vp_cm_method_name__size(n->name, n->file, n->nlines);
	CHECK(len <= sizeof(buf));
	vp_cm_method_name__fill(buf, n->id, n->name, n->file, n->lines, n->nlines);
	put(w, VP_CM_METHOD_NAME, t, buf, len);
}

/* METHOD_NAMES: a class's methods, in a record whose room may end before they do (then
 * another record begins, as the agent does). */
static void op_names(struct vp_cm_writer *w, struct script *s, uint64_t t)
{
	static uint8_t buf[4096];
	char klass[16], file[12], mpart[5][24];
	struct vp_cm_names_enc e;
	uint32_t cnt = 1 + u8(s) % 5, room = 256 + u8(s) * 4;

	str(s, klass, 1 + u8(s) % 12);
	str(s, file, u8(s) % 10);
	CHECK(vp_cm_names_enc__begin(&e, buf, room, klass, file) == 0);
	for (uint32_t i = 0; i < cnt; i++) {
		struct name *n = &names[nnames++];

		n->id = 0x7f0000001000 + (u8(s) % 24) * 8;
		str(s, mpart[i], u8(s) % 20);
		snprintf(n->name, sizeof(n->name), "%.15s.%.23s", klass, mpart[i]);
		snprintf(n->file, sizeof(n->file), "%s", file);
		n->nlines = u8(s) % MAXF;
		for (uint32_t k = 0; k < n->nlines; k++)
			n->lines[k] = (struct vp_cm_line){ .start_bci = u16(s), .line = u16(s) };
		if (vp_cm_names_enc__add(&e, n->id, mpart[i], n->lines, n->nlines)) {
			put(w, VP_CM_METHOD_NAMES, t, buf, vp_cm_names_enc__end(&e));
			CHECK(vp_cm_names_enc__begin(&e, buf, room, klass, file) == 0);
			CHECK(vp_cm_names_enc__add(&e, n->id, mpart[i], n->lines, n->nlines) == 0);
		}
	}
	put(w, VP_CM_METHOD_NAMES, t, buf, vp_cm_names_enc__end(&e));
}

static void inl_pc(const void *ctx, uint32_t i, uint64_t *pc, uint32_t *depth)
{
	const struct inl *x = ctx;

	*pc = x->start + x->off[i];
	*depth = x->depth[i];
}

static void inl_frame(const void *ctx, uint32_t i, uint32_t k, uint64_t *method, int32_t *bci)
{
	const struct inl *x = ctx;

	*method = x->m[x->first[i] + k];
	*bci = x->bci[x->first[i] + k];
}

/* An inlining of the last load, as HotSpot gives them: pcs in address order sharing
 * outer frames, some of them unusable (past the code, no frames) for the encoder to drop. */
static void op_inline(struct vp_cm_writer *w, struct script *s, uint64_t t)
{
	static uint8_t buf[1 << 16];
	if (!nloads)
		return;
	struct load *l = &loads[nloads - 1];
	struct inl *x = &inls[ninls];
	uint32_t nf = 0, off = 0;

	*x = (struct inl){ .start = l->start, .size = l->size, .npcs = 1 + u8(s) % MAXPCS };
	for (uint32_t i = 0; i < x->npcs; i++) {
		off += u8(s) % 24;
		x->off[i] = off;
		x->depth[i] = u8(s) % 13 == 0 ? 0 : 1 + u8(s) % MAXF;
		x->first[i] = nf;
		for (uint32_t k = 0; k < x->depth[i]; k++) {
			uint32_t from_outer = x->depth[i] - 1 - k, pd = i ? x->depth[i - 1] : 0;
			if (k == x->depth[i] - 1) {
				x->m[nf] = l->id;
				x->bci[nf] = (int32_t)(u8(s) % 9);
			} else if (from_outer < pd && u8(s) % 4) {
				x->m[nf] = x->m[x->first[i - 1] + pd - 1 - from_outer];
				x->bci[nf] = x->bci[x->first[i - 1] + pd - 1 - from_outer];
			} else {
				x->m[nf] = 0x7f0000001000 + (u8(s) % 24) * 8;
				x->bci[nf] = (int32_t)u16(s) - 2;
			}
			nf++;
		}
	}
	struct vp_cm_inl_src src = { .ctx = x, .npcs = x->npcs, .code_start = x->start, .code_size = x->size,
				     .pc = inl_pc, .frame = inl_frame };
	struct vp_cm_inl_table tab;
	struct vp_cm_inl_plan plan;
	bool fresh;
	vp_cm_inl_table__init(&tab);
	vp_cm_inl_table__index(&tab, l->id, &fresh);
	size_t bound = vp_cm_inline2__plan(&tab, &src, &plan, NULL, NULL);
	if (!bound)
		return;   /* no pc inside the code: the agent writes no INLINE2 */
	CHECK(bound <= sizeof(buf));
	size_t len = vp_cm_inline2__encode(buf, &src, &tab, l->id, &plan);
	CHECK(len <= bound);
	l->inl = (int)ninls++;
	put(w, VP_CM_INLINE2, t, buf, len);
}

static void op_gc(struct vp_cm_writer *w, struct script *s, uint64_t t)
{
	static const char *const gcs[] = { "G1", "Parallel", "", "ZGC" };
	uint32_t id = u16(s), full = u8(s);
	uint8_t kind = u8(s) % 4;
	const char *name = gcs[u8(s) % 4];

	gcs_since++;
	if (dirty) {
		uint32_t since = gcs_since;
		model_next_epoch(t, VP_EPOCH_GC);
		struct epoch *e = &epochs[nepochs - 1];
		e->gc = true;
		e->gc_id = id;
		e->full = full;
		e->gcs = since;
		e->kind = kind;
		snprintf(e->gname, sizeof(e->gname), "%s", name);
		dirty = false;
	}
	CHECK(vp_cm_writer__gc(w, t, id, full, kind, name) == 0);
	CHECK(vp_cm_writer__epoch(w) == nepochs - 1);
}

static void op_blob(struct vp_cm_writer *w, struct script *s, uint64_t t)
{
	uint8_t b[sizeof(struct vp_cm_code_blob) + 32];
	struct vp_cm_blob_info *x = &blobs[nblobs];

	str(s, blob_names[nblobs], u8(s) % 30);
	*x = (struct vp_cm_blob_info){ .start = 0x20000 + (uint64_t)u16(s), .size = u16(s), .kind = u8(s) % 2, .time = t,
				       .epoch = (uint32_t)nepochs - 1, .name = blob_names[nblobs] };
	struct vp_cm_code_blob h = { .code_start = x->start, .code_size = x->size, .kind = x->kind,
				     .name_len = (uint16_t)strlen(x->name) };
	memcpy(b, &h, sizeof(h));
	memcpy(b + sizeof(h), x->name, h.name_len);
	nblobs++;
	put(w, VP_CM_CODE_BLOB, t, b, sizeof(h) + h.name_len);
}

static void op_thread(struct vp_cm_writer *w, struct script *s, uint64_t t)
{
	uint8_t b[sizeof(struct vp_cm_thread_name) + 40];
	struct vp_cm_thread_info *x = &threads[nthreads];

	str(s, thread_names[nthreads], u8(s) % 38);
	*x = (struct vp_cm_thread_info){ .tid = 100 + u8(s) % 8, .flags = u8(s) % 4, .time = t,
					 .name = thread_names[nthreads] };
	struct vp_cm_thread_name h = { .tid = x->tid, .flags = (uint16_t)x->flags, .name_len = (uint16_t)strlen(x->name) };
	memcpy(b, &h, sizeof(h));
	memcpy(b + sizeof(h), x->name, h.name_len);
	nthreads++;
	put(w, VP_CM_THREAD_NAME, t, b, sizeof(h) + h.name_len);
}

/* ALLOC_SAMPLE, LOCK_SAMPLE, VTHREAD_MOUNT, VTHREAD_UNMOUNT: frames and a string. */
static void op_sample(struct vp_cm_writer *w, struct script *s, uint64_t t)
{
	static const uint32_t types[] = { VP_CM_ALLOC_SAMPLE, VP_CM_LOCK_SAMPLE, VP_CM_VTHREAD_MOUNT,
					  VP_CM_VTHREAD_UNMOUNT };
	uint8_t b[sizeof(struct vp_cm_vthread) + sizeof(struct vp_cm_alloc_frame) * MAXF + 24];
	struct sample *x = &samples[nsamples++];
	size_t hl;

	*x = (struct sample){ .type = types[u8(s) % 4], .tid = u16(s), .nf = u8(s) % MAXF, .id = u16(s) + 1,
			      .size = u16(s), .weight = u16(s), .t = t, .flags = u8(s) % 8 };
	str(s, x->text, u8(s) % 22);
	for (uint32_t k = 0; k < x->nf; k++)
		x->f[k] = (struct vp_cm_alloc_frame){ .method_id = 0x7f0000001000 + u8(s) * 8, .bci = (int32_t)u16(s) - 1 };
	if (x->type == VP_CM_ALLOC_SAMPLE || x->type == VP_CM_LOCK_SAMPLE) {
		struct vp_cm_alloc_sample h = { .tid = x->tid, .nframes = (uint16_t)x->nf,
						.class_len = (uint16_t)strlen(x->text), .size = x->size, .weight = x->weight };
		memcpy(b, &h, hl = sizeof(h));
	} else {
		struct vp_cm_vthread h = { .vthread_id = x->id, .carrier_tid = x->tid, .nframes = (uint16_t)x->nf,
					   .name_len = (uint16_t)strlen(x->text), .flags = x->flags };
		memcpy(b, &h, hl = sizeof(h));
	}
	memcpy(b + hl, x->f, x->nf * sizeof(*x->f));
	memcpy(b + hl + x->nf * sizeof(*x->f), x->text, strlen(x->text));
	put(w, x->type, t, b, hl + x->nf * sizeof(*x->f) + strlen(x->text));
}

static void op_ptrs(struct vp_cm_writer *w, struct script *s, uint64_t t)
{
	uint8_t b[sizeof(struct vp_cm_method_ptrs) + 4 * sizeof(struct vp_cm_method_ptr)];
	struct vp_cm_method_ptrs h = { .n = 1 + u8(s) % 4, .flags = u8(s) & VP_CM_PTRS_PREEXISTING };

	memcpy(b, &h, sizeof(h));
	for (uint32_t i = 0; i < h.n; i++) {
		/* A zero pointer or id is no entry: the reader leaves it out. */
		struct vp_cm_method_ptr p = { .method_ptr = u8(s) % 9 ? 0x800000000 + u16(s) * 8 : 0,
					      .method_id = 0x7f0000001000 + (u8(s) % 24) * 8 };
		memcpy(b + sizeof(h) + i * sizeof(p), &p, sizeof(p));
		if (p.method_ptr)
			ptrs[nptrs++] = (struct vp_cm_ptr_info){ .method_ptr = p.method_ptr, .method_id = p.method_id,
				.time = t, .preexisting = h.flags != 0 };
	}
	put(w, VP_CM_METHOD_PTR, t, b, sizeof(h) + h.n * sizeof(struct vp_cm_method_ptr));
}

/* ---- what was read ---- */

static bool same_name(const struct vp_cm_name_info *a, const struct name *n)
{
	if (a->method_id != n->id || strcmp(a->name, n->name) || strcmp(a->file, n->file) || a->nlines != n->nlines)
		return false;
	return !n->nlines || !memcmp(a->lines, n->lines, n->nlines * sizeof(*n->lines));
}

static void check_inline(const struct vp_cm_inline_info *got, const struct inl *x)
{
	uint32_t npcs = 0, nf = 0;

	for (uint32_t i = 0; i < x->npcs; i++) {
		if (!x->depth[i] || x->off[i] > x->size)
			continue;   /* the encoder leaves these out */
		CHECK(npcs < got->npcs);
		const struct vp_cm_pc *pc = &got->pcs[npcs++];
		CHECK(pc->pc_offset == x->off[i] && pc->depth == x->depth[i]);
		CHECK((uint64_t)pc->first + pc->depth <= got->nframes);
		for (uint32_t k = 0; k < x->depth[i]; k++) {
			CHECK(got->frames[pc->first + k].method_id == x->m[x->first[i] + k]);
			CHECK(got->frames[pc->first + k].bci == x->bci[x->first[i] + k]);
		}
		nf += x->depth[i];
	}
	CHECK(got->npcs == npcs && got->nframes == nf);
}

static void check(const struct vp_codemap *m)
{
	CHECK(m->skipped_records == 0 && m->skipped_chunks == 0 && !m->truncated);
	CHECK(m->pid == 4242 && !strcmp(m->vm, "roundtrip VM"));
	CHECK(m->nepochs == nepochs);
	for (size_t e = 0; e < nepochs; e++) {
		const struct vp_cm_epoch_info *g = &m->epochs[e];
		const struct epoch *x = &epochs[e];
		CHECK(g->id == e && g->reason == x->reason && g->t_begin == x->t_begin && g->ended);
		CHECK(g->t_end == x->t_end && g->live_methods == x->live_n && g->live_bytes == x->live_bytes);
		CHECK(g->dropped == x->dropped && g->gc_known == x->gc);
		if (x->gc)
			CHECK(g->gc_id == x->gc_id && g->gc_full == x->full && g->gc_count == x->gcs &&
			      g->gc_kind == x->kind && !strcmp(g->gc_name, x->gname));
	}
	CHECK(m->nmethods == nloads);
	for (size_t i = 0; i < nloads; i++) {
		const struct vp_cm_method_info *g = &m->methods[i];
		const struct load *l = &loads[i];
		CHECK(g->start == l->start && g->size == l->size && g->method_id == l->id && g->load_time == l->t);
		CHECK(g->level == l->level && g->flags == l->flags && g->epoch == l->epoch);
		CHECK(g->unload_time == l->unload_t);
		CHECK((g->inl < 0) == (l->inl < 0));
		if (l->inl >= 0)
			check_inline(&m->inlines[g->inl], &inls[l->inl]);
		/* Named by one of its METHOD_NAME(S), or as unknown when it has none. */
		bool named = false, any = false;
		for (size_t k = 0; k < nnames; k++)
			if (names[k].id == l->id) {
				any = true;
				named |= !strcmp(g->name, names[k].name);
			}
		CHECK(any ? named : !strcmp(g->name, "[unknown compiled method]"));
	}
	/* Names: the same multiset (the reader sorts them by id). */
	CHECK(m->nnames == nnames);
	static bool taken[MAXOPS * 5];
	memset(taken, 0, sizeof(taken));
	for (size_t k = 0; k < nnames; k++) {
		size_t j = 0;
		while (j < m->nnames && (taken[j] || !same_name(&m->names[j], &names[k])))
			j++;
		CHECK(j < m->nnames);
		taken[j] = true;
	}
	CHECK(m->nblobs == nblobs);
	memset(taken, 0, sizeof(taken));
	for (size_t k = 0; k < nblobs; k++) {
		size_t j = 0;
		while (j < m->nblobs && (taken[j] || m->blobs[j].start != blobs[k].start || m->blobs[j].size != blobs[k].size ||
					 m->blobs[j].kind != blobs[k].kind || m->blobs[j].time != blobs[k].time ||
					 m->blobs[j].epoch != blobs[k].epoch || strcmp(m->blobs[j].name, blobs[k].name)))
			j++;
		CHECK(j < m->nblobs);
		taken[j] = true;
	}
	CHECK(m->nthreads == nthreads);
	memset(taken, 0, sizeof(taken));
	for (size_t k = 0; k < nthreads; k++) {
		size_t j = 0;
		while (j < m->nthreads && (taken[j] || m->threads[j].tid != threads[k].tid ||
					   m->threads[j].flags != threads[k].flags || m->threads[j].time != threads[k].time ||
					   strcmp(m->threads[j].name, threads[k].name)))
			j++;
		CHECK(j < m->nthreads);
		taken[j] = true;
	}
	CHECK(m->nptrs == nptrs);
	memset(taken, 0, sizeof(taken));
	for (size_t k = 0; k < nptrs; k++) {
		size_t j = 0;
		while (j < m->nptrs && (taken[j] || m->ptrs[j].method_ptr != ptrs[k].method_ptr ||
					m->ptrs[j].method_id != ptrs[k].method_id || m->ptrs[j].time != ptrs[k].time ||
					m->ptrs[j].preexisting != ptrs[k].preexisting))
			j++;
		CHECK(j < m->nptrs);
		taken[j] = true;
	}
	/* Samples and virtual threads stay in record order. */
	size_t na = 0, nv = 0;
	for (size_t k = 0; k < nsamples; k++) {
		const struct sample *x = &samples[k];
		uint32_t nf;
		size_t first;
		if (x->type == VP_CM_ALLOC_SAMPLE || x->type == VP_CM_LOCK_SAMPLE) {
			CHECK(na < m->nallocs);
			const struct vp_cm_alloc_info *a = &m->allocs[na++];
			CHECK(a->kind == x->type && a->tid == x->tid && a->time == x->t && a->size == x->size &&
			      a->weight == x->weight && !strcmp(a->klass, x->text));
			nf = a->nframes;
			first = a->first;
		} else {
			CHECK(nv < m->nvthreads);
			const struct vp_cm_vthread_info *v = &m->vthreads[nv++];
			CHECK(v->kind == x->type && v->carrier == x->tid && v->id == x->id && v->time == x->t &&
			      v->flags == x->flags && !strcmp(v->name, x->text));
			nf = v->nframes;
			first = v->first;
		}
		CHECK(nf == x->nf && first + nf <= m->nalloc_frames);
		CHECK(!nf || !memcmp(&m->alloc_frames[first], x->f, nf * sizeof(*x->f)));
	}
	CHECK(na == m->nallocs && nv == m->nvthreads);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct script s = { data, size };
	char path[128], err[512];
	uint64_t t = 1000;

	nloads = ninls = nnames = nblobs = nthreads = nsamples = nptrs = nused = nlive = 0;
	gcs_since = 0;
	dropped = 0;
	dirty = false;
	snprintf(path, sizeof(path), "%s/roundtrip.vpm", fz_dir());
	unlink(path);
	struct vp_cm_writer *w = vp_cm_writer__create(path);
	CHECK(w);
	vp_cm_writer__on_dropped(w, dropped_now, NULL);
	nepochs = 1;
	epochs[0] = (struct epoch){ .reason = VP_EPOCH_START, .t_begin = t };
	CHECK(vp_cm_writer__start(w, t, 4242, 0, "roundtrip VM") == 0);
	for (int i = 0; i < MAXOPS && s.n; i++) {
		uint8_t op = u8(&s);
		t += 1 + u8(&s);
		switch (op % 12) {
		case 0: case 1: op_load(w, &s, t); break;
		case 2: op_unload(w, &s, t); break;
		case 3: op_name(w, &s, t); break;
		case 4: op_names(w, &s, t); break;
		case 5: op_inline(w, &s, t); break;
		case 6: op_gc(w, &s, t); break;
		case 7: op_blob(w, &s, t); break;
		case 8: op_thread(w, &s, t); break;
		case 9: op_sample(w, &s, t); break;
		case 10: op_ptrs(w, &s, t); break;
		default:
			dropped += op >> 4;
			CHECK(vp_cm_writer__flush(w) == 0);
			break;
		}
	}
	t++;
	model_next_epoch(t, 0);   /* the last epoch ends at close */
	nepochs--;
	CHECK(vp_cm_writer__close(w, t) == 0);
	struct vp_codemap *m = vp_codemap__load_file(path, err, sizeof(err));
	if (!m) {
		fprintf(stderr, "roundtrip: %s\n", err);
		abort();
	}
	check(m);
	vp_codemap__free(m);
	return 0;
}

#ifdef RT_MAIN
/* The unit lane's run: seeded random scripts of every length up to a few KiB. */
int main(int argc, char **argv)
{
	static uint8_t buf[4096];
	int runs = argc > 1 ? atoi(argv[1]) : 3000;

	srand(35);
	for (int r = 0; r < runs; r++) {
		size_t n = (size_t)rand() % sizeof(buf);
		for (size_t i = 0; i < n; i++)
			buf[i] = (uint8_t)rand();
		LLVMFuzzerTestOneInput(buf, n);
	}
	printf("codemap round trip: %d random scripts written and read back equal\n", runs);
	return 0;
}
#endif
