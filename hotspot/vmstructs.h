/* HotSpot's exported VM structure tables, as serviceability tools read them: the offset
 * (or, for a static field, the address) of a named field of a VM type, and a type's
 * size. Inside the JVM's own process (the agent); internal to jvm-agent/. */
#ifndef VIPROF_HOTSPOT_VMSTRUCTS_H
#define VIPROF_HOTSPOT_VMSTRUCTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct vp_vm_field {
	const char *type, *name;   /* asked for, e.g. "OSThread", "_thread_id" */
	bool is_static;
	uint64_t offset;           /* of a non-static field */
	void *address;             /* of a static field */
	const char *type_string;   /* the field's C++ type as HotSpot names it, or NULL */
	bool found;
};

/* h: libjvm.so's handle (dlopen RTLD_NOLOAD), or NULL to look in the global scope.
 * Fills f[0..n); true when every field was found (a field set found is skipped). */
bool vp_vm__find_fields(void *h, struct vp_vm_field *f, int n);
/* Copies len bytes at addr of this process into out with process_vm_readv, which fails
 * instead of faulting where the JVM may have freed or unmapped the memory. False when it
 * could not (or addr is in the first page). */
bool vp_vm__read_self(uint64_t addr, void *out, size_t len);

/* HotSpot's flag `name` in its flag table (JVMFlag::flags): *value gets the address of
 * its value, *flags that of its JVMFlag::Flags word (an int: the value's origin in the
 * low 4 bits, 0 = default; bit 17 = given on the command line). False when not found. */
#define VP_VM_FLAG_ORIGIN_MASK 0xfu
#define VP_VM_FLAG_ORIGIN_DEFAULT 0u
#define VP_VM_FLAG_WAS_SET_ON_COMMAND_LINE (1u << 17)
bool vp_vm__find_flag(void *h, const char *name, void **value, char **flags);
/* gHotSpotVMIntConstants[name] into *out; false when there is no such constant. */
bool vp_vm__int_constant(void *h, const char *name, int32_t *out);
/* sizeof(type) as HotSpot exports it, 0 when unknown. */
uint64_t vp_vm__type_size(void *h, const char *type);

#endif
