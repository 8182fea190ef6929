/* Compact unwind rules from an ELF file's CFI, with elfutils' libdw: see cfi.h. */
#define _GNU_SOURCE
#include <dwarf.h>
#include <errno.h>
#include <gelf.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <dirent.h>
#include <limits.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "recorder/cfi.h"
#include "recorder/cfi_check.h"
#include "common/safefs.h"
#include "common/util.h"

#define MAX_SEGS 16
#define REG_RBP 6
#define REG_RSP 7
#define REG_RA 16

/* libdw interprets an FDE from its first instruction at every dwarf_cfi_addrframe call,
 * so reading an FDE row by row costs rows^2/2 steps. Real code stays far below these
 * (libjvm.so: at most 511 rows in one FDE, about 1M steps in all); a crafted file with
 * one huge FDE, or many, would otherwise hold the recorder for minutes. Past the first
 * limit an FDE's remaining rows become VPB_RULE_NONE; past the second, the rest of the
 * file. */
#define MAX_FDE_ROWS  4096
#define MAX_STEPS     (64ull << 20)

struct seg {
	uint64_t off, vaddr, filesz, memsz;
};

struct vp_cfi {
	struct vpb_rule *rules;
	size_t n, cap;
	uint64_t base;
	struct seg segs[MAX_SEGS];
	int nsegs;
	const char *source;
	bool failed;             /* out of memory while building */
	bool cut;                /* a row limit left part of the text VPB_RULE_NONE */
	char refused[160];       /* why the file's CFI was refused (vp_cfi__refused), "" if it was not */
	uint64_t steps;          /* rows libdw has interpreted so far (see MAX_STEPS) */
	uint64_t done;           /* the address up to which rules exist */
};

static void set_err(char *err, size_t errlen, const char *fmt, const char *a)
{
	if (err && errlen)
		snprintf(err, errlen, fmt, a);
}

static bool same_rule(const struct vpb_rule *a, const struct vpb_rule *b)
{
	return a->kind == b->kind && a->cfa_off == b->cfa_off && a->fp_off == b->fp_off;
}

/* Appends a rule for [vaddr, ...), merging it into the previous one when equal. */
static void emit(struct vp_cfi *t, uint64_t vaddr, struct vpb_rule r)
{
	r.pc = (uint32_t)(vaddr - t->base);
	if (t->n) {
		struct vpb_rule *last = &t->rules[t->n - 1];

		if (same_rule(last, &r))
			return;
		if (r.pc < last->pc)         /* never out of order, whatever the input */
			return;
		if (last->pc == r.pc) {      /* an empty range: the newer rule wins */
			*last = r;
			if (t->n > 1 && same_rule(&last[-1], last))
				t->n--;
			return;
		}
	}
	if (vp_grow((void **)&t->rules, &t->cap, t->n + 1, sizeof(*t->rules))) {
		t->failed = true;
		return;
	}
	t->rules[t->n++] = r;
}

static const struct vpb_rule none = { .kind = VPB_RULE_NONE, .fp_off = VPB_FP_SAME };

/* The PLT's CFA: rsp + 8, plus 8 once the stub has pushed its index, which happens at
 * byte 11 (or 10 in the IBT layout) of each 16-byte entry. */
static bool plt_expr(const Dwarf_Op *ops, size_t n, int64_t *threshold)
{
	if (n != 9 || ops[0].atom != DW_OP_breg7 || ops[0].number != 8 || ops[1].atom != DW_OP_breg16 ||
	    ops[1].number != 0 || ops[2].atom != DW_OP_lit15 || ops[3].atom != DW_OP_and || ops[5].atom != DW_OP_ge ||
	    ops[6].atom != DW_OP_lit3 || ops[7].atom != DW_OP_shl || ops[8].atom != DW_OP_plus)
		return false;
	if (ops[4].atom < DW_OP_lit0 || ops[4].atom > DW_OP_lit31)
		return false;
	*threshold = ops[4].atom - DW_OP_lit0;
	return true;
}

/* Where a register is saved: 1 with *off = its CFA offset, 0 when it keeps its value
 * (same value, or no rule), -1 for anything the walker cannot follow. */
static int saved_at(Dwarf_Frame *fr, int reg, int64_t *off, bool *undefined)
{
	Dwarf_Op mem[3], *ops = NULL;
	size_t n = 0;

	*undefined = false;
	if (dwarf_frame_register(fr, reg, mem, &ops, &n) != 0)
		return -1;
	/* libdw: no expression (ops NULL) is "same value"; an empty one is "undefined". */
	if (!ops)
		return 0;
	if (n == 0) {
		*undefined = true;
		return 0;
	}
	if (ops[0].atom != DW_OP_call_frame_cfa)
		return -1;
	if (n == 1) {
		*off = 0;
		return 1;
	}
	if (n == 2 && ops[1].atom == DW_OP_plus_uconst) {
		*off = (int64_t)ops[1].number;
		return 1;
	}
	return -1;
}

static struct vpb_rule rule_of(Dwarf_Frame *fr)
{
	struct vpb_rule r = none;
	Dwarf_Op *ops = NULL;
	size_t n = 0;
	int64_t off = 0, thr;
	bool undef;

	/* No return address: the outermost frame. */
	int ra = saved_at(fr, REG_RA, &off, &undef);
	if (ra == 0 && undef) {
		r.kind = VPB_RULE_END;
		return r;
	}
	if (ra != 1 || off != -8)
		return none;
	if (dwarf_frame_cfa(fr, &ops, &n) != 0 || !ops)
		return none;
	/* libdw states "CFA = register + offset" as one DW_OP_bregx (register, offset). */
	int64_t creg = -1, c = 0;
	if (n == 1 && ops[0].atom == DW_OP_bregx) {
		creg = (int64_t)ops[0].number;
		c = (int64_t)ops[0].number2;
	} else if (n == 1 && ops[0].atom >= DW_OP_breg0 && ops[0].atom <= DW_OP_breg31) {
		creg = ops[0].atom - DW_OP_breg0;
		c = (int64_t)ops[0].number;
	}
	if (creg == REG_RSP || creg == REG_RBP) {
		if (c % 8 || c / 8 < INT16_MIN || c / 8 > INT16_MAX)
			return none;
		r.kind = creg == REG_RSP ? VPB_RULE_SP : VPB_RULE_FP;
		r.cfa_off = (int16_t)(c / 8);
	} else if (plt_expr(ops, n, &thr)) {
		r.kind = VPB_RULE_PLT;
		r.cfa_off = (int16_t)thr;
	} else {
		return none;
	}
	int fp = saved_at(fr, REG_RBP, &off, &undef);
	if (fp < 0 || (fp == 1 && (off % 8 || off == 0 || off / 8 < INT8_MIN || off / 8 > INT8_MAX)))
		return none;
	r.fp_off = fp == 1 ? (int8_t)(off / 8) : VPB_FP_SAME;
	return r;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void sec_at(struct vp_cfi_sec *s, const void *p, size_t n, uint64_t vaddr, bool eh)
{
	s->src = p;
	s->size = n;
	s->vaddr = vaddr;
	s->eh = eh;
}

/* Where the file's .eh_frame is: the section of that name, or (no section headers, as
 * the loader sees a file) the one PT_GNU_EH_FRAME's header points at, up to its
 * terminator. s->src stays NULL when there is none. */
static void find_eh_frame(Elf *e, struct vp_cfi *t, struct vp_cfi_sec *s)
{
	Elf_Scn *scn = NULL;
	size_t shstr, nph, fsize = 0;

	if (elf_getshdrstrndx(e, &shstr) == 0 && shstr != 0) {
		while ((scn = elf_nextscn(e, scn))) {
			GElf_Shdr sh;
			const char *name;

			if (!gelf_getshdr(scn, &sh) || !(name = elf_strptr(e, shstr, sh.sh_name)) ||
			    strcmp(name, ".eh_frame"))
				continue;
			/* Any type with bytes: lld makes it SHT_X86_64_UNWIND. */
			Elf_Data *d = sh.sh_type != SHT_NOBITS ? elf_rawdata(scn, NULL) : NULL;
			if (!d || !d->d_buf || !d->d_size)
				return;
			if (d->d_size > VP_CFI_MAX_BYTES) {
				snprintf(t->refused, sizeof(t->refused), ".eh_frame of %zu bytes, over the %u MiB checked here",
					 d->d_size, VP_CFI_MAX_BYTES >> 20);
				return;
			}
			sec_at(s, d->d_buf, d->d_size, sh.sh_addr, true);
			return;
		}
	}
	GElf_Phdr hdr = { .p_type = PT_NULL }, ph;
	if (elf_getphdrnum(e, &nph) || !elf_rawfile(e, &fsize))
		return;
	for (size_t i = 0; i < nph && hdr.p_type == PT_NULL; i++)
		if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_GNU_EH_FRAME)
			hdr = ph;
	Elf_Data *d = hdr.p_type == PT_GNU_EH_FRAME ?
		elf_getdata_rawchunk(e, (int64_t)hdr.p_offset, hdr.p_filesz, ELF_T_BYTE) : NULL;
	if (!d || !d->d_buf || d->d_size < 8)
		return;
	const uint8_t *b = d->d_buf, *p = b + 4;
	uint64_t ptr;
	if (b[0] != 1 || !vp_cfi_read_encoded(&p, b + d->d_size, b[1], hdr.p_vaddr + 4, &ptr))
		return;
	for (size_t i = 0; i < nph; i++) {
		if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD || ptr < ph.p_vaddr ||
		    ptr - ph.p_vaddr >= ph.p_filesz || ph.p_offset + (ptr - ph.p_vaddr) >= fsize)
			continue;
		uint64_t off = ph.p_offset + (ptr - ph.p_vaddr), avail = ph.p_filesz - (ptr - ph.p_vaddr);
		if (avail > fsize - off)
			avail = fsize - off;
		if (!(d = elf_getdata_rawchunk(e, (int64_t)off, avail, ELF_T_BYTE)) || !d->d_buf)
			return;
		/* The entries' lengths up to the terminator: where .eh_frame ends. */
		const uint8_t *q = d->d_buf;
		uint64_t n = 0;
		while (n + 4 <= avail && n <= VP_CFI_MAX_BYTES) {
			uint32_t l32;
			uint64_t l, hl = 4;

			memcpy(&l32, q + n, 4);
			l = l32;
			if (l32 == 0xffffffff) {
				if (n + 12 > avail)
					break;
				memcpy(&l, q + n + 4, 8);
				hl = 12;
			}
			if (l == 0) {
				n += hl;
				break;
			}
			if (l > avail - n - hl) {
				snprintf(t->refused, sizeof(t->refused),
					 ".eh_frame entry at offset %#llx: a length past its segment's end",
					 (unsigned long long)n);
				return;
			}
			n += hl + l;
		}
		if (n > VP_CFI_MAX_BYTES) {
			snprintf(t->refused, sizeof(t->refused), ".eh_frame of %llu bytes, over the %u MiB checked here",
				 (unsigned long long)n, VP_CFI_MAX_BYTES >> 20);
			return;
		}
		if (n)
			sec_at(s, q, (size_t)n, ptr, true);
		return;
	}
}

/* Where the file's .debug_frame (or .zdebug_frame) is, inflated by libelf when it is
 * compressed: the first of either name, as libdw takes it. */
static void find_debug_frame(Elf *e, struct vp_cfi *t, struct vp_cfi_sec *s)
{
	Elf_Scn *scn = NULL;
	size_t shstr;

	if (elf_getshdrstrndx(e, &shstr) || shstr == 0)
		return;
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		const char *name;

		if (!gelf_getshdr(scn, &sh) || !(name = elf_strptr(e, shstr, sh.sh_name)) ||
		    (strcmp(name, ".debug_frame") && strcmp(name, ".zdebug_frame")))
			continue;
		if (sh.sh_type == SHT_NOBITS)
			return;
		if (name[1] == 'z') {
			/* GNU's older form: "ZLIB", the size (8 bytes, big-endian), the stream. */
			Elf_Data *r = elf_rawdata(scn, NULL);
			uint64_t size = 0;

			if (!r || !r->d_buf || r->d_size < 12 || memcmp(r->d_buf, "ZLIB", 4))
				return;
			for (int i = 4; i < 12; i++)
				size = size << 8 | ((const uint8_t *)r->d_buf)[i];
			if (size > VP_CFI_MAX_BYTES) {
				snprintf(t->refused, sizeof(t->refused),
					 ".zdebug_frame of %llu bytes decompressed, over the %u MiB checked here",
					 (unsigned long long)size, VP_CFI_MAX_BYTES >> 20);
				return;
			}
			if (elf_compress_gnu(scn, 0, 0) < 0)
				return;
		} else if (sh.sh_flags & SHF_COMPRESSED) {
			GElf_Chdr ch;

			/* libelf allocates the size the header states: checked first. */
			if (!gelf_getchdr(scn, &ch))
				return;
			if (ch.ch_size > VP_CFI_MAX_BYTES) {
				snprintf(t->refused, sizeof(t->refused),
					 ".debug_frame of %llu bytes decompressed, over the %u MiB checked here",
					 (unsigned long long)ch.ch_size, VP_CFI_MAX_BYTES >> 20);
				return;
			}
			if (elf_compress(scn, 0, 0) < 0)
				return;
		}
		Elf_Data *d = elf_getdata(scn, NULL);
		if (!d || !d->d_buf || !d->d_size)
			return;
		if (d->d_size > VP_CFI_MAX_BYTES) {
			snprintf(t->refused, sizeof(t->refused), ".debug_frame of %zu bytes, over the %u MiB checked here",
				 d->d_size, VP_CFI_MAX_BYTES >> 20);
			return;
		}
		sec_at(s, d->d_buf, d->d_size, 0, false);
		return;
	}
}

/* An ELF image of the CFI sections alone, copied out of the file, for libdw: section
 * headers, .eh_frame (at its address) and .debug_frame, no .eh_frame_hdr (libdw then finds
 * FDEs by reading .eh_frame in order, as the check does) and no program headers. Sets
 * each section's buf to its copy, which is checked before libdw is given the image. */
static uint8_t *cfi_image(struct vp_cfi_sec *eh, struct vp_cfi_sec *dbg, size_t *len)
{
	static const char names[] = "\0.eh_frame\0.debug_frame\0.shstrtab";
	struct vp_cfi_sec *secs[2] = { eh, dbg };
	const uint32_t name_at[2] = { 1, 11 };
	Elf64_Shdr sh[4];
	size_t off = sizeof(Elf64_Ehdr), at[2] = { 0, 0 };
	int n = 1;

	memset(sh, 0, sizeof(sh));
	for (int i = 0; i < 2; i++) {
		if (!secs[i]->src)
			continue;
		at[i] = off;
		sh[n++] = (Elf64_Shdr){ .sh_name = name_at[i], .sh_type = SHT_PROGBITS,
					.sh_flags = secs[i]->eh ? SHF_ALLOC : 0, .sh_addr = secs[i]->vaddr,
					.sh_offset = off, .sh_size = secs[i]->size, .sh_addralign = 8 };
		off += (secs[i]->size + VP_CFI_PAD + 7) & ~(size_t)7;
	}
	sh[n++] = (Elf64_Shdr){ .sh_name = 24, .sh_type = SHT_STRTAB, .sh_offset = off, .sh_size = sizeof(names),
				.sh_addralign = 1 };
	off += (sizeof(names) + 7) & ~(size_t)7;
	uint8_t *b = calloc(1, off + (size_t)n * sizeof(Elf64_Shdr));
	if (!b)
		return NULL;
	Elf64_Ehdr eh64 = { .e_type = ET_DYN, .e_machine = EM_X86_64, .e_version = EV_CURRENT, .e_shoff = off,
			    .e_ehsize = sizeof(Elf64_Ehdr), .e_shentsize = sizeof(Elf64_Shdr), .e_shnum = (uint16_t)n,
			    .e_shstrndx = (uint16_t)(n - 1) };
	memcpy(eh64.e_ident, ELFMAG, SELFMAG);
	eh64.e_ident[EI_CLASS] = ELFCLASS64;
	eh64.e_ident[EI_DATA] = ELFDATA2LSB;
	eh64.e_ident[EI_VERSION] = EV_CURRENT;
	memcpy(b, &eh64, sizeof(eh64));
	for (int i = 0; i < 2; i++) {
		if (!secs[i]->src)
			continue;
		secs[i]->buf = b + at[i];
		memcpy(secs[i]->buf, secs[i]->src, secs[i]->size);
	}
	memcpy(b + sh[n - 1].sh_offset, names, sizeof(names));
	memcpy(b + off, sh, (size_t)n * sizeof(Elf64_Shdr));
	*len = off + (size_t)n * sizeof(Elf64_Shdr);
	return b;
}

static bool frame_at(Dwarf_CFI *a, Dwarf_CFI *b, uint64_t addr, Dwarf_Frame **fr)
{
	return (a && dwarf_cfi_addrframe(a, addr, fr) == 0) || (b && dwarf_cfi_addrframe(b, addr, fr) == 0);
}

/* Rules for one executable segment [lo, hi). starts: sorted FDE starts, which is where
 * the walk resumes after bytes no FDE covers, and where a new FDE's row count begins. */
static void walk_segment(struct vp_cfi *t, Dwarf_CFI *eh, Dwarf_CFI *dbg, uint64_t lo, uint64_t hi,
			 const uint64_t *starts, size_t nstarts)
{
	uint64_t addr = lo > t->done ? lo : t->done;   /* overlapping segments: once */
	size_t k = 0, row = 0;

	while (addr < hi && !t->failed) {
		Dwarf_Frame *fr = NULL;

		if (k < nstarts && starts[k] <= addr) {
			row = 0;
			while (k < nstarts && starts[k] <= addr)
				k++;
		}
		if (t->steps > MAX_STEPS) {
			t->cut = true;
			break;
		}
		if (row < MAX_FDE_ROWS && frame_at(eh, dbg, addr, &fr)) {
			Dwarf_Addr start = 0, end = 0;
			bool signal = false;

			t->steps += ++row;
			dwarf_frame_info(fr, &start, &end, &signal);
			emit(t, addr, signal ? none : rule_of(fr));
			free(fr);
			/* Each call returns one row: the next row starts at end. */
			addr = end > addr ? end : addr + 1;
			continue;
		}
		if (row >= MAX_FDE_ROWS)
			t->cut = true;
		emit(t, addr, none);
		if (k == nstarts)
			break;
		addr = starts[k];
	}
	/* NONE from where the rules stop: the segment's end, or where the walk gave up. */
	emit(t, addr < hi ? addr : hi, none);
	if (hi > t->done)
		t->done = hi;
}

struct vp_cfi *vp_cfi__build(int fd, char *err, size_t errlen)
{
	struct vp_cfi *t = calloc(1, sizeof(*t));
	Elf *e = NULL;
	Dwarf *dw = NULL;
	Dwarf_CFI *ehcfi = NULL, *dbgcfi = NULL;
	uint64_t *starts = NULL;
	size_t nstarts = 0, capstarts = 0, nph;
	struct vp_cfi_sec ehs = { 0 }, dbgs = { 0 };
	Elf *img = NULL;
	uint8_t *imgbuf = NULL;
	int rc = 0;

	if (!t) {
		errno = ENOMEM;
		return NULL;
	}
	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	GElf_Ehdr eh;
	if (!e || elf_kind(e) != ELF_K_ELF || !gelf_getehdr(e, &eh)) {
		set_err(err, errlen, "not an ELF file%s", "");
		rc = -ENOEXEC;
		goto cleanup;
	}
	if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_machine != EM_X86_64) {
		set_err(err, errlen, "not an x86-64 ELF file%s", "");
		rc = -ENOTSUP;
		goto cleanup;
	}
	if (elf_getphdrnum(e, &nph)) {
		set_err(err, errlen, "no program headers%s", "");
		rc = -ENOEXEC;
		goto cleanup;
	}
	uint64_t top = 0;
	t->base = UINT64_MAX;
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(e, (int)i, &ph))
			continue;
		if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X) || t->nsegs == MAX_SEGS)
			continue;
		t->segs[t->nsegs++] = (struct seg){ ph.p_offset, ph.p_vaddr, ph.p_filesz, ph.p_memsz };
		if (ph.p_vaddr < t->base)
			t->base = ph.p_vaddr;
		if (ph.p_vaddr + ph.p_memsz > top)
			top = ph.p_vaddr + ph.p_memsz;
	}
	if (!t->nsegs) {
		set_err(err, errlen, "no executable segment%s", "");
		rc = -ENOEXEC;
		goto cleanup;
	}
	if (top - t->base >= UINT32_MAX) {
		set_err(err, errlen, "executable segments span more than 4 GiB, more than 32-bit rule offsets reach%s", "");
		rc = -EFBIG;
		goto cleanup;
	}
	/* Copied out of the file, checked, and only then shown to libdw (see recorder/cfi_check.h). */
	find_eh_frame(e, t, &ehs);
	find_debug_frame(e, t, &dbgs);
	size_t imglen = 0;
	if (!t->refused[0] && (ehs.src || dbgs.src) && !(imgbuf = cfi_image(&ehs, &dbgs, &imglen))) {
		set_err(err, errlen, "out of memory copying the unwind sections%s", "");
		rc = -ENOMEM;
		goto cleanup;
	}
	/* The file is not read again (an inflated .debug_frame goes with it). */
	elf_end(e);
	e = NULL;
	for (int i = 0; i < 2 && imgbuf && !t->refused[0]; i++) {
		struct vp_cfi_sec *sec = i ? &dbgs : &ehs;

		if (sec->buf && !vp_cfi_check__section(sec, eh.e_ident, &starts, &nstarts, &capstarts, t->refused,
					       sizeof(t->refused)))
			break;
	}
	if (imgbuf && !t->refused[0]) {
		if (!(img = elf_memory((char *)imgbuf, imglen))) {
			set_err(err, errlen, "libelf cannot read the unwind sections' image%s", "");
			rc = -ENOMEM;
			goto cleanup;
		}
		if (ehs.buf)
			ehcfi = dwarf_getcfi_elf(img);
		if (dbgs.buf && (dw = dwarf_begin_elf(img, DWARF_C_READ, NULL)))
			dbgcfi = dwarf_getcfi(dw);
	}
	vp_sort(starts, nstarts, sizeof(*starts), cmp_u64);
	t->source = ehcfi ? (dbgcfi ? "eh_frame+debug_frame" : "eh_frame") : dbgcfi ? "debug_frame" : "none";
	/* Segments in address order, so the rules come out sorted. */
	for (int i = 1; i < t->nsegs; i++)
		for (int j = i; j > 0 && t->segs[j].vaddr < t->segs[j - 1].vaddr; j--) {
			struct seg s = t->segs[j];

			t->segs[j] = t->segs[j - 1];
			t->segs[j - 1] = s;
		}
	for (int i = 0; i < t->nsegs; i++) {
		if (ehcfi || dbgcfi)
			walk_segment(t, ehcfi, dbgcfi, t->segs[i].vaddr, t->segs[i].vaddr + t->segs[i].memsz,
				     starts, nstarts);
		else {
			emit(t, t->segs[i].vaddr, none);
		}
	}
	if (t->failed) {
		set_err(err, errlen, "out of memory%s", "");
		rc = -ENOMEM;
	}
cleanup:
	free(starts);
	if (ehcfi)
		dwarf_cfi_end(ehcfi);
	if (dw)
		dwarf_end(dw);
	if (img)
		elf_end(img);
	free(imgbuf);
	if (e)
		elf_end(e);
	if (rc) {
		vp_cfi__free(t);
		errno = -rc;
		return NULL;
	}
	return t;
}

const struct vpb_rule *vp_cfi__rules(const struct vp_cfi *t, size_t *n)
{
	*n = t->n;
	return t->rules;
}

uint64_t vp_cfi__base(const struct vp_cfi *t)
{
	return t->base;
}

int vp_cfi__vaddr_of_offset(const struct vp_cfi *t, uint64_t off, uint64_t *vaddr)
{
	for (int i = 0; i < t->nsegs; i++) {
		const struct seg *s = &t->segs[i];

		/* A mapping's file offset is page-aligned and may start before p_offset. */
		uint64_t lo = s->off & ~(uint64_t)4095;

		if (off >= lo && off < s->off + s->filesz) {
			*vaddr = s->vaddr + off - s->off;
			return 0;
		}
	}
	return -ENOENT;
}

const struct vpb_rule *vp_cfi__find(const struct vp_cfi *t, uint64_t vaddr)
{
	if (!t->n || vaddr < t->base)
		return NULL;
	uint64_t off = vaddr - t->base;
	size_t lo = 0, hi = t->n;

	if (off < t->rules[0].pc)
		return NULL;
	while (lo + 1 < hi) {
		size_t mid = (lo + hi) / 2;

		if (t->rules[mid].pc <= off)
			lo = mid;
		else
			hi = mid;
	}
	return &t->rules[lo];
}

const char *vp_cfi__source(const struct vp_cfi *t)
{
	return t->source;
}

bool vp_cfi__cut(const struct vp_cfi *t)
{
	return t->cut;
}

const char *vp_cfi__refused(const struct vp_cfi *t)
{
	return t->refused[0] ? t->refused : NULL;
}

void vp_cfi__free(struct vp_cfi *t)
{
	if (!t)
		return;
	free(t->rules);
	free(t);
}

/* ---- The unwind-rule cache (cfi.h). ---- */

static const char *const cache_sources[] = { "none", "eh_frame", "debug_frame", "eh_frame+debug_frame" };

static int check_dir(int fd)
{
	struct stat st;
	if (fstat(fd, &st))
		return -errno;
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022))
		return -EPERM;
	return 0;
}

/* Opens (creating 0700 when missing) each component of path below an existing root. */
static int open_dir_path(const char *path)
{
	char buf[PATH_MAX];
	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf) || buf[0] != '/')
		return -EINVAL;
	int fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	char *save = NULL;
	for (char *c = strtok_r(buf, "/", &save); c && fd >= 0; c = strtok_r(NULL, "/", &save)) {
		if (mkdirat(fd, c, 0700) && errno != EEXIST) {
			int e = -errno;
			close(fd);
			return e;
		}
		int next = openat(fd, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		int e = -errno;
		close(fd);
		if (next < 0)
			return e;
		fd = next;
	}
	return fd;
}

int vp_cfi__cache_open(void)
{
	const char *env = getenv("VIPROF_UNWIND_CACHE");
	char path[PATH_MAX];
	if (env && !strcmp(env, "off"))
		return -ENOENT;
	if (env && *env)
		snprintf(path, sizeof(path), "%s", env);
	else if (geteuid() == 0)
		snprintf(path, sizeof(path), "/var/cache/viprof/unwind");
	else if ((env = getenv("XDG_CACHE_HOME")) && env[0] == '/')
		snprintf(path, sizeof(path), "%s/viprof/unwind", env);
	else if ((env = getenv("HOME")) && env[0] == '/')
		snprintf(path, sizeof(path), "%s/.cache/viprof/unwind", env);
	else
		return -ENOENT;
	int fd = open_dir_path(path);
	if (fd < 0)
		return fd;
	int e = check_dir(fd);
	if (e) {
		close(fd);
		return e;
	}
	/* Entries past their age go even when this recording stores nothing. */
	uint64_t max_bytes, max_age_s;
	vp_cfi__cache_bounds(&max_bytes, &max_age_s);
	vp_cfi__cache_trim(fd, max_bytes, max_age_s);
	return fd;
}

static void cache_name(const struct vp_cfi_key *k, char *out, size_t len)
{
	snprintf(out, len, "%llx-%llx-%llx-%llx.v%u", (unsigned long long)k->dev, (unsigned long long)k->ino,
		 (unsigned long long)k->size, (unsigned long long)k->mtime_ns, VP_CFI_CACHE_VERSION);
}

/* "123", "64K", "256M", "1G": bytes; -1 when it is not one. */
static long long parse_bytes(const char *s)
{
	char *end;
	if (!s || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	unsigned shift = 0;
	if (*end == 'K' || *end == 'k')
		shift = 10, end++;
	else if (*end == 'M' || *end == 'm')
		shift = 20, end++;
	else if (*end == 'G' || *end == 'g')
		shift = 30, end++;
	if (errno || *end || v > (unsigned long long)LLONG_MAX >> shift)
		return -1;
	return (long long)(v << shift);
}

void vp_cfi__cache_bounds(uint64_t *max_bytes, uint64_t *max_age_s)
{
	const char *v = getenv("VIPROF_UNWIND_CACHE_MAX");
	long long b = v && *v ? parse_bytes(v) : -1;
	double a = -1;
	if ((v = getenv("VIPROF_UNWIND_CACHE_AGE")) && *v)
		a = vp_parse_duration(v);
	*max_bytes = b >= 0 ? (uint64_t)b : VP_CFI_CACHE_DEFAULT_MAX;
	*max_age_s = a >= 0 ? (uint64_t)a : VP_CFI_CACHE_DEFAULT_AGE_S;
}

struct cache_ent {
	char name[64];
	int64_t used_ns;   /* the mtime: the last store or load (cache_load touches it) */
	uint64_t bytes;
};

static int ent_by_use(const void *a, const void *b)
{
	const struct cache_ent *x = a, *y = b;
	return x->used_ns < y->used_ns ? -1 : x->used_ns > y->used_ns;
}

int vp_cfi__cache_trim(int dirfd, uint64_t max_bytes, uint64_t max_age_s)
{
	struct cache_ent *ents = NULL;
	size_t n = 0, cap = 0;
	uint64_t total = 0;
	int removed = 0, e = 0;
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	int64_t now_ns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;

	DIR *d = vp_dir__stream(dirfd);
	if (!d)
		return -errno;
	for (struct dirent *de; (de = readdir(d));) {
		unsigned long long x[4];
		unsigned ver;
		int used = 0;
		struct stat st;
		const char *name = de->d_name;
		bool tmp = name[0] == '.';
		if (!strcmp(name, ".") || !strcmp(name, ".."))
			continue;
		/* Only what cache_name and cache_store make; anything else is not ours to judge. */
		if (sscanf(name + tmp, "%llx-%llx-%llx-%llx.v%u%n", &x[0], &x[1], &x[2], &x[3], &ver, &used) != 5 ||
		    strlen(name) >= sizeof(ents[0].name) || (!tmp && name[used]))
			continue;
		if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode) || st.st_uid != geteuid())
			continue;
		int64_t mt = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
		int64_t age_s = (now_ns - mt) / 1000000000;
		/* A temporary file is a writer's until it renames it: one this old was left
		 * by a writer that died. An entry of another format version is never read. */
		bool drop = tmp ? age_s > VP_CFI_CACHE_TMP_AGE_S
				: ver != VP_CFI_CACHE_VERSION || (max_age_s && age_s > (int64_t)max_age_s);
		if (drop) {
			if (unlinkat(dirfd, name, 0) == 0)
				removed++;
			continue;
		}
		if (tmp)
			continue;
		if (vp_grow((void **)&ents, &cap, n + 1, sizeof(*ents))) {
			e = -ENOMEM;
			goto cleanup;
		}
		snprintf(ents[n].name, sizeof(ents[n].name), "%s", name);
		ents[n].used_ns = mt;
		ents[n].bytes = (uint64_t)st.st_size;
		total += ents[n].bytes;
		n++;
	}
	/* Over the bound: the least recently used go first. */
	if (max_bytes && total > max_bytes) {
		vp_sort(ents, n, sizeof(*ents), ent_by_use);
		for (size_t i = 0; i < n && total > max_bytes; i++) {
			if (unlinkat(dirfd, ents[i].name, 0) == 0 || errno == ENOENT) {
				total -= ents[i].bytes;
				removed++;
			}
		}
	}
cleanup:
	free(ents);
	closedir(d);
	return e ? e : removed;
}

struct vp_cfi *vp_cfi__cache_load(int dirfd, const struct vp_cfi_key *k)
{
	char name[128];
	struct vp_cfi_cache_hdr h;
	struct stat st;
	struct vp_cfi *t = NULL;
	int err = EBADMSG;

	cache_name(k, name, sizeof(name));
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		errno = ENOENT;
		return NULL;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022))
		goto cleanup;
	if (pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
		goto cleanup;
	if (memcmp(h.magic, VP_CFI_CACHE_MAGIC, 8) || h.version != VP_CFI_CACHE_VERSION || h.hdr_size != sizeof(h) ||
	    h.dev != k->dev || h.ino != k->ino || h.size != k->size || h.mtime_ns != k->mtime_ns ||
	    h.nsegs > VP_CFI_CACHE_SEGS || h.nsegs > MAX_SEGS || h.source >= 4 || (h.flags & ~1u) ||
	    (uint64_t)st.st_size != sizeof(h) + (uint64_t)h.nrules * sizeof(struct vpb_rule))
		goto cleanup;
	t = calloc(1, sizeof(*t));
	if (!t || (h.nrules && !(t->rules = malloc((size_t)h.nrules * sizeof(*t->rules))))) {
		err = ENOMEM;
		goto cleanup;
	}
	size_t bytes = (size_t)h.nrules * sizeof(*t->rules);
	if (bytes && pread(fd, t->rules, bytes, sizeof(h)) != (ssize_t)bytes)
		goto cleanup;
	if ((uint32_t)crc32(0L, (const Bytef *)t->rules, (uInt)bytes) != h.rules_crc32)
		goto cleanup;
	for (uint32_t i = 0; i < h.nrules; i++)
		if (t->rules[i].kind > VPB_RULE_END || (i && t->rules[i].pc <= t->rules[i - 1].pc))
			goto cleanup;
	t->n = t->cap = h.nrules;
	t->base = h.base;
	t->nsegs = (int)h.nsegs;
	for (uint32_t i = 0; i < h.nsegs; i++)
		t->segs[i] = (struct seg){ h.segs[i][0], h.segs[i][1], h.segs[i][2], h.segs[i][3] };
	t->source = cache_sources[h.source];
	t->cut = h.flags & 1;
	/* Used now: the trim removes the least recently used entries first. */
	futimens(fd, NULL);
	close(fd);
	return t;
cleanup:
	vp_cfi__free(t);
	close(fd);
	errno = err;
	return NULL;
}

int vp_cfi__cache_store(int dirfd, const struct vp_cfi_key *k, const struct vp_cfi *t)
{
	char name[128], tmp[160];
	struct vp_cfi_cache_hdr h;
	int e = 0;

	uint64_t max_bytes, max_age_s;
	/* A refused table is rebuilt (quickly: the check fails early) so that its reason is
	 * reported again. */
	if (t->failed || t->refused[0] || t->n > UINT32_MAX || t->nsegs > VP_CFI_CACHE_SEGS)
		return -EINVAL;
	vp_cfi__cache_bounds(&max_bytes, &max_age_s);
	if (max_bytes && sizeof(h) + t->n * sizeof(*t->rules) > max_bytes)
		return -EFBIG;   /* it alone would not fit: kept in memory only */
	memset(&h, 0, sizeof(h));
	memcpy(h.magic, VP_CFI_CACHE_MAGIC, 8);
	h.version = VP_CFI_CACHE_VERSION;
	h.hdr_size = sizeof(h);
	h.dev = k->dev, h.ino = k->ino, h.size = k->size, h.mtime_ns = k->mtime_ns;
	h.base = t->base;
	h.nsegs = (uint32_t)t->nsegs;
	h.nrules = (uint32_t)t->n;
	for (uint32_t i = 0; i < 4; i++)
		if (!strcmp(t->source, cache_sources[i]))
			h.source = i;
	h.flags = t->cut ? 1 : 0;
	for (int i = 0; i < t->nsegs; i++) {
		h.segs[i][0] = t->segs[i].off;
		h.segs[i][1] = t->segs[i].vaddr;
		h.segs[i][2] = t->segs[i].filesz;
		h.segs[i][3] = t->segs[i].memsz;
	}
	size_t bytes = t->n * sizeof(*t->rules);
	h.rules_crc32 = (uint32_t)crc32(0L, (const Bytef *)t->rules, (uInt)bytes);
	cache_name(k, name, sizeof(name));
	snprintf(tmp, sizeof(tmp), ".%s.%d", name, (int)getpid());
	int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (write(fd, &h, sizeof(h)) != (ssize_t)sizeof(h) ||
	    (bytes && write(fd, t->rules, bytes) != (ssize_t)bytes))
		e = errno ? -errno : -EIO;
	if (close(fd) && !e)
		e = -errno;
	if (!e && renameat(dirfd, tmp, dirfd, name))
		e = -errno;
	if (e)
		unlinkat(dirfd, tmp, 0);
	else
		vp_cfi__cache_trim(dirfd, max_bytes, max_age_s);
	return e;
}
