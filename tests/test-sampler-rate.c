/* Delivered sample rate of both backends: a launched child forks one spinner per CPU;
 * cpu-clock at -F 1000 and -F 10000 per CPU, with and without -g, must deliver >= 95% of the requested rate
 * per CPU-second the target actually ran (its own CPU time from wait4, so other load
 * on the machine cannot fail or pass the test). Needs root; bpf parts need BPF. */
#include <linux/perf_event.h>
#include <stdbool.h>
#include <sys/sysinfo.h>
#include "test-sampler-util.h"

/* Each spinner runs until it has had SPIN_CPU_SECONDS of CPU (the machine may be
 * shared with other work), or SPIN_WALL_SECONDS have passed. */
#define SPIN_CPU_SECONDS 1.5
#define SPIN_WALL_SECONDS 8.0

static int nspin;

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int spinner(void)
{
	uint64_t end = mono_ns() + (uint64_t)(SPIN_WALL_SECONDS * 1e9);
	volatile uint64_t x = 0;

	while (thread_cpu_ns() < (uint64_t)(SPIN_CPU_SECONDS * 1e9) && mono_ns() < end)
		for (int i = 0; i < 10000; i++)
			x++;
	return 0;
}

static int spin_all(void *arg)
{
	int ok = 0;

	for (int i = 0; i < nspin; i++) {
		pid_t p = fork();

		if (p == 0)
			_exit(spinner());
		if (p < 0)
			return 4;
	}
	for (int i = 0; i < nspin; i++) {
		int st;

		if (wait(&st) > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0)
			ok++;
	}
	return ok == nspin ? 0 : 5;
}

static long read_max_rate(void)
{
	FILE *f = fopen("/proc/sys/kernel/perf_event_max_sample_rate", "r");
	long v = -1;

	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

static int write_max_rate(long v)
{
	FILE *f = fopen("/proc/sys/kernel/perf_event_max_sample_rate", "w");
	int ok;

	if (!f)
		return -errno;
	ok = fprintf(f, "%ld\n", v) > 0;
	return fclose(f) == 0 && ok ? 0 : -EIO;
}

static long old_rate = -1;

static void restore_rate(void)
{
	if (old_rate > 0 && old_rate < 10000)
		write_max_rate(old_rate);
}

static double cpu_seconds(const struct rusage *ru)
{
	return ru->ru_utime.tv_sec + ru->ru_utime.tv_usec / 1e6 +
	       ru->ru_stime.tv_sec + ru->ru_stime.tv_usec / 1e6;
}

static bool run(const struct sampler_backend *b, uint64_t freq, bool callchain)
{
	struct mem_sink m = { .keep_stacks = false };
	struct sampler_config cfg = { .nr_events = 1, .callchain = callchain,
				      .target = SAMPLER_TARGET_LAUNCH, .nr_pids = 1,
				      .want_sideband = true, .sink = { mem_sink__emit, &m } };
	struct rusage ru, self0, self1;
	uint64_t target = 0, others = 0, lost = 0, cpumask = 0, first = UINT64_MAX, last = 0;
	uint64_t n_samples, n_lost;
	double cpu_s, achieved, naive, rec_cpu;
	char err[512];
	struct launch l;
	struct sampler *s;
	int status, ncpus_seen = 0, ntp = 0;
	uint32_t tpids[64];
	pid_t pid;

	cfg.events[0] = (struct sampler_event){ .type = PERF_TYPE_SOFTWARE,
						.config = PERF_COUNT_SW_CPU_CLOCK, .freq = freq,
						.software = true, .name = "cpu-clock" };
	l = launch__hold(spin_all, NULL);
	pid = l.pid;
	cfg.pids = &pid;
	s = b->start(&cfg, err, sizeof(err));
	if (!s)
		FAIL("%s start: %s", b->name, err);
	getrusage(RUSAGE_SELF, &self0);
	launch__go(&l);
	launch__run(&l, b, s, &ru, &status);
	getrusage(RUSAGE_SELF, &self1);
	ASSERT_TRUE(WIFEXITED(status));
	ASSERT_EQ(WEXITSTATUS(status), 0);
	b->counts(s, &n_samples, &n_lost);

	/* The target is the child and the processes it forked (from the FORK records). */
	tpids[ntp++] = (uint32_t)pid;
	for (size_t i = 0; i < m.n; i++) {
		const struct vp_task *t = m.r[i].body;

		if (m.r[i].type == VP_REC_FORK && t->ppid == (uint32_t)pid && ntp < 64)
			tpids[ntp++] = t->pid;
	}
	ASSERT_EQ(ntp, 1 + nspin);
	for (size_t i = 0; i < m.n; i++) {
		const struct rec *r = &m.r[i];

		if (r->type == VP_REC_SAMPLE) {
			const struct vp_sample *x = r->body;
			bool mine = false;

			for (int k = 0; k < ntp; k++)
				mine |= x->pid == tpids[k];
			if (!mine) {
				others++;
			} else {
				target++;
				if (x->cpu < 64)
					cpumask |= 1ull << x->cpu;
				if (r->time < first)
					first = r->time;
				if (r->time > last)
					last = r->time;
			}
		} else if (r->type == VP_REC_LOST) {
			lost += ((const struct vp_lost *)r->body)->count;
		}
	}
	for (int c = 0; c < 64; c++)
		ncpus_seen += (int)((cpumask >> c) & 1);
	cpu_s = cpu_seconds(&ru);
	achieved = target / cpu_s;
	naive = last > first ? target / (ncpus_seen * ((last - first) / 1e9)) : 0;
	rec_cpu = (cpu_seconds(&self1) - cpu_seconds(&self0)) * 1e6 / (target ? target : 1);
	printf("%s -F %" PRIu64 " %s: %" PRIu64 " samples over %.3f target CPU-s = %.0f/s per CPU (%.1f%%); "
	       "%.0f/s per CPU over %d CPUs x %.2f s wall; lost %" PRIu64 "; recorder %.2f us CPU/sample\n",
	       b->name, freq, callchain ? "-g" : "no -g", target, cpu_s, achieved,
	       100.0 * achieved / freq, naive, ncpus_seen, (last - first) / 1e9, lost, rec_cpu);
	/* Launch mode must not let other processes in. */
	ASSERT_UEQ(others, 0);
	ASSERT_UEQ(n_samples, target);
	ASSERT_UEQ(n_lost, lost);
	/* Enough CPU time for the rate to mean something (+-0.1% at 1 kHz). */
	if (cpu_s < 1.0)
		FAIL("the spinners got only %.3f CPU-s in %.0f s; the machine is too busy to measure",
		     cpu_s, SPIN_WALL_SECONDS);
	bool ok = achieved >= 0.95 * freq;
	if (!ok)
		fprintf(stderr, "%s -F %" PRIu64 ": achieved %.0f samples per CPU-second, below 95%% of requested\n",
			b->name, freq, achieved);
	b->destroy(s);
	mem_sink__clear(&m);
	return ok;
}

/* A rate below 95% once can be the VM's timer delays on a shared host (perf -F 10000
 * gave 90.8% in one clean-clone run and 96-100% in the next ten): one more run decides. */
static void check(const struct sampler_backend *b, uint64_t freq, bool callchain)
{
	if (run(b, freq, callchain))
		return;
	fprintf(stderr, "%s -F %" PRIu64 ": measuring again\n", b->name, freq);
	if (!run(b, freq, callchain))
		FAIL("%s -F %" PRIu64 " %s: below 95%% of the requested rate twice in a row", b->name, freq,
		     callchain ? "-g" : "no -g");
}

int main(void)
{
	struct sampler_config cfg = { .nr_events = 1, .target = SAMPLER_TARGET_ALL };
	const uint64_t freqs[] = { 1000, 10000 };
	char why[512];
	bool bpf_ok;

	REQUIRE_ROOT();
	nspin = get_nprocs();
	cfg.events[0] = (struct sampler_event){ .type = PERF_TYPE_SOFTWARE,
						.config = PERF_COUNT_SW_CPU_CLOCK, .freq = 1000 };
	bpf_ok = sampler_backend_bpf.supported(&cfg, why, sizeof(why));
	old_rate = read_max_rate();
	if (old_rate > 0 && old_rate < 10000) {
		/* Restored at exit, also when an assertion fails. */
		atexit(restore_rate);
		ASSERT_OK(write_max_rate(10000));
	}
	for (int g = 0; g < 2; g++) {
		for (size_t i = 0; i < 2; i++) {
			check(&sampler_backend_perf, freqs[i], g);
			if (bpf_ok)
				check(&sampler_backend_bpf, freqs[i], g);
		}
	}
	if (!bpf_ok)
		SKIP("bpf backend: %s (the perf backend passed)", why);
	return 0;
}
