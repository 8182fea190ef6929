/* Kernel symbol table built from a session's KSYM records. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "postproc/ksyms.h"
#include "common/util.h"

struct vp_ksyms {
	struct vp_ksym_entry *syms;
	size_t n, cap;
	bool sorted;
};

struct vp_ksyms *vp_ksyms__new(void)
{
	struct vp_ksyms *k = calloc(1, sizeof(*k));
	if (k)
		k->sorted = true;
	return k;
}

void vp_ksyms__free(struct vp_ksyms *k)
{
	if (!k)
		return;
	for (size_t i = 0; i < k->n; i++) {
		free((char *)k->syms[i].module);
		free((char *)k->syms[i].name);
	}
	free(k->syms);
	free(k);
}

int vp_ksyms__add(struct vp_ksyms *k, uint64_t addr, uint64_t size, const char *module,
		  const char *name)
{
	if (vp_grow((void **)&k->syms, &k->cap, k->n + 1, sizeof(*k->syms)))
		return -ENOMEM;
	struct vp_ksym_entry *e = &k->syms[k->n];
	e->addr = addr;
	e->size = size;
	e->module = strdup(module ? module : "");
	e->name = strdup(name ? name : "");
	if (!e->module || !e->name) {
		free((char *)e->module);
		free((char *)e->name);
		return -ENOMEM;
	}
	k->n++;
	k->sorted = false;
	return 0;
}

static int cmp_sym(const void *a, const void *b)
{
	const struct vp_ksym_entry *x = a, *y = b;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* Sorts and drops duplicates: the recorder may emit a symbol again after a restart
 * of its own dedup table, and merged sessions repeat them. */
static void sort_syms(struct vp_ksyms *k)
{
	vp_sort(k->syms, k->n, sizeof(*k->syms), cmp_sym);
	size_t o = 0;
	for (size_t i = 0; i < k->n; i++) {
		if (o && k->syms[o - 1].addr == k->syms[i].addr &&
		    !strcmp(k->syms[o - 1].name, k->syms[i].name)) {
			free((char *)k->syms[i].module);
			free((char *)k->syms[i].name);
			continue;
		}
		k->syms[o++] = k->syms[i];
	}
	k->n = o;
	k->sorted = true;
}

const struct vp_ksym_entry *vp_ksyms__find(struct vp_ksyms *k, uint64_t addr)
{
	if (!k->sorted)
		sort_syms(k);
	size_t lo = 0, hi = k->n;
	while (lo < hi) {  /* first symbol with addr > target */
		size_t mid = lo + (hi - lo) / 2;
		if (k->syms[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	const struct vp_ksym_entry *e = &k->syms[lo - 1];
	if (e->size && addr - e->addr >= e->size)
		return NULL;
	/* Without a size, an address far past the last known symbol is not that symbol:
	 * session symbols are sparse, so cap the guess at one page. */
	if (!e->size && lo == k->n && addr - e->addr >= 4096)
		return NULL;
	return e;
}

size_t vp_ksyms__count(const struct vp_ksyms *k)
{
	return k->n;
}
