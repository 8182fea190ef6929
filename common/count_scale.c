/* Per-interval multiplexing scale (see count_scale.h). */
#include "common/count_scale.h"

uint64_t vp_counts__scaled_delta(const struct vp_count_snap *from, const struct vp_count_snap *to)
{
	if (to->count < from->count || to->enabled < from->enabled || to->running < from->running)
		return 0;
	uint64_t dc = to->count - from->count, de = to->enabled - from->enabled, dr = to->running - from->running;

	if (dr == 0)
		return 0;       /* never on a counter in this interval: nothing is known */
	if (!vp_counts__multiplexed(de, dr))
		return dc;
	return (uint64_t)((unsigned __int128)dc * de / dr);
}
