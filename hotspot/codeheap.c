/* HotSpot's code cache, read through a memory reader: see codeheap.h. */
#define _GNU_SOURCE
#include "hotspot/codeheap.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/util.h"

#define FREE_SEGMENT 0xffu   /* the segment map's mark for a segment of no block */
#define MAX_DEPTH 1024       /* scopes per pc; HotSpot inlines far less deep */
#define MAX_HOPS 4096        /* segment-map steps back to a block's start */

static int64_t off(const struct vp_hs_vm *vm, enum vp_hs_fid k) { return vp_hs_vm__offset(vm, k); }

int vp_ch__init(struct vp_ch *c, const struct vp_hs_vm *vm, const struct vp_hs_mem *heap,
		const struct vp_hs_mem *safe, char *why, size_t whylen)
{
	uint64_t heaps = vp_hs_vm__address(vm, VP_HS_CODECACHE_HEAPS), major = vp_hs_vm__address(vm, VP_HS_VM_MAJOR);
	int32_t jdk = 0;

	memset(c, 0, sizeof(*c));
	c->heap = heap;
	c->safe = safe;
	c->vm = vm;
	if (!heaps || !major || vp_hs_mem__read(safe, major, &jdk, sizeof(jdk))) {
		snprintf(why, whylen, "no HotSpot code cache in the VM structure tables");
		return -ENOTSUP;
	}
	c->jdk = jdk;
	c->u5_base = c->jdk >= 20;   /* JDK-8292758 made UNSIGNED5 exclude the zero byte */
	c->heaps = (void *)(uintptr_t)heaps;
	c->ga_len = off(vm, VP_HS_GA_LEN);
	c->ga_data = off(vm, VP_HS_GA_DATA);
	c->heap_memory = off(vm, VP_HS_HEAP_MEMORY);
	c->heap_segmap = off(vm, VP_HS_HEAP_SEGMAP);
	c->heap_log2 = off(vm, VP_HS_HEAP_LOG2);
	c->vs_low_boundary = off(vm, VP_HS_VS_LOW_BOUNDARY);
	c->vs_high = off(vm, VP_HS_VS_HIGH);
	c->hb_length = off(vm, VP_HS_HB_LENGTH);
	c->hb_length_size = !strcmp(vm->f[VP_HS_HB_LENGTH].type_string, "size_t") ? 8 : 4;
	c->hb_used = off(vm, VP_HS_HB_USED);
	c->hb_size = (int64_t)vm->type_size[VP_HS_T_HEAPBLOCK];
	c->blob_size = off(vm, VP_HS_BLOB_SIZE);
	c->blob_name = off(vm, VP_HS_BLOB_NAME);
	c->blob_kind = off(vm, VP_HS_BLOB_KIND);
	c->kind_nmethod = vm->have_constant[VP_HS_C_KIND_NMETHOD] ? vm->constant[VP_HS_C_KIND_NMETHOD] : -1;
	c->blob_code_begin = off(vm, VP_HS_BLOB_CODE_BEGIN);
	c->blob_code_end = off(vm, VP_HS_BLOB_CODE_END);
	c->blob_code_offset = off(vm, VP_HS_BLOB_CODE_OFFSET);
	c->blob_data_offset = off(vm, VP_HS_BLOB_DATA_OFFSET);
	c->blob_mutable_data = off(vm, VP_HS_BLOB_MUTABLE_DATA);
	c->blob_mutable_size = off(vm, VP_HS_BLOB_MUTABLE_SIZE);
	c->blob_reloc_size = off(vm, VP_HS_BLOB_RELOC_SIZE);
	c->nm_method = off(vm, VP_HS_NM_METHOD);
	c->nm_state = off(vm, VP_HS_NM_STATE);
	c->nm_compile_id = off(vm, VP_HS_NM_COMPILE_ID);
	c->nm_level = off(vm, VP_HS_NM_LEVEL);
	c->nm_level_size = !strcmp(vm->f[VP_HS_NM_LEVEL].type_string, "int") ? 4 : 1;
	/* Optional: without it every compilation reads as a normal (not OSR) one. */
	c->nm_entry_bci = off(vm, VP_HS_NM_ENTRY_BCI);
	c->nm_pcs = off(vm, VP_HS_NM_PCS);
	c->nm_pcs_end = off(vm, VP_HS_NM_DEPS);
	c->nm_metadata = off(vm, VP_HS_NM_METADATA);
	c->nm_scopes_begin = off(vm, VP_HS_NM_SCOPES_BEGIN);
	c->nm_immutable = off(vm, VP_HS_NM_IMMUTABLE);
	c->nm_immutable_size = off(vm, VP_HS_NM_IMMUTABLE_SIZE);
	c->nm_scopes_data = off(vm, VP_HS_NM_SCOPES_DATA);
	c->pc_offset = off(vm, VP_HS_PC_OFFSET);
	c->pc_scope = off(vm, VP_HS_PC_SCOPE);
	c->pc_size = (int64_t)vm->type_size[VP_HS_T_PCDESC];
	c->m_const = off(vm, VP_HS_METHOD_CONST);
	c->cm_constants = off(vm, VP_HS_CM_CONSTANTS);
	c->cm_name = off(vm, VP_HS_CM_NAME);
	c->cm_sig = off(vm, VP_HS_CM_SIG);
	c->cp_holder = off(vm, VP_HS_CP_HOLDER);
	c->cp_size = (int64_t)vm->type_size[VP_HS_T_CONSTANTPOOL];
	c->k_name = off(vm, VP_HS_KLASS_NAME);
	c->sym_len = off(vm, VP_HS_SYM_LENGTH);
	c->sym_body = off(vm, VP_HS_SYM_BODY);

	bool common = c->ga_len >= 0 && c->ga_data >= 0 && c->heap_memory >= 0 && c->heap_segmap >= 0 &&
		      c->heap_log2 >= 0 && c->vs_low_boundary >= 0 && c->vs_high >= 0 && c->hb_length >= 0 &&
		      c->hb_used >= 0 && c->hb_size > 0 && c->blob_size >= 0 && c->nm_method >= 0 && c->nm_state >= 0 &&
		      c->nm_compile_id >= 0 && c->nm_level >= 0 && c->pc_offset >= 0 && c->pc_scope >= 0 &&
		      c->pc_size >= 8 && c->nm_pcs >= 0;
	/* JDK 17-22: code pointers in CodeBlob, all debug information inside the nmethod. */
	bool inside = c->blob_name >= 0 && c->blob_code_begin >= 0 && c->blob_code_end >= 0 && c->nm_pcs_end >= 0 &&
		      c->nm_metadata >= 0 && c->nm_scopes_begin >= 0;
	/* JDK 25: offsets in CodeBlob, a kind, immutable and mutable data beside it. */
	bool split = c->blob_kind >= 0 && c->kind_nmethod >= 0 && c->blob_code_offset >= 0 &&
		     c->blob_data_offset >= 0 && c->blob_mutable_data >= 0 && c->blob_mutable_size >= 0 &&
		     c->blob_reloc_size >= 0 && c->nm_immutable >= 0 && c->nm_immutable_size >= 0 &&
		     c->nm_scopes_data >= 0;
	if (!common || (!inside && !split)) {
		snprintf(why, whylen, "JDK %d's code cache layout is not one this agent reads", c->jdk);
		return -ENOTSUP;
	}
	c->split_data = !inside;
	return 0;
}

/* ---- the heaps and their segment maps ---- */

int vp_hs__code_heaps(const struct vp_hs_vm *vm, const struct vp_hs_mem *m, struct vp_hs_heap *out, int *n,
		      char *err, size_t errlen)
{
	uint64_t cell = vp_hs_vm__address(vm, VP_HS_CODECACHE_HEAPS), ga = 0, data = 0;
	int64_t o_len = vp_hs_vm__offset(vm, VP_HS_GA_LEN), o_data = vp_hs_vm__offset(vm, VP_HS_GA_DATA);
	int64_t o_mem = vp_hs_vm__offset(vm, VP_HS_HEAP_MEMORY), o_seg = vp_hs_vm__offset(vm, VP_HS_HEAP_SEGMAP);
	int64_t o_log2 = vp_hs_vm__offset(vm, VP_HS_HEAP_LOG2);
	int64_t o_lb = vp_hs_vm__offset(vm, VP_HS_VS_LOW_BOUNDARY), o_lo = vp_hs_vm__offset(vm, VP_HS_VS_LOW);
	int64_t o_hi = vp_hs_vm__offset(vm, VP_HS_VS_HIGH), o_hb = vp_hs_vm__offset(vm, VP_HS_VS_HIGH_BOUNDARY);
	int32_t len = 0;

	*n = 0;
	if (!cell || o_len < 0 || o_data < 0 || o_mem < 0 || o_seg < 0 || o_log2 < 0) {
		snprintf(err, errlen, "this JVM's VM structure table does not describe its code heaps");
		return -ENOTSUP;
	}
	if (vp_hs_mem__read(m, cell, &ga, 8))
		goto fault;
	if (!ga) {
		snprintf(err, errlen, "the JVM has not created its code heaps yet: JVM not initialised yet, try again");
		return -EAGAIN;
	}
	if (vp_hs_mem__read(m, ga + (uint64_t)o_len, &len, 4) || vp_hs_mem__read(m, ga + (uint64_t)o_data, &data, 8))
		goto fault;
	if (len == 0) {
		snprintf(err, errlen, "the JVM has no code heaps yet: JVM not initialised yet, try again");
		return -EAGAIN;
	}
	if (len < 0 || len > VP_HS_MAX_HEAPS || !data) {
		snprintf(err, errlen, "CodeCache::_heaps lists %d heaps at %#llx: corrupt", len, (unsigned long long)data);
		return -ENOTSUP;
	}
	for (int i = 0; i < len; i++) {
		struct vp_hs_heap *h = &out[i];
		uint64_t mem, seg;

		memset(h, 0, sizeof(*h));
		if (vp_hs_mem__read(m, data + 8 * (uint64_t)i, &h->heap, 8) || !h->heap)
			goto fault;
		mem = h->heap + (uint64_t)o_mem;
		seg = h->heap + (uint64_t)o_seg;
		/* Each bound the table names (a JDK without one leaves it 0). */
		if ((o_lb >= 0 && (vp_hs_mem__read(m, mem + (uint64_t)o_lb, &h->low_boundary, 8) ||
				   vp_hs_mem__read(m, seg + (uint64_t)o_lb, &h->segmap_low_boundary, 8))) ||
		    (o_lo >= 0 && (vp_hs_mem__read(m, mem + (uint64_t)o_lo, &h->low, 8) ||
				   vp_hs_mem__read(m, seg + (uint64_t)o_lo, &h->segmap_low, 8))) ||
		    (o_hi >= 0 && (vp_hs_mem__read(m, mem + (uint64_t)o_hi, &h->high, 8) ||
				   vp_hs_mem__read(m, seg + (uint64_t)o_hi, &h->segmap_high, 8))) ||
		    (o_hb >= 0 && vp_hs_mem__read(m, mem + (uint64_t)o_hb, &h->high_boundary, 8)) ||
		    vp_hs_mem__read(m, h->heap + (uint64_t)o_log2, &h->log2_seg, 4))
			goto fault;
	}
	*n = len;
	return 0;
fault:
	snprintf(err, errlen, "cannot read the JVM's code heaps where its VM structure table points (process gone?)");
	return -EFAULT;
}

int vp_hs__segmap_start(const struct vp_hs_mem *m, uint64_t segmap, uint64_t seg, uint32_t max_hops,
			uint64_t *start, uint32_t *hops)
{
	uint8_t b = 0;
	uint32_t k;

	for (k = 0; k < max_hops; k++) {
		if (vp_hs_mem__read(m, segmap + seg, &b, 1))
			return -EFAULT;
		if (b == FREE_SEGMENT)
			return -ENOENT;
		if (b == 0)
			break;
		if (seg < b)
			return -EINVAL;
		seg -= b;
	}
	if (b != 0)
		return -ELOOP;
	*start = seg;
	*hops = k;
	return 0;
}

/* ---- the agent's view: nmethods in the committed part of each heap ---- */

/* Reads through the heap reader; 0 where it fails. The agent's reader (plain loads) is
 * inlined here: a walk makes about ten reads per block of the heaps, thousands of blocks
 * a walk, and an indirect call each showed in its profile. */
static inline bool direct(const struct vp_ch *c, uint64_t a)
{
	return c->heap == &vp_hs_mem_direct && a >= 4096;
}
static uint64_t rd_ptr(const struct vp_ch *c, uint64_t a)
{
	uint64_t v = 0;
	if (direct(c, a))
		return *(const volatile uint64_t *)(uintptr_t)a;
	return vp_hs_mem__read(c->heap, a, &v, 8) ? 0 : v;
}
static int32_t rd_i32(const struct vp_ch *c, uint64_t a)
{
	int32_t v = 0;
	if (direct(c, a))
		return *(const volatile int32_t *)(uintptr_t)a;
	return vp_hs_mem__read(c->heap, a, &v, 4) ? 0 : v;
}
static uint8_t rd_u8(const struct vp_ch *c, uint64_t a)
{
	uint8_t v = 0;
	if (direct(c, a))
		return *(const volatile uint8_t *)(uintptr_t)a;
	return vp_hs_mem__read(c->heap, a, &v, 1) ? 0 : v;
}
static bool safe_read(const struct vp_ch *c, uint64_t a, void *out, size_t len)
{
	return vp_hs_mem__read(c->safe, a, out, len) == 0;
}

/* Two safe reads; in this process one process_vm_readv for both (JDK 25's decode reads
 * an nmethod's immutable and mutable data: a system call each was a third of the
 * agent's cost per new nmethod). */
static bool safe_read2(const struct vp_ch *c, uint64_t a1, void *o1, size_t l1, uint64_t a2, void *o2, size_t l2)
{
	if (c->safe == &vp_hs_mem_self && a1 >= 4096 && a2 >= 4096) {
		struct iovec local[2] = { { o1, l1 }, { o2, l2 } };
		struct iovec remote[2] = { { (void *)(uintptr_t)a1, l1 }, { (void *)(uintptr_t)a2, l2 } };
		return process_vm_readv(getpid(), local, 2, remote, 2, 0) == (ssize_t)(l1 + l2);
	}
	return (!l1 || safe_read(c, a1, o1, l1)) && (!l2 || safe_read(c, a2, o2, l2));
}

struct heap {
	uint64_t low, high, segmap, segmap_high;
	int log2;
};

/* The heaps set up so far, in address order so that a walk meets all blocks in address
 * order. -EAGAIN when they cannot be listed. */
static int heaps(const struct vp_ch *c, struct heap *out, int max)
{
	struct vp_hs_heap all[VP_HS_MAX_HEAPS];
	char why[160];
	int n = 0, k = 0;

	if (vp_hs__code_heaps(c->vm, c->heap, all, &n, why, sizeof(why)))
		return -EAGAIN;
	for (int i = 0; i < n && k < max; i++) {
		struct heap *x = &out[k];
		x->low = all[i].low_boundary;
		x->high = all[i].high;
		x->segmap = all[i].segmap_low_boundary;
		x->segmap_high = all[i].segmap_high;
		x->log2 = all[i].log2_seg;
		if (x->low && x->high > x->low && x->segmap && x->segmap_high > x->segmap && x->log2 > 0 && x->log2 < 16)
			k++;
	}
	for (int i = 1; i < k; i++)
		for (int j = i; j > 0 && out[j - 1].low > out[j].low; j--) {
			struct heap t = out[j];
			out[j] = out[j - 1];
			out[j - 1] = t;
		}
	return k;
}

/* The name pointers seen so far and whether each says "nmethod" (JDK 17-22, whose blobs
 * have no kind). A CodeBlob's name is a string constant in libjvm: the pointer's string
 * is read through the safe reader (a block being built can hold anything where its name
 * will be), and remembered once read. Two walks may fill it at once (the agent's thread
 * and the one at a GC's start, which must not lock): a slot is taken atomically and its
 * pointer published after its answer, so a reader sees a whole entry or none. */
#define NAMES_MAX 256
static struct { uint64_t ptr; bool nmethod; } names[NAMES_MAX];
static int nnames;

static bool named_nmethod(const struct vp_ch *c, uint64_t p)
{
	char name[16];
	int n = __atomic_load_n(&nnames, __ATOMIC_ACQUIRE);

	for (int i = 0; i < n && i < NAMES_MAX; i++)
		if (__atomic_load_n(&names[i].ptr, __ATOMIC_ACQUIRE) == p)
			return names[i].nmethod;
	if (p < 4096 || vp_hs_mem__str(c->safe, p, name, sizeof(name)) == -EFAULT)
		return false;
	/* Native method wrappers are nmethods too, named so. */
	bool is = !strcmp(name, "nmethod") || !strcmp(name, "native nmethod");
	int slot = __atomic_load_n(&nnames, __ATOMIC_RELAXED) < NAMES_MAX ? __atomic_fetch_add(&nnames, 1, __ATOMIC_ACQ_REL)
									  : NAMES_MAX;
	if (slot < NAMES_MAX) {
		names[slot].nmethod = is;
		__atomic_store_n(&names[slot].ptr, p, __ATOMIC_RELEASE);
	}
	return is;
}

/* Fills nm for the blob of a used block of `bytes` bytes; false when it is no nmethod
 * or does not fit its block. */
static bool read_nm(const struct vp_ch *c, uint64_t blob, uint64_t bytes, struct vp_ch_nm *nm)
{
	int32_t size = rd_i32(c, blob + (uint64_t)c->blob_size);
	uint64_t begin, end;

	if (size <= 0 || (uint64_t)size > bytes)
		return false;
	if (c->split_data) {
		if (rd_u8(c, blob + (uint64_t)c->blob_kind) != (uint8_t)c->kind_nmethod)
			return false;
		int32_t co = rd_i32(c, blob + (uint64_t)c->blob_code_offset), dof = rd_i32(c, blob + (uint64_t)c->blob_data_offset);
		if (co <= 0 || dof < co || dof > size)
			return false;
		begin = blob + (uint64_t)co;
		end = blob + (uint64_t)dof;
	} else {
		if (!named_nmethod(c, rd_ptr(c, blob + (uint64_t)c->blob_name)))
			return false;
		begin = rd_ptr(c, blob + (uint64_t)c->blob_code_begin);
		end = rd_ptr(c, blob + (uint64_t)c->blob_code_end);
		if (begin <= blob || end < begin || end > blob + (uint64_t)size)
			return false;
	}
	nm->blob = blob;
	nm->code_start = begin;
	nm->code_size = (uint32_t)(end - begin);
	nm->method = rd_ptr(c, blob + (uint64_t)c->nm_method);
	nm->compile_id = rd_i32(c, blob + (uint64_t)c->nm_compile_id);
	nm->state = (int8_t)rd_u8(c, blob + (uint64_t)c->nm_state);
	nm->level = (int8_t)(c->nm_level_size == 4 ? rd_i32(c, blob + (uint64_t)c->nm_level) : rd_u8(c, blob + (uint64_t)c->nm_level));
	/* HotSpot's InvocationEntryBci (-1) marks a compilation entered at its start; an OSR
	 * one is entered at the bci of a loop. */
	nm->osr = c->nm_entry_bci >= 0 && rd_i32(c, blob + (uint64_t)c->nm_entry_bci) != -1;
	return nm->method && !(nm->method & 7);
}

/* The length in segments of the heap block at b (its HeapBlock header). */
static uint64_t block_len(const struct vp_ch *c, uint64_t b)
{
	return c->hb_length_size == 8 ? rd_ptr(c, b + (uint64_t)c->hb_length) : (uint32_t)rd_i32(c, b + (uint64_t)c->hb_length);
}

/* The nmethod in the used block at b of len segments of heap h, if it holds one. */
static bool block_nm(const struct vp_ch *c, const struct heap *h, uint64_t b, uint64_t len, struct vp_ch_nm *nm)
{
	return read_nm(c, b + (uint64_t)c->hb_size, (len << h->log2) - (uint64_t)c->hb_size, nm);
}

/* Fills b for the blob of a used block of `bytes` bytes that holds no nmethod; false
 * when its code does not fit the block or its name cannot be read. */
static bool read_blob(const struct vp_ch *c, uint64_t blob, uint64_t bytes, struct vp_ch_blob *b)
{
	int32_t size = rd_i32(c, blob + (uint64_t)c->blob_size);
	uint64_t begin, end;

	if (size <= 0 || (uint64_t)size > bytes || c->blob_name < 0)
		return false;
	if (c->split_data) {
		int32_t co = rd_i32(c, blob + (uint64_t)c->blob_code_offset), dof = rd_i32(c, blob + (uint64_t)c->blob_data_offset);
		if (co <= 0 || dof < co || dof > size)
			return false;
		begin = blob + (uint64_t)co;
		end = blob + (uint64_t)dof;
	} else {
		begin = rd_ptr(c, blob + (uint64_t)c->blob_code_begin);
		end = rd_ptr(c, blob + (uint64_t)c->blob_code_end);
		if (begin <= blob || end < begin || end > blob + (uint64_t)size)
			return false;
	}
	/* Names are string constants, a few hundred: each read once (one caller at a time:
	 * only vp_ch__walk_all's blob callers come here). */
	static struct { uint64_t ptr; char name[sizeof(b->name)]; } seen[512];
	static size_t nseen;
	uint64_t np = rd_ptr(c, blob + (uint64_t)c->blob_name);
	size_t k = 0;
	while (k < nseen && seen[k].ptr != np)
		k++;
	if (k < nseen) {
		memcpy(b->name, seen[k].name, sizeof(b->name));
	} else {
		if (np < 4096 || vp_hs_mem__str(c->safe, np, b->name, sizeof(b->name)) == -EFAULT)
			return false;
		if (nseen < sizeof(seen) / sizeof(seen[0])) {
			seen[nseen].ptr = np;
			memcpy(seen[nseen++].name, b->name, sizeof(b->name));
		}
	}
	b->blob = blob;
	b->code_start = begin;
	b->code_size = (uint32_t)(end - begin);
	return true;
}

/* Is the used block at b an nmethod's (by its kind, or its name before JDK 23)? */
static bool block_is_nm(const struct vp_ch *c, uint64_t b)
{
	uint64_t blob = b + (uint64_t)c->hb_size;
	return c->split_data ? rd_u8(c, blob + (uint64_t)c->blob_kind) == (uint8_t)c->kind_nmethod
			     : named_nmethod(c, rd_ptr(c, blob + (uint64_t)c->blob_name));
}

/* How many bytes from a block's start a walk reads (read_nm's fields), for the
 * prefetch; 0 when the heaps are not read with plain loads (nothing to prefetch). */
static uint64_t walk_span(const struct vp_ch *c)
{
	const int64_t o[] = { c->blob_size, c->blob_name, c->blob_kind, c->blob_code_begin, c->blob_code_end,
			      c->blob_code_offset, c->blob_data_offset, c->nm_method, c->nm_state, c->nm_compile_id,
			      c->nm_level, c->nm_entry_bci };
	int64_t max = 0;
	if (c->heap != &vp_hs_mem_direct)
		return 0;
	for (size_t i = 0; i < sizeof(o) / sizeof(o[0]); i++)
		if (o[i] > max)
			max = o[i];
	return (uint64_t)c->hb_size + (uint64_t)max + 8;
}

#define PREFETCH_BLOCKS 8
/* A walk goes from block to block by each one's length, a chain of dependent loads that
 * each miss the cache (javac's heaps: ~2,400 blocks, 225 ns a block). The segment map,
 * a byte per segment read in order, says where the next blocks start (a zero byte): their
 * headers and nmethod fields are prefetched PREFETCH_BLOCKS blocks ahead, so the misses
 * overlap. Only a hint: a map that changes meanwhile costs a useless prefetch, never a
 * wrong read (the walk itself still follows the lengths). */
static void prefetch_blocks(const struct vp_ch *c, const struct heap *h, uint64_t seg, uint64_t nseg, uint64_t span,
			    uint64_t *pf, unsigned *ahead)
{
	const uint8_t *map = (const uint8_t *)(uintptr_t)h->segmap;
	if (*pf <= seg) {
		*pf = seg + 1;
		*ahead = 0;
	} else if (*ahead) {
		(*ahead)--;   /* this block's start was one of them */
	}
	while (*ahead < PREFETCH_BLOCKS && *pf < nseg) {
		const uint8_t *z = memchr(map + *pf, 0, nseg - *pf);
		if (!z) {
			*pf = nseg;
			break;
		}
		uint64_t at = (uint64_t)(z - map), b = h->low + (at << h->log2);
		for (uint64_t o = 0; o < span; o += 64)
			__builtin_prefetch((const void *)(uintptr_t)(b + o));
		*pf = at + 1;
		(*ahead)++;
	}
}

int vp_ch__walk(const struct vp_ch *c, vp_ch_visit_fn fn, void *ctx)
{
	return vp_ch__walk_all(c, fn, NULL, ctx);
}

int vp_ch__walk_all(const struct vp_ch *c, vp_ch_visit_fn fn, vp_ch_blob_fn blob_fn, void *ctx)
{
	struct heap hs[VP_HS_MAX_HEAPS];
	int nh = heaps(c, hs, VP_HS_MAX_HEAPS);

	if (nh < 0)
		return nh;
	uint64_t span = walk_span(c);
	for (int i = 0; i < nh; i++) {
		const struct heap *h = &hs[i];
		uint64_t nseg = (h->high - h->low) >> h->log2, mapped = h->segmap_high - h->segmap;
		uint64_t pf = 0;     /* the segment map is searched for block starts up to here */
		unsigned ahead = 0;  /* ... and that many starts after this block's were prefetched */
		if (nseg > mapped)
			nseg = mapped;
		for (uint64_t seg = 0; seg < nseg;) {
			if (span)
				prefetch_blocks(c, h, seg, nseg, span, &pf, &ahead);
			uint64_t b = h->low + (seg << h->log2), len = block_len(c, b);
			if (len == 0)
				break;   /* past the last block ever allocated: never-written memory */
			if (len > nseg - seg)
				return -EAGAIN;
			if (rd_u8(c, b + (uint64_t)c->hb_used)) {
				struct vp_ch_nm nm;
				/* A used block starts where the segment map says blocks start. */
				if (rd_u8(c, h->segmap + seg) != 0)
					return -EAGAIN;
				if (block_nm(c, h, b, len, &nm)) {
					int err = fn(ctx, &nm);
					if (err)
						return err;
				} else if (blob_fn && !block_is_nm(c, b)) {
					struct vp_ch_blob bl;
					if (read_blob(c, b + (uint64_t)c->hb_size, (len << h->log2) - (uint64_t)c->hb_size, &bl)) {
						int err = blob_fn(ctx, &bl);
						if (err)
							return err;
					}
				}
			}
			seg += len;
		}
	}
	return 0;
}

int vp_ch__find(const struct vp_ch *c, uint64_t pc, struct vp_ch_nm *out)
{
	struct heap hs[VP_HS_MAX_HEAPS];
	int nh = heaps(c, hs, VP_HS_MAX_HEAPS);

	for (int i = 0; i < nh; i++) {
		const struct heap *h = &hs[i];
		uint64_t seg, start;
		uint32_t hops;

		if (pc < h->low || pc >= h->high)
			continue;
		seg = (pc - h->low) >> h->log2;
		if (seg >= h->segmap_high - h->segmap ||
		    vp_hs__segmap_start(c->heap, h->segmap, seg, MAX_HOPS, &start, &hops))
			return -ENOENT;
		uint64_t b = h->low + (start << h->log2), len = block_len(c, b);
		if (!rd_u8(c, b + (uint64_t)c->hb_used) || !len || !block_nm(c, h, b, len, out))
			return -ENOENT;
		return pc >= out->code_start && pc < out->code_start + out->code_size ? 0 : -ENOENT;
	}
	return -ENOENT;
}

/* ---- decoding (from copies) ---- */

/* HotSpot's UNSIGNED5 (CompressedReadStream::read_int): up to five bytes, each below 192
 * ends the number, each carries 6 more bits above the first byte's value; since JDK 20
 * every byte is stored plus one so that none is zero. */
int vp_hs__unsigned5(const uint8_t **p, const uint8_t *end, int base, uint32_t *out)
{
	if (*p >= end)
		return -EINVAL;
	uint32_t b = *(*p)++;
	uint32_t v = b - (uint32_t)base;
	if (b >= 192) {
		for (int shift = 6, i = 1; i < 5; shift += 6, i++) {
			if (*p >= end)
				return -EINVAL;
			b = *(*p)++;
			v += (b - (uint32_t)base) << shift;
			if (b < 192)
				break;
		}
	}
	*out = v;
	return 0;
}

int vp_ch__scopes(const struct vp_ch *c, const struct vp_ch_nm *nm, struct vp_ch_scopes *s)
{
	const uint8_t *pcs, *pcs_end, *sd, *sd_end, *meta;
	uint64_t nmeta;


	s->npcs = s->nframes = 0;
	if (!c->split_data) {
		/* Everything sits in the nmethod, in the code heap, which stays mapped: read the
		 * offsets in place, copy the metadata, scopes and pc descriptors (contiguous, in
		 * that order), then check it is still the same nmethod. */
		uint64_t size = (uint64_t)rd_i32(c, nm->blob + (uint64_t)c->blob_size);
		int32_t po = rd_i32(c, nm->blob + (uint64_t)c->nm_pcs), pe = rd_i32(c, nm->blob + (uint64_t)c->nm_pcs_end);
		int32_t mo = rd_i32(c, nm->blob + (uint64_t)c->nm_metadata);
		uint64_t sdp = rd_ptr(c, nm->blob + (uint64_t)c->nm_scopes_begin);
		if (size > (64u << 20) || po < 0 || pe < po || (uint64_t)pe > size || mo < 0 || mo > po ||
		    sdp < nm->blob + (uint64_t)mo || sdp > nm->blob + (uint64_t)po)
			return -EINVAL;
		if (vp_grow((void **)&s->buf, &s->cap_buf, (size_t)(pe - mo) + 1, 1))
			return -ENOMEM;
		if (vp_hs_mem__read(c->heap, nm->blob + (uint64_t)mo, s->buf, (size_t)(pe - mo)))
			return -EAGAIN;
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (rd_i32(c, nm->blob + (uint64_t)c->nm_compile_id) != nm->compile_id ||
		    rd_ptr(c, nm->blob + (uint64_t)c->nm_method) != nm->method)
			return -EAGAIN;
		const uint8_t *b = s->buf - mo;   /* b + offset-in-nmethod, for offsets >= mo */
		pcs = b + po;
		pcs_end = b + pe;
		sd = b + (sdp - nm->blob);
		sd_end = pcs;
		meta = b + mo;
		nmeta = (sdp - nm->blob - (uint64_t)mo) / 8;
	} else {
		/* The header sits in the code heap (read in place); the immutable data (pc
		 * descriptors, then scopes) and the mutable data (relocations, then the metadata
		 * table) are malloc'ed beside it and freed with it, possibly while this reads
		 * them: the safe reader copies both parts, then the header is checked. */
		int32_t isz = rd_i32(c, nm->blob + (uint64_t)c->nm_immutable_size), po = rd_i32(c, nm->blob + (uint64_t)c->nm_pcs);
		int32_t so = rd_i32(c, nm->blob + (uint64_t)c->nm_scopes_data);
		int32_t msz = rd_i32(c, nm->blob + (uint64_t)c->blob_mutable_size);
		int32_t rsz = rd_i32(c, nm->blob + (uint64_t)c->blob_reloc_size);
		uint64_t imm = rd_ptr(c, nm->blob + (uint64_t)c->nm_immutable), mut = rd_ptr(c, nm->blob + (uint64_t)c->blob_mutable_data);
		if (!imm || isz < 0 || isz > (64 << 20) || po < 0 || so < po || so > isz || !mut || rsz < 0 || msz < rsz ||
		    msz > (64 << 20))
			return -EINVAL;
		size_t il = (size_t)(isz - po), ml = (size_t)(msz - rsz);
		if (vp_grow((void **)&s->buf, &s->cap_buf, il + 1, 1) || vp_grow((void **)&s->buf2, &s->cap_buf2, ml + 1, 1))
			return -ENOMEM;
		if (!safe_read2(c, imm + (uint64_t)po, s->buf, il, mut + (uint64_t)rsz, s->buf2, ml))
			return -EAGAIN;
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (rd_i32(c, nm->blob + (uint64_t)c->nm_compile_id) != nm->compile_id ||
		    rd_ptr(c, nm->blob + (uint64_t)c->nm_method) != nm->method ||
		    rd_ptr(c, nm->blob + (uint64_t)c->nm_immutable) != imm)
			return -EAGAIN;
		pcs = s->buf;
		pcs_end = s->buf + (so - po);
		sd = pcs_end;
		sd_end = s->buf + il;
		meta = s->buf2;
		nmeta = ml / 8;
	}

	for (const uint8_t *p = pcs; p + c->pc_size <= pcs_end; p += c->pc_size) {
		int32_t pco, so;
		memcpy(&pco, p + c->pc_offset, 4);
		memcpy(&so, p + c->pc_scope, 4);
		/* Offset 0 is DebugInformationRecorder::serialized_null: no scope (the sentinels
		 * before the first and after the last pc). */
		if (so == 0 || pco < 0 || (uint32_t)pco > nm->code_size)
			continue;
		if (vp_grow((void **)&s->pcs, &s->cap_pcs, s->npcs + 1, sizeof(*s->pcs)))
			return -ENOMEM;
		struct vp_ch_pc *pc = &s->pcs[s->npcs];
		*pc = (struct vp_ch_pc){ .pc_offset = (uint32_t)pco, .first = s->nframes };
		for (uint32_t at = (uint32_t)so; at != 0;) {
			const uint8_t *q = sd + at;
			uint32_t sender, midx, bci;
			if (at >= (uint64_t)(sd_end - sd) || pc->depth == MAX_DEPTH)
				return -EINVAL;
			if (vp_hs__unsigned5(&q, sd_end, c->u5_base, &sender) || vp_hs__unsigned5(&q, sd_end, c->u5_base, &midx) ||
			    vp_hs__unsigned5(&q, sd_end, c->u5_base, &bci) || midx > nmeta)
				return -EINVAL;
			if (vp_grow((void **)&s->frames, &s->cap_frames, s->nframes + 1, sizeof(*s->frames)))
				return -ENOMEM;
			uint64_t m = 0;
			if (midx)
				memcpy(&m, meta + (midx - 1) * 8, 8);
			/* read_bci: the stored value is bci - InvocationEntryBci (-1). */
			s->frames[s->nframes++] = (struct vp_ch_frame){ .method = m, .bci = (int32_t)bci - 1 };
			pc->depth++;
			at = sender;
		}
		s->npcs++;
	}
	return 0;
}

void vp_ch__scopes_free(struct vp_ch_scopes *s)
{
	if (!s)
		return;
	free(s->pcs);
	free(s->frames);
	free(s->buf);
	free(s->buf2);
	memset(s, 0, sizeof(*s));
}

/* A Symbol's text into out (cut to outlen - 1 bytes). */
static int symbol(const struct vp_ch *c, uint64_t sym, char *out, size_t outlen)
{
	uint16_t len;
	if (!safe_read(c, sym + (uint64_t)c->sym_len, &len, 2))
		return -EFAULT;
	size_t n = len < outlen ? len : outlen - 1;
	if (!safe_read(c, sym + (uint64_t)c->sym_body, out, n))
		return -EFAULT;
	out[n] = '\0';
	return 0;
}

int vp_ch__method_names(const struct vp_ch *c, uint64_t m, char *klass, size_t kl, char *name, size_t nl, char *sig,
			size_t sl)
{
	uint64_t cm, cp, holder, ksym, nsym, ssym;
	uint16_t ni, si;

	if (c->m_const < 0 || c->cm_constants < 0 || c->cm_name < 0 || c->cm_sig < 0 || c->cp_holder < 0 ||
	    c->cp_size <= 0 || c->k_name < 0 || c->sym_len < 0 || c->sym_body < 0 || kl < 3)
		return -EFAULT;
	if (!safe_read(c, m + (uint64_t)c->m_const, &cm, 8) || !safe_read(c, cm + (uint64_t)c->cm_constants, &cp, 8) ||
	    !safe_read(c, cm + (uint64_t)c->cm_name, &ni, 2) || !safe_read(c, cm + (uint64_t)c->cm_sig, &si, 2) ||
	    !safe_read(c, cp + (uint64_t)c->cp_holder, &holder, 8) || !safe_read(c, holder + (uint64_t)c->k_name, &ksym, 8))
		return -EFAULT;
	/* The pool's entries follow the ConstantPool; a symbol entry is the Symbol*. Reads
	 * that go wrong fail; a wrong symbol shows in the signature's shape, checked below. */
	if (!ni || !si || !safe_read(c, cp + (uint64_t)c->cp_size + (uint64_t)ni * 8, &nsym, 8) ||
	    !safe_read(c, cp + (uint64_t)c->cp_size + (uint64_t)si * 8, &ssym, 8))
		return -EFAULT;
	klass[0] = 'L';
	if (symbol(c, ksym, klass + 1, kl - 2) || symbol(c, nsym, name, nl) || symbol(c, ssym, sig, sl))
		return -EFAULT;
	strcat(klass, ";");
	return sig[0] == '(' ? 0 : -EFAULT;
}
