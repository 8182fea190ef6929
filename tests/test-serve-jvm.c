/* viprof serve --continuous and the JVM agent (issue 14 item 3), one scenario per ctest
 * entry, JDK 17 or Temurin 25 (argv[1]):
 *   agent:  a JitSplit JVM started after the service gets the agent at the next interval
 *           boundary (the recorder rotates its session and re-attaches), and its hot
 *           methods are named in the later intervals, each read on its own: two or more
 *           intervals with the JVM's own code map, most of its JIT samples named and the
 *           JitSplit.hot* methods among them.
 *   optout: the same JVM started with VIPROF_NO_AGENT=1 never gets the agent: no interval
 *           has a code map of it, it has no agent thread, and none of its samples is
 *           named as a Java method.
 *   select: the service with --jvm-attach user:nobody and the JVM root's: a JVM of a user
 *           the selector does not name is left alone, as optout (the service once
 *           attached into every user's JVMs).
 *   early:  (issue 32) 12 s intervals and a JitSplit JVM started right after a boundary:
 *           in the interval where it started, its samples from 5 s after its start on
 *           are named (most in named JIT code, JitSplit.hot* among them); the service
 *           named a JVM only from the interval after its start. The JVM is a shell that
 *           waits, then execs java (same pid), so that --jvm-attach names it alone and
 *           the service leaves other JVMs on the machine alone. */
#include "test-agent-util.h"
#include "test-profile.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>

#include "postproc/profile.h"
#include "postproc/session.h"

static char dir[256];
static pid_t jvm;

/* The JVM's samples in sess from `from` seconds after the session's start on (0: all):
 * all of them, those whose leaf a code map names, and those in JitSplit's hot methods. */
static void jvm_samples_from(const char *sess, double from, double *all, double *named, double *hot)
{
	char err[512];
	uint32_t pid = (uint32_t)jvm;
	struct vp_session_opts o = { .pids = &pid, .npids = 1, .t_from = from };
	struct vp_profile *p = vp_profile__new();
	ASSERT_NOT_NULL(p);
	if (vp_session__load(sess, p, &o, err, sizeof(err)))
		FAIL("load %s: %s", sess, err);
	*all = *named = *hot = 0;
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct vp_stack *s = &p->stacks[i];
		if (!s->nframes)
			continue;
		double n = (double)s->samples[0];
		const struct vp_frame *leaf = &p->frames[s->frames[s->nframes - 1]];
		*all += n;
		/* Named by a code map: not "[java code: JVM without the agent]", which says
		 * only that the address is the JVM's. */
		if ((leaf->layer == VP_LAYER_JIT || leaf->layer == VP_LAYER_INLINED) && leaf->name[0] != '[')
			*named += n;
	}
	tp_sum(p, &(struct tp_filter){ 0 }, "JitSplit.hot", TP_PREFIX, hot);
	vp_profile__free(p);
}

/* Scenario early: a JVM started during an interval is named in that interval, from 5 s
 * after its start. */
static int scenario_early(const char *java)
{
	char cdir[400], sout[400], jout[400], jerr[400];
	snprintf(cdir, sizeof(cdir), "%s/c", dir);
	snprintf(sout, sizeof(sout), "%s/serve.log", dir);
	snprintf(jout, sizeof(jout), "%s/jvm.out", dir);
	snprintf(jerr, sizeof(jerr), "%s/jvm.err", dir);
	char fifo[400], script[1200], pidarg[16];
	snprintf(fifo, sizeof(fifo), "%s/go", dir);
	ASSERT_OK(mkfifo(fifo, 0600));
	snprintf(script, sizeof(script), "read x < %s; exec %s -XX:+PreserveFramePointer -cp %s JitSplit 60", fifo, java,
		 VIPROF_JAVA_CLASSES);
	char *jargv[] = { "/bin/sh", "-c", script, NULL };
	jvm = run_start(jargv, jout, jerr);
	snprintf(pidarg, sizeof(pidarg), "%d", (int)jvm);
	char *sargv[] = { VIPROF_BIN, "serve", "--continuous", cdir, "--interval", "12", "--cpu-budget", "0",
			  "--jvm-attach", pidarg, "-F", "99", NULL };
	pid_t serve = run_start(sargv, sout, sout);
	/* Right after a boundary: the rest of the interval is the JVM's start and more. */
	tu_wait_intervals(sout, 1, 150);
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t t_jvm = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	int go = open(fifo, O_WRONLY);
	ASSERT_GE(go, 0);
	ASSERT_EQ(write(go, "go\n", 3), 3);
	close(go);
	tu_wait_intervals(sout, 2, 90);   /* the interval it started in has ended */
	ASSERT_OK(kill(serve, SIGINT));
	ASSERT_EQ(run_wait(serve, 60), 0);
	char *log = tu_read(sout);
	fprintf(stderr, "%s", log);
	free(log);

	char *names[64], best[600] = "";
	uint64_t best_start = 0;
	int n = tu_list_intervals(cdir, names, 64);
	for (int i = 0; i < n; i++) {
		char sess[600];
		snprintf(sess, sizeof(sess), "%s/%s", cdir, names[i]);
		uint64_t st = tu_session_zero(sess);
		if (st <= t_jvm && st >= best_start) {
			best_start = st;
			snprintf(best, sizeof(best), "%s", sess);
		}
		free(names[i]);
	}
	if (!best[0])
		FAIL("no interval began before the JVM's start");
	double from = (double)(t_jvm - best_start) / 1e9 + 5.0, all, named, hot;
	jvm_samples_from(best, from, &all, &named, &hot);
	fprintf(stderr, "%s: JVM %d started %.1f s into it; from %.1f s: %.0f samples, %.0f in named JIT code, %.0f in "
		"JitSplit.hot*\n", best, (int)jvm, from - 5.0, from, all, named, hot);
	kill(jvm, SIGKILL);
	waitpid(jvm, NULL, 0);
	if (all < 30) {
		tu_rm_rf(dir);
		SKIP("the JVM had %.0f samples from 5 s after its start to the interval's end (a loaded machine); "
		     "nothing to judge", all);
	}
	ASSERT_GT_F(named, 0.6 * all);
	ASSERT_GT_F(hot, 0.3 * all);
	tu_rm_rf(dir);
	printf("ok\n");
	return 0;
}

static bool has_agent_thread(void)
{
	char path[300];
	snprintf(path, sizeof(path), "/proc/%d/task", (int)jvm);
	DIR *d = opendir(path);
	struct dirent *de;
	bool found = false;
	while (d && !found && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/comm", (int)jvm, de->d_name);
		char *comm = tu_read(path);
		found = !strcmp(comm, "viprof-jvmti\n");
		free(comm);
	}
	if (d)
		closedir(d);
	return found;
}

int main(int argc, char **argv)
{
	tu_require_fixtures();
	REQUIRE_ROOT();
	bool jdk17;
	const char *java = tu_jdk_from_args(argc, argv, &jdk17);
	bool pick = argc > 2 && !strcmp(argv[2], "select");
	bool optout = pick || (argc > 2 && !strcmp(argv[2], "optout"));
	if (argc > 2 && !strcmp(argv[2], "early")) {
		snprintf(dir, sizeof(dir), "%s", tu_tmpdir("servejvm-early"));
		return scenario_early(java);
	}
	snprintf(dir, sizeof(dir), "%s", tu_tmpdir(pick ? "servejvm-select" : optout ? "servejvm-optout" : "servejvm-agent"));
	char cdir[400], sout[400], jout[400], jerr[400];
	snprintf(cdir, sizeof(cdir), "%s/c", dir);
	snprintf(sout, sizeof(sout), "%s/serve.log", dir);
	snprintf(jout, sizeof(jout), "%s/jvm.out", dir);
	snprintf(jerr, sizeof(jerr), "%s/jvm.err", dir);

	/* 4 s intervals without a budget: one recorder, rotated at each boundary. The
	 * service loads the agent into no JVM unless told: all of them here. 99 Hz (the
	 * continuous default is 19), so that a 4 s interval holds enough of the JVM's
	 * samples to judge its naming. */
	char *sargv[] = { VIPROF_BIN, "serve", "--continuous", cdir, "--interval", "4", "--cpu-budget", "0",
			  "--jvm-attach", pick ? "user:nobody" : "all", "-F", "99", NULL };
	pid_t serve = run_start(sargv, sout, sout);
	/* The first interval ended: the sampler is loaded (its start can take long on a
	 * loaded machine: the BPF verifier), and the recorder rotates from here on. */
	tu_wait_intervals(sout, 1, 150);
	/* The JVM starts after the service (the service and its recorder do not know it). */
	if (optout && !pick)
		setenv("VIPROF_NO_AGENT", "1", 1);
	char *jargv[] = { (char *)java, "-XX:+PreserveFramePointer", "-cp", VIPROF_JAVA_CLASSES, "JitSplit", "40", NULL };
	jvm = run_start(jargv, jout, jerr);
	unsetenv("VIPROF_NO_AGENT");
	tu_wait_intervals(sout, 5, 90);   /* four more boundaries */
	sleep(1);
	bool agent_thread = has_agent_thread();
	ASSERT_OK(kill(serve, SIGINT));
	ASSERT_EQ(run_wait(serve, 60), 0);
	char *log = tu_read(sout);
	fprintf(stderr, "%s", log);

	char *names[64];
	int n = tu_list_intervals(cdir, names, 64);
	ASSERT_GE(n, 4);
	int with_map = 0, named_ok = 0;
	for (int i = 0; i < n; i++) {
		char sess[600], map[700];
		struct stat st;
		snprintf(sess, sizeof(sess), "%s/%s", cdir, names[i]);
		snprintf(map, sizeof(map), "%s/jit/%d/codemap.vpm", sess, (int)jvm);
		bool has_map = stat(map, &st) == 0 && st.st_size > 0;
		double all, named, hot;
		jvm_samples_from(sess, 0, &all, &named, &hot);
		fprintf(stderr, "%s: JVM %d: code map %s, %.0f samples, %.0f in named JIT code, %.0f in JitSplit.hot*\n",
			names[i], (int)jvm, has_map ? "yes" : "no", all, named, hot);
		with_map += has_map;
		/* An interval where the JVM ran hot with the agent: most of its samples in
		 * named JIT code, the hot methods among them. 30 samples make the shares mean
		 * something; how many of the up to 800 an interval has is the CPU a busy
		 * machine gave the JVM (54-152 in a CI run beside other work). */
		if (has_map && all >= 30 && named > 0.6 * all && hot > 0.5 * all)
			named_ok++;
		if (optout) {
			ASSERT_FALSE(has_map);
			ASSERT_NEAR(named, 0, 0);
			ASSERT_NEAR(hot, 0, 0);
		}
		free(names[i]);
	}
	fprintf(stderr, "%d intervals, %d with the JVM's code map, %d with its hot methods named; agent thread: %s\n", n,
		with_map, named_ok, agent_thread ? "yes" : "no");
	if (optout) {
		ASSERT_FALSE(agent_thread);
	} else {
		ASSERT_TRUE(agent_thread);
		/* Each rotation moved the agent: the intervals after the first boundary each have their own map. */
		ASSERT_GE(with_map, 2);
		ASSERT_GE(named_ok, 2);
	}
	free(log);
	kill(jvm, SIGKILL);
	waitpid(jvm, NULL, 0);
	tu_rm_rf(dir);
	printf("ok\n");
	return 0;
}
