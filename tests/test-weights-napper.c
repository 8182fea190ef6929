/* Context-switch weights against perf stat's count (issue 34 item 4): the scenario as
 * reported, `viprof record -e context-switches -- perf stat -e context-switches -x, -o F
 * napper` (one thread: 30 ms of compute, 70 ms of nanosleep, for 5 s), with the
 * switch tracer on (root). The weights of the samples of comm napper must be within 1%
 * (at least one event) of what perf stat counted for napper in the same run, for each
 * of RUNS runs. They were reported 8% short (153 against 166) on a busy machine, the
 * suspect being BPF programs skipped while another one runs on the CPU; the bpf
 * program weighs each sample by the perf_event's own count since its previous sample
 * (profile.bpf.c true_period), so a skipped invocation is absorbed by the next one
 * and the count after the last one is sent at the thread's exit. Exit 77 when not
 * root, without perf, or when the bpf backend cannot run.
 * argv = viprof napper [RUNS] */
#define _GNU_SOURCE
#include <errno.h>
#include <sys/wait.h>
#include <unistd.h>

#include "postproc/profile.h"
#include "postproc/session.h"
#include "test.h"
#include "test-run.h"

/* perf stat -x, writes "COUNT,,context-switches,..." after its comment lines. */
static uint64_t perf_count(const char *file)
{
	char line[512];
	FILE *f = fopen(file, "r");
	ASSERT_NOT_NULL(f);
	uint64_t v = 0;
	bool found = false;
	while (!found && fgets(line, sizeof(line), f))
		if (strstr(line, ",context-switches,") && line[0] >= '0' && line[0] <= '9') {
			v = strtoull(line, NULL, 10);
			found = true;
		}
	fclose(f);
	if (!found)
		FAIL("no context-switches count in %s", file);
	return v;
}

int main(int argc, char **argv)
{
	char cmd[2048], dir[128], ref[160], err[512];
	if (argc < 3)
		FAIL("usage: test-weights-napper viprof napper [RUNS]");
	REQUIRE_ROOT();
	if (run_sh("perf stat -e context-switches -x, -o /dev/null true >/dev/null 2>&1", 100))
		SKIP("perf stat cannot count context-switches here (perf missing: scripts/deps.sh installs linux-perf)");
	int runs = argc > 3 ? atoi(argv[3]) : 3;
	for (int r = 0; r < runs; r++) {
		snprintf(dir, sizeof(dir), "weights-napper-%d", r);
		snprintf(ref, sizeof(ref), "%s.perf", dir);
		unlink(ref);
		snprintf(cmd, sizeof(cmd), "%s record -q --force --backend bpf -e context-switches -o %s -- perf stat -e "
			 "context-switches -x, -o %s %s 5 >%s.log 2>&1", argv[1], dir, ref, argv[2], dir);
		int rc = run_sh(cmd, 100);
		if (rc) {
			snprintf(cmd, sizeof(cmd), "grep -q 'sampler' %s.log", dir);
			if (run_sh(cmd, 100) == 0)
				SKIP("the bpf backend cannot run here; see %s.log", dir);
			FAIL("viprof record failed (%d); see %s.log", rc, dir);
		}
		uint64_t want = perf_count(ref);
		struct vp_profile *p = vp_profile__new();
		ASSERT_NOT_NULL(p);
		if (vp_session__load(dir, p, NULL, err, sizeof(err)))
			FAIL("load %s: %s", dir, err);
		int ev = -1;
		for (int e = 0; e < p->nevents; e++)
			if (!strcmp(p->events[e].name, "context-switches"))
				ev = e;
		ASSERT_GE(ev, 0);
		uint64_t w = 0, n = 0;
		for (size_t i = 0; i < p->nstacks; i++)
			if (!strcmp(p->stacks[i].comm, "napper")) {
				w += p->stacks[i].weight[ev];
				n += p->stacks[i].samples[ev];
			}
		fprintf(stderr, "run %d: %" PRIu64 " samples of comm napper weigh %" PRIu64 "; perf stat counted %" PRIu64
			" (%+.2f%%)\n", r, n, w, want, want ? 100.0 * ((double)w - (double)want) / (double)want : 0.0);
		/* 50 naps in 5 s: at least that many switches. */
		ASSERT_GE(want, 50);
		double tol = 0.01 * (double)want < 1.0 ? 1.0 : 0.01 * (double)want;
		ASSERT_DBL_NEAR((double)w, (double)want, tol);
		vp_profile__free(p);
		/* The text report's header gives that weight as the count, beside the samples. */
		char *out = NULL, want_s[64];
		snprintf(cmd, sizeof(cmd), "%s report %s --comm napper 2>&1", argv[1], dir);
		out = run_sh_read(cmd, NULL);
		snprintf(want_s, sizeof(want_s), "%" PRIu64 " samples%s", n, n == w ? "\n" : " weighing ");
		ASSERT_CONTAINS(out, want_s);
		if (n != w) {
			snprintf(want_s, sizeof(want_s), " weighing %" PRIu64 " events\n", w);
			ASSERT_CONTAINS(out, want_s);
		}
		free(out);
	}
	printf("test-weights-napper: ok\n");
	return 0;
}
