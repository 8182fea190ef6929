/* The runner every test uses (tests/test-run.h) says what happened to its child: the
 * exit code, a signal (a failure, never "non-zero"), a time-out (the child killed and
 * reaped), the output in the files asked for, an exec or a caught signal waited for.
 * Each failure path runs in a forked copy of this test, whose exit status tells that
 * the runner failed it. */
#include <signal.h>
#include <sys/stat.h>

#include "test.h"
#include "test-run.h"

static char dir[] = "/tmp/vp-test-run-self-XXXXXX";

/* The exit status of fn run in a forked copy of the test (1: it FAILed). */
static int fails(void (*fn)(void))
{
	fflush(stdout);
	fflush(stderr);
	pid_t p = fork();
	ASSERT_GE(p, 0);
	if (p == 0) {
		fn();
		exit(0);
	}
	int code;
	ASSERT_TRUE(run_reap(p, 30000, &code));
	return code;
}

static void killed_by_signal(void)
{
	run_argv((char *const[]){ "/bin/sh", "-c", "kill -SEGV $$", NULL }, NULL, NULL, 10);
}

static void sh_killed_by_signal(void)
{
	run_sh("kill -SEGV $$", 10);
}

static void past_timeout(void)
{
	run_argv((char *const[]){ "/bin/sleep", "30", NULL }, NULL, NULL, 1);
}

static void exits_before_exec_state(void)
{
	/* /bin/true is a new program, but it has exited before anyone looks: the wait
	 * for it to catch SIGUSR1 must fail naming that, not hang. */
	run_wait_state(run_start((char *const[]){ "/bin/true", NULL }, NULL, NULL), SIGUSR1, 5000, "catching SIGUSR1");
}

static pid_t left_behind;

static void fail_with_child_running(void)
{
	left_behind = run_start((char *const[]){ "/bin/sleep", "30", NULL }, NULL, NULL);
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/left", dir);
	FILE *f = fopen(path, "w");
	ASSERT_NOT_NULL(f);
	fprintf(f, "%d\n", (int)left_behind);
	fclose(f);
	FAIL("on purpose, with a child running");
}

int main(void)
{
	char out[PATH_MAX], err[PATH_MAX], both[PATH_MAX];
	int code;

	ASSERT_NOT_NULL(mkdtemp(dir));
	snprintf(out, sizeof(out), "%s/out", dir);
	snprintf(err, sizeof(err), "%s/err", dir);
	snprintf(both, sizeof(both), "%s/both", dir);

	/* Exit codes and where the output went. */
	ASSERT_EQ(run_argv((char *const[]){ "/bin/sh", "-c", "echo o; echo e >&2; exit 3", NULL }, out, err, 10), 3);
	/* Each read freed: the forked copies below exit through the leak checker of a
	 * sanitizer build, which would turn their FAIL's 1 into its own code. */
	char *got = test_slurp_str(out);
	ASSERT_STREQ(got, "o\n");
	free(got);
	got = test_slurp_str(err);
	ASSERT_STREQ(got, "e\n");
	free(got);
	ASSERT_EQ(run_argv((char *const[]){ "/bin/sh", "-c", "echo o; echo e >&2", NULL }, both, both, 10), 0);
	got = test_slurp_str(both);
	ASSERT_STREQ(got, "o\ne\n");
	free(got);
	ASSERT_EQ(run_argv((char *const[]){ "/nonexistent/program", NULL }, NULL, NULL, 10), 127);
	ASSERT_EQ(run_sh("exit 5", 10), 5);
	ASSERT_EQ(run_shf(10, "exit %d", 6), 6);
	char *s = run_sh_read("echo one; echo two; exit 4", &code);
	ASSERT_STREQ(s, "one\ntwo\n");
	ASSERT_EQ(code, 4);
	free(s);

	/* A signal is reported as 128 + it where the caller asked, and fails elsewhere. */
	pid_t p = run_start((char *const[]){ "/bin/sleep", "30", NULL }, NULL, NULL);
	run_wait_state(p, 0, 5000, "running /bin/sleep");
	ASSERT_OK(kill(p, SIGTERM));
	ASSERT_EQ(run_wait_code(p, 10), 128 + SIGTERM);
	ASSERT_EQ(fails(killed_by_signal), 1);
	ASSERT_EQ(fails(sh_killed_by_signal), 1);

	/* A time-out: seen (run_reap) or a failure; the child is gone either way. */
	p = run_start((char *const[]){ "/bin/sleep", "30", NULL }, NULL, NULL);
	ASSERT_FALSE(run_reap(p, 200, &code));
	ASSERT_EQ(code, -1);
	ASSERT_NE(kill(p, 0), 0);   /* reaped: no such process (or not ours any more) */
	ASSERT_EQ(fails(past_timeout), 1);
	ASSERT_EQ(fails(exits_before_exec_state), 1);

	/* A test that fails half-way leaves no child running. */
	ASSERT_EQ(fails(fail_with_child_running), 1);
	char left[PATH_MAX];
	snprintf(left, sizeof(left), "%s/left", dir);
	char *pid_text = test_slurp_str(left);
	pid_t orphan = (pid_t)atoi(pid_text);
	free(pid_text);
	ASSERT_GT(orphan, 0);
	char proc[64];
	struct stat st;
	snprintf(proc, sizeof(proc), "/proc/%d/cmdline", (int)orphan);
	s = test_slurp_str(proc);
	/* Gone, or the pid already reused by something that is not our sleep 30. */
	ASSERT_TRUE(stat(proc, &st) != 0 || strcmp(s, "/bin/sleep") != 0);
	free(s);

	ASSERT_EQ(run_shf(10, "rm -rf '%s'", dir), 0);
	printf("ok\n");
	return 0;
}
