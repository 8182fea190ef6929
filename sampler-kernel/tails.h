/* The count after a thread's last sample. A sample weighs the events of its thread
 * since that thread's previous sample, so what a thread counts after its last one is
 * in no sample: at the default -F a bursty event (page faults between sleeps) lets the
 * kernel's frequency loop stretch the period until most of a thread's count comes
 * after its last sample. The backends read each thread's final count when it exits
 * (and, where they can, when the recording stops) and charge the remainder to the
 * thread's last sampled stack, as a SAMPLE record flagged VP_SAMPLE_TAIL: a weight, not
 * a sample. This remembers each (thread, event)'s last sample and writes those records.
 * Internal to sampler-kernel/. */
#ifndef VIPROF_SAMPLER_TAILS_H
#define VIPROF_SAMPLER_TAILS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "common/session_format.h"
#include "sampler-kernel/sampler.h"

struct vp_tails;

struct vp_tails *vp_tails__new(void);      /* NULL when out of memory */
void vp_tails__free(struct vp_tails *t);   /* accepts NULL */

/* Remembers s (a SAMPLE body of len bytes, as written to the session) as the last
 * sample of (s->tid, s->event). 0 or -ENOMEM. */
int vp_tails__note(struct vp_tails *t, const struct vp_sample *s, size_t len);

/* Writes count events of (tid, event) as a VP_SAMPLE_TAIL record under the thread's
 * last sample noted (with no frames when it has none). forget drops the thread's
 * entry (it exited). 1 when a record was written, 0 when count is 0, or -errno. */
int vp_tails__charge(struct vp_tails *t, const struct vp_sink *sink, uint32_t pid, uint32_t tid, uint16_t event,
		     uint64_t count, uint64_t time, bool forget);

#endif
