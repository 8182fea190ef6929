/* The pprof report, read back by the real pprof (built here from Debian's
 * golang-github-google-pprof-dev sources): top functions with the expected shares per
 * sample type, totals equal to the profile's, labels, mappings and metadata. */
#include <sys/stat.h>
#include <sys/wait.h>

#include "postproc/report.h"
#include "test-profile-synth.h"

#define PPROF_SRC "/usr/share/gocode/src/github.com/google/pprof"

static char *run(const char *cmd)
{
	char full[2048];
	snprintf(full, sizeof(full), "%s > out.txt 2> err.txt", cmd);
	int st = system(full);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		char *e = synth_slurp("err.txt", NULL);
		FAIL("'%s' failed: %s", cmd, e ? e : "");
	}
	char *out = synth_slurp("out.txt", NULL);
	ASSERT_NOT_NULL(out);
	return out;
}

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

int main(void)
{
	struct stat sb;
	if (system("command -v go >/dev/null 2>&1") != 0)
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
		if (system(cmd) != 0)
			SKIP("could not build pprof from %s", PPROF_SRC);
	}

	struct vp_profile *p = synth_java_profile();
	vp_profile__warn(p, "session ended without END record");
	struct vp_out o;
	struct vp_report_opts opts = { 0 };
	ASSERT_OK(vp_out__open(&o, "synth.pb.gz"));
	ASSERT_OK(report_pprof(p, &o, &opts));
	ASSERT_OK(vp_out__close(&o));
	size_t len;
	char *raw = synth_slurp("synth.pb.gz", &len);
	ASSERT_NOT_NULL(raw);
	ASSERT_GT(len, 100);
	ASSERT_EQ((unsigned char)raw[0], 0x1f);   /* gzip magic */
	ASSERT_EQ((unsigned char)raw[1], 0x8b);
	free(raw);

	/* Sample counts: the top frames and their shares. */
	char *top = run("./pprof -top -nodecount=100 -symbolize=none -sample_index=samples synth.pb.gz");
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
	top = run("./pprof -top -nodecount=100 -symbolize=none synth.pb.gz");
	ASSERT_CONTAINS(top, "Type: cpu-clock");
	ASSERT_CONTAINS(top, "Total samples = 1000ms");
	ASSERT_CONTAINS(top, "Duration: 1s");
	expect(top, "com.example.Codec.encode", 400, 40.00, 400, 40.00);
	free(top);

	/* The second event has its own pair of sample types. */
	top = run("./pprof -top -nodecount=100 -symbolize=none -sample_index=page-faults synth.pb.gz");
	ASSERT_CONTAINS(top, "of 40events total");
	expect(top, "G1CollectedHeap::do_collection", 30, 75.00, 30, 75.00);
	expect(top, "ksys_write", 10, 25.00, 10, 25.00);
	free(top);

	/* -raw: the sample types, every sample with its values and labels, and totals equal
	 * to the profile's. */
	raw = run("./pprof -raw -symbolize=none synth.pb.gz");
	ASSERT_CONTAINS(raw, "PeriodType: cpu-clock nanoseconds");
	ASSERT_CONTAINS(raw, "Period: 1000000");
	ASSERT_CONTAINS(raw, "samples/count cpu-clock/nanoseconds[dflt] page-faults_samples/count page-faults/events");
	ASSERT_CONTAINS(raw, "Comment: session ended without END record");
	ASSERT_CONTAINS(raw, "layer:[kernel] thread:[worker-1]");
	ASSERT_CONTAINS(raw, "layer:[jvm] thread:[VM Thread]");
	ASSERT_CONTAINS(raw, "layer:[hypervisor]");
	ASSERT_CONTAINS(raw, "pid:[4242] tid:[4250]");
	ASSERT_CONTAINS(raw, "0x851000 M=");
	ASSERT_CONTAINS(raw, "JavaCalls::call_helper /usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so");
	ASSERT_CONTAINS(raw, "/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so 09786fea52a9867f");
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
	raw = run("./pprof -traces -symbolize=none -sample_index=samples synth.pb.gz");
	const char *k = strstr(raw, "   150   ksys_write\n");
	ASSERT_NOT_NULL(k);
	const char *d = strstr(k, "do_syscall_64");
	const char *h = strstr(k, "com.example.Server.handle");
	ASSERT_NOT_NULL(d);
	ASSERT_NOT_NULL(h);
	ASSERT_TRUE(d < h);
	free(raw);

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
