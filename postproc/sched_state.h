/* What a thread's wait was, named: the synthetic leaf frames of off-CPU and steal sums
 * (VP_SCHED_* of common/session_format.h), what a blocked Java thread waits for, and the
 * JVM's own waits. Pure functions: the loader writes these names and the wall view
 * (report/wall.h) reads them back. */
#ifndef VIPROF_POSTPROC_SCHED_STATE_H
#define VIPROF_POSTPROC_SCHED_STATE_H

#include <stdbool.h>
#include <stddef.h>

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

/* A frame of the JDK's own classes ("java.", "jdk.", "sun.", ...), not the application's. */
bool vp_jdk_frame(const char *name);

#endif
