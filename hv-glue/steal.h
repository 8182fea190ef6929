/* Steal time: how long the hypervisor kept each vCPU from running while it had work. */
#ifndef VIPROF_HV_STEAL_H
#define VIPROF_HV_STEAL_H

#include <stdint.h>

/* Cumulative steal time per CPU in ns (from /proc/stat, USER_HZ converted); returns the number of CPUs filled or -errno.
 * steal_ns is indexed by the N of "cpuN": offline CPUs leave gaps that are set to 0, and
 * the return value is 1 + the highest N seen (at most max_cpus; CPUs beyond it are
 * ignored, so size the array with sysconf(_SC_NPROCESSORS_CONF)). A kernel whose
 * /proc/stat has no steal column reports 0 for every CPU. */
int vp_steal__read(uint64_t *steal_ns, int max_cpus);

/* The parser behind vp_steal__read (additive, for tests and for fixtures): text is a whole
 * /proc/stat, clk_tck the USER_HZ its values are in (sysconf(_SC_CLK_TCK)). Same result
 * convention; -EINVAL when text holds no cpuN line or clk_tck <= 0. */
int vp_steal__parse(const char *text, long clk_tck, uint64_t *steal_ns, int max_cpus);

#endif
