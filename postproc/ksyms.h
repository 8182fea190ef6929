/* Kernel symbols of a session: the KSYM records the recorder wrote, sorted by address
 * for lookup. Only the functions that appeared in samples are in a session, so a
 * lookup between two known symbols trusts each symbol's recorded size. */
#ifndef VIPROF_KSYMS_H
#define VIPROF_KSYMS_H

#include <stddef.h>
#include <stdint.h>

struct vp_ksym_entry {
	uint64_t addr;
	uint64_t size;       /* 0 = unknown: up to the next symbol */
	const char *module;  /* "" for vmlinux */
	const char *name;
};

struct vp_ksyms;

struct vp_ksyms *vp_ksyms__new(void);        /* NULL and errno on failure */
void vp_ksyms__free(struct vp_ksyms *k);      /* accepts NULL */
/* Adds one symbol (strings copied); the same (addr, name) twice is kept once. 0 or -errno. */
int vp_ksyms__add(struct vp_ksyms *k, uint64_t addr, uint64_t size, const char *module,
		  const char *name);
/* The symbol containing addr, or NULL. Sorts on the first lookup after an add. */
const struct vp_ksym_entry *vp_ksyms__find(struct vp_ksyms *k, uint64_t addr);
size_t vp_ksyms__count(const struct vp_ksyms *k);

#endif
