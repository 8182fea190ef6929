/* Issue 33 item 5: one time zero for every view, and waits spread over their interval.
 *
 * "live" records offcpu-fixture's phases (compute 1 s in compute_first, sleep 1 s in
 * sleep_phase, compute 1 s in compute_last) with --off-cpu, and checks against the
 * CLOCK_MONOTONIC times the fixture printed for each phase, minus the time zero the
 * report's header states:
 *   - the HTML strip holds each phase's samples at its offsets from zero (the sleep's
 *     off-CPU time, and its "blocked" part of the wall view, over its whole second, not
 *     piled where it ended);
 *   - 'report --time 0,X' of a short first window finds the first phase's samples;
 *   - 'report --time A,B' inside the sleep counts the overlapping part of the wait.
 * "unit" checks the one rule that apportions an interval's samples to parts of it, and
 * the HTML strip's data of a synthetic wait. */
#include <limits.h>
#include <math.h>

#include "report/report.h"
#include "test-helpers.h"
#include "test-html-util.h"
#include "test-run.h"

#define NS 1000000000ull

/* Per-bucket samples of event e over every node of the HTML report at path (all nodes:
 * the report was written with -I for the frames wanted). *from, *bw, *nb: the axis. */
static uint64_t *strip_hist(const char *path, int e, uint64_t *from, uint64_t *bw, uint64_t *nb)
{
	char *d = data_of(path);
	const char *k = strstr(d, "\"time\":{\"from\":");
	if (!k)
		FAIL("%s has no time strip data", path);
	*from = strtoull(k + strlen("\"time\":{\"from\":"), NULL, 10);
	*bw = strtoull(strstr(k, "\"bucket\":") + 9, NULL, 10);
	*nb = strtoull(strstr(k, "\"n\":") + 4, NULL, 10);
	const char *ev = strstr(k, "\"ev\":[");
	ASSERT_NOT_NULL(ev);
	ev += 6;
	uint64_t *h = calloc(*nb + 1, sizeof(*h));
	ASSERT_NOT_NULL(h);
	for (int i = 0; i <= e; i++) {
		while (*ev == ',' || *ev == '\n')
			ev++;
		if (!strncmp(ev, "null", 4)) {
			if (i == e)
				FAIL("event %d has no per-sample times in %s", e, path);
			ev += 4;
			continue;
		}
		size_t nc;
		uint64_t *c = ints(ev, &nc, &ev);
		for (size_t j = 0; i == e && j < nc;) {
			uint64_t n = c[j + 1], b = 0;
			j += 2;
			for (uint64_t q = 0; q < n; q++, j += 2) {
				b += c[j];
				ASSERT_LT(b, *nb);
				h[b] += c[j + 1];
			}
		}
		free(c);
	}
	free(d);
	return h;
}

/* The index of event name in the report's "events" list. */
static int event_index(const char *path, const char *name)
{
	char *d = data_of(path), pat[128];
	const char *ev = strstr(d, "\"events\":[");
	ASSERT_NOT_NULL(ev);
	snprintf(pat, sizeof(pat), "{\"name\":\"%s\"", name);
	const char *at = strstr(ev, pat);
	if (!at)
		FAIL("%s has no event %s: %.300s", path, name, ev);
	int i = 0;
	for (const char *q = strstr(ev, "{\"name\":\""); q && q < at; q = strstr(q + 1, "{\"name\":\""))
		i++;
	free(d);
	return i;
}

struct phase {
	char name[32];
	uint64_t a, b;   /* CLOCK_MONOTONIC */
};

/* Samples of h in [a, b) ns since zero, by bucket start (a bucket is in when it starts
 * there). */
static uint64_t hist_sum(const uint64_t *h, uint64_t from, uint64_t bw, uint64_t nb, double a, double b)
{
	uint64_t s = 0;
	for (uint64_t i = 0; i < nb; i++) {
		double t = (double)(from + i * bw);
		if (t >= a && t < b)
			s += h[i];
	}
	return s;
}

/* Sum of the counts of the folded lines holding frame. */
static uint64_t folded_sum(const char *path, const char *frame)
{
	char *f = test_slurp(path, NULL);
	ASSERT_NOT_NULL(f);
	uint64_t n = 0;
	for (char *l = strtok(f, "\n"); l; l = strtok(NULL, "\n")) {
		char *sp = strrchr(l, ' ');
		if (sp && strstr(l, frame))
			n += strtoull(sp + 1, NULL, 10);
	}
	free(f);
	return n;
}

static char rlog[65536];   /* the last run's stderr */

/* Runs viprof, which must exit 0 (the failure quotes its log). */
static void viprof_ok(const char *dir, char *const argv[])
{
	int rc = run_logged(dir, argv, rlog, sizeof(rlog), 100);
	if (rc)
		FAIL("%s %s exited %d: %s", argv[0], argv[1], rc, rlog);
}

static void test_live(const char *viprof, const char *fixture)
{
	if (geteuid() != 0)
		SKIP("needs root to record off-CPU time");
	char dir[] = "/tmp/vp-timeaxis-XXXXXX", sess[PATH_MAX], out[PATH_MAX + 32], cmd[PATH_MAX + 16];
	ASSERT_NOT_NULL(mkdtemp(dir));
	snprintf(sess, sizeof(sess), "%s/s", dir);
	viprof_ok(dir, (char *const[]){ (char *)viprof, "record", "-q", "--off-cpu", "-F", "499", "-o", sess, "--",
				  (char *)fixture, "phases", "1", NULL });

	/* The phases as the fixture saw them (on its stderr, in the recorder's log). */
	char *pt = strdup(rlog);
	ASSERT_NOT_NULL(pt);
	struct phase ph[3];
	int np = 0;
	for (char *l = strtok(pt, "\n"); l && np < 3; l = strtok(NULL, "\n")) {
		unsigned long long a, b;
		if (sscanf(l, "phase %31s %llu %llu", ph[np].name, &a, &b) == 3) {
			ph[np].a = a;
			ph[np].b = b;
			np++;
		}
	}
	if (np != 3)
		FAIL("the fixture did not print its three phases (%d)", np);
	free(pt);

	/* The zero, as the text report's header states it. */
	snprintf(out, sizeof(out), "%s/r.txt", dir);
	viprof_ok(dir, (char *const[]){ (char *)viprof, "report", sess, "-o", out, NULL });
	char *txt = test_slurp(out, NULL);
	ASSERT_NOT_NULL(txt);
	const char *z = strstr(txt, "# time zero: ");
	if (!z)
		FAIL("the report's header does not state its time zero:\n%.2000s", txt);
	const char *zm = strstr(z, "CLOCK_MONOTONIC ");
	ASSERT_NOT_NULL(zm);
	uint64_t zero = strtoull(zm + strlen("CLOCK_MONOTONIC "), NULL, 10);
	char *nl = strchr(z, '\n');
	printf("INFO: %.*s\n", nl ? (int)(nl - z) : 200, z);
	free(txt);
	double off[3][2];
	for (int i = 0; i < 3; i++) {
		ASSERT_GE(ph[i].a, zero);
		off[i][0] = (double)(ph[i].a - zero);
		off[i][1] = (double)(ph[i].b - zero);
		printf("INFO: %s from %.3f s to %.3f s after zero\n", ph[i].name, off[i][0] / 1e9, off[i][1] / 1e9);
	}
	/* The launched command starts when sampling does: its first phase right after zero. */
	ASSERT_LT_F(off[0][0], 0.15e9);

	/* Each phase's samples in the strip, from the HTML of that frame's stacks alone. */
	const char *fr[3] = { "compute_first", "sleep_phase", "compute_last" };
	const char *evn[3] = { "cpu-clock", "off-cpu", "cpu-clock" };
	for (int i = 0; i < 3; i++) {
		char html[PATH_MAX + 32];
		snprintf(html, sizeof(html), "%s/%s.html", dir, fr[i]);
		viprof_ok(dir, (char *const[]){ (char *)viprof, "report", sess, "-I", (char *)fr[i], "-F", "html", "-o", html, NULL });
		uint64_t from, bw, nb, *h = strip_hist(html, event_index(html, evn[i]), &from, &bw, &nb);
		uint64_t all = hist_sum(h, from, bw, nb, 0, 1e30),
			 in = hist_sum(h, from, bw, nb, off[i][0] - (double)bw, off[i][1] + (double)bw);
		printf("INFO: %s: %llu %s samples, %llu of them in its phase (buckets of %llu ms from %.3f s)\n", fr[i],
		       (unsigned long long)all, evn[i], (unsigned long long)in, (unsigned long long)(bw / 1000000),
		       (double)from / 1e9);
		ASSERT_GT(all, 10);
		if ((double)in < 0.9 * (double)all)
			FAIL("%s: only %llu of its %llu %s samples are in its phase, %.3f-%.3f s after zero", fr[i],
			     (unsigned long long)in, (unsigned long long)all, evn[i], off[i][0] / 1e9, off[i][1] / 1e9);
		if (i == 1) {
			/* Spread over the wait, not piled at its end: its first half holds half. */
			uint64_t first = hist_sum(h, from, bw, nb, off[1][0] - (double)bw, (off[1][0] + off[1][1]) / 2);
			printf("INFO: the sleep's first half holds %llu of its %llu samples\n", (unsigned long long)first,
			       (unsigned long long)all);
			if ((double)first < 0.35 * (double)all || (double)first > 0.65 * (double)all)
				FAIL("the sleep's first half holds %llu of its %llu off-CPU samples: not spread over the "
				     "wait", (unsigned long long)first, (unsigned long long)all);
			/* The same in the wall view's "blocked" part, which the page derives. */
			uint64_t *hb = strip_hist(html, event_index(html, "blocked"), &from, &bw, &nb);
			uint64_t ball = hist_sum(hb, from, bw, nb, 0, 1e30),
				 bfirst = hist_sum(hb, from, bw, nb, off[1][0] - (double)bw, (off[1][0] + off[1][1]) / 2);
			printf("INFO: blocked: the sleep's first half holds %llu of %llu\n", (unsigned long long)bfirst,
			       (unsigned long long)ball);
			ASSERT_GT(ball, 10);
			ASSERT_GE_F((double)bfirst, 0.35 * (double)ball);
			ASSERT_LE_F((double)bfirst, 0.65 * (double)ball);
			free(hb);
		}
		free(h);
	}

	/* The whole recording's wall view has a strip too (the parts it is made of all have
	 * times), whose samples cover the three phases. */
	{
		char html[PATH_MAX + 32];
		snprintf(html, sizeof(html), "%s/all.html", dir);
		viprof_ok(dir, (char *const[]){ (char *)viprof, "report", sess, "-F", "html", "-o", html, NULL });
		uint64_t from, bw, nb, *h = strip_hist(html, event_index(html, "wall"), &from, &bw, &nb);
		uint64_t all = hist_sum(h, from, bw, nb, 0, 1e30);
		printf("INFO: wall: %llu samples on the strip from %.3f s\n", (unsigned long long)all, (double)from / 1e9);
		ASSERT_UEQ(from, 0);
		for (int i = 0; i < 3; i++)
		{
			uint64_t in_phase = hist_sum(h, from, bw, nb, off[i][0], off[i][1]);
			ASSERT_GT(in_phase, 0);
		}
		free(h);
	}

	/* report --time 0,X with X short: the first phase's samples are there. */
	char win[64];
	snprintf(out, sizeof(out), "%s/first.folded", dir);
	snprintf(win, sizeof(win), "0,0.2");
	viprof_ok(dir, (char *const[]){ (char *)viprof, "report", sess, "--time", win, "-e", "cpu-clock", "-F", "folded", "-o",
				  out, NULL });
	uint64_t n0 = folded_sum(out, "compute_first");
	printf("INFO: --time %s: %llu cpu-clock samples in compute_first\n", win, (unsigned long long)n0);
	if (!n0)
		FAIL("report --time %s finds no sample of the first phase", win);

	/* A window inside the sleep counts the part of the wait in it: 0.4 of its 1 s. */
	double wa = off[1][0] / 1e9 + 0.2, wb = off[1][0] / 1e9 + 0.6;
	snprintf(win, sizeof(win), "%.3f,%.3f", wa, wb);
	snprintf(out, sizeof(out), "%s/sleep.folded", dir);
	viprof_ok(dir, (char *const[]){ (char *)viprof, "report", sess, "--time", win, "-e", "off-cpu", "-F", "folded", "-o",
				  out, NULL });
	uint64_t ns = folded_sum(out, "sleep_phase");
	snprintf(out, sizeof(out), "%s/sleep-all.folded", dir);
	viprof_ok(dir, (char *const[]){ (char *)viprof, "report", sess, "-e", "off-cpu", "-F", "folded", "-o", out, NULL });
	uint64_t all = folded_sum(out, "sleep_phase");
	printf("INFO: --time %s: %llu of the sleep's %llu off-CPU samples\n", win, (unsigned long long)ns,
	       (unsigned long long)all);
	ASSERT_GT(all, 0);
	if ((double)ns < 0.3 * (double)all || (double)ns > 0.5 * (double)all)
		FAIL("report --time %s counts %llu of the sleep's %llu off-CPU samples; 0.4 s of its 1 s is in the window",
		     win, (unsigned long long)ns, (unsigned long long)all);

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (run_sh(cmd, 110)) {
		/* left in /tmp */
	}
}

/* A synthetic wait: 1000 samples over [2 s, 4 s), 100 samples at 5 s, in a profile whose
 * strip then has 20 ms buckets: the wait's samples are 10 per bucket over its two
 * seconds, all of them, and the strip starts at zero. */
static void test_unit(void)
{
	/* The rule: parts of an interval sum to the whole, proportionally. */
	uint64_t sum = 0;
	for (uint64_t a = 0; a < 1000; a += 7)
		sum += vp_span_share(3, 1000, 100, a, a + 7 < 1000 ? a + 7 : 1000);
	ASSERT_UEQ(sum, 100);
	ASSERT_UEQ(vp_span_share(0, 1000, 100, 0, 500), 50);
	ASSERT_UEQ(vp_span_share(0, 1000, 100, 250, 500), 25);
	ASSERT_UEQ(vp_span_share(0, 1000, 100, 1000, 2000), 0);
	ASSERT_UEQ(vp_span_share(500, 0, 7, 0, 1000), 7);      /* an instant: all or nothing */
	ASSERT_UEQ(vp_span_share(500, 0, 7, 0, 500), 0);
	ASSERT_UEQ(vp_span_share(500, 0, 7, 500, 501), 7);

	struct vp_profile *p = vp_profile__new();
	ASSERT_NOT_NULL(p);
	ASSERT_EQ(vp_profile__add_event(p, "off-cpu", "nanoseconds"), 0);
	uint32_t f[2] = { synth_frame(p, VP_LAYER_NATIVE, "main", "/bin/x", 0x10),
			  synth_frame(p, VP_LAYER_KERNEL, "[blocked: sleep]", "[kernel.kallsyms]", 0) };
	uint32_t sid;
	ASSERT_OK(vp_profile__add_stack(p, f, 2, 7, 7, "x", 0, 1000, 2 * NS, &sid));
	ASSERT_OK(vp_profile__add_time_span(p, sid, 0, 2 * NS, 2 * NS, 1000));
	ASSERT_OK(vp_profile__add_stack(p, f, 1, 7, 7, "x", 0, 100, 100000000, &sid));
	ASSERT_OK(vp_profile__add_time(p, sid, 0, 5 * NS, 100));
	write_html(p, NULL, "timeaxis-unit.html");
	uint64_t from, bw, nb, *h = strip_hist("timeaxis-unit.html", 0, &from, &bw, &nb);
	ASSERT_UEQ(from, 0);
	ASSERT_UEQ(bw, 20000000);
	uint64_t before = hist_sum(h, from, bw, nb, 0, 2 * (double)NS), during = hist_sum(h, from, bw, nb, 2 * (double)NS, 4 * (double)NS);
	ASSERT_UEQ(before, 0);
	ASSERT_UEQ(during, 1000);
	for (uint64_t b = 100; b < 200; b++)
		ASSERT_UEQ(h[b], 10);
	ASSERT_UEQ(h[250], 100);
	free(h);
	vp_profile__free(p);
}

int main(int argc, char **argv)
{
	if (argc > 3 && !strcmp(argv[1], "live"))
		test_live(argv[2], argv[3]);
	else
		test_unit();
	printf("PASS\n");
	return 0;
}
