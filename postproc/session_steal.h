/* The steal accountant (the session loader's, postproc/session.c): the hypervisor's steal
 * from STEAL and SWITCH records (postproc/steal.h attributes it to the threads that were
 * on each vCPU), the switch tracer's per-vCPU sums (SCHED_CPU), and whether a steal
 * clock ran at all; after the samples, the steal charged to its victims in the profile. */
#ifndef VIPROF_SESSION_STEAL_H
#define VIPROF_SESSION_STEAL_H

#include <stdbool.h>
#include <stdint.h>

#include "common/session_format.h"
#include "postproc/profile.h"
#include "postproc/session_timeline.h"
#include "postproc/session_weights.h"

struct vp_steal_ledger;

/* NULL with errno set. */
struct vp_steal_ledger *vp_steal_ledger__new(void);
void vp_steal_ledger__free(struct vp_steal_ledger *sl);   /* accepts NULL */

/* The first pass. The session has the switch tracer's exact steal per thread (event
 * "steal"): the proportional split is not needed. */
void vp_steal_ledger__exact(struct vp_steal_ledger *sl);
/* A STEAL record at t; in_window: inside --time (only those bracket the steal counted).
 * 0 or -ENOMEM. */
int vp_steal_ledger__steal(struct vp_steal_ledger *sl, uint64_t t, const struct vp_steal *st, bool in_window);
void vp_steal_ledger__switch(struct vp_steal_ledger *sl, uint64_t t, const struct vp_switch *sw);
void vp_steal_ledger__sched_cpu(struct vp_steal_ledger *sl, const struct vp_sched_cpu *c);

/* After the samples: whether a steal clock ran (meta steal.clock, steal.note, and the
 * switch tracer's sched_steal.* sums), then the steal charged to its victims (meta
 * steal.cpuN and steal.total, and stacks of event "steal": the victims --pid, --tid,
 * --comm and --container select in tl, counted in w's time-event samples). 0 or -errno. */
void vp_steal_ledger__clock(struct vp_steal_ledger *sl, struct vp_profile *p);
int vp_steal_ledger__add(struct vp_steal_ledger *sl, struct vp_timeline *tl, const struct vp_weights *w,
			 struct vp_profile *p);

#endif
