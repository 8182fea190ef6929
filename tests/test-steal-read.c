/* Steal time from /proc/stat: fixtures with known answers (USER_HZ conversion, old
 * kernels without the steal column, offline CPUs, too small arrays), then the live file. */
#include <errno.h>

#include "hv-glue/steal.h"
#include "test.h"

#define HEAD "cpu  4139 0 2678 381856 488 0 124 51 0 0\n"
#define TAIL "intr 228489 0 0 0 1\nctxt 462752\nbtime 1763780000\nprocs_running 1\n"

static void test_fixtures(void)
{
	uint64_t ns[8];

	/* Two CPUs, USER_HZ 100: 1 tick = 10 ms. */
	const char *two = HEAD "cpu0 1663 0 1016 191917 27 0 38 24 0 0\n"
			       "cpu1 2475 0 1662 189939 461 0 85 27 0 0\n" TAIL;
	ASSERT_EQ(vp_steal__parse(two, 100, ns, 8), 2);
	ASSERT_UEQ(ns[0], 240000000ull);
	ASSERT_UEQ(ns[1], 270000000ull);
	ASSERT_UEQ(ns[2], 0);

	/* Another USER_HZ, and tabs as separators. */
	ASSERT_EQ(vp_steal__parse("cpu0\t1 2 3 4 5 6 7 3 0 0\n", 250, ns, 8), 1);
	ASSERT_UEQ(ns[0], 12000000ull);

	/* Old kernel: seven columns, no steal -> 0, not the next line's number. */
	const char *old = "cpu  1 2 3 4 5 6 7\ncpu0 1 2 3 4 5 6 7\ncpu1 9 9 9 9 9 9 9\nintr 5 5\n";
	memset(ns, 0xff, sizeof(ns));
	ASSERT_EQ(vp_steal__parse(old, 100, ns, 8), 2);
	ASSERT_UEQ(ns[0], 0);
	ASSERT_UEQ(ns[1], 0);
	/* Older still: four columns. */
	ASSERT_EQ(vp_steal__parse("cpu0 1 2 3 4\n", 100, ns, 8), 1);
	ASSERT_UEQ(ns[0], 0);

	/* CPU 1 offline: the array is indexed by N of cpuN and the gap is 0. */
	memset(ns, 0xff, sizeof(ns));
	const char *gap = HEAD "cpu0 1 0 1 1 0 0 0 5 0 0\ncpu2 1 0 1 1 0 0 0 7 0 0\ncpu3 1 0 1 1 0 0 0 1 0 0\n" TAIL;
	ASSERT_EQ(vp_steal__parse(gap, 100, ns, 8), 4);
	ASSERT_UEQ(ns[0], 50000000ull);
	ASSERT_UEQ(ns[1], 0);
	ASSERT_UEQ(ns[2], 70000000ull);
	ASSERT_UEQ(ns[3], 10000000ull);

	/* More CPUs than the array: the rest are ignored and nothing past max is written. */
	uint64_t small[3] = { 1, 1, 0xdeadbeef };
	ASSERT_EQ(vp_steal__parse(gap, 100, small, 2), 2);
	ASSERT_UEQ(small[0], 50000000ull);
	ASSERT_UEQ(small[1], 0);
	ASSERT_UEQ(small[2], 0xdeadbeef);

	/* Large counters do not overflow in the conversion (about 58 years of steal). */
	ASSERT_EQ(vp_steal__parse("cpu0 0 0 0 0 0 0 0 184467440737 0 0\n", 100, ns, 8), 1);
	ASSERT_UEQ(ns[0], 1844674407370000000ull);
	/* USER_HZ that does not divide 1e9: floor(10000000007 * 1e9 / 3). */
	ASSERT_EQ(vp_steal__parse("cpu0 0 0 0 0 0 0 0 10000000007 0 0\n", 3, ns, 8), 1);
	ASSERT_UEQ(ns[0], 3333333335666666666ull);

	/* No trailing newline, and lines that only look like cpu lines. */
	ASSERT_EQ(vp_steal__parse("cpufreq 1 2 3 4 5 6 7 8\ncpu1 0 0 0 0 0 0 0 2", 100, ns, 8), 2);
	ASSERT_UEQ(ns[0], 0);
	ASSERT_UEQ(ns[1], 20000000ull);

	/* Nothing to parse, bad arguments. */
	ASSERT_EQ(vp_steal__parse(HEAD TAIL, 100, ns, 8), -EINVAL);
	ASSERT_EQ(vp_steal__parse("", 100, ns, 8), -EINVAL);
	ASSERT_EQ(vp_steal__parse(two, 0, ns, 8), -EINVAL);
	ASSERT_EQ(vp_steal__parse(two, 100, ns, 0), -EINVAL);
}

/* Mangled /proc/stat texts (a deterministic generator): never a crash or a write past
 * the array, and the result is either -EINVAL or a CPU count within bounds. */
static void test_mangled(void)
{
	static const char alphabet[] = "cpu0123456789 \t\n-x";
	unsigned seed = 12345;
	char text[256];
	for (int iter = 0; iter < 20000; iter++) {
		size_t len = (size_t)(iter % 200);
		for (size_t i = 0; i < len; i++) {
			seed = seed * 1103515245u + 12345u;
			text[i] = alphabet[(seed >> 16) % (sizeof(alphabet) - 1)];
		}
		text[len] = '\0';
		uint64_t ns[5];
		ns[4] = 0x5a5a5a5a;
		int n = vp_steal__parse(text, 100, ns, 4);
		if (n != -EINVAL && (n < 1 || n > 4))
			FAIL("parse of \"%s\" returned %d", text, n);
		ASSERT_UEQ(ns[4], 0x5a5a5a5a);
	}
}

static void test_live(void)
{
	long ncpu = sysconf(_SC_NPROCESSORS_CONF);
	ASSERT_GT(ncpu, 0);
	uint64_t a[1024], b[1024];
	if (ncpu > 1024)
		ncpu = 1024;
	int n = vp_steal__read(a, (int)ncpu);
	if (n == -ENOENT)
		SKIP("/proc/stat is not there (no procfs mounted)");
	ASSERT_GT(n, 0);
	ASSERT_LE(n, ncpu);
	/* Steal only grows. */
	ASSERT_EQ(vp_steal__read(b, (int)ncpu), n);
	for (int i = 0; i < n; i++)
		ASSERT_TRUE(b[i] >= a[i]);
	/* The per-CPU sum matches the aggregate line's steal column within rounding
	 * (the two are read at different instants, so allow a little growth). */
	FILE *f = fopen("/proc/stat", "r");
	ASSERT_NOT_NULL(f);
	unsigned long long v[8] = { 0 };
	int cols = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
			  &v[6], &v[7]);
	fclose(f);
	uint64_t sum = 0;
	for (int i = 0; i < n; i++)
		sum += b[i];
	if (cols == 8) {
		uint64_t total = v[7] * (1000000000ull / (uint64_t)sysconf(_SC_CLK_TCK));
		fprintf(stderr, "steal: per-CPU sum %llu ns, aggregate %llu ns\n", (unsigned long long)sum,
			(unsigned long long)total);
		ASSERT_TRUE(total + 1000000000ull >= sum && sum + 1000000000ull >= total);
	}
}

/* A steal clock is what the VM shows, not what the kernel was built with: no steal
 * since boot means no stolen figure, with a reason that says so. */
static void test_clock_runs(void)
{
	char why[512] = "";
	ASSERT_EQ(vp_steal__clock_runs_from(0, why, sizeof(why)), 0);
	/* The one wording every view uses (common/steal_clock.h), never a 0. */
	ASSERT_EQ(strncmp(why, "steal: not measured (no steal clock)", 36), 0);
	ASSERT_EQ(vp_steal__clock_runs_from(10000000, why, sizeof(why)), 1);
	uint64_t total = 0;
	ASSERT_OK(vp_steal__total(&total));
	int runs = vp_steal__clock_runs(why, sizeof(why));
	fprintf(stderr, "this VM: steal since boot %.1f ms, steal clock %s\n", (double)total / 1e6,
		runs == 1 ? "runs" : why);
	ASSERT_EQ(runs, total > 0);
}

int main(void)
{
	test_fixtures();
	test_mangled();
	test_live();
	test_clock_runs();
	return 0;
}
