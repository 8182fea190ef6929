/* Sessions as pprof and flame graphs, and the index page: see pages.h. */
#define _GNU_SOURCE
#include "daemon/pages.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/chunkfile.h"
#include "common/safefs.h"
#include "common/session_format.h"
#include "common/timezero.h"
#include "common/util.h"
#include "report/report.h"
#include "report/report_pipeline.h"
#include "postproc/session.h"
#include "daemon/continuous.h"

/* The session's time zero (common/timezero.h), which the loader's --time windows count
 * from. 0 when unreadable. */
static uint64_t session_t0(const char *dir)
{
	char path[4300];
	snprintf(path, sizeof(path), "%s/%s", dir, VP_SESSION_STREAM);
	return vp_session_time_zero(path, NULL);
}

/* A copy of p in which each run of kernel frames is one "[kernel]" frame, without
 * locations (so no address at all is written: the writers fall back to one location
 * per frame, address 0). NULL when out of memory. */
static struct vp_profile *fold_kernel(const struct vp_profile *p)
{
	struct vp_profile *q = vp_profile__new();
	uint32_t *fmap = calloc(p->nframes + 1, sizeof(*fmap)), *fr = NULL;
	size_t frcap = 0;
	bool ok = q && fmap;
	for (int i = 0; ok && i < p->nevents; i++)
		ok = vp_profile__add_event(q, p->events[i].name, p->events[i].unit) == i;
	const struct vp_frame kf = { .name = "[kernel]", .image = "[kernel]", .build_id = "", .file = "",
				     .layer = VP_LAYER_KERNEL };
	uint32_t kid = ok ? vp_profile__frame(q, &kf) : UINT32_MAX;
	ok = ok && kid != UINT32_MAX;
	for (size_t i = 0; ok && i < p->nframes; i++) {
		struct vp_frame f = p->frames[i];
		fmap[i] = f.layer == VP_LAYER_KERNEL ? kid : vp_profile__frame(q, &f);
		ok = fmap[i] != UINT32_MAX;
	}
	for (size_t i = 0; ok && i < p->nstacks; i++) {
		const struct vp_stack *st = &p->stacks[i];
		ok = vp_grow((void **)&fr, &frcap, st->nframes + 1, sizeof(*fr)) == 0;
		if (!ok)
			break;
		uint32_t n = 0;
		for (uint32_t k = 0; k < st->nframes; k++) {
			uint32_t id = fmap[st->frames[k]];
			if (id == kid && n && fr[n - 1] == kid)
				continue;   /* one frame for the whole run */
			fr[n++] = id;
		}
		for (int e = 0; ok && e < p->nevents; e++)
			if (st->samples[e] || st->weight[e])
				ok = vp_profile__add(q, fr, n, st->pid, st->tid, st->comm, e, st->samples[e], st->weight[e]) == 0;
	}
	for (size_t i = 0; ok && i < p->nmeta; i++)
		vp_profile__set_meta(q, p->meta[i].key, p->meta[i].value);
	for (size_t i = 0; ok && i < p->nthreads; i++)
		ok = vp_profile__thread_times(q, &p->threads[i]) == 0;
	if (ok) {
		q->lost = p->lost;
		q->incomplete = p->incomplete;
		if (p->warnings)
			vp_profile__warn(q, "%s", p->warnings);
	}
	free(fmap);
	free(fr);
	if (!ok) {
		vp_profile__free(q);
		return NULL;
	}
	return q;
}

/* Loads the parts into one profile and writes it into a memory buffer through the
 * report pipeline `viprof report` uses (report/report_pipeline.h), so that a page and
 * the command give the same bytes for one session. What is the page's own: the title,
 * the parts' windows and the interval's duration, and folding the kernel frames for a
 * client that may not see them (which also drops the time strip: the folded copy keeps
 * no sample times). */
static int render(const struct vp_pages_part *parts, int nparts, uint64_t duration_ns, enum vp_report_format fmt,
		  const char *title, bool fold, char **buf, size_t *len, char *err, size_t errlen)
{
	struct vp_out o = { .width = 120 };
	char lerr[512] = "";
	int e = 0;
	const char *dir = nparts ? parts[0].dir : "";
	*buf = NULL;
	*len = 0;
	struct vp_profile *p = vp_profile__new();
	if (!p) {
		vp_set_err(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (int i = 0; i < nparts; i++) {
		struct vp_session_opts so = { 0 };
		vp_report__session_opts(fmt, &so);
		so.no_locations |= fold;
		dir = parts[i].dir;
		if (parts[i].from_ns || parts[i].to_ns) {
			uint64_t t0 = session_t0(dir);
			/* The loader's window is relative to the session's start; a window
			 * that begins before it starts at 0. */
			so.t_from = parts[i].from_ns > t0 ? (double)(parts[i].from_ns - t0) / 1e9 : 0;
			so.t_to = parts[i].to_ns > t0 ? (double)(parts[i].to_ns - t0) / 1e9 : 1e-9;
		}
		e = vp_session__load(dir, p, &so, lerr, sizeof(lerr));
		if (e) {
			vp_set_err(err, errlen, "cannot read the session %s: %s", dir, lerr[0] ? lerr : strerror(-e));
			goto cleanup;
		}
	}
	if (duration_ns) {
		/* The profile covers exactly the window asked for (the loader would measure
		 * each part from its session's sampling start, which follows its creation,
		 * and adjacent segments overlap by a rotation's time). */
		char d[32];
		snprintf(d, sizeof(d), "%llu", (unsigned long long)duration_ns);
		vp_profile__set_meta(p, "duration_ns", d);
	}
	if (!vp_profile__has_samples(p)) {
		e = -ENODATA;
		vp_set_err(err, errlen, "the session %s holds no sample", dir);
		goto cleanup;
	}
	if (fold) {
		struct vp_profile *q = fold_kernel(p);
		if (!q) {
			e = -ENOMEM;
			vp_set_err(err, errlen, "out of memory");
			goto cleanup;
		}
		vp_profile__free(p);
		p = q;
	}
	o.f = open_memstream(buf, len);
	if (!o.f) {
		e = -errno;
		vp_set_err(err, errlen, "out of memory");
		goto cleanup;
	}
	o.owned = true;
	vp_report__add_views(p, fmt, NULL, false);
	struct vp_report_opts ro = { .title = title };
	e = vp_report__write(p, NULL, fmt, false, &o, &ro);
	int ce = vp_out__close(&o);
	if (!e)
		e = ce;
	if (e)
		vp_set_err(err, errlen, "cannot write the %s of %s: %s", fmt == VP_REPORT_PPROF ? "pprof" : "flame graph", dir,
			   strerror(-e));
cleanup:
	if (e) {
		free(*buf);
		*buf = NULL;
		*len = 0;
	}
	vp_profile__free(p);
	return e;
}

int vp_pages__pprof(const char *dir, bool fold_kernel, char **buf, size_t *len, char *err, size_t errlen)
{
	struct vp_pages_part part = { .dir = dir };
	return render(&part, 1, 0, VP_REPORT_PPROF, NULL, fold_kernel, buf, len, err, errlen);
}

int vp_pages__flame(const char *dir, const char *title, bool fold_kernel, char **buf, size_t *len, char *err,
		    size_t errlen)
{
	struct vp_pages_part part = { .dir = dir };
	return render(&part, 1, 0, VP_REPORT_HTML, title, fold_kernel, buf, len, err, errlen);
}

int vp_pages__pprof_parts(const struct vp_pages_part *parts, int n, uint64_t duration_ns, bool fold_kernel, char **buf,
			  size_t *len, char *err, size_t errlen)
{
	return render(parts, n, duration_ns, VP_REPORT_PPROF, NULL, fold_kernel, buf, len, err, errlen);
}

static void html_escape(FILE *f, const char *s)
{
	for (; s && *s; s++) {
		switch (*s) {
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '&': fputs("&amp;", f); break;
		case '"': fputs("&quot;", f); break;
		case '\'': fputs("&#39;", f); break;
		default: fputc(*s, f);
		}
	}
}

/* A top-level number of meta.json ("  \"samples\": 123,"), or -1. The writer indents
 * top-level keys by two spaces and the "meta" object's by four, so the indented key
 * cannot match a key inside "meta". */
static double json_top_num(const char *json, const char *key)
{
	char pat[80];
	snprintf(pat, sizeof(pat), "\n  \"%s\": ", key);
	const char *p = strstr(json, pat);
	if (!p)
		return -1;
	char *end;
	double v = strtod(p + strlen(pat), &end);
	return end == p + strlen(pat) ? -1 : v;
}

/* Reads a small file under dirfd (never following a link, never blocking) into buf. */
static void read_small(int dirfd, const char *name, char *buf, size_t len)
{
	buf[0] = '\0';
	int fd = dirfd >= 0 ? openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK) : -1;
	if (fd < 0)
		return;
	struct stat st;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
		ssize_t k = vp_read_full(fd, buf, len - 1);
		buf[k > 0 ? k : 0] = '\0';
	}
	close(fd);
}

static int cmp_desc(const void *a, const void *b)
{
	return -strcmp(*(char *const *)a, *(char *const *)b);
}

/* The interval names under dirfd, newest first. */
static int list_intervals(int dirfd, char ***names, size_t *n)
{
	size_t cap = 0;
	*names = NULL;
	*n = 0;
	DIR *d = vp_dir__stream(dirfd);
	if (!d)
		return -errno;
	struct dirent *de;
	int e = 0;
	while ((de = readdir(d))) {
		if (!vp_interval__name_ok(de->d_name))
			continue;
		if (vp_grow((void **)names, &cap, *n + 1, sizeof(**names)) || !((*names)[*n] = strdup(de->d_name))) {
			e = -ENOMEM;
			break;
		}
		(*n)++;
	}
	closedir(d);
	vp_sort(*names, *n, sizeof(**names), cmp_desc);
	return e;
}

int vp_pages__index(const struct vp_pages_status *st, int max, char **buf, size_t *len)
{
	FILE *f = open_memstream(buf, len);
	if (!f)
		return -ENOMEM;
	fputs("<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>viprof serve on ", f);
	html_escape(f, st->hostname);
	fputs("</title>\n<style>body{font:14px sans-serif;margin:2em}table{border-collapse:collapse}"
	      "td,th{padding:2px 10px;text-align:right}td:first-child,th:first-child{text-align:left}"
	      "tr:nth-child(even){background:#f4f4f4}code{background:#eee;padding:1px 4px}</style></head><body>\n", f);
	fputs("<h1>viprof serve on ", f);
	html_escape(f, st->hostname);
	fputs("</h1>\n<p>Whole-VM CPU profile of the next N seconds, gzipped pprof: "
	      "<a href=\"/debug/pprof/profile?seconds=30\"><code>/debug/pprof/profile?seconds=30</code></a> "
	      "(e.g. <code>pprof -http=: http://HOST:PORT/debug/pprof/profile?seconds=30</code>)</p>\n", f);
	if (!st->continuous_dir) {
		fputs("<p>No continuous recording (start the service with <code>--continuous DIR</code>).</p>\n", f);
		goto end;
	}
	fprintf(f, "<h2>Continuous recording</h2>\n<p>Intervals of %u s in <code>", st->interval_s);
	html_escape(f, st->continuous_dir);
	fprintf(f, "</code>, sampling at %llu Hz now; CPU budget %.2f%% of one CPU", (unsigned long long)st->freq,
		st->cpu_budget_pct);
	if (st->current)
		fprintf(f, "; recording %s", st->current);
	fputs(".</p>\n", f);
	if (st->last_error) {
		fputs("<p><b>Last error:</b> ", f);
		html_escape(f, st->last_error);
		fputs("</p>\n", f);
	}
	char **names;
	size_t n;
	/* Through the descriptor the service opened and checked, never DIR's path again
	 * (which may name another directory by now). */
	int e = list_intervals(st->continuous_dirfd, &names, &n);
	if (e) {
		fprintf(f, "<p>Cannot list the intervals: %s</p>\n", strerror(-e));
		goto end;
	}
	fputs("<table><tr><th>interval (UTC start)</th><th>length s</th><th>samples</th><th>rate Hz</th>"
	      "<th>service CPU ms</th><th>CPU % of one</th><th>size KiB</th><th></th><th></th></tr>\n", f);
	int dfd = st->continuous_dirfd;
	for (size_t i = 0; i < n && (int)i < max; i++) {
		if (st->current && !strcmp(names[i], st->current))
			continue;   /* still being written: nothing to show yet */
		char json[16384] = "", svc[2048] = "";
		int sfd = dfd >= 0 ? openat(dfd, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
		read_small(sfd, "meta.json", json, sizeof(json));
		read_small(sfd, VP_CONT_FILE, svc, sizeof(svc));
		uint64_t bytes = sfd >= 0 ? vp_dir__usage(sfd) : 0;
		if (sfd >= 0)
			close(sfd);
		double secs = json_top_num(json, "duration_s"), samples = json_top_num(json, "samples");
		double freq = json_top_num(svc, "freq"), cpu = json_top_num(svc, "cpu_ns"), pct = json_top_num(svc, "cpu_pct");
		fprintf(f, "<tr><td>%s</td>", names[i]);
		if (secs >= 0)
			fprintf(f, "<td>%.1f</td><td>%.0f</td>", secs, samples);
		else
			fputs("<td colspan=2>incomplete (no meta.json)</td>", f);
		if (freq >= 0)
			fprintf(f, "<td>%.0f</td><td>%.0f</td><td>%.2f</td>", freq, cpu / 1e6, pct);
		else
			fputs("<td></td><td></td><td></td>", f);
		fprintf(f, "<td>%.0f</td><td><a href=\"/flame/%s\">flame graph</a></td><td><a href=\"/pprof/%s\">pprof</a>"
			   "</td></tr>\n", (double)bytes / 1024, names[i], names[i]);
	}
	fputs("</table>\n", f);
	if (n == 0)
		fputs("<p>No interval has ended yet.</p>\n", f);
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
end:
	fputs("</body></html>\n", f);
	int err = ferror(f) ? -EIO : 0;
	if (fclose(f) != 0 && !err)
		err = -EIO;
	if (err) {
		free(*buf);
		*buf = NULL;
	}
	return err;
}
