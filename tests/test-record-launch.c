/* 'viprof record -- CMD': the command's exit status becomes viprof's; -d and SIGINT end
 * the recording cleanly (END, meta.json) and stop the command; recording lasts until
 * the command's descendants are done too; a command that cannot run is exit 127; the
 * launched JVM gets the agent through JAVA_TOOL_OPTIONS, appended to the user's. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "common/session_format.h"
#include "test.h"
#include "test-run.h"

static char tmp[] = "/tmp/vp-test-record-launch-XXXXXX";
static char out[8192];

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#define RUN(...) run_logged(tmp, (char *const[]){ VIPROF_BIN, "record", __VA_ARGS__, NULL }, out, sizeof(out), 80)

/* Reads the stream; returns whether it has END, with its body and the sample count,
 * and (when split3_samples) the samples of processes whose comm is split3 or that were
 * forked during the recording. The comm
 * may arrive after a process's first samples (the sampler drains CPUs in turn), so
 * the pids are gathered in a first pass. */
static bool read_end(const char *sess, struct vp_end *end, long *samples, long *split3_samples)
{
	char path[PATH_MAX + 32], err[512];
	static uint32_t spids[64];
	int nsp = 0;
	bool have = false;
	snprintf(path, sizeof(path), "%s/" VP_SESSION_STREAM, sess);
	*samples = 0;
	if (split3_samples)
		*split3_samples = 0;
	for (int pass = 0; pass < 2; pass++) {
		struct cfile_reader *r = cfile_reader__open(path, VP_KIND_SESSION_STREAM, err, sizeof(err));
		if (!r)
			FAIL("%s", err);
		const struct vp_record *rec;
		int k;
		while ((k = cfile_reader__next(r, &rec)) == 1) {
			if (pass == 0) {
				if (rec->type == VP_REC_COMM) {
					const struct vp_comm *c = vp_record_body(rec);
					if (!strcmp(c->comm, "split3") && nsp < 64)
						spids[nsp++] = c->pid;
				}
				/* A forked process (the grandchild) counts too: whether its exec's
				 * COMM made it into the stream is the sampler's business, tested
				 * there; here the point is that its samples were recorded. */
				if (rec->type == VP_REC_FORK) {
					const struct vp_task *t = vp_record_body(rec);
					if (t->pid == t->tid && t->pid != t->ppid && nsp < 64)
						spids[nsp++] = t->pid;
				}
				if (rec->type == VP_REC_END) {
					memcpy(end, vp_record_body(rec), sizeof(*end));
					have = true;
				}
				continue;
			}
			if (rec->type == VP_REC_SAMPLE) {
				const struct vp_sample *s = vp_record_body(rec);
				(*samples)++;
				for (int i = 0; split3_samples && i < nsp; i++)
					if (spids[i] == s->pid) {
						(*split3_samples)++;
						break;
					}
			}
		}
		if (k < 0)
			FAIL("%s: %s", path, cfile_reader__error(r));
		cfile_reader__close(r);
	}
	return have;
}

static bool exists(const char *sess, const char *name)
{
	char path[PATH_MAX + 64];
	struct stat st;
	snprintf(path, sizeof(path), "%s/%s", sess, name);
	return stat(path, &st) == 0;
}

/* The CPU time (ns, from /proc/PID/stat's utime + stime) of the running split3 with this
 * argument, or -1 when none runs (a zombie is not running). */
static long long split3_cpu(const char *marker)
{
	long long cpu = -1;
	DIR *d = opendir("/proc");
	ASSERT_NOT_NULL(d);
	struct dirent *e;
	while (cpu < 0 && (e = readdir(d))) {
		char path[300], buf[1024];
		snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		size_t n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[n] = '\0';
		size_t l0 = strlen(buf);
		if (l0 >= 6 && !strcmp(buf + l0 - 6, "split3") && l0 + 1 < n && !strcmp(buf + l0 + 1, marker)) {
			snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
			f = fopen(path, "r");
			if (f) {
				n = fread(buf, 1, sizeof(buf) - 1, f);
				buf[n] = '\0';
				fclose(f);
				char *rp = strrchr(buf, ')');
				unsigned long long ut, stt;
				/* state is field 3; utime and stime are fields 14 and 15 */
				if (rp && rp[2] != 'Z' &&
				    sscanf(rp + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &stt) == 2)
					cpu = (long long)((ut + stt) * (1000000000ull / (unsigned long long)sysconf(_SC_CLK_TCK)));
			}
		}
	}
	closedir(d);
	return cpu;
}

/* Whether the split3 with this argument is gone within 10 s (stopped by viprof: the
 * signal takes effect when the machine next runs it). */
static bool split3_gone(const char *marker)
{
	uint64_t t0 = mono_ns();
	while (split3_cpu(marker) >= 0)
		if (mono_ns() - t0 > 10000000000ull)
			return false;
		else
			sleep_ms(10);
	return true;
}

/* Waits (up to 120 s) until the split3 with this argument has had cpu_ns of CPU: an
 * event, where a fixed sleep assumes the machine gave it the CPU meanwhile. */
static void wait_split3_cpu(const char *marker, long long cpu_ns)
{
	uint64_t t0 = mono_ns();
	long long c;
	while ((c = split3_cpu(marker)) < cpu_ns) {
		if (mono_ns() - t0 > 120000000000ull)
			FAIL("split3 %s %s after 120 s", marker, c < 0 ? "is not running" : "has not had its CPU time");
		sleep_ms(10);
	}
}

/* Polls until no split3 with this argument runs (up to 120 s), returning the most CPU
 * it was seen to have had: a lower bound of what it ran while being recorded. */
static long long watch_split3(const char *marker)
{
	uint64_t t0 = mono_ns();
	long long c, last = 0;
	bool seen = false;
	while (mono_ns() - t0 < 120000000000ull) {
		c = split3_cpu(marker);
		if (c >= 0) {
			seen = true;
			last = c;
		} else if (seen || mono_ns() - t0 > 5000000000ull) {
			break;
		}
		sleep_ms(10);
	}
	return last;
}

int main(void)
{
	REQUIRE_ROOT();
	ASSERT_NOT_NULL(mkdtemp(tmp));
	char sess[PATH_MAX];
	struct vp_end end;
	long samples, ssamples;

	/* The exit status passes through, and lands in END. */
	snprintf(sess, sizeof(sess), "%s/exit3", tmp);
	ASSERT_EQ(RUN("-q", "-o", sess, "--", "/bin/sh", "-c", "exit 3"), 3);
	ASSERT_TRUE(read_end(sess, &end, &samples, NULL));
	ASSERT_EQ(end.exit_status, 3);
	ASSERT_TRUE(exists(sess, "meta.json"));

	/* A command that cannot run: 127, and a message naming it. */
	snprintf(sess, sizeof(sess), "%s/noexec", tmp);
	ASSERT_EQ(RUN("-q", "-o", sess, "--", "/nonexistent/viprof-test-cmd"), 127);
	ASSERT_CONTAINS(out, "/nonexistent/viprof-test-cmd");

	/* -d ends a longer command's recording cleanly and stops the command. */
	snprintf(sess, sizeof(sess), "%s/duration", tmp);
	uint64_t t0 = mono_ns();
	pid_t v = run_logged_start(tmp, (char *const[]){ VIPROF_BIN, "record", "-q", "-d", "1", "-o", sess, "--", SPLIT3, "31.5", NULL },
			NULL);
	/* What split3 measured of its CPU (as the kernel accounts it) while it was recorded:
	 * a busy machine gives it less than the 1 s of wall time. */
	long long cpu = watch_split3("31.5");
	ASSERT_EQ(run_logged_finish(tmp, v, out, sizeof(out), 80), 0);
	ASSERT_LT(mono_ns() - t0, 10000000000ull);
	ASSERT_TRUE(read_end(sess, &end, &samples, NULL));
	fprintf(stderr, "-d 1: %ld samples, split3 seen with %.3f CPU-s\n", samples, cpu / 1e9);
	/* 999 Hz of its CPU time; /proc's ticks (10 ms) and the last poll (10 ms) before
	 * it was stopped make the CPU figure a little low, never high. */
	ASSERT_GT(samples, 0);
	ASSERT_GE_F((double)samples, cpu / 1e9 * 999 * 0.5 - 20);
	ASSERT_DBL_NEAR((double)end.duration_ns / 1e9, 1.0, 0.5);
	ASSERT_TRUE(exists(sess, "meta.json"));
	ASSERT_TRUE(split3_gone("31.5"));

	/* SIGINT: the same clean end. */
	snprintf(sess, sizeof(sess), "%s/sigint", tmp);
	v = run_logged_start(tmp, (char *const[]){ VIPROF_BIN, "record", "-q", "-o", sess, "--", SPLIT3, "32.5", NULL }, NULL);
	/* Until split3 has run 0.3 CPU-s under the recording (so the check below can see
	 * it, and there are samples to count), however long the machine takes to give it. */
	wait_split3_cpu("32.5", 300000000);
	ASSERT_OK(kill(v, SIGINT));
	ASSERT_EQ(run_logged_finish(tmp, v, out, sizeof(out), 80), 0);
	ASSERT_TRUE(read_end(sess, &end, &samples, NULL));
	ASSERT_GT(samples, 100);
	ASSERT_TRUE(exists(sess, "meta.json"));
	ASSERT_CONTAINS(out, "samples (");
	ASSERT_TRUE(split3_gone("32.5"));

	/* The command exits at once but leaves a grandchild working: the recording
	 * waits for it, and has its samples. */
	snprintf(sess, sizeof(sess), "%s/descendant", tmp);
	char script[PATH_MAX + 64];
	snprintf(script, sizeof(script), "%s 0.7 & exit 0", SPLIT3);
	ASSERT_EQ(RUN("-q", "-o", sess, "--", "/bin/sh", "-c", script), 0);
	ASSERT_TRUE(read_end(sess, &end, &samples, &ssamples));
	fprintf(stderr, "descendant: %ld samples, %ld of split3, %.2f s\n", samples, ssamples,
		(double)end.duration_ns / 1e9);
	ASSERT_GT(ssamples, 300);   /* 0.7 CPU-s at 999 Hz */
	ASSERT_GT(end.duration_ns, 600000000ull);

	/* JAVA_TOOL_OPTIONS: the agent with the session's absolute jit directory and the
	 * line-table flags, after what the user had; -XX:+PreserveFramePointer only for the
	 * frame-pointer walk (the default walker does not need it); nothing of ours with
	 * --no-jit. */
	snprintf(sess, sizeof(sess), "%s/jto", tmp);
	char env_file[PATH_MAX + 32], cmd[PATH_MAX + 128];
	snprintf(env_file, sizeof(env_file), "%s/jto.txt", tmp);
	snprintf(cmd, sizeof(cmd), "printf '%%s' \"$JAVA_TOOL_OPTIONS\" > %s", env_file);
	char *envp[] = { "JAVA_TOOL_OPTIONS=-Xmx64m", "VIPROF_AGENT=/bin/true", "PATH=/usr/bin:/bin", NULL };
	ASSERT_EQ(run_logged_finish(tmp, run_logged_start(tmp, (char *const[]){ VIPROF_BIN, "record", "-q", "-o", sess, "--", "/bin/sh", "-c", cmd, NULL },
			       envp), out, sizeof(out), 80), 0);
	char jto[4096] = "", expect[PATH_MAX + 256];
	FILE *f = fopen(env_file, "r");
	ASSERT_NOT_NULL(f);
	size_t n = fread(jto, 1, sizeof(jto) - 1, f);
	jto[n] = '\0';
	fclose(f);
	snprintf(expect, sizeof(expect),
		 "-Xmx64m -agentpath:/bin/true=dir=%s/jit -XX:+UnlockDiagnosticVMOptions -XX:+DebugNonSafepoints", sess);
	ASSERT_STREQ(jto, expect);
	char sess_fp[PATH_MAX];
	snprintf(sess_fp, sizeof(sess_fp), "%s/jto-fp", tmp);
	ASSERT_EQ(run_logged_finish(tmp, run_logged_start(tmp, (char *const[]){ VIPROF_BIN, "record", "-q", "-g", "--stack-walk", "fp", "-o", sess_fp,
					       "--", "/bin/sh", "-c", cmd, NULL }, envp), out, sizeof(out), 80), 0);
	f = fopen(env_file, "r");
	ASSERT_NOT_NULL(f);
	n = fread(jto, 1, sizeof(jto) - 1, f);
	jto[n] = '\0';
	fclose(f);
	snprintf(expect, sizeof(expect),
		 "-Xmx64m -agentpath:/bin/true=dir=%s/jit -XX:+PreserveFramePointer -XX:+UnlockDiagnosticVMOptions "
		 "-XX:+DebugNonSafepoints", sess_fp);
	ASSERT_STREQ(jto, expect);
	/* A command that is java itself gets the options on its command line, right after
	 * "java", and JAVA_TOOL_OPTIONS stays the user's: HotSpot then prints no "Picked
	 * up JAVA_TOOL_OPTIONS" line into the application's stderr. */
	char fake_java[PATH_MAX + 16], sess_j[PATH_MAX];
	snprintf(fake_java, sizeof(fake_java), "%s/java", tmp);
	f = fopen(fake_java, "w");
	ASSERT_NOT_NULL(f);
	fprintf(f, "#!/bin/sh\nprintf '%%s|' \"$JAVA_TOOL_OPTIONS\" \"$@\" > %s\n", env_file);
	fclose(f);
	ASSERT_OK(chmod(fake_java, 0755));
	snprintf(sess_j, sizeof(sess_j), "%s/jto-java", tmp);
	ASSERT_EQ(run_logged_finish(tmp, run_logged_start(tmp, (char *const[]){ VIPROF_BIN, "record", "-q", "-o", sess_j, "--", fake_java, "-cp", "x",
					       "Main", NULL }, envp), out, sizeof(out), 80), 0);
	f = fopen(env_file, "r");
	ASSERT_NOT_NULL(f);
	n = fread(jto, 1, sizeof(jto) - 1, f);
	jto[n] = '\0';
	fclose(f);
	snprintf(expect, sizeof(expect), "-Xmx64m|-agentpath:/bin/true=dir=%s/jit|-XX:+UnlockDiagnosticVMOptions|"
		 "-XX:+DebugNonSafepoints|-cp|x|Main|", sess_j);
	ASSERT_STREQ(jto, expect);
	struct stat st;
	snprintf(expect, sizeof(expect), "%s/jit", sess);
	ASSERT_OK(stat(expect, &st));
	ASSERT_EQ(st.st_mode & 0777, 0700);   /* private; a JVM of another user is let in by an ACL */

	snprintf(sess, sizeof(sess), "%s/nojit", tmp);
	ASSERT_EQ(run_logged_finish(tmp, run_logged_start(tmp, (char *const[]){ VIPROF_BIN, "record", "-q", "--no-jit", "-o", sess, "--", "/bin/sh", "-c",
						 cmd, NULL },
			       envp), out, sizeof(out), 80), 0);
	f = fopen(env_file, "r");
	ASSERT_NOT_NULL(f);
	n = fread(jto, 1, sizeof(jto) - 1, f);
	jto[n] = '\0';
	fclose(f);
	ASSERT_STREQ(jto, "-Xmx64m");

	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	if (run_sh(cmd, 80) != 0)
		fprintf(stderr, "warning: could not remove %s\n", tmp);
	printf("ok\n");
	return 0;
}
