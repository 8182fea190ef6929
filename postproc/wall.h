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
#ifndef VIPROF_POSTPROC_WALL_H
#define VIPROF_POSTPROC_WALL_H

#include "postproc/profile.h"
#include "postproc/report.h"

/* The synthetic leaf frame of an off-CPU or steal sum of state VP_SCHED_* (a pure
 * function: the loader writes these names and the wall view reads them back). */
const char *vp_sched_state_frame(int state);

/* What a blocked Java thread waits for, from its frames (names leaf first, as the
 * report prints them), where they say more than the kernel's state: Thread.sleep ->
 * VP_SCHED_BLOCKED_SLEEP, LockSupport/Unsafe.park -> VP_SCHED_BLOCKED_PARK (detail: the
 * class of the first caller above the parking machinery, e.g. "LinkedBlockingQueue"),
 * Object.wait -> VP_SCHED_BLOCKED_OBJWAIT, a contended synchronized (ObjectMonitor::
 * enter) -> VP_SCHED_BLOCKED_LOCK (detail "monitor"), socket and file reads ->
 * VP_SCHED_BLOCKED_FD. The first Java frame that is none of these ends the search
 * (native code called from Java keeps the kernel's state). Other states (in_iowait,
 * uninterruptible, runnable, steal) are returned as they are. detail is "" when there
 * is none. A pure function. */
int vp_sched_java_state(int state, const char *const *frames, int n, char *detail, size_t len);

/* States the post-processor adds to the kernel's VP_SCHED_* (never on disk), for waits
 * that are the JVM's own business rather than the application's:
 *   VP_SCHED_IDLE          a JVM-internal thread waiting for work: "[idle: GC worker]",
 *                          "[idle: compiler]", "[idle: VM]", "[idle: launcher]" (detail);
 *   VP_SCHED_BLOCKED_JVM   an application thread held by HotSpot itself: "[blocked: jvm:
 *                          safepoint]", "[blocked: jvm: VM operation]", "[blocked: jvm]"
 *                          (a HotSpot Mutex or Monitor, not a Java monitor).
 * A futex is what every one of these sleeps on, so the kernel's state calls them all
 * "lock"; the label "[blocked: lock]" is left to Java monitors (detail "monitor") and to
 * native code's own locks. */
enum { VP_SCHED_IDLE = 64, VP_SCHED_BLOCKED_JVM };

/* The kind of a HotSpot-internal thread by its name (the agent's full name or the
 * kernel's first 15 characters): "GC worker", "compiler", "VM", or NULL for any other
 * (an application thread, or a thread of another runtime). A pure function. */
const char *vp_jvm_thread_kind(const char *thread);

/* The JVM's own waits, for a blocked state that vp_sched_java_state() left as the
 * kernel's (lock, sleep, other wait, io wait) with no detail: a thread whose name or
 * frames (leaf first) are HotSpot's internal ones (VMThread::run, WorkerThread::run,
 * CompileBroker::compiler_thread_loop, the launcher's JLI_Launch, ...) is VP_SCHED_IDLE
 * with its kind in detail; a thread held at a safepoint, by a VM operation or in a
 * HotSpot Mutex/Monitor (not ObjectMonitor) is VP_SCHED_BLOCKED_JVM. Any other state or
 * thread is returned as it is. A pure function. */
int vp_sched_jvm_state(int state, const char *thread, const char *const *frames, int n, char *detail, size_t len);

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
