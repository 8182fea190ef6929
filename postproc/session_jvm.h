/* The JVM agents' own samples (the session loader's, postproc/session.c): after the
 * stream's, each JVM's sampled allocations and contended locks (events "alloc" and
 * "lock") and its virtual threads' unmounted waits (event "off-cpu"), from the code maps
 * under <dir>/jit, with the JVMTI stacks the agent recorded. */
#ifndef VIPROF_SESSION_JVM_H
#define VIPROF_SESSION_JVM_H

#include "postproc/profile.h"
#include "postproc/session_timeline.h"
#include "postproc/session_weights.h"

/* Adds them to p: the threads, times and JVMs the report selects (tl). 0 or -errno. */
int vp_session_jvm__add(const char *dir, struct vp_timeline *tl, const struct vp_weights *w, struct vp_profile *p);

#endif
