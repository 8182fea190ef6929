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
#include "postproc/session_resolver.h"
#include "postproc/session_timeline.h"
#include "postproc/session_weights.h"
#include "postproc/profile.h"
#include "postproc/session_steal.h"
#include "postproc/vthreads.h"


struct vp_session_opts;

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
	struct vp_timeline *tl;
	struct vp_resolver *rs;
	struct vp_resolved *out;    /* the sample the second pass resolves */
	struct vp_weights *w;
	/* The sample records the first pass kept for the second (at most SAMPLE_KEEP_BYTES),
	 * and then the stream is read again. */
	struct sample_keep keep;
	struct vp_steal_ledger *steal;
};

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

/* session_records.c: the first pass. */
int loader_on_record(struct loader *l, const struct vp_record *r);



/* session_jvm.c, after the samples. */
int loader_add_allocs(struct loader *l);

#endif
