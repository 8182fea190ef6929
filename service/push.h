/* viprof serve --continuous DIR --push KIND=URL[,bearer=FILE|,basic=FILE]: each ended
 * interval is sent to fleet backends that take pushes, as
 *   pyroscope  a gzipped pprof to Pyroscope's ingest API (POST URL/ingest?name=APP.cpu{
 *              hostname=H}&from=S&until=S&format=pprof&sampleRate=HZ&spyName=viprof)
 *   otlp       OTLP Profiles over HTTP/protobuf (POST URL, default path
 *              /v1development/profiles; service/otlp.h)
 * with a bearer token or basic auth ("user:password") read from a file at start.
 *
 * Delivery: each target has a queue on disk, DIR/.push/<kind>-<hash of the URL>/, one file
 * per interval, written before the first attempt; a file goes only when the backend
 * answered 2xx (or refused it for good: a 4xx other than 408/429, logged and counted as
 * a failure). Failed attempts back off (1 s, doubling, at most the interval's length)
 * and are retried oldest first, so a backend that was down gets every interval once it
 * is up, in order; a service restarted finds its queue again. Beyond --push-queue
 * intervals the oldest are dropped, counted and logged. One thread does it all, off the
 * recording's thread. Plain http only: TLS is a local agent's job (Alloy, the Collector). */
#ifndef VIPROF_SERVICE_PUSH_H
#define VIPROF_SERVICE_PUSH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define VP_PUSH_MAX 8
#define VP_PUSH_DEFAULT_QUEUE 1440     /* intervals per target: a day of 60 s intervals */

enum vp_push_kind { VP_PUSH_PYROSCOPE, VP_PUSH_OTLP };

struct vp_push_target {
	enum vp_push_kind kind;
	char url[512];                 /* as given, for messages (no credentials in it) */
	char host[256], port[8];
	char path[512];                /* the request's path: .../ingest or the OTLP path */
	char auth[600];                /* "Bearer ..." or "Basic ...", or "" */
};

/* Parses "pyroscope=http://H:P[/BASE]" or "otlp=http://H:P[/PATH]" with an optional
 * ",bearer=FILE" or ",basic=FILE" (the file one line, not open to group or others).
 * 0, or -EINVAL/-errno with a one-line reason in err. */
int vp_push__parse(const char *spec, struct vp_push_target *t, char *err, size_t errlen);

struct vp_svc_metrics;

struct vp_push_opts {
	const struct vp_push_target *targets;
	int ntargets;
	int dirfd;                     /* the continuous DIR (root's, checked): queues live under it */
	unsigned queue_max;            /* intervals per target; 0: VP_PUSH_DEFAULT_QUEUE */
	unsigned interval_s;           /* the back-off's ceiling */
	const char *app;               /* Pyroscope application name / OTLP service.name */
	const char *hostname;
	struct vp_svc_metrics *metrics;   /* or NULL */
	FILE *log;
};

struct vp_push;
/* Makes the queues and starts the thread. NULL with errno and a reason in err. */
struct vp_push *vp_push__start(const struct vp_push_opts *o, char *err, size_t errlen);
/* An interval ended: name under dirfd, its wall-clock span and rate. Encoding and
 * sending happen on the push thread; this only notes it. */
/* The longest interval name it keeps (continuous.h's VP_INTERVAL_NAME_LEN is shorter). */
#define VP_PUSH_NAME_MAX 31
void vp_push__interval(struct vp_push *p, const char *name, uint64_t from_s, uint64_t until_s, uint64_t freq);
/* Stops the thread; what is queued stays on disk for the next start. NULL ok. */
void vp_push__stop(struct vp_push *p);

#endif
