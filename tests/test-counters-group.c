/* A consistent multi-counter snapshot (hv-glue/counters.h, vp_counters__open_group):
 * the set's events are one perf group and every reading is one read() of its leader.
 * A fresh thread opens task-clock, page-faults and context-switches as a group, touches
 * N fresh pages right away (no context switch in between) and naps M times; one read
 * must give page-faults >= N, context switches >= those the kernel counted in the naps
 * (/proc/thread-self/status), and a task-clock equal to the
 * thread's own CPU time over the same window. The leader is in turn each of the three
 * software pmus (task-clock, cpu-clock, and the one of page-faults and
 * context-switches): a member of another pmu attached to a running group started
 * counting only at the thread's next switch (113 of 1,000 faults counted), which the
 * touches right after open catch. An overflow callback on a grouped set gets the
 * group's counts from one read. Exit 77 when perf_event_open is refused. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "hv-glue/counters.h"
#include "hv-glue/hv_internal.h"
#include "hv-glue/steal.h"
#include "test.h"

#define PAGES 2000
#define NAPS 50

/* The kernel's count of this thread's context switches (voluntary and not). */
static uint64_t thread_switches(void)
{
	char buf[4096];
	FILE *f = fopen("/proc/thread-self/status", "r");
	uint64_t n = 0;
	unsigned long long v;

	if (!f)
		return 0;
	while (fgets(buf, sizeof(buf), f))
		if (sscanf(buf, "voluntary_ctxt_switches: %llu", &v) == 1 ||
		    sscanf(buf, "nonvoluntary_ctxt_switches: %llu", &v) == 1)
			n += v;
	fclose(f);
	return n;
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct run {
	const char *events;
	bool grouped;
	int pf, cs, clk;            /* indexes of the three in events */
	uint64_t v[3], cpu_ns;
	uint64_t wall_ns;           /* the same window by CLOCK_MONOTONIC */
	uint64_t switched;          /* the kernel's own count of the thread's switches in the window */
	int reads;
	char err[512];
	int rc;
};

static void *measure(void *arg)
{
	struct run *r = arg;
	long psz = sysconf(_SC_PAGESIZE);
	struct timespec nap = { 0, 200000 };
	volatile char *m = mmap(NULL, (size_t)(PAGES * psz), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct vp_counters *c;
	uint64_t cpu0;

	if (m == MAP_FAILED) {
		r->rc = -errno;
		return NULL;
	}
	madvise((void *)m, (size_t)(PAGES * psz), MADV_NOHUGEPAGE);
	c = r->grouped ? vp_counters__open_group(r->events, r->err, sizeof(r->err))
		       : vp_counters__open(r->events, r->err, sizeof(r->err));
	if (!c) {
		r->rc = -errno;
		return NULL;
	}
	struct timespec w0, w1;
	clock_gettime(CLOCK_MONOTONIC, &w0);
	cpu0 = thread_cpu_ns();
	if ((r->rc = vp_counters__start(c)))
		goto out;
	for (long i = 0; i < PAGES; i++)
		m[i * psz] = 1;
	uint64_t sw0 = thread_switches();
	for (int i = 0; i < NAPS; i++)
		nanosleep(&nap, NULL);
	r->switched = thread_switches() - sw0;
	r->rc = vp_counters__read(c, r->v);
	r->cpu_ns = thread_cpu_ns() - cpu0;
	clock_gettime(CLOCK_MONOTONIC, &w1);
	r->wall_ns = (uint64_t)((w1.tv_sec - w0.tv_sec) * 1000000000ll + (w1.tv_nsec - w0.tv_nsec));
	r->reads = vp_counters__reads(c);
out:
	vp_counters__close(c);
	munmap((void *)m, (size_t)(PAGES * psz));
	return NULL;
}

static void run_in_thread(struct run *r)
{
	pthread_t t;

	ASSERT_OK(pthread_create(&t, NULL, measure, r));
	ASSERT_OK(pthread_join(t, NULL));
	if (r->rc == -EACCES || r->rc == -EPERM || r->rc == -ENOENT) {
		printf("SKIP: %s\n", r->err);
		exit(77);
	}
	if (r->rc)
		FAIL("%s: %s (%s)", r->events, strerror(-r->rc), r->err);
	printf("%-40s %s: page-faults %" PRIu64 ", context-switches %" PRIu64 " (the kernel saw %" PRIu64 " in the naps)"
	       ", clock %.3f ms, thread CPU %.3f ms, wall %.3f ms, "
	       "%d read()\n", r->events, r->grouped ? "group" : "separate", r->v[r->pf], r->v[r->cs], r->switched,
	       r->v[r->clk] / 1e6,
	       r->cpu_ns / 1e6, r->wall_ns / 1e6, r->reads);
}

/* Every switch the kernel counted during the naps is in the counter. A 200 us nap does
 * not always switch: a vCPU the host deschedules past the timer's expiry returns from
 * nanosleep without sleeping (a CI run counted 49 in 50 naps), so the naps are judged
 * by the kernel's own count (/proc/thread-self/status), which must show most of them. */
static void check_switches(const struct run *r)
{
	ASSERT_GE(r->switched, NAPS / 2);
	ASSERT_GE(r->v[r->cs], r->switched);
}

static void test_group(const char *events, int pf, int cs, int clk)
{
	struct run r = { .events = events, .grouped = true, .pf = pf, .cs = cs, .clk = clk };

	run_in_thread(&r);
	ASSERT_EQ(r.reads, 1);                  /* all three from one read() */
	ASSERT_GE(r.v[pf], PAGES);
	ASSERT_LT(r.v[pf], PAGES + 500);        /* the touches, not the whole process */
	check_switches(&r);
	/* The clock counted the whole window from the first touch: the thread's CPU time
	 * from just before start to just after the read (both clocks run while the thread
	 * does, whatever the load). The scheduler's runtime and the perf clocks are taken
	 * at different points of a switch, 10-14 us apart (issue 23; cpu-clock ran 0.23 ms
	 * ahead over 74 switches), hence 20 us per switch of slack either way. */
	double slack = 200000.0 + 20000.0 * (double)r.v[cs];
	/* Time the hypervisor takes while the thread runs is in task-clock and not in its
	 * CPU time (CONFIG_PARAVIRT_TIME_ACCOUNTING): a CI run whose VM lost 9.5% to steal
	 * counted 10.28 ms against 8.14 ms. Where a steal clock runs, /proc/stat's 10 ms
	 * ticks cannot say how much of it fell in a 10 ms window, so the bound is then the
	 * window's wall time, which no thread's clock can pass. */
	char why[320];
	double upper = vp_steal__clock_runs(why, sizeof(why)) == 1 ? (double)r.wall_ns : (double)r.cpu_ns;

	ASSERT_LE_F((double)r.v[clk], upper + slack);
	ASSERT_GE_F((double)r.v[clk], 0.9 * (double)r.cpu_ns - slack);
}

/* Counter sets for one grouped overflow: each call carries the group's counts. */
static volatile int calls;
static volatile uint64_t last_pf, last_clk;
static volatile int backwards, no_clock;

static void on_overflow(struct vp_counters *c, int event, const uint64_t *values, void *ctx)
{
	(void)c;
	(void)event;
	(void)ctx;
	if (values[0] < last_pf || values[1] < last_clk)
		backwards++;
	if (values[1] == 0)
		no_clock++;
	last_pf = values[0];
	last_clk = values[1];
	calls++;
}

static void test_group_overflow(void)
{
	long psz = sysconf(_SC_PAGESIZE), pages = 20000;
	volatile char *m = mmap(NULL, (size_t)(pages * psz), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char err[512];
	struct vp_counters *c;

	ASSERT_TRUE(m != MAP_FAILED);
	madvise((void *)m, (size_t)(pages * psz), MADV_NOHUGEPAGE);
	c = vp_counters__open_group("page-faults,task-clock", err, sizeof(err));
	if (!c)
		FAIL("vp_counters__open_group: %s", err);
	ASSERT_OK(vp_counters__overflow(c, 0, 1000, on_overflow, NULL));
	for (long i = 0; i < pages; i++)
		m[i * psz] = 1;
	vp_counters__close(c);
	munmap((void *)m, (size_t)(pages * psz));
	printf("grouped overflow: %d calls, last page-faults %" PRIu64 ", task-clock %.3f ms\n", calls, last_pf,
	       last_clk / 1e6);
	ASSERT_GE(calls, 19);
	ASSERT_LE(calls, 21);
	ASSERT_EQ(backwards, 0);
	ASSERT_EQ(no_clock, 0);                 /* the member's count came with the leader's */
	ASSERT_GE(last_pf, 19000);
}

int main(void)
{
	struct run sep = { .events = "task-clock,page-faults,context-switches", .pf = 1, .cs = 2, .clk = 0 };
	char err[512];

	test_group("task-clock,page-faults,context-switches", 1, 2, 0);
	test_group("page-faults,task-clock,context-switches", 0, 2, 1);
	test_group("context-switches,page-faults,cpu-clock", 1, 0, 2);
	test_group("cpu-clock,page-faults,context-switches", 1, 2, 0);
	/* Separate events: one read() per software event, the same counts. */
	run_in_thread(&sep);
	ASSERT_EQ(sep.reads, 3);
	ASSERT_GE(sep.v[1], PAGES);
	check_switches(&sep);
	test_group_overflow();
	ASSERT_NULL(vp_counters__open_group("task-clock,no-such-event", err, sizeof(err)));
	ASSERT_CONTAINS(err, "no-such-event");
	printf("ok\n");
	return 0;
}
