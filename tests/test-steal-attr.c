/* Victim attribution of steal time (postproc/steal.h) on a hand-built record stream
 * whose answer was computed by hand (see the comments at each record). */
#include "test.h"
#include "postproc/steal.h"

#define MAXV 16
struct victims {
	int n;
	struct { uint32_t cpu, pid, tid; uint64_t ns; } v[MAXV];
};

static void collect(void *ctx, uint32_t cpu, uint32_t pid, uint32_t tid, uint64_t ns)
{
	struct victims *vs = ctx;

	if (vs->n == MAXV)
		FAIL("more than %d victims", MAXV);
	vs->v[vs->n].cpu = cpu;
	vs->v[vs->n].pid = pid;
	vs->v[vs->n].tid = tid;
	vs->v[vs->n].ns = ns;
	vs->n++;
}

static uint64_t charged(const struct victims *vs, uint32_t cpu, uint32_t pid, uint32_t tid)
{
	for (int i = 0; i < vs->n; i++)
		if (vs->v[i].cpu == cpu && vs->v[i].pid == pid && vs->v[i].tid == tid)
			return vs->v[i].ns;
	return 0;
}

static void sw(struct vp_steal_acct *a, uint64_t t, uint32_t cpu, uint32_t pp, uint32_t pt,
	       uint32_t np, uint32_t nt)
{
	struct vp_switch s = { .cpu = cpu, .prev_pid = pp, .prev_tid = pt, .next_pid = np, .next_tid = nt };

	vp_steal_acct__switch(a, t, &s);
}

static void st(struct vp_steal_acct *a, uint64_t t, uint32_t cpu, uint64_t ns)
{
	struct vp_steal s = { .cpu = cpu, .steal_ns = ns };

	vp_steal_acct__steal(a, t, &s);
}

static void test_known_answer(void)
{
	struct vp_steal_acct *a = vp_steal_acct__new();
	struct victims vs = { 0 };

	ASSERT_NOT_NULL(a);
	/* CPU 0. Who runs before the first switch is only known from that switch's prev
	 * (idle). Interval [0,100): idle 10, tid 101 40, tid 102 50 of a 900 ns steal
	 * delta -> 90 / 360 / 450. [100,200): steal 0 -> nothing. [200,300): tid 102 50,
	 * idle 50 of 300 -> 150 / 150. */
	st(a, 0, 0, 1000);
	sw(a, 10, 0, 0, 0, 100, 101);
	sw(a, 50, 0, 100, 101, 100, 102);   /* 101 leaves CPU 0 ... */
	st(a, 100, 0, 1900);
	st(a, 200, 0, 1900);
	sw(a, 250, 0, 100, 102, 0, 0);
	st(a, 300, 0, 2200);
	/* CPU 1: ... and runs on CPU 1 from 60 to 130 (a migration). The switch at 60 is
	 * fed after the steal at 100, as a late drained per-CPU buffer would. [0,100):
	 * idle 60, 101 40 of 1000 -> 600 / 400. [100,200): idle 70, 101 30 of 7 ->
	 * 4.9 and 2.1, rounded down to 4 and 2, the 1 ns left to the longest (idle): 5 / 2. */
	st(a, 0, 1, 500);
	st(a, 100, 1, 1500);
	sw(a, 60, 1, 0, 0, 100, 101);
	sw(a, 130, 1, 100, 101, 0, 0);
	st(a, 200, 1, 1507);
	/* CPU 2: no switches ever, and a counter that goes backwards (50 < 100) restarts
	 * the baseline: only 80 - 50 = 30 is charged, to the unknown thread. */
	st(a, 0, 2, 100);
	st(a, 100, 2, 50);
	st(a, 200, 2, 80);

	ASSERT_OK(vp_steal_acct__finish(a, collect, &vs));
	ASSERT_EQ(vs.n, 6);
	ASSERT_UEQ(charged(&vs, 0, 0, 0), 240);
	ASSERT_UEQ(charged(&vs, 0, 100, 101), 360);
	ASSERT_UEQ(charged(&vs, 0, 100, 102), 600);
	ASSERT_UEQ(charged(&vs, 1, 0, 0), 605);
	ASSERT_UEQ(charged(&vs, 1, 100, 101), 402);
	ASSERT_UEQ(charged(&vs, 2, VP_STEAL_UNKNOWN, VP_STEAL_UNKNOWN), 30);
	/* Victims come sorted by (cpu, pid, tid). */
	for (int i = 1; i < vs.n; i++)
		ASSERT_TRUE(vs.v[i - 1].cpu < vs.v[i].cpu ||
			    (vs.v[i - 1].cpu == vs.v[i].cpu && (vs.v[i - 1].pid < vs.v[i].pid ||
			     (vs.v[i - 1].pid == vs.v[i].pid && vs.v[i - 1].tid < vs.v[i].tid))));
	vp_steal_acct__free(a);
}

/* All-zero steal and a single STEAL record (no interval) charge nobody. */
static void test_nothing_to_charge(void)
{
	struct vp_steal_acct *a = vp_steal_acct__new();
	struct victims vs = { 0 };

	ASSERT_NOT_NULL(a);
	ASSERT_OK(vp_steal_acct__finish(a, collect, &vs));
	ASSERT_EQ(vs.n, 0);
	st(a, 0, 0, 0);
	sw(a, 10, 0, 0, 0, 7, 7);
	st(a, 100, 0, 0);
	st(a, 0, 1, 12345);
	sw(a, 20, 1, 0, 0, 7, 8);
	ASSERT_OK(vp_steal_acct__finish(a, collect, &vs));
	ASSERT_EQ(vs.n, 0);
	vp_steal_acct__free(a);
	vp_steal_acct__free(NULL);
}

/* Many threads in one interval: shares are proportional and add up exactly. */
static void test_exact_sum(void)
{
	struct vp_steal_acct *a = vp_steal_acct__new();
	struct victims vs = { 0 };
	uint64_t sum = 0;

	ASSERT_NOT_NULL(a);
	st(a, 1000, 3, 0);
	/* tids 1..5 run 1, 2, 3, 4, 5 units of 100 ns (1500 ns in all) after idle. */
	uint64_t t = 1000;
	uint32_t prev = 0;
	for (uint32_t tid = 1; tid <= 5; tid++) {
		sw(a, t, 3, prev ? 9 : 0, prev, 9, tid);
		prev = tid;
		t += 100 * tid;
	}
	st(a, t, 3, 1000003);   /* 1000003 over 1500 ns: 1/15 .. 5/15 of it */
	ASSERT_OK(vp_steal_acct__finish(a, collect, &vs));
	ASSERT_EQ(vs.n, 5);
	for (int i = 0; i < vs.n; i++) {
		double want = 1000003.0 * (double)vs.v[i].tid / 15.0;

		ASSERT_DBL_NEAR((double)vs.v[i].ns, want, 5.0); /* rounding: at most n-1 ns moved */
		sum += vs.v[i].ns;
	}
	ASSERT_UEQ(sum, 1000003);
	vp_steal_acct__free(a);
}

int main(void)
{
	test_known_answer();
	test_nothing_to_charge();
	test_exact_sum();
	printf("test-steal-attr: ok\n");
	return 0;
}
