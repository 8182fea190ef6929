/* Where a thread's wall time went: running + runnable + blocked + steal = wall.
 *
 * The parts come from three events of a session recorded with --off-cpu:
 *   running   the on-CPU time event (cpu-clock, task-clock: the first time event that
 *             the switch tracer did not measure). Sampled, so its per-stack split is an
 *             estimate; when the session has the switch tracer's exact per-thread times,
 *             each thread's stacks are scaled so that they sum to its exact on-CPU time
 *             minus its steal (the guest clock, and so cpu-clock, runs on while the
 *             hypervisor has the vCPU, so steal is inside on-CPU time until removed);
 *   runnable  "off-cpu" stacks whose leaf is "[runnable: ...]" (waiting on a run queue);
 *   blocked   the other "off-cpu" stacks ("[blocked: sleep|park|wait|lock|io|io wait|...]");
 *   steal     "steal", measured per thread at its switches.
 * vp_wall__add_events() adds them as events "running", "runnable", "blocked" and "wall"
 * (nanoseconds), so every report format can draw or export the combined view;
 * report_wall_text() is the table. */
#ifndef VIPROF_REPORT_WALL_H
#define VIPROF_REPORT_WALL_H

#include "postproc/profile.h"
#include "postproc/sched_state.h"
#include "report/report.h"

enum vp_wall_part { VP_WALL_RUNNING, VP_WALL_RUNNABLE, VP_WALL_BLOCKED, VP_WALL_STEAL, VP_WALL__COUNT };
const char *vp_wall_part_name(int part);   /* "running", ... */

/* Adds the events running, runnable, blocked and wall; returns the index of "wall",
 * -ENOENT with a one-line reason in err when the profile has no off-CPU or on-CPU
 * time, or -ENOSPC when the profile has no room for four more events. */
int vp_wall__add_events(struct vp_profile *p, char *err, size_t errlen);

/* The table: per thread (by wall time), its parts, then its top stacks, grouped by
 * their user-space part (kernel frames and the state leaf dropped, so that a
 * function's running and waiting meet in one row). Calls vp_wall__add_events first
 * if needed. 0 or -errno. */
int report_wall_text(struct vp_profile *p, struct vp_out *o, const struct vp_report_opts *opts);

#endif
