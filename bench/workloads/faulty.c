/* faulty: a workload with a known number of page faults and context switches, for the
 * multi-event tests. It touches PAGES fresh anonymous pages (one minor fault each:
 * huge pages are refused with MADV_NOHUGEPAGE, or one fault would map 512 pages), then
 * sleeps SLEEPS times for 50 us (one voluntary context switch each), then computes for
 * SPIN million iterations (about 1 ns each here; a fixed amount of work, not of time,
 * so that a busy machine does not shrink it) so that cpu-clock has samples too. Apart
 * from those it only pays the faults of exec and libc start-up, a few hundred.
 * If REPORT is given, it writes there the CPU time its spin took by its own thread's clock
 * ("spin_cpu_ns N"), so that a test can compare a profiler's share of spin with what the
 * same run measured instead of with a machine's speed (a page fault costs 3 us on one VM
 * and 13 us on another, so spin's share of the whole run is not a constant).
 * usage: faulty [PAGES [SLEEPS [SPIN [REPORT]]]]   (default 20000 2000 200) */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

__attribute__((noinline)) void touch_pages(long pages)
{
	long psz = sysconf(_SC_PAGESIZE);
	if (pages == 0)
		return;
	volatile char *m = mmap(NULL, (size_t)(pages * psz), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) {
		perror("faulty: mmap");
		exit(1);
	}
	madvise((void *)m, (size_t)(pages * psz), MADV_NOHUGEPAGE);
	for (long i = 0; i < pages; i++)
		m[i * psz] = 1;
	munmap((void *)m, (size_t)(pages * psz));
}

/* The sleeps are inline `syscall` instructions: libc's nanosleep wrapper is a leaf
 * without a frame pointer, so a frame-pointer walk from it would skip nap. */
__attribute__((noinline)) void nap(long sleeps)
{
	struct timespec ts = { 0, 50000 };
	for (long i = 0; i < sleeps; i++) {
#if defined(__x86_64__)
		long ret;
		__asm__ volatile("syscall" : "=a"(ret) : "a"(SYS_nanosleep), "D"(&ts), "S"(0) : "rcx", "r11", "memory");
#else
		nanosleep(&ts, NULL);
#endif
	}
}

__attribute__((noinline)) uint64_t spin(long millions)
{
	uint64_t x = 1;
	for (long m = 0; m < millions; m++)
		for (int i = 0; i < 1000000; i++)
			x = x * 6364136223846793005ull + 1442695040888963407ull;
	return x;
}

int main(int argc, char **argv)
{
	long pages = argc > 1 ? atol(argv[1]) : 20000, sleeps = argc > 2 ? atol(argv[2]) : 2000;
	long millions = argc > 3 ? atol(argv[3]) : 200;
	if (pages < 0 || sleeps < 0 || millions < 0) {
		fprintf(stderr, "usage: faulty [PAGES [SLEEPS [SPIN]]]  (whole numbers >= 0)\n");
		return 2;
	}
	touch_pages(pages);
	nap(sleeps);
	struct timespec t0, t1;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
	uint64_t x = spin(millions);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
	if (argc > 4) {
		FILE *f = fopen(argv[4], "w");
		if (!f || fprintf(f, "spin_cpu_ns %lld\n", (long long)(t1.tv_sec - t0.tv_sec) * 1000000000ll +
				  (t1.tv_nsec - t0.tv_nsec)) < 0 || fclose(f)) {
			perror("faulty: writing the report file");
			return 1;
		}
	}
	return x == 42;  /* use the result so the loop is not optimized away */
}
