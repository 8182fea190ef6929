/* Virtual threads, live (root, BPF, Temurin 25; JDK 17 has none): tests/java/VThreads.java
 * runs four virtual threads that alternate about 3 ms in computeStep() with a 5 ms
 * Thread.sleep from napStep(), under `viprof record -g --off-cpu` (which gives the agent
 * vthreads=1). Loaded as `report --vthreads` loads it:
 *   - >= 95% of the on-CPU samples in computeStep belong to a virtual thread (its own
 *     report thread "[vthread #ID]", not a carrier) and lie under VThreads.body(), the
 *     virtual thread's run();
 *   - the unmounted time under napStep is >= 95% "[unmounted: sleep]" and within 15% of
 *     the fixture's own measured total sleep ("slept_ms=N");
 *   - every unmounted wait belongs to a virtual thread, none to a carrier;
 *   - folded, JSON, HTML and the --wall table name them.
 * Scenario "socket" (issue 33): the virtual threads wait in a socket read instead, which
 * parks them through NIO's Poller: >= 90% of the unmounted time under sockStep is
 * "[unmounted: io wait]", none "park: Poller", and at least half the fixture's own. */
#include "test-agent-util.h"

#include "postproc/profile.h"
#include "postproc/session.h"
#include "test-profile.h"
#include "postproc/vthreads.h"

static bool is_vthread(const struct vp_stack *s)
{
	return (s->tid & VP_VTHREAD_TID_BIT) && !strncmp(s->comm, "[vthread #", 10);
}

static void socket_waits(const char *java, char *dir)
{
	char sess[400], rout[400], rerr[400];
	snprintf(sess, sizeof(sess), "%s/s", dir);
	snprintf(rout, sizeof(rout), "%s/record.out", dir);
	snprintf(rerr, sizeof(rerr), "%s/record.err", dir);
	char *argv[] = { VIPROF_BIN, "record", "-q", "-g", "--off-cpu", "-o", sess, "--", (char *)java, "-cp",
			 VIPROF_JAVA_CLASSES, "VThreads", "3", "socket", NULL };
	int rc = run_argv(argv, rout, rerr, 90);
	char *out = tu_read(rout), *err_text = tu_read(rerr);
	if (rc != 0)
		FAIL("viprof record exited with %d: %s %s", rc, out, err_text);
	const char *rd = strstr(out, "read_ms=");
	if (!rd)
		FAIL("the fixture did not print read_ms: %s", out);
	double read_ms = strtod(rd + 8, NULL);
	ASSERT_GT_F(read_ms, 1000.0);
	struct vp_session_opts o = { .vthreads = true };
	struct vp_profile *p = tp_load(sess, &o);
	int off = tp_find_event(p, "off-cpu");
	ASSERT_GE(off, 0);
	uint64_t unm = 0, unm_io = 0, poller = 0;
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct vp_stack *s = &p->stacks[i];
		const char *leaf = s->nframes ? p->frames[s->frames[s->nframes - 1]].name : "";
		if (!s->weight[off] || strncmp(leaf, "[unmounted:", 11) || !tp_stack_has(p, s, "VThreads.sockStep", TP_SUBSTR))
			continue;
		unm += s->weight[off];
		unm_io += !strcmp(leaf, "[unmounted: io wait]") ? s->weight[off] : 0;
		poller += strstr(leaf, "Poller") ? s->weight[off] : 0;
	}
	fprintf(stderr, "unmounted under sockStep %.1f ms (%.1f%% io wait, %.1f ms 'Poller'), the fixture read %.0f ms\n",
		(double)unm / 1e6, unm ? 100.0 * (double)unm_io / (double)unm : 0.0, (double)poller / 1e6, read_ms);
	ASSERT_GE_F((double)unm / 1e6, read_ms * 0.5);
	ASSERT_GE(unm_io * 100, unm * 90);
	ASSERT_EQ(poller, 0);
	vp_profile__free(p);
	free(out);
	free(err_text);
	tu_rm_rf(dir);
}

int main(int ac, char **av)
{
	REQUIRE_ROOT();
	tu_require_fixtures();
	const char *java = tu_java(VIPROF_JDK25_HOME);
	if (!java)
		SKIP("Temurin 25 not installed at %s (virtual threads need JDK 21+)", VIPROF_JDK25_HOME);
	char *dir = tu_tmpdir("vthreads");
	if (ac > 1 && !strcmp(av[1], "socket")) {
		socket_waits(java, dir);
		return 0;
	}
	char sess[400], rout[400], rerr[400];
	snprintf(sess, sizeof(sess), "%s/s", dir);
	snprintf(rout, sizeof(rout), "%s/record.out", dir);
	snprintf(rerr, sizeof(rerr), "%s/record.err", dir);
	char *argv[] = { VIPROF_BIN, "record", "-q", "-g", "--off-cpu", "-o", sess, "--", (char *)java, "-cp",
			 VIPROF_JAVA_CLASSES, "VThreads", "4", NULL };
	int rc = run_argv(argv, rout, rerr, 90);
	char *out = tu_read(rout), *err_text = tu_read(rerr);
	if (rc != 0)
		FAIL("viprof record exited with %d: %s %s", rc, out, err_text);
	if (strstr(err_text, "virtual threads are not recorded"))
		FAIL("the agent could not record virtual threads: %s", err_text);
	const char *sl = strstr(out, "slept_ms=");
	if (!sl)
		FAIL("the fixture did not print slept_ms: %s", out);
	double slept_ms = strtod(sl + 9, NULL);
	ASSERT_GT_F(slept_ms, 1000.0);

	struct vp_session_opts o = { .vthreads = true };
	struct vp_profile *p = tp_load(sess, &o);
	int cpu = tp_find_event(p, "cpu-clock"), off = tp_find_event(p, "off-cpu");
	ASSERT_GE(cpu, 0);
	ASSERT_GE(off, 0);
	uint64_t comp = 0, comp_vt = 0, unm = 0, unm_sleep = 0, unm_carrier = 0;
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct vp_stack *s = &p->stacks[i];
		const char *leaf = s->nframes ? p->frames[s->frames[s->nframes - 1]].name : "";
		if (s->samples[cpu] && tp_stack_has(p, s, "VThreads.computeStep", TP_SUBSTR)) {
			comp += s->samples[cpu];
			if (is_vthread(s) && tp_stack_has(p, s, "VThreads.body()", TP_SUBSTR))
				comp_vt += s->samples[cpu];
		}
		if (s->weight[off] && !strncmp(leaf, "[unmounted:", 11)) {
			if (!is_vthread(s))
				unm_carrier += s->weight[off];
			if (tp_stack_has(p, s, "VThreads.napStep", TP_SUBSTR)) {
				unm += s->weight[off];
				if (!strcmp(leaf, "[unmounted: sleep]"))
					unm_sleep += s->weight[off];
			}
		}
	}
	fprintf(stderr, "computeStep: %llu samples, %.1f%% on virtual threads under body(); unmounted under napStep "
		"%.1f ms (%.1f%% sleep), the fixture slept %.0f ms; on carriers %llu ns\n", (unsigned long long)comp,
		comp ? 100.0 * (double)comp_vt / (double)comp : 0.0, (double)unm / 1e6,
		unm ? 100.0 * (double)unm_sleep / (double)unm : 0.0, slept_ms, (unsigned long long)unm_carrier);
	/* A floor for the percentages below to mean something (1% is at least one sample), not
	 * a rate: a busy machine gave computeStep 254 samples in a CI run. */
	ASSERT_GT(comp, 100);
	ASSERT_GE(comp_vt * 100, comp * 95);
	ASSERT_GE(unm_sleep * 100, unm * 95);
	ASSERT_GE_F((double)unm / 1e6, slept_ms * 0.85);
	ASSERT_LE_F((double)unm / 1e6, slept_ms * 1.15);
	ASSERT_EQ(unm_carrier, 0);
	vp_profile__free(p);

	/* The command line: every format puts the virtual thread where the thread goes. */
	static const char *const fmts[][6] = { { "-F", "folded", "-e", "off-cpu", "--threads", NULL },
					       { "-F", "json", "-e", "off-cpu", NULL },
					       { "--wall", NULL },
					       { "-F", "html", "-e", "off-cpu", NULL } };
	for (size_t k = 0; k < sizeof(fmts) / sizeof(fmts[0]); k++) {
		char fout[400], ferr[400];
		snprintf(fout, sizeof(fout), "%s/report.out", dir);
		snprintf(ferr, sizeof(ferr), "%s/report.err", dir);
		char *rargv[10] = { VIPROF_BIN, "report", sess, "--vthreads" };
		for (int a = 0; fmts[k][a]; a++)
			rargv[4 + a] = (char *)fmts[k][a];
		ASSERT_EQ(run_argv(rargv, fout, ferr, 60), 0);
		char *text = tu_read(fout);
		ASSERT_CONTAINS(text, "[vthread #");
		if (k != 2) {
			ASSERT_CONTAINS(text, "VThreads.napStep()");
			ASSERT_CONTAINS(text, "[unmounted: sleep]");
		}
		free(text);
	}
	free(out);
	free(err_text);
	tu_rm_rf(dir);
	return 0;
}
