/* -p mode of both backends on a process that already runs a spinning thread and forks
 * a spinning child after sampling starts, with two events at different rates: samples
 * come from the existing thread and from the child (followed through the fork), and
 * nothing else; the event index of each sample is right (the 1000 Hz event gets ~4x
 * the samples of the 250 Hz one). Needs root; bpf parts need BPF. */
#include <linux/perf_event.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/syscall.h>
#include "test-sampler-util.h"

static void spin(double secs)
{
	uint64_t end = mono_ns() + (uint64_t)(secs * 1e9);
	volatile uint64_t x = 0;

	while (mono_ns() < end)
		x++;
}

static void *thread_main(void *arg)
{
	int *fd = arg;
	pid_t tid = (pid_t)syscall(SYS_gettid);

	if (write(*fd, &tid, sizeof(tid)) != sizeof(tid))
		_exit(6);
	spin(1.5);
	return NULL;
}

/* The target: a spinning thread, then (when told) a spinning child. */
static void target(int ready_fd, int go_fd)
{
	pthread_t t;
	pid_t c;
	char g;
	int st;

	if (pthread_create(&t, NULL, thread_main, &ready_fd))
		_exit(7);
	if (read(go_fd, &g, 1) != 1)
		_exit(8);
	c = fork();
	if (c == 0) {
		spin(1.0);
		_exit(0);
	}
	if (c < 0 || waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st))
		_exit(9);
	pthread_join(t, NULL);
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
	printf("%s -p: %" PRIu64 " samples of the existing thread, %" PRIu64 " of the forked child; "
	       "events: %" PRIu64 " at 1000 Hz, %" PRIu64 " at 250 Hz (ratio %.3f)\n", b->name,
	       thread_samples, child_samples, by_event[0], by_event[1], ratio);
	/* 1.5 s and 1 s of spinning at 1250 Hz in all: hundreds each. */
	ASSERT_GT(thread_samples, 200);
	ASSERT_GT(child_samples, 100);
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
