/* Issue 25: `viprof report -F jfr` read by the JDK's own `jfr` tool. tests/java/JitSplit
 * (hotA 50%, hotB 30%, hotC 20% of its main thread) is recorded, written as text and as
 * JFR; `jfr summary` counts as many jdk.ExecutionSample events as the text report has
 * samples, and `jfr print --events jdk.ExecutionSample` gives the top Java methods (by
 * the stacks' leaf frames) the text report's shares within 1 pp, all four frame types,
 * the main thread by its name, and the hot methods the split the fixture measured of its
 * own CPU (its totals file). Argument: 17 or 25: the JDK that runs the fixture and
 * whose `jfr` reads the file.
 *
 * With "times" after it (issue 33 item 4): tests/java/JfrTimes (sleeps, monitor and
 * ReentrantLock waits of known, distinct lengths, each timed by its thread) recorded with
 * -e cpu-clock,lock,alloc --off-cpu, written as JFR, and checked by
 * test-report-jfr-check.py with that JDK's jfr: every timed wait is an event of its
 * thread starting where it started and lasting what it lasted (not one mean per stack),
 * in order, inside the recording; jfr summary lists jdk.JVMInformation, OSInformation,
 * CPUInformation, ActiveRecording and ActiveSetting; jfr view contention-by-site (JDK 21
 * on) gives the longest wait as its max. --off-cpu needs root (BPF).
 *
 * With "synth" after it: the writer on a profile built by hand (no recording): see synth(). */
#include <stdlib.h>
#include <string.h>

#include "postproc/profile.h"
#include "report/report.h"
#include "test-agent-util.h"
#include "test-run.h"

#define MAXN 512

struct count {
	char name[256];
	long n;
};

static long *slot(struct count *c, int *n, const char *name)
{
	for (int i = 0; i < *n; i++)
		if (!strcmp(c[i].name, name))
			return &c[i].n;
	if (*n == MAXN)
		FAIL("more than %d names", MAXN);
	snprintf(c[*n].name, sizeof(c[*n].name), "%s", name);
	c[*n].n = 0;
	return &c[(*n)++].n;
}

/* The "synth" scenario: the writer on a profile built by hand, read by that JDK's jfr.
 * Off-CPU spans recorded one by one (11, 17, ... ms) are viprof.ThreadBlocked events at
 * exactly their start and duration, in time order; a sum of short intervals is none; lock
 * waits have their own durations; CPU samples their own instants; without spans (a fleet
 * query) the CPU samples are still all there, and no off-CPU event is made up. */
static const char synth_py[] =
	"import json, sys, re\n"
	"from datetime import datetime, timezone\n"
	"def ns(s):\n"
	"    m = re.match(r'(.*T[^.]*)(?:\\.(\\d+))?Z$', s)\n"
	"    t = int(datetime.strptime(m.group(1), '%Y-%m-%dT%H:%M:%S').replace(tzinfo=timezone.utc).timestamp())\n"
	"    return t * 10**9 + int((m.group(2) or '0').ljust(9, '0'))\n"
	"def span(s):\n"
	"    m = re.match(r'PT(?:(\\d+)(?:\\.(\\d+))?S)?$', s)\n"
	"    return int(m.group(1) or 0) * 10**9 + int((m.group(2) or '0').ljust(9, '0'))\n"
	"ev = json.load(sys.stdin)['recording']['events']\n"
	"for e in ev:\n"
	"    v = e['values']\n"
	"    print(e['type'], ns(v['startTime']) - 1700000000000000000, span(v['duration']) if 'duration' in v else 0,\n"
	"          v.get('state', '-'))\n";

static void synth_write(struct vp_profile *p, const char *path)
{
	struct vp_out o;
	ASSERT_OK(vp_out__open(&o, path));
	struct vp_report_opts ro = { 0 };
	ASSERT_OK(report_jfr(p, &o, &ro));
	ASSERT_OK(vp_out__close(&o));
}

static int synth(const char *jfr)
{
	if (run_sh("python3 -c 'import json' 2>/dev/null", 290) != 0)
		SKIP("python3 is needed to read jfr print --json");
	char *tmp = tu_tmpdir("jfrsynth");
	struct vp_profile *p = vp_profile__new();
	int cpu = vp_profile__add_event(p, "cpu-clock", "nanoseconds"), off = vp_profile__add_event(p, "off-cpu", "nanoseconds");
	int lk = vp_profile__add_event(p, "lock", "nanoseconds");
	/* Monotonic 5e9 is wall 1700000000 s: event times below print as ns since then. */
	vp_profile__set_meta(p, "start_monotonic_ns", "4000000000");
	vp_profile__set_meta(p, "start_realtime_ns", "1699999999000000000");
	vp_profile__set_meta(p, "window.start_monotonic_ns", "5000000000");
	vp_profile__set_meta(p, "duration_ns", "2000000000");
	vp_profile__set_meta(p, "kernel", "6.1.0-test");
	vp_profile__set_meta(p, "offcpu.split_ns", "10000000");
	struct vp_frame f = { .name = "start_thread", .image = "libc.so.6", .build_id = "", .file = "", .layer = VP_LAYER_NATIVE };
	uint32_t fr[4];
	fr[0] = vp_profile__frame(p, &f);
	f = (struct vp_frame){ .name = "Foo.work()", .image = "[jit]", .build_id = "", .file = "", .layer = VP_LAYER_JIT };
	fr[1] = vp_profile__frame(p, &f);
	f = (struct vp_frame){ .name = "[blocked: sleep]", .image = "[kernel.kallsyms]", .build_id = "", .file = "",
			       .layer = VP_LAYER_KERNEL };
	fr[2] = vp_profile__frame(p, &f);
	f = (struct vp_frame){ .name = "Foo$Monitor", .image = "[lock]", .build_id = "", .file = "", .layer = VP_LAYER_JVM };
	fr[3] = vp_profile__frame(p, &f);
	uint32_t scpu, soff, slk, fl[3] = { fr[0], fr[1], fr[3] };
	ASSERT_OK(vp_profile__add_stack(p, fr, 2, 7, 8, "worker", cpu, 3, 3000000, &scpu));
	ASSERT_OK(vp_profile__add_stack(p, fr, 3, 7, 8, "worker", off, 200, 200000000, &soff));
	ASSERT_OK(vp_profile__add_stack(p, fl, 3, 7, 8, "worker", lk, 3, 60000000, &slk));
	/* Written out of order: the file has them by start. */
	static const uint64_t sleeps[][2] = { { 5300000000, 23000000 }, { 5100000000, 11000000 }, { 5200000000, 17000000 } };
	for (int i = 0; i < 3; i++)
		ASSERT_OK(vp_profile__add_span(p, soff, off, sleeps[i][0] + sleeps[i][1], sleeps[i][1], VP_SPAN_ONE_INTERVAL));
	ASSERT_OK(vp_profile__add_span(p, soff, off, 5900000000, 149000000, 0));   /* a sum: no event */
	for (int i = 0; i < 3; i++) {
		ASSERT_OK(vp_profile__add_span(p, slk, lk, 5400000000 + 100000000 * (uint64_t)i + 10000000 * (uint64_t)(i + 1),
					       10000000 * (uint64_t)(i + 1), VP_SPAN_ONE_INTERVAL));
		ASSERT_OK(vp_profile__add_span(p, scpu, cpu, 5050000000 + 1000000 * (uint64_t)i, 1000000, 0));
	}
	char file[600], cmd[4000], outp[700];
	snprintf(file, sizeof(file), "%s/t.jfr", tmp);
	snprintf(outp, sizeof(outp), "%s/t.txt", tmp);
	synth_write(p, file);
	char py[700];
	snprintf(py, sizeof(py), "%s/p.py", tmp);
	FILE *f_py = fopen(py, "w");
	ASSERT_NOT_NULL(f_py);
	fputs(synth_py, f_py);
	fclose(f_py);
	snprintf(cmd, sizeof(cmd), "%s print --json --events viprof.ThreadBlocked,jdk.JavaMonitorEnter,jdk.ExecutionSample %s"
		 " | python3 %s > %s", jfr, file, py, outp);
	ASSERT_EQ(run_sh(cmd, 290), 0);
	char *t = tu_read(outp);
	fprintf(stderr, "%s", t);
	/* ns since wall 1700000000 s = monotonic 5e9. */
	ASSERT_CONTAINS(t, "jdk.ExecutionSample 50000000 0 STATE_RUNNABLE\njdk.ExecutionSample 51000000 0 STATE_RUNNABLE\n"
			   "jdk.ExecutionSample 52000000 0 STATE_RUNNABLE\n"
			   "viprof.ThreadBlocked 100000000 11000000 blocked: sleep\n"
			   "viprof.ThreadBlocked 200000000 17000000 blocked: sleep\n"
			   "viprof.ThreadBlocked 300000000 23000000 blocked: sleep\n"
			   "jdk.JavaMonitorEnter 400000000 10000000 -\n"
			   "jdk.JavaMonitorEnter 500000000 20000000 -\n"
			   "jdk.JavaMonitorEnter 600000000 30000000 -\n");
	ASSERT_EQ(tu_count_lines(t, "viprof.ThreadBlocked"), 3);
	free(t);

	/* Without spans: every CPU sample still, no off-CPU event made up. */
	free(p->spans);
	p->spans = NULL;
	p->nspans = p->spanscap = 0;
	synth_write(p, file);
	snprintf(cmd, sizeof(cmd), "%s print --json --events viprof.ThreadBlocked,jdk.ExecutionSample %s | python3 %s > %s",
		 jfr, file, py, outp);
	ASSERT_EQ(run_sh(cmd, 290), 0);
	t = tu_read(outp);
	ASSERT_EQ(tu_count_lines(t, "jdk.ExecutionSample"), 3);
	ASSERT_EQ(tu_count_lines(t, "viprof.ThreadBlocked"), 0);
	free(t);
	vp_profile__free(p);
	tu_rm_rf(tmp);
	return 0;
}

/* The "times" scenario: see the top of the file. */
static int times(const char *java, const char *jfr)
{
	if (geteuid() != 0)
		SKIP("--off-cpu needs root here (BPF)");
	if (run_sh("python3 -c 'import json' 2>/dev/null", 290) != 0)
		SKIP("python3 is needed to read jfr print --json");
	char *tmp = tu_tmpdir("jfrtimes");
	char dir[600], file[600], log[600], out[16384], cmd[4000];
	snprintf(dir, sizeof(dir), "%s/s", tmp);
	snprintf(file, sizeof(file), "%s/s.jfr", tmp);
	snprintf(log, sizeof(log), "%s/waits", tmp);
	char *rec[] = { (char *)VIPROF_BIN, "record", "-q", "-g", "-e", "cpu-clock,lock,alloc", "--off-cpu", "-o", dir, "--",
			(char *)java, "-cp", (char *)VIPROF_JAVA_CLASSES, "JfrTimes", "4", log, NULL };
	int rc = run_logged(tmp, rec, out, sizeof(out), 240);
	if (rc)
		FAIL("viprof record exited %d: %s", rc, out);
	char *w[] = { (char *)VIPROF_BIN, "report", dir, "-F", "jfr", "-o", file, NULL };
	free(run_output(tmp, w, "viprof report -F jfr"));
	char json[700];
	snprintf(json, sizeof(json), "%s/s.json", tmp);
	char *wj[] = { (char *)VIPROF_BIN, "report", dir, "-F", "json", "-o", json, NULL };
	free(run_output(tmp, wj, "viprof report -F json"));
	snprintf(cmd, sizeof(cmd), "python3 %s/tests/test-report-jfr-check.py %s %s %s %s", SRCDIR, jfr, file, json,
		 log);
	fprintf(stderr, "%s\n", cmd);
	ASSERT_EQ(run_sh(cmd, 290), 0);
	tu_rm_rf(tmp);
	return 0;
}

int main(int argc, char **argv)
{
	bool jdk17;
	const char *java = tu_jdk_from_args(argc, argv, &jdk17);
	tu_require_fixtures();
	char jfr[512];
	snprintf(jfr, sizeof(jfr), "%.*sjfr", (int)(strlen(java) - 4), java);   /* .../bin/java -> .../bin/jfr */
	if (access(jfr, X_OK))
		SKIP("no jfr tool at %s", jfr);
	if (argc > 2 && !strcmp(argv[2], "times"))
		return times(java, jfr);
	if (argc > 2 && !strcmp(argv[2], "synth"))
		return synth(jfr);
	char *tmp = tu_tmpdir("jfr");
	char dir[600], file[600], out[8192];
	snprintf(dir, sizeof(dir), "%s/s", tmp);
	snprintf(file, sizeof(file), "%s/s.jfr", tmp);
	char totals_file[600];
	snprintf(totals_file, sizeof(totals_file), "%s/totals", tmp);
	char *rec[] = { (char *)VIPROF_BIN, "record", "-q", "-g", "-F", "999", "-o", dir, "--", (char *)java, "-cp",
			(char *)VIPROF_JAVA_CLASSES, "JitSplit", "4", "0", totals_file, NULL };
	int rc = run_logged(tmp, rec, out, sizeof(out), 240);
	if (rc)
		FAIL("viprof record exited %d: %s", rc, out);
	/* What the fixture measured of its own CPU per hot method (ns). */
	double spent[3];
	char *totals = tu_read(totals_file);
	int got = sscanf(totals, "JitSplit hotA %lf hotB %lf hotC %lf", &spent[0], &spent[1], &spent[2]);
	if (got != 3)
		FAIL("JitSplit's totals file says '%s'", totals);
	free(totals);

	/* The text report: samples per symbol over the Java layers, and the total. */
	char *rep[] = { (char *)VIPROF_BIN, "report", dir, "-n", "100000", NULL };
	char *txt = run_output(tmp, rep, "viprof report");
	const char *tl = strstr(txt, "# event: ");
	ASSERT_NOT_NULL(tl);
	long total = 0;
	ASSERT_TRUE(sscanf(strchr(tl, ',') + 1, "%ld samples", &total) == 1);
	/* 999 Hz of the main thread's CPU at least (the JIT and GC threads add more), held
	 * to what the fixture measured it got: 4 CPU-s on a quiet machine, less on a busy
	 * one, where it stops after 12 s of wall time. */
	double main_cpu = (spent[0] + spent[1] + spent[2]) / 1e9;
	fprintf(stderr, "JitSplit's main thread: %.2f CPU-s; %ld samples\n", main_cpu, total);
	if (main_cpu < 0.5)
		SKIP("JitSplit got %.2f CPU-s in 12 s: too busy a machine to hold shares to 1 pp", main_cpu);
	ASSERT_GE_F((double)total, main_cpu * 999 * 0.8);
	static struct count text[MAXN], leaf[MAXN];
	int ntext = 0, nleaf = 0;
	for (char *line = strtok(txt, "\n"); line; line = strtok(NULL, "\n")) {
		double self, tot;
		long n;
		char layer[32];
		int off = 0;
		if (line[0] == '#' || sscanf(line, "%lf %lf %ld %31s %n", &self, &tot, &n, layer, &off) != 4 || !off)
			continue;
		if (strcmp(layer, "jit") && strcmp(layer, "inlined") && strcmp(layer, "interpreted"))
			continue;
		char *sym = line + off, *end = strstr(sym, "  ");
		if (end)
			*end = '\0';
		if (!strstr(sym, "..."))   /* names cut to the table's width cannot be matched */
			*slot(text, &ntext, sym) += n;
	}
	free(txt);

	char *w[] = { (char *)VIPROF_BIN, "report", dir, "-F", "jfr", "-o", file, NULL };
	free(run_output(tmp, w, "viprof report -F jfr"));

	char *sum[] = { jfr, "summary", file, NULL };
	char *s = run_output(tmp, sum, "jfr summary");
	fprintf(stderr, "%s\n", s);
	ASSERT_CONTAINS(s, "Version: 2.1");
	const char *es = strstr(s, "jdk.ExecutionSample");
	ASSERT_NOT_NULL(es);
	long nev = 0;
	ASSERT_TRUE(sscanf(es + strlen("jdk.ExecutionSample"), "%ld", &nev) == 1);
	ASSERT_EQ(nev, total);
	free(s);

	/* Leaf frames of every event, by name ("Class.method(args) line: N" in jfr's print). */
	char *pr[] = { jfr, "print", "--events", "jdk.ExecutionSample", "--stack-depth", "1", file, NULL };
	char *p = run_output(tmp, pr, "jfr print");
	long events = 0;
	bool main_thread = false;
	for (char *line = strtok(p, "\n"); line; line = strtok(NULL, "\n")) {
		if (strstr(line, "jdk.ExecutionSample {"))
			events++;
		if (strstr(line, "sampledThread = \"java\""))
			main_thread = true;
		if (!strstr(line, "stackTrace = ["))
			continue;
		char *f = strtok(NULL, "\n");
		if (!f)
			break;
		while (*f == ' ')
			f++;
		char *ln = strstr(f, " line: ");
		if (ln)
			*ln = '\0';
		(*slot(leaf, &nleaf, f))++;
	}
	free(p);
	ASSERT_EQ(events, total);
	ASSERT_TRUE(main_thread);

	/* The top three Java methods of the text report: JFR gives them the same shares. */
	bool seen[MAXN] = { false };
	for (int r = 0; r < 3; r++) {
		int best = -1;
		for (int i = 0; i < ntext; i++)
			if (!seen[i] && (best < 0 || text[i].n > text[best].n))
				best = i;
		ASSERT_GE(best, 0);
		seen[best] = true;
		double a = 100.0 * text[best].n / total, b = 100.0 * *slot(leaf, &nleaf, text[best].name) / nev;
		fprintf(stderr, "%-40s text %5.1f%%  jfr %5.1f%%\n", text[best].name, a, b);
		ASSERT_DBL_NEAR(a, b, 1.0);
	}
	/* The hot methods, in both: their split is what the fixture measured of its own CPU,
	 * not a rank among all methods (the inlined JitSplit.alloc, which all three call,
	 * can outrank hotC's own samples on a loaded machine). Each row of a method (tiers,
	 * interpreted) adds up; alloc's share is spread over the three alike. */
	static const char *const hot[] = { "JitSplit.hotA", "JitSplit.hotB", "JitSplit.hotC" };
	double in_text[3] = { 0 }, in_jfr[3] = { 0 }, sum_text = 0, sum_jfr = 0, sum_cpu = 0;
	for (int h = 0; h < 3; h++) {
		for (int i = 0; i < ntext; i++)
			if (strstr(text[i].name, hot[h]))
				in_text[h] += (double)text[i].n;
		for (int i = 0; i < nleaf; i++)
			if (strstr(leaf[i].name, hot[h]))
				in_jfr[h] += (double)leaf[i].n;
		sum_text += in_text[h];
		sum_jfr += in_jfr[h];
		sum_cpu += spent[h];
	}
	ASSERT_GT_F(sum_text, 300);   /* 4 CPU-s at 999 Hz: thousands */
	for (int h = 0; h < 3; h++) {
		double tx = 100.0 * in_text[h] / sum_text, f = 100.0 * in_jfr[h] / sum_jfr, c = 100.0 * spent[h] / sum_cpu;
		fprintf(stderr, "%s: fixture %5.1f%% of its CPU, text %5.1f%%, jfr %5.1f%% (of the three)\n", hot[h], c, tx, f);
		ASSERT_DBL_NEAR(tx, f, 1.0);
		ASSERT_DBL_NEAR(tx, c, 5.0);
	}

	/* Frame types: interpreted, compiled, inlined and native frames all named so. */
	char *js[] = { jfr, "print", "--json", "--events", "jdk.ExecutionSample", "--stack-depth", "64", file, NULL };
	char *j = run_output(tmp, js, "jfr print --json");
	ASSERT_CONTAINS(j, "\"type\": \"Interpreted\"");
	ASSERT_CONTAINS(j, "\"type\": \"JIT compiled\"");
	ASSERT_CONTAINS(j, "\"type\": \"Inlined\"");
	ASSERT_CONTAINS(j, "\"type\": \"Native\"");
	ASSERT_CONTAINS(j, "\"name\": \"hotA\"");
	ASSERT_CONTAINS(j, "\"name\": \"JitSplit\"");
	free(j);
	tu_rm_rf(tmp);
	return 0;
}
