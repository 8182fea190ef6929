/* What the BPF walker needs to step over compiled and interpreted Java frames without
 * frame pointers, read from a JVM from outside through hotspot/ (the VM structure
 * tables, the code heaps): the heaps and their segment maps, the interpreter's code
 * range, CodeBlob's frame size and code start, Method::_constMethod and the interpreter's
 * frame slots, into the walker's struct vpb_hotspot. Internal to recorder/. */
#ifndef VIPROF_RECORDER_HOTSPOT_H
#define VIPROF_RECORDER_HOTSPOT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <linux/types.h>
#include "hotspot/memory.h"
#include "hotspot/symbols.h"
#include "sampler-kernel/profile.h"

/* Fills hs from the VM structure tables through rd. 0, or -errno with a one-line reason
 * in err: -EAGAIN when the JVM has not finished initialising (no code heaps yet: try
 * again later), -ENOTSUP when a field the walker needs is missing from this JVM. */
int vp_hotspot__read(vp_mem_read_fn rd, void *ctx, const struct vp_hs_globals *syms,
		     struct vpb_hotspot *hs, char *err, size_t errlen);

/* For a live process: finds libjvm.so in /proc/pid/maps, resolves the symbols above
 * from its ELF .dynsym plus the load bias, and reads through process_vm_readv. -ENOENT
 * when the process has no libjvm.so mapped (not a HotSpot JVM); else as above. */
int vp_hotspot__read_pid(pid_t pid, struct vpb_hotspot *hs, char *err, size_t errlen);

/* How vp_hotspot__read_pid_via reads the target: process_vm_readv, falling back to
 * /proc/PID/mem where that is refused (AUTO, what vp_hotspot__read_pid does), or
 * /proc/PID/mem only (PROC_MEM: so tests can check that path gives the same layout). */
enum vp_hotspot_via { VP_HOTSPOT_VIA_AUTO, VP_HOTSPOT_VIA_PROC_MEM };
int vp_hotspot__read_pid_via(pid_t pid, enum vp_hotspot_via via, struct vpb_hotspot *hs, char *err,
			     size_t errlen);

/* Segment-map bytes the lookup below reads at most, so it steps back at most one time
 * fewer: the BPF walker's (sampler-kernel/walker.bpf.h asserts its MAX_SEG_HOPS equal). */
#define VP_HOTSPOT_MAX_HOPS VPB_MAX_SEG_HOPS

/* The code blob that contains pc, found like the BPF walker finds it (the code heap's
 * segment map, then the HeapBlock header): its address, frame size in words (0 for
 * blobs without a fixed frame, such as BufferBlobs), code begin and frame-complete pc.
 * 0, or -ENOENT when pc lies in no code heap or in a free block, -ELOOP when the
 * block start is VP_HOTSPOT_MAX_HOPS or more steps back, -EINVAL for a segment map
 * that steps out of its heap, -EFAULT when memory cannot be read. For tests, and as the
 * reference the BPF walker is checked against. */
struct vp_hotspot_blob {
	uint64_t blob, code_begin, frame_complete;
	uint32_t frame_size_words;
	uint32_t hops;           /* segment-map steps back to the block's first segment */
};
int vp_hotspot__find_blob(vp_mem_read_fn rd, void *ctx, const struct vpb_hotspot *hs,
			  uint64_t pc, struct vp_hotspot_blob *out);

#endif
