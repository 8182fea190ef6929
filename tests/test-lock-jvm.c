/* `viprof record -e lock` on tests/java/LockSplit (issue 25 item 2, issue 32 item 1): three
 * threads wait for a contended synchronized monitor (class LockSplit$Monitor) in
 * LockSplit.onMonitor and three for a contended ReentrantLock in LockSplit.onLock, each
 * timing its own waits with System.nanoTime.
 *   launch: `record -g -e lock --off-cpu -- java LockSplit`.
 *   natives: launched, with the agent finding the JDK's Unsafe.park through
 *           Unsafe.registerNatives() (VIPROF_AGENT_PARK=natives), as it does where
 *           libjvm.so has no symbol table; launch finds it in libjvm.so's.
 *   vthreads: launched, the ReentrantLock's waiters virtual threads (JDK 21+), which park
 *           by unmounting, not in Unsafe.park: timed from unmount to mount (the events
 *           --off-cpu has on); the agent's share is checked for the monitor's waiters
 *           only (a virtual thread's wait blocks no thread).
 *   attach: the same JVM started without viprof, `record -g -e lock --off-cpu -p PID`: a
 *           running JVM gets java.util.concurrent waits too (issue 32: it had monitors only).
 * Either way: event lock has both waits under their methods with the lock's class as the
 * leaf (LockSplit$Monitor; ReentrantLock$NonfairSync, the blocker j.u.c parks on), each
 * lock's time waited within 10% of the fixture's own (over the whole run, or over the
 * attached window between two of the fixture's ticks; launched, also within 10% of JFR's
 * own, recording in the same JVM), and the agent's own frames under 1% of the waiters'
 * blocked time in onMonitor and onLock (issue 32: 11.3 of 14.9 s blocked were inside the
 * agent's breakpoint callback). Launched, the JFR output has them as
 * jdk.JavaMonitorEnter and jdk.ThreadPark events with their classes, as that JDK's jfr tool
 * prints them. Arguments: 17 or 25 (the JDK), then launch, natives, vthreads or attach.
 * --off-cpu and -p need root (BPF, attaching); without it the launch and natives
 * scenarios check what they can, then say skipped. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test-agent-util.h"
#include "test-run.h"

/* Sums a session's JSON report (stdin): argv[1] is "lock" or "off-cpu".
 * lock: the waits under LockSplit.onMonitor and LockSplit.onLock.
 * off-cpu: the waiter threads' blocked time under those methods, and the part of it in
 * the agent's own code: stacks with a frame of libviprof-jvmti.so, except its Unsafe.park
 * wrapper calling straight into the JDK's park (that frame is how the park is timed; the
 * time beneath it is the lock's wait). */
static const char sum_py[] =
	"import json, sys\n"
	"d = json.load(sys.stdin)\n"
	"ev = [e['name'] for e in d['events']].index(sys.argv[1])\n"
	"fr = {f['id']: f for f in d['frames']}\n"
	"meth = ['LockSplit.onMonitor()', 'LockSplit.onLock()']\n"
	"t = [0, 0]; own = [0, 0]\n"
	"def agent(i): return fr[i]['image'].endswith('libviprof-jvmti.so')\n"
	"for s in d['stacks']:\n"
	"    w = s['weight'][ev]\n"
	"    names = [fr[i]['name'] for i in s['frames']]\n"
	"    for k, m in enumerate(meth):\n"
	"        if m not in names:\n"
	"            continue\n"
	"        if sys.argv[1] == 'lock':\n"
	"            t[k] += w\n"
	"            continue\n"
	"        if 'waiter' not in s['comm'] or not names[-1].startswith('[blocked'):\n"
	"            continue\n"
	"        t[k] += w\n"
	"        ag = [j for j, i in enumerate(s['frames']) if agent(i)]\n"
	"        if not ag:\n"
	"            continue\n"
	"        j = ag[-1]\n"
	"        nxt = names[j + 1] if j + 1 < len(names) else ''\n"
	"        through = names[j] == 'park_hook' and j + 1 < len(names) and not agent(s['frames'][j + 1]) \\\n"
	"                  and not nxt.startswith(('jvmti_', 'jni_', 'JNI_'))\n"
	"        if not through:\n"
	"            own[k] += w\n"
	"print(t[0], t[1], own[0], own[1])\n";

/* `viprof report DIR -e EV -F json [--time WIN] | python3 sum_py EV`: four numbers. */
static void sums(const char *tmp, const char *dir, const char *ev, const char *win, long long v[4])
{
	char py[600], outp[600], cmd[2400];
	snprintf(py, sizeof(py), "%s/sum.py", tmp);
	snprintf(outp, sizeof(outp), "%s/sum", tmp);
	FILE *f = fopen(py, "w");
	ASSERT_NOT_NULL(f);
	fputs(sum_py, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "%s report %s -e %s -F json %s%s 2>/dev/null | python3 %s %s > %s", VIPROF_BIN, dir, ev,
		 win ? "--time " : "", win ? win : "", py, ev, outp);
	ASSERT_EQ(run_sh(cmd, 290), 0);
	char *s = tu_read(outp);
	ASSERT_EQ(sscanf(s, "%lld %lld %lld %lld", &v[0], &v[1], &v[2], &v[3]), 4);
	free(s);
}

/* The JFR tool of java's JDK into buf. */
static void jfr_tool(const char *java, char *buf, size_t len)
{
	snprintf(buf, len, "%.*sjfr", (int)(strlen(java) - 4), java);
}

/* JFR's own times in tmp/own.jfr (recorded by the fixture's JVM): jdk.JavaMonitorEnter on
 * LockSplit$Monitor and jdk.ThreadPark on a ReentrantLock, in ns. */
static void jfr_sums(const char *java, const char *tmp, double *mon, double *lk)
{
	char jfr[512], cmd[2400], outp[600];
	jfr_tool(java, jfr, sizeof(jfr));
	snprintf(outp, sizeof(outp), "%s/jfrsum", tmp);
	snprintf(cmd, sizeof(cmd),
		 "%s print --json --events jdk.ThreadPark,jdk.JavaMonitorEnter %s/own.jfr 2>/dev/null | python3 -c '\n"
		 "import json, re, sys\n"
		 "d = json.load(sys.stdin)\n"
		 "def ns(s):\n"
		 "    m = re.match(r\"PT(?:([0-9]+)H)?(?:([0-9]+)M)?(?:([0-9.]+)S)?$\", s)\n"
		 "    return 1e9 * (3600 * float(m.group(1) or 0) + 60 * float(m.group(2) or 0) + float(m.group(3) or 0))\n"
		 "t = [0, 0]\n"
		 "for e in d[\"recording\"][\"events\"]:\n"
		 "    v = e[\"values\"]\n"
		 "    if \"LockSplit$Monitor\" in str(v.get(\"monitorClass\")):\n"
		 "        t[0] += ns(v[\"duration\"])\n"
		 "    if \"ReentrantLock\" in str(v.get(\"parkedClass\")):\n"
		 "        t[1] += ns(v[\"duration\"])\n"
		 "print(t[0], t[1])' > %s",
		 jfr, tmp, outp);
	ASSERT_EQ(run_sh(cmd, 290), 0);
	char *s = tu_read(outp);
	ASSERT_EQ(sscanf(s, "%lf %lf", mon, lk), 2);
	free(s);
}

/* Starts `java -cp classes LockSplit SECS 3` and waits for its "ready" line. */
static pid_t start_fixture(const char *java, const char *out)
{
	char *argv[] = { (char *)java, "-cp", (char *)VIPROF_JAVA_CLASSES, "LockSplit", "120", "3", NULL };
	pid_t pid = run_start(argv, out, NULL);
	for (int i = 0; i < 1500; i++) {   /* 30 s: a JVM starting on a loaded machine */
		char *o = tu_read(out);
		bool ready = strstr(o, "ready") != NULL;
		free(o);
		if (ready)
			return pid;
		if (waitpid(pid, NULL, WNOHANG) == pid)
			FAIL("LockSplit exited before it was ready");
		usleep(20000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	FAIL("LockSplit printed no ready line within 30 s");
	return -1;
}

/* The fixture's waits ended between two of its ticks: the first tick at or after from
 * and the last at or before to (seconds from the session's time zero, start in ns).
 * *ta, *tb get the ticks' times (-1 when there is none), *mon, *lk the waits. */
static void fixture_waits(const char *fo, double start, double from, double to, double *ta, double *tb,
			  long long *mon, long long *lk)
{
	long long ma = 0, la = 0, mb = 0, lb = 0;
	*ta = *tb = -1;
	for (const char *l = fo; (l = strstr(l, "tick ")); l++) {
		long long t, m, k;
		if (sscanf(l, "tick %lld %lld %lld", &t, &m, &k) != 3)
			continue;
		double rel = ((double)t - start) / 1e9;
		if (*ta < 0 && rel >= from)
			*ta = rel, ma = m, la = k;
		if (rel <= to)
			*tb = rel, mb = m, lb = k;
	}
	*mon = mb - ma;
	*lk = lb - la;
}

/* viprof's waits (v[0] monitor, v[1] ReentrantLock) against the fixture's in the window
 * between its ticks ta and tb, within 10% each. */
static void check_window(const char *tmp, const char *dir, const char *what, double ta, double tb, long long mon,
			 long long lk)
{
	char win[64];
	long long v[4];
	snprintf(win, sizeof(win), "%.6f,%.6f", ta, tb);
	sums(tmp, dir, "lock", win, v);
	fprintf(stderr, "%s %.2f..%.2f s: monitor: fixture %.1f ms, viprof %.1f ms; ReentrantLock: fixture %.1f ms, "
		"viprof %.1f ms\n", what, ta, tb, mon / 1e6, v[0] / 1e6, lk / 1e6, v[1] / 1e6);
	ASSERT_DBL_NEAR((double)v[0] / (double)mon, 1.0, 0.10);
	ASSERT_DBL_NEAR((double)v[1] / (double)lk, 1.0, 0.10);
}

/* The attached window: from 1 s after the agent's map began (the agent binds its park
 * wrapper in the same attach, before it returns; waits that began before it are not
 * its) to 0.5 s before the recording's end, narrowed to two of the fixture's ticks.
 * win gets "FROM,TO" for report --time; *mon, *lk the fixture's waits ended in it.
 * The JVM was killed as soon as the recording returned: the agent's last records must
 * be in the session by then (they were not, and 0.5-1.5 s of waits at the end went
 * missing: CI, 2026-11-28). Two more windows check the ends: the recording's last
 * second, and its first when the map began before the time zero (waits that ended
 * before the sampling began belong to no window: they were counted into its first
 * second, 6.5 s of waits in 0.5 s). */
static void attach_window(const char *tmp, const char *dir, pid_t pid, const char *fixture_out, char *win, size_t wl,
			  long long *mon, long long *lk)
{
	char meta[700], ps[16];
	snprintf(meta, sizeof(meta), "%s/meta.json", dir);
	snprintf(ps, sizeof(ps), "%d", (int)pid);
	char *mj = tu_read(meta);
	const char *q = strstr(mj, "\"duration_s\"");
	ASSERT_NOT_NULL(q);
	q = strchr(q + 12, ':');
	ASSERT_NOT_NULL(q);
	double start = (double)tu_session_zero(dir), dur = strtod(q + 1, NULL);
	free(mj);
	char *ml[] = { (char *)VIPROF_BIN, "maps", (char *)dir, "--pid", ps, "list", NULL };
	char *list = run_output(tmp, ml, "viprof maps list");
	const char *b = strstr(list, "the map began at ");
	ASSERT_NOT_NULL(b);
	double began = strtod(b + 17, NULL);
	free(list);
	double from = began + 1.0, to = dur - 0.5;
	fprintf(stderr, "recording %.2f s, map began at %.2f s: window %.2f..%.2f s\n", dur, began, from, to);
	ASSERT_GT_F(to - from, 1.5);

	char *fo = tu_read(fixture_out);
	double ta, tb, la, lb;
	fixture_waits(fo, start, from > 0 ? from : 0, to, &ta, &tb, mon, lk);
	ASSERT_GT_F(ta, 0.0);
	ASSERT_GT_F(tb - ta, 1.0);
	snprintf(win, wl, "%.6f,%.6f", ta, tb);

	long long m, k;
	fixture_waits(fo, start, dur - 1.0, dur, &la, &lb, &m, &k);
	ASSERT_GT_F(lb - la, 0.5);
	check_window(tmp, dir, "last second", la, lb, m, k);
	if (began < -0.1) {
		fixture_waits(fo, start, 0, 1.0, &la, &lb, &m, &k);
		ASSERT_GT_F(lb - la, 0.5);
		check_window(tmp, dir, "first second", la, lb, m, k);
	}
	free(fo);
}

int main(int argc, char **argv)
{
	bool jdk17;
	const char *java = tu_jdk_from_args(argc, argv, &jdk17);
	bool attach = argc > 2 && !strcmp(argv[2], "attach"), natives = argc > 2 && !strcmp(argv[2], "natives");
	bool vthreads = argc > 2 && !strcmp(argv[2], "vthreads");
	tu_require_fixtures();
	if (run_sh("python3 -c 'import json' 2>/dev/null", 290) != 0)
		SKIP("python3 is needed to sum the JSON report's weights");
	bool root = geteuid() == 0;
	if (attach && !root)
		SKIP("recording -p with the BPF sampler and attaching need root here");
	if (vthreads && jdk17)
		SKIP("virtual threads need JDK 21 or later");
	if (vthreads && !root)
		SKIP("virtual threads' parks are timed with --off-cpu's events, and --off-cpu needs root here");
	char *tmp = tu_tmpdir("lock");
	char dir[600], fout[600], win[64] = "";
	long long mon = -1, lk = -1;
	pid_t pid = -1;
	snprintf(dir, sizeof(dir), "%s/s", tmp);
	snprintf(fout, sizeof(fout), "%s/LockSplit.out", tmp);

	if (!attach) {
		/* JFR in the same JVM measures the same waits: issue 32 saw its ThreadPark time
		 * fall from 9.76 to 1.70 s with the old agent beside it. */
		char jfropt[800];
		snprintf(jfropt, sizeof(jfropt), "-XX:StartFlightRecording:filename=%s/own.jfr,"
			 "jdk.ThreadPark#threshold=0ms,jdk.JavaMonitorEnter#threshold=0ms", tmp);
		char *rec[] = { (char *)VIPROF_BIN, "record", "-q", "-g", "-e", "lock", "-o", dir, "--off-cpu", "--",
				(char *)java, jfropt, "-cp", (char *)VIPROF_JAVA_CLASSES, "LockSplit", "4", "3",
				vthreads ? "virtual" : NULL, NULL };
		if (!root)   /* no --off-cpu */
			memmove(&rec[8], &rec[9], 10 * sizeof(char *));
		/* Stats on: the agent says where it found the JDK's park. */
		setenv("VIPROF_AGENT_STATS", "1", 1);
		if (natives)
			setenv("VIPROF_AGENT_PARK", "natives", 1);
		char *fixture = run_output(tmp, rec, "viprof record -e lock");
		char errp[700];
		snprintf(errp, sizeof(errp), "%s/err", tmp);
		char *err = tu_read(errp);
		ASSERT_CONTAINS(err, natives ? "Unsafe.park wrapped; the JDK's function from Unsafe.registerNatives()"
					     : "Unsafe.park wrapped; the JDK's function from libjvm.so's symbol table");
		free(err);
		/* The wrapper is bound from the boot loader: HotSpot logs no "Re-registering of
		 * platform native method" warning into the application's output. */
		ASSERT_TRUE(strstr(fixture, "Re-registering") == NULL);
		const char *m = strstr(fixture, "monitor_ns=");
		ASSERT_NOT_NULL(m);
		ASSERT_EQ(sscanf(m, "monitor_ns=%lld lock_ns=%lld", &mon, &lk), 2);
		free(fixture);
	} else {
		pid = start_fixture(java, fout);
		char ps[16], out[16384];
		snprintf(ps, sizeof(ps), "%d", (int)pid);
		char *rec[] = { (char *)VIPROF_BIN, "record", "-g", "-e", "lock", "--off-cpu", "-p", ps, "-d", "6", "-o",
				dir, NULL };
		int rc = run_logged(tmp, rec, out, sizeof(out), 240);
		if (rc)
			FAIL("viprof record -p %d exited %d: %s", (int)pid, rc, out);
		/* Issue 32: an attached JVM had monitors only, and the recorder said so. */
		ASSERT_TRUE(strstr(out, "monitors only") == NULL);
		kill(pid, SIGKILL);   /* what the agent had not written by now is lost */
		waitpid(pid, NULL, 0);
		attach_window(tmp, dir, pid, fout, win, sizeof(win), &mon, &lk);
	}
	ASSERT_GT(mon, 500000000);   /* the waiters waited most of the time */
	ASSERT_GT(lk, 500000000);

	/* The lock classes as leaves under the waiting methods. */
	char *fo[] = { (char *)VIPROF_BIN, "report", dir, "-e", "lock", "-F", "folded", NULL };
	char *folded = run_output(tmp, fo, "viprof report -e lock -F folded");
	ASSERT_CONTAINS(folded, ";LockSplit.onMonitor()_[j];LockSplit$Monitor ");
	ASSERT_CONTAINS(folded, "ReentrantLock$NonfairSync ");
	ASSERT_CONTAINS(folded, "LockSplit.onLock()_[j];java.util.concurrent.locks.ReentrantLock.lock()");
	free(folded);

	/* The time waited under each method, from the JSON report's stack weights. */
	long long v[4];
	sums(tmp, dir, "lock", win[0] ? win : NULL, v);
	fprintf(stderr, "%s: monitor: fixture %.1f ms, viprof %.1f ms; ReentrantLock: fixture %.1f ms, viprof %.1f ms\n",
		attach ? "attached" : "launched", mon / 1e6, v[0] / 1e6, lk / 1e6, v[1] / 1e6);
	ASSERT_DBL_NEAR((double)v[0] / (double)mon, 1.0, 0.10);
	ASSERT_DBL_NEAR((double)v[1] / (double)lk, 1.0, 0.10);
	if (!attach && !vthreads) {   /* ... and JFR's, in the same JVM, within 10% of both */
		double jm, jl;
		jfr_sums(java, tmp, &jm, &jl);
		fprintf(stderr, "JFR in the same JVM: monitor %.1f ms, ReentrantLock %.1f ms\n", jm / 1e6, jl / 1e6);
		ASSERT_DBL_NEAR(jm / (double)mon, 1.0, 0.10);
		ASSERT_DBL_NEAR(jl / (double)lk, 1.0, 0.10);
		ASSERT_DBL_NEAR((double)v[0] / jm, 1.0, 0.10);
		ASSERT_DBL_NEAR((double)v[1] / jl, 1.0, 0.10);
	}

	/* The agent's own share of the waiters' blocked time. */
	if (root) {
		sums(tmp, dir, "off-cpu", NULL, v);
		fprintf(stderr, "blocked in onMonitor %.1f ms (agent's own %.2f ms), in onLock %.1f ms (agent's own %.2f ms)\n",
			v[0] / 1e6, v[2] / 1e6, v[1] / 1e6, v[3] / 1e6);
		ASSERT_GT(v[0], 500000000);
		ASSERT_LT(v[2] * 100, v[0]);
		if (!vthreads) {
			ASSERT_GT(v[1], 500000000);
			ASSERT_LT(v[3] * 100, v[1]);
		}
	}

	if (!attach && !vthreads) {
		char jfr[512], jf[700];
		jfr_tool(java, jfr, sizeof(jfr));
		snprintf(jf, sizeof(jf), "%s/l.jfr", tmp);
		char *wj[] = { (char *)VIPROF_BIN, "report", dir, "-F", "jfr", "-o", jf, NULL };
		free(run_output(tmp, wj, "viprof report -F jfr"));
		char *pm[] = { jfr, "print", "--events", "jdk.JavaMonitorEnter", "--stack-depth", "1", jf, NULL };
		char *pr = run_output(tmp, pm, "jfr print --events jdk.JavaMonitorEnter");
		ASSERT_CONTAINS(pr, "monitorClass = LockSplit$Monitor");
		ASSERT_CONTAINS(pr, "LockSplit.onMonitor() line:");
		free(pr);
		char *pp[] = { jfr, "print", "--events", "jdk.ThreadPark", "--stack-depth", "1", jf, NULL };
		pr = run_output(tmp, pp, "jfr print --events jdk.ThreadPark");
		ASSERT_CONTAINS(pr, "parkedClass = java.util.concurrent.locks.ReentrantLock$NonfairSync");
		ASSERT_CONTAINS(pr, "java.util.concurrent.locks.LockSupport.park(Object) line:");
		free(pr);
	}
	tu_rm_rf(tmp);
	if (!root)
		SKIP("checked the waits; the agent's share of blocked time needs --off-cpu, which needs root here");
	return 0;
}
