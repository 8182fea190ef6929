/* The history of every process's memory mappings and thread names over a recording,
 * so that an address sampled at time t in pid resolves through the mappings that were
 * valid in that pid at t: a pid that exits and is reused is a new process, a library
 * mapped later is not there before, exec drops the old image, and fork copies the
 * parent's mappings to the child. */
#ifndef VIPROF_PROCMAPS_H
#define VIPROF_PROCMAPS_H

#include <stdbool.h>
#include <stdint.h>

#include "common/session_format.h"

struct vp_map {
	uint64_t start, len, pgoff;
	uint64_t t_start, t_end;     /* valid in [t_start, t_end); t_end UINT64_MAX = to the end */
	const char *filename;        /* interned; "" for anonymous memory */
	uint8_t build_id[20];
	uint8_t build_id_size;
	uint32_t prot;
	bool synthesized;            /* from the recorder's /proc/PID/maps snapshot */
	void *priv;                  /* the caller's cache for this mapping (e.g. its ELF) */
	bool priv_set;
};

struct vp_procmaps;

struct vp_procmaps *vp_procmaps__new(void);      /* NULL and errno on failure */
void vp_procmaps__free(struct vp_procmaps *pm);   /* accepts NULL */

/* Sideband, fed in stream order. Each returns 0 or -errno. */
int vp_procmaps__mmap(struct vp_procmaps *pm, uint64_t t, const struct vp_mmap *m,
		      const char *filename);
/* A new process pid forked from ppid at t (threads, pid == ppid, only get a comm). */
int vp_procmaps__fork(struct vp_procmaps *pm, uint64_t t, const struct vp_task *task);
int vp_procmaps__exit(struct vp_procmaps *pm, uint64_t t, const struct vp_task *task);
/* A thread name; exec set when it changed because of exec, which drops the old image. */
int vp_procmaps__comm(struct vp_procmaps *pm, uint64_t t, uint32_t pid, uint32_t tid,
		      const char *comm, bool exec);

/* The mapping holding ip in pid at time t, or NULL. When none was valid at t, the
 * earliest synthesized one that appeared later in the same process is used: the
 * recorder's snapshot of /proc/PID/maps can be stamped after the first samples (a
 * live mapping that appears later was really not there yet). */
struct vp_map *vp_procmaps__find(struct vp_procmaps *pm, uint32_t pid, uint64_t ip, uint64_t t);
/* vp_procmaps__find, and when the mapping found is live at t, the span [*lo, *hi) of
 * times at which the same lookup is sure to return it (its live interval within the
 * process instance); an empty span (*lo > *hi) otherwise. */
struct vp_map *vp_procmaps__find_span(struct vp_procmaps *pm, uint32_t pid, uint64_t ip, uint64_t t,
				      uint64_t *lo, uint64_t *hi);
/* Whether pid at time t maps a file whose name ends in "/" suffix (any generation's
 * mappings live at t; e.g. "libjvm.so" tells a HotSpot JVM). */
bool vp_procmaps__maps_file(struct vp_procmaps *pm, uint32_t pid, uint64_t t, const char *suffix);
/* The name of thread tid at t (the latest one set at or before t, else the first), or NULL. */
const char *vp_procmaps__comm_at(struct vp_procmaps *pm, uint32_t tid, uint64_t t);

#endif
