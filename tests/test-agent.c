/* The JVMTI agent run directly (no recorder) under JDK 17 and, when installed, JDK 25:
 * JitSplit's hot methods appear with readable names, signatures, source files and
 * inlining; GCs make epochs; the interpreter and stubs are named; -XX:+PreserveFramePointer
 * is detected; an unwritable directory costs one warning and nothing else. */
#include "test-agent-util.h"

#include "maps/codemap.h"
#include "maps/codemap_format.h"
#include "maps/jit_index.h"
#include "postproc/profile.h"

static const struct vp_cm_method_info *find_method(const struct vp_codemap *m, const char *name)
{
	for (size_t i = 0; i < m->nmethods; i++)
		if (!strcmp(m->methods[i].name, name))
			return &m->methods[i];
	return NULL;
}

static void check_jitsplit(const char *java, bool fp)
{
	char *dir = tu_tmpdir("agent");
	char opt[600], out[600], err[600], piddir[600];
	snprintf(opt, sizeof(opt), "-agentpath:%s=dir=%s", VIPROF_AGENT_SO, dir);
	snprintf(out, sizeof(out), "%s/out", dir);
	snprintf(err, sizeof(err), "%s/err", dir);
	char *argv[] = { (char *)java, fp ? "-XX:+PreserveFramePointer" : "-XX:-PreserveFramePointer", opt,
			 "-cp", VIPROF_JAVA_CLASSES, "JitSplit", "3", "3", NULL };
	pid_t pid = run_start(argv, out, err);
	ASSERT_EQ(run_wait(pid, 60), 3);
	char *errs = tu_read(err);
	ASSERT_EQ(tu_count_lines(errs, "viprof agent"), 0);
	free(errs);
	/* The out and err files sit next to the pid directory: look for the pid itself. */
	snprintf(piddir, sizeof(piddir), "%s/%d", dir, (int)pid);

	char e[512] = "";
	struct vp_codemap *m = vp_codemap__load_dir(piddir, e, sizeof(e));
	if (!m)
		FAIL("%s", e);
	ASSERT_FALSE(m->truncated);
	ASSERT_EQ(m->pid, pid);
	ASSERT_EQ(!!(m->flags & VP_CM_META_FRAME_POINTERS), fp);
	ASSERT_EQ(!!(m->flags & VP_CM_META_LATE_ATTACH), 0);
	ASSERT_CONTAINS(m->vm, "VM");
	ASSERT_EQ(m->epochs[0].reason, VP_EPOCH_START);
	fprintf(stderr, "%s: %zu methods, %zu epochs, %zu stubs, %zu inlinings\n", java, m->nmethods, m->nepochs,
		m->nblobs, m->ninlines);

	static const char *hot[] = { "JitSplit.hotA(long)", "JitSplit.hotB(long)", "JitSplit.hotC(long)" };
	for (int i = 0; i < 3; i++) {
		const struct vp_cm_method_info *x = find_method(m, hot[i]);
		if (!x)
			FAIL("no METHOD_LOAD for %s", hot[i]);
		ASSERT_GT(x->size, 0);
		/* METHOD_LOAD2 takes its name from the METHOD_NAME of its method id; the class
		 * signature and bare signature are not recorded (the readable name has both). */
		const struct vp_cm_name_info *ni = vp_codemap__name(m, x->method_id);
		ASSERT_NOT_NULL(ni);
		ASSERT_STREQ(ni->name, hot[i]);
		ASSERT_STREQ(x->klass, "");
		ASSERT_STREQ(ni->file, "JitSplit.java");
		ASSERT_GT(ni->nlines, 0);
	}
	if (!fp) {
		/* Three seconds of allocation make GCs, and GCs after new code make epochs. */
		bool gc = false;
		for (size_t i = 0; i < m->nepochs; i++)
			gc |= m->epochs[i].reason == VP_EPOCH_GC;
		ASSERT_TRUE(gc);
		for (size_t i = 0; i < m->nepochs; i++)
			ASSERT_TRUE(m->epochs[i].ended);
	}

	/* Inlining: the compiled method itself is the outermost frame of every pc, and
	 * alloc() is inlined into some hot method with a source line. */
	ASSERT_GT(m->ninlines, 0);
	bool alloc_inlined = false;
	for (size_t i = 0; i < m->nmethods; i++) {
		const struct vp_cm_method_info *x = &m->methods[i];
		if (x->inl < 0)
			continue;
		const struct vp_cm_inline_info *in = &m->inlines[x->inl];
		for (uint32_t k = 0; k < in->npcs; k++) {
			const struct vp_cm_pc *pc = &in->pcs[k];
			ASSERT_UEQ(in->frames[pc->first + pc->depth - 1].method_id, x->method_id);
			if (strncmp(x->name, "JitSplit.hot", 12) || pc->depth < 2)
				continue;
			const struct vp_cm_name_info *ni = vp_codemap__name(m, in->frames[pc->first].method_id);
			if (ni && !strcmp(ni->name, "JitSplit.alloc(int)") &&
			    vp_codemap__line(ni, in->frames[pc->first].bci) > 0)
				alloc_inlined = true;
		}
	}
	ASSERT_TRUE(alloc_inlined);

	/* The index names hot code, inlined frames first, and the interpreter. */
	struct vp_jit_index *xi = vp_jit_index__open(piddir, e, sizeof(e));
	ASSERT_NOT_NULL(xi);
	ASSERT_EQ(vp_jit_index__frame_pointers(xi), fp);
	struct vp_jit_frame f[32];
	bool saw_inlined = false;
	for (size_t i = 0; i < m->nmethods; i++) {
		const struct vp_cm_method_info *x = &m->methods[i];
		if (strncmp(x->name, "JitSplit.hot", 12))
			continue;
		for (uint32_t off = 0; off < x->size; off += 4) {
			int n = vp_jit_index__resolve(xi, x->start + off, x->load_time + 1000, false, f, 32);
			ASSERT_GT(n, 0);
			ASSERT_STREQ(f[n - 1].name, x->name);
			ASSERT_EQ(f[n - 1].layer, VP_LAYER_JIT);
			for (int k = 0; k + 1 < n; k++)
				ASSERT_EQ(f[k].layer, VP_LAYER_INLINED);
			saw_inlined |= n > 1;
		}
	}
	ASSERT_TRUE(saw_inlined);
	const struct vp_cm_blob_info *interp = NULL;
	for (size_t i = 0; i < m->nblobs; i++)
		if (!strcmp(m->blobs[i].name, "Interpreter"))
			interp = &m->blobs[i];
	ASSERT_NOT_NULL(interp);
	ASSERT_EQ(interp->kind, VP_BLOB_INTERPRETER);
	ASSERT_EQ(vp_jit_index__resolve(xi, interp->start + interp->size / 2, m->created_ns + 1, false, f, 32), 1);
	ASSERT_EQ(f[0].layer, VP_LAYER_INTERPRETED);
	ASSERT_GT(m->nblobs, 50); /* StubRoutines, adapters, ... */

	vp_jit_index__close(xi);
	vp_codemap__free(m);
	tu_rm_rf(dir);
}

/* A directory under a regular file cannot be created, even by root: the JVM must print
 * one line and run to its own exit code. */
static void check_unwritable(const char *java)
{
	char *dir = tu_tmpdir("agentbad");
	char file[600], opt[700], err[600], out[600];
	snprintf(file, sizeof(file), "%s/plain-file", dir);
	FILE *f = fopen(file, "w");
	ASSERT_NOT_NULL(f);
	fclose(f);
	snprintf(opt, sizeof(opt), "-agentpath:%s=dir=%s/maps", VIPROF_AGENT_SO, file);
	snprintf(out, sizeof(out), "%s/out", dir);
	snprintf(err, sizeof(err), "%s/err", dir);
	char *argv[] = { (char *)java, opt, "-cp", VIPROF_JAVA_CLASSES, "JitSplit", "0.5", "3", NULL };
	ASSERT_EQ(run_argv(argv, out, err, 60), 3);
	char *errs = tu_read(err), *outs = tu_read(out);
	ASSERT_EQ(tu_count_lines(errs, "viprof agent"), 1);
	ASSERT_EQ(tu_count_lines(errs, "\n"), 1);
	ASSERT_CONTAINS(errs, "JIT frames will not be named");
	ASSERT_CONTAINS(errs, "Not a directory");
	ASSERT_CONTAINS(outs, "JitSplit hotA");
	free(errs);
	free(outs);
	tu_rm_rf(dir);
}

/* -XX:+PreserveFramePointer given through JAVA_TOOL_OPTIONS (as the recorder does) is seen. */
static void check_tool_options(const char *java)
{
	char *dir = tu_tmpdir("agentenv");
	char opt[600], piddir[600], e[512];
	snprintf(opt, sizeof(opt), "-agentpath:%s=dir=%s", VIPROF_AGENT_SO, dir);
	setenv("JAVA_TOOL_OPTIONS", "-XX:+PreserveFramePointer", 1);
	char *argv[] = { (char *)java, opt, "-cp", VIPROF_JAVA_CLASSES, "JitSplit", "0.3", "3", NULL };
	pid_t pid = run_start(argv, NULL, NULL);
	unsetenv("JAVA_TOOL_OPTIONS");
	ASSERT_EQ(run_wait(pid, 60), 3);
	snprintf(piddir, sizeof(piddir), "%s/%d", dir, (int)pid);
	struct vp_codemap *m = vp_codemap__load_dir(piddir, e, sizeof(e));
	if (!m)
		FAIL("%s", e);
	ASSERT_TRUE(m->flags & VP_CM_META_FRAME_POINTERS);
	vp_codemap__free(m);
	tu_rm_rf(dir);
}

/* Whether the map in piddir holds a compiled JitSplit.hot* method (flushed by the agent
 * thread, about every second). */
static bool hot_flushed(void *piddir)
{
	char e[512];
	struct vp_codemap *m = vp_codemap__load_dir(piddir, e, sizeof(e));
	bool hot = false;

	for (size_t i = 0; m && i < m->nmethods; i++)
		hot |= !strncmp(m->methods[i].name, "JitSplit.hot", 12);
	vp_codemap__free(m);
	return hot;
}

/* A JVM killed with SIGKILL leaves a map readable up to its last complete chunk. */
static void check_killed(const char *java)
{
	char *dir = tu_tmpdir("agentkill");
	char opt[600], piddir[600], e[512];
	snprintf(opt, sizeof(opt), "-agentpath:%s=dir=%s", VIPROF_AGENT_SO, dir);
	char *argv[] = { (char *)java, opt, "-cp", VIPROF_JAVA_CLASSES, "JitSplit", "30", NULL };
	pid_t pid = run_start(argv, NULL, NULL);
	snprintf(piddir, sizeof(piddir), "%s/%d", dir, (int)pid);
	tu_wait_until(hot_flushed, piddir, 60, "the hot methods compiled and in the map");
	ASSERT_OK(kill(pid, SIGKILL));
	waitpid(pid, NULL, 0);
	struct vp_codemap *m = vp_codemap__load_dir(piddir, e, sizeof(e));
	if (!m)
		FAIL("map of a killed JVM unreadable: %s", e);
	ASSERT_GT(m->nmethods, 10);
	bool hot = false;
	for (size_t i = 0; i < m->nmethods; i++)
		hot |= !strncmp(m->methods[i].name, "JitSplit.hot", 12);
	ASSERT_TRUE(hot);
	ASSERT_FALSE(m->epochs[m->nepochs - 1].ended && m->truncated);
	vp_codemap__free(m);
	tu_rm_rf(dir);
}

int main(int argc, char **argv)
{
	tu_require_fixtures();
	bool jdk17;
	const char *java = tu_jdk_from_args(argc, argv, &jdk17);
	check_jitsplit(java, false);
	check_jitsplit(java, true);
	check_unwritable(java);
	check_tool_options(java);
	check_killed(java);
	return 0;
}
