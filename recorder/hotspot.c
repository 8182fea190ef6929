/* What the BPF walker needs from a JVM, read through hotspot/: see hotspot.h.
 *
 * hotspot/vmstructs.c reads the VM structure tables; here every field the walker relies
 * on must be present and fit (its declared C type's width, static or not), and every
 * range read from the target is checked before it reaches the walker: the target is
 * untrusted. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "recorder/hotspot.h"
#include "hotspot/codeheap.h"
#include "hotspot/vmstructs.h"

#define MAX_HEAP_SPAN (1ull << 32) /* ReservedCodeCacheSize is at most 2 GiB */
#define MAX_INTERP_SIZE (64u << 20)
#define BLOB_HDR VPB_BLOB_HDR    /* the BPF walker reads this many bytes of a CodeBlob */

/* The fields the walker needs (hotspot/vmstructs.c names them per JDK); of CodeBlob's
 * code start exactly one of _code_begin (JDK 17) and _code_offset (JDK 23+). */
static const enum vp_hs_fid walker_fields[] = {
	VP_HS_CODECACHE_HEAPS, VP_HS_GA_LEN, VP_HS_GA_DATA, VP_HS_HEAP_MEMORY, VP_HS_HEAP_SEGMAP, VP_HS_HEAP_LOG2,
	VP_HS_VS_LOW, VP_HS_VS_HIGH, VP_HS_VS_HIGH_BOUNDARY, VP_HS_BLOB_FRAME_SIZE, VP_HS_BLOB_FRAME_COMPLETE,
	VP_HS_INTERP_CODE, VP_HS_SQ_BUFFER, VP_HS_SQ_LIMIT, VP_HS_SQ_BEGIN, VP_HS_SQ_END, VP_HS_METHOD_CONST,
	VP_HS_VM_RELEASE,
};
/* What it reads: those, the two code-start fields, and the heaps' other bounds. */
static const enum vp_hs_fid read_fields[] = {
	VP_HS_CODECACHE_HEAPS, VP_HS_GA_LEN, VP_HS_GA_DATA, VP_HS_HEAP_MEMORY, VP_HS_HEAP_SEGMAP, VP_HS_HEAP_LOG2,
	VP_HS_VS_LOW, VP_HS_VS_HIGH, VP_HS_VS_HIGH_BOUNDARY, VP_HS_VS_LOW_BOUNDARY, VP_HS_BLOB_FRAME_SIZE,
	VP_HS_BLOB_FRAME_COMPLETE, VP_HS_BLOB_CODE_BEGIN, VP_HS_BLOB_CODE_OFFSET, VP_HS_INTERP_CODE, VP_HS_SQ_BUFFER,
	VP_HS_SQ_LIMIT, VP_HS_SQ_BEGIN, VP_HS_SQ_END, VP_HS_METHOD_CONST, VP_HS_VM_RELEASE,
};
static const enum vp_hs_tid read_types[] = { VP_HS_T_HEAPBLOCK, VP_HS_T_CONSTMETHOD };

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

static int rd_u64(const struct vp_hs_mem *m, uint64_t a, uint64_t *v)
{
	*v = 0;
	return vp_hs_mem__read(m, a, v, sizeof(*v));
}

static int rd_s32(const struct vp_hs_mem *m, uint64_t a, int32_t *v)
{
	*v = 0;
	return vp_hs_mem__read(m, a, v, sizeof(*v));
}

static int read_heaps(const struct vp_hs_mem *m, const struct vp_hs_vm *vm, struct vpb_hotspot *hs, char *err,
		      size_t errlen)
{
	struct vp_hs_heap heaps[VP_HS_MAX_HEAPS];
	int n, rc;

	if ((rc = vp_hs__code_heaps(vm, m, heaps, &n, err, errlen)))
		return rc;
	for (int i = 0; i < n; i++) {
		/* The walker takes the heap from _low; its segment map from the map's _low. */
		uint64_t lo = heaps[i].low, hi = heaps[i].high, rhi = heaps[i].high_boundary, seg = heaps[i].segmap_low;
		int32_t log2 = heaps[i].log2_seg;

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
			snprintf(err, errlen, "the JVM has %d code heaps, the walker's table holds %d", n,
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
}

static int read_interpreter(const struct vp_hs_mem *m, const struct vp_hs_vm *vm, struct vpb_hotspot *hs,
			    char *err, size_t errlen)
{
	uint64_t sq, buf;
	int32_t limit, begin, end;

	if (rd_u64(m, vm->f[VP_HS_INTERP_CODE].address, &sq))
		goto fault;
	if (!sq) {
		snprintf(err, errlen, "the JVM has not generated its interpreter yet: JVM not initialised yet, try again");
		return -EAGAIN;
	}
	if (rd_u64(m, sq + vm->f[VP_HS_SQ_BUFFER].offset, &buf) || rd_s32(m, sq + vm->f[VP_HS_SQ_LIMIT].offset, &limit) ||
	    rd_s32(m, sq + vm->f[VP_HS_SQ_BEGIN].offset, &begin) || rd_s32(m, sq + vm->f[VP_HS_SQ_END].offset, &end))
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

int vp_hotspot__read(vp_mem_read_fn rd, void *ctx, const struct vp_hs_globals *syms,
		     struct vpb_hotspot *hs, char *err, size_t errlen)
{
	const struct vp_hs_mem mem = { rd, ctx }, *m = &mem;
	struct vp_hs_vm *vm = malloc(sizeof(*vm));
	const struct vp_hs_field *w;
	uint64_t heapblock, constmethod, rel = 0;
	const struct jdk_layout *lay = NULL;
	char release[64] = "";
	int rc, major;

	memset(hs, 0, sizeof(*hs));
	if (!vm) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if ((rc = vp_hs_vm__read_some(vm, m, syms, read_fields, sizeof(read_fields) / sizeof(read_fields[0]),
				      read_types, sizeof(read_types) / sizeof(read_types[0]), err, errlen)))
		goto cleanup;
	w = vm->f;
	for (size_t i = 0; i < sizeof(walker_fields) / sizeof(walker_fields[0]); i++) {
		const struct vp_hs_field *f = &w[walker_fields[i]];

		if (f->found && !f->fits) {
			snprintf(err, errlen, "HotSpot's %s::%s is a %s%s at %s %#llx, not what viprof's walker reads",
				 f->type, f->name, f->is_static ? "static " : "", f->type_string,
				 f->is_static ? "address" : "offset",
				 (unsigned long long)(f->is_static ? f->address : f->offset));
			rc = -ENOTSUP;
			goto cleanup;
		}
	}
	for (size_t i = 0; i < sizeof(walker_fields) / sizeof(walker_fields[0]); i++) {
		const char *type, *name;

		if (w[walker_fields[i]].found)
			continue;
		vp_hs_vm__names(walker_fields[i], &type, &name);
		snprintf(err, errlen, "this JVM's VM structure table has no %s::%s, which viprof's walker needs", type,
			 name);
		rc = -ENOTSUP;
		goto cleanup;
	}
	if (w[VP_HS_BLOB_CODE_BEGIN].found == w[VP_HS_BLOB_CODE_OFFSET].found ||
	    !w[w[VP_HS_BLOB_CODE_BEGIN].found ? VP_HS_BLOB_CODE_BEGIN : VP_HS_BLOB_CODE_OFFSET].fits) {
		snprintf(err, errlen, "this JVM's CodeBlob has %s of _code_begin and _code_offset: viprof knows one",
			 w[VP_HS_BLOB_CODE_BEGIN].found == w[VP_HS_BLOB_CODE_OFFSET].found ?
			 (w[VP_HS_BLOB_CODE_BEGIN].found ? "both" : "neither") : "an unexpected type");
		rc = -ENOTSUP;
		goto cleanup;
	}
	/* HeapBlock is a padded header (8 or 16 bytes); ConstMethod a few dozen bytes. */
	heapblock = vm->type_size[VP_HS_T_HEAPBLOCK];
	constmethod = vm->type_size[VP_HS_T_CONSTMETHOD];
	if (heapblock < 8 || heapblock > 64 || (heapblock & 7) || constmethod < 16 || constmethod > 1024) {
		snprintf(err, errlen, "HotSpot's VM type table gives sizeof(HeapBlock) %llu, sizeof(ConstMethod) %llu: "
			 "not what viprof's walker understands", (unsigned long long)heapblock,
			 (unsigned long long)constmethod);
		rc = -ENOTSUP;
		goto cleanup;
	}
	/* The interpreter's frame layout is per release: know it or refuse. */
	if (rd_u64(m, w[VP_HS_VM_RELEASE].address, &rel) || vp_hs_mem__str(m, rel, release, sizeof(release))) {
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
	if ((rc = read_heaps(m, vm, hs, err, errlen)) || (rc = read_interpreter(m, vm, hs, err, errlen)))
		goto cleanup;

	hs->heapblock_size = (uint32_t)heapblock;
	hs->blob_frame_size = (uint16_t)w[VP_HS_BLOB_FRAME_SIZE].offset;
	hs->blob_frame_complete = (uint16_t)w[VP_HS_BLOB_FRAME_COMPLETE].offset;
	hs->frame_complete_16 = w[VP_HS_BLOB_FRAME_COMPLETE].bytes == 2;
	if (w[VP_HS_BLOB_CODE_OFFSET].found) {
		hs->blob_code = (uint16_t)w[VP_HS_BLOB_CODE_OFFSET].offset;
		hs->blob_code_is_offset = 1;
	} else {
		hs->blob_code = (uint16_t)w[VP_HS_BLOB_CODE_BEGIN].offset;
	}
	hs->method_const = (uint16_t)w[VP_HS_METHOD_CONST].offset;
	hs->constmethod_size = (uint16_t)constmethod;
	hs->slot_sender_sp = lay->sender_sp;
	hs->slot_method = lay->method;
	hs->slot_bcp = lay->bcp;
	/* The walker reads the first BLOB_HDR bytes of a blob in one go. */
	if (w[VP_HS_BLOB_FRAME_SIZE].offset + 4 > BLOB_HDR ||
	    w[VP_HS_BLOB_FRAME_COMPLETE].offset + w[VP_HS_BLOB_FRAME_COMPLETE].bytes > BLOB_HDR ||
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
	free(vm);
	return rc;
}

/* ---- the walker's code-blob lookup */

int vp_hotspot__find_blob(vp_mem_read_fn rd, void *ctx, const struct vpb_hotspot *hs, uint64_t pc,
			  struct vp_hotspot_blob *out)
{
	const struct vp_hs_mem mem = { rd, ctx };

	memset(out, 0, sizeof(*out));
	for (uint32_t i = 0; i < hs->nr_heaps && i < VPB_MAX_HEAPS; i++) {
		const struct vpb_codeheap *h = &hs->heaps[i];
		uint64_t seg, blob, code = 0;
		uint8_t hdr[BLOB_HDR];
		int32_t fs = 0, fc = 0;
		uint32_t hops = 0;
		int rc;

		if (pc < h->lo || pc >= h->hi)
			continue;
		if (h->log2_seg < 4 || h->log2_seg > 16)
			return -EINVAL;
		seg = (pc - h->lo) >> h->log2_seg;
		if ((rc = vp_hs__segmap_start(&mem, h->segmap, seg, VP_HOTSPOT_MAX_HOPS, &seg, &hops)))
			return rc;
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
 * per JVM, each a syscall: most of the continuous service's CPU on a VM that keeps
 * starting JVMs): whole pages are read instead, through the process reader, and kept
 * for the rest of one vp_hotspot__read_pid_via call, direct-mapped by page number. */
#define PAGE_CACHE_PAGES 64
#define PAGE_CACHE_PAGE 4096u

struct page_cache {
	const struct vp_hs_mem *inner;
	char (*page)[PAGE_CACHE_PAGE];
	uint64_t addr[PAGE_CACHE_PAGES];   /* each cached page's address; 0 = none */
};

static int cached_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	struct page_cache *c = ctx;

	/* Longer reads, and pages that cannot be read whole (a mapping's end), go to
	 * the process directly. */
	if (!len || len > PAGE_CACHE_PAGE || addr + len < addr)
		return vp_hs_mem__read(c->inner, addr, buf, len);
	for (size_t done = 0; done < len;) {
		uint64_t pa = (addr + done) & ~(uint64_t)(PAGE_CACHE_PAGE - 1);
		size_t slot = (size_t)(pa / PAGE_CACHE_PAGE) % PAGE_CACHE_PAGES;

		if (!pa || c->addr[slot] != pa) {
			if (!pa || vp_hs_mem__read(c->inner, pa, c->page[slot], PAGE_CACHE_PAGE)) {
				c->addr[slot] = 0;
				return vp_hs_mem__read(c->inner, addr, buf, len);
			}
			c->addr[slot] = pa;
		}
		size_t off = (size_t)(addr + done - pa), n = PAGE_CACHE_PAGE - off;
		if (n > len - done)
			n = len - done;
		memcpy((char *)buf + done, c->page[slot] + off, n);
		done += n;
	}
	return 0;
}

int vp_hotspot__read_pid_via(pid_t pid, enum vp_hotspot_via via, struct vpb_hotspot *hs, char *err,
			     size_t errlen)
{
	struct vp_hs_globals syms;
	struct vp_hs_pid_mem m;
	struct vp_hs_libjvm *jm = malloc(sizeof(*jm));
	int fd = -1, rc;

	memset(hs, 0, sizeof(*hs));
	vp_hs_pid_mem__init(&m, pid, via == VP_HOTSPOT_VIA_PROC_MEM);
	if (!jm) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	rc = vp_hs_libjvm__find(pid, jm);
	if (rc) {
		if (rc == -ENOENT)
			snprintf(err, errlen, "process %d maps no libjvm.so: not a HotSpot JVM", (int)pid);
		else
			snprintf(err, errlen, "cannot read /proc/%d/maps: %s", (int)pid, strerror(-rc));
		goto cleanup;
	}
	fd = vp_hs_libjvm__open(pid, jm, true);
	if (fd < 0) {
		rc = fd;
		snprintf(err, errlen, "cannot open process %d's %s through /proc (%s): run viprof as root, or as the "
			 "JVM's user", (int)pid, jm->path, rc == -EINVAL ? "not a regular file" :
			 rc == -ESTALE ? "not the file it maps" : strerror(-rc));
		goto cleanup;
	}
	rc = vp_hs_globals__dynsym(fd, jm->lo, &syms);
	if (rc) {
		snprintf(err, errlen, "process %d's %s exports no HotSpot VM structure tables: not a HotSpot JVM",
			 (int)pid, jm->path);
		rc = -ENOENT;
		goto cleanup;
	}
	struct page_cache pc = { .inner = &m.mem, .page = malloc(PAGE_CACHE_PAGES * PAGE_CACHE_PAGE) };
	if (pc.page)
		rc = vp_hotspot__read(cached_read, &pc, &syms, hs, err, errlen);
	else   /* no memory for the pages: read as asked */
		rc = vp_hotspot__read(m.mem.read, m.mem.ctx, &syms, hs, err, errlen);
	free(pc.page);
cleanup:
	if (fd >= 0)
		close(fd);
	vp_hs_pid_mem__close(&m);
	free(jm);
	return rc;
}

int vp_hotspot__read_pid(pid_t pid, struct vpb_hotspot *hs, char *err, size_t errlen)
{
	return vp_hotspot__read_pid_via(pid, VP_HOTSPOT_VIA_AUTO, hs, err, errlen);
}
