/* Compact unwind rules of one ELF file, derived from its .eh_frame (or .debug_frame)
 * with elfutils' libdw CFI API, in the form the BPF walker reads (struct vpb_rule of
 * sampler-kernel/profile.h): for each address range, where the canonical frame address
 * (CFA) is, and where the caller's frame pointer was saved. The return address is at
 * CFA - 8 on x86-64. Built once per file (the unwinder caches tables per build-id).
 * Internal to daemon/. */
#ifndef VIPROF_DAEMON_CFI_H
#define VIPROF_DAEMON_CFI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/types.h>
#include "sampler-kernel/profile.h"

struct vp_cfi;   /* opaque */

/* Reads the unwind information of the ELF file open on fd (the caller opened it; it is
 * not closed). Rules cover the file's executable PT_LOAD segments: every address that
 * no FDE covers gets a VPB_RULE_NONE rule, consecutive identical rules are merged, and
 * rule pcs are offsets from base (vp_cfi__base). NULL with errno set and a one-line
 * reason in err when the file is not a usable ELF file; a file without any unwind
 * information gives a table whose rules are all VPB_RULE_NONE (not an error). */
struct vp_cfi *vp_cfi__build(int fd, char *err, size_t errlen);

/* The rules, sorted by pc, and their count. */
const struct vpb_rule *vp_cfi__rules(const struct vp_cfi *t, size_t *n);

/* The ELF virtual address that rule pc 0 stands for. */
uint64_t vp_cfi__base(const struct vp_cfi *t);

/* The ELF virtual address of file offset off inside an executable PT_LOAD segment of
 * this file (p_vaddr + off - p_offset). 0 on success, -ENOENT when no segment holds it. */
int vp_cfi__vaddr_of_offset(const struct vp_cfi *t, uint64_t off, uint64_t *vaddr);

/* The rule for ELF virtual address vaddr (binary search; for tests and the user-space
 * replica of the walk). NULL when vaddr is outside every rule's range. */
const struct vpb_rule *vp_cfi__find(const struct vp_cfi *t, uint64_t vaddr);

/* Which sections the rules came from, for messages: "eh_frame", "debug_frame",
 * "eh_frame+debug_frame" (eh_frame wins where both cover an address), "none". */
const char *vp_cfi__source(const struct vp_cfi *t);

/* True when the reader's limits on rows (per FDE, and per file: libdw re-reads an FDE
 * from its start for every row) left part of the text VPB_RULE_NONE. Real libraries stay
 * far below them; a file that reaches them is crafted or damaged. For messages. */
bool vp_cfi__cut(const struct vp_cfi *t);

void vp_cfi__free(struct vp_cfi *t);   /* accepts NULL */

#endif
