/* The GC record of the code-map format (issue 26): VP_CM_GC says which garbage
 * collection began an epoch (the JVM's collection count, its kind, the collector); the
 * reader attaches it to that epoch and vp_codemap__gc_text names it. A map without the
 * record (older agents) reads as before; a short or overrunning one is skipped and
 * counted, never attached to the wrong epoch. */
#include "test.h"
#include "test-run.h"

#include <stdlib.h>
#include <sys/stat.h>

#include "common/chunkfile.h"
#include "maps/codemap.h"
#include "maps/codemap_format.h"

static char dir[256];

static void put(struct cfile_writer *w, uint32_t type, uint64_t t, const void *b, size_t n)
{
	ASSERT_OK(cfile_writer__append(w, type, t, b, n));
}

static void epoch(struct cfile_writer *w, uint32_t e, uint32_t reason, uint64_t t)
{
	if (e) {
		struct vp_cm_epoch_end x = { .epoch = e - 1 };
		put(w, VP_CM_EPOCH_END, t, &x, sizeof(x));
	}
	struct vp_cm_epoch_begin b = { .epoch = e, .reason = reason };
	put(w, VP_CM_EPOCH_BEGIN, t, &b, sizeof(b));
}

static void gc(struct cfile_writer *w, uint32_t e, uint32_t id, uint8_t kind, uint32_t gcs, const char *name,
	       size_t cut)
{
	uint8_t b[64];
	struct vp_cm_gc x = { .epoch = e, .gc_id = id, .full_gcs = kind == VP_GC_FULL, .gcs = gcs, .kind = kind,
			      .name_len = (uint16_t)strlen(name) };
	memcpy(b, &x, sizeof(x));
	memcpy(b + sizeof(x), name, x.name_len);
	put(w, VP_CM_GC, 100 * e, b, sizeof(x) + x.name_len - cut);
}

int main(void)
{
	char p[400], err[512], t[64];
	snprintf(dir, sizeof(dir), "/tmp/viprof-test-cmgc.%d", (int)getpid());
	ASSERT_OK(mkdir(dir, 0700));
	snprintf(p, sizeof(p), "%s/gc.vpm", dir);
	struct cfile_writer *w = cfile_writer__create(p, VP_KIND_CODEMAP, VP_CODEMAP_FORMAT_VERSION, 0, true);
	ASSERT_NOT_NULL(w);
	epoch(w, 0, VP_EPOCH_START, 1);
	epoch(w, 1, VP_EPOCH_GC, 100);
	gc(w, 1, 3, VP_GC_YOUNG, 3, "G1", 0);
	epoch(w, 2, VP_EPOCH_GC, 200);
	gc(w, 2, 4, VP_GC_FULL, 1, "G1", 0);
	epoch(w, 3, VP_EPOCH_REUSE, 250);
	epoch(w, 4, VP_EPOCH_GC, 400);
	gc(w, 4, 4, VP_GC_CONCURRENT, 2, "G1", 0);
	gc(w, 3, 9, VP_GC_FULL, 1, "G1", 0);          /* names an epoch that is not the current one */
	epoch(w, 5, VP_EPOCH_GC, 500);
	gc(w, 5, 6, VP_GC_YOUNG, 1, "Shenandoah", 6);  /* its name cut short: overruns the record */
	epoch(w, 6, VP_EPOCH_GC, 600);                 /* an older agent's: no GC record */
	ASSERT_OK(cfile_writer__close(w));

	struct vp_codemap *m = vp_codemap__load_file(p, err, sizeof(err));
	if (!m)
		FAIL("%s", err);
	ASSERT_EQ(m->nepochs, 7);
	ASSERT_STREQ(vp_codemap__gc_text(m, 0, t, sizeof(t)), "");
	ASSERT_STREQ(vp_codemap__gc_text(m, 1, t, sizeof(t)), "GC 3 (young, G1)");
	ASSERT_EQ(m->epochs[1].gc_count, 3);
	ASSERT_STREQ(vp_codemap__gc_text(m, 2, t, sizeof(t)), "GC 4 (full, G1)");
	ASSERT_EQ(m->epochs[2].gc_full, 1);
	ASSERT_STREQ(vp_codemap__gc_text(m, 3, t, sizeof(t)), "");   /* reuse: no GC */
	ASSERT_STREQ(vp_codemap__gc_text(m, 4, t, sizeof(t)), "GC 4 (concurrent, G1)");
	ASSERT_STREQ(vp_codemap__gc_text(m, 5, t, sizeof(t)), "");
	ASSERT_STREQ(vp_codemap__gc_text(m, 6, t, sizeof(t)), "");
	ASSERT_STREQ(vp_codemap__gc_text(m, 7, t, sizeof(t)), "");   /* past the end */
	ASSERT_EQ(m->skipped_records, 1);                            /* the overrunning one */
	ASSERT_STREQ(vp_cm_gc_kind_name(VP_GC_UNKNOWN), "unknown");
	vp_codemap__free(m);

	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (run_sh(cmd, 110))
		fprintf(stderr, "could not remove %s\n", dir);
	printf("codemap GC records: ok\n");
	return 0;
}
