/* Helpers for the JVM tests: find JDKs, wait on what a JVM writes, read a session's
 * files (a JVM itself is run with tests/test-run.h). Paths come from CMake
 * (VIPROF_AGENT_SO, VIPROF_JAVA_CLASSES, VIPROF_JDK17_HOME, VIPROF_JDK25_HOME). */
#ifndef VIPROF_TEST_AGENT_UTIL_H
#define VIPROF_TEST_AGENT_UTIL_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "common/util.h"
#include "test.h"
#include "test-helpers.h"
#include "test-run.h"

/* The java binary of a JDK home, or NULL when that JDK is not installed. */
static inline const char *tu_java(const char *home)
{
	static char buf[2][512];
	static int k;
	char *b = buf[k++ & 1];
	snprintf(b, 512, "%s/bin/java", home);
	return access(b, X_OK) == 0 ? b : NULL;
}

/* Each JVM test is two ctest entries: NAME runs it on JDK 17 (argument "17") and
 * NAME-jdk25 on Temurin 25 (argument "25"); the entry whose JDK is missing says skipped.
 * Returns that JDK's java; *jdk17 tells which one it is. */
static inline const char *tu_jdk_from_args(int argc, char **argv, bool *jdk17)
{
	bool want25 = argc > 1 && !strcmp(argv[1], "25");
	const char *home = want25 ? VIPROF_JDK25_HOME : VIPROF_JDK17_HOME;
	const char *java = tu_java(home);
	if (!java)
		SKIP("JDK %s not installed at %s", want25 ? "25" : "17", home);
	*jdk17 = !want25;
	return java;
}

static inline void tu_require_fixtures(void)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/JitSplit.class", VIPROF_JAVA_CLASSES);
	if (access(VIPROF_AGENT_SO, R_OK))
		SKIP("agent %s not built (no JDK headers?)", VIPROF_AGENT_SO);
	if (access(p, R_OK))
		SKIP("Java fixtures not compiled (%s missing: no javac?)", p);
}

static inline char *tu_tmpdir(const char *tag)
{
	static char buf[4][256];
	static int k;
	char *b = buf[k++ & 3];
	snprintf(b, 256, "/tmp/vp-%s-XXXXXX", tag);
	if (!mkdtemp(b))
		FAIL("mkdtemp: %s", strerror(errno));
	return b;
}

/* Polls cond(ctx) every 50 ms until it holds: a test waits on the event it needs, not
 * on a fixed sleep. Fails naming what after timeout_s. */
static inline void tu_wait_until(bool (*cond)(void *ctx), void *ctx, int timeout_s, const char *what)
{
	for (int i = 0; i < timeout_s * 20; i++) {
		if (cond(ctx))
			return;
		usleep(50000);
	}
	FAIL("waited %d s for %s", timeout_s, what);
}

/* The text of the file at path, "" when it cannot be opened (test_slurp_str). */
static inline char *tu_read(const char *path)
{
	return test_slurp_str(path);
}

/* The session's time zero, CLOCK_MONOTONIC ns, from its meta.json: when sampling
 * started (sampling_start_monotonic_ns, common/timezero.h), which report --time and
 * viprof maps count from; start_monotonic_ns in a session from before it. */
static inline uint64_t tu_session_zero(const char *sess)
{
	char meta[700];
	snprintf(meta, sizeof(meta), "%s/meta.json", sess);
	char *mj = tu_read(meta), *p = strstr(mj, "\"sampling_start_monotonic_ns\"");
	if (!p)
		p = strstr(mj, "\"start_monotonic_ns\"");
	if (!p || !(p = strchr(p, ':')))
		FAIL("%s has neither sampling_start_monotonic_ns nor start_monotonic_ns", meta);
	while (*p && (*p < '0' || *p > '9'))
		p++;
	uint64_t t = strtoull(p, NULL, 10);
	free(mj);
	return t;
}

/* The windows of CodeReuse's generations (tests/java/CodeReuse.java prints "gen N
 * START END HOT", CLOCK_MONOTONIC ns, per generation) in seconds from the session's time
 * zero (tu_session_zero), for report --time and vp_session_opts: from[g], to[g]
 * and, when hot is not NULL, hot[g] (the first call of the generation's code returned)
 * for g = 1..gens. Fails when a generation's line is missing or empty. */
static inline void tu_gen_windows(const char *out_path, const char *sess, int gens, double *from, double *to,
				  double *hot)
{
	double start = (double)tu_session_zero(sess);
	for (int g = 1; g <= gens; g++)
		from[g] = to[g] = -1;
	char *o = tu_read(out_path), *save = NULL;
	for (char *l = strtok_r(o, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		int g;
		unsigned long long s, e, h = 0;
		if (sscanf(l, "gen %d %llu %llu %llu", &g, &s, &e, &h) >= 3 && g >= 1 && g <= gens && e > s) {
			from[g] = ((double)s - start) / 1e9;
			to[g] = ((double)e - start) / 1e9;
			if (hot)
				hot[g] = ((double)(h ? h : s) - start) / 1e9;
		}
	}
	free(o);
	for (int g = 1; g <= gens; g++)
		if (to[g] < 0)
			FAIL("%s: no 'gen %d START END' line", out_path, g);
}

/* Waits up to timeout_ms until has(text of the file at path, arg) holds; true once it
 * does. */
static inline bool tu_wait_text(const char *path, bool (*has)(char *text, const void *arg), const void *arg,
				int timeout_ms)
{
	for (int waited = 0;; waited += 50) {
		char *o = tu_read(path);
		bool found = has(o, arg);

		free(o);
		if (found)
			return true;
		if (waited >= timeout_ms)
			return false;
		usleep(50000);
	}
}

static inline bool tu_text_has(char *text, const void *needle)
{
	return strstr(text, needle) != NULL;
}

/* Waits up to timeout_ms for needle to appear in the file at path (a workload's
 * "ready" line); true once it did. */
static inline bool tu_wait_for(const char *path, const char *needle, int timeout_ms)
{
	return tu_wait_text(path, tu_text_has, needle, timeout_ms);
}

/* Creates the empty file path (a workload's stop file), or the test fails. */
static inline void tu_touch(const char *path)
{
	int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);

	if (fd < 0)
		FAIL("cannot create %s: %s", path, strerror(errno));
	close(fd);
}

struct tu_compiled {
	const char *method;
	int tier;
};

/* Whether -XX:+PrintCompilation output (text, modified) has a line "... <tier> <method>
 * (...)" or "... <tier> <method> @ <bci> (...)". */
static inline bool tu_text_compiled(char *text, const void *arg)
{
	const struct tu_compiled *c = arg;
	size_t ml = strlen(c->method);

	for (char *l = text; l && *l;) {
		char *nl = strchr(l, '\n'), *m;

		if (nl)
			*nl = '\0';
		if ((m = strstr(l, c->method)) && (m[ml] == ' ' || m[ml] == '\0')) {
			char *q = m;

			while (q > l && q[-1] == ' ')
				q--;
			if (q - l >= 2 && q[-1] == '0' + c->tier && q[-2] == ' ')
				return true;
		}
		l = nl ? nl + 1 : NULL;
	}
	return false;
}

/* Waits up to timeout_ms until the -XX:+PrintCompilation output in the file at path shows
 * method ("Class::name", as HotSpot prints it) compiled at tier (4: C2, after the
 * profiling tier saw its call sites); true once it does. */
static inline bool tu_wait_compiled(const char *path, const char *method, int tier, int timeout_ms)
{
	return tu_wait_text(path, tu_text_compiled, &(struct tu_compiled){ method, tier }, timeout_ms);
}

static inline int tu_count_lines(const char *s, const char *needle)
{
	int n = 0;
	for (const char *p = s; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

/* Waits until the continuous service's log (viprof serve --continuous) has ended n
 * intervals (one "... of one CPU (budget ...)" line each), up to timeout_s. */
static inline void tu_wait_intervals(const char *log, int n, int timeout_s)
{
	for (int i = 0; i < timeout_s * 5; i++) {
		char *s = tu_read(log);
		int k = tu_count_lines(s, "of one CPU (budget");
		free(s);
		if (k >= n)
			return;
		usleep(200000);
	}
	FAIL("the service did not end %d intervals within %d s", n, timeout_s);
}

/* qsort comparison of C strings (char *[] elements). */
static inline int tu_cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The interval sessions of the continuous service's directory dir (their names are 16
 * characters: the interval's start), oldest first, into names[max] (malloc'd); their
 * count. */
static inline int tu_list_intervals(const char *dir, char **names, int max)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	if (!d)
		FAIL("interval directory %s: %s", dir, strerror(errno));
	while ((de = readdir(d)) && n < max)
		if (strlen(de->d_name) == 16)
			names[n++] = strdup(de->d_name);
	closedir(d);
	qsort(names, (size_t)n, sizeof(*names), tu_cmp_str);
	return n;
}

/* The single <pid> directory the agent created under dir. */
static inline void tu_pid_dir(const char *dir, char *out, size_t len)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;
	if (!d)
		FAIL("agent directory %s missing: %s", dir, strerror(errno));
	while ((de = readdir(d)))
		if (de->d_name[0] != '.' && n++ == 0)
			snprintf(out, len, "%.400s/%.255s", dir, de->d_name);
	closedir(d);
	if (n != 1)
		FAIL("expected one pid directory in %s, found %d", dir, n);
}

static inline void tu_rm_rf(const char *dir)
{
	char cmd[600];
	if (strncmp(dir, "/tmp/vp-", 8))
		return;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (run_sh(cmd, 60)) {
		/* best effort */
	}
}

#endif
