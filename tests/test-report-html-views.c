/* The HTML flame graph's views, each checked in headless chromium on the synthetic Java
 * profile (1000 cpu-clock samples in four threads, 40 page faults): flame or icicle
 * orientation, the callers (reversed) view, the per-thread view, the event selector,
 * self time in the tooltip, and a tooltip that follows a zoom under a still pointer.
 * Pointer tests append a small harness script to a copy of the page that moves the
 * pointer over a frame's rectangle and clicks it, and leaves the tooltip's text in the
 * DOM for --dump-dom. */
#include "test-html-util.h"

/* Runs after the page's own script: hovers the widest drawn frame named NAME, records
 * the tooltip, clicks (zooms), records it again, and once more after the pointer moves
 * to the very same place (what the tooltip must already say). */
static const char harness[] =
	"<script>\n"
	"(function () {\n"
	"  var name = decodeURIComponent((location.hash.match(/hover=([^&]*)/) || [])[1] || '');\n"
	"  var c = document.getElementById('flame'), tip = document.getElementById('tip');\n"
	"  var li = Array.prototype.find.call(document.querySelectorAll('#frames li'),\n"
	"    function (l) { return l.textContent.indexOf(name + ' \\u2014 ') === 0; });\n"
	"  var out = document.createElement('pre'); out.id = 'harness';\n"
	"  if (!li) { out.textContent = 'NOFRAME'; document.body.appendChild(out); return; }\n"
	"  var r = c.getBoundingClientRect();\n"
	"  var px = r.left + (+li.getAttribute('data-x')) + (+li.getAttribute('data-w')) / 2;\n"
	"  var py = r.top + (+li.getAttribute('data-y')) + 8;\n"
	"  c.dispatchEvent(new MouseEvent('mousemove', { clientX: px, clientY: py, bubbles: true }));\n"
	"  var before = tip.textContent;\n"
	"  c.dispatchEvent(new MouseEvent('click', { clientX: px, clientY: py, bubbles: true }));\n"
	"  var after = tip.textContent;\n"
	"  c.dispatchEvent(new MouseEvent('mousemove', { clientX: px, clientY: py, bubbles: true }));\n"
	"  out.textContent = 'BEFORE@@' + before + '@@AFTER@@' + after + '@@FRESH@@' + tip.textContent + '@@';\n"
	"  document.body.appendChild(out);\n"
	"})();\n"
	"</script>\n";

static void write_with_harness(const char *src, const char *dst)
{
	size_t len;
	char *html = test_slurp(src, &len);
	ASSERT_NOT_NULL(html);
	char *end = strstr(html, "</body>");
	ASSERT_NOT_NULL(end);
	FILE *f = fopen(dst, "w");
	ASSERT_NOT_NULL(f);
	fwrite(html, 1, (size_t)(end - html), f);
	fputs(harness, f);
	fputs(end, f);
	ASSERT_OK(fclose(f));
	free(html);
}

/* The text between BEFORE@@ and @@ (which = "BEFORE") or AFTER@@ and @@ (names hold
 * brackets: "[jit]"). */
static char *harness_part(const char *dom, const char *which)
{
	char pat[32];
	snprintf(pat, sizeof(pat), "%s@@", which);
	/* After the harness's output element, not in its script's source. */
	const char *out = strstr(dom, "id=\"harness\">");
	if (!out)
		FAIL("the harness left no output");
	const char *p = strstr(out, pat);
	if (!p)
		FAIL("no %s in the harness output: %.300s", which, out);
	p += strlen(pat);
	const char *e = strstr(p, "@@");
	ASSERT_NOT_NULL(e);
	return strndup(p, (size_t)(e - p));
}

static void expect_attr(const char *dom, const char *frame, const char *name, const char *want)
{
	char v[64];
	const char *li = li_for(dom, frame);
	if (!li)
		FAIL("frame %s is not drawn", frame);
	attr(li, name, v, sizeof(v));
	if (strcmp(v, want))
		FAIL("%s: %s is %s, expected %s", frame, name, v, want);
}

int main(void)
{
	html_test_start();
	struct vp_profile *p = synth_java_profile();
	write_html(p, NULL, "flame-views.html");

	/* Icicle (the default): the root row on top. Flame: the root at the bottom, below
	 * the deepest stack (9 frames: row 9 of 16 px). */
	char *dom = browse("flame-views.html", NULL, NULL);
	ASSERT_CONTAINS(dom, "data-orientation=\"icicle\"");
	expect_attr(dom, "all", "data-y", "0");
	expect_attr(dom, "ksys_write", "data-y", "144");
	free(dom);
	dom = browse("flame-views.html", "orient=flame", NULL);
	ASSERT_CONTAINS(dom, "data-orientation=\"flame\"");
	expect_attr(dom, "all", "data-y", "144");
	expect_attr(dom, "start_thread", "data-y", "128");
	expect_attr(dom, "ksys_write", "data-y", "0");
	free(dom);

	/* Callers: the first level holds the leaves with their self samples (encode 400,
	 * HashMap.get 200, ksys_write 150, the GC 100, JLI_Launch 100, [steal] 50, the
	 * synthetic profile has no other leaf), their callers below them. */
	dom = browse("flame-views.html", "reverse=1", NULL);
	ASSERT_CONTAINS(dom, "data-view=\"callers\"");
	expect_attr(dom, "all", "data-samples", "1000");
	expect_attr(dom, "com.example.Codec.encode", "data-depth", "1");
	expect_attr(dom, "com.example.Codec.encode", "data-samples", "400");
	expect_attr(dom, "ksys_write", "data-depth", "1");
	expect_attr(dom, "ksys_write", "data-samples", "150");
	expect_attr(dom, "[steal]", "data-depth", "1");
	expect_attr(dom, "do_syscall_64", "data-depth", "2");
	/* handle is the caller of encode (400), HashMap.get (200) and write (150). */
	expect_attr(dom, "com.example.Server.handle", "data-depth", "2");
	expect_attr(dom, "com.example.Server.handle", "data-samples", "400");
	/* start_thread ends every Java and GC path: 400 + 200 + 150 + 100, at depths 6-9. */
	free(dom);

	/* Per thread: the threads are the first level, named with their tid. */
	dom = browse("flame-views.html", "threads=1", NULL);
	ASSERT_CONTAINS(dom, "data-view=\"callees,threads\"");
	expect_attr(dom, "worker-1 [4243, pid 4242]", "data-samples", "500");
	expect_attr(dom, "worker-1 [4243, pid 4242]", "data-depth", "1");
	expect_attr(dom, "worker-1 [4243, pid 4242]", "data-layer", "thread");
	expect_attr(dom, "worker-2 [4244, pid 4242]", "data-samples", "300");
	expect_attr(dom, "VM Thread [4250, pid 4242]", "data-samples", "100");
	expect_attr(dom, "java [4242]", "data-samples", "100");
	expect_attr(dom, "start_thread", "data-depth", "2");
	expect_attr(dom, "start_thread", "data-samples", "450");   /* worker-1's: 300 + 150 */
	free(dom);
	/* Both: each thread's leaves. */
	dom = browse("flame-views.html", "threads=1&reverse=1", NULL);
	expect_attr(dom, "worker-2 [4244, pid 4242]", "data-depth", "1");
	expect_attr(dom, "java.util.HashMap.get", "data-depth", "2");
	expect_attr(dom, "java.util.HashMap.get", "data-samples", "200");
	free(dom);

	/* The second event (page-faults: 30 in the GC, 10 in write) drawn from the same page,
	 * chosen by index or by name. */
	dom = browse("flame-views.html", "ev=1", NULL);
	expect_attr(dom, "all", "data-samples", "40");
	expect_attr(dom, "G1CollectedHeap::do_collection", "data-samples", "30");
	ASSERT_CONTAINS(dom, "40 samples of page-faults");
	free(dom);
	dom = browse("flame-views.html", "view=page-faults&reverse=1", NULL);
	expect_attr(dom, "G1CollectedHeap::do_collection", "data-depth", "1");
	ASSERT_CONTAINS(dom, "40 samples of page-faults");
	free(dom);

	/* Tooltip: self samples, and after a click zooms into the frame under the pointer,
	 * the tooltip describes the zoomed view (100% of zoom), not the one before. */
	write_with_harness("flame-views.html", "flame-views-harness.html");
	dom = browse("flame-views-harness.html", "hover=java.util.HashMap.get", NULL);
	char *before = harness_part(dom, "BEFORE"), *after = harness_part(dom, "AFTER");
	char *fresh = harness_part(dom, "FRESH");
	ASSERT_CONTAINS(before, "java.util.HashMap.get");
	ASSERT_CONTAINS(before, "samples: 200 (20.00% of all, 20.00% of zoom)");
	ASSERT_CONTAINS(before, "self: 200 (20.00%)");
	ASSERT_CONTAINS(after, "samples: 200 (20.00% of all, 100.00% of zoom)");
	ASSERT_STREQ(after, fresh);
	free(before);
	free(after);
	free(fresh);
	free(dom);
	dom = browse("flame-views-harness.html", "hover=com.example.Server.handle", NULL);
	before = harness_part(dom, "BEFORE");
	after = harness_part(dom, "AFTER");
	fresh = harness_part(dom, "FRESH");
	ASSERT_CONTAINS(before, "samples: 750 (75.00% of all, 75.00% of zoom)\nself: 0 (0.00%)");
	ASSERT_CONTAINS(after, "samples: 750 (75.00% of all, 100.00% of zoom)");
	ASSERT_STREQ(after, fresh);
	free(before);
	free(after);
	free(fresh);
	free(dom);
	/* In the flame orientation the pointer finds the same frames. */
	dom = browse("flame-views-harness.html", "orient=flame&hover=ksys_write", NULL);
	before = harness_part(dom, "BEFORE");
	ASSERT_CONTAINS(before, "ksys_write\nlayer: kernel");
	ASSERT_CONTAINS(before, "samples: 150 (15.00% of all");
	free(before);
	free(dom);

	vp_profile__free(p);
	html_test_end();
	return 0;
}
