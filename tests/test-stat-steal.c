/* `viprof stat` shows a command's time with the stolen share removed, and the share
 * (issue 11 item 4, issue 23): for `stat -x, -e task-clock -- spin`, the task-clock row
 * is the raw clock minus the "stolen" row; the stolen share comes from the switch
 * tracer (the run queue's steal clock at each switch), is no more than the steal
 * /proc/stat saw grow on all vCPUs during the run (within its 10 ms tick per vCPU), and
 * the corrected clock is the command's scheduler runtime within 2 ms. With --per-thread
 * the thread rows carry their own stolen rows. Held from below as well: where /proc/stat
 * saw at least 20 ms of steal fall on the (pinned) spinner, the stolen row must reach a
 * quarter of it; less than that, the test skips with the figures. Where no steal clock runs (/proc/stat's
 * steal 0 since boot) stat must print no stolen row and say why; the test checks that
 * and reports skipped, as it does when the tracer cannot run or no steal moved during
 * the run (nothing to compare). argv[1] = viprof, argv[2] = this test, which spins for
 * 1.5 s of CPU time when run with "spin". */
#define _GNU_SOURCE
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hv-glue/steal.h"
#include "test.h"
#include "test-helpers.h"
#include "test-run.h"

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static uint64_t total_steal(void)
{
	uint64_t s[256], sum = 0;
	int n = vp_steal__read(s, 256);
	ASSERT_GT(n, 0);
	for (int i = 0; i < n; i++)
		sum += s[i];
	return sum;
}

static double field(const char *file, const char *who, const char *event)
{
	char line[512];
	FILE *f = fopen(file, "r");
	ASSERT_NOT_NULL(f);
	while (fgets(line, sizeof(line), f)) {
		char *p = line;
		if (who) {
			if (strncmp(line, who, strlen(who)) || line[strlen(who)] != ',')
				continue;
			p = line + strlen(who) + 1;
		}
		char *c1 = strchr(p, ','), *c2 = c1 ? strchr(c1 + 1, ',') : NULL;
		if (!c2 || strncmp(c2 + 1, event, strlen(event)) || c2[1 + strlen(event)] != ',')
			continue;
		fclose(f);
		return strtod(p, NULL);
	}
	fclose(f);
	FAIL("no %s row for %s in %s", event, who ? who : "the total", file);
}

int main(int argc, char **argv)
{
	char cmd[1024];
	if (argc > 1 && !strcmp(argv[1], "spin")) {
		struct timespec a, b;
		/* Pinned when asked, so that the steal of one vCPU is the reference. */
		if (argc > 2) {
			cpu_set_t one;
			CPU_ZERO(&one);
			CPU_SET(atoi(argv[2]), &one);
			ASSERT_OK(sched_setaffinity(0, sizeof(one), &one));
		}
		/* 1.5 s of its own CPU time, however busy the machine is. */
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
		do
			clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
		while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < 1500000000L);
		return 0;
	}
	if (argc < 3)
		FAIL("usage: test-stat-steal viprof self");
	REQUIRE_ROOT();   /* the switch tracer measures the steal */
	int ncpu = (int)sysconf(_SC_NPROCESSORS_CONF);
	char why[512];
	int runs = vp_steal__clock_runs(why, sizeof(why));

	uint64_t st0 = total_steal(), c0[256], c1[256];
	int cpu = sched_getcpu();
	ASSERT_GT(vp_steal__read(c0, 256), cpu);
	uint64_t w0 = now_ns();
	snprintf(cmd, sizeof(cmd), "%s stat -x, -e task-clock -- %s spin %d 2>stat-steal.csv", argv[1], argv[2], cpu);
	ASSERT_EQ(run_sh(cmd, 50), 0);
	uint64_t w1 = now_ns();
	ASSERT_GT(vp_steal__read(c1, 256), cpu);
	uint64_t st1 = total_steal();
	char *out = test_slurp("stat-steal.csv", NULL);
	ASSERT_NOT_NULL(out);
	if (runs != 1) {
		/* Clock skew must not be shown as steal: a row without a figure, and no note
		 * in the machine-readable rows. */
		ASSERT_CONTAINS(out, "<not measured>,msec,stolen,");
		ASSERT_NULL(strstr(out, "#"));
		SKIP("%s", why);
	}
	if (strstr(out, "<not measured>,msec,stolen,")) {
		ASSERT_NULL(strstr(out, "#"));
		SKIP("stat measured no steal here (the switch tracer did not run: see `viprof stat` without -x)");
	}
	free(out);
	struct rusage ru;
	ASSERT_OK(getrusage(RUSAGE_CHILDREN, &ru));   /* sh and the spinner: the spinner dominates */
	double clock = field("stat-steal.csv", NULL, "task-clock"), stolen = field("stat-steal.csv", NULL, "stolen");
	double steal_ms = (double)(st1 - st0) / 1e6;
	fprintf(stderr, "task-clock %.2f ms (corrected), stolen %.2f ms; /proc/stat steal grew %.0f ms on %d vCPUs\n",
		clock, stolen, steal_ms, ncpu);
	ASSERT_GE_F(clock, 1400.0);
	ASSERT_GE_F(stolen, 0.0);
	ASSERT_LE_F(stolen, steal_ms + 10.0 * ncpu + 1.0);
	double runtime_ms = ((double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec) * 1e3 +
			    ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) / 1e3;
	ASSERT_LE_F(clock, runtime_ms + 2.0);   /* the clock lost what the hypervisor took */
	/* From below too, so that a tracer that always says 0 cannot pass (issue 34 item
	 * 7): the spinner was pinned to one vCPU and on it for the share (clock + stolen) /
	 * wall of the window, so that share of the steal /proc/stat saw on that vCPU, less a
	 * 10 ms tick, fell on it. Where that is under 20 ms there is nothing to hold it to. */
	double share = (clock + stolen) * 1e6 / (double)(w1 - w0);
	if (share > 1.0)
		share = 1.0;
	double cpu_ms = (double)(c1[cpu] - c0[cpu]) / 1e6, expect = cpu_ms * share - 10.0;
	fprintf(stderr, "cpu %d: /proc/stat steal grew %.0f ms; the spinner's share %.0f%%: at least %.1f ms expected\n", cpu,
		cpu_ms, 100.0 * share, expect);
	bool lower = expect >= 20.0;
	if (lower && stolen < 0.25 * expect)
		FAIL("stolen %.2f ms, under 25%% of the %.1f ms of cpu %d's steal (/proc/stat) that fell on the spinner: steal "
		     "that was taken was not measured", stolen, expect, cpu);

	st0 = total_steal();
	snprintf(cmd, sizeof(cmd), "%s stat --per-thread -x, -e task-clock -- %s spin 2>stat-steal-thread.csv", argv[1],
		 argv[2]);
	ASSERT_EQ(run_sh(cmd, 50), 0);
	st1 = total_steal();
	double all = field("stat-steal-thread.csv", "[all threads]", "task-clock");
	double all_stolen = field("stat-steal-thread.csv", "[all threads]", "stolen");
	fprintf(stderr, "per thread: [all threads] %.2f ms, stolen %.2f ms; /proc/stat steal grew %.0f ms\n", all,
		all_stolen, (double)(st1 - st0) / 1e6);
	ASSERT_GE_F(all, 1400.0);
	ASSERT_LE_F(all_stolen, (double)(st1 - st0) / 1e6 + 10.0 * ncpu + 1.0);
	if (!lower)
		SKIP("steal on cpu %d during the pinned run: %.0f ms by /proc/stat, of which the spinner's share (%.0f%%) less "
		     "a tick is %.1f ms, under the 20 ms needed to hold the stolen row to it from below: no steal to measure "
		     "here now", cpu, cpu_ms, 100.0 * share, expect);
	printf("test-stat-steal: ok\n");
	return 0;
}
