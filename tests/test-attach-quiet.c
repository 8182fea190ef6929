/* JDK 21+ prints "WARNING: A JVM TI agent has been loaded dynamically" (three lines) into
 * the application's stderr when an agent is attached (JEP 451). The viprof agent keeps
 * them out (jvm-agent/vmflags.c): a LateAttach JVM attached twice with `viprof attach`
 * (the second a new session) runs to its own exit code with nothing from the JVM or the
 * agent on its stderr, its code maps written. JDK 17 (no such warning) and Temurin 25. */
#include "test-agent-util.h"

#include "maps/codemap.h"

static bool map_has_methods(void *piddir)
{
	char why[512];
	struct vp_codemap *m = vp_codemap__load_dir(piddir, why, sizeof(why));
	bool yes = m && m->nmethods > 0;

	vp_codemap__free(m);
	return yes;
}

int main(int argc, char **argv)
{
	tu_require_fixtures();
	bool jdk17;
	const char *java = tu_jdk_from_args(argc, argv, &jdk17);
	char *dir = tu_tmpdir("attachquiet");
	char out[600], err[600], aout[600], maps[600], spid[16];
	snprintf(out, sizeof(out), "%s/out", dir);
	snprintf(err, sizeof(err), "%s/err", dir);
	snprintf(aout, sizeof(aout), "%s/attach-out", dir);
	snprintf(maps, sizeof(maps), "%s/maps", dir);
	char stop[600];
	snprintf(stop, sizeof(stop), "%s/stop", dir);
	char *jargv[] = { (char *)java, "-cp", VIPROF_JAVA_CLASSES, "LateAttach", "60", "7", stop, NULL };
	pid_t pid = run_start(jargv, out, err);
	if (!tu_wait_for(out, "ready", 30000))
		FAIL("LateAttach did not say ready within 30 s");
	snprintf(spid, sizeof(spid), "%d", (int)pid);
	char *aargv[] = { VIPROF_BIN, "attach", spid, "--dir", maps, NULL };
	ASSERT_EQ(run_argv(aargv, aout, aout, 30), 0);
	/* The first session is under way (its code map holds methods) before the second. */
	char piddir[700], why[512];
	snprintf(piddir, sizeof(piddir), "%s/%d", maps, (int)pid);
	tu_wait_until(map_has_methods, piddir, 30, "the first attach's code map to hold methods");
	ASSERT_EQ(run_argv(aargv, aout, aout, 30), 0);
	tu_touch(stop);
	ASSERT_EQ(run_wait(pid, 60), 7);
	char *e = tu_read(err);
	fprintf(stderr, "JVM stderr after two attaches: \"%s\"\n", e);
	ASSERT_TRUE(strstr(e, "loaded dynamically") == NULL);
	ASSERT_STREQ(e, "");
	free(e);
	struct vp_codemap *m = vp_codemap__load_dir(piddir, why, sizeof(why));
	if (!m)
		FAIL("%s", why);
	ASSERT_GT(m->nmethods, 0);
	vp_codemap__free(m);
	tu_rm_rf(dir);
	printf("ok\n");
	return 0;
}
