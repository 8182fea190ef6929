/* The context-switch tracer (sched.bpf.c): exact steal per thread, and with --off-cpu
 * the time threads spend blocked or waiting on the run queue, with their stacks. It
 * runs beside whichever sampler backend records the on-CPU events and writes through
 * the same sink:
 *   - two EVENT records, "steal" (index first_event) and, with off_cpu, "off-cpu"
 *     (first_event + 1), flagged VP_EVENT_SCHED | VP_EVENT_TIME_UNITS;
 *   - SAMPLE records of those events whose period is the summed nanoseconds of one
 *     (thread, state, stack) in one drain period, with sched_state set;
 *   - at stop: THREAD_TIME per thread seen, SCHED_CPU per vCPU, and SCHED_STATS
 *     (switches seen, records and bytes written, intervals lost to a full hash).
 * Needs BPF (root, or CAP_BPF + CAP_PERFMON), BTF and the sched tracepoints. */
#ifndef VIPROF_SAMPLER_SCHED_TRACER_H
#define VIPROF_SAMPLER_SCHED_TRACER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "common/session_format.h"   /* struct vp_sched_stats */
#include "sampler-kernel/sampler.h"

struct vp_sched_config {
	enum sampler_target target;
	const pid_t *pids;           /* SAMPLER_TARGET_PIDS / LAUNCH */
	int nr_pids;
	bool off_cpu;                /* also charge off-CPU intervals (event "off-cpu") */
	bool filter_uid;             /* only tasks whose real, effective and saved uid are only_uid */
	/* No kernel stacks and no kernel address in any record: a recording whose events
	 * are all user-only (":u"; the service's for a user the kernel shows no kernel
	 * address to). The tracer's events are then flagged VP_EVENT_USER_ONLY. */
	bool user_only;
	uid_t only_uid;
	/* Charge nothing until vp_sched__window opens the window (the recorder, whose
	 * window is the sampler's); otherwise time is charged from the start. */
	bool windowed;
	uint32_t first_event;        /* session index of "steal"; "off-cpu" follows it */
	uint64_t drain_ns;           /* how often the kernel's sums are drained; 0 = 250 ms */
	struct vp_sink sink;
};


struct vp_sched;  /* opaque; used from the recorder's thread only */

/* Loads and attaches the programs, and emits the EVENT records. NULL with errno and a
 * one-line reason naming the cause and the fix in err. */
struct vp_sched *vp_sched__start(const struct vp_sched_config *cfg, char *err, size_t errlen);
/* Opens (start) or closes (end) the recording's sampling window, CLOCK_MONOTONIC ns; 0
 * leaves that edge as it is. The tracer charges time only inside the window, cutting
 * the intervals and runs that straddle its edges; until it opens, nothing is charged.
 * Open it when sampling begins, close it when sampling stops (before vp_sched__stop). */
void vp_sched__window(struct vp_sched *s, uint64_t start, uint64_t end);
/* Drains the kernel's sums when a drain period has passed since the last one (now is
 * CLOCK_MONOTONIC ns). Returns records emitted, or -errno from the sink. */
int vp_sched__poll(struct vp_sched *s, uint64_t now);
/* Emits the tracer's event records (steal, and off-cpu) again through its sink: a
 * recorder that rotated its session calls it once the sink writes the new session.
 * 0 or -errno from the sink. */
int vp_sched__emit_events(struct vp_sched *s);
/* Detaches, drains everything, emits the THREAD_TIME, SCHED_CPU and META records.
 * 0 or -errno. */
int vp_sched__stop(struct vp_sched *s);
void vp_sched__stats(const struct vp_sched *s, struct vp_sched_stats *out);
/* One of the BPF side's counters (VPS_CNT_*, sched.h) summed over CPUs; 0 when unknown.
 * Valid until vp_sched__free. */
uint64_t vp_sched__counter(struct vp_sched *s, uint32_t idx);
/* Call before the sampler starts with cfg. Unless -a: sets cfg->tracked_fd, so that the
 * bpf sampler follows the processes this tracer follows in the same map (valid until
 * vp_sched__free). With off_cpu, cfg->unwind and cfg->callchain: wraps
 * cfg->before_sampling so that, once the sampler has loaded its stack walker (after its
 * own callback ran), the tracer walks user stacks at switch-out with the same walker
 * and tables (walker.bpf.h) instead of frame pointers. */
void vp_sched__hook(struct vp_sched *s, struct sampler_config *cfg);
/* Why user stacks at switch-out follow frame pointers although vp_sched__hook asked
 * for the sampler's walker; NULL when the walker is used or was not asked for. */
const char *vp_sched__walker(const struct vp_sched *s);
void vp_sched__free(struct vp_sched *s);  /* accepts NULL */

#endif
