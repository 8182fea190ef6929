/* Dynamic attach: the agent loaded into a running LateAttach JVM (JDK 17 through the
 * library, JDK 25 through `viprof attach`) replays the code compiled before it came; a JVM
 * with -XX:+DisableAttachMechanism gets a clear error and runs on to its own exit code;
 * a process that is not a JVM is refused. */
#include "test-agent-util.h"

#include "recorder/jvm_attach.h"
#include "maps/codemap.h"
#include "maps/codemap_format.h"

/* LateAttach runs its hot loop until dir/stop exists (60 s at most), then exits 7. */
static char *stop_path(const char *dir, char *stop, size_t len)
{
	snprintf(stop, len, "%s/stop", dir);
	return stop;
}

/* Waits until the LateAttach JVM writing to out is running and HotSpot has compiled its
 * hot loop (-XX:+PrintCompilation names it), so that the attach has compiled code to
 * replay. */
static void wait_hot(const char *out)
{
	if (!tu_wait_for(out, "LateAttach::lateHotLoop", 30000))
		FAIL("LateAttach (%s) did not compile its hot loop within 30 s", out);
}

/* Ends the LateAttach JVM of dir (its stop file) and returns its exit code. */
static int stop_late(const char *dir, pid_t pid)
{
	char stop[600];

	tu_touch(stop_path(dir, stop, sizeof(stop)));
	return run_wait(pid, 60);
}

static pid_t start_late(const char *java, const char *dir, bool disable)
{
	char out[600], stop[600];
	snprintf(out, sizeof(out), "%s/out", dir);
	char *argv[] = { (char *)java, disable ? "-XX:+DisableAttachMechanism" : "-Xshare:auto", "-XX:+PrintCompilation",
			 "-cp", VIPROF_JAVA_CLASSES, "LateAttach", "60", "7", stop_path(dir, stop, sizeof(stop)), NULL };
	pid_t pid = run_start(argv, out, NULL);
	wait_hot(out);
	ASSERT_TRUE(vp_jvm__is_hotspot(pid));
	return pid;
}

static void check_maps(const char *dir, pid_t pid)
{
	char piddir[600], err[512];
	snprintf(piddir, sizeof(piddir), "%s/%d", dir, (int)pid);
	/* The agent thread flushes about once a second. */
	struct vp_codemap *m = NULL;
	for (int i = 0; i < 50 && !m; i++) {
		m = vp_codemap__load_dir(piddir, err, sizeof(err));
		if (m && m->nmethods == 0) {
			vp_codemap__free(m);
			m = NULL;
		}
		if (!m)
			usleep(100000);
	}
	if (!m)
		FAIL("no code map after attach: %s", err);
	ASSERT_EQ(m->pid, pid);
	ASSERT_TRUE(m->flags & VP_CM_META_LATE_ATTACH);
	ASSERT_EQ(m->epochs[0].reason, VP_EPOCH_ATTACH);
	bool loop = false;
	for (size_t i = 0; i < m->nmethods; i++)
		loop |= !strcmp(m->methods[i].name, "LateAttach.lateHotLoop(long)");
	ASSERT_TRUE(loop);
	bool interp = false;
	for (size_t i = 0; i < m->nblobs; i++)
		interp |= !strcmp(m->blobs[i].name, "Interpreter");
	ASSERT_TRUE(interp); /* DynamicCodeGenerated replayed too */
	fprintf(stderr, "attached: %zu methods, %zu stubs replayed\n", m->nmethods, m->nblobs);
	vp_codemap__free(m);
}

/* Temurin 25 through the command. */
static void attach_cmd(const char *java)
{
	char *dir = tu_tmpdir("attach25");
	pid_t pid = start_late(java, dir, false);
	char spid[16], out[600];
	snprintf(spid, sizeof(spid), "%d", (int)pid);
	snprintf(out, sizeof(out), "%s/attach-out", dir);
	char *argv[] = { VIPROF_BIN, "attach", spid, "--dir", dir, NULL };
	ASSERT_EQ(run_argv(argv, out, NULL, 30), 0);
	char *o = tu_read(out);
	ASSERT_CONTAINS(o, "viprof agent loaded");
	free(o);
	check_maps(dir, pid);
	ASSERT_EQ(stop_late(dir, pid), 7);
	tu_rm_rf(dir);
}

int main(int argc, char **argv)
{
	tu_require_fixtures();
	REQUIRE_ROOT(); /* the JVMs run as us anyway; root also exercises the uid switch */
	bool jdk17;
	const char *j17 = tu_jdk_from_args(argc, argv, &jdk17);
	if (!jdk17) {
		attach_cmd(j17);
		return 0;
	}
	char err[1024], opt[600];

	/* Not a JVM: refused before anything is sent. */
	ASSERT_EQ(vp_jvm__attach(getpid(), VIPROF_AGENT_SO, "dir=/tmp", err, sizeof(err)), -ESRCH);
	ASSERT_CONTAINS(err, "not a HotSpot JVM");

	/* JDK 17 through the library. */
	char *dir = tu_tmpdir("attach");
	pid_t pid = start_late(j17, dir, false);
	snprintf(opt, sizeof(opt), "dir=%s", dir);
	int r = vp_jvm__attach(pid, VIPROF_AGENT_SO, opt, err, sizeof(err));
	if (r)
		FAIL("attach: %s", err);
	check_maps(dir, pid);
	/* Another uid may not attach to this (root's) JVM: refused by name, before any signal. */
	pid_t ch = fork();
	if (ch == 0) {
		char e2[1024] = "";
		if (setgid(65534) || setuid(65534))
			_exit(3);
		int rr = vp_jvm__attach(pid, VIPROF_AGENT_SO, opt, e2, sizeof(e2));
		_exit(rr == -EPERM && strstr(e2, "run viprof as that user or as root") ? 0 : 1);
	}
	ASSERT_EQ(run_wait(ch, 30), 0);
	/* A second attach starts a new map (codemap.1.vpm in the same directory here). */
	ASSERT_OK(vp_jvm__attach(pid, VIPROF_AGENT_SO, opt, err, sizeof(err)));
	ASSERT_EQ(stop_late(dir, pid), 7);
	tu_rm_rf(dir);

	/* Attach refused: clear error, the JVM keeps running to its own exit code. Its
	 * -XX:+DisableAttachMechanism is on its command line: refused without a signal
	 * (issue 22; the flag from an @argfile is test-serve-jvms' case). */
	dir = tu_tmpdir("attachoff");
	pid = start_late(j17, dir, true);
	r = vp_jvm__attach(pid, VIPROF_AGENT_SO, "dir=/tmp/vp-never", err, sizeof(err));
	ASSERT_EQ(r, -EPERM);
	ASSERT_CONTAINS(err, "DisableAttachMechanism");
	ASSERT_EQ(kill(pid, 0), 0);
	ASSERT_EQ(stop_late(dir, pid), 7);
	tu_rm_rf(dir);

	/* A JVM of another user (nobody): root attaches as that user (the JVM checks the
	 * peer's uid), and the maps belong to that user. */
	if (access("/usr/bin/setpriv", X_OK) == 0) {
		dir = tu_tmpdir("attachuid");
		ASSERT_OK(chmod(dir, 01777));
		char out[600], stop[600];
		snprintf(out, sizeof(out), "%s/out", dir);
		char *argv[] = { "/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", (char *)j17,
				 "-XX:+PrintCompilation", "-cp", VIPROF_JAVA_CLASSES, "LateAttach", "60", "7",
				 stop_path(dir, stop, sizeof(stop)), NULL };
		pid_t sp = run_start(argv, out, NULL);
		wait_hot(out);
		tu_drop_stale_attach_socket(sp, 65534);
		/* setpriv execs java: same pid. */
		ASSERT_TRUE(vp_jvm__is_hotspot(sp));
		snprintf(opt, sizeof(opt), "dir=%s/maps", dir);
		if (vp_jvm__attach(sp, VIPROF_AGENT_SO, opt, err, sizeof(err)))
			FAIL("attach to nobody's JVM: %s", err);
		char mdir[700], mfile[800];
		snprintf(mdir, sizeof(mdir), "%s/maps", dir);
		check_maps(mdir, sp);
		snprintf(mfile, sizeof(mfile), "%s/%d/codemap.vpm", mdir, (int)sp);
		struct stat st;
		ASSERT_OK(stat(mfile, &st));
		ASSERT_EQ(st.st_uid, 65534);
		ASSERT_EQ(st.st_mode & 0777, 0600);
		ASSERT_EQ(stop_late(dir, sp), 7);
		tu_rm_rf(dir);
	} else {
		fprintf(stderr, "note: no /usr/bin/setpriv; attach to another user's JVM not tested\n");
	}

	/* A JVM in its own pid namespace (pid 1 there): attach finds it by NSpid, and its
	 * maps are filed under the pid it sees itself as. */
	if (access("/usr/bin/unshare", X_OK) == 0) {
		dir = tu_tmpdir("attachns");
		char out[600], kids[128], stop[600];
		snprintf(out, sizeof(out), "%s/out", dir);
		char *argv[] = { "/usr/bin/unshare", "--pid", "--fork", "--mount-proc", (char *)j17, "-XX:+PrintCompilation",
				 "-cp", VIPROF_JAVA_CLASSES, "LateAttach", "60", "7", stop_path(dir, stop, sizeof(stop)),
				 NULL };
		pid_t up = run_start(argv, out, NULL);
		wait_hot(out);
		/* The JVM is unshare's child: find it by its parent. */
		pid_t jp = 0;
		DIR *pd = opendir("/proc");
		struct dirent *de;
		while (pd && !jp && (de = readdir(pd))) {
			int cand = atoi(de->d_name);
			if (cand <= 0)
				continue;
			snprintf(kids, sizeof(kids), "/proc/%d/stat", cand);
			char *st = tu_read(kids), *rp = strrchr(st, ')');
			int ppid = 0;
			if (rp && sscanf(rp + 2, "%*c %d", &ppid) == 1 && ppid == up)
				jp = cand;
			free(st);
		}
		if (pd)
			closedir(pd);
		ASSERT_GT(jp, 0);
		ASSERT_TRUE(vp_jvm__is_hotspot(jp));
		snprintf(opt, sizeof(opt), "dir=%s", dir);
		if (vp_jvm__attach(jp, VIPROF_AGENT_SO, opt, err, sizeof(err)))
			FAIL("attach to a JVM in a pid namespace: %s", err);
		check_maps(dir, 1);
		ASSERT_EQ(stop_late(dir, up), 7);
		tu_rm_rf(dir);
	} else {
		fprintf(stderr, "note: no /usr/bin/unshare; attach across pid namespaces not tested\n");
	}

	/* The agent fails inside the JVM (its directory cannot be made): the attach says so,
	 * the JVM prints one line and runs on. HotSpot unloads an agent whose Agent_OnAttach
	 * failed, so a later attach with a good directory starts afresh and works. */
	dir = tu_tmpdir("attachbad");
	pid = start_late(j17, dir, false);
	snprintf(opt, sizeof(opt), "dir=%s/out/maps", dir); /* "out" is a regular file */
	r = vp_jvm__attach(pid, VIPROF_AGENT_SO, opt, err, sizeof(err));
	ASSERT_EQ(r, -ENOEXEC);
	ASSERT_CONTAINS(err, "agent failed to start");
	snprintf(opt, sizeof(opt), "dir=%s", dir);
	if (vp_jvm__attach(pid, VIPROF_AGENT_SO, opt, err, sizeof(err)))
		FAIL("attach after a failed one: %s", err);
	check_maps(dir, pid);
	ASSERT_EQ(stop_late(dir, pid), 7);
	tu_rm_rf(dir);

	return 0;
}
