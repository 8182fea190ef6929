/* Virtual threads in reports (issue 21, item 3): the agent's VTHREAD_MOUNT/UNMOUNT
 * records of one JVM (maps/codemap_format.h), turned into
 *   - mount intervals per carrier: from a mount to the same virtual thread's unmount on
 *     that carrier, the carrier's samples are the virtual thread's (report --vthreads);
 *   - waits per virtual thread: from an unmount (not its end) to its next mount, the
 *     virtual thread waited unmounted, at the stack the mount carries (or the unmount).
 * A mount whose unmount is missing (a record the agent's full queue dropped) is not an
 * interval unless it is the carrier's last (the virtual thread still ran when recording
 * stopped); a wait with no next mount (still waiting at the end) is not a wait. */
#ifndef VIPROF_POSTPROC_VTHREADS_H
#define VIPROF_POSTPROC_VTHREADS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "maps/codemap.h"

/* Reports give a virtual thread a thread id of its own, outside the kernel's range
 * (pid_max is at most 2^22), so that every view keeps it apart from its carriers. */
#define VP_VTHREAD_TID_BIT 0x80000000u
static inline uint32_t vp_vthread_tid(uint64_t id) { return VP_VTHREAD_TID_BIT | (uint32_t)(id & 0x7fffffffu); }

struct vp_vt_wait {
	uint64_t id;
	const char *name;            /* "" when unnamed */
	uint64_t from, to;           /* CLOCK_MONOTONIC ns */
	uint32_t nframes;            /* its stack, innermost first: cm->alloc_frames[first ..] */
	size_t first;
	bool short_wait;             /* under the agent's threshold: no stack taken */
};

struct vp_vthreads;
/* Builds the index of cm's virtual-thread records (cm must outlive it). NULL with errno
 * ENOMEM; an index with nothing in it when cm has no such records. */
struct vp_vthreads *vp_vthreads__build(const struct vp_codemap *cm);
void vp_vthreads__free(struct vp_vthreads *v);   /* accepts NULL */
/* Whether cm had any virtual-thread records. */
bool vp_vthreads__any(const struct vp_vthreads *v);
/* The virtual thread mounted on carrier at t: true with its id and name ("" unnamed). */
bool vp_vthreads__at(const struct vp_vthreads *v, uint32_t carrier, uint64_t t, uint64_t *id, const char **name);
/* The waits, by virtual thread then time. */
size_t vp_vthreads__waits(const struct vp_vthreads *v, const struct vp_vt_wait **out);
/* A virtual thread's name in reports: "[vthread #ID]" or "[vthread #ID NAME]". */
void vp_vthreads__label(uint64_t id, const char *name, char *out, size_t len);

#endif
