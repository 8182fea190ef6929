/* Checking a file's CFI before libdw interprets it (recorder/cfi.c builds the rules).
 *
 * libdw sizes a frame's register array by the highest register number a CFA program
 * names (16 bytes a register), copies the array at every DW_CFA_remember_state and keeps
 * one for each CIE it has used: a 1.3 KB file (fuzz-cfi) made it ask for 1.5 GB. And
 * libdw reads the bytes where they lie, in a file its owner may rewrite while root reads
 * it. So the builder copies each CFI section out of the file, checks the copy the way
 * libdw will read it (every entry its in-order search can reach, every CIE an FDE names,
 * every CFA instruction of both), and gives libdw an ELF image made of the checked copies
 * alone. A check that fails refuses the file's CFI as a whole: its table is that of a
 * file without CFI, and vp_cfi__refused says why. Real code stays far inside these
 * bounds: x86-64 DWARF numbers its registers below 67, compilers nest remember_state once
 * or twice, and libLLVM's .eh_frame (5 MB, 100k FDEs) is among the largest. */
#ifndef VIPROF_RECORDER_CFI_CHECK_H
#define VIPROF_RECORDER_CFI_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <gelf.h>
#include <elfutils/libdw.h>

#define VP_CFI_MAX_BYTES    (64u << 20)   /* one section */
#define VP_CFI_PAD          64            /* zeros after each copy: libdw reads a byte or two past an entry */

struct vp_cfi_sec {
	const uint8_t *src;     /* the section's bytes in the file's mapping (or libelf's inflated copy) */
	uint8_t *buf;           /* the copy in the image for libdw, VP_CFI_PAD zero bytes after it */
	size_t size;
	uint64_t vaddr;         /* where buf[0] is loaded: pc-relative values count from it */
	bool eh;                /* .eh_frame (else .debug_frame) */
};

/* Every entry of one copied section that libdw's in-order search reaches, and every CIE
 * an FDE names. Appends FDE start addresses to the starts array. */
bool vp_cfi_check__section(const struct vp_cfi_sec *s, const unsigned char *ident, uint64_t **starts, size_t *nstarts,
			   size_t *capstarts, char *why, size_t whylen);

/* One DW_EH_PE-encoded value at *pp (advanced past it), within [*pp, end). Only what
 * x86-64 toolchains emit for FDE addresses: absolute or pc-relative, fixed-size or
 * LEB128. field_vaddr is the address *pp has when loaded, for pc-relative values. */
bool vp_cfi_read_encoded(const uint8_t **pp, const uint8_t *end, uint8_t enc, uint64_t field_vaddr, uint64_t *val);

#endif
