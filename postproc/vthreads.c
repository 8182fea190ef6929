/* Virtual threads: see vthreads.h. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "maps/codemap_format.h"
#include "postproc/vthreads.h"

struct mount_iv {
	uint32_t carrier;
	uint64_t from, to;
	uint64_t id;
	const char *name;
};

struct vp_vthreads {
	const struct vp_codemap *cm;
	struct mount_iv *ivs; size_t nivs;       /* sorted by (carrier, from) */
	struct vp_vt_wait *waits; size_t nwaits; /* by (id, from) */
};

/* The records, ordered by one key then time then record order (records of different
 * carriers reach the agent's queue in the order they took its lock, not of their times). */
static const struct vp_codemap *sort_cm;
static bool sort_by_carrier;

static int cmp_rec(const void *a, const void *b)
{
	const struct vp_cm_vthread_info *x = &sort_cm->vthreads[*(const size_t *)a];
	const struct vp_cm_vthread_info *y = &sort_cm->vthreads[*(const size_t *)b];
	uint64_t kx = sort_by_carrier ? x->carrier : x->id, ky = sort_by_carrier ? y->carrier : y->id;
	if (kx != ky)
		return kx < ky ? -1 : 1;
	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	size_t ix = *(const size_t *)a, iy = *(const size_t *)b;
	return ix < iy ? -1 : ix > iy;
}

static void sort_recs(const struct vp_codemap *cm, size_t *idx, bool by_carrier)
{
	for (size_t i = 0; i < cm->nvthreads; i++)
		idx[i] = i;
	sort_cm = cm;
	sort_by_carrier = by_carrier;
	qsort(idx, cm->nvthreads, sizeof(*idx), cmp_rec);
}

/* The name a virtual thread got at its start, from the records sorted by id: idx[lo..hi)
 * are its records. */
static const char *name_of(const struct vp_codemap *cm, const size_t *idx, size_t lo, size_t hi)
{
	for (size_t i = lo; i < hi; i++)
		if (cm->vthreads[idx[i]].name[0])
			return cm->vthreads[idx[i]].name;
	return "";
}

static int cmp_name(const void *a, const void *b)
{
	const struct vp_vt_wait *x = a, *y = b;
	return x->id < y->id ? -1 : x->id > y->id;
}

struct vp_vthreads *vp_vthreads__build(const struct vp_codemap *cm)
{
	struct vp_vthreads *v = calloc(1, sizeof(*v));
	size_t *idx = NULL, n = cm ? cm->nvthreads : 0, cap_w = 0, cap_iv = 0, nnames = 0;
	struct vp_vt_wait *names = NULL;    /* id -> name, sorted by id (only id and name used) */
	if (!v)
		return NULL;
	v->cm = cm;
	if (!n)
		return v;
	if (!(idx = malloc(n * sizeof(*idx))) || !(names = malloc(n * sizeof(*names))))
		goto nomem;

	/* Waits: per virtual thread, an unmount to its next mount. */
	sort_recs(cm, idx, false);
	for (size_t lo = 0, hi; lo < n; lo = hi) {
		uint64_t id = cm->vthreads[idx[lo]].id;
		for (hi = lo; hi < n && cm->vthreads[idx[hi]].id == id; hi++)
			;
		const char *name = name_of(cm, idx, lo, hi);
		names[nnames++] = (struct vp_vt_wait){ .id = id, .name = name };
		const struct vp_cm_vthread_info *pending = NULL;
		for (size_t i = lo; i < hi; i++) {
			const struct vp_cm_vthread_info *r = &cm->vthreads[idx[i]];
			if (r->kind == VP_CM_VTHREAD_UNMOUNT) {
				pending = r->flags & VP_CM_VT_END ? NULL : r;
				continue;
			}
			if (pending && r->time >= pending->time) {
				const struct vp_cm_vthread_info *st = r->nframes ? r : pending;
				if (vp_grow((void **)&v->waits, &cap_w, v->nwaits + 1, sizeof(*v->waits)))
					goto nomem;
				v->waits[v->nwaits++] = (struct vp_vt_wait){ .id = id, .name = name, .from = pending->time,
					.to = r->time, .nframes = st->nframes, .first = st->first,
					.short_wait = (r->flags & VP_CM_VT_SHORT) != 0 };
			}
			pending = NULL;
		}
	}

	/* Mount intervals: per carrier, a mount to the same virtual thread's unmount. */
	sort_recs(cm, idx, true);
	for (size_t i = 0; i < n; i++) {
		const struct vp_cm_vthread_info *r = &cm->vthreads[idx[i]];
		if (r->kind != VP_CM_VTHREAD_MOUNT)
			continue;
		const struct vp_cm_vthread_info *next = i + 1 < n ? &cm->vthreads[idx[i + 1]] : NULL;
		uint64_t to;
		if (!next || next->carrier != r->carrier)
			to = UINT64_MAX;     /* the carrier's last: still mounted at the end */
		else if (next->kind == VP_CM_VTHREAD_UNMOUNT && next->id == r->id)
			to = next->time;
		else
			continue;            /* its unmount was lost: no interval to trust */
		struct vp_vt_wait key = { .id = r->id };
		const struct vp_vt_wait *nm = bsearch(&key, names, nnames, sizeof(*names), cmp_name);
		if (vp_grow((void **)&v->ivs, &cap_iv, v->nivs + 1, sizeof(*v->ivs)))
			goto nomem;
		v->ivs[v->nivs++] = (struct mount_iv){ .carrier = r->carrier, .from = r->time, .to = to, .id = r->id,
						       .name = nm ? nm->name : "" };
	}
	free(idx);
	free(names);
	return v;
nomem:
	free(idx);
	free(names);
	vp_vthreads__free(v);
	errno = ENOMEM;
	return NULL;
}

void vp_vthreads__free(struct vp_vthreads *v)
{
	if (!v)
		return;
	free(v->ivs);
	free(v->waits);
	free(v);
}

bool vp_vthreads__any(const struct vp_vthreads *v)
{
	return v && v->cm && v->cm->nvthreads;
}

bool vp_vthreads__at(const struct vp_vthreads *v, uint32_t carrier, uint64_t t, uint64_t *id, const char **name)
{
	if (!v || !v->nivs)
		return false;
	/* The last interval of carrier that began at or before t. */
	size_t lo = 0, hi = v->nivs;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct mount_iv *m = &v->ivs[mid];
		if (m->carrier < carrier || (m->carrier == carrier && m->from <= t))
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return false;
	const struct mount_iv *m = &v->ivs[lo - 1];
	if (m->carrier != carrier || t >= m->to)
		return false;
	*id = m->id;
	*name = m->name;
	return true;
}

size_t vp_vthreads__waits(const struct vp_vthreads *v, const struct vp_vt_wait **out)
{
	*out = v ? v->waits : NULL;
	return v ? v->nwaits : 0;
}

void vp_vthreads__label(uint64_t id, const char *name, char *out, size_t len)
{
	if (name && *name)
		snprintf(out, len, "[vthread #%llu %s]", (unsigned long long)id, name);
	else
		snprintf(out, len, "[vthread #%llu]", (unsigned long long)id);
}
