/* The code-map format: what the JVM agent writes and what maps/ reads, one file per JVM
 * at <dir>/<pid>/codemap.vpm. The records travel in the common/chunkfile.h container of
 * kind VP_KIND_CODEMAP, so a crash loses at most the last (torn) chunk; the agent flushes
 * at every epoch end and about once a second. The prose spec is docs/codemap-format.md.
 *
 * Every record is { u32 type; u32 size; u64 time; body } (struct vp_record); time is the
 * CLOCK_MONOTONIC ns at which the JVM reported the event. Bodies are a fixed struct
 * followed by the variable bytes its length fields announce, in the order listed; strings
 * are not NUL-terminated. A reader checks the lengths against the body and skips unknown
 * record types. The body is padded to 8 bytes, so a reader never relies on the size alone. */
#ifndef VIPROF_CODEMAP_FORMAT_H
#define VIPROF_CODEMAP_FORMAT_H

#include <stdint.h>

#define VP_CODEMAP_FORMAT_VERSION 1
#define VP_CODEMAP_FILE "codemap.vpm"
#define VP_AGENT_VERSION 4     /* 2: METHOD_LOAD2 and INLINE2 instead of METHOD_LOAD and INLINE;
				* 3: METHOD_LOAD2's flags (OSR); 4: VTHREAD_MOUNT/UNMOUNT */

enum vp_cm_type {
	VP_CM_META         = 1,
	VP_CM_EPOCH_BEGIN  = 2,
	VP_CM_METHOD_LOAD  = 3,
	VP_CM_METHOD_UNLOAD = 4,
	VP_CM_INLINE       = 5,
	VP_CM_METHOD_NAME  = 6,
	VP_CM_CODE_BLOB    = 7,
	VP_CM_EPOCH_END    = 8,
	VP_CM_METHOD_PTR   = 9,
	VP_CM_INLINE2      = 10, /* INLINE, compact: delta-encoded pcs, method table */
	VP_CM_METHOD_LOAD2 = 11, /* METHOD_LOAD without strings: named by METHOD_NAME */
	VP_CM_METHOD_NAMES = 12, /* METHOD_NAME for many methods of one class, compact */
	VP_CM_THREAD_NAME  = 13, /* a Java thread's full name by tid */
	VP_CM_ALLOC_SAMPLE = 14, /* a sampled allocation (record -e alloc), agent version 3 on */
	VP_CM_LOCK_SAMPLE  = 15, /* a contended lock's wait (record -e lock), agent version 3 on */
	VP_CM_VTHREAD_MOUNT   = 16, /* a virtual thread mounted on a carrier (agent version 4 on) */
	VP_CM_VTHREAD_UNMOUNT = 17, /* ... and about to leave it (agent version 4 on) */
	/* Numbered apart from the sequence above so that types added meanwhile do not collide. */
	VP_CM_GC           = 40, /* the garbage collection that began a VP_EPOCH_GC epoch */
};

#define VP_CM_META_FRAME_POINTERS 0x1u /* the JVM ran with -XX:+PreserveFramePointer */
#define VP_CM_META_LATE_ATTACH    0x2u /* loaded with Agent_OnAttach */
#define VP_CM_META_CODE_WALK      0x4u /* code loads found by walking the code heaps: a load's
					* time is the earliest it can have run (docs/codemap-format.md) */

/* VP_CM_META: once, first. Followed by vm_len bytes of "java.vm.name java.vm.version". */
struct vp_cm_meta {
	uint32_t pid;
	uint32_t flags;          /* VP_CM_META_* */
	uint32_t agent_version;  /* VP_AGENT_VERSION */
	uint16_t vm_len;
	uint16_t reserved;
};

enum vp_cm_epoch_reason {
	VP_EPOCH_START  = 0, /* agent loaded with the JVM */
	VP_EPOCH_GC     = 1, /* after GarbageCollectionFinish */
	VP_EPOCH_REUSE  = 2, /* a load overlapped code already placed in this epoch */
	VP_EPOCH_ATTACH = 3, /* agent attached late; live code is replayed */
	VP_EPOCH_IMPORT = 4, /* not written by the agent: imported perf map / jitdump */
};

/* VP_CM_EPOCH_BEGIN: epochs are numbered from 0 and contiguous; within one epoch an
 * address names at most one method. */
struct vp_cm_epoch_begin {
	uint32_t epoch;
	uint32_t reason;         /* enum vp_cm_epoch_reason */
};

/* What a garbage collection was, from the JVM's collection counters: a young (or G1
 * mixed) collection counts one collection, a full one also one full collection, and a
 * pause of a concurrent cycle (G1 Remark and Cleanup, ZGC and Shenandoah pauses)
 * neither. JVMTI itself says only that a collection finished. */
enum vp_cm_gc_kind {
	VP_GC_UNKNOWN    = 0, /* the counters could not be read (a JVM without them) */
	VP_GC_YOUNG      = 1,
	VP_GC_FULL       = 2,
	VP_GC_CONCURRENT = 3,
};

/* VP_CM_GC: right after the EPOCH_BEGIN (reason VP_EPOCH_GC) it explains, at the same
 * time: the GC that ended epoch - 1 and began epoch. Followed by name_len bytes of the
 * collector's name ("G1", "Parallel", "Serial", "ZGC", "Shenandoah"; may be empty).
 * Optional: maps written before it (or by other writers) have epochs without one. */
struct vp_cm_gc {
	uint32_t epoch;          /* the epoch it began */
	uint32_t gc_id;          /* the JVM's count of collections after it (CollectedHeap::
				  * _total_collections), 0 when unknown */
	uint32_t full_gcs;       /* its count of full collections after it */
	uint32_t gcs;            /* GCs that finished in the epoch it ended, this one included
				  * (GCs while no code changed begin no epoch) */
	uint8_t kind;            /* enum vp_cm_gc_kind */
	uint8_t reserved;
	uint16_t name_len;
};

/* VP_CM_EPOCH_END: written before the next EPOCH_BEGIN and at agent shutdown. */
struct vp_cm_epoch_end {
	uint32_t epoch;
	uint32_t live_methods;   /* compiled methods live when the epoch ended */
	uint64_t live_bytes;
	uint64_t dropped;        /* events the agent's queue had to drop so far */
};

#define VP_CM_LEVEL_UNKNOWN 0xffu
/* HotSpot's compile levels (CompLevel): 1-3 are C1 (1 without profiling, 2 with
 * invocation and backedge counters, 3 full profiling), 4 is C2; 0 is a native wrapper. */
#define VP_CM_LEVEL_C2 4u

/* METHOD_LOAD and METHOD_LOAD2 flags (agent version 3 on; before that the byte was
 * reserved and zero, which reads as "no flags"). */
#define VP_CM_LOAD_OSR 0x1u   /* an on-stack-replacement compilation (entered at a loop) */

/* VP_CM_METHOD_LOAD. Followed by name_len bytes of the readable name
 * ("java.util.HashMap.get(Object)"), class_len bytes of the class signature
 * ("Ljava/util/HashMap;"), mname_len bytes of the method name, sig_len bytes of the
 * method signature ("(Ljava/lang/Object;)Ljava/lang/Object;"). */
struct vp_cm_method_load {
	uint64_t code_start;
	uint32_t code_size;
	uint8_t level;           /* compile level, VP_CM_LEVEL_UNKNOWN when JVMTI does not say */
	uint8_t flags;           /* VP_CM_LOAD_* (agent version 3 on) */
	uint8_t reserved[2];
	uint64_t method_id;      /* the jmethodID; stable while the class is loaded */
	uint16_t name_len, class_len, mname_len, sig_len;
};

/* VP_CM_METHOD_UNLOAD */
struct vp_cm_method_unload {
	uint64_t code_start;
	uint64_t method_id;
};

/* VP_CM_METHOD_NAME: once per method id that appears in an INLINE record (and for every
 * loaded method). Followed by name_len bytes of the readable name, file_len bytes of the
 * source file name, then nlines struct vp_cm_line (bci -> line table, by start bci). */
struct vp_cm_method_name {
	uint64_t method_id;
	uint16_t name_len, file_len;
	uint32_t nlines;
};
struct vp_cm_line {
	uint32_t start_bci;
	uint32_t line;
};

/* VP_CM_METHOD_NAMES: what n METHOD_NAME records would say, for methods of one class
 * (agent version 2 on: the writer's naming of prepared classes). Followed by class_len
 * bytes of the readable class name ("java.util.HashMap"), file_len bytes of the source
 * file name (every method's), then `bytes` bytes holding, per method, in LEB128 as INLINE2:
 *   id      zigzag: the jmethodID minus the previous method's (the first: minus 0)
 *   len     then len bytes: the method part of the readable name ("get(Object)"); the
 *           readable name is class + "." + it
 *   nlines  then nlines x { start_bci, line }, each zigzag: minus the previous entry's
 *           (the first: minus 0), in the order of the method's line table */
struct vp_cm_method_names {
	uint32_t n;
	uint16_t class_len, file_len;
	uint32_t bytes;
	uint32_t reserved;
};

/* VP_CM_INLINE: the inlining of one compiled method (after its METHOD_LOAD). Followed by
 * npcs struct vp_cm_pc, sorted by pc_offset, then nframes struct vp_cm_frame; pc i owns
 * frames [first, first + depth) (vp_cm_pc.first), innermost first, the compiled method
 * itself last. */
struct vp_cm_inline {
	uint64_t code_start;
	uint64_t method_id;
	uint32_t npcs;
	uint32_t nframes;
};
struct vp_cm_pc {
	uint32_t pc_offset;      /* from code_start */
	uint16_t depth;
	uint16_t reserved;
	uint32_t first;          /* index of the first frame */
	uint32_t reserved2;
};
struct vp_cm_frame {
	uint64_t method_id;
	int32_t bci;
	uint32_t reserved;
};

/* VP_CM_INLINE2: the inlining of one compiled method, compact (agent version 2 on).
 * Followed by nmethods u64 jmethodIDs (the method table), then `bytes` bytes that
 * encode npcs pc records in the order HotSpot gave them. All numbers in the stream are
 * unsigned LEB128; "zigzag" marks a signed one mapped to unsigned as (v << 1) ^ (v >> 63).
 * Per pc:
 *   delta   zigzag: pc_offset minus the previous pc's (the first: minus 0)
 *   keep    how many outermost frames equal the previous pc's outermost frames (method
 *           and bci); 0 for the first pc
 *   fresh   how many frames follow; depth = keep + fresh, at least 1
 *   fresh x { method: index into the method table; bci: zigzag }, innermost first
 * Frames are innermost first with the compiled method itself last, as in INLINE;
 * nframes is the sum of the depths (what INLINE's frame table would hold). */
#define VP_CM_INLINE2_MAX_FRAMES (1u << 22) /* readers reject more */
struct vp_cm_inline2 {
	uint64_t code_start;
	uint64_t method_id;
	uint32_t npcs;
	uint32_t nframes;
	uint32_t nmethods;
	uint32_t bytes;
};

/* The INLINE2 stream's numbers: writes v as unsigned LEB128 at p (at most 10 bytes);
 * returns the bytes written. */
static inline unsigned vp_cm_uleb_put(uint8_t *p, uint64_t v)
{
	unsigned n = 0;

	do {
		uint8_t b = v & 0x7f;

		v >>= 7;
		p[n++] = b | (v ? 0x80 : 0);
	} while (v);
	return n;
}

static inline uint64_t vp_cm_zigzag(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

/* VP_CM_METHOD_LOAD2: METHOD_LOAD without its strings (agent version 2 on). The
 * method's readable name, source file and lines are those of the METHOD_NAME record of
 * method_id, which the agent writes before it; the class signature, bare method name
 * and signature are not recorded. */
struct vp_cm_method_load2 {
	uint64_t code_start;
	uint64_t method_id;
	uint32_t code_size;
	uint8_t level;           /* as in METHOD_LOAD */
	uint8_t flags;           /* as in METHOD_LOAD */
	uint8_t reserved[2];
};

enum vp_cm_blob_kind {
	VP_BLOB_STUB        = 0, /* StubRoutines, adapters, runtime stubs, ... */
	VP_BLOB_INTERPRETER = 1, /* the template interpreter */
};

/* VP_CM_CODE_BLOB: DynamicCodeGenerated. Followed by name_len bytes of the name. */
struct vp_cm_code_blob {
	uint64_t code_start;
	uint32_t code_size;
	uint16_t kind;           /* enum vp_cm_blob_kind */
	uint16_t name_len;
};

/* VP_CM_METHOD_PTR: the HotSpot Method* behind each jmethodID of a class, written when the class is
 * prepared (and for every loaded class when the agent starts), before any of its
 * methods can run. Interpreted frames carry a Method*; metadata is freed and reused when
 * classes unload, so a reader names a Method* seen at time t by the latest METHOD_PTR
 * record for it at or before t. The method's name and lines are in a METHOD_NAME record
 * for method_id. */
struct vp_cm_method_ptrs {     /* followed by n struct vp_cm_method_ptr */
	uint32_t n;
	uint32_t flags;          /* VP_CM_PTRS_* */
};
/* The class was loaded before the agent saw it (the agent's start-up enumeration, or a
 * late attach): the pointers were valid before the record's time too. */
#define VP_CM_PTRS_PREEXISTING 0x1u
struct vp_cm_method_ptr {
	uint64_t method_ptr;
	uint64_t method_id;
};

/* VP_CM_THREAD_NAME: a Java thread's full name (the kernel keeps only 15 characters),
 * for names longer than that. Followed by name_len bytes of the name (modified UTF-8, as
 * JVMTI gives it). Written at ThreadStart with the tid the thread itself read (gettid),
 * and at ThreadEnd (VP_CM_THREAD_ENDED, no name: the tid may then be reused by a thread
 * the agent does not name). For threads already running when the agent starts or
 * attaches (VP_CM_THREAD_PREEXISTING, the name held before time too) the tid is the one
 * HotSpot keeps for the thread, or else the one thread of the JVM whose kernel name is
 * the name's first 15 bytes; either way that tid's kernel name is the name's first 15
 * bytes (HotSpot names its native threads so). A reader names tid at t by the latest
 * record for it at or before t, else by a preexisting one (docs/codemap-format.md). */
struct vp_cm_thread_name {
	uint32_t tid;
	uint16_t name_len;
	uint16_t flags;          /* VP_CM_THREAD_* */
};
#define VP_CM_THREAD_PREEXISTING 0x1u
#define VP_CM_THREAD_ENDED       0x2u

/* VP_CM_ALLOC_SAMPLE: one allocation that JVMTI's SampledObjectAlloc reported (the agent
 * option alloc=BYTES sets the mean sampling interval), on the allocating thread tid.
 * Followed by nframes struct vp_cm_alloc_frame, innermost first (the allocating method
 * first), then class_len bytes of the object's class signature ("[J", "Ljava/lang/String;").
 * Methods are named by the METHOD_NAME(S) records of their jmethodIDs; frames carry the
 * bytecode index as JVMTI gives it. */
struct vp_cm_alloc_sample {
	uint32_t tid;
	uint16_t nframes;
	uint16_t class_len;
	uint64_t size;           /* the object's size in bytes */
	uint64_t weight;         /* the bytes the sample stands for: max(size, interval) */
};
/* VP_CM_LOCK_SAMPLE has ALLOC_SAMPLE's layout: a thread that waited for a contended
 * monitor (synchronized; JVMTI MonitorContendedEnter to MonitorContendedEntered) or parked
 * in java.util.concurrent with a blocker (the native Unsafe.park, timed around the JDK's
 * own), its stack when it got the lock (or returned from park), innermost first (from
 * LockSupport.park*, or from Unsafe.park where that was called directly),
 * and the class of the monitor (or of park's blocker object; "" when none). size and
 * weight are both the time waited, in ns. The time of the record is the wait's end. */
struct vp_cm_alloc_frame {
	uint64_t method_id;
	int32_t bci;
	uint32_t reserved;
};

/* VP_CM_VTHREAD_MOUNT and VP_CM_VTHREAD_UNMOUNT (agent version 4 on, agent option
 * vthreads=1): virtual thread vthread_id (java.lang.Thread.threadId()) was mounted on, or
 * is about to leave, the kernel thread carrier_tid at the record's time. From a MOUNT to
 * the next UNMOUNT (or END) of the same carrier, that carrier's samples are the virtual
 * thread's; from an UNMOUNT to the vthread's next MOUNT it waited unmounted (parked,
 * sleeping). Followed by nframes struct vp_cm_alloc_frame, innermost first: on a MOUNT,
 * the stack the virtual thread waited at since its previous UNMOUNT (the one it resumes
 * with), written for waits of at least 50 us (shorter ones are flagged
 * VP_CM_VT_SHORT); readers also take an UNMOUNT's frames as that stack. Then name_len
 * bytes of its name (a START mount of a named thread; else none). */
struct vp_cm_vthread {
	uint64_t vthread_id;
	uint32_t carrier_tid;
	uint16_t nframes;
	uint16_t name_len;
	uint32_t flags;          /* VP_CM_VT_* */
	uint32_t reserved;
};
#define VP_CM_VT_START 0x1u      /* MOUNT: the first (JVMTI VirtualThreadStart) */
#define VP_CM_VT_END   0x2u      /* UNMOUNT: the last (VirtualThreadEnd): no wait follows */
#define VP_CM_VT_SHORT 0x4u      /* MOUNT: the wait it ends was under 50 us: no stack taken */

#endif
