/* libjvm.so's VM structure globals found inside the JVM with dlsym: see symbols.h. The
 * outside way (.dynsym) is in symbols_elf.c, so that the agent does not pull libelf. */
#define _GNU_SOURCE
#include "hotspot/symbols.h"

#include <dlfcn.h>
#include <errno.h>
#include <string.h>

/* The names of libjvm.so's VM structure globals and where each lands in struct
 * vp_hs_globals: one table for both ways of finding them. */
const struct vp_hs_global_name vp_hs_global_names[] = {
#define G(n, f, o) { n, offsetof(struct vp_hs_globals, f), o }
	G("gHotSpotVMStructs", structs, false),
	G("gHotSpotVMStructEntryArrayStride", struct_stride, false),
	G("gHotSpotVMStructEntryTypeNameOffset", struct_type_name_off, false),
	G("gHotSpotVMStructEntryFieldNameOffset", struct_field_name_off, false),
	G("gHotSpotVMStructEntryTypeStringOffset", struct_type_string_off, false),
	G("gHotSpotVMStructEntryIsStaticOffset", struct_is_static_off, false),
	G("gHotSpotVMStructEntryOffsetOffset", struct_offset_off, false),
	G("gHotSpotVMStructEntryAddressOffset", struct_address_off, false),
	G("gHotSpotVMTypes", types, false),
	G("gHotSpotVMTypeEntryArrayStride", type_stride, false),
	G("gHotSpotVMTypeEntryTypeNameOffset", type_name_off, false),
	G("gHotSpotVMTypeEntrySizeOffset", type_size_off, false),
	G("gHotSpotVMIntConstants", int_consts, true),
	G("gHotSpotVMIntConstantEntryArrayStride", int_stride, true),
	G("gHotSpotVMIntConstantEntryNameOffset", int_name_off, true),
	G("gHotSpotVMIntConstantEntryValueOffset", int_value_off, true),
#undef G
};
const size_t vp_hs_nglobals = sizeof(vp_hs_global_names) / sizeof(vp_hs_global_names[0]);

uint64_t *vp_hs_global_slot(struct vp_hs_globals *g, size_t k)
{
	return (uint64_t *)((char *)g + vp_hs_global_names[k].at);
}

bool vp_hs_globals__complete(struct vp_hs_globals *g)
{
	for (size_t k = 0; k < vp_hs_nglobals; k++)
		if (!vp_hs_global_names[k].optional && !*vp_hs_global_slot(g, k))
			return false;
	return true;
}


int vp_hs_globals__dlsym(void *libjvm, struct vp_hs_globals *g)
{
	memset(g, 0, sizeof(*g));
	for (size_t k = 0; k < vp_hs_nglobals; k++) {
		void *p = dlsym(RTLD_DEFAULT, vp_hs_global_names[k].name);

		if (!p && libjvm)
			p = dlsym(libjvm, vp_hs_global_names[k].name);
		*vp_hs_global_slot(g, k) = (uint64_t)(uintptr_t)p;
	}
	return vp_hs_globals__complete(g) ? 0 : -ENOENT;
}
