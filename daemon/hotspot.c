/* HotSpot's layout from its exported VM structure tables: see hotspot.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "daemon/hotspot.h"

#define MAX_ENTRIES 20000        /* VMStructs has ~3000 entries; a bound against garbage */
#define NAME_MAX_LEN 80

/* What the walker needs, found by (type, field) name. */
struct want {
	const char *type, *field;
	bool found;
	uint64_t offset;         /* nonstatic: offset in the type */
	uint64_t address;        /* static: address of the variable */
	bool is16;               /* its type is 16 bits wide (int16_t, uint16_t, short) */
};

enum {
	W_HEAPS, W_GA_LEN, W_GA_DATA, W_HEAP_MEMORY, W_HEAP_SEGMAP, W_HEAP_LOG2, W_VS_LOW, W_VS_HIGH,
	W_VS_LOW_BOUNDARY, W_VS_HIGH_BOUNDARY, W_BLOB_FRAME_SIZE, W_BLOB_FRAME_COMPLETE, W_BLOB_CODE_BEGIN,
	W_BLOB_CODE_OFFSET, W_INTERP_CODE, W_SQ_BUFFER, W_SQ_LIMIT, W_METHOD_CONST, W_VM_RELEASE, W__N
};

static void init_wants(struct want *w)
{
	static const char *names[W__N][2] = {
		[W_HEAPS] = { "CodeCache", "_heaps" },
		[W_GA_LEN] = { "GrowableArrayBase", "_len" },
		[W_GA_DATA] = { "GrowableArray<int>", "_data" },
		[W_HEAP_MEMORY] = { "CodeHeap", "_memory" },
		[W_HEAP_SEGMAP] = { "CodeHeap", "_segmap" },
		[W_HEAP_LOG2] = { "CodeHeap", "_log2_segment_size" },
		[W_VS_LOW] = { "VirtualSpace", "_low" },
		[W_VS_HIGH] = { "VirtualSpace", "_high" },
		[W_VS_LOW_BOUNDARY] = { "VirtualSpace", "_low_boundary" },
		[W_VS_HIGH_BOUNDARY] = { "VirtualSpace", "_high_boundary" },
		[W_BLOB_FRAME_SIZE] = { "CodeBlob", "_frame_size" },
		[W_BLOB_FRAME_COMPLETE] = { "CodeBlob", "_frame_complete_offset" },
		[W_BLOB_CODE_BEGIN] = { "CodeBlob", "_code_begin" },
		[W_BLOB_CODE_OFFSET] = { "CodeBlob", "_code_offset" },
		[W_INTERP_CODE] = { "AbstractInterpreter", "_code" },
		[W_SQ_BUFFER] = { "StubQueue", "_stub_buffer" },
		[W_SQ_LIMIT] = { "StubQueue", "_buffer_limit" },
		[W_METHOD_CONST] = { "Method", "_constMethod" },
		[W_VM_RELEASE] = { "Abstract_VM_Version", "_s_vm_release" },
	};
	for (int i = 0; i < W__N; i++)
		w[i] = (struct want){ .type = names[i][0], .field = names[i][1] };
}

static int rd_u64(vp_mem_read_fn rd, void *ctx, uint64_t a, uint64_t *v)
{
	return rd(ctx, a, v, sizeof(*v));
}

static int rd_s32(vp_mem_read_fn rd, void *ctx, uint64_t a, int32_t *v)
{
	return rd(ctx, a, v, sizeof(*v));
}

/* A NUL-terminated string of at most NAME_MAX_LEN bytes: reads byte runs that may cross
 * into an unmapped page, so it reads small pieces. */
static int rd_str(vp_mem_read_fn rd, void *ctx, uint64_t a, char *out, size_t len)
{
	size_t n = 0;

	while (n + 1 < len) {
		char buf[16];
		size_t k = 16 - (size_t)((a + n) & 15);   /* stay inside a 16-byte block */

		if (rd(ctx, a + n, buf, k))
			return -EFAULT;
		for (size_t i = 0; i < k && n + 1 < len; i++) {
			out[n++] = buf[i];
			if (!buf[i])
				return 0;
		}
	}
	out[len - 1] = '\0';
	return 0;
}

static int read_tables(vp_mem_read_fn rd, void *ctx, const struct vp_hotspot_syms *sy, struct want *w,
		       uint64_t *heapblock, uint64_t *constmethod, char *err, size_t errlen)
{
	uint64_t base, stride, o_type, o_field, o_tstr, o_static, o_off, o_addr;

	if (rd_u64(rd, ctx, sy->structs, &base) || rd_u64(rd, ctx, sy->struct_stride, &stride) ||
	    rd_u64(rd, ctx, sy->struct_type_name_off, &o_type) ||
	    rd_u64(rd, ctx, sy->struct_field_name_off, &o_field) ||
	    rd_u64(rd, ctx, sy->struct_type_string_off, &o_tstr) ||
	    rd_u64(rd, ctx, sy->struct_is_static_off, &o_static) ||
	    rd_u64(rd, ctx, sy->struct_offset_off, &o_off) || rd_u64(rd, ctx, sy->struct_address_off, &o_addr)) {
		snprintf(err, errlen, "cannot read HotSpot's VM structure table globals");
		return -EFAULT;
	}
	if (!base) {
		snprintf(err, errlen, "the JVM has not initialised its VM structure table yet");
		return -EAGAIN;
	}
	if (stride < 40 || stride > 256 || o_type >= stride || o_field >= stride || o_static >= stride ||
	    o_off >= stride || o_addr >= stride || o_tstr >= stride) {
		snprintf(err, errlen, "HotSpot's VM structure table has an unexpected layout (stride %llu)",
			 (unsigned long long)stride);
		return -ENOTSUP;
	}
	for (int i = 0; i < MAX_ENTRIES; i++) {
		uint64_t e = base + (uint64_t)i * stride, tn, fn, off = 0, addr = 0;
		int32_t st = 0;
		char type[NAME_MAX_LEN], field[NAME_MAX_LEN];

		if (rd_u64(rd, ctx, e + o_type, &tn))
			return -EFAULT;
		if (!tn)
			break;
		if (rd_u64(rd, ctx, e + o_field, &fn) || rd_s32(rd, ctx, e + o_static, &st) ||
		    rd_u64(rd, ctx, e + o_off, &off) || rd_u64(rd, ctx, e + o_addr, &addr))
			return -EFAULT;
		if (!fn || rd_str(rd, ctx, tn, type, sizeof(type)) || rd_str(rd, ctx, fn, field, sizeof(field)))
			continue;
		for (int k = 0; k < W__N; k++) {
			if (w[k].found || strcmp(type, w[k].type) || strcmp(field, w[k].field))
				continue;
			uint64_t ts = 0;
			char tstr[NAME_MAX_LEN] = "";

			if (!rd_u64(rd, ctx, e + o_tstr, &ts) && ts)
				rd_str(rd, ctx, ts, tstr, sizeof(tstr));
			w[k].found = true;
			w[k].offset = off;
			w[k].address = st ? addr : 0;
			w[k].is16 = strstr(tstr, "int16") || !strcmp(tstr, "short") || !strcmp(tstr, "u2");
		}
	}
	/* The types table gives sizes. */
	uint64_t tbase, tstride, t_name, t_size;
	if (rd_u64(rd, ctx, sy->types, &tbase) || rd_u64(rd, ctx, sy->type_stride, &tstride) ||
	    rd_u64(rd, ctx, sy->type_name_off, &t_name) || rd_u64(rd, ctx, sy->type_size_off, &t_size) ||
	    !tbase || tstride < 16 || tstride > 256 || t_name >= tstride || t_size >= tstride) {
		snprintf(err, errlen, "cannot read HotSpot's VM type table");
		return -ENOTSUP;
	}
	*heapblock = *constmethod = 0;
	for (int i = 0; i < MAX_ENTRIES && (!*heapblock || !*constmethod); i++) {
		uint64_t e = tbase + (uint64_t)i * tstride, tn, size;
		char type[NAME_MAX_LEN];

		if (rd_u64(rd, ctx, e + t_name, &tn))
			return -EFAULT;
		if (!tn)
			break;
		if (rd_u64(rd, ctx, e + t_size, &size) || rd_str(rd, ctx, tn, type, sizeof(type)))
			continue;
		if (!strcmp(type, "HeapBlock"))
			*heapblock = size;
		else if (!strcmp(type, "ConstMethod"))
			*constmethod = size;
	}
	return 0;
}

int vp_hotspot__read(vp_mem_read_fn rd, void *ctx, const struct vp_hotspot_syms *syms,
		     struct vpb_hotspot *hs, char *err, size_t errlen)
{
	struct want w[W__N];
	uint64_t heapblock = 0, constmethod = 0;
	int rc;

	memset(hs, 0, sizeof(*hs));
	init_wants(w);
	rc = read_tables(rd, ctx, syms, w, &heapblock, &constmethod, err, errlen);
	if (rc)
		return rc;
	static const int needed[] = { W_HEAPS, W_GA_LEN, W_GA_DATA, W_HEAP_MEMORY, W_HEAP_SEGMAP, W_HEAP_LOG2,
				      W_VS_LOW, W_VS_HIGH, W_BLOB_FRAME_SIZE, W_BLOB_FRAME_COMPLETE,
				      W_INTERP_CODE, W_SQ_BUFFER, W_SQ_LIMIT, W_METHOD_CONST };
	for (size_t i = 0; i < sizeof(needed) / sizeof(needed[0]); i++) {
		if (!w[needed[i]].found) {
			snprintf(err, errlen, "this JVM's VM structure table has no %s::%s", w[needed[i]].type,
				 w[needed[i]].field);
			return -ENOTSUP;
		}
	}
	if (!w[W_BLOB_CODE_BEGIN].found && !w[W_BLOB_CODE_OFFSET].found) {
		snprintf(err, errlen, "this JVM's VM structure table has neither CodeBlob::_code_begin nor _code_offset");
		return -ENOTSUP;
	}
	if (!heapblock || !constmethod) {
		snprintf(err, errlen, "this JVM's VM type table lacks HeapBlock or ConstMethod");
		return -ENOTSUP;
	}
	/* Version: the interpreter frame layout below is that of x86-64 JDK 17 to 25. */
	char release[64] = "";
	uint64_t rel = 0;
	if (w[W_VM_RELEASE].found && !rd_u64(rd, ctx, w[W_VM_RELEASE].address, &rel) && rel)
		rd_str(rd, ctx, rel, release, sizeof(release));
	int major = atoi(release);
	if (major < 17 || major > 26) {
		snprintf(err, errlen, "HotSpot release '%s' is not one whose interpreter frames viprof knows (17 to 26)",
			 release);
		return -ENOTSUP;
	}

	/* The code heaps. */
	uint64_t heaps, data;
	int32_t len;
	if (rd_u64(rd, ctx, w[W_HEAPS].address, &heaps))
		goto fault;
	if (!heaps) {
		snprintf(err, errlen, "the JVM has not created its code heaps yet");
		return -EAGAIN;
	}
	if (rd_s32(rd, ctx, heaps + w[W_GA_LEN].offset, &len) || rd_u64(rd, ctx, heaps + w[W_GA_DATA].offset, &data))
		goto fault;
	if (len <= 0 || len > 16) {
		snprintf(err, errlen, "the JVM has %d code heaps", len);
		return len == 0 ? -EAGAIN : -ENOTSUP;
	}
	for (int i = 0; i < len && hs->nr_heaps < VPB_MAX_HEAPS; i++) {
		uint64_t heap, lo, hi, seg;
		int32_t log2;

		if (rd_u64(rd, ctx, data + 8 * (uint64_t)i, &heap) ||
		    rd_u64(rd, ctx, heap + w[W_HEAP_MEMORY].offset + w[W_VS_LOW].offset, &lo) ||
		    rd_u64(rd, ctx, heap + w[W_HEAP_MEMORY].offset + w[W_VS_HIGH].offset, &hi) ||
		    rd_u64(rd, ctx, heap + w[W_HEAP_SEGMAP].offset + w[W_VS_LOW].offset, &seg) ||
		    rd_s32(rd, ctx, heap + w[W_HEAP_LOG2].offset, &log2))
			goto fault;
		if (!lo || hi <= lo || !seg || log2 < 4 || log2 > 16) {
			/* A heap not set up yet: a layout without it would send the walker's
			 * frames in that heap to the frame-pointer fallback. */
			memset(hs, 0, sizeof(*hs));
			snprintf(err, errlen, "the JVM's code heap %d is not set up yet", i);
			return -EAGAIN;
		}
		/* The committed part grows; the walker may see blobs up to the reserved end. */
		uint64_t hb = 0;
		if (w[W_VS_HIGH_BOUNDARY].found) {
			uint64_t rhi;

			if (!rd_u64(rd, ctx, heap + w[W_HEAP_MEMORY].offset + w[W_VS_HIGH_BOUNDARY].offset, &rhi) &&
			    rhi > hi && rhi - lo < (1ull << 32))
				hb = rhi;
		}
		hs->heaps[hs->nr_heaps++] = (struct vpb_codeheap){ .lo = lo, .hi = hb ? hb : hi, .segmap = seg,
								     .log2_seg = (uint32_t)log2 };
	}
	if (!hs->nr_heaps) {
		snprintf(err, errlen, "the JVM's code heaps are empty");
		return -EAGAIN;
	}
	/* The interpreter's code. */
	uint64_t sq, buf;
	int32_t limit;
	if (rd_u64(rd, ctx, w[W_INTERP_CODE].address, &sq))
		goto fault;
	if (!sq) {
		memset(hs, 0, sizeof(*hs));
		snprintf(err, errlen, "the JVM has not generated its interpreter yet");
		return -EAGAIN;
	}
	if (rd_u64(rd, ctx, sq + w[W_SQ_BUFFER].offset, &buf) || rd_s32(rd, ctx, sq + w[W_SQ_LIMIT].offset, &limit))
		goto fault;
	hs->interp_lo = buf;
	hs->interp_hi = buf + (uint64_t)(limit > 0 ? limit : 0);
	hs->heapblock_size = (uint32_t)heapblock;
	hs->blob_frame_size = (uint16_t)w[W_BLOB_FRAME_SIZE].offset;
	hs->blob_frame_complete = (uint16_t)w[W_BLOB_FRAME_COMPLETE].offset;
	hs->frame_complete_16 = w[W_BLOB_FRAME_COMPLETE].is16;
	if (w[W_BLOB_CODE_OFFSET].found) {
		hs->blob_code = (uint16_t)w[W_BLOB_CODE_OFFSET].offset;
		hs->blob_code_is_offset = 1;
	} else {
		hs->blob_code = (uint16_t)w[W_BLOB_CODE_BEGIN].offset;
	}
	hs->method_const = (uint16_t)w[W_METHOD_CONST].offset;
	hs->constmethod_size = (uint16_t)constmethod;
	/* x86-64 interpreter frame (frame_x86.hpp): sender SP at rbp-8, Method* at rbp-24,
	 * bytecode pointer at rbp-64. */
	hs->slot_sender_sp = -1;
	hs->slot_method = -3;
	hs->slot_bcp = -8;
	if (hs->blob_frame_size > 60 || hs->blob_frame_complete > 60 || hs->blob_code > 56) {
		snprintf(err, errlen, "CodeBlob fields lie beyond the 64 bytes the walker reads");
		memset(hs, 0, sizeof(*hs));
		return -ENOTSUP;
	}
	return 0;
fault:
	memset(hs, 0, sizeof(*hs));
	snprintf(err, errlen, "cannot read the JVM's memory where its VM structure table points");
	return -EFAULT;
}

int vp_hotspot__find_blob(vp_mem_read_fn rd, void *ctx, const struct vpb_hotspot *hs, uint64_t pc,
			  struct vp_hotspot_blob *out)
{
	for (uint32_t i = 0; i < hs->nr_heaps && i < VPB_MAX_HEAPS; i++) {
		const struct vpb_codeheap *h = &hs->heaps[i];

		if (pc < h->lo || pc >= h->hi)
			continue;
		uint64_t seg = (pc - h->lo) >> h->log2_seg;
		uint8_t b = 0;
		for (int k = 0; k < 16; k++) {
			if (rd(ctx, h->segmap + seg, &b, 1))
				return -EFAULT;
			if (b == 0xff)
				return -ENOENT;
			if (!b || seg < b)
				break;
			seg -= b;
		}
		if (b)
			return -ENOENT;
		uint64_t blob = h->lo + (seg << h->log2_seg) + hs->heapblock_size;
		uint8_t hdr[64];
		int32_t fs = 0, fc = 0, co = 0;
		uint64_t code = 0;

		if (rd(ctx, blob, hdr, sizeof(hdr)))
			return -EFAULT;
		memcpy(&fs, hdr + hs->blob_frame_size, 4);
		if (hs->frame_complete_16) {
			int16_t f16;

			memcpy(&f16, hdr + hs->blob_frame_complete, 2);
			fc = f16;
		} else {
			memcpy(&fc, hdr + hs->blob_frame_complete, 4);
		}
		if (hs->blob_code_is_offset) {
			memcpy(&co, hdr + hs->blob_code, 4);
			code = blob + (uint64_t)(int64_t)co;
		} else {
			memcpy(&code, hdr + hs->blob_code, 8);
		}
		out->blob = blob;
		out->code_begin = code;
		out->frame_complete = fc >= 0 ? code + (uint64_t)fc : 0;
		out->frame_size_words = fs > 0 ? (uint32_t)fs : 0;
		return 0;
	}
	return -ENOENT;
}

/* ---- a live process */

struct pid_mem {
	pid_t pid;
};

static int pid_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	struct pid_mem *m = ctx;
	struct iovec local = { buf, len }, remote = { (void *)addr, len };
	ssize_t n = process_vm_readv(m->pid, &local, 1, &remote, 1, 0);

	return n == (ssize_t)len ? 0 : -EFAULT;
}

/* Finds libjvm.so's mapping: its map_files entry, file offset 0's load address. */
static int find_libjvm(pid_t pid, char *mf, size_t mflen, uint64_t *load)
{
	char path[64], line[4200];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	FILE *f = fopen(path, "re");
	int rc = -ENOENT;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi, off;
		char perms[8], name[4096] = "";

		if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %4095[^\n]", &lo, &hi, perms, &off, name) < 4)
			continue;
		size_t n = strlen(name);
		if (n < 10 || strcmp(name + n - 10, "/libjvm.so"))
			continue;
		if (off == 0) {
			snprintf(mf, mflen, "/proc/%d/map_files/%lx-%lx", (int)pid, lo, hi);
			*load = lo;
			rc = 0;
			break;
		}
	}
	fclose(f);
	return rc;
}

static int resolve_syms(int fd, uint64_t bias, struct vp_hotspot_syms *s)
{
	static const char *names[] = {
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
	size_t nn = sizeof(names) / sizeof(names[0]), found = 0;
	Elf *e;
	Elf_Scn *scn = NULL;

	memset(s, 0, sizeof(*s));
	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!e)
		return -ENOEXEC;
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM || !sh.sh_entsize ||
		    !(d = elf_getdata(scn, NULL)))
			continue;
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym sym;
			const char *nm;

			if (!gelf_getsym(d, (int)i, &sym) || !sym.st_value ||
			    !(nm = elf_strptr(e, sh.sh_link, sym.st_name)) || strncmp(nm, "gHotSpotVM", 10))
				continue;
			for (size_t k = 0; k < nn; k++)
				if (!strcmp(nm, names[k]) && !*dst[k]) {
					*dst[k] = bias + sym.st_value;
					found++;
				}
		}
	}
	elf_end(e);
	return found == nn ? 0 : -ENOTSUP;
}

int vp_hotspot__read_pid(pid_t pid, struct vpb_hotspot *hs, char *err, size_t errlen)
{
	char mf[96];
	uint64_t load = 0;
	struct vp_hotspot_syms syms;
	struct stat st;
	int rc = find_libjvm(pid, mf, sizeof(mf), &load);

	memset(hs, 0, sizeof(*hs));
	if (rc) {
		snprintf(err, errlen, "process %d maps no libjvm.so", (int)pid);
		return rc;
	}
	/* Opened through map_files (the object actually mapped), without blocking, and only
	 * if it is a regular file. */
	int fd = open(mf, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot open process %d's libjvm.so: %s", (int)pid, strerror(-rc));
		return rc;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		snprintf(err, errlen, "process %d's libjvm.so is not a regular file", (int)pid);
		return -EINVAL;
	}
	/* The first mapping (file offset 0) of a shared object is at its load bias plus the
	 * first PT_LOAD's vaddr, which is 0 for libjvm.so. */
	rc = resolve_syms(fd, load, &syms);
	close(fd);
	if (rc) {
		snprintf(err, errlen, "process %d's libjvm.so exports no VM structure tables (not HotSpot?)", (int)pid);
		return rc;
	}
	struct pid_mem m = { pid };
	return vp_hotspot__read(pid_read, &m, &syms, hs, err, errlen);
}
