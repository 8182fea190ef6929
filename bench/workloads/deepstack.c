/* Two threads, each recursing to a fixed depth and spinning at the bottom: a workload
 * whose user stacks have a known depth, for the stack walker's cost per sample.
 * Built with frame pointers, so that both the frame-pointer walk and the table walk
 * reach the full depth. Usage: deepstack DEPTH SECONDS */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

static int depth;
static double secs;
static volatile unsigned long sink;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static unsigned long descend(int n, double end)
{
	unsigned long x = (unsigned long)n;

	if (n > 0)
		x += descend(n - 1, end);   /* not a tail call: the sum keeps the frame */
	else
		while (now() < end)
			for (int i = 0; i < 100000; i++)
				x = x * 6364136223846793005ul + 1442695040888963407ul;
	sink += x;
	return x;
}

static void *worker(void *arg)
{
	descend(depth, now() + secs);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t[2];

	depth = argc > 1 ? atoi(argv[1]) : 30;
	secs = argc > 2 ? atof(argv[2]) : 5;
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, worker, NULL);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	return 0;
}
