/* What a Java developer reads in `report --wall` and the off-CPU labels (issue 33), live
 * (root, BPF), on a JVM launched by `viprof record -g --off-cpu -- java ...`:
 *   mix   tests/java/WaitMix.java "mix": each of mix-sleeper, -parker, -locker and -waiter
 *         shows, in its first wait row, its own method (WaitMix.doSleep, doPark, doLock,
 *         doWait) and the wait's kind ([sleep], [park: LinkedBlockingQueue], [lock:
 *         monitor], [wait]), not libc's futex tail; the application's threads come before
 *         the JVM's own, so `--top 6` keeps all six of them. The first wait row, not the
 *         first row: on a loaded machine a thread that sleeps 10 ms waits longer than that
 *         on the run queue after each wakeup, and its largest row is then truly the
 *         runnable one (at load 11 the kernel's schedstat gave mix-sleeper 982 ms of
 *         run-queue wait in 2 s of wall, 93 ms on CPU, so about 925 ms asleep).
 *   calm  WaitMix "calm" (one thread computes, one computes and sleeps; no lock is ever
 *         contended): at most 5% of the JVM's blocked time is labelled a lock (GC,
 *         compiler and VM threads waiting for work are "[idle: ...]"), and the napper's
 *         blocked time is a sleep.
 *   attach the same as mix, on a WaitMix JVM already running, recorded with -p.
 *   plain WaitMix "calm" recorded without -g or --off-cpu, as the README's first example:
 *         its text report has none of the old warnings (issue 33 item 6: each thread's remainder
 *         after its last sample is a note, not a problem; no stacks were recorded, so none
 *         is "cut short" for want of -XX:+PreserveFramePointer).
 * mix and calm: the report of a launched JVM carries no "in no recorded mapping" warning
 * (samples taken inside execve hold the launcher's user stack, not the JVM's). */
#include "test-agent-util.h"

#include <signal.h>
#include <sys/wait.h>

#include "postproc/profile.h"
#include "postproc/session.h"
#include "test-profile.h"

static char *report(const char *dir, const char *sess, char *const *args)
{
	char *argv[16] = { VIPROF_BIN, "report", (char *)sess };
	int n = 3;
	char out[400];
	for (; *args && n < 15; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	snprintf(out, sizeof(out), "%s/report.out", dir);
	ASSERT_EQ(run_argv(argv, out, out, 60), 0);   /* warnings on stderr land in it too */
	return tu_read(out);
}

/* The first of thread's rows in the --wall table (the lines after its header: five
 * figures, then a stack) whose kind is a wait, not [runnable] or [running]. */
static char *first_wait_row(char *wall, const char *thread, char *row, size_t len)
{
	char pat[128];
	snprintf(pat, sizeof(pat), " %s ", thread);
	char *h = strstr(wall, pat);
	if (!h)
		FAIL("no thread %s in the --wall table:\n%s", thread, wall);
	for (char *nl = strchr(h, '\n'); nl; nl = strchr(nl + 1, '\n')) {
		const char *line = nl + 1;
		size_t l = strcspn(line, "\n");
		double v[5];
		int at = 0;
		if (sscanf(line, "%lf %lf %lf %lf %lf %n", &v[0], &v[1], &v[2], &v[3], &v[4], &at) != 5 || !at ||
		    !line[at] || (line[at] >= '0' && line[at] <= '9'))
			break;   /* the next thread's header, or the "(N more stacks)" line */
		snprintf(row, len, "%.*s", (int)l, line);
		if (!strstr(row, " [runnable]") && !strstr(row, " [running]"))
			return h;
	}
	FAIL("thread %s has no wait row in the --wall table:\n%s", thread, wall);
}

static void check_mix(const char *dir, const char *sess)
{
	static const char *const want[][3] = {
		{ "mix-sleeper", "WaitMix.doSleep", "[sleep]" },
		{ "mix-parker", "WaitMix.doPark", "[park: LinkedBlockingQueue]" },
		{ "mix-locker", "WaitMix.doLock", "[lock: monitor]" },
		{ "mix-waiter", "WaitMix.doWait", "[wait]" },
	};
	char *wall = report(dir, sess, (char *[]){ "--wall", "--top", "100", NULL });
	const char *jvm_own = strstr(wall, "# the JVM's own threads");
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		char row[1024];
		const char *h = first_wait_row(wall, want[i][0], row, sizeof(row));
		fprintf(stderr, "%s: %s\n", want[i][0], row);
		ASSERT_CONTAINS(row, want[i][1]);
		ASSERT_CONTAINS(row, want[i][2]);
		ASSERT_NOT_NULL(jvm_own);
		ASSERT_TRUE(h < jvm_own);   /* the application's threads first */
	}
	ASSERT_TRUE(strstr(wall, "in no recorded mapping") == NULL);
	free(wall);
	/* Six application threads (main, the holder and the four waiters): --top 6 shows
	 * them all, whatever the JVM's own threads' wall time. */
	wall = report(dir, sess, (char *[]){ "--wall", "--top", "6", NULL });
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		char pat[64];
		snprintf(pat, sizeof(pat), " %s ", want[i][0]);
		ASSERT_CONTAINS(wall, pat);
	}
	free(wall);
}

static const char *leaf(const struct vp_profile *p, const struct vp_stack *s)
{
	return s->nframes ? p->frames[s->frames[s->nframes - 1]].name : "";
}

static void check_calm(const char *dir, const char *sess)
{
	struct vp_session_opts o = { 0 };
	struct vp_profile *p = tp_load(sess, &o);
	int off = tp_find_event(p, "off-cpu");
	ASSERT_GE(off, 0);
	uint64_t blocked = 0, lock = 0, nap = 0, nap_sleep = 0;
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct vp_stack *s = &p->stacks[i];
		uint64_t w = s->weight[off];
		const char *l = leaf(p, s);
		if (!w || !strncmp(l, "[runnable:", 10) || !strncmp(l, "[hypervisor", 11))
			continue;
		blocked += w;
		if (!strncmp(l, "[blocked: lock", 14)) {
			lock += w;
			fprintf(stderr, "lock %.1f ms in %s\n", (double)w / 1e6, s->comm);
		}
		if (!strcmp(s->comm, "calm-napper")) {
			nap += w;
			if (!strcmp(l, "[blocked: sleep]"))
				nap_sleep += w;
		}
	}
	fprintf(stderr, "blocked %.1f ms, of it labelled a lock %.1f ms (%.2f%%); napper %.1f ms, %.1f%% sleep\n",
		(double)blocked / 1e6, (double)lock / 1e6, blocked ? 100.0 * (double)lock / (double)blocked : 0.0,
		(double)nap / 1e6, nap ? 100.0 * (double)nap_sleep / (double)nap : 0.0);
	ASSERT_GT(blocked, 1000000000ull);   /* many threads wait most of the 4 s */
	ASSERT_LE(lock * 100, blocked * 5);
	ASSERT_GT(nap, 100000000ull);
	ASSERT_GE(nap_sleep * 100, nap * 95);
	if (p->warnings && strstr(p->warnings, "in no recorded mapping"))
		FAIL("a launched JVM's report warns of frames in no recorded mapping: %s", p->warnings);
	vp_profile__free(p);
	char *text = report(dir, sess, (char *[]){ NULL });
	ASSERT_TRUE(strstr(text, "in no recorded mapping") == NULL);
	free(text);
}

static void check_plain(const char *dir, const char *sess)
{
	char *text = report(dir, sess, (char *[]){ NULL });
	static const char *const untrue[] = { "after their thread's last sample", "PreserveFramePointer",
					      "in no sample's weight", NULL };
	for (int i = 0; untrue[i]; i++) {
		const char *w = strstr(text, untrue[i]);
		if (w)
			FAIL("a warning untrue of a plain launched JVM: ...%.*s", (int)strcspn(w, "\n"), w);
	}
	ASSERT_CONTAINS(text, "WaitMix.compute");
	free(text);
}

int main(int argc, char **argv)
{
	bool jdk17 = false;
	REQUIRE_ROOT();
	tu_require_fixtures();
	const char *java = tu_jdk_from_args(argc, argv, &jdk17);
	const char *mode = argc > 2 ? argv[2] : "mix";
	char tag[32];
	snprintf(tag, sizeof(tag), "views-wall-%s%s", mode, jdk17 ? "17" : "25");
	char *dir = tu_tmpdir(tag);
	char sess[400], rout[400];
	snprintf(sess, sizeof(sess), "%s/s", dir);
	snprintf(rout, sizeof(rout), "%s/record.out", dir);
	bool plain = !strcmp(mode, "plain");
	if (!strcmp(mode, "attach")) {
		/* The same threads in a JVM that runs before the recording: -p attaches the
		 * agent and walks the threads already waiting when it starts. */
		char jout[400], pid[16];
		snprintf(jout, sizeof(jout), "%s/java.out", dir);
		char *jargv[] = { (char *)java, "-cp", VIPROF_JAVA_CLASSES, "WaitMix", "mix", "12", NULL };
		pid_t jvm = run_start(jargv, jout, jout);
		if (!tu_wait_for(jout, "ready", 30000)) {
			kill(jvm, SIGKILL);
			waitpid(jvm, NULL, 0);
			FAIL("WaitMix did not start: %s", tu_read(jout));
		}
		snprintf(pid, sizeof(pid), "%d", (int)jvm);
		char *att[] = { VIPROF_BIN, "record", "-q", "-g", "--off-cpu", "-p", pid, "-d", "4", "-o", sess, NULL };
		int arc = run_argv(att, rout, rout, 90);
		kill(jvm, SIGKILL);
		waitpid(jvm, NULL, 0);
		if (arc != 0)
			FAIL("viprof record -p exited with %d: %s", arc, tu_read(rout));
		check_mix(dir, sess);
		tu_rm_rf(dir);
		return 0;
	}
	char *rec[] = { VIPROF_BIN, "record", "-q", "-g", "--off-cpu", "-o", sess, "--", (char *)java, "-cp",
			VIPROF_JAVA_CLASSES, "WaitMix", plain ? "calm" : (char *)mode, "4", NULL };
	char *rec_plain[] = { VIPROF_BIN, "record", "-q", "-o", sess, "--", (char *)java, "-cp",
			      VIPROF_JAVA_CLASSES, "WaitMix", "calm", "3", NULL };
	int rc = run_argv(plain ? rec_plain : rec, rout, rout, 90);
	if (rc != 0) {
		char *o = tu_read(rout);
		FAIL("viprof record exited with %d: %s", rc, o);
	}
	if (plain)
		check_plain(dir, sess);
	else if (!strcmp(mode, "calm"))
		check_calm(dir, sess);
	else
		check_mix(dir, sess);
	tu_rm_rf(dir);
	return 0;
}
