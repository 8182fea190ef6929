/* 'viprof record' command line: the parser on its own (every value checked, -F with
 * -c, -p, targets, options after CMD stay CMD's), then the built binary: usage errors
 * exit 2 with one line naming the culprit, an event this VM cannot count is refused
 * by name, and no session directory is left behind by a refused run. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "cli/record_opts.h"
#include "common/util.h"
#include "recorder/jvm_find.h"
#include "test.h"
#include "test-run.h"

static int parse(struct vp_record_opts *o, char *err, size_t errlen, ...)
{
	char *argv[32];
	int argc = 0;
	va_list ap;
	va_start(ap, errlen);
	argv[argc++] = "record";
	for (char *a; (a = va_arg(ap, char *)) != NULL && argc < 31;)
		argv[argc++] = a;
	va_end(ap);
	argv[argc] = NULL;
	vp_record_opts__defaults(o);
	err[0] = '\0';
	/* getopt may permute nothing (we use '+'), but it keeps pointers into argv: copy. */
	static char *keep[32];
	memcpy(keep, argv, sizeof(argv));
	return record_opts__parse(o, argc, keep, err, errlen);
}

#define PARSE(o, ...) parse(o, err, sizeof(err), __VA_ARGS__, (char *)NULL)

static void test_parser(void)
{
	struct vp_record_opts o;
	char err[512];
	char pid[32];
	snprintf(pid, sizeof(pid), "%d", (int)getpid());

	ASSERT_OK(PARSE(&o, "--", "ls", "-l"));
	ASSERT_EQ(o.target, RECORD_TARGET_LAUNCH);
	ASSERT_STREQ(o.cmd[0], "ls");
	ASSERT_STREQ(o.cmd[1], "-l");   /* CMD's option, not ours */
	ASSERT_NULL(o.cmd[2]);
	ASSERT_UEQ(o.freq, RECORD_DEFAULT_FREQ);
	ASSERT_STREQ(o.output, "viprof.session");
	ASSERT_STREQ(o.backend, "auto");
	ASSERT_NULL(o.xen_pmu_mode);
	ASSERT_OK(PARSE(&o, "--xen-pmu-mode", "hv", "--", "true"));
	ASSERT_STREQ(o.xen_pmu_mode, "hv");
	ASSERT_NE(PARSE(&o, "--xen-pmu-mode", "bogus", "--", "true"), 0);
	ASSERT_CONTAINS(err, "must be off, self, hv or all");
	/* --jvm-attach: every user's JVMs by default, or none, some users, some pids. */
	ASSERT_OK(PARSE(&o, "-a"));
	ASSERT_EQ(o.jvm_attach, RECORD_JVM_ALL);
	ASSERT_FALSE(o.jvm_attach_given);
	ASSERT_OK(PARSE(&o, "-a", "--jvm-attach", "none"));
	ASSERT_EQ(o.jvm_attach, RECORD_JVM_NONE);
	ASSERT_OK(PARSE(&o, "-a", "--jvm-attach", "user:root,1234"));
	ASSERT_EQ(o.jvm_attach, RECORD_JVM_UIDS);
	ASSERT_EQ(o.jvm_n, 2);
	ASSERT_EQ(o.jvm_uids[0], 0);
	ASSERT_EQ(o.jvm_uids[1], 1234);
	ASSERT_OK(PARSE(&o, "-a", "--jvm-attach", "17,42"));
	ASSERT_EQ(o.jvm_attach, RECORD_JVM_PIDS);
	ASSERT_EQ(o.jvm_pids[1], 42);
	ASSERT_EQ(PARSE(&o, "-a", "--jvm-attach", "user:no-such-user-vp"), -EINVAL);
	ASSERT_CONTAINS(err, "no-such-user-vp: no such user");
	ASSERT_EQ(PARSE(&o, "-a", "--jvm-attach", "some"), -EINVAL);
	ASSERT_CONTAINS(err, "--jvm-attach some");
	/* -e alloc and -e lock on running JVMs go with the attach (issue 25); with no agent to
	 * take them, refused with the cause. */
	ASSERT_OK(PARSE(&o, "-p", "17", "-e", "alloc,lock"));
	ASSERT_UEQ(o.alloc_bytes, 524288);
	ASSERT_TRUE(o.lock);
	ASSERT_OK(PARSE(&o, "-a", "-e", "alloc/period=65536/"));
	ASSERT_UEQ(o.alloc_bytes, 65536);
	ASSERT_EQ(PARSE(&o, "-p", "17", "-e", "lock", "--jvm-attach", "none"), -EINVAL);
	ASSERT_CONTAINS(err, "-e lock needs the JVM agent in the running JVMs, which --jvm-attach none keeps out");
	ASSERT_EQ(PARSE(&o, "-a", "-e", "alloc", "--no-jit"), -EINVAL);
	ASSERT_CONTAINS(err, "--no-jit");

	/* Without '--' the first non-option starts the command, and -g after it is CMD's. */
	ASSERT_OK(PARSE(&o, "-F", "4000", "-g", "-o", "d", "sleep", "-g"));
	ASSERT_UEQ(o.freq, 4000);
	ASSERT_TRUE(o.callchain);
	ASSERT_STREQ(o.output, "d");
	ASSERT_STREQ(o.cmd[0], "sleep");
	ASSERT_STREQ(o.cmd[1], "-g");

	ASSERT_OK(PARSE(&o, "-c", "100000", "-a", "-d", "2.5", "-q", "--force", "--no-jit", "--backend", "perf"));
	ASSERT_EQ(o.target, RECORD_TARGET_ALL);
	ASSERT_UEQ(o.period, 100000);
	ASSERT_UEQ(o.freq, 0);
	ASSERT_DBL_NEAR(o.duration, 2.5, 1e-9);
	ASSERT_TRUE(o.quiet && o.force && o.no_jit);
	ASSERT_STREQ(o.backend, "perf");

	char pids[80];
	snprintf(pids, sizeof(pids), "%s,1", pid);
	ASSERT_OK(PARSE(&o, "-p", pids));
	ASSERT_EQ(o.target, RECORD_TARGET_PIDS);
	ASSERT_EQ(o.npids, 2);
	ASSERT_EQ(o.pids[0], getpid());
	ASSERT_EQ(o.pids[1], 1);

	ASSERT_OK(PARSE(&o, "--help"));
	ASSERT_TRUE(o.help);

	/* Each bad value: -EINVAL and a message naming it. */
	ASSERT_EQ(PARSE(&o, "-F", "0", "--", "true"), -EINVAL);
	ASSERT_CONTAINS(err, "-F 0");
	ASSERT_EQ(PARSE(&o, "-F", "12abc", "--", "true"), -EINVAL);
	ASSERT_CONTAINS(err, "-F 12abc");
	ASSERT_EQ(PARSE(&o, "-F", "-5", "--", "true"), -EINVAL);
	ASSERT_EQ(PARSE(&o, "-F", "100000000", "--", "true"), -EINVAL);
	ASSERT_EQ(PARSE(&o, "-F", "100", "-c", "10", "--", "true"), -EINVAL);
	ASSERT_CONTAINS(err, "-F and -c");
	ASSERT_EQ(PARSE(&o, "-c", "0", "--", "true"), -EINVAL);
	ASSERT_CONTAINS(err, "-c 0");
	ASSERT_EQ(PARSE(&o, "-p", "abc"), -EINVAL);
	ASSERT_CONTAINS(err, "no running JVM has the main class or jar 'abc'");
	ASSERT_EQ(PARSE(&o, "-p", "0"), -EINVAL);
	ASSERT_EQ(PARSE(&o, "-p", "4194000"), -EINVAL);   /* well-formed, not running */
	ASSERT_CONTAINS(err, "no process 4194000");
	ASSERT_EQ(PARSE(&o, "-d", "-1", "--", "true"), -EINVAL);
	ASSERT_CONTAINS(err, "-d -1");
	ASSERT_EQ(PARSE(&o, "-d", "nan", "--", "true"), -EINVAL);
	ASSERT_EQ(PARSE(&o, "--backend", "dtrace", "--", "true"), -EINVAL);
	ASSERT_CONTAINS(err, "dtrace");
	ASSERT_EQ(PARSE(&o, "-x", "--", "true"), -EINVAL);
	ASSERT_CONTAINS(err, "unknown option -x");
	ASSERT_EQ(PARSE(&o, "--bogus", "--", "true"), -EINVAL);
	ASSERT_CONTAINS(err, "--bogus");
	ASSERT_EQ(PARSE(&o, "-o"), -EINVAL);
	ASSERT_CONTAINS(err, "-o needs a value");
	ASSERT_EQ(PARSE(&o, "-a", "-p", pid), -EINVAL);
	ASSERT_CONTAINS(err, "one target");
	ASSERT_EQ(PARSE(&o, "-a", "--", "true"), -EINVAL);
	ASSERT_EQ(PARSE(&o, "-g"), -EINVAL);
	ASSERT_CONTAINS(err, "nothing to record");
}

/* Runs the viprof binary with argv; returns its exit status and its stdout+stderr. */
/* Runs viprof with its stdout and stderr in one file, read back into out. */
static int run_viprof(char *out, size_t outlen, char *const argv[])
{
	char path[] = "/tmp/vp-test-record-cli-out-XXXXXX";
	int fd = mkstemp(path);
	ASSERT_GE(fd, 0);
	int rc = run_argv(argv, path, path, 50);
	ssize_t n = pread(fd, out, outlen - 1, 0);
	out[n > 0 ? n : 0] = '\0';
	close(fd);
	unlink(path);
	return rc;
}
#define RUN(out, ...) run_viprof(out, sizeof(out), (char *const[]){ VIPROF_BIN, "record", __VA_ARGS__, NULL })

/* Whether this machine can sample cycles at all (a PMU, virtualized or not). */
static bool cycles_available(void)
{
	struct perf_event_attr a = { .type = PERF_TYPE_HARDWARE, .size = sizeof(a),
				     .config = PERF_COUNT_HW_CPU_CYCLES, .sample_period = 1000000,
				     .disabled = 1, .exclude_kernel = 1, .exclude_hv = 1 };
	int fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
	if (fd >= 0)
		close(fd);
	return fd >= 0;
}

static void test_binary(void)
{
	char out[8192], dir[] = "/tmp/vp-test-record-cli-XXXXXX", sess[PATH_MAX];
	struct stat st;
	ASSERT_NOT_NULL(mkdtemp(dir));
	snprintf(sess, sizeof(sess), "%s/s", dir);

	ASSERT_EQ(RUN(out, "--help"), 0);
	ASSERT_CONTAINS(out, "examples:");
	ASSERT_CONTAINS(out, "--force");

	ASSERT_EQ(RUN(out, "-F", "0", "-o", sess, "--", "true"), 2);
	ASSERT_CONTAINS(out, "-F 0");
	ASSERT_EQ(RUN(out, "-F", "99", "-c", "1000", "-o", sess, "--", "true"), 2);
	ASSERT_CONTAINS(out, "-F and -c");
	ASSERT_EQ(RUN(out, "-p", "notapid", "-o", sess), 2);
	ASSERT_CONTAINS(out, "no running JVM has the main class or jar 'notapid'");
	ASSERT_EQ(RUN(out, "-e", "no-such-event", "-o", sess, "--", "true"), 2);
	ASSERT_CONTAINS(out, "no-such-event");
	/* One line: the cause and the fix together, nothing else. */
	ASSERT_EQ(strchr(out, '\n') - out, (long)strlen(out) - 1);

	if (cycles_available()) {
		fprintf(stderr, "note: this machine counts cycles; the no-PMU refusal is not checked here\n");
	} else {
		int rc = RUN(out, "-e", "cycles", "-o", sess, "--", "true");
		ASSERT_NE(rc, 0);
		ASSERT_EQ(rc, 2);
		ASSERT_CONTAINS(out, "'cycles'");
		ASSERT_CONTAINS(out, "cpu-clock");   /* and says what is available instead */
	}
	/* Outside a Xen dom0 a PMU mode cannot be set: one line naming the file, exit 2. */
	if (access("/sys/hypervisor/pmu/pmu_mode", F_OK) != 0) {
		int rc = RUN(out, "--xen-pmu-mode", "hv", "-o", sess, "--", "true");
		ASSERT_EQ(rc, 2);
		ASSERT_CONTAINS(out, "/sys/hypervisor/pmu/pmu_mode");
		ASSERT_CONTAINS(out, "dom0");
	}
	/* No refused run may leave a session directory behind. */
	ASSERT_NE(stat(sess, &st), 0);
	rmdir(dir);
}

/* A stand-in JVM: this test's own binary run as "java ARGS..." (its /proc/PID/cmdline is
 * what a JVM's is), until it is killed. Returns once it has exec'd. */
static pid_t fake_jvm(char *const argv[])
{
	int p[2];
	ASSERT_OK(pipe2(p, O_CLOEXEC));
	pid_t pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		close(p[0]);
		/* Gone with the test, also when an assert ends it early. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		execv("/proc/self/exe", argv);
		_exit(126);
	}
	close(p[1]);
	char c;
	ASSERT_EQ(read(p[0], &c, 1), 0);   /* EOF: the exec closed the write end */
	close(p[0]);
	return pid;
}

static void stop(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* Issue 33: -p takes a JVM's main class or jar, as async-profiler does; none or several
 * matching is one line naming the candidates. */
static void test_pid_name(void)
{
	struct vp_record_opts o;
	char err[1024];
	pid_t a = fake_jvm((char *const[]){ "java", "-Xmx8m", "-cp", "/nonexistent/views8", "--add-opens",
					    "java.base/java.lang=ALL-UNNAMED", "com.viprof.views8.FakeShopA", "arg", NULL });
	pid_t b1 = fake_jvm((char *const[]){ "/usr/lib/jvm/bin/java", "com.viprof.views8.FakeShopB", NULL });
	pid_t b2 = fake_jvm((char *const[]){ "java", "-Dx=1", "com.viprof.views8.FakeShopB", NULL });
	pid_t j = fake_jvm((char *const[]){ "java", "-jar", "/nonexistent/views8-fake-app.jar", NULL });

	ASSERT_OK(PARSE(&o, "-p", "FakeShopA"));
	ASSERT_EQ(o.target, RECORD_TARGET_PIDS);
	ASSERT_EQ(o.npids, 1);
	ASSERT_EQ(o.pids[0], a);
	ASSERT_OK(PARSE(&o, "-p", "com.viprof.views8.FakeShopA"));
	ASSERT_EQ(o.pids[0], a);
	ASSERT_OK(PARSE(&o, "-p", "views8-fake-app.jar"));
	ASSERT_EQ(o.pids[0], j);
	char mix[64];
	snprintf(mix, sizeof(mix), "views8-fake-app,%d", (int)b1);
	ASSERT_OK(PARSE(&o, "-p", mix));
	ASSERT_EQ(o.npids, 2);
	ASSERT_EQ(o.pids[0], j);
	ASSERT_EQ(o.pids[1], b1);
	/* Several: refused, each named by pid and main class. */
	ASSERT_EQ(PARSE(&o, "-p", "FakeShopB"), -EINVAL);
	char pb1[32], pb2[32];
	snprintf(pb1, sizeof(pb1), "%d com.viprof.views8.FakeShopB", (int)b1);
	snprintf(pb2, sizeof(pb2), "%d com.viprof.views8.FakeShopB", (int)b2);
	ASSERT_CONTAINS(err, "'FakeShopB' names 2 running JVMs");
	ASSERT_CONTAINS(err, pb1);
	ASSERT_CONTAINS(err, pb2);
	ASSERT_NULL(strchr(err, '\n'));
	/* None: refused, naming the JVMs that run. */
	ASSERT_EQ(PARSE(&o, "-p", "NoSuchViews8Main"), -EINVAL);
	ASSERT_CONTAINS(err, "no running JVM has the main class or jar 'NoSuchViews8Main'");
	ASSERT_CONTAINS(err, "com.viprof.views8.FakeShopA");
	ASSERT_NULL(strchr(err, '\n'));
	stop(a);
	stop(b1);
	stop(b2);
	stop(j);
	/* The launcher's own argument parsing, for what 'jps -l' would show. */
	char m[128];
	ASSERT_OK(vp_jvm__main_of((const char *[]){ "java", "-m", "app/com.x.Main" }, 3, m, sizeof(m)));
	ASSERT_STREQ(m, "app/com.x.Main");
	ASSERT_TRUE(vp_jvm__main_matches(m, "Main"));
	ASSERT_TRUE(vp_jvm__main_matches(m, "com.x.Main"));
	ASSERT_FALSE(vp_jvm__main_matches(m, "x.Main2"));
	ASSERT_EQ(vp_jvm__main_of((const char *[]){ "java", "-version" }, 2, m, sizeof(m)), -ENOENT);
	ASSERT_EQ(vp_jvm__main_of((const char *[]){ "bash", "Main" }, 2, m, sizeof(m)), -EINVAL);
}

/* Issue 33: -q hides progress, never a warning about the results: the high-rate one
 * says the profile may be distorted. */
static void test_quiet(void)
{
	long max = vp_read_int_file("/proc/sys/kernel/perf_event_max_sample_rate", 100000);
	if (max <= 10000) {
		printf("skip: kernel.perf_event_max_sample_rate is %ld here; the high-rate warning needs more than 10000\n", max);
		exit(77);
	}
	char out[16384], dir[] = "/tmp/vp-views8-record-q-XXXXXX", sess[PATH_MAX], hz[32];
	ASSERT_NOT_NULL(mkdtemp(dir));
	snprintf(sess, sizeof(sess), "%s/s", dir);
	snprintf(hz, sizeof(hz), "%ld", max < 20000 ? max : 20000);
	RUN(out, "-q", "-F", hz, "-d", "0.2", "-o", sess, "--", "true");
	ASSERT_CONTAINS(out, "warning: -F");
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ASSERT_EQ(run_sh(cmd, 50), 0);
}

/* Issue 33: a pid that names no process gets one message from record, attach and stat
 * (the service's check uses the same function, vp_err_no_process). */
static void test_dead_pid(void)
{
	pid_t dead = fork();
	ASSERT_GE(dead, 0);
	if (dead == 0)
		_exit(0);
	ASSERT_EQ(waitpid(dead, NULL, 0), dead);
	char pid[32], want[256], out[4096];
	snprintf(pid, sizeof(pid), "%d", (int)dead);
	vp_err_no_process(want, sizeof(want), (long)dead);
	ASSERT_EQ(RUN(out, "-p", pid, "-o", "/tmp/vp-views8-never-made"), 2);
	ASSERT_CONTAINS(out, want);
	ASSERT_NE(run_viprof(out, sizeof(out), (char *const[]){ VIPROF_BIN, "attach", pid, NULL }), 0);
	ASSERT_CONTAINS(out, want);
	ASSERT_NE(run_viprof(out, sizeof(out), (char *const[]){ VIPROF_BIN, "stat", "-p", pid, NULL }), 0);
	ASSERT_CONTAINS(out, want);
	struct stat st;
	ASSERT_NE(stat("/tmp/vp-views8-never-made", &st), 0);
}

int main(int argc, char **argv)
{
	const char *b = strrchr(argv[0], '/');
	if (!strcmp(b ? b + 1 : argv[0], "java")) {
		pause();   /* a stand-in JVM for test_pid_name */
		return 0;
	}
	const char *which = argc > 1 ? argv[1] : "all";
	bool all = !strcmp(which, "all");
	if (all || !strcmp(which, "parser"))
		test_parser();
	if (all || !strcmp(which, "binary"))
		test_binary();
	if (!strcmp(which, "pid-name"))
		test_pid_name();
	if (!strcmp(which, "dead-pid"))
		test_dead_pid();
	if (!strcmp(which, "quiet"))
		test_quiet();
	printf("ok\n");
	return 0;
}
