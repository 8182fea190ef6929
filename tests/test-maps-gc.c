/* Which GC ended each code-map epoch (issue 26): CodeReuse compiles a new class per
 * generation and calls System.gc(). Under G1 and Serial that is a full collection, with
 * -XX:+ExplicitGCInvokesConcurrent a young one that starts a concurrent cycle; the agent's
 * GC records must say so, with the collector's name and growing collection counts, and
 * 'viprof maps' must print them. JDK 17 and Temurin 25 (argv[1]). No recorder needed: the
 * agent is loaded with -agentpath. */
#include "test-agent-util.h"

#include "maps/codemap.h"
#include "maps/codemap_format.h"

/* Runs CodeReuse with the agent and extra JVM options; returns its code map. */
static struct vp_codemap *run(const char *java, const char *gc_opt, char **dirp, char *piddir, size_t len)
{
	char *dir = tu_tmpdir("mapsgc");
	char opt[600], out[600], why[512];
	snprintf(opt, sizeof(opt), "-agentpath:%s=dir=%s", VIPROF_AGENT_SO, dir);
	snprintf(out, sizeof(out), "%s/out", dir);
	char *argv[] = { (char *)java, (char *)gc_opt, opt, "-cp", VIPROF_JAVA_CLASSES, "CodeReuse", "4", "0.3", NULL };
	pid_t pid = run_start(argv, out, NULL);
	ASSERT_EQ(run_wait(pid, 90), 0);
	snprintf(piddir, len, "%s/%d", dir, (int)pid);
	struct vp_codemap *m = vp_codemap__load_dir(piddir, why, sizeof(why));
	if (!m)
		FAIL("%s", why);
	*dirp = dir;
	return m;
}

/* GC epochs of kind, all of collector name; the collection counts grow. */
static int count_gcs(const struct vp_codemap *m, uint8_t kind, const char *name)
{
	int n = 0, any = 0;
	uint32_t last = 0;
	for (size_t e = 1; e < m->nepochs; e++) {
		const struct vp_cm_epoch_info *ep = &m->epochs[e];
		if (ep->reason != VP_EPOCH_GC)
			continue;
		any++;
		if (!ep->gc_known)
			FAIL("epoch %zu began at a GC but the map does not say which", e);
		ASSERT_STREQ(ep->gc_name, name);
		/* A pause of a concurrent cycle (G1's remark or cleanup) moves no collection
		 * counter: it keeps the id of the collection before it, and says so by kind. */
		if (ep->gc_id < last || (ep->gc_id == last && ep->gc_kind != VP_GC_CONCURRENT))
			FAIL("epoch %zu: GC id %u (kind %u) after id %u", e, ep->gc_id, ep->gc_kind, last);
		ASSERT_GE(ep->gc_count, 1);
		last = ep->gc_id;
		n += ep->gc_kind == kind;
	}
	ASSERT_GE(any, 3);   /* four generations, each compiled before its System.gc() */
	return n;
}

static void check_cli(const char *piddir, const char *want)
{
	char out[700], cmd[4096];
	snprintf(out, sizeof(out), "%s.list", piddir);
	snprintf(cmd, sizeof(cmd), "%s maps %s list > %s 2>&1 && %s maps %s show 1 >> %s 2>&1 && %s maps %s timeline >> %s 2>&1",
		 VIPROF_BIN, piddir, out, VIPROF_BIN, piddir, out, VIPROF_BIN, piddir, out);
	ASSERT_EQ(run_sh(cmd, 230), 0);
	char *o = tu_read(out);
	ASSERT_CONTAINS(o, "ended-by");
	ASSERT_CONTAINS(o, want);                      /* list and show */
	ASSERT_CONTAINS(o, "epoch 1 (gc: GC ");        /* show: the GC that began it */
	ASSERT_CONTAINS(o, "ended by GC (Y young, F full, C concurrent)");
	free(o);
}

int main(int argc, char **argv)
{
	tu_require_fixtures();
	bool jdk17;
	const char *java = tu_jdk_from_args(argc, argv, &jdk17);
	char *dir, piddir[700];

	struct vp_codemap *m = run(java, "-XX:+UseG1GC", &dir, piddir, sizeof(piddir));
	ASSERT_GE(count_gcs(m, VP_GC_FULL, "G1"), 3);
	check_cli(piddir, "(full, G1)");
	vp_codemap__free(m);
	tu_rm_rf(dir);

	m = run(java, "-XX:+UseSerialGC", &dir, piddir, sizeof(piddir));
	ASSERT_GE(count_gcs(m, VP_GC_FULL, "Serial"), 3);
	vp_codemap__free(m);
	tu_rm_rf(dir);

	/* System.gc() starts a concurrent cycle with a young pause: no full collection. */
	m = run(java, "-XX:+ExplicitGCInvokesConcurrent", &dir, piddir, sizeof(piddir));
	ASSERT_GE(count_gcs(m, VP_GC_YOUNG, "G1"), 1);
	ASSERT_EQ(count_gcs(m, VP_GC_FULL, "G1"), 0);
	check_cli(piddir, "(young, G1)");
	vp_codemap__free(m);
	tu_rm_rf(dir);
	printf("ok\n");
	return 0;
}
