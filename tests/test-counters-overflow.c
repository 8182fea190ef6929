/* Overflow callbacks of the counters library (issue 23: Perfctr-xen's i-mode, tested
 * with software events). Two threads, each with its own counter set and a page-faults
 * overflow at period 1000: thread A touches 100,000 fresh pages and must get 100 +- 1
 * calls, thread B 50,000 and 50 +- 1; every call runs in the thread that registered it
 * (another thread's faults never reach it), and carries that thread's own counts, which
 * grow by about a period from one call to the next. Exit 77 when perf_event_open is
 * refused (kernel.perf_event_paranoid). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hv-glue/counters.h"
#include "test.h"

#define PERIOD 1000
#define MAXCALLS 512

/* Both threads register at the same moment: a CI run once lost thread A's overflows
 * when the two took the same free slot of the library's signal table. */
static pthread_barrier_t start;

struct thread_run {
	long pages;
	pid_t tid;
	/* Filled by the callback (a signal handler): preallocated, no locks. */
	volatile int calls, foreign;
	uint64_t counts[MAXCALLS];
	char err[512];
	int rc;
};

static void on_overflow(struct vp_counters *c, int event, const uint64_t *values, void *ctx)
{
	struct thread_run *t = ctx;
	(void)c;
	(void)event;
	if ((pid_t)syscall(SYS_gettid) != t->tid)
		t->foreign++;
	if (t->calls < MAXCALLS)
		t->counts[t->calls] = values[0];
	t->calls++;
}

static void *run(void *arg)
{
	struct thread_run *t = arg;
	long psz = sysconf(_SC_PAGESIZE);
	t->tid = (pid_t)syscall(SYS_gettid);
	/* Mapped before the counters open, so that only the touches are counted. */
	volatile char *m = mmap(NULL, (size_t)(t->pages * psz), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				-1, 0);
	if (m == MAP_FAILED) {
		t->rc = -errno;
		return NULL;
	}
	madvise((void *)m, (size_t)(t->pages * psz), MADV_NOHUGEPAGE);
	pthread_barrier_wait(&start);
	struct vp_counters *c = vp_counters__open("page-faults", t->err, sizeof(t->err));
	if (!c) {
		t->rc = -errno;
		return NULL;
	}
	if ((t->rc = vp_counters__overflow(c, 0, PERIOD, on_overflow, t))) {
		snprintf(t->err, sizeof(t->err), "vp_counters__overflow: %s", strerror(-t->rc));
		vp_counters__close(c);
		return NULL;
	}
	for (long i = 0; i < t->pages; i++)
		m[i * psz] = 1;
	/* The last signal is queued by irq_work at the overflow; it is delivered before
	 * the thread returns to user mode, so all calls are in by now. */
	vp_counters__close(c);
	munmap((void *)m, (size_t)(t->pages * psz));
	return NULL;
}

int main(void)
{
	static struct thread_run a = { .pages = 100000 }, b = { .pages = 50000 };
	pthread_t ta, tb;
	ASSERT_OK(pthread_barrier_init(&start, NULL, 2));
	ASSERT_OK(pthread_create(&ta, NULL, run, &a));
	ASSERT_OK(pthread_create(&tb, NULL, run, &b));
	ASSERT_OK(pthread_join(ta, NULL));
	ASSERT_OK(pthread_join(tb, NULL));
	if (a.rc == -EACCES || a.rc == -EPERM)
		SKIP("perf_event_open refused: %s", a.err);
	if (a.rc || b.rc)
		FAIL("A: %d %s; B: %d %s", a.rc, a.err, b.rc, b.err);
	struct thread_run *ts[2] = { &a, &b };
	for (int k = 0; k < 2; k++) {
		struct thread_run *t = ts[k];
		fprintf(stderr, "thread %c (%ld pages): %d calls, %d in another thread; counts at the first three: %" PRIu64
			" %" PRIu64 " %" PRIu64 ", at the last: %" PRIu64 "\n", 'A' + k, t->pages, t->calls, t->foreign,
			t->counts[0], t->counts[1], t->counts[2], t->counts[t->calls > 0 ? t->calls - 1 : 0]);
		ASSERT_EQ(t->foreign, 0);
		ASSERT_GE(t->calls, t->pages / PERIOD - 1);
		ASSERT_LE(t->calls, t->pages / PERIOD + 1);
		/* Its own counts: about one period more at each call, and never more than its
		 * own faults (the other thread's would break both). */
		for (int i = 1; i < t->calls && i < MAXCALLS; i++) {
			ASSERT_GE(t->counts[i], t->counts[i - 1] + PERIOD / 2);
			ASSERT_LE(t->counts[i], t->counts[i - 1] + 2 * PERIOD);
		}
		ASSERT_LE(t->counts[t->calls - 1], (uint64_t)t->pages + 100);
	}
	printf("test-counters-overflow: ok\n");
	return 0;
}
