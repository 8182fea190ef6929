/* Multiplexing made up for interval by interval: one rule for the counters library,
 * `viprof stat` and the weights of `viprof record`'s samples. */
#ifndef VIPROF_COMMON_COUNT_SCALE_H
#define VIPROF_COMMON_COUNT_SCALE_H

#include <stdint.h>

/* One reading of an event: its raw count and its enabled and running times (ns), as
 * read() returns them with TOTAL_TIME_ENABLED|TOTAL_TIME_RUNNING. */
struct vp_count_snap {
	uint64_t count, enabled, running;
};

/* The events between two readings of one event, scaled for multiplexing over that
 * interval alone: dcount * denabled / drunning (dcount when vp_counts__multiplexed says
 * it was not, 0 when it never ran). Scaling each interval by its own ratio, rather than taking
 * scale(to) - scale(from), keeps an earlier interval's ratio out of this one: an event
 * that was off its counter before from would otherwise have its whole past stretch
 * applied to this interval's count. A reading older than from (a counter going back)
 * gives 0. 128-bit intermediate: no overflow for any count and time. */
uint64_t vp_counts__scaled_delta(const struct vp_count_snap *from, const struct vp_count_snap *to);

/* Whether an interval's enabled time de and running time dr show multiplexing: running
 * more than 0.5% behind enabled. Below that the gap is the drift of counters read one
 * after another (per-CPU counters of one thread, a group's members read apart), and
 * scaling by it only ever adds events that did not happen. */
#define VP_COUNTS_MUX_TOLERANCE_PERMILLE 5
static inline int vp_counts__multiplexed(uint64_t de, uint64_t dr)
{
	return dr < de && (unsigned __int128)(de - dr) * 1000 > (unsigned __int128)de * VP_COUNTS_MUX_TOLERANCE_PERMILLE;
}

#endif
