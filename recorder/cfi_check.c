/* Checking a file's CFI before libdw interprets it: see recorder/cfi_check.h. */
#define _GNU_SOURCE
#include "recorder/cfi_check.h"

#include <dwarf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

#define CFI_MAX_REG      255
#define CFI_MAX_NEST     64
#define CFI_MAX_ENTRIES  (1u << 20)    /* CIEs and FDEs libdw would keep (~100 bytes each) */
#define CFI_MAX_CIE_REGS (1u << 20)    /* the CIEs' register arrays together (16 MB) */
#define CFI_MAX_EXPR     (1u << 20)    /* bytes of DWARF expressions together */

struct cie_info {
	uint64_t key;           /* the CIE's offset + 1; 0: a free slot */
	uint8_t fde_enc;
	bool sized, usable;     /* usable: libdw takes it as a CIE */
};

struct cfi_check {
	const struct vp_cfi_sec *s;
	Elf_Data d;             /* the copy, as dwarf_next_cfi reads it */
	unsigned char ident[EI_NIDENT];
	struct cie_info *cies;  /* the CIEs checked (check_cie) */
	size_t ncies, capcies;
	uint64_t entries, cie_regs, expr, work;
	uint64_t **starts;      /* FDE start addresses, for walk_segment */
	size_t *nstarts, *capstarts;
	char *why;              /* the refusal, set once */
	size_t whylen;
};

__attribute__((format(printf, 3, 0)))
static bool refuse(struct cfi_check *c, uint64_t off, const char *fmt, unsigned long long a)
{
	char what[96];

	snprintf(what, sizeof(what), fmt, a);
	snprintf(c->why, c->whylen, "%s entry at offset %#llx: %s", c->s->eh ? ".eh_frame" : ".debug_frame",
		 (unsigned long long)off, what);
	return false;
}

/* A LEB128 number at *pp, as libdw reads it (at most 10 bytes, 9 signed); false when it
 * runs past end or on, which libdw would read differently from here. */
static bool leb(const uint8_t **pp, const uint8_t *end, bool sign, uint64_t *v)
{
	const uint8_t *p = *pp;
	uint64_t r = 0;

	for (unsigned i = 0; i < (sign ? 9u : 10u) && p < end; i++) {
		uint8_t b = *p++;

		r |= (uint64_t)(b & 0x7f) << (7 * i);
		if (!(b & 0x80)) {
			*pp = p;
			*v = r;
			return true;
		}
	}
	return false;
}

/* The bytes a DW_EH_PE-encoded address takes (libdw's read_encoded_value), 0 for the
 * encodings not checked here (LEB128, aligned; no x86-64 toolchain emits them). */
static size_t enc_size(uint8_t enc)
{
	if ((enc & 0x70) > 0x40)
		return 0;
	switch (enc & 0x0f) {
	case 0x00: case 0x04: case 0x0c: return 8;
	case 0x03: case 0x0b: return 4;
	case 0x02: case 0x0a: return 2;
	default: return 0;
	}
}

/* Operands of the DW_CFA opcodes below 0x40 that libdw knows: r a register (ULEB128),
 * u ULEB128, s SLEB128, 1 2 4 8 fixed bytes, a an address in the CIE's FDE encoding,
 * b a block (ULEB128 length, bytes). Opcodes without an entry are unknown. */
static const char *const cfa_ops[0x30] = {
	[0x00] = "", [0x01] = "a", [0x02] = "1", [0x03] = "2", [0x04] = "4", [0x05] = "ru", [0x06] = "r",
	[0x07] = "r", [0x08] = "r", [0x09] = "rr", [0x0a] = "", [0x0b] = "", [0x0c] = "ru", [0x0d] = "r",
	[0x0e] = "u", [0x0f] = "b", [0x10] = "rb", [0x11] = "rs", [0x12] = "rs", [0x13] = "s", [0x14] = "ru",
	[0x15] = "rs", [0x16] = "rb", [0x1d] = "8", [0x2d] = "", [0x2e] = "u", [0x2f] = "ru",
};

/* One CFA program [p, end) of the entry at off. *maxreg: the highest register it names. */
static bool check_program(struct cfi_check *c, uint64_t off, const uint8_t *p, const uint8_t *end, uint8_t fde_enc,
			  uint64_t *maxreg)
{
	unsigned depth = 0;

	c->work += (uint64_t)(end - p);
	while (p < end) {
		uint8_t o = *p++;
		uint64_t v;
		const char *ops;

		if (o >= 0x40) {            /* advance_loc, offset, restore: the register in the opcode */
			if (*maxreg < (o & 0x3fu) && (o & 0xc0) != 0x40)
				*maxreg = o & 0x3f;
			if ((o & 0xc0) == 0x80 && !leb(&p, end, false, &v))
				return refuse(c, off, "DW_CFA_offset's operand runs past the entry", 0);
			continue;
		}
		if (o >= sizeof(cfa_ops) / sizeof(cfa_ops[0]) || !(ops = cfa_ops[o]))
			return refuse(c, off, "unknown CFA opcode %#llx", o);
		if (o == 0x0a && ++depth > CFI_MAX_NEST)
			return refuse(c, off, "DW_CFA_remember_state nested more than %llu deep", CFI_MAX_NEST);
		if (o == 0x0b && depth)
			depth--;
		for (; *ops; ops++) {
			size_t n = 0;

			switch (*ops) {
			case 'r': case 'u': case 's': case 'b':
				if (!leb(&p, end, *ops == 's', &v))
					return refuse(c, off, "the operand of CFA opcode %#llx runs past the entry", o);
				if (*ops == 'r') {
					if (v > CFI_MAX_REG)
						return refuse(c, off, "DWARF register %llu, above the 255 checked here",
							      v);
					if (v > *maxreg)
						*maxreg = v;
				}
				if (*ops == 'b') {
					if (v > (uint64_t)(end - p))
						return refuse(c, off, "a DWARF expression of %llu bytes runs past the entry",
							      v);
					if ((c->expr += v) > CFI_MAX_EXPR)
						return refuse(c, off, "DWARF expressions over %llu bytes in all",
							      CFI_MAX_EXPR);
					n = (size_t)v;
				}
				break;
			case 'a':
				if (!(n = enc_size(fde_enc)))
					return refuse(c, off, "DW_CFA_set_loc in address encoding %#llx", fde_enc);
				break;
			default:
				n = (size_t)(*ops - '0');
				break;
			}
			if (n > (size_t)(end - p))
				return refuse(c, off, "the operand of CFA opcode %#llx runs past the entry", o);
			p += n;
		}
	}
	return true;
}

/* dwarf_next_cfi steps through a CIE's augmentation data by the letters of its
 * augmentation string before it compares the data's length, so a long string would have
 * it read past the section: a CIE here has the letters x86-64 toolchains use, each once,
 * after the 'z'. False (with the reason) for a CIE that has not. */
static bool augmentation_ok(struct cfi_check *c, uint64_t off)
{
	if (off >= c->s->size || c->s->size - off < 4)
		return true;                 /* dwarf_next_cfi: the end */
	const uint8_t *p = c->s->buf + off, *end = c->s->buf + c->s->size;
	uint64_t len, id = 0;
	uint32_t len32;
	size_t osz = 4;

	memcpy(&len32, p, 4);
	p += 4;
	len = len32;
	if (len32 == 0xffffffff) {
		if (end - p < 8)
			return true;
		memcpy(&len, p, 8);
		p += 8;
		osz = 8;
	}
	if (len < osz + 2 || len > (uint64_t)(end - p))
		return true;                 /* dwarf_next_cfi refuses it */
	const uint8_t *lim = p + len;
	memcpy(&id, p, osz);
	p += osz + 1;                        /* the id, the version */
	if (c->s->eh ? id != 0 : id != (osz == 4 ? 0xffffffffull : ~0ull))
		return true;                 /* an FDE */
	const uint8_t *nul = memchr(p, 0, (size_t)(lim - p));
	if (!nul || nul == p)
		return true;
	size_t k = (size_t)(nul - p);
	bool ok = k <= 5 && p[0] == 'z';
	for (size_t i = 1; ok && i < k; i++)
		ok = strchr("LPRS", p[i]) && !memchr(p + 1, p[i], i - 1);
	return ok || refuse(c, off, "a CIE augmentation string of %llu letters that no x86-64 toolchain emits", k);
}

/* What libdw's intern_new_cie reads from a CIE's augmentation: the FDEs' address encoding
 * (absolute made 8 bytes, as libdw does) and whether FDEs hold augmentation data. */
static bool cie_encoding(const Dwarf_CIE *cie, uint8_t *fde_enc, bool *sized)
{
	const uint8_t *d = cie->augmentation_data, *end = d + cie->augmentation_data_size;

	*fde_enc = 0;
	*sized = false;
	for (const char *a = cie->augmentation; *a; a++) {
		switch (*a) {
		case 'z':
			*sized = true;
			break;
		case 'S':
			break;
		case 'L': case 'R': case 'P':
			if (d >= end)
				return false;
			uint8_t e = *d++;
			if (*a == 'R')
				*fde_enc = e;
			if (*a == 'P') {
				/* libdw skips the pointer by the size its encoding's low bits give. */
				size_t n = (e & 7) == 0 || (e & 7) == 4 ? 8 : (e & 7) == 3 ? 4 : (e & 7) == 2 ? 2 : 0;
				if (!n || n > (size_t)(end - d))
					return false;
				d += n;
			}
			break;
		default:
			return false;
		}
	}
	if ((*fde_enc & 0x0f) == 0)
		*fde_enc |= 0x04;
	return true;
}


/* The CIE at off, checked once: what it says is kept in an open-addressed table, since
 * every FDE names one. */
static bool check_cie(struct cfi_check *c, uint64_t off, struct cie_info *out)
{
	Dwarf_CFI_Entry ent;
	Dwarf_Off next = off;

	if (c->ncies * 2 + 2 > c->capcies) {
		size_t cap = c->capcies ? c->capcies * 2 : 64;
		struct cie_info *v = calloc(cap, sizeof(*v));

		if (!v)
			return refuse(c, off, "out of memory checking the CIEs", 0);
		for (size_t i = 0; i < c->capcies; i++) {
			if (!c->cies[i].key)
				continue;
			size_t h = (size_t)(c->cies[i].key * 0x9e3779b97f4a7c15ull) & (cap - 1);
			while (v[h].key)
				h = (h + 1) & (cap - 1);
			v[h] = c->cies[i];
		}
		free(c->cies);
		c->cies = v;
		c->capcies = cap;
	}
	size_t h = (size_t)((off + 1) * 0x9e3779b97f4a7c15ull) & (c->capcies - 1);
	for (; c->cies[h].key; h = (h + 1) & (c->capcies - 1))
		if (c->cies[h].key == off + 1) {
			*out = c->cies[h];
			return true;
		}
	struct cie_info *ci = &c->cies[h];
	*ci = (struct cie_info){ .key = off + 1 };
	c->ncies++;
	if (++c->entries > CFI_MAX_ENTRIES)
		return refuse(c, off, "more than %llu entries", CFI_MAX_ENTRIES);
	if (!augmentation_ok(c, off))
		return false;
	if (dwarf_next_cfi(c->ident, &c->d, c->s->eh, off, &next, &ent) != 0 || !dwarf_cfi_cie_p(&ent)) {
		*out = *ci;
		return true;                 /* libdw will not use it: the FDEs naming it are skipped */
	}
	if (!cie_encoding(&ent.cie, &ci->fde_enc, &ci->sized))
		return refuse(c, off, "CIE augmentation data shorter than its letters ask", 0);
	if (ent.cie.return_address_register > CFI_MAX_REG)
		return refuse(c, off, "return-address register %llu, above the 255 checked here",
			      ent.cie.return_address_register);
	uint64_t maxreg = 16;            /* the ABI's initial rules name 0-16 */
	if (!check_program(c, off, ent.cie.initial_instructions, ent.cie.initial_instructions_end, ci->fde_enc,
			   &maxreg))
		return false;
	if ((c->cie_regs += maxreg + 1) > CFI_MAX_CIE_REGS)
		return refuse(c, off, "CIEs with more than %llu register rules in all", CFI_MAX_CIE_REGS);
	ci->usable = true;
	*out = *ci;
	return true;
}

/* One FDE, as libdw's intern_fde and execute_cfi read it. */
static bool check_fde(struct cfi_check *c, uint64_t off, const Dwarf_FDE *fde)
{
	struct cie_info ci;

	if (!check_cie(c, fde->CIE_pointer, &ci))
		return false;
	if (!ci.usable)
		return true;
	if (++c->entries > CFI_MAX_ENTRIES)
		return refuse(c, off, "more than %llu entries", CFI_MAX_ENTRIES);
	const uint8_t *p = fde->start, *end = fde->end, *send = c->s->buf + c->s->size;
	size_t n = enc_size(ci.fde_enc), m = enc_size(ci.fde_enc & 0x0f);
	if (!n || !m || n + m > (size_t)(send - p))
		return refuse(c, off, "FDE address in encoding %#llx", ci.fde_enc);
	uint64_t lo, range;
	const uint8_t *q = p;
	if (vp_cfi_read_encoded(&q, end, ci.fde_enc, c->s->vaddr + (uint64_t)(p - c->s->buf), &lo) &&
	    vp_cfi_read_encoded(&q, end, ci.fde_enc & 0x0f, 0, &range) && range) {
		if (vp_grow((void **)c->starts, c->capstarts, *c->nstarts + 1, sizeof(**c->starts)))
			return refuse(c, off, "out of memory", 0);
		(*c->starts)[(*c->nstarts)++] = lo;
	}
	p += n + m;
	if (p >= end)
		return true;                 /* no instructions */
	if (ci.sized) {
		uint64_t len;

		if (!leb(&p, end, false, &len) || len > (uint64_t)(end - p))
			return refuse(c, off, "FDE augmentation data runs past the entry", 0);
		p += len;
	}
	uint64_t maxreg = 0;
	return check_program(c, off, p, end, ci.fde_enc, &maxreg);
}

bool vp_cfi_check__section(const struct vp_cfi_sec *s, const unsigned char *ident, uint64_t **starts, size_t *nstarts,
			   size_t *capstarts, char *why, size_t whylen)
{
	struct cfi_check c = { .s = s, .starts = starts, .nstarts = nstarts, .capstarts = capstarts, .why = why,
			       .whylen = whylen };
	Dwarf_Off off = 0;
	bool ok = true;

	c.d.d_buf = s->buf;
	c.d.d_size = s->size;
	c.d.d_type = ELF_T_BYTE;
	memcpy(c.ident, ident, EI_NIDENT);
	while (ok && off < s->size) {
		Dwarf_CFI_Entry ent;
		Dwarf_Off next = off;

		if (!(ok = augmentation_ok(&c, off)))
			break;
		int rc = dwarf_next_cfi(c.ident, &c.d, s->eh, off, &next, &ent);
		if (rc > 0)
			break;                   /* the end */
		if (next <= off) {
			/* libdw would stop here too; a toolchain's section is never cut short. */
			ok = refuse(&c, off, "a length that does not fit the section (%llu bytes)", s->size);
			break;
		}
		if (rc == 0) {
			struct cie_info ci;

			ok = dwarf_cfi_cie_p(&ent) ? check_cie(&c, off, &ci) : check_fde(&c, off, &ent.fde);
		}
		/* A CIE whose pointers overlap everything would be read again and again. */
		if (ok && c.work > 4 * (uint64_t)s->size + 4096)
			ok = refuse(&c, off, "CIEs overlapping the rest of the section", 0);
		off = next;
	}
	free(c.cies);
	return ok;
}

bool vp_cfi_read_encoded(const uint8_t **pp, const uint8_t *end, uint8_t enc, uint64_t field_vaddr, uint64_t *val)
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
