/* Labels each process of a recording with its container (VP_REC_CONTAINER): a sink that
 * sits in front of the session writer and, for each process it sees for the first time
 * in a session (its first sample or COMM) and after each exec, reads /proc/PID/cgroup,
 * NSpid and the namespace inodes and emits the record before passing the first one on. */
#ifndef VIPROF_RECORDER_CONTAINER_H
#define VIPROF_RECORDER_CONTAINER_H

#include <sys/types.h>

#include "sampler-kernel/sampler.h"

struct vp_container_sink;

/* NULL and errno on failure. The sink may be called from several threads. */
struct vp_container_sink *vp_container_sink__new(struct vp_sink next);
struct vp_sink vp_container_sink__sink(struct vp_container_sink *cs);
/* Labels a process at its first sample only, and again at its first sample after an
 * exec: a VM that keeps starting programs costs nothing for those never sampled (the
 * whole-VM service). A process that exits before its first sample is read (the drain
 * period) keeps no label. Call before the first record. */
void vp_container_sink__set_lazy(struct vp_container_sink *cs);
/* A new session: records go to next, and every process is labelled again there. */
void vp_container_sink__retarget(struct vp_container_sink *cs, struct vp_sink next);
void vp_container_sink__free(struct vp_container_sink *cs);   /* accepts NULL */

/* Reads pid's container facts and emits one VP_REC_CONTAINER (*nspid, if not NULL,
 * gets its pid in its own namespace). 0, -ESRCH when the process is gone, or the sink's
 * -errno. The sink also emits VP_REC_NSTID for the threads of processes in another pid
 * namespace, with their first COMM or FORK in a session. */
int vp_container__emit(pid_t pid, uint64_t time, const struct vp_sink *sink, uint32_t *nspid);

#endif
