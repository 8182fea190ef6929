/* Issue 25: compile tiers in the code map and the reports, on hand-made maps. METHOD_LOAD2
 * with a level and the OSR flag (agent version 3) reads back through the reader and the
 * resolver (only the compiled method's own frame carries it); a version-2 load (flags
 * byte zero) reads as before; a tier is part of a frame's identity (C1 and C2 code of one
 * method are two frames, one again under --norm); folded marks C1 code _[1] and C2 code
 * _[j], the text report's image column "[jit C1]" / "[jit C2 OSR]". */
#include <stdlib.h>
#include <sys/stat.h>

#include "common/chunkfile.h"
#include "maps/codemap.h"
#include "maps/codemap_format.h"
#include "maps/jit_index.h"
#include "postproc/profile_xform.h"
#include "report/report.h"
#include "test-profile-synth.h"
#include "test.h"
#include "test-run.h"

static char dir[256];

static void put(struct cfile_writer *w, uint32_t type, uint64_t t, const void *b, size_t n)
{
	ASSERT_OK(cfile_writer__append(w, type, t, b, n));
}

static void mname(struct cfile_writer *w, uint64_t id, const char *name)
{
	uint8_t b[256];
	struct vp_cm_method_name n = { .method_id = id, .name_len = (uint16_t)strlen(name) };
	memcpy(b, &n, sizeof(n));
	memcpy(b + sizeof(n), name, n.name_len);
	put(w, VP_CM_METHOD_NAME, 1, b, sizeof(n) + n.name_len);
}

static void load2(struct cfile_writer *w, uint64_t start, uint64_t id, uint8_t level, uint8_t flags)
{
	struct vp_cm_method_load2 l = { .code_start = start, .code_size = 0x100, .method_id = id, .level = level,
					.flags = flags };
	put(w, VP_CM_METHOD_LOAD2, 2, &l, sizeof(l));
}

static void test_map(void)
{
	char p[400], err[512];
	snprintf(p, sizeof(p), "%s/%s", dir, VP_CODEMAP_FILE);
	struct cfile_writer *w = cfile_writer__create(p, VP_KIND_CODEMAP, VP_CODEMAP_FORMAT_VERSION, 0, true);
	ASSERT_NOT_NULL(w);
	struct vp_cm_meta meta = { .pid = 42, .agent_version = VP_AGENT_VERSION };
	put(w, VP_CM_META, 1, &meta, sizeof(meta));
	struct vp_cm_epoch_begin b = { .epoch = 0, .reason = VP_EPOCH_START };
	put(w, VP_CM_EPOCH_BEGIN, 1, &b, sizeof(b));
	mname(w, 1, "A.c1(int)");
	mname(w, 2, "A.c2osr()");
	mname(w, 3, "A.old()");
	load2(w, 0x1000, 1, 3, 0);
	load2(w, 0x2000, 2, VP_CM_LEVEL_C2, VP_CM_LOAD_OSR);
	load2(w, 0x3000, 3, VP_CM_LEVEL_UNKNOWN, 0);   /* as CompiledMethodLoad, or agent v2's events */
	ASSERT_OK(cfile_writer__close(w));

	struct vp_codemap *m = vp_codemap__load_file(p, err, sizeof(err));
	if (!m)
		FAIL("%s", err);
	ASSERT_EQ(m->nmethods, 3);
	ASSERT_EQ(m->methods[0].level, 3);
	ASSERT_EQ(m->methods[0].flags, 0);
	ASSERT_EQ(m->methods[1].level, 4);
	ASSERT_EQ(m->methods[1].flags, VP_CM_LOAD_OSR);
	ASSERT_EQ(m->methods[2].level, VP_CM_LEVEL_UNKNOWN);
	vp_codemap__free(m);

	struct vp_jit_index *x = vp_jit_index__open(dir, err, sizeof(err));
	if (!x)
		FAIL("%s", err);
	struct vp_jit_frame f[4];
	ASSERT_EQ(vp_jit_index__resolve(x, 0x1010, 5, false, f, 4), 1);
	ASSERT_STREQ(f[0].name, "A.c1(int)");
	ASSERT_EQ(f[0].level, 3);
	ASSERT_FALSE(f[0].osr);
	ASSERT_EQ(vp_jit_index__resolve(x, 0x2010, 5, false, f, 4), 1);
	ASSERT_EQ(f[0].level, 4);
	ASSERT_TRUE(f[0].osr);
	ASSERT_EQ(vp_jit_index__resolve(x, 0x3010, 5, false, f, 4), 1);
	ASSERT_EQ(f[0].level, VP_CM_LEVEL_UNKNOWN);
	vp_jit_index__close(x);
}

/* The record layout old readers skip through: the flags byte sits where agent version 2
 * had reserved[0], and the record did not grow. */
static void test_layout(void)
{
	ASSERT_EQ(sizeof(struct vp_cm_method_load2), 24);
	ASSERT_EQ(offsetof(struct vp_cm_method_load2, flags), 21);
	ASSERT_EQ(offsetof(struct vp_cm_method_load, flags), 13);
}

static char *write_report(const struct vp_profile *p, bool folded)
{
	char path[400];
	snprintf(path, sizeof(path), "%s/report.txt", dir);
	struct vp_out o;
	struct vp_report_opts opts = { .top = 20, .sort = VP_SORT_TOTAL, .threads = true };
	ASSERT_OK(vp_out__open(&o, path));
	ASSERT_OK(folded ? report_folded(p, &o, &opts) : report_text(p, NULL, &o, &opts));
	ASSERT_OK(vp_out__close(&o));
	char *s = test_slurp(path, NULL);
	ASSERT_NOT_NULL(s);
	return s;
}

static void test_reports(void)
{
	struct vp_profile *p = vp_profile__new();
	ASSERT_NOT_NULL(p);
	ASSERT_EQ(vp_profile__add_event(p, "cpu-clock", "nanoseconds"), 0);
	struct vp_frame c1 = { .name = "Shop.buy(int)", .image = "[jit]", .layer = VP_LAYER_JIT, .tier = 3 };
	struct vp_frame c2 = c1, osr = c1;
	c2.tier = VP_TIER_C2;
	osr.name = "Shop.main(String[])";
	osr.tier = VP_TIER_C2 | VP_TIER_OSR;
	uint32_t fc1 = vp_profile__frame(p, &c1), fc2 = vp_profile__frame(p, &c2), fo = vp_profile__frame(p, &osr);
	ASSERT_NE(fc1, fc2);   /* one method, two tiers: two frames */
	uint32_t s1[2] = { fo, fc1 }, s2[2] = { fo, fc2 };
	ASSERT_OK(vp_profile__add(p, s1, 2, 1, 1, "main", 0, 30, 30));
	ASSERT_OK(vp_profile__add(p, s2, 2, 1, 1, "main", 0, 70, 70));

	char *folded = write_report(p, true);
	ASSERT_CONTAINS(folded, "main;Shop.main(String[])_[j];Shop.buy(int)_[1] 30\n");
	ASSERT_CONTAINS(folded, "main;Shop.main(String[])_[j];Shop.buy(int)_[j] 70\n");
	free(folded);
	char *text = write_report(p, false);
	ASSERT_CONTAINS(text, "[jit C1]");
	ASSERT_CONTAINS(text, "[jit C2]");
	ASSERT_CONTAINS(text, "[jit C2 OSR]");
	free(text);

	/* For comparison (--norm) the tiers of a method are one frame. */
	char err[256];
	struct vp_xform xf = { .norm = true };
	struct vp_profile *v = vp_profile__transform(p, &xf, err, sizeof(err));
	ASSERT_NOT_NULL(v);
	ASSERT_EQ(v->nframes, 2);
	ASSERT_EQ(v->nstacks, 1);
	ASSERT_UEQ(v->stacks[0].samples[0], 100);
	vp_profile__free(v);
	vp_profile__free(p);
}

int main(int argc, char **argv)
{
	const char *which = argc > 1 ? argv[1] : "all";
	snprintf(dir, sizeof(dir), "/tmp/viprof-test-tier.%d", (int)getpid());
	mkdir(dir, 0700);
	if (!strcmp(which, "all") || !strcmp(which, "map"))
		test_map();
	if (!strcmp(which, "all") || !strcmp(which, "layout"))
		test_layout();
	if (!strcmp(which, "all") || !strcmp(which, "reports"))
		test_reports();
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (run_sh(cmd, 50))
		fprintf(stderr, "could not remove %s\n", dir);
	return 0;
}
