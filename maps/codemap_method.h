/* One method's code as a code map holds it (maps/codemap.h): a type of its own, so that
 * the flat view (maps/codemap_flat.h) reads methods without the whole map. */
#ifndef VIPROF_MAPS_CODEMAP_METHOD_H
#define VIPROF_MAPS_CODEMAP_METHOD_H

#include <stdint.h>

struct vp_cm_method_info {
	uint64_t start;
	uint32_t size;
	uint32_t epoch;              /* index into vp_codemap.epochs of the epoch it was loaded in */
	uint64_t method_id;
	uint64_t load_time, unload_time; /* CLOCK_MONOTONIC ns; unload VP_CM_NEVER if never */
	const char *name, *klass, *mname, *sig; /* klass/mname/sig are "" for imports */
	int32_t inl;                 /* index into vp_codemap.inlines, or -1 */
	uint8_t level;               /* HotSpot compile level; VP_CM_LEVEL_UNKNOWN for imports and
				      * loads from CompiledMethodLoad, which does not say */
	uint8_t flags;               /* VP_CM_LOAD_* */
};

#endif
