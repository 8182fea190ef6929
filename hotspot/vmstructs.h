/* HotSpot's exported VM structure tables (gHotSpotVMStructs, gHotSpotVMTypes,
 * gHotSpotVMIntConstants), as serviceability tools read them: every field, type size
 * and constant viprof reads from HotSpot is named once, in the declarative table of
 * vmstructs.c, with its alternate names where JDKs differ; one scan fills them all.
 * A new JDK's layout is taught there and nowhere else. */
#ifndef VIPROF_HOTSPOT_VMSTRUCTS_H
#define VIPROF_HOTSPOT_VMSTRUCTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hotspot/memory.h"
#include "hotspot/symbols.h"

/* The fields, by what they are; vmstructs.c names them per JDK. */
enum vp_hs_fid {
	VP_HS_CODECACHE_HEAPS,      /* static GrowableArray<CodeHeap*>* */
	VP_HS_GA_LEN, VP_HS_GA_DATA,
	VP_HS_HEAP_MEMORY, VP_HS_HEAP_SEGMAP, VP_HS_HEAP_LOG2,
	VP_HS_VS_LOW_BOUNDARY, VP_HS_VS_HIGH_BOUNDARY, VP_HS_VS_LOW, VP_HS_VS_HIGH,
	VP_HS_HB_LENGTH, VP_HS_HB_USED,
	VP_HS_BLOB_SIZE, VP_HS_BLOB_NAME, VP_HS_BLOB_KIND, VP_HS_BLOB_FRAME_SIZE, VP_HS_BLOB_FRAME_COMPLETE,
	VP_HS_BLOB_CODE_BEGIN,      /* JDK 17: a pointer */
	VP_HS_BLOB_CODE_END,
	VP_HS_BLOB_CODE_OFFSET,     /* JDK 23+: an offset from the blob */
	VP_HS_BLOB_DATA_OFFSET, VP_HS_BLOB_MUTABLE_DATA, VP_HS_BLOB_MUTABLE_SIZE, VP_HS_BLOB_RELOC_SIZE,
	VP_HS_NM_METHOD, VP_HS_NM_STATE, VP_HS_NM_COMPILE_ID, VP_HS_NM_LEVEL, VP_HS_NM_ENTRY_BCI,
	VP_HS_NM_PCS, VP_HS_NM_DEPS, VP_HS_NM_METADATA, VP_HS_NM_SCOPES_BEGIN,
	VP_HS_NM_IMMUTABLE, VP_HS_NM_IMMUTABLE_SIZE, VP_HS_NM_SCOPES_DATA,
	VP_HS_PC_OFFSET, VP_HS_PC_SCOPE,
	VP_HS_INTERP_CODE, VP_HS_SQ_BUFFER, VP_HS_SQ_LIMIT, VP_HS_SQ_BEGIN, VP_HS_SQ_END,
	VP_HS_METHOD_CONST, VP_HS_CM_CONSTANTS, VP_HS_CM_NAME, VP_HS_CM_SIG, VP_HS_CP_HOLDER, VP_HS_KLASS_NAME,
	VP_HS_SYM_LENGTH, VP_HS_SYM_BODY,
	VP_HS_VM_RELEASE, VP_HS_VM_MAJOR,
	VP_HS_THREAD_OSTHREAD, VP_HS_OSTHREAD_TID,
	VP_HS_FLAG_NAME, VP_HS_FLAG_ADDR, VP_HS_FLAG_FLAGS, VP_HS_FLAG_TABLE, VP_HS_FLAG_COUNT,
	VP_HS_UNIVERSE_HEAP,        /* static CollectedHeap* */
	VP_HS_HEAP_TOTAL_COLLECTIONS,
	VP_HS_F__N
};

/* Type sizes and int constants read. */
enum vp_hs_tid { VP_HS_T_HEAPBLOCK, VP_HS_T_CONSTMETHOD, VP_HS_T_PCDESC, VP_HS_T_CONSTANTPOOL, VP_HS_T_JVMFLAG,
		 VP_HS_T__N };
enum vp_hs_cid { VP_HS_C_KIND_NMETHOD, VP_HS_C__N };

/* What the table says of one field. */
struct vp_hs_field {
	bool found;
	bool is_static;
	bool fits;               /* static-ness, declared width and range are what the table expects */
	unsigned bytes;          /* its declared C type's width: 8, 4, 2, or 0 (a struct, an enum) */
	uint64_t offset;         /* of a non-static field */
	uint64_t address;        /* of a static field */
	char type_string[48];    /* the field's C++ type as HotSpot names it ("" if none) */
	const char *type, *name; /* the names it was found under (static strings) */
};

struct vp_hs_vm {
	struct vp_hs_field f[VP_HS_F__N];
	uint64_t type_size[VP_HS_T__N];   /* 0: unknown */
	int32_t constant[VP_HS_C__N];
	bool have_constant[VP_HS_C__N];
};

/* Reads every field, type size and constant of the table through m. 0, or -errno with a
 * one-line reason in err: -EAGAIN when gHotSpotVMStructs is still NULL (the JVM is
 * starting), -ENOTSUP for tables viprof does not understand (or no end within a bound),
 * -EFAULT when memory cannot be read. A field the JVM lacks is left !found: each user
 * decides what it needs. Everything read is untrusted: every loop and string is bounded. */
int vp_hs_vm__read(struct vp_hs_vm *vm, const struct vp_hs_mem *m, const struct vp_hs_globals *g, char *err,
		   size_t errlen);

/* The same for only the fields f[0..nf) and type sizes t[0..nt), no constants: a reader
 * of another process pays a system call per read, and needs a few of them (the recorder
 * reads ~20 fields of every JVM it meets). */
int vp_hs_vm__read_some(struct vp_hs_vm *vm, const struct vp_hs_mem *m, const struct vp_hs_globals *g,
			const enum vp_hs_fid *f, size_t nf, const enum vp_hs_tid *t, size_t nt, char *err,
			size_t errlen);

/* The names the table gives field k first (for messages). */
void vp_hs_vm__names(enum vp_hs_fid k, const char **type, const char **name);

/* The field's offset when found and not static, else -1. */
static inline int64_t vp_hs_vm__offset(const struct vp_hs_vm *vm, enum vp_hs_fid k)
{
	return vm->f[k].found && !vm->f[k].is_static ? (int64_t)vm->f[k].offset : -1;
}
/* The field's address when found and static, else 0. */
static inline uint64_t vp_hs_vm__address(const struct vp_hs_vm *vm, enum vp_hs_fid k)
{
	return vm->f[k].found && vm->f[k].is_static ? vm->f[k].address : 0;
}

/* HotSpot's flag `name` in its flag table (JVMFlag::flags): *value gets the address of
 * its value, *flags that of its JVMFlag::Flags word (an int: the value's origin in the
 * low 4 bits, 0 = default; bit 17 = given on the command line). 0, or -ENOENT. */
#define VP_VM_FLAG_ORIGIN_MASK 0xfu
#define VP_VM_FLAG_ORIGIN_DEFAULT 0u
#define VP_VM_FLAG_WAS_SET_ON_COMMAND_LINE (1u << 17)
int vp_hs_vm__find_flag(const struct vp_hs_vm *vm, const struct vp_hs_mem *m, const char *name, uint64_t *value,
			uint64_t *flags);

/* The JVM's table read in its own process (the agent): globals by dlsym (libjvm: its
 * handle, or NULL for the global scope), tables by plain loads. 0 or as above. */
int vp_hs_vm__read_self(struct vp_hs_vm *vm, void *libjvm, char *err, size_t errlen);

#endif
