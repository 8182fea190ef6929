/* HotSpot's layout from its exported VM structure tables: see hotspot.h.
 *
 * The tables (vmStructs.cpp) are arrays of entries whose field offsets inside an entry
 * are themselves exported (gHotSpotVMStructEntry*Offset), so nothing here assumes a
 * JDK's entry layout. Everything read from the target is treated as untrusted: every
 * loop has a bound, every string a maximum length, and every width the walker relies on
 * is checked against the field's declared C type. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/safefs.h"
#include "daemon/hotspot.h"

#define MAX_ENTRIES 20000        /* JDK 17 has ~1900 struct entries; a bound against garbage */
#define MAX_STRIDE 256
#define NAME_LEN 96              /* longer names are none we look for */
#define MAX_HEAPS_LISTED 16      /* CodeCache::_heaps has 1 to 3 (segmented) heaps */
#define MAX_HEAP_SPAN (1ull << 32) /* ReservedCodeCacheSize is at most 2 GiB */
#define MAX_INTERP_SIZE (64u << 20)
#define MAX_FIELD_OFFSET 4096    /* no HotSpot type we read is larger */
#define BLOB_HDR 64              /* the BPF walker reads this many bytes of a CodeBlob */

/* ---- what the walker needs, by (type, field) name */

enum width { WD_ANY, WD_PTR, WD_INT, WD_INT_OR_16 };

struct want {
	const char *type, *field;
	enum width width;        /* what its declared C type must be */
	bool is_static, found;
	uint64_t offset;         /* nonstatic: offset in the type */
	uint64_t address;        /* static: address of the variable */
	unsigned bytes;          /* 2, 4, 8, or 0 for an embedded struct */
};

enum {
	W_HEAPS, W_GA_LEN, W_GA_DATA, W_HEAP_MEMORY, W_HEAP_SEGMAP, W_HEAP_LOG2, W_VS_LOW, W_VS_HIGH,
	W_VS_HIGH_BOUNDARY, W_BLOB_FRAME_SIZE, W_BLOB_FRAME_COMPLETE, W_BLOB_CODE_BEGIN,
	W_BLOB_CODE_OFFSET, W_INTERP_CODE, W_SQ_BUFFER, W_SQ_LIMIT, W_SQ_BEGIN, W_SQ_END, W_METHOD_CONST, W_VM_RELEASE, W__N
};

static const struct want want_template[W__N] = {
	[W_HEAPS] = { "CodeCache", "_heaps", WD_PTR, true },
	[W_GA_LEN] = { "GrowableArrayBase", "_len", WD_INT, false },
	/* vmStructs exports GrowableArray's data pointer only for <int>; the element type
	 * does not move it, so it serves for GrowableArray<CodeHeap*> too. */
	[W_GA_DATA] = { "GrowableArray<int>", "_data", WD_PTR, false },
	[W_HEAP_MEMORY] = { "CodeHeap", "_memory", WD_ANY, false },
	[W_HEAP_SEGMAP] = { "CodeHeap", "_segmap", WD_ANY, false },
	[W_HEAP_LOG2] = { "CodeHeap", "_log2_segment_size", WD_INT, false },
	[W_VS_LOW] = { "VirtualSpace", "_low", WD_PTR, false },
	[W_VS_HIGH] = { "VirtualSpace", "_high", WD_PTR, false },
	[W_VS_HIGH_BOUNDARY] = { "VirtualSpace", "_high_boundary", WD_PTR, false },
	[W_BLOB_FRAME_SIZE] = { "CodeBlob", "_frame_size", WD_INT, false },
	[W_BLOB_FRAME_COMPLETE] = { "CodeBlob", "_frame_complete_offset", WD_INT_OR_16, false },
	[W_BLOB_CODE_BEGIN] = { "CodeBlob", "_code_begin", WD_PTR, false },      /* JDK 17 */
	[W_BLOB_CODE_OFFSET] = { "CodeBlob", "_code_offset", WD_INT, false },    /* JDK 23+ */
	[W_INTERP_CODE] = { "AbstractInterpreter", "_code", WD_PTR, true },
	[W_SQ_BUFFER] = { "StubQueue", "_stub_buffer", WD_PTR, false },
	[W_SQ_LIMIT] = { "StubQueue", "_buffer_limit", WD_INT, false },
	[W_SQ_BEGIN] = { "StubQueue", "_queue_begin", WD_INT, false },
	[W_SQ_END] = { "StubQueue", "_queue_end", WD_INT, false },
	[W_METHOD_CONST] = { "Method", "_constMethod", WD_PTR, false },
	[W_VM_RELEASE] = { "Abstract_VM_Version", "_s_vm_release", WD_PTR, true },
};

/* x86-64 interpreter frame slots in words from rbp, per JDK feature release. From
 * frame_x86.hpp: sender_sp -1, last_sp -2, method -3, mirror -4, mdp -5, cache -6,
 * locals -7, bcp -8; the same in JDK 17 and in OpenJDK's current sources (2026), which
 * covers 25 and 26. A release outside these rows is refused, not guessed. */
static const struct jdk_layout {
	int first, last;
	int16_t sender_sp, method, bcp;
} jdk_layouts[] = {
	{ 17, 26, -1, -3, -8 },
};

static unsigned type_bytes(const char *t)
{
	size_t n = strlen(t);

	if (n && t[n - 1] == '*')
		return 8;
	if (!strcmp(t, "address") || !strcmp(t, "intptr_t") || !strcmp(t, "uintptr_t") || !strcmp(t, "size_t"))
		return 8;
	if (!strcmp(t, "int") || !strcmp(t, "int32_t") || !strcmp(t, "uint32_t") || !strcmp(t, "jint"))
		return 4;
	if (!strcmp(t, "int16_t") || !strcmp(t, "uint16_t") || !strcmp(t, "short") || !strcmp(t, "u2") ||
	    !strcmp(t, "jshort"))
		return 2;
	return 0;
}

static bool width_ok(enum width w, unsigned bytes)
{
	switch (w) {
	case WD_ANY: return true;
	case WD_PTR: return bytes == 8;
	case WD_INT: return bytes == 4;
	case WD_INT_OR_16: return bytes == 4 || bytes == 2;
	}
	return false;
}

/* ---- reading the target */

static int rd_u64(vp_mem_read_fn rd, void *ctx, uint64_t a, uint64_t *v)
{
	*v = 0;
	return rd(ctx, a, v, sizeof(*v));
}

static int rd_s32(vp_mem_read_fn rd, void *ctx, uint64_t a, int32_t *v)
{
	*v = 0;
	return rd(ctx, a, v, sizeof(*v));
}

/* A NUL-terminated string of fewer than len bytes, read a page piece at a time (a
 * short string may end just before an unmapped page). -ENAMETOOLONG when it has no NUL
 * within len; a read error as is. */
static int rd_str(vp_mem_read_fn rd, void *ctx, uint64_t a, char *out, size_t len)
{
	size_t n = 0;

	out[0] = '\0';
	if (!a)
		return -EFAULT;
	while (n < len) {
		size_t k = 4096 - (size_t)((a + n) & 4095);
		int rc;

		if (k > len - n)
			k = len - n;
		if (k > 64)
			k = 64;              /* names are short: do not read far past them */
		rc = rd(ctx, a + n, out + n, k);
		if (rc)
			return rc < 0 ? rc : -EFAULT;
		char *z = memchr(out + n, '\0', k);
		if (z)
			return 0;
		n += k;
	}
	out[len - 1] = '\0';
	return -ENAMETOOLONG;
}

struct tab {
	uint64_t base, stride, o_type, o_field, o_tstr, o_static, o_off, o_addr;
};

static int read_struct_globals(vp_mem_read_fn rd, void *ctx, const struct vp_hotspot_syms *sy, struct tab *t,
			       char *err, size_t errlen)
{
	if (rd_u64(rd, ctx, sy->structs, &t->base) || rd_u64(rd, ctx, sy->struct_stride, &t->stride) ||
	    rd_u64(rd, ctx, sy->struct_type_name_off, &t->o_type) ||
	    rd_u64(rd, ctx, sy->struct_field_name_off, &t->o_field) ||
	    rd_u64(rd, ctx, sy->struct_type_string_off, &t->o_tstr) ||
	    rd_u64(rd, ctx, sy->struct_is_static_off, &t->o_static) ||
	    rd_u64(rd, ctx, sy->struct_offset_off, &t->o_off) || rd_u64(rd, ctx, sy->struct_address_off, &t->o_addr)) {
		snprintf(err, errlen, "cannot read libjvm.so's gHotSpotVMStruct* globals (process gone?)");
		return -EFAULT;
	}
	if (!t->base) {
		snprintf(err, errlen, "gHotSpotVMStructs is still NULL: JVM not initialised yet, try again");
		return -EAGAIN;
	}
	if (t->stride < 24 || t->stride > MAX_STRIDE || t->o_type > t->stride - 8 || t->o_field > t->stride - 8 ||
	    t->o_tstr > t->stride - 8 || t->o_static > t->stride - 4 || t->o_off > t->stride - 8 ||
	    t->o_addr > t->stride - 8) {
		snprintf(err, errlen, "HotSpot's VM structure table has an entry layout viprof does not understand "
			 "(stride %llu): not a HotSpot JVM, or a corrupt one", (unsigned long long)t->stride);
		return -ENOTSUP;
	}
	return 0;
}

/* Walks gHotSpotVMStructs, noting the entries in w. */
static int scan_structs(vp_mem_read_fn rd, void *ctx, const struct tab *t, struct want *w, char *err,
			size_t errlen)
{
	for (int i = 0; i < MAX_ENTRIES; i++) {
		uint8_t e[MAX_STRIDE];
		uint64_t tn, fn, ts, off, addr;
		int32_t st;
		char type[NAME_LEN], field[NAME_LEN], tstr[NAME_LEN];
		int rc;

		if ((rc = rd(ctx, t->base + (uint64_t)i * t->stride, e, t->stride))) {
			snprintf(err, errlen, "cannot read VM structure entry %d (process gone?)", i);
			return rc < 0 ? rc : -EFAULT;
		}
		memcpy(&tn, e + t->o_type, 8);
		if (!tn)
			return 0;            /* the table ends with an all-NULL entry */
		memcpy(&fn, e + t->o_field, 8);
		memcpy(&ts, e + t->o_tstr, 8);
		memcpy(&st, e + t->o_static, 4);
		memcpy(&off, e + t->o_off, 8);
		memcpy(&addr, e + t->o_addr, 8);
		rc = rd_str(rd, ctx, tn, type, sizeof(type));
		if (rc == -ENAMETOOLONG)
			continue;
		if (rc) {
			snprintf(err, errlen, "VM structure entry %d names its type at an unreadable address", i);
			return -EFAULT;
		}
		for (int k = 0; k < W__N; k++) {
			if (w[k].found || strcmp(type, w[k].type))
				continue;
			if (!fn || rd_str(rd, ctx, fn, field, sizeof(field)) || strcmp(field, w[k].field))
				continue;
			if (!ts || rd_str(rd, ctx, ts, tstr, sizeof(tstr)))
				tstr[0] = '\0';
			w[k].bytes = type_bytes(tstr);
			if ((st != 0) != w[k].is_static || !width_ok(w[k].width, w[k].bytes) ||
			    (st ? !addr : off > MAX_FIELD_OFFSET)) {
				snprintf(err, errlen, "HotSpot's %s::%s is a %s%s at %s %#llx, not what viprof's "
					 "walker reads", w[k].type, w[k].field, st ? "static " : "", tstr,
					 st ? "address" : "offset", (unsigned long long)(st ? addr : off));
				return -ENOTSUP;
			}
			w[k].found = true;
			w[k].offset = off;
			w[k].address = addr;
			break;
		}
	}
	snprintf(err, errlen, "HotSpot's VM structure table has no end within %d entries: corrupt", MAX_ENTRIES);
	return -ENOTSUP;
}

/* sizeof(HeapBlock) and sizeof(ConstMethod) from gHotSpotVMTypes. */
static int scan_types(vp_mem_read_fn rd, void *ctx, const struct vp_hotspot_syms *sy, uint64_t *heapblock,
		      uint64_t *constmethod, char *err, size_t errlen)
{
	uint64_t base, stride, o_name, o_size;

	*heapblock = *constmethod = 0;
	if (rd_u64(rd, ctx, sy->types, &base) || rd_u64(rd, ctx, sy->type_stride, &stride) ||
	    rd_u64(rd, ctx, sy->type_name_off, &o_name) || rd_u64(rd, ctx, sy->type_size_off, &o_size)) {
		snprintf(err, errlen, "cannot read libjvm.so's gHotSpotVMType* globals (process gone?)");
		return -EFAULT;
	}
	if (!base || stride < 16 || stride > MAX_STRIDE || o_name > stride - 8 || o_size > stride - 8) {
		snprintf(err, errlen, "HotSpot's VM type table has a layout viprof does not understand (stride %llu)",
			 (unsigned long long)stride);
		return -ENOTSUP;
	}
	for (int i = 0; i < MAX_ENTRIES; i++) {
		uint8_t e[MAX_STRIDE];
		uint64_t tn, size;
		char type[NAME_LEN];
		int rc;

		if ((rc = rd(ctx, base + (uint64_t)i * stride, e, stride))) {
			snprintf(err, errlen, "cannot read VM type entry %d (process gone?)", i);
			return rc < 0 ? rc : -EFAULT;
		}
		memcpy(&tn, e + o_name, 8);
		memcpy(&size, e + o_size, 8);
		if (!tn)
			break;
		rc = rd_str(rd, ctx, tn, type, sizeof(type));
		if (rc == -ENAMETOOLONG)
			continue;
		if (rc) {
			snprintf(err, errlen, "VM type entry %d names its type at an unreadable address", i);
			return -EFAULT;
		}
		if (!strcmp(type, "HeapBlock"))
			*heapblock = size;
		else if (!strcmp(type, "ConstMethod"))
			*constmethod = size;
		if (*heapblock && *constmethod)
			break;
	}
	/* HeapBlock is a padded header (8 or 16 bytes); ConstMethod a few dozen bytes. */
	if (*heapblock < 8 || *heapblock > 64 || (*heapblock & 7) || *constmethod < 16 || *constmethod > 1024) {
		snprintf(err, errlen, "HotSpot's VM type table gives sizeof(HeapBlock) %llu, sizeof(ConstMethod) %llu: "
			 "not what viprof's walker understands", (unsigned long long)*heapblock,
			 (unsigned long long)*constmethod);
		return -ENOTSUP;
	}
	return 0;
}

/* The feature release of "17.0.16+8-Debian-1deb13u1", "25+36-LTS" or "25.0.1+8": its
 * leading number, which must be followed by '.', '+', '-' or the end. 0 otherwise. */
static int release_major(const char *s)
{
	int v = 0, n = 0;

	while (s[n] >= '0' && s[n] <= '9' && n < 4)
		v = v * 10 + (s[n++] - '0');
	if (!n || (s[n] && s[n] != '.' && s[n] != '+' && s[n] != '-'))
		return 0;
	return v;
}

static int read_heaps(vp_mem_read_fn rd, void *ctx, const struct want *w, struct vpb_hotspot *hs, char *err,
		      size_t errlen)
{
	uint64_t heaps, data;
	int32_t len;

	if (rd_u64(rd, ctx, w[W_HEAPS].address, &heaps))
		goto fault;
	if (!heaps) {
		snprintf(err, errlen, "the JVM has not created its code heaps yet: JVM not initialised yet, try again");
		return -EAGAIN;
	}
	if (rd_s32(rd, ctx, heaps + w[W_GA_LEN].offset, &len) || rd_u64(rd, ctx, heaps + w[W_GA_DATA].offset, &data))
		goto fault;
	if (len == 0) {
		snprintf(err, errlen, "the JVM has no code heaps yet: JVM not initialised yet, try again");
		return -EAGAIN;
	}
	if (len < 0 || len > MAX_HEAPS_LISTED || !data) {
		snprintf(err, errlen, "CodeCache::_heaps lists %d heaps at %#llx: corrupt", len,
			 (unsigned long long)data);
		return -ENOTSUP;
	}
	for (int i = 0; i < len; i++) {
		uint64_t heap, mem = 0, lo, hi, rhi = 0, seg;
		int32_t log2;

		if (rd_u64(rd, ctx, data + 8 * (uint64_t)i, &heap) || !heap)
			goto fault;
		mem = heap + w[W_HEAP_MEMORY].offset;
		if (rd_u64(rd, ctx, mem + w[W_VS_LOW].offset, &lo) || rd_u64(rd, ctx, mem + w[W_VS_HIGH].offset, &hi) ||
		    rd_u64(rd, ctx, mem + w[W_VS_HIGH_BOUNDARY].offset, &rhi) ||
		    rd_u64(rd, ctx, heap + w[W_HEAP_SEGMAP].offset + w[W_VS_LOW].offset, &seg) ||
		    rd_s32(rd, ctx, heap + w[W_HEAP_LOG2].offset, &log2))
			goto fault;
		if (!lo || hi <= lo || !seg || !log2) {
			/* Reserved but not set up: a layout without this heap would send the
			 * walker's frames in it to the frame-pointer fallback. */
			snprintf(err, errlen, "the JVM's code heap %d is not set up yet: JVM not initialised yet, "
				 "try again", i);
			return -EAGAIN;
		}
		/* Segments are at least sizeof(FreeBlock) (16 bytes) and at most a page or
		 * so in practice (-XX:CodeCacheSegmentSize). */
		if (log2 < 4 || log2 > 16 || rhi < hi || rhi - lo > MAX_HEAP_SPAN || (lo & ((1ull << log2) - 1))) {
			snprintf(err, errlen, "the JVM's code heap %d (%#llx-%#llx-%#llx, segment 2^%d) makes no sense: "
				 "corrupt", i, (unsigned long long)lo, (unsigned long long)hi,
				 (unsigned long long)rhi, log2);
			return -ENOTSUP;
		}
		if (hs->nr_heaps == VPB_MAX_HEAPS) {
			snprintf(err, errlen, "the JVM has %d code heaps, the walker's table holds %d", len,
				 VPB_MAX_HEAPS);
			return -ENOTSUP;
		}
		/* The committed part grows while the JVM runs and the layout is read once: the
		 * walker takes the heap up to its reserved end. Its segment map is committed
		 * along with the heap, so a pc beyond the committed part cannot be a blob's. */
		hs->heaps[hs->nr_heaps++] = (struct vpb_codeheap){ .lo = lo, .hi = rhi, .segmap = seg,
								     .log2_seg = (uint32_t)log2 };
	}
	return 0;
fault:
	snprintf(err, errlen, "cannot read the JVM's code heaps where its VM structure table points (process gone?)");
	return -EFAULT;
}

static int read_interpreter(vp_mem_read_fn rd, void *ctx, const struct want *w, struct vpb_hotspot *hs,
			    char *err, size_t errlen)
{
	uint64_t sq, buf;
	int32_t limit, begin, end;

	if (rd_u64(rd, ctx, w[W_INTERP_CODE].address, &sq))
		goto fault;
	if (!sq) {
		snprintf(err, errlen, "the JVM has not generated its interpreter yet: JVM not initialised yet, try again");
		return -EAGAIN;
	}
	if (rd_u64(rd, ctx, sq + w[W_SQ_BUFFER].offset, &buf) || rd_s32(rd, ctx, sq + w[W_SQ_LIMIT].offset, &limit) ||
	    rd_s32(rd, ctx, sq + w[W_SQ_BEGIN].offset, &begin) || rd_s32(rd, ctx, sq + w[W_SQ_END].offset, &end))
		goto fault;
	/* While the interpreter is generated its queue fills a buffer of a guessed size;
	 * then HotSpot gives the unused tail back to the code heap (deallocate_unused_tail)
	 * and the limit becomes the queue's end. A range read before that would take the
	 * adapters and stubs that later fill the tail for interpreter code. */
	if (!buf || limit <= 0 || begin != 0 || end != limit) {
		snprintf(err, errlen, "the JVM's interpreter is still being generated: JVM not initialised yet, "
			 "try again");
		return -EAGAIN;
	}
	hs->interp_lo = buf;
	hs->interp_hi = buf + (uint64_t)limit;
	/* The interpreter is a BufferBlob in the non-nmethod heap: the walker tells it
	 * from compiled code by this range, so it must lie inside a heap. */
	for (uint32_t i = 0; i < hs->nr_heaps; i++)
		if (hs->interp_lo >= hs->heaps[i].lo && hs->interp_hi <= hs->heaps[i].hi &&
		    (uint32_t)limit <= MAX_INTERP_SIZE)
			return 0;
	snprintf(err, errlen, "the JVM's interpreter (%#llx-%#llx) lies in none of its code heaps: corrupt",
		 (unsigned long long)hs->interp_lo, (unsigned long long)hs->interp_hi);
	return -ENOTSUP;
fault:
	snprintf(err, errlen, "cannot read the JVM's interpreter where its VM structure table points (process gone?)");
	return -EFAULT;
}

int vp_hotspot__read(vp_mem_read_fn rd, void *ctx, const struct vp_hotspot_syms *syms,
		     struct vpb_hotspot *hs, char *err, size_t errlen)
{
	struct want w[W__N];
	struct tab t;
	uint64_t heapblock = 0, constmethod = 0, rel = 0;
	const struct jdk_layout *lay = NULL;
	char release[64] = "";
	int rc, major;

	memset(hs, 0, sizeof(*hs));
	memcpy(w, want_template, sizeof(w));
	if ((rc = read_struct_globals(rd, ctx, syms, &t, err, errlen)) ||
	    (rc = scan_structs(rd, ctx, &t, w, err, errlen)) ||
	    (rc = scan_types(rd, ctx, syms, &heapblock, &constmethod, err, errlen)))
		goto cleanup;
	for (int k = 0; k < W__N; k++) {
		if (w[k].found || k == W_BLOB_CODE_BEGIN || k == W_BLOB_CODE_OFFSET)
			continue;
		snprintf(err, errlen, "this JVM's VM structure table has no %s::%s, which viprof's walker needs",
			 w[k].type, w[k].field);
		rc = -ENOTSUP;
		goto cleanup;
	}
	if (w[W_BLOB_CODE_BEGIN].found == w[W_BLOB_CODE_OFFSET].found) {
		snprintf(err, errlen, "this JVM's CodeBlob has %s of _code_begin and _code_offset: viprof knows one",
			 w[W_BLOB_CODE_BEGIN].found ? "both" : "neither");
		rc = -ENOTSUP;
		goto cleanup;
	}
	/* The interpreter's frame layout is per release: know it or refuse. */
	if (rd_u64(rd, ctx, w[W_VM_RELEASE].address, &rel) || rd_str(rd, ctx, rel, release, sizeof(release))) {
		snprintf(err, errlen, "cannot read the JVM's release string (Abstract_VM_Version::_s_vm_release)");
		rc = -EFAULT;
		goto cleanup;
	}
	major = release_major(release);
	for (size_t i = 0; i < sizeof(jdk_layouts) / sizeof(jdk_layouts[0]); i++)
		if (major >= jdk_layouts[i].first && major <= jdk_layouts[i].last)
			lay = &jdk_layouts[i];
	if (!lay) {
		snprintf(err, errlen, "HotSpot release '%s' is not one whose interpreter frames viprof knows "
			 "(JDK %d to %d); its Java frames are walked by frame pointer only", release,
			 jdk_layouts[0].first, jdk_layouts[sizeof(jdk_layouts) / sizeof(jdk_layouts[0]) - 1].last);
		rc = -ENOTSUP;
		goto cleanup;
	}
	if ((rc = read_heaps(rd, ctx, w, hs, err, errlen)) || (rc = read_interpreter(rd, ctx, w, hs, err, errlen)))
		goto cleanup;

	hs->heapblock_size = (uint32_t)heapblock;
	hs->blob_frame_size = (uint16_t)w[W_BLOB_FRAME_SIZE].offset;
	hs->blob_frame_complete = (uint16_t)w[W_BLOB_FRAME_COMPLETE].offset;
	hs->frame_complete_16 = w[W_BLOB_FRAME_COMPLETE].bytes == 2;
	if (w[W_BLOB_CODE_OFFSET].found) {
		hs->blob_code = (uint16_t)w[W_BLOB_CODE_OFFSET].offset;
		hs->blob_code_is_offset = 1;
	} else {
		hs->blob_code = (uint16_t)w[W_BLOB_CODE_BEGIN].offset;
	}
	hs->method_const = (uint16_t)w[W_METHOD_CONST].offset;
	hs->constmethod_size = (uint16_t)constmethod;
	hs->slot_sender_sp = lay->sender_sp;
	hs->slot_method = lay->method;
	hs->slot_bcp = lay->bcp;
	/* The walker reads the first BLOB_HDR bytes of a blob in one go. */
	if (w[W_BLOB_FRAME_SIZE].offset + 4 > BLOB_HDR ||
	    w[W_BLOB_FRAME_COMPLETE].offset + w[W_BLOB_FRAME_COMPLETE].bytes > BLOB_HDR ||
	    hs->blob_code + (hs->blob_code_is_offset ? 4u : 8u) > BLOB_HDR) {
		snprintf(err, errlen, "this JVM's CodeBlob fields lie beyond the %d bytes viprof's walker reads",
			 BLOB_HDR);
		rc = -ENOTSUP;
		goto cleanup;
	}
	rc = 0;
cleanup:
	if (rc)
		memset(hs, 0, sizeof(*hs));
	return rc;
}

/* ---- the walker's code-blob lookup */

int vp_hotspot__find_blob(vp_mem_read_fn rd, void *ctx, const struct vpb_hotspot *hs, uint64_t pc,
			  struct vp_hotspot_blob *out)
{
	memset(out, 0, sizeof(*out));
	for (uint32_t i = 0; i < hs->nr_heaps && i < VPB_MAX_HEAPS; i++) {
		const struct vpb_codeheap *h = &hs->heaps[i];
		uint64_t seg, blob, code = 0;
		uint8_t hdr[BLOB_HDR], b = 0;
		int32_t fs = 0, fc = 0;
		uint32_t hops = 0;

		if (pc < h->lo || pc >= h->hi)
			continue;
		if (h->log2_seg < 4 || h->log2_seg > 16)
			return -EINVAL;
		/* The segment map: 0 starts a block, 0xff is not part of any block, anything
		 * else is how many segments to step back (perhaps to another step). */
		seg = (pc - h->lo) >> h->log2_seg;
		for (hops = 0; hops < VP_HOTSPOT_MAX_HOPS; hops++) {
			if (rd(ctx, h->segmap + seg, &b, 1))
				return -EFAULT;
			if (b == 0xff)
				return -ENOENT;
			if (b == 0)
				break;
			if (seg < b)
				return -EINVAL;
			seg -= b;
		}
		if (b != 0)
			return -ELOOP;
		blob = h->lo + (seg << h->log2_seg) + hs->heapblock_size;
		if (rd(ctx, blob, hdr, sizeof(hdr)))
			return -EFAULT;
		if (hs->blob_frame_size <= BLOB_HDR - 4)
			memcpy(&fs, hdr + hs->blob_frame_size, 4);
		if (hs->frame_complete_16) {
			int16_t f16 = 0;

			if (hs->blob_frame_complete <= BLOB_HDR - 2)
				memcpy(&f16, hdr + hs->blob_frame_complete, 2);
			fc = f16;
		} else if (hs->blob_frame_complete <= BLOB_HDR - 4) {
			memcpy(&fc, hdr + hs->blob_frame_complete, 4);
		}
		if (hs->blob_code_is_offset) {
			int32_t co = 0;

			if (hs->blob_code <= BLOB_HDR - 4)
				memcpy(&co, hdr + hs->blob_code, 4);
			code = blob + (uint64_t)(int64_t)co;
		} else if (hs->blob_code <= BLOB_HDR - 8) {
			memcpy(&code, hdr + hs->blob_code, 8);
		}
		out->blob = blob;
		out->code_begin = code;
		/* Negative (-1) when the blob has no frame-complete point. */
		out->frame_complete = fc > 0 ? code + (uint64_t)fc : 0;
		out->frame_size_words = fs > 0 ? (uint32_t)fs : 0;
		out->hops = hops;
		return 0;
	}
	return -ENOENT;
}

/* ---- a live process */

/* The structure tables are read a field and a string at a time (thousands of reads
 * per JVM): whole pages are read instead and kept for the rest of one
 * vp_hotspot__read_pid_via call, direct-mapped by page number. */
#define PID_CACHE_PAGES 64
#define PID_PAGE 4096u

struct pid_mem {
	pid_t pid;
	bool proc_mem_only;
	bool use_proc_mem;       /* process_vm_readv was refused once: /proc/PID/mem from then on */
	int memfd;
	char (*page)[PID_PAGE];  /* PID_CACHE_PAGES pages, or NULL: no cache */
	uint64_t page_addr[PID_CACHE_PAGES];   /* the address of each cached page; 0 = none */
};

static int raw_read(struct pid_mem *m, uint64_t addr, void *buf, size_t len)
{
	if (!m->use_proc_mem && !m->proc_mem_only) {
		struct iovec local = { buf, len }, remote = { (void *)(uintptr_t)addr, len };
		ssize_t n = process_vm_readv(m->pid, &local, 1, &remote, 1, 0);

		if (n == (ssize_t)len)
			return 0;
		if (n >= 0 || (errno != ENOSYS && errno != EPERM))
			return n < 0 && errno == ESRCH ? -ESRCH : -EFAULT;
		/* Not allowed here (a seccomp filter, a kernel without it): /proc/PID/mem
		 * gives the same memory under the same ptrace check. */
		m->use_proc_mem = true;
	}
	if (m->memfd < 0) {
		char path[48];

		snprintf(path, sizeof(path), "/proc/%d/mem", (int)m->pid);
		m->memfd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
		if (m->memfd < 0)
			return -errno;
	}
	for (size_t done = 0; done < len;) {
		ssize_t n = pread(m->memfd, (char *)buf + done, len - done, (off_t)(addr + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -EFAULT;
		done += (size_t)n;
	}
	return 0;
}

static int pid_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	struct pid_mem *m = ctx;

	/* Reads that cross more than one page boundary, and pages that cannot be read
	 * whole (a mapping's end), go to the process directly. */
	if (!m->page || !len || len > PID_PAGE || addr + len < addr)
		return raw_read(m, addr, buf, len);
	for (uint64_t done = 0; done < len;) {
		uint64_t pa = (addr + done) & ~(uint64_t)(PID_PAGE - 1);
		size_t slot = (size_t)(pa / PID_PAGE) % PID_CACHE_PAGES;

		if (m->page_addr[slot] != pa || !pa) {
			if (raw_read(m, pa, m->page[slot], PID_PAGE)) {
				m->page_addr[slot] = 0;
				return raw_read(m, addr, buf, len);
			}
			m->page_addr[slot] = pa;
		}
		size_t off = (size_t)(addr + done - pa), n = PID_PAGE - off;
		if (n > len - done)
			n = len - done;
		memcpy((char *)buf + done, m->page[slot] + off, n);
		done += n;
	}
	return 0;
}

struct jvm_map {
	uint64_t lo, hi;
	dev_t dev;
	ino_t ino;
	char path[4096];
};

/* libjvm.so's mapping of file offset 0 in /proc/pid/maps. */
static int find_libjvm(pid_t pid, struct jvm_map *jm)
{
	char path[64], line[4200];
	FILE *f;
	int rc = -ENOENT;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi, off, ino;
		unsigned maj, min;
		char perms[8];
		int name = 0;

		if (sscanf(line, "%lx-%lx %7s %lx %x:%x %lu %n", &lo, &hi, perms, &off, &maj, &min, &ino, &name) < 7 ||
		    !name || off != 0)
			continue;
		char *p = line + name;
		size_t n = strcspn(p, "\n");
		p[n] = '\0';
		/* A JDK updated under a running JVM shows its old file as deleted. */
		if (n > 10 && !strcmp(p + n - 10, " (deleted)"))
			p[n -= 10] = '\0';
		if (n < 10 || strcmp(p + n - 10, "/libjvm.so"))
			continue;
		jm->lo = lo;
		jm->hi = hi;
		jm->dev = makedev(maj, min);
		jm->ino = (ino_t)ino;
		snprintf(jm->path, sizeof(jm->path), "%s", p);
		rc = 0;
		break;
	}
	fclose(f);
	return rc;
}

/* Opens the libjvm.so the process maps, never blocking and only if it is a regular
 * file with the mapping's device and inode: through map_files (the object actually
 * mapped, which needs CAP_SYS_ADMIN), else through the process's root (its mount
 * namespace: a JVM in a container). */
static int open_libjvm(pid_t pid, const struct jvm_map *jm)
{
	char p[4200];
	struct stat st;
	int fd;

	snprintf(p, sizeof(p), "/proc/%d/map_files/%llx-%llx", (int)pid, (unsigned long long)jm->lo,
		 (unsigned long long)jm->hi);
	fd = vp_safe_open_regular(p, false);
	if (fd < 0) {
		snprintf(p, sizeof(p), "/proc/%d/root%s", (int)pid, jm->path);
		fd = vp_safe_open_regular(p, false);
		if (fd < 0)
			return fd;
	}
	if (fstat(fd, &st) || st.st_ino != jm->ino || st.st_dev != jm->dev) {
		close(fd);
		return -ESTALE;
	}
	return fd;
}

/* The exported table globals from libjvm.so's .dynsym; map_lo is where its file
 * offset 0 is mapped. */
static int resolve_syms(int fd, uint64_t map_lo, struct vp_hotspot_syms *s)
{
	static const char *const names[] = {
		"gHotSpotVMStructs", "gHotSpotVMStructEntryArrayStride", "gHotSpotVMStructEntryTypeNameOffset",
		"gHotSpotVMStructEntryFieldNameOffset", "gHotSpotVMStructEntryTypeStringOffset",
		"gHotSpotVMStructEntryIsStaticOffset", "gHotSpotVMStructEntryOffsetOffset",
		"gHotSpotVMStructEntryAddressOffset", "gHotSpotVMTypes", "gHotSpotVMTypeEntryArrayStride",
		"gHotSpotVMTypeEntryTypeNameOffset", "gHotSpotVMTypeEntrySizeOffset",
	};
	uint64_t *dst[] = { &s->structs, &s->struct_stride, &s->struct_type_name_off, &s->struct_field_name_off,
			    &s->struct_type_string_off, &s->struct_is_static_off, &s->struct_offset_off,
			    &s->struct_address_off, &s->types, &s->type_stride, &s->type_name_off,
			    &s->type_size_off };
	const size_t nn = sizeof(names) / sizeof(names[0]);
	size_t found = 0, nph = 0;
	uint64_t bias = 0;
	bool have_bias = false;
	Elf_Scn *scn = NULL;
	Elf *e;
	int rc;

	memset(s, 0, sizeof(*s));
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOTSUP;
	e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!e)
		return -ENOEXEC;
	/* The load bias: the segment that holds file offset 0 is mapped at map_lo. */
	if (elf_getphdrnum(e, &nph) == 0) {
		for (size_t i = 0; i < nph && !have_bias; i++) {
			GElf_Phdr ph;

			if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD && ph.p_offset < 4096) {
				bias = map_lo - (ph.p_vaddr - ph.p_offset);
				have_bias = true;
			}
		}
	}
	if (!have_bias) {
		rc = -ENOEXEC;
		goto cleanup;
	}
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM || !sh.sh_entsize ||
		    !(d = elf_getdata(scn, NULL)))
			continue;
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym sym;
			const char *nm;

			if (!gelf_getsym(d, (int)i, &sym) || !sym.st_value || sym.st_shndx == SHN_UNDEF ||
			    !(nm = elf_strptr(e, sh.sh_link, sym.st_name)) || strncmp(nm, "gHotSpotVM", 10))
				continue;
			for (size_t k = 0; k < nn; k++)
				if (!*dst[k] && !strcmp(nm, names[k])) {
					*dst[k] = bias + sym.st_value;
					found++;
				}
		}
	}
	rc = found == nn ? 0 : -ENOENT;
cleanup:
	elf_end(e);
	return rc;
}

int vp_hotspot__read_pid_via(pid_t pid, enum vp_hotspot_via via, struct vpb_hotspot *hs, char *err,
			     size_t errlen)
{
	struct vp_hotspot_syms syms;
	struct pid_mem m = { .pid = pid, .proc_mem_only = via == VP_HOTSPOT_VIA_PROC_MEM, .memfd = -1 };
	struct jvm_map *jm = malloc(sizeof(*jm));
	int fd = -1, rc;

	memset(hs, 0, sizeof(*hs));
	if (!jm) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	rc = find_libjvm(pid, jm);
	if (rc) {
		if (rc == -ENOENT)
			snprintf(err, errlen, "process %d maps no libjvm.so: not a HotSpot JVM", (int)pid);
		else
			snprintf(err, errlen, "cannot read /proc/%d/maps: %s", (int)pid, strerror(-rc));
		goto cleanup;
	}
	fd = open_libjvm(pid, jm);
	if (fd < 0) {
		rc = fd;
		snprintf(err, errlen, "cannot open process %d's %s through /proc (%s): run viprof as root, or as the "
			 "JVM's user", (int)pid, jm->path, rc == -EINVAL ? "not a regular file" :
			 rc == -ESTALE ? "not the file it maps" : strerror(-rc));
		goto cleanup;
	}
	rc = resolve_syms(fd, jm->lo, &syms);
	if (rc) {
		snprintf(err, errlen, "process %d's %s exports no HotSpot VM structure tables: not a HotSpot JVM",
			 (int)pid, jm->path);
		rc = -ENOENT;
		goto cleanup;
	}
	m.page = malloc(PID_CACHE_PAGES * sizeof(*m.page));   /* NULL: uncached reads */
	rc = vp_hotspot__read(pid_read, &m, &syms, hs, err, errlen);
	free(m.page);
cleanup:
	if (fd >= 0)
		close(fd);
	if (m.memfd >= 0)
		close(m.memfd);
	free(jm);
	return rc;
}

int vp_hotspot__read_pid(pid_t pid, struct vpb_hotspot *hs, char *err, size_t errlen)
{
	return vp_hotspot__read_pid_via(pid, VP_HOTSPOT_VIA_AUTO, hs, err, errlen);
}
