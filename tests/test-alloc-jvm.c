/* Issue 25 item 1: `viprof record -e alloc` on tests/java/AllocSplit (75% of the bytes in
 * long[] from AllocSplit.a, 25% in double[] from AllocSplit.b). The report of event
 * alloc has the classes as leaf frames under their allocating methods, within 3 pp of
 * the split, by samples (folded) and by bytes (the text report's alloc column); the
 * pprof sample types are Go's alloc_objects and alloc_space; the JFR output has one
 * jdk.ObjectAllocationSample per sample, which that JDK's jfr tool prints with its class
 * and stack. Argument: 17 or 25.
 *
 * With a second argument "asprof" (test-alloc-asprof-jvm): the same run also has
 * async-profiler's `event=alloc,total` loaded as a second agent, both every 128 KiB (its build directory in
 * ASPROF_HOME: lib/ or build/lib/libasyncProfiler.so; skipped without it, as in CI),
 * and viprof's split by bytes must be within 3 pp of async-profiler's as well as of the
 * fixture's. Both agents take the JVM's JVMTI heap samples (HotSpot has one sampler per
 * JVM, each agent is told of every sample), so the comparison checks what each makes of
 * them: stacks, class names and weights, not two independent samplings. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test-agent-util.h"
#include "test-run.h"

/* The count of folded lines whose stack ends in ";<method>_[j];<leaf>". */
static long folded_count(const char *folded, const char *method, const char *leaf)
{
	char pat[256];
	long n = 0;
	snprintf(pat, sizeof(pat), ";%s_[j];%s ", method, leaf);
	for (const char *p = folded; (p = strstr(p, pat)); p++)
		n += strtol(p + strlen(pat), NULL, 10);
	return n;
}

/* async-profiler's library under ASPROF_HOME, or a skip saying why there is none. */
static const char *asprof_lib(void)
{
	static char lib[600];
	const char *home = getenv("ASPROF_HOME");
	if (!home || !*home)
		SKIP("ASPROF_HOME is not set (an async-profiler build directory); nothing to compare with");
	const char *sub[] = { "lib", "build/lib" };
	for (int i = 0; i < 2; i++) {
		snprintf(lib, sizeof(lib), "%s/%s/libasyncProfiler.so", home, sub[i]);
		if (!access(lib, R_OK))
			return lib;
	}
	SKIP("no libasyncProfiler.so under %s/lib or %s/build/lib", home, home);
}

/* async-profiler's bytes (collapsed with total) under method;class, summed. */
static long long asprof_bytes(const char *collapsed, const char *method, const char *cls)
{
	char pat[256];
	long long n = 0;
	snprintf(pat, sizeof(pat), ";%s;%s", method, cls);
	for (const char *p = collapsed; (p = strstr(p, pat)); p++) {
		const char *sp = strchr(p, ' '), *nl = strchr(p, '\n');
		if (sp && (!nl || sp < nl))
			n += strtoll(sp + 1, NULL, 10);
	}
	return n;
}

int main(int argc, char **argv)
{
	bool jdk17;
	const char *java = tu_jdk_from_args(argc, argv, &jdk17);
	tu_require_fixtures();
	bool vs = argc > 2 && !strcmp(argv[2], "asprof");
	const char *aplib = vs ? asprof_lib() : NULL;
	char *tmp = tu_tmpdir("alloc");
	char dir[600], out[8192], apfile[700], apopt[1400];
	snprintf(dir, sizeof(dir), "%s/s", tmp);
	snprintf(apfile, sizeof(apfile), "%s/ap.collapsed", tmp);
	/* Side by side both sample every 128 KiB (one interval per JVM: both agents set it),
	 * four times as often as the default, so that the comparison rests on thousands of
	 * samples even when the machine is loaded. */
	snprintf(apopt, sizeof(apopt), "-agentpath:%s=start,event=alloc,alloc=131072,total,collapsed,file=%s",
		 aplib ? aplib : "", apfile);
	char *rec[] = { (char *)VIPROF_BIN, "record", "-q", "-g", "-e", vs ? "alloc/period=131072/" : "alloc", "-o", dir, "--", (char *)java, "-cp",
			(char *)VIPROF_JAVA_CLASSES, "AllocSplit", "3", NULL, NULL };
	if (vs) {   /* async-profiler's agent before the class path */
		memmove(&rec[11], &rec[10], 4 * sizeof(rec[0]));
		rec[10] = apopt;
	}
	int rc = run_logged(tmp, rec, out, sizeof(out), 200);
	if (rc)
		FAIL("viprof record -e alloc exited %d: %s", rc, out);

	char *fo[] = { (char *)VIPROF_BIN, "report", dir, "-e", "alloc", "-F", "folded", NULL };
	char *folded = run_output(tmp, fo, "viprof report -e alloc -F folded");
	long a = folded_count(folded, "AllocSplit.a(int)", "long[]"), b = folded_count(folded, "AllocSplit.b(int)", "double[]");
	long all = 0;
	for (const char *l = folded; *l;) {
		const char *sp = strrchr(l, ' '), *nl = strchr(l, '\n');
		if (!nl)
			break;
		for (sp = nl; sp > l && sp[-1] != ' '; sp--)
			;
		all += strtol(sp, NULL, 10);
		l = nl + 1;
	}
	free(folded);
	fprintf(stderr, "alloc samples: a/long[] %ld, b/double[] %ld, all %ld\n", a, b, all);
	ASSERT_GT(all, 500);
	/* Nearly all samples are the fixture's (the JVM's own start-up allocates a little). */
	ASSERT_GE((a + b) * 100, all * 95);
	ASSERT_DBL_NEAR(100.0 * a / (a + b), 75.0, 3.0);
	ASSERT_DBL_NEAR(100.0 * b / (a + b), 25.0, 3.0);

	/* By bytes: the text report's alloc column (the class rows). */
	char *tx[] = { (char *)VIPROF_BIN, "report", dir, "-e", "alloc", "-n", "10", NULL };
	char *txt = run_output(tmp, tx, "viprof report -e alloc");
	double la = -1, ld = -1;
	for (char *line = strtok(txt, "\n"); line; line = strtok(NULL, "\n")) {
		double cpu, al, tot;
		long n;
		char layer[32], sym[64];
		if (line[0] == '#' || sscanf(line, "%lf %lf %lf %ld %31s %63s", &cpu, &al, &tot, &n, layer, sym) != 6)
			continue;
		if (!strcmp(sym, "long[]"))
			la = al;
		if (!strcmp(sym, "double[]"))
			ld = al;
	}
	free(txt);
	fprintf(stderr, "alloc bytes: long[] %.1f%%, double[] %.1f%%\n", la, ld);
	ASSERT_DBL_NEAR(la / (la + ld) * 100.0, 75.0, 3.0);
	if (vs) {
		char *ap = tu_read(apfile);
		ASSERT_NOT_NULL(ap);
		long long aa = asprof_bytes(ap, "AllocSplit.a", "long[]"), ab = asprof_bytes(ap, "AllocSplit.b", "double[]");
		free(ap);
		ASSERT_GT(aa + ab, 0);
		double vp = la / (la + ld) * 100.0, as = 100.0 * (double)aa / (double)(aa + ab);
		fprintf(stderr, "long[] share of the bytes: viprof %.2f%%, async-profiler %.2f%% (%.1f MB sampled), "
			"fixture 75%%: viprof - async-profiler %+.2f pp\n", vp, as, (double)(aa + ab) / 1e6, vp - as);
		ASSERT_DBL_NEAR(vp, as, 3.0);
		tu_rm_rf(tmp);
		return 0;   /* the formats are test-alloc-jvm's */
	}

	/* pprof: Go's names for the two sample types. */
	char pb[700];
	snprintf(pb, sizeof(pb), "%s/a.pb.gz", tmp);
	char *pp[] = { (char *)VIPROF_BIN, "report", dir, "-F", "pprof", "-o", pb, NULL };
	free(run_output(tmp, pp, "viprof report -F pprof"));
	char cmd[1600];
	snprintf(cmd, sizeof(cmd), "zcat %s | grep -c alloc_space > %s/pp.txt; zcat %s | grep -c alloc_objects >> %s/pp.txt", pb,
		 tmp, pb, tmp);
	ASSERT_EQ(run_sh(cmd, 230), 0);

	/* JFR: as many jdk.ObjectAllocationSample events as samples, class and stack named. */
	char jfr[512], jf[700];
	snprintf(jfr, sizeof(jfr), "%.*sjfr", (int)(strlen(java) - 4), java);
	snprintf(jf, sizeof(jf), "%s/a.jfr", tmp);
	char *wj[] = { (char *)VIPROF_BIN, "report", dir, "-F", "jfr", "-o", jf, NULL };
	free(run_output(tmp, wj, "viprof report -F jfr"));
	char *sm[] = { jfr, "summary", jf, NULL };
	char *sum = run_output(tmp, sm, "jfr summary");
	const char *es = strstr(sum, "jdk.ObjectAllocationSample");
	ASSERT_NOT_NULL(es);
	ASSERT_EQ(strtol(es + strlen("jdk.ObjectAllocationSample"), NULL, 10), all);
	free(sum);
	char *pj[] = { jfr, "print", "--events", "jdk.ObjectAllocationSample", "--stack-depth", "1", jf, NULL };
	char *pr = run_output(tmp, pj, "jfr print");
	ASSERT_CONTAINS(pr, "objectClass = long[]");
	ASSERT_CONTAINS(pr, "objectClass = double[]");
	ASSERT_CONTAINS(pr, "AllocSplit.a(int) line:");
	free(pr);
	tu_rm_rf(tmp);
	return 0;
}
