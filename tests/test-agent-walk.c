/* The agent's code loads come from walking HotSpot's code heaps (jvm-agent/codeheap.c),
 * not from CompiledMethodLoad. Checked two ways, on JDK 17 and JDK 25:
 *  - scancheck: javac compiles the Java fixtures with CompiledMethodLoad on, and the
 *    agent looks each event's code up in the heap and decodes its debug information as a
 *    walk would; every load must be found, with the same code range, method and, pc by
 *    pc, the same inlined scopes (methods and bcis) as HotSpot's own inline record.
 *  - the default: a walked map says so in its header (jit=events does not), every
 *    compiled method's Method* is named, and JitSplit's hot methods come with lines. */
#include "test-agent-util.h"

#include "maps/codemap.h"
#include "maps/codemap_format.h"

static void scancheck(const char *java)
{
	char javac[600], opt[700], err[600], outdir[600];
	char *dir = tu_tmpdir("walkchk");
	snprintf(javac, sizeof(javac), "%.*s/javac", (int)(strrchr(java, '/') - java), java);
	if (access(javac, X_OK))
		SKIP("no javac beside %s", java);
	snprintf(opt, sizeof(opt), "-J-agentpath:%s=dir=%s,scancheck", VIPROF_AGENT_SO, dir);
	snprintf(err, sizeof(err), "%s/err", dir);
	snprintf(outdir, sizeof(outdir), "%s/classes", dir);
	char *argv[] = { javac, opt, "-d", outdir, SRCDIR "/tests/java/CodeReuse.java", SRCDIR "/tests/java/JitSplit.java",
			 SRCDIR "/tests/java/InterpSplit.java", SRCDIR "/tests/java/Workers.java",
			 SRCDIR "/tests/java/LongNames.java", SRCDIR "/tests/java/LateAttach.java", NULL };
	ASSERT_EQ(run_argv(argv, NULL, err, 120), 0);
	char *e = tu_read(err);
	unsigned long long n = 0, same = 0, differ = 0, missing = 0;
	const char *l = strstr(e, "viprof agent: scan check: ");
	if (!l || sscanf(l, "viprof agent: scan check: %llu loads, %llu same, %llu differ, %llu not found", &n, &same,
			 &differ, &missing) != 4)
		FAIL("no scan check line in javac's stderr:\n%s", e);
	fprintf(stderr, "%s", l);
	/* javac compiles hundreds of its own methods (C1 and C2, with inlining). */
	ASSERT_GE((int64_t)n, 300);
	ASSERT_UEQ(differ, 0);
	ASSERT_UEQ(missing, 0);
	ASSERT_UEQ(same, n);
	free(e);
}

static const struct vp_codemap *load_map(const char *java, const char *extra, pid_t *pidp, char **errs)
{
	char *dir = tu_tmpdir("walk");
	char opt[700], err[600], piddir[600];
	snprintf(opt, sizeof(opt), "-agentpath:%s=dir=%s,stats%s", VIPROF_AGENT_SO, dir, extra);
	snprintf(err, sizeof(err), "%s/err", dir);
	char *argv[] = { (char *)java, opt, "-cp", VIPROF_JAVA_CLASSES, "JitSplit", "2", "2", NULL };
	pid_t pid = run_start(argv, NULL, err);
	ASSERT_EQ(run_wait(pid, 60), 2);
	snprintf(piddir, sizeof(piddir), "%s/%d", dir, (int)pid);
	char e[512] = "";
	struct vp_codemap *m = vp_codemap__load_dir(piddir, e, sizeof(e));
	if (!m)
		FAIL("%s", e);
	*pidp = pid;
	*errs = tu_read(err);
	return m;
}

static void walked(const char *java)
{
	pid_t pid;
	char *errs;
	const struct vp_codemap *m = load_map(java, "", &pid, &errs);
	ASSERT_TRUE(m->flags & VP_CM_META_CODE_WALK);
	unsigned long long walks = 0, loads = 0, unknown = 1;
	const char *l = strstr(errs, "viprof agent stats: code heap walks=");
	if (!l || sscanf(l, "viprof agent stats: code heap walks=%llu incomplete=%*u loads=%llu unloads=%*u "
			    "unknown_methods=%llu", &walks, &loads, &unknown) != 3)
		FAIL("no walk stats in the JVM's stderr:\n%s", errs);
	fprintf(stderr, "%.*s\n", (int)strcspn(l, "\n"), l);
	ASSERT_GE((int64_t)walks, 2);
	ASSERT_GE((int64_t)loads, 20);
	ASSERT_UEQ(unknown, 0);
	size_t named = 0;
	for (size_t i = 0; i < m->nmethods; i++) {
		const struct vp_cm_method_info *x = &m->methods[i];
		const struct vp_cm_name_info *ni = vp_codemap__name(m, x->method_id);
		ASSERT_NOT_NULL(ni);
		if (!strncmp(ni->name, "JitSplit.hot", 12)) {
			ASSERT_STREQ(ni->file, "JitSplit.java");
			ASSERT_GT(ni->nlines, 0);
			named++;
		}
	}
	ASSERT_GE((int64_t)named, 3);
	free(errs);

	/* jit=events: the old source, and the header says so. */
	const struct vp_codemap *ev = load_map(java, ",jit=events", &pid, &errs);
	ASSERT_FALSE(ev->flags & VP_CM_META_CODE_WALK);
	ASSERT_GT(ev->nmethods, 20);
	free(errs);
}

int main(int argc, char **argv)
{
	bool jdk17;
	const char *java = tu_jdk_from_args(argc, argv, &jdk17);
	tu_require_fixtures();
	scancheck(java);
	walked(java);
	return 0;
}
