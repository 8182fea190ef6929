/* What reading a code map may cost (maps/codemap.c). The file is the JVM user's, and root
 * reads it (the service, every interval): its records' counts must not make the reader
 * allocate more than a small multiple of the file's own bytes (INLINE2's kept frames cost
 * no bytes, and zlib packs a thousand repeated bytes into a few), nor more than a cap in
 * all. A map that asks for more is not read, and says so; a real one takes about 4 times
 * its size. */
#ifndef VIPROF_MAPS_CODEMAP_BUDGET_H
#define VIPROF_MAPS_CODEMAP_BUDGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define VP_CM_READ_RATIO 64u                 /* bytes per byte of the file read so far */
#define VP_CM_READ_FLOOR (4ull << 20)        /* what any map may take */
#define VP_CM_READ_CAP   (1ull << 30)        /* what no map may take */

struct cfile_reader;

/* One map's budget: on for the agent's maps (not for imports, which the user runs on their
 * own files), what was charged, and the bytes read. Zeroed: off, nothing spent. */
struct vp_cm_budget {
	bool bounded, over;    /* over: a charge failed (every later failure is that one) */
	uint64_t spent, read_before;
	const struct cfile_reader *rd;   /* the file being read */
};

/* Charges bytes about to be allocated: 0, or -E2BIG once the map asks for more than its
 * bytes read so far allow. */
int vp_cm_budget__charge(struct vp_cm_budget *b, uint64_t bytes);
/* vp_grow, its growth charged first (at most twice what is needed: vp_grow doubles). */
int vp_cm_budget__grow(struct vp_cm_budget *b, void **v, size_t *cap, size_t need, size_t elem);
/* malloc(n), charged; NULL with errno E2BIG or ENOMEM. */
void *vp_cm_budget__alloc(struct vp_cm_budget *b, size_t n);
/* The bytes of code-map files read so far, the one being read included. */
uint64_t vp_cm_budget__read(const struct vp_cm_budget *b);

#endif
