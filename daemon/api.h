/* viprof serve --http: what the HTTP server (daemon/http.h) answers.
 *   GET /debug/pprof/profile?seconds=N   a gzipped pprof of the whole VM for the next N
 *                                        seconds (default 30, at most max_seconds), Go's
 *                                        net/http/pprof convention that pprof and the
 *                                        fleet scrapers use; concurrent requests
 *                                        share one recording, each answered with
 *                                        its own window
 *   GET /                                the index: the continuous intervals
 *   GET /flame/<interval>                an interval's HTML flame graph
 *   GET /pprof/<interval>                an interval's gzipped pprof
 *   GET /metrics                         the service's own figures, Prometheus text format */
#ifndef VIPROF_SERVICE_API_H
#define VIPROF_SERVICE_API_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "daemon/http.h"

#define VP_API_DEFAULT_SECONDS 30
#define VP_API_MAX_SECONDS 300

struct vp_cont;
struct vp_record_opts;
struct vp_svc_metrics;

struct vp_api_opts {
	const char *listen;        /* --http ADDR:PORT */
	const char *token_file;    /* --http-token, or NULL */
	struct vp_http_allow allow;   /* local uids served without the token */
	uint64_t freq;             /* the profile endpoint's rate */
	unsigned max_seconds;      /* 0: VP_API_MAX_SECONDS */
	const struct vp_record_opts *jvm;   /* --jvm-attach's selection, or NULL: all */
	const char *agent;         /* the JVM agent, or NULL: none */
	bool no_jit;
	const char *tmpdir;        /* where profile requests record (default /tmp) */
	struct vp_cont *cont;      /* the continuous recording, or NULL */
	const char *cont_dir;
	unsigned interval_s;
	double cpu_budget_pct;
	struct vp_svc_metrics *metrics;   /* GET /metrics; NULL: 404 */
	FILE *log;
};

struct vp_api;
/* Starts the HTTP server. NULL with errno and a one-line reason in err. */
struct vp_api *vp_api__start(const struct vp_api_opts *o, char *err, size_t errlen);
int vp_api__port(const struct vp_api *a);
void vp_api__stop(struct vp_api *a);   /* accepts NULL */

#endif
