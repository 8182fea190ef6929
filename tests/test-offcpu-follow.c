/* The bpf sampler and the switch tracer started as the recorder starts them in -p mode
 * (tracer first, vp_sched__hook, then the sampler) follow one set of processes:
 *   - a child the target forks after both started is sampled on-CPU by the sampler and
 *     charged off-CPU time (its naps) by the tracer;
 *   - the two share one tracked map: a process put into the map the tracer lent
 *     (cfg.tracked_fd) after both started, and in no pid list, is one the sampler
 *     follows (its sideband: the COMM record of its new name).
 * Needs root, BPF and BTF. */
#include <sys/prctl.h>
#include <linux/perf_event.h>
#include <bpf/bpf.h>
#include "sampler-kernel/sched_tracer.h"
#include "test-sampler-util.h"

static void spin(double secs)
{
	uint64_t end = mono_ns() + (uint64_t)(secs * 1e9);
	volatile uint64_t x = 0;

	while (mono_ns() < end)
		x++;
}

/* Spins and naps in turn: samples on-CPU, blocked intervals off-CPU. */
static void spin_and_nap(void)
{
	for (int i = 0; i < 6; i++) {
		spin(0.1);
		usleep(50 * 1000);
	}
}

/* The target: forks, when told, a child that spins and naps, and waits for it. */
static void target(int go_fd)
{
	pid_t c;
	char g;
	int st;

	if (read(go_fd, &g, 1) != 1)
		_exit(8);
	c = fork();
	if (c == 0) {
		spin_and_nap();
		_exit(0);
	}
	if (c < 0 || waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st))
		_exit(9);
	_exit(0);
}

/* A process the recording was not asked for: told once, it renames itself; told
 * again, it exits. */
static pid_t outsider(int *tell_fd)
{
	int p[2];
	pid_t pid;

	if (pipe(p))
		FAIL("pipe: %s", strerror(errno));
	pid = fork();
	if (pid == 0) {
		char c;

		close(p[1]);
		if (read(p[0], &c, 1) != 1 || prctl(PR_SET_NAME, "vp-outsider") || read(p[0], &c, 1) != 1)
			_exit(1);
		_exit(0);
	}
	close(p[0]);
	*tell_fd = p[1];
	return pid;
}

static void poll_sched(void *sched)
{
	ASSERT_GE(vp_sched__poll(sched, mono_ns()), 0);
}

int main(void)
{
	struct mem_sink m = { .keep_stacks = false };
	struct sampler_config cfg = { .nr_events = 1, .callchain = false, .target = SAMPLER_TARGET_PIDS,
				      .nr_pids = 1, .want_sideband = true, .sink = { mem_sink__emit, &m } };
	struct vp_sched_config sc = { .target = SAMPLER_TARGET_PIDS, .nr_pids = 1, .off_cpu = true,
				      .first_event = 1, .drain_ns = 50 * 1000000ull,
				      .sink = { mem_sink__emit, &m } };
	const struct sampler_backend *b = &sampler_backend_bpf;
	uint64_t child_samples = 0, child_offcpu_ns = 0, outsider_comms = 0;
	int go[2], tell_fd, st;
	uint32_t child = 0;
	struct vp_sched *sched;
	struct sampler *s;
	char err[512];
	pid_t pid, out;
	uint8_t one = 1;

	REQUIRE_ROOT();
	cfg.events[0] = (struct sampler_event){ .type = PERF_TYPE_SOFTWARE, .config = PERF_COUNT_SW_CPU_CLOCK,
						.freq = 1000, .software = true };
	strcpy(cfg.events[0].name, "cpu-clock");
	if (!b->supported(&cfg, err, sizeof(err)))
		SKIP("bpf backend: %s", err);
	if (pipe(go))
		FAIL("pipe: %s", strerror(errno));
	pid = fork();
	if (pid == 0) {
		close(go[1]);
		target(go[0]);
	}
	close(go[0]);
	out = outsider(&tell_fd);
	cfg.pids = sc.pids = &pid;

	sched = vp_sched__start(&sc, err, sizeof(err));
	if (!sched) {
		kill(pid, SIGKILL);
		kill(out, SIGKILL);
		if (errno == ENOTSUP)
			SKIP("%s", err);
		FAIL("%s", err);
	}
	vp_sched__hook(sched, &cfg);
	ASSERT_GT(cfg.tracked_fd, 0);
	s = b->start(&cfg, err, sizeof(err));
	if (!s)
		FAIL("bpf start: %s", err);
	/* Into the tracer's map only: the sampler follows it if the map is its own too. */
	ASSERT_OK(bpf_map_update_elem(cfg.tracked_fd, &(uint32_t){ (uint32_t)out }, &one, BPF_ANY));
	ASSERT_EQ(write(tell_fd, "n", 1), 1);
	ASSERT_EQ(write(go[1], "g", 1), 1);
	sampler__poll_until_exit(b, s, pid, &st, poll_sched, sched);
	ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	ASSERT_EQ(write(tell_fd, "s", 1), 1);
	ASSERT_EQ(waitpid(out, &st, 0), out);
	ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	ASSERT_OK(b->stop(s));
	ASSERT_OK(vp_sched__stop(sched));

	for (size_t i = 0; i < m.n; i++) {
		const struct vp_task *t = m.r[i].body;

		if (m.r[i].type == VP_REC_FORK && t->ppid == (uint32_t)pid && t->pid != (uint32_t)pid)
			child = t->pid;
	}
	ASSERT_NE(child, 0);
	for (size_t i = 0; i < m.n; i++) {
		const struct vp_comm *c = m.r[i].body;

		if (m.r[i].type == VP_REC_COMM && c->pid == (uint32_t)out && !strcmp(c->comm, "vp-outsider"))
			outsider_comms++;
	}
	for (size_t i = 0; i < m.n; i++) {
		const struct vp_sample *x = m.r[i].body;

		if (m.r[i].type != VP_REC_SAMPLE)
			continue;
		if (x->event == 0)
			child_samples += x->pid == child;
		else if (x->event == 2 && x->pid == child && x->sched_state != VP_SCHED_STEAL) {
			child_offcpu_ns += x->period;
		}
	}
	printf("forked child %u: %" PRIu64 " on-CPU samples, %.1f ms off-CPU; process added to the tracer's map: "
	       "%" PRIu64 " COMM records\n", child, child_samples, (double)child_offcpu_ns / 1e6, outsider_comms);
	/* The child spins 0.6 s at 1000 Hz and naps 0.3 s. */
	ASSERT_GT(child_samples, 100);
	ASSERT_GT(child_offcpu_ns, 150 * 1000000ull);
	ASSERT_GE(outsider_comms, 1);
	b->destroy(s);
	vp_sched__free(sched);
	mem_sink__clear(&m);
	close(go[1]);
	close(tell_fd);
	return 0;
}
