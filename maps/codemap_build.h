/* Building a struct vp_codemap from another format (maps/codemap_io.c): the reader's own
 * building steps (maps/codemap.c), for maps/ only. Every function returns 0 or -errno
 * unless it says otherwise. */
#ifndef VIPROF_MAPS_CODEMAP_BUILD_H
#define VIPROF_MAPS_CODEMAP_BUILD_H

#include <stddef.h>
#include <stdint.h>

/* No includes of maps/ headers: codemap.c, which defines these, includes this one. */
struct vp_codemap;
struct vp_cm_flat;

/* An empty map, unbounded (imports read the user's own files); NULL with errno. */
struct vp_codemap *vp_cm_build__new(void);
/* Begins epoch id for reason (VP_EPOCH_*) at t; later methods are loaded in it. */
int vp_cm_build__epoch(struct vp_codemap *m, uint32_t id, uint32_t reason, uint64_t t);
/* A method of size bytes at start, loaded at t, named by name_len bytes of name. */
int vp_cm_build__method(struct vp_codemap *m, uint64_t start, uint32_t size, uint64_t id, uint64_t t, const char *name,
			size_t name_len);
/* The index of the last method loaded at start, UINT32_MAX when none was. */
uint32_t vp_cm_build__last_at(const struct vp_codemap *m, uint64_t start);
/* Sorts and indexes the map once every record is in; err says why not. */
int vp_cm_build__finish(struct vp_codemap *m, char *err, size_t errlen);
/* The map's flat view (vp_codemap__flat), once finished. */
const struct vp_cm_flat *vp_cm_build__flat(const struct vp_codemap *m);

#endif
