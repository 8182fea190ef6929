/* split3: a native workload with a known CPU split, the ground truth of the split
 * tests. Three functions run in turn, each until its own deadline, in 100 ms rounds:
 *   work50  50 ms of each round   (50 %)
 *   work30  30 ms                 (30 %)
 *   work20  20 ms                 (20 %)
 * for SECONDS in total (default 3). The deadlines are in this thread's CPU time
 * (CLOCK_THREAD_CPUTIME_ID), not wall time: on a busy machine the process is
 * preempted at random points, and a wall-clock split would then no longer be the CPU
 * split a cpu-clock profile measures. So SECONDS is CPU seconds; when the CPU is
 * shared the run takes longer. Build with -O1 -fno-omit-frame-pointer so that
 * each function keeps its own frame and a -g profile attributes its callees to it.
 * usage: split3 [SECONDS] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define ROUND_NS 100000000ull

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Arithmetic between clock reads (tens of microseconds of it; reading the CPU clock is
 * a system call) keeps about 99 % of the samples inside the work functions; it is inlined so that self time lands in work50/30/20 themselves
 * (a flat profile shows the split, not only a -g one). volatile keeps the compiler
 * from folding the loop away. */
static volatile uint64_t sink;

static inline __attribute__((always_inline)) uint64_t spin(uint64_t x, int n)
{
	for (int i = 0; i < n; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		__asm__ volatile("" : "+r"(x));   /* no closed form: each step really runs */
	}
	return x;
}

__attribute__((noinline)) void work50(uint64_t until)
{
	uint64_t x = 1;
	while (now_ns() < until)
		x = spin(x, 20000);
	sink += x;
}

__attribute__((noinline)) void work30(uint64_t until)
{
	uint64_t x = 2;
	while (now_ns() < until)
		x = spin(x, 20000);
	sink += x;
}

__attribute__((noinline)) void work20(uint64_t until)
{
	uint64_t x = 3;
	while (now_ns() < until)
		x = spin(x, 20000);
	sink += x;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 3.0;
	if (secs <= 0 || secs > 86400) {
		fprintf(stderr, "usage: split3 [SECONDS]  (a positive number, default 3)\n");
		return 2;
	}
	uint64_t start = now_ns(), end = start + (uint64_t)(secs * 1e9);
	/* Deadlines are absolute, so a round that ran late does not shift the split. */
	for (uint64_t round = start; round < end; round += ROUND_NS) {
		work50(round + ROUND_NS * 5 / 10);
		work30(round + ROUND_NS * 8 / 10);
		work20(round + ROUND_NS);
	}
	return 0;
}
