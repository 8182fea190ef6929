/* JVMs in containers, recorded from the host (issue 22 item 1). A Workers JVM runs as
 * nobody in its own pid and mount namespace with a private tmpfs /tmp (made by
 * `unshare --pid --mount --fork --mount-proc`, what a container runtime makes), in a
 * cgroup named as Docker's systemd driver names one (docker-<64 hex>.scope) where the
 * unified hierarchy lets us make it. Recorded from the host, one scenario per ctest entry
 * and JDK (argv[1] 17|25, argv[2]):
 *   p:          record -g -p HOSTPID
 *   a:          record -g -a (the agent limited to this JVM with --jvm-attach)
 *   continuous: serve --continuous, 4 s intervals, the intervals after the first attach
 * Each must hold: >= 95% of the worker threads' samples named as Java methods, >= 95%
 * of them reaching Thread.run, the JVM labelled with its container (the cgroup's id, or
 * pidns-<inode> without one), a --container filter that keeps exactly its samples, and
 * nothing of viprof's left in the container's /tmp. */
#include "test-agent-util.h"
#include "test-profile.h"

#include <signal.h>
#include <sys/random.h>

#include "postproc/profile.h"
#include "postproc/session.h"

static char dir[256], cgdir[640], cid[65];
static pid_t jvm, outer;

/* The container's /tmp, listed (names joined by '\n', sorted by readdir order). */
static char *list_tmp(void)
{
	char path[64], *out = calloc(1, 8192);
	snprintf(path, sizeof(path), "/proc/%d/root/tmp", (int)jvm);
	DIR *d = opendir(path);
	struct dirent *de;
	ASSERT_NOT_NULL(out);
	ASSERT_NOT_NULL(d);
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		/* The JVM's own attach socket comes with the first attach. */
		if (!strncmp(de->d_name, ".java_pid", 9) || !strncmp(de->d_name, "hsperfdata_", 11))
			continue;
		strncat(out, de->d_name, 8000 - strlen(out));
		strcat(out, "\n");
	}
	closedir(d);
	return out;
}

/* A cgroup named as a runtime names a container's, with the JVM in it; "" if the
 * unified hierarchy is not there to make it in (the id is then the pid namespace's). */
static void make_cgroup(void)
{
	static const char *const roots[] = { "/sys/fs/cgroup/unified", "/sys/fs/cgroup" };
	unsigned char r[32];
	char path[600], procs[700], pid[16];
	struct stat st;

	ASSERT_EQ(getrandom(r, sizeof(r), 0), (ssize_t)sizeof(r));
	for (int i = 0; i < 32; i++)
		snprintf(cid + 2 * i, 3, "%02x", r[i]);
	for (size_t i = 0; i < 2 && !cgdir[0]; i++) {
		snprintf(path, sizeof(path), "%s/cgroup.procs", roots[i]);
		if (stat(path, &st))
			continue;
		snprintf(path, sizeof(path), "%s/viprof-test-docker-%s.scope", roots[i], cid);
		if (mkdir(path, 0755))
			continue;
		snprintf(procs, sizeof(procs), "%s/cgroup.procs", path);
		FILE *f = fopen(procs, "w");
		snprintf(pid, sizeof(pid), "%d", (int)jvm);
		bool ok = f && fputs(pid, f) >= 0;
		ok = f && !fclose(f) && ok;
		if (!ok) {
			rmdir(path);
			continue;
		}
		snprintf(cgdir, sizeof(cgdir), "%s", path);
	}
	if (!cgdir[0])
		cid[0] = '\0';
	fprintf(stderr, "cgroup: %s\n", cgdir[0] ? cgdir : "(none: the unified hierarchy is not writable here)");
}

struct share {
	double workers, named, run;
	bool labelled;
};

/* The worker threads' samples in one session: named (a Java frame at the leaf or under
 * native code the JVM called), and reaching Thread.run; and whether the JVM carries its
 * container and --container keeps exactly its samples. */
static struct share measure(const char *sess)
{
	char err[512], want[80];
	struct share r = { 0 };
	struct vp_session_opts o = { 0 };
	struct vp_profile *p = vp_profile__new();
	ASSERT_NOT_NULL(p);
	if (vp_session__load(sess, p, &o, err, sizeof(err)))
		FAIL("load %s: %s", sess, err);
	const struct vp_proc_container *c = vp_profile__container(p, (uint32_t)jvm);
	if (cid[0])
		snprintf(want, sizeof(want), "%s", cid);
	r.labelled = c && (cid[0] ? !strcmp(c->c.id, want) : !strncmp(c->c.id, "pidns-", 6)) && c->nspid == 1;
	char id[80] = "";
	if (c)
		snprintf(id, sizeof(id), "%s", c->c.id);   /* c goes with p */
	fprintf(stderr, "%s: JVM %d container %s (nspid %u, cgroup %s)\n", sess, (int)jvm, c ? c->c.id : "(none)",
		c ? c->nspid : 0, c ? c->cgroup : "-");
	double jvm_all = tp_sum(p, &(struct tp_filter){ .pid = (uint32_t)jvm }, NULL, TP_EXACT, NULL);
	const struct tp_filter workers = { .pid = (uint32_t)jvm, .comm_prefix = "worker-" };
	r.workers = tp_sum_if(p, &workers, tp_has_java, NULL, &r.named);
	tp_sum(p, &workers, "java.lang.Thread.run()", TP_EXACT, &r.run);
	vp_profile__free(p);
	/* The filter: the container's id keeps the JVM's samples and nothing else. */
	if (id[0]) {
		struct vp_session_opts fo = { .container = id };
		p = tp_load(sess, &fo);
		double all = tp_sum(p, &(struct tp_filter){ 0 }, NULL, TP_EXACT, NULL);
		double kept = tp_sum(p, &(struct tp_filter){ .pid = (uint32_t)jvm }, NULL, TP_EXACT, NULL), other = all - kept;
		vp_profile__free(p);
		fprintf(stderr, "--container %.12s: %.0f of the JVM's %.0f samples, %.0f of others\n", id, kept,
			jvm_all, other);
		r.labelled = r.labelled && kept == jvm_all && other == 0;
	}
	fprintf(stderr, "%s: %.0f worker samples, %.1f%% named, %.1f%% reach Thread.run\n", sess, r.workers,
		r.workers ? 100 * r.named / r.workers : 0, r.workers ? 100 * r.run / r.workers : 0);
	return r;
}

static void cleanup(void)
{
	if (outer > 0) {
		kill(outer, SIGKILL);   /* the namespace's init: its end kills the JVM too */
		waitpid(outer, NULL, 0);
	}
	if (jvm > 0)
		kill(jvm, SIGKILL);
	for (int i = 0; cgdir[0] && i < 50 && rmdir(cgdir); i++)
		usleep(100000);   /* the cgroup empties once the JVM is reaped */
}

int main(int argc, char **argv)
{
	tu_require_fixtures();
	REQUIRE_ROOT();
	bool jdk17;
	const char *java = tu_jdk_from_args(argc, argv, &jdk17);
	const char *mode = argc > 2 ? argv[2] : "p";
	if (access("/usr/bin/unshare", X_OK))
		SKIP("no /usr/bin/unshare (util-linux) to make the container with");
	char tag[64];
	snprintf(tag, sizeof(tag), "ctr-%s-%s", mode, jdk17 ? "17" : "25");
	snprintf(dir, sizeof(dir), "%s", tu_tmpdir(tag));
	ASSERT_OK(chmod(dir, 0755));   /* the JVM (nobody) reads its output files' directory */
	char jout[400], jerr[400], cmd[2048];
	snprintf(jout, sizeof(jout), "%s/jvm.out", dir);
	snprintf(jerr, sizeof(jerr), "%s/jvm.err", dir);
	/* The classes are opened before the container's own /tmp hides whatever was there
	 * (a build tree under /tmp, as CI's clean clone is): the JVM reads them through the
	 * descriptor it inherits. */
	snprintf(cmd, sizeof(cmd),
		 "exec 3< '%s' && mount -t tmpfs -o mode=1777 tmpfs /tmp && exec setpriv --reuid nobody --regid nogroup "
		 "--clear-groups %s -XX:+PrintCompilation -cp /proc/self/fd/3 Workers 300", VIPROF_JAVA_CLASSES, java);
	char *uargv[] = { "/usr/bin/unshare", "--pid", "--mount", "--fork", "--mount-proc", "/bin/sh", "-c", cmd, NULL };
	outer = run_start(uargv, jout, jerr);
	atexit(cleanup);
	/* The JVM is unshare's child (sh execs it): wait for it to say it is running. */
	for (int i = 0; i < 300 && !jvm; i++) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)outer, (int)outer);
		char *ch = tu_read(path), *o = tu_read(jout);
		if (strstr(o, "ready"))
			jvm = (pid_t)atoi(ch);
		free(ch);
		free(o);
		if (!jvm)
			usleep(100000);
	}
	if (!jvm)
		FAIL("the JVM in the namespace did not start: %s", tu_read(jerr));
	fprintf(stderr, "JVM %d (pid 1 in its namespace), %s\n", (int)jvm, java);
	make_cgroup();
	char *before = list_tmp();
	if (!tu_wait_compiled(jout, "Workers$Worker::handle", 4, 60000))   /* the workers' methods compiled */
		FAIL("the workers' handle() was not compiled by C2 within 60 s");

	char sess[600], out[600], spid[16];
	snprintf(spid, sizeof(spid), "%d", (int)jvm);
	snprintf(out, sizeof(out), "%s/record.log", dir);
	if (!strcmp(mode, "continuous")) {
		char cdir[400];
		snprintf(cdir, sizeof(cdir), "%s/c", dir);
		char *sargv[] = { VIPROF_BIN, "serve", "--continuous", cdir, "--interval", "4", "--cpu-budget", "0",
				  "-F", "499", "--jvm-attach", spid, NULL };
		pid_t serve = run_start(sargv, out, out);
		tu_wait_intervals(out, 4, 200);
		ASSERT_OK(kill(serve, SIGINT));
		ASSERT_EQ(run_wait(serve, 60), 0);
		char *names[64];
		int n = tu_list_intervals(cdir, names, 64);
		ASSERT_GE(n, 3);
		/* Every interval attaches the JVM before its first sample: each must hold. */
		int good = 0, checked = 0;
		for (int i = 0; i < n - 1; i++) {   /* the last one was cut short by SIGINT */
			snprintf(sess, sizeof(sess), "%s/%s", cdir, names[i]);
			struct share s = measure(sess);
			if (s.workers < 100)
				continue;
			checked++;
			good += s.labelled && s.named >= 0.95 * s.workers && s.run >= 0.95 * s.workers;
		}
		fprintf(stderr, "%d intervals, %d checked, %d with the workers named and labelled\n", n, checked, good);
		ASSERT_GE(checked, 2);
		ASSERT_EQ(good, checked);
	} else {
		snprintf(sess, sizeof(sess), "%s/s", dir);
		char *rargv_p[] = { VIPROF_BIN, "record", "-g", "-p", spid, "-d", "5", "-o", sess, NULL };
		char *rargv_a[] = { VIPROF_BIN, "record", "-g", "-a", "--jvm-attach", spid, "-d", "5", "-o", sess, NULL };
		ASSERT_EQ(run_argv(!strcmp(mode, "a") ? rargv_a : rargv_p, out, out, 120), 0);
		struct share s = measure(sess);
		/* The JVM runs without -XX:+PreserveFramePointer, which the default walker
		 * does not need: no warning that says it would. */
		char *rlog = tu_read(out);
		ASSERT_NULL(strstr(rlog, "PreserveFramePointer"));
		free(rlog);
		ASSERT_GT_F(s.workers, 500.0);
		/* In permille, so that a failure prints the shares. */
		ASSERT_GE((int64_t)(1000 * s.named / s.workers), 950);
		ASSERT_GE((int64_t)(1000 * s.run / s.workers), 950);
		ASSERT_TRUE(s.labelled);
		/* The agent's map is the session's, under the host pid. */
		char map[700];
		struct stat st;
		snprintf(map, sizeof(map), "%s/jit/%d/codemap.vpm", sess, (int)jvm);
		ASSERT_OK(stat(map, &st));
		ASSERT_GT(st.st_size, 0);
	}
	/* Nothing of this recording's in the container's /tmp: neither the session's path
	 * (where an agent that resolves dir= in its own mount namespace writes) nor an
	 * attach directory (.viprof-*). Other viprof instances on a shared machine may
	 * attach to this JVM too (every JVM is theirs with -a): what they leave is theirs,
	 * and an attach of theirs in progress has its .viprof- directory for a moment. */
	char *after = NULL;
	const char *top = dir + strlen("/tmp/");
	bool clean = false;
	for (int i = 0; i < 50 && !clean; i++) {
		free(after);
		after = list_tmp();
		clean = !strstr(after, top) && !strstr(after, ".viprof-");
		if (!clean)
			usleep(100000);
	}
	fprintf(stderr, "container /tmp before: [%s] after: [%s]\n", before, after);
	ASSERT_NULL(strstr(after, top));
	ASSERT_NULL(strstr(after, ".viprof-"));
	/* Nothing in the JVM's own output from this recording's agent (it names the
	 * session; other viprof instances on a shared machine may say their own things). */
	char *log = tu_read(jerr);
	fprintf(stderr, "JVM stderr: [%s]\n", log);
	ASSERT_NULL(strstr(log, top));
	free(log);
	free(before);
	free(after);
	cleanup();
	outer = jvm = 0;
	cgdir[0] = '\0';
	tu_rm_rf(dir);
	printf("ok\n");
	return 0;
}
