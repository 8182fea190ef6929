/* A code map's allocation budget: see maps/codemap_budget.h. */
#include "maps/codemap_budget.h"

#include <errno.h>
#include <stdlib.h>

#include "common/chunkfile.h"
#include "common/util.h"

uint64_t vp_cm_budget__read(const struct vp_cm_budget *b)
{
	return b->read_before + (b->rd ? cfile_reader__offset(b->rd) : 0);
}

int vp_cm_budget__charge(struct vp_cm_budget *b, uint64_t bytes)
{
	b->spent += bytes;
	if (!b->bounded)
		return 0;
	uint64_t allow = VP_CM_READ_FLOOR + VP_CM_READ_RATIO * vp_cm_budget__read(b);
	if (b->spent <= (allow < VP_CM_READ_CAP ? allow : VP_CM_READ_CAP))
		return 0;
	b->over = true;
	return -E2BIG;
}

int vp_cm_budget__grow(struct vp_cm_budget *b, void **v, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	uint64_t to = (uint64_t)(need > 2 * *cap ? 2 * need : 2 * *cap);
	int e = vp_cm_budget__charge(b, (to - *cap) * elem);
	return e ? e : vp_grow(v, cap, need, elem);
}

void *vp_cm_budget__alloc(struct vp_cm_budget *b, size_t n)
{
	int e = vp_cm_budget__charge(b, n + 16);   /* with malloc's own header */
	if (e) {
		errno = -e;
		return NULL;
	}
	void *p = malloc(n);
	if (!p)
		errno = ENOMEM;
	return p;
}
