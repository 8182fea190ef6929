/* Issue 25 item 2: `viprof record -e lock` on tests/java/LockSplit, where one thread waits
 * for a contended synchronized monitor (class LockSplit$Monitor) in LockSplit.onMonitor
 * and one for a contended ReentrantLock in LockSplit.onLock, each timing its own waits.
 * Event lock has both waits under their methods with the lock's class as the leaf
 * (LockSplit$Monitor; ReentrantLock$NonfairSync, the blocker j.u.c parks on), and the
 * time waited within 10% of the fixture's own totals; the JFR output has them as
 * jdk.JavaMonitorEnter and jdk.ThreadPark events with their classes, as that JDK's jfr
 * tool prints them. Argument: 17 or 25 (the JDK). */
#include <stdlib.h>
#include <string.h>

#include "test-agent-util.h"

int main(int argc, char **argv)
{
	bool jdk17;
	const char *java = tu_jdk_from_args(argc, argv, &jdk17);
	tu_require_fixtures();
	if (system("python3 -c 'import json' 2>/dev/null") != 0)
		SKIP("python3 is needed to sum the JSON report's weights");
	char *tmp = tu_tmpdir("lock");
	char dir[600];
	snprintf(dir, sizeof(dir), "%s/s", tmp);
	char *rec[] = { (char *)VIPROF_BIN, "record", "-q", "-g", "-e", "lock", "-o", dir, "--", (char *)java, "-cp",
			(char *)VIPROF_JAVA_CLASSES, "LockSplit", "3", NULL };
	char *fixture = tu_output(tmp, rec, "viprof record -e lock");
	long long mon = -1, lk = -1;
	const char *m = strstr(fixture, "monitor_ns=");
	ASSERT_NOT_NULL(m);
	ASSERT_EQ(sscanf(m, "monitor_ns=%lld lock_ns=%lld", &mon, &lk), 2);
	free(fixture);
	ASSERT_GT(mon, 500000000);   /* the waiters waited most of the 3 s */
	ASSERT_GT(lk, 500000000);

	/* The lock classes as leaves under the waiting methods. */
	char *fo[] = { (char *)VIPROF_BIN, "report", dir, "-e", "lock", "-F", "folded", NULL };
	char *folded = tu_output(tmp, fo, "viprof report -e lock -F folded");
	ASSERT_CONTAINS(folded, ";LockSplit.onMonitor()_[j];LockSplit$Monitor ");
	ASSERT_CONTAINS(folded, "ReentrantLock$NonfairSync ");
	ASSERT_CONTAINS(folded, "LockSplit.onLock()_[j];java.util.concurrent.locks.ReentrantLock.lock()");
	free(folded);

	/* The time waited under each method, from the JSON report's stack weights. */
	char cmd[2600], outp[700];
	snprintf(outp, sizeof(outp), "%s/sum", tmp);
	snprintf(cmd, sizeof(cmd),
		 "%s report %s -e lock -F json 2>/dev/null | python3 -c '\n"
		 "import json, sys\n"
		 "d = json.load(sys.stdin)\n"
		 "ev = [e[\"name\"] for e in d[\"events\"]].index(\"lock\")\n"
		 "names = {f[\"id\"]: f[\"name\"] for f in d[\"frames\"]}\n"
		 "t = {\"LockSplit.onMonitor()\": 0, \"LockSplit.onLock()\": 0}\n"
		 "for s in d[\"stacks\"]:\n"
		 "    fn = [names[i] for i in s[\"frames\"]]\n"
		 "    for k in t:\n"
		 "        if k in fn:\n"
		 "            t[k] += s[\"weight\"][ev]\n"
		 "print(t[\"LockSplit.onMonitor()\"], t[\"LockSplit.onLock()\"])' > %s",
		 VIPROF_BIN, dir, outp);
	ASSERT_EQ(system(cmd), 0);
	char *sum = tu_read(outp);
	long long vm = -1, vl = -1;
	ASSERT_EQ(sscanf(sum, "%lld %lld", &vm, &vl), 2);
	free(sum);
	fprintf(stderr, "monitor: fixture %.1f ms, viprof %.1f ms; ReentrantLock: fixture %.1f ms, viprof %.1f ms\n",
		mon / 1e6, vm / 1e6, lk / 1e6, vl / 1e6);
	ASSERT_DBL_NEAR((double)vm / (double)mon, 1.0, 0.10);
	ASSERT_DBL_NEAR((double)vl / (double)lk, 1.0, 0.10);

	char jfr[512], jf[700];
	snprintf(jfr, sizeof(jfr), "%.*sjfr", (int)(strlen(java) - 4), java);
	snprintf(jf, sizeof(jf), "%s/l.jfr", tmp);
	char *wj[] = { (char *)VIPROF_BIN, "report", dir, "-F", "jfr", "-o", jf, NULL };
	free(tu_output(tmp, wj, "viprof report -F jfr"));
	char *pm[] = { jfr, "print", "--events", "jdk.JavaMonitorEnter", "--stack-depth", "1", jf, NULL };
	char *pr = tu_output(tmp, pm, "jfr print --events jdk.JavaMonitorEnter");
	ASSERT_CONTAINS(pr, "monitorClass = LockSplit$Monitor");
	ASSERT_CONTAINS(pr, "LockSplit.onMonitor() line:");
	free(pr);
	char *pp[] = { jfr, "print", "--events", "jdk.ThreadPark", "--stack-depth", "1", jf, NULL };
	pr = tu_output(tmp, pp, "jfr print --events jdk.ThreadPark");
	ASSERT_CONTAINS(pr, "parkedClass = java.util.concurrent.locks.ReentrantLock$NonfairSync");
	ASSERT_CONTAINS(pr, "java.util.concurrent.locks.LockSupport.park(Object) line:");
	free(pr);
	tu_rm_rf(tmp);
	return 0;
}
