/* Sample weights add up to the event's true count (issue 11 item 5, issue 23), one
 * scenario per ctest entry: argv = viprof paced BACKEND EVENT RATE, RATE "F" (the
 * default -F) or a -c period. The reference is a counting perf_event_open of our own
 * in the same run: the recorder launches this test as a wrapper ("wrap"), which opens
 * the event on its child before the child execs the fixture
 * (tests/fixtures/weights/paced.c: steady page faults and sleeps), so it counts exactly
 * what the fixture does while it is recorded. The weights of the fixture's stacks must
 * agree with it within 2% + 2 events, and all weights (the wrapper's included) with the
 * recorder's own totals (COUNTER records, count.EVENT). A separate run is no reference: the sampler's
 * own work makes the fixture switch more (bpf -F: 4173 recorded and counted in the
 * recording against 4005 in a run without it). Exit 77 when not root or the backend
 * cannot run here. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "postproc/profile.h"
#include "postproc/session.h"
#include "test.h"
#include "test-run.h"

/* paced's arguments: page faults and sleeps per round, rounds. */
static const char *paced_args = "400 80 50";

/* Runs paced with a counting event on it (and its threads), enabled at its exec. */
static uint64_t reference(const char *paced, uint64_t config)
{
	int go[2];
	ASSERT_OK(pipe(go));
	pid_t pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		char c;
		close(go[1]);
		if (read(go[0], &c, 1) != 1)
			_exit(127);
		char a[3][16] = { "", "", "" };
		if (sscanf(paced_args, "%15s %15s %15s", a[0], a[1], a[2]) != 3)
			_exit(126);
		execl(paced, paced, a[0], a[1], a[2], (char *)NULL);
		_exit(127);
	}
	close(go[0]);
	struct perf_event_attr a = { .size = sizeof(a), .type = PERF_TYPE_SOFTWARE, .config = config,
				     .disabled = 1, .enable_on_exec = 1, .inherit = 1 };
	int fd = (int)syscall(SYS_perf_event_open, &a, pid, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0) {
		kill(pid, SIGKILL);
		SKIP("cannot count the fixture with perf_event_open: %s", strerror(errno));
	}
	ASSERT_EQ(write(go[1], "g", 1), 1);
	close(go[1]);
	int st;
	ASSERT_EQ(waitpid(pid, &st, 0), pid);
	ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	uint64_t v = 0;
	ASSERT_EQ(read(fd, &v, sizeof(v)), (int)sizeof(v));
	close(fd);
	return v;
}

/* The wrapper: argv = wrap REFFILE CONFIG paced ARGS...: runs paced with a counting
 * event opened on it before its exec and writes the count to REFFILE. */
static int wrap(int argc, char **argv)
{
	if (argc < 5)
		FAIL("usage: test-weights wrap REFFILE CONFIG PACED [ARGS...]");
	int go[2];
	ASSERT_OK(pipe(go));
	pid_t pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		char c;
		close(go[1]);
		if (read(go[0], &c, 1) != 1)
			_exit(127);
		execv(argv[4], &argv[4]);
		_exit(127);
	}
	close(go[0]);
	struct perf_event_attr a = { .size = sizeof(a), .type = PERF_TYPE_SOFTWARE, .config = strtoull(argv[3], NULL, 10),
				     .disabled = 1, .enable_on_exec = 1, .inherit = 1 };
	int fd = (int)syscall(SYS_perf_event_open, &a, pid, -1, -1, PERF_FLAG_FD_CLOEXEC);
	ASSERT_GE(fd, 0);
	ASSERT_EQ(write(go[1], "g", 1), 1);
	close(go[1]);
	int st;
	ASSERT_EQ(waitpid(pid, &st, 0), pid);
	uint64_t v = 0;
	ASSERT_EQ(read(fd, &v, sizeof(v)), (int)sizeof(v));
	FILE *f = fopen(argv[2], "w");
	ASSERT_NOT_NULL(f);
	fprintf(f, "%" PRIu64 "\n", v);
	ASSERT_OK(fclose(f));
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

int main(int argc, char **argv)
{
	char cmd[2048], dir[128], rate[64] = "", err[512];
	if (argc > 1 && !strcmp(argv[1], "wrap"))
		return wrap(argc, argv);
	if (argc < 6)
		FAIL("usage: test-weights viprof paced perf|bpf context-switches|page-faults F|PERIOD");
	REQUIRE_ROOT();
	const char *viprof = argv[1], *paced = argv[2], *backend = argv[3], *event = argv[4];
	uint64_t config = !strcmp(event, "page-faults") ? PERF_COUNT_SW_PAGE_FAULTS : PERF_COUNT_SW_CONTEXT_SWITCHES;
	if (strcmp(argv[5], "F"))
		snprintf(rate, sizeof(rate), "-c %s", argv[5]);
	if (argc > 6)
		paced_args = argv[6];

	uint64_t separate = reference(paced, config);
	char self[512], ref[160];
	ssize_t sl = readlink("/proc/self/exe", self, sizeof(self) - 1);
	ASSERT_GT(sl, 0);
	self[sl] = '\0';
	snprintf(dir, sizeof(dir), "weights-%s-%s-%s%s", backend, event, argv[5], argc > 6 ? "-steady" : "");
	snprintf(ref, sizeof(ref), "%s.ref", dir);
	unlink(ref);
	snprintf(cmd, sizeof(cmd), "%s record -q --force --backend %s %s -e %s -o %s -- %s wrap %s %" PRIu64 " %s %s "
		 ">%s.log 2>&1", viprof, backend, rate, event, dir, self, ref, config, paced, paced_args, dir);
	int rc = run_sh(cmd, 100);
	if (rc) {
		snprintf(cmd, sizeof(cmd), "grep -q 'sampler' %s.log", dir);
		if (!strcmp(backend, "bpf") && run_sh(cmd, 100) == 0)
			SKIP("the bpf backend cannot run here; see %s.log", dir);
		FAIL("viprof record failed (%d); see %s.log", rc, dir);
	}
	FILE *rf = fopen(ref, "r");
	ASSERT_NOT_NULL(rf);
	unsigned long long wantll = 0;
	ASSERT_EQ(fscanf(rf, "%llu", &wantll), 1);
	fclose(rf);
	uint64_t want = wantll;
	ASSERT_GT(want, 3000);
	struct vp_profile *p = vp_profile__new();
	ASSERT_NOT_NULL(p);
	if (vp_session__load(dir, p, NULL, err, sizeof(err)))
		FAIL("load %s: %s", dir, err);
	ASSERT_EQ(p->nevents >= 1, 1);
	/* The fixture's own stacks (comm "paced"): the wrapper's fork, wait and exec
	 * are recorded too, and under sampling it is preempted like any thread (8 to 50
	 * switches for a wrapper around /bin/sleep 0.2 here), so it is left out. */
	uint64_t n = 0, w = 0, w_all = 0;
	for (size_t i = 0; i < p->nstacks; i++) {
		w_all += p->stacks[i].weight[0];
		n += p->stacks[i].samples[0];
		if (strcmp(p->stacks[i].comm, "paced"))
			continue;
		w += p->stacks[i].weight[0];
	}
	char key[64];
	snprintf(key, sizeof(key), "count.%s", event);
	const char *counted = vp_profile__meta(p, key);
	snprintf(key, sizeof(key), "tail.%s", event);
	const char *tail = vp_profile__meta(p, key);
	fprintf(stderr, "%s %s %s: %" PRIu64 " samples weigh %" PRIu64 " (of which %s after each thread's last sample); "
		"(all stacks %" PRIu64 "); the recorder counted %s; counted in the same run %" PRIu64 " (a separate run without the recorder: %"
		PRIu64 ")\n", backend, event, argv[5], n, w, tail ? tail : "0", w_all, counted ? counted : "(none)", want, separate);
	ASSERT_NOT_NULL(counted);
	/* Several samples, whose weights must add up: with -F the kernel sets the period
	 * from the event's rate at each tick, and a burst of faults on a loaded VM gave as
	 * few as 5 (10 to 34 on a quiet one), so the floor is not a rate. */
	ASSERT_GE(n, 3);
	/* The recorder's totals cover the wrapper too: all weights add up to them, less
	 * with -c the wrapper's own last partial period (at most one period). */
	double partial = strcmp(argv[5], "F") ? (double)strtoull(argv[5], NULL, 10) : 0;
	ASSERT_DBL_NEAR((double)strtoull(counted, NULL, 10), (double)w_all, 0.02 * (double)w_all + 2 + partial);
	ASSERT_GE(strtoull(counted, NULL, 10) + 2, want);
	ASSERT_DBL_NEAR((double)w, (double)want, 0.02 * (double)want + 2);
	vp_profile__free(p);
	printf("test-weights %s %s %s: ok\n", backend, event, argv[5]);
	return 0;
}
