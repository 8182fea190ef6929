/* Issue 33 item 7: the whole view of the HTML report lives in its URL fragment, and the
 * fragment drives the view, in headless chromium on the synthetic Java profile.
 * A harness page loads the report in a frame and
 *   A. sets every control through the page's own UI (Simple names, Java only, Include,
 *      Exclude, Min width, the orientation, Per thread, Callers, the event, the search)
 *      and reads the fragment the page wrote;
 *   B. edits the fragment of the open page: an empty one brings every control back to
 *      its default, the fragment of A brings A's view back (hashchange, live);
 *   C. opens the report afresh with A's fragment: the same view, the same fragment.
 * Each step leaves the controls' state, the drawn total and the fragment in the
 * harness's DOM for --dump-dom. */
#include "test-html-util.h"

static const char harness[] =
	"<!DOCTYPE html><html><body><pre id=\"out\">pending</pre>\n"
	"<iframe id=\"f\" src=\"%s\" style=\"width:1400px;height:900px\"></iframe>\n<script>\n"
	"var out = [];\n"
	"function state(w) {\n"
	"  var d = w.document, g = function (id) { return d.getElementById(id); };\n"
	"  return 'simple=' + g('simple').checked + ' javaonly=' + g('javaonly').checked + ' include=' + g('include').value +\n"
	"    ' exclude=' + g('exclude').value + ' minwidth=' + g('minwidth').value + ' reverse=' + g('reverse').checked +\n"
	"    ' threads=' + g('threads').checked + ' event=' + g('event').value + ' search=' + g('search').value +\n"
	"    ' orientation=' + g('flame').getAttribute('data-orientation') + ' total=' + g('flame').getAttribute('data-total') +\n"
	"    ' view=' + g('flame').getAttribute('data-view') + ' hash=' + w.location.hash + ' ;';\n"
	"}\n"
	"function hashchange(w, h) {\n"
	"  return new Promise(function (ok) {\n"
	"    w.addEventListener('hashchange', function f() { w.removeEventListener('hashchange', f); setTimeout(ok, 0); });\n"
	"    w.location.hash = h;\n"
	"  });\n"
	"}\n"
	"function enter(w, id, v) {\n"
	"  var e = w.document.getElementById(id); e.value = v;\n"
	"  e.dispatchEvent(new w.KeyboardEvent('keydown', { key: 'Enter', bubbles: true }));\n"
	"}\n"
	"function tick(w, id) { var e = w.document.getElementById(id); e.checked = !e.checked; e.dispatchEvent(new w.Event('change')); }\n"
	"function done() { document.getElementById('out').textContent = out.join('\\n') + '\\nend'; }\n"
	"document.getElementById('f').addEventListener('load', function () {\n"
	"  var w = this.contentWindow, d = this.contentDocument;\n"
	"  if (out.length) return;\n"
	"  out.push('START ' + state(w));\n"
	"  tick(w, 'simple'); tick(w, 'javaonly'); tick(w, 'threads'); tick(w, 'reverse');\n"
	"  var ev = d.getElementById('event'); ev.value = '1'; ev.dispatchEvent(new w.Event('change'));\n"
	"  ev.value = '0'; ev.dispatchEvent(new w.Event('change'));\n"
	"  d.getElementById('orient').click();\n"
	"  enter(w, 'include', 'Server'); enter(w, 'exclude', 'HashMap');\n"
	"  var mw = d.getElementById('minwidth'); mw.value = '2.5'; mw.dispatchEvent(new w.Event('change'));\n"
	"  enter(w, 'search', 'encode');\n"
	"  var a = w.location.hash;\n"
	"  out.push('A ' + state(w));\n"
	"  hashchange(w, '').then(function () {\n"
	"    out.push('B0 ' + state(w));\n"
	"    return hashchange(w, a);\n"
	"  }).then(function () {\n"
	"    out.push('B1 ' + state(w));\n"
	"    var f2 = document.createElement('iframe');\n"
	"    f2.style.width = '1400px'; f2.style.height = '900px';\n"
	"    f2.addEventListener('load', function () { out.push('C ' + state(f2.contentWindow)); done(); });\n"
	"    f2.src = '%s' + a;\n"
	"    document.body.appendChild(f2);\n"
	"  });\n"
	"});\n</script></body></html>\n";

/* The state line of the harness's step (e.g. "A "), without its name. */
static char *step(const char *dom, const char *name)
{
	const char *o = strstr(dom, "id=\"out\">");
	if (!o)
		FAIL("the harness left no output: %.300s", dom);
	char pat[16];
	snprintf(pat, sizeof(pat), "\n%s ", name);
	const char *p = strstr(o, pat);
	if (!p && !strncmp(o + 9, pat + 1, strlen(pat + 1)))
		p = o + 8;
	if (!p)
		FAIL("no step %s in the harness's output: %.1500s", name, o);
	p += strlen(pat);
	const char *e = strstr(p, " ;");
	ASSERT_NOT_NULL(e);
	char *r = strndup(p, (size_t)(e - p)), *amp;
	ASSERT_NOT_NULL(r);
	while ((amp = strstr(r, "&amp;")))   /* the DOM's text, unescaped */
		memmove(amp + 1, amp + 5, strlen(amp + 5) + 1);
	return r;
}

int main(void)
{
	html_test_start();
	struct vp_profile *p = synth_java_profile();
	write_html(p, NULL, "flame-hash.html");
	FILE *f = fopen("flame-hash-harness.html", "w");
	ASSERT_NOT_NULL(f);
	fprintf(f, harness, "flame-hash.html", "flame-hash.html");
	ASSERT_OK(fclose(f));
	char *dom = browse_wait("flame-hash-harness.html", 10000);
	char *start = step(dom, "START"), *a = step(dom, "A"), *b0 = step(dom, "B0"), *b1 = step(dom, "B1"),
	     *c = step(dom, "C");
	printf("INFO: START %s\nINFO: A %s\nINFO: B0 %s\nINFO: B1 %s\nINFO: C %s\n", start, a, b0, b1, c);

	/* A: every control is in the fragment. */
	const char *h = strstr(a, "hash=#");
	ASSERT_NOT_NULL(h);
	static const char *const keys[] = { "simple=1", "javaonly=1", "include=Server", "exclude=HashMap", "minwidth=2.5",
					    "orient=flame", "threads=1", "reverse=1", "search=encode", "view=cpu-clock" };
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		char k[64];
		snprintf(k, sizeof(k), "%s", keys[i]);
		const char *at = strstr(h, k);
		size_t n = strlen(k);
		if (!at || (at[-1] != '#' && at[-1] != '&') || (at[n] != '&' && at[n] != '\0' && at[n] != ' '))
			FAIL("the fragment does not keep %s: %s", keys[i], h);
	}
	/* Include Server and exclude HashMap: handle's 750 less HashMap.get's 200. */
	ASSERT_CONTAINS(a, "total=550 ");
	ASSERT_CONTAINS(a, "simple=true javaonly=true include=Server exclude=HashMap minwidth=2.5 reverse=true threads=true");

	/* B0: an empty fragment is the default view; B1: A's fragment is A's view. */
	char *start_view = strndup(start, (size_t)(strstr(start, " hash=") - start));
	char *b0_view = strndup(b0, (size_t)(strstr(b0, " hash=") - b0));
	ASSERT_STREQ(b0_view, start_view);
	ASSERT_CONTAINS(b0, "total=1000 ");
	ASSERT_STREQ(b1, a);
	/* C: opened with A's fragment, the same view and the same fragment. */
	ASSERT_STREQ(c, a);

	free(start_view);
	free(b0_view);
	free(start);
	free(a);
	free(b0);
	free(b1);
	free(c);
	free(dom);
	vp_profile__free(p);
	html_test_end();
	printf("PASS\n");
	return 0;
}
