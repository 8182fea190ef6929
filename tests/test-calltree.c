/* postproc/calltree: the call tree of the flame graph and of --minwidth. A path added
 * twice reaches the same nodes, siblings are kept apart by parent, nodes made without a
 * look-up are found once the tree is looked up, and ids stay stable past many rehashes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "postproc/calltree.h"
#include "test.h"

#define NONE VP_CALLTREE_NONE

int main(void)
{
	struct vp_calltree t = { 0 };
	uint32_t root = vp_calltree__add(&t, NONE, 7);
	ASSERT_EQ(root, 0);
	uint32_t a = vp_calltree__child(&t, root, 1), b = vp_calltree__child(&t, root, 2);
	ASSERT_EQ(a, 1);
	ASSERT_EQ(b, 2);
	ASSERT_EQ(vp_calltree__child(&t, root, 1), a);
	uint32_t aa = vp_calltree__child(&t, a, 2);   /* frame 2 again, under another parent */
	ASSERT_NE(aa, b);
	ASSERT_EQ(vp_calltree__child(&t, a, 2), aa);
	ASSERT_EQ(t.n[aa].parent, a);
	ASSERT_EQ(t.n[aa].frame, 2);
	/* Children listed newest first, through first_child and next_sibling. */
	ASSERT_EQ(t.n[root].first_child, b);
	ASSERT_EQ(t.n[b].next_sibling, a);
	ASSERT_EQ(t.n[a].next_sibling, NONE);
	ASSERT_EQ(t.n[root].parent, NONE);

	/* A node made without a look-up (a caller that knows the path is new) is found by
	 * the next look-up. */
	uint32_t c = vp_calltree__add(&t, b, 9);
	ASSERT_EQ(vp_calltree__child(&t, b, 9), c);

	/* A deep and a wide tree: 20000 nodes, every one found again with its id. */
	uint32_t ids[20000], parent = root;
	for (uint32_t i = 0; i < 10000; i++)
		parent = ids[i] = vp_calltree__child(&t, parent, i % 13);
	for (uint32_t i = 10000; i < 20000; i++)
		ids[i] = vp_calltree__child(&t, root, 100 + i);
	ASSERT_EQ(t.len, 5 + 20000);
	parent = root;
	for (uint32_t i = 0; i < 10000; i++)
		ASSERT_EQ(parent = vp_calltree__child(&t, parent, i % 13), ids[i]);
	for (uint32_t i = 10000; i < 20000; i++)
		ASSERT_EQ(vp_calltree__child(&t, root, 100 + i), ids[i]);
	ASSERT_EQ(t.len, 5 + 20000);

	/* Without look-ups the tree keeps no hash at all (the flame graph's sorted pass). */
	struct vp_calltree s = { 0 };
	uint32_t r = vp_calltree__add(&s, NONE, 0);
	for (uint32_t i = 0; i < 100; i++)
		vp_calltree__add(&s, r, i);
	ASSERT_EQ(s.size, 0);
	ASSERT_EQ(s.len, 101);
	vp_calltree__free(&s);
	vp_calltree__free(&t);
	vp_calltree__free(&t);
	printf("ok\n");
	return 0;
}
