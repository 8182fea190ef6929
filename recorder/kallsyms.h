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
 * past the last one's end, or the table is empty. On a table from the per-boot cache
 * (vp_kallsyms__partial) an address that only a full read can answer (a BPF program,
 * a trampoline, the edge of a module) first replaces the table by a full read of
 * /proc/kallsyms, once; indices found before stay valid only as marks. */
long vp_kallsyms__find(struct vp_kallsyms *k, uint64_t addr);
void vp_kallsyms__info(const struct vp_kallsyms *k, long idx, struct vp_kallsym_info *out);
/* Marks symbol idx as emitted; returns true the first time only. O(1): a bitmap. */
bool vp_kallsyms__mark(struct vp_kallsyms *k, long idx);

/* The per-boot cache (root only): /proc/kallsyms costs 50-75 ms of CPU per recording,
 * but the text of vmlinux and of the modules does not move until the next boot or a
 * module (un)load. The file keeps those symbols (not the BPF programs and trampolines
 * that come and go), under the key below; it is read only when root owns it and its
 * directory, no one else can write either, and the key matches. vp_kallsyms__load
 * uses it when it runs as root (VIPROF_KSYM_CACHE=off: never; =DIR: another
 * directory than /var/cache/viprof). */
struct vp_kallsyms_key {
	char boot_id[40];     /* /proc/sys/kernel/random/boot_id */
	char build[256];      /* osrelease and version: the kernel build */
	uint64_t modules;     /* hash of the loaded modules' names and load addresses */
};
int vp_kallsyms__key(struct vp_kallsyms_key *key);   /* this boot's; 0 or -errno */
/* The cache directory's fd, or -errno: -ENOENT when not root or turned off, -EPERM
 * when the directory or one above it could be changed by someone but root. */
int vp_kallsyms__cache_open(void);
/* Writes the vmlinux and module symbols of a full table under key. 0 or -errno. */
int vp_kallsyms__cache_store(int dirfd, const struct vp_kallsyms *k, const struct vp_kallsyms_key *key);
/* The cached table (partial) if the file is root's alone and was written for key;
 * NULL and errno: ENOENT (none), EPERM (someone else could have written it), ESTALE
 * (another boot, kernel or set of modules), EBADMSG (damaged). */
struct vp_kallsyms *vp_kallsyms__cache_load(int dirfd, const struct vp_kallsyms_key *key);
bool vp_kallsyms__partial(const struct vp_kallsyms *k);

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
