/* Which hypervisor this kernel runs on, decided once, for every message that names it. */
#ifndef VIPROF_HV_IDENTITY_H
#define VIPROF_HV_IDENTITY_H

#include <stdbool.h>

/* Additive: what the kernel's own log says of the hypervisor under it, for a CPUID
 * read in user mode can see past it: a PVM guest's user-mode CPUID is not intercepted
 * and names the outer host (e.g. "bhyve"), or no hypervisor at all. From log (the kernel
 * ring buffer's text): kernel_hv gets the name in "Hypervisor detected: X" (or "" when
 * absent), *pvm_guest is set when the kernel booted as a PVM guest, in any of the forms
 * kernels have logged it ("Hypervisor detected: PVM", "pvm-pv: running under PVM (...)",
 * "Booting paravirtualized kernel on PVM", "pvm-pv: detected"), *pvm_absent when it
 * looked and found none ("pvm-pv: not detected"), *pvm_host when it runs PVM guests
 * itself ("kvm-pvm: loaded"). 0, or -EINVAL without a log. */
struct vp_probe_klog {
	char kernel_hv[32];
	bool pvm_guest, pvm_host;
	bool pvm_absent;   /* the kernel looked for PVM and did not find it ("pvm-pv: not detected") */
};
int vp_probe__parse_klog(const char *log, struct vp_probe_klog *out);

/* Additive: the one name of the hypervisor this kernel runs on, which every message uses
 * (the event errors, probe's rows and its "why", record's header, the session's
 * "hypervisor"). The kernel's own word comes first: it sees the hypervisor that runs it,
 * while CPUID read in user mode may name an outer host (a PVM guest's CPUID is not
 * intercepted). CPUID's name, when it differs, is kept as outer_host, a detail. */
struct vp_hv_identity {
	char name[32];        /* "PVM", "KVM", "Xen", ..., "none" (bare metal), "unknown" */
	char outer_host[32];  /* CPUID's name when the kernel runs on another hypervisor, or "" */
	char cpuid_name[32];  /* what CPUID (user mode) says: vp_hv__name's answer */
	char signature[16];   /* CPUID leaf 0x40000000's signature, or "" */
	bool hv_bit;          /* CPUID.1:ECX[31] */
	bool klog_read;       /* the kernel log was readable (root, or kernel.dmesg_restrict=0) */
	struct vp_probe_klog klog;
};
/* The decision alone, for tests: from CPUID's name and the parsed log (NULL: unreadable). */
void vp_hv_identity__decide(const char *cpuid_name, const struct vp_probe_klog *klog, struct vp_hv_identity *out);
/* This machine's identity, decided once per process (CPUID and the kernel log do not
 * change while it runs); never NULL. */
const struct vp_hv_identity *vp_hv_identity__get(void);

#endif
