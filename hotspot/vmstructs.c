/* HotSpot's exported VM structure tables (gHotSpotVMStructs, gHotSpotVMTypes), read in
 * the JVM's own process by the agent: see vmstructs.h. */
#define _GNU_SOURCE
#include "hotspot/vmstructs.h"

#include <dlfcn.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

static void *sym(void *h, const char *name)
{
	void *p = dlsym(RTLD_DEFAULT, name);
	return p ? p : h ? dlsym(h, name) : NULL;
}

static bool read_u64(void *h, const char *name, uint64_t *out)
{
	const uint64_t *p = sym(h, name);
	if (!p)
		return false;
	*out = *p;
	return true;
}

/* Looks up the fields f[0..n) in gHotSpotVMStructs; true when all were found. */
bool vp_vm__find_fields(void *h, struct vp_vm_field *f, int n)
{
	uint64_t tn, fn, ts, st, off, addr, stride;
	char *const *base = sym(h, "gHotSpotVMStructs");
	if (!base || !*base || !read_u64(h, "gHotSpotVMStructEntryTypeNameOffset", &tn) ||
	    !read_u64(h, "gHotSpotVMStructEntryFieldNameOffset", &fn) ||
	    !read_u64(h, "gHotSpotVMStructEntryTypeStringOffset", &ts) ||
	    !read_u64(h, "gHotSpotVMStructEntryIsStaticOffset", &st) ||
	    !read_u64(h, "gHotSpotVMStructEntryOffsetOffset", &off) ||
	    !read_u64(h, "gHotSpotVMStructEntryAddressOffset", &addr) ||
	    !read_u64(h, "gHotSpotVMStructEntryArrayStride", &stride) || !stride)
		return false;
	int left = n;
	for (const char *e = *base; left > 0; e += stride) {
		const char *type = *(const char *const *)(e + tn), *name = *(const char *const *)(e + fn);
		if (!type)
			break;   /* the table ends with an entry of NULL names */
		if (!name)
			continue;
		for (int i = 0; i < n; i++) {
			if (f[i].found || strcmp(f[i].type, type) || strcmp(f[i].name, name))
				continue;
			f[i].found = true;
			f[i].is_static = *(const int32_t *)(e + st) != 0;
			f[i].offset = *(const uint64_t *)(e + off);
			f[i].address = *(void *const *)(e + addr);
			f[i].type_string = *(const char *const *)(e + ts);
			left--;
		}
	}
	return left == 0;
}

/* sizeof(type) from gHotSpotVMTypes, 0 when unknown. */
uint64_t vp_vm__type_size(void *h, const char *type)
{
	uint64_t tn, sz, stride;
	char *const *base = sym(h, "gHotSpotVMTypes");
	if (!base || !*base || !read_u64(h, "gHotSpotVMTypeEntryTypeNameOffset", &tn) ||
	    !read_u64(h, "gHotSpotVMTypeEntrySizeOffset", &sz) || !read_u64(h, "gHotSpotVMTypeEntryArrayStride", &stride) ||
	    !stride)
		return 0;
	for (const char *e = *base;; e += stride) {
		const char *name = *(const char *const *)(e + tn);
		if (!name)
			return 0;
		if (!strcmp(name, type))
			return *(const uint64_t *)(e + sz);
	}
}

bool vp_vm__int_constant(void *h, const char *name, int32_t *out)
{
	uint64_t nm, val, stride;
	char *const *base = sym(h, "gHotSpotVMIntConstants");
	if (!base || !*base || !read_u64(h, "gHotSpotVMIntConstantEntryNameOffset", &nm) ||
	    !read_u64(h, "gHotSpotVMIntConstantEntryValueOffset", &val) ||
	    !read_u64(h, "gHotSpotVMIntConstantEntryArrayStride", &stride) || !stride)
		return false;
	for (const char *e = *base;; e += stride) {
		const char *n = *(const char *const *)(e + nm);
		if (!n)
			return false;
		if (!strcmp(n, name)) {
			*out = *(const int32_t *)(e + val);
			return true;
		}
	}
}

bool vp_vm__read_self(uint64_t addr, void *out, size_t len)
{
	struct iovec local = { out, len }, remote = { (void *)(uintptr_t)addr, len };
	return addr >= 4096 && process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)len;
}

bool vp_vm__find_flag(void *h, const char *name, void **value, char **flags)
{
	struct vp_vm_field f[] = {
		{ "JVMFlag", "_name" }, { "JVMFlag", "_addr" }, { "JVMFlag", "_flags" }, { "JVMFlag", "flags" },
		{ "JVMFlag", "numFlags" },
	};
	uint64_t size = vp_vm__type_size(h, "JVMFlag");

	if (!size || !vp_vm__find_fields(h, f, 5) || f[0].is_static || f[1].is_static || f[2].is_static ||
	    !f[3].is_static || !f[4].is_static || !f[3].address || !f[4].address ||
	    f[0].offset + sizeof(char *) > size || f[1].offset + sizeof(void *) > size ||
	    f[2].offset + sizeof(uint32_t) > size)
		return false;
	char *table = *(char *const *)f[3].address;
	size_t n = *(const size_t *)f[4].address;
	for (size_t i = 0; table && i < n && i < 100000; i++) {
		char *flag = table + i * size;
		const char *fname = *(const char *const *)(flag + f[0].offset);
		if (!fname || strcmp(fname, name))
			continue;
		*value = *(void *const *)(flag + f[1].offset);
		*flags = flag + f[2].offset;
		return *value != NULL;
	}
	return false;
}
