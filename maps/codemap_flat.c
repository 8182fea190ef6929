/* The flat view of a code map: see maps/codemap_flat.h. */
#define _GNU_SOURCE /* qsort_r */
#include "maps/codemap_flat.h"

#include <errno.h>
#include <stdlib.h>

/* The ranges of the flat map: method i's [start, start + size), an empty one as 1 byte. */
static uint64_t flat_end(const struct vp_cm_method_info *x)
{
	return x->start + (x->size ? x->size : 1);
}

/* qsort_r, not a static context: maps may be loaded on several threads at once. */
static int cmp_by_start_only(const void *a, const void *b, void *ctx)
{
	const struct vp_cm_method_info *methods = ctx;
	uint64_t x = methods[*(const uint32_t *)a].start, y = methods[*(const uint32_t *)b].start;
	return x < y ? -1 : x > y;
}

/* A max-heap of method indices: the latest loaded on top. */
static void heap_push(uint32_t *h, size_t *n, uint32_t v)
{
	size_t i = (*n)++;
	while (i && h[(i - 1) / 2] < v) {
		h[i] = h[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h[i] = v;
}

static void heap_pop(uint32_t *h, size_t *n)
{
	uint32_t v = h[--*n];
	size_t i = 0;
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= *n)
			break;
		if (c + 1 < *n && h[c + 1] > h[c])
			c++;
		if (h[c] <= v)
			break;
		h[i] = h[c];
		i = c;
	}
	if (*n)
		h[i] = v;
}

/* Appends [s, e) of method i, joined to the last range if that is the same method's and
 * ends at s. */
static int flat_add(struct vp_cm_flat *f, struct vp_cm_budget *b, uint64_t s, uint64_t e, uint32_t i)
{
	struct vp_cm_flat_iv *l = f->n ? &f->iv[f->n - 1] : NULL;
	if (l && l->method == i && l->end == s) {
		l->end = e;
		return 0;
	}
	if (vp_cm_budget__grow(b, (void **)&f->iv, &f->cap, f->n + 1, sizeof(*f->iv)))
		return -ENOMEM;
	f->iv[f->n++] = (struct vp_cm_flat_iv){ s, e, i };
	return 0;
}

/* Older ranges are trimmed by later ones. A sweep over the ranges by start, with a heap of
 * those that cover the sweep point, latest on top: O(n log n). (Inserting each range
 * into a sorted array in load order was O(n^2) for ranges loaded at falling addresses:
 * minutes of root's CPU for a map of a million tiny methods.) */
int vp_cm_flat__build(struct vp_cm_flat *f, const struct vp_cm_method_info *methods, size_t n, struct vp_cm_budget *b)
{
	size_t nh = 0, i = 0;
	uint32_t *by = n ? vp_cm_budget__alloc(b, n * sizeof(*by)) : NULL;
	uint32_t *h = n ? vp_cm_budget__alloc(b, n * sizeof(*h)) : NULL;
	int e = 0;

	f->n = 0;
	if (n && (!by || !h)) {
		e = -ENOMEM;
		goto cleanup;
	}
	for (size_t k = 0; k < n; k++)
		by[k] = (uint32_t)k;
	if (n)
		qsort_r(by, n, sizeof(*by), cmp_by_start_only, (void *)methods);
	uint64_t x = 0;
	while (i < n || nh) {
		if (!nh)
			x = methods[by[i]].start;
		while (i < n && methods[by[i]].start <= x)
			heap_push(h, &nh, by[i++]);
		while (nh && flat_end(&methods[h[0]]) <= x)
			heap_pop(h, &nh);
		if (!nh)
			continue;
		/* The top owns [x, y): until it ends or a range starts (which may be later). */
		uint64_t y = flat_end(&methods[h[0]]);
		if (i < n && methods[by[i]].start < y)
			y = methods[by[i]].start;
		if ((e = flat_add(f, b, x, y, h[0])))
			goto cleanup;
		x = y;
	}
cleanup:
	free(by);
	free(h);
	return e;
}

const struct vp_cm_flat_iv *vp_cm_flat__find(const struct vp_cm_flat *f, uint64_t addr)
{
	size_t lo = 0, hi = f->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (f->iv[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo && addr < f->iv[lo - 1].end ? &f->iv[lo - 1] : NULL;
}

void vp_cm_flat__free(struct vp_cm_flat *f)
{
	free(f->iv);
	*f = (struct vp_cm_flat){ 0 };
}
