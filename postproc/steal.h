/* Steal-time "victim" attribution: which threads were on a vCPU while the hypervisor
 * ran something else instead of it.
 *
 * The recorder writes cumulative steal per vCPU (VP_REC_STEAL, about every 100 ms, plus
 * one at the start and one at the end) and the scheduler's switches (VP_REC_SWITCH).
 * For each interval between two STEAL records of a CPU, the steal delta is charged to
 * the threads that ran on that CPU in the interval, in proportion to their run time
 * within it. Idle is pid/tid 0. Feed records in any order: they are sorted by time
 * per CPU in vp_steal_acct__finish(), because the per-CPU buffers are drained
 * independently and the stream is only roughly ordered. */
#ifndef VIPROF_POSTPROC_STEAL_H
#define VIPROF_POSTPROC_STEAL_H

#include <stdint.h>
#include "common/session_format.h"

/* pid/tid reported for steal that accrued on a CPU for which no SWITCH record ever said
 * who was running (e.g. a session recorded without switch events). */
#define VP_STEAL_UNKNOWN UINT32_MAX

struct vp_steal_acct;

/* NULL with errno ENOMEM. */
struct vp_steal_acct *vp_steal_acct__new(void);
void vp_steal_acct__free(struct vp_steal_acct *a);  /* accepts NULL */
/* time: the record's CLOCK_MONOTONIC ns. An allocation failure is remembered and
 * returned by vp_steal_acct__finish(). */
void vp_steal_acct__switch(struct vp_steal_acct *a, uint64_t time, const struct vp_switch *sw);
void vp_steal_acct__steal(struct vp_steal_acct *a, uint64_t time, const struct vp_steal *st);
/* Calls cb once per (cpu, pid, tid) victim with the steal ns charged to it ("victim" attribution:
 * the steal that accrued on a vCPU while that thread was the one running there; pid/tid 0 = idle).
 * Victims come in (cpu, pid, tid) order; ns is never 0. Per CPU, the charges add up exactly
 * to the steal delta between that CPU's first and last STEAL record (a counter that goes
 * backwards, e.g. after vCPU hot-unplug, restarts the baseline). 0 or -errno (-ENOMEM). */
int vp_steal_acct__finish(struct vp_steal_acct *a,
			  void (*cb)(void *ctx, uint32_t cpu, uint32_t pid, uint32_t tid, uint64_t ns),
			  void *ctx);

#endif
