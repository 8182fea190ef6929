/* The counters library (hv-glue/counters.h): values read through the library agree
 * with an independent read() of a second task-clock event on the same thread, never go
 * backwards, freeze while stopped, and add up periods as sum + (phys - start). */
#include <errno.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <time.h>

#include "test.h"
#include "test-helpers.h"
#include "hv-glue/counters.h"

/* Reads between the library and the oracle are a few microseconds apart in thread CPU
 * time; 300 us leaves room for a page fault or an interrupt charged in between. */
#define TOL_NS 300000.0

static int oracle_fd = -1;

static uint64_t oracle(void)
{
	uint64_t v;

	if (read(oracle_fd, &v, sizeof(v)) != (ssize_t)sizeof(v))
		FAIL("read of the oracle task-clock failed: %s", strerror(errno));
	return v;
}


static void test_agrees_with_read(struct vp_counters *c)
{
	uint64_t v, prev = 0, o0;

	ASSERT_OK(vp_counters__start(c));
	o0 = oracle();
	for (int i = 0; i < 20000; i++) {
		ASSERT_OK(vp_counters__read(c, &v));
		uint64_t o = oracle();

		ASSERT_GE(v, prev);     /* monotonic */
		prev = v;
		if (i % 1000 == 0) {
			ASSERT_DBL_NEAR((double)v, (double)(o - o0), TOL_NS);
			burn_ms(2);
		}
	}
	ASSERT_GT(prev, 20 * 1000000);  /* the 20 x 2 ms burns were seen */
	/* task-clock is a software event: index 0 in the user page, so never rdpmc. */
	ASSERT_EQ(vp_counters__used_rdpmc(c, 0), 0);
	ASSERT_OK(vp_counters__stop(c));
}

static void test_start_stop_sum(struct vp_counters *c)
{
	uint64_t base, v1, v2, v3, o0, o1, o2, o3;

	ASSERT_OK(vp_counters__read(c, &base));     /* stopped: the sum so far */
	o0 = oracle();
	ASSERT_OK(vp_counters__start(c));
	ASSERT_EQ(vp_counters__start(c), -EALREADY);
	burn_ms(30);
	ASSERT_OK(vp_counters__stop(c));
	o1 = oracle();
	ASSERT_OK(vp_counters__read(c, &v1));
	burn_ms(50);                                /* not counted: stopped */
	ASSERT_OK(vp_counters__read(c, &v2));
	ASSERT_UEQ(v2, v1);
	ASSERT_EQ(vp_counters__stop(c), -EINVAL);
	o2 = oracle();
	ASSERT_OK(vp_counters__start(c));
	burn_ms(20);
	ASSERT_OK(vp_counters__stop(c));
	o3 = oracle();
	ASSERT_OK(vp_counters__read(c, &v3));
	ASSERT_DBL_NEAR((double)(v1 - base), (double)(o1 - o0), TOL_NS);
	ASSERT_DBL_NEAR((double)(v3 - base), (double)((o1 - o0) + (o3 - o2)), 2 * TOL_NS);
	ASSERT_GT(v3 - base, 49 * 1000000);
	ASSERT_LT(v3 - base, 70 * 1000000);        /* the 50 ms burn while stopped is not in */
}

static void test_several_events(void)
{
	char err[256];
	struct vp_counters *c = vp_counters__open("task-clock,page-faults,cs", err, sizeof(err));
	uint64_t v[3];
	char *mem;

	ASSERT_NOT_NULL(c);
	ASSERT_EQ(vp_counters__count(c), 3);
	ASSERT_STREQ(vp_counters__name(c, 1), "page-faults");
	ASSERT_NULL(vp_counters__name(c, 3));
	ASSERT_OK(vp_counters__start(c));
	/* Touch 256 fresh pages: at least that many minor faults of this thread. */
	mem = malloc(256 * 4096 + 4096);
	ASSERT_NOT_NULL(mem);
	for (int i = 0; i < 256; i++)
		mem[i * 4096] = 1;
	ASSERT_OK(vp_counters__read(c, v));
	ASSERT_GE(v[1], 256);
	ASSERT_LT(v[1], 256 + 200);
	free(mem);
	vp_counters__close(c);
}

static void test_errors(void)
{
	char err[256] = "";

	ASSERT_NULL(vp_counters__open("no-such-event", err, sizeof(err)));
	ASSERT_TRUE(err[0] != '\0');
	ASSERT_CONTAINS(err, "no-such-event");
	ASSERT_NULL(vp_counters__open("", err, sizeof(err)));
	ASSERT_TRUE(err[0] != '\0');
	vp_counters__close(NULL);
}

int main(void)
{
	struct perf_event_attr attr = { .size = sizeof(attr), .type = PERF_TYPE_SOFTWARE,
					.config = PERF_COUNT_SW_TASK_CLOCK, .exclude_hv = 1 };
	char err[256];
	struct vp_counters *c;

	oracle_fd = (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
	if (oracle_fd < 0)
		SKIP("perf_event_open(task-clock) failed here: %s (kernel.perf_event_paranoid?)", strerror(errno));
	c = vp_counters__open("task-clock", err, sizeof(err));
	if (!c)
		FAIL("vp_counters__open(task-clock): %s", err);
	test_agrees_with_read(c);
	test_start_stop_sum(c);
	vp_counters__close(c);
	test_several_events();
	test_errors();
	printf("test-counters: ok\n");
	return 0;
}
