/* Pushing intervals to fleet backends: see push.h. */
#define _GNU_SOURCE
#include "daemon/push.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <curl/curl.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stddef.h>
#include <pthread.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/safefs.h"
#include "common/util.h"
#include "fleet/fleet.h"
#include "postproc/profile.h"
#include "postproc/session.h"
#include "daemon/http.h"
#include "daemon/metrics.h"
#include "report/otlp.h"
#include "daemon/pages.h"

#define PUSH_TIMEOUT_S 10       /* connect, send, and the answer's status line */
#define QNAME_LEN 96

/* ---- options ---- */

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static void base64(const char *in, char *out, size_t outlen)
{
	size_t n = strlen(in), o = 0;
	for (size_t i = 0; i < n && o + 5 < outlen; i += 3) {
		uint32_t v = (uint32_t)(unsigned char)in[i] << 16;
		if (i + 1 < n)
			v |= (uint32_t)(unsigned char)in[i + 1] << 8;
		if (i + 2 < n)
			v |= (unsigned char)in[i + 2];
		out[o++] = b64[v >> 18 & 63];
		out[o++] = b64[v >> 12 & 63];
		out[o++] = i + 1 < n ? b64[v >> 6 & 63] : '=';
		out[o++] = i + 2 < n ? b64[v & 63] : '=';
	}
	out[o] = '\0';
}

/* basic=FILE: the Authorization header's value for the user:password it holds. */
static int read_basic(const char *path, char *out, size_t outlen, char *err, size_t errlen)
{
	char line[400];
	int ret = vp_safe_read_userpass("basic", path, line, sizeof(line), err, errlen);
	if (ret)
		return ret;
	char enc[540];
	base64(line, enc, sizeof(enc));
	snprintf(out, outlen, "Basic %s", enc);
	explicit_bzero(line, sizeof(line));
	return 0;
}

/* A file root will read at each connection (a CA bundle, a client certificate or key):
 * a regular file now; a key must not be open to group or others. */
static int check_file(const char *spec, const char *opt, const char *path, bool secret, char *err, size_t errlen)
{
	struct stat st;
	int fd = vp_safe_open_regular_stat(path, &st);
	if (fd < 0) {
		vp_set_err(err, errlen, "--push %s: %s=%s: cannot read it (%s): give a regular file in PEM form", spec,
			   opt, path, strerror(-fd));
		return fd;
	}
	close(fd);
	if (secret && (st.st_mode & 077)) {
		vp_set_err(err, errlen, "--push %s: %s=%s is open to group or others (mode %04o): chmod 600 %s", spec, opt,
			   path, (unsigned)(st.st_mode & 07777), path);
		return -EPERM;
	}
	return 0;
}

int vp_push__parse(const char *spec, struct vp_push_target *t, char *err, size_t errlen)
{
	memset(t, 0, sizeof(*t));
	char buf[1024];
	snprintf(buf, sizeof(buf), "%s", spec);
	char *eq = strchr(buf, '=');
	if (!eq) {
		vp_set_err(err, errlen, "--push %s: expected pyroscope=URL or otlp=URL (URL https://.., http://.. or "
			   "unix:/SOCKET, with ,bearer=FILE or ,basic=FILE)", spec);
		return -EINVAL;
	}
	*eq = '\0';
	if (!strcmp(buf, "pyroscope"))
		t->kind = VP_PUSH_PYROSCOPE;
	else if (!strcmp(buf, "otlp"))
		t->kind = VP_PUSH_OTLP;
	else if (!strcmp(buf, "clickhouse"))
		t->kind = VP_PUSH_CLICKHOUSE;
	else {
		vp_set_err(err, errlen, "--push %s: unknown kind '%s': pyroscope, otlp or clickhouse", spec, buf);
		return -EINVAL;
	}
	char *url = eq + 1, *opt = strchr(url, ',');
	if (opt)
		*opt++ = '\0';
	snprintf(t->url, sizeof(t->url), "%s", url);
	char path[512] = "";
	if (!strncmp(url, "unix:", 5)) {
		t->scheme = VP_PUSH_UNIX;
		if (url[5] != '/' || strlen(url + 5) >= sizeof(t->sock)) {
			vp_set_err(err, errlen, "--push %s: expected unix:/ABSOLUTE/PATH of a socket (at most %zu characters)",
				   spec, sizeof(t->sock) - 1);
			return -EINVAL;
		}
		snprintf(t->sock, sizeof(t->sock), "%s", url + 5);
	} else {
		char *hp;
		if (!strncmp(url, "https://", 8)) {
			t->scheme = VP_PUSH_HTTPS;
			hp = url + 8;
		} else if (!strncmp(url, "http://", 7)) {
			t->scheme = VP_PUSH_HTTP;
			hp = url + 7;
		} else {
			vp_set_err(err, errlen, "--push %s: the URL must start with https://, http:// or unix:/", spec);
			return -EINVAL;
		}
		char *slash = strchr(hp, '/');
		snprintf(path, sizeof(path), "%s", slash ? slash : "");
		if (slash)
			*slash = '\0';   /* ends the host part; the path was copied */
		if (strchr(hp, '@')) {
			vp_set_err(err, errlen, "--push %s: no credentials in the URL: use ,basic=FILE or ,bearer=FILE", spec);
			return -EINVAL;
		}
		char *colon = hp[0] == '[' ? strstr(hp, "]:") : strrchr(hp, ':');
		if (colon && hp[0] == '[')
			colon++;
		if (colon) {
			*colon = '\0';
			snprintf(t->port, sizeof(t->port), "%s", colon + 1);
		} else {
			snprintf(t->port, sizeof(t->port), t->scheme == VP_PUSH_HTTPS ? "443" : "80");
		}
		if (hp[0] == '[') {
			hp++;
			hp[strcspn(hp, "]")] = '\0';
		}
		/* The host goes into the URL libcurl parses: nothing that could end it. */
		if (!*hp || vp_parse_num(t->port, 1, 65535) < 0 || strpbrk(hp, "/?#@ \t\r\n%\\")) {
			vp_set_err(err, errlen, "--push %s: expected https://HOST[:PORT][/PATH]", spec);
			return -EINVAL;
		}
		snprintf(t->host, sizeof(t->host), "%s", hp);
	}
	snprintf(t->db, sizeof(t->db), "%s", VP_FLEET_DEFAULT_DB);
	snprintf(t->prefix, sizeof(t->prefix), "%s", VP_FLEET_DEFAULT_PREFIX);
	for (char *o = opt; o && *o;) {
		char *next = strchr(o, ',');
		if (next)
			*next++ = '\0';
		if (t->kind == VP_PUSH_CLICKHOUSE && (!strncmp(o, "database=", 9) || !strncmp(o, "prefix=", 7))) {
			/* Names go into SQL as they are: nothing but letters, digits and '_'. */
			bool db = o[0] == 'd';
			const char *v = strchr(o, '=') + 1;
			if (!vp_fleet__ident_ok(v) || strlen(v) >= (db ? sizeof(t->db) : sizeof(t->prefix))) {
				vp_set_err(err, errlen, "--push %s: %s '%s': letters, digits and '_' only, at most %zu", spec,
					   db ? "database" : "prefix", v, (db ? sizeof(t->db) : sizeof(t->prefix)) - 1);
				return -EINVAL;
			}
			snprintf(db ? t->db : t->prefix, db ? sizeof(t->db) : sizeof(t->prefix), "%s", v);
		} else if (!strncmp(o, "bearer=", 7)) {
			char tok[512];
			if (vp_http__read_token(o + 7, tok, sizeof(tok), err, errlen))
				return -EINVAL;
			snprintf(t->auth, sizeof(t->auth), "Bearer %s", tok);
			explicit_bzero(tok, sizeof(tok));
		} else if (!strncmp(o, "basic=", 6)) {
			if (read_basic(o + 6, t->auth, sizeof(t->auth), err, errlen))
				return -EINVAL;
		} else if (!strncmp(o, "ca=", 3) || !strncmp(o, "cert=", 5) || !strncmp(o, "key=", 4)) {
			char *v = strchr(o, '=') + 1;
			v[-1] = '\0';   /* o is the option's name now */
			char *dst = !strcmp(o, "ca") ? t->ca : !strcmp(o, "cert") ? t->cert : t->key;
			if (t->scheme != VP_PUSH_HTTPS) {
				vp_set_err(err, errlen, "--push %s: %s= is for https:// targets", spec, o);
				return -EINVAL;
			}
			if (!*v || strlen(v) >= sizeof(t->ca)) {
				vp_set_err(err, errlen, "--push %s: %s= needs a file (a path shorter than %zu)", spec, o,
					   sizeof(t->ca));
				return -EINVAL;
			}
			if (check_file(spec, o, v, dst == t->key, err, errlen))
				return -EINVAL;
			snprintf(dst, sizeof(t->ca), "%s", v);
		} else if (!strncmp(o, "path=", 5) && t->scheme == VP_PUSH_UNIX) {
			if (o[5] != '/' || strpbrk(o + 5, "?# \t\r\n")) {
				vp_set_err(err, errlen, "--push %s: path= expects an absolute HTTP path such as /base", spec);
				return -EINVAL;
			}
			snprintf(path, sizeof(path), "%s", o + 5);
		} else {
			vp_set_err(err, errlen, "--push %s: unknown option '%s': bearer=FILE, basic=FILE, ca=FILE, cert=FILE, "
				   "key=FILE (https) or path=P (unix:)", spec, o);
			return -EINVAL;
		}
		o = next;
	}
	if (!t->cert[0] != !t->key[0]) {
		vp_set_err(err, errlen, "--push %s: a client certificate needs both cert=FILE and key=FILE", spec);
		return -EINVAL;
	}
	if (t->kind == VP_PUSH_CLICKHOUSE) {
		/* The statements go in the query string of the server's root (or base path). */
		size_t pl = strlen(path);
		snprintf(t->path, sizeof(t->path), "%.*s/", (int)(pl && path[pl - 1] == '/' ? pl - 1 : pl), path);
	} else if (t->kind == VP_PUSH_PYROSCOPE) {
		/* The ingest API sits under the server's base path. */
		size_t pl = strlen(path);
		snprintf(t->path, sizeof(t->path), "%.*s/ingest", (int)(pl && path[pl - 1] == '/' ? pl - 1 : pl), path);
	} else {
		snprintf(t->path, sizeof(t->path), "%s", *path && strcmp(path, "/") ? path : "/v1development/profiles");
	}
	return 0;
}

/* ---- the queue and the thread ---- */

struct job {
	char name[VP_PUSH_NAME_MAX + 1];
	uint64_t from, until, freq;
	struct job *next;
};

struct tq {
	struct vp_push_target t;
	int dfd;                       /* its queue directory */
	char dir[64];                  /* its name under .push/, for messages */
	char (*q)[QNAME_LEN];          /* queued file names, oldest first */
	size_t n, cap;
	uint64_t bytes;
	uint64_t seq;
	unsigned backoff_s;
	uint64_t retry_at;             /* CLOCK_MONOTONIC ns; 0: now */
	int mi;                        /* its index in the metrics, or -1 */
	bool refused;                  /* the last attempt was refused by the owner check (logged once) */
};

struct vp_push {
	struct vp_push_opts o;
	/* Copies of what o pointed to: the caller's may not outlive the start (a hostname
	 * on the caller's stack was pushed as garbage once it went out of scope). */
	char hostname[256], app[128];
	uid_t owners[VP_PUSH_MAX_OWNERS];
	int nowners;
	struct tq tq[VP_PUSH_MAX];
	int n;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cv;
	bool stopping;
	struct job *jobs;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_q(const void *a, const void *b)
{
	return strcmp((const char *)a, (const char *)b);
}

/* The counters of q's target; rejected and refused through count_more. */
static void count_more(struct vp_push *p, struct tq *q, uint64_t rejected, uint64_t refused)
{
	struct vp_svc_metrics *m = p->o.metrics;
	if (!m || q->mi < 0)
		return;
	pthread_mutex_lock(&m->lock);
	m->push[q->mi].rejected += rejected;
	m->push[q->mi].refused += refused;
	pthread_mutex_unlock(&m->lock);
}

static void count(struct vp_push *p, struct tq *q, uint64_t ok, uint64_t failed, uint64_t sent, uint64_t dropped)
{
	struct vp_svc_metrics *m = p->o.metrics;
	if (!m || q->mi < 0)
		return;
	pthread_mutex_lock(&m->lock);
	struct vp_push_counts *c = &m->push[q->mi];
	c->ok += ok;
	c->failed += failed;
	c->sent += sent;
	c->dropped += dropped;
	c->queued = q->n;
	c->queued_bytes = q->bytes;
	pthread_mutex_unlock(&m->lock);
}

static uint64_t file_size(int dfd, const char *name)
{
	struct stat st;
	return fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 ? (uint64_t)st.st_size : 0;
}

/* Drops the oldest while the queue is over its bound. */
static void trim(struct vp_push *p, struct tq *q)
{
	unsigned max = p->o.queue_max ? p->o.queue_max : VP_PUSH_DEFAULT_QUEUE;
	while (q->n > max) {
		q->bytes -= file_size(q->dfd, q->q[0]);
		unlinkat(q->dfd, q->q[0], 0);
		if (p->o.log)
			fprintf(p->o.log, "viprof serve: push %s: queue full (%u intervals): dropped the oldest, %s\n",
				q->t.url, max, q->q[0]);
		memmove(q->q, q->q + 1, (q->n - 1) * sizeof(*q->q));
		q->n--;
		count(p, q, 0, 0, 0, 1);
	}
}

/* Writes payload as the queue's newest file: a temporary name, renamed when whole. */
static int enqueue(struct vp_push *p, struct tq *q, const struct job *j, const uint8_t *buf, size_t len)
{
	char name[QNAME_LEN];
	snprintf(name, sizeof(name), "%010llu-%llu-%llu-%llu-%s", (unsigned long long)++q->seq,
		 (unsigned long long)j->from, (unsigned long long)j->until, (unsigned long long)j->freq, j->name);
	int fd = openat(q->dfd, ".new", O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	size_t off = 0;
	while (off < len) {
		ssize_t w = write(fd, buf + off, len - off);
		if (w <= 0) {
			int e = w < 0 ? errno : EIO;
			close(fd);
			unlinkat(q->dfd, ".new", 0);
			return -e;
		}
		off += (size_t)w;
	}
	if (close(fd) != 0 || renameat(q->dfd, ".new", q->dfd, name) != 0) {
		int e = errno;
		unlinkat(q->dfd, ".new", 0);
		return -e;
	}
	if (vp_grow((void **)&q->q, &q->cap, q->n + 1, sizeof(*q->q)))
		return -ENOMEM;
	memcpy(q->q[q->n++], name, QNAME_LEN);
	q->bytes += len;
	trim(p, q);
	count(p, q, 0, 0, 0, 0);
	return 0;
}

/* The queued form of a ClickHouse push: "VPCH1 <length of the stacks' rows>\n", the
 * stacks' rows, the samples' rows (fleet/fleet.h). */
#define CH_MAGIC "VPCH1 "

static int clickhouse_rows(struct vp_push *p, const struct job *j, const char *path, uint8_t **out, size_t *outlen,
			   char *err, size_t errlen)
{
	struct vp_profile *prof = vp_profile__new();
	/* Sample times: rows per second and the GC epochs they fell in. */
	struct vp_session_opts so = { .no_locations = true, .times = true };
	char *st = NULL, *sa = NULL;
	size_t stl = 0, sal = 0;
	int e = prof ? vp_session__load(path, prof, &so, err, errlen) : -ENOMEM;
	if (!e && !vp_profile__has_samples(prof))
		e = -ENODATA;
	if (!e) {
		struct vp_fleet_meta m = { .host = p->hostname, .service = p->app, .interval = j->name, .from_s = j->from };
		e = vp_fleet__encode(prof, &m, &st, &stl, &sa, &sal);
	}
	vp_profile__free(prof);
	if (!e) {
		char head[40];
		int hl = snprintf(head, sizeof(head), CH_MAGIC "%zu\n", stl);
		*out = malloc((size_t)hl + stl + sal);
		if (!*out) {
			e = -ENOMEM;
		} else {
			memcpy(*out, head, (size_t)hl);
			memcpy(*out + hl, st, stl);
			memcpy(*out + hl + stl, sa, sal);
			*outlen = (size_t)hl + stl + sal;
		}
	}
	free(st);
	free(sa);
	return e;
}

/* Encodes an ended interval for every target and queues it. */
static void take(struct vp_push *p, const struct job *j)
{
	char path[128], err[768] = "";
	snprintf(path, sizeof(path), "/proc/self/fd/%d/%s", p->o.dirfd, j->name);
	uint8_t *pb = NULL, *ob = NULL, *cb = NULL;
	size_t pl = 0, ol = 0, cl = 0;
	int pe = -ENOENT, oe = -ENOENT, ce = -ENOENT;
	for (int i = 0; i < p->n; i++) {
		struct tq *q = &p->tq[i];
		const uint8_t *buf;
		size_t len;
		int e;
		if (q->t.kind == VP_PUSH_CLICKHOUSE) {
			if (ce == -ENOENT)
				ce = clickhouse_rows(p, j, path, &cb, &cl, err, sizeof(err));
			e = ce, buf = cb, len = cl;
		} else if (q->t.kind == VP_PUSH_PYROSCOPE) {
			if (pe == -ENOENT)
				pe = vp_pages__pprof(path, false, (char **)&pb, &pl, err, sizeof(err));
			e = pe, buf = pb, len = pl;
		} else {
			if (oe == -ENOENT) {
				struct vp_profile *prof = vp_profile__new();
				struct vp_session_opts so = { .no_locations = true };
				oe = prof ? vp_session__load(path, prof, &so, err, sizeof(err)) : -ENOMEM;
				if (!oe && !vp_profile__has_samples(prof))
					oe = -ENODATA;
				if (!oe) {
					struct vp_otlp_meta m = { .host = p->hostname, .service = p->app,
								  .time_unix_nano = j->from * 1000000000ull,
								  .duration_nano = (j->until - j->from) * 1000000000ull };
					oe = vp_otlp__encode(prof, &m, &ob, &ol);
				}
				vp_profile__free(prof);
			}
			e = oe, buf = ob, len = ol;
		}
		if (e == -ENODATA) {
			if (p->o.log)
				fprintf(p->o.log, "viprof serve: push %s: interval %s holds no sample: nothing to send\n",
					q->t.url, j->name);
			continue;
		}
		if (!e)
			e = enqueue(p, q, j, buf, len);
		if (e && p->o.log)
			fprintf(p->o.log, "viprof serve: push %s: cannot queue interval %s: %s\n", q->t.url, j->name,
				err[0] ? err : strerror(-e));
	}
	free(pb);
	free(ob);
	free(cb);
}

/* ---- the client: libcurl, with the sockets opened and checked here ---- */

/* One attempt's state, shared with libcurl's callbacks. */
struct conn {
	struct vp_push *p;
	struct tq *q;
	bool refused;                  /* the owner check said no: nothing was sent */
	char why[300];                 /* why, or why the connection failed */
	int pfd, fd;                   /* unix: the socket file checked (O_PATH), the socket */
	bool passed;                   /* a connection passed the checks */
	char answer[240];              /* the answer's first line (a backend's reason for a 4xx/5xx) */
	size_t nanswer;
};

static bool owner_ok(const struct vp_push *p, uid_t uid)
{
	if (uid == 0)
		return true;
	for (int i = 0; i < p->nowners; i++)
		if (p->owners[i] == uid)
			return true;
	return false;
}

static void refuse(struct conn *c, const char *what, uid_t uid)
{
	char name[64] = "", buf[1024];
	struct passwd pw, *pwp = NULL;
	if (getpwuid_r(uid, &pw, buf, sizeof(buf), &pwp) == 0 && pwp)
		snprintf(name, sizeof(name), " (%s)", pw.pw_name);
	c->refused = true;
	snprintf(c->why, sizeof(c->why), "%s belongs to uid %u%s, not root: sent nothing (while the backend is down "
		 "anyone may take its %s; if that user runs the backend, name it with --push-owner)", what,
		 (unsigned)uid, name, c->q->t.scheme == VP_PUSH_UNIX ? "socket path" : "port");
}

static bool same_addr(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr == ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr, &((const struct sockaddr_in6 *)b)->sin6_addr, 16);
}

/* Before libcurl connects to a TCP address: who listens there now, asked of the kernel.
 * Nobody (or a remote address) is no refusal: the check after the connection decides. */
static curl_socket_t open_tcp(struct conn *c, const struct curl_sockaddr *a)
{
	uid_t uid;
	if (vp_http__tcp_owner(&a->addr, a->addrlen, NULL, &uid) == 0 && !owner_ok(c->p, uid)) {
		refuse(c, "the socket listening on the target's port", uid);
		return CURL_SOCKET_BAD;
	}
	int fd = socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
	return fd < 0 ? CURL_SOCKET_BAD : fd;
}

/* A Unix socket: the file opened once (O_PATH, no link followed at the end), its type
 * and owner checked, and libcurl sent to /proc/self/fd/N, so that the file checked is
 * the file connected. The listener's own credentials are checked once connected. */
static curl_socket_t open_unix(struct conn *c, struct curl_sockaddr *a)
{
	const char *path = c->q->t.sock;
	struct stat st;
	if (c->pfd < 0)
		c->pfd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (c->pfd < 0 || fstat(c->pfd, &st) != 0) {
		snprintf(c->why, sizeof(c->why), "cannot open %s: %s", path, strerror(errno));
		return CURL_SOCKET_BAD;
	}
	if (!S_ISSOCK(st.st_mode)) {
		snprintf(c->why, sizeof(c->why), "%s is not a socket (a link, or another kind of file)", path);
		return CURL_SOCKET_BAD;
	}
	if (!owner_ok(c->p, st.st_uid)) {
		refuse(c, "the socket file", st.st_uid);
		return CURL_SOCKET_BAD;
	}
	/* libcurl connects to the address it handed us, which has room for a sockaddr_un
	 * (its own storage is a union with one). */
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int n = snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d", c->pfd);
	a->addrlen = (unsigned)(offsetof(struct sockaddr_un, sun_path) + (size_t)n + 1);
	memcpy(&a->addr, &sa, a->addrlen);
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	return c->fd < 0 ? CURL_SOCKET_BAD : c->fd;
}

static curl_socket_t open_socket(void *ctx, curlsocktype purpose, struct curl_sockaddr *a)
{
	struct conn *c = ctx;
	if (purpose != CURLSOCKTYPE_IPCXN)
		return CURL_SOCKET_BAD;
	if (c->q->t.scheme == VP_PUSH_UNIX)
		return a->family == AF_UNIX ? open_unix(c, a) : CURL_SOCKET_BAD;
	return a->family == AF_INET || a->family == AF_INET6 ? open_tcp(c, a) : CURL_SOCKET_BAD;
}

static int to_addr(const char *ip, int port, struct sockaddr_storage *ss, socklen_t *len)
{
	memset(ss, 0, sizeof(*ss));
	struct sockaddr_in *in = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
	if (inet_pton(AF_INET, ip, &in->sin_addr) == 1) {
		in->sin_family = AF_INET;
		in->sin_port = htons((uint16_t)port);
		*len = sizeof(*in);
		return 0;
	}
	if (inet_pton(AF_INET6, ip, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)port);
		*len = sizeof(*in6);
		return 0;
	}
	return -EINVAL;
}

/* Connected, nothing sent yet: who holds the other end. Between the check before the
 * connection and the connection a squatter may have bound the port; the socket that
 * accepted is the one that would read. A peer on this machine (a loopback address, or
 * our own: the kernel routes to its own address from it) must be root's or an owner's; a
 * remote one is TLS's business. */
static int check_peer(void *ctx, char *peer_ip, char *local_ip, int peer_port, int local_port)
{
	struct conn *c = ctx;
	if (c->q->t.scheme == VP_PUSH_UNIX) {
		struct ucred cr;
		socklen_t cl = sizeof(cr);
		if (getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) != 0) {
			c->refused = true;
			snprintf(c->why, sizeof(c->why), "cannot read the credentials of %s's listener: %s: sent nothing",
				 c->q->t.sock, strerror(errno));
			return CURL_PREREQFUNC_ABORT;
		}
		if (owner_ok(c->p, cr.uid)) {
			c->passed = true;
			return CURL_PREREQFUNC_OK;
		}
		refuse(c, "the process listening on the socket", cr.uid);
		return CURL_PREREQFUNC_ABORT;
	}
	struct sockaddr_storage me, peer;
	socklen_t ml, pl;
	if (to_addr(peer_ip, peer_port, &peer, &pl) || to_addr(local_ip, local_port, &me, &ml)) {
		c->refused = true;
		snprintf(c->why, sizeof(c->why), "cannot read the connection's addresses (%s, %s): sent nothing", peer_ip,
			 local_ip);
		return CURL_PREREQFUNC_ABORT;
	}
	if (!vp_http__is_loopback((struct sockaddr *)&peer) && !same_addr(&me, &peer)) {
		c->passed = true;
		return CURL_PREREQFUNC_OK;
	}
	/* The accepted socket has an owner once the backend's accept() returned: a real
	 * backend accepts at once; a squatter that never does is refused after a while. */
	uid_t uid;
	int e = -ENOENT;
	for (int i = 0; i < 150; i++) {
		e = vp_http__tcp_owner((struct sockaddr *)&peer, pl, (struct sockaddr *)&me, &uid);
		if (e != -ENOENT)
			break;
		usleep(20000);
	}
	if (e == 0 && owner_ok(c->p, uid)) {
		c->passed = true;
		return CURL_PREREQFUNC_OK;
	}
	if (e == 0)
		refuse(c, "the socket that accepted the connection", uid);
	else {
		c->refused = true;
		snprintf(c->why, sizeof(c->why), "cannot tell who accepted the connection on this machine (%s): sent "
			 "nothing", e == -ENOENT ? "nobody accepted it within 3 s" : strerror(-e));
	}
	return CURL_PREREQFUNC_ABORT;
}

/* Keeps the start of the answer (ClickHouse says why it refused there), drops the rest. */
static size_t keep_head(char *ptr, size_t size, size_t n, void *ctx)
{
	struct conn *c = ctx;
	size_t len = size * n, room = sizeof(c->answer) - 1 - c->nanswer;
	memcpy(c->answer + c->nanswer, ptr, len < room ? len : room);
	c->nanswer += len < room ? len : room;
	c->answer[c->nanswer] = '\0';
	c->answer[strcspn(c->answer, "\r\n")] = '\0';
	return len;
}

/* One POST of q's target; the answer's status into *status. 0, or -errno when no answer
 * came (c->why says why; c->refused when the owner check refused the target). */
static int post(struct conn *c, const char *target, const char *ctype, const char *interval, const uint8_t *body,
		size_t len, int *status)
{
	const struct vp_push_target *t = &c->q->t;
	CURL *h = curl_easy_init();
	struct curl_slist *hdr = NULL;
	char url[2400], line[700], cerr[CURL_ERROR_SIZE] = "";
	int e = 0;
	if (!h)
		return -ENOMEM;
	if (t->scheme == VP_PUSH_UNIX)
		snprintf(url, sizeof(url), "http://localhost%s", target);
	else
		snprintf(url, sizeof(url), "%s://%s%s%s:%s%s", t->scheme == VP_PUSH_HTTPS ? "https" : "http",
			 strchr(t->host, ':') ? "[" : "", t->host, strchr(t->host, ':') ? "]" : "", t->port, target);
	snprintf(line, sizeof(line), "Content-Type: %s", ctype);
	hdr = curl_slist_append(hdr, line);
	snprintf(line, sizeof(line), "X-Viprof-Interval: %s", interval);
	hdr = curl_slist_append(hdr, line);
	hdr = curl_slist_append(hdr, "Expect:");   /* the body at once, no 100-continue round trip */
	if (t->auth[0]) {
		snprintf(line, sizeof(line), "Authorization: %s", t->auth);
		hdr = curl_slist_append(hdr, line);
		explicit_bzero(line, sizeof(line));
	}
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	/* The service's environment names no proxy for it: its targets are its own. */
	curl_easy_setopt(h, CURLOPT_PROXY, "");
	curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	curl_easy_setopt(h, CURLOPT_FORBID_REUSE, 1L);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "viprof/" VIPROF_VERSION);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
	curl_easy_setopt(h, CURLOPT_POST, 1L);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	c->nanswer = 0;
	c->answer[0] = '\0';
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, keep_head);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, c);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, cerr);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, (long)PUSH_TIMEOUT_S);
	/* A stalled transfer ends after PUSH_TIMEOUT_S without progress, any after 5 minutes. */
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, (long)PUSH_TIMEOUT_S);
	curl_easy_setopt(h, CURLOPT_TIMEOUT, 300L);
	curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, open_socket);
	curl_easy_setopt(h, CURLOPT_OPENSOCKETDATA, c);
	curl_easy_setopt(h, CURLOPT_PREREQFUNCTION, check_peer);
	curl_easy_setopt(h, CURLOPT_PREREQDATA, c);
	if (t->scheme == VP_PUSH_UNIX)
		curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, t->sock);
	if (t->ca[0]) {
		/* Only the CAs given: the system's are not what the administrator named. */
		curl_easy_setopt(h, CURLOPT_CAINFO, t->ca);
		curl_easy_setopt(h, CURLOPT_CAPATH, NULL);
	}
	if (t->cert[0]) {
		curl_easy_setopt(h, CURLOPT_SSLCERT, t->cert);
		curl_easy_setopt(h, CURLOPT_SSLKEY, t->key);
	}
	CURLcode r = curl_easy_perform(h);
	if (r == CURLE_OK) {
		long code = 0;
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
		*status = (int)code;
	} else {
		e = r == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT : r == CURLE_COULDNT_CONNECT ? -ECONNREFUSED : -EPROTO;
		/* Ours says more than libcurl's about a target refused or a socket file. */
		if (!c->why[0] || (!c->refused && r != CURLE_COULDNT_CONNECT))
			snprintf(c->why, sizeof(c->why), "%s%s", cerr[0] ? cerr : curl_easy_strerror(r),
				 r == CURLE_PEER_FAILED_VERIFICATION ? ": the backend's certificate is not signed by a CA of "
				 "ca=FILE (or the system's), or does not name the host of the URL" : "");
	}
	curl_slist_free_all(hdr);
	curl_easy_cleanup(h);
	return e;
}

/* "name=APP.cpu{hostname=H}" with the braces and separators percent-encoded. */
static void pyro_query(const struct vp_push *p, const char *qname, char *out, size_t outlen, const char *path)
{
	unsigned long long seq, from, until, freq;
	if (sscanf(qname, "%llu-%llu-%llu-%llu-", &seq, &from, &until, &freq) != 4)
		from = until = freq = 0;
	char host[256];
	size_t k = 0;
	/* Label values keep to what needs no escaping in Pyroscope's name syntax. */
	for (const char *c = p->hostname; *c && k < sizeof(host) - 1; c++)
		host[k++] = (strchr(",{}=&%#? \"", *c) ? '_' : *c);
	host[k] = '\0';
	snprintf(out, outlen, "%s?name=%s.cpu%%7Bhostname%%3D%s%%2Cservice_name%%3D%s%%7D&from=%llu&until=%llu"
		 "&format=pprof&sampleRate=%llu&spyName=viprof&units=samples&aggregationType=sum",
		 path, p->app, host, p->app, from, until, freq);
}

/* "%XX" for every byte a query string cannot carry as it is. */
static void url_escape(const char *s, char *out, size_t outlen)
{
	size_t o = 0;
	for (; *s && o + 4 < outlen; s++) {
		unsigned char ch = (unsigned char)*s;
		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || strchr("-_.~", ch))
			out[o++] = (char)ch;
		else
			o += (size_t)snprintf(out + o, outlen - o, "%%%02X", ch);
	}
	out[o] = '\0';
}

/* A queued ClickHouse interval: its stacks, then its samples, each one INSERT. The stacks
 * go first so that no sample row names a stack the store lacks; a retry after the
 * stacks went sends them again, and their table keeps one row per hash. */
static int post_clickhouse(struct conn *c, const char *iv, const uint8_t *body, size_t len, int *status)
{
	const struct vp_push_target *t = &c->q->t;
	const uint8_t *nl = memchr(body, '\n', len < 40 ? len : 40);
	size_t hl = nl ? (size_t)(nl - body) : len;
	unsigned long long stl;
	if (len < sizeof(CH_MAGIC) || memcmp(body, CH_MAGIC, sizeof(CH_MAGIC) - 1) || !nl ||
	    sscanf((const char *)body + sizeof(CH_MAGIC) - 1, "%llu", &stl) != 1 || stl > len - hl - 1) {
		snprintf(c->answer, sizeof(c->answer), "the queued file is not a ClickHouse interval");
		*status = 400;   /* nothing a retry can mend: dropped as a refusal */
		return 0;
	}
	const uint8_t *parts[2] = { body + hl + 1, body + hl + 1 + stl };
	size_t lens[2] = { (size_t)stl, len - hl - 1 - (size_t)stl };
	static const char *const tables[2] = { "stacks", "samples" };
	for (int i = 0; i < 2; i++) {
		if (!lens[i])
			continue;
		char sql[256], esc[800], target[1400];
		vp_fleet__insert_sql(t->db, t->prefix, tables[i], sql, sizeof(sql));
		url_escape(sql, esc, sizeof(esc));
		/* insert_distributed_sync: the answer comes once every shard holds its rows,
		 * so a 200 means stored, not queued on the node that took them. */
		snprintf(target, sizeof(target), "%s?insert_distributed_sync=1&query=%s", t->path, esc);
		int e = post(c, target, "text/tab-separated-values", iv, parts[i], lens[i], status);
		if (e || *status < 200 || *status >= 300)
			return e;
	}
	return 0;
}

/* Tries the oldest queued interval of q. */
static void attempt(struct vp_push *p, struct tq *q)
{
	const char *name = q->q[0];
	int fd = openat(q->dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	uint8_t *body = NULL;
	if (fd < 0 || fstat(fd, &st) != 0 || !(body = malloc((size_t)st.st_size + 1)) ||
	    read(fd, body, (size_t)st.st_size) != st.st_size) {
		if (p->o.log)
			fprintf(p->o.log, "viprof serve: push %s: cannot read queued %s: dropped\n", q->t.url, name);
		if (fd >= 0)
			close(fd);
		free(body);
		goto drop;
	}
	close(fd);
	char target[2048];
	if (q->t.kind == VP_PUSH_PYROSCOPE)
		pyro_query(p, name, target, sizeof(target), q->t.path);
	else
		snprintf(target, sizeof(target), "%s", q->t.path);
	/* The interval's name (the queue file's last part) goes along, so that a backend, or
	 * a test, can tell a resent interval from a new one. */
	const char *iv = name;
	for (int k = 0; k < 4 && strchr(iv, '-'); k++)
		iv = strchr(iv, '-') + 1;
	int status = 0;
	struct conn c = { .p = p, .q = q, .pfd = -1, .fd = -1 };
	int e = q->t.kind == VP_PUSH_CLICKHOUSE
		? post_clickhouse(&c, iv, body, (size_t)st.st_size, &status)
		: post(&c, target, q->t.kind == VP_PUSH_OTLP ? "application/x-protobuf" : "application/octet-stream",
		       iv, body, (size_t)st.st_size, &status);
	free(body);
	if (c.pfd >= 0)
		close(c.pfd);
	bool refused = e && c.refused;
	/* A refusal is said once, when it starts and when a connection passes the checks
	 * again (not when the target is merely down); each one is counted. */
	if (refused && !q->refused && p->o.log)
		fprintf(p->o.log, "viprof serve: push %s: refused: %s; retrying with back-off\n", q->t.url, c.why);
	else if (!refused && q->refused && c.passed && p->o.log)
		fprintf(p->o.log, "viprof serve: push %s: the target's socket is held by root or --push-owner again: "
			"sending\n", q->t.url);
	if (refused || c.passed)
		q->refused = refused;
	if (refused)
		count_more(p, q, 0, 1);
	if (!e && status >= 200 && status < 300) {
		q->backoff_s = 0;
		q->retry_at = 0;
		q->bytes -= (uint64_t)st.st_size;
		unlinkat(q->dfd, name, 0);
		memmove(q->q, q->q + 1, (q->n - 1) * sizeof(*q->q));
		q->n--;
		count(p, q, 1, 0, 1, 0);
		return;
	}
	/* ClickHouse answers 404 for a database or table not made yet: kept for when
	 * `viprof fleet init` has run, not dropped. */
	bool permanent = !e && status >= 400 && status < 500 && status != 408 && status != 429 &&
			 !(q->t.kind == VP_PUSH_CLICKHOUSE && status == 404);
	count(p, q, 0, 1, 0, 0);
	if (permanent)
		count_more(p, q, 1, 0);
	if (!permanent) {
		unsigned cap = p->o.interval_s ? p->o.interval_s : 60;
		q->backoff_s = q->backoff_s ? (q->backoff_s * 2 > cap ? cap : q->backoff_s * 2) : 1;
		q->retry_at = mono_ns() + (uint64_t)q->backoff_s * 1000000000ull;
	}
	if (p->o.log && e && !refused)
		fprintf(p->o.log, "viprof serve: push %s: %s: no answer (%s); retrying in %u s (%zu queued)\n", q->t.url,
			name, c.why[0] ? c.why : strerror(-e), q->backoff_s, q->n);
	else if (p->o.log && !e)
		fprintf(p->o.log, "viprof serve: push %s: %s: HTTP %d%s%s%s%s\n", q->t.url, name, status,
			c.answer[0] ? " (" : "", c.answer, c.answer[0] ? ")" : "",
			permanent ? ": a refusal a retry cannot change, dropped (check the URL, the credentials and "
				    "the backend's log)" : status == 404 && q->t.kind == VP_PUSH_CLICKHOUSE ?
				    "; retrying (make the tables with viprof fleet init)" : "; retrying");
	if (!permanent)
		return;
drop:
	q->bytes -= file_size(q->dfd, name);
	unlinkat(q->dfd, name, 0);
	memmove(q->q, q->q + 1, (q->n - 1) * sizeof(*q->q));
	q->n--;
	count(p, q, 0, 0, 0, 0);
}

static void *push_thread(void *arg)
{
	struct vp_push *p = arg;
	pthread_mutex_lock(&p->lock);
	while (!p->stopping) {
		/* One ended interval taken, then one round of sends: taking every waiting
		 * interval first starved the sends whenever encoding one took longer than an
		 * interval lasts (a loaded VM, 2 s intervals: nothing sent in 60 s). */
		struct job *j = p->jobs;
		bool took = j != NULL;
		if (j) {
			p->jobs = j->next;
			pthread_mutex_unlock(&p->lock);
			take(p, j);
			free(j);
			pthread_mutex_lock(&p->lock);
		}
		uint64_t now = mono_ns(), next = UINT64_MAX;
		bool sent = false;
		for (int i = 0; i < p->n && !p->stopping; i++) {
			struct tq *q = &p->tq[i];
			if (!q->n)
				continue;
			if (q->retry_at > now) {
				next = q->retry_at < next ? q->retry_at : next;
				continue;
			}
			pthread_mutex_unlock(&p->lock);
			attempt(p, q);
			pthread_mutex_lock(&p->lock);
			sent = true;
		}
		if (took || sent || p->jobs || p->stopping)
			continue;
		if (next == UINT64_MAX) {
			pthread_cond_wait(&p->cv, &p->lock);
		} else {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			uint64_t wait = next - now, ns = (uint64_t)ts.tv_nsec + wait % 1000000000ull;
			ts.tv_sec += (time_t)(wait / 1000000000ull + ns / 1000000000ull);
			ts.tv_nsec = (long)(ns % 1000000000ull);
			pthread_cond_timedwait(&p->cv, &p->lock, &ts);
		}
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

static uint64_t fnv(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return h;
}

static const char *kind_name(enum vp_push_kind k)
{
	return k == VP_PUSH_OTLP ? "otlp" : k == VP_PUSH_CLICKHOUSE ? "clickhouse" : "pyroscope";
}

/* Opens (making) DIR/.push/<kind>-<hash> and reads what a previous run left queued. */
static int open_queue(struct vp_push *p, struct tq *q, char *err, size_t errlen)
{
	if (mkdirat(p->o.dirfd, ".push", 0700) != 0 && errno != EEXIST) {
		vp_set_err(err, errlen, "cannot make the push queue directory .push: %s", strerror(errno));
		return -errno;
	}
	int top = openat(p->o.dirfd, ".push", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	snprintf(q->dir, sizeof(q->dir), "%s-%016llx", kind_name(q->t.kind),
		 (unsigned long long)fnv(q->t.url));
	if (top < 0 || (mkdirat(top, q->dir, 0700) != 0 && errno != EEXIST) ||
	    (q->dfd = openat(top, q->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		int e = errno;
		vp_set_err(err, errlen, "cannot open the push queue .push/%s: %s", q->dir, strerror(e));
		if (top >= 0)
			close(top);
		return -e;
	}
	close(top);
	DIR *d = vp_dir__stream(q->dfd);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		unsigned long long seq;
		if (de->d_name[0] == '.' || strlen(de->d_name) >= QNAME_LEN || sscanf(de->d_name, "%llu-", &seq) != 1)
			continue;
		if (vp_grow((void **)&q->q, &q->cap, q->n + 1, sizeof(*q->q)))
			break;
		snprintf(q->q[q->n++], QNAME_LEN, "%s", de->d_name);
		q->bytes += file_size(q->dfd, de->d_name);
		if (seq > q->seq)
			q->seq = seq;
	}
	if (d)
		closedir(d);
	vp_sort(q->q, q->n, sizeof(*q->q), cmp_q);
	if (q->n && p->o.log)
		fprintf(p->o.log, "viprof serve: push %s: %zu interval(s) queued by an earlier run will be sent first\n",
			q->t.url, q->n);
	return 0;
}

struct vp_push *vp_push__start(const struct vp_push_opts *o, char *err, size_t errlen)
{
	struct vp_push *p = calloc(1, sizeof(*p));
	if (!p) {
		vp_set_err(err, errlen, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	p->o = *o;
	if (o->hostname && *o->hostname)
		snprintf(p->hostname, sizeof(p->hostname), "%s", o->hostname);
	else if (gethostname(p->hostname, sizeof(p->hostname) - 1) != 0)
		snprintf(p->hostname, sizeof(p->hostname), "unknown");
	snprintf(p->app, sizeof(p->app), "%s", o->app ? o->app : "viprof");
	p->nowners = o->nowners > VP_PUSH_MAX_OWNERS ? VP_PUSH_MAX_OWNERS : o->nowners;
	if (p->nowners)
		memcpy(p->owners, o->owners, (size_t)p->nowners * sizeof(*p->owners));
	/* Nothing below may use what o points to: the caller's may be gone. */
	p->o.hostname = p->o.app = NULL;
	p->o.owners = NULL;
	p->o.targets = NULL;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	/* Its own descriptor of DIR: the last interval is queued after the recording, which
	 * closes its own, has stopped. */
	p->o.dirfd = fcntl(o->dirfd, F_DUPFD_CLOEXEC, 0);
	if (p->o.dirfd < 0) {
		int e = errno;
		vp_set_err(err, errlen, "cannot duplicate the continuous directory's descriptor: %s", strerror(e));
		free(p);
		errno = e;
		return NULL;
	}
	p->n = o->ntargets > VP_PUSH_MAX ? VP_PUSH_MAX : o->ntargets;
	for (int i = 0; i < p->n; i++) {
		struct tq *q = &p->tq[i];
		q->t = o->targets[i];
		q->dfd = -1;
		int e = open_queue(p, q, err, errlen);
		if (e) {
			for (int k = 0; k <= i; k++) {
				if (p->tq[k].dfd >= 0)
					close(p->tq[k].dfd);
				free(p->tq[k].q);
			}
			close(p->o.dirfd);
			free(p);
			errno = -e;
			return NULL;
		}
		char label[sizeof(q->t.url) + 16];
		snprintf(label, sizeof(label), "%s %s", kind_name(q->t.kind), q->t.url);
		q->mi = o->metrics ? vp_svc_metrics__add_push(o->metrics, label) : -1;
		count(p, q, 0, 0, 0, 0);
	}
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cv, NULL);
	int e = pthread_create(&p->thread, NULL, push_thread, p);
	if (e) {
		vp_set_err(err, errlen, "cannot start the push thread: %s", strerror(e));
		for (int k = 0; k < p->n; k++) {
			close(p->tq[k].dfd);
			free(p->tq[k].q);
		}
		close(p->o.dirfd);
		free(p);
		errno = e;
		return NULL;
	}
	return p;
}

void vp_push__interval(struct vp_push *p, const char *name, uint64_t from_s, uint64_t until_s, uint64_t freq)
{
	if (!p)
		return;
	struct job *j = calloc(1, sizeof(*j));
	if (!j)
		return;
	snprintf(j->name, sizeof(j->name), "%s", name);
	j->from = from_s;
	j->until = until_s;
	j->freq = freq;
	pthread_mutex_lock(&p->lock);
	struct job **jp = &p->jobs;
	while (*jp)
		jp = &(*jp)->next;
	*jp = j;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->lock);
}

void vp_push__stop(struct vp_push *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stopping = true;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->lock);
	pthread_join(p->thread, NULL);
	/* Intervals not yet encoded are lost with the process: encode them now, so that
	 * the queue on disk holds them for the next start. */
	while (p->jobs) {
		struct job *j = p->jobs;
		p->jobs = j->next;
		take(p, j);
		free(j);
	}
	for (int i = 0; i < p->n; i++) {
		close(p->tq[i].dfd);
		free(p->tq[i].q);
	}
	close(p->o.dirfd);
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->cv);
	free(p);
	curl_global_cleanup();
}
