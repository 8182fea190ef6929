/* The pprof report, read back by the real pprof (built here from Debian's
 * golang-github-google-pprof-dev sources): top functions with the expected shares per
 * sample type, totals equal to the profile's, labels, mappings and metadata. */
#include <sys/stat.h>
#include <sys/wait.h>

#include "report/report.h"
#include "test-profile-synth.h"
#include "test-run.h"

#define PPROF_SRC "/usr/share/gocode/src/github.com/google/pprof"

/* Finds the -top row for name; returns false when absent. */
static bool top_row(const char *top, const char *name, double *flat, double *flat_pct, double *cum, double *cum_pct)
{
	const char *line = top;
	while (line && *line) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		char buf[512], fn[256];
		snprintf(buf, sizeof(buf), "%.*s", (int)(len < 511 ? len : 511), line);
		double f, fp, sp, c, cp;
		int off = 0;
		/* "   400 40.00% 40.00%   400 40.00%  name": units (ms) stripped by %lf's stop. */
		if (sscanf(buf, "%lf%*[a-z] %lf%% %lf%% %lf%*[a-z] %lf%% %n", &f, &fp, &sp, &c, &cp, &off) == 5 ||
		    sscanf(buf, "%lf %lf%% %lf%% %lf %lf%% %n", &f, &fp, &sp, &c, &cp, &off) == 5) {
			snprintf(fn, sizeof(fn), "%s", buf + off);
			if (!strcmp(fn, name)) {
				*flat = f, *flat_pct = fp, *cum = c, *cum_pct = cp;
				return true;
			}
		}
		line = nl ? nl + 1 : NULL;
	}
	return false;
}

static void expect(const char *top, const char *name, double flat, double flat_pct, double cum, double cum_pct)
{
	double f, fp, c, cp;
	if (!top_row(top, name, &f, &fp, &c, &cp))
		FAIL("pprof -top has no row for %s:\n%s", name, top);
	ASSERT_DBL_NEAR(f, flat, 0.001);
	ASSERT_DBL_NEAR(fp, flat_pct, 0.006);
	ASSERT_DBL_NEAR(c, cum, 0.001);
	ASSERT_DBL_NEAR(cp, cum_pct, 0.006);
}

static char *write_and_run(const struct vp_profile *p, const char *file, const char *args)
{
	struct vp_out o;
	struct vp_report_opts opts = { 0 };
	char cmd[512];
	ASSERT_OK(vp_out__open(&o, file));
	ASSERT_OK(report_pprof(p, &o, &opts));
	ASSERT_OK(vp_out__close(&o));
	snprintf(cmd, sizeof(cmd), "./pprof %s %s", args, file);
	return run_sh_output(cmd);
}

/* A profile with addresses, as the session loader builds it: two processes, the main
 * executable of the busier one listed first; a JIT method sampled at two addresses
 * with different lines, one of them with a method inlined there; kernel frames. */
static void test_addresses(void)
{
	struct vp_profile *p = vp_profile__new();
	ASSERT_NOT_NULL(p);
	ASSERT_EQ(vp_profile__add_event(p, "task-clock", "nanoseconds"), 0);
	vp_profile__set_meta(p, "duration_ns", "1000000000");
	struct vp_mapping m_ld = { .start = 0x7f0000001000, .limit = 0x7f0000030000, .offset = 0x1000,
				   .file = "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", .build_id = "aa11", .pid = 7 };
	struct vp_mapping m_exe = { .start = 0x555500001000, .limit = 0x555500002000, .offset = 0x1000,
				    .file = "/usr/bin/server", .build_id = "bb22", .pid = 7, .exe = true };
	struct vp_mapping m_other = { .start = 0x555600001000, .limit = 0x555600002000, .offset = 0x1000,
				      .file = "/usr/bin/other", .build_id = "cc33", .pid = 9, .exe = true };
	struct vp_mapping m_jit = { .file = "[jit]", .pid = 7 };
	struct vp_mapping m_k = { .file = "[kernel.kallsyms]" };
	uint32_t ld = vp_profile__mapping(p, &m_ld), other = vp_profile__mapping(p, &m_other);
	uint32_t exe = vp_profile__mapping(p, &m_exe), jit = vp_profile__mapping(p, &m_jit);
	uint32_t k = vp_profile__mapping(p, &m_k);
	ASSERT_NE(ld, UINT32_MAX);
	ASSERT_NE(k, UINT32_MAX);
	ASSERT_EQ(vp_profile__mapping(p, &m_exe), exe);   /* interned */

	uint32_t f_main = synth_frame(p, VP_LAYER_NATIVE, "main", "/usr/bin/server", 0x1100);
	uint32_t f_ld = synth_frame(p, VP_LAYER_NATIVE, "_dl_start", "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", 0x2000);
	uint32_t f_hot = synth_frame(p, VP_LAYER_JIT, "Hot.run()", "[jit]", 0);
	uint32_t f_inl = synth_frame(p, VP_LAYER_INLINED, "Util.mix(int)", "[jit]", 0);
	uint32_t f_k = synth_frame(p, VP_LAYER_KERNEL, "do_syscall_64", "[kernel.kallsyms]", 0xffffffff81001000);
	uint32_t f_om = synth_frame(p, VP_LAYER_NATIVE, "main", "/usr/bin/other", 0x1100);
	uint32_t zero = 0, l30 = 30, l31[2] = { 12, 31 };
	uint32_t inl[2] = { f_inl, f_hot };
	uint32_t L_main = vp_profile__location(p, exe, 0x555500001123, &f_main, &zero, 1);
	uint32_t L_ld = vp_profile__location(p, ld, 0x7f0000002345, &f_ld, &zero, 1);
	uint32_t L_hot30 = vp_profile__location(p, jit, 0x7e0000001010, &f_hot, &l30, 1);
	uint32_t L_hot31 = vp_profile__location(p, jit, 0x7e0000001080, inl, l31, 2);
	uint32_t L_k = vp_profile__location(p, k, 0xffffffff81001020, &f_k, &zero, 1);
	uint32_t L_om = vp_profile__location(p, other, 0x555600001200, &f_om, &zero, 1);
	ASSERT_EQ(vp_profile__location(p, jit, 0x7e0000001080, inl, l31, 2), L_hot31);

	/* Stacks by frame (root first) with their samples by address (leaf first). */
	uint32_t s_id;
	uint32_t st1[2] = { f_main, f_hot }, ls1[2] = { L_hot30, L_main };
	ASSERT_OK(vp_profile__add_stack(p, st1, 2, 7, 7, "server", 0, 6, 6000000, &s_id));
	ASSERT_OK(vp_profile__add_locs(p, s_id, ls1, 2, 0, 6, 6000000));
	uint32_t st2[3] = { f_main, f_hot, f_inl }, ls2[2] = { L_hot31, L_main };
	ASSERT_OK(vp_profile__add_stack(p, st2, 3, 7, 7, "server", 0, 3, 3000000, &s_id));
	ASSERT_OK(vp_profile__add_locs(p, s_id, ls2, 2, 0, 3, 3000000));
	uint32_t st3[3] = { f_ld, f_main, f_k }, ls3[3] = { L_k, L_main, L_ld };
	ASSERT_OK(vp_profile__add_stack(p, st3, 3, 7, 8, "server", 0, 2, 2000000, &s_id));
	ASSERT_OK(vp_profile__add_locs(p, s_id, ls3, 3, 0, 2, 2000000));
	uint32_t st4[1] = { f_om }, ls4[1] = { L_om };
	ASSERT_OK(vp_profile__add_stack(p, st4, 1, 9, 9, "other", 0, 1, 1000000, &s_id));
	ASSERT_OK(vp_profile__add_locs(p, s_id, ls4, 1, 0, 1, 1000000));
	/* Steal time has no address: it stays a sample by frame. */
	uint32_t f_steal = synth_frame(p, VP_LAYER_HYPERVISOR, "[steal]", "[hypervisor]", 0);
	ASSERT_OK(vp_profile__add(p, &f_steal, 1, 7, 7, "server", 0, 1, 1000000));

	char *out = write_and_run(p, "addr.pb.gz", "-raw -symbolize=none");
	/* Mappings: real ranges, offsets and build-ids, the busier process's executable first. */
	const char *maps = strstr(out, "Mappings\n");
	ASSERT_NOT_NULL(maps);
	ASSERT_CONTAINS(maps, "1: 0x555500001000/0x555500002000/0x1000 /usr/bin/server bb22 ");
	ASSERT_CONTAINS(maps, "0x7f0000001000/0x7f0000030000/0x1000 /usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 aa11 ");
	/* JIT code and the kernel: their own mappings around the addresses sampled there. */
	ASSERT_CONTAINS(maps, "0xffffffff81001020/0xffffffff81001021/0x0 [kernel.kallsyms] ");
	/* Locations: one per address, the JIT method's two addresses with their own lines, the
	 * inlined method first (innermost) at the second. */
	/* (pprof numbers locations and mappings itself; "M=n" follows its order.) */
	ASSERT_CONTAINS(out, "1: 0x7e0000001010 M=2 Hot.run() [jit]:30 ");
	ASSERT_CONTAINS(out, "2: 0x555500001123 M=1 main /usr/bin/server:0 ");
	ASSERT_CONTAINS(out, "3: 0x7e0000001080 M=2 Util.mix(int) [jit]:12 s=0\n             Hot.run() [jit]:31 ");
	ASSERT_CONTAINS(out, "4: 0xffffffff81001020 M=3 do_syscall_64 [kernel.kallsyms]:0 ");
	ASSERT_CONTAINS(out, "5: 0x7f0000002345 M=4 _dl_start ");
	ASSERT_CONTAINS(out, "2: 0x7e0000001010/0x7e0000001081/0x0 [jit] ");
	/* The samples: leaf first, by address; the steal sample by frame. */
	ASSERT_CONTAINS(out, "          6    6000000: 1 2 \n");
	ASSERT_CONTAINS(out, "          3    3000000: 3 2 \n");
	ASSERT_CONTAINS(out, "          2    2000000: 4 2 5 \n");
	/* ... at a location without mapping: no 0x0/0x0/0x0 mapping claims its function. */
	ASSERT_CONTAINS(out, ": 0x0 [steal] [hypervisor]:0 ");
	ASSERT_TRUE(strstr(out, "0x0/0x0/0x0") == NULL);
	ASSERT_TRUE(strstr(out, "/0x0 [hypervisor]") == NULL);
	free(out);

	out = write_and_run(p, "addr.pb.gz", "-top -symbolize=none");
	ASSERT_CONTAINS(out, "File: server\n");
	ASSERT_CONTAINS(out, "Build ID: bb22\n");
	ASSERT_CONTAINS(out, "Type: cpu\n");
	ASSERT_CONTAINS(out, "Total samples = 13ms ( 1.30%)");
	expect(out, "Hot.run()", 6, 46.15, 9, 69.23);
	expect(out, "Util.mix(int) (inline)", 3, 23.08, 3, 23.08);   /* pprof sees the inlining */
	free(out);
	/* Lines per address: -lines shows both lines of Hot.run(). */
	out = write_and_run(p, "addr.pb.gz", "-top -lines -symbolize=none");
	ASSERT_CONTAINS(out, "Hot.run() [jit]:30\n");
	ASSERT_CONTAINS(out, "Hot.run() [jit]:31\n");
	free(out);

	/* A merge keeps the addresses and adds the durations up: 2 s, 26 ms of samples. */
	struct vp_profile *m = vp_profile__new();
	ASSERT_NOT_NULL(m);
	ASSERT_OK(vp_profile__merge(m, p));
	ASSERT_OK(vp_profile__merge(m, p));
	ASSERT_UEQ(m->nlocations, p->nlocations);
	ASSERT_UEQ(m->nmappings, p->nmappings);
	out = write_and_run(m, "merged.pb.gz", "-top -symbolize=none");
	ASSERT_CONTAINS(out, "File: server\n");
	ASSERT_CONTAINS(out, "Duration: 2s, Total samples = 26ms ( 1.30%)");
	expect(out, "Hot.run()", 12, 46.15, 18, 69.23);
	free(out);
	vp_profile__free(m);
	vp_profile__free(p);
}

/* Compile tiers (issue 25): a sample whose leaf is C1 code has label tier:C1, C2 code
 * tier:C2 (an inlined leaf its compiled method's), other leaves none; the method's C1 and
 * C2 frames are one function in pprof's views. */
static void test_tiers(void)
{
	struct vp_profile *p = vp_profile__new();
	ASSERT_NOT_NULL(p);
	ASSERT_EQ(vp_profile__add_event(p, "cpu-clock", "nanoseconds"), 0);
	vp_profile__set_meta(p, "duration_ns", "1000000000");
	struct vp_frame c1 = { .name = "Tiers.step(long)", .image = "[jit]", .layer = VP_LAYER_JIT, .tier = 3 };
	struct vp_frame c2 = c1, inl = c1, in = c1;
	c2.tier = VP_TIER_C2;
	inl.name = "Tiers.mix(long)", inl.layer = VP_LAYER_INLINED, inl.tier = VP_TIER_C2;
	in.name = "Tiers.main(String[])", in.image = "[interpreter]", in.layer = VP_LAYER_INTERPRETED, in.tier = 0;
	uint32_t f_in = vp_profile__frame(p, &in), f_c1 = vp_profile__frame(p, &c1), f_c2 = vp_profile__frame(p, &c2);
	uint32_t f_inl = vp_profile__frame(p, &inl);
	uint32_t s1[2] = { f_in, f_c1 }, s2[2] = { f_in, f_c2 }, s3[3] = { f_in, f_c2, f_inl };
	ASSERT_OK(vp_profile__add(p, s1, 2, 5, 5, "main", 0, 3, 3000000));
	ASSERT_OK(vp_profile__add(p, s2, 2, 5, 5, "main", 0, 5, 5000000));
	ASSERT_OK(vp_profile__add(p, s3, 3, 5, 5, "main", 0, 2, 2000000));
	ASSERT_OK(vp_profile__add(p, &f_in, 1, 5, 5, "main", 0, 1, 1000000));
	char *raw = write_and_run(p, "tiers.pb.gz", "-raw -symbolize=none");
	/* (pprof merges the locations of one name: the tiers stay apart in the labels.) */
	ASSERT_CONTAINS(raw, "          3    3000000: 1 2 \n                layer:[jit] process:[main] thread:[main] tier:[C1]\n");
	ASSERT_CONTAINS(raw, "          5    5000000: 1 2 \n                layer:[jit] process:[main] thread:[main] tier:[C2]\n");
	ASSERT_CONTAINS(raw, "          2    2000000: 3 1 2 \n                layer:[inlined] process:[main] thread:[main] tier:[C2]\n");
	ASSERT_CONTAINS(raw, "          1    1000000: 2 \n                layer:[interpreted] process:[main] thread:[main]\n");
	free(raw);
	char *top = write_and_run(p, "tiers.pb.gz", "-top -symbolize=none -sample_index=samples");
	expect(top, "Tiers.step(long)", 8, 72.73, 10, 90.91);   /* C1 and C2 code: one function */
	free(top);
	top = write_and_run(p, "tiers.pb.gz", "-top -symbolize=none -sample_index=samples -tagfocus=tier=C1");
	expect(top, "Tiers.step(long)", 3, 27.27, 3, 27.27);
	free(top);
	vp_profile__free(p);
}

/* Two sessions merged: the durations add up, so the share of the wall time stays true
 * (one session's samples over twice its duration read 200% before). */
static void test_merge(const struct vp_profile *one)
{
	struct vp_profile *m = vp_profile__new();
	ASSERT_NOT_NULL(m);
	ASSERT_OK(vp_profile__merge(m, one));
	ASSERT_OK(vp_profile__merge(m, one));
	char *out = write_and_run(m, "merged2.pb.gz", "-top -symbolize=none");
	ASSERT_CONTAINS(out, "Duration: 2s, Total samples = 2000ms (  100%)");
	free(out);
	vp_profile__free(m);
}

int main(void)
{
	struct stat sb;
	if (run_sh("command -v go >/dev/null 2>&1", 590) != 0)
		SKIP("go is not installed (apt-get install golang-go)");
	if (stat(PPROF_SRC, &sb) != 0)
		SKIP("pprof sources missing at %s (apt-get install golang-github-google-pprof-dev)", PPROF_SRC);
	/* Built once per build tree; GOCACHE inside it because HOME may be unset in CI. */
	if (stat("pprof", &sb) != 0) {
		char cwd[512], cmd[4096];
		ASSERT_NOT_NULL(getcwd(cwd, sizeof(cwd)));
		snprintf(cmd, sizeof(cmd),
			 "GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE=%s/gocache GOFLAGS= HOME=%s "
			 "go build -o %s/pprof.tmp github.com/google/pprof && mv %s/pprof.tmp %s/pprof",
			 cwd, cwd, cwd, cwd, cwd);
		if (run_sh(cmd, 590) != 0)
			SKIP("could not build pprof from %s", PPROF_SRC);
	}

	test_tiers();
	struct vp_profile *p = synth_java_profile();
	vp_profile__warn(p, "session ended without END record");
	struct vp_out o;
	struct vp_report_opts opts = { 0 };
	ASSERT_OK(vp_out__open(&o, "synth.pb.gz"));
	ASSERT_OK(report_pprof(p, &o, &opts));
	ASSERT_OK(vp_out__close(&o));
	size_t len;
	char *raw = test_slurp("synth.pb.gz", &len);
	ASSERT_NOT_NULL(raw);
	ASSERT_GT(len, 100);
	ASSERT_EQ((unsigned char)raw[0], 0x1f);   /* gzip magic */
	ASSERT_EQ((unsigned char)raw[1], 0x8b);
	free(raw);

	/* Sample counts: the top frames and their shares. */
	char *top = run_sh_output("./pprof -top -nodecount=100 -symbolize=none -sample_index=samples synth.pb.gz");
	ASSERT_CONTAINS(top, "of 1000 total");
	expect(top, "com.example.Codec.encode", 400, 40.00, 400, 40.00);
	expect(top, "java.util.HashMap.get", 200, 20.00, 200, 20.00);
	expect(top, "ksys_write", 150, 15.00, 150, 15.00);
	expect(top, "G1CollectedHeap::do_collection", 100, 10.00, 100, 10.00);
	expect(top, "JLI_Launch", 100, 10.00, 100, 10.00);
	expect(top, "[steal]", 50, 5.00, 50, 5.00);
	expect(top, "com.example.Server.handle", 0, 0, 750, 75.00);
	expect(top, "start_thread", 0, 0, 850, 85.00);
	free(top);

	/* The default sample type is the event's weight, in nanoseconds. */
	top = run_sh_output("./pprof -top -nodecount=100 -symbolize=none synth.pb.gz");
	ASSERT_CONTAINS(top, "Type: cpu\n");
	ASSERT_CONTAINS(top, "Total samples = 1000ms");
	ASSERT_CONTAINS(top, "Duration: 1s");
	expect(top, "com.example.Codec.encode", 400, 40.00, 400, 40.00);
	free(top);

	/* The second event has its own pair of sample types. */
	top = run_sh_output("./pprof -top -nodecount=100 -symbolize=none -sample_index=page-faults synth.pb.gz");
	ASSERT_CONTAINS(top, "of 40 total");
	ASSERT_TRUE(strstr(top, "events") == NULL);
	expect(top, "G1CollectedHeap::do_collection", 30, 75.00, 30, 75.00);
	expect(top, "ksys_write", 10, 25.00, 10, 25.00);
	free(top);

	/* -raw: the sample types, every sample with its values and labels, and totals equal
	 * to the profile's. */
	raw = run_sh_output("./pprof -raw -symbolize=none synth.pb.gz");
	ASSERT_CONTAINS(raw, "PeriodType: cpu nanoseconds");
	ASSERT_CONTAINS(raw, "Period: 1000000");
	/* The CPU-profile convention of pprof and the fleet tools; counts are "count". */
	ASSERT_CONTAINS(raw, "samples/count cpu/nanoseconds[dflt] page-faults_samples/count page-faults/count");
	ASSERT_CONTAINS(raw, "Comment: event cpu-clock: sample types samples/count and cpu/nanoseconds");
	ASSERT_CONTAINS(raw, "Comment: session ended without END record");
	/* The process's name (its main thread's here: the synthetic one has no executable). */
	ASSERT_CONTAINS(raw, "layer:[kernel] process:[java] thread:[worker-1]");
	/* Every sample names the VM it was recorded on (meta "hostname"). */
	ASSERT_CONTAINS(raw, "hostname:[vm-test] layer:[kernel]");
	ASSERT_CONTAINS(raw, "layer:[jvm] process:[java] thread:[VM Thread]");
	ASSERT_CONTAINS(raw, "layer:[hypervisor]");
	ASSERT_CONTAINS(raw, "pid:[4242] tid:[4250]");
	/* A profile of frames alone has no sampled address: its locations are 0x0 without a
	 * mapping (the image stays the function's file), and no mapping claims symbols
	 * (pprof adds its own empty one, 0x0/0x0/0x0 without flags, to such profiles). */
	ASSERT_CONTAINS(raw, "0x0 M=1 JavaCalls::call_helper /usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so:0");
	ASSERT_TRUE(strstr(raw, "0x851000") == NULL);
	ASSERT_TRUE(strstr(raw, "[FN]") == NULL);
	const char *s = strstr(raw, "[dflt]");
	ASSERT_NOT_NULL(s);
	uint64_t sum[4] = { 0 }, nsamples = 0, nframes = 0;
	for (s = strchr(s, '\n'); s && *s; s = strchr(s + 1, '\n')) {
		unsigned long long v[4];
		int off = 0;
		if (sscanf(s + 1, " %llu %llu %llu %llu:%n", &v[0], &v[1], &v[2], &v[3], &off) != 4 || !off)
			continue;
		for (int i = 0; i < 4; i++)
			sum[i] += v[i];
		nsamples++;
		/* Leaf first: the first location id of the steal sample is the steal frame alone. */
		const char *ids = s + 1 + off;
		unsigned id;
		int n;
		while (sscanf(ids, " %u%n", &id, &n) == 1) {
			nframes++;
			ids += n;
		}
	}
	ASSERT_UEQ(nsamples, p->nstacks);
	uint64_t want_frames = 0;
	for (size_t i = 0; i < p->nstacks; i++)
		want_frames += p->stacks[i].nframes;
	ASSERT_UEQ(nframes, want_frames);
	ASSERT_UEQ(sum[0], 1000);
	ASSERT_UEQ(sum[1], 1000 * SYNTH_PERIOD_NS);
	ASSERT_UEQ(sum[2], 40);
	ASSERT_UEQ(sum[3], 40);
	free(raw);

	/* -traces shows the leaf first: the kernel stack under the JIT method. */
	raw = run_sh_output("./pprof -traces -symbolize=none -sample_index=samples synth.pb.gz");
	const char *k = strstr(raw, "   150   ksys_write\n");
	ASSERT_NOT_NULL(k);
	const char *d = strstr(k, "do_syscall_64");
	const char *h = strstr(k, "com.example.Server.handle");
	ASSERT_NOT_NULL(d);
	ASSERT_NOT_NULL(h);
	ASSERT_TRUE(d < h);
	free(raw);

	test_addresses();
	test_merge(p);

	/* A profile without events cannot be written; a failing output is reported. */
	struct vp_profile *empty = vp_profile__new();
	ASSERT_OK(vp_out__open(&o, "empty.pb.gz"));
	ASSERT_NE(report_pprof(empty, &o, &opts), 0);
	vp_out__close(&o);
	ASSERT_OK(vp_out__open(&o, "/dev/full"));
	/* stdio buffers small outputs, so the error may only surface at close. */
	int werr = report_pprof(p, &o, &opts);
	int cerr = vp_out__close(&o);
	ASSERT_TRUE(werr != 0 || cerr != 0);
	vp_profile__free(empty);
	vp_profile__free(p);
	return 0;
}
