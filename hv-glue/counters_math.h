/* The rdpmc read path's arithmetic as a pure function, so that it is tested on
 * machines whose PMU cannot run it (this project's VMs have none: no rdpmc path).
 * Internal to hv-glue and its tests. */
#ifndef VIPROF_HV_COUNTERS_MATH_H
#define VIPROF_HV_COUNTERS_MATH_H

#include <stdbool.h>
#include <stdint.h>

#include "common/count_scale.h"

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
