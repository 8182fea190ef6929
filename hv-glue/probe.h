/* What this machine or VM can sample, and why: hypervisor, PMU virtualization, a live
 * perf_event_open test of the common events, BPF availability, privileges, steal time. */
#ifndef VIPROF_HV_PROBE_H
#define VIPROF_HV_PROBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "hv-glue/identity.h"   /* vp_probe__parse_klog, vp_hv_identity__get */

struct vp_probe;  /* opaque */

struct vp_probe *vp_probe__run(void);       /* never NULL unless out of memory */
void vp_probe__free(struct vp_probe *p);    /* accepts NULL */

/* Calls cb for each key/value worth keeping in a session's metadata (hypervisor, pmu, kernel, ...). */
void vp_probe__foreach_meta(const struct vp_probe *p, void (*cb)(void *ctx, const char *key, const char *value), void *ctx);

/* Additive: the writers behind `viprof probe` (aligned key/value sections ending with a
 * "Recommendation:" paragraph, or one JSON object). 0 or -errno (from the stream). */
int vp_probe__write_text(const struct vp_probe *p, FILE *f);
int vp_probe__write_json(const struct vp_probe *p, FILE *f);
/* Additive: short accessors. hypervisor is "KVM", "Xen", "Hyper-V", ..., or "none". */
const char *vp_probe__hypervisor(const struct vp_probe *p);
bool vp_probe__hw_events(const struct vp_probe *p);   /* cycles can be sampled here */
const char *vp_probe__recommendation(const struct vp_probe *p);

/* Additive: the OEM id (6 characters, trailing blanks dropped) of the first readable
 * ACPI table in tables_dir (normally /sys/firmware/acpi/tables, root only): "FIRECK"
 * on Firecracker, whose CPUID signature is KVM's. 0 or -errno. */
int vp_probe__acpi_oem_at(const char *tables_dir, char *oem, size_t len);

#endif
