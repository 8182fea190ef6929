/* A fixed amount of CPU work on T threads (default 2): the wall time it takes is what
 * the overhead benchmark compares with and without a profiler. Unlike split3, which
 * runs to a deadline, this one's run time grows when something steals its CPU.
 * Usage: fixedwork [MILLION_ITERATIONS_PER_THREAD] [THREADS] */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static long iters = 400;

static __attribute__((noinline)) uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x;
}

static __attribute__((noinline)) uint64_t inner(uint64_t seed, long n)
{
	for (long i = 0; i < n; i++)
		seed = mix(seed + (uint64_t)i);
	return seed;
}

static void *worker(void *arg)
{
	uint64_t acc = (uint64_t)(uintptr_t)arg;
	for (long m = 0; m < iters; m++)
		acc = inner(acc, 1000000);
	return (void *)(uintptr_t)acc;
}

int main(int argc, char **argv)
{
	int threads = 2;
	if (argc > 1)
		iters = atol(argv[1]);
	if (argc > 2)
		threads = atoi(argv[2]);
	if (iters <= 0 || threads <= 0 || threads > 256) {
		fprintf(stderr, "usage: fixedwork [MILLION_ITERATIONS>0] [THREADS 1..256]\n");
		return 2;
	}
	pthread_t t[256];
	uint64_t sum = 0;
	for (int i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1));
	for (int i = 0; i < threads; i++) {
		void *r;
		pthread_join(t[i], &r);
		sum += (uint64_t)(uintptr_t)r;
	}
	printf("%llx\n", (unsigned long long)sum);
	return 0;
}
