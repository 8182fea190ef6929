/* The one way a test runs a child process: start it with its output in files, wait for
 * it with a time-out, read its exit status and what it wrote. Every function is run_*;
 * a child that outlives its time-out is killed and reaped, never left behind, and the
 * test fails naming it unless the caller asked to see the time-out (run_reap).
 *
 *   run_argv(argv, out, err, timeout_s)   start, wait; the exit code (FAIL on signal)
 *   run_output(dir, argv, what)           the same, must exit 0; its standard output
 *   run_start / run_start_env + run_wait  a child that runs beside the test (a JVM)
 *   run_exited(pid, &code) / run_reap     has it ended? / wait, see a time-out
 *   run_wait_state(pid, sig, ms, what)    wait until it has exec'd (0) or catches sig
 *   run_cpu_ms(pid)                       the CPU time it has used (a busy machine gives less)
 *   run_logged(dir, argv, log, len, t)    viprof with its stderr read back into log
 *   run_sh(cmd, t) / run_shf(t, fmt, ...) a shell command line, its exit code
 *   run_sh_read(cmd, &code) / run_sh_output(cmd)  a shell command's standard output
 *   run_sh_file(cmd, &code)               the same as a FILE * (for parsers of popen's)
 */
#ifndef VIPROF_TEST_RUN_H
#define VIPROF_TEST_RUN_H

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test-helpers.h"
#include "test.h"

/* Where a child's stream goes: a path (created or truncated), NULL for /dev/null, or
 * RUN_KEEP for the test's own (the child's output then lands in the test's log). */
#define RUN_KEEP ""

/* The fd 1 or 2 of the child opens path (NULL: /dev/null, RUN_KEEP: stays as it is). */
static inline int run_open_stream(const char *path, int fd)
{
	if (path && !*path)
		return fd;
	return open(path ? path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
}

/* The children run_start started: when the test exits (a FAIL or SKIP half-way
 * included) those still running are killed and reaped, so that no JVM or root recorder
 * outlives its test holding ctest's output open. Only a pid that is still our child is
 * touched (waitpid says so), never one the kernel gave to someone else since. */
static pid_t run_children[256];
static int run_nchildren;

static inline void run_kill_children(void)
{
	for (int i = 0; i < run_nchildren; i++)
		if (run_children[i] > 0 && waitpid(run_children[i], NULL, WNOHANG) == 0) {
			kill(run_children[i], SIGKILL);
			waitpid(run_children[i], NULL, 0);
		}
}

static inline void run_remember(pid_t p)
{
	if (run_nchildren == 0)
		atexit(run_kill_children);
	if (run_nchildren < (int)(sizeof(run_children) / sizeof(run_children[0])))
		run_children[run_nchildren++] = p;
}

/* Starts argv with environment envp (NULL: ours), its stdout in out and its stderr in
 * err (see RUN_KEEP; out and err the same path: one file, in order). */
static inline pid_t run_start_env(char *const argv[], char *const envp[], const char *out, const char *err)
{
	fflush(stdout);   /* what the test printed is not printed again by the child */
	fflush(stderr);
	pid_t p = fork();
	if (p < 0)
		FAIL("fork for %s: %s", argv[0], strerror(errno));
	if (p == 0) {
		int o = run_open_stream(out, 1);
		int e = out && err && *out && !strcmp(out, err) ? dup(o) : run_open_stream(err, 2);
		if (o < 0 || e < 0)
			_exit(126);
		if (o != 1)
			dup2(o, 1);
		if (e != 2)
			dup2(e, 2);
		if (envp)
			execve(argv[0], argv, envp);
		else
			execv(argv[0], argv);
		_exit(127);
	}
	run_remember(p);
	return p;
}

static inline pid_t run_start(char *const argv[], const char *out, const char *err)
{
	return run_start_env(argv, NULL, out, err);
}

static inline long run_elapsed_ms(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000L + (t.tv_nsec - t0->tv_nsec) / 1000000L;
}

/* Whether child p has ended (reaped: its exit code, 128 + signal, in *code when code is
 * not NULL); false while it runs. Never waits: for loops that wait on an event and
 * must notice the child died first. */
static inline bool run_exited(pid_t p, int *code)
{
	int st;
	pid_t r = waitpid(p, &st, WNOHANG);

	if (r < 0)
		FAIL("waitpid %d: %s", (int)p, strerror(errno));
	if (r != p)
		return false;
	if (code)
		*code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	return true;
}

/* Waits up to timeout_ms for child p: true once it ended, its exit code in *code (128 +
 * the signal when one killed it). False when it still runs after timeout_ms: then it has
 * been killed and reaped, and *code is -1. The caller decides whether that fails. */
static inline bool run_reap(pid_t p, long timeout_ms, int *code)
{
	struct timespec t0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		if (run_exited(p, code))
			return true;
		if (run_elapsed_ms(&t0) >= timeout_ms)
			break;
		usleep(20000);
	}
	kill(p, SIGKILL);
	waitpid(p, NULL, 0);
	*code = -1;
	return false;
}

/* The CPU time (user + system, all threads) process pid has used so far, in ms, from
 * /proc/PID/stat; -1 when it cannot be read. Tests hold sample counts to what the
 * process actually ran, which a busy machine changes. */
static inline double run_cpu_ms(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	const char *p = strrchr(buf, ')');
	unsigned long long ut = 0, st = 0;
	/* After the comm: state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime. */
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return -1;
	return (double)(ut + st) * 1000.0 / (double)sysconf(_SC_CLK_TCK);
}

/* Whether pid's state holds: it has exec'd (its /proc/PID/exe is no longer ours), or it
 * catches signal sig (a handler in SigCgt of /proc/PID/status: a JVM catches SIGQUIT
 * once it can be attached to). */
static inline bool run_has_execed(pid_t pid)
{
	char path[64], a[PATH_MAX], b[PATH_MAX];
	ssize_t na, nb;

	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	na = readlink(path, a, sizeof(a) - 1);
	nb = readlink("/proc/self/exe", b, sizeof(b) - 1);
	return na > 0 && nb > 0 && (na != nb || memcmp(a, b, (size_t)na));
}

static inline bool run_catches(pid_t pid, int sig)
{
	char path[64], line[256];
	bool yes = false;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "SigCgt:", 7)) {
			unsigned long long m = strtoull(line + 7, NULL, 16);
			yes = (m >> (sig - 1)) & 1;
		}
	fclose(f);
	return yes;
}

/* Waits up to timeout_ms until child p has exec'd (sig 0) or catches sig, polling every
 * 10 ms: a test waits on the state it needs, never a fixed sleep. Fails naming what when
 * the child ends first or the time is up. */
static inline void run_wait_state(pid_t p, int sig, long timeout_ms, const char *what)
{
	struct timespec t0;
	int code;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (!(sig ? run_catches(p, sig) : run_has_execed(p))) {
		if (run_exited(p, &code))
			FAIL("child %d exited %d before %s", (int)p, code, what);
		if (run_elapsed_ms(&t0) >= timeout_ms)
			FAIL("child %d: not %s after %ld ms", (int)p, what, timeout_ms);
		usleep(10000);
	}
}

/* Waits up to timeout_s for child p; its exit code, or 128 + the signal that killed it.
 * Kills it and fails when it is still running then. */
static inline int run_wait_code(pid_t p, int timeout_s)
{
	int code;

	if (!run_reap(p, timeout_s * 1000L, &code))
		FAIL("child %d did not finish within %d s (killed)", (int)p, timeout_s);
	return code;
}

/* Waits up to timeout_s for child p; its exit code. Fails when a signal killed it or it
 * is still running then (it is killed). */
static inline int run_wait(pid_t p, int timeout_s)
{
	int code = run_wait_code(p, timeout_s);

	if (code >= 128)
		FAIL("child %d exited %d (128 + signal %d?)", (int)p, code, code - 128);
	return code;
}

/* Runs argv with its stdout and stderr in the files out and err (NULL: /dev/null), up
 * to timeout_s; its exit code (fails on a signal or the time-out). */
static inline int run_argv(char *const argv[], const char *out, const char *err, int timeout_s)
{
	return run_wait(run_start(argv, out, err), timeout_s);
}

/* Runs argv (up to 240 s) with its output in dir/out and dir/err, which must exit 0
 * (what names it in the failure, with its stderr); its standard output. */
static inline char *run_output(const char *dir, char *const argv[], const char *what)
{
	char outp[PATH_MAX], errp[PATH_MAX];

	snprintf(outp, sizeof(outp), "%s/out", dir);
	snprintf(errp, sizeof(errp), "%s/err", dir);
	int rc = run_argv(argv, outp, errp, 240);
	if (rc)
		FAIL("%s exited %d: %s", what, rc, test_slurp_str(errp));
	return test_slurp_str(outp);
}

/* viprof with its stdout to /dev/null and its stderr in dir/log (envp NULL: ours), for
 * run_logged_finish. */
static inline pid_t run_logged_start(const char *dir, char *const argv[], char *const envp[])
{
	char log[PATH_MAX];

	snprintf(log, sizeof(log), "%s/log", dir);
	return run_start_env(argv, envp, NULL, log);
}

/* Waits up to timeout_s for pid started by run_logged_start and reads dir/log into
 * log[len] (so that asserts can quote what viprof said); its exit code, 128 + signal
 * when killed. A machine where no sampler backend can run makes the test skip. */
static inline int run_logged_finish(const char *dir, pid_t pid, char *log, size_t len, int timeout_s)
{
	char path[PATH_MAX];
	int rc = run_wait_code(pid, timeout_s);

	snprintf(path, sizeof(path), "%s/log", dir);
	FILE *f = fopen(path, "r");
	log[0] = '\0';
	if (f) {
		size_t n = fread(log, 1, len - 1, f);
		log[n] = '\0';
		fclose(f);
	}
	if (strstr(log, "no sampler backend can run here"))
		SKIP("%s", log);
	return rc;
}

static inline int run_logged(const char *dir, char *const argv[], char *log, size_t len, int timeout_s)
{
	return run_logged_finish(dir, run_logged_start(dir, argv, NULL), log, len, timeout_s);
}

/* Runs the shell command line cmd (its redirections its own; its output otherwise goes
 * where the test's does) up to timeout_s; its exit code. Fails when it is killed by a
 * signal or runs past timeout_s: a crash never reads as "exited non-zero". */
static inline int run_sh(const char *cmd, int timeout_s)
{
	pid_t p = run_start((char *const[]){ "/bin/sh", "-c", (char *)cmd, NULL }, RUN_KEEP, RUN_KEEP);
	int code;
	if (!run_reap(p, timeout_s * 1000L, &code))
		FAIL("'%s' did not finish within %d s (killed)", cmd, timeout_s);
	if (code >= 128)
		FAIL("'%s' exited %d (128 + signal %d?)", cmd, code, code - 128);
	return code;
}

/* run_sh of the command line printf(fmt, ...) makes. */
static inline int run_shf(int timeout_s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline int run_shf(int timeout_s, const char *fmt, ...)
{
	char cmd[8192];
	va_list ap;

	va_start(ap, fmt);
	int n = vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(cmd))
		FAIL("command line too long: %.200s...", cmd);
	return run_sh(cmd, timeout_s);
}


/* The standard output of the shell command line cmd as a stream to read (fclose it), once
 * the command has ended (up to 300 s); its exit code (128 + signal) in *code when code
 * is not NULL. For parsers written against popen(). */
static inline FILE *run_sh_file(const char *cmd, int *code)
{
	char path[] = "/tmp/vp-test-run-out-XXXXXX";
	int fd = mkstemp(path), rc;

	if (fd < 0)
		FAIL("mkstemp %s: %s", path, strerror(errno));
	close(fd);
	pid_t p = run_start((char *const[]){ "/bin/sh", "-c", (char *)cmd, NULL }, path, RUN_KEEP);
	if (!run_reap(p, 300000, &rc)) {
		unlink(path);
		FAIL("'%s' did not finish within 300 s (killed)", cmd);
	}
	FILE *f = fopen(path, "r");
	unlink(path);
	if (!f)
		FAIL("cannot read the output of '%s': %s", cmd, strerror(errno));
	if (code)
		*code = rc;
	return f;
}

/* The standard output of the shell command line cmd, NUL-terminated (never NULL); its
 * exit code (128 + signal) in *code when code is not NULL. */
static inline char *run_sh_read(const char *cmd, int *code)
{
	FILE *f = run_sh_file(cmd, code);
	char *b = test_read_all(f, cmd, NULL);

	fclose(f);
	return b;
}

/* The standard output of the shell command line cmd, which must exit 0 (its standard
 * error goes into the failure message). It runs in the current directory, leaving
 * out.txt and err.txt there. */
static inline char *run_sh_output(const char *cmd)
{
	char full[4096];

	snprintf(full, sizeof(full), "%s > out.txt 2> err.txt", cmd);
	int rc = run_sh(full, 600);
	if (rc != 0)
		FAIL("'%s' failed (%d): %s", cmd, rc, test_slurp_str("err.txt"));
	return test_slurp_str("out.txt");
}

/* A root JVM an earlier test killed with this pid (pid_max is 32768 here) may have left
 * its /tmp/.java_pid<pid>: a JVM of another uid cannot replace root's file in the sticky
 * /tmp, and an attach rightly refuses it, naming it. Tests that attach to another
 * user's JVM are not about that: the stale file of any uid but the JVM's goes. */
static inline void tu_drop_stale_attach_socket(pid_t jvm, uid_t jvm_uid)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/tmp/.java_pid%d", (int)jvm);
	if (!lstat(path, &st) && st.st_uid != jvm_uid) {
		fprintf(stderr, "removing %s, left by an earlier JVM of uid %u with this pid\n", path, (unsigned)st.st_uid);
		ASSERT_OK(unlink(path));
	}
}

#endif
