/* The epoch-on-overlap rule and the sorted range set it reads (maps/epoch_rule.h). */
#include "maps/epoch_rule.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

/* The first index whose range starts at or after start. */
static size_t find(const struct vp_cm_ranges *r, uint64_t start)
{
	size_t lo = 0, hi = r->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (r->v[mid].start < start)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

bool vp_cm_ranges__overlaps(const struct vp_cm_ranges *r, uint64_t s, uint64_t e)
{
	size_t i = find(r, s);

	if (i < r->n && r->v[i].start < e)
		return true;
	/* Ranges of one epoch are disjoint, so only the one just before can reach s. */
	return i > 0 && r->v[i - 1].end > s;
}

bool vp_cm_load_reuses(const struct vp_cm_ranges *placed, uint64_t start, uint64_t size)
{
	return vp_cm_ranges__overlaps(placed, start, vp_cm_load_end(start, size));
}

int vp_cm_ranges__insert(struct vp_cm_ranges *r, uint64_t s, uint64_t e)
{
	if (vp_grow((void **)&r->v, &r->cap, r->n + 1, sizeof(*r->v)))
		return -ENOMEM;
	size_t i = find(r, s);
	memmove(r->v + i + 1, r->v + i, (r->n - i) * sizeof(*r->v));
	r->v[i] = (struct vp_cm_range){ s, e };
	r->n++;
	return 0;
}

void vp_cm_ranges__remove_start(struct vp_cm_ranges *r, uint64_t s)
{
	size_t i = find(r, s);

	if (i < r->n && r->v[i].start == s) {
		memmove(r->v + i, r->v + i + 1, (r->n - i - 1) * sizeof(*r->v));
		r->n--;
	}
}

void vp_cm_ranges__free(struct vp_cm_ranges *r)
{
	free(r->v);
	*r = (struct vp_cm_ranges){ 0 };
}
