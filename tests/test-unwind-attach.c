/* A production-like JVM (no -XX:+PreserveFramePointer) attached with `viprof record -g -p`:
 * at least 99% of the samples in its worker threads' Java code must reach the worker's
 * entry method (Workers$Worker.run) and java.lang.Thread.run (interpreted: it runs once),
 * and at least 99% of the Java frames must be named. JDK 17, and Temurin 25. */
#include "postproc/profile.h"
#include "postproc/session.h"
#include "test-agent-util.h"

static bool is_java(uint8_t layer)
{
	return layer == VP_LAYER_JIT || layer == VP_LAYER_INLINED || layer == VP_LAYER_INTERPRETED;
}

static void run(const char *java)
{
	char *dir = tu_tmpdir("unwind-attach");
	char sess[600], out[600], err[600], jout[600], jerr[600], e[512];

	snprintf(sess, sizeof(sess), "%s/s", dir);
	snprintf(out, sizeof(out), "%s/out", dir);
	snprintf(err, sizeof(err), "%s/err", dir);
	snprintf(jout, sizeof(jout), "%s/jout", dir);
	snprintf(jerr, sizeof(jerr), "%s/jerr", dir);
	char *jv[] = { (char *)java, "-XX:+PrintCompilation", "-cp", VIPROF_JAVA_CLASSES, "Workers", "120", NULL };
	pid_t jpid = run_start(jv, jout, jerr);
	/* Warm up: the workers' methods get compiled by C2 before the recording, as in a
	 * service that has been running for a while. */
	if (!tu_wait_compiled(jout, "Workers$Worker::handle", 4, 60000))
		FAIL("the workers' handle() was not compiled by C2 within 60 s");
	char pid[16];
	snprintf(pid, sizeof(pid), "%d", (int)jpid);
	char *rec[] = { VIPROF_BIN, "record", "-g", "-q", "-p", pid, "-d", "5", "-o", sess, NULL };
	double cpu0 = run_cpu_ms(jpid);
	int rc = run_argv(rec, out, err, 90);
	double cpu_ms = run_cpu_ms(jpid) - cpu0;
	kill(jpid, SIGKILL);
	waitpid(jpid, NULL, 0);
	if (rc)
		FAIL("viprof record exited %d: %s", rc, tu_read(err));

	struct vp_profile *p = vp_profile__new();
	ASSERT_NOT_NULL(p);
	ASSERT_OK(vp_session__load(sess, p, &(struct vp_session_opts){ 0 }, e, sizeof(e)));
	uint64_t java_samples = 0, reached = 0, jframes = 0, jnamed = 0;
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct vp_stack *s = &p->stacks[i];
		bool worker_run = false, thread_run = false;

		if (!s->comm || strncmp(s->comm, "worker-", 7) || !s->nframes)
			continue;
		if (!is_java(p->frames[s->frames[s->nframes - 1]].layer))
			continue;
		for (uint32_t k = 0; k < s->nframes; k++) {
			const struct vp_frame *f = &p->frames[s->frames[k]];

			if (strstr(f->name, "Workers$Worker.run"))
				worker_run = true;
			if (strstr(f->name, "java.lang.Thread.run"))
				thread_run = true;
			if (is_java(f->layer)) {
				jframes += s->samples[0];
				if (strchr(f->name, '.') && !strstr(f->name, "[unknown]") && strcmp(f->name, "Interpreter"))
					jnamed += s->samples[0];
			}
		}
		java_samples += s->samples[0];
		if (worker_run && thread_run)
			reached += s->samples[0];
	}
	fprintf(stderr, "%s: %llu worker samples in Java code, %llu (%.2f%%) reach Worker.run and Thread.run; "
		"Java frames named %.2f%%\n", java, (unsigned long long)java_samples, (unsigned long long)reached,
		100.0 * (double)reached / (double)(java_samples ? java_samples : 1),
		100.0 * (double)jnamed / (double)(jframes ? jframes : 1));
	/* The percentages need a few hundred samples to mean anything; how many there are
	 * depends on the CPU the machine gave the JVM, so that is what the count is held to:
	 * the workers take most of it, at 999 Hz (ticks of 10 ms make cpu_ms coarse). */
	fprintf(stderr, "the JVM ran %.0f ms of CPU during the recording\n", cpu_ms);
	if (cpu_ms < 500)
		SKIP("the JVM got %.0f ms of CPU in the 5-s recording (a saturated machine): too little to judge", cpu_ms);
	ASSERT_GE_F((double)java_samples, 0.5 * cpu_ms);
	ASSERT_GT(java_samples, 300);
	ASSERT_GE_F(100.0 * (double)reached / (double)java_samples, 99.0);
	ASSERT_GE_F(100.0 * (double)jnamed / (double)jframes, 99.0);
	vp_profile__free(p);
	tu_rm_rf(dir);
}

int main(int argc, char **argv)
{
	bool jdk17;

	tu_require_fixtures();
	REQUIRE_ROOT();
	run(tu_jdk_from_args(argc, argv, &jdk17));
	return 0;
}
