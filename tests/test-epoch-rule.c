/* The epoch-on-overlap rule (maps/epoch_rule.h) that the agent and the jitdump import
 * share: which loads open a new epoch, with touching, nested, zero-size and unordered
 * loads, checked against a brute-force overlap test on random loads. */
#include "test.h"

#include <stdlib.h>

#include "maps/epoch_rule.h"

static bool brute(const uint64_t (*v)[2], size_t n, uint64_t s, uint64_t size)
{
	uint64_t e = s + (size ? size : 1);
	for (size_t i = 0; i < n; i++)
		if (v[i][0] < e && s < v[i][1])
			return true;
	return false;
}

int main(void)
{
	struct vp_cm_ranges r = { 0 };

	/* Empty epoch: nothing to reuse. */
	ASSERT_FALSE(vp_cm_load_reuses(&r, 0x1000, 0x100));
	ASSERT_OK(vp_cm_ranges__insert(&r, 0x1000, vp_cm_load_end(0x1000, 0x100)));
	/* Touching on either side is no overlap; one byte in is. */
	ASSERT_FALSE(vp_cm_load_reuses(&r, 0x1100, 0x10));
	ASSERT_FALSE(vp_cm_load_reuses(&r, 0xf00, 0x100));
	ASSERT_TRUE(vp_cm_load_reuses(&r, 0xf00, 0x101));
	ASSERT_TRUE(vp_cm_load_reuses(&r, 0x10ff, 0x10));
	/* Nested both ways, and the same start. */
	ASSERT_TRUE(vp_cm_load_reuses(&r, 0x1040, 0x10));
	ASSERT_TRUE(vp_cm_load_reuses(&r, 0x800, 0x1000));
	ASSERT_TRUE(vp_cm_load_reuses(&r, 0x1000, 0x100));
	/* Size 0 still takes its first byte. */
	ASSERT_TRUE(vp_cm_load_reuses(&r, 0x1000, 0));
	ASSERT_TRUE(vp_cm_load_reuses(&r, 0x10ff, 0));
	ASSERT_FALSE(vp_cm_load_reuses(&r, 0x1100, 0));
	ASSERT_FALSE(vp_cm_load_reuses(&r, 0xfff, 1));
	ASSERT_UEQ(vp_cm_load_end(0x2000, 0), 0x2001);

	/* Out-of-order inserts stay sorted; removal by start. */
	ASSERT_OK(vp_cm_ranges__insert(&r, 0x3000, 0x3100));
	ASSERT_OK(vp_cm_ranges__insert(&r, 0x2000, 0x2001));
	ASSERT_EQ(r.n, 3);
	ASSERT_UEQ(r.v[0].start, 0x1000);
	ASSERT_UEQ(r.v[1].start, 0x2000);
	ASSERT_UEQ(r.v[2].start, 0x3000);
	ASSERT_TRUE(vp_cm_load_reuses(&r, 0x2000, 0));
	vp_cm_ranges__remove_start(&r, 0x2000);
	vp_cm_ranges__remove_start(&r, 0x2500); /* no range starts there: nothing happens */
	ASSERT_EQ(r.n, 2);
	ASSERT_FALSE(vp_cm_load_reuses(&r, 0x2000, 0));
	vp_cm_ranges__clear(&r);
	ASSERT_FALSE(vp_cm_load_reuses(&r, 0x1000, 0x100));

	/* Random epochs as the agent builds them (a load that reuses starts afresh),
	 * against the brute force; counts how many epochs each makes. */
	static uint64_t placed[4096][2];
	srand(13);
	for (int round = 0; round < 50; round++) {
		size_t n = 0;
		int epochs = 1, brute_epochs = 1;
		vp_cm_ranges__clear(&r);
		for (int k = 0; k < 4000; k++) {
			uint64_t s = 0x100000 + (uint64_t)(rand() % 65536) * 16, size = (uint64_t)(rand() % 3) ? (uint64_t)(rand() % 512) : 0;
			bool a = vp_cm_load_reuses(&r, s, size), b = brute(placed, n, s, size);
			if (a != b)
				FAIL("round %d load %d at %#llx size %llu: rule says %d, brute force %d", round, k,
				     (unsigned long long)s, (unsigned long long)size, a, b);
			if (a) {
				vp_cm_ranges__clear(&r);
				n = 0;
				epochs++;
			}
			if (b)
				brute_epochs++;
			ASSERT_OK(vp_cm_ranges__insert(&r, s, vp_cm_load_end(s, size)));
			placed[n][0] = s;
			placed[n][1] = vp_cm_load_end(s, size);
			n++;
		}
		ASSERT_EQ(epochs, brute_epochs);
		ASSERT_GT(epochs, 1);
	}
	vp_cm_ranges__free(&r);
	ASSERT_NULL(r.v);
	printf("epoch rule: ok\n");
	return 0;
}
