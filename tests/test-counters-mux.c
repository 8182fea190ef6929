/* Multiplexing scaled per interval in the counters library (issue 23).
 * argv[1] = "unit": the pure arithmetic (hv-glue/counters_math.h): scaled deltas, and
 *   the rdpmc read path's sign extension and time extension, which no PMU here can run.
 * argv[1] = "live": the software stand-in for multiplexing: a per-task task-clock bound
 *   to CPU 0 (vp_counters__open_cpu) counts only while its thread runs on CPU 0, while
 *   its enabled time runs on both. The thread first spins on CPU 1 (the event is off its
 *   "counter" before the period starts), then alternates CPUs inside the period. The
 *   stand-in's value must match an unbound task-clock read at the same moments within
 *   1%; scaling scale(now) - scale(start) read about twice as much. Exit 77 with fewer
 *   than two usable CPUs, or when the stand-in does not make running < enabled here. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "hv-glue/counters.h"
#include "hv-glue/counters_math.h"
#include "hv-glue/hv_internal.h"
#include "test.h"

static void unit_scaled_delta(void)
{
	struct vp_count_snap a = { 1000, 5000, 5000 }, b;

	/* Not multiplexed: the count as it is. */
	b = (struct vp_count_snap){ 1600, 6000, 6000 };
	ASSERT_UEQ(vp_counts__scaled_delta(&a, &b), 600);
	/* On the counter half of this interval: twice its count, whatever came before. */
	a = (struct vp_count_snap){ 1000, 100000, 100 };   /* off the counter for most of the past */
	b = (struct vp_count_snap){ 1500, 101000, 600 };
	ASSERT_UEQ(vp_counts__scaled_delta(&a, &b), 1000);
	/* Never on a counter in the interval: nothing is known, 0. */
	b = (struct vp_count_snap){ 1000, 102000, 100 };
	ASSERT_UEQ(vp_counts__scaled_delta(&a, &b), 0);
	/* A reading that goes back gives 0, never a wrapped huge delta. */
	b = (struct vp_count_snap){ 900, 102000, 700 };
	ASSERT_UEQ(vp_counts__scaled_delta(&a, &b), 0);
	/* No overflow with counts and times near 2^64 / 4: 128-bit intermediate. */
	a = (struct vp_count_snap){ 0, 0, 0 };
	b = (struct vp_count_snap){ 1ull << 62, 1ull << 62, 1ull << 61 };
	ASSERT_UEQ(vp_counts__scaled_delta(&a, &b), 1ull << 63);
	/* running above enabled (rounding in the kernel): never scaled down. */
	b = (struct vp_count_snap){ 10, 100, 101 };
	ASSERT_UEQ(vp_counts__scaled_delta(&a, &b), 10);
}

static void unit_rdpmc(void)
{
	struct vp_pc_fields f = {
		.offset = 1000, .time_enabled = 5000, .time_running = 4000, .time_offset = 7,
		.index = 1, .time_mult = 1u << 10, .pmc_width = 48, .time_shift = 10,
		.cap_user_rdpmc = true, .cap_user_time = true,
	};
	struct vp_count_snap s;

	/* A 48-bit counter at its top is -1: offset - 1. The TSC 3000 cycles at mult/2^shift
	 * = 1 ns per cycle extends both times by 3000 + time_offset. */
	ASSERT_EQ(vp_pc__compute(&f, 0xffffffffffffull, 3000, &s), 1);
	ASSERT_UEQ(s.count, 999);
	ASSERT_UEQ(s.enabled, 5000 + 3007);
	ASSERT_UEQ(s.running, 4000 + 3007);
	/* Bits above the width are not the counter's: ignored. */
	ASSERT_EQ(vp_pc__compute(&f, 0xabcd000000000005ull, 0, &s), 1);
	ASSERT_UEQ(s.count, 1005);
	/* A negative offset with a positive counter value: the kernel's usual state. */
	f.offset = (uint64_t)-100;
	ASSERT_EQ(vp_pc__compute(&f, 150, 0, &s), 1);
	ASSERT_UEQ(s.count, 50);
	/* Fractional ns: 3 ns per 2 cycles (mult 3 << 9, shift 10), remainder kept. */
	f.offset = 0;
	f.time_offset = 0;
	f.time_mult = 3u << 9;
	ASSERT_EQ(vp_pc__compute(&f, 0, 1001, &s), 1);
	ASSERT_UEQ(s.enabled, 5000 + 1501);
	/* cap_user_time_short: the TSC is relative to time_cycles, within time_mask. */
	f.time_mult = 1u << 10;
	f.cap_user_time_short = true;
	f.time_cycles = 0x1000;
	f.time_mask = 0xffff;
	ASSERT_EQ(vp_pc__compute(&f, 0, 0x123451100ull, &s), 1);   /* (0x1100 - 0x1000) & mask = 0x100 */
	ASSERT_UEQ(s.enabled, 5000 + 0x1100);
	/* When the page says so, the kernel must be asked (read()). */
	f.cap_user_time_short = false;
	f.index = 0;
	ASSERT_EQ(vp_pc__compute(&f, 0, 0, &s), 0);
	f.index = 1;
	f.cap_user_rdpmc = false;
	ASSERT_EQ(vp_pc__compute(&f, 0, 0, &s), 0);
	f.cap_user_rdpmc = true;
	f.cap_user_time = false;      /* stale times would scale the interval wrongly */
	ASSERT_EQ(vp_pc__compute(&f, 0, 0, &s), 0);
	f.cap_user_time = true;
	f.pmc_width = 0;
	ASSERT_EQ(vp_pc__compute(&f, 0, 0, &s), 0);
	f.pmc_width = 64;
	ASSERT_EQ(vp_pc__compute(&f, ~0ull, 0, &s), 1);
	ASSERT_UEQ(s.count, (uint64_t)-1);
	printf("test-counters-mux unit: ok\n");
}

static uint64_t thread_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Spins ms of this thread's CPU time on cpu (its own CPU time: others share the machine). */
static void spin_on(int cpu, uint64_t ms)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		SKIP("cannot move this thread to CPU %d: %s", cpu, strerror(errno));
	uint64_t t0 = thread_ns();
	while (thread_ns() - t0 < ms * 1000000ull)
		;
}

static void live(void)
{
	char err[512];
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		SKIP("the stand-in needs two online CPUs (a thread alternating between them)");
	spin_on(1, 1);
	/* Opened on CPU 1, bound to CPU 0: enabled from here, running only on CPU 0. */
	struct vp_counters *mux = vp_counters__open_cpu("task-clock", 0, err, sizeof(err));
	struct vp_counters *ref = vp_counters__open("task-clock", err, sizeof(err));
	if (!mux || !ref)
		SKIP("cannot open task-clock for this thread: %s", err);
	/* A raw copy of the stand-in, to show that it multiplexes here. */
	struct perf_event_attr a = { .size = sizeof(a), .type = PERF_TYPE_SOFTWARE, .config = PERF_COUNT_SW_TASK_CLOCK,
				     .read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING };
	int raw = (int)syscall(SYS_perf_event_open, &a, 0, 0, -1, PERF_FLAG_FD_CLOEXEC);
	if (raw < 0)
		SKIP("cannot open a task-clock bound to CPU 0: %s", strerror(errno));

	spin_on(1, 100);     /* off its counter before the period: enabled grows, running does not */
	uint64_t t0[3];
	ASSERT_EQ(read(raw, t0, sizeof(t0)), (ssize_t)sizeof(t0));
	ASSERT_OK(vp_counters__start(mux));
	ASSERT_OK(vp_counters__start(ref));
	/* Inside the period, equal halves on each CPU; a read in the middle closes an
	 * interval, as a program sampling its counters would. */
	uint64_t mid[1], v[1], r[1];
	for (int i = 0; i < 10; i++) {
		spin_on(0, 5);
		spin_on(1, 5);
		if (i == 4)
			ASSERT_OK(vp_counters__read(mux, mid));
	}
	ASSERT_OK(vp_counters__stop(mux));
	ASSERT_OK(vp_counters__stop(ref));
	ASSERT_OK(vp_counters__read(mux, v));
	ASSERT_OK(vp_counters__read(ref, r));
	uint64_t t[3];
	ASSERT_EQ(read(raw, t, sizeof(t)), (ssize_t)sizeof(t));
	double ratio = t[1] ? (double)t[2] / (double)t[1] : 1.0;
	/* What scale(now) - scale(start) makes of the same raw readings: the library's
	 * old arithmetic, printed for comparison. */
	double whole = (t[2] ? (double)t[0] * (double)t[1] / (double)t[2] : 0) -
		       (t0[2] ? (double)t0[0] * (double)t0[1] / (double)t0[2] : 0);
	fprintf(stderr, "stand-in task-clock (bound to CPU 0): %.3f ms scaled per interval (scale(now) - scale(start): "
		"%.3f ms), running/enabled %.3f overall; unbound task-clock %.3f ms\n", (double)v[0] / 1e6, whole / 1e6,
		ratio, (double)r[0] / 1e6);
	if (ratio > 0.75)
		SKIP("the stand-in did not multiplex here (running/enabled %.2f): the scheduler kept the thread on CPU 0", ratio);
	ASSERT_GE(r[0], 95 * 1000000ull);    /* 100 ms spun in the period */
	ASSERT_NEAR((double)v[0], (double)r[0], 0.01 * (double)r[0]);
	close(raw);
	vp_counters__close(mux);
	vp_counters__close(ref);
	printf("test-counters-mux live: ok\n");
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "unit")) {
		unit_scaled_delta();
		unit_rdpmc();
		return 0;
	}
	if (argc > 1 && !strcmp(argv[1], "live")) {
		live();
		return 0;
	}
	FAIL("usage: test-counters-mux unit|live");
}
