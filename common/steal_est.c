/* The steal estimate from late timer samples (see steal_est.h). */
#include "common/steal_est.h"

uint64_t vp_steal_est__ns(uint64_t late_ns, uint64_t period_ns, uint64_t threshold_ns)
{
	if (!period_ns || late_ns < threshold_ns || !late_ns)
		return 0;
	uint64_t points = late_ns / period_ns + 1;
	if (points > UINT64_MAX / period_ns)
		return UINT64_MAX;
	return points * period_ns;
}
