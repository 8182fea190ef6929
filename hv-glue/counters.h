/* Per-thread virtualized counters read in user mode: the Perfctr-xen "a-mode" idea on
 * top of Linux perf_events. Built into vp_hvglue and also as libviprof-counters.so,
 * which exports only the functions below.
 *
 * A counter set belongs to the thread that opened it (it counts that thread only,
 * wherever it runs). Its logical value follows Perfctr-xen:
 *     value = sum + (phys - start)   while started,
 *     value = sum                    while stopped,
 * where phys - start is the kernel's count over the period with multiplexing made up
 * for interval by interval: each read closes an interval, whose count is scaled by that
 * interval's own time_enabled/time_running, so an event that shared its counter before
 * start (or early in the period) does not stretch what it counted later. Time the vCPU
 * or the thread was descheduled is not counted at all for per-thread events. start and
 * stop are user-mode bookkeeping; the kernel events stay enabled from open to close.
 *
 * phys is read through the perf mmap page under its seqlock (pc->lock): with rdpmc when
 * the page says cap_user_rdpmc and the event sits on a hardware counter (index != 0),
 * else with read(). Software events (task-clock, page-faults, ...) always have index 0,
 * so on a VM without a PMU every read is a read() system call. rdpmc is only valid on
 * the opening thread: call vp_counters__read from that thread.
 *
 * Not async-signal-safe (read() may be interrupted; no locking between threads). */
#ifndef VIPROF_HV_COUNTERS_H
#define VIPROF_HV_COUNTERS_H

#include <stddef.h>
#include <stdint.h>

#if defined(VIPROF_COUNTERS_BUILD)
#define VP_COUNTERS_API __attribute__((visibility("default")))
#else
#define VP_COUNTERS_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

struct vp_counters;   /* opaque */

/* Opens the comma list of perf-style event names (as `viprof stat -e`, e.g.
 * "task-clock,page-faults,instructions:u") for the calling thread. NULL with errno set
 * and a one-line message in err naming the event, the cause and the fix. */
VP_COUNTERS_API struct vp_counters *vp_counters__open(const char *events, char *err, size_t errlen);
/* vp_counters__open with the events as one perf group, the first event leading: every
 * read (vp_counters__read, start, stop, and the values an overflow callback gets) takes
 * all counts with one read() at one instant, with one enabled/running pair, so that a
 * ratio of two of them (IPC, faults per ms) is of the same interval even when the PMU
 * multiplexes. Never rdpmc. Software events of any kind mix (task-clock, page-faults,
 * context-switches); hardware events must fit the PMU's counters together: a group that
 * does not fit is never scheduled and reads 0 with running 0. NULL with errno and a
 * message naming the event when the kernel refuses it in the group. */
VP_COUNTERS_API struct vp_counters *vp_counters__open_group(const char *events, char *err, size_t errlen);
/* Number of events and the name of event i, as parsed. */
VP_COUNTERS_API int vp_counters__count(const struct vp_counters *c);
VP_COUNTERS_API const char *vp_counters__name(const struct vp_counters *c, int i);
/* Begins a counting period: start = phys. -EALREADY when already started. */
VP_COUNTERS_API int vp_counters__start(struct vp_counters *c);
/* values[i] = the logical value of event i (count events, or ns for the clock events);
 * values needs vp_counters__count() entries. 0 or -errno. */
VP_COUNTERS_API int vp_counters__read(struct vp_counters *c, uint64_t *values);
/* Ends a counting period: sum += phys - start. -EINVAL when not started. */
VP_COUNTERS_API int vp_counters__stop(struct vp_counters *c);
/* The stolen share (Perfctr-xen's per-vCPU correction, measured by the guest kernel):
 * ns the hypervisor held the vCPU while this thread was running on it, over the
 * counting periods so far, like values. It is the difference of the thread's task-clock
 * and its scheduler runtime, held in each period to the steal /proc/stat saw accrue on
 * the whole VM (hv-glue/steal.h says why and how precise). -ENOTSUP, and
 * vp_counters__stolen_why says why, when no steal clock runs on this VM (/proc/stat's
 * steal 0 since boot: there is nothing to report, and the clocks' skew must not be
 * presented as steal), or this kernel cannot tell (no CONFIG_PARAVIRT_TIME_ACCOUNTING,
 * or task-clock refused). */
VP_COUNTERS_API int vp_counters__stolen(struct vp_counters *c, uint64_t *stolen_ns);
/* NULL when vp_counters__stolen measures; else one line saying why it does not. */
VP_COUNTERS_API const char *vp_counters__stolen_why(const struct vp_counters *c);
/* vp_counters__read with the clock events (task-clock, cpu-clock) replaced by the time
 * the thread itself ran over the counting periods: its scheduler runtime, which the
 * kernel keeps free of steal (CONFIG_PARAVIRT_TIME_ACCOUNTING), rather than the clock
 * minus an estimate of the stolen share. Counts of other events are not inflated by
 * steal and come back as read. A correction only ever lowers a clock. Where no steal
 * clock runs, every value comes back as read (vp_counters__stolen says why). -ENOTSUP
 * where a steal clock runs and the kernel leaves steal in runtimes. */
VP_COUNTERS_API int vp_counters__read_corrected(struct vp_counters *c, uint64_t *values);
/* Overflow callbacks (Perfctr-xen's i-mode, PAPI's overflow API): every period events
 * of event i counted by the calling thread, fn is called in that thread, from a signal
 * handler (a realtime signal, SIGRTMIN + 7, queued to the thread: each overflow gets
 * its own call; a thread never gets another thread's). values are the raw counts of all
 * the set's events at that moment (vp_counters__count() entries, since open, not
 * scaled). fn must be async-signal-safe. 0, -EINVAL, -EALREADY (already set for i),
 * -EBUSY (someone else handles that signal), -ENOSPC (256 in the process), or the
 * kernel's -errno. vp_counters__close stops them. */
typedef void (*vp_counters_overflow_fn)(struct vp_counters *c, int event, const uint64_t *values, void *ctx);
VP_COUNTERS_API int vp_counters__overflow(struct vp_counters *c, int i, uint64_t period, vp_counters_overflow_fn fn,
					  void *ctx);
/* Which path the last read of event i took: 1 rdpmc, 0 read(). -EINVAL for a bad i. */
VP_COUNTERS_API int vp_counters__used_rdpmc(const struct vp_counters *c, int i);
VP_COUNTERS_API void vp_counters__close(struct vp_counters *c);  /* accepts NULL */

#ifdef __cplusplus
}
#endif

#endif
