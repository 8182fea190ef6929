/* End to end through the real pipeline: `viprof record -g -- java JitSplit 8` then
 * `viprof report --format folded`. The three hot methods must split 50/30/20 within
 * 3 percentage points, and at least 95% of the Java main thread's samples must carry a
 * named Java frame. JDK 17, and JDK 25 when installed. */
#include "test-agent-util.h"

static void run(const char *java)
{
	char *dir = tu_tmpdir("e2e");
	char sess[600], folded[600], out[600], err[600];
	snprintf(sess, sizeof(sess), "%s/s", dir);
	snprintf(folded, sizeof(folded), "%s/folded", dir);
	snprintf(out, sizeof(out), "%s/out", dir);
	snprintf(err, sizeof(err), "%s/err", dir);
	char *rec[] = { VIPROF_BIN, "record", "-g", "-o", sess, "--", (char *)java, "-cp", VIPROF_JAVA_CLASSES,
			"JitSplit", "8", NULL };
	int rc = run_argv(rec, out, err, 90);
	if (rc) {
		char *e = tu_read(err);
		FAIL("viprof record exited %d: %s", rc, e);
	}
	char *rep[] = { VIPROF_BIN, "report", sess, "--format", "folded", "--threads", "-o", folded, NULL };
	ASSERT_EQ(run_argv(rep, NULL, err, 120), 0);

	FILE *f = fopen(folded, "r");
	ASSERT_NOT_NULL(f);
	static char line[1 << 16];
	long hot[3] = { 0 }, main_total = 0, main_named = 0, all = 0;
	while (fgets(line, sizeof(line), f)) {
		char *sp = strrchr(line, ' ');
		if (!sp)
			continue;
		long n = atol(sp + 1);
		all += n;
		if (strstr(line, "JitSplit.hotA(long)"))
			hot[0] += n;
		else if (strstr(line, "JitSplit.hotB(long)"))
			hot[1] += n;
		else if (strstr(line, "JitSplit.hotC(long)"))
			hot[2] += n;
		/* The main Java thread, named "main" as HotSpot names it. */
		if (!strncmp(line, "main;", 5)) {
			main_total += n;
			if (strstr(line, "JitSplit."))
				main_named += n;
		}
	}
	fclose(f);
	long sum = hot[0] + hot[1] + hot[2];
	fprintf(stderr, "%s: %ld samples, hot %ld: A %.1f%% B %.1f%% C %.1f%%; main thread %ld, named %.1f%%\n", java,
		all, sum, 100.0 * hot[0] / (sum ? sum : 1), 100.0 * hot[1] / (sum ? sum : 1),
		100.0 * hot[2] / (sum ? sum : 1), main_total, 100.0 * main_named / (main_total ? main_total : 1));
	ASSERT_GT(sum, 2000);
	ASSERT_DBL_NEAR(100.0 * hot[0] / sum, 50.0, 3.0);
	ASSERT_DBL_NEAR(100.0 * hot[1] / sum, 30.0, 3.0);
	ASSERT_DBL_NEAR(100.0 * hot[2] / sum, 20.0, 3.0);
	ASSERT_GE_F(100.0 * main_named / main_total, 95.0);
	tu_rm_rf(dir);
}

int main(int argc, char **argv)
{
	tu_require_fixtures();
	REQUIRE_ROOT();
	bool jdk17;
	run(tu_jdk_from_args(argc, argv, &jdk17));
	return 0;
}
