/* HotSpot's code cache, read in the JVM's own process: see codeheap.h. */
#define _GNU_SOURCE
#include "hotspot/codeheap.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/util.h"
#include "hotspot/vmstructs.h"

#define FREE_SEGMENT 0xffu   /* the segment map's mark for a segment of no block */
#define MAX_DEPTH 1024       /* scopes per pc; HotSpot inlines far less deep */
#define MAX_HOPS 4096        /* segment-map steps back to a block's start */

enum {
	F_HEAPS, F_GA_LEN, F_GA_DATA, F_MEMORY, F_SEGMAP, F_LOG2, F_VS_LOW, F_VS_HIGH, F_HB_LEN, F_HB_USED,
	F_BLOB_SIZE, F_BLOB_NAME, F_BLOB_KIND, F_CODE_BEGIN, F_CODE_END, F_CODE_OFF, F_DATA_OFF, F_MUT, F_MUT_SIZE,
	F_RELOC_SIZE, F_CM_METHOD, F_NM_METHOD, F_STATE, F_COMPILE_ID, F_LEVEL, F_PCS, F_DEPS,
	F_METADATA, F_SCOPES_BEGIN, F_IMM, F_IMM_SIZE, F_SCOPES_DATA, F_PC_OFFSET, F_PC_SCOPE, F_MAJOR, F_M_CONST, F_CM_CONSTANTS, F_CM_NAME, F_CM_SIG, F_CP_HOLDER, F_K_NAME,
	F_SYM_LEN, F_SYM_BODY, F_ENTRY_BCI, F_N
};

static int64_t off(const struct vp_vm_field *f) { return f->found && !f->is_static ? (int64_t)f->offset : -1; }

int vp_ch__init(struct vp_ch *c, void *h, char *why, size_t whylen)
{
	struct vp_vm_field f[F_N] = {
		[F_HEAPS] = { "CodeCache", "_heaps" }, [F_GA_LEN] = { "GrowableArrayBase", "_len" },
		[F_GA_DATA] = { "GrowableArray<int>", "_data" }, [F_MEMORY] = { "CodeHeap", "_memory" },
		[F_SEGMAP] = { "CodeHeap", "_segmap" }, [F_LOG2] = { "CodeHeap", "_log2_segment_size" },
		[F_VS_LOW] = { "VirtualSpace", "_low_boundary" }, [F_VS_HIGH] = { "VirtualSpace", "_high" },
		[F_HB_LEN] = { "HeapBlock::Header", "_length" }, [F_HB_USED] = { "HeapBlock::Header", "_used" },
		[F_BLOB_SIZE] = { "CodeBlob", "_size" }, [F_BLOB_NAME] = { "CodeBlob", "_name" },
		[F_BLOB_KIND] = { "CodeBlob", "_kind" }, [F_CODE_BEGIN] = { "CodeBlob", "_code_begin" },
		[F_CODE_END] = { "CodeBlob", "_code_end" }, [F_CODE_OFF] = { "CodeBlob", "_code_offset" },
		[F_DATA_OFF] = { "CodeBlob", "_data_offset" }, [F_MUT] = { "CodeBlob", "_mutable_data" },
		[F_MUT_SIZE] = { "CodeBlob", "_mutable_data_size" }, [F_RELOC_SIZE] = { "CodeBlob", "_relocation_size" },
		[F_CM_METHOD] = { "CompiledMethod", "_method" }, [F_NM_METHOD] = { "nmethod", "_method" },
		[F_STATE] = { "nmethod", "_state" }, [F_COMPILE_ID] = { "nmethod", "_compile_id" },
		[F_LEVEL] = { "nmethod", "_comp_level" },
		[F_PCS] = { "nmethod", "_scopes_pcs_offset" }, [F_DEPS] = { "nmethod", "_dependencies_offset" },
		[F_METADATA] = { "nmethod", "_metadata_offset" },
		[F_SCOPES_BEGIN] = { "CompiledMethod", "_scopes_data_begin" },
		[F_IMM] = { "nmethod", "_immutable_data" }, [F_IMM_SIZE] = { "nmethod", "_immutable_data_size" },
		[F_SCOPES_DATA] = { "nmethod", "_scopes_data_offset" }, [F_PC_OFFSET] = { "PcDesc", "_pc_offset" },
		[F_PC_SCOPE] = { "PcDesc", "_scope_decode_offset" }, [F_MAJOR] = { "Abstract_VM_Version", "_vm_major_version" },
		[F_M_CONST] = { "Method", "_constMethod" }, [F_CM_CONSTANTS] = { "ConstMethod", "_constants" },
		[F_CM_NAME] = { "ConstMethod", "_name_index" }, [F_CM_SIG] = { "ConstMethod", "_signature_index" },
		[F_CP_HOLDER] = { "ConstantPool", "_pool_holder" }, [F_K_NAME] = { "Klass", "_name" },
		[F_SYM_LEN] = { "Symbol", "_length" }, [F_SYM_BODY] = { "Symbol", "_body" },
		[F_ENTRY_BCI] = { "nmethod", "_entry_bci" },
	};
	int32_t kind = -1;

	memset(c, 0, sizeof(*c));
	vp_vm__find_fields(h, f, F_N);
	if (!f[F_HEAPS].found || !f[F_HEAPS].is_static || !f[F_HEAPS].address || !f[F_MAJOR].found ||
	    !f[F_MAJOR].is_static || !f[F_MAJOR].address) {
		snprintf(why, whylen, "no HotSpot code cache in the VM structure tables");
		return -ENOTSUP;
	}
	c->jdk = *(const int *)f[F_MAJOR].address;
	c->u5_base = c->jdk >= 20;   /* JDK-8292758 made UNSIGNED5 exclude the zero byte */
	c->heaps = f[F_HEAPS].address;
	c->ga_len = off(&f[F_GA_LEN]);
	c->ga_data = off(&f[F_GA_DATA]);
	c->heap_memory = off(&f[F_MEMORY]);
	c->heap_segmap = off(&f[F_SEGMAP]);
	c->heap_log2 = off(&f[F_LOG2]);
	c->vs_low_boundary = off(&f[F_VS_LOW]);
	c->vs_high = off(&f[F_VS_HIGH]);
	c->hb_length = off(&f[F_HB_LEN]);
	c->hb_length_size = f[F_HB_LEN].type_string && !strcmp(f[F_HB_LEN].type_string, "size_t") ? 8 : 4;
	c->hb_used = off(&f[F_HB_USED]);
	c->hb_size = (int64_t)vp_vm__type_size(h, "HeapBlock");
	c->blob_size = off(&f[F_BLOB_SIZE]);
	c->blob_name = off(&f[F_BLOB_NAME]);
	c->blob_kind = off(&f[F_BLOB_KIND]);
	c->kind_nmethod = vp_vm__int_constant(h, "CodeBlobKind::Nmethod", &kind) ? kind : -1;
	c->blob_code_begin = off(&f[F_CODE_BEGIN]);
	c->blob_code_end = off(&f[F_CODE_END]);
	c->blob_code_offset = off(&f[F_CODE_OFF]);
	c->blob_data_offset = off(&f[F_DATA_OFF]);
	c->blob_mutable_data = off(&f[F_MUT]);
	c->blob_mutable_size = off(&f[F_MUT_SIZE]);
	c->blob_reloc_size = off(&f[F_RELOC_SIZE]);
	c->nm_method = f[F_NM_METHOD].found ? off(&f[F_NM_METHOD]) : off(&f[F_CM_METHOD]);
	c->nm_state = off(&f[F_STATE]);
	c->nm_compile_id = off(&f[F_COMPILE_ID]);
	c->nm_level = off(&f[F_LEVEL]);
	c->nm_level_size = f[F_LEVEL].type_string && !strcmp(f[F_LEVEL].type_string, "int") ? 4 : 1;
	/* Optional: without it every compilation reads as a normal (not OSR) one. */
	c->nm_entry_bci = off(&f[F_ENTRY_BCI]);
	c->nm_pcs = off(&f[F_PCS]);
	c->nm_pcs_end = off(&f[F_DEPS]);
	c->nm_metadata = off(&f[F_METADATA]);
	c->nm_scopes_begin = off(&f[F_SCOPES_BEGIN]);
	c->nm_immutable = off(&f[F_IMM]);
	c->nm_immutable_size = off(&f[F_IMM_SIZE]);
	c->nm_scopes_data = off(&f[F_SCOPES_DATA]);
	c->pc_offset = off(&f[F_PC_OFFSET]);
	c->pc_scope = off(&f[F_PC_SCOPE]);
	c->pc_size = (int64_t)vp_vm__type_size(h, "PcDesc");
	c->m_const = off(&f[F_M_CONST]);
	c->cm_constants = off(&f[F_CM_CONSTANTS]);
	c->cm_name = off(&f[F_CM_NAME]);
	c->cm_sig = off(&f[F_CM_SIG]);
	c->cp_holder = off(&f[F_CP_HOLDER]);
	c->cp_size = (int64_t)vp_vm__type_size(h, "ConstantPool");
	c->k_name = off(&f[F_K_NAME]);
	c->sym_len = off(&f[F_SYM_LEN]);
	c->sym_body = off(&f[F_SYM_BODY]);

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

/* ---- plain reads of the heaps (committed memory below each heap's _high) ---- */

static uint64_t rd_ptr(uint64_t a) { return *(const volatile uint64_t *)(uintptr_t)a; }
static int32_t rd_i32(uint64_t a) { return *(const volatile int32_t *)(uintptr_t)a; }
static uint8_t rd_u8(uint64_t a) { return *(const volatile uint8_t *)(uintptr_t)a; }

struct heap {
	uint64_t low, high, segmap, segmap_high;
	int log2;
};

static int heaps(const struct vp_ch *c, struct heap *out, int max)
{
	uint64_t ga = rd_ptr((uint64_t)(uintptr_t)c->heaps);
	if (!ga)
		return 0;
	int n = rd_i32(ga + (uint64_t)c->ga_len);
	uint64_t data = rd_ptr(ga + (uint64_t)c->ga_data);
	int k = 0;

	for (int i = 0; i < n && i < 16 && k < max; i++) {
		uint64_t h = rd_ptr(data + (uint64_t)i * 8);
		if (!h)
			continue;
		struct heap *x = &out[k];
		x->low = rd_ptr(h + (uint64_t)(c->heap_memory + c->vs_low_boundary));
		x->high = rd_ptr(h + (uint64_t)(c->heap_memory + c->vs_high));
		x->segmap = rd_ptr(h + (uint64_t)(c->heap_segmap + c->vs_low_boundary));
		x->segmap_high = rd_ptr(h + (uint64_t)(c->heap_segmap + c->vs_high));
		x->log2 = rd_i32(h + (uint64_t)c->heap_log2);
		if (x->low && x->high > x->low && x->segmap && x->segmap_high > x->segmap && x->log2 > 0 && x->log2 < 16)
			k++;
	}
	/* In address order, so that a walk meets all blocks in address order. */
	for (int i = 1; i < k; i++)
		for (int j = i; j > 0 && out[j - 1].low > out[j].low; j--) {
			struct heap t = out[j];
			out[j] = out[j - 1];
			out[j - 1] = t;
		}
	return k;
}

/* The name pointers seen so far and whether each says "nmethod". A CodeBlob's name is a
 * string constant in libjvm; a pointer is read only once dladdr placed it there (a block
 * being built can hold anything where its name will be). */
static struct { uint64_t ptr; bool nmethod; } names[256];
static int nnames;

static bool named_nmethod(uint64_t p)
{
	Dl_info info;

	for (int i = 0; i < nnames; i++)
		if (names[i].ptr == p)
			return names[i].nmethod;
	if (!p || !dladdr((void *)(uintptr_t)p, &info) || !info.dli_fname || !strstr(info.dli_fname, "libjvm"))
		return false;
	/* Native method wrappers are nmethods too, named so. */
	const char *name = (const char *)(uintptr_t)p;
	bool is = !strcmp(name, "nmethod") || !strcmp(name, "native nmethod");
	if (nnames < (int)(sizeof(names) / sizeof(names[0])))
		names[nnames++] = (typeof(names[0])){ p, is };
	return is;
}

/* Fills nm for the blob of a used block of `bytes` bytes; false when it is no nmethod
 * or does not fit its block. */
static bool read_nm(const struct vp_ch *c, uint64_t blob, uint64_t bytes, struct vp_ch_nm *nm)
{
	int32_t size = rd_i32(blob + (uint64_t)c->blob_size);
	uint64_t begin, end;

	if (size <= 0 || (uint64_t)size > bytes)
		return false;
	if (c->split_data) {
		if (rd_u8(blob + (uint64_t)c->blob_kind) != (uint8_t)c->kind_nmethod)
			return false;
		int32_t co = rd_i32(blob + (uint64_t)c->blob_code_offset), dof = rd_i32(blob + (uint64_t)c->blob_data_offset);
		if (co <= 0 || dof < co || dof > size)
			return false;
		begin = blob + (uint64_t)co;
		end = blob + (uint64_t)dof;
	} else {
		if (!named_nmethod(rd_ptr(blob + (uint64_t)c->blob_name)))
			return false;
		begin = rd_ptr(blob + (uint64_t)c->blob_code_begin);
		end = rd_ptr(blob + (uint64_t)c->blob_code_end);
		if (begin <= blob || end < begin || end > blob + (uint64_t)size)
			return false;
	}
	nm->blob = blob;
	nm->code_start = begin;
	nm->code_size = (uint32_t)(end - begin);
	nm->method = rd_ptr(blob + (uint64_t)c->nm_method);
	nm->compile_id = rd_i32(blob + (uint64_t)c->nm_compile_id);
	nm->state = (int8_t)rd_u8(blob + (uint64_t)c->nm_state);
	nm->level = (int8_t)(c->nm_level_size == 4 ? rd_i32(blob + (uint64_t)c->nm_level) : rd_u8(blob + (uint64_t)c->nm_level));
	/* HotSpot's InvocationEntryBci (-1) marks a compilation entered at its start; an OSR
	 * one is entered at the bci of a loop. */
	nm->osr = c->nm_entry_bci >= 0 && rd_i32(blob + (uint64_t)c->nm_entry_bci) != -1;
	return nm->method && !(nm->method & 7);
}

/* The length in segments of the heap block at b (its HeapBlock header). */
static uint64_t block_len(const struct vp_ch *c, uint64_t b)
{
	return c->hb_length_size == 8 ? rd_ptr(b + (uint64_t)c->hb_length) : (uint32_t)rd_i32(b + (uint64_t)c->hb_length);
}

/* The nmethod in the used block at b of len segments of heap h, if it holds one. */
static bool block_nm(const struct vp_ch *c, const struct heap *h, uint64_t b, uint64_t len, struct vp_ch_nm *nm)
{
	return read_nm(c, b + (uint64_t)c->hb_size, (len << h->log2) - (uint64_t)c->hb_size, nm);
}

int vp_ch__walk(const struct vp_ch *c, vp_ch_visit_fn fn, void *ctx)
{
	struct heap hs[16];
	int nh = heaps(c, hs, 16);

	for (int i = 0; i < nh; i++) {
		const struct heap *h = &hs[i];
		uint64_t nseg = (h->high - h->low) >> h->log2, mapped = h->segmap_high - h->segmap;
		if (nseg > mapped)
			nseg = mapped;
		for (uint64_t seg = 0; seg < nseg;) {
			uint64_t b = h->low + (seg << h->log2), len = block_len(c, b);
			if (len == 0)
				break;   /* past the last block ever allocated: never-written memory */
			if (len > nseg - seg)
				return -EAGAIN;
			if (rd_u8(b + (uint64_t)c->hb_used)) {
				struct vp_ch_nm nm;
				/* A used block starts where the segment map says blocks start. */
				if (rd_u8(h->segmap + seg) != 0)
					return -EAGAIN;
				if (block_nm(c, h, b, len, &nm)) {
					int err = fn(ctx, &nm);
					if (err)
						return err;
				}
			}
			seg += len;
		}
	}
	return 0;
}

int vp_ch__find(const struct vp_ch *c, uint64_t pc, struct vp_ch_nm *out)
{
	struct heap hs[16];
	int nh = heaps(c, hs, 16);

	for (int i = 0; i < nh; i++) {
		const struct heap *h = &hs[i];
		if (pc < h->low || pc >= h->high)
			continue;
		uint64_t seg = (pc - h->low) >> h->log2;
		if (seg >= h->segmap_high - h->segmap)
			return -ENOENT;
		for (int hop = 0;; hop++) {
			uint8_t d = rd_u8(h->segmap + seg);
			if (d == FREE_SEGMENT || hop == MAX_HOPS)
				return -ENOENT;
			if (!d)
				break;
			if (d > seg)
				return -ENOENT;
			seg -= d;
		}
		uint64_t b = h->low + (seg << h->log2), len = block_len(c, b);
		if (!rd_u8(b + (uint64_t)c->hb_used) || !len || !block_nm(c, h, b, len, out))
			return -ENOENT;
		return pc >= out->code_start && pc < out->code_start + out->code_size ? 0 : -ENOENT;
	}
	return -ENOENT;
}

/* ---- decoding (from copies) ---- */

/* HotSpot's UNSIGNED5 (CompressedReadStream::read_int): up to five bytes, each below 192
 * ends the number, each carries 6 more bits above the first byte's value; since JDK 20
 * every byte is stored plus one so that none is zero. */
static int u5(const uint8_t **p, const uint8_t *end, int base, uint32_t *out)
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
		uint64_t size = (uint64_t)rd_i32(nm->blob + (uint64_t)c->blob_size);
		int32_t po = rd_i32(nm->blob + (uint64_t)c->nm_pcs), pe = rd_i32(nm->blob + (uint64_t)c->nm_pcs_end);
		int32_t mo = rd_i32(nm->blob + (uint64_t)c->nm_metadata);
		uint64_t sdp = rd_ptr(nm->blob + (uint64_t)c->nm_scopes_begin);
		if (size > (64u << 20) || po < 0 || pe < po || (uint64_t)pe > size || mo < 0 || mo > po ||
		    sdp < nm->blob + (uint64_t)mo || sdp > nm->blob + (uint64_t)po)
			return -EINVAL;
		if (vp_grow((void **)&s->buf, &s->cap_buf, (size_t)(pe - mo) + 1, 1))
			return -ENOMEM;
		memcpy(s->buf, (const void *)(uintptr_t)(nm->blob + (uint64_t)mo), (size_t)(pe - mo));
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (rd_i32(nm->blob + (uint64_t)c->nm_compile_id) != nm->compile_id ||
		    rd_ptr(nm->blob + (uint64_t)c->nm_method) != nm->method)
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
		 * them: one process_vm_readv copies both parts, then the header is checked. */
		int32_t isz = rd_i32(nm->blob + (uint64_t)c->nm_immutable_size), po = rd_i32(nm->blob + (uint64_t)c->nm_pcs);
		int32_t so = rd_i32(nm->blob + (uint64_t)c->nm_scopes_data);
		int32_t msz = rd_i32(nm->blob + (uint64_t)c->blob_mutable_size);
		int32_t rsz = rd_i32(nm->blob + (uint64_t)c->blob_reloc_size);
		uint64_t imm = rd_ptr(nm->blob + (uint64_t)c->nm_immutable), mut = rd_ptr(nm->blob + (uint64_t)c->blob_mutable_data);
		if (!imm || isz < 0 || isz > (64 << 20) || po < 0 || so < po || so > isz || !mut || rsz < 0 || msz < rsz ||
		    msz > (64 << 20))
			return -EINVAL;
		size_t il = (size_t)(isz - po), ml = (size_t)(msz - rsz);
		if (vp_grow((void **)&s->buf, &s->cap_buf, il + 1, 1) || vp_grow((void **)&s->buf2, &s->cap_buf2, ml + 1, 1))
			return -ENOMEM;
		struct iovec l[2] = { { s->buf, il }, { s->buf2, ml } };
		struct iovec r[2] = { { (void *)(uintptr_t)(imm + (uint64_t)po), il },
				      { (void *)(uintptr_t)(mut + (uint64_t)rsz), ml } };
		if (process_vm_readv(getpid(), l, 2, r, 2, 0) != (ssize_t)(il + ml))
			return -EAGAIN;
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (rd_i32(nm->blob + (uint64_t)c->nm_compile_id) != nm->compile_id ||
		    rd_ptr(nm->blob + (uint64_t)c->nm_method) != nm->method ||
		    rd_ptr(nm->blob + (uint64_t)c->nm_immutable) != imm)
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
			if (u5(&q, sd_end, c->u5_base, &sender) || u5(&q, sd_end, c->u5_base, &midx) ||
			    u5(&q, sd_end, c->u5_base, &bci) || midx > nmeta)
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
	if (!vp_vm__read_self(sym + (uint64_t)c->sym_len, &len, 2))
		return -EFAULT;
	size_t n = len < outlen ? len : outlen - 1;
	if (!vp_vm__read_self(sym + (uint64_t)c->sym_body, out, n))
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
	if (!vp_vm__read_self(m + (uint64_t)c->m_const, &cm, 8) || !vp_vm__read_self(cm + (uint64_t)c->cm_constants, &cp, 8) ||
	    !vp_vm__read_self(cm + (uint64_t)c->cm_name, &ni, 2) || !vp_vm__read_self(cm + (uint64_t)c->cm_sig, &si, 2) ||
	    !vp_vm__read_self(cp + (uint64_t)c->cp_holder, &holder, 8) || !vp_vm__read_self(holder + (uint64_t)c->k_name, &ksym, 8))
		return -EFAULT;
	/* The pool's entries follow the ConstantPool; a symbol entry is the Symbol*. Reads
	 * that go wrong fail; a wrong symbol shows in the signature's shape, checked below. */
	if (!ni || !si || !vp_vm__read_self(cp + (uint64_t)c->cp_size + (uint64_t)ni * 8, &nsym, 8) ||
	    !vp_vm__read_self(cp + (uint64_t)c->cp_size + (uint64_t)si * 8, &ssym, 8))
		return -EFAULT;
	klass[0] = 'L';
	if (symbol(c, ksym, klass + 1, kl - 2) || symbol(c, nsym, name, nl) || symbol(c, ssym, sig, sl))
		return -EFAULT;
	strcat(klass, ";");
	return sig[0] == '(' ? 0 : -EFAULT;
}

bool vp_ch__debug_nonsafepoints(void *h)
{
	void *value;
	char *flags;
	uint32_t bits;

	if (!vp_vm__find_flag(h, "DebugNonSafepoints", &value, &flags))
		return false;
	memcpy(&bits, flags, sizeof(bits));
	if (*(bool *)value)
		return true;
	if ((bits & VP_VM_FLAG_ORIGIN_MASK) != VP_VM_FLAG_ORIGIN_DEFAULT)
		return false;   /* the user turned it off: leave it so */
	*(bool *)value = true;
	return true;
}
