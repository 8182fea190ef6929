/* vDSO frames named on another kernel (issue 26): the recorder saves the kernel's vDSO
 * image in the session (VP_REC_VDSO), and the report names [vdso] frames from it. A
 * recording of a program that lives in clock_gettime is reported as is: every [vdso]
 * frame is named by the vDSO symbol that covers it, or left [vdso]+0x... only where no
 * symbol covers the address (issue 30: a helper the vDSO does not export), and most
 * samples are under clock_gettime. Then it is copied with its "kernel" metadata set to
 * another release and the saved image's symbol names changed: the copy's frames carry
 * the changed names, so they came from the session and not from this machine's vDSO. */
#include <elf.h>
#include <limits.h>
#include <sys/auxv.h>
#include <sys/stat.h>

#include "common/chunkfile.h"
#include "common/session_format.h"
#include "postproc/session.h"
#include "test-run.h"

/* The symbols of this process's vDSO (the kernel the recording ran on), read here from
 * the image's .dynsym apart from the report's ELF reader: which addresses a name covers.
 * Kernels differ: some call helpers the vDSO exports no symbol for (6.18's
 * __vdso_clock_gettime calls one at [vdso]+0x79d), which no report can name. */
struct vsym {
	char name[64];
	uint64_t start, end;   /* image-relative, [start, end) */
};
static struct vsym vsyms[64];
static int nvsyms;
static uint64_t vbase;   /* the first PT_LOAD's vaddr: where the mapping's offset 0 lies */

static void read_vdso_symbols(void)
{
	const unsigned char *img = (const void *)getauxval(AT_SYSINFO_EHDR);
	if (!img)
		SKIP("no vDSO in this process (AT_SYSINFO_EHDR is 0)");
	const Elf64_Ehdr *eh = (const void *)img;
	const Elf64_Phdr *ph = (const void *)(img + eh->e_phoff);
	for (int i = eh->e_phnum - 1; i >= 0; i--)
		if (ph[i].p_type == PT_LOAD)
			vbase = ph[i].p_vaddr - ph[i].p_offset;
	const Elf64_Shdr *sh = (const void *)(img + eh->e_shoff);
	for (int i = 0; i < eh->e_shnum; i++) {
		if (sh[i].sh_type != SHT_DYNSYM)
			continue;
		const Elf64_Sym *sym = (const void *)(img + sh[i].sh_offset);
		const char *str = (const char *)(img + sh[sh[i].sh_link].sh_offset);
		for (size_t j = 0; j < sh[i].sh_size / sizeof(*sym) && nvsyms < 64; j++) {
			if (ELF64_ST_TYPE(sym[j].st_info) != STT_FUNC || !sym[j].st_value)
				continue;
			struct vsym *v = &vsyms[nvsyms++];
			snprintf(v->name, sizeof(v->name), "%s", str + sym[j].st_name);
			v->start = sym[j].st_value - vbase;
			v->end = v->start + (sym[j].st_size ? sym[j].st_size : 1);
		}
	}
	if (!nvsyms)
		SKIP("this kernel's vDSO has no function symbols");
}

/* A symbol of the vDSO covering image offset off, or NULL. */
static const struct vsym *covering(uint64_t off)
{
	for (int i = 0; i < nvsyms; i++)
		if (off >= vsyms[i].start && off < vsyms[i].end)
			return &vsyms[i];
	return NULL;
}

struct vdso_counts {
	uint64_t all;           /* samples whose leaf is a [vdso] frame */
	uint64_t leaf_named;    /* ... named by a symbol */
	uint64_t leaf_helper;   /* ... at an address no vDSO symbol covers */
	uint64_t want;          /* ... whose innermost named [vdso] frame (leaf or caller) contains want */
};

/* Every [vdso] frame of the profile is either named by a symbol that covers its address
 * (a symbol renamed in the saved image, "clock_gettimX", counts as its original) or
 * unnamed at an address no symbol covers; the counts are of [vdso] leaves. */
static void vdso_frames(const char *dir, const char *want, struct vdso_counts *c)
{
	struct vp_profile *p = vp_profile__new();
	char err[512] = "";
	ASSERT_NOT_NULL(p);
	struct vp_session_opts o = { .no_locations = true };
	if (vp_session__load(dir, p, &o, err, sizeof(err)))
		FAIL("loading %s: %s", dir, err);
	memset(c, 0, sizeof(*c));
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct vp_stack *s = &p->stacks[i];
		uint64_t n = 0;
		for (int e = 0; e < p->nevents; e++)
			n += s->samples[e];
		const char *named = NULL;   /* innermost named [vdso] frame */
		for (size_t f = s->nframes; f-- > 0;) {
			const struct vp_frame *fr = &p->frames[s->frames[f]];
			if (strcmp(fr->image, "[vdso]"))
				continue;
			if (!strncmp(fr->name, "[vdso]+0x", 9)) {
				uint64_t off = strtoull(fr->name + 9, NULL, 16);
				const struct vsym *v = covering(off);
				if (v)
					FAIL("%s is unnamed, but the vDSO's %s covers it [0x%llx, 0x%llx)", fr->name, v->name,
					     (unsigned long long)v->start, (unsigned long long)v->end);
				if (f == s->nframes - 1)
					c->leaf_helper += n;
				continue;
			}
			char orig[64];
			snprintf(orig, sizeof(orig), "%s", fr->name);
			char *x = strstr(orig, "clock_gettimX");
			if (x)
				x[12] = 'e';
			bool ok = false;
			for (int k = 0; k < nvsyms && !ok; k++)
				ok = !strcmp(vsyms[k].name, orig) && fr->addr >= vsyms[k].start && fr->addr < vsyms[k].end;
			if (!ok)
				FAIL("[vdso] frame named %s at 0x%llx: no vDSO symbol of that name covers it", fr->name,
				     (unsigned long long)fr->addr);
			if (f == s->nframes - 1)
				c->leaf_named += n;
			if (!named)
				named = fr->name;
		}
		if (!s->nframes || strcmp(p->frames[s->frames[s->nframes - 1]].image, "[vdso]"))
			continue;
		c->all += n;
		if (named && strstr(named, want))
			c->want += n;
	}
	vp_profile__free(p);
}

/* Copies src's stream to dst with META kernel set to another release and every
 * "clock_gettime" in the VDSO record's image renamed "clock_gettimX" (same length). */
static void copy_as_other_kernel(const char *src, const char *dst, int *vdso_records)
{
	char in[PATH_MAX + 32], out[PATH_MAX + 32], err[512];
	snprintf(in, sizeof(in), "%s/%s", src, VP_SESSION_STREAM);
	snprintf(out, sizeof(out), "%s/%s", dst, VP_SESSION_STREAM);
	ASSERT_OK(mkdir(dst, 0700));
	struct cfile_reader *r = cfile_reader__open(in, VP_KIND_SESSION_STREAM, err, sizeof(err));
	if (!r)
		FAIL("%s", err);
	struct cfile_writer *w = cfile_writer__create(out, VP_KIND_SESSION_STREAM, VP_SESSION_FORMAT_VERSION, 0, true);
	ASSERT_NOT_NULL(w);
	const struct vp_record *rec;
	int k;
	*vdso_records = 0;
	while ((k = cfile_reader__next(r, &rec)) == 1) {
		size_t len = vp_record_body_len(rec);
		char *body = malloc(len + 64);
		ASSERT_NOT_NULL(body);
		memcpy(body, vp_record_body(rec), len);
		if (rec->type == VP_REC_VDSO) {
			++*vdso_records;
			for (size_t i = 0; i + 13 <= len; i++)
				if (!memcmp(body + i, "clock_gettime", 13))
					body[i + 12] = 'X';
		} else if (rec->type == VP_REC_META) {
			/* "key\0value\0" pairs: the kernel's value replaced. */
			char *nb = malloc(len + 64);
			size_t nl = 0;
			ASSERT_NOT_NULL(nb);
			for (size_t i = 0; i < len && body[i];) {
				const char *key = body + i, *val = key + strnlen(key, len - i) + 1;
				if (val >= body + len)
					break;
				size_t kl = strlen(key) + 1, vl = strnlen(val, (size_t)(body + len - val));
				const char *v = !strcmp(key, "kernel") ? "0.0.0-another-kernel" : val;
				size_t vlen = !strcmp(key, "kernel") ? strlen(v) : vl;
				memcpy(nb + nl, key, kl);
				memcpy(nb + nl + kl, v, vlen);
				nb[nl + kl + vlen] = '\0';
				nl += kl + vlen + 1;
				i = (size_t)(val - body) + vl + 1;
			}
			free(body);
			body = nb;
			len = nl;
		}
		ASSERT_OK(cfile_writer__append(w, rec->type, rec->time, body, len));
		free(body);
	}
	ASSERT_EQ(k, 0);
	ASSERT_OK(cfile_writer__close(w));
	cfile_reader__close(r);
}

int main(int argc, char **argv)
{
	if (argc < 3)
		FAIL("usage: test-vdso-session VIPROF VDSO_LOOP");
	if (geteuid() != 0)
		SKIP("needs root to record");
	char dir[] = "/tmp/vp-test-vdso-XXXXXX", sess[PATH_MAX], other[PATH_MAX], log[16384];
	ASSERT_NOT_NULL(mkdtemp(dir));
	snprintf(sess, sizeof(sess), "%s/s", dir);
	snprintf(other, sizeof(other), "%s/other", dir);
	int rc = run_logged(dir, (char *const[]){ argv[1], "record", "-q", "-g", "-F", "999", "-o", sess, "--", argv[2], "1", NULL },
			log, sizeof(log), 100);
	if (rc)
		FAIL("record exited %d: %s", rc, log);

	read_vdso_symbols();
	struct vdso_counts c, c2;
	vdso_frames(sess, "clock_gettime", &c);
	fprintf(stderr, "%llu samples in the vDSO: %llu named, %llu in code no vDSO symbol covers; %llu under "
			"clock_gettime\n", (unsigned long long)c.all, (unsigned long long)c.leaf_named,
		(unsigned long long)c.leaf_helper, (unsigned long long)c.want);
	/* 1 CPU-s of clock_gettime at 999 Hz. Where the kernel's clock cannot be read in
	 * user mode (a clocksource without a vDSO mode), clock_gettime falls back to the
	 * system call and few samples land in the vDSO: too few to check its names. */
	if (c.all < 20)
		SKIP("only %llu samples in the vDSO of a program that calls clock_gettime for 1 CPU-s: this kernel's "
		     "clock_gettime runs mostly in the kernel (vDSO fallback to the system call)", (unsigned long long)c.all);
	ASSERT_UEQ(c.leaf_named + c.leaf_helper, c.all);
	/* The program calls clock_gettime and nothing else there: most samples are under it,
	 * by its own name or (in a helper) by its caller's. */
	ASSERT_GT(c.want, c.all / 2);

	int nv;
	copy_as_other_kernel(sess, other, &nv);
	ASSERT_EQ(nv, 1);   /* the recorder saved the image, once */
	vdso_frames(other, "clock_gettimX", &c2);
	ASSERT_UEQ(c2.all, c.all);
	ASSERT_UEQ(c2.leaf_named, c.leaf_named);
	ASSERT_UEQ(c2.want, c.want);

	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (run_sh(cmd, 50)) {
		/* left behind in /tmp */
	}
	printf("PASS: %llu vDSO samples named from the session's image\n", (unsigned long long)c.all);
	return 0;
}
