/* viprof serve --continuous DIR --push KIND=TARGET[,OPTION..]: each ended interval is
 * sent to fleet backends that take pushes, as
 *   pyroscope  a gzipped pprof to Pyroscope's ingest API (POST BASE/ingest?name=APP.cpu{
 *              hostname=H}&from=S&until=S&format=pprof&sampleRate=HZ&spyName=viprof)
 *   otlp       OTLP Profiles over HTTP/protobuf (POST PATH, default /v1development/profiles;
 *              report/otlp.h)
 *   clickhouse the fleet store (fleet/fleet.h, docs/fleet.md): the interval's stacks and
 *              its sample rows, two INSERTs ... FORMAT TabSeparated through ClickHouse's
 *              HTTP interface (options database=DB, prefix=P; basic=FILE is ClickHouse's
 *              user:password). A retry sends the same rows, which the tables'
 *              ReplacingMergeTree keys make one.
 * TARGET is https://HOST[:PORT][/PATH], http://HOST[:PORT][/PATH], or unix:/SOCKET (a
 * collector's Unix socket; ,path=P names the HTTP path). Options: bearer=FILE or basic=FILE
 * (a token, or "user:password", read from a file at start), ca=FILE (the CAs that https
 * trusts, in place of the system's), cert=FILE and key=FILE (a client certificate).
 * libcurl speaks HTTP and TLS.
 *
 * Who is sent anything: a socket of this machine is someone's, and whoever binds a
 * backend's port or socket path while it is down would receive the credentials and the
 * whole VM's profiles. So a target on this machine (a loopback or local address, or a
 * Unix socket) is sent nothing unless its socket belongs to root or to a user of
 * --push-owner: a Unix socket's file owner (opened once, checked, and connected through
 * the same open file) and its listener's credentials; a TCP port's listening socket,
 * asked of the kernel (NETLINK_SOCK_DIAG) right before each connection, and the accepted
 * socket again once connected, before a byte is sent. A refused target is retried like
 * one that is down, logged once per change, and counted.
 *
 * Delivery: each target has a queue on disk, DIR/.push/<kind>-<hash of the URL>/, one file
 * per interval, written before the first attempt; a file goes only when the backend
 * answered 2xx (or refused it for good: a 4xx other than 408/429, logged and counted as
 * a failure and a rejected interval). Failed attempts back off (1 s, doubling, at most the
 * interval's length) and are retried oldest first, so a backend that was down gets every
 * interval once it is up, in order; a service restarted finds its queue again. Beyond
 * --push-queue intervals the oldest are dropped, counted and logged. One thread does it
 * all, off the recording's thread. */
#ifndef VIPROF_SERVICE_PUSH_H
#define VIPROF_SERVICE_PUSH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define VP_PUSH_MAX 8
#define VP_PUSH_DEFAULT_QUEUE 1440     /* intervals per target: a day of 60 s intervals */
#define VP_PUSH_MAX_OWNERS 16          /* users of --push-owner */

enum vp_push_kind { VP_PUSH_PYROSCOPE, VP_PUSH_OTLP, VP_PUSH_CLICKHOUSE };
enum vp_push_scheme { VP_PUSH_HTTP, VP_PUSH_HTTPS, VP_PUSH_UNIX };

struct vp_push_target {
	enum vp_push_kind kind;
	enum vp_push_scheme scheme;
	char url[512];                 /* as given, for messages (no credentials in it) */
	char host[256], port[8];       /* http and https */
	char sock[108];                /* unix: the socket's path */
	char path[512];                /* the request's path: .../ingest or the OTLP path */
	char ca[256], cert[256], key[256];   /* https: files, or "" */
	char auth[600];                /* "Bearer ..." or "Basic ...", or "" */
	char db[64], prefix[32];       /* clickhouse: the database and the tables' prefix */
};

/* Parses "pyroscope=TARGET", "otlp=TARGET" or "clickhouse=TARGET" (see above) with the options bearer=FILE or
 * basic=FILE (one line, the file not open to group or others), ca=FILE, cert=FILE,
 * key=FILE (not open to group or others), and path=P for a unix: target.
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
	const char *hostname;          /* copied: NULL or "" asks gethostname() */
	const uid_t *owners;           /* --push-owner: besides root, whose sockets may be sent to */
	int nowners;
	struct vp_svc_metrics *metrics;   /* or NULL */
	FILE *log;
};

struct vp_push;
/* Makes the queues and starts the thread. What o points to is copied, but metrics and
 * log, which must outlive the pusher. NULL with errno and a reason in err. */
struct vp_push *vp_push__start(const struct vp_push_opts *o, char *err, size_t errlen);
/* An interval ended: name under dirfd, its wall-clock span and rate. Encoding and
 * sending happen on the push thread; this only notes it. */
/* The longest interval name it keeps (continuous.h's VP_INTERVAL_NAME_LEN is shorter). */
#define VP_PUSH_NAME_MAX 31
void vp_push__interval(struct vp_push *p, const char *name, uint64_t from_s, uint64_t until_s, uint64_t freq);
/* Stops the thread; what is queued stays on disk for the next start. NULL ok. */
void vp_push__stop(struct vp_push *p);

#endif
