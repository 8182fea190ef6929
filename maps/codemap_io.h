/* perf-PID.map and jitdump: the code-map formats other tools write and read, imported into
 * and exported from a struct vp_codemap (maps/codemap.h). */
#ifndef VIPROF_MAPS_CODEMAP_IO_H
#define VIPROF_MAPS_CODEMAP_IO_H

#include <stddef.h>

#include "maps/codemap.h"

/* Imports a perf-PID.map ("START SIZE name" per line, hex) as one timeless epoch. */
struct vp_codemap *vp_codemap__import_perf_map(const char *path, char *err, size_t errlen);
/* Imports a jitdump file's JIT_CODE_LOAD/JIT_CODE_MOVE records; a load that overlaps code
 * already placed starts a new epoch, as the agent does. */
struct vp_codemap *vp_codemap__import_jitdump(const char *path, char *err, size_t errlen);

/* Exports the flat map as perf-PID.map text, or as a jitdump file (code bytes are not
 * kept by viprof, so JIT_CODE_LOAD carries zeros of the right size). The path versions
 * write only a regular file (created 0600; -EINVAL for anything else, never blocking on
 * a FIFO); the _fd versions write to fd, which the caller opened (as 'viprof maps' does
 * with O_EXCL), and close it. 0 or -errno. */
int vp_codemap__export_perf_map(const struct vp_codemap *m, const char *path);
int vp_codemap__export_jitdump(const struct vp_codemap *m, const char *path);
int vp_codemap__export_perf_map_fd(const struct vp_codemap *m, int fd);
int vp_codemap__export_jitdump_fd(const struct vp_codemap *m, int fd);

#endif
