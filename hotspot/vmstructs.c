/* HotSpot's exported VM structure tables: see vmstructs.h.
 *
 * The tables (vmStructs.cpp) are arrays of entries whose field offsets inside an entry
 * are themselves exported (gHotSpotVMStructEntry*Offset), so nothing here assumes a
 * JDK's entry layout. Everything read is treated as untrusted: every loop has a bound,
 * every string a maximum length. */
#define _GNU_SOURCE
#include "hotspot/vmstructs.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#define MAX_ENTRIES 20000        /* JDK 17 has ~1900 struct entries; a bound against garbage */
#define MAX_STRIDE 256
#define NAME_LEN 96              /* longer names are none we look for */
#define MAX_FIELD_OFFSET 4096    /* no HotSpot type whose offsets are checked is larger */
#define MAX_FLAGS 100000

/* What a field's declared C type must be for `fits`. */
enum width { WD_ANY, WD_PTR, WD_INT, WD_INT_OR_16 };

/* THE table: every field viprof reads, under each name a JDK gives it. Rows of one field
 * are alternates, the first found in this order wins (a JVM may export both). */
static const struct row {
	enum vp_hs_fid id;
	const char *type, *name;
	bool is_static;
	enum width width;
} rows[] = {
	/* The code cache: its heaps, their memory and segment maps. */
	{ VP_HS_CODECACHE_HEAPS, "CodeCache", "_heaps", true, WD_PTR },
	{ VP_HS_GA_LEN, "GrowableArrayBase", "_len", false, WD_INT },
	/* vmStructs exports GrowableArray's data pointer only for <int>; the element type
	 * does not move it, so it serves for GrowableArray<CodeHeap*> too. */
	{ VP_HS_GA_DATA, "GrowableArray<int>", "_data", false, WD_PTR },
	{ VP_HS_HEAP_MEMORY, "CodeHeap", "_memory", false, WD_ANY },
	{ VP_HS_HEAP_SEGMAP, "CodeHeap", "_segmap", false, WD_ANY },
	{ VP_HS_HEAP_LOG2, "CodeHeap", "_log2_segment_size", false, WD_INT },
	{ VP_HS_VS_LOW_BOUNDARY, "VirtualSpace", "_low_boundary", false, WD_PTR },
	{ VP_HS_VS_HIGH_BOUNDARY, "VirtualSpace", "_high_boundary", false, WD_PTR },
	{ VP_HS_VS_LOW, "VirtualSpace", "_low", false, WD_PTR },
	{ VP_HS_VS_HIGH, "VirtualSpace", "_high", false, WD_PTR },
	{ VP_HS_HB_LENGTH, "HeapBlock::Header", "_length", false, WD_ANY },   /* size_t in 17, uint32_t later */
	{ VP_HS_HB_USED, "HeapBlock::Header", "_used", false, WD_ANY },
	/* Code blobs: JDK 17-22 keep code pointers, JDK 23+ offsets, JDK 25 a kind. */
	{ VP_HS_BLOB_SIZE, "CodeBlob", "_size", false, WD_INT },
	{ VP_HS_BLOB_NAME, "CodeBlob", "_name", false, WD_ANY },
	{ VP_HS_BLOB_KIND, "CodeBlob", "_kind", false, WD_ANY },
	{ VP_HS_BLOB_FRAME_SIZE, "CodeBlob", "_frame_size", false, WD_INT },
	{ VP_HS_BLOB_FRAME_COMPLETE, "CodeBlob", "_frame_complete_offset", false, WD_INT_OR_16 },
	{ VP_HS_BLOB_CODE_BEGIN, "CodeBlob", "_code_begin", false, WD_PTR },
	{ VP_HS_BLOB_CODE_END, "CodeBlob", "_code_end", false, WD_ANY },
	{ VP_HS_BLOB_CODE_OFFSET, "CodeBlob", "_code_offset", false, WD_INT },
	{ VP_HS_BLOB_DATA_OFFSET, "CodeBlob", "_data_offset", false, WD_ANY },
	{ VP_HS_BLOB_MUTABLE_DATA, "CodeBlob", "_mutable_data", false, WD_ANY },
	{ VP_HS_BLOB_MUTABLE_SIZE, "CodeBlob", "_mutable_data_size", false, WD_ANY },
	{ VP_HS_BLOB_RELOC_SIZE, "CodeBlob", "_relocation_size", false, WD_ANY },
	/* nmethods: JDK 17 keeps some fields in CompiledMethod, JDK 25 has none. */
	{ VP_HS_NM_METHOD, "nmethod", "_method", false, WD_ANY },
	{ VP_HS_NM_METHOD, "CompiledMethod", "_method", false, WD_ANY },
	{ VP_HS_NM_STATE, "nmethod", "_state", false, WD_ANY },
	{ VP_HS_NM_COMPILE_ID, "nmethod", "_compile_id", false, WD_ANY },
	{ VP_HS_NM_LEVEL, "nmethod", "_comp_level", false, WD_ANY },   /* int in 17, CompLevel (a byte) later */
	{ VP_HS_NM_ENTRY_BCI, "nmethod", "_entry_bci", false, WD_ANY },
	{ VP_HS_NM_PCS, "nmethod", "_scopes_pcs_offset", false, WD_ANY },
	{ VP_HS_NM_DEPS, "nmethod", "_dependencies_offset", false, WD_ANY },
	{ VP_HS_NM_METADATA, "nmethod", "_metadata_offset", false, WD_ANY },
	{ VP_HS_NM_SCOPES_BEGIN, "CompiledMethod", "_scopes_data_begin", false, WD_ANY },
	{ VP_HS_NM_IMMUTABLE, "nmethod", "_immutable_data", false, WD_ANY },
	{ VP_HS_NM_IMMUTABLE_SIZE, "nmethod", "_immutable_data_size", false, WD_ANY },
	{ VP_HS_NM_SCOPES_DATA, "nmethod", "_scopes_data_offset", false, WD_ANY },
	{ VP_HS_PC_OFFSET, "PcDesc", "_pc_offset", false, WD_ANY },
	{ VP_HS_PC_SCOPE, "PcDesc", "_scope_decode_offset", false, WD_ANY },
	/* The interpreter's code, a StubQueue. */
	{ VP_HS_INTERP_CODE, "AbstractInterpreter", "_code", true, WD_PTR },
	{ VP_HS_SQ_BUFFER, "StubQueue", "_stub_buffer", false, WD_PTR },
	{ VP_HS_SQ_LIMIT, "StubQueue", "_buffer_limit", false, WD_INT },
	{ VP_HS_SQ_BEGIN, "StubQueue", "_queue_begin", false, WD_INT },
	{ VP_HS_SQ_END, "StubQueue", "_queue_end", false, WD_INT },
	/* Metadata, for naming a Method*. */
	{ VP_HS_METHOD_CONST, "Method", "_constMethod", false, WD_PTR },
	{ VP_HS_CM_CONSTANTS, "ConstMethod", "_constants", false, WD_ANY },
	{ VP_HS_CM_NAME, "ConstMethod", "_name_index", false, WD_ANY },
	{ VP_HS_CM_SIG, "ConstMethod", "_signature_index", false, WD_ANY },
	{ VP_HS_CP_HOLDER, "ConstantPool", "_pool_holder", false, WD_ANY },
	{ VP_HS_KLASS_NAME, "Klass", "_name", false, WD_ANY },
	{ VP_HS_SYM_LENGTH, "Symbol", "_length", false, WD_ANY },
	{ VP_HS_SYM_BODY, "Symbol", "_body", false, WD_ANY },
	/* The release. */
	{ VP_HS_VM_RELEASE, "Abstract_VM_Version", "_s_vm_release", true, WD_PTR },
	{ VP_HS_VM_MAJOR, "Abstract_VM_Version", "_vm_major_version", true, WD_ANY },
	/* Threads: _osthread moved from JavaThread (17) to Thread (25). */
	{ VP_HS_THREAD_OSTHREAD, "JavaThread", "_osthread", false, WD_ANY },
	{ VP_HS_THREAD_OSTHREAD, "Thread", "_osthread", false, WD_ANY },
	{ VP_HS_OSTHREAD_TID, "OSThread", "_thread_id", false, WD_ANY },
	/* The flag table. */
	{ VP_HS_FLAG_NAME, "JVMFlag", "_name", false, WD_ANY },
	{ VP_HS_FLAG_ADDR, "JVMFlag", "_addr", false, WD_ANY },
	{ VP_HS_FLAG_FLAGS, "JVMFlag", "_flags", false, WD_ANY },
	{ VP_HS_FLAG_TABLE, "JVMFlag", "flags", true, WD_ANY },
	{ VP_HS_FLAG_COUNT, "JVMFlag", "numFlags", true, WD_ANY },
	/* The heap's collection counter (the agent's GC records). */
	{ VP_HS_UNIVERSE_HEAP, "Universe", "_collectedHeap", true, WD_PTR },
	{ VP_HS_HEAP_TOTAL_COLLECTIONS, "CollectedHeap", "_total_collections", false, WD_ANY },
};
#define NROWS (sizeof(rows) / sizeof(rows[0]))

static const char *const type_names[VP_HS_T__N] = {
	[VP_HS_T_HEAPBLOCK] = "HeapBlock", [VP_HS_T_CONSTMETHOD] = "ConstMethod", [VP_HS_T_PCDESC] = "PcDesc",
	[VP_HS_T_CONSTANTPOOL] = "ConstantPool", [VP_HS_T_JVMFLAG] = "JVMFlag",
};
static const char *const constant_names[VP_HS_C__N] = {
	[VP_HS_C_KIND_NMETHOD] = "CodeBlobKind::Nmethod",
};

void vp_hs_vm__names(enum vp_hs_fid k, const char **type, const char **name)
{
	*type = *name = "?";
	for (size_t r = 0; r < NROWS; r++)
		if (rows[r].id == k) {
			*type = rows[r].type;
			*name = rows[r].name;
			return;
		}
}

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

static int rd_u64(const struct vp_hs_mem *m, uint64_t a, uint64_t *v)
{
	*v = 0;
	return vp_hs_mem__read(m, a, v, sizeof(*v));
}

struct tab {
	uint64_t base, stride, o_type, o_field, o_tstr, o_static, o_off, o_addr;
};

static int read_struct_globals(const struct vp_hs_mem *m, const struct vp_hs_globals *g, struct tab *t, char *err,
			       size_t errlen)
{
	if (rd_u64(m, g->structs, &t->base) || rd_u64(m, g->struct_stride, &t->stride) ||
	    rd_u64(m, g->struct_type_name_off, &t->o_type) || rd_u64(m, g->struct_field_name_off, &t->o_field) ||
	    rd_u64(m, g->struct_type_string_off, &t->o_tstr) || rd_u64(m, g->struct_is_static_off, &t->o_static) ||
	    rd_u64(m, g->struct_offset_off, &t->o_off) || rd_u64(m, g->struct_address_off, &t->o_addr)) {
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

/* Walks gHotSpotVMStructs once, noting the field of every row wanted. */
static int scan_structs(const struct vp_hs_mem *m, const struct tab *t, const bool *want, struct vp_hs_vm *vm,
			char *err, size_t errlen)
{
	int rank[VP_HS_F__N];    /* the row (index into rows) each field was found under */

	for (int k = 0; k < VP_HS_F__N; k++)
		rank[k] = (int)NROWS;
	for (int i = 0; i < MAX_ENTRIES; i++) {
		uint8_t e[MAX_STRIDE];
		uint64_t tn, fn, ts, off, addr;
		int32_t st;
		char type[NAME_LEN], field[NAME_LEN], tstr[NAME_LEN];
		bool have_field = false, have_tstr = false;
		int rc;

		if ((rc = vp_hs_mem__read(m, t->base + (uint64_t)i * t->stride, e, t->stride))) {
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
		rc = vp_hs_mem__str(m, tn, type, sizeof(type));
		if (rc == -ENAMETOOLONG)
			continue;
		if (rc) {
			snprintf(err, errlen, "VM structure entry %d names its type at an unreadable address", i);
			return -EFAULT;
		}
		for (int r = 0; r < (int)NROWS; r++) {
			const struct row *w = &rows[r];
			struct vp_hs_field *f = &vm->f[w->id];

			if (!want[w->id] || rank[w->id] <= r || strcmp(type, w->type))
				continue;
			if (!have_field) {
				if (!fn || vp_hs_mem__str(m, fn, field, sizeof(field)))
					break;   /* no readable name: no row can match */
				have_field = true;
			}
			if (strcmp(field, w->name))
				continue;
			if (!have_tstr) {
				if (!ts || vp_hs_mem__str(m, ts, tstr, sizeof(tstr)))
					tstr[0] = '\0';
				have_tstr = true;
			}
			rank[w->id] = r;
			*f = (struct vp_hs_field){ .found = true, .is_static = st != 0, .offset = off, .address = addr,
						   .bytes = type_bytes(tstr), .type = w->type, .name = w->name };
			snprintf(f->type_string, sizeof(f->type_string), "%s", tstr);
			f->fits = f->is_static == w->is_static && width_ok(w->width, f->bytes) &&
				  (f->is_static ? addr != 0 : off <= MAX_FIELD_OFFSET);
		}
	}
	snprintf(err, errlen, "HotSpot's VM structure table has no end within %d entries: corrupt", MAX_ENTRIES);
	return -ENOTSUP;
}

/* The sizes of the wanted type_names from gHotSpotVMTypes. */
static int scan_types(const struct vp_hs_mem *m, const struct vp_hs_globals *g, const bool *want, struct vp_hs_vm *vm,
		      char *err, size_t errlen)
{
	uint64_t base, stride, o_name, o_size;

	if (rd_u64(m, g->types, &base) || rd_u64(m, g->type_stride, &stride) || rd_u64(m, g->type_name_off, &o_name) ||
	    rd_u64(m, g->type_size_off, &o_size)) {
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

		if ((rc = vp_hs_mem__read(m, base + (uint64_t)i * stride, e, stride))) {
			snprintf(err, errlen, "cannot read VM type entry %d (process gone?)", i);
			return rc < 0 ? rc : -EFAULT;
		}
		memcpy(&tn, e + o_name, 8);
		memcpy(&size, e + o_size, 8);
		if (!tn)
			return 0;
		rc = vp_hs_mem__str(m, tn, type, sizeof(type));
		if (rc == -ENAMETOOLONG)
			continue;
		if (rc) {
			snprintf(err, errlen, "VM type entry %d names its type at an unreadable address", i);
			return -EFAULT;
		}
		bool all = true;
		for (int k = 0; k < VP_HS_T__N; k++) {
			if (!want[k])
				continue;
			if (!vm->type_size[k] && !strcmp(type, type_names[k]))
				vm->type_size[k] = size;
			all = all && vm->type_size[k];
		}
		if (all)
			return 0;
	}
	return 0;
}

/* The constants of constant_names from gHotSpotVMIntConstants, when it is exported. */
static void scan_constants(const struct vp_hs_mem *m, const struct vp_hs_globals *g, struct vp_hs_vm *vm)
{
	uint64_t base, stride, o_name, o_value;

	if (!g->int_consts || !g->int_stride || !g->int_name_off || !g->int_value_off ||
	    rd_u64(m, g->int_consts, &base) || rd_u64(m, g->int_stride, &stride) || rd_u64(m, g->int_name_off, &o_name) ||
	    rd_u64(m, g->int_value_off, &o_value) || !base || stride < 12 || stride > MAX_STRIDE ||
	    o_name > stride - 8 || o_value > stride - 4)
		return;
	for (int i = 0; i < MAX_ENTRIES; i++) {
		uint8_t e[MAX_STRIDE];
		uint64_t nm;
		char name[NAME_LEN];

		if (vp_hs_mem__read(m, base + (uint64_t)i * stride, e, stride))
			return;
		memcpy(&nm, e + o_name, 8);
		if (!nm)
			return;
		if (vp_hs_mem__str(m, nm, name, sizeof(name)))
			continue;
		for (int k = 0; k < VP_HS_C__N; k++)
			if (!vm->have_constant[k] && !strcmp(name, constant_names[k])) {
				memcpy(&vm->constant[k], e + o_value, 4);
				vm->have_constant[k] = true;
			}
	}
}

static int read_wanted(struct vp_hs_vm *vm, const struct vp_hs_mem *m, const struct vp_hs_globals *g,
		       const bool *fields, const bool *types, bool constants, char *err, size_t errlen)
{
	struct tab t;
	int rc;

	memset(vm, 0, sizeof(*vm));
	if ((rc = read_struct_globals(m, g, &t, err, errlen)) || (rc = scan_structs(m, &t, fields, vm, err, errlen)) ||
	    (rc = scan_types(m, g, types, vm, err, errlen)))
		return rc;
	if (constants)
		scan_constants(m, g, vm);
	return 0;
}

int vp_hs_vm__read(struct vp_hs_vm *vm, const struct vp_hs_mem *m, const struct vp_hs_globals *g, char *err,
		   size_t errlen)
{
	bool fields[VP_HS_F__N], types[VP_HS_T__N];

	memset(fields, 1, sizeof(fields));
	memset(types, 1, sizeof(types));
	return read_wanted(vm, m, g, fields, types, true, err, errlen);
}

int vp_hs_vm__read_some(struct vp_hs_vm *vm, const struct vp_hs_mem *m, const struct vp_hs_globals *g,
			const enum vp_hs_fid *f, size_t nf, const enum vp_hs_tid *t, size_t nt, char *err,
			size_t errlen)
{
	bool fields[VP_HS_F__N] = { false }, types[VP_HS_T__N] = { false };

	for (size_t i = 0; i < nf; i++)
		if ((unsigned)f[i] < VP_HS_F__N)
			fields[f[i]] = true;
	for (size_t i = 0; i < nt; i++)
		if ((unsigned)t[i] < VP_HS_T__N)
			types[t[i]] = true;
	return read_wanted(vm, m, g, fields, types, false, err, errlen);
}

int vp_hs_vm__read_self(struct vp_hs_vm *vm, void *libjvm, char *err, size_t errlen)
{
	struct vp_hs_globals g;

	memset(vm, 0, sizeof(*vm));
	if (vp_hs_globals__dlsym(libjvm, &g)) {
		snprintf(err, errlen, "no HotSpot VM structure tables in this process");
		return -ENOENT;
	}
	return vp_hs_vm__read(vm, &vp_hs_mem_direct, &g, err, errlen);
}

int vp_hs_vm__find_flag(const struct vp_hs_vm *vm, const struct vp_hs_mem *m, const char *name, uint64_t *value,
			uint64_t *flags)
{
	const struct vp_hs_field *fn = &vm->f[VP_HS_FLAG_NAME], *fa = &vm->f[VP_HS_FLAG_ADDR],
				 *ff = &vm->f[VP_HS_FLAG_FLAGS];
	uint64_t size = vm->type_size[VP_HS_T_JVMFLAG], table, n;
	uint64_t at = vp_hs_vm__address(vm, VP_HS_FLAG_TABLE), count = vp_hs_vm__address(vm, VP_HS_FLAG_COUNT);

	if (!size || !fn->found || !fa->found || !ff->found || fn->is_static || fa->is_static || ff->is_static ||
	    !at || !count || fn->offset + 8 > size || fa->offset + 8 > size || ff->offset + 4 > size ||
	    rd_u64(m, at, &table) || rd_u64(m, count, &n))
		return -ENOENT;
	for (uint64_t i = 0; table && i < n && i < MAX_FLAGS; i++) {
		uint64_t flag = table + i * size, np, v;
		char fname[NAME_LEN];

		if (rd_u64(m, flag + fn->offset, &np) || !np || vp_hs_mem__str(m, np, fname, sizeof(fname)) ||
		    strcmp(fname, name))
			continue;
		if (rd_u64(m, flag + fa->offset, &v) || !v)
			return -ENOENT;
		*value = v;
		*flags = flag + ff->offset;
		return 0;
	}
	return -ENOENT;
}
