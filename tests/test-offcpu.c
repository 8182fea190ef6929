/* record --off-cpu and exact steal, live (root, BPF): one scenario per ctest entry.
 *   split    a thread alternating 30 ms of CPU (busy_30ms) and 70 ms asleep
 *            (sleep_70ms) for 5 s: off-CPU ~ 3.5 s (+-10% of what the fixture itself
 *            measured as not running), >= 95% of it under sleep_70ms (what is not
 *            run-queue wait on a loaded VM), blocked there for 70/30 of its CPU time;
 *            on-CPU under busy_30ms; running + runnable + blocked + steal = its wall
 *            time within 2%.
 *   compete  two spinning threads pinned to one vCPU (taskset -c 0): each waits on
 *            the run queue, and both threads' on-CPU + runnable = 2 x elapsed (2%).
 *   steal    -a for 3 s with load on every vCPU: the steal charged at switches adds
 *            up exactly to what the run queues' steal clocks advanced, agrees with
 *            what the kernel accounted (rq->prev_steal_time) within 1 ms or 1%, with
 *            /proc/stat within its 10 ms ticks, and no thread gets steal beyond the
 *            time it ran; and where /proc/stat saw at least 20 ms beyond its ticks, the
 *            charged steal reaches half of that (skipped, with the figures, below it).
 * Sessions are checked through the loader and the wall view (report/wall.h), the
 * same path 'viprof report --wall' takes. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "postproc/profile.h"
#include "postproc/session.h"
#include "report/wall.h"
#include "common/util.h"
#include "test.h"
#include "test-profile.h"
#include "test-run.h"

struct fthread {
	uint32_t tid;
	char name[32];
	uint64_t wall, cpu;
};

static struct fthread ft[16];
static int nft;
static char dir[256];

/* Runs viprof record ARGS, reading the fixture's "thread ..." lines from its stdout. */
static void record(const char *args)
{
	char cmd[2048];
	char line[256];
	FILE *f;
	int st;

	snprintf(dir, sizeof(dir), "/tmp/vp-offcpu-%d", (int)getpid());
	snprintf(cmd, sizeof(cmd), "rm -rf %s && %s record -q -g --off-cpu -o %s %s", dir, VIPROF_BIN, dir, args);
	fprintf(stderr, "+ %s\n", cmd);
	f = run_sh_file(cmd, &st);
	while (fgets(line, sizeof(line), f)) {
		struct fthread t = { 0 };

		if (nft < 16 && sscanf(line, "thread %" SCNu32 " %31s %" SCNu64 " %" SCNu64, &t.tid, t.name, &t.wall, &t.cpu) == 4)
			ft[nft++] = t;
	}
	fclose(f);
	if (st != 0) {
		/* Say why when BPF cannot be had here; anything else is a failure. */
		if (geteuid() != 0)
			SKIP("needs root");
		FAIL("viprof record exited with %d", st);
	}
}

static void cleanup(void)
{
	char cmd[300];

	if (dir[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		if (run_sh(cmd, 110)) {
		}
	}
}

static struct vp_profile *load(void)
{
	struct vp_profile *p = vp_profile__new();
	char err[512] = "";

	ASSERT_NOT_NULL(p);
	if (vp_session__load(dir, p, NULL, err, sizeof(err)))
		FAIL("loading %s: %s", dir, err);
	return p;
}

static int event(const struct vp_profile *p, const char *name)
{
	for (int e = 0; e < p->nevents; e++)
		if (!strcmp(p->events[e].name, name))
			return e;
	return -1;
}

static bool has_frame(const struct vp_profile *p, const struct vp_stack *s, const char *name)
{
	for (uint32_t i = 0; i < s->nframes; i++)
		if (!strcmp(p->frames[s->frames[i]].name, name))
			return true;
	return false;
}

static const char *leaf(const struct vp_profile *p, const struct vp_stack *s)
{
	return s->nframes ? p->frames[s->frames[s->nframes - 1]].name : "";
}

/* Sum of event e's weight over tid's stacks. */
static uint64_t tsum(const struct vp_profile *p, uint32_t tid, int e)
{
	return e < 0 ? 0 : (uint64_t)tp_sum(p, &(struct tp_filter){ .tid = tid, .event = e, .weight = true }, NULL, TP_EXACT, NULL);
}

static const struct fthread *fixture_thread(const char *name)
{
	for (int i = 0; i < nft; i++)
		if (!strcmp(ft[i].name, name))
			return &ft[i];
	FAIL("the fixture printed no line for thread '%s'", name);
	return NULL;
}

static double rel(double a, double b)
{
	return b ? (a - b) / b : 0;
}

static int split(void)
{
	record("-- " OFFCPU_FIXTURE " split 5");
	const struct fthread *t = fixture_thread("split");
	struct vp_profile *p = load();
	char err[256] = "";
	int wall = vp_wall__add_events(p, err, sizeof(err));
	if (wall < 0)
		FAIL("wall view: %s", err);
	int off = event(p, "off-cpu"), on = event(p, "cpu-clock"), st = event(p, "steal");
	int run = event(p, "running"), rq = event(p, "runnable"), bl = event(p, "blocked");
	ASSERT_GE(off, 0);
	ASSERT_GE(on, 0);
	uint64_t offcpu = tsum(p, t->tid, off), under_sleep = 0, blocked_sleep = 0, oncpu = tsum(p, t->tid, on), under_busy = 0;
	uint64_t preempted = 0, blocked = 0, woken_sleep = 0;
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct vp_stack *s = &p->stacks[i];
		if (s->tid != t->tid)
			continue;
		if (!strcmp(leaf(p, s), "[runnable: preempted]"))
			preempted += s->weight[off];
		if (!strncmp(leaf(p, s), "[blocked:", 9))
			blocked += s->weight[off];
		if (has_frame(p, s, "sleep_70ms")) {
			under_sleep += s->weight[off];
			if (!strncmp(leaf(p, s), "[blocked:", 9))
				blocked_sleep += s->weight[off];
			if (!strcmp(leaf(p, s), "[runnable: woken]"))
				woken_sleep += s->weight[off];
		}
		if (has_frame(p, s, "busy_30ms"))
			under_busy += s->weight[on];
	}
	const struct vp_thread_times *x = NULL;
	for (size_t i = 0; !x && i < p->nstacks; i++)
		x = vp_profile__find_thread(p, p->stacks[i].pid, t->tid);
	ASSERT_NOT_NULL(x);
	/* Filtered in the kernel: only the launched command's threads are charged. */
	for (size_t i = 0; i < p->nstacks; i++)
		if (p->stacks[i].weight[off] || (st >= 0 && p->stacks[i].weight[st]))
			ASSERT_EQ(p->stacks[i].pid, x->pid);
	for (size_t i = 0; i < p->nthreads; i++)
		ASSERT_EQ(p->threads[i].pid, x->pid);
	uint64_t steal = tsum(p, t->tid, st);
	uint64_t parts = tsum(p, t->tid, run) + tsum(p, t->tid, rq) + tsum(p, t->tid, bl) + steal;
	/* The fixture's own account: what it did not spend running. */
	double not_running = (double)t->wall - (double)t->cpu - (double)steal;
	fprintf(stderr, "split: wall %.1f ms (fixture), cpu %.1f ms (fixture); off-CPU %.1f ms (fixture says %.1f, "
		"spec 3500 +-10%%), %.1f%% under sleep_70ms, %.1f%% of that blocked; cpu-clock %.1f ms, %.1f%% under busy_30ms; "
		"exact on-CPU %.1f ms incl. steal %.3f ms; running+runnable+blocked+steal %.1f ms; "
		"preempted (other load on the VM) %.1f ms\n",
		t->wall / 1e6, t->cpu / 1e6, offcpu / 1e6, not_running / 1e6, 100.0 * under_sleep / (offcpu ? offcpu : 1),
		100.0 * blocked_sleep / (under_sleep ? under_sleep : 1), oncpu / 1e6, 100.0 * under_busy / (oncpu ? oncpu : 1),
		x->oncpu_ns / 1e6, steal / 1e6, parts / 1e6, preempted / 1e6);
	/* 3.5 s on an idle VM; on a loaded one the thread also waits for a CPU, which is
	 * off-CPU time too: the fixture's own measure of it is the reference. */
	ASSERT_DBL_NEAR(rel((double)offcpu, not_running), 0, 0.10);
	/* Preemption while busy (by whatever else runs on the VM) is off-CPU time under
	 * busy_30ms, rightly: the rest is the sleeping function's, and blocked. */
	ASSERT_GE(under_sleep * 100, (offcpu - preempted) * 95);
	ASSERT_GE(blocked_sleep * 100, blocked * 95);
	/* Blocked under sleep_70ms: 70 ms per 30 ms of the thread's CPU time (busy_30ms
	 * counts CPU time, so this holds on a loaded VM too, where the thread also waits
	 * on the run queue after each wakeup: runnable, rightly, not blocked). */
	fprintf(stderr, "split: blocked under sleep_70ms %.1f ms (70/30 of the fixture's cpu: %.1f ms), runnable after "
		"its wakeups %.1f ms\n", blocked_sleep / 1e6, t->cpu * 70.0 / 30 / 1e6, woken_sleep / 1e6);
	ASSERT_DBL_NEAR(rel((double)blocked_sleep, t->cpu * 70.0 / 30), 0, 0.10);
	ASSERT_GE(under_busy * 100, oncpu * 90);
	/* The 2%. Switch-ins the program did not see (on this VM: every switch
	 * away from the VM's own agent process runs no BPF program) used to drop a whole
	 * run and the off-CPU interval before it (-2.4% seen); the tracer now measures
	 * such runs by the task's runtime, and says how many there were. */
	const char *mi = vp_profile__meta(p, "sched.missed_in"), *mn = vp_profile__meta(p, "sched.missed_ns");
	fprintf(stderr, "parts vs wall %+.2f%%, on-CPU + off-CPU vs wall %+.2f%% (target 2%%); switch-ins not seen %s "
		"(their runs %.1f ms, from the tasks' runtime)\n",
		100 * rel((double)parts, (double)t->wall), 100 * rel((double)(x->oncpu_ns + offcpu), (double)t->wall),
		mi ? mi : "?", mn ? strtod(mn, NULL) / 1e6 : 0.0);
	ASSERT_NOT_NULL(mi);
	ASSERT_DBL_NEAR(rel((double)parts, (double)t->wall), 0, 0.02);
	ASSERT_DBL_NEAR(rel((double)(x->oncpu_ns + offcpu), (double)t->wall), 0, 0.02);
	vp_profile__free(p);

	/* Every format carries off-CPU time and the combined view. */
	static const struct { const char *args, *want; } fmts[] = {
		{ "--wall", "running" },
		{ "--wall -F folded", "sleep_70ms;" },
		{ "-e off-cpu -F folded", "[blocked: sleep]" },
		{ "-e off-cpu", "[blocked: sleep]" },
		{ "--wall -F json", "\"wall\"" },
		{ "-e off-cpu -F json", "[blocked: sleep]" },
		{ "-F html", "{\"name\":\"wall\"" },   /* events[]: one weight per event per node */
		{ "--wall -F pprof -o /dev/stdout | gzip -dc", "blocked" },
	};
	for (size_t i = 0; i < sizeof(fmts) / sizeof(fmts[0]); i++) {
		char cmd[1024];
		snprintf(cmd, sizeof(cmd), "%s report %s %s", VIPROF_BIN, dir, fmts[i].args);
		int st;
		FILE *f = run_sh_file(cmd, &st);
		/* The whole output, then one search. */
		size_t len = 0, cap = 0, n;
		char *out = NULL;
		do {
			ASSERT_OK(vp_grow((void **)&out, &cap, len + 65536, 1));
			n = fread(out + len, 1, 65536, f);
			len += n;
		} while (n > 0);
		bool found = memmem(out, len, fmts[i].want, strlen(fmts[i].want)) != NULL;
		free(out);
		fclose(f);
		if (!found || st)
			FAIL("'%s': %s (exit %d)", cmd, found ? "failed" : "the output lacks the expected text", st);
		fprintf(stderr, "split: '%s' has '%s'\n", fmts[i].args, fmts[i].want);
	}

	/* The flame graph's event switch, in a real browser when there is one: the page
	 * drawn with #view=wall says it shows wall samples. */
	if (run_sh("command -v chromium >/dev/null 2>&1", 110) == 0) {
		char cmd[2048], html[300];
		snprintf(html, sizeof(html), "%s/flame.html", dir);
		snprintf(cmd, sizeof(cmd), "%s report %s -F html -o %s 2>/dev/null && timeout 90 chromium --headless "
			 "--no-sandbox --disable-gpu --user-data-dir=%s/chromium --virtual-time-budget=5000 --dump-dom "
			 "'file://%s#view=wall' 2>/dev/null | grep -q 'ms of wall'", VIPROF_BIN, dir, html, dir, html);
		if (run_sh(cmd, 110) != 0)
			FAIL("the flame graph did not switch to the wall view: %s", cmd);
		fprintf(stderr, "split: the flame graph draws #view=wall\n");
	}
	return 0;
}

static int compete(void)
{
	record("-- taskset -c 0 " OFFCPU_FIXTURE " compete 3");
	const struct fthread *a = fixture_thread("spin-a"), *b = fixture_thread("spin-b");
	struct vp_profile *p = load();
	char err[256] = "";
	if (vp_wall__add_events(p, err, sizeof(err)) < 0)
		FAIL("wall view: %s", err);
	int rq = event(p, "runnable");
	uint64_t sum = 0;
	for (int k = 0; k < 2; k++) {
		const struct fthread *t = k ? b : a;
		const struct vp_thread_times *x = NULL;
		for (size_t i = 0; !x && i < p->nstacks; i++)
			x = vp_profile__find_thread(p, p->stacks[i].pid, t->tid);
		ASSERT_NOT_NULL(x);
		uint64_t r = tsum(p, t->tid, rq);
		fprintf(stderr, "compete: %s wall %.1f ms, on-CPU %.1f ms, runnable %.1f ms\n", t->name, t->wall / 1e6,
			x->oncpu_ns / 1e6, r / 1e6);
		/* Sharing one vCPU, each waits for about half of the time. */
		ASSERT_GE(r * 4, t->wall);
		sum += x->oncpu_ns + r;
	}
	fprintf(stderr, "compete: on-CPU + runnable of both %.1f ms, 2 x elapsed %.1f ms\n", sum / 1e6,
		(double)(a->wall + b->wall) / 1e6);
	ASSERT_DBL_NEAR(rel((double)sum, (double)(a->wall + b->wall)), 0, 0.02);
	vp_profile__free(p);
	return 0;
}

static uint64_t meta_u64(const struct vp_profile *p, const char *key)
{
	const char *v = vp_profile__meta(p, key);
	if (!v)
		FAIL("the session has no '%s'", key);
	return strtoull(v, NULL, 10);
}

static int steal(void)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	char args[512];

	/* Load on every vCPU, so that steal (if the host takes any) lands on threads. */
	snprintf(args, sizeof(args), "-a -d 3 & for i in $(seq %ld); do %s compete 3 >/dev/null & done; wait",
		 ncpu, OFFCPU_FIXTURE);
	record(args);
	struct vp_profile *p = load();
	int st = event(p, "steal");
	uint64_t threads = 0, bad = 0, nthreads = 0;
	for (size_t i = 0; st >= 0 && i < p->nstacks; i++)
		threads += p->stacks[i].weight[st];
	/* A thread's on-CPU time is its runtime, which this kernel keeps free of steal
	 * (CONFIG_PARAVIRT_TIME_ACCOUNTING), so its steal may exceed it (a thread that ran
	 * 1.8 ms of its own while the hypervisor took 2 ms of its slice: seen here once the
	 * host's steal moved). What cannot be: steal beyond the recording's length, or on a
	 * stack more than its thread's total, or on a thread never seen running. */
	uint64_t dur = meta_u64(p, "duration_ns");
	for (size_t i = 0; i < p->nthreads; i++) {
		const struct vp_thread_times *x = &p->threads[i];
		if (x->steal_ns) {
			nthreads++;
			if (x->steal_ns > dur) {
				fprintf(stderr, "steal: thread %u/%u: steal %" PRIu64 " ns > the recording's %" PRIu64 " ns\n",
					x->pid, x->tid, x->steal_ns, dur);
				bad++;
			}
		}
	}
	for (size_t i = 0; st >= 0 && i < p->nstacks; i++) {
		const struct vp_stack *s = &p->stacks[i];
		const struct vp_thread_times *x = vp_profile__find_thread(p, s->pid, s->tid);
		if (s->weight[st] && (!x || x->steal_ns < s->weight[st])) {
			fprintf(stderr, "steal: thread %u/%u (%s): %" PRIu64 " ns of steal, %s\n", s->pid, s->tid, s->comm,
				s->weight[st], x ? "more than its thread's total" : "never seen running");
			bad++;
		}
	}
	/* Where no steal clock ran, the session keeps no steal figures to compare (issue 34). */
	if (vp_profile__steal_unmeasured(p))
		SKIP("no steal clock ran during the recording (every /proc/stat steal snapshot 0 and the run queues' "
		     "prev_steal_time still): steal is not measured on this VM");
	uint64_t clock = meta_u64(p, "sched_steal.clock_ns"), charged = meta_u64(p, "sched_steal.charged_ns");
	uint64_t idle = meta_u64(p, "sched_steal.idle_ns"), kern = meta_u64(p, "sched_steal.kernel_ns");
	uint64_t procstat = meta_u64(p, "steal.total"), full = meta_u64(p, "sched.agg_full_ns");
	uint64_t norq = meta_u64(p, "sched.no_rq");
	fprintf(stderr, "steal: threads %.3f ms (%" PRIu64 " threads) + idle %.3f ms = %.3f ms charged; steal clocks advanced "
		"%.3f ms; the kernel accounted %.3f ms (rq->prev_steal_time, %+" PRId64 " ns), /proc/stat %.1f ms; run queue "
		"unreadable at %" PRIu64 " switches\n", threads / 1e6, nthreads, idle / 1e6, charged / 1e6, clock / 1e6,
		kern / 1e6, (int64_t)(kern - charged), procstat / 1e6, norq);
	ASSERT_UEQ(bad, 0);
	/* Every ns the clocks advanced was charged, to a thread or to idle: bookkeeping (the
	 * two come from the same reads), which a tracer that saw no steal passes too. */
	ASSERT_UEQ(charged, clock);
	ASSERT_UEQ(threads + idle + full, charged);
	/* The kernel's own account of the same switches: within 1 ms or 1%. */
	double tol = (double)charged * 0.01 > 1e6 ? (double)charged * 0.01 : 1e6;
	if ((double)(charged > kern ? charged - kern : kern - charged) > tol)
		FAIL("charged %" PRIu64 " ns vs kernel-accounted %" PRIu64 " ns: more than 1 ms or 1%% apart", charged, kern);
	/* /proc/stat counts in 10 ms ticks per vCPU over a slightly longer window, and the
	 * kernel accounts at most a tick's time of steal at each tick (the rest at later
	 * ticks: steal_account_process_time), so under heavy steal it lags (seen here: 310
	 * ms against the 663 ms the run queues' steal clocks advanced); it never leads. */
	double ptol = tol + 2 * 10e6 * (double)ncpu;
	if ((double)procstat > (double)charged + ptol)
		FAIL("charged %" PRIu64 " ns vs /proc/stat %" PRIu64 " ns: /proc/stat saw more than its ticks allow", charged,
		     procstat);
	vp_profile__free(p);
	/* The steal itself, against a source the tracer does not read (issue 34 item 7):
	 * /proc/stat over the same recording lags the run queues' clocks (never leads them)
	 * and rounds to a 10 ms tick per vCPU, so with every vCPU loaded the steal charged
	 * at switches must reach at least half of what /proc/stat saw less a tick per vCPU.
	 * A tracer wrongly at 0 fails wherever that is at least 20 ms; less than that is
	 * nothing to measure, and skips with the figures. */
	double floor_ns = (double)procstat - 10e6 * (double)ncpu;
	if (floor_ns < 20e6)
		SKIP("/proc/stat's steal grew %.1f ms during the 3 s recording on %ld vCPUs (%.1f ms beyond a tick per "
		     "vCPU), under the 20 ms needed to hold the charged steal (%.3f ms) to it from below: no steal to "
		     "measure on this VM now", procstat / 1e6, ncpu, floor_ns / 1e6, charged / 1e6);
	if ((double)charged < 0.5 * floor_ns)
		FAIL("steal charged at switches %.3f ms, under half of the %.1f ms /proc/stat saw beyond its ticks "
		     "(%.1f ms in all): steal that was taken was not measured", charged / 1e6, floor_ns / 1e6,
		     procstat / 1e6);
	return 0;
}

int main(int argc, char **argv)
{
	int r;

	REQUIRE_ROOT();
	if (access("/sys/kernel/btf/vmlinux", R_OK))
		SKIP("no kernel BTF (/sys/kernel/btf/vmlinux)");
	if (argc < 2)
		FAIL("usage: %s split|compete|steal", argv[0]);
	atexit(cleanup);
	if (!strcmp(argv[1], "split"))
		r = split();
	else if (!strcmp(argv[1], "compete"))
		r = compete();
	else if (!strcmp(argv[1], "steal"))
		r = steal();
	else
		FAIL("unknown scenario '%s'", argv[1]);
	if (!r)
		printf("ok\n");
	return r;
}
