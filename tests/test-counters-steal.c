/* Counters corrected for steal (issue 11 item 4). Unit part, with a synthetic steal
 * source in place of the thread's two clocks: the stolen share adds up over counting
 * periods (and not between them), comes off the clock events only, and never makes a
 * value negative; a kernel .config decides what the difference measures. Live part
 * (argv[1] = "live"): a thread pinned to one vCPU spins for 1.5 s; its stolen share is
 * task-clock minus runtime held to the VM's steal, the corrected task-clock is the
 * scheduler's runtime (CLOCK_THREAD_CPUTIME_ID) within 2 ms, and the stolen share is no
 * more than the steal /proc/stat saw grow on the whole VM, within its 10 ms tick per
 * vCPU (and no less than that vCPU's, when the thread had the vCPU to itself). Exit 77
 * when no steal clock runs here, no steal moved during the spin, the kernel cannot tell
 * (no CONFIG_PARAVIRT_TIME_ACCOUNTING) or perf_event_open is refused. */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include "hv-glue/counters.h"
#include "hv-glue/hv_internal.h"
#include "hv-glue/steal.h"
#include "test.h"

struct fake { uint64_t clock, runtime; };

static int fake_source(void *ctx, uint64_t *clock, uint64_t *runtime)
{
	struct fake *f = ctx;
	*clock = f->clock;
	*runtime = f->runtime;
	return 0;
}

static uint64_t now(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void spin_ms(uint64_t ms)
{
	uint64_t t0 = now(CLOCK_THREAD_CPUTIME_ID);
	while (now(CLOCK_THREAD_CPUTIME_ID) - t0 < ms * 1000000ull)
		;
}

static void unit(void)
{
	char err[512];
	struct vp_counters *c = vp_counters__open("task-clock,page-faults", err, sizeof(err));
	if (!c)
		SKIP("cannot open counters: %s", err);
	struct fake f = { 1000, 1000 };
	vp_counters__time_source(c, fake_source, &f);
	ASSERT_OK(vp_counters__start(c));
	spin_ms(40);
	f.clock += 25000000;       /* 25 ms on the task clock, */
	f.runtime += 20000000;     /* of which 5 ms the hypervisor's */
	uint64_t stolen = 0;
	ASSERT_OK(vp_counters__stolen(c, &stolen));
	ASSERT_UEQ(stolen, 5000000);
	ASSERT_OK(vp_counters__stop(c));
	f.clock += 500000000;      /* between periods: not counted */
	f.runtime += 100000000;
	ASSERT_OK(vp_counters__start(c));
	f.clock += 12000000;
	f.runtime += 10000000;
	ASSERT_OK(vp_counters__stolen(c, &stolen));
	ASSERT_UEQ(stolen, 7000000);
	uint64_t raw[2], fixed[2], raw2[2];
	ASSERT_OK(vp_counters__read(c, raw));
	ASSERT_OK(vp_counters__read_corrected(c, fixed));
	ASSERT_OK(vp_counters__read(c, raw2));
	/* task-clock and this thread's CPU clock tick from different points (the event's
	 * enable, the spin's first read): 39.97 ms was read once for the 40 ms spun. */
	ASSERT_GE(raw[0], 39000000);
	/* The clock is the runtime of the counting periods (20 + 10 ms of the source),
	 * not the raw clock minus an estimate. */
	ASSERT_UEQ(fixed[0], 30000000);
	ASSERT_GE(fixed[1], raw[1]);                  /* page faults: as read */
	ASSERT_LE(fixed[1], raw2[1]);
	f.clock += 10000000000ull;                    /* a clock running away changes nothing */
	ASSERT_OK(vp_counters__read_corrected(c, fixed));
	ASSERT_UEQ(fixed[0], 30000000);
	/* A correction for steal only lowers a clock: a runtime above the task-clock leaves
	 * the task-clock as read. */
	f.runtime += 5000000000ull;
	ASSERT_OK(vp_counters__read_corrected(c, fixed));
	ASSERT_OK(vp_counters__read(c, raw2));
	ASSERT_GE(fixed[0], raw[0]);
	ASSERT_LE(fixed[0], raw2[0]);
	ASSERT_OK(vp_counters__stop(c));
	vp_counters__close(c);

	/* Where no steal clock runs, nothing is corrected: the values are as read (the
	 * runtime of a thread that sleeps a lot is above its task-clock on a PVM guest). */
	c = vp_counters__open("task-clock,page-faults", err, sizeof(err));
	ASSERT_NOT_NULL(c);
	vp_counters__assume_steal_clock(c, false);
	ASSERT_OK(vp_counters__start(c));
	spin_ms(20);
	ASSERT_OK(vp_counters__read(c, raw));
	int rc = vp_counters__read_corrected(c, fixed);
	ASSERT_OK(vp_counters__read(c, raw2));
	if (rc != -ENOTSUP) {   /* -ENOTSUP: this kernel keeps steal in runtimes anyway */
		ASSERT_OK(rc);
		ASSERT_GE(fixed[0], raw[0]);
		ASSERT_LE(fixed[0], raw2[0]);
		ASSERT_NE(vp_counters__stolen(c, &stolen), 0);
	}
	ASSERT_OK(vp_counters__stop(c));
	vp_counters__close(c);

	ASSERT_EQ(vp_steal__accounting_from("CONFIG_PARAVIRT_TIME_ACCOUNTING=y\n# CONFIG_IRQ_TIME_ACCOUNTING is not set\n"),
		  VP_STEAL_ACCT_STEAL);
	ASSERT_EQ(vp_steal__accounting_from("CONFIG_IRQ_TIME_ACCOUNTING=y\nCONFIG_PARAVIRT_TIME_ACCOUNTING=y\n"),
		  VP_STEAL_ACCT_IRQ);
	ASSERT_EQ(vp_steal__accounting_from("# CONFIG_PARAVIRT_TIME_ACCOUNTING is not set\nCONFIG_PARAVIRT=y\n"), 0);
	ASSERT_EQ(vp_steal__accounting_from("no config here"), -EINVAL);
	ASSERT_UEQ(vp_steal__stolen(10, 12), 0);
	ASSERT_UEQ(vp_steal__stolen(12, 10), 2);
}

/* Where /proc/stat says at least STEAL_MIN_NS of steal fell on the measured thread, the
 * measured steal must reach STEAL_FRACTION of it: /proc/stat lags the steal clock at
 * ticks and its 10 ms ticks round, so the bound is loose, but a measurement that is
 * wrongly 0 fails it. Less than that: skipped, with the figures. */
#define STEAL_MIN_NS 20e6
#define STEAL_FRACTION 0.25

static void live(void)
{
	char err[512];
	int acct = vp_steal__accounting();
	if (acct <= 0)
		SKIP("this kernel cannot tell steal from a thread's runtime (accounting %d)", acct);
	/* Pin to the CPU we are on, so that /proc/stat's steal of that CPU is the bound. */
	int cpu = sched_getcpu();
	cpu_set_t one;
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	ASSERT_OK(sched_setaffinity(0, sizeof(one), &one));
	struct vp_counters *c = vp_counters__open("task-clock", err, sizeof(err));
	if (!c)
		SKIP("cannot open counters: %s", err);
	uint64_t none;
	if (vp_counters__stolen_why(c)) {
		/* No steal clock: the library must say so instead of reporting clock skew. */
		ASSERT_EQ(vp_counters__stolen(c, &none), -ENOTSUP);
		SKIP("%s", vp_counters__stolen_why(c));
	}
	int ncpu = (int)sysconf(_SC_NPROCESSORS_CONF);
	uint64_t s0[256], s1[256], w0 = now(CLOCK_MONOTONIC);
	ASSERT_GT(vp_steal__read(s0, 256), cpu);
	uint64_t r0 = now(CLOCK_THREAD_CPUTIME_ID);
	ASSERT_OK(vp_counters__start(c));
	spin_ms(1500);
	uint64_t raw[1], fixed[1], stolen;
	ASSERT_OK(vp_counters__stop(c));
	uint64_t r1 = now(CLOCK_THREAD_CPUTIME_ID), w1 = now(CLOCK_MONOTONIC);
	ASSERT_GT(vp_steal__read(s1, 256), cpu);
	ASSERT_OK(vp_counters__read(c, raw));
	ASSERT_OK(vp_counters__read_corrected(c, fixed));
	ASSERT_OK(vp_counters__stolen(c, &stolen));
	uint64_t cpu_steal = s1[cpu] - s0[cpu], runtime = r1 - r0;
	fprintf(stderr, "cpu %d of %d: task-clock %.3f ms, corrected %.3f ms, runtime %.3f ms, stolen %.3f ms; "
		"/proc/stat steal on cpu %d: %.0f ms; wall %.3f ms\n", cpu, ncpu, raw[0] / 1e6, fixed[0] / 1e6,
		runtime / 1e6, stolen / 1e6, cpu, cpu_steal / 1e6, (w1 - w0) / 1e6);
	/* The corrected clock is the thread's runtime, read a few us apart, where that is
	 * below the task-clock; a correction only lowers a clock (on a busy PVM guest the
	 * runtime also holds the switch path: 1500.1 ms of runtime against 1497.4 ms of
	 * task-clock, with no steal, when the 1.5-s spin took 17 s of wall time). */
	ASSERT_LE(fixed[0], raw[0]);
	ASSERT_DBL_NEAR((double)fixed[0], (double)(runtime < raw[0] ? runtime : raw[0]), 2e6);
	/* Held to what the whole VM lost during the spin (the library cannot tell which
	 * vCPUs the thread was on), within /proc/stat's tick per vCPU. */
	uint64_t vm_steal = 0;
	for (int k = 0; k < ncpu && k < 256; k++)
		vm_steal += s1[k] - s0[k];
	ASSERT_LE(stolen, vm_steal + (uint64_t)ncpu * 10000000ull);
	vp_counters__close(c);
	/* And from below, so that a source that always says 0 cannot pass (issue 34 item 7).
	 * The thread is pinned, so the steal /proc/stat saw on its vCPU fell while it was on
	 * that vCPU for the share (its runtime + stolen) / wall of the window, and while
	 * others were for the rest: that share of it is the thread's, less a 10 ms tick. */
	double share = (double)(runtime + stolen) / (double)(w1 - w0);
	if (share > 1.0)
		share = 1.0;
	double expect = (double)cpu_steal * share - 10e6;
	if (expect < STEAL_MIN_NS)
		SKIP("steal on cpu %d during the 1.5 s spin: %.0f ms by /proc/stat, of which the thread's share (%.0f%% of "
		     "the wall time on that vCPU) less a tick is %.1f ms, under the %.0f ms needed to hold the stolen share "
		     "to it from below: no steal to measure here now", cpu, cpu_steal / 1e6, 100.0 * share, expect / 1e6,
		     STEAL_MIN_NS / 1e6);
	if ((double)stolen < STEAL_FRACTION * expect)
		FAIL("stolen %.3f ms, under %.0f%% of the %.1f ms of cpu %d's steal (/proc/stat) that fell on this thread: "
		     "steal that was taken was not measured", stolen / 1e6, 100.0 * STEAL_FRACTION, expect / 1e6, cpu);
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "live"))
		live();
	else
		unit();
	printf("test-counters-steal%s: ok\n", argc > 1 ? " live" : "");
	return 0;
}
