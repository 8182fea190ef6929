/* Issue 25: the compile tier of each compiled method, from the agent's code-heap walk
 * through the code map to the reports. tests/java/Tiers.java runs Tiers.step (compiled
 * normally, kept out of its caller with dontinline) and Tiers.loop (compiled while it
 * runs: OSR) for half the run each. Recorded once with -XX:TieredStopAtLevel=1, their
 * compiled samples are marked C1 in the text report and in folded output (_[1]), and
 * `viprof maps show` lists them as C1 level 1 (loop's as OSR); recorded once with the
 * JVM's defaults, C2 (_[j]; C2 level 4, loop's OSR); the JSON report's frames say the
 * same (tier, compile_level). Argument: 17 or 25 (the JDK). */
#include <stdlib.h>
#include <string.h>

#include "test-agent-util.h"
#include "test-run.h"

struct tiers {
	long step_c1, step_c2, loop_c1, loop_c2, other;
};

static void record(const char *java, const char *tmp, const char *dir, bool c1)
{
	char out[8192];
	char *argv[] = { (char *)VIPROF_BIN, "record", "-q", "-g", "-F", "999", "-o", (char *)dir, "--force", "--",
			 (char *)java, c1 ? "-XX:TieredStopAtLevel=1" : "-XX:+UseSerialGC",
			 "-XX:CompileCommand=quiet", "-XX:CompileCommand=dontinline,Tiers::step",
			 "-cp", (char *)VIPROF_JAVA_CLASSES, "Tiers", "3", NULL };
	int rc = run_logged(tmp, argv, out, sizeof(out), 240);
	if (rc)
		FAIL("viprof record exited %d: %s", rc, out);
}

static char *run_report(const char *tmp, char *const argv[])
{
	char outp[600], errp[600];
	snprintf(outp, sizeof(outp), "%s/report.out", tmp);
	snprintf(errp, sizeof(errp), "%s/report.err", tmp);
	int rc = run_argv(argv, outp, errp, 120);
	char *err = tu_read(errp);
	if (rc)
		FAIL("%s %s exited %d: %s", argv[1], argv[2], rc, err);
	free(err);
	return tu_read(outp);
}

/* Samples of the jit rows of Tiers.step and Tiers.loop in the text report, by tier. */
static struct tiers text_tiers(const char *tmp, const char *dir)
{
	char *argv[] = { (char *)VIPROF_BIN, "report", (char *)dir, "-n", "100000", NULL };
	char *txt = run_report(tmp, argv);
	struct tiers t = { 0 };
	for (char *line = strtok(txt, "\n"); line; line = strtok(NULL, "\n")) {
		double self, total;
		long n;
		char layer[32];
		if (line[0] == '#' || sscanf(line, "%lf %lf %ld %31s", &self, &total, &n, layer) != 4 || strcmp(layer, "jit"))
			continue;
		const char *img = strrchr(line, '[');
		bool step = strstr(line, "Tiers.step(long)") != NULL, loop = strstr(line, "Tiers.loop(long)") != NULL;
		if (!img || (!step && !loop))
			continue;
		fprintf(stderr, "  %s\n", line);
		if (step && !strcmp(img, "[jit C1]"))
			t.step_c1 += n;
		else if (step && !strcmp(img, "[jit C2]"))
			t.step_c2 += n;
		else if (loop && !strcmp(img, "[jit C1]"))
			t.loop_c1 += n;
		else if (loop && !strcmp(img, "[jit C2]"))
			t.loop_c2 += n;
		else
			t.other += n;
	}
	free(txt);
	return t;
}

/* `viprof maps DIR show E` for every epoch, concatenated. */
static char *maps_show(const char *tmp, const char *dir)
{
	size_t cap = 1 << 20, len = 0;
	char *all = calloc(1, cap);
	ASSERT_NOT_NULL(all);
	for (int e = 0; e < 64; e++) {
		char es[16], outp[600];
		snprintf(es, sizeof(es), "%d", e);
		snprintf(outp, sizeof(outp), "%s/maps.out", tmp);
		char *argv[] = { (char *)VIPROF_BIN, "maps", (char *)dir, "show", es, NULL };
		if (run_argv(argv, outp, NULL, 60))
			break;   /* past the last epoch */
		char *s = tu_read(outp);
		size_t l = strlen(s);
		if (len + l + 1 < cap) {
			memcpy(all + len, s, l + 1);
			len += l;
		}
		free(s);
	}
	return all;
}

static void check(const char *java, const char *tmp, bool c1)
{
	char dir[600];
	snprintf(dir, sizeof(dir), "%s/%s", tmp, c1 ? "c1" : "c2");
	record(java, tmp, dir, c1);
	fprintf(stderr, "%s run:\n", c1 ? "TieredStopAtLevel=1" : "default");
	struct tiers t = text_tiers(tmp, dir);
	long step = t.step_c1 + t.step_c2, loop = t.loop_c1 + t.loop_c2;
	/* Each method is half of a 3 s run at 999 Hz: hundreds of samples in compiled code. */
	ASSERT_GT(step, 100);
	ASSERT_GT(loop, 100);
	if (c1) {
		ASSERT_EQ(t.step_c2 + t.loop_c2, 0);   /* no C2 at all with TieredStopAtLevel=1 */
	} else {
		/* C1 code runs only until C2's is installed: a few samples at most. */
		ASSERT_GE(t.step_c2 * 10, step * 9);
		ASSERT_GE(t.loop_c2 * 10, loop * 9);
	}
	ASSERT_LE(t.other * 20, step + loop);

	char *argv[] = { (char *)VIPROF_BIN, "report", dir, "-F", "folded", NULL };
	char *folded = run_report(tmp, argv);
	ASSERT_CONTAINS(folded, c1 ? "Tiers.step(long)_[1]" : "Tiers.step(long)_[j]");
	ASSERT_CONTAINS(folded, c1 ? "Tiers.loop(long)_[1]" : "Tiers.loop(long)_[j]");
	if (c1)
		ASSERT_TRUE(strstr(folded, "Tiers.step(long)_[j]") == NULL);
	free(folded);

	/* JSON: the frames carry the tier and HotSpot's level. */
	char *js[] = { (char *)VIPROF_BIN, "report", dir, "-F", "json", NULL };
	char *json = run_report(tmp, js);
	ASSERT_CONTAINS(json, c1 ? "\"name\":\"Tiers.step(long)\",\"layer\":\"jit\",\"image\":\"[jit]\",\"tier\":\"C1\",\"compile_level\":1,"
			     : "\"name\":\"Tiers.step(long)\",\"layer\":\"jit\",\"image\":\"[jit]\",\"tier\":\"C2\",\"compile_level\":4,");
	free(json);

	char *maps = maps_show(tmp, dir);
	ASSERT_CONTAINS(maps, c1 ? "Tiers.step(long)  (C1 level 1, loaded" : "Tiers.step(long)  (C2 level 4, loaded");
	ASSERT_CONTAINS(maps, c1 ? "Tiers.loop(long)  (C1 level 1 OSR, loaded" : "Tiers.loop(long)  (C2 level 4 OSR, loaded");
	free(maps);
}

int main(int argc, char **argv)
{
	bool jdk17;
	const char *java = tu_jdk_from_args(argc, argv, &jdk17);
	tu_require_fixtures();
	char *tmp = tu_tmpdir("tier");
	check(java, tmp, true);
	check(java, tmp, false);
	tu_rm_rf(tmp);
	return 0;
}
