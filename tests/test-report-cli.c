/* What users trip over in report, maps and the text table (issue 12), on synthetic
 * sessions and code maps run through the real viprof binary:
 *  - idle samples (pid 0, no COMM record) are "swapper", and --pid 0 is accepted;
 *  - two sessions merged report the summed duration, --time FROM,TO the window's;
 *  - the text table never shows self above total (the self column is rounded to add
 *    up to 100.0);
 *  - 'maps SESSION bogus' names the unknown command; 'maps lookup ADDR' without --at
 *    names, per epoch, what was at ADDR at that epoch's end, not the next epoch's code. */
#include <errno.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "common/chunkfile.h"
#include "common/session_format.h"
#include "maps/codemap_format.h"
#include "report/report.h"
#include "test-helpers.h"
#include "test.h"
#include "test-run.h"

#define MS 1000000ull
#define K_IDLE 0xffffffff81003000ull
#define K_SYSCALL 0xffffffff81001000ull

static uint64_t base;

/* Runs the viprof binary with args (a shell fragment); returns its exit status and
 * leaves stdout in out.txt, stderr in err.txt. */
static int viprof(const char *args)
{
	char cmd[4096];
	snprintf(cmd, sizeof(cmd), "%s %s > out.txt 2> err.txt", VIPROF_BIN, args);
	return run_sh(cmd, 50);
}
static void w_comm(struct cfile_writer *w, uint32_t pid, const char *c)
{
	struct vp_comm r = { .pid = pid, .tid = pid };
	strncpy(r.comm, c, sizeof(r.comm) - 1);
	ASSERT_OK(cfile_writer__append(w, VP_REC_COMM, base, &r, sizeof(r)));
}

static void w_ksym(struct cfile_writer *w, uint64_t addr, const char *name)
{
	char buf[sizeof(struct vp_ksym) + 64] = { 0 };
	struct vp_ksym *k = (void *)buf;
	k->addr = addr;
	k->size = 0x100;
	strcpy(k->name, name);
	ASSERT_OK(cfile_writer__append(w, VP_REC_KSYM, 0, buf, sizeof(*k) + strlen(name) + 1));
}

static void w_sample(struct cfile_writer *w, uint64_t t, uint32_t pid, uint64_t ip, int times)
{
	char buf[sizeof(struct vp_sample) + 8] = { 0 };
	struct vp_sample *s = (void *)buf;
	s->pid = s->tid = pid;
	s->mode = VP_MODE_KERNEL;
	s->period = 1000000;
	s->nr_kernel = 1;
	s->ips[0] = ip;
	for (int i = 0; i < times; i++)
		ASSERT_OK(cfile_writer__append(w, VP_REC_SAMPLE, base + t, buf, sizeof(*s) + 8));
}

/* A -a session of dur_ms: the idle task (pid 0, never named by a COMM record) in
 * default_idle, and "app" (pid 100) in a system call, 10 samples each per 100 ms. */
static void write_session(const char *dir, uint64_t dur_ms)
{
	char path[512], meta[128];
	ASSERT_OK(mkdir(dir, 0700));
	snprintf(path, sizeof(path), "%s/%s", dir, VP_SESSION_STREAM);
	struct cfile_writer *w = cfile_writer__create(path, VP_KIND_SESSION_STREAM, VP_SESSION_FORMAT_VERSION, 0, false);
	ASSERT_NOT_NULL(w);
	/* Started dur_ms seconds after the epoch (a session's real start time). */
	int mlen = snprintf(meta, sizeof(meta), "backend%cbpf%ctarget%call%cstart_realtime_ns%c%llu", 0, 0, 0, 0, 0,
			    (unsigned long long)dur_ms * 1000000000ull);
	ASSERT_OK(cfile_writer__append(w, VP_REC_META, base, meta, (size_t)mlen + 1));
	struct vp_event_desc ev = { .index = 0, .perf_type = 1, .freq = 1000,
				    .flags = VP_EVENT_SOFTWARE | VP_EVENT_TIME_UNITS };
	strcpy(ev.name, "cpu-clock");
	ASSERT_OK(cfile_writer__append(w, VP_REC_EVENT, base, &ev, sizeof(ev)));
	w_ksym(w, K_IDLE, "default_idle");
	w_ksym(w, K_SYSCALL, "do_syscall_64");
	w_comm(w, 100, "app");
	for (uint64_t t = 0; t < dur_ms; t += 100) {
		w_sample(w, t * MS + 1, 0, K_IDLE + 0x10, 10);
		w_sample(w, t * MS + 2, 100, K_SYSCALL + 0x20, 10);
	}
	struct vp_end e = { .samples = dur_ms / 5, .duration_ns = dur_ms * MS };
	ASSERT_OK(cfile_writer__append(w, VP_REC_END, base + dur_ms * MS, &e, sizeof(e)));
	ASSERT_OK(cfile_writer__close(w));
}

static double header_duration(const char *txt)
{
	const char *d = strstr(txt, "# duration: ");
	if (!d)
		FAIL("no duration in the header:\n%s", txt);
	return strtod(d + strlen("# duration: "), NULL);
}

static void test_idle_and_durations(void)
{
	write_session("s1", 1000);
	write_session("s2", 2000);

	/* Idle samples are the swapper's, as perf says; --pid 0 selects exactly them. Folded
	 * lines start with the thread's name with --threads (issue 33: not by default). */
	ASSERT_EQ(viprof("report s1 -F folded"), 0);
	char *out = test_slurp_str("out.txt");
	ASSERT_STREQ(out, "default_idle_[k] 100\ndo_syscall_64_[k] 100\n");
	free(out);
	ASSERT_EQ(viprof("report s1 -F folded --threads"), 0);
	out = test_slurp_str("out.txt");
	ASSERT_CONTAINS(out, "swapper;default_idle_[k] 100\n");
	ASSERT_CONTAINS(out, "app;do_syscall_64_[k] 100\n");
	ASSERT_TRUE(strstr(out, "[unknown]") == NULL);
	free(out);
	ASSERT_EQ(viprof("report s1 --pid 0 -F folded --threads"), 0);
	out = test_slurp_str("out.txt");
	ASSERT_STREQ(out, "swapper;default_idle_[k] 100\n");
	free(out);
	ASSERT_EQ(viprof("report s1 --comm swapper -F folded --threads"), 0);
	out = test_slurp_str("out.txt");
	ASSERT_STREQ(out, "swapper;default_idle_[k] 100\n");
	free(out);
	/* --threads and --reverse where they mean nothing: one line that says where the
	 * view is (issue 33). */
	ASSERT_EQ(viprof("report s1 --threads"), 2);
	out = test_slurp_str("err.txt");
	ASSERT_CONTAINS(out, "--threads splits folded lines by thread");
	free(out);
	ASSERT_EQ(viprof("report s1 -F html --reverse -o r.html"), 2);
	out = test_slurp_str("err.txt");
	ASSERT_CONTAINS(out, "#reverse=1");
	free(out);
	ASSERT_EQ(viprof("report s1 -F folded --reverse --threads"), 0);
	out = test_slurp_str("out.txt");
	ASSERT_CONTAINS(out, "swapper;default_idle_[k] 100\n");
	free(out);

	/* Durations: one session, two merged (the sum: their samples cover 3 s), a window. */
	ASSERT_EQ(viprof("report s1"), 0);
	out = test_slurp_str("out.txt");
	ASSERT_DBL_NEAR(header_duration(out), 1.0, 0.0005);
	free(out);
	ASSERT_EQ(viprof("report s1 s2"), 0);
	out = test_slurp_str("out.txt");
	ASSERT_DBL_NEAR(header_duration(out), 3.0, 0.0005);
	ASSERT_CONTAINS(out, "600 samples");
	free(out);
	/* The merged profile starts with the earlier session, in either order. */
	ASSERT_EQ(viprof("report s2 s1 -F json"), 0);
	out = test_slurp_str("out.txt");
	ASSERT_CONTAINS(out, "\"start_realtime_ns\":\"1000000000000\"");
	free(out);
	ASSERT_EQ(viprof("report s1 s2 -F json"), 0);
	out = test_slurp_str("out.txt");
	ASSERT_CONTAINS(out, "\"start_realtime_ns\":\"1000000000000\"");
	free(out);
	ASSERT_EQ(viprof("report s2 --time 0.5,1.25"), 0);
	out = test_slurp_str("out.txt");
	ASSERT_DBL_NEAR(header_duration(out), 0.75, 0.0005);
	free(out);
	/* A window reaching past the end is cut to the session. */
	ASSERT_EQ(viprof("report s1 --time 0.5,"), 0);
	out = test_slurp_str("out.txt");
	ASSERT_DBL_NEAR(header_duration(out), 0.5, 0.0005);
	free(out);
	ASSERT_EQ(viprof("report s2 --time 1.5,9"), 0);
	out = test_slurp_str("out.txt");
	ASSERT_DBL_NEAR(header_duration(out), 0.5, 0.0005);
	free(out);
}

/* Every row of the text table: total% >= self% as printed. Many small frames next to
 * a large one make the self column's largest-remainder rounding lift small frames. */
static void test_self_not_above_total(void)
{
	for (int round = 0; round < 20; round++) {
		struct vp_profile *p = vp_profile__new();
		ASSERT_NOT_NULL(p);
		ASSERT_EQ(vp_profile__add_event(p, "cpu-clock", "nanoseconds"), 0);
		struct vp_frame rootf = { .name = "main", .image = "app", .layer = VP_LAYER_NATIVE };
		uint32_t root = vp_profile__frame(p, &rootf);
		unsigned seed = 12345u + (unsigned)round;
		for (int i = 0; i < 120; i++) {
			char name[32];
			snprintf(name, sizeof(name), "f%03d", i);
			struct vp_frame f = { .name = name, .image = "app", .layer = VP_LAYER_NATIVE };
			uint32_t id = vp_profile__frame(p, &f), st[2] = { root, id };
			seed = seed * 1103515245u + 12345u;
			uint64_t n = i == 0 ? 2000 + (seed >> 16) % 1000 : 1 + (seed >> 16) % 9;
			ASSERT_OK(vp_profile__add(p, st, 2, 1, 1, "app", 0, n, n * 1000000));
		}
		char *buf = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&buf, &len);
		struct vp_out o = { .f = f, .width = 120 };
		struct vp_report_opts ro = { .top = 200 };
		ASSERT_OK(report_text(p, NULL, &o, &ro));
		fclose(f);
		int rows = 0;
		for (char *l = buf; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
			double self, total;
			char name[64];
			if (sscanf(l, " %lf %lf %*u %*s %63s", &self, &total, name) != 3)
				continue;
			rows++;
			if (self > total + 1e-9)
				FAIL("round %d: %s shows self %.1f above total %.1f:\n%s", round, name, self, total, buf);
		}
		ASSERT_GE(rows, 100);
		free(buf);
		vp_profile__free(p);
	}
}

static void cm_put(struct cfile_writer *w, uint32_t type, uint64_t t, const void *b, size_t n)
{
	ASSERT_OK(cfile_writer__append(w, type, t, b, n));
}

static void cm_load(struct cfile_writer *w, uint64_t start, uint64_t id, const char *name, uint64_t t)
{
	uint8_t b[256];
	struct vp_cm_method_load l = { .code_start = start, .code_size = 0x100, .method_id = id,
				       .level = VP_CM_LEVEL_UNKNOWN, .name_len = (uint16_t)strlen(name) };
	memcpy(b, &l, sizeof(l));
	memcpy(b + sizeof(l), name, l.name_len);
	cm_put(w, VP_CM_METHOD_LOAD, t, b, sizeof(l) + l.name_len);
}

static void cm_epoch(struct cfile_writer *w, uint32_t id, uint32_t reason, uint64_t t)
{
	if (id) {
		struct vp_cm_epoch_end e = { .epoch = id - 1 };
		cm_put(w, VP_CM_EPOCH_END, t, &e, sizeof(e));
	}
	struct vp_cm_epoch_begin b = { .epoch = id, .reason = reason };
	cm_put(w, VP_CM_EPOCH_BEGIN, t, &b, sizeof(b));
}

/* A session's jit/4242: epoch 0 [100,200) B at 0x2000; epoch 1 [200,270) B unloaded at
 * 260 (nothing at 0x2000 at its end); epoch 2 from 270: D at 0x2000 from 280, ended 300. */
static void write_codemap(void)
{
	ASSERT_OK(mkdir("m", 0700));
	ASSERT_OK(mkdir("m/jit", 0700));
	ASSERT_OK(mkdir("m/jit/4242", 0700));
	struct cfile_writer *w = cfile_writer__create("m/jit/4242/" VP_CODEMAP_FILE, VP_KIND_CODEMAP,
						      VP_CODEMAP_FORMAT_VERSION, 0, true);
	ASSERT_NOT_NULL(w);
	struct vp_cm_meta meta = { .pid = 4242, .agent_version = 1 };
	cm_put(w, VP_CM_META, 1, &meta, sizeof(meta));
	cm_epoch(w, 0, VP_EPOCH_START, 100);
	cm_load(w, 0x2000, 2, "B.b()", 120);
	cm_epoch(w, 1, VP_EPOCH_GC, 200);
	struct vp_cm_method_unload u = { .code_start = 0x2000, .method_id = 2 };
	cm_put(w, VP_CM_METHOD_UNLOAD, 260, &u, sizeof(u));
	cm_epoch(w, 2, VP_EPOCH_REUSE, 270);
	cm_load(w, 0x2000, 4, "D.d()", 280);
	struct vp_cm_epoch_end e = { .epoch = 2, .live_methods = 1, .live_bytes = 0x100 };
	cm_put(w, VP_CM_EPOCH_END, 300, &e, sizeof(e));
	ASSERT_OK(cfile_writer__close(w));
}

/* The line of out that starts with prefix, without its newline. */
static char *line_of(const char *out, const char *prefix)
{
	const char *l = strstr(out, prefix);
	if (!l)
		FAIL("no line '%s' in:\n%s", prefix, out);
	return strndup(l, strcspn(l, "\n"));
}

/* The first bytes of path, for telling formats apart by their magic. */
static size_t head_of(const char *path, unsigned char *buf, size_t len)
{
	FILE *f = fopen(path, "rb");
	ASSERT_NOT_NULL(f);
	size_t n = fread(buf, 1, len, f);
	fclose(f);
	return n;
}

/* -o FILE without -F picks the format from the extension, as async-profiler users expect;
 * -F wins where given, and a binary extension that contradicts it is refused. */
static void test_format_from_extension(void)
{
	unsigned char b[16];

	ASSERT_EQ(viprof("report s1 -o x.html"), 0);
	ASSERT_EQ(head_of("x.html", b, 15), 15);
	ASSERT_TRUE(!memcmp(b, "<!DOCTYPE html>", 15) || !memcmp(b, "<html", 5));
	char *err = test_slurp_str("err.txt");
	ASSERT_CONTAINS(err, "writing html to x.html");
	free(err);
	ASSERT_EQ(viprof("report s1 -o x.pb.gz"), 0);
	ASSERT_EQ(head_of("x.pb.gz", b, 2), 2);
	ASSERT_TRUE(b[0] == 0x1f && b[1] == 0x8b);
	ASSERT_EQ(viprof("report s1 -o x.jfr"), 0);
	ASSERT_EQ(head_of("x.jfr", b, 4), 4);
	ASSERT_TRUE(!memcmp(b, "FLR", 4));
	ASSERT_EQ(viprof("report s1 -o x.json"), 0);
	ASSERT_EQ(head_of("x.json", b, 1), 1);
	ASSERT_EQ(b[0], '{');
	ASSERT_EQ(viprof("report s1 -o x.collapsed"), 0);
	char *out = test_slurp_str("x.collapsed");
	ASSERT_CONTAINS(out, "default_idle_[k] 100\n");
	free(out);
	/* -F wins over a name that says nothing or says text; a contradiction is an error. */
	ASSERT_EQ(viprof("report s1 -F folded -o x.txt"), 0);
	out = test_slurp_str("x.txt");
	ASSERT_CONTAINS(out, "default_idle_[k] 100\n");
	free(out);
	ASSERT_EQ(viprof("report s1 -F json -o y.html"), 2);
	err = test_slurp_str("err.txt");
	ASSERT_CONTAINS(err, "names a html file");
	free(err);
	ASSERT_EQ(viprof("report s1 -o plain.out"), 0);
	out = test_slurp_str("plain.out");
	ASSERT_CONTAINS(out, "# duration:");
	free(out);
}

static void test_maps(void)
{
	write_codemap();
	ASSERT_EQ(viprof("maps m bogus"), 2);
	char *err = test_slurp_str("err.txt");
	ASSERT_CONTAINS(err, "unknown command 'bogus'");
	ASSERT_TRUE(strstr(err, "missing command") == NULL);
	free(err);
	ASSERT_EQ(viprof("maps m"), 2);
	err = test_slurp_str("err.txt");
	ASSERT_CONTAINS(err, "missing command");
	free(err);

	ASSERT_EQ(viprof("maps m lookup 0x2010"), 0);
	char *out = test_slurp_str("out.txt");
	char *e0 = line_of(out, "epoch 0 "), *e1 = line_of(out, "epoch 1 "), *e2 = line_of(out, "epoch 2 ");
	ASSERT_CONTAINS(e0, "B.b()");
	ASSERT_TRUE(strstr(e0, "D.d()") == NULL);
	/* B was unloaded at 260, D only came in epoch 2: nothing at the end of epoch 1. */
	ASSERT_CONTAINS(e1, "(nothing)");
	ASSERT_CONTAINS(e2, "D.d()");
	free(e0);
	free(e1);
	free(e2);
	free(out);
}

int main(void)
{
	struct timespec ts;
	char tmpl[] = "/tmp/viprof-report-cli.XXXXXX";
	ASSERT_NOT_NULL(mkdtemp(tmpl));
	ASSERT_OK(chdir(tmpl));
	clock_gettime(CLOCK_MONOTONIC, &ts);
	base = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;

	test_idle_and_durations();
	test_self_not_above_total();
	test_format_from_extension();
	test_maps();

	char cmd[512];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpl);
	ASSERT_OK(run_sh(cmd, 50));
	return 0;
}
