/* Pure arithmetic of the counters library (see counters_math.h). */
#include "hv-glue/counters_math.h"

int vp_pc__compute(const struct vp_pc_fields *f, uint64_t pmc, uint64_t tsc, struct vp_count_snap *out)
{
	if (!f->cap_user_rdpmc || !f->index || !f->cap_user_time || f->pmc_width == 0 || f->pmc_width > 64 ||
	    f->time_shift >= 64)
		return 0;
	/* Sign-extend the counter's width: the kernel programs it with a negative start
	 * so that offset may be "negative" too. Shifts on the unsigned value, then an
	 * arithmetic right shift of the signed one. */
	unsigned shift = 64u - f->pmc_width;
	int64_t v = (int64_t)(pmc << shift) >> shift;
	uint64_t cyc = tsc;

	if (f->cap_user_time_short)
		cyc = f->time_cycles + ((cyc - f->time_cycles) & f->time_mask);
	/* ns = cyc * mult >> shift, split so that the product cannot overflow. */
	uint64_t quot = cyc >> f->time_shift;
	uint64_t rem = cyc & (((uint64_t)1 << f->time_shift) - 1);
	uint64_t delta = f->time_offset + quot * f->time_mult + ((rem * f->time_mult) >> f->time_shift);

	out->count = f->offset + (uint64_t)v;
	out->enabled = f->time_enabled + delta;
	out->running = f->time_running + delta;   /* index != 0: on a counter right now */
	return 1;
}
