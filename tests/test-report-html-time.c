/* The HTML report's time strip (issue 26). "data": the embedded per-bucket counts are the
 * profile's, node by node and bucket by bucket, also after a view (--java-only) and for
 * a large profile (whose size it prints). "browser": in headless chromium, a drag over
 * part of the strip narrows the flame graph to exactly the samples of that window, the
 * window round-trips through #time=, and 'Whole recording' brings the total back. */
#include <sys/stat.h>

#include <limits.h>

#include "postproc/profile_xform.h"
#include "test-html-util.h"
#include "test-run.h"
#include "test-profile.h"

#define NS 1000000000ull

/* A profile with known times: three stacks of cpu-clock over 10 s (A in the first half,
 * B in the second, C throughout), and page-faults of which one sample has no time (its
 * strip data must then be null). */
static struct vp_profile *timed_profile(uint64_t *a_first_half)
{
	struct vp_profile *p = vp_profile__new();
	ASSERT_NOT_NULL(p);
	ASSERT_EQ(vp_profile__add_event(p, "cpu-clock", "nanoseconds"), 0);
	ASSERT_EQ(vp_profile__add_event(p, "page-faults", "events"), 1);
	vp_profile__set_meta(p, "duration_ns", "10000000000");
	uint32_t root = synth_frame(p, VP_LAYER_NATIVE, "start_thread", "/lib/libc.so.6", 0x10);
	uint32_t run = synth_frame(p, VP_LAYER_JIT, "app.Main.run", "[jit]", 0);
	uint32_t fa = synth_frame(p, VP_LAYER_JIT, "app.Main.phaseA", "[jit]", 0);
	uint32_t fb = synth_frame(p, VP_LAYER_JIT, "app.Main.phaseB", "[jit]", 0);
	uint32_t fc = synth_frame(p, VP_LAYER_KERNEL, "ksys_write", "[kernel.kallsyms]", 0);
	uint32_t sa[] = { root, run, fa }, sb[] = { root, run, fb }, sc[] = { root, fc };
	*a_first_half = 0;
	for (uint64_t t = 0; t < 10 * NS; t += 10000000) {   /* one sample per 10 ms */
		const uint32_t *f = t < 5 * NS ? sa : sb;
		uint32_t sid;
		ASSERT_OK(vp_profile__add_stack(p, f, 3, 7, 7, "main", 0, 1, 1000000, &sid));
		ASSERT_OK(vp_profile__add_time(p, sid, 0, t + 1000, 1));
		if (t % (100 * 1000000) == 0) {   /* C: one in ten, 2 samples at once */
			ASSERT_OK(vp_profile__add_stack(p, sc, 2, 7, 8, "writer", 0, 2, 2000000, &sid));
			ASSERT_OK(vp_profile__add_time(p, sid, 0, t + 5000, 2));
			ASSERT_OK(vp_profile__add_stack(p, sc, 2, 7, 8, "writer", 1, 1, 1, &sid));
			ASSERT_OK(vp_profile__add_time(p, sid, 1, t + 5000, 1));
		}
		*a_first_half += t < 5 * NS;
	}
	ASSERT_OK(vp_profile__add(p, sc, 2, 7, 8, "writer", 1, 1, 1));   /* untimed */
	/* Code-map epoch boundaries: one inside the samples' span, one long after it. */
	ASSERT_OK(vp_profile__add_mark(p, 3 * NS, 7, "GC 4 (full, G1)"));
	ASSERT_OK(vp_profile__add_mark(p, 99 * NS, 7, "GC 9 (young, G1)"));
	return p;
}

static uint64_t num_after(const char *d, const char *key)
{
	const char *k = strstr(d, key);
	ASSERT_NOT_NULL(k);
	return strtoull(k + strlen(key), NULL, 10);
}

/* Checks the "time" data of an HTML file against the profile it was written from: for
 * every timed event, per-bucket sums equal the samples of p->times in that bucket, the
 * whole equals the event's total, and each node's cells sum to its self weight in the
 * embedded tree. Returns how many events had strip data. */
static int check_times(const char *path, const struct vp_profile *p, int *has)
{
	char *d = data_of(path);
	int ne = p->nevents;
	uint64_t from = num_after(d, "\"time\":{\"from\":"), bw = num_after(d, "\"bucket\":"), nb = num_after(d, "\"n\":");
	ASSERT_GT(bw, 0);
	ASSERT_LE(nb, VP_HTML_TIME_BUCKETS);
	size_t nt;
	const char *tr = strstr(d, "\"tree\":[");
	ASSERT_NOT_NULL(tr);
	uint64_t *tree = ints(tr + 7, &nt, NULL);
	size_t stride = 2 + (size_t)ne, nn = nt / stride;
	/* Self weights from the preorder tree: each node's own minus its children's. */
	int64_t *self = calloc(nn * (size_t)ne, sizeof(*self));
	size_t *st = malloc(nn * sizeof(*st)), *rem = malloc(nn * sizeof(*rem)), sp = 0;
	ASSERT_TRUE(self && st && rem);
	for (size_t i = 0; i < nn; i++) {
		for (int e = 0; e < ne; e++)
			self[i * ne + e] = (int64_t)tree[i * stride + 2 + e];
		if (sp) {
			for (int e = 0; e < ne; e++)
				self[st[sp - 1] * ne + e] -= (int64_t)tree[i * stride + 2 + e];
			rem[sp - 1]--;
		}
		while (sp && rem[sp - 1] == 0)
			sp--;
		if (tree[i * stride + 1]) {
			st[sp] = i;
			rem[sp++] = tree[i * stride + 1];
		}
	}
	const char *ev = strstr(d, "\"ev\":[");
	ASSERT_NOT_NULL(ev);
	ev += 6;
	int n_timed = 0;
	for (int e = 0; e < ne; e++) {
		while (*ev == ',' || *ev == '\n')
			ev++;
		if (!strncmp(ev, "null", 4)) {
			has[e] = 0;
			ev += 4;
			continue;
		}
		has[e] = 1;
		n_timed++;
		size_t nc;
		uint64_t *c = ints(ev, &nc, &ev);
		uint64_t *bucket = calloc(nb, sizeof(*bucket)), *want = calloc(nb, sizeof(*want)), sum = 0;
		int64_t *cells = calloc(nn, sizeof(*cells));
		ASSERT_TRUE(bucket && want && cells);
		uint64_t node = 0;
		for (size_t i = 0; i < nc;) {
			node += c[i];
			uint64_t k = c[i + 1], b = 0;
			ASSERT_LT(node, nn);
			ASSERT_GT(k, 0);
			i += 2;
			for (uint64_t j = 0; j < k; j++, i += 2) {
				ASSERT_LT(i + 1, nc);
				b += c[i];
				ASSERT_LT(b, nb);
				bucket[b] += c[i + 1];
				cells[node] += (int64_t)c[i + 1];
				sum += c[i + 1];
			}
		}
		for (size_t i = 0; i < p->ntimes; i++)
			if (p->times[i].event == (uint32_t)e)
				want[(p->times[i].t - from) / bw] += p->times[i].samples;
		for (uint64_t b = 0; b < nb; b++)
			if (bucket[b] != want[b])
				FAIL("event %d bucket %llu: %llu samples in the HTML, %llu in the profile", e,
				     (unsigned long long)b, (unsigned long long)bucket[b], (unsigned long long)want[b]);
		uint64_t total = (uint64_t)tp_sum(p, &(struct tp_filter){ .event = e }, NULL, TP_EXACT, NULL);
		ASSERT_UEQ(sum, total);
		ASSERT_UEQ(sum, tree[2 + e]);   /* the root's weight */
		for (size_t i = 0; i < nn; i++)
			if (cells[i] != self[i * ne + e])
				FAIL("event %d node %zu: %lld samples over time, self weight %lld", e, i, (long long)cells[i],
				     (long long)self[i * ne + e]);
		free(c);
		free(bucket);
		free(want);
		free(cells);
	}
	free(self);
	free(st);
	free(rem);
	free(tree);
	free(d);
	return n_timed;
}

static void test_data(void)
{
	uint64_t a_half;
	struct vp_profile *p = timed_profile(&a_half);
	int has[8];
	write_html(p, NULL, "flame-time.html");
	ASSERT_EQ(check_times("flame-time.html", p, has), 1);
	ASSERT_EQ(has[0], 1);
	ASSERT_EQ(has[1], 0);   /* one page-fault sample without a time: no strip data */
	char *d = data_of("flame-time.html");
	/* 10 s fits 300 buckets at 50 ms: round numbers for the axis and for --time. */
	ASSERT_UEQ(num_after(d, "\"bucket\":"), 50000000);
	ASSERT_UEQ(num_after(d, "\"n\":"), 200);
	/* Marks in the strip's span only. */
	ASSERT_CONTAINS(d, "\"marks\":[[3000000000,7,\"GC 4 (full, G1)\"]]");
	free(d);

	/* A view keeps each sample's time with the stack it became part of. */
	struct vp_xform x = { .java_only = true, .simple = true };
	char err[256] = "";
	struct vp_profile *v = vp_profile__transform(p, &x, err, sizeof(err));
	ASSERT_NOT_NULL(v);
	ASSERT_UEQ(v->ntimes, p->ntimes);
	ASSERT_UEQ(v->nmarks, p->nmarks);
	write_html(v, NULL, "flame-time-view.html");
	ASSERT_EQ(check_times("flame-time-view.html", v, has), 1);
	vp_profile__free(v);

	/* Merged: both sessions' samples are on the strip. */
	struct vp_profile *m = vp_profile__new();
	ASSERT_NOT_NULL(m);
	ASSERT_OK(vp_profile__merge(m, p));
	ASSERT_OK(vp_profile__merge(m, p));
	ASSERT_UEQ(m->ntimes, 2 * p->ntimes);
	write_html(m, NULL, "flame-time-merged.html");
	ASSERT_EQ(check_times("flame-time-merged.html", m, has), 1);
	vp_profile__free(m);

	/* A diff has no strip: the base's samples are on another recording's clock. */
	write_html(p, p, "flame-time-diff.html");
	d = data_of("flame-time-diff.html");
	ASSERT_NULL(strstr(d, "\"time\":"));
	free(d);
	vp_profile__free(p);

	/* Size: 100k samples of 2000 stacks spread over 60 s, with and without the strip. */
	struct vp_profile *big = vp_profile__new();
	ASSERT_NOT_NULL(big);
	ASSERT_EQ(vp_profile__add_event(big, "cpu-clock", "nanoseconds"), 0);
	uint32_t fr[64];
	char name[64];
	for (int i = 0; i < 64; i++) {
		snprintf(name, sizeof(name), "app.Service.method%d", i);
		fr[i] = synth_frame(big, VP_LAYER_JIT, name, "[jit]", 0);
	}
	uint64_t seed = 42;
	for (int s = 0; s < 100000; s++) {
		uint32_t st[12];
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		uint32_t k = (uint32_t)(seed >> 33) % 2000;   /* the stack: 2000 of them */
		for (int j = 0; j < 12; j++)   /* (k % 64, k / 64) on top: 2000 distinct stacks */
			st[j] = fr[j == 0 ? k % 64 : j == 1 ? k / 64 : (k * 7 + (uint32_t)j) % 64];
		uint32_t sid;
		ASSERT_OK(vp_profile__add_stack(big, st, 4 + k % 8, 1, 1 + k % 4, "worker", 0, 1, 1000000, &sid));
		ASSERT_OK(vp_profile__add_time(big, sid, 0, (uint64_t)s * 600000 + (seed >> 40) % 600000, 1));
	}
	write_html(big, NULL, "flame-time-big.html");
	ASSERT_EQ(check_times("flame-time-big.html", big, has), 1);
	struct stat with, without;
	ASSERT_OK(stat("flame-time-big.html", &with));
	big->ntimes = 0;
	write_html(big, NULL, "flame-time-big-none.html");
	ASSERT_OK(stat("flame-time-big-none.html", &without));
	printf("INFO: 100000 samples, %zu stacks over 60 s: HTML %lld bytes without the time strip, %lld with it\n",
	       big->nstacks, (long long)without.st_size, (long long)with.st_size);
	/* The strip's data is at most a few bytes per sample (delta-coded cells). */
	ASSERT_LT(with.st_size - without.st_size, 100000 * 6);
	vp_profile__free(big);
}

/* A harness page: loads the report in an iframe, drags over the strip from fraction
 * fa to fb of its width with real mouse events, and writes what the report then shows
 * into its own DOM for --dump-dom. */
static void write_harness(const char *path, const char *report, double fa, double fb)
{
	FILE *f = fopen(path, "w");
	ASSERT_NOT_NULL(f);
	fprintf(f,
		"<!DOCTYPE html><html><body><pre id=\"out\">pending</pre>\n"
		"<iframe id=\"f\" src=\"%s\" style=\"width:1400px;height:900px\"></iframe>\n<script>\n"
		"document.getElementById('f').addEventListener('load', function () {\n"
		"  var w = this.contentWindow, d = this.contentDocument, s = d.getElementById('strip'), r = s.getBoundingClientRect();\n"
		"  function ev(type, fx, t) { (t || s).dispatchEvent(new w.MouseEvent(type, { bubbles: true, clientX: r.left + fx * r.width,"
		" clientY: r.top + r.height / 2, button: 0 })); }\n"
		"  function total() { return d.getElementById('flame').getAttribute('data-total'); }\n"
		"  var before = total();\n"
		"  ev('mousedown', %.3f); ev('mousemove', %.3f, w); ev('mouseup', %.3f, w);\n"
		"  var g = d.getElementById('range'), o = { before: before, after: total(), from: g.getAttribute('data-from-ns'),\n"
		"    to: g.getAttribute('data-to-ns'), hash: w.location.hash, crumbs: d.getElementById('crumbs').textContent };\n"
		"  d.getElementById('whole').click();\n"
		"  o.whole = total();\n"
		"  document.getElementById('out').textContent = 'before=' + o.before + ' after=' + o.after + ' from=' + o.from +\n"
		"    ' to=' + o.to + ' whole=' + o.whole + ' crumbs=' + o.crumbs + ' hash=' + o.hash + ' end';\n"
		"});\n</script></body></html>\n",
		report, fa, (fa + fb) / 2, fb);
	ASSERT_OK(fclose(f));
}

static uint64_t field(const char *dom, const char *key)
{
	const char *k = strstr(dom, key);
	if (!k)
		FAIL("no %s in the harness's output: %.400s", key, strstr(dom, "<pre") ? strstr(dom, "<pre") : dom);
	return strtoull(k + strlen(key), NULL, 10);
}

/* Samples of event e with from <= t < to. */
static uint64_t in_window(const struct vp_profile *p, int e, uint64_t from, uint64_t to)
{
	uint64_t n = 0;
	for (size_t i = 0; i < p->ntimes; i++)
		if (p->times[i].event == (uint32_t)e && p->times[i].t >= from && p->times[i].t < to)
			n += p->times[i].samples;
	return n;
}

static void test_browser(void)
{
	html_test_start();
	uint64_t a_half;
	struct vp_profile *p = timed_profile(&a_half);
	uint64_t all = in_window(p, 0, 0, UINT64_MAX);
	write_html(p, NULL, "flame-time.html");
	write_harness("flame-time-drag.html", "flame-time.html", 0.2, 0.45);
	char *dom = browse("flame-time-drag.html", NULL, NULL);
	uint64_t before = field(dom, "before="), after = field(dom, "after="), from = field(dom, "from="),
		 to = field(dom, "to="), whole = field(dom, "whole=");
	ASSERT_UEQ(before, all);
	/* The window is the buckets under the drag: about 2 s to 4.5 s of the 10 s. */
	ASSERT_GE(from, 1800000000);
	ASSERT_LE(from, 2100000000);
	ASSERT_GE(to, 4400000000);
	ASSERT_LE(to, 4600000000);
	ASSERT_UEQ(after, in_window(p, 0, from, to));
	ASSERT_LT(after, all);
	ASSERT_UEQ(whole, all);
	/* The fragment says the window in report --time's seconds. */
	char want[64];
	snprintf(want, sizeof(want), "time=%g,%g", (double)from / 1e9, (double)to / 1e9);
	if (!strstr(dom, want))
		FAIL("the URL fragment does not hold '%s': %.300s", want, strstr(dom, "hash="));
	free(dom);

	/* A zoomed frame stays zoomed when the window changes. */
	write_harness("flame-time-dragz.html", "flame-time.html#zoom=start_thread%3Bapp.Main.run", 0.2, 0.45);
	dom = browse("flame-time-dragz.html", NULL, NULL);
	const char *cr = strstr(dom, "crumbs=");
	ASSERT_NOT_NULL(cr);
	if (!strstr(cr, "app.Main.run") || strstr(cr, "app.Main.run") > strstr(cr, " hash="))
		FAIL("the zoom was lost by the drag: %.200s", cr);
	ASSERT_LT(field(dom, "after="), all);
	free(dom);

	/* #time=FROM,TO opens on the window: its frames' list counts only its samples, and
	 * phaseB (second half only) is not drawn for a window in the first half. */
	dom = browse("flame-time.html", "time=1,3", NULL);
	const char *li = li_for(dom, "all");
	ASSERT_NOT_NULL(li);
	char v[32];
	attr(li, "data-samples", v, sizeof(v));
	ASSERT_UEQ(strtoull(v, NULL, 10), in_window(p, 0, 1 * NS, 3 * NS));
	ASSERT_NOT_NULL(li_for(dom, "app.Main.phaseA"));
	ASSERT_NULL(li_for(dom, "app.Main.phaseB"));
	ASSERT_CONTAINS(dom, "viprof report --time 1,3");
	ASSERT_CONTAINS(dom, "data-marks=\"1\"");
	free(dom);

	/* An event without per-sample times says so and shows everything. */
	dom = browse("flame-time.html", "view=page-faults&time=1,3", NULL);
	ASSERT_CONTAINS(dom, "page-faults has no per-sample times");
	free(dom);

	/* A look at it: the strip drawn, with a window. */
	struct stat st;
	free(browse("flame-time.html", "time=2,4.5", "flame-time.png"));
	ASSERT_OK(stat("flame-time.png", &st));
	ASSERT_GT(st.st_size, 10000);
	vp_profile__free(p);
	html_test_end();
}

/* A real recording: the strip's samples in a window of buckets equal what 'report --time
 * FROM,TO' counts for it (the page names that command), through the session loader. */
static void test_live(const char *viprof, const char *workload)
{
	if (geteuid() != 0)
		SKIP("needs root to record");
	char dir[] = "/tmp/vp-test-html-time-XXXXXX", sess[PATH_MAX], html[PATH_MAX + 16], log[16384];
	ASSERT_NOT_NULL(mkdtemp(dir));
	snprintf(sess, sizeof(sess), "%s/s", dir);
	snprintf(html, sizeof(html), "%s/f.html", dir);
	int rc = run_logged(dir, (char *const[]){ (char *)viprof, "record", "-q", "-F", "999", "-o", sess, "--",
					     (char *)workload, "1.5", NULL }, log, sizeof(log), 150);
	if (rc)
		FAIL("record exited %d: %s", rc, log);
	rc = run_logged(dir, (char *const[]){ (char *)viprof, "report", sess, "--format", "html", "-o", html, NULL }, log,
		    sizeof(log), 150);
	if (rc)
		FAIL("report exited %d: %s", rc, log);
	char *d = data_of(html);
	uint64_t from = num_after(d, "\"time\":{\"from\":"), bw = num_after(d, "\"bucket\":"), nb = num_after(d, "\"n\":");
	const char *ev = strstr(d, "\"ev\":[");
	ASSERT_NOT_NULL(ev);
	ev += 6;
	while (*ev == '\n')
		ev++;
	size_t nc;
	uint64_t *c = ints(ev, &nc, NULL), lo = nb / 4, hi = nb / 2, in = 0, all = 0;   /* buckets [lo, hi) */
	for (size_t i = 0; i < nc;) {
		uint64_t k = c[i + 1], b = 0;
		i += 2;
		for (uint64_t j = 0; j < k; j++, i += 2) {
			b += c[i];
			all += c[i + 1];
			in += b >= lo && b < hi ? c[i + 1] : 0;
		}
	}
	ASSERT_GT(in, 0);
	ASSERT_LT(in, all);
	char win[64], folded[PATH_MAX + 16];
	snprintf(win, sizeof(win), "%.9f,%.9f", (double)(from + lo * bw) / 1e9, (double)(from + hi * bw) / 1e9);
	snprintf(folded, sizeof(folded), "%s/w.folded", dir);
	rc = run_logged(dir, (char *const[]){ (char *)viprof, "report", sess, "--time", win, "--format", "folded", "-o",
					     folded, NULL }, log, sizeof(log), 150);
	if (rc)
		FAIL("report --time %s exited %d: %s", win, rc, log);
	char *f = test_slurp(folded, NULL);
	ASSERT_NOT_NULL(f);
	uint64_t cli = 0;
	for (char *l = strtok(f, "\n"); l; l = strtok(NULL, "\n")) {
		char *sp = strrchr(l, ' ');
		if (sp)
			cli += strtoull(sp + 1, NULL, 10);
	}
	ASSERT_UEQ(cli, in);
	printf("INFO: window %s s: %llu of %llu samples in the strip and in report --time\n", win,
	       (unsigned long long)in, (unsigned long long)all);
	free(f);
	free(c);
	free(d);
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (run_sh(cmd, 50)) {
		/* left in /tmp */
	}
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "browser"))
		test_browser();
	else if (argc > 3 && !strcmp(argv[1], "live"))
		test_live(argv[2], argv[3]);
	else
		test_data();
	printf("PASS\n");
	return 0;
}
