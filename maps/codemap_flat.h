/* A code map's flat view (vp_codemap__flat, perf-PID.map semantics): every address of a
 * method's range belongs to the last method loaded over it, time ignored. Built once the
 * map is read (maps/codemap.c); its ranges are what a perf-map export writes. */
#ifndef VIPROF_MAPS_CODEMAP_FLAT_H
#define VIPROF_MAPS_CODEMAP_FLAT_H

#include <stddef.h>
#include <stdint.h>

#include "maps/codemap_budget.h"
#include "maps/codemap_method.h"

/* [start, end) belongs to methods[method]. */
struct vp_cm_flat_iv {
	uint64_t start, end;
	uint32_t method;
};

/* The ranges by start, none overlapping. Zeroed: empty. */
struct vp_cm_flat {
	struct vp_cm_flat_iv *iv;
	size_t n, cap;
};

/* (Re)builds f from the n methods, in load order, charging b. 0, -ENOMEM or -E2BIG. */
int vp_cm_flat__build(struct vp_cm_flat *f, const struct vp_cm_method_info *methods, size_t n, struct vp_cm_budget *b);
/* The range holding addr, or NULL. */
const struct vp_cm_flat_iv *vp_cm_flat__find(const struct vp_cm_flat *f, uint64_t addr);
void vp_cm_flat__free(struct vp_cm_flat *f);

#endif
