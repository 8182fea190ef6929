/* The arithmetic of the counters library as pure functions, so that it is tested on
 * machines whose PMU cannot run it (this project's VMs have none: no rdpmc path).
 * Internal to hv-glue and its tests. */
#ifndef VIPROF_HV_COUNTERS_MATH_H
#define VIPROF_HV_COUNTERS_MATH_H

#include <stdbool.h>
#include <stdint.h>

/* One reading of an event: its raw count and its enabled and running times (ns), as
 * read() returns them with TOTAL_TIME_ENABLED|TOTAL_TIME_RUNNING. */
struct vp_count_snap {
	uint64_t count, enabled, running;
};

/* The events between two readings of one event, scaled for multiplexing over that
 * interval alone: dcount * denabled / drunning (dcount when drunning >= denabled, 0 when
 * it never ran). Scaling each interval by its own ratio, rather than taking
 * scale(to) - scale(from), keeps an earlier interval's ratio out of this one: an event
 * that was off its counter before from would otherwise have its whole past stretch
 * applied to this interval's count. A reading older than from (a counter going back)
 * gives 0. 128-bit intermediate: no overflow for any count and time. */
uint64_t vp_counts__scaled_delta(const struct vp_count_snap *from, const struct vp_count_snap *to);

/* The fields of a perf_event_mmap_page that a user-mode read needs, copied under the
 * page's seqlock. */
struct vp_pc_fields {
	uint64_t offset;              /* pc->offset: added to the counter's value */
	uint64_t time_enabled, time_running;
	uint64_t time_offset, time_cycles, time_mask;
	uint32_t index;               /* pc->index: counter + 1, 0 = not on a counter */
	uint32_t time_mult;
	uint16_t pmc_width, time_shift;
	bool cap_user_rdpmc, cap_user_time, cap_user_time_short;
};

/* The self-monitoring computation of include/uapi/linux/perf_event.h: the count from
 * pmc (the raw rdpmc of counter index - 1, sign-extended from pmc_width bits and added
 * to offset) and the enabled and running times extended from the page's last update to
 * tsc (the TSC read in the same seqlock section; with cap_user_time_short the cycles are
 * relative to time_cycles, masked by time_mask). Returns 1 with *out filled, or 0 when
 * the page says the kernel must be asked instead (read()): no rdpmc, not on a counter,
 * no time conversion (without it the times, and so the interval's scaling, are stale),
 * or a counter width outside 1..64 (or a time_shift of 64 or more). */
int vp_pc__compute(const struct vp_pc_fields *f, uint64_t pmc, uint64_t tsc, struct vp_count_snap *out);

#endif
