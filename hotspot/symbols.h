/* Where libjvm.so's exported VM structure globals are (gHotSpotVMStructs, the strides
 * and entry offsets that describe it, and the same for gHotSpotVMTypes and
 * gHotSpotVMIntConstants), found two ways: with dlsym inside the JVM (the agent), or
 * from libjvm.so's ELF .dynsym plus its load bias from outside (the recorder), which
 * also answers "is this HotSpot?". */
#ifndef VIPROF_HOTSPOT_SYMBOLS_H
#define VIPROF_HOTSPOT_SYMBOLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Addresses (in the JVM) of the globals; 0 where one is missing. The int-constant table
 * is optional: a JVM without it only lacks what is read from it. */
struct vp_hs_globals {
	uint64_t structs, struct_stride, struct_type_name_off, struct_field_name_off,
		 struct_type_string_off, struct_is_static_off, struct_offset_off,
		 struct_address_off;
	uint64_t types, type_stride, type_name_off, type_size_off;
	uint64_t int_consts, int_stride, int_name_off, int_value_off;
};

/* In the JVM's own process: dlsym in the global scope, then in libjvm (its handle from
 * dlopen RTLD_NOLOAD, or NULL). 0, or -ENOENT when a required global is missing. */
int vp_hs_globals__dlsym(void *libjvm, struct vp_hs_globals *g);

/* From outside: the globals in the .dynsym of the ELF file on fd, whose file offset 0 is
 * mapped at map_lo. 0; -ENOENT when a required one is missing (not HotSpot); -ENOEXEC
 * for a file libelf cannot read. Needs libelf (the recorder links it, the agent not). */
int vp_hs_globals__dynsym(int fd, uint64_t map_lo, struct vp_hs_globals *g);

/* Does the ELF file on fd export HotSpot's VM structure table? */
bool vp_hs__elf_is_hotspot(int fd);

/* libjvm.so's mapping of file offset 0 in /proc/PID/maps (a JDK updated under a running
 * JVM shows its old file as deleted: the suffix is dropped). 0, -ENOENT when the
 * process maps no libjvm.so, -ESRCH when it is gone. */
struct vp_hs_libjvm {
	uint64_t lo, hi;
	dev_t dev;
	ino_t ino;
	char path[4096];
};
int vp_hs_libjvm__find(pid_t pid, struct vp_hs_libjvm *jm);

/* Opens the libjvm.so the process maps, never blocking and only if it is a regular file
 * with the mapping's device and inode: through /proc/PID/map_files (the object actually
 * mapped, which needs CAP_SYS_ADMIN), else, when via_root, through the process's root
 * (its mount namespace: a JVM in a container). An fd, or -errno (-ESTALE: not the file
 * it maps). */
int vp_hs_libjvm__open(pid_t pid, const struct vp_hs_libjvm *jm, bool via_root);

/* Internal to hotspot/: the globals' names and where each lands in the struct (both
 * ways of finding them walk this one table). */
struct vp_hs_global_name {
	const char *name;
	size_t at;               /* offsetof in struct vp_hs_globals */
	bool optional;
};
extern const struct vp_hs_global_name vp_hs_global_names[];
extern const size_t vp_hs_nglobals;
uint64_t *vp_hs_global_slot(struct vp_hs_globals *g, size_t k);
bool vp_hs_globals__complete(struct vp_hs_globals *g);

#endif
