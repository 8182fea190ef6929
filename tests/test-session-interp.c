/* Interpreted Java frames and walk endings in a synthetic session: samples whose user
 * frames carry struct vp_java_frame entries (Method* + bci), and a JVM code map whose
 * METHOD_PTR records give one Method* to a first class generation and then, after it
 * unloaded, to a second one. Checks that names follow the sample's time, bci -> line,
 * a pre-existing class's pointer resolving before its record, an unknown Method* kept as
 * "[interpreted]", nr_java larger than the record (clamped, no crash), and the walk-end
 * counts in the text header, --layers and JSON; user frames in no mapping are reported
 * without blaming lost records unless a LOST record says so. Deep stacks: a sample of
 * 1500 interpreted frames (nr_java in two bytes) named frame by frame, and a sample in
 * the layout from before (nr_java one byte, the next reserved) read as before. */
#include <errno.h>
#include <sys/stat.h>
#include <time.h>

#include "common/chunkfile.h"
#include "common/session_format.h"
#include "maps/codemap_format.h"
#include "report/report.h"
#include "postproc/session.h"
#include "test.h"

#define MS 1000000ull
#define PID 700
#define INTERP 0x7e0000100000ull   /* the template interpreter's code blob */
#define M_REUSED 0x7f00aa000100ull /* a Method* of class generation 1, then of generation 2 */
#define M_PRE 0x7f00aa000800ull    /* a Method* of a class loaded before the agent */
#define M_NONE 0x7f00aa0fff00ull   /* a Method* no record names */

static uint64_t base;

static void w_name(struct cfile_writer *w, uint64_t t, uint64_t id, const char *name, const char *file,
		   const struct vp_cm_line *lines, uint32_t nlines)
{
	char buf[sizeof(struct vp_cm_method_name) + 256] = { 0 };
	struct vp_cm_method_name *h = (void *)buf;
	size_t nl = strlen(name), fl = strlen(file);
	h->method_id = id;
	h->name_len = (uint16_t)nl;
	h->file_len = (uint16_t)fl;
	h->nlines = nlines;
	memcpy(buf + sizeof(*h), name, nl);
	memcpy(buf + sizeof(*h) + nl, file, fl);
	memcpy(buf + sizeof(*h) + nl + fl, lines, nlines * sizeof(*lines));
	ASSERT_OK(cfile_writer__append(w, VP_CM_METHOD_NAME, base + t, buf,
				       sizeof(*h) + nl + fl + nlines * sizeof(*lines)));
}

static void w_ptr(struct cfile_writer *w, uint64_t t, uint64_t ptr, uint64_t id, uint32_t flags)
{
	struct {
		struct vp_cm_method_ptrs h;
		struct vp_cm_method_ptr e;
	} r = { { 1, flags }, { ptr, id } };
	ASSERT_OK(cfile_writer__append(w, VP_CM_METHOD_PTR, base + t, &r, sizeof(r)));
}

static void write_codemap(const char *dir)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/jit", dir);
	ASSERT_OK(mkdir(path, 0700));
	snprintf(path, sizeof(path), "%s/jit/%d", dir, PID);
	ASSERT_OK(mkdir(path, 0700));
	snprintf(path, sizeof(path), "%s/jit/%d/%s", dir, PID, VP_CODEMAP_FILE);
	struct cfile_writer *w = cfile_writer__create(path, VP_KIND_CODEMAP, VP_CODEMAP_FORMAT_VERSION, 0, false);
	ASSERT_NOT_NULL(w);
	struct vp_cm_meta meta = { .pid = PID, .flags = VP_CM_META_FRAME_POINTERS, .agent_version = VP_AGENT_VERSION };
	ASSERT_OK(cfile_writer__append(w, VP_CM_META, base, &meta, sizeof(meta)));
	struct vp_cm_epoch_begin b0 = { 0, VP_EPOCH_START };
	ASSERT_OK(cfile_writer__append(w, VP_CM_EPOCH_BEGIN, base, &b0, sizeof(b0)));
	char blob[sizeof(struct vp_cm_code_blob) + 16] = { 0 };
	struct vp_cm_code_blob *cb = (void *)blob;
	*cb = (struct vp_cm_code_blob){ .code_start = INTERP, .code_size = 0x10000, .kind = VP_BLOB_INTERPRETER,
					.name_len = 11 };
	memcpy(cb + 1, "Interpreter", 11);
	ASSERT_OK(cfile_writer__append(w, VP_CM_CODE_BLOB, base, blob, sizeof(*cb) + 11));

	/* Generation 1 of a class owns M_REUSED from 1 ms; it unloads and generation 2's
	 * method gets the same metadata at 10 ms. Lines: bci 0-4 line 10, 5- line 12 in
	 * Gen1; bci 0-3 line 30, 4- line 31 in Gen2. */
	static const struct vp_cm_line l1[] = { { 0, 10 }, { 5, 12 } }, l2[] = { { 0, 30 }, { 4, 31 } },
					l3[] = { { 0, 7 } };
	w_name(w, 1 * MS, 21, "Gen1.work()", "Gen1.java", l1, 2);
	w_ptr(w, 1 * MS, M_REUSED, 21, 0);
	w_name(w, 10 * MS, 22, "Gen2.work()", "Gen2.java", l2, 2);
	w_ptr(w, 10 * MS, M_REUSED, 22, 0);
	/* A class the agent found already loaded, recorded late (at 3 ms): valid before too. */
	w_name(w, 3 * MS, 23, "Boot.main(String[])", "Boot.java", l3, 1);
	w_ptr(w, 3 * MS, M_PRE, 23, VP_CM_PTRS_PREEXISTING);
	ASSERT_OK(cfile_writer__close(w));
}

/* A sample of pid PID with user frames ips (leaf first) and Java entries jf; nr_java is
 * written as claimed_java (may exceed the entries really present). */
static void w_sample(struct cfile_writer *w, uint64_t t, const uint64_t *ips, int nu, const struct vp_java_frame *jf,
		     int nj, int claimed_java, int walk_end)
{
	char buf[sizeof(struct vp_sample) + 8 * 16 + 16 * sizeof(struct vp_java_frame)] = { 0 };
	struct vp_sample *s = (void *)buf;
	s->pid = s->tid = PID;
	s->mode = VP_MODE_USER;
	s->period = 1000000;
	s->nr_user = (uint16_t)nu;
	s->nr_java = (uint8_t)claimed_java;
	s->walk_end = (uint8_t)walk_end;
	memcpy(s->ips, ips, 8 * (size_t)nu);
	if (nj)
		memcpy(s->ips + nu, jf, (size_t)nj * sizeof(*jf));
	ASSERT_OK(cfile_writer__append(w, VP_REC_SAMPLE, base + t, buf,
				       sizeof(*s) + 8 * (size_t)nu + (size_t)nj * sizeof(*jf)));
}

/* A session stream with its META (the bpf backend's table walk), the cpu-clock event
 * and the JVM's COMM; the caller adds samples and closes it. */
static struct cfile_writer *begin_session(const char *dir)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, VP_SESSION_STREAM);
	struct cfile_writer *w = cfile_writer__create(path, VP_KIND_SESSION_STREAM, VP_SESSION_FORMAT_VERSION, 0, false);
	ASSERT_NOT_NULL(w);
	static const char meta[] = "backend\0bpf\0stack_walk\0tables\0";
	ASSERT_OK(cfile_writer__append(w, VP_REC_META, base, meta, sizeof(meta)));
	struct vp_event_desc ev = { .index = 0, .perf_type = 1, .freq = 1000,
				    .flags = VP_EVENT_SOFTWARE | VP_EVENT_TIME_UNITS };
	strcpy(ev.name, "cpu-clock");
	ASSERT_OK(cfile_writer__append(w, VP_REC_EVENT, base, &ev, sizeof(ev)));
	struct vp_comm c = { .pid = PID, .tid = PID };
	strcpy(c.comm, "java");
	ASSERT_OK(cfile_writer__append(w, VP_REC_COMM, base, &c, sizeof(c)));
	return w;
}

static void write_session(const char *dir, bool lost)
{
	struct cfile_writer *w = begin_session(dir);

	/* Two interpreted frames: the leaf in the reused method (bci 6), its caller in
	 * Boot.main (bci 2). */
	uint64_t ips[] = { INTERP + 0x40, INTERP + 0x80 };
	struct vp_java_frame jf[] = { { .frame = 0, .bci = 6, .method = M_REUSED },
				      { .frame = 1, .bci = 2, .method = M_PRE } };
	w_sample(w, 2 * MS, ips, 2, jf, 2, 2, VP_WALK_ROOT);   /* Gen1, whole */
	w_sample(w, 5 * MS, ips, 2, jf, 2, 2, VP_WALK_ROOT);   /* Gen1, whole */
	jf[0].bci = 4;
	w_sample(w, 12 * MS, ips, 2, jf, 2, 2, VP_WALK_DEPTH);  /* Gen2 (line 31), depth limit */
	jf[0].bci = 1;
	w_sample(w, 13 * MS, ips, 2, jf, 2, 2, VP_WALK_ROOT);   /* Gen2 at line 30 */
	jf[0].bci = 4;
	/* Before any record for M_REUSED: not named, but kept. */
	w_sample(w, 500000, ips, 2, jf, 2, 2, VP_WALK_NO_RULE);
	/* A Method* nobody named, with an unknown bci. */
	struct vp_java_frame none[] = { { .frame = 0, .bci = -1, .method = M_NONE } };
	w_sample(w, 12 * MS, ips, 1, none, 1, 1, VP_WALK_UNREADABLE);
	/* nr_java claims 200 entries, the record holds 1: the one is used, the rest ignored
	 * (the caller's interpreter pc then names the interpreter itself). */
	w_sample(w, 12 * MS, ips, 2, jf, 1, 200, VP_WALK_BAD_FRAME);
	/* An entry for a frame index past the user frames: ignored. */
	struct vp_java_frame past[] = { { .frame = 9, .bci = 0, .method = M_PRE } };
	w_sample(w, 12 * MS, ips, 1, past, 1, 1, VP_WALK_NO_PROC);
	/* A user frame in no recorded mapping, from a frame-pointer walk (unknown ending). */
	uint64_t stray[] = { 0x10000 };
	w_sample(w, 12 * MS, stray, 1, NULL, 0, 0, VP_WALK_UNKNOWN);
	if (lost) {
		struct vp_lost l = { UINT32_MAX, VP_LOST_KERNEL_RING, 3 };
		ASSERT_OK(cfile_writer__append(w, VP_REC_LOST, base + 13 * MS, &l, sizeof(l)));
	}
	struct vp_end e = { .samples = 9, .duration_ns = 20 * MS };
	ASSERT_OK(cfile_writer__append(w, VP_REC_END, base + 20 * MS, &e, sizeof(e)));
	ASSERT_OK(cfile_writer__close(w));
}

/* The sample record as written before issue 22: nr_java one byte, the byte after
 * sched_state reserved (always written 0). */
struct old_sample {
	uint32_t pid, tid;
	uint32_t cpu;
	uint16_t event;
	uint8_t mode, flags;
	uint64_t period;
	uint16_t nr_kernel, nr_user;
	uint8_t walk_end, nr_java, sched_state, reserved;
	uint64_t ips[];
};
_Static_assert(sizeof(struct old_sample) == sizeof(struct vp_sample), "the sample header kept its size");

#define DEEP 1500   /* user frames of the deep sample, every one interpreted */

/* A session of deep stacks: one sample DEEP frames deep, every frame interpreted (Boot.main
 * at the root, Gen2.work above it), nr_java written in two bytes; the same sample with
 * the count claiming 300 entries more than the record holds; and an old-layout sample
 * with two interpreted frames. */
static void write_deep_session(const char *dir)
{
	struct cfile_writer *w = begin_session(dir);

	size_t len = sizeof(struct vp_sample) + DEEP * (8 + sizeof(struct vp_java_frame));
	struct vp_sample *s = calloc(1, len);
	ASSERT_NOT_NULL(s);
	s->pid = s->tid = PID;
	s->mode = VP_MODE_USER;
	s->period = 1000000;
	s->nr_user = DEEP;
	s->walk_end = VP_WALK_ROOT;
	struct vp_java_frame *jf = (void *)(s->ips + DEEP);
	for (int i = 0; i < DEEP; i++) {
		s->ips[i] = INTERP + 0x40 + (i ? 0x40 : 0);
		jf[i] = (struct vp_java_frame){ .frame = (uint16_t)i, .bci = 4,
						.method = i == DEEP - 1 ? M_PRE : M_REUSED };
	}
	vp_sample_set_nr_java(s, DEEP);
	ASSERT_EQ(s->nr_java_hi, DEEP >> 8);
	ASSERT_EQ(vp_sample_nr_java(s), DEEP);
	ASSERT_OK(cfile_writer__append(w, VP_REC_SAMPLE, base + 12 * MS, s, len));
	/* A count past the record: the entries present are used, the rest ignored. */
	vp_sample_set_nr_java(s, DEEP + 300);
	ASSERT_OK(cfile_writer__append(w, VP_REC_SAMPLE, base + 12 * MS, s, len));
	free(s);

	char buf[sizeof(struct old_sample) + 2 * 8 + 2 * sizeof(struct vp_java_frame)] = { 0 };
	struct old_sample *o = (void *)buf;
	o->pid = o->tid = PID;
	o->mode = VP_MODE_USER;
	o->period = 1000000;
	o->nr_user = 2;
	o->nr_java = 2;
	o->walk_end = VP_WALK_ROOT;
	o->ips[0] = INTERP + 0x40;
	o->ips[1] = INTERP + 0x80;
	struct vp_java_frame ojf[] = { { .frame = 0, .bci = 6, .method = M_REUSED },
				       { .frame = 1, .bci = 2, .method = M_PRE } };
	memcpy(o->ips + 2, ojf, sizeof(ojf));
	ASSERT_OK(cfile_writer__append(w, VP_REC_SAMPLE, base + 5 * MS, buf, sizeof(buf)));
	struct vp_end e = { .samples = 3, .duration_ns = 20 * MS };
	ASSERT_OK(cfile_writer__append(w, VP_REC_END, base + 20 * MS, &e, sizeof(e)));
	ASSERT_OK(cfile_writer__close(w));
}

static char *render(const struct vp_profile *p, int which, bool layers)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct vp_out o = { .f = f, .width = 200 };
	struct vp_report_opts ro = { .layers = layers, .threads = true };
	if (which == 0)
		ASSERT_OK(report_folded(p, &o, &ro));
	else if (which == 1)
		ASSERT_OK(report_text(p, NULL, &o, &ro));
	else
		ASSERT_OK(report_json(p, NULL, &o, &ro));
	fclose(f);
	return buf;
}

static const struct vp_frame *frame_named(const struct vp_profile *p, const char *name)
{
	for (size_t i = 0; i < p->nframes; i++)
		if (!strcmp(p->frames[i].name, name))
			return &p->frames[i];
	FAIL("no frame %s", name);
}

static void rm_session(const char *dir)
{
	char path[600];
	snprintf(path, sizeof(path), "%s/jit/%d/%s", dir, PID, VP_CODEMAP_FILE);
	unlink(path);
	snprintf(path, sizeof(path), "%s/jit/%d", dir, PID);
	rmdir(path);
	snprintf(path, sizeof(path), "%s/jit", dir);
	rmdir(path);
	snprintf(path, sizeof(path), "%s/%s", dir, VP_SESSION_STREAM);
	unlink(path);
	rmdir(dir);
}

static struct vp_profile *load(const char *dir)
{
	struct vp_profile *p = vp_profile__new();
	char err[512] = "";
	ASSERT_NOT_NULL(p);
	if (vp_session__load(dir, p, NULL, err, sizeof(err)))
		FAIL("load %s: %s", dir, err);
	return p;
}

int main(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	base = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec + 1000 * MS;

	char dir[] = "/tmp/vp-test-interp-XXXXXX";
	ASSERT_NOT_NULL(mkdtemp(dir));
	write_codemap(dir);
	write_session(dir, false);
	struct vp_profile *p = load(dir);

	/* Names follow time: the same Method* is Gen1 at 2 and 5 ms, Gen2 at 12 ms; the
	 * pre-existing class resolves at 0.5 ms although its record came at 3 ms. */
	char *fo = render(p, 0, false);
	ASSERT_STREQ(fo,
		     "java;Boot.main(String[])_[0];Gen1.work()_[0] 2\n"
		     "java;Boot.main(String[])_[0];Gen2.work()_[0] 2\n"
		     "java;Boot.main(String[])_[0];[interpreted]_[0] 1\n"
		     "java;Interpreter_[0] 1\n"
		     "java;Interpreter_[0];Gen2.work()_[0] 1\n"
		     "java;[interpreted]_[0] 1\n"
		     "java;[unknown] 1\n");
	free(fo);

	/* bci -> line through the METHOD_NAME line tables; the file comes along. */
	const struct vp_frame *g1 = frame_named(p, "Gen1.work()"), *g2 = frame_named(p, "Gen2.work()"),
			      *bm = frame_named(p, "Boot.main(String[])"), *un = frame_named(p, "[interpreted]");
	ASSERT_EQ(g1->line, 12);
	ASSERT_STREQ(g1->file, "Gen1.java");
	ASSERT_EQ(g1->layer, VP_LAYER_INTERPRETED);
	ASSERT_EQ(g2->line, 31);
	ASSERT_STREQ(g2->file, "Gen2.java");
	ASSERT_EQ(bm->line, 7);
	ASSERT_EQ(un->layer, VP_LAYER_INTERPRETED);
	ASSERT_EQ(un->line, 0);

	/* Each sample's own line goes with its location (pprof): Gen2 at lines 31 and 30,
	 * though the frame keeps the first one. */
	bool l30 = false, l31 = false;
	for (size_t i = 0; i < p->nlocations; i++) {
		const struct vp_location *lc = &p->locations[i];
		if (lc->nframes == 1 && !strcmp(p->frames[lc->frames[0]].name, "Gen2.work()")) {
			l30 |= lc->lines[0] == 30;
			l31 |= lc->lines[0] == 31;
		}
	}
	ASSERT_TRUE(l30 && l31);

	/* Walk endings: 3 root, 1 each of depth, no rule, unreadable, bad frame, tables not
	 * loaded, unknown. */
	char *txt = render(p, 1, true);
	ASSERT_CONTAINS(txt, "# user stacks: 9; not recorded (frame-pointer walk) 11.1%; whole (reached the root) 33.3%;"
			     " no unwind rule 11.1%; stack unreadable 11.1%; depth limit 11.1%; bad frame 11.1%;"
			     " tables not loaded yet 11.1%;\n");
	/* Truncated: every walked ending but the root, unknown ones left out: 5 of 8. */
	ASSERT_CONTAINS(txt, "truncated user stacks 62.5% (5 of 8)");
	/* The stray frame is reported as such, and no record loss is blamed. */
	ASSERT_CONTAINS(txt, "# warning: 1 sampled user addresses were in no recorded mapping and show as [unknown] (code outside "
			     "every mapping the recorder saw");
	ASSERT_NULL(strstr(txt, "lost while recording"));
	free(txt);
	char *js = render(p, 2, false);
	ASSERT_CONTAINS(js, "\"stack_end.root\":\"3\"");
	ASSERT_CONTAINS(js, "\"stack_end.depth\":\"1\"");
	ASSERT_CONTAINS(js, "\"stack_end.no_rule\":\"1\"");
	ASSERT_CONTAINS(js, "\"stack_end.unreadable\":\"1\"");
	ASSERT_CONTAINS(js, "\"stack_end.bad_frame\":\"1\"");
	ASSERT_CONTAINS(js, "\"stack_end.tables_not_loaded\":\"1\"");
	ASSERT_CONTAINS(js, "\"stack_end.unknown\":\"1\"");
	ASSERT_CONTAINS(js, "\"stack_ends\":{\"unknown\":1,\"root\":3,\"no_rule\":1,\"unreadable\":1,\"depth\":1,"
			    "\"bad_frame\":1,\"tables_not_loaded\":1,\"truncated\":5},\n");
	free(js);
	vp_profile__free(p);
	rm_session(dir);

	/* With a LOST record the same warning says records were lost. */
	char dir2[] = "/tmp/vp-test-interp-XXXXXX";
	ASSERT_NOT_NULL(mkdtemp(dir2));
	write_codemap(dir2);
	write_session(dir2, true);
	p = load(dir2);
	ASSERT_CONTAINS(p->warnings, "1 sampled user addresses were in no recorded mapping and show as [unknown] (some records were lost while recording)");
	vp_profile__free(p);
	rm_session(dir2);

	/* Deep stacks (issue 22): DEEP interpreted frames, each named; an old-layout sample
	 * reads as it did. */
	char dir3[] = "/tmp/vp-test-interp-XXXXXX";
	ASSERT_NOT_NULL(mkdtemp(dir3));
	write_codemap(dir3);
	write_deep_session(dir3);
	p = load(dir3);
	ASSERT_EQ(p->nstacks, 2);
	bool deep = false, old = false;
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct vp_stack *st = &p->stacks[i];
		if (st->nframes == DEEP) {
			ASSERT_EQ(st->samples[0], 2);   /* the clamped count's sample is the same stack */
			ASSERT_STREQ(p->frames[st->frames[0]].name, "Boot.main(String[])");
			for (uint32_t f = 1; f < st->nframes; f++)
				ASSERT_STREQ(p->frames[st->frames[f]].name, "Gen2.work()");
			deep = true;
		} else {
			ASSERT_EQ(st->nframes, 2);
			ASSERT_STREQ(p->frames[st->frames[0]].name, "Boot.main(String[])");
			ASSERT_STREQ(p->frames[st->frames[1]].name, "Gen1.work()");
			old = true;
		}
	}
	ASSERT_TRUE(deep && old);
	vp_profile__free(p);
	rm_session(dir3);
	return 0;
}
