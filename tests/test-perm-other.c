/* Profiling another user's process names the real cause (issue 12): perf_event_open
 * refuses it because the kernel asks for ptrace access, not because of
 * perf_event_paranoid, so `stat -p` and `record -p` must say whose process it is and
 * how to get access, and must not advise lowering perf_event_paranoid. Run as root: the
 * target runs as uid 65534, viprof as uid 65533. argv[1] = viprof. */
#define _GNU_SOURCE
#include <grp.h>
#include <stdbool.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"
#include "test-run.h"

static pid_t as_user(uid_t uid, const char *out, char *const argv[])
{
	pid_t pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		if (out) {
			int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0666);
			if (fd < 0 || dup2(fd, 2) < 0)
				_exit(126);
		}
		if (setgroups(0, NULL) || setresgid(uid, uid, uid) || setresuid(uid, uid, uid))
			_exit(125);
		execv(argv[0], argv);
		_exit(127);
	}
	return pid;
}

static int wait_rc(pid_t pid)
{
	int st;
	ASSERT_EQ(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void check(const char *file, pid_t target)
{
	char text[2048] = "", want[64];
	FILE *f = fopen(file, "r");
	ASSERT_NOT_NULL(f);
	size_t n = fread(text, 1, sizeof(text) - 1, f);
	text[n] = '\0';
	fclose(f);
	fprintf(stderr, "%s: %s", file, text);
	snprintf(want, sizeof(want), "process %d belongs to uid 65534", (int)target);
	ASSERT_CONTAINS(text, want);
	ASSERT_CONTAINS(text, "run viprof as uid 65534");
	ASSERT_TRUE(strstr(text, "perf_event_paranoid=") == NULL);
	ASSERT_TRUE(strstr(text, "perf_event_paranoid <=") == NULL);
}

int main(int argc, char **argv)
{
	char pid_s[16], dir[] = "/tmp/vp-perm-XXXXXX", out[128], session[160];
	if (argc < 2)
		FAIL("usage: test-perm-other viprof");
	REQUIRE_ROOT();
	char *sleeper[] = { "/bin/sleep", "30", NULL };
	pid_t target = as_user(65534, NULL, sleeper);
	/* Wait until it runs sleep as uid 65534 (exec done), not a moment sooner. */
	for (int tries = 0;; tries++) {
		char path[64], line[256];
		bool ready = false;
		snprintf(path, sizeof(path), "/proc/%d/status", (int)target);
		FILE *f = fopen(path, "r");
		while (f && fgets(line, sizeof(line), f))
			if (!strncmp(line, "Name:\tsleep", 11) || (!strncmp(line, "Uid:", 4) && strstr(line, "65534") && ready))
				ready = true;
		if (f)
			fclose(f);
		if (ready)
			break;
		ASSERT_LT(tries, 1000);
		usleep(10000);
	}
	snprintf(pid_s, sizeof(pid_s), "%d", (int)target);
	ASSERT_NOT_NULL(mkdtemp(dir));
	ASSERT_OK(chmod(dir, 0777));

	snprintf(out, sizeof(out), "%s/stat.err", dir);
	char *stat_argv[] = { argv[1], "stat", "-e", "page-faults:u", "-p", pid_s, NULL };
	int rc = wait_rc(as_user(65533, out, stat_argv));
	if (rc == 125)
		SKIP("cannot change uid here");
	ASSERT_EQ(rc, 1);
	check(out, target);

	snprintf(out, sizeof(out), "%s/record.err", dir);
	snprintf(session, sizeof(session), "%s/s", dir);
	char *rec_argv[] = { argv[1], "record", "-q", "-e", "cpu-clock:u", "-o", session, "-p", pid_s, "-d", "1", NULL };
	rc = wait_rc(as_user(65533, out, rec_argv));
	ASSERT_NE(rc, 0);
	check(out, target);

	kill(target, SIGKILL);
	waitpid(target, NULL, 0);
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ASSERT_OK(run_sh(cmd, 50));
	printf("test-perm-other: ok\n");
	return 0;
}
