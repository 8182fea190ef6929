/* Several events in one recording, end to end: `viprof record -e
 * cpu-clock/period=1000000/,page-faults/period=1/,context-switches/period=1/ -- faulty`
 * (bench/workloads/faulty.c: 20000 fresh pages, 4000 sleeps, then 200 M iterations of
 * work, about 0.25 s of CPU; work rather than time, so that a busy machine, e.g.
 * ctest -j, leaves the cpu-clock check intact).
 *   - the per-event rate terms reach the session (EVENT records' periods), and -c sets
 *     the period of the events without a term;
 *   - each event's count (sum of periods over its samples) agrees with `perf stat` on
 *     the same workload within 5%; touch_pages carries the faults, schedule the
 *     switches (no -g: see the note at the context-switches check);
 *   - cpu-clock's weight in spin agrees with the CPU time the fixture's own thread clock
 *     measured around spin in the same run (not with a share of the whole run: on a VM
 *     where a page fault costs 13 us, the faults take more CPU than spin does);
 *   - in `viprof report`, each event's column adds up to 100.0 with its (other) row.
 * argv[1] = viprof, argv[2] = faulty. Needs root (and perf for the reference count). */
#define _GNU_SOURCE
#include <sys/stat.h>
#include <sys/wait.h>

#include "common/chunkfile.h"
#include "common/session_format.h"
#include "postproc/profile.h"
#include "postproc/session.h"
#include "test.h"
#include "test-run.h"
#include "test-profile.h"

#define WORK_ARGS "20000 4000 200"
#define SPIN_REPORT "multievent-spin.txt"
#define EVENTS "cpu-clock/period=1000000/,page-faults/period=1/,context-switches/period=1/"

/* perf stat's count of one event from its CSV (-x,) output. */
static uint64_t perf_count(const char *file, const char *event)
{
	char line[512];
	FILE *f = fopen(file, "r");
	ASSERT_NOT_NULL(f);
	while (fgets(line, sizeof(line), f)) {
		char *c1 = strchr(line, ','), *c2 = c1 ? strchr(c1 + 1, ',') : NULL, *c3 = c2 ? strchr(c2 + 1, ',') : NULL;
		if (!c3 || strncmp(c2 + 1, event, strlen(event)) || c2[1 + strlen(event)] != ',')
			continue;
		fclose(f);
		if (line[0] < '0' || line[0] > '9')
			FAIL("perf stat could not count %s: %s", event, line);
		return strtoull(line, NULL, 10);
	}
	fclose(f);
	FAIL("%s not in %s", event, file);
}

/* The CPU time faulty's thread spent in spin, by its own clock (faulty's REPORT file). */
static uint64_t spin_cpu_ns(const char *file)
{
	unsigned long long ns = 0;
	FILE *f = fopen(file, "r");
	ASSERT_NOT_NULL(f);
	if (fscanf(f, "spin_cpu_ns %llu", &ns) != 1)
		FAIL("%s does not hold faulty's spin_cpu_ns line", file);
	fclose(f);
	return ns;
}

static int event_index(const struct vp_profile *p, const char *name)
{
	int e = tp_find_event(p, name);

	if (e < 0)
		FAIL("event %s not in the profile", name);
	return e;
}

/* Of event ev: its samples and weight over all stacks, and the weight of the stacks
 * through a frame called fn. */
static void sums(const struct vp_profile *p, int ev, const char *fn, uint64_t *samples, uint64_t *weight,
		 uint64_t *in_fn)
{
	double through_fn;

	*samples = (uint64_t)tp_sum(p, &(struct tp_filter){ .event = ev }, NULL, TP_EXACT, NULL);
	*weight = (uint64_t)tp_sum(p, &(struct tp_filter){ .event = ev, .weight = true }, fn, TP_EXACT, &through_fn);
	*in_fn = (uint64_t)through_fn;
}

static void check_periods(const char *dir, const uint64_t *want, int nwant)
{
	char path[512], err[256];
	const struct vp_record *r;
	int n = 0;
	snprintf(path, sizeof(path), "%s/%s", dir, VP_SESSION_STREAM);
	struct cfile_reader *rd = cfile_reader__open(path, VP_KIND_SESSION_STREAM, err, sizeof(err));
	if (!rd)
		FAIL("%s", err);
	while (cfile_reader__next(rd, &r) == 1) {
		if (r->type != VP_REC_EVENT)
			continue;
		const struct vp_event_desc *d = vp_record_body(r);
		if (d->flags & VP_EVENT_SCHED)
			continue;   /* the switch tracer's steal/off-cpu: measured, not sampled */
		ASSERT_LT(n, nwant);
		ASSERT_UEQ(d->period, want[n]);
		ASSERT_UEQ(d->freq, 0);
		n++;
	}
	cfile_reader__close(rd);
	ASSERT_EQ(n, nwant);
}

/* The sampler's running totals (VP_COUNTER_INTERVAL, every 250 ms) of each sampled
 * event, which record's weights are scaled by per interval: how many, and that they
 * never go back. */
static int interval_totals(const char *dir, int nevents)
{
	char path[512], err[256];
	const struct vp_record *r;
	struct vp_counter last[8] = { 0 };
	int n = 0;
	snprintf(path, sizeof(path), "%s/%s", dir, VP_SESSION_STREAM);
	struct cfile_reader *rd = cfile_reader__open(path, VP_KIND_SESSION_STREAM, err, sizeof(err));
	if (!rd)
		FAIL("%s", err);
	while (cfile_reader__next(rd, &r) == 1) {
		if (r->type != VP_REC_COUNTER)
			continue;
		const struct vp_counter *c = vp_record_body(r);
		if (!(c->flags & VP_COUNTER_INTERVAL) || c->event >= 8)
			continue;
		ASSERT_LT(c->event, nevents);
		ASSERT_GE(c->value, last[c->event].value);
		ASSERT_GE(c->time_enabled, last[c->event].time_enabled);
		ASSERT_GE(c->time_running, last[c->event].time_running);
		last[c->event] = *c;
		n++;
	}
	cfile_reader__close(rd);
	return n;
}

/* Each event column of the hotspot table, (other) row included, adds up to 100.0. */
static void check_columns(const char *file, int ncols)
{
	char line[1024];
	int64_t sum[8] = { 0 };
	int rows = 0;
	bool table = false;
	FILE *f = fopen(file, "r");
	ASSERT_NOT_NULL(f);
	while (fgets(line, sizeof(line), f)) {
		if (!table) {
			table = strstr(line, "total%") && strstr(line, "symbol");
			continue;
		}
		char *s = line;
		for (int c = 0; c < ncols; c++) {
			char *end;
			long whole = strtol(s, &end, 10);
			if (end == s || *end != '.')
				FAIL("column %d of a table row is not a percentage: %s", c, line);
			sum[c] += whole * 10 + (end[1] - '0');
			s = end + 2;
		}
		rows++;
	}
	fclose(f);
	ASSERT_TRUE(table);
	ASSERT_GT(rows, 1);
	for (int c = 0; c < ncols; c++)
		ASSERT_EQ(sum[c], 1000);
}

int main(int argc, char **argv)
{
	char cmd[2048], err[512] = "";
	if (argc < 3)
		FAIL("usage: test-multievent viprof faulty");
	REQUIRE_ROOT();
	if (run_sh("perf --version >/dev/null 2>&1", 100))
		SKIP("perf is not installed: it gives the reference counts (apt-get install linux-perf)");

	snprintf(cmd, sizeof(cmd), "perf stat -x, -e page-faults,context-switches -o multievent-perf.csv -- %s "
		 WORK_ARGS " >/dev/null 2>&1", argv[2]);
	ASSERT_EQ(run_sh(cmd, 100), 0);
	uint64_t pf = perf_count("multievent-perf.csv", "page-faults");
	uint64_t cs = perf_count("multievent-perf.csv", "context-switches");
	ASSERT_GE(pf, 20000);
	/* The fixture asks for 4000 switches; a sleep that ends before the switch is taken
	 * is not one (perf stat counted 3999 in one CI run, and where the host takes the
	 * vCPU many more naps return unswitched: see below): 90% shows the work was done. */
	ASSERT_GE(cs, 3600);

	unlink(SPIN_REPORT);
	snprintf(cmd, sizeof(cmd), "%s record -q --force -e '" EVENTS "' -o multievent -- %s " WORK_ARGS
		 " " SPIN_REPORT " >multievent.log 2>&1", argv[1], argv[2]);
	if (run_sh(cmd, 100))
		FAIL("viprof record failed; see multievent.log");
	static const uint64_t want[] = { 1000000, 1, 1 };
	check_periods("multievent", want, 3);
	/* The recording lasts over a second (the faults and naps alone take that): at
	 * least one round of running totals for record's per-interval scaling. */
	int nint = interval_totals("multievent", 3);
	fprintf(stderr, "running totals in the session: %d\n", nint);
	ASSERT_GE(nint, 3);

	struct vp_profile *p = vp_profile__new();
	ASSERT_NOT_NULL(p);
	if (vp_session__load("multievent", p, NULL, err, sizeof(err)))
		FAIL("load: %s", err);
	int ec = event_index(p, "cpu-clock"), ef = event_index(p, "page-faults"), es = event_index(p, "context-switches");
	uint64_t n, w, in;
	sums(p, ec, "spin", &n, &w, &in);
	uint64_t spin_ns = spin_cpu_ns(SPIN_REPORT);
	fprintf(stderr, "cpu-clock: %" PRIu64 " samples, %" PRIu64 " ns, %" PRIu64 " ns in spin; faulty's thread clock: %"
		PRIu64 " ns in spin\n", n, w, in, spin_ns);
	ASSERT_UEQ(w, n * 1000000);
	/* 200 M iterations are far more than 50 ms of CPU anywhere; the floor keeps a run
	 * that did no work from passing on 0 = 0. */
	ASSERT_GE(spin_ns, 50 * 1000000ull);
	/* A 1 ms sampling period leaves each end of the spin up to one period off, and the
	 * sampler's own interrupts are charged to spin by both clocks: 5% and 3 periods. */
	ASSERT_DBL_NEAR((double)in, (double)spin_ns, 0.05 * (double)spin_ns + 3e6);
	ASSERT_LE(in, w);
	sums(p, ef, "touch_pages", &n, &w, &in);
	fprintf(stderr, "page-faults: viprof %" PRIu64 " (%" PRIu64 " in touch_pages), perf stat %" PRIu64 "\n", w, in, pf);
	ASSERT_UEQ(w, n);
	ASSERT_DBL_NEAR((double)w, (double)pf, 0.05 * (double)pf);
	ASSERT_GE(in, 20000 * 95 / 100);
	/* Without -g a sample is its IP alone, and a switch's IP is in schedule(), not in
	 * nap. The counts are checked without -g because with it, at period=1, the burst of
	 * 20000 faults in a few ms overflows the sampler's buffers (about 40% lost here). */
	sums(p, es, "schedule", &n, &w, &in);
	fprintf(stderr, "context-switches: viprof %" PRIu64 " (%" PRIu64 " in schedule), perf stat %" PRIu64 "\n", w, in,
		cs);
	ASSERT_UEQ(w, n);
	/* Preemptions on a loaded machine add switches that differ from run to run (perf
	 * stat 4471 in one CI run against viprof's 4182 in the next): the weights are held
	 * to the count the kernel kept in the same recording (count.EVENT) within 2%. The
	 * fixture asks for 4000 naps, but where the host takes the vCPU (steal) a nap whose
	 * timer expired meanwhile returns without switching (3926 in a CI run, which also
	 * saw 49 switches in 50 naps in test-counters-group): at least 90% of them. */
	const char *kept = vp_profile__meta(p, "count.context-switches");
	ASSERT_NOT_NULL(kept);
	uint64_t same = strtoull(kept, NULL, 10);
	fprintf(stderr, "context-switches: counted in the same recording %" PRIu64 "\n", same);
	ASSERT_DBL_NEAR((double)w, (double)same, 0.02 * (double)same);
	ASSERT_GE(w, 3600);
	ASSERT_GE(in, w * 9 / 10);
	vp_profile__free(p);

	/* The text report, ranked by each event in turn. */
	static const char *const evs[] = { "cpu-clock", "page-faults", "context-switches" };
	for (int i = 0; i < 3; i++) {
		snprintf(cmd, sizeof(cmd), "%s report multievent --no-color -e %s > multievent-%d.txt 2>&1", argv[1],
			 evs[i], i);
		ASSERT_EQ(run_sh(cmd, 100), 0);
		snprintf(cmd, sizeof(cmd), "multievent-%d.txt", i);
		check_columns(cmd, 3);
	}
	/* As in perf, -c sets the period of the events without a term of their own. */
	snprintf(cmd, sizeof(cmd), "%s record -q --force -e 'cpu-clock,page-faults/period=1/' -c 2000000 -o multievent-c "
		 "-- %s 100 10 10 >multievent-c.log 2>&1", argv[1], argv[2]);
	if (run_sh(cmd, 100))
		FAIL("viprof record -c failed; see multievent-c.log");
	static const uint64_t want_c[] = { 2000000, 1 };
	check_periods("multievent-c", want_c, 2);
	/* The perf backend writes the running totals too. */
	snprintf(cmd, sizeof(cmd), "%s record -q --force --backend perf -e 'cpu-clock/period=1000000/' -o multievent-perf "
		 "-- %s 20000 4000 200 >multievent-perfb.log 2>&1", argv[1], argv[2]);
	if (run_sh(cmd, 100))
		FAIL("viprof record --backend perf failed; see multievent-perfb.log");
	nint = interval_totals("multievent-perf", 1);
	fprintf(stderr, "running totals in the perf backend's session: %d\n", nint);
	ASSERT_GE(nint, 1);
	printf("test-multievent: ok\n");
	return 0;
}
