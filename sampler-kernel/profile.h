/* The one header shared by profile.bpf.c and the bpf backend (bpf_backend.c): plain
 * __u32/__u64 structs and constants only, so that both clang -target bpf (through
 * vmlinux.h) and the host compiler (through linux/types.h) read the same layout. */
#ifndef VIPROF_SAMPLER_PROFILE_H
#define VIPROF_SAMPLER_PROFILE_H

/* Stack depths the BPF side stores. The kernel side is short in practice. A user stack
 * taken by frame pointers (bpf_get_stack: --stack-walk fp, and a process whose tables
 * are not loaded yet) gets perf's default depth (perf_event_max_stack = 127); one walked
 * with the tables (walker.bpf.h) goes as deep as async-profiler's default, 2048 frames,
 * every interpreted frame among them named. */
#define VPB_MAX_KSTACK 64
#define VPB_MAX_USTACK 127
#define VPB_MAX_WALK   2048

/* Values of the target_mode rodata global. */
#define VPB_TARGET_ALL     0
#define VPB_TARGET_TRACKED 1   /* only tgids present in the tracked map */

#define VPB_MAX_TRACKED 65536

/* Record kinds in the ring buffer. */
#define VPB_KIND_SAMPLE 1
#define VPB_KIND_SWITCH 2
#define VPB_KIND_TAIL   3
#define VPB_KIND_WALKED 4   /* a sample with a walked user stack, packed (struct vpb_sample) */

/* Sample flags (the same bits as VP_SAMPLE_* in common/session_format.h; bpf_backend.c
 * checks it). */
#define VPB_F_KERNEL_ERROR 0x2
#define VPB_F_USER_ERROR   0x4

/* Modes (the same values as enum vp_mode; bpf_backend.c checks it). */
#define VPB_MODE_KERNEL 1
#define VPB_MODE_USER   2

/* Indexes into the per-CPU lost array. */
#define VPB_LOST_RINGBUF 0     /* bpf_ringbuf_reserve failed: the consumer fell behind */
#define VPB_LOST_STACK   1     /* a stack that should exist could not be read */
#define VPB_LOST_NR      2

/* Indexes into the walker's rule cache counts (walker.bpf.h, VIPROF_DEBUG_RCACHE). */
#define VPB_RC_HIT   0     /* a caller pc the cache held, compared with the searches' rule */
#define VPB_RC_WRONG 1     /* of those, the cache's rule differed */
#define VPB_RC_FILL  2     /* a caller pc the cache did not hold */
#define VPB_RC_SEG   3     /* a compiled frame's blob found with the segment-map window, compared */
#define VPB_RC_SEG_WRONG 4 /* of those, the byte-per-hop search found another answer */
#define VPB_RC_NR    5
/* Entries of the walker's rule cache per CPU (WALK_RCACHE, a power of 2): the cache is one
 * array of VPB_RCACHE times the possible CPUs (bpf_backend.c sizes it). */
#define VPB_RCACHE   4096

/* ---- The stack walker's tables (filled by recorder/unwinder.c, read by the BPF walker).
 *
 * For every tracked process, unwind_procs[tgid] holds its executable mappings sorted by
 * start, and, for a HotSpot JVM, where its code cache, interpreter and code-blob fields
 * are. A native mapping points at one unwind table (one per ELF file, shared by every
 * process that maps it): rules sorted by address, each valid from its pc up to the next
 * rule's pc, and a page index that narrows the binary search to one page's rules. */
#define VPB_MAX_PROCS   8192
#define VPB_MAX_MAPS    384     /* executable mappings per process the walker can see */
#define VPB_MAX_TABLES  4096
#define VPB_MAX_RULES   (1u << 22)   /* resized by user space before load */
#define VPB_MAX_PAGES   (1u << 20)
#define VPB_PAGE_SHIFT  12
#define VPB_MAX_HEAPS   4
#define VPB_MAX_SEG_HOPS 16     /* code-heap segment-map steps back the walker takes at most */
#define VPB_BLOB_HDR    64      /* bytes of a CodeBlob header the walker reads at once */
#define VPB_NO_TABLE    0xffffffffu

/* vpb_rule.kind: how to find the canonical frame address (CFA) at this pc. The return
 * address is always at CFA - 8 (x86-64 ABI). */
#define VPB_RULE_NONE   0   /* no unwind information covers this pc: the walk ends */
#define VPB_RULE_SP     1   /* CFA = SP + cfa_off * 8 */
#define VPB_RULE_FP     2   /* CFA = FP + cfa_off * 8 */
#define VPB_RULE_PLT    3   /* PLT stubs: CFA = SP + 8, + 8 more when (pc & 15) >= cfa_off */
#define VPB_RULE_END    4   /* the outermost frame (return address undefined): root reached */
#define VPB_FP_SAME     0   /* vpb_rule.fp_off: the caller's FP is still in the FP register */

/* 8 bytes, so that the array's elements are packed in its shared mapping (the kernel
 * rounds array elements up to 8 bytes). Offsets are in 8-byte words: x86-64 code keeps
 * its stack 8-byte aligned; a row that is not is given VPB_RULE_NONE. */
struct vpb_rule {
	__u32 pc;              /* offset from the table's base */
	__s16 cfa_off;         /* words, or the PLT threshold in bytes */
	__s8 fp_off;           /* words from the CFA where the caller's FP is saved, or VPB_FP_SAME */
	__u8 kind;             /* VPB_RULE_* */
};

struct vpb_table {
	__u32 rule_first, nr_rules;  /* in unwind_rules */
	__u32 page_first, nr_pages;  /* in unwind_pages (__u64 each): nr_pages + 1 entries */
};

/* vpb_mapping.kind */
#define VPB_MAP_NATIVE  0      /* unwind with table (or frame pointers when it has none) */
#define VPB_MAP_ANON    1      /* executable memory without a file (JIT code of other runtimes) */

struct vpb_mapping {
	__u64 start, end;
	__u64 bias;            /* table offset of pc = pc - bias */
	__u32 table;           /* index into unwind_tables, or VPB_NO_TABLE */
	__u32 kind;            /* VPB_MAP_* */
};

/* Where HotSpot keeps what the walker needs, read from its exported VM structure tables
 * (gHotSpotVMStructs) by recorder/hotspot.c. All offsets in bytes. */
struct vpb_codeheap {
	__u64 lo, hi;          /* the heap's committed code memory */
	__u64 segmap;          /* its segment map: one byte per segment */
	__u32 log2_seg;
	__u32 pad;
};

struct vpb_hotspot {
	__u32 nr_heaps;        /* 0: not a JVM (or not understood yet) */
	__u32 heapblock_size;  /* sizeof(HeapBlock): the CodeBlob follows it */
	struct vpb_codeheap heaps[VPB_MAX_HEAPS];
	__u64 interp_lo, interp_hi;    /* the template interpreter's code */
	__u16 blob_frame_size;         /* CodeBlob::_frame_size (int, words) */
	__u16 blob_frame_complete;     /* CodeBlob::_frame_complete_offset (int, bytes from code begin) */
	__u16 blob_code;               /* CodeBlob::_code_begin (pointer) or _code_offset (int) */
	__u16 blob_code_is_offset;     /* 1: blob_code is an int offset from the blob */
	__u16 method_const;            /* Method::_constMethod */
	__u16 constmethod_size;        /* sizeof(ConstMethod): bytecodes follow it */
	__s16 slot_method;             /* interpreter frame slots, in words from FP */
	__s16 slot_bcp;
	__s16 slot_sender_sp;
	__u16 frame_complete_16;       /* 1: _frame_complete_offset is 16 bits wide (JDK 23+) */
	__u16 pad[2];
};

struct vpb_proc {
	__u32 nr_maps;
	__u32 gen;             /* changes at every write of the entry (recorder/unwinder.c): a walk
				* made with an older one may not be reused (sched.bpf.c) */
	struct vpb_hotspot hs;
	struct vpb_mapping maps[VPB_MAX_MAPS];
};

/* How a user stack walk ended (the same values as VP_WALK_* in session_format.h). */
#define VPB_WALK_NONE       0  /* no walk (no -g, kernel thread) */
#define VPB_WALK_ROOT       1  /* reached the outermost frame */
#define VPB_WALK_NO_RULE    2  /* a pc with no unwind rule and no usable frame pointer */
#define VPB_WALK_UNREADABLE 3  /* stack memory could not be read */
#define VPB_WALK_DEPTH      4  /* the walk's depth limit (VPB_MAX_WALK frames for samples) */
#define VPB_WALK_BAD_FRAME  5  /* the unwound frame made no sense (stack went down, pc 0) */
#define VPB_WALK_NO_PROC    6  /* the process's tables were not loaded yet: frame pointers only */

/* One interpreted Java frame of a user stack: its Method* and bytecode index. A walked
 * sample names every interpreted frame of its VPB_MAX_WALK frames. */
#define VPB_MAX_JFRAMES VPB_MAX_WALK
struct vpb_jframe {
	__u64 method;          /* HotSpot Method* */
	__u16 frame;           /* index into ustack */
	__u16 pad;
	__s32 bci;             /* -1 when unknown */
};

struct vpb_sample {
	__u32 kind;            /* VPB_KIND_SAMPLE */
	__u32 cpu;
	__u64 time;            /* bpf_ktime_get_ns: CLOCK_MONOTONIC */
	__u32 pid, tid;
	__u64 ip;
	__u64 period;
	__u32 event;
	__u32 mode;            /* VPB_MODE_* */
	__u32 flags;           /* VPB_F_* */
	__s32 kstack_bytes;    /* bpf_get_stack result: bytes stored, or -errno */
	__s32 ustack_bytes;
	__u16 walk_end;        /* VPB_WALK_* */
	__u16 nr_jframes;
	/* With est_timer (a clock event's hrtimer): how late the timer fired, now minus
	 * the grid point it served (common/steal_est.h); 0 otherwise. */
	__u64 late_ns;
	/* Present only when the program was loaded with callchain = true; the ring
	 * buffer entry is then sizeof(struct vpb_sample), else VPB_SAMPLE_HDR.
	 *
	 * A VPB_KIND_WALKED entry (unwind = true) is packed instead, sized by what was
	 * walked: the VPB_SAMPLE_HDR bytes above, then kstack_bytes of kernel frames,
	 * ustack_bytes of user frames (at most VPB_MAX_WALK) and nr_jframes struct
	 * vpb_jframe; a stack that could not be read (bytes < 0) takes no room. */
	__u64 kstack[VPB_MAX_KSTACK];
	__u64 ustack[VPB_MAX_USTACK];
};
#define VPB_SAMPLE_HDR (sizeof(struct vpb_sample) - (VPB_MAX_KSTACK + VPB_MAX_USTACK) * sizeof(__u64))

/* A thread exited, or exec'd (VPB_TAIL_EXEC): its count of an exactly weighed event
 * since its last sample, which belongs to the program it ran until now. */
#define VPB_TAIL_EXEC 1
struct vpb_tail {
	__u32 kind;            /* VPB_KIND_TAIL */
	__u32 cpu;
	__u64 time;
	__u32 pid, tid;
	__u32 event, flags;    /* VPB_TAIL_* */
	__u64 count;
};

/* Key of the per-thread perf event map (thread_ev in profile.bpf.c). */
struct vpb_thread_key {
	__u32 tid;
	__u32 event;
};

struct vpb_switch {
	__u32 kind;            /* VPB_KIND_SWITCH */
	__u32 cpu;
	__u64 time;
	__u32 prev_pid, prev_tid;
	__u32 next_pid, next_tid;
};

#endif
