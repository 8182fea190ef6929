/* HotSpot's code cache: the code heaps and their segment maps, the compiled methods
 * (nmethods) in them, the inlining recorded in each one's debug information (scopes,
 * UNSIGNED5-encoded) and the names of a Method*, found through the exported VM structure
 * tables (vmstructs.h) and read through memory readers (memory.h): in the agent (its own
 * process), in the recorder (another process) and in unit tests (a fake JVM's memory).
 * The agent learns what code was loaded and unloaded by walking the heaps on its own
 * thread instead of subscribing to CompiledMethodLoad: HotSpot builds that event's
 * inline and address-location records on its Service Thread for every compiled method,
 * which alone costs 2-3% of a start-up-heavy JVM's CPU (bench/agent-cost.sh).
 *
 * Nothing here runs in a callback or signal handler: it allocates. The heaps change
 * while they are read (compiler threads install code, the sweeper or a GC frees it): a
 * walk that meets something inconsistent says so (-EAGAIN) and the caller tries again
 * later; decoding copies an nmethod's data through the safe reader, which fails instead
 * of faulting, and checks it was not replaced meanwhile. */
#ifndef VIPROF_HOTSPOT_CODEHEAP_H
#define VIPROF_HOTSPOT_CODEHEAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hotspot/memory.h"
#include "hotspot/vmstructs.h"

/* One code heap as CodeCache::_heaps lists it: its memory's VirtualSpace bounds (low
 * boundary .. high is committed, .. high boundary reserved) and its segment map's. */
struct vp_hs_heap {
	uint64_t heap;           /* the CodeHeap */
	uint64_t low_boundary, low, high, high_boundary;
	uint64_t segmap_low_boundary, segmap_low, segmap_high;
	int32_t log2_seg;
};
#define VP_HS_MAX_HEAPS 16       /* CodeCache::_heaps has 1 to 3 (segmented) heaps */

/* Lists the code heaps into out[0..*n). 0; -EAGAIN when the JVM has none yet; -ENOTSUP
 * for a listing that makes no sense (more than VP_HS_MAX_HEAPS); -EFAULT when it cannot
 * be read; each with a one-line reason in err. */
int vp_hs__code_heaps(const struct vp_hs_vm *vm, const struct vp_hs_mem *m, struct vp_hs_heap *out, int *n,
		      char *err, size_t errlen);

/* The segment map: 0 starts a block, 0xff is a segment of no block, anything else is
 * how many segments to step back (perhaps to another step). From segment seg of the map
 * at segmap, steps back to the first segment of its block: 0 with *start and *hops;
 * -ENOENT for a free segment; -ELOOP when max_hops steps did not reach a start; -EINVAL
 * for a step out of the heap; -EFAULT when the map cannot be read. */
int vp_hs__segmap_start(const struct vp_hs_mem *m, uint64_t segmap, uint64_t seg, uint32_t max_hops,
			uint64_t *start, uint32_t *hops);

/* Offsets into HotSpot's types, from the VM structure tables; -1 where a field is
 * missing. Two layouts are known, chosen by the fields present (tested on JDK 17 and 25):
 * JDK 17's (CodeBlob::_code_begin, the debug
 * information inside the nmethod) and JDK 25's (offsets, immutable and mutable data
 * allocated beside the nmethod). */
struct vp_ch {
	const struct vp_hs_mem *heap;   /* reads the code heaps (the agent: plain loads) */
	const struct vp_hs_mem *safe;   /* reads what may be freed meanwhile: metadata, malloc'ed data */
	const struct vp_hs_vm *vm;      /* the VM structure tables it was read from (kept by the caller) */
	int jdk;                   /* feature version, from Abstract_VM_Version */
	int u5_base;               /* UNSIGNED5's excluded byte: 0 before JDK 20, then 1 */
	void *heaps;               /* &CodeCache::_heaps (GrowableArray<CodeHeap*>*) */
	int64_t ga_len, ga_data;
	int64_t heap_memory, heap_segmap, heap_log2, vs_low_boundary, vs_high;
	int64_t hb_length, hb_length_size, hb_used, hb_size;
	int64_t blob_size, blob_name, blob_kind, kind_nmethod;
	int64_t blob_code_begin, blob_code_end;          /* JDK 17 */
	int64_t blob_code_offset, blob_data_offset;      /* JDK 23+ */
	int64_t blob_mutable_data, blob_mutable_size, blob_reloc_size; /* JDK 25 */
	int64_t nm_method, nm_state, nm_compile_id, nm_level, nm_level_size;
	int64_t nm_entry_bci;      /* -1: not exported, OSR unknown */
	int64_t nm_pcs, nm_pcs_end, nm_metadata, nm_scopes_begin;       /* JDK 17 */
	int64_t nm_immutable, nm_immutable_size, nm_scopes_data;       /* JDK 25 */
	int64_t pc_offset, pc_scope, pc_size;
	int64_t m_const, cm_constants, cm_name, cm_sig, cp_holder, cp_size, k_name, sym_len, sym_body;
	bool split_data;           /* JDK 25: debug information outside the nmethod */
};

/* Reads the layout from vm (which must outlive c) through heap and safe (both the same
 * reader outside the agent). 0, or -ENOTSUP with the reason in why (not HotSpot, or a
 * layout this reader does not know: the agent keeps CompiledMethodLoad). */
int vp_ch__init(struct vp_ch *c, const struct vp_hs_vm *vm, const struct vp_hs_mem *heap,
		const struct vp_hs_mem *safe, char *why, size_t whylen);

/* One compiled method as a walk sees it. */
struct vp_ch_nm {
	uint64_t blob;            /* the nmethod itself (its CodeBlob header) */
	uint64_t code_start;      /* what CompiledMethodLoad calls code_addr */
	uint32_t code_size;
	int32_t compile_id;
	uint64_t method;          /* Method* */
	int8_t state;             /* nmethod::_state: -1 installing, 0 in use, 1 not used,
				   * 2 not entrant; JDK 17 also 3 zombie, 4 unloaded */
	int8_t level;             /* tier */
	bool osr;                 /* on-stack replacement: entered at a loop, not at the start */
};

/* The states whose code can run or be on a stack: in use, not used, not entrant. */
static inline bool vp_ch__alive(const struct vp_ch_nm *nm) { return nm->state >= 0 && nm->state <= 2; }

/* Calls fn for each nmethod in the code heaps, in address order. 0
 * after a complete walk; -EAGAIN when the heaps changed under the walk in a way it
 * could see (a block that does not start where the segment map says): the caller must
 * not conclude that a method it did not meet is gone. fn's nonzero return stops the
 * walk and is returned. */
typedef int (*vp_ch_visit_fn)(void *ctx, const struct vp_ch_nm *nm);
int vp_ch__walk(const struct vp_ch *c, vp_ch_visit_fn fn, void *ctx);

/* A code blob that is no nmethod (a stub, an adapter, a buffer of generated code) as a
 * walk sees it: its code and its CodeBlob name (cut to the buffer). */
struct vp_ch_blob {
	uint64_t blob, code_start;
	uint32_t code_size;
	char name[64];
};
typedef int (*vp_ch_blob_fn)(void *ctx, const struct vp_ch_blob *b);

/* vp_ch__walk that also calls blob_fn (unless NULL) for each used block holding another
 * code blob: some (the interpreter's native signature handlers) no JVMTI event reports.
 * With blob_fn, one caller at a time (it keeps the blobs' names read so far). */
int vp_ch__walk_all(const struct vp_ch *c, vp_ch_visit_fn fn, vp_ch_blob_fn blob_fn, void *ctx);

/* The nmethod whose code contains pc: 0, or -ENOENT. */
int vp_ch__find(const struct vp_ch *c, uint64_t pc, struct vp_ch_nm *out);

/* An nmethod's inlining, as CompiledMethodLoad's inline record gives it: per pc with
 * debug information, the scopes innermost first. */
struct vp_ch_frame {
	uint64_t method;          /* Method* (0: none recorded) */
	int32_t bci;
};
struct vp_ch_pc {
	uint32_t pc_offset;       /* from code_start */
	uint32_t depth;
	size_t first;             /* into frames */
};
struct vp_ch_scopes {
	struct vp_ch_pc *pcs;
	size_t npcs, cap_pcs;
	struct vp_ch_frame *frames;
	size_t nframes, cap_frames;
	uint8_t *buf, *buf2;      /* copies of the nmethod's memory */
	size_t cap_buf, cap_buf2;
};

/* Decodes nm's scopes into s (reused between calls). 0; -EAGAIN when nm was freed or
 * replaced while it was read; -EINVAL when its debug information does not parse;
 * -ENOMEM. */
int vp_ch__scopes(const struct vp_ch *c, const struct vp_ch_nm *nm, struct vp_ch_scopes *s);
void vp_ch__scopes_free(struct vp_ch_scopes *s);

/* The JVM names of Method* m, read from its metadata (for methods that have no
 * jmethodID the agent knows, such as method handle intrinsics): the class signature
 * ("Ljava/lang/Object;"), the name and the signature, each NUL-terminated and cut to
 * its buffer. 0, or -EFAULT when the metadata cannot be read or looks wrong. */
int vp_ch__method_names(const struct vp_ch *c, uint64_t m, char *klass, size_t kl, char *name, size_t nl, char *sig,
			size_t sl);

/* HotSpot's UNSIGNED5 (CompressedReadStream::read_int), as scopes store numbers: one
 * number from *p (advanced past it) before end. base is the excluded byte value: 0
 * before JDK 20, 1 since (every byte stored plus one so that none is zero). 0, or
 * -EINVAL when the number runs past end. */
int vp_hs__unsigned5(const uint8_t **p, const uint8_t *end, int base, uint32_t *out);

#endif
