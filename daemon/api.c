/* The HTTP endpoints of viprof serve: see api.h. */
#define _GNU_SOURCE
#include "daemon/api.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/safefs.h"
#include "common/util.h"
#include "daemon/continuous.h"
#include "daemon/http.h"
#include "daemon/metrics.h"
#include "daemon/pages.h"
#include "daemon/rec.h"

/* ---- the shared recording ----
 *
 * Every /debug/pprof/profile request is served from one whole-VM recording, driven by
 * one thread (the hub): the recorder starts when a request wants it and nothing is
 * recording, runs while any request does, and stops when the last one is answered or
 * gone. A request's window is [the moment the hub took it in, + seconds]; when windows
 * end, the hub ends the current segment (a rotation of the recorder when other windows
 * go on, else its stop), so that every segment a window touches is complete, and the
 * request cuts its window out of those segments by time (the session loader's --time)
 * and answers with its own pprof. Windows that end within VP_API_END_GRACE_MS of each
 * other end together: scrapers that asked at the same moment cost one rotation, not
 * one each. Segments live in a private directory and go when no window needs them. */

#define VP_API_END_GRACE_MS 500

enum want_state { WANT_JOIN, WANT_RECORDING, WANT_READY, WANT_FAILED };

struct seg {
	char name[24];             /* "seg-N" under the hub's directory */
	uint64_t start_ns, end_ns; /* CLOCK_MONOTONIC; end 0: being recorded */
	struct seg *next;
};

struct want {
	uint64_t secs_ns;
	uint64_t from_ns, to_ns;   /* the window, set when the hub takes the request in */
	enum want_state state;
	unsigned rec_id;           /* which start of the recorder served it */
	char err[768];
	struct want *next;
};

struct hub {
	pthread_mutex_t lock;
	pthread_cond_t cv;         /* the hub waits on it when idle; requests when waiting */
	pthread_t thread;
	bool started, stopping;
	struct want *wants;
	struct seg *segs;
	int dirfd;                 /* the private directory of the segments */
	char dir[4096];
	unsigned starts, seq;
};

struct vp_api {
	struct vp_api_opts o;
	struct vp_httpd *h;
	struct hub hub;
	char hostname[256];
};

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
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

static bool window_needs(const struct want *w, const struct seg *s)
{
	return w->state != WANT_JOIN && w->state != WANT_FAILED && s->start_ns < w->to_ns &&
	       (!s->end_ns || s->end_ns > w->from_ns);
}

/* Unlinks the finished segments no window needs; their names go to gone[] (removed by
 * the caller, outside the lock). Under the lock. */
static int hub_collect(struct hub *hb, char gone[][24], int max)
{
	int n = 0;
	for (struct seg **sp = &hb->segs; *sp && n < max;) {
		struct seg *s = *sp;
		bool needed = !s->end_ns;
		for (struct want *w = hb->wants; w && !needed; w = w->next)
			needed = window_needs(w, s);
		if (needed) {
			sp = &s->next;
			continue;
		}
		snprintf(gone[n++], 24, "%s", s->name);
		*sp = s->next;
		free(s);
	}
	return n;
}

static void hub_remove(struct vp_api *a, char gone[][24], int n)
{
	for (int i = 0; i < n; i++)
		vp_safe_remove_tree(a->hub.dirfd, gone[i]);
}

/* A new segment record, being recorded from now. Under the lock. */
static struct seg *seg_new(struct hub *hb)
{
	struct seg *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	snprintf(s->name, sizeof(s->name), "seg-%u", ++hb->seq);
	s->start_ns = mono_ns();
	struct seg **sp = &hb->segs;
	while (*sp)
		sp = &(*sp)->next;
	*sp = s;
	return s;
}

static void seg_drop(struct hub *hb, struct seg *s)
{
	for (struct seg **sp = &hb->segs; *sp; sp = &(*sp)->next)
		if (*sp == s) {
			*sp = s->next;
			free(s);
			return;
		}
}

static void fail_wants(struct hub *hb, enum want_state from, const char *err)
{
	for (struct want *w = hb->wants; w; w = w->next)
		if (w->state == from) {
			w->state = WANT_FAILED;
			snprintf(w->err, sizeof(w->err), "%s", err);
		}
}

/* The hub thread's recording: the recorder, its current segment, the requests it answered and
 * when it started, and the recorder's last error (one buffer, as the calls on it leave it).
 * Only the hub thread touches it. */
struct hub_run {
	struct vp_svc_rec *r;
	struct seg *cur;
	unsigned served;
	uint64_t t0;
	char err[768];
};

/* Starts the shared recording for the joining requests (their windows begin once it samples),
 * or fails them. Under the lock, dropped while the recorder starts. */
static void hub_start(struct vp_api *a, struct hub_run *run)
{
	struct hub *hb = &a->hub;
	char *err = run->err, path[4200];
	size_t errlen = sizeof(run->err);
	struct seg *s = seg_new(hb);
	if (!s) {
		fail_wants(hb, WANT_JOIN, "out of memory");
		pthread_cond_broadcast(&hb->cv);
		return;
	}
	unsigned id = ++hb->starts;
	snprintf(path, sizeof(path), "%s/%s", hb->dir, s->name);
	struct vp_svc_rec_opts ro = { .parent_fd = hb->dirfd, .name = s->name, .dir = path,
				      .freq = a->o.freq, .jvm = a->o.jvm, .agent = a->o.agent,
				      .no_jit = a->o.no_jit, .log = a->o.log };
	pthread_mutex_unlock(&hb->lock);
	err[0] = '\0';
	struct vp_svc_rec *nr = vp_svc_rec__start(&ro, err, errlen);
	pthread_mutex_lock(&hb->lock);
	if (!nr) {
		seg_drop(hb, s);
		fail_wants(hb, WANT_JOIN, err[0] ? err : "cannot start the recording");
		pthread_cond_broadcast(&hb->cv);
		return;
	}
	run->r = nr;
	run->cur = s;
	run->served = 0;
	run->t0 = mono_ns();
	int n = 0;
	for (struct want *w = hb->wants; w; w = w->next)
		n += w->state == WANT_JOIN;
	if (a->o.log)
		fprintf(a->o.log, "viprof serve: http: shared recording #%u started for %d request(s)\n", id, n);
}

/* Waits for the recording until end_at at most 100 ms; one that ends by itself (it has no
 * duration) failed, and so did the windows on it. Under the lock, dropped while waiting. */
static void hub_wait(struct vp_api *a, struct hub_run *run, uint64_t now, uint64_t end_at)
{
	struct hub *hb = &a->hub;
	char *err = run->err;
	uint64_t left_ms = (end_at - now) / 1000000 + 1;
	pthread_mutex_unlock(&hb->lock);
	int p = vp_svc_rec__poll(run->r, left_ms > 100 ? 100 : (int)left_ms);
	pthread_mutex_lock(&hb->lock);
	if (p <= 0) {
		pthread_mutex_unlock(&hb->lock);
		vp_svc_rec__stop(run->r, err, sizeof(run->err));
		vp_svc_rec__free(run->r);
		pthread_mutex_lock(&hb->lock);
		run->r = NULL;
		run->cur->end_ns = mono_ns();
		fail_wants(hb, WANT_RECORDING, err[0] ? err : "the recording failed");
		pthread_cond_broadcast(&hb->cv);
	}
}

/* The windows due end now: the segment ends, by a rotation when other windows go on, else by
 * the recorder's stop; either way it is complete when they read it. Under the lock. */
static void hub_end_due(struct vp_api *a, struct hub_run *run, uint64_t now)
{
	struct hub *hb = &a->hub;
	char *err = run->err, path[4200];
	size_t errlen = sizeof(run->err);
	int due = 0, rest = 0;
	for (struct want *w = hb->wants; w; w = w->next)
		if (w->state == WANT_RECORDING) {
			if (w->to_ns <= now)
				due++;
			else
				rest++;
		}
	struct seg *old = run->cur;
	bool failed = false;
	if (rest) {
		struct seg *s = seg_new(hb);
		snprintf(path, sizeof(path), "%s/%s", hb->dir, s ? s->name : "?");
		pthread_mutex_unlock(&hb->lock);
		int e = s ? vp_svc_rec__rotate(run->r, hb->dirfd, s->name, path, err, errlen) : -ENOMEM;
		pthread_mutex_lock(&hb->lock);
		uint64_t t = mono_ns();
		if (e == 0) {
			old->end_ns = t;
			s->start_ns = t < s->start_ns ? t : s->start_ns;
			run->cur = s;
		} else {
			/* Not rotated: the recorder stops, the windows due are answered from
			 * what it has, and the others start over with a new one. */
			if (s)
				seg_drop(hb, s);
			if (a->o.log)
				fprintf(a->o.log, "viprof serve: http: cannot rotate the shared recording: %s\n", err);
			failed = true;
		}
	}
	if (!rest || failed) {
		pthread_mutex_unlock(&hb->lock);
		int e = vp_svc_rec__stop(run->r, err, errlen);
		vp_svc_rec__free(run->r);
		pthread_mutex_lock(&hb->lock);
		run->r = NULL;
		old->end_ns = mono_ns();
		if (e)
			fail_wants(hb, WANT_RECORDING, err);
	}
	for (struct want *w = hb->wants; w; w = w->next) {
		if (w->state != WANT_RECORDING)
			continue;
		if (w->to_ns <= now) {
			w->state = WANT_READY;
			run->served++;
		} else if (failed) {
			w->state = WANT_JOIN;   /* a new window, on the next recorder */
		}
	}
	if (!run->r && a->o.log)
		fprintf(a->o.log, "viprof serve: http: shared recording #%u stopped after %.1f s (%u request(s) "
			"answered from it)\n", hb->starts, (double)(mono_ns() - run->t0) / 1e9, run->served);
	pthread_cond_broadcast(&hb->cv);
}

static void *hub_thread(void *arg)
{
	struct vp_api *a = arg;
	struct hub *hb = &a->hub;
	struct hub_run run = { 0 };
	char gone[64][24];

	pthread_mutex_lock(&hb->lock);
	while (!hb->stopping) {
		int ng = hub_collect(hb, gone, 64);
		if (ng) {
			pthread_mutex_unlock(&hb->lock);
			hub_remove(a, gone, ng);
			pthread_mutex_lock(&hb->lock);
			continue;
		}
		int joining = 0, recording = 0;
		uint64_t min_to = UINT64_MAX;
		for (struct want *w = hb->wants; w; w = w->next) {
			joining += w->state == WANT_JOIN;
			if (w->state == WANT_RECORDING) {
				recording++;
				if (w->to_ns < min_to)
					min_to = w->to_ns;
			}
		}
		if (!joining && !recording) {
			if (run.r) {
				/* Everyone left (hung up): nothing to answer, the recording ends. */
				pthread_mutex_unlock(&hb->lock);
				vp_svc_rec__stop(run.r, NULL, 0);
				vp_svc_rec__free(run.r);
				pthread_mutex_lock(&hb->lock);
				run.r = NULL;
				run.cur->end_ns = mono_ns();
				if (a->o.log)
					fprintf(a->o.log, "viprof serve: http: shared recording #%u stopped after %.1f s: no "
						"request wants it any more (%u answered)\n", hb->starts,
						(double)(mono_ns() - run.t0) / 1e9, run.served);
				continue;
			}
			pthread_cond_wait(&hb->cv, &hb->lock);
			continue;
		}
		if (!run.r) {
			hub_start(a, &run);
			continue;   /* take them in below, with the time it really started */
		}
		uint64_t now = mono_ns();
		for (struct want *w = hb->wants; w; w = w->next)
			if (w->state == WANT_JOIN) {
				w->state = WANT_RECORDING;
				w->from_ns = now;
				w->to_ns = now + w->secs_ns;
				w->rec_id = hb->starts;
				if (w->to_ns < min_to)
					min_to = w->to_ns;
				recording++;
			}
		/* Windows that end within the grace of the first end together. */
		uint64_t end_at = min_to;
		for (struct want *w = hb->wants; w; w = w->next)
			if (w->state == WANT_RECORDING && w->to_ns <= min_to + VP_API_END_GRACE_MS * 1000000ull &&
			    w->to_ns > end_at)
				end_at = w->to_ns;
		if (now < end_at)
			hub_wait(a, &run, now, end_at);
		else
			hub_end_due(a, &run, now);
	}
	pthread_mutex_unlock(&hb->lock);
	if (run.r) {
		vp_svc_rec__stop(run.r, NULL, 0);
		vp_svc_rec__free(run.r);
	}
	return NULL;
}

static void want_unlink(struct hub *hb, struct want *w)
{
	for (struct want **wp = &hb->wants; *wp; wp = &(*wp)->next)
		if (*wp == w) {
			*wp = w->next;
			return;
		}
}

/* GET /debug/pprof/profile?seconds=N: a window of N seconds of the shared recording. */
static void profile(struct vp_api *a, const struct vp_http_req *req, struct vp_http_conn *c)
{
	struct hub *hb = &a->hub;
	unsigned max = a->o.max_seconds ? a->o.max_seconds : VP_API_MAX_SECONDS;
	char v[32], err[768] = "", extra[160];
	long long secs = VP_API_DEFAULT_SECONDS;
	if (vp_http__query(req->query, "seconds", v, sizeof(v)) && (secs = vp_parse_num(v, 1, max)) < 0) {
		vp_http__respond_text(c, 400, "seconds=%s: expected a whole number from 1 to %u", v, max);
		return;
	}
	struct want *w = calloc(1, sizeof(*w));
	struct vp_pages_part *parts = NULL;
	char (*names)[4200] = NULL;
	int nparts = 0;
	if (!w) {
		vp_http__respond_text(c, 503, "out of memory");
		return;
	}
	w->secs_ns = (uint64_t)secs * 1000000000ull;
	w->state = WANT_JOIN;
	pthread_mutex_lock(&hb->lock);
	w->next = hb->wants;
	hb->wants = w;
	pthread_cond_broadcast(&hb->cv);
	/* Waits for the window's end. A client that hangs up leaves at once (its window is
	 * dropped; the recording ends when nobody else wants it). A stuck recorder is
	 * bounded: 30 s past the window. */
	uint64_t deadline = mono_ns() + w->secs_ns + 30000000000ull;
	while (w->state == WANT_JOIN || w->state == WANT_RECORDING) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 200000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&hb->cv, &hb->lock, &ts);
		if (w->state != WANT_JOIN && w->state != WANT_RECORDING)
			break;
		bool stop = hb->stopping;
		pthread_mutex_unlock(&hb->lock);
		bool gone = vp_http__cancelled(c);
		if (gone && a->o.log)
			fprintf(a->o.log, "viprof serve: http %s: the client went away; its window is dropped\n",
				vp_http__peer(c));
		bool late = mono_ns() > deadline;
		pthread_mutex_lock(&hb->lock);
		if (gone || stop || late) {
			want_unlink(hb, w);
			pthread_cond_broadcast(&hb->cv);
			pthread_mutex_unlock(&hb->lock);
			if (late && !gone)
				vp_http__respond_text(c, 500, "the recording did not end in time; see the service's log");
			else if (stop && !gone)
				vp_http__respond_text(c, 503, "the service is stopping");
			free(w);
			return;
		}
	}
	if (w->state == WANT_READY) {
		int cap = 0;
		for (struct seg *s = hb->segs; s; s = s->next)
			cap += window_needs(w, s);
		parts = calloc((size_t)cap + 1, sizeof(*parts));
		names = calloc((size_t)cap + 1, sizeof(*names));
		for (struct seg *s = hb->segs; parts && names && s; s = s->next)
			if (window_needs(w, s)) {
				/* Read through the directory's descriptor, never its path again. */
				snprintf(names[nparts], sizeof(names[0]), "/proc/self/fd/%d/%s", hb->dirfd, s->name);
				parts[nparts] = (struct vp_pages_part){ .dir = names[nparts], .from_ns = w->from_ns,
									.to_ns = w->to_ns };
				nparts++;
			}
	}
	pthread_mutex_unlock(&hb->lock);

	if (w->state == WANT_FAILED) {
		vp_http__respond_text(c, 500, "%s", w->err);
	} else if (!parts || !names) {
		vp_http__respond_text(c, 503, "out of memory");
	} else {
		char *buf = NULL;
		size_t len = 0;
		int e = vp_pages__pprof_parts(parts, nparts, w->to_ns - w->from_ns, !vp_http__kernel_ok(c), &buf, &len, err, sizeof(err));
		snprintf(extra, sizeof(extra), "Content-Disposition: attachment; filename=\"profile\"\r\n"
			 "X-Viprof-Recording: %u", w->rec_id);
		send_buf(c, e, err, "application/octet-stream", extra, buf, len);
	}
	/* Done with the segments: the hub may remove what no other window needs. */
	pthread_mutex_lock(&hb->lock);
	want_unlink(hb, w);
	pthread_cond_broadcast(&hb->cv);
	pthread_mutex_unlock(&hb->lock);
	free(parts);
	free(names);
	free(w);
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
	/* Through DIR's descriptor (opened once, checked root's): its path is not walked again. */
	snprintf(path, sizeof(path), "/proc/self/fd/%d/%s", vp_cont__dirfd(a->o.cont), name);
	struct stat st;
	if (fstatat(vp_cont__dirfd(a->o.cont), name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode)) {
		vp_http__respond_text(c, 404, "no interval %s (removed by retention, or never recorded; see /)", name);
		return;
	}
	char *buf = NULL;
	size_t len = 0;
	int e;
	if (flame) {
		snprintf(title, sizeof(title), "%s: whole VM, interval %s", a->hostname, name);
		e = vp_pages__flame(path, title, !vp_http__kernel_ok(c), &buf, &len, err, sizeof(err));
		send_buf(c, e, err, "text/html; charset=utf-8", NULL, buf, len);
	} else {
		e = vp_pages__pprof(path, !vp_http__kernel_ok(c), &buf, &len, err, sizeof(err));
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
				      .continuous_dirfd = a->o.cont ? vp_cont__dirfd(a->o.cont) : -1,
				      .interval_s = a->o.interval_s, .cpu_budget_pct = a->o.cpu_budget_pct,
				      .freq = freq, .current = cur[0] ? cur : NULL,
				      .last_error = lasterr[0] ? lasterr : NULL };
	char *buf = NULL;
	size_t len = 0;
	int e = vp_pages__index(&st, 500, &buf, &len);
	send_buf(c, e, "cannot build the index page", "text/html; charset=utf-8", NULL, buf, len);
}

/* GET /metrics: what the service says about itself (daemon/metrics.h). Behind the
 * same peer rules as every path: the figures name no process, but the push targets'
 * addresses and the service's activity are the operator's to see. */
static void metrics(struct vp_api *a, struct vp_http_conn *c)
{
	if (!a->o.metrics) {
		vp_http__respond_text(c, 404, "no metrics in this service");
		return;
	}
	pthread_mutex_lock(&a->o.metrics->lock);
	a->o.metrics->scrapes++;
	pthread_mutex_unlock(&a->o.metrics->lock);
	char *buf = NULL;
	size_t len = 0;
	int e = vp_svc_metrics__render(a->o.metrics, &buf, &len);
	send_buf(c, e, "out of memory", "text/plain; version=0.0.4; charset=utf-8", NULL, buf, len);
}

static void handle(void *ctx, const struct vp_http_req *req, struct vp_http_conn *c)
{
	struct vp_api *a = ctx;
	if (!strcmp(req->path, "/debug/pprof/profile")) {
		if (a->o.metrics) {
			pthread_mutex_lock(&a->o.metrics->lock);
			a->o.metrics->profile_requests++;
			pthread_mutex_unlock(&a->o.metrics->lock);
		}
		profile(a, req, c);
	} else if (!strcmp(req->path, "/metrics")) {
		metrics(a, c);
	} else if (!strcmp(req->path, "/") || !strcmp(req->path, "/index.html"))
		index_page(a, c);
	else if (!strncmp(req->path, "/flame/", 7))
		interval(a, req->path + 7, true, c);
	else if (!strncmp(req->path, "/pprof/", 7))
		interval(a, req->path + 7, false, c);
	else
		vp_http__respond_text(c, 404, "no page %s; see / for what is served", req->path);
}

/* The segments' private directory: made 0700 under tmpdir, opened once; checked ours. */
static int hub_init(struct vp_api *a, char *err, size_t errlen)
{
	struct hub *hb = &a->hub;
	const char *tmp = a->o.tmpdir ? a->o.tmpdir : "/tmp";
	struct stat st;
	hb->dirfd = -1;
	snprintf(hb->dir, sizeof(hb->dir), "%s/viprof-http-XXXXXX", tmp);
	if (!mkdtemp(hb->dir)) {
		int e = errno;
		vp_set_err(err, errlen, "--tmpdir %s: cannot make a directory for the profile requests' recording: %s", tmp,
			   strerror(e));
		return -e;
	}
	hb->dirfd = open(hb->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (hb->dirfd < 0 || fstat(hb->dirfd, &st) != 0 || st.st_uid != geteuid() || (st.st_mode & 077)) {
		int e = hb->dirfd < 0 ? errno : EPERM;
		vp_set_err(err, errlen, "--tmpdir %s: the directory %s just made is not ours alone: %s", tmp, hb->dir,
			   strerror(e));
		if (hb->dirfd >= 0)
			close(hb->dirfd);
		hb->dirfd = -1;
		return -e;
	}
	pthread_mutex_init(&hb->lock, NULL);
	pthread_cond_init(&hb->cv, NULL);
	int e = pthread_create(&hb->thread, NULL, hub_thread, a);
	if (e) {
		vp_set_err(err, errlen, "cannot start the profile requests' thread: %s", strerror(e));
		pthread_mutex_destroy(&hb->lock);
		pthread_cond_destroy(&hb->cv);
		close(hb->dirfd);
		rmdir(hb->dir);
		hb->dirfd = -1;
		return -e;
	}
	hb->started = true;
	return 0;
}

static void hub_fini(struct vp_api *a)
{
	struct hub *hb = &a->hub;
	if (!hb->started)
		return;
	pthread_mutex_lock(&hb->lock);
	hb->stopping = true;
	pthread_cond_broadcast(&hb->cv);
	pthread_mutex_unlock(&hb->lock);
	pthread_join(hb->thread, NULL);
	while (hb->segs) {
		struct seg *s = hb->segs;
		hb->segs = s->next;
		free(s);
	}
	vp_safe_empty_dir(hb->dirfd);
	close(hb->dirfd);
	rmdir(hb->dir);
	pthread_mutex_destroy(&hb->lock);
	pthread_cond_destroy(&hb->cv);
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
	int e = hub_init(a, err, errlen);
	if (e) {
		free(a);
		errno = -e;
		return NULL;
	}
	struct vp_httpd_opts ho = { .listen = o->listen, .token_file = o->token_file, .allow = o->allow,
				    .handler = handle, .ctx = a, .log = o->log };
	a->h = vp_httpd__start(&ho, err, errlen);
	if (!a->h) {
		e = errno;
		hub_fini(a);
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
	/* The server first: its handlers see the stop and leave their windows; then the
	 * hub ends the recording and the segments go. */
	vp_httpd__stop(a->h);
	hub_fini(a);
	free(a);
}
