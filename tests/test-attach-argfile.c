/* A JVM with -XX:+DisableAttachMechanism from an @argfile, or from a -XX:Flags= file (not
 * on its command line, not in its environment) is never sent SIGQUIT, by any viprof
 * process: the flag is read from the options the JVM itself recorded in its perf data
 * (hsperfdata: java.rt.vmArgs, java.rt.vmFlags). Before, each viprof process signalled
 * it once (each remembers only its own refusals): two `viprof attach` runs printed two
 * thread dumps into the application's output, and a service's JVM got one more from
 * every other recording or service that attached to all JVMs. The third JVM has the flag
 * on its command line and a dead JVM's /tmp/.java_pid<its pid> (pid reuse): not
 * signalled (each attach said "Connection refused" before). The fourth has no flag and
 * such a dead socket: it is signalled once and attached (refused before), no dump.
 * JDK 17 and Temurin 25 (argv[1]). */
#include "test-agent-util.h"

#include <sys/socket.h>
#include <sys/un.h>

static char dir[512];

/* Starts Workers with one extra option; returns its pid once it said "ready". */
static pid_t start(const char *java, const char *opt, const char *out, const char *err)
{
	char *jargv[] = { (char *)java, (char *)opt, "-cp", VIPROF_JAVA_CLASSES, "Workers", "120", NULL };
	/* Opted out of the agent for whole-VM recordings and services (record_jvm.c
	 * opted_out), which `viprof attach` does not consult: another viprof process on
	 * this machine that attaches to every JVM (-a, serve --jvm-attach all) leaves it
	 * alone, so that the signals counted here are this test's. */
	setenv("VIPROF_NO_AGENT", "1", 1);
	pid_t pid = run_start(jargv, out, err);
	unsetenv("VIPROF_NO_AGENT");
	for (int i = 0; i < 600; i++) {
		char *o = tu_read(out);
		bool ready = strstr(o, "ready") != NULL;
		free(o);
		if (ready)
			return pid;
		usleep(50000);
	}
	kill(pid, SIGKILL);
	FAIL("the JVM with %s did not start (%s)", opt, out);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	ASSERT_NOT_NULL(f);
	fputs(text, f);
	ASSERT_OK(fclose(f));
}

int main(int argc, char **argv)
{
	tu_require_fixtures();
	bool jdk17;
	const char *java = tu_jdk_from_args(argc, argv, &jdk17);
	snprintf(dir, sizeof(dir), "%s", tu_tmpdir(jdk17 ? "attachargfile17" : "attachargfile25"));
	char path[600], opt[4][620], stale[64] = "";
	snprintf(path, sizeof(path), "%s/argfile", dir);
	write_file(path, "-XX:+DisableAttachMechanism\n");
	snprintf(opt[0], sizeof(opt[0]), "@%s", path);
	snprintf(path, sizeof(path), "%s/flagsfile", dir);
	write_file(path, "+DisableAttachMechanism\n");
	snprintf(opt[1], sizeof(opt[1]), "-XX:Flags=%s", path);
	snprintf(opt[2], sizeof(opt[2]), "-XX:+DisableAttachMechanism");
	snprintf(opt[3], sizeof(opt[3]), "-XX:-DisableAttachMechanism");

	for (int j = 0; j < 4; j++) {
		char out[600], err[600], aout[600], maps[600], spid[16];
		snprintf(out, sizeof(out), "%s/out%d", dir, j);
		snprintf(err, sizeof(err), "%s/err%d", dir, j);
		snprintf(aout, sizeof(aout), "%s/attach-out%d", dir, j);
		snprintf(maps, sizeof(maps), "%s/maps%d", dir, j);
		pid_t pid = start(java, opt[j], out, err);
		snprintf(spid, sizeof(spid), "%d", (int)pid);
		if (j >= 2) {   /* a socket nobody listens on, as a killed JVM leaves it */
			struct sockaddr_un sa = { .sun_family = AF_UNIX };
			snprintf(stale, sizeof(stale), "/tmp/.java_pid%d", (int)pid);
			snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", stale);
			/* Whatever an earlier JVM of this pid left there (the busy lane: bind
			 * refused with EPERM) goes first: this socket is the one under test. */
			if (unlink(stale) && errno != ENOENT)
				FAIL("cannot remove %s: %s", stale, strerror(errno));
			int sk = socket(AF_UNIX, SOCK_STREAM, 0);
			ASSERT_TRUE(sk >= 0);
			ASSERT_OK(bind(sk, (struct sockaddr *)&sa, sizeof(sa)));
			close(sk);
		}
		/* Two processes, each with its own memory of refusals. */
		int said = 0;
		for (int run = 0; run < 2; run++) {
			char *aargv[] = { VIPROF_BIN, "attach", spid, "--dir", maps, NULL };
			int rc = run_argv(aargv, aout, aout, 60);
			char *a = tu_read(aout);
			fprintf(stderr, "%s: viprof attach %d: exit %d: %s", opt[j], run + 1, rc, a);
			if (j == 3) {   /* attached; the second over the listener the first started */
				ASSERT_EQ(rc, 0);
				said++;
			} else {
				ASSERT_NE(rc, 0);
				said += strstr(a, "runs with -XX:+DisableAttachMechanism: not signalled") != NULL;
			}
			free(a);
		}
		/* A thread dump is in the JVM's stdout by the time an attach returns (the JVM
		 * prints it before the listener wait ends); Workers prints nothing else. */
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		if (stale[0])
			unlink(stale);
		stale[0] = '\0';
		char *o = tu_read(out);
		int dumps = tu_count_lines(o, "Full thread dump");
		fprintf(stderr, "%s: the JVM's output holds %d thread dumps\n", opt[j], dumps);
		ASSERT_EQ(dumps, 0);
		free(o);
		ASSERT_EQ(said, 2);   /* each says why it did not attach */
	}
	tu_rm_rf(dir);
	printf("ok\n");
	return 0;
}
