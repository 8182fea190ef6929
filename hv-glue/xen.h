/* Xen's PMU mode, as dom0 sees and sets it through the xen sysfs driver:
 *   off   no vPMU for anyone
 *   self  each domain profiles itself (guest samples only)
 *   hv    dom0 also receives samples taken while Xen itself ran (VP_MODE_HYPERVISOR)
 *   all   dom0 profiles every domain and Xen (system-wide, Xenoprof/Metis style)
 * Setting it needs root in dom0 and a Xen booted with vpmu enabled. */
#ifndef VIPROF_HV_XEN_H
#define VIPROF_HV_XEN_H

#include <stddef.h>

#define VP_XEN_PMU_MODE_PATH "/sys/hypervisor/pmu/pmu_mode"

/* Reads the current mode ("off", "self", "hv", "all", or what Xen printed) into mode.
 * 0 or -errno with a one-line message in err. */
int vp_xen__get_pmu_mode(char *mode, size_t len, char *err, size_t errlen);
/* Sets the mode (one of the four names) and reads it back to check that Xen took it.
 * 0 or -errno with a one-line message: -EINVAL for an unknown name, -ENOENT when this
 * is not a Xen dom0, -EACCES/-EPERM without root, -EIO when Xen kept another mode.
 * This is what `viprof record --xen-pmu-mode MODE` calls. */
int vp_xen__set_pmu_mode(const char *mode, char *err, size_t errlen);

/* Sets the mode for a recording and restores the one it replaces when the process
 * exits (atexit) or when vp_xen__restore_pmu_mode is called first, so that dom0 is
 * left as it was found, after an error too. Errors as vp_xen__set_pmu_mode. */
int vp_xen__push_pmu_mode(const char *mode, char *err, size_t errlen);
int vp_xen__push_pmu_mode_at(const char *path, const char *mode, char *err, size_t errlen);
/* Puts back the mode saved by vp_xen__push_pmu_mode, once; a no-op without one, and in
 * any other process (a forked child). Only open/write/close: a signal handler that is
 * about to _exit may call it. Returns 0 or -errno. */
int vp_xen__restore_pmu_mode(void);

/* The same on another file (tests, or a sysfs mounted elsewhere). */
int vp_xen__get_pmu_mode_at(const char *path, char *mode, size_t len, char *err, size_t errlen);
int vp_xen__set_pmu_mode_at(const char *path, const char *mode, char *err, size_t errlen);
/* The one-line message for errno e from reading or setting ("read", "set") the PMU mode
 * at path: the cause and the fix (EBUSY: a guest uses its vPMU; EOPNOTSUPP: a PVH dom0;
 * EINVAL: no vPMU, boot Xen with vpmu=1). For tests; the functions above use it. */
void vp_xen__explain(int e, const char *path, const char *what, char *err, size_t errlen);

#endif
