/* What ran where and when (the session loader's, postproc/session.c): the processes and
 * their mappings over time, threads and their names (the kernel's and the JVM agent's),
 * the JVMs and their code maps, each process's main executable, the vDSO, the span of
 * the recording, and which of it the report's filters select (--pid, --tid, --comm,
 * --container, --time). Fed by the first pass; read by the resolver, the steal
 * accountant and the agent's samples. */
#ifndef VIPROF_SESSION_TIMELINE_H
#define VIPROF_SESSION_TIMELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/session_format.h"
#include "postproc/procmaps.h"
#include "postproc/profile.h"
#include "postproc/session_opts.h"

#if __has_include("maps/jit_index.h")
#include "maps/codemap.h"
#include "maps/codemap_format.h"
#include "maps/jit_index.h"
#include "postproc/vthreads.h"
#define HAVE_JIT_INDEX 1
#else
#define HAVE_JIT_INDEX 0
#endif

struct vp_timeline;

/* The timeline of session directory dir (its code maps are read from there as JVMs are
 * met), reported into p with the filters o. NULL with errno set. */
struct vp_timeline *vp_timeline__new(const char *dir, struct vp_profile *p, const struct vp_session_opts *o);
void vp_timeline__free(struct vp_timeline *tl);   /* accepts NULL */

/* The span of the recording: its start t0 (CLOCK_MONOTONIC), the stream read up to t,
 * its END record (e NULL: one too short to say more). */
void vp_timeline__start(struct vp_timeline *tl, uint64_t t0);
uint64_t vp_timeline__t0(const struct vp_timeline *tl);
/* The report's options the timeline selects by (--time, --pid, ...). */
const struct vp_session_opts *vp_timeline__opts(const struct vp_timeline *tl);
void vp_timeline__reached(struct vp_timeline *tl, uint64_t t);
uint64_t vp_timeline__last(const struct vp_timeline *tl);
void vp_timeline__end(struct vp_timeline *tl, const struct vp_end *e);
bool vp_timeline__ended(const struct vp_timeline *tl);
/* The END record's duration, else from the start to the last record. */
uint64_t vp_timeline__duration(const struct vp_timeline *tl);

/* The first pass's side band; each 0 or -errno (a malformed record: its error). The
 * bodies are the records' (blen bytes, checked here where their length varies). */
int vp_timeline__mmap(struct vp_timeline *tl, uint64_t t, const struct vp_mmap *m, size_t blen);
int vp_timeline__comm(struct vp_timeline *tl, uint64_t t, const struct vp_comm *c);
int vp_timeline__fork(struct vp_timeline *tl, uint64_t t, const struct vp_task *task);
int vp_timeline__exit(struct vp_timeline *tl, uint64_t t, const struct vp_task *task);
void vp_timeline__nstid(struct vp_timeline *tl, const struct vp_nstid *n);
void vp_timeline__vdso(struct vp_timeline *tl, const void *img, size_t len);
/* The recorded vDSO image, or NULL. */
const void *vp_timeline__vdso_image(const struct vp_timeline *tl, size_t *len);

/* The report's filters: --time (t), --pid and --tid, --comm (the thread's name or its
 * kernel name), --container. */
bool vp_timeline__in_window(const struct vp_timeline *tl, uint64_t t);
bool vp_timeline__selects(const struct vp_timeline *tl, uint32_t pid, uint32_t tid);
bool vp_timeline__selects_pid(const struct vp_timeline *tl, uint32_t pid);
bool vp_timeline__selects_tid(const struct vp_timeline *tl, uint32_t tid);
bool vp_timeline__filters_threads(const struct vp_timeline *tl);   /* --pid or --tid given */
bool vp_timeline__comm_selected(const struct vp_timeline *tl, const char *name, const char *kernel);
bool vp_timeline__container_selected(const struct vp_timeline *tl, uint32_t pid);
/* Whether the report selects thread tid of pid at t (all of the filters above): the
 * name its samples are shown under, and in *kernel its kernel name; NULL when not. */
const char *vp_timeline__select(struct vp_timeline *tl, uint32_t pid, uint32_t tid, uint64_t t, const char **kernel);
/* The name of thread tid of pid at t (the agent's full Java name where it fits the
 * kernel's), and in *kernel the kernel's; NULL when unknown. */
const char *vp_timeline__thread_name(struct vp_timeline *tl, uint32_t pid, uint32_t tid, uint64_t t,
				     const char **kernel);

/* The mapping of pid at addr at t, and the span of times [*lo, *hi) it is sure for. */
struct vp_map *vp_timeline__map_at(struct vp_timeline *tl, uint32_t pid, uint64_t addr, uint64_t t, uint64_t *lo,
				   uint64_t *hi);
bool vp_timeline__maps_file(struct vp_timeline *tl, uint32_t pid, uint64_t t, const char *file);
/* Adds pid's main executable to the profile's mappings (pprof lists it first), once. */
void vp_timeline__intern_exe(struct vp_timeline *tl, uint32_t pid);

/* JVM pid: met (its code maps opened the first time; false only when out of memory),
 * with a code-map directory, and whether it maps libjvm.so (at t, asked once: 1, 0, or -1
 * when not met). */
bool vp_timeline__jvm(struct vp_timeline *tl, uint32_t pid);
bool vp_timeline__jvm_has_maps(struct vp_timeline *tl, uint32_t pid);
int vp_timeline__hotspot(struct vp_timeline *tl, uint32_t pid, uint64_t t);
#if HAVE_JIT_INDEX
/* JVM pid's code-map index and code map, or NULL. */
struct vp_jit_index *vp_timeline__jit(struct vp_timeline *tl, uint32_t pid);
const struct vp_codemap *vp_timeline__codemap(struct vp_timeline *tl, uint32_t pid);
/* Its virtual threads' index (built the first time), or NULL. */
struct vp_vthreads *vp_timeline__vthreads(struct vp_timeline *tl, uint32_t pid);
#endif
/* Whether a virtual thread was mounted on carrier tid of pid at t: its report thread id
 * and name. */
bool vp_timeline__vthread_at(struct vp_timeline *tl, uint32_t pid, uint32_t tid, uint64_t t, uint32_t *vtid,
			     char *label, size_t len);
/* Whether a JVM met has code maps; the code-map epochs of the JVMs as the profile's
 * marks (the HTML report's time strip). 0 or -ENOMEM. */
bool vp_timeline__any_jit(const struct vp_timeline *tl);
int vp_timeline__add_marks(const struct vp_timeline *tl);

#endif
