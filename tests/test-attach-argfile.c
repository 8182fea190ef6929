/* A JVM with -XX:+DisableAttachMechanism from an @argfile (not on its command line, not
 * in its environment) is never sent SIGQUIT, by any viprof process: the flag is read from
 * the options the JVM itself recorded in its perf data (hsperfdata, java.rt.vmArgs).
 * Before, each viprof process signalled it once (each remembers only its own refusals):
 * two `viprof attach` runs printed two thread dumps into the application's output, and a
 * service's JVM got one more from every `viprof record -a` run beside the service.
 * JDK 17 and Temurin 25 (argv[1]). */
#include "test-agent-util.h"

int main(int argc, char **argv)
{
	tu_require_fixtures();
	bool jdk17;
	const char *java = tu_jdk_from_args(argc, argv, &jdk17);
	char *dir = tu_tmpdir(jdk17 ? "attachargfile17" : "attachargfile25");
	char out[600], err[600], aout[600], maps[600], flags[600], afarg[610], spid[16];
	snprintf(out, sizeof(out), "%s/out", dir);
	snprintf(err, sizeof(err), "%s/err", dir);
	snprintf(aout, sizeof(aout), "%s/attach-out", dir);
	snprintf(maps, sizeof(maps), "%s/maps", dir);
	snprintf(flags, sizeof(flags), "%s/flags", dir);
	FILE *f = fopen(flags, "w");
	ASSERT_NOT_NULL(f);
	fputs("-XX:+DisableAttachMechanism\n", f);
	ASSERT_OK(fclose(f));
	snprintf(afarg, sizeof(afarg), "@%s", flags);
	char *jargv[] = { (char *)java, afarg, "-cp", VIPROF_JAVA_CLASSES, "Workers", "120", NULL };
	/* Opted out of the agent for whole-VM recordings and services (record_jvm.c
	 * opted_out), which `viprof attach` does not consult: another viprof process on this
	 * machine that attaches to every JVM (-a, serve --jvm-attach all) leaves it alone,
	 * so that the signals counted here are this test's. */
	setenv("VIPROF_NO_AGENT", "1", 1);
	pid_t pid = tu_spawn(jargv, out, err);
	unsetenv("VIPROF_NO_AGENT");
	bool ready = false;
	for (int i = 0; i < 600 && !ready; i++) {
		char *o = tu_read(out);
		ready = strstr(o, "ready") != NULL;
		free(o);
		if (!ready)
			usleep(50000);
	}
	if (!ready) {
		kill(pid, SIGKILL);
		FAIL("the JVM did not start (%s)", out);
	}
	snprintf(spid, sizeof(spid), "%d", (int)pid);
	/* Two processes, each with its own memory of refusals. */
	int said = 0;
	for (int run = 0; run < 2; run++) {
		char *aargv[] = { VIPROF_BIN, "attach", spid, "--dir", maps, NULL };
		int rc = tu_run(aargv, aout, aout, 60);
		char *a = tu_read(aout);
		fprintf(stderr, "viprof attach %d: exit %d: %s", run + 1, rc, a);
		ASSERT_NE(rc, 0);
		said += strstr(a, "runs with -XX:+DisableAttachMechanism: not signalled") != NULL;
		free(a);
	}
	/* Workers prints nothing more until it ends: a thread dump would be in its stdout by
	 * the time the attach returned (the JVM prints it before the listener wait ends). */
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	char *o = tu_read(out);
	int dumps = tu_count_lines(o, "Full thread dump");
	fprintf(stderr, "the JVM's output holds %d thread dumps\n", dumps);
	ASSERT_EQ(dumps, 0);
	free(o);
	ASSERT_EQ(said, 2);   /* each says why it did not attach */
	tu_rm_rf(dir);
	printf("ok\n");
	return 0;
}
