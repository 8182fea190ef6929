/* The service and the JVMs it meets (issue 22 item 4): serve --continuous for 5 intervals
 * of 4 s with four JVMs running before it starts:
 *   other:    Workers as nobody (not the service's user): its worker threads' samples
 *             >= 95% named in every interval after the first (which waited for the
 *             noperf JVM) but the last (cut short by the stop);
 *   disabled: Workers with -XX:+DisableAttachMechanism on its command line: never
 *             signalled, so no thread dump in its output;
 *   argfile:  the same flag from an @argfile, not on the command line: read from the
 *             options the JVM recorded in its perf data (hsperfdata), never signalled;
 *   noperf:   the same @argfile with -XX:-UsePerfData, which the service cannot see:
 *             signalled once, at the first interval, and never again (one thread dump
 *             at most).
 * From the second interval on, the other user's agent takes each session over its
 * channel to the recorder (VP_JVM_CHANNEL), not by another attach. No JVM's stdout or
 * stderr gets a line from viprof. JDK 17 and Temurin 25 (argv[1]). */
#include "test-agent-util.h"

#include <pwd.h>
#include "test-profile.h"

#include <signal.h>

#include "common/chunkfile.h"
#include "common/session_format.h"
#include "postproc/profile.h"
#include "postproc/session.h"

static char dir[256];
static pid_t jvms[4];

static pid_t start(const char *java, const char *name, char *const extra[], int nextra, bool nobody)
{
	char out[400], err[400];
	snprintf(out, sizeof(out), "%s/%s.out", dir, name);
	snprintf(err, sizeof(err), "%s/%s.err", dir, name);
	char *argv[16];
	int n = 0;
	if (nobody) {
		argv[n++] = "/usr/bin/setpriv";
		argv[n++] = "--reuid=nobody";
		argv[n++] = "--regid=nogroup";
		argv[n++] = "--clear-groups";
	}
	argv[n++] = (char *)java;
	for (int i = 0; i < nextra; i++)
		argv[n++] = extra[i];
	argv[n++] = "-cp";
	argv[n++] = VIPROF_JAVA_CLASSES;
	argv[n++] = "Workers";
	argv[n++] = "300";
	argv[n] = NULL;
	pid_t p = run_start(argv, out, err);
	for (int i = 0; i < 300; i++) {
		char *o = tu_read(out);
		bool ready = strstr(o, "ready") != NULL;
		free(o);
		if (ready)
			return p;
		usleep(100000);
	}
	FAIL("JVM %s did not start", name);
}

/* The VP_JVM_* flags of pid's VP_REC_JVM record in a session (0 without one). */
static uint32_t jvm_flags(const char *sess, pid_t pid)
{
	char path[700], err[256];
	const struct vp_record *r;
	uint32_t flags = 0;
	snprintf(path, sizeof(path), "%s/%s", sess, VP_SESSION_STREAM);
	struct cfile_reader *rd = cfile_reader__open(path, VP_KIND_SESSION_STREAM, err, sizeof(err));
	ASSERT_NOT_NULL(rd);
	while (cfile_reader__next(rd, &r) > 0)
		if (r->type == VP_REC_JVM && vp_record_body_len(r) >= sizeof(struct vp_jvm) &&
		    ((const struct vp_jvm *)vp_record_body(r))->pid == (uint32_t)pid)
			flags = ((const struct vp_jvm *)vp_record_body(r))->flags;
	cfile_reader__close(rd);
	return flags;
}

static void cleanup(void)
{
	for (int i = 0; i < 4; i++)
		if (jvms[i] > 0) {
			kill(jvms[i], SIGKILL);
			waitpid(jvms[i], NULL, 0);
			/* A killed JVM leaves its attach socket: a later JVM of this pid (another
			 * user's, maybe) would find it in its way. */
			char sock[64];
			snprintf(sock, sizeof(sock), "/tmp/.java_pid%d", (int)jvms[i]);
			unlink(sock);
			jvms[i] = 0;
		}
}

int main(int argc, char **argv)
{
	tu_require_fixtures();
	REQUIRE_ROOT();
	bool jdk17;
	const char *java = tu_jdk_from_args(argc, argv, &jdk17);
	if (access("/usr/bin/setpriv", X_OK))
		SKIP("no /usr/bin/setpriv (util-linux) to run a JVM as another user");
	snprintf(dir, sizeof(dir), "%s", tu_tmpdir(jdk17 ? "servejvms17" : "servejvms25"));
	ASSERT_OK(chmod(dir, 0755));
	atexit(cleanup);
	char argfile[400], afarg[410], npfile[400], nparg[410];
	snprintf(argfile, sizeof(argfile), "%s/flags", dir);
	FILE *f = fopen(argfile, "w");
	ASSERT_NOT_NULL(f);
	fputs("-XX:+DisableAttachMechanism\n", f);
	ASSERT_OK(fclose(f));
	snprintf(afarg, sizeof(afarg), "@%s", argfile);
	snprintf(npfile, sizeof(npfile), "%s/noperf-flags", dir);
	f = fopen(npfile, "w");
	ASSERT_NOT_NULL(f);
	fputs("-XX:+DisableAttachMechanism\n-XX:-UsePerfData\n", f);
	ASSERT_OK(fclose(f));
	snprintf(nparg, sizeof(nparg), "@%s", npfile);
	char *dis[] = { "-XX:+DisableAttachMechanism" }, *af[] = { afarg }, *np[] = { nparg };
	jvms[0] = start(java, "other", NULL, 0, true);
	struct passwd *nob = getpwnam("nobody");
	ASSERT_NOT_NULL(nob);
	tu_drop_stale_attach_socket(jvms[0], nob->pw_uid);   /* as in a CI run at 99a610f */
	jvms[1] = start(java, "disabled", dis, 1, false);
	jvms[2] = start(java, "argfile", af, 1, false);
	jvms[3] = start(java, "noperf", np, 1, false);

	char cdir[400], sout[400], sel[64];
	snprintf(cdir, sizeof(cdir), "%s/c", dir);
	snprintf(sout, sizeof(sout), "%s/serve.log", dir);
	snprintf(sel, sizeof(sel), "%d,%d,%d,%d", (int)jvms[0], (int)jvms[1], (int)jvms[2], (int)jvms[3]);
	char *sargv[] = { VIPROF_BIN, "serve", "--continuous", cdir, "--interval", "4", "--cpu-budget", "0", "-F", "499",
			  "--jvm-attach", sel, NULL };
	pid_t serve = run_start(sargv, sout, sout);
	tu_wait_intervals(sout, 5, 240);
	ASSERT_OK(kill(serve, SIGINT));
	ASSERT_EQ(run_wait(serve, 60), 0);
	char *log = tu_read(sout);
	fprintf(stderr, "%s", log);
	/* The refusals are said once each, in the service's log; the argfile JVM's flag is
	 * known without a signal. */
	ASSERT_EQ(tu_count_lines(log, "DisableAttachMechanism"), 3);
	char line[128];
	snprintf(line, sizeof(line), "JVM %d runs with -XX:+DisableAttachMechanism: not signalled", (int)jvms[2]);
	ASSERT_CONTAINS(log, line);
	free(log);

	char *names[64];
	int n = tu_list_intervals(cdir, names, 64);
	ASSERT_GE(n, 5);
	/* The first interval holds the 5 s wait for the noperf JVM's listener (before
	 * sampling started): it has too few samples to judge. */
	for (int i = 1; i < n - 1; i++) {
		char sess[600];
		uint32_t pid = (uint32_t)jvms[0];
		struct vp_session_opts o = { .pids = &pid, .npids = 1 };
		snprintf(sess, sizeof(sess), "%s/%s", cdir, names[i]);
		struct vp_profile *p = tp_load(sess, &o);
		double named, workers = tp_sum_if(p, &(struct tp_filter){ .comm_prefix = "worker-" }, tp_has_java, NULL, &named);
		vp_profile__free(p);
		/* After the first interval, its agent takes each session over its channel to
		 * the recorder: no attach. */
		bool chan = jvm_flags(sess, jvms[0]) & VP_JVM_CHANNEL;
		fprintf(stderr, "%s: the other user's JVM: %.0f worker samples, %.1f%% named, %s\n", names[i], workers,
			workers ? 100 * named / workers : 0, chan ? "over its channel" : "attached");
		ASSERT_TRUE(chan);
		ASSERT_GT_F(workers, 100.0);
		ASSERT_GE((int64_t)(1000 * named / workers), 950);
		free(names[i]);
	}
	/* What the JVMs printed: Workers' one line each, and at most one thread dump from
	 * the JVM whose flag the service could not see. */
	static const char *const which[] = { "other", "disabled", "argfile", "noperf" };
	for (int i = 0; i < 4; i++) {
		char path[400];
		snprintf(path, sizeof(path), "%s/%s.out", dir, which[i]);
		char *o = tu_read(path);
		snprintf(path, sizeof(path), "%s/%s.err", dir, which[i]);
		char *e = tu_read(path);
		int dumps = tu_count_lines(o, "Full thread dump");
		fprintf(stderr, "%s: %d thread dumps; stderr [%s]\n", which[i], dumps, e);
		ASSERT_LE(dumps, i == 3 ? 1 : 0);
		ASSERT_NULL(strstr(o, "viprof"));
		ASSERT_NULL(strstr(e, "viprof"));
		free(o);
		free(e);
	}
	cleanup();
	tu_rm_rf(dir);
	printf("ok\n");
	return 0;
}
