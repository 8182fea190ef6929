/* Deep off-CPU stacks (issue 32 item 4), live (root, BPF): `viprof record -g --off-cpu -p`
 * on tests/java/DeepStack.java in its sleep mode (JDK 17 / Temurin 25): the main thread
 * sleeps 20 ms at a time 1000 calls deep. >= 99% of its blocked time must reach
 * DeepStack.main, as its on-CPU samples do (test-deep-stacks): off-CPU stacks are
 * walked as deep as on-CPU ones. Before, they stopped at 127 frames: 0% reached main. */
#include "test-agent-util.h"

#include "postproc/profile.h"
#include "postproc/session.h"
#include "test-profile.h"

static const char *leaf(const struct vp_profile *p, const struct vp_stack *s)
{
	return s->nframes ? p->frames[s->frames[s->nframes - 1]].name : "";
}

int main(int argc, char **argv)
{
	bool jdk17 = false;
	REQUIRE_ROOT();
	tu_require_fixtures();
	const char *java = tu_jdk_from_args(argc, argv, &jdk17);
	char *dir = tu_tmpdir(jdk17 ? "offdeep17" : "offdeep25");
	char sess[400], jout[400], rout[400], pidarg[32], err[512];
	snprintf(sess, sizeof(sess), "%s/s", dir);
	snprintf(jout, sizeof(jout), "%s/java.out", dir);
	snprintf(rout, sizeof(rout), "%s/record.out", dir);

	char *jargv[] = { (char *)java, "-cp", VIPROF_JAVA_CLASSES, "DeepStack", "1000", "120", "sleep", NULL };
	pid_t jpid = run_start(jargv, jout, NULL);
	if (!tu_wait_for(jout, "ready", 60000)) {
		kill(jpid, SIGKILL);
		FAIL("DeepStack did not print ready within 60 s");
	}
	snprintf(pidarg, sizeof(pidarg), "%d", (int)jpid);
	char *rargv[] = { VIPROF_BIN, "record", "-q", "-g", "--off-cpu", "-p", pidarg, "-d", "4", "-o", sess, NULL };
	int rc = run_argv(rargv, rout, rout, 120);
	kill(jpid, SIGKILL);
	waitpid(jpid, NULL, 0);
	if (rc != 0)
		FAIL("viprof record exited with %d: %s", rc, tu_read(rout));

	struct vp_profile *p = vp_profile__new();
	ASSERT_NOT_NULL(p);
	if (vp_session__load(sess, p, &(struct vp_session_opts){ 0 }, err, sizeof(err)))
		FAIL("load %s: %s", sess, err);
	int off = tp_find_event(p, "off-cpu");
	ASSERT_GE(off, 0);
	uint64_t total = 0, rooted = 0;
	uint32_t deepest = 0;
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct vp_stack *s = &p->stacks[i];
		uint64_t w = s->weight[off];
		if (!w || strcmp(s->comm, "main") || strncmp(leaf(p, s), "[blocked:", 9) ||
		    !tp_stack_has(p, s, "DeepStack.leaf", TP_SUBSTR))
			continue;
		total += w;
		if (tp_stack_has(p, s, "DeepStack.main", TP_SUBSTR))
			rooted += w;
		if (s->nframes > deepest)
			deepest = s->nframes;
	}
	fprintf(stderr, "main: blocked in DeepStack.leaf %.1f ms, %.2f%% of it reaches DeepStack.main; deepest stack "
		"%u frames\n", (double)total / 1e6, total ? 100.0 * (double)rooted / (double)total : 0.0, deepest);
	ASSERT_GT(total, 1000000000ull);   /* the thread sleeps most of the 4 s */
	ASSERT_GE(rooted * 100, total * 99);
	vp_profile__free(p);
	tu_rm_rf(dir);
	return 0;
}
