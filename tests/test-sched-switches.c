/* The switch tracer's per-thread switches and on-CPU time against the kernel's own
 * account of the same threads (root, BPF). The sums live in each thread's task storage
 * and reach the threads hash that user space reads in two ways (sched.bpf.c,
 * flush_thread): at the thread's last switch (it ended during the recording) and by
 * the task iterator at the end (it is alive then). This test has one thread of each
 * kind in a process started after the tracer:
 *   - "dead" threads nap 300 times, read their own switch count (getrusage
 *     RUSAGE_THREAD: nvcsw + nivcsw, the kernel's count of its sched_switch events) and
 *     exit: the tracer must have that count + 1 (the exit's own last switch), +2 at
 *     most (a preemption in the few microseconds between the read and the exit);
 *   - an "alive" thread naps 300 times and blocks until the process is killed after
 *     the tracer stopped: the tracer's count must equal the kernel's exactly
 *     (/proc/PID/task/TID/status after the stop), and its on-CPU time must lie between
 *     a fifth of schedstat's and schedstat's (the tracer's runs go from switch to
 *     switch, schedstat's from pick to pick: a thread that naps 300 times has a third
 *     to a half less here; 0 or twice is a sum dropped or doubled).
 * A sum dropped (no flush, or lost) or added twice (flushed at the last switch and
 * again by the iterator) fails here. ARGS: "off" (record -g: steal only, the lite
 * object, whose counts are the kernel's counters read at the thread's end and by the
 * pass at the end) or "on" (--off-cpu, which also runs the wakeup programs).
 *
 * "steal-off" and "steal-on" also charge steal where none moves: this VM's steal clock
 * may never move, so the tracer reads the run queue's own clock in its place
 * (VIPROF_DEBUG_STEAL_CLOCK=rq: every switch then charges the time since the last one
 * on its CPU to the thread that leaves). Each thread must then have steal, its
 * per-stack steal samples must add up to exactly its THREAD_TIME steal (charged under
 * its stacks, kernel and user, and to the thread alike), within its time in the
 * recording, and no vCPU may charge more than its clock moved (idle steal is not
 * required: on a busy machine no vCPU need idle during the test). What this proves: where the steal clock moves, both
 * objects charge it as they should; not that they read the real steal clock right
 * (the one difference, a field, shared by both objects: sched_common.bpf.h). */
#define _GNU_SOURCE
#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include "sampler-kernel/sched_tracer.h"
#include "test-sampler-util.h"

#define NAPS 300
#define NDEAD 2

struct tinfo {
	int tid;
	uint64_t k;          /* the thread's own count when it reported */
};

static struct tinfo dead[NDEAD], alive;

static uint64_t own_switches(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_THREAD, &ru))
		return 0;
	return (uint64_t)ru.ru_nvcsw + (uint64_t)ru.ru_nivcsw;
}

static void naps(void)
{
	for (int i = 0; i < NAPS; i++)
		usleep(200);
}

static void *dying(void *arg)
{
	struct tinfo *t = arg;

	t->tid = (int)syscall(SYS_gettid);
	naps();
	t->k = own_switches();
	return NULL;
}

static int hold_fd = -1;

static void *staying(void *arg)
{
	struct tinfo *t = arg;
	char c;

	t->tid = (int)syscall(SYS_gettid);
	naps();
	t->k = own_switches();
	__atomic_store_n(&t->tid, -t->tid, __ATOMIC_RELEASE);   /* reported: about to block */
	if (read(hold_fd, &c, 1) < 0)   /* nobody writes: blocked until killed */
		_exit(7);
	return NULL;
}

/* The target: told to go, runs the threads and reports "dead TID K" and "alive TID K". */
static void target(int go_fd, int report_fd)
{
	pthread_t d[NDEAD], a;
	int hold[2];
	char g;
	FILE *f = fdopen(report_fd, "w");

	if (!f || pipe(hold) || read(go_fd, &g, 1) != 1)
		_exit(8);
	hold_fd = hold[0];
	for (int i = 0; i < NDEAD; i++)
		if (pthread_create(&d[i], NULL, dying, &dead[i]))
			_exit(9);
	if (pthread_create(&a, NULL, staying, &alive))
		_exit(9);
	for (int i = 0; i < NDEAD; i++)
		if (pthread_join(d[i], NULL))
			_exit(10);
	while (__atomic_load_n(&alive.tid, __ATOMIC_ACQUIRE) >= 0)
		usleep(1000);
	for (int i = 0; i < NDEAD; i++)
		fprintf(f, "dead %d %" PRIu64 "\n", dead[i].tid, dead[i].k);
	fprintf(f, "alive %d %" PRIu64 "\n", -alive.tid, alive.k);
	fclose(f);
	pause();
	_exit(0);
}

/* A thread's switches and CPU time as the kernel counts them. */
static bool kernel_counts(pid_t pid, int tid, uint64_t *sw, uint64_t *ns)
{
	char path[128], line[256];
	uint64_t v = 0, nv = 0, x;
	FILE *f;
	int got = 0;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)pid, tid);
	if (!(f = fopen(path, "r")))
		return false;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "voluntary_ctxt_switches: %" SCNu64, &x) == 1)
			v = x, got++;
		else if (sscanf(line, "nonvoluntary_ctxt_switches: %" SCNu64, &x) == 1)
			nv = x, got++;
	}
	fclose(f);
	*sw = v + nv;
	snprintf(path, sizeof(path), "/proc/%d/task/%d/schedstat", (int)pid, tid);
	*ns = 0;
	if ((f = fopen(path, "r"))) {
		if (fscanf(f, "%" SCNu64, &x) == 1)
			*ns = x;
		fclose(f);
	}
	return got == 2;
}

/* The steal charged under tid's stacks, and whether a sample had kernel, user frames. */
static uint64_t steal_samples(const struct mem_sink *m, int tid, bool *kern, bool *user)
{
	uint64_t ns = 0;

	*kern = *user = false;
	for (size_t i = 0; i < m->n; i++) {
		const struct vp_sample *x = m->r[i].body;

		if (m->r[i].type != VP_REC_SAMPLE || x->tid != (uint32_t)tid || x->sched_state != VP_SCHED_STEAL)
			continue;
		ns += x->period;
		*kern |= x->nr_kernel > 0;
		*user |= x->nr_user > 0;
	}
	return ns;
}

/* Injected steal (VIPROF_DEBUG_STEAL_CLOCK=rq): charged to t under its stacks. */
static void check_steal(const struct mem_sink *m, const struct vp_thread_time *t)
{
	bool kern, user;
	uint64_t ns = steal_samples(m, (int)t->tid, &kern, &user);

	fprintf(stderr, "thread %u: steal %.3f ms (%.3f ms in its steal samples), on-CPU %.3f ms\n", t->tid,
		t->steal_ns / 1e6, ns / 1e6, t->oncpu_ns / 1e6);
	if (!t->steal_ns)
		FAIL("thread %u: no steal charged, although every switch moved the injected steal clock", t->tid);
	if (ns != t->steal_ns)
		FAIL("thread %u: its steal samples add up to %" PRIu64 " ns, its THREAD_TIME says %" PRIu64, t->tid, ns,
		     t->steal_ns);
	if (!kern || !user)
		FAIL("thread %u: steal charged without a %s stack", t->tid, kern ? "user" : "kernel");
	/* Its charges are the run queue clock's moves between the switch before each of its
	 * runs and the switch that ends it: disjoint, within its time in the recording. */
	if (t->steal_ns > t->last - t->first + 1000000)
		FAIL("thread %u: steal %.3f ms, more than its %.3f ms in the recording", t->tid, t->steal_ns / 1e6,
		     (t->last - t->first) / 1e6);
	/* Not compared with its runtime: on an idle machine the two are equal, but a run's
	 * clock move begins at the clock's last update before its switch-in, which on a
	 * busy one can be well before it (7.0 against 4.3 ms under load 9). */
}

static const struct vp_thread_time *find(const struct mem_sink *m, int tid)
{
	for (size_t i = 0; i < m->n; i++) {
		const struct vp_thread_time *t = m->r[i].body;

		if (m->r[i].type == VP_REC_THREAD_TIME && t->tid == (uint32_t)tid)
			return t;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct mem_sink m = { .keep_stacks = false };
	const char *mode = argc > 1 ? argv[1] : "off";
	bool steal = !strncmp(mode, "steal-", 6);
	struct vp_sched_config sc = { .target = SAMPLER_TARGET_PIDS, .nr_pids = 1,
				      .off_cpu = !strcmp(mode + (steal ? 6 : 0), "on"), .first_event = 1,
				      .drain_ns = 50 * 1000000ull, .sink = { mem_sink__emit, &m } };
	int go[2], rep[2], st, n = 0, atid = 0;
	uint64_t ak = 0, ksw = 0, kns = 0;
	struct tinfo got[NDEAD];
	struct vp_sched *sched;
	char err[512], line[128], kind[16];
	FILE *f;
	pid_t pid;

	REQUIRE_ROOT();
	if (steal)
		setenv("VIPROF_DEBUG_STEAL_CLOCK", "rq", 1);
	if (access("/proc/self/schedstat", R_OK) != 0)
		SKIP("no /proc/PID/schedstat (CONFIG_SCHED_INFO off): no kernel CPU time to compare with");
	if (pipe(go) || pipe(rep))
		FAIL("pipe: %s", strerror(errno));
	pid = fork();
	if (pid == 0) {
		close(go[1]);
		close(rep[0]);
		target(go[0], rep[1]);
	}
	close(go[0]);
	close(rep[1]);
	sc.pids = &pid;
	sched = vp_sched__start(&sc, err, sizeof(err));
	if (!sched) {
		kill(pid, SIGKILL);
		if (errno == ENOTSUP)
			SKIP("%s", err);
		FAIL("%s", err);
	}
	ASSERT_EQ(write(go[1], "g", 1), 1);
	f = fdopen(rep[0], "r");
	ASSERT_TRUE(f != NULL);
	while (fgets(line, sizeof(line), f)) {
		int tid;
		uint64_t k;

		ASSERT_TRUE(vp_sched__poll(sched, mono_ns()) >= 0);
		if (sscanf(line, "%15s %d %" SCNu64, kind, &tid, &k) != 3)
			continue;
		if (!strcmp(kind, "dead") && n < NDEAD)
			got[n++] = (struct tinfo){ .tid = tid, .k = k };
		else if (!strcmp(kind, "alive"))
			atid = tid, ak = k;
	}
	fclose(f);
	ASSERT_EQ(n, NDEAD);
	ASSERT_NE(atid, 0);
	/* The alive thread's block is a switch the kernel has counted once it shows. */
	while (kernel_counts(pid, atid, &ksw, &kns) && ksw < ak + 1)
		usleep(1000);
	/* As the recorder does: the window closes (its pass reads the live threads'
	 * counts), then the tracer stops (its pass must not add them again). */
	vp_sched__window(sched, 0, mono_ns());
	ASSERT_OK(vp_sched__stop(sched));
	ASSERT_TRUE(kernel_counts(pid, atid, &ksw, &kns));
	kill(pid, SIGKILL);
	ASSERT_EQ(waitpid(pid, &st, 0), pid);

	for (int i = 0; i < NDEAD; i++) {
		const struct vp_thread_time *t = find(&m, got[i].tid);

		fprintf(stderr, "dead thread %d: tracer %" PRIu64 " switches, the kernel %" PRIu64 " before its exit\n",
			got[i].tid, t ? t->switches : 0, got[i].k);
		if (!t)
			FAIL("no THREAD_TIME for the ended thread %d: its sums were not flushed at its last switch",
			     got[i].tid);
		ASSERT_TRUE(got[i].k >= NAPS);
		if (t->switches < got[i].k + 1 || t->switches > got[i].k + 2)
			FAIL("ended thread %d: the tracer counted %" PRIu64 " switches, the kernel %" PRIu64
			     " + its exit's 1 (+1 preemption at most)", got[i].tid, t->switches, got[i].k);
		if (steal)
			check_steal(&m, t);
		else if (t->steal_ns)
			fprintf(stderr, "ended thread %d: %.3f ms of steal (the steal clock moved)\n", got[i].tid,
				t->steal_ns / 1e6);
	}
	const struct vp_thread_time *a = find(&m, atid);

	fprintf(stderr, "alive thread %d: tracer %" PRIu64 " switches %.3f ms on-CPU, the kernel %" PRIu64
		" switches %.3f ms\n", atid, a ? a->switches : 0, a ? a->oncpu_ns / 1e6 : 0, ksw, kns / 1e6);
	if (!a)
		FAIL("no THREAD_TIME for the live thread %d: the pass at the end did not flush it", atid);
	ASSERT_EQ(a->switches, ksw);
	/* Below schedstat by a third to a half on this nap pattern (the tracer's runs go
	 * from switch to switch; 2.0-3.5 of 4.0-6.8 ms on an idle 2-vCPU VM, at 0addefe too):
	 * what fails is a sum dropped (under a fifth) or added twice (over schedstat's). */
	if ((double)a->oncpu_ns < 0.2 * (double)kns || (double)a->oncpu_ns > 1.1 * (double)kns)
		FAIL("live thread %d: on-CPU %.3f ms by the tracer, %.3f ms by schedstat", atid, a->oncpu_ns / 1e6,
		     kns / 1e6);
	if (steal) {
		check_steal(&m, a);
		for (size_t i = 0; i < m.n; i++) {
			const struct vp_sched_cpu *c = m.r[i].body;

			if (m.r[i].type != VP_REC_SCHED_CPU)
				continue;
			fprintf(stderr, "vCPU %u: the clock moved %.3f ms, charged %.3f ms (idle %.3f ms)\n", c->cpu,
				c->steal_clock_ns / 1e6, c->charged_ns / 1e6, c->idle_ns / 1e6);
			if (c->charged_ns > c->steal_clock_ns || c->idle_ns > c->charged_ns)
				FAIL("vCPU %u: charged %" PRIu64 " ns (idle %" PRIu64 ") of %" PRIu64 " ns the clock moved",
				     c->cpu, c->charged_ns, c->idle_ns, c->steal_clock_ns);
		}
	}
	vp_sched__free(sched);
	free(m.r);
	return 0;
}
