/* Two `viprof record` sessions at once, with different events (cpu-clock and
 * task-clock) on two split3 workloads with different arguments: each session's
 * work50/work30/work20 split matches its own solo run within +-3 percentage points,
 * and nothing global couples the two recorders: no BPF object pinned under
 * /sys/fs/bpf, and no file that both have open (no fixed file names).
 * argv[1] = viprof, argv[2] = split3. Needs root (BPF or perf events system-wide). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "test.h"
#include "test-run.h"
#include "common/chunkfile.h"
#include "common/session_format.h"

static const char *viprof, *split3;

/* work50, work30, work20 of split3, as ELF virtual address ranges. */
static const char *const fn_names[3] = { "work50", "work30", "work20" };
static uint64_t fn_lo[3], fn_hi[3];

struct seg { uint64_t off, filesz, vaddr; };
static struct seg segs[8];
static int nsegs;

static void load_split3_symbols(void)
{
	int fd = open(split3, O_RDONLY);
	Elf_Scn *scn = NULL;
	size_t nph;
	Elf *elf;

	ASSERT_GE(fd, 0);
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ, NULL);
	ASSERT_NOT_NULL(elf);
	ASSERT_OK(elf_getphdrnum(elf, &nph));
	for (size_t i = 0; i < nph && nsegs < 8; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD)
			segs[nsegs++] = (struct seg){ ph.p_offset, ph.p_filesz, ph.p_vaddr };
	}
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		gelf_getshdr(scn, &sh);
		if (sh.sh_type != SHT_SYMTAB)
			continue;
		d = elf_getdata(scn, NULL);
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym s;
			const char *name;

			gelf_getsym(d, (int)i, &s);
			name = elf_strptr(elf, sh.sh_link, s.st_name);
			for (int k = 0; name && k < 3; k++)
				if (!strcmp(name, fn_names[k])) {
					fn_lo[k] = s.st_value;
					fn_hi[k] = s.st_value + s.st_size;
				}
		}
	}
	for (int k = 0; k < 3; k++)
		if (!fn_hi[k])
			FAIL("%s has no symbol %s", split3, fn_names[k]);
	elf_end(elf);
	close(fd);
}

struct split { uint64_t n[3]; uint64_t samples; double pct[3]; };

/* Leaf user IPs of the session's samples, through its MMAP records of split3, into
 * work50/30/20 counts. A reader of its own (not postproc's), so that this test checks
 * the recorders and not the report. */
static struct split session_split(const char *dir)
{
	struct { uint32_t pid; uint64_t start, len, pgoff; } maps[16];
	int nmaps = 0;
	char path[PATH_MAX], err[256];
	const struct vp_record *r;
	struct cfile_reader *rd;
	struct split sp = { 0 };
	char real[PATH_MAX];

	ASSERT_NOT_NULL(realpath(split3, real));
	snprintf(path, sizeof(path), "%s/%s", dir, VP_SESSION_STREAM);
	rd = cfile_reader__open(path, VP_KIND_SESSION_STREAM, err, sizeof(err));
	if (!rd)
		FAIL("%s", err);
	while (cfile_reader__next(rd, &r) == 1) {
		if (r->type == VP_REC_MMAP && nmaps < 16) {
			const struct vp_mmap *m = vp_record_body(r);
			size_t fl = vp_record_body_len(r) - sizeof(*m);

			if (vp_record_body_len(r) > sizeof(*m) && strnlen(m->filename, fl) < fl &&
			    !strcmp(m->filename, real)) {
				maps[nmaps].pid = m->pid;
				maps[nmaps].start = m->start;
				maps[nmaps].len = m->len;
				maps[nmaps].pgoff = m->pgoff;
				nmaps++;
			}
		} else if (r->type == VP_REC_SAMPLE) {
			const struct vp_sample *s = vp_record_body(r);
			uint64_t ip;

			if (vp_record_body_len(r) < sizeof(*s) + sizeof(uint64_t) ||
			    s->mode != VP_MODE_USER)
				continue;
			sp.samples++;
			ip = s->ips[s->nr_kernel];
			for (int i = 0; i < nmaps; i++) {
				if (maps[i].pid != s->pid || ip < maps[i].start || ip >= maps[i].start + maps[i].len)
					continue;
				uint64_t off = ip - maps[i].start + maps[i].pgoff;

				for (int g = 0; g < nsegs; g++) {
					if (off < segs[g].off || off >= segs[g].off + segs[g].filesz)
						continue;
					uint64_t va = off - segs[g].off + segs[g].vaddr;

					for (int k = 0; k < 3; k++)
						if (va >= fn_lo[k] && va < fn_hi[k])
							sp.n[k]++;
				}
			}
		}
	}
	cfile_reader__close(rd);
	uint64_t tot = sp.n[0] + sp.n[1] + sp.n[2];
	if (tot < 1000)
		FAIL("%s: only %" PRIu64 " samples in work50/30/20 (of %" PRIu64 " user samples, %d split3 maps)",
		     dir, tot, sp.samples, nmaps);
	for (int k = 0; k < 3; k++)
		sp.pct[k] = 100.0 * (double)sp.n[k] / (double)tot;
	return sp;
}

static pid_t start_record(const char *event, const char *dir, const char *secs, const char *log)
{
	/* 2999 Hz: thousands of samples per run even when other work shares the two
	 * vCPUs, so that sampling noise stays well inside the 3 pp budget. */
	return run_start((char *const[]){ (char *)viprof, "record", "-q", "--force", "-F", "2999", "-e", (char *)event,
					  "-o", (char *)dir, "--", (char *)split3, (char *)secs, NULL }, log, log);
}
static void finish_record(pid_t pid, const char *log)
{
	int status = run_wait_code(pid, 100);

	if (status != 0) {
		char buf[2048] = "";
		FILE *f = fopen(log, "r");

		if (f) {
			buf[fread(buf, 1, sizeof(buf) - 1, f)] = '\0';
			fclose(f);
		}
		if (strstr(buf, "ermission") || strstr(buf, "CAP_"))
			SKIP("viprof record cannot sample here: %s", buf);
		FAIL("viprof record failed (status %d): %s", status, buf);
	}
}

/* Regular files a process has open for writing, as "dev:ino" keys. Read-only files
 * (/proc/kallsyms, the binaries) do not couple two recorders; shared output would. */
static int open_files(pid_t pid, char keys[][48], int max)
{
	char dir[64], p[384];
	struct dirent *d;
	DIR *dd;
	int n = 0;

	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
	if (!(dd = opendir(dir)))
		return 0;
	while ((d = readdir(dd)) && n < max) {
		struct stat st;

		snprintf(p, sizeof(p), "%s/%s", dir, d->d_name);
		if (d->d_name[0] == '.' || stat(p, &st) || !S_ISREG(st.st_mode))
			continue;
		snprintf(p, sizeof(p), "/proc/%d/fdinfo/%s", (int)pid, d->d_name);
		FILE *fi = fopen(p, "r");
		char line[128];
		unsigned flags = 0;

		while (fi && fgets(line, sizeof(line), fi))
			sscanf(line, "flags: %o", &flags);
		if (fi)
			fclose(fi);
		if ((flags & O_ACCMODE) == O_RDONLY)
			continue;
		snprintf(keys[n++], 48, "%lu:%lu", (unsigned long)st.st_dev, (unsigned long)st.st_ino);
	}
	closedir(dd);
	return n;
}

/* Whether pid has a file whose path ends with suffix open (its session's stream). */
static bool has_open(pid_t pid, const char *suffix)
{
	char dir[64], p[PATH_MAX], target[PATH_MAX];
	struct dirent *d;
	bool found = false;
	size_t ls = strlen(suffix);

	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
	DIR *dd = opendir(dir);
	if (!dd)
		return false;
	while (!found && (d = readdir(dd))) {
		snprintf(p, sizeof(p), "%s/%s", dir, d->d_name);
		ssize_t n = readlink(p, target, sizeof(target) - 1);
		if (n <= 0)
			continue;
		target[n] = '\0';
		found = (size_t)n >= ls && !strcmp(target + n - ls, suffix);
	}
	closedir(dd);
	return found;
}

static int bpffs_entries;

static int count_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	bpffs_entries++;
	return 0;
}

/* Everything pinned anywhere under the BPF filesystem (maps, programs, links, dirs). */
static int count_bpffs(void)
{
	bpffs_entries = 0;
	if (nftw("/sys/fs/bpf", count_entry, 16, FTW_PHYS) != 0)
		return 0;
	return bpffs_entries;
}

int main(int argc, char **argv)
{
	struct split soloA, soloB, conA, conB;
	char fa[64][48], fb[64][48], mine[64][48];
	int bpf_before;

	if (argc < 3)
		FAIL("usage: test-concurrent viprof split3");
	viprof = argv[1];
	split3 = argv[2];
	REQUIRE_ROOT();
	load_split3_symbols();

	finish_record(start_record("cpu-clock", "conc-soloA", "3", "conc-soloA.log"), "conc-soloA.log");
	soloA = session_split("conc-soloA");
	finish_record(start_record("task-clock", "conc-soloB", "2.5", "conc-soloB.log"), "conc-soloB.log");
	soloB = session_split("conc-soloB");

	bpf_before = count_bpffs();
	pid_t a = start_record("cpu-clock", "conc-A", "3", "conc-A.log");
	pid_t b = start_record("task-clock", "conc-B", "2.5", "conc-B.log");
	/* Mid-run, both recording (each has its session's stream open): no open file in
	 * common (each writes only its own session directory). */
	for (int i = 0; !has_open(a, "/conc-A/" VP_SESSION_STREAM) || !has_open(b, "/conc-B/" VP_SESSION_STREAM); i++) {
		if (i > 3000)
			FAIL("the two recorders did not both open their session's stream within 60 s");
		usleep(20000);
	}
	int na = open_files(a, fa, 64), nb = open_files(b, fb, 64), nm = open_files(getpid(), mine, 64);
	ASSERT_GT(na, 0);
	for (int i = 0; i < na; i++) {
		bool inherited = false;

		/* Files the recorders inherited from us (ctest's log on stdout) do not count. */
		for (int k = 0; k < nm; k++)
			inherited |= !strcmp(fa[i], mine[k]);
		for (int j = 0; j < nb && !inherited; j++)
			if (!strcmp(fa[i], fb[j]))
				FAIL("both recorders have file %s (dev:ino) open for writing", fa[i]);
	}
	ASSERT_EQ(count_bpffs(), bpf_before);   /* nothing pinned */
	finish_record(a, "conc-A.log");
	finish_record(b, "conc-B.log");
	conA = session_split("conc-A");
	conB = session_split("conc-B");

	fprintf(stderr, "cpu-clock  solo %5.1f/%5.1f/%5.1f  concurrent %5.1f/%5.1f/%5.1f (%" PRIu64 "/%" PRIu64 " samples)\n",
		soloA.pct[0], soloA.pct[1], soloA.pct[2], conA.pct[0], conA.pct[1], conA.pct[2],
		soloA.samples, conA.samples);
	fprintf(stderr, "task-clock solo %5.1f/%5.1f/%5.1f  concurrent %5.1f/%5.1f/%5.1f (%" PRIu64 "/%" PRIu64 " samples)\n",
		soloB.pct[0], soloB.pct[1], soloB.pct[2], conB.pct[0], conB.pct[1], conB.pct[2],
		soloB.samples, conB.samples);
	for (int k = 0; k < 3; k++) {
		ASSERT_DBL_NEAR(conA.pct[k], soloA.pct[k], 3.0);
		ASSERT_DBL_NEAR(conB.pct[k], soloB.pct[k], 3.0);
	}
	printf("test-concurrent: ok\n");
	return 0;
}
