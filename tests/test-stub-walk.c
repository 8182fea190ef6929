/* Stacks through HotSpot stubs that have no frame of their own (issue 22 item 2): the
 * Stubs fixture spends most of its worker's time in itable and vtable stubs and in the
 * arraycopy StubRoutines, and the rest in tiny compiled methods, often in their prologue
 * or epilogue. Recorded with record -g -p, >= 95% of the samples in stubs and >= 98% of
 * all the worker's samples must reach Thread.run, and at most 2% may have an [unknown]
 * caller. JDK 17 and Temurin 25 (argv[1]). Before the walker stepped over frameless stubs
 * by their return address, 0.2% of the stub samples reached Thread.run. */
#include "test-agent-util.h"
#include "test-profile.h"

#include <signal.h>

#include "postproc/profile.h"
#include "postproc/session.h"

int main(int argc, char **argv)
{
	tu_require_fixtures();
	REQUIRE_ROOT();
	bool jdk17;
	const char *java = tu_jdk_from_args(argc, argv, &jdk17);
	char *dir = tu_tmpdir(jdk17 ? "stubs17" : "stubs25");
	char jout[400], jerr[400], sess[400], out[400], spid[16], err[512];
	snprintf(jout, sizeof(jout), "%s/jvm.out", dir);
	snprintf(jerr, sizeof(jerr), "%s/jvm.err", dir);
	snprintf(sess, sizeof(sess), "%s/s", dir);
	snprintf(out, sizeof(out), "%s/record.log", dir);
	char *jargv[] = { (char *)java, "-XX:+PrintCompilation", "-cp", VIPROF_JAVA_CLASSES, "Stubs", "60", NULL };
	pid_t jvm = run_start(jargv, jout, jerr);
	if (!tu_wait_for(jout, "ready", 30000))
		FAIL("Stubs did not start within 30 s");
	/* The call sites went megamorphic and were compiled: C2 (tier 4) compiled the three
	 * loops after their profiles saw every receiver type. */
	static const char *const loops[] = { "Stubs::interfaces", "Stubs::virtuals", "Stubs::copies" };
	for (int i = 0; i < 3; i++)
		if (!tu_wait_compiled(jout, loops[i], 4, 60000))
			FAIL("%s was not compiled by C2 within 60 s (-XX:+PrintCompilation in %s)", loops[i], jout);
	snprintf(spid, sizeof(spid), "%d", (int)jvm);
	char *rargv[] = { VIPROF_BIN, "record", "-g", "-p", spid, "-d", "5", "-o", sess, NULL };
	ASSERT_EQ(run_argv(rargv, out, out, 120), 0);
	kill(jvm, SIGKILL);
	waitpid(jvm, NULL, 0);

	uint32_t pid = (uint32_t)jvm;
	/* From 2 s on: until the recorder has built libjvm's and the JVM's unwind tables
	 * (longer on a loaded machine) the walk follows frame pointers, which is not what
	 * this test is about. */
	struct vp_session_opts o = { .pids = &pid, .npids = 1, .t_from = 2.0 };
	struct vp_profile *p = vp_profile__new();
	ASSERT_NOT_NULL(p);
	if (vp_session__load(sess, p, &o, err, sizeof(err)))
		FAIL("load %s: %s", sess, err);
	const struct tp_filter w = { .comm = "stub-worker" };
	double run, unknown, all = tp_sum(p, &w, "java.lang.Thread.run()", TP_EXACT, &run);
	double stub = 0, stub_run = 0;
	tp_sum(p, &w, "[unknown]", TP_EXACT, &unknown);
	/* Of them, the samples in a stub (the leaf below the kernel's frames). */
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct vp_stack *s = &p->stacks[i];
		const struct vp_frame *leaf = NULL;
		double n = (double)s->samples[0];
		if (!tp_stack_passes(s, &w))
			continue;
		for (uint32_t f = 0; f < s->nframes; f++)
			if (p->frames[s->frames[f]].layer != VP_LAYER_KERNEL)
				leaf = &p->frames[s->frames[f]];
		if (leaf && leaf->layer == VP_LAYER_JVM && (strstr(leaf->name, "stub") || strstr(leaf->name, "arraycopy"))) {
			stub += n;
			stub_run += tp_stack_has(p, s, "java.lang.Thread.run()", TP_EXACT) ? n : 0;
		}
	}
	vp_profile__free(p);
	fprintf(stderr, "stub-worker: %.0f samples, %.1f%% reach Thread.run, %.1f%% with an [unknown] frame; "
		"%.0f in stubs, %.1f%% of them reach Thread.run\n", all, all ? 100 * run / all : 0,
		all ? 100 * unknown / all : 0, stub, stub ? 100 * stub_run / stub : 0);
	/* Enough samples for the shares below to mean a walk, not luck: 3 s at 999 Hz give
	 * about 3000 on a quiet VM, 980 beside the busy lane's two CPU hogs. */
	ASSERT_GT_F(all, 300.0);
	ASSERT_GT_F(stub, 0.2 * all);   /* the fixture does what it is for */
	/* In permille, so that a failure prints the shares. */
	ASSERT_GE((int64_t)(1000 * stub_run / stub), 950);
	ASSERT_GE((int64_t)(1000 * run / all), 980);
	ASSERT_LE((int64_t)(1000 * unknown / all), 20);
	tu_rm_rf(dir);
	printf("ok\n");
	return 0;
}
