/* Helpers of the HTML tests: write a profile as HTML, load it in headless chromium and
 * read the DOM its scripts left, find a frame's entry in the visible-frames list. */
#ifndef VIPROF_TEST_HTML_UTIL_H
#define VIPROF_TEST_HTML_UTIL_H

#include <sys/stat.h>
#include <sys/wait.h>

#include "report/report.h"
#include "test-profile-synth.h"
#include "test-run.h"

static char udd[] = "/tmp/vp-test-report-html-XXXXXX";  /* mkdtemp() it first */
static char cwd[512];

static inline void write_html(const struct vp_profile *p, const struct vp_profile *base, const char *path)
{
	struct vp_out o;
	struct vp_report_opts opts = { 0 };
	ASSERT_OK(vp_out__open(&o, path));
	ASSERT_OK(report_html(p, base, &o, &opts));
	ASSERT_OK(vp_out__close(&o));
}

/* Loads file#hash headlessly with chromium's options extra; returns the DOM after
 * scripts ran, or the screenshot status when png is set. Fails on any console error. */
static inline char *browse_opts(const char *file, const char *hash, const char *png, const char *extra)
{
	char cmd[4096], err_path[600];
	snprintf(err_path, sizeof(err_path), "%s/chromium.err", udd);
	snprintf(cmd, sizeof(cmd),
		 "chromium --headless --no-sandbox --disable-gpu --disable-background-networking "
		 "--disable-component-update --disable-sync --no-first-run --user-data-dir=%s/profile "
		 /* a harness page may drive a report in a frame (test-report-html-time) */
		 "--allow-file-access-from-files "
		 "--enable-logging=stderr --v=0 %s%s %s 'file://%s/%s%s%s' > %s/dom.html 2> %s",
		 udd, png ? "--window-size=1400,900 --screenshot=" : "--dump-dom", png ? png : "", extra,
		 cwd, file, hash ? "#" : "", hash ? hash : "", udd, err_path);
	int rc = run_sh(cmd, 100);
	char *err = test_slurp(err_path, NULL);
	ASSERT_NOT_NULL(err);
	if (rc != 0)
		FAIL("chromium failed on %s (exit %d): %s", file, rc, err);
	if (strstr(err, "Uncaught") || strstr(err, "ERROR:CONSOLE") || strstr(err, ":CONSOLE("))
		FAIL("console errors loading %s#%s:\n%s", file, hash ? hash : "", err);
	free(err);
	snprintf(err_path, sizeof(err_path), "%s/dom.html", udd);
	char *dom = test_slurp(err_path, NULL);
	ASSERT_NOT_NULL(dom);
	return dom;
}

static inline char *browse(const char *file, const char *hash, const char *png)
{
	return browse_opts(file, hash, png, "");
}

/* The DOM of file once its asynchronous work (events, timers, frames loading) has run
 * for up to ms of the browser's virtual time. */
static inline char *browse_wait(const char *file, int ms)
{
	char extra[64];
	snprintf(extra, sizeof(extra), "--virtual-time-budget=%d", ms);
	return browse_opts(file, NULL, NULL, extra);
}

/* The <li> of the visible-frames list whose text starts with name, or NULL. */
static inline const char *li_for(const char *dom, const char *name)
{
	char pat[512];
	snprintf(pat, sizeof(pat), ">%s \xe2\x80\x94 ", name);
	const char *p = strstr(dom, pat);
	if (!p)
		return NULL;
	while (p > dom && strncmp(p, "<li", 3))
		p--;
	return p;
}

/* The value of attribute attr in the tag starting at tag. */
static inline void attr(const char *tag, const char *attr, char *out, size_t len)
{
	char pat[64];
	snprintf(pat, sizeof(pat), " %s=\"", attr);
	const char *e = strchr(tag, '>');
	const char *p = strstr(tag, pat);
	if (!p || (e && p > e))
		FAIL("no %s in %.120s", attr, tag);
	p += strlen(pat);
	size_t n = strcspn(p, "\"");
	snprintf(out, len, "%.*s", (int)(n < len - 1 ? n : len - 1), p);
}

/* Skips without chromium; makes the browser's profile directory. */
static inline void html_test_start(void)
{
	if (run_sh("command -v chromium >/dev/null 2>&1", 60) != 0)
		SKIP("chromium is not installed (apt-get install chromium)");
	ASSERT_NOT_NULL(mkdtemp(udd));
	ASSERT_NOT_NULL(getcwd(cwd, sizeof(cwd)));
}

/* Removes the browser's profile directory. */
static inline void html_test_end(void)
{
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", udd);
	if (run_sh(cmd, 60)) {
		/* nothing more to do */
	}
}

/* The embedded JSON of an HTML report, malloc'd. */
static inline char *data_of(const char *path)
{
	char *html = test_slurp(path, NULL);
	ASSERT_NOT_NULL(html);
	const char *a = strstr(html, "id=\"viprof-data\">");
	ASSERT_NOT_NULL(a);
	a += strlen("id=\"viprof-data\">");
	const char *b = strstr(a, "</script>");
	ASSERT_NOT_NULL(b);
	char *d = strndup(a, (size_t)(b - a));
	free(html);
	return d;
}

/* Reads the integers of a JSON array starting at s ('['), into a malloc'd array. */
static inline uint64_t *ints(const char *s, size_t *n, const char **endp)
{
	ASSERT_TRUE(*s == '[');
	size_t cap = 1024, len = 0;
	uint64_t *v = malloc(cap * sizeof(*v));
	ASSERT_NOT_NULL(v);
	char *e;
	for (s++;;) {
		while (*s == ',' || *s == '\n' || *s == ' ')
			s++;
		if (*s == ']')
			break;
		bool neg = *s == '-';
		long long x = strtoll(s, &e, 10);
		ASSERT_TRUE(e != s);
		if (len == cap) {
			cap *= 2;
			v = realloc(v, cap * sizeof(*v));
			ASSERT_NOT_NULL(v);
		}
		v[len++] = neg ? (uint64_t)-x : (uint64_t)x;   /* frames below 0 only matter as "not a count" */
		s = e;
	}
	*n = len;
	if (endp)
		*endp = s + 1;
	return v;
}

#endif
