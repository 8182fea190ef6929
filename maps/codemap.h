/* The code maps of one JVM, read into memory: what `viprof maps` prints and what the JIT
 * index (jit_index.h) searches. Built from the agent's codemap*.vpm files, or imported
 * from a perf-PID.map or a jitdump file. */
#ifndef VIPROF_CODEMAP_H
#define VIPROF_CODEMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "maps/codemap_method.h"

#define VP_CM_NEVER UINT64_MAX /* unload_time of code that was never unloaded */

struct vp_cm_inline_info {
	uint32_t npcs, nframes;
	struct vp_cm_pc *pcs;        /* sorted by pc_offset */
	struct vp_cm_frame *frames;
};

/* A sampled allocation (VP_CM_ALLOC_SAMPLE); frames innermost first, in
 * vp_codemap.alloc_frames[first .. first + nframes). */
struct vp_cm_alloc_info {
	uint64_t time;
	uint32_t kind;               /* VP_CM_ALLOC_SAMPLE, or VP_CM_LOCK_SAMPLE (size, weight in ns) */
	uint32_t tid;
	uint32_t nframes;
	size_t first;
	uint64_t size, weight;
	const char *klass;           /* the class signature, "[J" */
};

/* A virtual thread's mount or unmount (VP_CM_VTHREAD_*); an unmount's frames (its stack
 * then, innermost first) are vp_codemap.alloc_frames[first .. first + nframes). */
struct vp_cm_vthread_info {
	uint64_t time, id;           /* id: java.lang.Thread.threadId() */
	uint32_t carrier;            /* the carrier's tid (in the JVM's pid namespace) */
	uint32_t kind;               /* VP_CM_VTHREAD_MOUNT or VP_CM_VTHREAD_UNMOUNT */
	uint32_t flags;              /* VP_CM_VT_* */
	uint32_t nframes;
	size_t first;
	const char *name;            /* "" unless a START mount of a named thread */
};

struct vp_cm_blob_info {
	uint64_t start;
	uint32_t size;
	uint16_t kind;               /* enum vp_cm_blob_kind */
	uint64_t time;
	uint32_t epoch;
	const char *name;
};

struct vp_cm_epoch_info {
	uint32_t id;                 /* as written; index in the array is the global number */
	uint32_t reason;             /* enum vp_cm_epoch_reason */
	uint32_t file;               /* which codemap file (0 = the first) */
	uint64_t t_begin, t_end;     /* t_end 0 when the epoch never ended (crash, still running) */
	bool ended;
	uint32_t live_methods;
	uint64_t live_bytes, dropped;
	uint32_t nloads, nunloads;
	uint32_t *by_addr;           /* indices of the methods loaded here, sorted by start */
	/* The GC that began this epoch (a VP_CM_GC record), when the map says. */
	bool gc_known;
	uint8_t gc_kind;             /* enum vp_cm_gc_kind */
	uint32_t gc_id, gc_full, gc_count;
	char gc_name[16];
};

struct vp_cm_name_info {
	uint64_t method_id;
	const char *name, *file;
	uint32_t nlines;
	struct vp_cm_line *lines;    /* sorted by start_bci */
};

/* One VP_CM_METHOD_PTR entry: method_ptr named method_id from time on. */
struct vp_cm_ptr_info {
	uint64_t method_ptr, method_id, time;
	bool preexisting;            /* also valid before time (VP_CM_PTRS_PREEXISTING) */
};

/* One VP_CM_THREAD_NAME record. */
struct vp_cm_thread_info {
	uint32_t tid, flags;         /* VP_CM_THREAD_* */
	uint64_t time;
	const char *name;            /* "" for an end */
};

struct vp_codemap {
	uint32_t pid, flags;         /* META; flags VP_CM_META_* */
	char vm[256];
	uint64_t created_ns;         /* CLOCK_MONOTONIC creation of the first file, 0 if unknown */
	bool truncated;              /* a file ended in a torn chunk (crash or still running) */
	uint64_t skipped_chunks, skipped_records; /* damage stepped over while reading */
	char damage[512];            /* what was skipped, for a warning; "" when nothing */
	struct vp_cm_method_info *methods; size_t nmethods;   /* in load order */
	struct vp_cm_blob_info *blobs; size_t nblobs;         /* sorted by start after finish */
	struct vp_cm_epoch_info *epochs; size_t nepochs;
	struct vp_cm_name_info *names; size_t nnames;         /* sorted by method_id after finish */
	struct vp_cm_inline_info *inlines; size_t ninlines;
	struct vp_cm_ptr_info *ptrs; size_t nptrs;           /* sorted by (method_ptr, time) after finish */
	struct vp_cm_thread_info *threads; size_t nthreads;  /* sorted by (tid, time) after finish */
	struct vp_cm_alloc_info *allocs; size_t nallocs;     /* in record order */
	struct vp_cm_alloc_frame *alloc_frames; size_t nalloc_frames;  /* also the vthreads' */
	struct vp_cm_vthread_info *vthreads; size_t nvthreads; /* in record order */
	void *priv;
};

/* Reads every codemap*.vpm in dir (in creation order). NULL with errno ENOENT and a message
 * when there is none; other errno and a one-line reason on a bad file. */
struct vp_codemap *vp_codemap__load_dir(const char *dir, char *err, size_t errlen);
/* A JVM class signature as Java writes the class: "[J" -> "long[]", "Ljava/lang/String;"
 * -> "java.lang.String" (an allocation's class in reports). Always NUL-terminated. */
void vp_cm_class_name(const char *sig, char *out, size_t len);
/* Reads one code-map file. */
struct vp_codemap *vp_codemap__load_file(const char *path, char *err, size_t errlen);
void vp_codemap__free(struct vp_codemap *m);

const char *vp_cm_reason_name(uint32_t reason);   /* "start", "gc", ... */
const char *vp_cm_gc_kind_name(uint32_t kind);    /* "young", "full", "concurrent", "unknown" */
/* "GC 17 (young, G1)" for the GC that began epoch e, into buf; "" when the map does not say. */
const char *vp_codemap__gc_text(const struct vp_codemap *m, size_t e, char *buf, size_t len);
/* The jmethodID that the HotSpot Method* method_ptr stood for at time t: the latest
 * METHOD_PTR entry for it at or before t (metadata is reused after classes unload), or,
 * for classes loaded before the agent started, the first entry. 0 when unknown. */
uint64_t vp_codemap__method_at(const struct vp_codemap *m, uint64_t method_ptr, uint64_t t);
/* The full Java name of thread tid at t: the latest THREAD_NAME record for tid at or
 * before t (none once it ended), else a preexisting one, else one written at most
 * VP_CM_THREAD_EARLY_NS after t (ThreadStart trails the thread's first instructions).
 * NULL when the agent did not name it. */
#define VP_CM_THREAD_EARLY_NS 50000000ull
const char *vp_codemap__thread_name(const struct vp_codemap *m, uint32_t tid, uint64_t t);
const struct vp_cm_name_info *vp_codemap__name(const struct vp_codemap *m, uint64_t method_id);
/* Source line of bci in a method, 0 when unknown. */
uint32_t vp_codemap__line(const struct vp_cm_name_info *n, int32_t bci);
/* The method loaded in epoch e whose code covers addr, or NULL. */
const struct vp_cm_method_info *vp_codemap__in_epoch(const struct vp_codemap *m, size_t e, uint64_t addr);
/* The last-loaded method whose code covers addr, ignoring time (perf-PID.map semantics). */
const struct vp_cm_method_info *vp_codemap__flat(const struct vp_codemap *m, uint64_t addr);
const struct vp_cm_blob_info *vp_codemap__blob(const struct vp_codemap *m, uint64_t addr);
/* The epoch a time falls in (last one begun at or before t; 0 if t is before them all). */
size_t vp_codemap__epoch_at(const struct vp_codemap *m, uint64_t t);

#endif
