/* Whether a steal clock ran, and the words every view uses when none did (issue 34 item 2).
 * One pure decision from facts the caller gathered (live from /proc/stat, or from a
 * session's steal snapshots and switch tracer), so that probe, record, stat and every
 * report view agree and tests can inject the facts. */
#ifndef VIPROF_COMMON_STEAL_CLOCK_H
#define VIPROF_COMMON_STEAL_CLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What a view prints for measured steal where no steal clock ran, never "0". */
#define VP_STEAL_NOT_MEASURED "steal: not measured (no steal clock)"

/* True when a steal clock ran: /proc/stat accounted steal on some vCPU since boot
 * (proc_stat_since_boot_ns, the sum over vCPUs of the cumulative values), or the run
 * queues' steal clock (rq->prev_steal_time, as the switch tracer sees it) advanced
 * (rq_clock_ns, 0 when not traced). A hypervisor that exports no steal clock (a PVM or
 * nested guest, some clouds) leaves both at 0 while it still takes time: that time is
 * unknown, not 0. A clock that runs but never preempted this VM looks the same, and
 * has nothing to report either. */
bool vp_steal_clock__ran(uint64_t proc_stat_since_boot_ns, uint64_t rq_clock_ns);

/* VP_STEAL_NOT_MEASURED followed by the facts behind it, one line for the user. */
void vp_steal_clock__why(char *buf, size_t len);

#endif
