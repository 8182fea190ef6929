/* Full Java thread names in a report (issue 12): a LongNames JVM recorded with
 * `record -p`. Its thread "viprof-early-worker-thread" was running before the attach
 * (named from GetAllThreads, matched to its tid by the kernel's 15-byte name), and
 * "viprof-late-worker-thread" starts during the recording (named at ThreadStart with its
 * own tid). Every sample of each is reported under its full name, none under the
 * kernel's truncated one, with the tid whose kernel name is that name's prefix. Two
 * threads running before the attach share their kernel name ("viprof-pool-thr"): the
 * one that spins ("viprof-pool-thread-1") gets its samples under its own full name, the
 * sleeping one ("-2") none (HotSpot's own tid of each thread, not a guess by name).
 * Then the same JVM launched by `record -- java` (the agent from the start): the same
 * names, every sample under them.
 * JDK 17 and Temurin 25 (argv[1]). */
#include "test-agent-util.h"
#include "test-profile.h"

#include "postproc/profile.h"
#include "postproc/session.h"

static char dir[256];
static pid_t jvm;

/* The tid of the JVM's thread whose kernel name is comm; 0 if none. */
static uint32_t tid_named(const char *comm)
{
	char path[300];
	snprintf(path, sizeof(path), "/proc/%d/task", (int)jvm);
	DIR *d = opendir(path);
	struct dirent *de;
	uint32_t tid = 0;
	while (d && !tid && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/comm", (int)jvm, de->d_name);
		char *c = tu_read(path);
		c[strcspn(c, "\n")] = '\0';
		if (!strcmp(c, comm))
			tid = (uint32_t)atoi(de->d_name);
		free(c);
	}
	if (d)
		closedir(d);
	return tid;
}

static bool early_running(void *ctx)
{
	(void)ctx;
	return tid_named("viprof-early-wo") > 0;
}

/* Samples of the session under the name comm; *tid the thread's (all must agree). */
static uint64_t samples_named(const struct vp_profile *p, const char *comm, uint32_t *tid)
{
	uint64_t n = 0;
	*tid = 0;
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct vp_stack *s = &p->stacks[i];
		if (strcmp(s->comm, comm))
			continue;
		if (*tid && *tid != s->tid)
			FAIL("'%s' names two threads, %u and %u", comm, *tid, s->tid);
		*tid = s->tid;
		n += s->samples[0];
	}
	return n;
}

int main(int argc, char **argv)
{
	tu_require_fixtures();
	REQUIRE_ROOT();
	bool jdk17;
	const char *java = tu_jdk_from_args(argc, argv, &jdk17);
	snprintf(dir, sizeof(dir), "%s", tu_tmpdir(jdk17 ? "tnames17" : "tnames25"));
	char jout[400], jerr[400], sess[400], rout[400], spid[16];
	snprintf(jout, sizeof(jout), "%s/jvm.out", dir);
	snprintf(jerr, sizeof(jerr), "%s/jvm.err", dir);
	/* The late thread starts 4 s in: during the recording below. */
	char *jargv[] = { (char *)java, "-cp", VIPROF_JAVA_CLASSES, "LongNames", "30", "4", NULL };
	jvm = run_start(jargv, jout, jerr);
	tu_wait_until(early_running, NULL, 30, "the JVM's early worker thread");
	uint32_t early = tid_named("viprof-early-wo");
	ASSERT_GT(early, 0);

	snprintf(sess, sizeof(sess), "%s/s", dir);
	snprintf(rout, sizeof(rout), "%s/record.out", dir);
	snprintf(spid, sizeof(spid), "%d", (int)jvm);
	char *rargv[] = { VIPROF_BIN, "record", "-q", "-p", spid, "-d", "6", "-o", sess, NULL };
	ASSERT_EQ(run_wait(run_start(rargv, rout, rout), 60), 0);
	uint32_t late = tid_named("viprof-late-wor");
	ASSERT_GT(late, 0);

	uint32_t pid = (uint32_t)jvm;
	struct vp_session_opts o = { .pids = &pid, .npids = 1 };
	struct vp_profile *p = tp_load(sess, &o);
	uint32_t t_early, t_late, t_x;
	uint64_t n_early = samples_named(p, "viprof-early-worker-thread", &t_early);
	uint64_t n_late = samples_named(p, "viprof-late-worker-thread", &t_late);
	uint64_t n_trunc = samples_named(p, "viprof-early-wo", &t_x) + samples_named(p, "viprof-late-wor", &t_x);
	uint32_t t_pool1, t_pool2;
	uint64_t n_pool1 = samples_named(p, "viprof-pool-thread-1", &t_pool1);
	uint64_t n_pool2 = samples_named(p, "viprof-pool-thread-2", &t_pool2);
	uint64_t n_pool = samples_named(p, "viprof-pool-thr", &t_x);
	fprintf(stderr, "samples: early %llu (tid %u, kernel %u), late %llu (tid %u, kernel %u), truncated %llu\n",
		(unsigned long long)n_early, t_early, early, (unsigned long long)n_late, t_late, late,
		(unsigned long long)n_trunc);
	/* Each spins on a CPU of its own for seconds: hundreds of samples at the default rate. */
	ASSERT_GT(n_early, 50);
	ASSERT_GT(n_late, 50);
	ASSERT_EQ(n_trunc, 0);
	ASSERT_EQ(t_early, early);
	ASSERT_EQ(t_late, late);
	fprintf(stderr, "pool threads: -1 %llu samples (tid %u), -2 %llu, under the kernel's name %llu\n",
		(unsigned long long)n_pool1, t_pool1, (unsigned long long)n_pool2, (unsigned long long)n_pool);
	ASSERT_GT(n_pool1, 50);
	ASSERT_LT(n_pool2 + n_pool, n_pool1 / 50 + 1);
	vp_profile__free(p);
	kill(jvm, SIGKILL);
	waitpid(jvm, NULL, 0);

	/* Launched: the agent loaded with the JVM names its threads from the start. */
	snprintf(sess, sizeof(sess), "%s/launch", dir);
	char *largv[] = { VIPROF_BIN, "record", "-q", "-o", sess, "--", (char *)java, "-cp", VIPROF_JAVA_CLASSES,
			  "LongNames", "5", "2", NULL };
	ASSERT_EQ(run_wait(run_start(largv, rout, rout), 60), 0);
	p = tp_load(sess, NULL);
	n_early = samples_named(p, "viprof-early-worker-thread", &t_x);
	n_late = samples_named(p, "viprof-late-worker-thread", &t_x);
	n_pool1 = samples_named(p, "viprof-pool-thread-1", &t_x);
	n_trunc = samples_named(p, "viprof-early-wo", &t_x) + samples_named(p, "viprof-late-wor", &t_x) +
		  samples_named(p, "viprof-pool-thr", &t_x);
	fprintf(stderr, "launched: early %llu, late %llu, pool-1 %llu, truncated %llu samples\n",
		(unsigned long long)n_early, (unsigned long long)n_late, (unsigned long long)n_pool1,
		(unsigned long long)n_trunc);
	ASSERT_GT(n_early, 50);
	ASSERT_GT(n_late, 50);
	ASSERT_GT(n_pool1, 50);
	ASSERT_EQ(n_trunc, 0);
	vp_profile__free(p);
	tu_rm_rf(dir);
	printf("ok\n");
	return 0;
}
