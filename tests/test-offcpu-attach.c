/* Off-CPU time of an attached JVM (issue 32 item 2), live (root, BPF): `viprof record -g
 * --off-cpu -p PID` on tests/java/LongWaits.java (JDK 17 / Temurin 25, no
 * PreserveFramePointer), whose threads wait 0.7 s, 0.9 s and forever at a time, so that
 * intervals straddle the recording's start and end:
 *   - >= 99% of each waiting thread's blocked time lies under its Java caller
 *     (sleepLong, waitLong, parkForever) and Thread.run, and it is at least 90% of
 *     the recording (the test cannot pass on nothing);
 *   - every thread of the JVM that lived through the recording has running + runnable
 *     + blocked + steal (report --wall) within 2% of the recording's length (END's
 *     duration): nothing from before the sampling window, nothing left out of it. */
#include "test-agent-util.h"

#include "postproc/profile.h"
#include "postproc/session.h"
#include "report/wall.h"
#include "test-profile.h"

#define MAX_TIDS 512

static int list_tids(pid_t pid, uint32_t *tids)
{
	char path[64];
	int n = 0;
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	ASSERT_NOT_NULL(d);
	for (struct dirent *e; (e = readdir(d)) && n < MAX_TIDS;)
		if (e->d_name[0] != '.')
			tids[n++] = (uint32_t)strtoul(e->d_name, NULL, 10);
	closedir(d);
	return n;
}

static const char *leaf(const struct vp_profile *p, const struct vp_stack *s)
{
	return s->nframes ? p->frames[s->frames[s->nframes - 1]].name : "";
}

static void check_caller(const struct vp_profile *p, int off, const char *thread, const char *method, uint64_t dur)
{
	uint64_t total = 0, under = 0;

	for (size_t i = 0; i < p->nstacks; i++) {
		const struct vp_stack *s = &p->stacks[i];
		uint64_t w = s->weight[off];
		if (!w || strcmp(s->comm, thread) || strncmp(leaf(p, s), "[blocked:", 9))
			continue;
		total += w;
		if (tp_stack_has(p, s, method, TP_SUBSTR) && tp_stack_has(p, s, "java.lang.Thread.run", TP_SUBSTR))
			under += w;
	}
	fprintf(stderr, "%s: blocked %.1f ms of %.1f ms, %.2f%% under %s\n", thread, (double)total / 1e6,
		(double)dur / 1e6, total ? 100.0 * (double)under / (double)total : 0.0, method);
	ASSERT_GE(total * 10, dur * 9);
	ASSERT_GE(under * 100, total * 99);
}

int main(int argc, char **argv)
{
	bool jdk17 = false;
	REQUIRE_ROOT();
	tu_require_fixtures();
	const char *java = tu_jdk_from_args(argc, argv, &jdk17);
	char *dir = tu_tmpdir(jdk17 ? "offattach17" : "offattach25");
	char sess[400], jout[400], rout[400], pidarg[32];
	snprintf(sess, sizeof(sess), "%s/s", dir);
	snprintf(jout, sizeof(jout), "%s/java.out", dir);
	snprintf(rout, sizeof(rout), "%s/record.out", dir);

	char *jargv[] = { (char *)java, "-cp", VIPROF_JAVA_CLASSES, "LongWaits", "120", NULL };
	pid_t jpid = run_start(jargv, jout, NULL);
	if (!tu_wait_for(jout, "ready", 60000)) {
		kill(jpid, SIGKILL);
		FAIL("LongWaits did not print ready within 60 s");
	}
	uint32_t before[MAX_TIDS], after[MAX_TIDS];
	int nbefore = list_tids(jpid, before);
	snprintf(pidarg, sizeof(pidarg), "%d", (int)jpid);
	char *rargv[] = { VIPROF_BIN, "record", "-q", "-g", "--off-cpu", "-p", pidarg, "-d", "4", "-o", sess, NULL };
	int rc = run_argv(rargv, rout, rout, 120);
	int nafter = list_tids(jpid, after);
	kill(jpid, SIGKILL);
	waitpid(jpid, NULL, 0);
	if (rc != 0)
		FAIL("viprof record exited with %d: %s", rc, tu_read(rout));

	struct vp_session_opts o = { 0 };
	struct vp_profile *p = tp_load(sess, &o);
	const char *d = vp_profile__meta(p, "duration_ns");
	ASSERT_NOT_NULL(d);
	uint64_t dur = strtoull(d, NULL, 10);
	ASSERT_GT(dur, 3000000000ull);
	int off = tp_find_event(p, "off-cpu");
	ASSERT_GE(off, 0);
	check_caller(p, off, "long-sleeper", "LongWaits.sleepLong", dur);
	check_caller(p, off, "long-waiter", "LongWaits.waitLong", dur);
	check_caller(p, off, "parked-forever", "LongWaits.parkForever", dur);

	char err[512];
	int wall = vp_wall__add_events(p, err, sizeof(err));
	if (wall < 0)
		FAIL("wall view: %s", err);
	int bad = 0, checked = 0;
	for (int i = 0; i < nbefore; i++) {
		bool lived = false;
		for (int j = 0; j < nafter; j++)
			lived |= after[j] == before[i];
		if (!lived)
			continue;
		uint64_t sum = 0;
		const char *comm = "?";
		for (size_t k = 0; k < p->nstacks; k++)
			if (p->stacks[k].tid == before[i] && p->stacks[k].pid == (uint32_t)jpid) {
				sum += p->stacks[k].weight[wall];
				comm = p->stacks[k].comm;
			}
		double pct = 100.0 * (double)sum / (double)dur;
		checked++;
		if (pct < 98.0 || pct > 102.0) {
			fprintf(stderr, "thread %u (%s): wall %.1f ms, %.1f%% of the recording's %.1f ms\n", before[i], comm,
				(double)sum / 1e6, pct, (double)dur / 1e6);
			bad++;
		}
	}
	fprintf(stderr, "%d threads lived through the recording, %d of them off by more than 2%%\n", checked, bad);
	ASSERT_GT(checked, 5);
	ASSERT_EQ(bad, 0);
	vp_profile__free(p);
	tu_rm_rf(dir);
	return 0;
}
