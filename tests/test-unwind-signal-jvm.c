/* Java stacks under another profiler's signal handler (issue 32 item 5), live (root,
 * BPF): tests/java/DeepStack.java (recursion 10 deep, compiled, spinning in leaf) on JDK
 * 17 / Temurin 25 with tests/fixtures/unwind/sigprof_preload.c preloaded: a SIGPROF
 * handler of its own (as async-profiler's) computing on top of the Java code it
 * interrupts. Recorded with record -g -p: of the samples inside the handler on the
 * threads that run DeepStack.leaf, >= 99% reach DeepStack.main through the signal frame
 * (libc's __restore_rt) and the interrupted compiled frames; before, they stopped at the
 * restorer. */
#include "test-agent-util.h"

#include <signal.h>

#include "postproc/profile.h"
#include "postproc/session.h"
#include "test-profile.h"

#define MAX_TIDS 64

int main(int argc, char **argv)
{
	bool jdk17 = false;
	REQUIRE_ROOT();
	tu_require_fixtures();
	const char *java = tu_jdk_from_args(argc, argv, &jdk17);
	char *dir = tu_tmpdir(jdk17 ? "sigjvm17" : "sigjvm25");
	char sess[400], jout[400], rout[400], pidarg[32], err[512];
	snprintf(sess, sizeof(sess), "%s/s", dir);
	snprintf(jout, sizeof(jout), "%s/java.out", dir);
	snprintf(rout, sizeof(rout), "%s/record.out", dir);

	char *jargv[] = { (char *)java, "-cp", VIPROF_JAVA_CLASSES, "DeepStack", "10", "60", NULL };
	setenv("LD_PRELOAD", SIGPROF_PRELOAD, 1);
	pid_t jpid = run_start(jargv, jout, NULL);
	unsetenv("LD_PRELOAD");
	if (!tu_wait_for(jout, "ready", 60000)) {
		kill(jpid, SIGKILL);
		FAIL("DeepStack did not print ready within 60 s");
	}
	snprintf(pidarg, sizeof(pidarg), "%d", (int)jpid);
	char *rargv[] = { VIPROF_BIN, "record", "-q", "-g", "-p", pidarg, "-d", "5", "-o", sess, NULL };
	int rc = run_argv(rargv, rout, rout, 120);
	kill(jpid, SIGKILL);
	waitpid(jpid, NULL, 0);
	if (rc != 0)
		FAIL("viprof record exited with %d: %s", rc, tu_read(rout));

	/* From 1 s on: before, the recorder may still be loading the process's tables. */
	struct vp_profile *p = vp_profile__new();
	ASSERT_NOT_NULL(p);
	if (vp_session__load(sess, p, &(struct vp_session_opts){ .t_from = 1.0 }, err, sizeof(err)))
		FAIL("load %s: %s", sess, err);
	uint32_t tids[MAX_TIDS];
	int ntids = 0;
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct vp_stack *s = &p->stacks[i];
		bool known = false;
		if (!s->samples[0] || !tp_stack_has(p, s, "DeepStack.leaf(", TP_SUBSTR))
			continue;
		for (int k = 0; k < ntids; k++)
			known |= tids[k] == s->tid;
		if (!known && ntids < MAX_TIDS)
			tids[ntids++] = s->tid;
	}
	uint64_t in_handler = 0, whole = 0;
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct vp_stack *s = &p->stacks[i];
		bool mine = false;
		for (int k = 0; k < ntids; k++)
			mine |= tids[k] == s->tid;
		if (!mine || !s->samples[0] || !tp_stack_has(p, s, "handler_work", TP_EXACT))
			continue;
		in_handler += s->samples[0];
		if (tp_stack_has(p, s, "DeepStack.main(", TP_SUBSTR))
			whole += s->samples[0];
	}
	fprintf(stderr, "%d thread(s) in DeepStack.leaf; %llu samples in the handler there, %.2f%% reach DeepStack.main\n",
		ntids, (unsigned long long)in_handler, in_handler ? 100.0 * (double)whole / (double)in_handler : 0.0);
	ASSERT_GT(in_handler, 100);
	ASSERT_GE(whole * 100, in_handler * 99);
	vp_profile__free(p);
	tu_rm_rf(dir);
	return 0;
}
