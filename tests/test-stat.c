/* viprof stat: per-thread task-clock agrees with the scheduler's own account
 * (/proc/PID/task/TID/schedstat, first field, ns) within 1%; totals follow the
 * command's children (inherit); the exit status is the command's; an event the VM
 * cannot count fails with one line. argv[1] is the viprof binary.
 *
 * The per-thread check uses -p: a workload with two threads is held blocked until
 * viprof stat has opened its events, then each thread burns a different amount of
 * CPU and blocks again, so that both sides measure exactly the same work and the
 * schedstat values are frozen when read. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

#include "test.h"
#include "test-helpers.h"
#include "test-run.h"

static const char *viprof;
static int go_pipe[2], ready_pipe[2], done_pipe[2];

static void *worker(void *arg)
{
	int ms = (int)(intptr_t)arg;
	int tid = (int)syscall(SYS_gettid);
	char name[16], c;

	snprintf(name, sizeof(name), "burn%d", ms);
	pthread_setname_np(pthread_self(), name);
	if (write(ready_pipe[1], &tid, sizeof(tid)) != sizeof(tid))
		_exit(2);
	if (read(go_pipe[0], &c, 1) != 1)
		_exit(2);
	burn_ms(ms);
	if (write(done_pipe[1], &tid, sizeof(tid)) != sizeof(tid))
		_exit(2);
	for (;;)
		pause();    /* hold the thread (and its frozen schedstat) until killed */
	return NULL;
}

static void workload(void)
{
	pthread_t a, b;

	pthread_create(&a, NULL, worker, (void *)(intptr_t)240);
	pthread_create(&b, NULL, worker, (void *)(intptr_t)120);
	pthread_join(a, NULL);
	_exit(0);
}

static uint64_t schedstat_ns(pid_t pid, int tid)
{
	char path[96];
	unsigned long long ns = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/schedstat", (int)pid, tid);
	f = fopen(path, "r");
	if (!f)
		FAIL("cannot open %s: %s", path, strerror(errno));
	if (fscanf(f, "%llu", &ns) != 1)
		FAIL("cannot parse %s", path);
	fclose(f);
	return ns;
}

/* Steal + irq + softirq ns summed over all CPUs (/proc/stat). The scheduler's run time
 * (schedstat) excludes them when the kernel accounts irq time and paravirt steal;
 * task-clock runs on perf's clock and includes them. Their growth over the
 * measurement bounds how far the two may honestly differ beyond the 1%. */
static uint64_t stolen_ns(void)
{
	unsigned long long v[8], sum = 0;
	char line[512];
	FILE *f = fopen("/proc/stat", "r");

	ASSERT_NOT_NULL(f);
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "cpu ", 4) && sscanf(line + 4, "%llu %llu %llu %llu %llu %llu %llu %llu",
							&v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) == 8)
			sum = v[5] + v[6] + v[7];
	fclose(f);
	return sum * (1000000000ull / (uint64_t)sysconf(_SC_CLK_TCK));
}

static int count_perf_fds(pid_t pid)
{
	char path[64], link[384], target[128];
	struct dirent *d;
	DIR *dir;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	if (!(dir = opendir(path)))
		return -1;
	while ((d = readdir(dir))) {
		ssize_t len;

		snprintf(link, sizeof(link), "%s/%s", path, d->d_name);
		len = readlink(link, target, sizeof(target) - 1);
		if (len > 0) {
			target[len] = '\0';
			if (strstr(target, "perf_event"))
				n++;
		}
	}
	closedir(dir);
	return n;
}

/* Runs viprof with args, stderr into a file; returns the pid (not waited). */
/* Value (ms) of the "-x ," row "<comm>-<tid>,<value>,msec,task-clock,..." of tid. */
static double row_ms(const char *out, int tid)
{
	char key[32];
	const char *p;

	snprintf(key, sizeof(key), "-%d,", tid);
	p = strstr(out, key);
	if (!p)
		FAIL("no row for tid %d in:\n%s", tid, out);
	p += strlen(key);
	if (strncmp(strchr(p, ',') ?: "", ",msec,task-clock,", 17))
		FAIL("unexpected row for tid %d: %.80s", tid, p);
	return strtod(p, NULL);
}

/* Returns whether both threads agreed within the bound; every other check is fatal. */
static bool test_per_thread_vs_schedstat(void)
{
	bool agree = true;
	const char *errfile = "test-stat.per-thread.txt";
	int tids[2], status;
	uint64_t s0[2], s1[2];
	char pidarg[16];
	pid_t wl, st;

	ASSERT_OK(pipe(go_pipe));
	ASSERT_OK(pipe(ready_pipe));
	ASSERT_OK(pipe(done_pipe));
	wl = fork();
	ASSERT_GE(wl, 0);
	if (wl == 0) {
		/* Die with the test, also when it FAILs: ctest waits for our stderr to close. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		workload();
	}
	for (int i = 0; i < 2; i++)
		ASSERT_EQ(read(ready_pipe[0], &tids[i], sizeof(int)), sizeof(int));
	for (int i = 0; i < 2; i++)
		s0[i] = schedstat_ns(wl, tids[i]);

	snprintf(pidarg, sizeof(pidarg), "%d", (int)wl);
	char *args[] = { (char *)viprof, "stat", "--per-thread", "-x", ",", "-e", "task-clock", "-p", pidarg, NULL };
	st = run_start(args, RUN_KEEP, errfile);
	/* Three threads (main + two workers), one task-clock event each. */
	for (int i = 0; count_perf_fds(st) < 3; i++) {
		if (i > 1000 || waitpid(st, &status, WNOHANG) == st)
			FAIL("viprof stat did not open 3 events:\n%s", test_slurp_str(errfile));
		usleep(10000);
	}
	uint64_t stolen0 = stolen_ns();
	ASSERT_EQ(write(go_pipe[1], "gg", 2), 2);
	for (int i = 0; i < 2; i++) {
		int t;

		ASSERT_EQ(read(done_pipe[0], &t, sizeof(t)), sizeof(t));
	}
	for (int i = 0; i < 2; i++)
		s1[i] = schedstat_ns(wl, tids[i]);
	uint64_t stolen = stolen_ns() - stolen0;
	kill(st, SIGINT);
	ASSERT_EQ(waitpid(st, &status, 0), st);
	ASSERT_TRUE(WIFEXITED(status));
	ASSERT_EQ(WEXITSTATUS(status), 0);
	const char *out = test_slurp_str(errfile);
	fprintf(stderr, "%s", out);
	for (int i = 0; i < 2; i++) {
		double stat_ns = row_ms(out, tids[i]) * 1e6;
		double sched = (double)(s1[i] - s0[i]);

		fprintf(stderr, "tid %d: viprof stat %.0f ns, schedstat %.0f ns (%.3f%%); steal+irq of all CPUs "
			"meanwhile %" PRIu64 " ns\n", tids[i], stat_ns, sched, 100.0 * (stat_ns - sched) / sched, stolen);
		ASSERT_GT_F(sched, 100e6);
		double tol = sched * 0.01 + (double)stolen;
		if (stat_ns - sched > tol || sched - stat_ns > tol) {
			fprintf(stderr, "tid %d: differs by more than %.0f ns\n", tids[i], tol);
			agree = false;
		}
	}
	/* The names the threads gave themselves, found by the /proc polling. */
	ASSERT_CONTAINS(out, "burn240-");
	ASSERT_CONTAINS(out, "burn120-");
	kill(wl, SIGKILL);
	waitpid(wl, NULL, 0);
	return agree;
}

/* Totals follow children: a shell that runs two children which each fault in 2000 pages. */
static void test_inherit_and_status(const char *self)
{
	const char *errfile = "test-stat.inherit.txt";
	char script[8400];
	int status;

	snprintf(script, sizeof(script), "%s --touch 2000 && %s --touch 2000; exit 7", self, self);
	char *args[] = { (char *)viprof, "stat", "-x", ";", "-e", "minor-faults", "--", "sh", "-c", script, NULL };
	pid_t st = run_start(args, RUN_KEEP, errfile);

	ASSERT_EQ(waitpid(st, &status, 0), st);
	ASSERT_TRUE(WIFEXITED(status));
	ASSERT_EQ(WEXITSTATUS(status), 7);     /* the command's status */
	const char *out = test_slurp_str(errfile);
	fprintf(stderr, "%s", out);
	const char *row = strstr(out, ";;minor-faults;");
	ASSERT_NOT_NULL(row);
	while (row > out && row[-1] != '\n')
		row--;
	long faults = strtol(row, NULL, 10);
	ASSERT_GE(faults, 4000);        /* both children's pages */
	ASSERT_LT(faults, 4000 + 3000); /* plus exec and libc start-up, not more */
}

/* --per-thread -- CMD: child processes are not followed per thread, but the
 * "[all threads]" row (an inherit event on the command) still counts them, and
 * "[not per-thread]" shows the difference. */
static void test_per_thread_total(const char *self)
{
	const char *errfile = "test-stat.per-thread-total.txt";
	char script[8400];
	int status;

	snprintf(script, sizeof(script), "%s --touch 3000", self);
	char *args[] = { (char *)viprof, "stat", "--per-thread", "-x", ",", "-e", "minor-faults", "--", "sh", "-c", script, NULL };
	pid_t st = run_start(args, RUN_KEEP, errfile);

	ASSERT_EQ(waitpid(st, &status, 0), st);
	ASSERT_EQ(WEXITSTATUS(status), 0);
	const char *out = test_slurp_str(errfile);
	fprintf(stderr, "%s", out);
	const char *all = strstr(out, "[all threads],");
	const char *rest = strstr(out, "[not per-thread],");
	ASSERT_NOT_NULL(all);
	ASSERT_NOT_NULL(rest);
	long nall = strtol(all + strlen("[all threads],"), NULL, 10);
	long nrest = strtol(rest + strlen("[not per-thread],"), NULL, 10);
	ASSERT_GE(nall, 3000);
	ASSERT_GE(nrest, 3000);     /* the touching child is a process of its own */
	ASSERT_LE(nrest, nall);
}

/* -p ends by itself when the target exits, even while it is an unreaped zombie (we
 * reap it only after viprof stat returned), and counts what it did after attach. */
static void test_pid_exit(void)
{
	const char *errfile = "test-stat.pid-exit.txt";
	int go[2], status;
	char pidarg[16], c;
	pid_t wl, st;

	ASSERT_OK(pipe(go));
	wl = fork();
	ASSERT_GE(wl, 0);
	if (wl == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (read(go[0], &c, 1) != 1)
			_exit(2);
		burn_ms(200);
		_exit(0);
	}
	snprintf(pidarg, sizeof(pidarg), "%d", (int)wl);
	char *args[] = { (char *)viprof, "stat", "-x", ",", "-e", "task-clock", "-p", pidarg, NULL };
	st = run_start(args, RUN_KEEP, errfile);
	for (int i = 0; count_perf_fds(st) < 1; i++) {
		if (i > 1000)
			FAIL("viprof stat did not open its event:\n%s", test_slurp_str(errfile));
		usleep(10000);
	}
	ASSERT_EQ(write(go[1], "g", 1), 1);
	for (int i = 0; waitpid(st, &status, WNOHANG) != st; i++) {
		if (i > 500) {
			kill(st, SIGKILL);
			FAIL("viprof stat -p did not notice that its target exited (zombie)");
		}
		usleep(10000);
	}
	ASSERT_EQ(WEXITSTATUS(status), 0);
	waitpid(wl, NULL, 0);
	const char *out = test_slurp_str(errfile);
	fprintf(stderr, "%s", out);
	double ms = strtod(out, NULL);
	ASSERT_CONTAINS(out, ",msec,task-clock,");
	/* The child burned 200 ms of its scheduler runtime, which on a busy PVM guest also
	 * holds the switch path (7-27 us a switch) that task-clock does not: 198.96 ms was
	 * read beside other work. 5% is that allowance, far from a count that missed the
	 * burn's start or end. */
	ASSERT_GE_F(ms, 190.0);
	ASSERT_LE_F(ms, 260.0);
}

/* Every line of -x output is a row of at least 5 fields; a stolen row holds a figure
 * or <not measured>, never a note. */
static void check_rows(const char *out)
{
	ASSERT_NULL(strstr(out, "#"));
	for (const char *l = out; *l; l += strcspn(l, "\n") + (l[strcspn(l, "\n")] != 0)) {
		int fields = 1;
		size_t n = strcspn(l, "\n");
		for (size_t i = 0; i < n; i++)
			fields += l[i] == ',';
		if (fields < 5)
			FAIL("not a row of viprof stat -x: '%.*s' in:\n%s", (int)n, l, out);
	}
	const char *st = strstr(out, ",msec,stolen,");
	if (st) {
		while (st > out && st[-1] != '\n')
			st--;
		ASSERT_TRUE(!strncmp(st, "<not measured>,", 15) || (*st >= '0' && *st <= '9'));
	}
}

/* Where /proc/stat's steal has stayed 0 since boot (a PVM guest: the issue 30 VM), stat
 * must say "steal: not measured (no steal clock)" (as probe must) and put no note among -x rows. This VM's own
 * /proc/stat decides whether that is the case here; where its steal moved, the same
 * /proc/stat with the steal column zeroed is bind-mounted over it in a private mount
 * namespace (root), so the case is checked on every machine. */
static void test_steal_never_moved(const char *self)
{
	char *real = test_slurp("/proc/stat", NULL);
	ASSERT_NOT_NULL(real);
	uint64_t moved = 0;
	char fake[] = "/tmp/vp-fresh-stat-XXXXXX";
	int fd = mkstemp(fake);
	ASSERT_GE(fd, 0);
	FILE *f = fdopen(fd, "w");
	ASSERT_NOT_NULL(f);
	/* cpu lines: name user nice system idle iowait irq softirq steal guest guest_nice */
	for (char *line = strtok(real, "\n"); line; line = strtok(NULL, "\n")) {
		unsigned long long v[10] = { 0 };
		char name[32];
		int k = sscanf(line, "%31s %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", name, &v[0], &v[1], &v[2],
			       &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9]);
		if (k >= 9 && !strncmp(name, "cpu", 3)) {
			moved += v[7];
			fprintf(f, "%s", name);
			for (int i = 0; i < k - 1; i++)
				fprintf(f, " %llu", i == 7 ? 0ull : v[i]);
			fputc('\n', f);
		} else {
			fprintf(f, "%s\n", line);
		}
	}
	fclose(f);
	free(real);
	ASSERT_OK(chmod(fake, 0644));
	char cmd[8192];
	const char *ns = "";
	char nsbuf[600];
	if (moved) {
		if (geteuid() != 0 || run_sh("unshare -m true 2>/dev/null", 110) != 0) {
			unlink(fake);
			fprintf(stderr, "steal moved here and no private mount namespace can hide it (not root, or no "
					"unshare): the never-moved case is left to a VM where it is so\n");
			return;
		}
		snprintf(nsbuf, sizeof(nsbuf), "unshare -m sh -c 'mount --bind %s /proc/stat && exec \"$0\" \"$@\"' ", fake);
		ns = nsbuf;
	}
	fprintf(stderr, "steal since boot here: %llu ticks; %s\n", (unsigned long long)moved,
		moved ? "checking with it hidden" : "checking as is");
	snprintf(cmd, sizeof(cmd), "%s%s stat -x, -e task-clock,page-faults -- %s --touch 10 2>&1 >/dev/null", ns, viprof,
		 self);
	char *out = run_sh_read(cmd, NULL);
	fprintf(stderr, "%s", out);
	check_rows(out);
	ASSERT_CONTAINS(out, "<not measured>,msec,stolen,0,");
	free(out);
	snprintf(cmd, sizeof(cmd), "%s%s stat -e task-clock -- %s --touch 10 2>&1 >/dev/null", ns, viprof, self);
	out = run_sh_read(cmd, NULL);
	ASSERT_CONTAINS(out, "\n  steal: not measured (no steal clock): ");
	free(out);
	/* probe, with the same facts: the words, in text and JSON, never "none so far". */
	snprintf(cmd, sizeof(cmd), "%s%s probe 2>&1", ns, viprof);
	out = run_sh_read(cmd, NULL);
	ASSERT_CONTAINS(out, "steal: not measured (no steal clock)");
	ASSERT_NULL(strstr(out, "none so far"));
	free(out);
	snprintf(cmd, sizeof(cmd), "%s%s probe --json 2>&1", ns, viprof);
	out = run_sh_read(cmd, NULL);
	ASSERT_CONTAINS(out, "\"clock\": false");
	ASSERT_CONTAINS(out, "\"measured\": \"steal: not measured (no steal clock)\"");
	free(out);
	/* record, with the same facts, says it at the end of the recording. */
	char rdir[] = "/tmp/steal-rec-XXXXXX";
	ASSERT_NOT_NULL(mkdtemp(rdir));
	snprintf(cmd, sizeof(cmd), "%s%s record -o %s/s -- /bin/true 2>&1", ns, viprof, rdir);
	out = run_sh_read(cmd, NULL);
	fprintf(stderr, "%s", out);
	if (!strstr(out, "samples ("))
		fprintf(stderr, "record did not run here (see above): its line is left unchecked\n");
	else
		ASSERT_CONTAINS(out, "viprof: steal: not measured (no steal clock)");
	free(out);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", rdir);
	ASSERT_OK(run_sh(cmd, 110));
	unlink(fake);
}

static void test_errors(void)
{
	const char *errfile = "test-stat.errors.txt";
	int status;
	char *a1[] = { (char *)viprof, "stat", "-e", "bogus-event", "--", "true", NULL };
	pid_t st = run_start(a1, RUN_KEEP, errfile);

	ASSERT_EQ(waitpid(st, &status, 0), st);
	ASSERT_EQ(WEXITSTATUS(status), 2);
	ASSERT_CONTAINS(test_slurp_str(errfile), "bogus-event");

	char *a2[] = { (char *)viprof, "stat", "-e", "task-clock", NULL };
	st = run_start(a2, RUN_KEEP, errfile);
	ASSERT_EQ(waitpid(st, &status, 0), st);
	ASSERT_EQ(WEXITSTATUS(status), 2);
	ASSERT_CONTAINS(test_slurp_str(errfile), "-p PID or -- CMD");

	/* A command that cannot run: 127 like a shell, one line, no counts. */
	char *a4[] = { (char *)viprof, "stat", "--", "/nonexistent/cmd", NULL };
	st = run_start(a4, RUN_KEEP, errfile);
	ASSERT_EQ(waitpid(st, &status, 0), st);
	ASSERT_EQ(WEXITSTATUS(status), 127);
	ASSERT_CONTAINS(test_slurp_str(errfile), "cannot run '/nonexistent/cmd'");
	ASSERT_TRUE(strstr(test_slurp_str(errfile), "task-clock") == NULL);

	/* Where the VM exposes no PMU, cycles must fail before the command runs. */
	if (access("/sys/bus/event_source/devices/cpu", F_OK) != 0) {
		char *a3[] = { (char *)viprof, "stat", "-e", "cycles", "--", "sh", "-c", "echo ran >&2", NULL };

		st = run_start(a3, RUN_KEEP, errfile);
		ASSERT_EQ(waitpid(st, &status, 0), st);
		ASSERT_EQ(WEXITSTATUS(status), 2);
		const char *out = test_slurp_str(errfile);
		ASSERT_CONTAINS(out, "cycles");
		ASSERT_TRUE(strstr(out, "ran") == NULL);
		ASSERT_TRUE(strchr(out, '\n') == out + strlen(out) - 1);   /* one line */
	}
}

/* Ratios only from grouped events: with no PMU here, page faults per ms of task-clock
 * stands in for IPC. Grouped (the default), the line is the quotient of the two rows it
 * is printed under; --no-group prints why it is not shown instead. */
static void test_ratio_grouped(const char *self)
{
	const char *errfile = "test-stat.ratio.txt";
	int status;

	for (int no_group = 0; no_group < 2; no_group++) {
		char *grouped[] = { (char *)viprof, "stat", "-e", "task-clock,page-faults", "--", (char *)self, "--touch", "3000",
				    NULL };
		char *separate[] = { (char *)viprof, "stat", "--no-group", "-e", "task-clock,page-faults", "--", (char *)self,
				     "--touch", "3000", NULL };
		pid_t st = run_start(no_group ? separate : grouped, RUN_KEEP, errfile);

		ASSERT_EQ(waitpid(st, &status, 0), st);
		ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		char *out = test_slurp_str(errfile);
		fprintf(stderr, "%s", out);
		const char *line = strstr(out, " # page faults ");
		ASSERT_NOT_NULL(line);
		if (no_group) {
			ASSERT_CONTAINS(line, "per ms of task-clock not shown: page-faults and task-clock were counted as "
					      "separate events (--no-group)");
			ASSERT_NULL(strstr(out, "counted as one group"));
		} else {
			double ms = 0, row_faults = 0, ratio = 0;
			const char *tc = strstr(out, " msec  task-clock"), *pf = strstr(out, "       page-faults");
			ASSERT_NOT_NULL(tc);
			ASSERT_NOT_NULL(pf);
			while (tc > out && tc[-1] != '\n')
				tc--;
			while (pf > out && pf[-1] != '\n')
				pf--;
			ms = atof(tc);
			row_faults = atof(pf);
			int got = sscanf(line, " # page faults %lf per ms of task-clock (page-faults / task-clock, counted as "
					 "one group)", &ratio);
			ASSERT_EQ(got, 1);
			ASSERT_GE_F(row_faults, 3000);
			/* The rows are rounded (ms to 0.01): the quotient of the printed rows. */
			ASSERT_NEAR(ratio, row_faults / ms, 0.01 * row_faults / ms + 0.01);
		}
		free(out);
	}
	/* Machine-readable rows stay rows only, whether stolen time is measured here or not. */
	char *csv[] = { (char *)viprof, "stat", "-x,", "-e", "task-clock,page-faults", "--", (char *)self, "--touch", "10", NULL };
	pid_t st = run_start(csv, RUN_KEEP, errfile);
	ASSERT_EQ(waitpid(st, &status, 0), st);
	char *out = test_slurp_str(errfile);
	check_rows(out);
	free(out);
	test_steal_never_moved(self);
}

int main(int argc, char **argv)
{
	char self[4096];
	ssize_t n;

	if (argc == 3 && !strcmp(argv[1], "--touch")) {
		long pages = atol(argv[2]);
		/* No transparent huge pages: one fault per 4 KiB page, not per 2 MiB. */
		char *m = mmap(NULL, (size_t)pages * 4096, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (m == MAP_FAILED || madvise(m, (size_t)pages * 4096, MADV_NOHUGEPAGE))
			return 1;
		for (long i = 0; i < pages; i++)
			m[i * 4096] = 1;
		return 0;
	}
	if (argc < 2)
		FAIL("usage: test-stat /path/to/viprof");
	viprof = argv[1];
	if (access("/proc/self/schedstat", R_OK) != 0)
		SKIP("no /proc/PID/schedstat (CONFIG_SCHEDSTATS/SCHED_INFO off)");
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	ASSERT_GT(n, 0);
	self[n] = '\0';
	test_errors();
	test_inherit_and_status(self);
	test_ratio_grouped(self);
	test_per_thread_total(self);
	test_pid_exit();
	/* task-clock includes the irq (and paravirt steal) time that the scheduler's
	 * run time leaves out; /proc/stat reports those only in whole ticks, so on a busy
	 * machine a burst shorter than a tick can push one run past 1%. A systematic
	 * error fails all three runs. */
	bool agreed = false;
	for (int attempt = 1; attempt <= 3 && !agreed; attempt++) {
		agreed = test_per_thread_vs_schedstat();
		if (!agreed)
			fprintf(stderr, "per-thread vs schedstat: attempt %d outside 1%%\n", attempt);
	}
	if (!agreed)
		FAIL("viprof stat's per-thread task-clock disagreed with schedstat by more than 1%% in 3 runs");
	printf("test-stat: ok\n");
	return 0;
}
