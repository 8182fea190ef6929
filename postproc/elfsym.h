/* Native symbolization with libelf: function symbols of an ELF file (.symtab, else
 * .dynsym, or a separate debug file found by build-id or .gnu_debuglink), the load
 * bias of PIE executables and shared libraries, the GNU build-id, and C++ names
 * demangled. Files are opened once per path and cached with their symbol index. */
#ifndef VIPROF_ELFSYM_H
#define VIPROF_ELFSYM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct vp_elfsym;   /* the cache of opened files */
struct vp_elf;      /* one opened file and its sorted symbols; owned by the cache */

/* debug_root is where separate debug files live (NULL = "/usr/lib/debug"); tests
 * point it at a temporary tree. NULL and errno on failure. */
struct vp_elfsym *vp_elfsym__new(const char *debug_root);
void vp_elfsym__free(struct vp_elfsym *c);   /* accepts NULL */

/* Opens path (cached, also when it failed). A path ending in " (deleted)" is tried
 * without that suffix; when the file is missing and pid is not 0, it is also tried
 * through /proc/<pid>/root (a container's view). NULL with errno when unreadable. */
struct vp_elf *vp_elfsym__open(struct vp_elfsym *c, const char *path, uint32_t pid);

/* Reads an ELF image from memory (e.g. this process's vDSO), cached under key; the
 * image is copied. NULL with errno when it is not a readable ELF image. */
struct vp_elf *vp_elfsym__open_memory(struct vp_elfsym *c, const char *key, const void *image, size_t len);

/* Converts a runtime address in a mapping [map_start, ... ) at file offset pgoff into
 * the ELF's virtual address (the addresses nm prints), through the PT_LOAD segment
 * holding that file offset. Returns false when no segment holds it. */
bool vp_elf__to_vaddr(const struct vp_elf *e, uint64_t map_start, uint64_t pgoff, uint64_t ip,
		      uint64_t *vaddr);
/* The function containing vaddr: its (demangled) name, and vaddr's offset into it.
 * NULL when no symbol covers it. */
const char *vp_elf__symbol(const struct vp_elf *e, uint64_t vaddr, uint64_t *offset);
/* Lowercase hex build-id, or "" when the file has none. */
const char *vp_elf__build_id(const struct vp_elf *e);
/* The path actually opened (after the fallbacks above). */
const char *vp_elf__path(const struct vp_elf *e);
/* The file symbols were read from (a separate debug file, or the file itself). */
const char *vp_elf__symbol_source(const struct vp_elf *e);
size_t vp_elf__nsyms(const struct vp_elf *e);

/* Demangles an Itanium C++ name into buf; returns buf, or name when it is not one. */
const char *vp_demangle(const char *name, char *buf, size_t len);

#endif
