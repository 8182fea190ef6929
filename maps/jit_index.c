#include "maps/jit_index.h"

#include <errno.h>
#include <stdlib.h>

#include "maps/codemap.h"
#include "maps/codemap_io.h"
#include "maps/codemap_format.h"
#include "common/layers.h"

struct vp_jit_index {
	struct vp_codemap *m;
};

static struct vp_jit_index *wrap(struct vp_codemap *m)
{
	if (!m)
		return NULL;
	struct vp_jit_index *x = calloc(1, sizeof(*x));
	if (!x) {
		vp_codemap__free(m);
		errno = ENOMEM;
		return NULL;
	}
	x->m = m;
	return x;
}

struct vp_jit_index *vp_jit_index__open(const char *dir, char *err, size_t errlen)
{
	return wrap(vp_codemap__load_dir(dir, err, errlen));
}

struct vp_jit_index *vp_jit_index__open_perf_map(const char *path, char *err, size_t errlen)
{
	return wrap(vp_codemap__import_perf_map(path, err, errlen));
}

struct vp_jit_index *vp_jit_index__open_jitdump(const char *path, char *err, size_t errlen)
{
	return wrap(vp_codemap__import_jitdump(path, err, errlen));
}

const struct vp_codemap *vp_jit_index__codemap(const struct vp_jit_index *x) { return x->m; }

bool vp_jit_index__frame_pointers(const struct vp_jit_index *x)
{
	return x && (x->m->flags & VP_CM_META_FRAME_POINTERS);
}

void vp_jit_index__close(struct vp_jit_index *x)
{
	if (!x)
		return;
	vp_codemap__free(x->m);
	free(x);
}

/* The method whose code held addr at t, by epochs (see jit_index.h). */
static const struct vp_cm_method_info *by_epochs(const struct vp_codemap *m, uint64_t addr, uint64_t t)
{
	size_t e = vp_codemap__epoch_at(m, t);
	const struct vp_cm_method_info *hit = vp_codemap__in_epoch(m, e, addr);
	/* A hit loaded at or before t is certain. One loaded after t still owns the address
	 * (callbacks trail the installation) unless older code was provably there at t: the
	 * JVM posts the unload before it reuses the memory, so an unload at or after t means
	 * the old code still sat there. */
	if (hit && hit->load_time <= t)
		return hit;
	for (size_t k = e; k-- > 0;) {
		const struct vp_cm_method_info *old = vp_codemap__in_epoch(m, k, addr);
		if (!old)
			continue;
		if (old->unload_time != VP_CM_NEVER && old->unload_time >= t)
			return old;
		/* Never unloaded yet overlapped by newer code: its unload was lost, so the newer
		 * code wins; without newer code it is simply still there. */
		if (old->unload_time == VP_CM_NEVER && !hit)
			return old;
		break; /* the newest older code there was gone before t */
	}
	/* An event map dates a load by its callback, which trails the installation, so code
	 * loaded after t may still be what ran at t. A walk map dates a load at the earliest
	 * it can have run (the start of the walk before the one that found it, or its class's
	 * preparation), so code loaded after t was not there yet: what was, no walk saw (code
	 * that came and went between two walks; test-jit-churn saw a generation's hot loop
	 * named after the next generation's method this way). Unknown, not the later
	 * occupant. */
	if (hit)
		return (m->flags & VP_CM_META_CODE_WALK) ? NULL : hit;
	/* Code that a walk of the code heaps found (VP_CM_META_CODE_WALK) is loaded at the
	 * start of the walk before the one that saw it, the earliest it can have run; when a
	 * GC fell between the two walks its record follows that GC's epoch boundary although
	 * a sample before the GC may already have run it. Nothing else held the address at t
	 * (that would have been found above), so a load a few epochs on that is dated at or
	 * before t is the code that ran. Event maps never date a load before its epoch. */
	for (size_t k = e + 1; k < m->nepochs && k <= e + 8; k++) {
		const struct vp_cm_method_info *next = vp_codemap__in_epoch(m, k, addr);
		if (next)
			return next->load_time <= t ? next : NULL;
	}
	return NULL;
}

static int expand_frames(const struct vp_codemap *m, const struct vp_cm_method_info *x, uint64_t addr,
			 struct vp_jit_frame *out, int max);

/* The frames of x at addr; the compiled method's own frame (the last) carries its tier. */
static int expand(const struct vp_codemap *m, const struct vp_cm_method_info *x, uint64_t addr,
		  struct vp_jit_frame *out, int max)
{
	int n = expand_frames(m, x, addr, out, max);
	for (int i = 0; i < n; i++) {
		out[i].level = out[i].layer == VP_LAYER_JIT ? x->level : VP_CM_LEVEL_UNKNOWN;
		out[i].osr = out[i].layer == VP_LAYER_JIT && (x->flags & VP_CM_LOAD_OSR);
	}
	return n;
}

static int expand_frames(const struct vp_codemap *m, const struct vp_cm_method_info *x, uint64_t addr,
			 struct vp_jit_frame *out, int max)
{
	const struct vp_cm_name_info *self = vp_codemap__name(m, x->method_id);
	if (max <= 0)
		return 0;
	if (x->inl >= 0) {
		const struct vp_cm_inline_info *in = &m->inlines[x->inl];
		uint64_t off = addr - x->start;
		/* Debug info sits at the pc after a call or safepoint; the instruction at addr
		 * belongs to the scope recorded at the next pc at or after it. */
		size_t lo = 0, hi = in->npcs;
		while (lo < hi) {
			size_t mid = (lo + hi) / 2;
			if (in->pcs[mid].pc_offset < off)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo == in->npcs && lo > 0)
			lo--;
		if (lo < in->npcs && in->pcs[lo].depth > 1) {
			const struct vp_cm_pc *pc = &in->pcs[lo];
			int n = 0;
			for (uint32_t k = 0; k < pc->depth && n < max; k++) {
				const struct vp_cm_frame *f = &in->frames[pc->first + k];
				bool last = k + 1 == pc->depth;
				const struct vp_cm_name_info *ni = last ? self : vp_codemap__name(m, f->method_id);
				out[n++] = (struct vp_jit_frame){
					.name = last ? x->name : (ni ? ni->name : "[unknown inlined method]"),
					.file = ni ? ni->file : "",
					.line = vp_codemap__line(ni, f->bci),
					.layer = last ? VP_LAYER_JIT : VP_LAYER_INLINED,
				};
			}
			/* Out of room: the compiled method itself is the frame to keep. */
			if (n == max && n < pc->depth)
				out[n - 1] = (struct vp_jit_frame){ .name = x->name, .file = self ? self->file : "",
								    .layer = VP_LAYER_JIT };
			return n;
		}
		if (lo < in->npcs && in->pcs[lo].depth == 1) {
			out[0] = (struct vp_jit_frame){ .name = x->name, .file = self ? self->file : "",
							.line = vp_codemap__line(self, in->frames[in->pcs[lo].first].bci),
							.layer = VP_LAYER_JIT };
			return 1;
		}
	}
	out[0] = (struct vp_jit_frame){ .name = x->name, .file = self ? self->file : "", .layer = VP_LAYER_JIT };
	return 1;
}

const void *vp_jit_index__owner(struct vp_jit_index *xi, uint64_t addr, uint64_t t, bool flat)
{
	const struct vp_cm_method_info *x = flat ? vp_codemap__flat(xi->m, addr) : by_epochs(xi->m, addr, t);
	if (x)
		return x;
	return vp_codemap__blob(xi->m, addr);
}

const void *vp_jit_index__owner_span(struct vp_jit_index *xi, uint64_t addr, uint64_t t, bool flat,
				     uint64_t *lo, uint64_t *hi)
{
	struct vp_jit_hit h;
	const void *owner = vp_jit_index__lookup(xi, addr, t, flat, &h);
	*lo = h.lo;
	*hi = h.hi;
	return owner;
}

/* The owner is what by_epochs finds whenever the epoch's own code is certain, and in
 * flat mode; the rare answers where the two searches differ (code loaded after t, code
 * gone before t) take by_epochs' own search for the frames. */
const void *vp_jit_index__lookup(struct vp_jit_index *xi, uint64_t addr, uint64_t t, bool flat,
				 struct vp_jit_hit *h)
{
	const struct vp_codemap *m = xi->m;
	*h = (struct vp_jit_hit){ .lo = 1, .hi = 0 };
	if (flat) {
		/* Timeless: the same answer at every time. */
		h->lo = 0;
		h->hi = UINT64_MAX;
		h->method = vp_codemap__flat(m, addr);
		h->blob = h->method ? NULL : vp_codemap__blob(m, addr);
		h->owner = h->method ? h->method : h->blob;
		return h->owner;
	}
	if (m->nepochs) {
		/* by_epochs' answer stays the same for every time of t's epoch (epoch_at is the
		 * same there, and so is each epoch's lookup of addr) except where it compares t
		 * with a load or unload time: those bound the span. */
		size_t e = vp_codemap__epoch_at(m, t);
		uint64_t elo = e ? m->epochs[e].t_begin : 0, ehi = e + 1 < m->nepochs ? m->epochs[e + 1].t_begin : UINT64_MAX;
		const struct vp_cm_method_info *hit = vp_codemap__in_epoch(m, e, addr), *old = NULL;
		if (hit && hit->load_time <= t) {
			h->lo = hit->load_time > elo ? hit->load_time : elo;
			h->hi = ehi;
			h->owner = h->method = hit;
			return hit;
		}
		for (size_t k = e; k-- > 0 && !old;)
			old = vp_codemap__in_epoch(m, k, addr);
		if (!hit) {
			const void *owner = old;
			h->lo = elo;
			h->hi = ehi;
			if (old && old->unload_time != VP_CM_NEVER) {
				if (old->unload_time >= t) {
					if (old->unload_time < UINT64_MAX && old->unload_time + 1 < h->hi)
						h->hi = old->unload_time + 1;
				} else {
					owner = NULL;   /* gone before t: the blob there, if any */
					if (old->unload_time + 1 > h->lo)
						h->lo = old->unload_time + 1;
				}
			}
			if (owner) {
				h->owner = h->method = owner;
				return owner;
			}
			h->owner = vp_codemap__blob(m, addr);
			h->method = by_epochs(m, addr, t);
			h->blob = h->method ? NULL : h->owner;
			return h->owner;
		}
		/* Code loaded after t in this epoch: rare (a sample in code whose load callback
		 * had not run yet); no span. */
	}
	h->method = by_epochs(m, addr, t);
	h->blob = h->method ? NULL : vp_codemap__blob(m, addr);
	h->owner = h->method ? h->method : h->blob;
	return h->owner;
}

int vp_jit_index__expand(struct vp_jit_index *xi, const struct vp_jit_hit *h, uint64_t addr,
			 struct vp_jit_frame *out, int max)
{
	if (h->method)
		return expand(xi->m, h->method, addr, out, max);
	const struct vp_cm_blob_info *b = h->blob;
	if (b && max > 0) {
		out[0] = (struct vp_jit_frame){ .name = b->name, .file = "", .level = VP_CM_LEVEL_UNKNOWN,
						.layer = b->kind == VP_BLOB_INTERPRETER ? VP_LAYER_INTERPRETED : VP_LAYER_JVM };
		return 1;
	}
	return 0;
}

int vp_jit_index__resolve(struct vp_jit_index *xi, uint64_t addr, uint64_t t, bool flat,
			  struct vp_jit_frame *out, int max)
{
	const struct vp_codemap *m = xi->m;
	const struct vp_cm_method_info *x = flat ? vp_codemap__flat(m, addr) : by_epochs(m, addr, t);
	if (x)
		return expand(m, x, addr, out, max);
	const struct vp_cm_blob_info *b = vp_codemap__blob(m, addr);
	if (b && max > 0) {
		out[0] = (struct vp_jit_frame){ .name = b->name, .file = "", .level = VP_CM_LEVEL_UNKNOWN,
						.layer = b->kind == VP_BLOB_INTERPRETER ? VP_LAYER_INTERPRETED : VP_LAYER_JVM };
		return 1;
	}
	return 0;
}
