/* Native symbolization with libelf. */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "postproc/elfsym.h"
#include "common/util.h"
#include "common/safefs.h"

#define DEFAULT_DEBUG_ROOT "/usr/lib/debug"

/* From libstdc++ (the postproc library links it): the Itanium ABI demangler. */
extern char *__cxa_demangle(const char *mangled, char *out, size_t *len, int *status);

struct sym {
	uint64_t addr, size;
	char *name;
	uint8_t bind;
};

struct load {
	uint64_t off, vaddr, filesz, memsz;
};

struct vp_elf {
	char *key;            /* the path as asked for (cache key) */
	char *path;           /* the path opened */
	char *symsrc;         /* where the symbols came from */
	int err;              /* errno of a failed open, cached too */
	uint16_t type;        /* ET_EXEC, ET_DYN, ... */
	struct load *loads; size_t nloads;
	struct sym *syms; size_t nsyms, syms_cap;
	char build_id[41];
	struct vp_elf *next;
};

struct vp_elfsym {
	char *debug_root;
	struct vp_elf *files;
};

const char *vp_demangle(const char *name, char *buf, size_t len)
{
	if (strncmp(name, "_Z", 2))
		return name;
	int status = 0;
	char *d = __cxa_demangle(name, NULL, NULL, &status);
	if (!d || status)
		return name;
	snprintf(buf, len, "%s", d);
	free(d);
	return buf;
}

struct vp_elfsym *vp_elfsym__new(const char *debug_root)
{
	if (elf_version(EV_CURRENT) == EV_NONE) {
		errno = ENOSYS;
		return NULL;
	}
	struct vp_elfsym *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->debug_root = strdup(debug_root ? debug_root : DEFAULT_DEBUG_ROOT);
	if (!c->debug_root) {
		free(c);
		return NULL;
	}
	return c;
}

static void elf_free(struct vp_elf *e)
{
	for (size_t i = 0; i < e->nsyms; i++)
		free(e->syms[i].name);
	free(e->syms);
	free(e->loads);
	free(e->key);
	free(e->path);
	free(e->symsrc);
	free(e);
}

void vp_elfsym__free(struct vp_elfsym *c)
{
	if (!c)
		return;
	for (struct vp_elf *e = c->files, *n; e; e = n) {
		n = e->next;
		elf_free(e);
	}
	free(c->debug_root);
	free(c);
}

static void read_build_id(Elf *elf, char out[41])
{
	out[0] = '\0';
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		if (!d)
			continue;
		GElf_Nhdr nh;
		size_t off = 0, name_off, desc_off, next;
		while ((next = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
			if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
			    !memcmp((char *)d->d_buf + name_off, "GNU", 4)) {
				const unsigned char *b = (const unsigned char *)d->d_buf + desc_off;
				size_t n = nh.n_descsz > 20 ? 20 : nh.n_descsz;
				for (size_t i = 0; i < n; i++)
					sprintf(out + 2 * i, "%02x", b[i]);
				return;
			}
			off = next;
		}
	}
}

/* The .gnu_debuglink name (the CRC after it is not checked: the build-id, when both
 * files have one, is the stronger test and is checked instead). */
static char *read_debuglink(Elf *elf)
{
	size_t shstrndx;
	if (elf_getshdrstrndx(elf, &shstrndx))
		return NULL;
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh))
			continue;
		const char *n = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!n || strcmp(n, ".gnu_debuglink"))
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		if (!d || !d->d_size || !memchr(d->d_buf, '\0', d->d_size))
			return NULL;
		return strdup(d->d_buf);
	}
	return NULL;
}

static int cmp_sym(const void *a, const void *b)
{
	const struct sym *x = a, *y = b;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	/* At one address, prefer a global name over weak and local aliases. */
	int bx = x->bind == STB_GLOBAL ? 0 : x->bind == STB_WEAK ? 1 : 2;
	int by = y->bind == STB_GLOBAL ? 0 : y->bind == STB_WEAK ? 1 : 2;
	if (bx != by)
		return bx - by;
	return strcmp(x->name, y->name);
}

/* Adds the function symbols of every section of type want. Returns how many or -errno. */
static int read_syms(struct vp_elf *e, Elf *elf, uint32_t want)
{
	int added = 0;
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != want || !sh.sh_entsize)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		if (!d)
			continue;
		size_t n = sh.sh_size / sh.sh_entsize;
		for (size_t i = 0; i < n; i++) {
			GElf_Sym s;
			if (!gelf_getsym(d, (int)i, &s))
				continue;
			int t = GELF_ST_TYPE(s.st_info);
			if ((t != STT_FUNC && t != STT_GNU_IFUNC) || s.st_shndx == SHN_UNDEF || !s.st_value)
				continue;
			const char *name = elf_strptr(elf, sh.sh_link, s.st_name);
			if (!name || !*name)
				continue;
			if (vp_grow((void **)&e->syms, &e->syms_cap, e->nsyms + 1, sizeof(*e->syms)))
				return -ENOMEM;
			char buf[1024];
			struct sym *o = &e->syms[e->nsyms];
			o->addr = s.st_value;
			o->size = s.st_size;
			o->bind = GELF_ST_BIND(s.st_info);
			o->name = strdup(vp_demangle(name, buf, sizeof(buf)));
			if (!o->name)
				return -ENOMEM;
			e->nsyms++;
			added++;
		}
	}
	return added;
}

static Elf *open_elf(const char *path, int *fd)
{
	/* A recorded path may now name a FIFO or a device: never block on one, never read
	 * anything but a regular file. */
	*fd = vp_safe_open_regular(path, false);
	if (*fd < 0) {
		errno = -*fd;
		return NULL;
	}
	Elf *elf = elf_begin(*fd, ELF_C_READ_MMAP, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF) {
		if (elf)
			elf_end(elf);
		close(*fd);
		errno = ENOEXEC;
		return NULL;
	}
	return elf;
}

/* Reads .symtab from a separate debug file if it is one for this build. */
static int try_debug_file(struct vp_elf *e, const char *path)
{
	int fd;
	Elf *elf = open_elf(path, &fd);
	if (!elf)
		return 0;
	char bid[41];
	read_build_id(elf, bid);
	int n = 0;
	if (!e->build_id[0] || !bid[0] || !strcmp(bid, e->build_id)) {
		n = read_syms(e, elf, SHT_SYMTAB);
		if (n > 0) {
			free(e->symsrc);
			e->symsrc = strdup(path);
		}
	}
	elf_end(elf);
	close(fd);
	return n;
}

/* A stripped file: the debug file by build-id under the debug root, then the
 * .gnu_debuglink name next to the file, in .debug/ beside it, and under the root. */
static int find_debug_syms(struct vp_elfsym *c, struct vp_elf *e, Elf *elf)
{
	char p[3 * 4096 + 64];
	int n;
	if (e->build_id[0]) {
		snprintf(p, sizeof(p), "%s/.build-id/%.2s/%s.debug", c->debug_root, e->build_id,
			 e->build_id + 2);
		if ((n = try_debug_file(e, p)) != 0)
			return n;
	}
	char *link = read_debuglink(elf);
	if (!link)
		return 0;
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s", e->path);
	char *slash = strrchr(dir, '/');
	if (slash)
		*slash = '\0';
	else
		snprintf(dir, sizeof(dir), ".");
	const char *fmts[] = { "%s/%s", "%s/.debug/%s" };
	n = 0;
	for (size_t i = 0; i < 2 && n == 0; i++) {
		snprintf(p, sizeof(p), fmts[i], dir, link);
		if (strcmp(p, e->path))  /* a debuglink naming the file itself */
			n = try_debug_file(e, p);
	}
	if (n == 0) {
		snprintf(p, sizeof(p), "%s%s/%s", c->debug_root, dir, link);
		n = try_debug_file(e, p);
	}
	free(link);
	return n;
}

static int load_elf(struct vp_elfsym *c, struct vp_elf *e, Elf *elf, const char *path);

static int load_file(struct vp_elfsym *c, struct vp_elf *e, const char *path)
{
	int fd;
	Elf *elf = open_elf(path, &fd);
	if (!elf)
		return -errno;
	int err = load_elf(c, e, elf, path);
	elf_end(elf);
	close(fd);
	return err;
}

static int load_elf(struct vp_elfsym *c, struct vp_elf *e, Elf *elf, const char *path)
{
	int err = 0;
	e->path = strdup(path);
	e->symsrc = strdup(path);
	if (!e->path || !e->symsrc) {
		err = -ENOMEM;
		goto cleanup;
	}
	GElf_Ehdr eh;
	if (!gelf_getehdr(elf, &eh)) {
		err = -ENOEXEC;
		goto cleanup;
	}
	e->type = eh.e_type;
	size_t nph = 0;
	if (elf_getphdrnum(elf, &nph))
		nph = 0;
	e->loads = calloc(nph ? nph : 1, sizeof(*e->loads));
	if (!e->loads) {
		err = -ENOMEM;
		goto cleanup;
	}
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		e->loads[e->nloads++] = (struct load){ ph.p_offset, ph.p_vaddr, ph.p_filesz, ph.p_memsz };
	}
	read_build_id(elf, e->build_id);
	int n = read_syms(e, elf, SHT_SYMTAB);
	if (n == 0)
		n = find_debug_syms(c, e, elf);
	if (n == 0)
		n = read_syms(e, elf, SHT_DYNSYM);
	if (n < 0) {
		err = n;
		goto cleanup;
	}
	if (e->nsyms)
		vp_sort(e->syms, e->nsyms, sizeof(*e->syms), cmp_sym);
	/* Keep one name per address (the preferred alias sorted first). */
	size_t o = 0;
	for (size_t i = 0; i < e->nsyms; i++) {
		if (o && e->syms[o - 1].addr == e->syms[i].addr) {
			if (!e->syms[o - 1].size)
				e->syms[o - 1].size = e->syms[i].size;
			free(e->syms[i].name);
			continue;
		}
		e->syms[o++] = e->syms[i];
	}
	e->nsyms = o;
cleanup:
	if (err) {  /* leave e clean for the next candidate path */
		for (size_t i = 0; i < e->nsyms; i++)
			free(e->syms[i].name);
		free(e->syms);
		free(e->loads);
		free(e->path);
		free(e->symsrc);
		e->syms = NULL;
		e->loads = NULL;
		e->path = e->symsrc = NULL;
		e->nsyms = e->nloads = 0;
	}
	return err;
}

/* The cache entry for key, or NULL if key was never opened. */
static struct vp_elf *cached(const struct vp_elfsym *c, const char *key)
{
	for (struct vp_elf *e = c->files; e; e = e->next)
		if (!strcmp(e->key, key))
			return e;
	return NULL;
}

/* Caches e whether it loaded or not (err: 0 or -errno), so that a file that failed is
 * not tried again; returns e, or NULL with errno set. */
static struct vp_elf *remember(struct vp_elfsym *c, struct vp_elf *e, int err)
{
	e->err = -err;
	e->next = c->files;
	c->files = e;
	if (err) {
		errno = -err;
		return NULL;
	}
	return e;
}

struct vp_elf *vp_elfsym__open(struct vp_elfsym *c, const char *path, uint32_t pid)
{
	struct vp_elf *e = cached(c, path);
	if (e)
		return e->err ? (errno = e->err, NULL) : e;
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->key = strdup(path);
	if (!e->key) {
		free(e);
		return NULL;
	}
	int err = -ENOENT;
	/* Pseudo-files ("[vdso]", "//anon", "[heap]") are not on disk. */
	if (path[0] == '/' && path[1] != '/') {
		char p[4096];
		snprintf(p, sizeof(p), "%s", path);
		size_t l = strlen(p);
		const char *del = " (deleted)";
		if (l > strlen(del) && !strcmp(p + l - strlen(del), del))
			p[l - strlen(del)] = '\0';
		err = load_file(c, e, p);
		if (err == -ENOENT && pid) {
			char q[4096 + 32];
			snprintf(q, sizeof(q), "/proc/%u/root%s", pid, p);
			err = load_file(c, e, q);
		}
	}
	return remember(c, e, err);
}

struct vp_elf *vp_elfsym__open_memory(struct vp_elfsym *c, const char *key, const void *image, size_t len)
{
	struct vp_elf *e = cached(c, key);
	if (e)
		return e->err ? (errno = e->err, NULL) : e;
	e = calloc(1, sizeof(*e));
	char *copy = malloc(len ? len : 1);  /* libelf wants a writable image */
	if (!e || !copy || !(e->key = strdup(key))) {
		free(e);
		free(copy);
		errno = ENOMEM;
		return NULL;
	}
	memcpy(copy, image, len);
	int err = -ENOEXEC;
	Elf *elf = elf_memory(copy, len);
	if (elf && elf_kind(elf) == ELF_K_ELF)
		err = load_elf(c, e, elf, key);
	if (elf)
		elf_end(elf);
	free(copy);
	return remember(c, e, err);
}

bool vp_elf__to_vaddr(const struct vp_elf *e, uint64_t map_start, uint64_t pgoff, uint64_t ip,
		      uint64_t *vaddr)
{
	uint64_t off = ip - map_start + pgoff;
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < e->nloads; i++) {
			const struct load *l = &e->loads[i];
			uint64_t sz = pass == 0 ? l->filesz : l->memsz;
			if (off >= l->off && off < l->off + sz) {
				*vaddr = off - l->off + l->vaddr;
				return true;
			}
		}
	}
	if (e->type == ET_EXEC) {  /* not relocated: the runtime address is the vaddr */
		*vaddr = ip;
		return true;
	}
	return false;
}

const char *vp_elf__symbol(const struct vp_elf *e, uint64_t vaddr, uint64_t *offset)
{
	size_t lo = 0, hi = e->nsyms;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (e->syms[mid].addr <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	const struct sym *s = &e->syms[lo - 1];
	/* A symbol without a size (hand-written assembly) extends to the next one. */
	uint64_t end = s->size ? s->addr + s->size : lo < e->nsyms ? e->syms[lo].addr : s->addr + 4096;
	if (vaddr >= end)
		return NULL;
	if (offset)
		*offset = vaddr - s->addr;
	return s->name;
}

const char *vp_elf__build_id(const struct vp_elf *e) { return e->build_id; }
const char *vp_elf__path(const struct vp_elf *e) { return e->path; }
const char *vp_elf__symbol_source(const struct vp_elf *e) { return e->symsrc; }
size_t vp_elf__nsyms(const struct vp_elf *e) { return e->nsyms; }
