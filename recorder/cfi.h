/* Compact unwind rules of one ELF file, derived from its .eh_frame (or .debug_frame)
 * with elfutils' libdw CFI API, in the form the BPF walker reads (struct vpb_rule of
 * sampler-kernel/profile.h): for each address range, where the canonical frame address
 * (CFA) is, and where the caller's frame pointer was saved. The return address is at
 * CFA - 8 on x86-64. Built once per file (the unwinder caches tables per build-id).
 * Internal to recorder/. */
#ifndef VIPROF_RECORDER_CFI_H
#define VIPROF_RECORDER_CFI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/types.h>
#include "sampler-kernel/profile.h"

struct vp_cfi;   /* opaque */

/* Reads the unwind information of the ELF file open on fd (the caller opened it; it is
 * not closed). Rules cover the file's executable PT_LOAD segments: every address that
 * no FDE covers gets a VPB_RULE_NONE rule, consecutive identical rules are merged, and
 * rule pcs are offsets from base (vp_cfi__base). NULL with errno set and a one-line
 * reason in err when the file is not a usable ELF file; a file without any unwind
 * information gives a table whose rules are all VPB_RULE_NONE (not an error), and so
 * does a file whose unwind information fails the checks made before libdw reads it
 * (vp_cfi__refused: register numbers, nesting, opcodes, sizes). libdw reads a copy of
 * the sections, never the file, which its owner may rewrite meanwhile. */
struct vp_cfi *vp_cfi__build(int fd, char *err, size_t errlen);

/* The rules, sorted by pc, and their count. */
const struct vpb_rule *vp_cfi__rules(const struct vp_cfi *t, size_t *n);

/* The ELF virtual address that rule pc 0 stands for. */
uint64_t vp_cfi__base(const struct vp_cfi *t);

/* The ELF virtual address of file offset off inside an executable PT_LOAD segment of
 * this file (p_vaddr + off - p_offset). 0 on success, -ENOENT when no segment holds it. */
int vp_cfi__vaddr_of_offset(const struct vp_cfi *t, uint64_t off, uint64_t *vaddr);

/* The rule for ELF virtual address vaddr (binary search; for tests and the user-space
 * replica of the walk). NULL when vaddr is outside every rule's range. */
const struct vpb_rule *vp_cfi__find(const struct vp_cfi *t, uint64_t vaddr);

/* Which sections the rules came from, for messages: "eh_frame", "debug_frame",
 * "eh_frame+debug_frame" (eh_frame wins where both cover an address), "none". */
const char *vp_cfi__source(const struct vp_cfi *t);

/* True when the reader's limits on rows (per FDE, and per file: libdw re-reads an FDE
 * from its start for every row) left part of the text VPB_RULE_NONE. Real libraries stay
 * far below them; a file that reaches them is crafted or damaged. For messages. */
bool vp_cfi__cut(const struct vp_cfi *t);

/* Why the file's unwind information was refused as a whole ("<section> entry at offset
 * <off>: <what>"), or NULL when it was not. A file that gets one is crafted or damaged:
 * libdw would have allocated in proportion to numbers it states. For messages. */
const char *vp_cfi__refused(const struct vp_cfi *t);

void vp_cfi__free(struct vp_cfi *t);   /* accepts NULL */

/* The unwind-rule cache: a table built once is kept on disk and loaded by later
 * recordings of the same file (building libjvm.so's takes about 0.2 s of CPU). One file
 * per ELF file, named after the file's identity (device, inode, size, mtime in ns), so a
 * changed file misses. The format (little-endian, this header only):
 *   struct vp_cfi_cache_hdr, then nrules struct vpb_rule;
 * a reader checks magic, version, header size, the identity, the counts against the
 * file's size, the CRC-32 of the rules, and that rules are sorted with known kinds; any
 * mismatch is a miss (the table is rebuilt and the entry replaced). */
#define VP_CFI_CACHE_MAGIC   "VPCFIC\0\1"
#define VP_CFI_CACHE_VERSION 1u
#define VP_CFI_CACHE_SEGS    16

struct vp_cfi_cache_hdr {
	char magic[8];
	uint32_t version, hdr_size;
	uint64_t dev, ino, size, mtime_ns;   /* the ELF file's identity */
	uint64_t base;
	uint32_t nsegs, nrules;
	uint32_t source;                     /* 0 none, 1 eh_frame, 2 debug_frame, 3 both */
	uint32_t flags;                      /* 1: cut (vp_cfi__cut) */
	uint64_t segs[VP_CFI_CACHE_SEGS][4]; /* off, vaddr, filesz, memsz */
	uint32_t rules_crc32, reserved;
};

struct vp_cfi_key {
	uint64_t dev, ino, size, mtime_ns;
};

/* The cache directory, opened (O_DIRECTORY, no symlink followed at the last step) and
 * checked: owned by the effective user and writable by no one else. VIPROF_UNWIND_CACHE
 * names it (or "off" disables the cache); otherwise /var/cache/viprof/unwind for root,
 * $XDG_CACHE_HOME/viprof/unwind or ~/.cache/viprof/unwind for others; created 0700
 * when missing. -errno when there is no usable cache (the caller builds every table). */
int vp_cfi__cache_open(void);

/* The cached table of the file with identity k in cache directory dirfd, or NULL (errno
 * ENOENT for a miss, EBADMSG for a damaged or stale entry). */
struct vp_cfi *vp_cfi__cache_load(int dirfd, const struct vp_cfi_key *k);

/* Stores t for k (a temporary file renamed into place), then trims the cache to its
 * bounds (vp_cfi__cache_trim). 0, -EFBIG when t alone is over the size bound (not
 * stored), or -errno. */
int vp_cfi__cache_store(int dirfd, const struct vp_cfi_key *k, const struct vp_cfi *t);

/* The cache's bounds. Each ELF file that changes (a touch, a rebuild, a package update)
 * gets a new entry and its old one is never read again: without a bound root's cache
 * grew by libjvm.so's 1.4 MB at every touch plus 'record -g' any user could do.
 * VIPROF_UNWIND_CACHE_MAX: the entries' total size in bytes (K, M, G suffixes; 0 = no
 * bound; default 256M); VIPROF_UNWIND_CACHE_AGE: how long an entry unused stays (a
 * duration as record -d takes it: "30d", "12h"; 0 = for ever; default 30d). */
#define VP_CFI_CACHE_DEFAULT_MAX   (256ull << 20)
#define VP_CFI_CACHE_DEFAULT_AGE_S (30ull * 24 * 3600)
#define VP_CFI_CACHE_TMP_AGE_S     600   /* a temporary file older than this is a dead writer's */
void vp_cfi__cache_bounds(uint64_t *max_bytes, uint64_t *max_age_s);

/* Removes the cache's entries unused (neither stored nor loaded: loading touches an
 * entry's mtime) for more than max_age_s, entries of other format versions and dead
 * writers' temporary files, then the least recently used entries until their sizes add
 * up to at most max_bytes (0: no bound of either kind). Touches nothing but the names
 * the cache makes, and only regular files of the effective user. The number removed,
 * or -errno. */
int vp_cfi__cache_trim(int dirfd, uint64_t max_bytes, uint64_t max_age_s);

#endif
