/* The one string interner: strings numbered 0, 1, 2... in the order they were first
 * added, so that a writer can emit a table of strings (pprof's string_table, OTLP's
 * dictionary, JFR's symbol pool) and refer to its entries by index. FNV-1a hashing
 * with linear probing over a power of two, doubled when half full. */
#ifndef VIPROF_COMMON_STRTAB_H
#define VIPROF_COMMON_STRTAB_H

#include <stddef.h>
#include <stdint.h>

/* Zero-initialise with {0}. v[i] is the string of id i, n the number of ids. */
struct vp_strtab {
	const char **v;
	size_t n, cap;
	int64_t *slot;        /* open addressing over v, -1 = empty */
	size_t size;
	char **owned;         /* the strings the table frees */
	size_t nowned, owned_cap;
};

/* The id of s (NULL counts as ""), added if new; -1 on ENOMEM. The table borrows s: it
 * must outlive the table. */
int64_t vp_strtab__id(struct vp_strtab *t, const char *s);
/* The same for a string that need not outlive the table: a new one is copied. */
int64_t vp_strtab__id_copy(struct vp_strtab *t, const char *s);
/* The same for a malloc'd string the table takes over (freed at once when it is there
 * already); NULL (a failed allocation) gives -1. */
int64_t vp_strtab__id_owned(struct vp_strtab *t, char *s);
/* Frees the table and the strings it owns; accepts a zeroed table. */
void vp_strtab__free(struct vp_strtab *t);

#endif
