/* A snapshot of the kernel's text symbols, taken once when recording starts, so that
 * the recorder can emit exactly the VP_REC_KSYM records a session needs. Reading
 * /proc/kallsyms costs 50-75 ms of CPU (the kernel formats ~120k lines), more than
 * loading the sampler, so the recorder takes it on a thread of its own while the
 * sampler loads and runs (vp_kallsyms_loader). */
#ifndef VIPROF_RECORDER_KALLSYMS_H
#define VIPROF_RECORDER_KALLSYMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct vp_kallsyms;   /* opaque; read-only after load, except for the "emitted" marks */

struct vp_kallsym_info {
	uint64_t addr;
	uint64_t size;        /* up to the next symbol's address */
	const char *name;
	const char *module;   /* "" for vmlinux */
};

/* Loads the text symbols (t/T/w/W) of path (NULL = /proc/kallsyms), sorted by
 * address. NULL and errno on failure. *all_zero is set when every address read 0,
 * which is what kptr_restrict does to an unprivileged reader. /proc/kallsyms is read
 * again only when /proc/modules (or the reader) changed since the process last read
 * it; otherwise the last read is copied (the service's recorder rotates every interval). */
struct vp_kallsyms *vp_kallsyms__load(const char *path, bool *all_zero);
void vp_kallsyms__free(struct vp_kallsyms *k);   /* accepts NULL */
size_t vp_kallsyms__count(const struct vp_kallsyms *k);
/* Index of the symbol containing addr, or -1 when addr is below the first symbol,
 * past the last one's end, or the table is empty. */
long vp_kallsyms__find(const struct vp_kallsyms *k, uint64_t addr);
void vp_kallsyms__info(const struct vp_kallsyms *k, long idx, struct vp_kallsym_info *out);
/* Marks symbol idx as emitted; returns true the first time only. O(1): a bitmap. */
bool vp_kallsyms__mark(struct vp_kallsyms *k, long idx);

/* The snapshot taken on a thread: started before anything else, collected when the
 * recorder first needs it. Samples that arrive meanwhile keep their kernel addresses
 * until the table is there (vp_session_writer__defer_ksyms). */
struct vp_kallsyms_loader;

/* Starts reading path (NULL = /proc/kallsyms) on a new thread. NULL and errno when no
 * thread can be started (then call vp_kallsyms__load directly). */
struct vp_kallsyms_loader *vp_kallsyms_loader__start(const char *path);
/* True once the thread has finished (the join below will not block). */
bool vp_kallsyms_loader__done(const struct vp_kallsyms_loader *l);
/* Waits for the thread and frees the loader; returns what vp_kallsyms__load returned
 * (NULL with errno on failure) and its *all_zero. Accepts NULL (returns NULL, EINVAL). */
struct vp_kallsyms *vp_kallsyms_loader__join(struct vp_kallsyms_loader *l, bool *all_zero);

#endif
