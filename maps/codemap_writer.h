/* Writing code maps (maps/codemap_format.h): the encoders of the compact records and the
 * writer that places epochs. The JVM agent is its user; the tests and the round-trip
 * fuzzer call the same code, so what the agent writes is what they read back.
 *
 * Two halves with different rules:
 * - The encoders (vp_cm_method_name__*, vp_cm_names_enc__*, vp_cm_inl_table__*,
 *   vp_cm_inline2__*) work in memory the caller gives them: they never allocate, lock or
 *   block, because the agent calls them inside JVMTI callbacks to build records straight
 *   into its queue.
 * - struct vp_cm_writer owns the file and the epoch decisions (a load over code of the
 *   current epoch begins a REUSE epoch, a GC after a code change a GC epoch; the rule is
 *   maps/epoch_rule.h). It allocates, and runs on one thread (the agent's own). */
#ifndef VIPROF_MAPS_CODEMAP_WRITER_H
#define VIPROF_MAPS_CODEMAP_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "maps/codemap_format.h"

/* ---- METHOD_NAME ---- */

/* The body size of a METHOD_NAME with these strings and nlines lines. */
size_t vp_cm_method_name__size(const char *name, const char *file, uint32_t nlines);
/* Writes that body at dst (vp_cm_method_name__size bytes). Lines may sit anywhere (they
 * are read with memcpy). */
void vp_cm_method_name__fill(void *dst, uint64_t id, const char *name, const char *file,
			     const struct vp_cm_line *lines, uint32_t nlines);

/* ---- METHOD_NAMES: methods of one class into one record ---- */

struct vp_cm_names_enc {
	uint8_t *buf, *q, *start;
	size_t cap;
	uint64_t prev_id;
	struct vp_cm_method_names h;
};

/* Starts a record in buf (cap bytes) for the methods of class klass (readable name),
 * whose source file is file. Returns 0, or -ENOSPC when not even the header fits. */
int vp_cm_names_enc__begin(struct vp_cm_names_enc *e, void *buf, size_t cap, const char *klass, const char *file);
/* The most bytes one method with a method part of ml bytes and nlines lines can take. */
size_t vp_cm_names_enc__need(size_t ml, uint32_t nlines);
/* Adds a method (mpart: "get(Object)"): 0, or -ENOSPC when the record has no room for it
 * (end this record and begin another). */
int vp_cm_names_enc__add(struct vp_cm_names_enc *e, uint64_t id, const char *mpart, const struct vp_cm_line *lines,
			 uint32_t nlines);
/* Finishes the record: its body is the first (returned) bytes of buf. */
size_t vp_cm_names_enc__end(struct vp_cm_names_enc *e);

/* ---- INLINE2 ---- */

/* The distinct methods of one compiled method's inlining, numbered in order of first
 * appearance: INLINE2's method table. Plain memory for the caller's stack. */
#define VP_CM_INL_METHODS 2048
struct vp_cm_inl_table {
	uint64_t id[VP_CM_INL_METHODS];
	uint16_t slot[VP_CM_INL_METHODS * 2];  /* index + 1; 0 empty */
	uint32_t n;
};

void vp_cm_inl_table__init(struct vp_cm_inl_table *t);
/* id's index in t, added if new (*fresh then true); -1 when the table is full. */
int vp_cm_inl_table__index(struct vp_cm_inl_table *t, uint64_t id, bool *fresh);

/* An inlining as the encoder reads it, pc by pc, through the caller's accessors (the
 * agent's are JVMTI's PCStackInfo, the tests' a frame table): pc i is at address *pc with
 * *depth frames; frame k of it (innermost first, the compiled method itself last) is
 * *method at *bci. A pc outside [code_start, code_start + code_size], or of depth 0 or
 * over 65535, is left out. */
struct vp_cm_inl_src {
	const void *ctx;
	uint32_t npcs;
	uint64_t code_start;
	uint32_t code_size;
	void (*pc)(const void *ctx, uint32_t i, uint64_t *pc, uint32_t *depth);
	void (*frame)(const void *ctx, uint32_t i, uint32_t k, uint64_t *method, int32_t *bci);
};

/* The first pass over an inlining, before the record is reserved. */
struct vp_cm_inl_plan {
	uint32_t npcs;           /* usable pcs */
	uint64_t nframes;        /* their frames */
	bool full;               /* t could not hold every method: no INLINE2 can be written */
};

/* Adds every method of src's usable pcs to t (calling fresh(fctx, id) for each one new to
 * it, the agent's moment to name it) and counts them into *plan. Returns the most bytes
 * the body can take, or 0 when there is nothing to write (no usable pc) or it cannot be
 * written (the table is full, or over VP_CM_INLINE2_MAX_FRAMES frames: *plan says). */
size_t vp_cm_inline2__plan(struct vp_cm_inl_table *t, const struct vp_cm_inl_src *src, struct vp_cm_inl_plan *plan,
			   void (*fresh)(void *fctx, uint64_t id), void *fctx);
/* Encodes the INLINE2 body of method_id at b (the size plan returned); t is plan's table.
 * Returns the bytes used. */
size_t vp_cm_inline2__encode(uint8_t *b, const struct vp_cm_inl_src *src, const struct vp_cm_inl_table *t,
			     uint64_t method_id, const struct vp_cm_inl_plan *plan);

/* ---- the writer ---- */

struct vp_cm_writer;

/* Creates the map file name in dirfd (or at path), which must not exist yet. Records are
 * stored, not compressed: compressing took about a third of the agent thread's CPU (the
 * JVM's CPU) on a start-up-heavy JVM, for a map about twice as large. NULL with errno. */
struct vp_cm_writer *vp_cm_writer__create_at(int dirfd, const char *name);
struct vp_cm_writer *vp_cm_writer__create(const char *path);
/* Where EPOCH_END's count of dropped events comes from (the agent's queue); 0 without. */
void vp_cm_writer__on_dropped(struct vp_cm_writer *w, uint64_t (*dropped)(void *ctx), void *ctx);
/* META, then the first epoch (ATTACH with VP_CM_META_LATE_ATTACH, else START), flushed:
 * a reader finds the JVM's identity even if nothing follows. 0 or -errno. */
int vp_cm_writer__start(struct vp_cm_writer *w, uint64_t t, uint32_t pid, uint32_t flags, const char *vm);
/* Writes one record of any type. A METHOD_LOAD2 over code loaded in the current epoch
 * begins a REUSE epoch first; loads and unloads mark the epoch as changed and keep the
 * count of live code. 0 or -errno. */
int vp_cm_writer__put(struct vp_cm_writer *w, uint32_t type, uint64_t t, const void *body, size_t len);
/* A GC finished at t (the JVM's counters after it, its kind and the collector's name): it
 * begins a GC epoch, explained by a GC record, if code changed since the epoch began;
 * else it is counted into the next GC record. 0 or -errno. */
int vp_cm_writer__gc(struct vp_cm_writer *w, uint64_t t, uint32_t gc_id, uint32_t full_gcs, uint8_t kind,
		     const char *name);
int vp_cm_writer__flush(struct vp_cm_writer *w);
/* The current epoch's number. */
uint32_t vp_cm_writer__epoch(const struct vp_cm_writer *w);
/* Adds the records written so far, by type (& 15), and their bytes, to n and bytes. */
void vp_cm_writer__counts(const struct vp_cm_writer *w, uint64_t n[16], uint64_t bytes[16]);
/* Ends the last epoch at t, flushes and closes; frees w (NULL is fine). 0 or -errno. */
int vp_cm_writer__close(struct vp_cm_writer *w, uint64_t t);

#endif
