/* The GCs the agent saw (jvm-agent/gcs.h). */
#include "jvm-agent/gcs.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "hotspot/memory.h"
#include "hotspot/vmstructs.h"
#include "jvm-agent/stats.h"
#include "maps/codemap_format.h"
#include "maps/codemap_writer.h"

/* GC finish times, published lock-free by the GC callback (vp_gcs__finished). */
#define GC_RING 64

static struct {
	/* Written only by the GC callback (one VM thread at a time). */
	uint64_t time[GC_RING];
	uint32_t id[GC_RING], full[GC_RING];   /* the JVM's counters after each (gc_info) */
	uint8_t kind[GC_RING];                 /* enum vp_cm_gc_kind */
	uint64_t head;                         /* published with release semantics */
	uint64_t tail;                         /* writer side */
} ring;

/* What each GC was (issue 26), from HotSpot's collection counters: CollectedHeap::
 * _total_collections is in the exported structure tables; _total_full_collections is
 * not, but has been the unsigned int right after it in every JDK from 8 to 25. Read
 * with plain loads in the GC callback (the heap outlives every GC), the previous values
 * kept there: a collection moved one counter or both, a pause of a concurrent cycle
 * neither. name: the collector, from its Use*GC flag. */
static struct {
	bool ok;
	void **heap;           /* &Universe::_collectedHeap */
	uint64_t total_off;    /* of _total_collections in CollectedHeap */
	uint32_t last_total, last_full;   /* GC callback only, after init */
	char name[16];
} gc_info;

void vp_gcs__init(const struct vp_hs_vm *vm)
{
	static const char *const flags[][2] = { { "UseG1GC", "G1" }, { "UseParallelGC", "Parallel" },
						 { "UseSerialGC", "Serial" }, { "UseZGC", "ZGC" },
						 { "UseShenandoahGC", "Shenandoah" }, { "UseEpsilonGC", "Epsilon" } };

	if (!vm)
		return;
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]) && !gc_info.name[0]; i++) {
		uint64_t value, fl;
		if (!vp_hs_vm__find_flag(vm, &vp_hs_mem_direct, flags[i][0], &value, &fl) && value &&
		    *(const bool *)(uintptr_t)value)
			snprintf(gc_info.name, sizeof(gc_info.name), "%s", flags[i][1]);
	}
	uint64_t heap_at = vp_hs_vm__address(vm, VP_HS_UNIVERSE_HEAP);
	int64_t off = vp_hs_vm__offset(vm, VP_HS_HEAP_TOTAL_COLLECTIONS);
	if (heap_at && off >= 0) {
		gc_info.heap = (void **)(uintptr_t)heap_at;
		gc_info.total_off = (uint64_t)off;
		uint32_t c[2];
		void *heap = *gc_info.heap;
		/* Before the heap exists (agent loaded at start) both counters are 0. */
		if (!heap || !vp_hs_mem__read(&vp_hs_mem_self, (uint64_t)(uintptr_t)heap + gc_info.total_off, c, sizeof(c))) {
			gc_info.last_total = heap ? c[0] : 0;
			gc_info.last_full = heap ? c[1] : 0;
			gc_info.ok = gc_info.last_full <= gc_info.last_total;
		}
	}
}

void vp_gcs__finished(uint64_t t)
{
	uint64_t h = __atomic_load_n(&ring.head, __ATOMIC_RELAXED);
	uint8_t kind = VP_GC_UNKNOWN;
	uint32_t total = 0, full = 0;
	const char *heap = gc_info.ok ? *(char *const *)gc_info.heap : NULL;

	ring.time[h % GC_RING] = t;
	if (heap) {
		total = *(const volatile uint32_t *)(heap + gc_info.total_off);
		full = *(const volatile uint32_t *)(heap + gc_info.total_off + 4);
		/* A full count above the total means the layout is not the one assumed. */
		kind = full > total ? VP_GC_UNKNOWN : full != gc_info.last_full ? VP_GC_FULL
		     : total != gc_info.last_total ? VP_GC_YOUNG : VP_GC_CONCURRENT;
		if (full > total)
			full = 0;
		gc_info.last_total = total;
		gc_info.last_full = full;
	}
	ring.id[h % GC_RING] = total;
	ring.full[h % GC_RING] = full;
	ring.kind[h % GC_RING] = kind;
	__atomic_store_n(&ring.head, h + 1, __ATOMIC_RELEASE);
}

uint64_t vp_gcs__count(void)
{
	return __atomic_load_n(&ring.head, __ATOMIC_ACQUIRE);
}

uint64_t vp_gcs__last_between(uint64_t lo, uint64_t hi)
{
	uint64_t head = vp_gcs__count(), best = 0;

	for (uint64_t i = head > GC_RING ? head - GC_RING : 0; i < head; i++) {
		uint64_t g = ring.time[i % GC_RING];
		if (g > lo && g <= hi && g > best)
			best = g;
	}
	return best;
}

uint64_t vp_gcs__first_after(uint64_t t)
{
	uint64_t head = vp_gcs__count(), best = 0;

	for (uint64_t i = head > GC_RING ? head - GC_RING : 0; i < head; i++) {
		uint64_t g = ring.time[i % GC_RING];
		if (g > t && (!best || g < best))
			best = g;
	}
	return best;
}

int vp_gcs__write(struct vp_cm_writer *w, uint64_t t)
{
	uint64_t head = vp_gcs__count();
	char name[sizeof(gc_info.name) + 1];

	snprintf(name, sizeof(name), "%.*s", (int)sizeof(gc_info.name), gc_info.name);
	if (head - ring.tail > GC_RING)
		ring.tail = head - GC_RING; /* overrun: the older boundaries collapse into these */
	while (ring.tail < head) {
		uint64_t g = ring.time[ring.tail % GC_RING];
		if (g > t)
			break;
		uint64_t i = (ring.tail++) % GC_RING;
		int err = vp_cm_writer__gc(w, g, ring.id[i], ring.full[i], ring.kind[i], name);
		if (err)
			return err;
	}
	return 0;
}

void vp_gcs__skip(void)
{
	ring.tail = vp_gcs__count();
}
