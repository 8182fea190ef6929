/* Native symbolization against ELF fixtures built in the test tree: names and offsets
 * of known functions (nm output captured at build time is the oracle), load bias of
 * PIE, non-PIE, a biased PIE and a shared library, .dynsym only, a stripped binary
 * with its debug file found by .gnu_debuglink and by build-id, a binary without any
 * symbols, C++ demangling, build-ids, " (deleted)" paths and missing files. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/auxv.h>
#include <sys/stat.h>

#include "postproc/elfsym.h"
#include "test.h"
#include "test-helpers.h"

#define FX(name) FIXTURE_DIR "/" name

/* Where the kernel would map the segment holding vaddr, read straight from the
 * program headers (no libelf: this is the test's own oracle). */
struct mapping { uint64_t start, pgoff, ip; };
static struct mapping map_for(const char *path, uint64_t vaddr, uint64_t ip_off)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		FAIL("cannot open %s: %s", path, strerror(errno));
	Elf64_Ehdr eh;
	ASSERT_EQ(pread(fd, &eh, sizeof(eh), 0), (ssize_t)sizeof(eh));
	uint64_t bias = eh.e_type == ET_DYN ? 0x7f1234500000ull : 0;
	for (int i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;
		ASSERT_EQ(pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + (uint64_t)i * eh.e_phentsize)), (ssize_t)sizeof(ph));
		if (ph.p_type != PT_LOAD || vaddr < ph.p_vaddr || vaddr >= ph.p_vaddr + ph.p_filesz)
			continue;
		close(fd);
		return (struct mapping){ bias + (ph.p_vaddr & ~0xfffull), ph.p_offset & ~0xfffull, bias + vaddr + ip_off };
	}
	FAIL("no PT_LOAD holds 0x%llx in %s", (unsigned long long)vaddr, path);
}

/* Resolves the function name (at +5 into it) through a simulated mapping and checks the
 * name and offset; returns the mapping for further checks. */
static struct mapping check(struct vp_elfsym *c, const char *path, const char *nmfile, const char *sym,
			    const char *expect)
{
	uint64_t v = nm_addr(nmfile, sym);
	struct mapping m = map_for(path, v, 5);
	struct vp_elf *e = vp_elfsym__open(c, path, 0);
	ASSERT_NOT_NULL(e);
	uint64_t vaddr = 0, off = 99;
	ASSERT_TRUE(vp_elf__to_vaddr(e, m.start, m.pgoff, m.ip, &vaddr));
	ASSERT_UEQ(vaddr, v + 5);
	ASSERT_STREQ(vp_elf__symbol(e, vaddr, &off), expect);
	ASSERT_UEQ(off, 5);
	return m;
}

static uint64_t entry_of(const char *path)
{
	int fd = open(path, O_RDONLY);
	Elf64_Ehdr eh;
	ASSERT_EQ(pread(fd, &eh, sizeof(eh), 0), (ssize_t)sizeof(eh));
	close(fd);
	return eh.e_entry;
}

static void copy_file(const char *src, const char *dst)
{
	FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
	ASSERT_NOT_NULL(in);
	ASSERT_NOT_NULL(out);
	char buf[65536];
	size_t n;
	while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
		ASSERT_EQ(fwrite(buf, 1, n, out), n);
	fclose(in);
	ASSERT_OK(fclose(out));
}

static void read_build_id(char *out, size_t len)
{
	FILE *f = fopen(FX("fx-pie.notes"), "r");
	ASSERT_NOT_NULL(f);
	char line[512];
	out[0] = '\0';
	while (fgets(line, sizeof(line), f)) {
		char *p = strstr(line, "Build ID: ");
		if (p) {
			snprintf(out, len, "%s", p + 10);
			out[strcspn(out, "\n ")] = '\0';
		}
	}
	fclose(f);
	ASSERT_GT(strlen(out), 8);
}

/* The value of a .dynsym symbol of an ELF image in memory, parsed by hand. */
static uint64_t mem_dynsym(const unsigned char *img, const char *name)
{
	const Elf64_Ehdr *eh = (const void *)img;
	const Elf64_Shdr *sh = (const void *)(img + eh->e_shoff);
	for (int i = 0; i < eh->e_shnum; i++) {
		if (sh[i].sh_type != SHT_DYNSYM)
			continue;
		const Elf64_Sym *sym = (const void *)(img + sh[i].sh_offset);
		const char *str = (const char *)img + sh[sh[i].sh_link].sh_offset;
		for (size_t k = 0; k < sh[i].sh_size / sizeof(*sym); k++)
			if (!strcmp(str + sym[k].st_name, name))
				return sym[k].st_value;
	}
	return 0;
}

int main(void)
{
	char tmp[] = "/tmp/vp-test-elfsym-XXXXXX";
	ASSERT_NOT_NULL(mkdtemp(tmp));
	struct vp_elfsym *c = vp_elfsym__new(tmp);  /* empty debug root for now */
	ASSERT_NOT_NULL(c);

	/* PIE with .symtab: globals, a static function, main. */
	check(c, FX("fx-pie"), FX("fx-pie.nm"), "fx_alpha", "fx_alpha");
	check(c, FX("fx-pie"), FX("fx-pie.nm"), "fx_beta", "fx_beta");
	check(c, FX("fx-pie"), FX("fx-pie.nm"), "fx_local", "fx_local");
	check(c, FX("fx-pie"), FX("fx-pie.nm"), "main", "main");
	/* Non-PIE: runtime address == vaddr. */
	struct mapping m = check(c, FX("fx-nopie"), FX("fx-nopie.nm"), "fx_beta", "fx_beta");
	ASSERT_UEQ(m.ip, nm_addr(FX("fx-nopie.nm"), "fx_beta") + 5);
	/* Biased PIE: vaddr differs from the file offset, the naive ip-start+pgoff is wrong. */
	m = check(c, FX("fx-biased"), FX("fx-biased.nm"), "fx_beta", "fx_beta");
	ASSERT_NE(m.ip - m.start + m.pgoff, nm_addr(FX("fx-biased.nm"), "fx_beta") + 5);
	ASSERT_GE(nm_addr(FX("fx-biased.nm"), "fx_beta"), 0x400000);
	/* Shared library, with .symtab and with .dynsym only. */
	check(c, FX("libfx.so"), FX("libfx.nm"), "fx_lib_one", "fx_lib_one");
	check(c, FX("libfx.so"), FX("libfx.nm"), "fx_lib_two", "fx_lib_two");
	check(c, FX("libfx-dynsym.so"), FX("libfx.nm"), "fx_lib_two", "fx_lib_two");
	struct vp_elf *dyn = vp_elfsym__open(c, FX("libfx-dynsym.so"), 0);
	ASSERT_NOT_NULL(dyn);
	ASSERT_STREQ(vp_elf__symbol_source(dyn), FX("libfx-dynsym.so"));
	/* C++ names demangled. */
	check(c, FX("fx-cxx"), FX("fx-cxx.nm"), "_ZN9viprof_fx8hot_loopEi", "viprof_fx::hot_loop(int)");
	check(c, FX("fx-cxx"), FX("fx-cxx.nm"), "_ZNK9viprof_fx5Shape4areaEv", "viprof_fx::Shape::area() const");

	/* Build-id matches readelf's. */
	char bid[128];
	read_build_id(bid, sizeof(bid));
	struct vp_elf *pie = vp_elfsym__open(c, FX("fx-pie"), 0);
	ASSERT_STREQ(vp_elf__build_id(pie), bid);

	/* Stripped with .gnu_debuglink: symbols come from the debug file beside it, the
	 * local function included (it is only in .symtab). */
	check(c, FX("fx-stripped"), FX("fx-pie.nm"), "fx_local", "fx_local");
	struct vp_elf *st = vp_elfsym__open(c, FX("fx-stripped"), 0);
	ASSERT_STREQ(vp_elf__symbol_source(st), FX("fx-stripped.debug"));
	ASSERT_STREQ(vp_elf__build_id(st), bid);

	/* Stripped without debuglink, debug root empty: no names. */
	struct vp_elf *b0 = vp_elfsym__open(c, FX("fx-buildid"), 0);
	ASSERT_NOT_NULL(b0);
	ASSERT_EQ(vp_elf__nsyms(b0), 0);
	/* ... and found by build-id once the debug file is under <root>/.build-id/. */
	char p[512];
	snprintf(p, sizeof(p), "%s/.build-id", tmp);
	ASSERT_OK(mkdir(p, 0700));
	snprintf(p, sizeof(p), "%s/.build-id/%.2s", tmp, bid);
	ASSERT_OK(mkdir(p, 0700));
	snprintf(p, sizeof(p), "%s/.build-id/%.2s/%s.debug", tmp, bid, bid + 2);
	copy_file(FX("fx-stripped.debug"), p);
	struct vp_elfsym *c2 = vp_elfsym__new(tmp);
	check(c2, FX("fx-buildid"), FX("fx-pie.nm"), "fx_alpha", "fx_alpha");
	check(c2, FX("fx-buildid"), FX("fx-pie.nm"), "fx_local", "fx_local");
	ASSERT_STREQ(vp_elf__symbol_source(vp_elfsym__open(c2, FX("fx-buildid"), 0)), p);

	/* No symbols anywhere (and no build-id to find any): the address still maps to a
	 * vaddr, but no name. */
	struct vp_elf *ns = vp_elfsym__open(c2, FX("fx-nosyms"), 0);
	ASSERT_NOT_NULL(ns);
	ASSERT_EQ(vp_elf__nsyms(ns), 0);
	ASSERT_STREQ(vp_elf__build_id(ns), "");
	uint64_t entry = entry_of(FX("fx-nosyms")), vaddr, off;
	m = map_for(FX("fx-nosyms"), entry, 0);
	ASSERT_TRUE(vp_elf__to_vaddr(ns, m.start, m.pgoff, m.ip, &vaddr));
	ASSERT_UEQ(vaddr, entry);
	ASSERT_NULL(vp_elf__symbol(ns, vaddr, &off));

	/* A deleted file's mapping name; a missing file fails the same way twice (cached). */
	ASSERT_NOT_NULL(vp_elfsym__open(c, FX("fx-pie") " (deleted)", 0));
	errno = 0;
	ASSERT_NULL(vp_elfsym__open(c, "/nonexistent/libgone.so", 0));
	ASSERT_EQ(errno, ENOENT);
	errno = 0;
	ASSERT_NULL(vp_elfsym__open(c, "/nonexistent/libgone.so", 0));
	ASSERT_EQ(errno, ENOENT);
	ASSERT_NULL(vp_elfsym__open(c, "[vdso]", 0));
	/* Not an ELF file. */
	ASSERT_NULL(vp_elfsym__open(c, FX("fx-pie.nm"), 0));
	ASSERT_EQ(errno, ENOEXEC);

	/* An image in memory: this process's vDSO. */
	const unsigned char *vdso = (const void *)getauxval(AT_SYSINFO_EHDR);
	if (vdso) {
		const Elf64_Ehdr *veh = (const void *)vdso;
		size_t vlen = veh->e_shoff + (size_t)veh->e_shnum * veh->e_shentsize;
		uint64_t cg = mem_dynsym(vdso, "__vdso_clock_gettime");
		ASSERT_NE(cg, 0);
		struct vp_elf *ve = vp_elfsym__open_memory(c2, "[vdso]", vdso, vlen);
		ASSERT_NOT_NULL(ve);
		uint64_t vv;
		ASSERT_TRUE(vp_elf__to_vaddr(ve, 0x7fff00000000ull, 0, 0x7fff00000000ull + cg + 2, &vv));
		const char *vn = vp_elf__symbol(ve, vv, &off);
		ASSERT_NOT_NULL(vn);
		/* __vdso_clock_gettime and clock_gettime alias one address; either names it. */
		ASSERT_CONTAINS(vn, "clock_gettime");
		ASSERT_UEQ(off, 2);
	}

	/* Demangling leaves C names alone. */
	char buf[128];
	ASSERT_STREQ(vp_demangle("memcpy", buf, sizeof(buf)), "memcpy");
	ASSERT_STREQ(vp_demangle("_ZN3foo3barEv", buf, sizeof(buf)), "foo::bar()");

	vp_elfsym__free(c);
	vp_elfsym__free(c2);
	unlink(p);
	snprintf(p, sizeof(p), "%s/.build-id/%.2s", tmp, bid);
	rmdir(p);
	snprintf(p, sizeof(p), "%s/.build-id", tmp);
	rmdir(p);
	rmdir(tmp);
	return 0;
}
