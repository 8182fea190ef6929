/* The service's HTTP/1.1 server: see http.h. */
#define _GNU_SOURCE
#include "service/http.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/safefs.h"
#include "common/util.h"

/* Copies [s, s + n) into dst[len] with a NUL; false when it does not fit. */
static bool copy_field(char *dst, size_t len, const char *s, size_t n)
{
	if (n >= len)
		return false;
	memcpy(dst, s, n);
	dst[n] = '\0';
	return true;
}

static bool token_char(char c)
{
	/* RFC 9110 tchar: what a method or a header name may hold. */
	return isalnum((unsigned char)c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

int vp_http__parse(const char *buf, size_t len, struct vp_http_req *req)
{
	memset(req, 0, sizeof(*req));
	const char *end = memmem(buf, len, "\r\n\r\n", 4);
	if (!end)
		return len >= VP_HTTP_MAX_HEAD ? -EMSGSIZE : 0;
	size_t head = (size_t)(end - buf) + 4;
	if (head > VP_HTTP_MAX_HEAD)
		return -EMSGSIZE;
	if (memchr(buf, '\0', head))
		return -EINVAL;

	/* Request line: METHOD SP TARGET SP HTTP/1.x CRLF. */
	const char *p = buf, *eol = memmem(buf, head, "\r\n", 2);
	const char *sp1 = memchr(p, ' ', (size_t)(eol - p));
	if (!sp1 || sp1 == p)
		return -EINVAL;
	for (const char *q = p; q < sp1; q++)
		if (!token_char(*q))
			return -EINVAL;
	if (!copy_field(req->method, sizeof(req->method), p, (size_t)(sp1 - p)))
		return -EINVAL;
	const char *target = sp1 + 1;
	const char *sp2 = memchr(target, ' ', (size_t)(eol - target));
	if (!sp2 || sp2 == target || *target != '/')
		return -EINVAL;
	for (const char *q = target; q < sp2; q++)
		if ((unsigned char)*q <= ' ' || (unsigned char)*q >= 0x7f)
			return -EINVAL;
	const char *qm = memchr(target, '?', (size_t)(sp2 - target));
	const char *pend = qm ? qm : sp2;
	if (!copy_field(req->path, sizeof(req->path), target, (size_t)(pend - target)))
		return -EMSGSIZE;
	if (qm && !copy_field(req->query, sizeof(req->query), qm + 1, (size_t)(sp2 - qm - 1)))
		return -EMSGSIZE;
	const char *ver = sp2 + 1;
	if ((size_t)(eol - ver) != 8 || memcmp(ver, "HTTP/", 5))
		return -EINVAL;
	if (ver[5] != '1' || ver[6] != '.' || !isdigit((unsigned char)ver[7]))
		return -EPROTONOSUPPORT;
	req->minor = ver[7] - '0';

	/* Headers: NAME ":" OWS VALUE OWS CRLF; obsolete line folding is refused. */
	for (p = eol + 2; p < end + 2; p = eol + 2) {
		eol = memmem(p, (size_t)(buf + head - p), "\r\n", 2);
		if (eol == p)
			break;
		const char *colon = memchr(p, ':', (size_t)(eol - p));
		if (!colon || colon == p)
			return -EINVAL;
		for (const char *q = p; q < colon; q++)
			if (!token_char(*q))
				return -EINVAL;
		const char *v = colon + 1, *ve = eol;
		while (v < ve && (*v == ' ' || *v == '\t'))
			v++;
		while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
			ve--;
		for (const char *q = v; q < ve; q++)
			if (*q == '\r' || *q == '\n')
				return -EINVAL;
		if ((size_t)(colon - p) == 13 && !strncasecmp(p, "Authorization", 13) &&
		    !copy_field(req->auth, sizeof(req->auth), v, (size_t)(ve - v)))
			return -EMSGSIZE;
	}
	return (int)head;
}

bool vp_http__query(const char *query, const char *name, char *val, size_t len)
{
	size_t nl = strlen(name);
	for (const char *p = query; p && *p;) {
		const char *amp = strchr(p, '&');
		size_t l = amp ? (size_t)(amp - p) : strlen(p);
		if (l > nl && !strncmp(p, name, nl) && p[nl] == '=') {
			size_t vl = l - nl - 1;
			if (memchr(p + nl + 1, '%', vl) || !copy_field(val, len, p + nl + 1, vl))
				return false;
			return true;
		}
		if (l == nl && !strncmp(p, name, nl))
			return copy_field(val, len, "", 0);
		p = amp ? amp + 1 : NULL;
	}
	return false;
}

bool vp_http__is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
	}
	if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
		if (IN6_IS_ADDR_LOOPBACK(a))
			return true;
		return IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127;
	}
	return false;
}

int vp_http__parse_listen(const char *s, struct sockaddr_storage *ss, socklen_t *sslen, char *err, size_t errlen)
{
	char host[128];
	const char *colon, *hs = s;
	size_t hl;
	memset(ss, 0, sizeof(*ss));
	if (*s == '[') {
		const char *rb = strchr(s, ']');
		if (!rb || rb[1] != ':')
			goto bad;
		hs = s + 1;
		hl = (size_t)(rb - hs);
		colon = rb + 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon || strchr(s, ':') != colon)
			goto bad;
		hl = (size_t)(colon - s);
	}
	if (!hl || !copy_field(host, sizeof(host), hs, hl))
		goto bad;
	long long port = vp_parse_num(colon + 1, 0, 65535);
	if (port < 0)
		goto bad;
	if (!strcmp(host, "localhost"))
		strcpy(host, "127.0.0.1");
	struct sockaddr_in *in = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
	if (*s != '[' && inet_pton(AF_INET, host, &in->sin_addr) == 1) {
		in->sin_family = AF_INET;
		in->sin_port = htons((uint16_t)port);
		*sslen = sizeof(*in);
		return 0;
	}
	if (*s == '[' && inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)port);
		*sslen = sizeof(*in6);
		return 0;
	}
bad:
	vp_set_err(err, errlen, "--http '%s': expected ADDR:PORT with a numeric address, e.g. 127.0.0.1:6060 or [::1]:6060", s);
	return -EINVAL;
}

int vp_http__read_token(const char *path, char *tok, size_t len, char *err, size_t errlen)
{
	char buf[512];
	struct stat st;
	int fd = vp_safe_open_regular(path, false);
	if (fd < 0) {
		vp_set_err(err, errlen, "--http-token %s: cannot open: %s; give a file holding one token line", path,
			   strerror(-fd));
		return fd;
	}
	int e = 0;
	ssize_t n = 0;
	if (fstat(fd, &st) != 0) {
		e = -errno;
		vp_set_err(err, errlen, "--http-token %s: %s", path, strerror(errno));
		goto cleanup;
	}
	if (st.st_mode & 077) {
		e = -EPERM;
		vp_set_err(err, errlen, "--http-token %s: the file is open to group or others (mode %03o); chmod 600 %s",
			   path, (unsigned)(st.st_mode & 0777), path);
		goto cleanup;
	}
	n = vp_read_full(fd, buf, sizeof(buf) - 1);
	if (n < 0) {
		e = (int)n;
		vp_set_err(err, errlen, "--http-token %s: cannot read: %s", path, strerror(-e));
		goto cleanup;
	}
	buf[n] = '\0';
	while (n > 0 && isspace((unsigned char)buf[n - 1]))
		buf[--n] = '\0';
	e = -EINVAL;
	if ((size_t)n < VP_HTTP_MIN_TOKEN || (size_t)n >= len) {
		vp_set_err(err, errlen, "--http-token %s: the token has %zd characters; it needs %d to %zu (e.g. "
			   "head -c 32 /dev/urandom | base64 > %s)", path, n, VP_HTTP_MIN_TOKEN, len - 1, path);
		goto cleanup;
	}
	for (ssize_t i = 0; i < n; i++)
		if ((unsigned char)buf[i] <= ' ' || (unsigned char)buf[i] >= 0x7f) {
			vp_set_err(err, errlen, "--http-token %s: the token must be one line of printable characters "
				   "without spaces", path);
			goto cleanup;
		}
	memcpy(tok, buf, (size_t)n + 1);
	e = 0;
cleanup:
	memset(buf, 0, sizeof(buf));
	close(fd);
	return e;
}

bool vp_http__bearer_ok(const char *auth, const char *token)
{
	if (!token || !*token || strncasecmp(auth, "Bearer ", 7))
		return false;
	const char *got = auth + 7;
	while (*got == ' ')
		got++;
	size_t gl = strlen(got), tl = strlen(token);
	/* Every byte of the token is looked at whatever the input, so that the time taken
	 * does not say how much of a guess was right. */
	unsigned char diff = gl != tl;
	for (size_t i = 0; i < tl; i++)
		diff |= (unsigned char)token[i] ^ (unsigned char)(i < gl ? got[i] : 0);
	return diff == 0;
}

/* ---- the server ---- */

struct vp_httpd {
	int lfd;
	int wake[2];               /* written once by stop: the accept loop leaves */
	pthread_t acceptor;
	pthread_mutex_t lock;
	pthread_cond_t idle;
	int active;                /* connection threads running */
	volatile int stopping;
	char token[256];           /* "" = none */
	int port;
	struct vp_httpd_opts o;
};

struct vp_http_conn {
	struct vp_httpd *h;
	int fd;
	bool loopback;
	bool responded;
	bool head_only;            /* HEAD: the headers without the body */
	int status;
	size_t sent;
	char peer[80];
};

static const char *reason(int status)
{
	switch (status) {
	case 200: return "OK";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 413: return "Content Too Large";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 503: return "Service Unavailable";
	case 505: return "HTTP Version Not Supported";
	default: return "Unknown";
	}
}

int vp_http__respond(struct vp_http_conn *c, int status, const char *ctype, const char *extra, const void *body,
		     size_t len)
{
	char head[1024];
	if (c->responded)
		return -EALREADY;
	c->responded = true;
	c->status = status;
	int n = snprintf(head, sizeof(head),
			 "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n"
			 "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n%s%s\r\n",
			 status, reason(status), ctype, len, extra ? extra : "", extra ? "\r\n" : "");
	if (n < 0 || (size_t)n >= sizeof(head))
		return -EMSGSIZE;
	int e = vp_write_all(c->fd, head, (size_t)n);
	if (!e && len && !c->head_only)
		e = vp_write_all(c->fd, body, len);
	if (!e)
		c->sent = c->head_only ? 0 : len;
	return e;
}

int vp_http__respond_text(struct vp_http_conn *c, int status, const char *fmt, ...)
{
	char body[1024];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(body, sizeof(body) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n > sizeof(body) - 2)
		n = (int)sizeof(body) - 2;
	body[n++] = '\n';
	const char *extra = status == 401 ? "WWW-Authenticate: Bearer realm=\"viprof\"" : NULL;
	return vp_http__respond(c, status, "text/plain; charset=utf-8", extra, body, (size_t)n);
}

bool vp_http__cancelled(struct vp_http_conn *c)
{
	if (c->h->stopping)
		return true;
	struct pollfd p = { .fd = c->fd, .events = POLLIN | POLLRDHUP };
	if (poll(&p, 1, 0) <= 0)
		return false;
	if (p.revents & (POLLRDHUP | POLLHUP | POLLERR))
		return true;
	/* Bytes after the request (a pipelined request, a body we do not read) are no
	 * reason to stop; a read of 0 is. */
	char b[256];
	ssize_t k = recv(c->fd, b, sizeof(b), MSG_DONTWAIT | MSG_PEEK);
	return k == 0;
}

const char *vp_http__peer(const struct vp_http_conn *c)
{
	return c->peer;
}

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Reads the request head within VP_HTTP_HEAD_TIMEOUT_MS of the connection. Returns the
 * parser's result, or -ETIMEDOUT / -ECONNRESET. */
static int read_head(struct vp_http_conn *c, char *buf, struct vp_http_req *req)
{
	size_t got = 0;
	uint64_t deadline = mono_ms() + VP_HTTP_HEAD_TIMEOUT_MS;
	for (;;) {
		uint64_t now = mono_ms();
		if (now >= deadline || c->h->stopping)
			return -ETIMEDOUT;
		struct pollfd p = { .fd = c->fd, .events = POLLIN };
		int r = poll(&p, 1, (int)(deadline - now < 200 ? deadline - now : 200));
		if (r < 0 && errno != EINTR)
			return -errno;
		if (r <= 0)
			continue;
		ssize_t k = recv(c->fd, buf + got, VP_HTTP_MAX_HEAD - got, 0);
		if (k < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (k <= 0)
			return -ECONNRESET;
		got += (size_t)k;
		int ret = vp_http__parse(buf, got, req);
		if (ret != 0)
			return ret;
	}
}

static void log_line(struct vp_http_conn *c, const struct vp_http_req *req, uint64_t t0)
{
	FILE *f = c->h->o.log;
	if (!f)
		return;
	char when[32];
	time_t t = time(NULL);
	struct tm tm;
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", localtime_r(&t, &tm));
	fprintf(f, "%s viprof serve: http %s \"%s %s%s%s\" %d %zu bytes %llu ms\n", when, c->peer,
		req->method[0] ? req->method : "-", req->path[0] ? req->path : "-", req->query[0] ? "?" : "", req->query,
		c->status, c->sent, (unsigned long long)(mono_ms() - t0));
	fflush(f);
}

static void serve_conn(struct vp_http_conn *c)
{
	struct vp_http_req req;
	uint64_t t0 = mono_ms();
	char *buf = malloc(VP_HTTP_MAX_HEAD + 1);
	if (!buf) {
		vp_http__respond_text(c, 503, "out of memory");
		memset(&req, 0, sizeof(req));
		goto done;
	}
	int r = read_head(c, buf, &req);
	free(buf);
	c->head_only = r > 0 && !strcmp(req.method, "HEAD");
	if (r == -ETIMEDOUT)
		vp_http__respond_text(c, 408, "the request head did not arrive within %d s", VP_HTTP_HEAD_TIMEOUT_MS / 1000);
	else if (r == -EMSGSIZE)
		vp_http__respond_text(c, 431, "the request line and headers exceed %d bytes", VP_HTTP_MAX_HEAD);
	else if (r == -EPROTONOSUPPORT)
		vp_http__respond_text(c, 505, "only HTTP/1.x is spoken here");
	else if (r == -EINVAL)
		vp_http__respond_text(c, 400, "malformed request line or header");
	else if (r < 0)
		c->status = 0;   /* gone before asking: nothing to answer */
	else if (strcmp(req.method, "GET") && strcmp(req.method, "HEAD"))
		vp_http__respond(c, 405, "text/plain; charset=utf-8", "Allow: GET", "only GET is served\n", 19);
	else if (!c->loopback && !req.auth[0])
		vp_http__respond_text(c, 401, "a request from %s needs 'Authorization: Bearer <token>' (the token of "
				      "viprof serve --http-token)", c->peer);
	else if (!c->loopback && !vp_http__bearer_ok(req.auth, c->h->token))
		vp_http__respond_text(c, 403, "the bearer token is not the one of viprof serve --http-token");
	else
		c->h->o.handler(c->h->o.ctx, &req, c);
	if (r > 0 && !c->responded)
		vp_http__respond_text(c, 500, "the handler gave no answer");
done:
	log_line(c, &req, t0);
}

static void *conn_thread(void *arg)
{
	struct vp_http_conn *c = arg;
	struct vp_httpd *h = c->h;
	serve_conn(c);
	/* Half-close, then let the peer read to the end before the socket goes: a close
	 * with unread request bytes would reset the connection and lose the answer. */
	shutdown(c->fd, SHUT_WR);
	close(c->fd);
	free(c);
	pthread_mutex_lock(&h->lock);
	if (--h->active == 0)
		pthread_cond_broadcast(&h->idle);
	pthread_mutex_unlock(&h->lock);
	return NULL;
}

static void peer_name(const struct sockaddr_storage *ss, char *buf, size_t len)
{
	char a[INET6_ADDRSTRLEN] = "?";
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)ss;
		inet_ntop(AF_INET, &in->sin_addr, a, sizeof(a));
		snprintf(buf, len, "%s:%u", a, ntohs(in->sin_port));
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)ss;
		inet_ntop(AF_INET6, &in6->sin6_addr, a, sizeof(a));
		snprintf(buf, len, "[%s]:%u", a, ntohs(in6->sin6_port));
	} else {
		snprintf(buf, len, "?");
	}
}

static void *accept_thread(void *arg)
{
	struct vp_httpd *h = arg;
	while (!h->stopping) {
		struct pollfd p[2] = { { .fd = h->lfd, .events = POLLIN }, { .fd = h->wake[0], .events = POLLIN } };
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents || h->stopping)
			break;
		if (!(p[0].revents & POLLIN))
			continue;
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		int fd = accept4(h->lfd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE)
				usleep(100000);   /* out of descriptors: let handlers finish */
			continue;
		}
		struct timeval tv = { .tv_sec = VP_HTTP_SEND_TIMEOUT_MS / 1000 };
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		struct vp_http_conn *c = calloc(1, sizeof(*c));
		if (!c) {
			close(fd);
			continue;
		}
		c->h = h;
		c->fd = fd;
		c->loopback = vp_http__is_loopback((struct sockaddr *)&ss);
		peer_name(&ss, c->peer, sizeof(c->peer));
		pthread_mutex_lock(&h->lock);
		bool full = h->active >= VP_HTTP_MAX_CONNS;
		if (!full)
			h->active++;
		pthread_mutex_unlock(&h->lock);
		if (full) {
			/* Answered here, without reading the request: cheap, and never blocks
			 * long (the send timeout). */
			struct vp_http_req none = { 0 };
			vp_http__respond_text(c, 503, "busy: %d requests are being served; retry later", VP_HTTP_MAX_CONNS);
			log_line(c, &none, mono_ms());
			close(fd);
			free(c);
			continue;
		}
		pthread_t t;
		pthread_attr_t at;
		pthread_attr_init(&at);
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		if (pthread_create(&t, &at, conn_thread, c) != 0) {
			close(fd);
			free(c);
			pthread_mutex_lock(&h->lock);
			h->active--;
			pthread_mutex_unlock(&h->lock);
		}
		pthread_attr_destroy(&at);
	}
	return NULL;
}

struct vp_httpd *vp_httpd__start(const struct vp_httpd_opts *o, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int e = vp_http__parse_listen(o->listen, &ss, &sl, err, errlen);
	if (e) {
		errno = -e;
		return NULL;
	}
	struct vp_httpd *h = calloc(1, sizeof(*h));
	if (!h) {
		vp_set_err(err, errlen, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	h->lfd = h->wake[0] = h->wake[1] = -1;
	h->o = *o;
	if (o->token_file) {
		if ((e = vp_http__read_token(o->token_file, h->token, sizeof(h->token), err, errlen)))
			goto fail;
	} else if (!vp_http__is_loopback((struct sockaddr *)&ss)) {
		e = -EPERM;
		vp_set_err(err, errlen, "--http %s is not a loopback address: give --http-token FILE (a bearer token "
			   "every remote scraper must send) or listen on 127.0.0.1", o->listen);
		goto fail;
	}
	h->lfd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (h->lfd < 0) {
		e = -errno;
		vp_set_err(err, errlen, "--http %s: socket: %s", o->listen, strerror(errno));
		goto fail;
	}
	int one = 1;
	setsockopt(h->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(h->lfd, (struct sockaddr *)&ss, sl) != 0 || listen(h->lfd, 64) != 0) {
		e = -errno;
		vp_set_err(err, errlen, "--http %s: cannot listen: %s%s", o->listen, strerror(errno),
			   errno == EADDRINUSE ? "; another program has that port (choose another)"
			   : errno == EADDRNOTAVAIL ? "; no interface of this machine has that address" : "");
		goto fail;
	}
	struct sockaddr_storage bound;
	socklen_t bl = sizeof(bound);
	if (getsockname(h->lfd, (struct sockaddr *)&bound, &bl) == 0)
		h->port = ntohs(bound.ss_family == AF_INET ? ((struct sockaddr_in *)&bound)->sin_port
							   : ((struct sockaddr_in6 *)&bound)->sin6_port);
	if (pipe2(h->wake, O_CLOEXEC) != 0) {
		e = -errno;
		vp_set_err(err, errlen, "pipe: %s", strerror(errno));
		goto fail;
	}
	pthread_mutex_init(&h->lock, NULL);
	pthread_cond_init(&h->idle, NULL);
	if ((e = -pthread_create(&h->acceptor, NULL, accept_thread, h))) {
		vp_set_err(err, errlen, "cannot start the HTTP thread: %s", strerror(-e));
		pthread_mutex_destroy(&h->lock);
		pthread_cond_destroy(&h->idle);
		goto fail;
	}
	return h;
fail:
	if (h->lfd >= 0)
		close(h->lfd);
	if (h->wake[0] >= 0) {
		close(h->wake[0]);
		close(h->wake[1]);
	}
	memset(h->token, 0, sizeof(h->token));
	free(h);
	errno = -e;
	return NULL;
}

int vp_httpd__port(const struct vp_httpd *h)
{
	return h->port;
}

void vp_httpd__stop(struct vp_httpd *h)
{
	if (!h)
		return;
	h->stopping = 1;
	if (write(h->wake[1], "x", 1) < 0) {
		/* The flag alone stops the loop at its next wakeup. */
	}
	pthread_join(h->acceptor, NULL);
	close(h->lfd);
	pthread_mutex_lock(&h->lock);
	while (h->active > 0)
		pthread_cond_wait(&h->idle, &h->lock);
	pthread_mutex_unlock(&h->lock);
	pthread_mutex_destroy(&h->lock);
	pthread_cond_destroy(&h->idle);
	close(h->wake[0]);
	close(h->wake[1]);
	memset(h->token, 0, sizeof(h->token));
	free(h);
}
