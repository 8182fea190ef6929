/* A code map made to exhaust its reader (issue 31 item 5): the JVM's user writes the map
 * and root's service reads it every interval. INLINE2's kept frames cost no bytes: one
 * pc of 65535 fresh frames, then 63 pcs that keep them all (5 bytes each), is a record
 * of 4 M frames (64 MiB) that zlib packs into a few hundred bytes; 30 of them were a
 * 9 KiB file that made the reader allocate 1.9 GB and spend 25 s of CPU. Built here with
 * the container's own writer, from the spec in maps/codemap_format.h (the agent's
 * encoder encodes from JVMTI). The map is loaded in a child, whose peak resident memory
 * must stay under 64 MiB and whose CPU time under 5 s; the load fails in one line that
 * says why. A map of the same methods with honest inlining still loads. And a map of
 * many tiny methods loaded at falling addresses (its bytes honest, so within the budget)
 * loads in seconds of CPU, not the hours its flat map took when each range was inserted
 * into a sorted array.
 *   test-codemap-bomb [OUT]   with OUT: writes the crafted map there and exits (the
 *                             fuzz corpus, fuzz/corpus/fuzz-codemap/, holds one) */
#include "test.h"
#include "test-run.h"

#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/chunkfile.h"
#include "maps/codemap.h"
#include "maps/codemap_format.h"

#define RECORDS 30
#define KEEP 1024u
#define PCS 4096u

static void put(struct cfile_writer *w, uint32_t type, uint64_t t, const void *b, size_t n)
{
	ASSERT_OK(cfile_writer__append(w, type, t, b, n));
}

/* One INLINE2 body of method (start, id): honest, one frame per pc; or the bomb. */
static size_t inline2(uint8_t *b, uint64_t start, uint64_t id, bool bomb)
{
	struct vp_cm_inline2 h = { .code_start = start, .method_id = id, .npcs = PCS, .nmethods = 1,
				   .nframes = bomb ? PCS * KEEP : PCS };
	uint8_t *p = b + sizeof(h) + 8, *s0 = p;
	memcpy(b + sizeof(h), &id, 8);
	for (uint32_t i = 0; i < PCS; i++) {
		p += vp_cm_uleb_put(p, vp_cm_zigzag(i ? 4 : 0));   /* pc offset: 4 bytes on */
		uint32_t keep = bomb && i ? KEEP : 0, fresh = bomb && !i ? KEEP : bomb ? 0 : 1;
		p += vp_cm_uleb_put(p, keep);
		p += vp_cm_uleb_put(p, fresh);
		for (uint32_t k = 0; k < fresh; k++) {
			p += vp_cm_uleb_put(p, 0);                    /* method 0 of the table */
			p += vp_cm_uleb_put(p, vp_cm_zigzag(0));      /* bci */
		}
	}
	h.bytes = (uint32_t)(p - s0);
	memcpy(b, &h, sizeof(h));
	return (size_t)(p - b);
}

static void write_map(const char *path, bool bomb)
{
	static uint8_t b[8 * PCS + 4 * KEEP + 4096];
	unlink(path);
	struct cfile_writer *w = cfile_writer__create(path, VP_KIND_CODEMAP, VP_CODEMAP_FORMAT_VERSION, 8 << 20, true);
	ASSERT_NOT_NULL(w);
	struct vp_cm_epoch_begin e = { .epoch = 0, .reason = VP_EPOCH_START };
	put(w, VP_CM_EPOCH_BEGIN, 1, &e, sizeof(e));
	for (uint32_t i = 0; i < RECORDS; i++) {
		uint64_t start = 0x100000 + (uint64_t)i * 0x1000, id = 1 + i;
		struct vp_cm_method_load2 l = { .code_start = start, .code_size = 0x1000, .method_id = id,
						.level = VP_CM_LEVEL_C2 };
		put(w, VP_CM_METHOD_LOAD2, 10 + i, &l, sizeof(l));
		put(w, VP_CM_INLINE2, 10 + i, b, inline2(b, start, id, bomb));
	}
	ASSERT_OK(cfile_writer__close(w));
}

/* n METHOD_LOAD2 of 1..64 bytes each, each below the last (the flat map's worst order),
 * with addresses and ids that do not compress. */
static void write_falling(const char *path, uint32_t n)
{
	unlink(path);
	struct cfile_writer *w = cfile_writer__create(path, VP_KIND_CODEMAP, VP_CODEMAP_FORMAT_VERSION, 0, true);
	ASSERT_NOT_NULL(w);
	struct vp_cm_epoch_begin e = { .epoch = 0, .reason = VP_EPOCH_START };
	put(w, VP_CM_EPOCH_BEGIN, 1, &e, sizeof(e));
	srandom(7);
	for (uint32_t i = 0; i < n; i++) {
		struct vp_cm_method_load2 l = { .code_start = 0x7f0000000000ull - (uint64_t)i * 128 - (uint64_t)(random() & 63),
						.code_size = 1 + (uint32_t)(random() & 63), .level = VP_CM_LEVEL_C2,
						.method_id = ((uint64_t)random() << 31) ^ (uint64_t)random() };
		put(w, VP_CM_METHOD_LOAD2, 10 + i, &l, sizeof(l));
	}
	ASSERT_OK(cfile_writer__close(w));
}

/* Loads path in a child (at most 60 s of CPU): its exit status (0 loaded, 1 refused, 2
 * killed), peak RSS and CPU. */
static int load_in_child(const char *path, const char *errfile, long *maxrss_kb, double *cpu_s)
{
	pid_t c = fork();
	ASSERT_GE(c, 0);
	if (c == 0) {
		struct rlimit cpu = { 60, 60 };
		setrlimit(RLIMIT_CPU, &cpu);
		char err[512] = "";
		struct vp_codemap *m = vp_codemap__load_file(path, err, sizeof(err));
		FILE *f = fopen(errfile, "w");
		if (f) {
			fprintf(f, "%s\n", err);
			fclose(f);
		}
		_exit(m ? 0 : 1);
	}
	int st;
	struct rusage ru;
	ASSERT_EQ(wait4(c, &st, 0, &ru), c);
	*maxrss_kb = ru.ru_maxrss;
	*cpu_s = (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
		 ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) / 1e6;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 2;
}

int main(int argc, char **argv)
{
	if (argc > 1) {
		write_map(argv[1], true);
		return 0;
	}
	char dir[64], bomb[128], honest[128], errfile[128];
	snprintf(dir, sizeof(dir), "/tmp/viprof-test-cmbomb.%d", (int)getpid());
	ASSERT_OK(mkdir(dir, 0700));
	snprintf(bomb, sizeof(bomb), "%s/bomb.vpm", dir);
	snprintf(honest, sizeof(honest), "%s/honest.vpm", dir);
	snprintf(errfile, sizeof(errfile), "%s/err", dir);
	write_map(bomb, true);
	write_map(honest, false);
	struct stat st;
	ASSERT_OK(stat(bomb, &st));
	fprintf(stderr, "crafted map: %lld bytes, %u records asking for %u frames each (%llu MiB in all)\n",
		(long long)st.st_size, RECORDS, PCS * KEEP,
		(unsigned long long)RECORDS * PCS * KEEP * sizeof(struct vp_cm_frame) >> 20);
	ASSERT_LT(st.st_size, 16 << 10);   /* the attack's size: a few KiB */

	long rss;
	double cpu;
	int rc = load_in_child(bomb, errfile, &rss, &cpu);
	char *err = NULL;
	size_t errlen = 0;
	FILE *f = fopen(errfile, "r");
	ASSERT_NOT_NULL(f);
	ASSERT_GE(getline(&err, &errlen, f), 1);
	fclose(f);
	fprintf(stderr, "crafted map: exit %d, peak RSS %ld KiB, CPU %.2f s: %s", rc, rss, cpu, err);
	ASSERT_LT(rss, 64 << 10);
	ASSERT_LT_F(cpu, 5.0);
	ASSERT_EQ(rc, 1);                       /* refused, not read in part */
	ASSERT_CONTAINS(err, "code map not read");
	ASSERT_CONTAINS(err, bomb);
	ASSERT_EQ(strchr(err, '\n') - err, (long)strlen(err) - 1);   /* one line */

	/* The same methods with honest inlining load. */
	rc = load_in_child(honest, errfile, &rss, &cpu);
	fprintf(stderr, "honest map: exit %d, peak RSS %ld KiB\n", rc, rss);
	ASSERT_EQ(rc, 0);
	struct vp_codemap *m = vp_codemap__load_file(honest, err, errlen);
	ASSERT_NOT_NULL(m);
	ASSERT_EQ(m->ninlines, RECORDS);
	ASSERT_EQ(m->inlines[0].nframes, PCS);
	vp_codemap__free(m);

	/* Many tiny methods at falling addresses: read within its budget, in seconds. */
	char falling[128];
	snprintf(falling, sizeof(falling), "%s/falling.vpm", dir);
	write_falling(falling, 300000);
	ASSERT_OK(stat(falling, &st));
	rc = load_in_child(falling, errfile, &rss, &cpu);
	fprintf(stderr, "falling map (%lld bytes): exit %d, peak RSS %ld KiB, CPU %.2f s\n", (long long)st.st_size, rc, rss,
		cpu);
	ASSERT_EQ(rc, 0);
	ASSERT_LT_F(cpu, 5.0);
	free(err);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (run_sh(cmd, 110))
		fprintf(stderr, "could not remove %s\n", dir);
	printf("crafted code map: refused within its budget; ok\n");
	return 0;
}
