/* viprof record and JVMs: in launch mode the agent comes in through JAVA_TOOL_OPTIONS;
 * with -p it is attached to the running JVM, which gets a VP_REC_JVM record (agent
 * loaded, frame pointers as the JVM was started). Either way the code maps land in
 * <session>/jit/<pid>/ and JitSplit's hot methods resolve with their 50/30/20 split
 * (which needs frame pointers: without them a sample in a separately compiled callee
 * loses its caller). --no-jit leaves the JVM alone. The frame-pointer detection is
 * checked on plain processes with the flag in their command line and environment. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "common/session_format.h"
#include "recorder/record_jvm.h"
#include "postproc/profile.h"
#include "postproc/session.h"
#include "test.h"
#include "test-profile.h"
#include "test-run.h"

static char tmp[] = "/tmp/vp-test-record-jvm-XXXXXX";
static char java[PATH_MAX], classes[PATH_MAX + 16], out[8192];

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* Number of files in <sess>/jit/<pid>/, or -1 when the directory is missing. */
static int maps_files(const char *sess, pid_t pid)
{
	char path[PATH_MAX + 64];
	snprintf(path, sizeof(path), "%s/jit/%d", sess, (int)pid);
	DIR *d = opendir(path);
	if (!d)
		return -1;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* Shares of hotA/hotB/hotC among samples of pid whose stack holds one of them. */
static void hot_split(const char *sess, uint32_t pid, double share[3])
{
	struct vp_session_opts o = { .pids = &pid, .npids = 1 };
	struct vp_profile *p = tp_load(sess, &o);
	static const char *names[3] = { "JitSplit.hotA", "JitSplit.hotB", "JitSplit.hotC" };
	double hit[3] = { 0 }, total = 0;
	bool jit_layer = false;
	for (int j = 0; j < 3; j++) {
		tp_sum(p, &(struct tp_filter){ 0 }, names[j], TP_PREFIX, &hit[j]);
		total += hit[j];
	}
	/* Named from the code map: compiled code, not only interpreted frames. */
	for (size_t f = 0; f < p->nframes; f++)
		jit_layer |= p->frames[f].layer == VP_LAYER_JIT && !strncmp(p->frames[f].name, "JitSplit.hot", 12);
	vp_profile__free(p);
	fprintf(stderr, "%s: hotA %.0f hotB %.0f hotC %.0f samples\n", sess, hit[0], hit[1], hit[2]);
	ASSERT_TRUE(jit_layer);
	ASSERT_GT_F(total, 300);
	for (int j = 0; j < 3; j++)
		share[j] = hit[j] / total;
}

static void check_split(const double s[3])
{
	ASSERT_DBL_NEAR(s[0], 0.5, 0.1);
	ASSERT_DBL_NEAR(s[1], 0.3, 0.1);
	ASSERT_DBL_NEAR(s[2], 0.2, 0.1);
}

/* VP_REC_JVM records: how many, and the flags of the one for pid. */
static int jvm_records(const char *sess, pid_t pid, uint32_t *flags)
{
	char path[PATH_MAX + 32], err[512];
	snprintf(path, sizeof(path), "%s/" VP_SESSION_STREAM, sess);
	struct cfile_reader *r = cfile_reader__open(path, VP_KIND_SESSION_STREAM, err, sizeof(err));
	if (!r)
		FAIL("%s", err);
	const struct vp_record *rec;
	int n = 0;
	*flags = 0;
	while (cfile_reader__next(r, &rec) == 1) {
		if (rec->type != VP_REC_JVM)
			continue;
		const struct vp_jvm *j = vp_record_body(rec);
		n++;
		if (j->pid == (uint32_t)pid) {
			*flags = j->flags;
			char want[32];
			snprintf(want, sizeof(want), "jit/%d", (int)pid);
			ASSERT_STREQ(j->maps_dir, want);
		}
	}
	cfile_reader__close(r);
	return n;
}

/* JitSplit for seconds, without the JAVA_TOOL_OPTIONS of whoever runs the test. */
static pid_t start_jvm(const char *seconds)
{
	char *jto = getenv("JAVA_TOOL_OPTIONS") ? strdup(getenv("JAVA_TOOL_OPTIONS")) : NULL;
	unsetenv("JAVA_TOOL_OPTIONS");
	pid_t pid = run_start((char *const[]){ java, "-XX:+PreserveFramePointer", "-cp", classes, "JitSplit",
					      (char *)seconds, NULL }, NULL, RUN_KEEP);
	if (jto)
		setenv("JAVA_TOOL_OPTIONS", jto, 1);
	free(jto);
	return pid;
}

/* A sleeping shell with jto as JAVA_TOOL_OPTIONS (or none) and flag in its argv. */
static bool fp_of(const char *jto, const char *flag)
{
	char env[512];
	snprintf(env, sizeof(env), "JAVA_TOOL_OPTIONS=%s", jto ? jto : "");
	char *envp[] = { jto ? env : "PATH=/usr/bin:/bin", NULL };
	pid_t pid = run_start_env((char *const[]){ "/bin/sh", "-c", "sleep 5", "sh", (char *)flag, NULL }, envp, RUN_KEEP,
				  RUN_KEEP);
	run_wait_state(pid, 0, 10000, "running sh");
	bool fp = record_jvm__frame_pointers(pid);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return fp;
}

static void test_frame_pointer_detection(void)
{
	ASSERT_FALSE(fp_of(NULL, "-Xmx1g"));
	ASSERT_TRUE(fp_of(NULL, "-XX:+PreserveFramePointer"));
	ASSERT_TRUE(fp_of("-Xss1m -XX:+PreserveFramePointer", "-Xmx1g"));
	/* The command line comes after JAVA_TOOL_OPTIONS, so it has the last word. */
	ASSERT_FALSE(fp_of("-XX:+PreserveFramePointer", "-XX:-PreserveFramePointer"));
	ASSERT_TRUE(fp_of("-XX:-PreserveFramePointer", "-XX:+PreserveFramePointer"));
}

int main(void)
{
	REQUIRE_ROOT();
	test_frame_pointer_detection();
	char agent[PATH_MAX], javac[PATH_MAX], cmd[4 * PATH_MAX], sess[PATH_MAX + 16], pidarg[32];
	snprintf(java, sizeof(java), "%s/bin/java", JDK_HOME);
	snprintf(javac, sizeof(javac), "%s/bin/javac", JDK_HOME);
	if (access(java, X_OK) || access(javac, X_OK))
		SKIP("no JDK at %s", JDK_HOME);
	snprintf(agent, sizeof(agent), "%s", VIPROF_BIN);
	*strrchr(agent, '/') = '\0';
	strcat(agent, "/../jvm-agent/libviprof-jvmti.so");
	if (access(agent, R_OK))
		SKIP("the JVM agent is not built (%s)", agent);
	ASSERT_NOT_NULL(mkdtemp(tmp));
	snprintf(classes, sizeof(classes), "%s/classes", tmp);
	snprintf(cmd, sizeof(cmd), "%s --release 17 -nowarn -d %s %s/tests/java/JitSplit.java", javac, classes, SRCDIR);
	ASSERT_OK(run_sh(cmd, 110));

	/* Launch: the Java program's exit status comes through; its maps are in jit/<pid>. */
	snprintf(sess, sizeof(sess), "%s/launch", tmp);
	int rc = run_logged(tmp, (char *const[]){ VIPROF_BIN, "record", "-g", "-q", "-o", sess, "--", java, "-cp", classes,
				      "JitSplit", "4", "3", NULL }, out, sizeof(out), 100);
	if (rc != 3)
		FAIL("viprof record -- java exited %d (want the program's 3): %s", rc, out);
	DIR *d = opendir(strcat(strcpy(cmd, sess), "/jit"));
	ASSERT_NOT_NULL(d);
	struct dirent *e;
	pid_t jpid = 0;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			jpid = atoi(e->d_name);
	closedir(d);
	ASSERT_GT(jpid, 0);
	ASSERT_GT(maps_files(sess, jpid), 0);
	double s[3];
	hot_split(sess, (uint32_t)jpid, s);
	check_split(s);

	/* -p: attach to a JVM that runs without the agent. */
	/* Long enough for all four recordings below at any load (a 10 s JVM had exited
	 * before the last ones on a loaded machine); killed at the end. */
	pid_t jvm = start_jvm("120");
	/* In its hot loop once it has run 1.5 CPU-s (start-up and JIT threads included; the
	 * 2 s of wall time this waited before gave it less on a loaded machine). */
	for (int i = 0; run_cpu_ms(jvm) < 1500; i++) {
		int code;
		if (run_exited(jvm, &code))
			FAIL("JitSplit exited %d before its hot loop", code);
		if (i > 6000)
			FAIL("JitSplit ran less than 1.5 CPU-s in 60 s");
		sleep_ms(10);
	}
	snprintf(sess, sizeof(sess), "%s/pid", tmp);
	snprintf(pidarg, sizeof(pidarg), "%d", (int)jvm);
	rc = run_logged(tmp, (char *const[]){ VIPROF_BIN, "record", "-g", "-q", "-p", pidarg, "-d", "3", "-o", sess, NULL }, out, sizeof(out), 100);
	if (rc) {
		kill(jvm, SIGKILL);
		FAIL("viprof record -p exited %d: %s", rc, out);
	}
	uint32_t flags;
	ASSERT_EQ(jvm_records(sess, jvm, &flags), 1);
	ASSERT_TRUE(flags & VP_JVM_AGENT_LOADED);
	ASSERT_FALSE(flags & VP_JVM_NO_FRAME_POINTERS);
	ASSERT_FALSE(flags & VP_JVM_ATTACH_REFUSED);
	ASSERT_GT(maps_files(sess, jvm), 0);
	hot_split(sess, (uint32_t)jvm, s);
	check_split(s);

	/* -a with --jvm-attach limited to another user, or to another pid: this JVM is left
	 * alone, and -a says how many JVMs got the agent. */
	snprintf(sess, sizeof(sess), "%s/all-other-user", tmp);
	rc = run_logged(tmp, (char *const[]){ VIPROF_BIN, "record", "-a", "--jvm-attach", "user:65534", "-d", "0.5", "-o", sess, NULL }, out, sizeof(out), 100);
	if (rc)
		FAIL("viprof record -a exited %d: %s", rc, out);
	ASSERT_CONTAINS(out, "the JVM agent went into 0 of ");
	ASSERT_EQ(jvm_records(sess, jvm, &flags), 0);
	snprintf(sess, sizeof(sess), "%s/pid-other", tmp);
	rc = run_logged(tmp, (char *const[]){ VIPROF_BIN, "record", "-q", "-p", pidarg, "--jvm-attach", "1", "-d", "0.5", "-o", sess, NULL }, out, sizeof(out), 100);
	if (rc)
		FAIL("viprof record -p --jvm-attach 1 exited %d: %s", rc, out);
	ASSERT_EQ(jvm_records(sess, jvm, &flags), 0);

	/* --no-jit: no attach, no record, no maps. */
	snprintf(sess, sizeof(sess), "%s/nojit", tmp);
	rc = run_logged(tmp, (char *const[]){ VIPROF_BIN, "record", "-q", "--no-jit", "-p", pidarg, "-d", "0.5", "-o", sess, NULL }, out, sizeof(out), 100);
	kill(jvm, SIGKILL);
	waitpid(jvm, NULL, 0);
	ASSERT_EQ(rc, 0);
	ASSERT_EQ(jvm_records(sess, jvm, &flags), 0);
	ASSERT_EQ(maps_files(sess, jvm), -1);

	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	if (run_sh(cmd, 110) != 0)
		fprintf(stderr, "warning: could not remove %s\n", tmp);
	printf("ok\n");
	return 0;
}
