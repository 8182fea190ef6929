/* The call tree both the flame graph (report_html.c) and --minwidth (profile_xform.c)
 * build from stacks: one node per (parent, frame), found through a hash of that pair,
 * with each node's children in a list. Node ids are indices, so callers keep their own
 * per-node values in arrays of t->len entries. */
#ifndef VIPROF_POSTPROC_CALLTREE_H
#define VIPROF_POSTPROC_CALLTREE_H

#include <stddef.h>
#include <stdint.h>

#define VP_CALLTREE_NONE UINT32_MAX

struct vp_calltree_node {
	uint32_t frame, parent;             /* parent VP_CALLTREE_NONE: a root */
	uint32_t first_child, next_sibling; /* the newest child first */
};

/* Zero-initialise with {0}. */
struct vp_calltree {
	struct vp_calltree_node *n;
	size_t len, cap;
	uint32_t *slot;     /* (parent, frame) -> node, open addressing; roots are not in it */
	size_t size;
};

/* A new node (parent, frame) without looking for one already there, for a caller that
 * knows the path is new (stacks added in path order); a root when parent is
 * VP_CALLTREE_NONE. Its id, or VP_CALLTREE_NONE on ENOMEM. */
uint32_t vp_calltree__add(struct vp_calltree *t, uint32_t parent, uint32_t frame);
/* The child of parent (a node, not NONE) for frame, made if new; VP_CALLTREE_NONE on
 * ENOMEM. */
uint32_t vp_calltree__child(struct vp_calltree *t, uint32_t parent, uint32_t frame);
/* Frees the tree; accepts a zeroed one. */
void vp_calltree__free(struct vp_calltree *t);

#endif
