/* libviprof-counters.so exports the vp_counters__ API and nothing else of ours: every
 * defined global function or object in its .dynsym starts with "vp_counters__"
 * (besides the linker's _init/_fini). argv[1] is the library. */
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>

#include "test.h"

static const char *const api[] = { "vp_counters__open", "vp_counters__count", "vp_counters__name",
	"vp_counters__start", "vp_counters__read", "vp_counters__stop", "vp_counters__used_rdpmc",
	"vp_counters__close", "vp_counters__stolen", "vp_counters__read_corrected",
	"vp_counters__stolen_why", "vp_counters__overflow", "vp_counters__open_group" };
#define NAPI (int)(sizeof(api) / sizeof(api[0]))

int main(int argc, char **argv)
{
	int found[NAPI] = { 0 }, fd, checked = 0;
	Elf_Scn *scn = NULL;
	Elf *elf;

	if (argc < 2)
		FAIL("usage: test-counters-exports libviprof-counters.so");
	elf_version(EV_CURRENT);
	fd = open(argv[1], O_RDONLY);
	ASSERT_GE(fd, 0);
	elf = elf_begin(fd, ELF_C_READ, NULL);
	ASSERT_NOT_NULL(elf);
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		gelf_getshdr(scn, &sh);
		if (sh.sh_type != SHT_DYNSYM)
			continue;
		d = elf_getdata(scn, NULL);
		ASSERT_NOT_NULL(d);
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym s;
			const char *name;

			gelf_getsym(d, (int)i, &s);
			name = elf_strptr(elf, sh.sh_link, s.st_name);
			if (s.st_shndx == SHN_UNDEF || GELF_ST_BIND(s.st_info) == STB_LOCAL || !name || !*name)
				continue;
			if (!strcmp(name, "_init") || !strcmp(name, "_fini"))
				continue;
			checked++;
			if (strncmp(name, "vp_counters__", 13))
				FAIL("%s exports '%s', which is not part of counters.h", argv[1], name);
			for (int k = 0; k < NAPI; k++)
				if (!strcmp(name, api[k]))
					found[k] = 1;
		}
	}
	for (int k = 0; k < NAPI; k++)
		if (!found[k])
			FAIL("%s does not export %s", argv[1], api[k]);
	ASSERT_EQ(checked, NAPI);
	elf_end(elf);
	close(fd);
	printf("test-counters-exports: ok (%d symbols)\n", checked);
	return 0;
}
