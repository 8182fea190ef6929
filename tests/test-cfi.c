/* recorder/cfi: unwind rules from .eh_frame/.debug_frame, checked against two oracles that
 * do not share code with libdw:
 *   - the fixtures' own instructions (objdump): a small simulator follows each
 *     prologue (push, sub rsp, mov rsp->rbp) and says what the CFA and the saved rbp
 *     must be at every instruction it passes;
 *   - binutils' CFI reader (readelf --debug-dump=frames-interp): for every row of every
 *     FDE of libz, libc and the fixtures, the rule at the row's first and last byte must
 *     say the same CFA register and offset, rbp slot and return-address state; PLT rows
 *     must carry the threshold the PLT entry's bytes imply; bytes no FDE covers must be
 *     VPB_RULE_NONE.
 * Then hostile input (truncated, corrupted, empty, not ELF) and, for the record, how long
 * building takes for libz, libc and libjvm.so (printed, not asserted).
 * Usage: test-cfi (fixture paths are compiled in). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "test.h"
#include "test-run.h"
#include "recorder/cfi.h"

#define LIBZ "/lib/x86_64-linux-gnu/libz.so.1"
#define LIBC "/lib/x86_64-linux-gnu/libc.so.6"
#ifndef LIBJVM
#define LIBJVM "/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so"
#endif

static const char *kind_name(int k)
{
	static const char *names[] = { "NONE", "SP", "FP", "PLT", "END" };

	return k >= 0 && k <= VPB_RULE_END ? names[k] : "?";
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static struct vp_cfi *build_path(const char *path, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		FAIL("open %s: %s", path, strerror(errno));
	struct vp_cfi *t = vp_cfi__build(fd, err, errlen);
	int saved = errno;

	close(fd);
	errno = saved;
	return t;
}

/* What every table must be, whatever the input: sorted, merged, known kinds, and
 * vp_cfi__find agreeing with the array. */
static void check_table(const struct vp_cfi *t, const char *what)
{
	size_t n;
	const struct vpb_rule *r = vp_cfi__rules(t, &n);

	if (n == 0)
		FAIL("%s: empty table", what);
	for (size_t i = 0; i < n; i++) {
		if (r[i].kind > VPB_RULE_END)
			FAIL("%s: rule %zu has kind %d", what, i, r[i].kind);
		if (i && r[i].pc <= r[i - 1].pc)
			FAIL("%s: rule %zu pc %#x after %#x", what, i, r[i].pc, r[i - 1].pc);
		if (i && r[i].kind == r[i - 1].kind && r[i].cfa_off == r[i - 1].cfa_off &&
		    r[i].fp_off == r[i - 1].fp_off)
			FAIL("%s: rules %zu and %zu are equal and not merged", what, i - 1, i);
		if (vp_cfi__find(t, vp_cfi__base(t) + r[i].pc) != &r[i])
			FAIL("%s: find(pc of rule %zu) is another rule", what, i);
	}
	if (r[n - 1].kind != VPB_RULE_NONE)
		FAIL("%s: last rule is %s, not the NONE that ends the text", what, kind_name(r[n - 1].kind));
}

/* --- ELF facts for the oracles, with libelf ------------------------------------ */

struct elfinfo {
	uint8_t *map;                 /* the whole file */
	size_t size;
	struct { uint64_t lo, hi, off; } xseg[16];
	int nx;
	struct { char name[32]; uint64_t addr, size, off; } sec[128];
	int nsec;
	struct { char name[64]; uint64_t addr, size; } sym[64];
	int nsym;
};

static void read_file(const char *path, uint8_t **buf, size_t *size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;

	if (fd < 0 || fstat(fd, &st))
		FAIL("open %s: %s", path, strerror(errno));
	*size = (size_t)st.st_size;
	*buf = malloc(*size + 1);
	ASSERT_NOT_NULL(*buf);
	for (size_t got = 0; got < *size;) {
		ssize_t k = read(fd, *buf + got, *size - got);

		if (k <= 0)
			FAIL("read %s: %s", path, k ? strerror(errno) : "short file");
		got += (size_t)k;
	}
	close(fd);
}

static void elfinfo_load(struct elfinfo *ei, const char *path)
{
	memset(ei, 0, sizeof(*ei));
	read_file(path, &ei->map, &ei->size);
	elf_version(EV_CURRENT);
	Elf *e = elf_memory((char *)ei->map, ei->size);
	size_t nph, shstr;

	if (!e || elf_getphdrnum(e, &nph) || elf_getshdrstrndx(e, &shstr))
		FAIL("%s: libelf cannot read it", path);
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD && (ph.p_flags & PF_X) && ei->nx < 16) {
			ei->xseg[ei->nx].lo = ph.p_vaddr;
			ei->xseg[ei->nx].off = ph.p_offset;
			ei->xseg[ei->nx++].hi = ph.p_vaddr + ph.p_memsz;
		}
	}
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		const char *name;

		if (!gelf_getshdr(scn, &sh) || !(name = elf_strptr(e, shstr, sh.sh_name)))
			continue;
		if (ei->nsec < 128 && strlen(name) < 32) {
			strcpy(ei->sec[ei->nsec].name, name);
			ei->sec[ei->nsec].addr = sh.sh_addr;
			ei->sec[ei->nsec].size = sh.sh_size;
			ei->sec[ei->nsec++].off = sh.sh_offset;
		}
		if (sh.sh_type != SHT_SYMTAB || !sh.sh_entsize)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym s;
			const char *sn;

			if (!gelf_getsym(d, (int)i, &s) || GELF_ST_TYPE(s.st_info) != STT_FUNC ||
			    !(sn = elf_strptr(e, sh.sh_link, s.st_name)) || strncmp(sn, "fx_", 3) || ei->nsym == 64)
				continue;
			snprintf(ei->sym[ei->nsym].name, sizeof(ei->sym[0].name), "%s", sn);
			ei->sym[ei->nsym].addr = s.st_value;
			ei->sym[ei->nsym++].size = s.st_size;
		}
	}
	elf_end(e);
}

static const char *section_of(const struct elfinfo *ei, uint64_t vaddr, uint64_t *fileoff)
{
	for (int i = 0; i < ei->nsec; i++)
		if (ei->sec[i].addr && vaddr >= ei->sec[i].addr && vaddr < ei->sec[i].addr + ei->sec[i].size) {
			if (fileoff)
				*fileoff = ei->sec[i].off + (vaddr - ei->sec[i].addr);
			return ei->sec[i].name;
		}
	return "";
}

static uint64_t sym_addr(const struct elfinfo *ei, const char *name)
{
	for (int i = 0; i < ei->nsym; i++)
		if (!strcmp(ei->sym[i].name, name))
			return ei->sym[i].addr;
	FAIL("no symbol %s in the fixture", name);
}

/* --- oracle 1: the prologue's instructions --------------------------------------- */

static void expect_at(const struct vp_cfi *t, uint64_t addr, int kind, int cfa_off, int fp_off,
		      const char *what)
{
	const struct vpb_rule *r = vp_cfi__find(t, addr);

	if (!r)
		FAIL("%s at %#" PRIx64 ": no rule", what, addr);
	if (r->kind != kind || r->cfa_off != cfa_off || r->fp_off != fp_off)
		FAIL("%s at %#" PRIx64 ": rule %s cfa_off %d fp_off %d, instructions say %s %d %d", what, addr,
		     kind_name(r->kind), r->cfa_off, r->fp_off, kind_name(kind), cfa_off, fp_off);
}

/* Follows func's instructions from its entry while the frame is being set up, checking
 * the rule at each instruction. The simulator knows push, sub $imm,%rsp, mov %rsp,%rbp
 * and instructions that leave rsp alone; it stops at the first branch, call, return or
 * pop, or at anything else that writes rsp while the CFA is still rsp-based. Returns
 * what it saw as flags, so callers can insist on the prologue they expect. */
#define SAW_PUSH_RBP 1
#define SAW_SUB_RSP  2
#define SAW_MOV_RBP  4
static int follow_prologue(const struct vp_cfi *t, const char *file, const char *func, int *checked)
{
	char cmd[1024], line[512];
	int kind = VPB_RULE_SP, off = 8, fpsave = 0, saw = 0;

	*checked = 0;
	snprintf(cmd, sizeof(cmd), "objdump -d --no-show-raw-insn --disassemble=%s '%s'", func, file);
	FILE *p = run_sh_file(cmd, NULL);
	bool done = false;
	while (fgets(line, sizeof(line), p)) {
		unsigned long long addr;
		char mn[32] = "", ops[128] = "";
		int pos = 0;

		if (done || sscanf(line, " %llx:%n", &addr, &pos) != 1 || pos == 0)
			continue;
		if (sscanf(line + pos, "%31s %127s", mn, ops) < 1)
			continue;
		char what[160];
		snprintf(what, sizeof(what), "%s:%s before '%s %s'", strrchr(file, '/') + 1, func, mn, ops);
		expect_at(t, addr, kind, off / 8, fpsave / 8, what);
		(*checked)++;
		if (mn[0] == 'j' || !strncmp(mn, "call", 4) || !strncmp(mn, "ret", 3) || !strncmp(mn, "pop", 3) ||
		    !strncmp(mn, "leave", 5)) {
			done = true;
		} else if (!strcmp(mn, "push")) {
			if (kind == VPB_RULE_SP)
				off += 8;
			if (!strcmp(ops, "%rbp")) {
				if (kind != VPB_RULE_SP)
					done = true;
				fpsave = -off;
				saw |= SAW_PUSH_RBP;
			}
		} else if (!strcmp(mn, "sub") && kind == VPB_RULE_SP && ops[0] == '$' && strstr(ops, ",%rsp")) {
			off += (int)strtol(ops + 1, NULL, 0);
			saw |= SAW_SUB_RSP;
		} else if (!strcmp(mn, "mov") && !strcmp(ops, "%rsp,%rbp")) {
			kind = VPB_RULE_FP;
			saw |= SAW_MOV_RBP;
		} else if (kind == VPB_RULE_SP && strstr(ops, "%rsp") &&
			   !strcmp(strstr(ops, "%rsp"), "%rsp") && strncmp(mn, "cmp", 3) && strncmp(mn, "test", 4)) {
			done = true;      /* writes rsp in a way the simulator does not follow */
		} else if (strstr(ops, ",%rbp") && !strcmp(strstr(ops, ",%rbp"), ",%rbp")) {
			done = true;      /* rbp now holds something else: stop before it matters */
		}
	}
	fclose(p);
	if (*checked == 0)
		FAIL("objdump printed no instructions of %s in %s", func, file);
	return saw;
}

static void test_prologues(const char *o2, const char *o0, const char *dbg)
{
	const char *files[3] = { o2, o0, dbg };
	const char *want_src[3] = { "eh_frame", "eh_frame", "eh_frame+debug_frame" };

	for (int f = 0; f < 3; f++) {
		char err[256] = "";
		struct vp_cfi *t = build_path(files[f], err, sizeof(err));
		struct elfinfo ei;
		int total = 0, n;

		if (!t)
			FAIL("%s: %s", files[f], err);
		check_table(t, files[f]);
		ASSERT_FALSE(vp_cfi__cut(t));
		ASSERT_STREQ(vp_cfi__source(t), want_src[f]);
		elfinfo_load(&ei, files[f]);
		/* Every function's first instruction: CFA = rsp + 8, rbp untouched. */
		const char *funcs[3] = { "fx_leaf", "fx_frame", "fx_vla" };
		for (int i = 0; i < 3; i++)
			expect_at(t, sym_addr(&ei, funcs[i]), VPB_RULE_SP, 1, VPB_FP_SAME, funcs[i]);
		for (int i = 0; i < 3; i++) {
			int saw = follow_prologue(t, files[f], funcs[i], &n);

			total += n;
			if (f == 1 && (saw & (SAW_PUSH_RBP | SAW_MOV_RBP)) != (SAW_PUSH_RBP | SAW_MOV_RBP))
				FAIL("%s: -O0 %s does not start with push rbp; mov rbp,rsp", files[f], funcs[i]);
			if (f != 1 && !strcmp(funcs[i], "fx_frame") && !(saw & SAW_SUB_RSP))
				FAIL("%s: -O2 fx_frame has no sub rsp in its prologue (the check needs one)", files[f]);
			if (f != 1 && !strcmp(funcs[i], "fx_vla") && !(saw & SAW_MOV_RBP))
				FAIL("%s: -O2 fx_vla does not set up rbp (the check needs it)", files[f]);
		}
		/* Spelled out on the -O0 build's fx_leaf: push rbp; mov rbp,rsp. (The -O2
		 * fx_frame's sub rsp and the loop after it were checked by the simulator.) */
		if (f == 1) {
			uint64_t a = sym_addr(&ei, "fx_leaf");

			expect_at(t, a + 1, VPB_RULE_SP, 2, -2, "after push rbp");
			expect_at(t, a + 4, VPB_RULE_FP, 2, -2, "after mov rbp,rsp");
		}
		/* The C runtime's _start: the return address is undefined, the walk's root. */
		Elf *e = elf_memory((char *)ei.map, ei.size);
		GElf_Ehdr eh;

		ASSERT_NOT_NULL(e);
		ASSERT_NOT_NULL(gelf_getehdr(e, &eh));
		elf_end(e);
		expect_at(t, eh.e_entry, VPB_RULE_END, 0, VPB_FP_SAME, "_start");
		printf("prologues: %s: %d instructions agree (source %s)\n", files[f], total, vp_cfi__source(t));
		free(ei.map);
		vp_cfi__free(t);
	}
}

/* --- oracle 2: binutils' reading of the whole CFI ---------------------------------- */

struct row {
	uint64_t loc;
	char cfa[24], rbp[16], ra[16];
};

struct fde {
	int sec;                /* 0 .eh_frame, 1 .debug_frame */
	uint64_t lo, hi;
	size_t first, n;        /* rows */
};

struct cie {
	int sec;
	unsigned long off;
	struct row init;
};

struct oracle {
	struct row *rows;
	size_t nrows, caprows;
	struct fde *fdes;
	size_t nfdes, capfdes;
	struct cie *cies;
	size_t ncies, capcies;
};

#define GROW(arr, n, cap) ASSERT_OK(vp_grow((void **)&(arr), &(cap), (n) + 1, sizeof(*(arr))))

static bool all_hex(const char *s, size_t len)
{
	if (strlen(s) != len)
		return false;
	for (; *s; s++)
		if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
			return false;
	return true;
}

static int cmp_fde(const void *a, const void *b)
{
	const struct fde *x = a, *y = b;

	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Parses readelf's interpreted frame tables: a header line per CIE/FDE, a column line
 * ("LOC CFA rbx rbp ... ra") and one line per row. An FDE whose instructions change
 * nothing prints no table: it has its CIE's initial row. */
static void oracle_load(struct oracle *o, const char *path)
{
	char cmd[1024], line[1024];

	memset(o, 0, sizeof(*o));
	snprintf(cmd, sizeof(cmd), "readelf --debug-dump=frames-interp '%s' 2>/dev/null", path);
	FILE *p = run_sh_file(cmd, NULL);
	int sec = -1, cur_cie = -1, ncols = 0, col_rbp = -1, col_ra = -1;
	struct fde *cur = NULL;
	while (fgets(line, sizeof(line), p)) {
		char *tok[40];
		int nt = 0;

		if (strstr(line, "Contents of the .eh_frame section"))
			sec = 0, cur = NULL, cur_cie = -1;
		else if (strstr(line, "Contents of the .debug_frame section"))
			sec = 1, cur = NULL, cur_cie = -1;
		/* A register rule prints as "r9 (r9)": the parenthesised name is not a column. */
		for (char *s = strtok(line, " \t\n"); s && nt < 40; s = strtok(NULL, " \t\n"))
			if (s[0] != '(' || nt == 0)
				tok[nt++] = s;
		if (nt == 0 || sec < 0)
			continue;
		if (nt >= 4 && all_hex(tok[0], 8) && (!strcmp(tok[3], "CIE") || !strcmp(tok[3], "FDE"))) {
			cur = NULL;
			cur_cie = -1;
			ncols = 0;
			if (!strcmp(tok[3], "CIE")) {
				GROW(o->cies, o->ncies, o->capcies);
				o->cies[o->ncies] = (struct cie){ .sec = sec, .off = strtoul(tok[0], NULL, 16) };
				cur_cie = (int)o->ncies++;
				continue;
			}
			unsigned long cieoff = ~0ul;
			unsigned long long lo = 0, hi = 0;
			for (int i = 4; i < nt; i++) {
				if (!strncmp(tok[i], "cie=", 4))
					cieoff = strtoul(tok[i] + 4, NULL, 16);
				else if (!strncmp(tok[i], "pc=", 3) && sscanf(tok[i] + 3, "%llx..%llx", &lo, &hi) != 2)
					FAIL("readelf: cannot parse %s", tok[i]);
			}
			GROW(o->fdes, o->nfdes, o->capfdes);
			cur = &o->fdes[o->nfdes++];
			*cur = (struct fde){ .sec = sec, .lo = lo, .hi = hi, .first = o->nrows };
			/* Until the FDE prints rows of its own, it has its CIE's. */
			for (size_t i = 0; i < o->ncies; i++)
				if (o->cies[i].sec == sec && o->cies[i].off == cieoff) {
					GROW(o->rows, o->nrows, o->caprows);
					o->rows[o->nrows] = o->cies[i].init;
					o->rows[o->nrows++].loc = lo;
					cur->n = 1;
				}
			if (!cur->n)
				FAIL("readelf: FDE pc=%llx names CIE %lx, not seen", lo, cieoff);
			continue;
		}
		if (!strcmp(tok[0], "LOC") && nt >= 2 && !strcmp(tok[1], "CFA")) {
			ncols = nt;
			col_rbp = col_ra = -1;
			for (int i = 2; i < nt; i++) {
				if (!strcmp(tok[i], "rbp"))
					col_rbp = i;
				if (!strcmp(tok[i], "ra"))
					col_ra = i;
			}
			if (cur && cur->n == 1 && o->nrows == cur->first + 1)
				o->nrows--, cur->n = 0;   /* it has a table: drop the CIE's row */
			continue;
		}
		if (all_hex(tok[0], 16) && ncols && nt == ncols) {
			struct row r = { .loc = strtoull(tok[0], NULL, 16) };

			snprintf(r.cfa, sizeof(r.cfa), "%s", tok[1]);
			snprintf(r.rbp, sizeof(r.rbp), "%s", col_rbp > 0 ? tok[col_rbp] : "");
			snprintf(r.ra, sizeof(r.ra), "%s", col_ra > 0 ? tok[col_ra] : "");
			if (cur_cie >= 0) {
				o->cies[cur_cie].init = r;
			} else if (cur) {
				GROW(o->rows, o->nrows, o->caprows);
				o->rows[o->nrows++] = r;
				cur->n++;
			}
		}
	}
	/* readelf exits 1 after warnings about a separate debug file it found (libc's has a
	 * NOBITS .eh_frame); the frames it printed are the file's own, so only an empty
	 * result counts as failure (the caller checks). */
	fclose(p);
	qsort(o->fdes, o->nfdes, sizeof(*o->fdes), cmp_fde);
}

/* Parses "rsp+16", "rbp-8", "c-16": the register part into reg (may be empty) and the
 * signed number after it. false when there is no number. */
static bool reg_plus(const char *s, char *reg, size_t reglen, long *num)
{
	size_t i = 0;

	while (s[i] && s[i] != '+' && s[i] != '-')
		i++;
	if (!s[i] || i >= reglen)
		return false;
	memcpy(reg, s, i);
	reg[i] = 0;
	char *end;
	*num = strtol(s + i, &end, 10);
	return *end == 0;
}

struct counts {
	size_t rows, checked, plt, skipped_exp, none_expected, end, gaps, debug_shadowed;
};

/* The rule readelf's row implies; false when readelf prints an expression we cannot
 * judge (counted by the caller). PLT rows are judged from the PLT entry's bytes. */
static bool expected_rule(const struct elfinfo *ei, const struct row *r, uint64_t lo, uint64_t hi,
			  struct vpb_rule *want, struct counts *c)
{
	char reg[16];
	long num;

	*want = (struct vpb_rule){ .kind = VPB_RULE_NONE };
	if (!strcmp(r->ra, "u")) {
		want->kind = VPB_RULE_END;
		c->end++;
		return true;
	}
	if (strcmp(r->ra, "c-8")) {
		c->none_expected++;
		return true;
	}
	if (!strcmp(r->cfa, "exp")) {
		uint64_t off;
		const char *s = section_of(ei, lo, NULL);

		if (strncmp(s, ".plt", 4)) {
			c->skipped_exp++;
			return false;
		}
		/* The expression is per 16-byte entry; decode the first whole entry in the row:
		 * `jmp *GOT(%rip)` (ff 25, 6 bytes) or endbr64 (4 bytes), then `push $index`
		 * (68, 5 bytes). The CFA grows by 8 from the byte after the push. */
		uint64_t ent = (lo + 15) & ~(uint64_t)15;
		if (ent + 16 > hi || !*section_of(ei, ent, &off) || off + 16 > ei->size)
			FAIL("PLT row %#" PRIx64 "..%#" PRIx64 " has no whole entry", lo, hi);
		const uint8_t *b = ei->map + off;
		int push = b[0] == 0xff && b[1] == 0x25 ? 6 : b[0] == 0xf3 && b[1] == 0x0f && b[2] == 0x1e && b[3] == 0xfa ? 4 : -1;
		if (push < 0 || b[push] != 0x68)
			FAIL("PLT entry at %#" PRIx64 ": unknown layout %02x %02x %02x %02x", ent, b[0], b[1], b[2], b[3]);
		want->kind = VPB_RULE_PLT;
		/* ld's expression for the IBT layout says 10, one byte after the push ends
		 * (at the bnd prefix of the jmp); the rule carries what the CFI says. */
		want->cfa_off = (int16_t)(push == 4 ? 10 : push + 5);
		want->fp_off = VPB_FP_SAME;
		c->plt++;
		return true;
	}
	if (!reg_plus(r->cfa, reg, sizeof(reg), &num) || (strcmp(reg, "rsp") && strcmp(reg, "rbp")) || num % 8) {
		c->none_expected++;
		return true;
	}
	want->kind = !strcmp(reg, "rsp") ? VPB_RULE_SP : VPB_RULE_FP;
	want->cfa_off = (int16_t)(num / 8);
	if (!r->rbp[0] || !strcmp(r->rbp, "u") || !strcmp(r->rbp, "s")) {
		want->fp_off = VPB_FP_SAME;
	} else if (reg_plus(r->rbp, reg, sizeof(reg), &num) && !strcmp(reg, "c") && num % 8 == 0 && num) {
		want->fp_off = (int8_t)(num / 8);
	} else {
		*want = (struct vpb_rule){ .kind = VPB_RULE_NONE };
		c->none_expected++;
	}
	return true;
}

static void expect_rule(const struct vp_cfi *t, uint64_t addr, const struct vpb_rule *want,
			const struct row *r, const char *file)
{
	const struct vpb_rule *got = vp_cfi__find(t, addr);

	if (!got)
		FAIL("%s %#" PRIx64 ": no rule (readelf: CFA %s rbp %s ra %s)", file, addr, r->cfa, r->rbp, r->ra);
	bool same = got->kind == want->kind;
	if (same && want->kind != VPB_RULE_NONE && want->kind != VPB_RULE_END)
		same = got->cfa_off == want->cfa_off && got->fp_off == want->fp_off;
	if (!same)
		FAIL("%s %#" PRIx64 ": rule %s cfa_off %d fp_off %d; readelf says CFA %s rbp '%s' ra %s (%s %d %d)",
		     file, addr, kind_name(got->kind), got->cfa_off, got->fp_off, r->cfa, r->rbp, r->ra,
		     kind_name(want->kind), want->cfa_off, want->fp_off);
}

static void agree_with_readelf(const char *path, bool print_time)
{
	struct oracle o;
	struct elfinfo ei;
	struct counts c = { 0 };
	char err[256] = "";

	oracle_load(&o, path);
	elfinfo_load(&ei, path);
	if (o.nfdes == 0)
		FAIL("readelf found no FDE in %s", path);
	double t0 = now_ms();
	struct vp_cfi *t = build_path(path, err, sizeof(err));
	double ms = now_ms() - t0;
	if (!t)
		FAIL("%s: %s", path, err);
	check_table(t, path);

	for (size_t i = 0; i < o.nfdes; i++) {
		const struct fde *f = &o.fdes[i];

		/* .eh_frame wins where both describe an address. */
		bool shadowed = false;
		for (size_t j = 0; f->sec == 1 && j < o.nfdes; j++)
			if (o.fdes[j].sec == 0 && o.fdes[j].lo < f->hi && f->lo < o.fdes[j].hi)
				shadowed = true;
		if (shadowed) {
			c.debug_shadowed++;
			continue;
		}
		for (size_t k = 0; k < f->n; k++) {
			const struct row *r = &o.rows[f->first + k];
			uint64_t lo = r->loc, hi = k + 1 < f->n ? o.rows[f->first + k + 1].loc : f->hi;
			struct vpb_rule want;

			c.rows++;
			if (hi <= lo || !expected_rule(&ei, r, lo, hi, &want, &c))
				continue;
			expect_rule(t, lo, &want, r, path);
			expect_rule(t, hi - 1, &want, r, path);
			c.checked++;
		}
	}
	/* Executable bytes that no FDE covers: NONE, at both ends of each gap. */
	for (int s = 0; s < ei.nx; s++) {
		uint64_t at = ei.xseg[s].lo;

		for (size_t i = 0; i <= o.nfdes; i++) {
			uint64_t next = i < o.nfdes ? o.fdes[i].lo : ei.xseg[s].hi;

			if (next > ei.xseg[s].hi)
				next = ei.xseg[s].hi;
			if (next > at) {
				const struct vpb_rule *a = vp_cfi__find(t, at), *b = vp_cfi__find(t, next - 1);

				if (!a || !b || a->kind != VPB_RULE_NONE || b->kind != VPB_RULE_NONE)
					FAIL("%s: %#" PRIx64 "..%#" PRIx64 " has no FDE but rule %s/%s", path, at, next,
					     a ? kind_name(a->kind) : "-", b ? kind_name(b->kind) : "-");
				c.gaps++;
			}
			if (i < o.nfdes && o.fdes[i].hi > at)
				at = o.fdes[i].hi;
		}
	}
	size_t n;
	vp_cfi__rules(t, &n);
	printf("readelf agrees: %s: %zu FDEs, %zu rows, %zu checked at both ends (%zu PLT, %zu END, %zu NONE "
	       "expected), %zu expressions skipped, %zu debug_frame FDEs under eh_frame, %zu gaps NONE\n",
	       path, o.nfdes, c.rows, c.checked, c.plt, c.end, c.none_expected, c.skipped_exp, c.debug_shadowed, c.gaps);
	if (print_time)
		printf("time: %s: %zu rules in %.1f ms (source %s)\n", path, n, ms, vp_cfi__source(t));
	ASSERT_GT(c.checked, o.nfdes / 2);
	vp_cfi__free(t);
	free(ei.map);
	free(o.rows);
	free(o.fdes);
	free(o.cies);
}

/* --- hostile input --------------------------------------------------------------- */

static uint64_t rng_state;
static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* Builds from a buffer written to a temporary file: a table that passes check_table,
 * or NULL with a reason. Returns 1 for a table, 0 for an error. */
static int build_bytes(const char *dir, const uint8_t *buf, size_t len, const char *what)
{
	char path[512], err[256] = "";

	snprintf(path, sizeof(path), "%s/input", dir);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || (len && write(fd, buf, len) != (ssize_t)len))
		FAIL("write %s: %s", path, strerror(errno));
	errno = 0;
	struct vp_cfi *t = vp_cfi__build(fd, err, sizeof(err));
	int e = errno;
	close(fd);
	if (!t) {
		if (!err[0] || e <= 0)
			FAIL("%s: NULL without a reason (errno %d, err '%s')", what, e, err);
		return 0;
	}
	check_table(t, what);
	vp_cfi__free(t);
	return 1;
}

static void test_hostile(const char *fixture)
{
	char dir[] = "/tmp/test-cfi-XXXXXX", what[128];
	struct elfinfo ei;

	if (!mkdtemp(dir))
		FAIL("mkdtemp: %s", strerror(errno));
	elfinfo_load(&ei, fixture);
	uint8_t *copy = malloc(ei.size);
	ASSERT_NOT_NULL(copy);

	/* Empty, not ELF, an ELF header alone. */
	ASSERT_EQ(build_bytes(dir, (const uint8_t *)"", 0, "empty file"), 0);
	const char *text = "#!/bin/sh\necho this is not an ELF file\n";
	ASSERT_EQ(build_bytes(dir, (const uint8_t *)text, strlen(text), "not ELF"), 0);
	ASSERT_EQ(build_bytes(dir, ei.map, 64, "ELF header only"), 0);

	/* Truncated: at many lengths, including inside .eh_frame and the section headers. */
	int tables = 0, errors = 0;
	uint64_t ehoff = 0, ehsize = 0, hdroff = 0, hdrsize = 0;
	for (int i = 0; i < ei.nsec; i++) {
		if (!strcmp(ei.sec[i].name, ".eh_frame"))
			ehoff = ei.sec[i].off, ehsize = ei.sec[i].size;
		if (!strcmp(ei.sec[i].name, ".eh_frame_hdr"))
			hdroff = ei.sec[i].off, hdrsize = ei.sec[i].size;
	}
	ASSERT_GT(ehsize, 0);
	ASSERT_GT(hdrsize, 0);
	size_t cuts[] = { 1, 63, 65, 200, 1000, 4096, hdroff + hdrsize / 2, ehoff + 10, ehoff + ehsize / 2,
			  ehoff + ehsize - 1, ei.size / 2, ei.size - 100, ei.size - 1 };
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		snprintf(what, sizeof(what), "truncated to %zu of %zu", cuts[i], ei.size);
		build_bytes(dir, ei.map, cuts[i], what) ? tables++ : errors++;
	}
	printf("hostile: truncated copies: %d tables, %d errors\n", tables, errors);

	/* Random bytes over the whole .eh_frame, over its search table, and a few random
	 * bytes changed in each (seeded, so a failure repeats). */
	struct { const char *name; uint64_t off, size; bool whole; } zones[] = {
		{ ".eh_frame whole", ehoff, ehsize, true },
		{ ".eh_frame_hdr whole", hdroff, hdrsize, true },
		{ ".eh_frame 8 bytes", ehoff, ehsize, false },
		{ ".eh_frame_hdr 4 bytes", hdroff, hdrsize, false },
	};
	for (size_t z = 0; z < sizeof(zones) / sizeof(zones[0]); z++) {
		tables = errors = 0;
		for (uint64_t seed = 1; seed <= 100; seed++) {
			rng_state = seed * 0x9e3779b97f4a7c15ull;
			memcpy(copy, ei.map, ei.size);
			if (zones[z].whole) {
				for (uint64_t i = 0; i < zones[z].size; i++)
					copy[zones[z].off + i] = (uint8_t)rng();
			} else {
				for (int k = 0; k < (strstr(zones[z].name, "hdr") ? 4 : 8); k++)
					copy[zones[z].off + rng() % zones[z].size] = (uint8_t)rng();
			}
			snprintf(what, sizeof(what), "%s, seed %" PRIu64, zones[z].name, seed);
			build_bytes(dir, copy, ei.size, what) ? tables++ : errors++;
		}
		printf("hostile: %s random, 100 seeds: %d tables, %d errors\n", zones[z].name, tables, errors);
	}
	char path[600];
	snprintf(path, sizeof(path), "%s/input", dir);
	unlink(path);
	rmdir(dir);
	free(copy);
	free(ei.map);
}

/* The other ways in: .debug_frame alone (objcopy drops .eh_frame and its search table
 * from the .debug_frame fixture), and no section headers at all (then libdw and the
 * reader find .eh_frame through PT_GNU_EH_FRAME and its search table): same rules. */
static void test_variants(const char *o2, const char *dbg)
{
	char dir[] = "/tmp/test-cfi-XXXXXX", path[600], cmd[1400], err[256] = "";
	int n;

	if (!mkdtemp(dir))
		FAIL("mkdtemp: %s", strerror(errno));
	snprintf(path, sizeof(path), "%s/dbg-only", dir);
	snprintf(cmd, sizeof(cmd), "objcopy --remove-section .eh_frame --remove-section .eh_frame_hdr '%s' '%s'", dbg,
		 path);
	ASSERT_EQ(run_sh(cmd, 110), 0);
	struct vp_cfi *t = build_path(path, err, sizeof(err));
	if (!t)
		FAIL("%s: %s", path, err);
	check_table(t, path);
	ASSERT_STREQ(vp_cfi__source(t), "debug_frame");
	ASSERT_GT(follow_prologue(t, path, "fx_frame", &n) & SAW_SUB_RSP, 0);
	ASSERT_GT(follow_prologue(t, path, "fx_vla", &n) & SAW_MOV_RBP, 0);
	follow_prologue(t, path, "fx_leaf", &n);
	printf("variants: .debug_frame only: prologues agree\n");
	vp_cfi__free(t);
	unlink(path);

	/* e_shoff, e_shnum and e_shstrndx zeroed: an ELF file without section headers. */
	struct elfinfo ei;
	elfinfo_load(&ei, o2);
	memset(ei.map + 0x28, 0, 8);
	memset(ei.map + 0x3c, 0, 4);
	snprintf(path, sizeof(path), "%s/noshdr", dir);
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	ASSERT_GE(fd, 0);
	ASSERT_EQ(write(fd, ei.map, ei.size), (ssize_t)ei.size);
	struct vp_cfi *a = vp_cfi__build(fd, err, sizeof(err));
	close(fd);
	if (!a)
		FAIL("%s: %s", path, err);
	struct vp_cfi *b = build_path(o2, err, sizeof(err));
	ASSERT_NOT_NULL(b);
	size_t na, nb;
	const struct vpb_rule *ra = vp_cfi__rules(a, &na), *rb = vp_cfi__rules(b, &nb);
	ASSERT_EQ(na, nb);
	ASSERT_EQ(memcmp(ra, rb, na * sizeof(*ra)), 0);
	/* File offsets map to addresses through the PT_LOAD segments, headers or not. */
	uint64_t v;
	ASSERT_OK(vp_cfi__vaddr_of_offset(a, ei.xseg[0].off + 0x10, &v));
	ASSERT_UEQ(v, ei.xseg[0].lo + 0x10);
	ASSERT_UEQ(vp_cfi__base(a), ei.xseg[0].lo);
	ASSERT_EQ(vp_cfi__vaddr_of_offset(a, (uint64_t)1 << 40, &v), -ENOENT);
	printf("variants: no section headers: the same %zu rules\n", na);
	vp_cfi__free(a);
	vp_cfi__free(b);
	free(ei.map);
	unlink(path);
	rmdir(dir);
}

/* Crafted FDEs with tens of thousands of rows (fixtures/cfi/cfi_rows.c): the build ends
 * quickly with the first rows right and the rest NONE, an ordinary function after the
 * huge FDE keeps its rules, and once the whole file's budget is spent the rest is NONE. */
static void test_limits(const char *path)
{
	char err[256] = "";
	struct elfinfo ei;

	double t0 = now_ms();
	struct vp_cfi *t = build_path(path, err, sizeof(err));
	double ms = now_ms() - t0;
	if (!t)
		FAIL("%s: %s", path, err);
	check_table(t, path);
	elfinfo_load(&ei, path);
	uint64_t m = sym_addr(&ei, "fx_manyrows"), a = sym_addr(&ei, "fx_after"), l = sym_addr(&ei, "fx_last");
	/* Row i of fx_manyrows starts at m + i: CFA rsp+8 on even rows, rsp+16 on odd. */
	for (uint64_t i = 0; i < 200; i++)
		expect_at(t, m + i, VPB_RULE_SP, i % 2 ? 2 : 1, VPB_FP_SAME, "fx_manyrows");
	expect_at(t, m + 19999, VPB_RULE_NONE, 0, VPB_FP_SAME, "fx_manyrows past the row limit");
	expect_at(t, a, VPB_RULE_SP, 1, VPB_FP_SAME, "fx_after entry");
	expect_at(t, a + 1, VPB_RULE_SP, 2, -2, "fx_after after push rbp");
	expect_at(t, a + 4, VPB_RULE_FP, 2, -2, "fx_after after mov rbp,rsp");
	expect_at(t, a + 5, VPB_RULE_SP, 1, VPB_FP_SAME, "fx_after after pop rbp");
	expect_at(t, l, VPB_RULE_NONE, 0, VPB_FP_SAME, "fx_last after the file's budget");
	ASSERT_TRUE(vp_cfi__cut(t));
	size_t n;
	vp_cfi__rules(t, &n);
	printf("limits: %s: %zu rules in %.1f ms; huge FDE cut, the function after it intact\n", path, n, ms);
	free(ei.map);
	vp_cfi__free(t);
}

static void test_timing(void)
{
	const char *libs[] = { LIBZ, LIBC, LIBJVM };

	for (int i = 0; i < 3; i++) {
		char err[256] = "";

		if (access(libs[i], R_OK)) {
			printf("time: %s: not installed, not measured\n", libs[i]);
			continue;
		}
		double best = 1e9;
		size_t n = 0;
		for (int rep = 0; rep < 3; rep++) {
			double t0 = now_ms();
			struct vp_cfi *t = build_path(libs[i], err, sizeof(err));
			double ms = now_ms() - t0;

			if (!t)
				FAIL("%s: %s", libs[i], err);
			check_table(t, libs[i]);
			ASSERT_FALSE(vp_cfi__cut(t));
			vp_cfi__rules(t, &n);
			vp_cfi__free(t);
			if (ms < best)
				best = ms;
		}
		printf("time: %s: %zu rules, best of 3: %.1f ms\n", libs[i], n, best);
	}
}

int main(void)
{
	if (run_sh("readelf --version >/dev/null 2>&1 && objdump --version >/dev/null 2>&1", 110) != 0)
		SKIP("needs readelf and objdump (binutils) as the independent oracles");
	setvbuf(stdout, NULL, _IONBF, 0);
	test_prologues(CFI_FX_O2, CFI_FX_O0, CFI_FX_DBG);
	agree_with_readelf(CFI_FX_O2, false);
	agree_with_readelf(CFI_FX_O0, false);
	agree_with_readelf(CFI_FX_DBG, false);
	agree_with_readelf(LIBZ, true);
	agree_with_readelf(LIBC, true);
	/* The library this is for: libjvm.so's 30k FDEs, when the JDK is installed. */
	if (access(LIBJVM, R_OK) == 0)
		agree_with_readelf(LIBJVM, true);
	else
		printf("readelf agrees: %s not installed, not compared\n", LIBJVM);
	test_variants(CFI_FX_O2, CFI_FX_DBG);
	test_hostile(CFI_FX_O2);
	test_limits(CFI_ROWS);
	test_timing();
	printf("ok\n");
	return 0;
}
