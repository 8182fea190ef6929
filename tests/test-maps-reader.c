/* The code-map reader and JIT index on hand-written maps: epoch resolution (trailing
 * loads, walking back, unloaded code), the flat view, inlining, stubs; perf map and
 * jitdump import/export; truncated, corrupt and fuzzed files give an error, never a crash. */
#include "test.h"
#include "test-helpers.h"
#include "test-run.h"

#include <errno.h>
#include <sys/stat.h>

#include "common/chunkfile.h"
#include "maps/codemap.h"
#include "maps/codemap_io.h"
#include "maps/codemap_format.h"
#include "maps/jit_index.h"
#include "postproc/profile.h"

static char dir[256];

static void put(struct cfile_writer *w, uint32_t type, uint64_t t, const void *b, size_t n)
{
	ASSERT_OK(cfile_writer__append(w, type, t, b, n));
}

static void meta(struct cfile_writer *w, uint32_t flags)
{
	uint8_t b[64];
	struct vp_cm_meta m = { .pid = 4242, .flags = flags, .agent_version = 1, .vm_len = 4 };
	memcpy(b, &m, sizeof(m));
	memcpy(b + sizeof(m), "test", 4);
	put(w, VP_CM_META, 1, b, sizeof(m) + 4);
}

static void epoch(struct cfile_writer *w, uint32_t id, uint32_t reason, uint64_t t)
{
	if (id) {
		struct vp_cm_epoch_end e = { .epoch = id - 1 };
		put(w, VP_CM_EPOCH_END, t, &e, sizeof(e));
	}
	struct vp_cm_epoch_begin b = { .epoch = id, .reason = reason };
	put(w, VP_CM_EPOCH_BEGIN, t, &b, sizeof(b));
}

static void load(struct cfile_writer *w, uint64_t start, uint32_t size, uint64_t id, const char *name, uint64_t t)
{
	uint8_t b[512];
	struct vp_cm_method_load l = { .code_start = start, .code_size = size, .method_id = id,
				       .level = VP_CM_LEVEL_UNKNOWN, .name_len = (uint16_t)strlen(name),
				       .class_len = 3, .mname_len = 1, .sig_len = 3 };
	memcpy(b, &l, sizeof(l));
	memcpy(b + sizeof(l), name, l.name_len);
	memcpy(b + sizeof(l) + l.name_len, "LA;m()V", 7);
	put(w, VP_CM_METHOD_LOAD, t, b, sizeof(l) + l.name_len + 7);
}

static void unload(struct cfile_writer *w, uint64_t start, uint64_t id, uint64_t t)
{
	struct vp_cm_method_unload u = { .code_start = start, .method_id = id };
	put(w, VP_CM_METHOD_UNLOAD, t, &u, sizeof(u));
}

static void mname(struct cfile_writer *w, uint64_t id, const char *name, const char *file)
{
	uint8_t b[512];
	struct vp_cm_method_name n = { .method_id = id, .name_len = (uint16_t)strlen(name),
				       .file_len = (uint16_t)strlen(file), .nlines = 2 };
	struct vp_cm_line lines[2] = { { 0, 10 }, { 5, 12 } };
	memcpy(b, &n, sizeof(n));
	memcpy(b + sizeof(n), name, n.name_len);
	memcpy(b + sizeof(n) + n.name_len, file, n.file_len);
	memcpy(b + sizeof(n) + n.name_len + n.file_len, lines, sizeof(lines));
	put(w, VP_CM_METHOD_NAME, 0, b, sizeof(n) + n.name_len + n.file_len + sizeof(lines));
}

static void blob(struct cfile_writer *w, uint64_t start, uint32_t size, uint16_t kind, const char *name)
{
	uint8_t b[256];
	struct vp_cm_code_blob c = { .code_start = start, .code_size = size, .kind = kind,
				     .name_len = (uint16_t)strlen(name) };
	memcpy(b, &c, sizeof(c));
	memcpy(b + sizeof(c), name, c.name_len);
	put(w, VP_CM_CODE_BLOB, 5, b, sizeof(c) + c.name_len);
}

/* A at 0x1000 with X inlined at pc 0x10 (bci 7 -> line 12), a plain pc at 0x40. */
static void inl(struct cfile_writer *w)
{
	struct {
		struct vp_cm_inline h;
		struct vp_cm_pc pcs[2];
		struct vp_cm_frame fr[3];
	} b = {
		.h = { .code_start = 0x1000, .method_id = 1, .npcs = 2, .nframes = 3 },
		.pcs = { { .pc_offset = 0x10, .depth = 2, .first = 0 }, { .pc_offset = 0x40, .depth = 1, .first = 2 } },
		.fr = { { .method_id = 99, .bci = 7 }, { .method_id = 1, .bci = 3 }, { .method_id = 1, .bci = 9 } },
	};
	put(w, VP_CM_INLINE, 110, &b, sizeof(b));
}

/* Epoch 0 (t 100): A [0x1000,0x1100) at 110, B [0x2000,0x2100) at 120.
 * Epoch 1 (gc, t 200): A unloaded at 210, C [0x1000,0x1080) at 250, B unloaded at 260.
 * Epoch 2 (reuse, t 270): D [0x2000,0x2100) at 280. */
static void write_map(const char *path, size_t chunk)
{
	struct cfile_writer *w = cfile_writer__create(path, VP_KIND_CODEMAP, VP_CODEMAP_FORMAT_VERSION, chunk, true);
	ASSERT_NOT_NULL(w);
	meta(w, VP_CM_META_FRAME_POINTERS);
	epoch(w, 0, VP_EPOCH_START, 100);
	blob(w, 0x9000, 0x800, VP_BLOB_INTERPRETER, "Interpreter");
	blob(w, 0xa000, 0x40, VP_BLOB_STUB, "StubRoutines::call_stub");
	load(w, 0x1000, 0x100, 1, "A.a()", 110);
	mname(w, 1, "A.a()", "A.java");
	mname(w, 99, "X.x(int)", "X.java");
	inl(w);
	load(w, 0x2000, 0x100, 2, "B.b()", 120);
	epoch(w, 1, VP_EPOCH_GC, 200);
	unload(w, 0x1000, 1, 210);
	load(w, 0x1000, 0x80, 3, "C.c()", 250);
	unload(w, 0x2000, 2, 260);
	epoch(w, 2, VP_EPOCH_REUSE, 270);
	load(w, 0x2000, 0x100, 4, "D.d()", 280);
	struct vp_cm_epoch_end e = { .epoch = 2, .live_methods = 2, .live_bytes = 0x180 };
	put(w, VP_CM_EPOCH_END, 300, &e, sizeof(e));
	ASSERT_OK(cfile_writer__close(w));
}

static const char *at(struct vp_jit_index *x, uint64_t a, uint64_t t, bool flat)
{
	struct vp_jit_frame f[8];
	int n = vp_jit_index__resolve(x, a, t, flat, f, 8);
	ASSERT_GE(n, 0);
	return n ? f[n - 1].name : "-";
}

/* vp_jit_index__owner_span's promise, checked against vp_jit_index__owner itself: at
 * every time in the span it returns, the owner is the one it named (the report's
 * address cache reuses an answer on exactly that promise). Every address of the map's
 * history and every time from before the first epoch to after the last. */
static void check_spans(struct vp_jit_index *x)
{
	static const uint64_t addrs[] = { 0x1000, 0x1050, 0x1090, 0x10ff, 0x2000, 0x2050, 0x9100, 0xa010, 0x5000 };
	int spans = 0;
	for (int flat = 0; flat < 2; flat++) {
		for (size_t a = 0; a < sizeof(addrs) / sizeof(addrs[0]); a++) {
			for (uint64_t t = 0; t < 400; t++) {
				uint64_t lo, hi;
				const void *o = vp_jit_index__owner_span(x, addrs[a], t, flat, &lo, &hi);
				ASSERT_TRUE(o == vp_jit_index__owner(x, addrs[a], t, flat));
				if (lo > hi)
					continue;
				ASSERT_TRUE(lo <= t && t < hi);
				spans++;
				for (uint64_t u = lo; u < hi && u < 400; u++)
					if (vp_jit_index__owner(x, addrs[a], u, flat) != o)
						FAIL("addr 0x%llx: owner at %llu differs from its span [%llu, %llu) found at %llu",
						     (unsigned long long)addrs[a], (unsigned long long)u, (unsigned long long)lo,
						     (unsigned long long)hi, (unsigned long long)t);
			}
		}
	}
	ASSERT_GT(spans, 4000);   /* nearly every lookup has a span */
}

static void check_index(struct vp_jit_index *x)
{
	ASSERT_TRUE(vp_jit_index__frame_pointers(x));
	ASSERT_STREQ(at(x, 0x1050, 150, false), "A.a()");
	ASSERT_STREQ(at(x, 0x1050, 50, false), "A.a()");   /* before its load callback: trailing */
	ASSERT_STREQ(at(x, 0x1050, 205, false), "A.a()");  /* C loaded later, A not yet unloaded */
	ASSERT_STREQ(at(x, 0x1050, 215, false), "C.c()");  /* A gone: C's load callback trails */
	ASSERT_STREQ(at(x, 0x1050, 260, false), "C.c()");
	ASSERT_STREQ(at(x, 0x1090, 150, false), "A.a()");
	ASSERT_STREQ(at(x, 0x1090, 260, false), "-");      /* A's tail was unloaded at 210 */
	ASSERT_STREQ(at(x, 0x1090, 260, true), "A.a()");   /* ... which a flat map cannot know */
	ASSERT_STREQ(at(x, 0x2010, 255, false), "B.b()");
	ASSERT_STREQ(at(x, 0x2010, 265, false), "-");
	ASSERT_STREQ(at(x, 0x2010, 275, false), "D.d()");
	ASSERT_STREQ(at(x, 0x2010, 150, false), "B.b()");
	ASSERT_STREQ(at(x, 0x2010, 150, true), "D.d()");   /* last writer wins */
	ASSERT_STREQ(at(x, 0x1050, 150, true), "C.c()");
	ASSERT_STREQ(at(x, 0x3000, 150, false), "-");

	struct vp_jit_frame f[8];
	ASSERT_EQ(vp_jit_index__resolve(x, 0x1008, 150, false, f, 8), 2);
	ASSERT_STREQ(f[0].name, "X.x(int)");
	ASSERT_EQ(f[0].layer, VP_LAYER_INLINED);
	ASSERT_STREQ(f[0].file, "X.java");
	ASSERT_EQ(f[0].line, 12);
	ASSERT_STREQ(f[1].name, "A.a()");
	ASSERT_EQ(f[1].layer, VP_LAYER_JIT);
	ASSERT_EQ(f[1].line, 10);
	ASSERT_EQ(vp_jit_index__resolve(x, 0x1008, 150, false, f, 1), 1);
	ASSERT_STREQ(f[0].name, "A.a()");
	ASSERT_EQ(f[0].layer, VP_LAYER_JIT);
	ASSERT_EQ(vp_jit_index__resolve(x, 0x1030, 150, false, f, 8), 1);
	ASSERT_EQ(f[0].line, 12);
	ASSERT_EQ(vp_jit_index__resolve(x, 0x10f0, 150, false, f, 8), 1);
	ASSERT_EQ(vp_jit_index__resolve(x, 0x9400, 150, false, f, 8), 1);
	ASSERT_EQ(f[0].layer, VP_LAYER_INTERPRETED);
	ASSERT_EQ(vp_jit_index__resolve(x, 0xa010, 150, false, f, 8), 1);
	ASSERT_EQ(f[0].layer, VP_LAYER_JVM);
	ASSERT_STREQ(f[0].name, "StubRoutines::call_stub");
}

static void check_model(const struct vp_codemap *m)
{
	ASSERT_EQ(m->pid, 4242);
	ASSERT_STREQ(m->vm, "test");
	ASSERT_EQ(m->nepochs, 3);
	ASSERT_EQ(m->epochs[1].reason, VP_EPOCH_GC);
	ASSERT_EQ(m->epochs[2].reason, VP_EPOCH_REUSE);
	ASSERT_EQ(m->epochs[1].nunloads, 2);
	ASSERT_EQ(m->epochs[2].live_bytes, 0x180);
	ASSERT_EQ(m->nmethods, 4);
	ASSERT_UEQ(m->methods[0].unload_time, 210);
	ASSERT_UEQ(m->methods[3].unload_time, VP_CM_NEVER);
	ASSERT_STREQ(m->methods[0].klass, "LA;");
	ASSERT_STREQ(m->methods[0].sig, "()V");
	ASSERT_FALSE(m->truncated);
}

static void spit(const char *p, const uint8_t *b, size_t n)
{
	unlink(p);
	FILE *f = fopen(p, "wb");
	ASSERT_NOT_NULL(f);
	ASSERT_EQ(fwrite(b, 1, n, f), n);
	fclose(f);
}

/* Loading must return a map or an error with a message; anything else is a bug. */
static int try_load(const char *p)
{
	char err[512] = "";
	struct vp_codemap *m = vp_codemap__load_file(p, err, sizeof(err));
	if (!m) {
		if (!err[0])
			FAIL("load of %s failed without a message", p);
		return 0;
	}
	/* Exercise lookups on whatever survived. */
	struct vp_jit_index *x = NULL;
	(void)x;
	for (size_t e = 0; e < m->nepochs; e++)
		vp_codemap__in_epoch(m, e, 0x1050);
	vp_codemap__flat(m, 0x1050);
	int ret = m->skipped_records || m->skipped_chunks ? 2 : 1;
	vp_codemap__free(m);
	return ret;
}

static void check_truncation(const char *good)
{
	size_t n;
	uint8_t *b = (uint8_t *)test_slurp(good, &n);
	ASSERT_NOT_NULL(b);
	char p[300];
	snprintf(p, sizeof(p), "%s/trunc.vpm", dir);
	int ok = 0;
	size_t prev = 0;
	for (size_t cut = 0; cut < n; cut++) {
		spit(p, b, cut);
		char err[512] = "";
		struct vp_codemap *m = vp_codemap__load_file(p, err, sizeof(err));
		if (!m) {
			ASSERT_TRUE(err[0] != '\0');
			ASSERT_CONTAINS(err, p);
			continue;
		}
		ok++;
		/* Every cut keeps what the complete chunks before it hold: a longer prefix never
		 * yields less, and a cut inside a chunk is flagged. */
		ASSERT_GE(m->nmethods, prev);
		ASSERT_LE(m->nmethods, 3);
		prev = m->nmethods;
		vp_codemap__free(m);
	}
	ASSERT_GT(ok, 0);
	free(b);
}

static void check_fuzz(const char *good)
{
	size_t n;
	uint8_t *b = (uint8_t *)test_slurp(good, &n), *c = malloc(n);
	char p[300];
	snprintf(p, sizeof(p), "%s/fuzz.vpm", dir);
	srand(12345);
	int loaded = 0;
	for (int i = 0; i < 3000; i++) {
		memcpy(c, b, n);
		int flips = 1 + rand() % 8;
		for (int k = 0; k < flips; k++)
			c[(size_t)rand() % n] ^= (uint8_t)(1 + rand() % 255);
		spit(p, c, n);
		loaded += try_load(p) > 0;
	}
	fprintf(stderr, "container fuzz: %d of 3000 flipped files still loaded\n", loaded);
	free(c);
	free(b);
}

/* The container's CRCs stop most flips before the record parser sees them, so also
 * corrupt the records themselves inside valid chunks. */
static void check_record_fuzz(void)
{
	char p[300];
	snprintf(p, sizeof(p), "%s/recfuzz.vpm", dir);
	srand(777);
	int errors = 0;
	for (int i = 0; i < 3000; i++) {
		uint8_t body[256];
		for (size_t k = 0; k < sizeof(body); k++)
			body[k] = (uint8_t)rand();
		/* Mostly small length fields so that some records pass the checks. */
		if (rand() % 2)
			for (size_t k = 16; k < 40; k++)
				body[k] &= 0x0f;
		unlink(p);
		struct cfile_writer *w = cfile_writer__create(p, VP_KIND_CODEMAP, VP_CODEMAP_FORMAT_VERSION, 0, true);
		ASSERT_NOT_NULL(w);
		load(w, 0x1000, 0x100, 1, "A.a()", 110);
		int nrec = 1 + rand() % 4;
		for (int r = 0; r < nrec; r++)
			put(w, 1 + (uint32_t)rand() % 9, (uint64_t)rand(), body, (size_t)(rand() % (int)sizeof(body)));
		ASSERT_OK(cfile_writer__close(w));
		errors += try_load(p) == 2;
	}
	/* Malformed records are skipped and counted, never fatal. */
	fprintf(stderr, "record fuzz: %d of 3000 files had records skipped as malformed\n", errors);
	ASSERT_GT(errors, 0);
}

static void check_bad_records(void)
{
	char p[300], err[512];
	snprintf(p, sizeof(p), "%s/bad.vpm", dir);
	struct cfile_writer *w = cfile_writer__create(p, VP_KIND_CODEMAP, VP_CODEMAP_FORMAT_VERSION, 0, true);
	struct vp_cm_method_load l = { .code_start = 1, .code_size = 1, .name_len = 5000 };
	put(w, VP_CM_METHOD_LOAD, 1, &l, sizeof(l));
	load(w, 0x2000, 0x100, 2, "B.b()", 110);
	ASSERT_OK(cfile_writer__close(w));
	/* A malformed record is skipped and counted; the rest of the map is read. */
	struct vp_codemap *bm = vp_codemap__load_file(p, err, sizeof(err));
	ASSERT_NOT_NULL(bm);
	ASSERT_UEQ(bm->skipped_records, 1);
	ASSERT_EQ(bm->nmethods, 1);
	ASSERT_STREQ(bm->methods[0].name, "B.b()");
	vp_codemap__free(bm);

	unlink(p);
	w = cfile_writer__create(p, VP_KIND_CODEMAP, VP_CODEMAP_FORMAT_VERSION, 0, true);
	load(w, 0x1000, 0x100, 1, "A.a()", 110);
	struct {
		struct vp_cm_inline h;
		struct vp_cm_pc pc;
		struct vp_cm_frame fr;
	} in = { .h = { .code_start = 0x1000, .method_id = 1, .npcs = 1, .nframes = 1 },
		 .pc = { .pc_offset = 0, .depth = 3, .first = 0 } };
	put(w, VP_CM_INLINE, 1, &in, sizeof(in));
	ASSERT_OK(cfile_writer__close(w));
	bm = vp_codemap__load_file(p, err, sizeof(err));
	ASSERT_NOT_NULL(bm);
	ASSERT_UEQ(bm->skipped_records, 1);
	ASSERT_EQ(bm->nmethods, 1);
	vp_codemap__free(bm);

	/* A stream of another kind is refused by name. */
	unlink(p);
	w = cfile_writer__create(p, VP_KIND_SESSION_STREAM, 1, 0, true);
	ASSERT_OK(cfile_writer__close(w));
	ASSERT_NULL(vp_codemap__load_file(p, err, sizeof(err)));
	ASSERT_TRUE(err[0] != '\0');

	/* Unknown record types are skipped. */
	unlink(p);
	w = cfile_writer__create(p, VP_KIND_CODEMAP, VP_CODEMAP_FORMAT_VERSION, 0, true);
	put(w, 999, 1, "xxxxxxxx", 8);
	load(w, 0x1000, 0x100, 1, "A.a()", 110);
	ASSERT_OK(cfile_writer__close(w));
	struct vp_codemap *m = vp_codemap__load_file(p, err, sizeof(err));
	ASSERT_NOT_NULL(m);
	ASSERT_EQ(m->nmethods, 1);
	vp_codemap__free(m);
	unlink(p);
}

static void check_export_import(struct vp_jit_index *x)
{
	const struct vp_codemap *m = vp_jit_index__codemap(x);
	char p[300], err[512];
	snprintf(p, sizeof(p), "%s/perf-4242.map", dir);
	ASSERT_OK(vp_codemap__export_perf_map(m, p));
	struct vp_jit_index *y = vp_jit_index__open_perf_map(p, err, sizeof(err));
	if (!y)
		FAIL("%s", err);
	/* The perf map is the flat view: the same answers at any time. */
	static const uint64_t addrs[] = { 0x1010, 0x1090, 0x2010, 0x9400, 0x3000 };
	for (size_t i = 0; i < sizeof(addrs) / sizeof(addrs[0]); i++) {
		ASSERT_STREQ(at(y, addrs[i], 1, false), at(x, addrs[i], 1, true));
		ASSERT_STREQ(at(y, addrs[i], 1, true), at(x, addrs[i], 1, true));
	}
	vp_jit_index__close(y);

	snprintf(p, sizeof(p), "%s/jit-4242.dump", dir);
	ASSERT_OK(vp_codemap__export_jitdump(m, p));
	y = vp_jit_index__open_jitdump(p, err, sizeof(err));
	if (!y)
		FAIL("%s", err);
	const struct vp_codemap *n = vp_jit_index__codemap(y);
	ASSERT_EQ(n->nmethods, 4);
	ASSERT_EQ(n->pid, 4242);
	/* Overlapping loads open epochs on import too, so times still resolve. */
	ASSERT_GE(n->nepochs, 2);
	ASSERT_STREQ(at(y, 0x1050, 150, false), "A.a()");
	ASSERT_STREQ(at(y, 0x1050, 260, false), "C.c()");
	ASSERT_STREQ(at(y, 0x2010, 150, false), "B.b()");
	ASSERT_STREQ(at(y, 0x2010, 290, false), "D.d()");
	vp_jit_index__close(y);

	/* Not a perf map / not a jitdump: one-line errors. */
	snprintf(p, sizeof(p), "%s/garbage", dir);
	spit(p, (const uint8_t *)"hello world\n", 12);
	ASSERT_NULL(vp_jit_index__open_perf_map(p, err, sizeof(err)));
	ASSERT_CONTAINS(err, "START SIZE name");
	ASSERT_NULL(vp_jit_index__open_jitdump(p, err, sizeof(err)));
	ASSERT_CONTAINS(err, "jitdump");
}

/* Method* naming for interpreted frames: a pointer reused by a later class generation
 * names the method of its time; classes the agent found already loaded also name
 * samples from before their record. */
static void check_method_ptrs(void)
{
	char p[300], err[512];
	snprintf(p, sizeof(p), "%s/ptrs.vpm", dir);
	unlink(p);
	struct cfile_writer *w = cfile_writer__create(p, VP_KIND_CODEMAP, VP_CODEMAP_FORMAT_VERSION, 0, true);
	ASSERT_NOT_NULL(w);
	struct {
		struct vp_cm_method_ptrs h;
		struct vp_cm_method_ptr e[2];
	} gen1 = { { 2, 0 }, { { 0x7000, 11 }, { 0x7100, 12 } } },
	  gen2 = { { 2, 0 }, { { 0x7000, 21 }, { 0x7200, 22 } } },
	  boot = { { 2, VP_CM_PTRS_PREEXISTING }, { { 0x9000, 31 }, { 0, 32 } } };
	put(w, VP_CM_METHOD_PTR, 50, &boot, sizeof(boot));
	put(w, VP_CM_METHOD_PTR, 100, &gen1, sizeof(gen1));
	put(w, VP_CM_METHOD_PTR, 200, &gen2, sizeof(gen2));
	/* One that overruns its record is skipped, not fatal. */
	struct vp_cm_method_ptrs bad = { 1000, 0 };
	put(w, VP_CM_METHOD_PTR, 300, &bad, sizeof(bad));
	ASSERT_OK(cfile_writer__close(w));
	struct vp_codemap *m = vp_codemap__load_file(p, err, sizeof(err));
	if (!m)
		FAIL("%s", err);
	ASSERT_UEQ(m->nptrs, 5);              /* a NULL pointer is not kept */
	ASSERT_UEQ(m->skipped_records, 1);
	ASSERT_UEQ(vp_codemap__method_at(m, 0x7000, 99), 0);   /* before its class existed */
	ASSERT_UEQ(vp_codemap__method_at(m, 0x7000, 100), 11);
	ASSERT_UEQ(vp_codemap__method_at(m, 0x7000, 199), 11);
	ASSERT_UEQ(vp_codemap__method_at(m, 0x7000, 200), 21);  /* reused by generation 2 */
	ASSERT_UEQ(vp_codemap__method_at(m, 0x7000, 1000), 21);
	ASSERT_UEQ(vp_codemap__method_at(m, 0x7100, 500), 12);
	ASSERT_UEQ(vp_codemap__method_at(m, 0x9000, 10), 31);   /* loaded before the agent */
	ASSERT_UEQ(vp_codemap__method_at(m, 0x9000, 60), 31);
	ASSERT_UEQ(vp_codemap__method_at(m, 0x8000, 500), 0);
	vp_codemap__free(m);
	unlink(p);
}

/* A load dated by a code-heap walk is the earliest that code can have run, so before it
 * the address held something no walk saw: unknown, never that later occupant (issue 23:
 * a generation's samples named after the next generation's method). An event map's load
 * trails the installation, and keeps naming the code there. */
static void check_walk_dating(void)
{
	char p[300], err[512];
	struct vp_jit_frame f[4];
	for (int walk = 0; walk < 2; walk++) {
		snprintf(p, sizeof(p), "%s/%d", dir, 4300 + walk);
		ASSERT_OK(mkdir(p, 0700));
		snprintf(p, sizeof(p), "%s/%d/codemap.vpm", dir, 4300 + walk);
		struct cfile_writer *w = cfile_writer__create(p, VP_KIND_CODEMAP, VP_CODEMAP_FORMAT_VERSION, 0, true);
		ASSERT_NOT_NULL(w);
		meta(w, walk ? VP_CM_META_CODE_WALK : 0);
		epoch(w, 0, VP_EPOCH_START, 100);
		mname(w, 7, "Gen2.hot()", "Gen2.java");
		load(w, 0x5000, 0x100, 7, "Gen2.hot()", 150);
		ASSERT_OK(cfile_writer__close(w));
		snprintf(p, sizeof(p), "%s/%d", dir, 4300 + walk);
		struct vp_jit_index *x = vp_jit_index__open(p, err, sizeof(err));
		if (!x)
			FAIL("%s", err);
		ASSERT_EQ(vp_jit_index__resolve(x, 0x5010, 150, false, f, 4), 1);   /* from its load on: it */
		ASSERT_STREQ(f[0].name, "Gen2.hot()");
		int n = vp_jit_index__resolve(x, 0x5010, 120, false, f, 4);       /* before its load */
		if (walk) {
			ASSERT_EQ(n, 0);
		} else {
			ASSERT_EQ(n, 1);
			ASSERT_STREQ(f[0].name, "Gen2.hot()");
		}
		vp_jit_index__close(x);
	}
}

int main(void)
{
	snprintf(dir, sizeof(dir), "/tmp/vp-maps-reader-XXXXXX");
	ASSERT_NOT_NULL(mkdtemp(dir));
	char err[512], pdir[300], good[400];

	errno = 0;
	ASSERT_NULL(vp_jit_index__open("/nonexistent/jit/1", err, sizeof(err)));
	ASSERT_EQ(errno, ENOENT);
	ASSERT_NULL(vp_jit_index__open(dir, err, sizeof(err)));
	ASSERT_EQ(errno, ENOENT);
	ASSERT_CONTAINS(err, "no codemap");

	snprintf(pdir, sizeof(pdir), "%s/4242", dir);
	ASSERT_OK(mkdir(pdir, 0700));
	snprintf(good, sizeof(good), "%s/codemap.vpm", pdir);
	write_map(good, 256); /* small chunks: truncation has several chunk boundaries */

	struct vp_jit_index *x = vp_jit_index__open(pdir, err, sizeof(err));
	if (!x)
		FAIL("%s", err);
	check_model(vp_jit_index__codemap(x));
	check_index(x);
	check_spans(x);
	check_export_import(x);
	vp_jit_index__close(x);

	check_bad_records();
	check_method_ptrs();
	check_walk_dating();
	check_truncation(good);
	check_fuzz(good);
	check_record_fuzz();

	char cmd[400];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ASSERT_EQ(run_sh(cmd, 290), 0);
	return 0;
}
