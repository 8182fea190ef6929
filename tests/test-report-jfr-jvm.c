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
 * on) gives the longest wait as its max. --off-cpu needs root (BPF). */
#include <stdlib.h>
#include <string.h>

#include "test-agent-util.h"
#include "test-record-util.h"

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

/* The "times" scenario: see the top of the file. */
static int times(const char *java, const char *jfr)
{
	if (geteuid() != 0)
		SKIP("--off-cpu needs root here (BPF)");
	if (system("python3 -c 'import json' 2>/dev/null") != 0)
		SKIP("python3 is needed to read jfr print --json");
	char *tmp = tu_tmpdir("jfrtimes");
	char dir[600], file[600], log[600], out[16384], cmd[4000];
	snprintf(dir, sizeof(dir), "%s/s", tmp);
	snprintf(file, sizeof(file), "%s/s.jfr", tmp);
	snprintf(log, sizeof(log), "%s/waits", tmp);
	char *rec[] = { (char *)VIPROF_BIN, "record", "-q", "-g", "-e", "cpu-clock,lock,alloc", "--off-cpu", "-o", dir, "--",
			(char *)java, "-cp", (char *)VIPROF_JAVA_CLASSES, "JfrTimes", "4", log, NULL };
	int rc = tr_run(tmp, rec, out, sizeof(out));
	if (rc)
		FAIL("viprof record exited %d: %s", rc, out);
	char *w[] = { (char *)VIPROF_BIN, "report", dir, "-F", "jfr", "-o", file, NULL };
	free(tu_output(tmp, w, "viprof report -F jfr"));
	char json[700];
	snprintf(json, sizeof(json), "%s/s.json", tmp);
	char *wj[] = { (char *)VIPROF_BIN, "report", dir, "-F", "json", "-o", json, NULL };
	free(tu_output(tmp, wj, "viprof report -F json"));
	snprintf(cmd, sizeof(cmd), "python3 %s/tests/test-report-jfr-check.py %s %s %s %s", SRCDIR, jfr, file, json,
		 log);
	fprintf(stderr, "%s\n", cmd);
	ASSERT_EQ(system(cmd), 0);
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
	char *tmp = tu_tmpdir("jfr");
	char dir[600], file[600], out[8192];
	snprintf(dir, sizeof(dir), "%s/s", tmp);
	snprintf(file, sizeof(file), "%s/s.jfr", tmp);
	char totals_file[600];
	snprintf(totals_file, sizeof(totals_file), "%s/totals", tmp);
	char *rec[] = { (char *)VIPROF_BIN, "record", "-q", "-g", "-F", "999", "-o", dir, "--", (char *)java, "-cp",
			(char *)VIPROF_JAVA_CLASSES, "JitSplit", "4", "0", totals_file, NULL };
	int rc = tr_run(tmp, rec, out, sizeof(out));
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
	char *txt = tu_output(tmp, rep, "viprof report");
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
	free(tu_output(tmp, w, "viprof report -F jfr"));

	char *sum[] = { jfr, "summary", file, NULL };
	char *s = tu_output(tmp, sum, "jfr summary");
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
	char *p = tu_output(tmp, pr, "jfr print");
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
		double t = 100.0 * in_text[h] / sum_text, f = 100.0 * in_jfr[h] / sum_jfr, c = 100.0 * spent[h] / sum_cpu;
		fprintf(stderr, "%s: fixture %5.1f%% of its CPU, text %5.1f%%, jfr %5.1f%% (of the three)\n", hot[h], c, t, f);
		ASSERT_DBL_NEAR(t, f, 1.0);
		ASSERT_DBL_NEAR(t, c, 5.0);
	}

	/* Frame types: interpreted, compiled, inlined and native frames all named so. */
	char *js[] = { jfr, "print", "--json", "--events", "jdk.ExecutionSample", "--stack-depth", "64", file, NULL };
	char *j = tu_output(tmp, js, "jfr print --json");
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
