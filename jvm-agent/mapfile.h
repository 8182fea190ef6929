/* Where a session's map goes (dir=, or the descriptors the recorder hands over with
 * fds=) and when the session ends (the recorder lets go of its lock= file). Internal to
 * jvm-agent/; the agent thread's (and setup's) only. */
#ifndef VIPROF_JVM_AGENT_MAPFILE_H
#define VIPROF_JVM_AGENT_MAPFILE_H

#include <stdbool.h>

struct vp_cm_writer;

/* A session's place: its directory (default_dir: the per-user default under /tmp), its
 * lock file ("" for none), and the descriptors handed over (-1 for none), now owned here. */
void vp_mapfile__use(const char *dir, const char *lock, bool default_dir, int map_fd, int lock_fd);
/* Starts watching the session's lock file (a session without one lasts until the next);
 * stops watching it. */
void vp_mapfile__watch(void);
void vp_mapfile__unwatch(void);
/* Has the recorder let go of its lock (stopped, or was killed)? Asked at most twice a
 * second unless now, never blocking. */
bool vp_mapfile__ended(bool now);
/* Creates the session's map: <dir>/<pid>/codemap.vpm, or codemap.N.vpm when that exists.
 * 0 or -errno. */
int vp_mapfile__open(struct vp_cm_writer **w);
/* The map's path and the directory, for messages. */
const char *vp_mapfile__path(void);
const char *vp_mapfile__dir(void);

#endif
