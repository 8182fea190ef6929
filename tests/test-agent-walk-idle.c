/* The agent paces its code-heap walks by the JVM's own CPU (jvm-agent/walk.c,
 * WALK_DUTY): after a walk the next one waits until the JVM has used 400 times that
 * walk's CPU. A JVM that compiles a little and then idles never pays that much, so
 * without the time bound (SCAN_MAX_MS) its last code would reach the map only when the
 * JVM ends, and a recording of a quiet service would lose its names if the JVM is
 * killed. IdleJit sleeps, compiles idleHot with a few ms of CPU, prints "burst" and
 * sleeps again; its load must be in the map on disk within a few seconds, while the
 * JVM still runs. On JDK 17 and JDK 25. */
#include "test-agent-util.h"

#include "maps/codemap.h"

struct idle {
	const char *out, *piddir;
};

static bool burst_done(void *ctx)
{
	const struct idle *x = ctx;
	char *o = tu_read(x->out);
	bool done = strstr(o, "burst") != NULL;
	free(o);
	return done;
}

/* Is a load of IdleJit.idleHot in the map as written so far? */
static bool hot_loaded(void *ctx)
{
	const struct idle *x = ctx;
	char e[512] = "";
	struct vp_codemap *m = vp_codemap__load_dir(x->piddir, e, sizeof(e));
	bool found = false;

	if (!m)
		return false;
	for (size_t i = 0; i < m->nmethods && !found; i++) {
		const struct vp_cm_name_info *ni = vp_codemap__name(m, m->methods[i].method_id);
		found = ni && !strncmp(ni->name, "IdleJit.idleHot", 15);
	}
	vp_codemap__free(m);
	return found;
}

int main(int argc, char **argv)
{
	bool jdk17;
	const char *java = tu_jdk_from_args(argc, argv, &jdk17);
	tu_require_fixtures();
	char *dir = tu_tmpdir("walkidle");
	char opt[700], out[600], err[600], piddir[600];
	snprintf(opt, sizeof(opt), "-agentpath:%s=dir=%s", VIPROF_AGENT_SO, dir);
	snprintf(out, sizeof(out), "%s/out", dir);
	snprintf(err, sizeof(err), "%s/err", dir);
	/* Level 3 (C1 with profiling) only: one quick compile, no C2 burst of CPU. */
	char *jargv[] = { (char *)java, opt, "-XX:TieredStopAtLevel=3", "-cp", VIPROF_JAVA_CLASSES, "IdleJit", "60", NULL };
	pid_t pid = run_start(jargv, out, err);
	snprintf(piddir, sizeof(piddir), "%s/%d", dir, (int)pid);
	struct idle x = { out, piddir };
	tu_wait_until(burst_done, &x, 60, "IdleJit's burst");
	/* 0.8 s to the walk, 1 s to the next chunk, and room for a busy machine. */
	tu_wait_until(hot_loaded, &x, 20, "IdleJit.idleHot's load in the map of a JVM that idles after compiling it");
	kill(pid, SIGKILL);
	int code;
	run_reap(pid, 10000, &code);
	return 0;
}
