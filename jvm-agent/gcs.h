/* The garbage collections the agent saw: what each was (from HotSpot's collection
 * counters) and when it finished, in a ring that the GC callback fills lock-free and the
 * writer and the code-heap walk read. Internal to jvm-agent/. */
#ifndef VIPROF_JVM_AGENT_GCS_H
#define VIPROF_JVM_AGENT_GCS_H

#include <stdint.h>

struct vp_cm_writer;
struct vp_hs_vm;

/* Finds the collector and its counters in vm (once, at setup; NULL, no HotSpot
 * tables: kinds unknown). */
void vp_gcs__init(const struct vp_hs_vm *vm);
/* A GC finished at t: in the GarbageCollectionFinish callback, inside the GC, at a
 * safepoint. Plain stores into preallocated memory: it takes no lock (a Java thread that
 * holds the agent's raw monitor would block for this very safepoint) and never allocates. */
void vp_gcs__finished(uint64_t t);
/* How many GCs finished so far (read with acquire semantics). */
uint64_t vp_gcs__count(void);
/* The last GC that finished in (lo, hi], or 0; the first that finished after t, or 0.
 * Among the last 64. */
uint64_t vp_gcs__last_between(uint64_t lo, uint64_t hi);
uint64_t vp_gcs__first_after(uint64_t t);
/* Writer side: hands w each GC not handed yet that finished at or before t (w decides
 * which of them begin epochs). 0 or -errno. */
int vp_gcs__write(struct vp_cm_writer *w, uint64_t t);
/* Writer side: a new map begins; the GCs before now belong to none. */
void vp_gcs__skip(void);

#endif
