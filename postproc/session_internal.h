/* The session loader's insides, shared by its files and by nothing else: session.c
 * (the two passes), session_records.c (the first pass: each record into the loader),
 * session_symbols.c (the second: each sample's addresses into frames, with the address
 * cache), session_steal.c (steal time charged to its victims) and session_jvm.c (the
 * agent's own samples: allocations and virtual-thread waits). Other code uses
 * postproc/session.h. */
#ifndef VIPROF_SESSION_INTERNAL_H
#define VIPROF_SESSION_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/chunkfile.h"
#include "common/session_format.h"
#include "postproc/elfsym.h"
#include "postproc/hvsyms.h"
#include "postproc/ksyms.h"
#include "postproc/procmaps.h"
#include "postproc/session_timeline.h"
#include "postproc/session_weights.h"
#include "postproc/profile.h"
#include "postproc/session_steal.h"
#include "postproc/vthreads.h"

#define MAX_OUT_FRAMES 8192   /* a sample's VP_MAX_FRAMES, with room for their inlined frames */
#define MAX_JIT_DEPTH 16

struct vp_session_opts;

/* What one sampled address resolved to: its frames (innermost first, more than one for
 * inlined JIT code) and its pprof location. Resolving names the frames by strings
 * (symbol, image, file), and hashing those for every frame of every sample was most of
 * a report's time; an address seen again with the same key takes this instead. The key
 * holds everything the resolution depends on: for user code the mapping found at the
 * sample's time and the JIT method (or stub) that owned the address then, so that a
 * remapped library or reused code-cache memory is resolved afresh. */
struct addr_ent {
	uint64_t ip;
	const void *map, *jit;       /* identity of the resolution; NULL when not used */
	uint32_t pid;
	uint8_t kind;                /* AC_* (0 = empty slot) */
	uint8_t caller;
	uint8_t n;                   /* frames, 1..MAX_JIT_DEPTH */
	uint8_t unmapped;            /* counted as a user frame in no mapping */
	uint8_t flat_wrong;          /* a leaf in JIT code: FLAT_OK, or FLAT_WRONG when a flat map names it
				      * after another method; 0 otherwise */
	uint32_t loc;                /* pprof location, or UINT32_MAX */
	uint32_t first;              /* frames at pool[first..first+n) */
	uint64_t t_lo, t_hi;         /* AC_SPAN: the times at which the answer holds */
};
/* AC_SPAN entries are keyed by (pid, ip, caller) alone and hold the last answer with
 * the span of times it is sure for (the mapping live, the JIT method in its epoch): a
 * repeated address at such a time skips the mapping search and the code-map lookup. */
enum { AC_KERNEL = 1, AC_HYPERVISOR = 2, AC_USER = 3, AC_INTERP = 4, AC_SPAN = 5 };
struct addr_cache {
	struct addr_ent *t; size_t size, used;
	uint32_t *pool; size_t npool, cappool;
};

/* The sample records the first pass kept for the second, in blocks (records are copied
 * whole, 8-byte aligned as in a chunk). 32 MiB holds about 110k samples of deep Java
 * stacks (280 bytes each), a minute at 99 Hz on 16 vCPUs; keeping every sample would
 * make a report's memory grow with its length (bench/report-scale.sh holds it to 100 MB
 * per million samples), so a longer session is read twice past that. */
#define SAMPLE_KEEP_BYTES (32u << 20)
#define SAMPLE_KEEP_BLOCK (1u << 20)
struct sample_keep {
	struct keep_block { uint8_t *b; size_t used, cap; } *blocks;
	size_t nblocks, capblocks;
	size_t bytes;                /* kept, in all blocks */
	uint64_t nrecs;              /* records kept */
	bool full;                   /* stopped keeping: the rest is read again from resume_off */
	uint64_t resume_off;         /* the chunk whose samples were the first not kept */
	uint64_t chunk;              /* the chunk (cfile_reader__chunks) the last kept record came from */
	uint64_t chunk_off;          /* its offset */
	size_t mark_block, mark_used, mark_bytes; /* where that chunk's records start */
	uint64_t mark_nrecs;
};

struct loader {
	const char *dir;
	struct vp_profile *p;
	const struct vp_session_opts *o;
	struct vp_ksyms *ks;
	struct vp_elfsym *elfs;
	struct vp_hvsyms *hv;        /* --hv-syms */
	struct vp_timeline *tl;
	struct vp_weights *w;
	/* The sample records the first pass kept for the second (at most SAMPLE_KEEP_BYTES),
	 * and then the stream is read again. */
	struct sample_keep keep;
	struct addr_cache ac;
	uint64_t unmapped;           /* user frames in no known mapping: leaves (the sampled address) */
	uint64_t unmapped_callers;   /* ... and return addresses the walk found there (a misread frame) */
	uint64_t exec_stacks;        /* samples taken inside execve: the user stack is the caller's */
	uint64_t jit_leaves, flat_wrong; /* samples whose leaf is JIT code; of them, misnamed by a flat map */
	uint64_t walk[VP_WALK__COUNT]; /* samples with a user stack, by how its walk ended */
	struct mapinfo *mapinfos;    /* owned; vp_map.priv points at them */
	struct vp_elf *vdso;         /* the recorded kernel's vDSO */
	bool vdso_tried;
	struct vp_steal_ledger *steal;
	/* Addresses for pprof (profile_loc.c): the lines the JIT index gave for the frames
	 * user_frames returned last. */
	uint32_t jit_lines[MAX_JIT_DEPTH]; int jit_n;
};

static inline const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

/* A sample whose stack fits its record; others are skipped rather than read past. */
static inline bool sample_ok(const struct vp_record *r)
{
	size_t blen = vp_record_body_len(r);
	if (blen < sizeof(struct vp_sample))
		return false;
	const struct vp_sample *s = vp_record_body(r);
	return sizeof(*s) + 8 * ((size_t)s->nr_kernel + s->nr_user) <= blen;
}

/* Whether x is in the filter v[0..n) (no filter: everything is). */
static inline bool in_list(const uint32_t *v, int n, uint32_t x)
{
	if (!v || n <= 0)
		return true;
	for (int i = 0; i < n; i++)
		if (v[i] == x)
			return true;
	return false;
}

/* What a mapping resolves through, worked out once per mapping: its ELF, whether the
 * ELF is the file that was recorded (build-ids), and the recorded build-id in hex. */
struct mapinfo {
	struct vp_elf *elf;
	bool trusted;
	char recbid[41];
	struct mapinfo *next;
};

/* session_records.c: the first pass. */
int loader_on_record(struct loader *l, const struct vp_record *r);

/* session_symbols.c: the second pass. */
int loader_resolve_sample(struct loader *l, const struct vp_record *r);


/* session_jvm.c, after the samples. */
int loader_add_allocs(struct loader *l);

#endif
