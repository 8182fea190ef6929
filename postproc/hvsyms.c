/* Hypervisor symbols from a Xen ELF (see hvsyms.h), via libelf. */
#include "postproc/hvsyms.h"
#include "common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct hvsym {
	uint64_t addr, size;
	const char *name;       /* into names */
};

struct vp_hvsyms {
	struct hvsym *s;
	size_t n;
	char *names;            /* all names, NUL-separated: the ELF is closed after loading */
};

static int cmp_sym(const void *a, const void *b)
{
	const struct hvsym *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	/* At one address prefer the sized symbol, then the global-looking (shorter) name. */
	if (x->size != y->size)
		return x->size > y->size ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* Loads the symbols of one SYMTAB/DYNSYM section into x. */
static int load_table(struct vp_hvsyms *x, Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh)
{
	Elf_Data *d = elf_getdata(scn, NULL);
	size_t count, namelen = 0, ni = 0;

	if (!d || !sh->sh_entsize)
		return -EINVAL;
	count = sh->sh_size / sh->sh_entsize;
	/* Two passes: sizes first, so that names can live in one block. */
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < count; i++) {
			GElf_Sym sym;
			const char *name;
			int type;

			if (!gelf_getsym(d, (int)i, &sym))
				continue;
			type = GELF_ST_TYPE(sym.st_info);
			if ((type != STT_FUNC && type != STT_OBJECT && type != STT_NOTYPE) ||
			    sym.st_shndx == SHN_UNDEF || sym.st_value == 0)
				continue;
			name = elf_strptr(elf, sh->sh_link, sym.st_name);
			if (!name || !*name || name[0] == '$')
				continue;   /* unnamed, or an ARM/AArch64 mapping symbol */
			if (pass == 0) {
				x->n++;
				namelen += strlen(name) + 1;
				continue;
			}
			size_t l = strlen(name) + 1;

			memcpy(x->names + ni, name, l);
			x->s[x->n++] = (struct hvsym){ sym.st_value, sym.st_size, x->names + ni };
			ni += l;
		}
		if (pass == 0) {
			if (!x->n)
				return -ENODATA;
			x->s = calloc(x->n, sizeof(*x->s));
			x->names = malloc(namelen ? namelen : 1);
			if (!x->s || !x->names)
				return -ENOMEM;
			x->n = 0;
		}
	}
	return 0;
}

struct vp_hvsyms *vp_hvsyms__open(const char *path, char *err, size_t len)
{
	struct vp_hvsyms *x = NULL;
	Elf_Scn *scn = NULL, *symtab = NULL, *dynsym = NULL;
	GElf_Shdr sh, use;
	Elf *elf = NULL;
	int fd, ret = 0;

	if (elf_version(EV_CURRENT) == EV_NONE) {
		snprintf(err, len, "libelf is unusable: %s", elf_errmsg(-1));
		errno = EINVAL;
		return NULL;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		snprintf(err, len, "cannot open hypervisor symbols %s: %s; pass xen-syms of the running Xen "
			 "(e.g. /usr/lib/debug/xen-syms-$(xl info xen_version))", path, strerror(errno));
		goto cleanup;
	}
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF) {
		ret = -EINVAL;
		snprintf(err, len, "%s is not an ELF file; --hv-syms needs xen-syms, not the compressed xen.gz", path);
		goto cleanup;
	}
	while ((scn = elf_nextscn(elf, scn))) {
		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_SYMTAB)
			symtab = scn;
		else if (sh.sh_type == SHT_DYNSYM)
			dynsym = scn;
	}
	if (!symtab && !dynsym) {
		ret = -ENODATA;
		snprintf(err, len, "%s has no symbol table (stripped); use the unstripped xen-syms", path);
		goto cleanup;
	}
	x = calloc(1, sizeof(*x));
	if (!x) {
		ret = -ENOMEM;
		snprintf(err, len, "out of memory reading %s", path);
		goto cleanup;
	}
	scn = symtab ? symtab : dynsym;
	gelf_getshdr(scn, &use);
	ret = load_table(x, elf, scn, &use);
	if (ret) {
		snprintf(err, len, ret == -ENODATA ? "%s has no function symbols; use the unstripped xen-syms"
			 : "cannot read the symbols of %s: %s", path, strerror(-ret));
		goto cleanup;
	}
	vp_sort(x->s, x->n, sizeof(*x->s), cmp_sym);
	/* A Xen image is linked in Xen's part of the address space; anything else (a
	 * program, a Linux vmlinux) would name hypervisor samples after its own symbols. */
	size_t in_xen = 0;
	for (size_t i = 0; i < x->n; i++)
		in_xen += vp_hvsyms__is_xen_addr(x->s[i].addr);
	if (in_xen * 2 < x->n) {
		ret = -EINVAL;
		snprintf(err, len, "%s is not a Xen image: its symbols are not at Xen's addresses (0x%llx-0x%llx); "
			 "pass xen-syms of the running Xen to --hv-syms", path,
			 (unsigned long long)VP_XEN_VIRT_START, (unsigned long long)VP_XEN_VIRT_END);
		goto cleanup;
	}
cleanup:
	if (elf)
		elf_end(elf);
	if (fd >= 0)
		close(fd);
	if (ret) {
		vp_hvsyms__close(x);
		errno = -ret;
		return NULL;
	}
	return x;
}

const char *vp_hvsyms__name(struct vp_hvsyms *x, uint64_t addr, uint64_t *off)
{
	size_t lo = 0, hi = x->n;
	const struct hvsym *s;

	/* Last symbol with s->addr <= addr; for equal addresses the sort put the best first. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (x->s[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	s = &x->s[lo - 1];
	while (s > x->s && s[-1].addr == s->addr)
		s--;
	/* A sized symbol covers [addr, addr + size); an unsized one (an assembler label,
	 * many of Xen's entry points) reaches up to the next symbol. */
	if (s->size && addr - s->addr >= s->size)
		return NULL;
	if (off)
		*off = addr - s->addr;
	return s->name;
}

size_t vp_hvsyms__count(const struct vp_hvsyms *x)
{
	return x->n;
}

bool vp_hvsyms__is_xen_addr(uint64_t addr)
{
	return addr >= VP_XEN_VIRT_START && addr < VP_XEN_VIRT_END;
}

void vp_hvsyms__close(struct vp_hvsyms *x)
{
	if (!x)
		return;
	free(x->s);
	free(x->names);
	free(x);
}
