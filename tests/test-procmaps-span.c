/* vp_procmaps__find_span's promise, checked against vp_procmaps__find itself: at every
 * time in the span it returns, the lookup finds the same mapping (or, for a span with
 * no mapping, none). A process whose mappings come, overlap, go and come back, and a
 * second instance after an exec. */
#include <stdlib.h>

#include "common/session_format.h"
#include "postproc/procmaps.h"
#include "test.h"

static void map(struct vp_procmaps *pm, uint64_t t, uint64_t start, uint64_t len, const char *name, bool synth)
{
	struct vp_mmap m = { .pid = 7, .tid = 7, .start = start, .len = len, .prot = 5, .synthesized = synth };
	ASSERT_OK(vp_procmaps__mmap(pm, t, &m, name));
}

int main(void)
{
	struct vp_procmaps *pm = vp_procmaps__new();
	ASSERT_NOT_NULL(pm);
	map(pm, 5, 0x1000, 0x1000, "/usr/lib/libA.so", true);
	map(pm, 5, 0x10000, 0x100000, "", true);               /* a large reservation */
	map(pm, 10, 0x5000, 0x1000, "/usr/lib/libB.so", false);
	map(pm, 20, 0x5000, 0x800, "/usr/lib/libC.so", false); /* replaces B's first half */
	map(pm, 30, 0x8000, 0x1000, "", false);                /* anonymous code */
	map(pm, 40, 0x5000, 0x1000, "/usr/lib/libB.so", false);
	ASSERT_OK(vp_procmaps__comm(pm, 50, 7, 7, "next", true));
	map(pm, 50, 0x1000, 0x2000, "/usr/bin/next", false);
	static const uint64_t ips[] = { 0x1000, 0x1800, 0x2800, 0x5100, 0x5900, 0x8010, 0x20000, 0x300000 };
	int spans = 0;
	for (size_t i = 0; i < sizeof(ips) / sizeof(ips[0]); i++) {
		for (uint64_t t = 0; t < 70; t++) {
			uint64_t lo, hi;
			struct vp_map *m = vp_procmaps__find_span(pm, 7, ips[i], t, &lo, &hi);
			ASSERT_TRUE(m == vp_procmaps__find(pm, 7, ips[i], t));
			if (lo > hi)
				continue;
			ASSERT_TRUE(lo <= t && t < hi);
			spans++;
			for (uint64_t u = lo; u < hi && u < 70; u++)
				if (vp_procmaps__find(pm, 7, ips[i], u) != m)
					FAIL("ip 0x%llx: the mapping at %llu differs from its span [%llu, %llu) found at %llu",
					     (unsigned long long)ips[i], (unsigned long long)u, (unsigned long long)lo,
					     (unsigned long long)hi, (unsigned long long)t);
		}
	}
	ASSERT_GT(spans, 300);
	vp_procmaps__free(pm);
	return 0;
}
