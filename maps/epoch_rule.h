/* The epoch-on-overlap rule, one rule for the writer and the readers: the code-map writer
 * (maps/codemap_writer.c, for the JVM agent) decides with it when a METHOD_LOAD opens a new epoch, and the
 * jitdump import (maps/codemap.c) does the same for JIT_CODE_LOAD/MOVE. Within one epoch
 * an address names at most one method (docs/codemap-format.md, "Epochs").
 *
 * The ranges set is plain memory: its functions never call into a JVM and only
 * vp_cm_ranges__insert allocates (on the agent's own thread, never in a callback). */
#ifndef VIPROF_MAPS_EPOCH_RULE_H
#define VIPROF_MAPS_EPOCH_RULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct vp_cm_range {
	uint64_t start, end;       /* [start, end) */
};

/* Ranges sorted by start. */
struct vp_cm_ranges {
	struct vp_cm_range *v;
	size_t n, cap;
};

/* The end of a load of size bytes at start: code of size 0 still takes its address. */
static inline uint64_t vp_cm_load_end(uint64_t start, uint64_t size)
{
	return start + (size ? size : 1);
}

/* The rule: a load of [start, start+size) begins a new epoch when it overlaps code that
 * was placed in the current epoch (placed: the loads of this epoch so far). */
bool vp_cm_load_reuses(const struct vp_cm_ranges *placed, uint64_t start, uint64_t size);

/* True when [s, e) overlaps a range of r. */
bool vp_cm_ranges__overlaps(const struct vp_cm_ranges *r, uint64_t s, uint64_t e);
/* Adds [s, e) keeping the order; 0 or -ENOMEM. */
int vp_cm_ranges__insert(struct vp_cm_ranges *r, uint64_t s, uint64_t e);
/* Removes the range that starts at s, if any. */
void vp_cm_ranges__remove_start(struct vp_cm_ranges *r, uint64_t s);
static inline void vp_cm_ranges__clear(struct vp_cm_ranges *r) { r->n = 0; }
void vp_cm_ranges__free(struct vp_cm_ranges *r);

#endif
