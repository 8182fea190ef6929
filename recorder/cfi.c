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

/* FDE start addresses from .eh_frame_hdr's search table (the usual encodings only), for
 * files whose section headers are gone: libdw then finds .eh_frame through it too. */
static size_t hdr_starts(Elf *e, const GElf_Phdr *ph, uint64_t **out)
{
	Elf_Data *d = elf_getdata_rawchunk(e, (int64_t)ph->p_offset, ph->p_filesz, ELF_T_BYTE);
	const uint8_t *b;
	size_t len;

	if (!d || !d->d_buf || d->d_size < 12)
		return 0;
	b = d->d_buf;
	len = d->d_size;
	/* version 1; eh_frame_ptr pcrel|sdata4; fde_count udata4; table datarel|sdata4 */
	if (b[0] != 1 || (b[1] & 0x0f) != 0x0b || b[2] != 0x03 || b[3] != 0x3b)
		return 0;
	uint32_t count;
	memcpy(&count, b + 8, 4);
	if (count == 0 || (size_t)count > (len - 12) / 8)
		return 0;
	uint64_t *v = malloc((size_t)count * sizeof(*v));
	if (!v)
		return 0;
	for (uint32_t i = 0; i < count; i++) {
		int32_t rel;

		memcpy(&rel, b + 12 + (size_t)i * 8, 4);
		v[i] = ph->p_vaddr + (uint64_t)(int64_t)rel;
	}
	*out = v;
	return count;
}

/* One DW_EH_PE-encoded value at *pp (advanced past it), within [*pp, end). Only what
 * x86-64 toolchains emit for FDE addresses: absolute or pc-relative, fixed-size or
 * LEB128. field_vaddr is the address *pp has when loaded, for pc-relative values. */
static bool read_encoded(const uint8_t **pp, const uint8_t *end, uint8_t enc, uint64_t field_vaddr,
			 uint64_t *val)
{
	const uint8_t *p = *pp;
	uint64_t v = 0;
	size_t size;
	int shift = 0;

	switch (enc & 0x0f) {
	case 0x00: case 0x04: case 0x0c: size = 8; break;   /* absptr, udata8, sdata8 */
	case 0x03: case 0x0b: size = 4; break;              /* udata4, sdata4 */
	case 0x02: case 0x0a: size = 2; break;              /* udata2, sdata2 */
	case 0x01: case 0x09:                               /* uleb128, sleb128 */
		do {
			if (p >= end || shift > 63)
				return false;
			v |= (uint64_t)(*p & 0x7f) << shift;
			shift += 7;
		} while (*p++ & 0x80);
		if ((enc & 0x0f) == 0x09 && shift < 64 && (p[-1] & 0x40))
			v |= ~(uint64_t)0 << shift;
		size = 0;
		break;
	default:
		return false;
	}
	if (size) {
		if ((size_t)(end - p) < size)
			return false;
		if (size == 8) {
			memcpy(&v, p, 8);
		} else if (size == 4) {
			uint32_t x;

			memcpy(&x, p, 4);
			v = (enc & 0x08) ? (uint64_t)(int64_t)(int32_t)x : x;
		} else {
			uint16_t x;

			memcpy(&x, p, 2);
			v = (enc & 0x08) ? (uint64_t)(int64_t)(int16_t)x : x;
		}
		p += size;
	}
	switch (enc & 0x70) {
	case 0x00: break;
	case 0x10: v += field_vaddr; break;
	default: return false;                              /* textrel, datarel, funcrel */
	}
	*pp = p;
	*val = v;
	return true;
}

/* The DW_EH_PE encoding a CIE's augmentation gives its FDEs' addresses ('R'); -1 when
 * the augmentation is one we cannot step through. */
static int cie_fde_encoding(const Dwarf_CIE *cie)
{
	const char *a = cie->augmentation;
	const uint8_t *p = cie->augmentation_data, *end = p + cie->augmentation_data_size;
	uint64_t skip;

	if (!a || a[0] != 'z')
		return a && a[0] == 0 ? 0 : -1;
	for (a++; *a; a++) {
		switch (*a) {
		case 'R':
			return p < end ? *p : -1;
		case 'L':
			if (p++ >= end)
				return -1;
			break;
		case 'P':           /* personality: an encoding byte, then a pointer in it */
			if (p >= end)
				return -1;
			uint8_t penc = *p++;
			if (!read_encoded(&p, end, penc & 0x0f, 0, &skip))
				return -1;
			break;
		case 'S': case 'B':
			break;
		default:
			return -1;
		}
	}
	return 0;
}

/* Appends the start of every FDE in one CFI section to *v (dwarf_next_cfi walks the
 * entries; only the address fields are decoded here). A damaged entry ends the walk:
 * the starts read so far are kept. */
static void section_starts(Elf *e, Elf_Scn *scn, bool eh, uint64_t **v, size_t *n, size_t *cap)
{
	GElf_Shdr sh;
	Elf_Data *d;
	const unsigned char *ident = (const unsigned char *)elf_getident(e, NULL);
	Dwarf_Off off = 0, next, last_cie = (Dwarf_Off)-1;
	int enc = 0;

	if (!ident || !gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
		return;
	if ((sh.sh_flags & SHF_COMPRESSED) && elf_compress(scn, 0, 0) < 0)
		return;
	if (!(d = elf_getdata(scn, NULL)) || !d->d_buf || d->d_size == 0)
		return;
	while (off < d->d_size) {
		Dwarf_CFI_Entry ent, cie;
		uint64_t lo, range;

		if (dwarf_next_cfi(ident, d, eh, off, &next, &ent) != 0 || next <= off)
			break;
		off = next;
		if (dwarf_cfi_cie_p(&ent))
			continue;
		if (!eh) {
			enc = 0;                    /* .debug_frame: plain 8-byte addresses */
		} else if (ent.fde.CIE_pointer != last_cie) {
			Dwarf_Off dummy;

			enc = dwarf_next_cfi(ident, d, eh, ent.fde.CIE_pointer, &dummy, &cie) == 0 &&
			      dwarf_cfi_cie_p(&cie) ? cie_fde_encoding(&cie.cie) : -1;
			last_cie = ent.fde.CIE_pointer;
		}
		const uint8_t *p = ent.fde.start, *end = ent.fde.end;
		if (enc < 0 || p < (const uint8_t *)d->d_buf || end > (const uint8_t *)d->d_buf + d->d_size ||
		    !read_encoded(&p, end, (uint8_t)enc, sh.sh_addr + (uint64_t)(p - (const uint8_t *)d->d_buf), &lo) ||
		    !read_encoded(&p, end, (uint8_t)(enc & 0x0f), 0, &range) || range == 0)
			continue;
		if (vp_grow((void **)v, cap, *n + 1, sizeof(**v)))
			return;
		(*v)[(*n)++] = lo;
	}
}

/* FDE starts from .eh_frame and .debug_frame, both: the walk jumps over code no FDE
 * covers to the next start, so a start missing here would hide that FDE's rules. */
static size_t fde_starts(Elf *e, uint64_t **out)
{
	Elf_Scn *scn = NULL;
	size_t n = 0, cap = 0, shstr;
	uint64_t *v = NULL;

	if (elf_getshdrstrndx(e, &shstr))
		return 0;
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		const char *name;

		if (!gelf_getshdr(scn, &sh) || !(name = elf_strptr(e, shstr, sh.sh_name)))
			continue;
		if (!strcmp(name, ".eh_frame"))
			section_starts(e, scn, true, &v, &n, &cap);
		else if (!strcmp(name, ".debug_frame"))
			section_starts(e, scn, false, &v, &n, &cap);
	}
	*out = v;
	return n;
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
	size_t nstarts = 0, nph;
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
	if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_machine != EM_X86_64) {
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
	GElf_Phdr hdr = { .p_type = PT_NULL };
	t->base = UINT64_MAX;
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(e, (int)i, &ph))
			continue;
		if (ph.p_type == PT_GNU_EH_FRAME)
			hdr = ph;
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
	ehcfi = dwarf_getcfi_elf(e);
	dw = dwarf_begin_elf(e, DWARF_C_READ, NULL);
	if (dw)
		dbgcfi = dwarf_getcfi(dw);
	/* After dwarf_begin_elf, which has decompressed a compressed .debug_frame. */
	nstarts = fde_starts(e, &starts);
	if (!nstarts && hdr.p_type == PT_GNU_EH_FRAME)
		nstarts = hdr_starts(e, &hdr, &starts);
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
	if (t->failed || t->n > UINT32_MAX || t->nsegs > VP_CFI_CACHE_SEGS)
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
