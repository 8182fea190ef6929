#include "postproc/calltree.h"

#include <stdlib.h>
#include <string.h>

#include "common/util.h"

#define NONE VP_CALLTREE_NONE

static uint64_t child_hash(uint32_t parent, uint32_t frame)
{
	uint64_t h = ((uint64_t)parent << 32 | frame) * 0x9e3779b97f4a7c15ull;
	return h ^ (h >> 29);
}

/* The slot of (parent, frame), or the empty one where it would go. */
static size_t find(const struct vp_calltree *t, uint32_t parent, uint32_t frame)
{
	size_t j = child_hash(parent, frame) & (t->size - 1);
	for (; t->slot[j] != NONE; j = (j + 1) & (t->size - 1)) {
		const struct vp_calltree_node *c = &t->n[t->slot[j]];
		if (c->parent == parent && c->frame == frame)
			break;
	}
	return j;
}

/* Makes room for one more node in the hash: doubled when half full. */
static int reserve(struct vp_calltree *t)
{
	if ((t->len + 1) * 2 <= t->size)
		return 0;
	size_t size = t->size ? t->size * 2 : 4096;
	uint32_t *slot = malloc(size * sizeof(*slot));
	if (!slot)
		return -1;
	memset(slot, 0xff, size * sizeof(*slot));
	for (size_t i = 0; i < t->len; i++) {
		if (t->n[i].parent == NONE)
			continue;
		size_t j = child_hash(t->n[i].parent, t->n[i].frame) & (size - 1);
		while (slot[j] != NONE)
			j = (j + 1) & (size - 1);
		slot[j] = (uint32_t)i;
	}
	free(t->slot);
	t->slot = slot;
	t->size = size;
	return 0;
}

static uint32_t new_node(struct vp_calltree *t, uint32_t parent, uint32_t frame)
{
	if (t->len >= NONE || vp_grow((void **)&t->n, &t->cap, t->len + 1, sizeof(*t->n)))
		return NONE;
	uint32_t id = (uint32_t)t->len++;
	t->n[id] = (struct vp_calltree_node){ .frame = frame, .parent = parent, .first_child = NONE,
					      .next_sibling = NONE };
	if (parent != NONE) {
		t->n[id].next_sibling = t->n[parent].first_child;
		t->n[parent].first_child = id;
	}
	return id;
}

uint32_t vp_calltree__add(struct vp_calltree *t, uint32_t parent, uint32_t frame)
{
	/* A tree that is looked up too keeps its hash whole. */
	if (!t->size || parent == NONE)
		return new_node(t, parent, frame);
	if (reserve(t))
		return NONE;
	size_t j = find(t, parent, frame);
	uint32_t id = new_node(t, parent, frame);
	if (id != NONE && t->slot[j] == NONE)
		t->slot[j] = id;
	return id;
}

uint32_t vp_calltree__child(struct vp_calltree *t, uint32_t parent, uint32_t frame)
{
	if (reserve(t))
		return NONE;
	size_t j = find(t, parent, frame);
	if (t->slot[j] != NONE)
		return t->slot[j];
	uint32_t id = new_node(t, parent, frame);
	if (id != NONE)
		t->slot[j] = id;
	return id;
}

void vp_calltree__free(struct vp_calltree *t)
{
	free(t->n);
	free(t->slot);
	memset(t, 0, sizeof(*t));
}
