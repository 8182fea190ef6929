/* The time-correct JIT resolver postproc calls (API agreed in the team's apis brief).
 * A sample at CLOCK_MONOTONIC time t and address a resolves to the method whose code
 * occupied a at t: the epoch of t is searched first (so a sample that precedes its
 * method's trailing load callback still resolves), then earlier epochs, but only to code
 * that was not unloaded before t. All lookups are binary searches; walking back costs one
 * per epoch without a hit. */
#ifndef VIPROF_JIT_INDEX_H
#define VIPROF_JIT_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct vp_jit_index;

/* dir is <session>/jit/<pid>; NULL with errno ENOENT when there are no maps, other errno
 * + err on a bad file. */
struct vp_jit_index *vp_jit_index__open(const char *dir, char *err, size_t errlen);

struct vp_jit_frame {
	const char *name;
	const char *file;
	uint32_t line;
	uint8_t layer; /* enum vp_layer */
	/* The compiled method's frame (VP_LAYER_JIT) only: HotSpot's compile level (1-3 C1,
	 * 4 C2) or VP_CM_LEVEL_UNKNOWN (0xff), and whether it is an OSR compilation. */
	uint8_t level;
	bool osr;
};

/* What owned addr at time t: the method record (or, when no method did, the stub or
 * blob) that vp_jit_index__resolve would expand, as an opaque identity; NULL when
 * neither. Two lookups with the same identity and address resolve to the same frames,
 * which lets a caller cache by (addr, identity). */
const void *vp_jit_index__owner(struct vp_jit_index *xi, uint64_t addr, uint64_t t, bool flat);
/* vp_jit_index__owner, and the span [*lo, *hi) of times at which it is sure to name the
 * same owner: the owning method's time in the epoch of t once it was loaded (or all
 * time in flat mode); an empty span (*lo > *hi) when that cannot be said cheaply. */
const void *vp_jit_index__owner_span(struct vp_jit_index *xi, uint64_t addr, uint64_t t, bool flat,
				     uint64_t *lo, uint64_t *hi);

/* One search of the index for addr at t, kept so that the frames can follow without a
 * second one: the owner and span of vp_jit_index__owner_span, and what
 * vp_jit_index__resolve would expand. */
struct vp_jit_hit {
	const void *owner;           /* vp_jit_index__owner_span's identity */
	uint64_t lo, hi;             /* and its span */
	const void *method, *blob;   /* what the frames come from (opaque; NULL when nothing) */
};
const void *vp_jit_index__lookup(struct vp_jit_index *xi, uint64_t addr, uint64_t t, bool flat,
				 struct vp_jit_hit *h);
/* The frames of a lookup of addr, as vp_jit_index__resolve gives them. */
int vp_jit_index__expand(struct vp_jit_index *xi, const struct vp_jit_hit *h, uint64_t addr,
			 struct vp_jit_frame *out, int max);

/* Resolves addr at CLOCK_MONOTONIC time t. Returns n > 0 frames with out[0] the innermost
 * (an inlined leaf, layer VP_LAYER_INLINED) up to out[n-1] the compiled method itself
 * (VP_LAYER_JIT), or one frame for a stub/interpreter (VP_LAYER_JVM / VP_LAYER_INTERPRETED);
 * 0 when nothing was there. flat=true reproduces a single timeless perf-PID.map (last
 * writer wins) for --map-mode flat. Strings live as long as the index. */
int vp_jit_index__resolve(struct vp_jit_index *x, uint64_t addr, uint64_t t, bool flat,
			  struct vp_jit_frame *out, int max);
bool vp_jit_index__frame_pointers(const struct vp_jit_index *x); /* -XX:+PreserveFramePointer */
void vp_jit_index__close(struct vp_jit_index *x);

/* Additions beyond the agreed API: build an index from a perf-PID.map or a jitdump file
 * (for JVMs profiled without the viprof agent), and reach the maps behind an index. */
struct vp_jit_index *vp_jit_index__open_perf_map(const char *path, char *err, size_t errlen);
struct vp_jit_index *vp_jit_index__open_jitdump(const char *path, char *err, size_t errlen);
struct vp_codemap;
const struct vp_codemap *vp_jit_index__codemap(const struct vp_jit_index *x);

#endif
