/* Issue 25: `record -e alloc` and `-e lock` on running JVMs (-p PID): the recorder hands
 * the agent alloc= and locks= with the attach, and again with each session on a JVM that
 * has the agent already.
 *   - tests/java/AllocSplit (75% of its bytes long[] from AllocSplit.a, 25% double[] from
 *     AllocSplit.b), started without viprof: `-p PID -e alloc` has both classes as leaves
 *     under their methods within 3 pp of the split; a second session on that JVM without
 *     -e alloc has no alloc samples (the agent stopped sampling), a third with it has
 *     them again.
 *   - tests/java/LockSplit: `-p PID -e lock` has the contended monitor (LockSplit$Monitor
 *     under LockSplit.onMonitor) and, since issue 32, the java.util.concurrent parks too
 *     (ReentrantLock$NonfairSync under LockSplit.onLock; test-lock-jvm checks their times).
 *   - `-e alloc -p PID --jvm-attach none` is refused, naming --jvm-attach none.
 * Argument: 17 or 25 (the JDK). Needs root (the recorder attaches, -p, BPF). */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test-agent-util.h"
#include "test-run.h"

/* Starts `java -cp classes CLASS SECONDS` and waits for its "ready" line. */
static pid_t start_fixture(const char *java, const char *tmp, const char *cls, const char *secs)
{
	char out[600];
	snprintf(out, sizeof(out), "%s/%s.out", tmp, cls);
	char *argv[] = { (char *)java, "-cp", (char *)VIPROF_JAVA_CLASSES, (char *)cls, (char *)secs, NULL };
	pid_t pid = run_start(argv, out, NULL);
	for (int i = 0; i < 1500; i++) {   /* 30 s: a JVM starting on a loaded machine */
		char *o = tu_read(out);
		bool ready = strstr(o, "ready") != NULL;
		free(o);
		if (ready)
			return pid;
		if (waitpid(pid, NULL, WNOHANG) == pid)
			FAIL("%s exited before it was ready", cls);
		usleep(20000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	FAIL("%s printed no ready line within 30 s", cls);
	return -1;
}

static void stop_fixture(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* `viprof record -q -g [-e EV] -p PID -d SECS -o DIR`; the recorder's output in out. */
static void record(const char *tmp, const char *dir, const char *ev, pid_t pid, const char *secs, char *out, size_t len)
{
	char ps[16];
	snprintf(ps, sizeof(ps), "%d", (int)pid);
	char *with[] = { (char *)VIPROF_BIN, "record", "-g", "-e", (char *)ev, "-p", ps, "-d", (char *)secs, "-o",
			 (char *)dir, NULL };
	char *without[] = { (char *)VIPROF_BIN, "record", "-q", "-g", "-p", ps, "-d", (char *)secs, "-o", (char *)dir, NULL };
	int rc = run_logged(tmp, ev ? with : without, out, len, 240);
	if (rc)
		FAIL("viprof record -p %d exited %d: %s", (int)pid, rc, out);
}

/* `viprof report DIR -e EV -F folded` (malloc'ed), "" when the session has no such event. */
static char *folded(const char *tmp, const char *dir, const char *ev)
{
	char outp[600];
	snprintf(outp, sizeof(outp), "%s/folded", tmp);
	char *argv[] = { (char *)VIPROF_BIN, "report", (char *)dir, "-e", (char *)ev, "-F", "folded", NULL };
	if (run_argv(argv, outp, NULL, 120))
		return strdup("");
	return tu_read(outp);
}

/* Samples of the folded lines that hold pat. */
static long count(const char *f, const char *pat)
{
	long n = 0;
	for (const char *p = f; (p = strstr(p, pat)); p++) {
		const char *nl = strchr(p, '\n'), *sp = nl;
		while (sp && sp > p && sp[-1] != ' ')
			sp--;
		if (sp)
			n += strtol(sp, NULL, 10);
	}
	return n;
}

int main(int argc, char **argv)
{
	bool jdk17;
	const char *java = tu_jdk_from_args(argc, argv, &jdk17);
	tu_require_fixtures();
	if (geteuid() != 0)
		SKIP("recording -p with the BPF sampler and attaching need root here");
	char *tmp = tu_tmpdir("profattach");
	char dir[600], out[16384];

	/* Refused before anything starts: no agent, nothing to record allocations. */
	char *no[] = { (char *)VIPROF_BIN, "record", "-e", "alloc", "-p", "1", "--jvm-attach", "none", "-o", dir, NULL };
	snprintf(dir, sizeof(dir), "%s/refused", tmp);
	ASSERT_EQ(run_logged(tmp, no, out, sizeof(out), 240), 2);
	ASSERT_CONTAINS(out, "--jvm-attach none");

	pid_t pid = start_fixture(java, tmp, "AllocSplit", "60");
	snprintf(dir, sizeof(dir), "%s/a1", tmp);
	record(tmp, dir, "alloc", pid, "3", out, sizeof(out));
	char *f = folded(tmp, dir, "alloc");
	long a = count(f, "AllocSplit.a(int)_[j];long[] "), b = count(f, "AllocSplit.b(int)_[j];double[] ");
	free(f);
	fprintf(stderr, "attached, -e alloc: a/long[] %ld, b/double[] %ld samples\n", a, b);
	ASSERT_GT(a + b, 300);
	ASSERT_DBL_NEAR(100.0 * (double)a / (double)(a + b), 75.0, 3.0);

	/* The same JVM, a session without -e alloc: the agent stops sampling ... */
	snprintf(dir, sizeof(dir), "%s/a2", tmp);
	record(tmp, dir, NULL, pid, "1", out, sizeof(out));
	char txtp[700], *tx[] = { (char *)VIPROF_BIN, "report", dir, "-n", "1", NULL };
	snprintf(txtp, sizeof(txtp), "%s/text", tmp);
	ASSERT_EQ(run_argv(tx, txtp, NULL, 120), 0);
	char *txt = tu_read(txtp);
	ASSERT_CONTAINS(txt, "# event: cpu-clock");   /* a session, with samples ... */
	ASSERT_TRUE(strstr(txt, "# event: alloc") == NULL);   /* ... and no allocations */
	free(txt);
	/* ... and starts again when the next one asks. */
	snprintf(dir, sizeof(dir), "%s/a3", tmp);
	record(tmp, dir, "alloc", pid, "2", out, sizeof(out));
	f = folded(tmp, dir, "alloc");
	a = count(f, "AllocSplit.a(int)_[j];long[] "), b = count(f, "AllocSplit.b(int)_[j];double[] ");
	free(f);
	fprintf(stderr, "third session, -e alloc again: a/long[] %ld, b/double[] %ld samples\n", a, b);
	ASSERT_GT(a + b, 200);
	ASSERT_DBL_NEAR(100.0 * (double)a / (double)(a + b), 75.0, 3.0);
	stop_fixture(pid);

	pid = start_fixture(java, tmp, "LockSplit", "60");
	snprintf(dir, sizeof(dir), "%s/l", tmp);
	record(tmp, dir, "lock", pid, "3", out, sizeof(out));
	ASSERT_TRUE(strstr(out, "monitors only") == NULL);
	f = folded(tmp, dir, "lock");
	long mon = count(f, ";LockSplit.onMonitor()_[j];LockSplit$Monitor ");
	long juc = count(f, "LockSplit.onLock()");
	free(f);
	fprintf(stderr, "attached, -e lock: %ld monitor waits under onMonitor, %ld waits under onLock\n", mon, juc);
	/* The waiter waits about 5 ms in every 6: hundreds of waits in 3 s. */
	ASSERT_GT(mon, 100);
	ASSERT_GT(juc, 100);
	stop_fixture(pid);
	tu_rm_rf(tmp);
	return 0;
}
