/* Deep stacks (issue 22 item 3): the walker goes past perf's 127 frames and names every
 * frame on the way. Recorded with record -g -p after the workload says "ready":
 *   17 / 25   DeepStack (tests/java) on JDK 17 or Temurin 25: compiled recursion 1000
 *             deep, then with -Xint recursion 300 deep (every frame interpreted);
 *   native    deeprec (tests/fixtures/unwind): C recursion 1000 deep without frame
 *             pointers, walked with the unwind tables.
 * Of the samples in the leaf, >= 99% must be whole: reach main with every recurse frame
 * between (DEPTH + 1 in Java; DEPTH in C, whose last level jumps to the leaf), and have no unnamed frame ([unknown], or an interpreted frame
 * without its method). Before the walk went past 127 frames (and named more than 48
 * interpreted ones), 43-44% of them reached main. */
#include "test-agent-util.h"

#include <signal.h>

#include "postproc/profile.h"
#include "postproc/session.h"

/* Records pid for 6 s once it printed "ready" into out, and judges the samples from
 * 2 s on (before, the recorder may still be building the process's unwind tables and
 * walking by frame pointers, which is not what this test is about). */
static void judge(const char *what, char *const argv[], const char *leaf, const char *root, const char *rec,
		  int nrec, bool exact_names)
{
	char *dir = tu_tmpdir("deep");
	char out[400], errf[400], sess[400], log[400], spid[16], err[512];

	snprintf(out, sizeof(out), "%s/out", dir);
	snprintf(errf, sizeof(errf), "%s/err", dir);
	snprintf(sess, sizeof(sess), "%s/s", dir);
	snprintf(log, sizeof(log), "%s/record.log", dir);
	pid_t child = run_start(argv, out, errf);
	if (!tu_wait_for(out, "ready", 30000)) {
		kill(child, SIGKILL);
		FAIL("%s: no \"ready\" in 30 s: %s", what, tu_read(errf));
	}
	snprintf(spid, sizeof(spid), "%d", (int)child);
	char *rargv[] = { VIPROF_BIN, "record", "-g", "-p", spid, "-d", "6", "-o", sess, NULL };
	int rc = run_argv(rargv, log, log, 120);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	if (rc)
		FAIL("%s: viprof record exited %d: %s", what, rc, tu_read(log));

	uint32_t pid = (uint32_t)child;
	struct vp_session_opts o = { .pids = &pid, .npids = 1, .t_from = 2.0 };
	struct vp_profile *p = vp_profile__new();
	ASSERT_NOT_NULL(p);
	if (vp_session__load(sess, p, &o, err, sizeof(err)))
		FAIL("load %s: %s", sess, err);
	uint64_t in_leaf = 0, whole = 0, named = 0, shown = 0;
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct vp_stack *s = &p->stacks[i];
		bool has_leaf = false, has_root = false, unnamed = false;
		int recs = 0;

		for (uint32_t f = 0; f < s->nframes; f++) {
			const struct vp_frame *fr = &p->frames[s->frames[f]];

			if (fr->layer == VP_LAYER_KERNEL)
				continue;
			has_leaf |= exact_names ? !strcmp(fr->name, leaf) : strstr(fr->name, leaf) != NULL;
			has_root |= exact_names ? !strcmp(fr->name, root) : strstr(fr->name, root) != NULL;
			recs += exact_names ? !strcmp(fr->name, rec) : strstr(fr->name, rec) != NULL;
			unnamed |= !strncmp(fr->name, "[unknown", 8) || !strcmp(fr->name, "[interpreted]");
		}
		if (!has_leaf || !s->samples[0])
			continue;
		in_leaf += s->samples[0];
		if (has_root && recs == nrec) {
			whole += s->samples[0];
		} else if (shown++ < 3) {
			fprintf(stderr, "%s: %llu samples not whole: %u frames, %d recurse, main %s, root frame %s\n", what,
				(unsigned long long)s->samples[0], s->nframes, recs, has_root ? "yes" : "no",
				s->nframes ? p->frames[s->frames[0]].name : "-");
		}
		named += unnamed ? 0 : s->samples[0];
	}
	vp_profile__free(p);
	fprintf(stderr, "%s: %llu samples in the leaf, %.2f%% whole (main and %d recurse frames), %.2f%% all named\n",
		what, (unsigned long long)in_leaf, in_leaf ? 100.0 * (double)whole / (double)in_leaf : 0.0, nrec,
		in_leaf ? 100.0 * (double)named / (double)in_leaf : 0.0);
	ASSERT_GT(in_leaf, 200);
	ASSERT_GE_F(100.0 * (double)whole / (double)in_leaf, 99.0);
	ASSERT_GE_F(100.0 * (double)named / (double)in_leaf, 99.0);
	tu_rm_rf(dir);
}

int main(int argc, char **argv)
{
	REQUIRE_ROOT();
	if (argc > 1 && !strcmp(argv[1], "native")) {
		char *nargv[] = { DEEPREC, "1000", "60", NULL };
		/* recurse(0) calls leaf as a tail call (a jump): 1000 recurse frames. */
		judge("deeprec 1000", nargv, "leaf", "main", "recurse", 1000, true);
		printf("ok\n");
		return 0;
	}
	bool jdk17;
	tu_require_fixtures();
	const char *java = tu_jdk_from_args(argc, argv, &jdk17);
	char *cargv[] = { (char *)java, "-cp", VIPROF_JAVA_CLASSES, "DeepStack", "1000", "60", NULL };
	judge(jdk17 ? "JDK 17, compiled, 1000 deep" : "JDK 25, compiled, 1000 deep", cargv, "DeepStack.leaf(",
	      "DeepStack.main(", "DeepStack.recurse(", 1001, false);
	char *iargv[] = { (char *)java, "-Xint", "-cp", VIPROF_JAVA_CLASSES, "DeepStack", "300", "60", NULL };
	judge(jdk17 ? "JDK 17, -Xint, 300 deep" : "JDK 25, -Xint, 300 deep", iargv, "DeepStack.leaf(", "DeepStack.main(",
	      "DeepStack.recurse(", 301, false);
	printf("ok\n");
	return 0;
}
