/* Interpreted Java frames named by the frame-pointer-free walker: `viprof record -g --
 * java InterpSplit 5` (no -XX:+PreserveFramePointer: record no longer adds it). Three
 * interpreted callers share one compiled method 50/30/20 by CPU time; the samples in
 * that compiled method must name their caller (at least 99%) and the callers' shares
 * must be within 1 percentage point of the split. JDK 17, and Temurin 25 when installed.
 *
 * argv 17|25 perf (issue 32): the same recording with the perf backend, which an
 * unprivileged user's own `viprof record` uses and which reads no interpreted frame:
 * the report must say that interpreted Java frames are unnamed and that the service
 * ('viprof serve') names them. */
#include "test-agent-util.h"

static void run(const char *java)
{
	char *dir = tu_tmpdir("unwind-interp");
	char sess[600], folded[600], out[600], err[600];

	snprintf(sess, sizeof(sess), "%s/s", dir);
	snprintf(folded, sizeof(folded), "%s/folded", dir);
	snprintf(out, sizeof(out), "%s/out", dir);
	snprintf(err, sizeof(err), "%s/err", dir);
	char *rec[] = { VIPROF_BIN, "record", "-g", "-q", "-o", sess, "--", (char *)java, "-cp",
			VIPROF_JAVA_CLASSES, "InterpSplit", "5", NULL };
	int rc = run_argv(rec, out, err, 90);
	if (rc)
		FAIL("viprof record exited %d: %s", rc, tu_read(err));
	char *rep[] = { VIPROF_BIN, "report", sess, "--format", "folded", "-o", folded, NULL };
	ASSERT_EQ(run_argv(rep, NULL, err, 120), 0);

	FILE *f = fopen(folded, "r");
	ASSERT_NOT_NULL(f);
	static char line[1 << 16];
	long callers[3] = { 0 }, spin = 0, spin_named = 0, all = 0;
	while (fgets(line, sizeof(line), f)) {
		char *sp = strrchr(line, ' ');
		if (!sp)
			continue;
		long n = atol(sp + 1);
		all += n;
		if (!strstr(line, "InterpSplit$Hot.spin"))
			continue;
		spin += n;
		/* Every sample in spin must reach main through the interpreted frames (the
		 * warm-up calls spin from main directly; the rounds through a caller). */
		if (strstr(line, "InterpSplit.main"))
			spin_named += n;
		else if (n > 20)
			fprintf(stderr, "%ld samples without main (session %s): %.600s\n", n, sess, line);
		int k = strstr(line, "InterpSplit.callerA") ? 0 : strstr(line, "InterpSplit.callerB") ? 1
		      : strstr(line, "InterpSplit.callerC") ? 2 : -1;
		if (k >= 0)
			callers[k] += n;
	}
	fclose(f);
	long sum = callers[0] + callers[1] + callers[2];
	fprintf(stderr, "%s: %ld samples, %ld in Hot.spin, %ld (%.2f%%) reach main; callers: A %.2f%% B %.2f%% C %.2f%%\n",
		java, all, spin, spin_named, 100.0 * spin_named / (spin ? spin : 1),
		100.0 * callers[0] / (sum ? sum : 1), 100.0 * callers[1] / (sum ? sum : 1),
		100.0 * callers[2] / (sum ? sum : 1));
	ASSERT_GT(spin, 3000);
	ASSERT_GE_F(100.0 * spin_named / spin, 99.0);
	ASSERT_DBL_NEAR(100.0 * callers[0] / sum, 50.0, 1.0);
	ASSERT_DBL_NEAR(100.0 * callers[1] / sum, 30.0, 1.0);
	ASSERT_DBL_NEAR(100.0 * callers[2] / sum, 20.0, 1.0);
	tu_rm_rf(dir);
}

/* The perf backend: a report of its recording says how to get interpreted names. */
static void run_perf(const char *java)
{
	char *dir = tu_tmpdir("unwind-interp-perf");
	char sess[600], rep_out[600], out[600], err[600];

	snprintf(sess, sizeof(sess), "%s/s", dir);
	snprintf(rep_out, sizeof(rep_out), "%s/report", dir);
	snprintf(out, sizeof(out), "%s/out", dir);
	snprintf(err, sizeof(err), "%s/err", dir);
	char *rec[] = { VIPROF_BIN, "record", "-g", "-q", "--backend", "perf", "-o", sess, "--", (char *)java, "-cp",
			VIPROF_JAVA_CLASSES, "InterpSplit", "2", NULL };
	int rc = run_argv(rec, out, err, 90);
	if (rc)
		FAIL("viprof record exited %d: %s", rc, tu_read(err));
	char *rep[] = { VIPROF_BIN, "report", sess, "-o", rep_out, NULL };
	ASSERT_EQ(run_argv(rep, NULL, err, 120), 0);
	char *text = tu_read(rep_out), *e = tu_read(err);
	fprintf(stderr, "report warnings:\n");
	for (char *l = strstr(text, "# warning:"); l; l = strstr(l + 1, "# warning:"))
		fprintf(stderr, "  %.*s\n", (int)strcspn(l, "\n"), l);
	ASSERT_TRUE(strstr(text, "interpreted Java frames are unnamed") != NULL);
	ASSERT_TRUE(strstr(text, "viprof serve") != NULL);
	free(text);
	free(e);
	tu_rm_rf(dir);
}

int main(int argc, char **argv)
{
	bool jdk17;

	tu_require_fixtures();
	REQUIRE_ROOT();
	const char *java = tu_jdk_from_args(argc, argv, &jdk17);
	if (argc > 2 && !strcmp(argv[2], "perf"))
		run_perf(java);
	else
		run(java);
	return 0;
}
