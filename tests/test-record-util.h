/* Running the built viprof from the record tests: its stderr goes to <dir>/log and is
 * read back, so that assertions can quote what viprof said. A machine where no sampler
 * backend can run makes the test skip (exit 77), never pass. */
#ifndef VIPROF_TEST_RECORD_UTIL_H
#define VIPROF_TEST_RECORD_UTIL_H

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

/* Starts argv (envp NULL = ours) with stdout to /dev/null and stderr to <dir>/log. */
static inline pid_t tr_start(const char *dir, char *const argv[], char *const envp[])
{
	char log[PATH_MAX];
	snprintf(log, sizeof(log), "%s/log", dir);
	pid_t pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		if (!freopen(log, "w", stderr) || !freopen("/dev/null", "w", stdout))
			_exit(126);
		if (envp)
			execve(argv[0], argv, envp);
		else
			execv(argv[0], argv);
		_exit(126);
	}
	return pid;
}

/* Waits for pid, reads its log into out; returns its exit status (128+signal if killed). */
static inline int tr_finish(const char *dir, pid_t pid, char *out, size_t outlen)
{
	char log[PATH_MAX];
	int status;
	ASSERT_EQ(waitpid(pid, &status, 0), pid);
	snprintf(log, sizeof(log), "%s/log", dir);
	FILE *f = fopen(log, "r");
	out[0] = '\0';
	if (f) {
		size_t n = fread(out, 1, outlen - 1, f);
		out[n] = '\0';
		fclose(f);
	}
	if (strstr(out, "no sampler backend can run here"))
		SKIP("%s", out);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static inline int tr_run(const char *dir, char *const argv[], char *out, size_t outlen)
{
	return tr_finish(dir, tr_start(dir, argv, NULL), out, outlen);
}

#endif
