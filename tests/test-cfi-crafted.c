/* recorder/cfi on crafted CFI: root builds unwind tables from files that users write, and
 * libdw sizes each frame's register array by the highest register number a CFA program
 * names (DW_CFA_remember_state copies the array). A file must not make the builder
 * allocate in proportion to a number it states: every case below runs in its own child,
 * whose peak RSS must stay under 256 MB, and whose table must have no CFI at all (the
 * file's CFI is refused as a whole, as if it had none).
 *   - crafted-regs.elf: the 1.3 KB file fuzz-cfi found (libdw asked for 1.5 GB);
 *   - small ELF files made here, one bad thing each: a register number of 100 million in
 *     an FDE, in a CIE's initial instructions, in DW_CFA_restore_extended; in
 *     .debug_frame; in an .eh_frame found only through PT_GNU_EH_FRAME (no section
 *     headers); remember_state nested 65 deep; a return-address register of 1000; an
 *     unknown opcode; a truncated operand; and an FDE with a register of 100 million
 *     hidden after .eh_frame's terminator, where .eh_frame_hdr's search table points
 *     (libdw used to follow the table: now it reads only the checked entries);
 *   - the same generator's well-formed file gets its rules (the checks refuse only what
 *     is bad).
 * Usage: test-cfi-crafted (the fixture path is compiled in). */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"
#include "recorder/cfi.h"

#define RSS_LIMIT_KB (256 * 1024)
#define TEXT 0x100u     /* .text: vaddr = file offset (one PT_LOAD from 0) */
#define TEXT_SIZE 0x40u

struct buf {
	uint8_t b[4096];
	size_t n;
};

static void put(struct buf *b, const void *p, size_t n)
{
	if (b->n + n > sizeof(b->b))
		FAIL("generator: image over %zu bytes", sizeof(b->b));
	memcpy(b->b + b->n, p, n);
	b->n += n;
}
static void put8(struct buf *b, uint8_t v) { put(b, &v, 1); }
static void put32(struct buf *b, uint32_t v) { put(b, &v, 4); }
static void put64(struct buf *b, uint64_t v) { put(b, &v, 8); }
static void uleb(struct buf *b, uint64_t v)
{
	do {
		uint8_t c = v & 0x7f;
		v >>= 7;
		put8(b, c | (v ? 0x80 : 0));
	} while (v);
}
static void align(struct buf *b, size_t a, uint8_t fill)
{
	while (b->n % a)
		put8(b, fill);
}
static void set32(struct buf *b, size_t at, uint32_t v) { memcpy(b->b + at, &v, 4); }

/* One case's CFA programs (bytes, as DW_CFA_* opcodes and operands). */
struct prog {
	uint8_t b[256];
	size_t n;
};
static void op(struct prog *p, uint8_t v)
{
	if (p->n >= sizeof(p->b))
		FAIL("generator: program over %zu bytes", sizeof(p->b));
	p->b[p->n++] = v;
}
static void op_uleb(struct prog *p, uint64_t v)
{
	do {
		uint8_t c = v & 0x7f;
		v >>= 7;
		op(p, c | (v ? 0x80 : 0));
	} while (v);
}

enum { WITH_EH = 1, WITH_DBG = 2, NO_SHDR = 4 };

struct spec {
	const char *name;
	int flags;
	uint64_t ra;             /* the CIEs' return-address register */
	struct prog cie, fde;    /* appended to a sane CIE (CFA rsp+8, ra at CFA-8) and FDE */
	bool bad;                /* the file's CFI must be refused */
	struct prog hidden;      /* an FDE after .eh_frame's terminator, which the
				  * .eh_frame_hdr search table names for .text (libdw used to
				  * follow the table there) */
};

static size_t hidden_fde;        /* its offset in .eh_frame */

/* .eh_frame: CIE "zR" (FDE addresses pcrel|sdata4), one FDE over .text, a terminator. */
static void eh_frame(struct buf *b, const struct spec *s)
{
	size_t cie = b->n;
	put32(b, 0);
	put32(b, 0);                         /* CIE id */
	put8(b, 3);                          /* version 3: the RA register is a ULEB128 */
	put(b, "zR", 3);
	uleb(b, 1);                          /* code alignment */
	put8(b, 0x78);                       /* data alignment -8 */
	uleb(b, s->ra);
	uleb(b, 1);                          /* augmentation data: */
	put8(b, 0x1b);                       /* pcrel | sdata4 */
	put(b, "\x0c\x07\x08\x90\x01", 5);   /* def_cfa rsp+8; offset r16 at cfa-8 */
	put(b, s->cie.b, s->cie.n);
	align(b, 4, 0);
	set32(b, cie, (uint32_t)(b->n - cie - 4));
	size_t fde = b->n;
	put32(b, 0);
	put32(b, (uint32_t)(b->n - cie));    /* CIE pointer: back to the CIE */
	put32(b, (uint32_t)(TEXT - b->n));   /* pc_begin, pcrel */
	put32(b, TEXT_SIZE);
	uleb(b, 0);                          /* no augmentation data */
	put(b, "\x41\x0e\x10", 3);           /* advance 1; def_cfa_offset 16 */
	put(b, s->fde.b, s->fde.n);
	align(b, 4, 0);
	set32(b, fde, (uint32_t)(b->n - fde - 4));
	put32(b, 0);                         /* terminator */
	hidden_fde = 0;
	if (s->hidden.n) {
		hidden_fde = b->n - cie;
		put32(b, 0);
		put32(b, (uint32_t)(b->n - cie));
		put32(b, (uint32_t)(TEXT - b->n));
		put32(b, TEXT_SIZE);
		uleb(b, 0);
		put(b, s->hidden.b, s->hidden.n);
		align(b, 4, 0);
		set32(b, cie + hidden_fde, (uint32_t)(b->n - (cie + hidden_fde) - 4));
	}
}

/* .debug_frame: the same in DWARF's own form (CIE id ~0, CIE pointer = offset, 8-byte
 * addresses). */
static void debug_frame(struct buf *b, const struct spec *s)
{
	size_t base = b->n, cie = b->n;
	put32(b, 0);
	put32(b, 0xffffffff);
	put8(b, 3);
	put8(b, 0);                          /* no augmentation */
	uleb(b, 1);
	put8(b, 0x78);
	uleb(b, s->ra);
	put(b, "\x0c\x07\x08\x90\x01", 5);
	put(b, s->cie.b, s->cie.n);
	align(b, 4, 0);
	set32(b, cie, (uint32_t)(b->n - cie - 4));
	size_t fde = b->n;
	put32(b, 0);
	put32(b, (uint32_t)(cie - base));
	put64(b, TEXT);
	put64(b, TEXT_SIZE);
	put(b, "\x41\x0e\x10", 3);
	put(b, s->fde.b, s->fde.n);
	align(b, 4, 0);
	set32(b, fde, (uint32_t)(b->n - fde - 4));
}

/* An x86-64 ELF file: one RX PT_LOAD over the whole file (vaddr = offset), .text of
 * TEXT_SIZE bytes at TEXT, .eh_frame with its .eh_frame_hdr (PT_GNU_EH_FRAME) and/or
 * .debug_frame, and section headers unless NO_SHDR. */
static void make_elf(const char *path, const struct spec *s)
{
	struct buf *b = calloc(1, sizeof(*b));
	ASSERT_NOT_NULL(b);
	Elf64_Ehdr eh = { .e_type = ET_DYN, .e_machine = EM_X86_64, .e_version = EV_CURRENT,
			  .e_phoff = sizeof(Elf64_Ehdr), .e_ehsize = sizeof(Elf64_Ehdr),
			  .e_phentsize = sizeof(Elf64_Phdr), .e_phnum = 2, .e_shentsize = sizeof(Elf64_Shdr) };
	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_ident[EI_VERSION] = EV_CURRENT;
	put(b, &eh, sizeof(eh));
	put(b, (Elf64_Phdr[2]){ 0 }, 2 * sizeof(Elf64_Phdr));
	while (b->n < TEXT)
		put8(b, 0);
	for (unsigned i = 0; i < TEXT_SIZE; i++)
		put8(b, 0x90);
	/* .eh_frame_hdr: version 1, eh_frame_ptr pcrel|sdata4, count udata4, table datarel|sdata4. */
	size_t hdr = b->n, hdr_ptr = 0, ehf = 0, ehf_end = 0, dbg = 0, dbg_end = 0;
	if (s->flags & WITH_EH) {
		put(b, "\x01\x1b\x03\x3b", 4);
		hdr_ptr = b->n;
		put32(b, 0);
		put32(b, 1);
		put32(b, (uint32_t)(TEXT - hdr));
		put32(b, 0);                 /* the FDE's address, below */
		align(b, 8, 0);
		ehf = b->n;
		eh_frame(b, s);
		ehf_end = b->n;
		set32(b, hdr_ptr, (uint32_t)(ehf - hdr_ptr));
		/* The FDE follows the CIE: its offset is the CIE's length field + 4. */
		uint32_t cielen;
		memcpy(&cielen, b->b + ehf, 4);
		set32(b, hdr + 16, (uint32_t)(ehf + (hidden_fde ? hidden_fde : 4 + cielen) - hdr));
	}
	if (s->flags & WITH_DBG) {
		align(b, 8, 0);
		dbg = b->n;
		debug_frame(b, s);
		dbg_end = b->n;
	}
	const char names[] = "\0.text\0.eh_frame_hdr\0.eh_frame\0.debug_frame\0.shstrtab";
	size_t strtab = b->n;
	put(b, names, sizeof(names));
	align(b, 8, 0);
	size_t sh = b->n;
	Elf64_Shdr shdrs[6] = { { 0 } };
	int n = 1;
	shdrs[n++] = (Elf64_Shdr){ .sh_name = 1, .sh_type = SHT_PROGBITS, .sh_flags = SHF_ALLOC | SHF_EXECINSTR,
				   .sh_addr = TEXT, .sh_offset = TEXT, .sh_size = TEXT_SIZE, .sh_addralign = 16 };
	if (s->flags & WITH_EH) {
		shdrs[n++] = (Elf64_Shdr){ .sh_name = 7, .sh_type = SHT_PROGBITS, .sh_flags = SHF_ALLOC, .sh_addr = hdr,
					   .sh_offset = hdr, .sh_size = ehf - hdr, .sh_addralign = 4 };
		shdrs[n++] = (Elf64_Shdr){ .sh_name = 21, .sh_type = SHT_PROGBITS, .sh_flags = SHF_ALLOC, .sh_addr = ehf,
					   .sh_offset = ehf, .sh_size = ehf_end - ehf, .sh_addralign = 8 };
	}
	if (s->flags & WITH_DBG)
		shdrs[n++] = (Elf64_Shdr){ .sh_name = 31, .sh_type = SHT_PROGBITS, .sh_offset = dbg,
					   .sh_size = dbg_end - dbg, .sh_addralign = 8 };
	int shstr = n;
	shdrs[n++] = (Elf64_Shdr){ .sh_name = 44, .sh_type = SHT_STRTAB, .sh_offset = strtab,
				   .sh_size = sizeof(names), .sh_addralign = 1 };
	put(b, shdrs, (size_t)n * sizeof(Elf64_Shdr));
	Elf64_Ehdr *e = (Elf64_Ehdr *)b->b;
	if (!(s->flags & NO_SHDR)) {
		e->e_shoff = sh;
		e->e_shnum = (uint16_t)n;
		e->e_shstrndx = (uint16_t)shstr;
	}
	Elf64_Phdr *ph = (Elf64_Phdr *)(b->b + sizeof(Elf64_Ehdr));
	ph[0] = (Elf64_Phdr){ .p_type = PT_LOAD, .p_flags = PF_R | PF_X, .p_filesz = b->n, .p_memsz = b->n,
			      .p_align = 0x1000 };
	if (s->flags & WITH_EH)
		ph[1] = (Elf64_Phdr){ .p_type = PT_GNU_EH_FRAME, .p_flags = PF_R, .p_offset = hdr, .p_vaddr = hdr,
				      .p_paddr = hdr, .p_filesz = ehf - hdr, .p_memsz = ehf - hdr, .p_align = 4 };
	else
		ph[1] = (Elf64_Phdr){ .p_type = PT_GNU_STACK, .p_flags = PF_R | PF_W };
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, b->b, b->n) != (ssize_t)b->n || close(fd))
		FAIL("write %s: %s", path, strerror(errno));
	free(b);
}

/* Builds path's table in a child; returns after checking what the child saw. */
static void build_in_child(const char *path, const char *what, bool bad)
{
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0)
		FAIL("fork: %s", strerror(errno));
	if (pid == 0) {
		char err[256] = "";
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			FAIL("open %s: %s", path, strerror(errno));
		struct vp_cfi *t = vp_cfi__build(fd, err, sizeof(err));
		close(fd);
		struct rusage ru;
		getrusage(RUSAGE_SELF, &ru);
		printf("%s: peak RSS %ld MB\n", what, ru.ru_maxrss / 1024);
		if (ru.ru_maxrss > RSS_LIMIT_KB)
			FAIL("%s: building the table took %ld MB (limit %d MB)", what, ru.ru_maxrss / 1024,
			     RSS_LIMIT_KB / 1024);
		if (!t)
			FAIL("%s: no table (%s): a file with bad CFI is a file without CFI, not an error", what, err);
		size_t n;
		const struct vpb_rule *r = vp_cfi__rules(t, &n);
		const struct vpb_rule *at = vp_cfi__find(t, vp_cfi__base(t) + TEXT + 1);
		printf("%s: source %s, %zu rules\n", what, vp_cfi__source(t), n);
		const char *why = vp_cfi__refused(t);
		printf("%s: refused: %s\n", what, why ? why : "no");
		if (bad) {
			/* Refused as a whole: no rule from it, and it says so. */
			ASSERT_NOT_NULL(why);
			ASSERT_STREQ(vp_cfi__source(t), "none");
			for (size_t i = 0; i < n; i++)
				ASSERT_EQ(r[i].kind, VPB_RULE_NONE);
		} else {
			ASSERT_NULL(why);
			/* After "advance 1; def_cfa_offset 16": CFA = rsp + 16. */
			ASSERT_NOT_NULL(at);
			ASSERT_EQ(at->kind, VPB_RULE_SP);
			ASSERT_EQ(at->cfa_off, 2);
		}
		vp_cfi__free(t);
		fflush(stdout);
		_exit(0);
	}
	int st;
	if (waitpid(pid, &st, 0) != pid)
		FAIL("waitpid: %s", strerror(errno));
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		FAIL("%s: the child %s %d", what, WIFEXITED(st) ? "exited" : "was killed by signal",
		     WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
}

#define BIG_REG 100000000ull    /* 1.6 GB of libdw's 16-byte register slots */

int main(void)
{
	char dir[] = "/tmp/test-cfi-crafted-XXXXXX", path[600];

	setvbuf(stdout, NULL, _IONBF, 0);
	if (!mkdtemp(dir))
		FAIL("mkdtemp: %s", strerror(errno));
	build_in_child(CFI_CRAFTED_REGS, "crafted-regs.elf (fuzz-cfi)", true);

	static struct spec specs[20];
	int ns = 0;
	specs[ns++] = (struct spec){ "well-formed .eh_frame", WITH_EH, 16 };
	specs[ns++] = (struct spec){ "well-formed .debug_frame", WITH_DBG, 16 };
	specs[ns++] = (struct spec){ "well-formed, no section headers", WITH_EH | NO_SHDR, 16 };
	struct spec *s;
	s = &specs[ns++], *s = (struct spec){ "FDE: undefined r100000000", WITH_EH, 16, .bad = true };
	op(&s->fde, 0x07), op_uleb(&s->fde, BIG_REG);
	s = &specs[ns++], *s = (struct spec){ "CIE: same_value r100000000", WITH_EH, 16, .bad = true };
	op(&s->cie, 0x08), op_uleb(&s->cie, BIG_REG);
	s = &specs[ns++], *s = (struct spec){ "FDE: restore_extended r100000000", WITH_EH, 16, .bad = true };
	op(&s->fde, 0x06), op_uleb(&s->fde, BIG_REG);
	s = &specs[ns++], *s = (struct spec){ ".debug_frame FDE: offset_extended r100000000", WITH_DBG, 16, .bad = true };
	op(&s->fde, 0x05), op_uleb(&s->fde, BIG_REG), op_uleb(&s->fde, 1);
	s = &specs[ns++], *s = (struct spec){ "no section headers, FDE: val_offset r100000000", WITH_EH | NO_SHDR, 16,
					       .bad = true };
	op(&s->fde, 0x14), op_uleb(&s->fde, BIG_REG), op_uleb(&s->fde, 1);
	/* Not refused, and harmless: libdw reads the checked copy in order, never the table. */
	s = &specs[ns++], *s = (struct spec){ "hidden FDE (undefined r100000000) named by .eh_frame_hdr", WITH_EH, 16 };
	op(&s->hidden, 0x07), op_uleb(&s->hidden, BIG_REG);
	s = &specs[ns++], *s = (struct spec){ "no section headers, hidden FDE named by .eh_frame_hdr", WITH_EH | NO_SHDR,
					       16 };
	op(&s->hidden, 0x07), op_uleb(&s->hidden, BIG_REG);
	s = &specs[ns++], *s = (struct spec){ "FDE: r200000 then remember_state x 65", WITH_EH, 16, .bad = true };
	op(&s->fde, 0x07), op_uleb(&s->fde, 200000);
	for (int i = 0; i < 65; i++)
		op(&s->fde, 0x0a);
	s = &specs[ns++], *s = (struct spec){ "FDE: remember_state nested 65 deep", WITH_EH, 16, .bad = true };
	for (int i = 0; i < 65; i++)
		op(&s->fde, 0x0a);
	s = &specs[ns++], *s = (struct spec){ "CIE: return-address register 1000", WITH_EH, 1000, .bad = true };
	s = &specs[ns++], *s = (struct spec){ "FDE: unknown opcode 0x20", WITH_EH, 16, .bad = true };
	op(&s->fde, 0x20);
	s = &specs[ns++], *s = (struct spec){ "FDE: def_cfa with its offset cut off", WITH_EH, 16, .bad = true };
	/* Four bytes: the FDE needs no padding, whose zeros would end the ULEB128. */
	op(&s->fde, 0x0c), op(&s->fde, 0x07), op(&s->fde, 0x80), op(&s->fde, 0x80);
	for (int i = 0; i < ns; i++) {
		snprintf(path, sizeof(path), "%s/case%d", dir, i);
		make_elf(path, &specs[i]);
		build_in_child(path, specs[i].name, specs[i].bad);
		unlink(path);
	}
	rmdir(dir);
	printf("ok\n");
	return 0;
}
