/* The unwind-table builder (recorder/cfi.c): root derives rules from the .eh_frame and
 * .debug_frame of every file a recorded user process maps, files the user wrote, so a
 * crafted ELF must cost bounded time and memory and fail only itself. Each input is an
 * ELF file image, given to vp_cfi__build as a memfd (as the unwinder gives it a
 * map_files descriptor); a table built is then walked the way the unwinder and the BPF
 * upload read it. Seeds: small ELF files of gcc's, with .eh_frame (-O2, -O0 with frame
 * pointers) and with .debug_frame only, and crafted-regs, a find of this target's (its CFI
 * made libdw ask for 1.5 GB; scripts/fuzz.sh runs it under a 256 MB malloc limit). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "recorder/cfi.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	char err[256];

	if (fd < 0 && (fd = memfd_create("fuzz-cfi", MFD_CLOEXEC)) < 0)
		abort();
	if (ftruncate(fd, 0) || (size && pwrite(fd, data, size, 0) != (ssize_t)size))
		abort();
	struct vp_cfi *t = vp_cfi__build(fd, err, sizeof(err));
	if (!t)
		return 0;
	size_t n;
	const struct vpb_rule *r = vp_cfi__rules(t, &n);
	uint64_t base = vp_cfi__base(t);
	/* What upload() relies on: sorted pcs, known kinds. */
	for (size_t i = 0; i < n; i++) {
		if ((i && r[i].pc <= r[i - 1].pc) || r[i].kind > VPB_RULE_END)
			abort();
		if (base + r[i].pc >= base && vp_cfi__find(t, base + r[i].pc) != &r[i])
			abort();
	}
	uint64_t va;
	for (uint64_t off = 0; off < size + 4096; off += 4093)
		vp_cfi__vaddr_of_offset(t, off, &va);
	(void)vp_cfi__source(t);
	(void)vp_cfi__cut(t);
	vp_cfi__free(t);
	return 0;
}
