/* `record -p` of a JVM that catches SIGQUIT and runs its VM thread but has not finished
 * creating itself (JVMTI still in its start phase: a JVM a moment old, or one slowed by a
 * busy machine). An agent loaded by an attach then fails GetEnv and the recording names
 * no Java method. The fixture agent slowstart holds the JVM in that window for 3 s; the
 * recorder must wait for the JVM's live phase (its perf data's sun.rt.createVmEndTime)
 * and load the agent then. */
#include "test-agent-util.h"

#include "maps/codemap.h"
#include "maps/codemap_format.h"

/* The perf data counter sun.rt.createVmEndTime of the JVM whose file is path: 1 if set,
 * 0 if not yet, -1 if unreadable (perfMemory.hpp: a 32-byte prologue, then entries of a
 * 20-byte header: length, name offset, vector length, type, flags, units, variability,
 * data offset). */
static int created(const char *path)
{
	static char buf[1 << 16];
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	size_t len = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	uint32_t off, n, elen, noff, doff;
	if (len < 32)
		return -1;
	memcpy(&off, buf + 24, 4);
	memcpy(&n, buf + 28, 4);
	for (uint32_t i = 0; i < n && off + 20 <= len; i++, off += elen) {
		memcpy(&elen, buf + off, 4);
		memcpy(&noff, buf + off + 4, 4);
		memcpy(&doff, buf + off + 16, 4);
		if (elen < 20 || off + elen > len || noff >= elen || doff + 8 > elen)
			return -1;
		if (!memchr(buf + off + noff, 0, elen - noff) || strcmp(buf + off + noff, "sun.rt.createVmEndTime"))
			continue;
		int64_t v;
		memcpy(&v, buf + off + doff, 8);
		return v != 0;
	}
	return -1;
}

int main(int argc, char **argv)
{
	tu_require_fixtures();
	REQUIRE_ROOT();
	bool jdk17;
	const char *java = tu_jdk_from_args(argc, argv, &jdk17);
	char *dir = tu_tmpdir("attachyoung");
	char out[600], stop[600], agent[700], sess[600], hs[600], pidarg[16], log[16384];

	snprintf(out, sizeof(out), "%s/out", dir);
	snprintf(stop, sizeof(stop), "%s/stop", dir);
	snprintf(agent, sizeof(agent), "-agentpath:%s=3000", SLOWSTART_SO);
	char *jargv[] = { (char *)java, agent, "-cp", VIPROF_JAVA_CLASSES, "LateAttach", "60", "7", stop, NULL };
	pid_t jvm = run_start(jargv, out, out);
	if (!tu_wait_for(out, "slowstart: holding", 30000))
		FAIL("the JVM did not reach its start phase's hold within 30 s: %s", tu_read(out));
	run_wait_state(jvm, SIGQUIT, 15000, "catching SIGQUIT (attachable)");
	snprintf(hs, sizeof(hs), "/tmp/hsperfdata_root/%d", (int)jvm);
	int c = created(hs);
	if (c != 0) {
		kill(jvm, SIGKILL);
		SKIP("the JVM's perf data %s says %s: the window before its live phase is not there to test", hs,
		     c > 0 ? "it finished creating itself already" : "nothing readable");
	}
	/* A stale /tmp/.java_pid<pid> of an earlier JVM of this pid is no socket (test-attach). */
	snprintf(sess, sizeof(sess), "%s/sess", dir);
	snprintf(pidarg, sizeof(pidarg), "%d", (int)jvm);
	char *rargv[] = { VIPROF_BIN, "record", "-q", "-p", pidarg, "-d", "6", "-o", sess, NULL };
	int rc = run_logged(dir, rargv, log, sizeof(log), 120);
	fprintf(stderr, "record -p of a JVM in its start phase: exit %d\n%s", rc, log);
	ASSERT_EQ(rc, 0);
	char jit[700], *o = tu_read(out);
	snprintf(jit, sizeof(jit), "%s/jit/%d", sess, (int)jvm);
	char err[512];
	struct vp_codemap *m = vp_codemap__load_dir(jit, err, sizeof(err));
	if (!m)
		FAIL("no code map of the JVM in %s (%s); the JVM said:\n%s", jit, err, o);
	ASSERT_TRUE(m->flags & VP_CM_META_LATE_ATTACH);
	bool loop = false;
	for (size_t i = 0; i < m->nmethods; i++)
		loop |= !strcmp(m->methods[i].name, "LateAttach.lateHotLoop(long)");
	fprintf(stderr, "code map: %zu methods, %zu stubs, lateHotLoop %s\n", m->nmethods, m->nblobs,
		loop ? "named" : "missing");
	ASSERT_TRUE(m->nblobs > 0);
	ASSERT_TRUE(loop);
	ASSERT_TRUE(!strstr(o, "GetEnv"));
	vp_codemap__free(m);
	free(o);
	tu_touch(stop);
	ASSERT_EQ(run_wait(jvm, 60), 7);
	tu_rm_rf(dir);
	return 0;
}
