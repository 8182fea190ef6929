/* -p mode of both backends on a process that already runs a spinning thread and forks
 * a spinning child after sampling starts, with two events at different rates: samples
 * come from the existing thread and from the child (followed through the fork), and
 * nothing else; the event index of each sample is right (the 1000 Hz event gets ~4x
 * the samples of the 250 Hz one). Needs root; bpf parts need BPF. */
#include <linux/perf_event.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include "test-sampler-util.h"

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Spins for secs of this thread's CPU time (or 5 times as much wall time on a machine
 * that busy): what a cpu-clock profile samples is CPU time, not wall time. */
static void spin(double secs)
{
	uint64_t cpu_end = thread_cpu_ns() + (uint64_t)(secs * 1e9), wall_end = mono_ns() + (uint64_t)(secs * 5e9);
	volatile uint64_t x = 0;

	while (thread_cpu_ns() < cpu_end && mono_ns() < wall_end)
		for (int i = 0; i < 10000; i++)
			x++;
}

static clockid_t thread_clock;
static uint64_t thread_cpu_end;   /* the thread's CPU time when it stopped spinning */

static void *thread_main(void *arg)
{
	int *fd = arg;
	pid_t tid = (pid_t)syscall(SYS_gettid);

	if (write(*fd, &tid, sizeof(tid)) != sizeof(tid))
		_exit(6);
	spin(1.5);
	thread_cpu_end = thread_cpu_ns();
	return NULL;
}

/* The target: a spinning thread, then (when told) a spinning child. When both are done
 * it writes what they measured of their own CPU after "go": the thread's ns and the
 * child's, so that the test holds the samples to the CPU time they had. */
static void target(int ready_fd, int go_fd)
{
	pthread_t t;
	pid_t c;
	char g;
	int st;
	struct timespec ts;
	struct rusage ru;

	if (pthread_create(&t, NULL, thread_main, &ready_fd))
		_exit(7);
	if (pthread_getcpuclockid(t, &thread_clock))
		_exit(10);
	if (read(go_fd, &g, 1) != 1)
		_exit(8);
	if (clock_gettime(thread_clock, &ts))
		_exit(10);
	uint64_t thread_cpu_go = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	c = fork();
	if (c == 0) {
		spin(1.0);
		_exit(0);
	}
	if (c < 0 || wait4(c, &st, 0, &ru) != c || !WIFEXITED(st) || WEXITSTATUS(st))
		_exit(9);
	pthread_join(t, NULL);
	uint64_t cpu[2] = { thread_cpu_end > thread_cpu_go ? thread_cpu_end - thread_cpu_go : 0,
			    (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000ull +
				    (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ull };
	if (write(ready_fd, cpu, sizeof(cpu)) != sizeof(cpu))
		_exit(11);
	_exit(0);
}

static void run(const struct sampler_backend *b)
{
	struct mem_sink m = { .keep_stacks = false };
	struct sampler_config cfg = { .nr_events = 2, .callchain = true,
				      .target = SAMPLER_TARGET_PIDS, .nr_pids = 1,
				      .want_sideband = true, .sink = { mem_sink__emit, &m } };
	int ready[2], go[2], st;
	uint32_t child = 0;
	uint64_t by_event[2] = {0}, thread_samples = 0, child_samples = 0, child_exits = 0;
	char err[512];
	struct sampler *s;
	pid_t pid, tid;
	double ratio;

	for (int e = 0; e < 2; e++)
		cfg.events[e] = (struct sampler_event){ .type = PERF_TYPE_SOFTWARE,
							.config = PERF_COUNT_SW_CPU_CLOCK,
							.freq = e ? 250 : 1000, .software = true };
	strcpy(cfg.events[0].name, "cpu-clock");
	strcpy(cfg.events[1].name, "cpu-clock/250");
	if (pipe(ready) || pipe(go))
		FAIL("pipe: %s", strerror(errno));
	pid = fork();
	if (pid == 0) {
		close(ready[0]);
		close(go[1]);
		target(ready[1], go[0]);
	}
	close(ready[1]);
	close(go[0]);
	/* The thread exists before the sampler starts: -p must find it in /proc. */
	ASSERT_EQ(read(ready[0], &tid, sizeof(tid)), sizeof(tid));
	cfg.pids = &pid;
	s = b->start(&cfg, err, sizeof(err));
	if (!s)
		FAIL("%s start: %s", b->name, err);
	ASSERT_EQ(write(go[1], "g", 1), 1);
	sampler__poll_until_exit(b, s, pid, &st, NULL, NULL);
	ASSERT_OK(b->stop(s));
	ASSERT_TRUE(WIFEXITED(st));
	ASSERT_EQ(WEXITSTATUS(st), 0);

	for (size_t i = 0; i < m.n; i++) {
		const struct vp_task *t = m.r[i].body;

		if (m.r[i].type == VP_REC_FORK && t->ppid == (uint32_t)pid && t->pid != (uint32_t)pid)
			child = t->pid;
		if (m.r[i].type == VP_REC_EXIT && child && t->pid == child)
			child_exits++;
	}
	ASSERT_NE(child, 0);
	ASSERT_GE(child_exits, 1);
	for (size_t i = 0; i < m.n; i++) {
		const struct vp_sample *x = m.r[i].body;

		if (m.r[i].type != VP_REC_SAMPLE)
			continue;
		if (x->pid != (uint32_t)pid && x->pid != child)
			FAIL("%s: sample of pid %u, which is neither the target %d nor its child %u",
			     b->name, x->pid, (int)pid, child);
		ASSERT_LT(x->event, 2);
		by_event[x->event]++;
		thread_samples += x->tid == (uint32_t)tid;
		child_samples += x->pid == child;
	}
	ratio = by_event[0] ? (double)by_event[1] / by_event[0] : 0;
	uint64_t cpu[2];
	ASSERT_EQ(read(ready[0], cpu, sizeof(cpu)), sizeof(cpu));
	printf("%s -p: %" PRIu64 " samples of the existing thread (%.2f CPU-s after sampling began), %" PRIu64
	       " of the forked child (%.2f CPU-s); events: %" PRIu64 " at 1000 Hz, %" PRIu64 " at 250 Hz (ratio %.3f)\n",
	       b->name, thread_samples, cpu[0] / 1e9, child_samples, cpu[1] / 1e9, by_event[0], by_event[1], ratio);
	/* 1250 samples per CPU-second in all, held to the CPU the spinners measured they
	 * got (a busy machine gives them less): at least half of it, allowing for the
	 * frequency mode's first periods. The thread also spun before "go", so it may
	 * have more. A machine so busy that they got almost nothing proves nothing. */
	if (cpu[0] < 100000000ull || cpu[1] < 100000000ull)
		SKIP("the spinners got %.3f and %.3f CPU-s within 5 times their wall time: the machine is too busy to "
		     "sample them", cpu[0] / 1e9, cpu[1] / 1e9);
	ASSERT_GT(thread_samples, (uint64_t)(cpu[0] / 1e9 * 1250 * 0.5));
	ASSERT_GT(child_samples, (uint64_t)(cpu[1] / 1e9 * 1250 * 0.5));
	ASSERT_DBL_NEAR(ratio, 0.25, 0.08);
	b->destroy(s);
	mem_sink__clear(&m);
	close(ready[0]);
	close(go[1]);
}

int main(void)
{
	struct sampler_config cfg = { .nr_events = 1, .target = SAMPLER_TARGET_ALL };
	char why[512];

	REQUIRE_ROOT();
	cfg.events[0] = (struct sampler_event){ .type = PERF_TYPE_SOFTWARE,
						.config = PERF_COUNT_SW_CPU_CLOCK, .freq = 1000 };
	run(&sampler_backend_perf);
	if (!sampler_backend_bpf.supported(&cfg, why, sizeof(why)))
		SKIP("bpf backend: %s (the perf backend passed)", why);
	run(&sampler_backend_bpf);
	return 0;
}
