/* libjvm.so's VM structure globals found from outside the JVM, in its ELF .dynsym: see
 * symbols.h. Everything read from the process and its files is untrusted: paths are
 * opened without following into special files, and the file must be the one mapped. */
#define _GNU_SOURCE
#include "hotspot/symbols.h"

#include <errno.h>
#include <gelf.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "common/safefs.h"

/* Calls fn for each defined .dynsym symbol whose name starts with "gHotSpotVM", until
 * it returns true. 0, or -ENOEXEC for a file libelf cannot read. */
static int each_hotspot_symbol(Elf *e, bool (*fn)(void *ctx, const char *name, uint64_t value), void *ctx)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM || !sh.sh_entsize ||
		    !(d = elf_getdata(scn, NULL)))
			continue;
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym sym;
			const char *nm;

			if (!gelf_getsym(d, (int)i, &sym) || !sym.st_value || sym.st_shndx == SHN_UNDEF ||
			    !(nm = elf_strptr(e, sh.sh_link, sym.st_name)) || strncmp(nm, "gHotSpotVM", 10))
				continue;
			if (fn(ctx, nm, sym.st_value))
				return 0;
		}
	}
	return 0;
}

static Elf *open_elf(int fd)
{
	if (elf_version(EV_CURRENT) == EV_NONE)
		return NULL;
	return elf_begin(fd, ELF_C_READ_MMAP, NULL);
}

struct resolve {
	struct vp_hs_globals *g;
	uint64_t bias;
};

static bool resolve_one(void *ctx, const char *name, uint64_t value)
{
	struct resolve *r = ctx;

	for (size_t k = 0; k < vp_hs_nglobals; k++) {
		uint64_t *slot = vp_hs_global_slot(r->g, k);

		if (!*slot && !strcmp(name, vp_hs_global_names[k].name))
			*slot = r->bias + value;
	}
	return false;
}

int vp_hs_globals__dynsym(int fd, uint64_t map_lo, struct vp_hs_globals *g)
{
	struct resolve r = { g, 0 };
	bool have_bias = false;
	size_t nph = 0;
	Elf *e;
	int rc;

	memset(g, 0, sizeof(*g));
	e = open_elf(fd);
	if (!e)
		return -ENOEXEC;
	/* The load bias: the segment that holds file offset 0 is mapped at map_lo. */
	if (elf_getphdrnum(e, &nph) == 0) {
		for (size_t i = 0; i < nph && !have_bias; i++) {
			GElf_Phdr ph;

			if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD && ph.p_offset < 4096) {
				r.bias = map_lo - (ph.p_vaddr - ph.p_offset);
				have_bias = true;
			}
		}
	}
	if (!have_bias) {
		rc = -ENOEXEC;
		goto cleanup;
	}
	each_hotspot_symbol(e, resolve_one, &r);
	rc = vp_hs_globals__complete(g) ? 0 : -ENOENT;
cleanup:
	elf_end(e);
	return rc;
}

static bool is_structs(void *ctx, const char *name, uint64_t value)
{
	(void)value;
	return *(bool *)ctx = !strcmp(name, "gHotSpotVMStructs");
}

bool vp_hs__elf_is_hotspot(int fd)
{
	bool found = false;
	Elf *e = open_elf(fd);

	if (!e)
		return false;
	each_hotspot_symbol(e, is_structs, &found);
	elf_end(e);
	return found;
}

int vp_hs_libjvm__find(pid_t pid, struct vp_hs_libjvm *jm)
{
	char path[64], line[4200];
	FILE *f;
	int rc = -ENOENT;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi, off, ino;
		unsigned maj, min;
		char perms[8];
		int name = 0;

		if (sscanf(line, "%lx-%lx %7s %lx %x:%x %lu %n", &lo, &hi, perms, &off, &maj, &min, &ino, &name) < 7 ||
		    !name || off != 0)
			continue;
		char *p = line + name;
		size_t n = strcspn(p, "\n");
		p[n] = '\0';
		if (n > 10 && !strcmp(p + n - 10, " (deleted)"))
			p[n -= 10] = '\0';
		if (n < 10 || strcmp(p + n - 10, "/libjvm.so"))
			continue;
		jm->lo = lo;
		jm->hi = hi;
		jm->dev = makedev(maj, min);
		jm->ino = (ino_t)ino;
		snprintf(jm->path, sizeof(jm->path), "%s", p);
		rc = 0;
		break;
	}
	fclose(f);
	return rc;
}

int vp_hs_libjvm__open(pid_t pid, const struct vp_hs_libjvm *jm, bool via_root)
{
	char p[4200];
	struct stat st;
	int fd;

	snprintf(p, sizeof(p), "/proc/%d/map_files/%llx-%llx", (int)pid, (unsigned long long)jm->lo,
		 (unsigned long long)jm->hi);
	fd = vp_safe_open_regular(p, false);
	if (fd < 0) {
		if (!via_root)
			return fd;
		snprintf(p, sizeof(p), "/proc/%d/root%s", (int)pid, jm->path);
		fd = vp_safe_open_regular(p, false);
		if (fd < 0)
			return fd;
	}
	if (fstat(fd, &st) || st.st_ino != jm->ino || st.st_dev != jm->dev) {
		close(fd);
		return -ESTALE;
	}
	return fd;
}
