/* The HTTP endpoints of viprof serve: see api.h. */
#define _GNU_SOURCE
#include "service/api.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/safefs.h"
#include "common/util.h"
#include "service/continuous.h"
#include "service/http.h"
#include "service/pages.h"
#include "service/rec.h"

struct vp_api {
	struct vp_api_opts o;
	struct vp_httpd *h;
	atomic_int profiling;      /* a /debug/pprof/profile request is recording */
	char hostname[256];
};

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void send_buf(struct vp_http_conn *c, int e, const char *err, const char *ctype, const char *extra, char *buf,
		     size_t len)
{
	if (e == -ENOENT)
		vp_http__respond_text(c, 404, "%s", err);
	else if (e == -ENODATA)
		vp_http__respond_text(c, 503, "%s", err);
	else if (e)
		vp_http__respond_text(c, 500, "%s", err);
	else
		vp_http__respond(c, 200, ctype, extra, buf, len);
	free(buf);
}

/* GET /debug/pprof/profile?seconds=N: records the whole VM for N seconds into a
 * private temporary directory, answers with its pprof, removes it. */
static void profile(struct vp_api *a, const struct vp_http_req *req, struct vp_http_conn *c)
{
	unsigned max = a->o.max_seconds ? a->o.max_seconds : VP_API_MAX_SECONDS;
	char v[32], tmpl[4096], sess[4200], err[768] = "";
	long long secs = VP_API_DEFAULT_SECONDS;
	if (vp_http__query(req->query, "seconds", v, sizeof(v)) && (secs = vp_parse_num(v, 1, max)) < 0) {
		vp_http__respond_text(c, 400, "seconds=%s: expected a whole number from 1 to %u", v, max);
		return;
	}
	int expected = 0;
	if (!atomic_compare_exchange_strong(&a->profiling, &expected, 1)) {
		vp_http__respond_text(c, 503, "a profile is being recorded for another request; retry when it is done "
				      "(one at a time keeps the service's cost bounded)");
		return;
	}
	snprintf(tmpl, sizeof(tmpl), "%s/viprof-http-XXXXXX", a->o.tmpdir ? a->o.tmpdir : "/tmp");
	struct vp_svc_rec *r = NULL;
	char *buf = NULL;
	size_t len = 0;
	int e = 0, tfd = -1;
	if (!mkdtemp(tmpl)) {
		vp_http__respond_text(c, 500, "cannot make a directory under %s: %s", a->o.tmpdir ? a->o.tmpdir : "/tmp",
				      strerror(errno));
		goto cleanup;
	}
	tfd = open(tmpl, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	snprintf(sess, sizeof(sess), "%s/session", tmpl);
	struct vp_svc_rec_opts ro = { .dir = sess, .freq = a->o.freq, .seconds = (double)secs, .jvm = a->o.jvm,
				      .agent = a->o.agent, .no_jit = a->o.no_jit, .log = a->o.log };
	r = vp_svc_rec__start(&ro, err, sizeof(err));
	if (!r) {
		vp_http__respond_text(c, 500, "%s", err);
		goto cleanup;
	}
	/* The recording ends by its own -d; a client that hangs up ends it early, and
	 * nothing is sent (there is nobody to read it). A bound stops a stuck recorder. */
	uint64_t deadline = mono_ms() + (uint64_t)secs * 1000 + 30000;
	int p;
	while ((p = vp_svc_rec__poll(r, 200)) > 0) {
		if (vp_http__cancelled(c)) {
			if (a->o.log)
				fprintf(a->o.log, "viprof serve: http %s: the client went away; recording stopped\n",
					vp_http__peer(c));
			vp_svc_rec__stop(r, NULL, 0);
			c = NULL;
			goto cleanup;
		}
		if (mono_ms() > deadline)
			break;
	}
	e = vp_svc_rec__stop(r, err, sizeof(err));
	if (e || p < 0) {
		vp_http__respond_text(c, 500, "%s", err[0] ? err : "the recording failed");
		goto cleanup;
	}
	e = vp_pages__pprof(sess, &buf, &len, err, sizeof(err));
	send_buf(c, e, err, "application/octet-stream", "Content-Disposition: attachment; filename=\"profile\"", buf, len);
cleanup:
	vp_svc_rec__free(r);
	if (tfd >= 0) {
		/* Through the directory's descriptor: nothing outside it can be reached. */
		vp_safe_empty_dir(tfd);
		close(tfd);
		rmdir(tmpl);
	}
	atomic_store(&a->profiling, 0);
}

/* /flame/<interval> and /pprof/<interval>. */
static void interval(struct vp_api *a, const char *name, bool flame, struct vp_http_conn *c)
{
	char cur[VP_INTERVAL_NAME_LEN + 1] = "", lasterr[8], path[4200], err[768] = "", title[512];
	uint64_t freq;
	if (!a->o.cont) {
		vp_http__respond_text(c, 404, "no continuous recording: start viprof serve with --continuous DIR");
		return;
	}
	if (!vp_interval__name_ok(name)) {
		vp_http__respond_text(c, 404, "'%s' is not an interval name (YYYYmmddTHHMMSSZ; see the index at /)", name);
		return;
	}
	vp_cont__status(a->o.cont, cur, sizeof(cur), &freq, lasterr, sizeof(lasterr));
	if (!strcmp(cur, name)) {
		vp_http__respond_text(c, 404, "interval %s is still being recorded; it can be read when it ends", name);
		return;
	}
	snprintf(path, sizeof(path), "%s/%s", a->o.cont_dir, name);
	struct stat st;
	if (lstat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
		vp_http__respond_text(c, 404, "no interval %s (removed by retention, or never recorded; see /)", name);
		return;
	}
	char *buf = NULL;
	size_t len = 0;
	int e;
	if (flame) {
		snprintf(title, sizeof(title), "%s: whole VM, interval %s", a->hostname, name);
		e = vp_pages__flame(path, title, &buf, &len, err, sizeof(err));
		send_buf(c, e, err, "text/html; charset=utf-8", NULL, buf, len);
	} else {
		e = vp_pages__pprof(path, &buf, &len, err, sizeof(err));
		send_buf(c, e, err, "application/octet-stream", NULL, buf, len);
	}
}

static void index_page(struct vp_api *a, struct vp_http_conn *c)
{
	char cur[VP_INTERVAL_NAME_LEN + 1] = "", lasterr[512] = "";
	uint64_t freq = 0;
	if (a->o.cont)
		vp_cont__status(a->o.cont, cur, sizeof(cur), &freq, lasterr, sizeof(lasterr));
	struct vp_pages_status st = { .hostname = a->hostname, .continuous_dir = a->o.cont ? a->o.cont_dir : NULL,
				      .interval_s = a->o.interval_s, .cpu_budget_pct = a->o.cpu_budget_pct,
				      .freq = freq, .current = cur[0] ? cur : NULL,
				      .last_error = lasterr[0] ? lasterr : NULL };
	char *buf = NULL;
	size_t len = 0;
	int e = vp_pages__index(&st, 500, &buf, &len);
	send_buf(c, e, "cannot build the index page", "text/html; charset=utf-8", NULL, buf, len);
}

static void handle(void *ctx, const struct vp_http_req *req, struct vp_http_conn *c)
{
	struct vp_api *a = ctx;
	if (!strcmp(req->path, "/debug/pprof/profile"))
		profile(a, req, c);
	else if (!strcmp(req->path, "/") || !strcmp(req->path, "/index.html"))
		index_page(a, c);
	else if (!strncmp(req->path, "/flame/", 7))
		interval(a, req->path + 7, true, c);
	else if (!strncmp(req->path, "/pprof/", 7))
		interval(a, req->path + 7, false, c);
	else
		vp_http__respond_text(c, 404, "no page %s; see / for what is served", req->path);
}

struct vp_api *vp_api__start(const struct vp_api_opts *o, char *err, size_t errlen)
{
	struct vp_api *a = calloc(1, sizeof(*a));
	if (!a) {
		vp_set_err(err, errlen, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	a->o = *o;
	if (gethostname(a->hostname, sizeof(a->hostname)) != 0)
		snprintf(a->hostname, sizeof(a->hostname), "?");
	a->hostname[sizeof(a->hostname) - 1] = '\0';
	struct vp_httpd_opts ho = { .listen = o->listen, .token_file = o->token_file, .handler = handle, .ctx = a,
				    .log = o->log };
	a->h = vp_httpd__start(&ho, err, errlen);
	if (!a->h) {
		int e = errno;
		free(a);
		errno = e;
		return NULL;
	}
	return a;
}

int vp_api__port(const struct vp_api *a)
{
	return vp_httpd__port(a->h);
}

void vp_api__stop(struct vp_api *a)
{
	if (!a)
		return;
	vp_httpd__stop(a->h);
	free(a);
}
