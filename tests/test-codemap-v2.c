/* The compact code-map records of agent version 2 (maps/codemap_format.h), encoded by
 * the writer the agent uses (maps/codemap_writer.h): INLINE2 read back equals the INLINE
 * it replaces, on hand-made and random inlinings (shared outer
 * frames, negative bcis, pcs out of order); METHOD_LOAD2 takes its name from
 * METHOD_NAME; METHOD_NAMES gives each method its name, file and lines; malformed
 * streams are skipped and counted, never a crash; old INLINE records still read. */
#include "test.h"
#include "test-run.h"

#include <stdlib.h>
#include <sys/stat.h>

#include "common/chunkfile.h"
#include "maps/codemap.h"
#include "maps/codemap_format.h"
#include "maps/codemap_writer.h"

static char dir[256];

struct inl {
	uint32_t npcs, nframes;
	struct vp_cm_pc pcs[512];
	struct vp_cm_frame fr[512 * 16];
};

static void put(struct cfile_writer *w, uint32_t type, uint64_t t, const void *b, size_t n)
{
	ASSERT_OK(cfile_writer__append(w, type, t, b, n));
}

static void epoch0(struct cfile_writer *w)
{
	struct vp_cm_epoch_begin b = { .epoch = 0, .reason = VP_EPOCH_START };
	put(w, VP_CM_EPOCH_BEGIN, 1, &b, sizeof(b));
}

static void load2(struct cfile_writer *w, uint64_t start, uint32_t size, uint64_t id, uint64_t t)
{
	struct vp_cm_method_load2 l = { .code_start = start, .code_size = size, .method_id = id,
					.level = VP_CM_LEVEL_UNKNOWN };
	put(w, VP_CM_METHOD_LOAD2, t, &l, sizeof(l));
}

static void mname(struct cfile_writer *w, uint64_t id, const char *name)
{
	uint8_t b[256];
	size_t len = vp_cm_method_name__size(name, "A.java", 0);
	ASSERT_LE(len, sizeof(b));
	vp_cm_method_name__fill(b, id, name, "A.java", NULL, 0);
	put(w, VP_CM_METHOD_NAME, 1, b, len);
}

/* The test's inlining as the writer's encoder reads it (the agent's reads JVMTI's
 * PCStackInfo the same way). */
static void src_pc(const void *ctx, uint32_t i, uint64_t *pc, uint32_t *depth)
{
	const struct inl *in = ctx;
	*pc = 0x100000 + in->pcs[i].pc_offset;   /* code_start of every src below */
	*depth = in->pcs[i].depth;
}

static void src_frame(const void *ctx, uint32_t i, uint32_t k, uint64_t *method, int32_t *bci)
{
	const struct inl *in = ctx;
	*method = in->fr[in->pcs[i].first + k].method_id;
	*bci = in->fr[in->pcs[i].first + k].bci;
}

/* INLINE2 by the real encoder (maps/codemap_writer.h), as the agent calls it: the
 * compiled method first in the table, then the plan, then the encoding. The record is
 * written for code at start, which the decoder takes from the body. Returns the record's
 * body size. */
static size_t encode2(uint8_t *b, const struct inl *in, uint64_t start, uint64_t id)
{
	struct vp_cm_inl_src src = { .ctx = in, .npcs = in->npcs, .code_start = 0x100000, .code_size = 0x10000,
				     .pc = src_pc, .frame = src_frame };
	static struct vp_cm_inl_table tab;
	struct vp_cm_inl_plan plan;
	bool fresh;
	vp_cm_inl_table__init(&tab);
	vp_cm_inl_table__index(&tab, id, &fresh);
	size_t bound = vp_cm_inline2__plan(&tab, &src, &plan, NULL, NULL);
	ASSERT_GT(bound, 0);
	ASSERT_EQ(plan.npcs, in->npcs);
	ASSERT_UEQ(plan.nframes, in->nframes);
	size_t len = vp_cm_inline2__encode(b, &src, &tab, id, &plan);
	ASSERT_LE(len, bound);
	struct vp_cm_inline2 h;
	memcpy(&h, b, sizeof(h));
	h.code_start = start;
	memcpy(b, &h, sizeof(h));
	return len;
}

static size_t encode1(uint8_t *b, const struct inl *in, uint64_t start, uint64_t id)
{
	struct vp_cm_inline h = { .code_start = start, .method_id = id, .npcs = in->npcs, .nframes = in->nframes };
	memcpy(b, &h, sizeof(h));
	memcpy(b + sizeof(h), in->pcs, in->npcs * sizeof(*in->pcs));
	memcpy(b + sizeof(h) + in->npcs * sizeof(*in->pcs), in->fr, in->nframes * sizeof(*in->fr));
	return sizeof(h) + in->npcs * sizeof(*in->pcs) + in->nframes * sizeof(*in->fr);
}

/* A random inlining of method id at code of size bytes: stacks that share outer frames
 * with the pc before, as HotSpot's do; pcs sorted unless shuffle. */
static void random_inl(struct inl *in, uint64_t id, uint32_t size, bool shuffle)
{
	uint32_t off = 0;
	in->npcs = 1 + (uint32_t)rand() % 300;
	in->nframes = 0;
	for (uint32_t i = 0; i < in->npcs; i++) {
		off += (uint32_t)rand() % (size / 400 + 1);
		struct vp_cm_pc *pc = &in->pcs[i];
		pc->pc_offset = off;
		pc->depth = (uint16_t)(1 + rand() % 12);
		pc->first = in->nframes;
		for (uint32_t k = 0; k < pc->depth; k++) {
			struct vp_cm_frame *f = &in->fr[in->nframes++];
			const struct vp_cm_pc *pv = i ? &in->pcs[i - 1] : NULL;
			uint32_t from_outer = pc->depth - 1 - k;
			if (k == pc->depth - 1u)
				*f = (struct vp_cm_frame){ .method_id = id, .bci = from_outer };
			else if (pv && from_outer < pv->depth && rand() % 4)
				*f = in->fr[pv->first + pv->depth - 1 - from_outer];
			else
				*f = (struct vp_cm_frame){ .method_id = 1000 + (uint64_t)(rand() % 40), .bci = rand() % 70000 - 1 };
		}
		/* The compiled method itself is the outermost frame at every pc. */
		in->fr[pc->first + pc->depth - 1] = (struct vp_cm_frame){ .method_id = id, .bci = rand() % 9 };
	}
	if (shuffle)
		for (uint32_t i = in->npcs; i > 1; i--) {
			uint32_t j = (uint32_t)rand() % i;
			struct vp_cm_pc t = in->pcs[i - 1];
			in->pcs[i - 1] = in->pcs[j];
			in->pcs[j] = t;
		}
	/* Frames of a shuffled table keep their places: pcs point at them by first. */
}

/* The frames of each pc of a, in a's pc order, against b's. */
static void same_inlining(const struct vp_cm_inline_info *a, const struct vp_cm_inline_info *b)
{
	ASSERT_EQ(a->npcs, b->npcs);
	ASSERT_EQ(a->nframes, b->nframes);
	for (uint32_t i = 0; i < a->npcs; i++) {
		ASSERT_EQ(a->pcs[i].pc_offset, b->pcs[i].pc_offset);
		ASSERT_EQ(a->pcs[i].depth, b->pcs[i].depth);
		for (uint32_t k = 0; k < a->pcs[i].depth; k++) {
			const struct vp_cm_frame *x = &a->frames[a->pcs[i].first + k], *y = &b->frames[b->pcs[i].first + k];
			ASSERT_UEQ(x->method_id, y->method_id);
			ASSERT_EQ(x->bci, y->bci);
		}
	}
}

static struct vp_codemap *load_map(const char *name, size_t *bytes_out, int which, const struct inl *ins, int n)
{
	static uint8_t b[1 << 20];
	char p[400], err[512];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	unlink(p);
	struct cfile_writer *w = cfile_writer__create(p, VP_KIND_CODEMAP, VP_CODEMAP_FORMAT_VERSION, 0, true);
	ASSERT_NOT_NULL(w);
	epoch0(w);
	size_t bytes = 0;
	for (int i = 0; i < n; i++) {
		uint64_t start = 0x100000 + (uint64_t)i * 0x10000, id = 1 + (uint64_t)i;
		load2(w, start, 0x10000, id, 10 + (uint64_t)i);
		bool sorted = true;
		for (uint32_t k = 1; k < ins[i].npcs; k++)
			sorted &= ins[i].pcs[k - 1].pc_offset <= ins[i].pcs[k].pc_offset;
		if (which == 1 && !sorted)
			continue; /* INLINE must be sorted; only INLINE2 may not be */
		size_t len = which == 2 ? encode2(b, &ins[i], start, id) : encode1(b, &ins[i], start, id);
		put(w, which == 2 ? VP_CM_INLINE2 : VP_CM_INLINE, 10 + (uint64_t)i, b, len);
		bytes += len;
	}
	ASSERT_OK(cfile_writer__close(w));
	struct vp_codemap *m = vp_codemap__load_file(p, err, sizeof(err));
	if (!m)
		FAIL("%s", err);
	if (m->skipped_records)
		FAIL("%s: %s", name, m->damage);
	*bytes_out = bytes;
	return m;
}

static void check_random(void)
{
	static struct inl ins[40];
	srand(2026);
	for (int i = 0; i < 40; i++)
		random_inl(&ins[i], 1 + (uint64_t)i, 0x10000, i % 5 == 4);
	size_t b1, b2;
	struct vp_codemap *m1 = load_map("v1.vpm", &b1, 1, ins, 40), *m2 = load_map("v2.vpm", &b2, 2, ins, 40);
	ASSERT_EQ(m1->ninlines, 32);
	ASSERT_EQ(m2->ninlines, 40);
	for (int i = 0; i < 40; i++) {
		const struct vp_cm_inline_info *a = &m1->inlines[m1->methods[i].inl], *b = &m2->inlines[m2->methods[i].inl];
		if (i % 5 == 4) {
			/* INLINE must come sorted; INLINE2 may not: the reader sorts it (stably). */
			for (uint32_t k = 1; k < b->npcs; k++)
				ASSERT_LE(b->pcs[k - 1].pc_offset, b->pcs[k].pc_offset);
			continue;
		}
		same_inlining(a, b);
	}
	fprintf(stderr, "random inlinings: INLINE %zu bytes, INLINE2 %zu bytes (%.1fx smaller)\n", b1, b2,
		(double)b1 / (double)b2);
	ASSERT_LT(b2 * 3, b1); /* random stacks share less than real ones (5.9x on javac) */
	/* No METHOD_NAME: a LOAD2 method is named as unknown, never NULL. */
	ASSERT_STREQ(m2->methods[0].name, "[unknown compiled method]");
	vp_codemap__free(m1);
	vp_codemap__free(m2);
}

/* Shuffled pcs: the decoded table, sorted, holds each pc with its own frames. */
static void check_shuffled(void)
{
	static struct inl in;
	srand(7);
	random_inl(&in, 5, 0x10000, true);
	size_t b;
	struct vp_codemap *m = load_map("shuf.vpm", &b, 2, &in, 1);
	const struct vp_cm_inline_info *x = &m->inlines[0];
	ASSERT_EQ(x->npcs, in.npcs);
	for (uint32_t i = 0; i < in.npcs; i++) {
		/* Find in.pcs[i] among the decoded ones (same offset, same frames). */
		bool found = false;
		for (uint32_t j = 0; j < x->npcs && !found; j++) {
			if (x->pcs[j].pc_offset != in.pcs[i].pc_offset || x->pcs[j].depth != in.pcs[i].depth)
				continue;
			found = !memcmp(&x->frames[x->pcs[j].first], &in.fr[in.pcs[i].first],
					in.pcs[i].depth * sizeof(struct vp_cm_frame));
		}
		ASSERT_TRUE(found);
	}
	vp_codemap__free(m);
}

/* The names: LOAD2 takes METHOD_NAME's, written before or after it in the file. */
static void check_names(void)
{
	char p[400], err[512];
	snprintf(p, sizeof(p), "%s/names.vpm", dir);
	unlink(p);
	struct cfile_writer *w = cfile_writer__create(p, VP_KIND_CODEMAP, VP_CODEMAP_FORMAT_VERSION, 0, true);
	epoch0(w);
	mname(w, 7, "A.seven()");
	load2(w, 0x1000, 0x100, 7, 5);
	load2(w, 0x2000, 0x100, 8, 6);
	mname(w, 8, "A.eight(int)");
	load2(w, 0x3000, 0x100, 9, 7);
	ASSERT_OK(cfile_writer__close(w));
	struct vp_codemap *m = vp_codemap__load_file(p, err, sizeof(err));
	if (!m)
		FAIL("%s", err);
	ASSERT_EQ(m->nmethods, 3);
	ASSERT_STREQ(m->methods[0].name, "A.seven()");
	ASSERT_STREQ(m->methods[1].name, "A.eight(int)");
	ASSERT_STREQ(m->methods[2].name, "[unknown compiled method]");
	ASSERT_STREQ(vp_codemap__in_epoch(m, 0, 0x2050)->name, "A.eight(int)");
	ASSERT_STREQ(m->methods[0].klass, "");
	vp_codemap__free(m);
}

/* METHOD_NAMES by the real encoder: class "p.K", file "K.java", methods with ids that
 * go down as well as up, and line tables out of order. */
static size_t names_record(uint8_t *b, const uint64_t *ids, const char *const *parts, int n)
{
	struct vp_cm_names_enc e;
	ASSERT_OK(vp_cm_names_enc__begin(&e, b, 1000, "p.K", "K.java"));
	for (int i = 0; i < n; i++) {
		/* i lines: bci 10*k+3 (the last first), line 100+k. */
		struct vp_cm_line lines[8];
		for (int k = i - 1, j = 0; k >= 0; k--, j++)
			lines[j] = (struct vp_cm_line){ .start_bci = (uint32_t)(10 * k + 3), .line = (uint32_t)(100 + k) };
		ASSERT_OK(vp_cm_names_enc__add(&e, ids[i], parts[i], lines, (uint32_t)i));
	}
	return vp_cm_names_enc__end(&e);
}

static void check_method_names(void)
{
	static const uint64_t ids[] = { 0x7f0000001000, 0x7f0000001008, 0x7f0000000ff0, 0x7f0000002000 };
	static const char *const parts[] = { "a()", "b(int, String[])", "<init>()", "c(long)" };
	uint8_t b[1024];
	char p[400], err[512];
	snprintf(p, sizeof(p), "%s/mnames.vpm", dir);
	unlink(p);
	struct cfile_writer *w = cfile_writer__create(p, VP_KIND_CODEMAP, VP_CODEMAP_FORMAT_VERSION, 0, true);
	epoch0(w);
	size_t len = names_record(b, ids, parts, 4);
	put(w, VP_CM_METHOD_NAMES, 2, b, len);
	load2(w, 0x1000, 0x100, ids[1], 5);
	/* Damaged copies: cut short inside the stream, a count too large, a stray byte. */
	struct vp_cm_method_names h;
	memcpy(&h, b, sizeof(h));
	h.bytes -= 3;
	uint8_t c[1024];
	memcpy(c, b, len);
	memcpy(c, &h, sizeof(h));
	put(w, VP_CM_METHOD_NAMES, 3, c, len - 3);
	memcpy(&h, b, sizeof(h));
	h.n = 5;
	memcpy(c, b, len);
	memcpy(c, &h, sizeof(h));
	put(w, VP_CM_METHOD_NAMES, 3, c, len);
	memcpy(&h, b, sizeof(h));
	h.bytes += 1;
	memcpy(c, b, len);
	memcpy(c, &h, sizeof(h));
	c[len] = 0;
	put(w, VP_CM_METHOD_NAMES, 3, c, len + 1);
	ASSERT_OK(cfile_writer__close(w));
	struct vp_codemap *m = vp_codemap__load_file(p, err, sizeof(err));
	if (!m)
		FAIL("%s", err);
	ASSERT_UEQ(m->skipped_records, 3);
	ASSERT_EQ(m->nnames, 4); /* the damaged records left nothing behind */
	for (int i = 0; i < 4; i++) {
		const struct vp_cm_name_info *ni = vp_codemap__name(m, ids[i]);
		ASSERT_NOT_NULL(ni);
		char want[64];
		snprintf(want, sizeof(want), "p.K.%s", parts[i]);
		ASSERT_STREQ(ni->name, want);
		ASSERT_STREQ(ni->file, "K.java");
		ASSERT_EQ(ni->nlines, i);
		for (int k = 0; k < i; k++)
			ASSERT_EQ(vp_codemap__line(ni, 10 * k + 5), 100 + k);
	}
	ASSERT_STREQ(m->methods[0].name, "p.K.b(int, String[])");
	vp_codemap__free(m);
}

/* Each malformed INLINE2 is skipped and counted; the load stays. */
static void check_bad(void)
{
	static const struct {
		const char *what;
		uint32_t npcs, nframes, nmethods;
		uint8_t stream[16];
		uint32_t bytes;
	} bad[] = {
		{ "keep beyond the previous depth", 1, 1, 1, { 0, 1, 0 }, 3 },
		{ "method index out of the table", 1, 1, 1, { 0, 0, 1, 1, 0 }, 5 },
		{ "stream ends inside a pc", 2, 2, 1, { 0, 0, 1, 0, 0, 2 }, 6 },
		{ "bytes left over", 1, 1, 1, { 0, 0, 1, 0, 0, 0, 0, 0 }, 8 },
		{ "fewer frames than nframes", 1, 2, 1, { 0, 0, 1, 0, 0, 0 }, 6 },
		{ "a pc of depth 0", 1, 0, 1, { 0, 0, 0 }, 3 },
		{ "negative pc offset", 1, 1, 1, { 1, 0, 1, 0, 0 }, 5 },
		{ "unterminated number", 1, 1, 1, { 0x80, 0x80, 0x80 }, 3 },
		{ "more pcs than the stream holds", 9, 1, 1, { 0, 0, 1, 0, 0 }, 5 },
		{ "too many frames", 1, VP_CM_INLINE2_MAX_FRAMES + 1, 1, { 0, 0, 1, 0, 0 }, 5 },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char p[400], err[512];
		uint8_t b[256];
		snprintf(p, sizeof(p), "%s/bad.vpm", dir);
		unlink(p);
		struct cfile_writer *w = cfile_writer__create(p, VP_KIND_CODEMAP, VP_CODEMAP_FORMAT_VERSION, 0, true);
		epoch0(w);
		load2(w, 0x1000, 0x100, 1, 5);
		struct vp_cm_inline2 h = { .code_start = 0x1000, .method_id = 1, .npcs = bad[i].npcs,
					   .nframes = bad[i].nframes, .nmethods = bad[i].nmethods, .bytes = bad[i].bytes };
		uint64_t id = 1;
		memcpy(b, &h, sizeof(h));
		memcpy(b + sizeof(h), &id, 8);
		memcpy(b + sizeof(h) + 8, bad[i].stream, bad[i].bytes);
		put(w, VP_CM_INLINE2, 6, b, sizeof(h) + 8 + bad[i].bytes);
		/* A record too short for its own tables. */
		h.bytes = 200;
		memcpy(b, &h, sizeof(h));
		put(w, VP_CM_INLINE2, 6, b, sizeof(h) + 8 + 4);
		ASSERT_OK(cfile_writer__close(w));
		struct vp_codemap *m = vp_codemap__load_file(p, err, sizeof(err));
		if (!m)
			FAIL("%s: %s", bad[i].what, err);
		if (m->skipped_records != 2)
			FAIL("%s: %llu records skipped, expected 2", bad[i].what, (unsigned long long)m->skipped_records);
		ASSERT_EQ(m->nmethods, 1);
		ASSERT_EQ(m->methods[0].inl, -1);
		vp_codemap__free(m);
	}
	/* Random damage to a good record: read or skipped, never a crash. */
	static struct inl in;
	static uint8_t b[1 << 16];
	srand(99);
	random_inl(&in, 1, 0x10000, false);
	size_t len = encode2(b, &in, 0x1000, 1);
	int skipped = 0;
	for (int k = 0; k < 2000; k++) {
		char p[400], err[512];
		static uint8_t c[1 << 16];
		memcpy(c, b, len);
		for (int f = 0; f < 1 + k % 4; f++)
			c[(size_t)rand() % len] ^= (uint8_t)(1u << (rand() % 8));
		snprintf(p, sizeof(p), "%s/fuzz.vpm", dir);
		unlink(p);
		struct cfile_writer *w = cfile_writer__create(p, VP_KIND_CODEMAP, VP_CODEMAP_FORMAT_VERSION, 0, true);
		epoch0(w);
		load2(w, 0x1000, 0x10000, 1, 5);
		put(w, VP_CM_INLINE2, 6, c, len);
		ASSERT_OK(cfile_writer__close(w));
		struct vp_codemap *m = vp_codemap__load_file(p, err, sizeof(err));
		if (!m)
			FAIL("fuzz %d: %s", k, err);
		skipped += m->skipped_records > 0;
		if (m->methods[0].inl >= 0) {
			const struct vp_cm_inline_info *x = &m->inlines[m->methods[0].inl];
			for (uint32_t i = 0; i < x->npcs; i++)
				ASSERT_LE((uint64_t)x->pcs[i].first + x->pcs[i].depth, x->nframes);
		}
		vp_codemap__free(m);
	}
	fprintf(stderr, "INLINE2 damage: %d of 2000 records skipped as malformed\n", skipped);
	ASSERT_GT(skipped, 100);
}

int main(void)
{
	snprintf(dir, sizeof(dir), "/tmp/viprof-test-cmv2.%d", (int)getpid());
	mkdir(dir, 0700);
	check_random();
	check_shuffled();
	check_names();
	check_method_names();
	check_bad();
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (run_sh(cmd, 110))
		fprintf(stderr, "could not remove %s\n", dir);
	printf("codemap v2 records: ok\n");
	return 0;
}
