/* The steal-clock decision and its wording (see steal_clock.h). */
#include "common/steal_clock.h"

#include <stdio.h>

bool vp_steal_clock__ran(uint64_t proc_stat_since_boot_ns, uint64_t rq_clock_ns)
{
	return proc_stat_since_boot_ns > 0 || rq_clock_ns > 0;
}

void vp_steal_clock__why(char *buf, size_t len)
{
	if (!buf || !len)
		return;
	snprintf(buf, len, VP_STEAL_NOT_MEASURED ": /proc/stat's steal has stayed 0 on every vCPU since boot, as under a "
		 "hypervisor that exports no steal clock (a PVM or nested guest), so the time the host took from this VM "
		 "is unknown, not 0");
}
