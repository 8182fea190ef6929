/* Symbols of the hypervisor itself, for samples taken while Xen ran (VP_MODE_HYPERVISOR,
 * delivered to dom0 in Xen PMU mode "hv" or "all") or whose address lies in Xen's
 * virtual range. The source is Xen's unstripped ELF, xen-syms (shipped next to xen.gz
 * by most distributions' debug packages), given to report as --hv-syms. */
#ifndef VIPROF_POSTPROC_HVSYMS_H
#define VIPROF_POSTPROC_HVSYMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Xen's part of the x86-64 address space (the PV ABI reserves it for the hypervisor;
 * Xen's text starts at 0xffff82d040000000 in current releases). */
#define VP_XEN_VIRT_START 0xffff800000000000ull
#define VP_XEN_VIRT_END   0xffff880000000000ull

struct vp_hvsyms;   /* opaque */

/* Reads the function and object symbols of path (.symtab, else .dynsym). NULL with errno
 * set and a one-line message in err naming the file, the cause and the fix. */
struct vp_hvsyms *vp_hvsyms__open(const char *path, char *err, size_t len);
/* The symbol containing addr, and addr's offset into it in *off (may be NULL); NULL when
 * addr is in no symbol. The name lives as long as x. */
const char *vp_hvsyms__name(struct vp_hvsyms *x, uint64_t addr, uint64_t *off);
/* Number of symbols loaded. */
size_t vp_hvsyms__count(const struct vp_hvsyms *x);
/* True for addresses in Xen's range, whether or not symbols are loaded. */
bool vp_hvsyms__is_xen_addr(uint64_t addr);
void vp_hvsyms__close(struct vp_hvsyms *x);   /* accepts NULL */

#endif
