/* Repeated attach (issue 12): one JitSplit JVM recorded with `record -p` three times in a
 * row. Each session gets its own code map with the JVM's live code replayed, so its JIT
 * samples are named as well as the first session's; a session's map stops growing when
 * its recording ends, closed cleanly (last epoch ended), also when the recorder was
 * killed (the agent sees the recording's lock free). Between sessions the agent idles:
 * its thread ("viprof-jvmti") is not woken at all (its context switches stay the same
 * over 3 s). Every other wait is on the event itself (the JVM's CPU time, a map closed or
 * written), not a fixed sleep. JDK 17 and Temurin 25 (argv[1]). */
#include "test-agent-util.h"
#include "test-profile.h"

#include <signal.h>

#include "maps/codemap.h"
#include "maps/codemap_format.h"
#include "postproc/profile.h"
#include "postproc/session.h"

static char dir[256];
static pid_t jvm;

static pid_t record(const char *name, const char *secs)
{
	char sess[400], spid[16], out[400];
	snprintf(sess, sizeof(sess), "%s/%s", dir, name);
	snprintf(out, sizeof(out), "%s/%s.out", dir, name);
	snprintf(spid, sizeof(spid), "%d", (int)jvm);
	char *argv[] = { VIPROF_BIN, "record", "-q", "-g", "-p", spid, "-d", (char *)secs, "-o", sess, NULL };
	return run_start(argv, out, out);
}

/* Context switches (voluntary + involuntary) of the JVM's agent thread; -1 if none. */
static long agent_switches(void)
{
	char path[300];
	snprintf(path, sizeof(path), "/proc/%d/task", (int)jvm);
	DIR *d = opendir(path);
	struct dirent *de;
	long sw = -1;
	while (d && sw < 0 && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/comm", (int)jvm, de->d_name);
		char *comm = tu_read(path);
		if (!strcmp(comm, "viprof-jvmti\n")) {
			snprintf(path, sizeof(path), "/proc/%d/task/%s/status", (int)jvm, de->d_name);
			char *st = tu_read(path), *v = strstr(st, "voluntary_ctxt_switches:"),
			     *nv = strstr(st, "nonvoluntary_ctxt_switches:");
			if (v && nv)
				sw = atol(v + 24) + atol(nv + 27);
			free(st);
		}
		free(comm);
	}
	if (d)
		closedir(d);
	return sw;
}

static long map_size(const char *name)
{
	char path[600];
	struct stat st;
	snprintf(path, sizeof(path), "%s/%s/jit/%d/codemap.vpm", dir, name, (int)jvm);
	return stat(path, &st) ? -1 : (long)st.st_size;
}

/* The session's map holds the replayed code (more than 3 methods) and, when ended is
 * true, was closed: its last epoch ended. */
static bool map_has(const char *name, bool ended)
{
	char path[600], err[512];
	snprintf(path, sizeof(path), "%s/%s/jit/%d", dir, name, (int)jvm);
	struct vp_codemap *m = vp_codemap__load_dir(path, err, sizeof(err));
	bool ok = m && m->nmethods > 3 && (!ended || (m->nepochs > 0 && m->epochs[m->nepochs - 1].ended));
	vp_codemap__free(m);
	return ok;
}

static bool map_closed(void *name)
{
	return map_has(name, true);
}

static bool map_written(void *name)
{
	return map_has(name, false);
}

/* The JVM has run 1.5 s of CPU: started, and its hot methods compiled (JitSplit spins
 * in them from the start). CPU time rather than wall time, whatever the load. */
static bool jvm_warm(void *unused)
{
	(void)unused;
	return run_cpu_ms(jvm) >= 1500;
}

/* The session's map was closed: read whole, its last epoch ended. */
static void check_closed(const char *name)
{
	char path[600], err[512];
	snprintf(path, sizeof(path), "%s/%s/jit/%d", dir, name, (int)jvm);
	struct vp_codemap *m = vp_codemap__load_dir(path, err, sizeof(err));
	if (!m)
		FAIL("%s: %s", path, err);
	ASSERT_TRUE(m->flags & VP_CM_META_LATE_ATTACH);
	ASSERT_GT(m->nmethods, 3);
	ASSERT_FALSE(m->truncated);
	ASSERT_TRUE(m->nepochs > 0 && m->epochs[m->nepochs - 1].ended);
	vp_codemap__free(m);
}

/* Of the JVM's samples whose leaf is JIT code, named or not: the share named, and how
 * many fell in JitSplit's hot methods. */
static double named_share(const char *name, double *hot)
{
	char sess[400], err[512];
	snprintf(sess, sizeof(sess), "%s/%s", dir, name);
	uint32_t pid = (uint32_t)jvm;
	struct vp_session_opts o = { .pids = &pid, .npids = 1 };
	struct vp_profile *p = vp_profile__new();
	ASSERT_NOT_NULL(p);
	if (vp_session__load(sess, p, &o, err, sizeof(err)))
		FAIL("load %s: %s", sess, err);
	double named = 0, unknown = 0;
	*hot = 0;
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct vp_stack *s = &p->stacks[i];
		if (!s->nframes)
			continue;
		const struct vp_frame *leaf = &p->frames[s->frames[s->nframes - 1]];
		double n = (double)s->samples[0];
		if (leaf->layer == VP_LAYER_JIT || leaf->layer == VP_LAYER_INLINED)
			named += n;
		else if (!strcmp(leaf->name, "[unknown]") && !strcmp(leaf->image, "[anon]"))
			unknown += n;   /* anonymous memory no code map names: the JIT code of an unmapped JVM */
	}
	tp_sum(p, &(struct tp_filter){ 0 }, "JitSplit.hot", TP_PREFIX, hot);
	vp_profile__free(p);
	fprintf(stderr, "%s: %.0f JIT samples named, %.0f [unknown] in anonymous memory, %.0f in JitSplit.hot*\n", name,
		named, unknown, *hot);
	/* Enough samples for the shares compared below (within 0.1) to mean something; how
	 * many a 3-s recording gets is the CPU a busy machine gave the JVM (89 in a CI run
	 * at load 17, against 600 quiet), so this is a floor, not a rate. */
	ASSERT_GT_F(named + unknown, 50);
	return named / (named + unknown);
}

int main(int argc, char **argv)
{
	tu_require_fixtures();
	REQUIRE_ROOT();
	bool jdk17;
	const char *java = tu_jdk_from_args(argc, argv, &jdk17);
	snprintf(dir, sizeof(dir), "%s", tu_tmpdir(jdk17 ? "reattach17" : "reattach25"));
	char jout[400], jerr[400];
	snprintf(jout, sizeof(jout), "%s/jvm.out", dir);
	snprintf(jerr, sizeof(jerr), "%s/jvm.err", dir);
	char *jargv[] = { (char *)java, "-XX:+PreserveFramePointer", "-cp", VIPROF_JAVA_CLASSES, "JitSplit", "45", "7", NULL };
	jvm = run_start(jargv, jout, jerr);
	tu_wait_until(jvm_warm, NULL, 60, "the JVM to run 1.5 s of CPU");

	ASSERT_EQ(run_wait(record("s1", "3"), 60), 0);
	/* The agent sees the recording's lock free within a second and ends the map. */
	tu_wait_until(map_closed, "s1", 10, "the first session's map to be closed");
	long s1_after = map_size("s1");
	ASSERT_GT(s1_after, 0);
	check_closed("s1");
	/* Idle: the agent thread waits without a timeout until the next attach. It still
	 * ran for a moment after the map was closed (15 switches in the 3 s right after, in
	 * 1 run of 3; the test used to start 3 s after the recording): the 3 s without a
	 * single wakeup are counted from when it went quiet for a second, up to 10 s. */
	long sw0 = agent_switches();
	for (int i = 0; i < 10; i++) {
		sleep(1);
		long now = agent_switches();
		if (now == sw0)
			break;
		sw0 = now;
	}
	sleep(3);
	long sw1 = agent_switches();
	fprintf(stderr, "idle agent thread: %ld -> %ld context switches in 3 s\n", sw0, sw1);
	ASSERT_GE(sw0, 0);
	ASSERT_EQ(sw1, sw0);

	ASSERT_EQ(run_wait(record("s2", "3"), 60), 0);
	tu_wait_until(map_closed, "s2", 10, "the second session's map to be closed");
	long s2_after = map_size("s2");
	check_closed("s2");
	/* A recorder killed mid-way (the agent attached and writing its map): the kernel
	 * frees its lock, the agent ends the map. */
	pid_t r3 = record("s3", "30");
	tu_wait_until(map_written, "s3", 30, "the third session's map to hold the JVM's code");
	ASSERT_OK(kill(r3, SIGKILL));
	waitpid(r3, NULL, 0);
	tu_wait_until(map_closed, "s3", 10, "the killed session's map to be closed");
	long s3_after = map_size("s3");
	ASSERT_GT(s3_after, 0);
	check_closed("s3");
	/* Closed maps stay as they are: s1 and s2 over the whole run since, s3 over this
	 * second (the agent's lock check runs every second). */
	sleep(1);
	fprintf(stderr, "map sizes: s1 %ld -> %ld, s2 %ld -> %ld, s3 %ld -> %ld bytes\n", s1_after, map_size("s1"),
		s2_after, map_size("s2"), s3_after, map_size("s3"));
	ASSERT_EQ(map_size("s1"), s1_after);
	ASSERT_EQ(map_size("s2"), s2_after);
	ASSERT_EQ(map_size("s3"), s3_after);

	double hot1, hot2;
	double n1 = named_share("s1", &hot1), n2 = named_share("s2", &hot2);
	fprintf(stderr, "named JIT share: first %.3f, second %.3f\n", n1, n2);
	ASSERT_GT_F(n1, 0.8);
	ASSERT_GT_F(n2, 0.8);
	ASSERT_DBL_NEAR(n2, n1, 0.1);
	ASSERT_GT_F(hot2, 0.5 * hot1);

	kill(jvm, SIGKILL);
	waitpid(jvm, NULL, 0);
	tu_rm_rf(dir);
	printf("ok\n");
	return 0;
}
