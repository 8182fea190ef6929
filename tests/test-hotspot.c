/* hotspot/ and recorder/hotspot: HotSpot's layout read from its VM structure tables.
 *
 * "unit": UNSIGNED5 on known byte strings and round trips (before and since JDK 20);
 * then over a fake JVM memory built here (tables, code heaps, segment maps, blobs, an
 * nmethod with inlining and its methods' metadata, the interpreter's StubQueue) in the
 * JDK 17 and JDK 25 shapes: the agent's walk meets the one nmethod, find-by-pc finds it
 * by its code only, its scopes decode to the inlining built and its methods are named,
 * a heap changed under the walk is -EAGAIN, and corruptions and truncations end in an
 * error, never a crash; for the BPF walker's layout, the fields land where
 * they were put; the segment-map lookup (steps, free segments, the step bound, a map
 * stepping out of its heap); a JVM not initialised yet is -EAGAIN; unknown releases,
 * wrong field widths, missing fields and endless tables are refused; every truncation
 * of the readable memory and thousands of random corruptions end in an error or a
 * sane layout, never a crash or a hang.
 *
 * "17" / "25": a live JVM (JitSplit) against independent sources: `jcmd Compiler.codecache`
 * bounds are the heaps, every method of `jcmd Compiler.codelist` is found by the lookup
 * at its code start, middle and end with its listed blob address and code start, a sane
 * frame size and prologue; `jcmd Compiler.perfmap`'s Interpreter blob is the
 * interpreter range; /proc/PID/mem reads give the same layout; /bin/sleep is -ENOENT;
 * a JVM killed while being read gives errors, not a crash. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "recorder/hotspot.h"
#include "hotspot/codeheap.h"
#include "hotspot/vmstructs.h"
#include "test-agent-util.h"

/* ---- a fake JVM's memory */

#define FBASE 0x7f0000000000ull
#define FSIZE (4u << 20)

struct fake {
	uint8_t *mem;
	bool at_base;            /* mem is mapped at FBASE: plain loads read the fake too */
	uint64_t used;
	long budget;             /* reads allowed before every read fails; -1: no limit */
	long reads;
};

static int fake_read(void *ctx, uint64_t a, void *buf, size_t len)
{
	struct fake *f = ctx;

	f->reads++;
	if (f->budget >= 0 && f->reads > f->budget)
		return -EFAULT;
	if (a < FBASE || a - FBASE > FSIZE || len > FSIZE - (a - FBASE))
		return -EFAULT;
	memcpy(buf, f->mem + (a - FBASE), len);
	return 0;
}

static uint64_t falloc(struct fake *f, size_t n, size_t align)
{
	f->used = (f->used + align - 1) & ~(uint64_t)(align - 1);
	uint64_t a = FBASE + f->used;
	f->used += n;
	if (f->used > FSIZE)
		FAIL("fake memory full");
	return a;
}

static void *at(struct fake *f, uint64_t a)
{
	return f->mem + (a - FBASE);
}

static void put64(struct fake *f, uint64_t a, uint64_t v) { memcpy(at(f, a), &v, 8); }
static void put32(struct fake *f, uint64_t a, int32_t v) { memcpy(at(f, a), &v, 4); }
static void put16(struct fake *f, uint64_t a, int16_t v) { memcpy(at(f, a), &v, 2); }

static uint64_t fstr(struct fake *f, const char *s)
{
	uint64_t a = falloc(f, strlen(s) + 1, 1);
	memcpy(at(f, a), s, strlen(s) + 1);
	return a;
}

static uint64_t fcell(struct fake *f, uint64_t v)
{
	uint64_t a = falloc(f, 8, 8);
	put64(f, a, v);
	return a;
}

/* What the fake holds, for the checks. */
struct expect {
	bool jdk25;
	uint64_t heap_lo[3], heap_hi[3], heap_rhi[3], segmap[3];
	uint64_t interp_lo, interp_hi;
	uint64_t blob_a, code_a, blob_b, code_b;
	uint64_t pc_free, pc_loop, pc_bad, pc_b_last;
	/* Where things live, so the tests can break them. */
	uint64_t structs_cell, heaps_cell, ga, heap0, interp_cell, release_ptr_cell, entries;
	uint64_t frame_size_tstr_slot, frame_size_name_slot, code_offset_name_slot;
	int nentries;
	/* The agent's view: block A holds an nmethod of method m2 inlined into m1. */
	uint64_t m1, m2;
	uint32_t code_a_size;
};

#define SEG_LOG2 7
#define HEAP_SEGS 1024

struct sentry {
	const char *type, *field, *tstr;
	int is_static;
	uint64_t off, addr;
};

/* HotSpot's UNSIGNED5 encoder (CompressedWriteStream::write_int, unsigned5.hpp): bytes
 * below L end a number, bytes from L on carry 6 more bits; since JDK 20 every byte is
 * stored plus x = 1 so that none is zero (L = 191 then, 192 before). */
static size_t u5_put(uint8_t *out, uint32_t v, int x)
{
	const uint32_t L = 256u - 64u - (uint32_t)x;
	size_t n = 0;

	for (int i = 0; i < 4 && v >= L; i++) {
		v -= L;
		out[n++] = (uint8_t)(L + (v % 64) + (uint32_t)x);
		v >>= 6;
	}
	out[n++] = (uint8_t)(v + (uint32_t)x);
	return n;
}

/* A Method* whose ConstMethod, ConstantPool, holder Klass and Symbols name it
 * klass.name sig (offsets as the table above gives them). */
static uint64_t fmethod(struct fake *f, const char *klass, const char *name, const char *sig)
{
	const char *strs[3] = { klass, name, sig };
	uint64_t sym[3];

	for (int i = 0; i < 3; i++) {
		sym[i] = falloc(f, 6 + strlen(strs[i]), 8);
		put16(f, sym[i], (int16_t)strlen(strs[i]));
		memcpy(at(f, sym[i] + 6), strs[i], strlen(strs[i]));
	}
	uint64_t k = falloc(f, 200, 8), cp = falloc(f, 64 + 4 * 8, 8), cm = falloc(f, 56, 8), m = falloc(f, 64, 8);
	put64(f, k + 16, sym[0]);
	put64(f, cp + 16, k);
	put64(f, cp + 64 + 1 * 8, sym[1]);   /* pool entry 1: the name */
	put64(f, cp + 64 + 2 * 8, sym[2]);   /* pool entry 2: the signature */
	put64(f, cm + 8, cp);
	put16(f, cm + 40, 1);
	put16(f, cm + 42, 2);
	put64(f, m + 8, cm);
	return m;
}

/* Block A: an nmethod (compile id 42, tier 4) of m1 with m2 inlined: pc 10 has scope
 * m1@5, pc 20 has m2@300 inside m1@5 (300 takes two UNSIGNED5 bytes). JDK 17 keeps the
 * metadata, scopes and pc descriptors inside the nmethod; JDK 25 beside it. Block B (a
 * used block that is no nmethod) ends the walk's interest in heap 0. */
static void build_nmethod(struct fake *f, bool jdk25, struct expect *x)
{
	const uint64_t hb = jdk25 ? 8 : 16, a = x->blob_a, blk_a = a - hb, blk_b = x->blob_b - hb;
	const int u5x = jdk25 ? 1 : 0;
	uint8_t sd[32];
	size_t nsd = 0;

	x->m1 = fmethod(f, "demo/Outer", "outer", "()V");
	x->m2 = fmethod(f, "demo/Inner", "inner", "(I)J");
	x->code_a_size = 64;
	/* Heap blocks: A is 4 segments, B 300, both used. */
	if (jdk25) {
		put32(f, blk_a, 4);
		put32(f, blk_b, 300);
	} else {
		put64(f, blk_a, 4);
		put64(f, blk_b, 300);
	}
	*(uint8_t *)at(f, blk_a + (jdk25 ? 4 : 8)) = 1;
	*(uint8_t *)at(f, blk_b + (jdk25 ? 4 : 8)) = 1;
	/* Scopes: offset 0 is the null scope; m1@5 at 1, m2@300 (sender 1) after it. */
	sd[nsd++] = 0;
	const uint32_t s1 = (uint32_t)nsd;
	nsd += u5_put(sd + nsd, 0, u5x);
	nsd += u5_put(sd + nsd, 1, u5x);
	nsd += u5_put(sd + nsd, 5 + 1, u5x);
	const uint32_t s2 = (uint32_t)nsd;
	nsd += u5_put(sd + nsd, s1, u5x);
	nsd += u5_put(sd + nsd, 2, u5x);
	nsd += u5_put(sd + nsd, 300 + 1, u5x);
	/* PcDescs (16 bytes: pc offset, scope offset): a sentinel, then the two pcs. */
	const int32_t pcs[3][2] = { { -1, 0 }, { 10, (int32_t)s1 }, { 20, (int32_t)s2 } };
	uint8_t pd[48] = { 0 };
	for (int i = 0; i < 3; i++) {
		memcpy(pd + 16 * i, &pcs[i][0], 4);
		memcpy(pd + 16 * i + 4, &pcs[i][1], 4);
	}
	const uint64_t meta[2] = { x->m1, x->m2 };
	const uint32_t code_off = (uint32_t)(x->code_a - a), code_end = code_off + x->code_a_size;

	if (jdk25) {
		/* Immutable data: pcs then scopes; mutable: 8 bytes of relocations, then metadata. */
		uint64_t imm = falloc(f, sizeof(pd) + nsd, 8), mut = falloc(f, 8 + sizeof(meta), 8);
		memcpy(at(f, imm), pd, sizeof(pd));
		memcpy(at(f, imm + sizeof(pd)), sd, nsd);
		memcpy(at(f, mut + 8), meta, sizeof(meta));
		*(uint8_t *)at(f, a) = 3;                       /* _kind: CodeBlobKind::Nmethod */
		put64(f, a + 8, mut);
		put32(f, a + 16, 8 + (int32_t)sizeof(meta));
		put32(f, a + 20, 8);
		put32(f, a + 24, 400);                          /* _size */
		put32(f, a + 40, (int32_t)code_end);            /* _data_offset */
		put64(f, a + 56, x->m1);
		*(uint8_t *)at(f, a + 64) = 0;                  /* in use */
		*(uint8_t *)at(f, a + 65) = 4;
		put32(f, a + 68, 42);
		put32(f, a + 72, -1);
		put32(f, a + 76, 0);                            /* pcs at the start of the immutable data */
		put64(f, a + 80, imm);
		put32(f, a + 88, (int32_t)(sizeof(pd) + nsd));
		put32(f, a + 92, (int32_t)sizeof(pd));
	} else {
		/* Inside the nmethod after the code: metadata, scopes, pcs. */
		const uint32_t mo = code_end, so = mo + (uint32_t)sizeof(meta), po = so + (uint32_t)nsd;
		const uint32_t pe = po + (uint32_t)sizeof(pd);
		memcpy(at(f, a + mo), meta, sizeof(meta));
		memcpy(at(f, a + so), sd, nsd);
		memcpy(at(f, a + po), pd, sizeof(pd));
		put64(f, a + 0, fstr(f, "nmethod"));            /* _name */
		put32(f, a + 12, (int32_t)pe);                  /* _size */
		put64(f, a + 40, x->code_a + x->code_a_size);   /* _code_end */
		put64(f, a + 48, x->m1);
		*(uint8_t *)at(f, a + 56) = 0;
		put32(f, a + 60, 4);
		put32(f, a + 64, 42);
		put32(f, a + 68, -1);
		put32(f, a + 72, (int32_t)po);
		put32(f, a + 76, (int32_t)pe);
		put32(f, a + 80, (int32_t)mo);
		put64(f, a + 88, a + so);
	}
}

/* Builds the fake of a JDK 17 (code begin pointer, 16-byte HeapBlock, int frame
 * complete) or JDK 25 (code offset, 8-byte HeapBlock, int16_t frame complete) JVM. */
static void build(struct fake *f, bool jdk25, const char *release, struct vp_hs_globals *sy, struct expect *x)
{
	memset(f->mem, 0, FSIZE);
	f->used = 0;
	f->budget = -1;
	f->reads = 0;
	memset(x, 0, sizeof(*x));
	x->jdk25 = jdk25;
	const uint64_t hb = jdk25 ? 8 : 16;
	/* Layouts (offsets) as the two JDKs have them. */
	const uint64_t o_mem = jdk25 ? 0 : 8, o_seg = jdk25 ? 112 : 120, o_log2 = jdk25 ? 248 : 256;
	const uint64_t o_fs = jdk25 ? 44 : 28, o_fc = jdk25 ? 54 : 20, o_code = jdk25 ? 36 : 32;

	/* Three code heaps, each HEAP_SEGS segments of 128 bytes, committed halfway. */
	uint64_t ga_data = falloc(f, 3 * 8, 8);
	x->ga = falloc(f, 16, 8);
	put32(f, x->ga, 3);
	put32(f, x->ga + 4, 3);
	put64(f, x->ga + 8, ga_data);
	for (int i = 0; i < 3; i++) {
		uint64_t heap = falloc(f, 512, 8);
		uint64_t lo = falloc(f, HEAP_SEGS << SEG_LOG2, 4096);
		uint64_t seg = falloc(f, HEAP_SEGS, 4096);

		if (i == 0)
			x->heap0 = heap;
		memset(at(f, seg), 0xff, HEAP_SEGS);
		put64(f, ga_data + 8 * i, heap);
		put64(f, heap + o_mem + 0, lo);                                 /* _low_boundary */
		put64(f, heap + o_mem + 8, lo + (HEAP_SEGS << SEG_LOG2));       /* _high_boundary */
		put64(f, heap + o_mem + 16, lo);                                /* _low */
		put64(f, heap + o_mem + 24, lo + (HEAP_SEGS << SEG_LOG2) / 2);  /* _high */
		put64(f, heap + o_seg + 0, seg);                                /* the map's _low_boundary */
		put64(f, heap + o_seg + 16, seg);                               /* _low */
		put64(f, heap + o_seg + 24, seg + HEAP_SEGS / 2);               /* _high: committed with the heap */
		put32(f, heap + o_log2, SEG_LOG2);
		x->heap_lo[i] = lo;
		x->heap_hi[i] = lo + (HEAP_SEGS << SEG_LOG2) / 2;
		x->heap_rhi[i] = lo + (HEAP_SEGS << SEG_LOG2);
		x->segmap[i] = seg;
	}
	/* Heap 0: block A (segments 0-3), block B (4-303: more than 254 segments, so two
	 * steps from its end), free segments, a chain of 1s longer than the walker's bound,
	 * and a map that steps back out of the heap. */
	uint8_t *sm = at(f, x->segmap[0]);
	for (int s = 0; s < 4; s++)
		sm[s] = (uint8_t)s;
	sm[4] = 0;
	for (int s = 5; s < 304; s++)
		sm[s] = (uint8_t)(1 + (s - 5) % 254);
	/* 320..339: a block start followed by 19 segments each one step back. */
	sm[320] = 0;
	for (int s = 321; s < 340; s++)
		sm[s] = 1;
	sm[350] = 200;               /* 350 - 200 = 150 is in B, which then says 145 ...: fine */
	sm[360] = 250;               /* but this one: */
	sm[110] = 250;               /* 360 -> 110 -> below 0 */
	x->blob_a = x->heap_lo[0] + hb;
	x->blob_b = x->heap_lo[0] + (4 << SEG_LOG2) + hb;
	x->code_a = x->blob_a + 0x60;
	x->code_b = x->blob_b + 0x100;
	x->pc_b_last = x->heap_lo[0] + (303 << SEG_LOG2) + 5;
	x->pc_free = x->heap_lo[0] + (310 << SEG_LOG2);
	x->pc_loop = x->heap_lo[0] + (339 << SEG_LOG2) + 1;
	x->pc_bad = x->heap_lo[0] + (360 << SEG_LOG2);
	const struct { uint64_t blob, code; int32_t fs, fc; } blobs[] = {
		{ x->blob_a, x->code_a, 6, 20 }, { x->blob_b, x->code_b, 12, 33 },
	};
	for (int i = 0; i < 2; i++) {
		put32(f, blobs[i].blob + o_fs, blobs[i].fs);
		if (jdk25) {
			put16(f, blobs[i].blob + o_fc, (int16_t)blobs[i].fc);
			put32(f, blobs[i].blob + o_code, (int32_t)(blobs[i].code - blobs[i].blob));
		} else {
			put32(f, blobs[i].blob + o_fc, blobs[i].fc);
			put64(f, blobs[i].blob + o_code, blobs[i].code);
		}
	}
	/* The interpreter in heap 2. */
	uint64_t sq = falloc(f, 64, 8);
	x->interp_lo = x->heap_lo[2] + 0x400;
	x->interp_hi = x->interp_lo + 0x3000;
	put64(f, sq + 8, x->interp_lo);
	put32(f, sq + 20, 0x3000);
	put32(f, sq + 24, 0);
	put32(f, sq + 28, 0x3000);
	x->interp_cell = fcell(f, sq);
	x->heaps_cell = fcell(f, x->ga);
	x->release_ptr_cell = fcell(f, fstr(f, release));

	const struct sentry ents[] = {
		{ "Klass", "_name", "Symbol*", 0, 16, 0 },
		{ "Method", "_constMethod", "ConstMethod*", 0, 8, 0 },
		{ "VirtualSpace", "_low_boundary", "char*", 0, 0, 0 },
		{ "VirtualSpace", "_high_boundary", "char*", 0, 8, 0 },
		{ "VirtualSpace", "_low", "char*", 0, 16, 0 },
		{ "VirtualSpace", "_high", "char*", 0, 24, 0 },
		{ "GrowableArrayBase", "_len", "int", 0, 0, 0 },
		{ "GrowableArray<int>", "_data", "int*", 0, 8, 0 },
		{ "CodeCache", "_heaps", "GrowableArray<CodeHeap*>*", 1, 0, x->heaps_cell },
		{ "CodeHeap", "_memory", "VirtualSpace", 0, o_mem, 0 },
		{ "CodeHeap", "_segmap", "VirtualSpace", 0, o_seg, 0 },
		{ "CodeHeap", "_log2_segment_size", "int", 0, o_log2, 0 },
		{ "AbstractInterpreter", "_code", "StubQueue*", 1, 0, x->interp_cell },
		{ "StubQueue", "_stub_buffer", "address", 0, 8, 0 },
		{ "StubQueue", "_buffer_limit", "int", 0, 20, 0 },
		{ "StubQueue", "_queue_begin", "int", 0, 24, 0 },
		{ "StubQueue", "_queue_end", "int", 0, 28, 0 },
		{ "CodeBlob", "_size", "int", 0, jdk25 ? 24 : 12, 0 },
		{ "CodeBlob", "_frame_complete_offset", jdk25 ? "int16_t" : "int", 0, o_fc, 0 },
		{ "CodeBlob", "_frame_size", "int", 0, o_fs, 0 },
		{ "CodeBlob", jdk25 ? "_code_offset" : "_code_begin", jdk25 ? "int" : "address", 0, o_code, 0 },
		{ "Abstract_VM_Version", "_s_vm_release", "const char*", 1, 0, x->release_ptr_cell },
		{ "Thread", "_osthread", "OSThread*", 0, 0x200, 0 },
		/* What the agent's walk, scope decoder and method naming read. */
		{ "HeapBlock::Header", "_length", jdk25 ? "uint32_t" : "size_t", 0, 0, 0 },
		{ "HeapBlock::Header", "_used", "bool", 0, jdk25 ? 4 : 8, 0 },
		{ "CodeBlob", jdk25 ? "_kind" : "_name", jdk25 ? "CodeBlobKind" : "const char*", 0, 0, 0 },
		{ "CodeBlob", jdk25 ? "_data_offset" : "_code_end", jdk25 ? "int" : "address", 0, 40, 0 },
		{ jdk25 ? "CodeBlob" : "CompiledMethod", jdk25 ? "_mutable_data" : "_scopes_data_begin", "address", 0,
		  jdk25 ? 8 : 88, 0 },
		{ jdk25 ? "CodeBlob" : "nmethod", jdk25 ? "_mutable_data_size" : "_dependencies_offset", "int", 0,
		  jdk25 ? 16 : 76, 0 },
		{ jdk25 ? "CodeBlob" : "nmethod", jdk25 ? "_relocation_size" : "_metadata_offset", "int", 0,
		  jdk25 ? 20 : 80, 0 },
		{ jdk25 ? "nmethod" : "CompiledMethod", "_method", "Method*", 0, jdk25 ? 56 : 48, 0 },
		{ "nmethod", "_state", "volatile signed char", 0, jdk25 ? 64 : 56, 0 },
		{ "nmethod", "_comp_level", jdk25 ? "CompLevel" : "int", 0, jdk25 ? 65 : 60, 0 },
		{ "nmethod", "_compile_id", "int", 0, jdk25 ? 68 : 64, 0 },
		{ "nmethod", "_entry_bci", "int", 0, jdk25 ? 72 : 68, 0 },
		{ "nmethod", "_scopes_pcs_offset", "int", 0, jdk25 ? 76 : 72, 0 },
		{ "nmethod", jdk25 ? "_immutable_data" : "_unused_a", "address", 0, 80, 0 },
		{ "nmethod", jdk25 ? "_immutable_data_size" : "_unused_b", "int", 0, 88, 0 },
		{ "nmethod", jdk25 ? "_scopes_data_offset" : "_unused_c", "int", 0, 92, 0 },
		{ "PcDesc", "_pc_offset", "int", 0, 0, 0 },
		{ "PcDesc", "_scope_decode_offset", "int", 0, 4, 0 },
		{ "ConstMethod", "_constants", "ConstantPool*", 0, 8, 0 },
		{ "ConstMethod", "_name_index", "u2", 0, 40, 0 },
		{ "ConstMethod", "_signature_index", "u2", 0, 42, 0 },
		{ "ConstantPool", "_pool_holder", "InstanceKlass*", 0, 16, 0 },
		{ "Symbol", "_length", "u2", 0, 0, 0 },
		{ "Symbol", "_body", "u1", 0, 6, 0 },
		{ "Abstract_VM_Version", "_vm_major_version", "int", 1, 0, fcell(f, jdk25 ? 25 : 17) },
	};
	int n = (int)(sizeof(ents) / sizeof(ents[0]));
	const uint64_t stride = 48;
	uint64_t tab = falloc(f, (n + 1) * stride, 8);
	for (int i = 0; i < n; i++) {
		uint64_t e = tab + i * stride;
		put64(f, e + 0, fstr(f, ents[i].type));
		put64(f, e + 8, fstr(f, ents[i].field));
		put64(f, e + 16, fstr(f, ents[i].tstr));
		put32(f, e + 24, ents[i].is_static);
		put64(f, e + 32, ents[i].off);
		put64(f, e + 40, ents[i].addr);
		if (!strcmp(ents[i].field, "_frame_size")) {
			x->frame_size_tstr_slot = e + 16;
			x->frame_size_name_slot = e + 8;
		}
		if (!strcmp(ents[i].field, "_code_offset") || !strcmp(ents[i].field, "_code_begin"))
			x->code_offset_name_slot = e + 8;
	}
	x->entries = tab;
	x->nentries = n;
	x->structs_cell = fcell(f, tab);
	sy->structs = x->structs_cell;
	sy->struct_stride = fcell(f, stride);
	sy->struct_type_name_off = fcell(f, 0);
	sy->struct_field_name_off = fcell(f, 8);
	sy->struct_type_string_off = fcell(f, 16);
	sy->struct_is_static_off = fcell(f, 24);
	sy->struct_offset_off = fcell(f, 32);
	sy->struct_address_off = fcell(f, 40);

	const struct { const char *name; uint64_t size; } types[] = {
		{ "Klass", 200 }, { "HeapBlock", hb }, { "ConstMethod", jdk25 ? 56 : 48 }, { "CodeBlob", 104 },
		{ "PcDesc", 16 }, { "ConstantPool", 64 },
	};
	uint64_t ttab = falloc(f, 7 * 40, 8);
	for (int i = 0; i < 6; i++) {
		put64(f, ttab + i * 40, fstr(f, types[i].name));
		put64(f, ttab + i * 40 + 32, types[i].size);
	}
	sy->types = fcell(f, ttab);
	sy->type_stride = fcell(f, 40);
	sy->type_name_off = fcell(f, 0);
	sy->type_size_off = fcell(f, 32);

	/* JDK 25 tells nmethods by kind: CodeBlobKind::Nmethod from the int constants. */
	if (jdk25) {
		uint64_t ctab = falloc(f, 2 * 16, 8);
		put64(f, ctab, fstr(f, "CodeBlobKind::Nmethod"));
		put32(f, ctab + 8, 3);
		sy->int_consts = fcell(f, ctab);
		sy->int_stride = fcell(f, 16);
		sy->int_name_off = fcell(f, 0);
		sy->int_value_off = fcell(f, 8);
	}
	build_nmethod(f, jdk25, x);
}

static int read_fake(struct fake *f, const struct vp_hs_globals *sy, struct vpb_hotspot *hs, char *err)
{
	f->reads = 0;
	err[0] = '\0';
	return vp_hotspot__read(fake_read, f, sy, hs, err, 256);
}

static void check_layout(const struct vpb_hotspot *hs, const struct expect *x)
{
	ASSERT_EQ(hs->nr_heaps, 3);
	for (int i = 0; i < 3; i++) {
		ASSERT_UEQ(hs->heaps[i].lo, x->heap_lo[i]);
		ASSERT_UEQ(hs->heaps[i].hi, x->heap_rhi[i]);
		ASSERT_UEQ(hs->heaps[i].segmap, x->segmap[i]);
		ASSERT_EQ(hs->heaps[i].log2_seg, SEG_LOG2);
	}
	ASSERT_UEQ(hs->interp_lo, x->interp_lo);
	ASSERT_UEQ(hs->interp_hi, x->interp_hi);
	ASSERT_EQ(hs->heapblock_size, x->jdk25 ? 8 : 16);
	ASSERT_EQ(hs->blob_frame_size, x->jdk25 ? 44 : 28);
	ASSERT_EQ(hs->blob_frame_complete, x->jdk25 ? 54 : 20);
	ASSERT_EQ(hs->frame_complete_16, x->jdk25);
	ASSERT_EQ(hs->blob_code, x->jdk25 ? 36 : 32);
	ASSERT_EQ(hs->blob_code_is_offset, x->jdk25);
	ASSERT_EQ(hs->method_const, 8);
	ASSERT_EQ(hs->constmethod_size, x->jdk25 ? 56 : 48);
	ASSERT_EQ(hs->slot_sender_sp, -1);
	ASSERT_EQ(hs->slot_method, -3);
	ASSERT_EQ(hs->slot_bcp, -8);
}

static void check_lookup(struct fake *f, const struct vpb_hotspot *hs, const struct expect *x)
{
	struct vp_hotspot_blob b;

	f->budget = -1;
	ASSERT_OK(vp_hotspot__find_blob(fake_read, f, hs, x->heap_lo[0] + 3 * 128 + 7, &b));
	ASSERT_UEQ(b.blob, x->blob_a);
	ASSERT_UEQ(b.code_begin, x->code_a);
	ASSERT_UEQ(b.frame_complete, x->code_a + 20);
	ASSERT_EQ(b.frame_size_words, 6);
	ASSERT_EQ(b.hops, 1);
	ASSERT_OK(vp_hotspot__find_blob(fake_read, f, hs, x->heap_lo[0], &b));
	ASSERT_UEQ(b.blob, x->blob_a);
	ASSERT_EQ(b.hops, 0);
	ASSERT_OK(vp_hotspot__find_blob(fake_read, f, hs, x->pc_b_last, &b));
	ASSERT_UEQ(b.blob, x->blob_b);
	ASSERT_UEQ(b.code_begin, x->code_b);
	ASSERT_UEQ(b.frame_complete, x->code_b + 33);
	ASSERT_EQ(b.frame_size_words, 12);
	ASSERT_EQ(b.hops, 2);        /* 303 -> 303-45=258 -> 258-254=4 */
	ASSERT_OK(vp_hotspot__find_blob(fake_read, f, hs, x->heap_lo[0] + (350 << SEG_LOG2), &b));
	ASSERT_UEQ(b.blob, x->blob_b);
	ASSERT_EQ(vp_hotspot__find_blob(fake_read, f, hs, x->pc_free, &b), -ENOENT);
	ASSERT_EQ(vp_hotspot__find_blob(fake_read, f, hs, x->pc_loop, &b), -ELOOP);
	/* The walker reads 16 map bytes at most: 15 steps back from 335 reach the block
	 * start at 320, 16 from 336 do not. */
	ASSERT_OK(vp_hotspot__find_blob(fake_read, f, hs, x->heap_lo[0] + (335 << SEG_LOG2), &b));
	ASSERT_EQ(b.hops, 15);
	ASSERT_EQ(vp_hotspot__find_blob(fake_read, f, hs, x->heap_lo[0] + (336 << SEG_LOG2), &b), -ELOOP);
	ASSERT_EQ(vp_hotspot__find_blob(fake_read, f, hs, x->pc_bad, &b), -EINVAL);
	ASSERT_EQ(vp_hotspot__find_blob(fake_read, f, hs, x->heap_lo[0] - 1, &b), -ENOENT);
	ASSERT_EQ(vp_hotspot__find_blob(fake_read, f, hs, x->heap_rhi[2], &b), -ENOENT);
	/* Past the committed segment map (unreadable here): an error, not a guess. */
	f->budget = 0;
	ASSERT_EQ(vp_hotspot__find_blob(fake_read, f, hs, x->heap_lo[0], &b), -EFAULT);
	f->budget = -1;
}

/* A layout from corrupt memory, if any, must still be one the walker can use safely. */
/* ---- the agent's view (hotspot/codeheap.h) over the same fake */

struct seen {
	int n;
	struct vp_ch_nm nm[8];
};

static int note_nm(void *ctx, const struct vp_ch_nm *nm)
{
	struct seen *s = ctx;

	if (s->n < 8)
		s->nm[s->n] = *nm;
	s->n++;
	return 0;
}

static void check_frame(const struct vp_ch_scopes *sc, size_t i, uint64_t m, int32_t bci)
{
	ASSERT_TRUE(i < sc->nframes);
	ASSERT_UEQ(sc->frames[i].method, m);
	ASSERT_EQ(sc->frames[i].bci, bci);
}

/* The walk meets block A's nmethod and nothing else, find-by-pc finds it by any pc of its
 * code and nothing elsewhere, its scopes decode to the inlining built, the methods are
 * named from their metadata; a heap changed under the walk is -EAGAIN, an nmethod
 * replaced while decoded -EAGAIN, scopes that do not parse -EINVAL. */
static void check_agent_view(struct fake *f, const struct vp_hs_globals *sy, const struct expect *x)
{
	const struct vp_hs_mem mem = { fake_read, f };
	static struct vp_hs_vm vm;
	struct vp_ch c;
	struct vp_ch_nm nm;
	struct vp_ch_scopes sc = { 0 };
	struct seen seen = { 0 };
	char why[160], k[64], n[64], sg[64];

	ASSERT_OK(vp_hs_vm__read(&vm, &mem, sy, why, sizeof(why)));
	if (vp_ch__init(&c, &vm, &mem, &mem, why, sizeof(why)))
		FAIL("the agent's view of the %s fake: %s", x->jdk25 ? "JDK 25" : "JDK 17", why);
	ASSERT_EQ(c.jdk, x->jdk25 ? 25 : 17);
	ASSERT_EQ(c.split_data, x->jdk25);
	ASSERT_EQ(c.u5_base, x->jdk25 ? 1 : 0);

	ASSERT_OK(vp_ch__walk(&c, note_nm, &seen));
	ASSERT_EQ(seen.n, 1);
	ASSERT_UEQ(seen.nm[0].blob, x->blob_a);
	ASSERT_UEQ(seen.nm[0].code_start, x->code_a);
	ASSERT_EQ(seen.nm[0].code_size, x->code_a_size);
	ASSERT_EQ(seen.nm[0].compile_id, 42);
	ASSERT_UEQ(seen.nm[0].method, x->m1);
	ASSERT_EQ(seen.nm[0].state, 0);
	ASSERT_EQ(seen.nm[0].level, 4);
	ASSERT_TRUE(!seen.nm[0].osr && vp_ch__alive(&seen.nm[0]));

	ASSERT_OK(vp_ch__find(&c, x->code_a, &nm));
	ASSERT_UEQ(nm.blob, x->blob_a);
	ASSERT_OK(vp_ch__find(&c, x->code_a + x->code_a_size - 1, &nm));
	ASSERT_EQ(vp_ch__find(&c, x->code_a + x->code_a_size, &nm), -ENOENT);   /* past its code */
	ASSERT_EQ(vp_ch__find(&c, x->blob_a, &nm), -ENOENT);                    /* its header */
	ASSERT_EQ(vp_ch__find(&c, x->code_b, &nm), -ENOENT);                    /* no nmethod */
	ASSERT_EQ(vp_ch__find(&c, x->pc_free, &nm), -ENOENT);
	ASSERT_EQ(vp_ch__find(&c, x->heap_lo[0] - 1, &nm), -ENOENT);

	ASSERT_OK(vp_ch__scopes(&c, &seen.nm[0], &sc));
	ASSERT_EQ(sc.npcs, 2);
	ASSERT_EQ(sc.pcs[0].pc_offset, 10);
	ASSERT_EQ(sc.pcs[0].depth, 1);
	check_frame(&sc, sc.pcs[0].first, x->m1, 5);
	ASSERT_EQ(sc.pcs[1].pc_offset, 20);
	ASSERT_EQ(sc.pcs[1].depth, 2);
	check_frame(&sc, sc.pcs[1].first, x->m2, 300);       /* innermost first */
	check_frame(&sc, sc.pcs[1].first + 1, x->m1, 5);

	ASSERT_OK(vp_ch__method_names(&c, x->m2, k, sizeof(k), n, sizeof(n), sg, sizeof(sg)));
	ASSERT_STREQ(k, "Ldemo/Inner;");
	ASSERT_STREQ(n, "inner");
	ASSERT_STREQ(sg, "(I)J");
	ASSERT_OK(vp_ch__method_names(&c, x->m1, k, sizeof(k), n, sizeof(n), sg, sizeof(sg)));
	ASSERT_STREQ(k, "Ldemo/Outer;");
	ASSERT_EQ(vp_ch__method_names(&c, x->blob_a, k, sizeof(k), n, sizeof(n), sg, sizeof(sg)), -EFAULT);

	/* The agent reads the heaps with plain loads, prefetching the blocks that the segment
	 * map says come next (codeheap.c, prefetch_blocks): where the fake lies at its own
	 * addresses, that walk must find what the reader's walk finds, also when every byte
	 * of the maps says a block starts there (the prefetch is only a hint). */
	if (f->at_base) {
		struct vp_ch d;
		struct seen ds = { 0 };
		ASSERT_OK(vp_ch__init(&d, &vm, &vp_hs_mem_direct, &mem, why, sizeof(why)));
		for (int pass = 0; pass < 2; pass++) {
			uint8_t saved[3][HEAP_SEGS];
			for (int h = 0; pass && h < 3; h++) {
				memcpy(saved[h], at(f, x->segmap[h]), HEAP_SEGS);
				for (int i = 0; i < HEAP_SEGS; i++)
					if (saved[h][i] == 0xff)
						((uint8_t *)at(f, x->segmap[h]))[i] = 0;
			}
			ds.n = 0;
			ASSERT_OK(vp_ch__walk(&d, note_nm, &ds));
			ASSERT_EQ(ds.n, seen.n);
			ASSERT_UEQ(ds.nm[0].blob, seen.nm[0].blob);
			ASSERT_UEQ(ds.nm[0].code_start, seen.nm[0].code_start);
			ASSERT_EQ(ds.nm[0].code_size, seen.nm[0].code_size);
			ASSERT_EQ(ds.nm[0].compile_id, seen.nm[0].compile_id);
			ASSERT_UEQ(ds.nm[0].method, seen.nm[0].method);
			ASSERT_EQ(ds.nm[0].state, seen.nm[0].state);
			for (int h = 0; pass && h < 3; h++)
				memcpy(at(f, x->segmap[h]), saved[h], HEAP_SEGS);
		}
	}

	/* Replaced while decoded: the copy is checked against the header afterwards. */
	struct vp_ch_nm old = seen.nm[0];
	old.compile_id = 41;
	ASSERT_EQ(vp_ch__scopes(&c, &old, &sc), -EAGAIN);
	/* A heap changed under the walk: a used block where the map starts none. */
	uint8_t *sm = at(f, x->segmap[0]);
	sm[4] = 1;
	ASSERT_EQ(vp_ch__walk(&c, note_nm, &seen), -EAGAIN);
	sm[4] = 0;
	/* Every truncation of the readable memory and corruption of the nmethod: an error or
	 * a bounded result, never a crash or a hang. */
	uint8_t *good = malloc(f->used);
	ASSERT_NOT_NULL(good);
	memcpy(good, f->mem, f->used);
	unsigned seed = x->jdk25 ? 125 : 117;
	for (int it = 0; it < 2000; it++) {
		memcpy(f->mem, good, f->used);
		for (int flips = 1 + (int)(rand_r(&seed) % 4); flips > 0; flips--) {
			uint64_t o = (rand_r(&seed) % 2) ? x->blob_a - FBASE + rand_r(&seed) % 512
							 : x->segmap[2] + HEAP_SEGS - FBASE +
							   rand_r(&seed) % (f->used - (x->segmap[2] + HEAP_SEGS - FBASE));
			f->mem[o] ^= (uint8_t)(1u << (rand_r(&seed) % 8));
		}
		f->budget = (it % 5) ? -1 : (long)(rand_r(&seed) % 200);
		f->reads = 0;
		seen.n = 0;
		if (vp_ch__walk(&c, note_nm, &seen) == 0)
			for (int i = 0; i < seen.n && i < 8; i++)
				if (vp_ch__scopes(&c, &seen.nm[i], &sc) == 0)
					ASSERT_TRUE(sc.npcs <= 3);
		(void)vp_ch__find(&c, x->code_a + (uint64_t)(rand_r(&seed) % 64), &nm);
		(void)vp_ch__method_names(&c, x->m2, k, sizeof(k), n, sizeof(n), sg, sizeof(sg));
	}
	f->budget = -1;
	memcpy(f->mem, good, f->used);
	free(good);
	vp_ch__scopes_free(&sc);
}

/* UNSIGNED5 (CompressedReadStream::read_int) on known byte strings, before JDK 20 (no
 * excluded byte) and since (every byte plus one), and round trips with HotSpot's
 * encoding of values at every byte-count boundary. */
static void unit_unsigned5(void)
{
	static const struct { int base; uint8_t b[5]; size_t n; uint32_t v; } known[] = {
		{ 0, { 0 }, 1, 0 }, { 0, { 5 }, 1, 5 }, { 0, { 191 }, 1, 191 }, { 0, { 192, 0 }, 2, 192 },
		{ 0, { 237, 1 }, 2, 301 }, { 0, { 255, 63 }, 2, 192 + 63 + 63 * 64 },
		{ 1, { 1 }, 1, 0 }, { 1, { 6 }, 1, 5 }, { 1, { 191 }, 1, 190 }, { 1, { 192, 1 }, 2, 191 },
		{ 1, { 238, 2 }, 2, 301 },
	};
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
		const uint8_t *p = known[i].b;
		uint32_t v = 0;

		ASSERT_OK(vp_hs__unsigned5(&p, known[i].b + known[i].n, known[i].base, &v));
		ASSERT_UEQ(v, known[i].v);
		ASSERT_EQ(p - known[i].b, (long)known[i].n);
		/* Cut by one byte: the number runs past the end. */
		p = known[i].b;
		if (known[i].n > 1)
			ASSERT_EQ(vp_hs__unsigned5(&p, known[i].b + known[i].n - 1, known[i].base, &v), -EINVAL);
	}
	const uint8_t none = 0, *p = &none;
	uint32_t v;
	ASSERT_EQ(vp_hs__unsigned5(&p, &none, 0, &v), -EINVAL);

	static const uint32_t vals[] = { 0, 1, 190, 191, 192, 255, 256, 301, 4095, 12479, 12480, 12481, 1u << 20,
					 798911, 798912, 51130559, 51130560, 0x7fffffffu, 0xfffffffeu, 0xffffffffu };
	for (int base = 0; base <= 1; base++) {
		uint8_t buf[5 * (sizeof(vals) / sizeof(vals[0]))];
		size_t len = 0;

		for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
			size_t n = u5_put(buf + len, vals[i], base);
			ASSERT_TRUE(n >= 1 && n <= 5);
			for (size_t k = 0; k < n; k++)
				ASSERT_TRUE(!base || buf[len + k] != 0);   /* the excluded byte */
			len += n;
		}
		p = buf;
		for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
			ASSERT_OK(vp_hs__unsigned5(&p, buf + len, base, &v));
			ASSERT_UEQ(v, vals[i]);
		}
		ASSERT_TRUE(p == buf + len);
	}
}

static void check_sane(const struct vpb_hotspot *hs)
{
	ASSERT_GE(hs->nr_heaps, 1);
	ASSERT_LE(hs->nr_heaps, VPB_MAX_HEAPS);
	bool in = false;
	for (uint32_t i = 0; i < hs->nr_heaps; i++) {
		ASSERT_TRUE(hs->heaps[i].lo < hs->heaps[i].hi);
		ASSERT_LE(hs->heaps[i].hi - hs->heaps[i].lo, 1ull << 32);
		ASSERT_GE(hs->heaps[i].log2_seg, 4);
		ASSERT_LE(hs->heaps[i].log2_seg, 16);
		in |= hs->interp_lo >= hs->heaps[i].lo && hs->interp_hi <= hs->heaps[i].hi;
	}
	ASSERT_TRUE(in);
	ASSERT_LE(hs->blob_frame_size + 4, 64);
	ASSERT_LE(hs->blob_code + 4, 64);
	ASSERT_EQ(hs->slot_method, -3);
}

static void expect_rc(struct fake *f, const struct vp_hs_globals *sy, int want, const char *what)
{
	struct vpb_hotspot hs;
	char err[256];
	int rc = read_fake(f, sy, &hs, err);

	if (rc != want)
		FAIL("%s: rc %d (%s), expected %d", what, rc, err, want);
	if (rc) {
		ASSERT_EQ(hs.nr_heaps, 0);
		ASSERT_TRUE(err[0] != '\0');
	}
	fprintf(stderr, "  %s: %d %s\n", what, rc, err);
}

static void unit_flavour(struct fake *f, bool jdk25)
{
	struct vp_hs_globals sy = { 0 };
	struct expect x;
	struct vpb_hotspot hs;
	char err[256];
	const char *rel = jdk25 ? "25.0.1+8-LTS" : "17.0.16+8-Debian-1deb13u1";

	build(f, jdk25, rel, &sy, &x);
	if (read_fake(f, &sy, &hs, err))
		FAIL("good %s fake: %s", rel, err);
	check_layout(&hs, &x);
	check_lookup(f, &hs, &x);
	check_agent_view(f, &sy, &x);
	long total = f->reads;
	read_fake(f, &sy, &hs, err);
	total = f->reads;
	fprintf(stderr, "%s: layout read in %ld reads\n", rel, total);

	/* Not initialised yet. */
	put64(f, x.heaps_cell, 0);
	expect_rc(f, &sy, -EAGAIN, "no _heaps");
	put64(f, x.heaps_cell, x.ga);
	put32(f, x.ga, 0);
	expect_rc(f, &sy, -EAGAIN, "zero heaps");
	put32(f, x.ga, 3);
	uint64_t lo;
	memcpy(&lo, at(f, x.heap0 + (jdk25 ? 0 : 8) + 16), 8);
	put64(f, x.heap0 + (jdk25 ? 0 : 8) + 16, 0);
	expect_rc(f, &sy, -EAGAIN, "heap without memory");
	put64(f, x.heap0 + (jdk25 ? 0 : 8) + 16, lo);
	uint64_t sq;
	memcpy(&sq, at(f, x.interp_cell), 8);
	put64(f, x.interp_cell, 0);
	expect_rc(f, &sy, -EAGAIN, "no interpreter");
	put64(f, x.interp_cell, sq);
	/* Still generating: the queue ends before the buffer's (not yet trimmed) limit. */
	put32(f, sq + 20, 0x8000);      /* still inside heap 2: only the queue tells */
	expect_rc(f, &sy, -EAGAIN, "interpreter being generated");
	put32(f, sq + 20, 0x3000);
	put64(f, x.structs_cell, 0);
	expect_rc(f, &sy, -EAGAIN, "no struct table");
	put64(f, x.structs_cell, x.entries);
	ASSERT_OK(read_fake(f, &sy, &hs, err));

	/* Releases viprof does not know, or no release at all. */
	static const char *bad_rel[] = { "11.0.2+9", "1.8.0_392-b08", "27.0.1", "16.0.2", "banana", "", "170.0",
					 "25x" };
	for (size_t i = 0; i < sizeof(bad_rel) / sizeof(bad_rel[0]); i++) {
		put64(f, x.release_ptr_cell, fstr(f, bad_rel[i]));
		expect_rc(f, &sy, -ENOTSUP, bad_rel[i]);
	}
	static const char *good_rel[] = { "17", "21.0.5+11-LTS", "25-ea+3", "26" };
	for (size_t i = 0; i < sizeof(good_rel) / sizeof(good_rel[0]); i++) {
		put64(f, x.release_ptr_cell, fstr(f, good_rel[i]));
		expect_rc(f, &sy, 0, good_rel[i]);
	}

	/* A field whose C type the walker would misread, a missing field, both code fields. */
	uint64_t tstr, name;
	memcpy(&tstr, at(f, x.frame_size_tstr_slot), 8);
	put64(f, x.frame_size_tstr_slot, fstr(f, "short"));
	expect_rc(f, &sy, -ENOTSUP, "_frame_size as short");
	put64(f, x.frame_size_tstr_slot, tstr);
	memcpy(&name, at(f, x.frame_size_name_slot), 8);
	put64(f, x.frame_size_name_slot, fstr(f, "_frame_sizes"));
	expect_rc(f, &sy, -ENOTSUP, "no _frame_size");
	put64(f, x.frame_size_name_slot, name);
	memcpy(&name, at(f, x.code_offset_name_slot), 8);
	put64(f, x.code_offset_name_slot, fstr(f, "_nothing"));
	expect_rc(f, &sy, -ENOTSUP, "no code start field");
	put64(f, x.code_offset_name_slot, name);
	ASSERT_OK(read_fake(f, &sy, &hs, err));

	/* The interpreter outside every heap; a heap of 2^3-byte segments. */
	put64(f, sq + 8, FBASE + 64);
	expect_rc(f, &sy, -ENOTSUP, "interpreter outside the heaps");
	put64(f, sq + 8, x.interp_lo);
	put32(f, x.heap0 + (jdk25 ? 248 : 256), 3);
	expect_rc(f, &sy, -ENOTSUP, "segment size 8");
	put32(f, x.heap0 + (jdk25 ? 248 : 256), SEG_LOG2);

	/* Every truncation of the readable memory: an error, and nothing half-filled. */
	for (long b = 0; b < total; b++) {
		f->budget = b;
		f->reads = 0;
		int rc = vp_hotspot__read(fake_read, f, &sy, &hs, err, sizeof(err));
		if (rc == 0)
			FAIL("read succeeded with only %ld of its %ld reads", b, total);
		ASSERT_EQ(hs.nr_heaps, 0);
	}
	f->budget = -1;

	/* Random corruption of the tables, heaps and blobs: it may still read (a byte
	 * nobody looks at), but then the result must be sane; never a crash or a hang. */
	uint8_t *good = malloc(f->used);
	ASSERT_NOT_NULL(good);
	memcpy(good, f->mem, f->used);
	unsigned seed = jdk25 ? 25 : 17, ok = 0, failed = 0;
	for (int it = 0; it < 3000; it++) {
		memcpy(f->mem, good, f->used);
		int flips = 1 + (int)(rand_r(&seed) % 8);
		for (int k = 0; k < flips; k++) {
			/* Mostly the small objects, which sit after the heaps and maps. */
			uint64_t span = f->used - (x.segmap[2] + HEAP_SEGS - FBASE);
			uint64_t o = (rand_r(&seed) % 4) ? x.segmap[2] + HEAP_SEGS - FBASE + rand_r(&seed) % span
							 : rand_r(&seed) % f->used;
			f->mem[o] ^= (uint8_t)(1u << (rand_r(&seed) % 8));
		}
		if (vp_hotspot__read(fake_read, f, &sy, &hs, err, sizeof(err)) == 0) {
			check_sane(&hs);
			struct vp_hotspot_blob b;
			for (int p = 0; p < 8; p++)
				(void)vp_hotspot__find_blob(fake_read, f, &hs,
							    hs.heaps[0].lo + (uint64_t)rand_r(&seed) % (HEAP_SEGS << SEG_LOG2),
							    &b);
			ok++;
		} else {
			ASSERT_EQ(hs.nr_heaps, 0);
			failed++;
		}
	}
	fprintf(stderr, "%s: 3000 corruptions: %u still read sanely, %u refused\n", rel, ok, failed);
	ASSERT_GT(failed, 100);
	memcpy(f->mem, good, f->used);
	free(good);

	/* A table with no end: every entry a real-looking one. */
	build(f, jdk25, rel, &sy, &x);
	uint64_t big = falloc(f, 20001 * 48, 8), nm = fstr(f, "Klass"), fl = fstr(f, "_x"), ts = fstr(f, "int");
	for (int i = 0; i < 20001; i++) {
		put64(f, big + i * 48, nm);
		put64(f, big + i * 48 + 8, fl);
		put64(f, big + i * 48 + 16, ts);
	}
	put64(f, x.structs_cell, big);
	expect_rc(f, &sy, -ENOTSUP, "table without end");
	/* Garbage everywhere behind sane-looking globals. */
	for (uint64_t o = x.entries - FBASE; o < f->used; o++)
		f->mem[o] = (uint8_t)rand_r(&seed);
	put64(f, x.structs_cell, x.entries);
	struct vpb_hotspot hs2;
	ASSERT_TRUE(read_fake(f, &sy, &hs2, err) != 0);
	ASSERT_EQ(hs2.nr_heaps, 0);
}

static int unit(void)
{
	/* At FBASE when that is free, so that the agent's plain-load reader reads it too. */
	struct fake f = { 0 };
	void *p = mmap((void *)(uintptr_t)FBASE, FSIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
		       -1, 0);
	if (p == (void *)(uintptr_t)FBASE) {
		f.mem = p;
		f.at_base = true;
	} else {
		if (p != MAP_FAILED)
			munmap(p, FSIZE);   /* an old kernel took the address as a hint */
		f.mem = calloc(1, FSIZE);
		fprintf(stderr, "unit: %#llx is taken: the plain-load walk is not checked\n", FBASE);
	}

	ASSERT_NOT_NULL(f.mem);
	unit_unsigned5();
	unit_flavour(&f, false);
	unit_flavour(&f, true);
	if (f.at_base)
		munmap(f.mem, FSIZE);
	else
		free(f.mem);
	fprintf(stderr, "unit: ok\n");
	return 0;
}

/* ---- a live JVM */

struct pidmem {
	pid_t pid;
};

static int pid_read(void *ctx, uint64_t a, void *buf, size_t len)
{
	struct pidmem *m = ctx;
	struct iovec l = { buf, len }, r = { (void *)(uintptr_t)a, len };

	return process_vm_readv(m->pid, &l, 1, &r, 1, 0) == (ssize_t)len ? 0 : -EFAULT;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Runs `jcmd PID args...` and returns its stdout. */
static char *jcmd(const char *java, pid_t pid, const char *cmd, const char *arg)
{
	char jc[600], ps[32], out[] = "/tmp/vp-hotspot-jcmd-XXXXXX";
	int fd = mkstemp(out);
	if (fd < 0)
		FAIL("mkstemp: %s", strerror(errno));
	close(fd);
	snprintf(jc, sizeof(jc), "%.*s/jcmd", (int)(strlen(java) - 5), java);
	snprintf(ps, sizeof(ps), "%d", (int)pid);
	char *argv[] = { jc, ps, (char *)cmd, (char *)arg, NULL };
	int rc = run_argv(argv, out, NULL, 60);
	char *s = tu_read(out);
	unlink(out);
	if (rc)
		FAIL("%s %s %s exited %d: %s", jc, ps, cmd, rc, s);
	return s;
}

struct listed {
	uint64_t blob, code, end;
	int state;
	char name[200];
};

/* `Compiler.codelist` lines: "id level state Name.m(sig) [blob, code_begin - code_end]". */
static int parse_codelist(const char *s, struct listed *out, int max)
{
	int n = 0;
	for (const char *l = s; l && *l && n < max; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		struct listed e;
		int id, lvl;
		const char *br = strchr(l, '[');
		const char *nl = strchr(l, '\n');

		if (!br || (nl && br > nl))
			continue;
		if (sscanf(l, "%d %d %d %199s", &id, &lvl, &e.state, e.name) != 4)
			continue;
		if (sscanf(br, "[%" SCNx64 ", %" SCNx64 " - %" SCNx64 "]", &e.blob, &e.code, &e.end) != 3)
			continue;
		out[n++] = e;
	}
	return n;
}

static void check_listed_lookup(pid_t pid, const struct vpb_hotspot *hs, const struct listed *e, int *checked)
{
	struct pidmem m = { pid };
	uint64_t pcs[3] = { e->code, e->code + (e->end - e->code) / 2, e->end - 1 };

	for (int k = 0; k < 3; k++) {
		struct vp_hotspot_blob b;
		int rc = vp_hotspot__find_blob(pid_read, &m, hs, pcs[k], &b);

		if (rc)
			FAIL("%s: no blob for pc %#" PRIx64 ": %d", e->name, pcs[k], rc);
		if (b.blob != e->blob || b.code_begin != e->code)
			FAIL("%s: pc %#" PRIx64 " gave blob %#" PRIx64 " code %#" PRIx64 ", jcmd lists blob %#" PRIx64
			     " code %#" PRIx64, e->name, pcs[k], b.blob, b.code_begin, e->blob, e->code);
		ASSERT_TRUE(b.code_begin <= pcs[k]);
		/* Method handle intrinsics (MethodHandle.linkTo*, invokeBasic: what any
		 * invokedynamic, e.g. in java.lang.management, makes HotSpot generate) are
		 * nmethods that jump on to their target without a frame of their own. */
		if (!strncmp(e->name, "java.lang.invoke.MethodHandle.", 30) && b.frame_size_words == 0)
			continue;
		/* x86-64 compiled frames: return address and saved rbp at least, 16-byte
		 * aligned (an even number of words). */
		if (b.frame_size_words < 2 || b.frame_size_words > 10000 || (b.frame_size_words & 1))
			FAIL("%s: frame size %u words", e->name, b.frame_size_words);
		/* The prologue (stack bang, push rbp, sub rsp) ends inside the code, early. */
		if (b.frame_complete <= b.code_begin || b.frame_complete >= e->end ||
		    b.frame_complete - b.code_begin > 1024)
			FAIL("%s: frame complete at %#" PRIx64 " for code %#" PRIx64 "-%#" PRIx64, e->name,
			     b.frame_complete, e->code, e->end);
		ASSERT_LT(b.hops, VP_HOTSPOT_MAX_HOPS);
	}
	(*checked)++;
}

static bool still_listed(const struct listed *l, int n, const struct listed *e)
{
	for (int i = 0; i < n; i++)
		if (l[i].blob == e->blob && l[i].code == e->code && !strcmp(l[i].name, e->name))
			return true;
	return false;
}

static int live(int argc, char **argv)
{
	bool jdk17;
	const char *java = tu_jdk_from_args(argc, argv, &jdk17);
	struct vpb_hotspot hs, hs2;
	char err[256], cls[600];

	snprintf(cls, sizeof(cls), "%s/JitSplit.class", VIPROF_JAVA_CLASSES);
	if (access(cls, R_OK))
		SKIP("Java fixtures not compiled (%s missing: no javac?)", cls);

	/* Not a JVM. */
	char *sl[] = { "/bin/sleep", "30", NULL };
	pid_t sp = run_start(sl, NULL, NULL);
	run_wait_state(sp, 0, 10000, "running /bin/sleep");
	ASSERT_EQ(vp_hotspot__read_pid(sp, &hs, err, sizeof(err)), -ENOENT);
	ASSERT_EQ(hs.nr_heaps, 0);
	fprintf(stderr, "sleep: %s\n", err);
	kill(sp, SIGKILL);
	waitpid(sp, NULL, 0);

	/* A JVM, asked from its first moments on: until it is up, the answer is an error
	 * (not initialised, no libjvm.so yet, half-relocated tables), then a layout. */
	char *jv[] = { (char *)java, "-XX:-PreserveFramePointer", "-cp", VIPROF_JAVA_CLASSES, "JitSplit", "40", NULL };
	pid_t pid = run_start(jv, NULL, NULL);
	double t0 = now_s();
	int rc, tries = 0, eagain = 0, enoent = 0, other = 0;
	while ((rc = vp_hotspot__read_pid(pid, &hs, err, sizeof(err))) != 0 && now_s() - t0 < 20) {
		tries++;
		if (rc == -EAGAIN)
			eagain++;
		else if (rc == -ENOENT)
			enoent++;
		else
			other++;
		ASSERT_EQ(hs.nr_heaps, 0);
		usleep(2000);
	}
	if (rc) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		FAIL("no layout within 20 s: %d %s", rc, err);
	}
	fprintf(stderr, "layout after %.2f s: %d tries (%d EAGAIN, %d ENOENT, %d other, last: %s)\n",
		now_s() - t0, tries, eagain, enoent, other, err);
	fprintf(stderr, "heaps %u, interpreter %#" PRIx64 "-%#" PRIx64 ", HeapBlock %u, frame_size@%u "
		"frame_complete@%u%s code@%u%s\n", hs.nr_heaps, (uint64_t)hs.interp_lo, (uint64_t)hs.interp_hi,
		hs.heapblock_size, hs.blob_frame_size, hs.blob_frame_complete, hs.frame_complete_16 ? "(16)" : "",
		hs.blob_code, hs.blob_code_is_offset ? "(offset)" : "(pointer)");

	/* The same through /proc/PID/mem. */
	ASSERT_OK(vp_hotspot__read_pid_via(pid, VP_HOTSPOT_VIA_PROC_MEM, &hs2, err, sizeof(err)));
	ASSERT_EQ(memcmp(&hs, &hs2, sizeof(hs)), 0);

	/* The heaps: `Compiler.codecache` prints "bounds [low, committed high, reserved high]". */
	char *cc = jcmd(java, pid, "Compiler.codecache", NULL);
	int nb = 0;
	for (const char *p = cc; (p = strstr(p, "bounds [")); p++) {
		uint64_t lo, hi, rhi;
		bool found = false;
		if (sscanf(p, "bounds [%" SCNx64 ", %" SCNx64 ", %" SCNx64 "]", &lo, &hi, &rhi) != 3)
			FAIL("cannot parse %.60s", p);
		for (uint32_t i = 0; i < hs.nr_heaps; i++)
			found |= hs.heaps[i].lo == lo && hs.heaps[i].hi == rhi;
		if (!found)
			FAIL("heap %#" PRIx64 "-%#" PRIx64 " of Compiler.codecache not in the layout", lo, rhi);
		nb++;
	}
	ASSERT_EQ(nb, hs.nr_heaps);
	free(cc);

	/* The interpreter: Compiler.perfmap's "Interpreter" blob (code start and size). */
	char pm[64];
	snprintf(pm, sizeof(pm), "/tmp/perf-%d.map", (int)pid);
	free(jcmd(java, pid, "Compiler.perfmap", NULL));
	char *map = tu_read(pm);
	unlink(pm);
	const char *ip = strstr(map, " Interpreter\n");
	if (!ip)
		FAIL("no Interpreter in %s", pm);
	while (ip > map && ip[-1] != '\n')
		ip--;
	uint64_t ia, isz;
	ASSERT_EQ(sscanf(ip, "%" SCNx64 " %" SCNx64, &ia, &isz), 2);
	fprintf(stderr, "perfmap Interpreter %#" PRIx64 " +%#" PRIx64 "\n", ia, isz);
	ASSERT_UEQ(hs.interp_lo, ia);
	ASSERT_TRUE(hs.interp_hi <= ia + isz && hs.interp_hi > ia + isz / 2);
	free(map);
	struct pidmem m = { pid };
	struct vp_hotspot_blob ib;
	ASSERT_OK(vp_hotspot__find_blob(pid_read, &m, &hs, hs.interp_lo + 100, &ib));
	ASSERT_UEQ(ib.code_begin, ia);
	ASSERT_EQ(ib.frame_size_words, 0);   /* a BufferBlob: no fixed frame */

	/* Compiled methods: wait for JitSplit's hot methods, then check every listed one. */
	struct listed *l = calloc(4096, sizeof(*l)), *l2 = calloc(4096, sizeof(*l2));
	int n = 0, hot = 0;
	ASSERT_NOT_NULL(l);
	ASSERT_NOT_NULL(l2);
	for (t0 = now_s(); now_s() - t0 < 25; usleep(500000)) {
		char *cl = jcmd(java, pid, "Compiler.codelist", NULL);
		n = parse_codelist(cl, l, 4096);
		free(cl);
		hot = 0;
		for (int i = 0; i < n; i++)
			hot += !strncmp(l[i].name, "JitSplit.hot", 12);
		if (hot >= 2 && n >= 10)
			break;
	}
	if (hot < 2)
		FAIL("JitSplit's hot methods not compiled after 25 s (%d listed)", n);
	int checked = 0, gone = 0;
	struct vp_hotspot_blob *res = calloc((size_t)n, sizeof(*res));
	int *rcs = calloc((size_t)n, sizeof(int));
	/* Look all up first, then ask jcmd again: a method flushed in between is skipped,
	 * one still listed must have been found right. */
	for (int i = 0; i < n; i++)
		rcs[i] = vp_hotspot__find_blob(pid_read, &m, &hs, l[i].code + (l[i].end - l[i].code) / 2, &res[i]);
	char *cl = jcmd(java, pid, "Compiler.codelist", NULL);
	int n2 = parse_codelist(cl, l2, 4096);
	free(cl);
	for (int i = 0; i < n; i++) {
		if (!still_listed(l2, n2, &l[i])) {
			gone++;
			continue;
		}
		if (rcs[i] || res[i].blob != l[i].blob)
			FAIL("%s: lookup %d blob %#" PRIx64 ", listed %#" PRIx64, l[i].name, rcs[i], res[i].blob,
			     l[i].blob);
		check_listed_lookup(pid, &hs, &l[i], &checked);
	}
	fprintf(stderr, "%d compiled methods checked (%d flushed meanwhile), %d of JitSplit.hot*\n", checked, gone,
		hot);
	ASSERT_GE(checked, 5);
	free(res);
	free(rcs);
	free(l);
	free(l2);

	/* The JVM dies while being read: errors, never a crash. The reader runs in a
	 * child so that a crash shows as a signal. */
	pid_t rd = fork();
	if (rd == 0) {
		int ok = 0, errs = 0, last = 0;
		double t = now_s();
		while (now_s() - t < 5) {
			struct vpb_hotspot h;
			char e[256];
			last = vp_hotspot__read_pid(pid, &h, e, sizeof(e));
			if (last == 0)
				ok++;
			else
				errs++;
			if (last && h.nr_heaps)
				_exit(3);
			if (errs > 50)
				break;
		}
		fprintf(stderr, "reader: %d layouts, %d errors, last %d\n", ok, errs, last);
		_exit(last == -ESRCH || last == -ENOENT ? 0 : 2);
	}
	usleep(300000);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	ASSERT_EQ(run_wait(rd, 30), 0);
	ASSERT_TRUE(vp_hotspot__read_pid(pid, &hs, err, sizeof(err)) != 0);
	fprintf(stderr, "after exit: %s\n", err);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "unit"))
		return unit();
	return live(argc, argv);
}
