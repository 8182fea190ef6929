/* test-cfi-readelf: the unwind rules recorder/cfi.c derives with libdw, checked against a second, independent
 * reader: binutils' readelf --debug-dump=frames-interp, row by row, on Debian's libz and
 * libc and on fixtures built with and without frame pointers; and its behaviour on
 * damaged input (corrupt .eh_frame, no unwind information, not ELF, empty). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "recorder/cfi.h"
#include "test.h"
#include "test-run.h"

static char tmp[] = "/tmp/vp-test-cfi-XXXXXX";

static struct vp_cfi *build(const char *path, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	ASSERT_GE(fd, 0);
	struct vp_cfi *t = vp_cfi__build(fd, err, errlen);
	close(fd);
	return t;
}

/* Every row readelf prints for path must agree with our rule at its address: the CFA's
 * register and offset, and where rbp was saved. Returns the rows compared. */
static long agree(const char *path)
{
	char cmd[PATH_MAX + 64], line[1024], err[256];
	long rows = 0, skipped = 0;
	int rbp_col = -1, ra_col = -1;
	unsigned long long fde_end = 0;

	struct vp_cfi *t = build(path, err, sizeof(err));
	if (!t)
		FAIL("%s: %s", path, err);
	snprintf(cmd, sizeof(cmd), "readelf --debug-dump=frames-interp '%s' 2>/dev/null", path);
	FILE *f = run_sh_file(cmd, NULL);
	ASSERT_NOT_NULL(f);
	bool in_eh = false;
	while (fgets(line, sizeof(line), f)) {
		if (strstr(line, "Contents of the"))
			in_eh = strstr(line, ".eh_frame") != NULL;
		if (!in_eh)
			continue;
		const char *pc = strstr(line, " FDE ") ? strstr(line, "pc=") : NULL;
		if (pc) {
			fde_end = 0;
			{ unsigned long long s0; sscanf(pc, "pc=%llx..%llx", &s0, &fde_end); }
			continue;
		}
		if (strstr(line, "LOC") && strstr(line, "CFA")) {
			/* Columns: LOC CFA <registers...> */
			char *save = NULL;
			int col = 0;
			rbp_col = ra_col = -1;
			for (char *w = strtok_r(line, " \t\n", &save); w; w = strtok_r(NULL, " \t\n", &save), col++) {
				if (!strcmp(w, "rbp"))
					rbp_col = col;
				if (!strcmp(w, "ra"))
					ra_col = col;
			}
			continue;
		}
		unsigned long long loc;
		char cfa[64], words[16][32];
		int nw = sscanf(line, "%llx %63s %31s %31s %31s %31s %31s %31s %31s %31s", &loc, cfa, words[2],
				words[3], words[4], words[5], words[6], words[7], words[8], words[9]);
		/* Rows start with a 16-digit address; CIE/FDE headers with 8 digits. */
		if (nw < 2 || strspn(line, "0123456789abcdef") != 16)
			continue;
		if (loc == 0 || loc >= fde_end)
			continue;   /* the CIE's initial row; a row readelf prints at the FDE's end */
		const struct vpb_rule *r = vp_cfi__find(t, loc);
		if (!r)
			FAIL("%s: no rule at 0x%llx", path, loc);
		int off;
		/* A return address anywhere but CFA-8 (a register, say): the walker cannot
		 * follow it and must stop there. */
		const char *ra = ra_col >= 2 && ra_col < nw ? words[ra_col] : "c-8";
		if (strcmp(ra, "c-8")) {
			if (r->kind != VPB_RULE_NONE && r->kind != VPB_RULE_END)
				FAIL("%s: 0x%llx: readelf ra %s, ours kind %u", path, loc, ra, r->kind);
			skipped++;
			continue;
		}
		if (!strcmp(cfa, "exp")) {
			if (r->kind != VPB_RULE_PLT && r->kind != VPB_RULE_NONE)
				FAIL("%s: 0x%llx: expression CFA, rule kind %u", path, loc, r->kind);
			skipped++;
			continue;
		}
		if (sscanf(cfa, "rsp+%d", &off) == 1) {
			if (r->kind != VPB_RULE_SP || r->cfa_off * 8 != off)
				FAIL("%s: 0x%llx: readelf CFA %s, ours kind %u off %d", path, loc, cfa, r->kind, r->cfa_off * 8);
		} else if (sscanf(cfa, "rbp+%d", &off) == 1) {
			if (r->kind != VPB_RULE_FP || r->cfa_off * 8 != off)
				FAIL("%s: 0x%llx: readelf CFA %s, ours kind %u off %d", path, loc, cfa, r->kind, r->cfa_off * 8);
		} else {
			skipped++;   /* other registers: ours must stop there */
			ASSERT_EQ(r->kind, VPB_RULE_NONE);
			continue;
		}
		const char *rbp = rbp_col >= 2 && rbp_col < nw ? words[rbp_col] : "u";
		int saved;
		if (sscanf(rbp, "c%d", &saved) == 1) {
			if (r->fp_off * 8 != saved)
				FAIL("%s: 0x%llx: readelf rbp at %s, ours at CFA%+d", path, loc, rbp, r->fp_off * 8);
		} else if (r->fp_off != VPB_FP_SAME) {
			FAIL("%s: 0x%llx: readelf rbp %s, ours saved at CFA%+d", path, loc, rbp, r->fp_off * 8);
		}
		rows++;
	}
	fclose(f);
	size_t n;
	vp_cfi__rules(t, &n);
	fprintf(stderr, "%s: %ld rows agree with readelf (%ld expression rows), %zu rules, from %s\n", path, rows,
		skipped, n, vp_cfi__source(t));
	vp_cfi__free(t);
	return rows;
}

static void copy(const char *from, const char *to)
{
	char cmd[2 * PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", from, to);
	ASSERT_EQ(run_sh(cmd, 110), 0);
}

int main(void)
{
	char path[PATH_MAX], err[256];

	if (run_sh("readelf --version >/dev/null 2>&1", 110))
		SKIP("readelf (binutils) is not installed");
	ASSERT_NOT_NULL(mkdtemp(tmp));
	ASSERT_GT(agree("/lib/x86_64-linux-gnu/libz.so.1"), 500);
	ASSERT_GT(agree("/lib/x86_64-linux-gnu/libc.so.6"), 10000);
	ASSERT_GT(agree(CFI_FP), 5);
	ASSERT_GT(agree(CFI_NOFP), 5);

	/* How long libjvm.so takes, for the record (not a test of speed). */
	if (access(LIBJVM, R_OK) == 0) {
		struct timespec a, b;
		clock_gettime(CLOCK_MONOTONIC, &a);
		struct vp_cfi *t = build(LIBJVM, err, sizeof(err));
		clock_gettime(CLOCK_MONOTONIC, &b);
		ASSERT_NOT_NULL(t);
		size_t n;
		vp_cfi__rules(t, &n);
		fprintf(stderr, "%s: %zu rules in %.0f ms\n", LIBJVM, n,
			(double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6);
		vp_cfi__free(t);
	}

	/* No unwind information at all: a table of "no rule", not an error. */
	snprintf(path, sizeof(path), "%s/stripped", tmp);
	char cmd[2 * PATH_MAX];
	snprintf(cmd, sizeof(cmd), "objcopy --remove-section .eh_frame --remove-section .eh_frame_hdr '%s' '%s'",
		 CFI_NOFP, path);
	ASSERT_EQ(run_sh(cmd, 110), 0);
	struct vp_cfi *t = build(path, err, sizeof(err));
	if (!t)
		FAIL("%s: %s", path, err);
	size_t n;
	const struct vpb_rule *r = vp_cfi__rules(t, &n);
	for (size_t i = 0; i < n; i++)
		ASSERT_EQ(r[i].kind, VPB_RULE_NONE);
	vp_cfi__free(t);

	/* Corrupt .eh_frame: random bytes over it, many seeds; never a crash, a table or an
	 * error each time. */
	snprintf(path, sizeof(path), "%s/corrupt.so", tmp);
	snprintf(cmd, sizeof(cmd), "readelf -SW /lib/x86_64-linux-gnu/libz.so.1 | awk '$2==\".eh_frame\" {print $5, $6}'");
	FILE *p = run_sh_file(cmd, NULL);
	unsigned long off = 0, size = 0;
	ASSERT_NOT_NULL(p);
	ASSERT_EQ(fscanf(p, "%lx %lx", &off, &size), 2);
	fclose(p);
	srand(4242);
	int tables = 0, errors = 0;
	for (int k = 0; k < 40; k++) {
		unlink(path);
		copy("/lib/x86_64-linux-gnu/libz.so.1", path);
		int fd = open(path, O_RDWR);
		ASSERT_GE(fd, 0);
		for (int i = 0; i < 64; i++) {
			unsigned char c = (unsigned char)rand();
			ASSERT_EQ(pwrite(fd, &c, 1, (off_t)(off + (unsigned long)rand() % size)), 1);
		}
		close(fd);
		t = build(path, err, sizeof(err));
		tables += t != NULL;
		errors += t == NULL;
		vp_cfi__free(t);
	}
	fprintf(stderr, "corrupt .eh_frame: %d tables, %d errors, no crash\n", tables, errors);

	/* Not ELF, and empty. */
	snprintf(path, sizeof(path), "%s/text", tmp);
	FILE *f = fopen(path, "w");
	fputs("not an ELF file\n", f);
	fclose(f);
	ASSERT_NULL(build(path, err, sizeof(err)));
	ASSERT_CONTAINS(err, "not an ELF file");
	snprintf(path, sizeof(path), "%s/empty", tmp);
	close(open(path, O_CREAT | O_WRONLY, 0600));
	ASSERT_NULL(build(path, err, sizeof(err)));
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	ASSERT_EQ(run_sh(cmd, 110), 0);
	return 0;
}
