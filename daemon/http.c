/* The service's HTTP/1.1 server: see http.h. */
#define _GNU_SOURCE
#include "daemon/http.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/safefs.h"
#include "common/userns.h"
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

/* An IPv4 address mapped into IPv6 (::ffff:a.b.c.d) as the AF_INET address it is. */
static void unmap_v4(struct sockaddr_storage *ss)
{
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
	if (ss->ss_family != AF_INET6 || !IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr))
		return;
	struct sockaddr_in in = { .sin_family = AF_INET, .sin_port = in6->sin6_port };
	memcpy(&in.sin_addr, &in6->sin6_addr.s6_addr[12], 4);
	memset(ss, 0, sizeof(*ss));
	memcpy(ss, &in, sizeof(in));
}

/* One exact inet_diag lookup of the TCP socket whose local end is src and remote end
 * dst, in family fam (dst all zero: the listener a connection to src would reach). 0
 * with *uid, -ENOENT, or -errno. */
static int diag_lookup(int fam, const struct sockaddr_storage *src, const struct sockaddr_storage *dst, uid_t *uid)
{
	struct {
		struct nlmsghdr nlh;
		struct inet_diag_req_v2 r;
	} req = { 0 };
	req.nlh.nlmsg_len = sizeof(req);
	req.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	req.nlh.nlmsg_flags = NLM_F_REQUEST;
	req.nlh.nlmsg_seq = 1;
	req.r.sdiag_family = (uint8_t)fam;
	req.r.sdiag_protocol = IPPROTO_TCP;
	req.r.idiag_states = ~0u;
	req.r.id.idiag_cookie[0] = req.r.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
	if (fam == AF_INET) {
		const struct sockaddr_in *s = (const void *)src, *d = (const void *)dst;
		req.r.id.idiag_sport = s->sin_port;
		req.r.id.idiag_dport = d->sin_port;
		memcpy(req.r.id.idiag_src, &s->sin_addr, 4);
		memcpy(req.r.id.idiag_dst, &d->sin_addr, 4);
	} else {
		const struct sockaddr_in6 *s = (const void *)src, *d = (const void *)dst;
		req.r.id.idiag_sport = s->sin6_port;
		req.r.id.idiag_dport = d->sin6_port;
		memcpy(req.r.id.idiag_src, &s->sin6_addr, 16);
		memcpy(req.r.id.idiag_dst, &d->sin6_addr, 16);
	}
	int e = 0, nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (nl < 0)
		return -errno;
	struct timeval tv = { .tv_sec = 1 };
	setsockopt(nl, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
	long buf[1024];
	if (sendto(nl, &req, sizeof(req), 0, (struct sockaddr *)&kernel, sizeof(kernel)) != (ssize_t)sizeof(req)) {
		e = -errno;
		goto cleanup;
	}
	ssize_t n = recv(nl, buf, sizeof(buf), 0);
	if (n < 0) {
		e = -errno;
		goto cleanup;
	}
	e = -ENOENT;
	for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
		if (h->nlmsg_type == NLMSG_ERROR) {
			const struct nlmsgerr *ne = NLMSG_DATA(h);
			e = ne->error ? ne->error : -ENOENT;
			break;
		}
		if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY || h->nlmsg_len < NLMSG_LENGTH(sizeof(struct inet_diag_msg)))
			continue;
		const struct inet_diag_msg *m = NLMSG_DATA(h);
		/* A socket without an inode is held by no process: a TIME_WAIT (or closed
		 * FIN_WAIT2) mini-socket, which the kernel reports as uid 0, or an orphan.
		 * Nobody is asking any more: no identity. */
		if (m->idiag_inode == 0)
			break;
		*uid = m->idiag_uid;
		e = 0;
		break;
	}
cleanup:
	close(nl);
	return e;
}

int vp_http__loopback_peer_uid(int fd, uid_t *uid)
{
	struct sockaddr_storage me, peer;
	socklen_t ml = sizeof(me), pl = sizeof(peer);
	if (getsockname(fd, (struct sockaddr *)&me, &ml) != 0 || getpeername(fd, (struct sockaddr *)&peer, &pl) != 0)
		return -errno;
	if (!vp_http__is_loopback((struct sockaddr *)&peer) || !vp_http__is_loopback((struct sockaddr *)&me))
		return -EADDRNOTAVAIL;
	if (me.ss_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&((struct sockaddr_in6 *)&peer)->sin6_addr)) {
		/* A dual-stack listener: the peer's socket is an IPv4 one (or an IPv6 one
		 * connected to a mapped address; TCP keeps both in one table, found either way). */
		struct sockaddr_storage m4 = me, p4 = peer;
		unmap_v4(&m4);
		unmap_v4(&p4);
		int e = diag_lookup(AF_INET, &p4, &m4, uid);
		if (e != -ENOENT)
			return e;
	}
	/* The peer's socket has the peer's address as its local end and ours as its remote. */
	return diag_lookup(me.ss_family, &peer, &me, uid);
}

int vp_http__tcp_owner(const struct sockaddr *local, socklen_t len, const struct sockaddr *remote, uid_t *uid)
{
	struct sockaddr_storage l = { 0 }, r = { 0 };
	if ((local->sa_family != AF_INET && local->sa_family != AF_INET6) || len > sizeof(l))
		return -EAFNOSUPPORT;
	memcpy(&l, local, len);
	unmap_v4(&l);
	if (remote) {
		size_t rl = remote->sa_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
		memcpy(&r, remote, rl);
		unmap_v4(&r);
		if (r.ss_family != l.ss_family)
			return -EAFNOSUPPORT;
	}
	r.ss_family = l.ss_family;
	return diag_lookup(l.ss_family, &l, &r, uid);
}

bool vp_http__uid_allowed(const struct vp_http_allow *a, uid_t uid)
{
	if (uid == 0)
		return true;
	for (int i = 0; a && i < a->nuids; i++)
		if (a->uids[i] == uid)
			return true;
	if (!a || !a->group)
		return false;
	/* Membership as login would grant it: the primary group, or a supplementary one
	 * (read at each request, so that removing a user from the group takes effect). */
	struct passwd pw, *pwp = NULL;
	char buf[4096];
	if (getpwuid_r(uid, &pw, buf, sizeof(buf), &pwp) != 0 || !pwp)
		return false;
	if (pw.pw_gid == a->gid)
		return true;
	gid_t groups[256];
	int ng = (int)(sizeof(groups) / sizeof(groups[0]));
	if (getgrouplist(pw.pw_name, pw.pw_gid, groups, &ng) < 0)
		return false;   /* more groups than fit: refused rather than half-checked */
	for (int i = 0; i < ng; i++)
		if (groups[i] == a->gid)
			return true;
	return false;
}

/* ---- the server ---- */

/* Whom a connection counts against for VP_HTTP_MAX_PER_PEER: a local uid (the owner of
 * a subordinate uid: common/userns.h), or an address (remote peers, and loopback peers
 * whose uid could not be told); an IPv6 address by its /64, the least a host is given. */
struct peer_key {
	bool is_uid;
	uid_t uid;
	uint8_t addr[16];
};

struct peer_count {
	struct peer_key k;
	int n;
};

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
	struct peer_count peers[VP_HTTP_MAX_CONNS];   /* under lock; n == 0: free */
};

struct vp_http_conn {
	struct vp_httpd *h;
	int fd;
	bool loopback;
	bool have_uid;             /* uid: the owner of the loopback peer's socket */
	uid_t uid;
	bool kernel_ok;            /* see vp_http__kernel_ok */
	struct peer_key key;
	uint64_t accepted_ms;      /* the head's deadline counts from here */
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

bool vp_http__kernel_ok(const struct vp_http_conn *c)
{
	return c->kernel_ok;
}

void vp_http__peer_key(const struct sockaddr_storage *ss, uint8_t key[16])
{
	struct sockaddr_storage u = *ss;
	memset(key, 0, 16);
	unmap_v4(&u);
	if (u.ss_family == AF_INET)
		memcpy(key, &((struct sockaddr_in *)&u)->sin_addr, 4);
	else if (u.ss_family == AF_INET6)
		memcpy(key, &((struct sockaddr_in6 *)&u)->sin6_addr, 8);   /* the /64 */
}

static bool key_eq(const struct peer_key *a, const struct peer_key *b)
{
	return a->is_uid == b->is_uid && (a->is_uid ? a->uid == b->uid : !memcmp(a->addr, b->addr, sizeof(a->addr)));
}

/* Counts a connection against its peer: false (and nothing counted) when the peer has
 * VP_HTTP_MAX_PER_PEER already. Under h->lock. */
static bool peer_take(struct vp_httpd *h, const struct peer_key *k)
{
	struct peer_count *free_slot = NULL;
	for (int i = 0; i < VP_HTTP_MAX_CONNS; i++) {
		struct peer_count *pc = &h->peers[i];
		if (pc->n && key_eq(&pc->k, k)) {
			if (pc->n >= VP_HTTP_MAX_PER_PEER)
				return false;
			pc->n++;
			return true;
		}
		if (!pc->n && !free_slot)
			free_slot = pc;
	}
	if (!free_slot)
		return false;   /* cannot happen: fewer connections than slots */
	free_slot->k = *k;
	free_slot->n = 1;
	return true;
}

static void peer_put(struct vp_httpd *h, const struct peer_key *k)
{
	for (int i = 0; i < VP_HTTP_MAX_CONNS; i++)
		if (h->peers[i].n && key_eq(&h->peers[i].k, k)) {
			h->peers[i].n--;
			return;
		}
}

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Reads the request head within VP_HTTP_HEAD_TIMEOUT_MS of accept: the whole head, not
 * per read, so that a peer trickling a byte at a time loses its slot as soon as one
 * that sends nothing. Returns the
 * parser's result, or -ETIMEDOUT / -ECONNRESET. */
static int read_head(struct vp_http_conn *c, char *buf, struct vp_http_req *req)
{
	size_t got = 0;
	uint64_t deadline = c->accepted_ms + VP_HTTP_HEAD_TIMEOUT_MS;
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

/* Whether a loopback peer may read without the token: its uid is known and allowed. */
static bool local_allowed(const struct vp_http_conn *c)
{
	return c->have_uid && vp_http__uid_allowed(&c->h->o.allow, c->uid);
}

/* The 403 of a loopback peer that local_allowed refuses. */
static void deny_local(struct vp_http_conn *c)
{
	if (!c->have_uid)
		vp_http__respond_text(c, 403, "cannot tell which local user %s is (the kernel has no socket held by a "
				      "process for it); send 'Authorization: Bearer <token>' (viprof serve --http-token)",
				      c->peer);
	else
		vp_http__respond_text(c, 403, "uid %u may not read whole-VM profiles (every process's code, threads "
				      "and addresses): ask the administrator for the token of viprof serve --http-token, "
				      "or to be let in with --http-allow-group or --http-allow-user", (unsigned)c->uid);
}

/* Who the peer is decides what it gets: a bearer token (anyone, everything), else a
 * loopback peer's uid (allowed ones, kernel frames for root only). false when it was
 * answered with 401 or 403; every path of the server is behind this. */
static bool authorize(struct vp_http_conn *c, const struct vp_http_req *req)
{
	struct vp_httpd *h = c->h;
	/* Without a token file an Authorization header proves nothing: the peer is judged
	 * by who it is, as if it had sent none. */
	if (req->auth[0] && h->token[0]) {
		if (!vp_http__bearer_ok(req->auth, h->token)) {
			vp_http__respond_text(c, 403, "the bearer token is not the one of viprof serve --http-token");
			return false;
		}
		c->kernel_ok = true;
		return true;
	}
	if (!c->loopback) {
		vp_http__respond_text(c, 401, "a request from %s needs 'Authorization: Bearer <token>' (the token of "
				      "viprof serve --http-token)", c->peer);
		return false;
	}
	if (!local_allowed(c)) {
		deny_local(c);
		return false;
	}
	c->kernel_ok = c->uid == 0;
	return true;
}

static void serve_conn(struct vp_http_conn *c)
{
	struct vp_http_req req;
	uint64_t t0 = c->accepted_ms;
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
	else if (!authorize(c, &req))
		;   /* answered 401 or 403 */
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
	pthread_mutex_lock(&h->lock);
	peer_put(h, &c->key);
	if (--h->active == 0)
		pthread_cond_broadcast(&h->idle);
	pthread_mutex_unlock(&h->lock);
	free(c);
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
		c->accepted_ms = mono_ms();
		c->loopback = vp_http__is_loopback((struct sockaddr *)&ss);
		peer_name(&ss, c->peer, sizeof(c->peer));
		/* A loopback peer is told by its socket's owner, asked now, while the peer
		 * still holds it (one netlink round trip). */
		if (c->loopback && vp_http__loopback_peer_uid(fd, &c->uid) == 0) {
			c->have_uid = true;
			size_t pl = strlen(c->peer);
			snprintf(c->peer + pl, sizeof(c->peer) - pl, " uid %u", (unsigned)c->uid);
			c->key.is_uid = true;
			c->key.uid = vp_userns__accountable(c->uid, -1);
			if (c->key.uid != c->uid) {
				pl = strlen(c->peer);
				snprintf(c->peer + pl, sizeof(c->peer) - pl, " (of uid %u)", (unsigned)c->key.uid);
			}
		} else {
			vp_http__peer_key(&ss, c->key.addr);
		}
		/* With no token to send, a local peer that may not read is answered now,
		 * before it holds a slot: otherwise one user's subordinate uids (65,536 local
		 * users of their own to the kernel) could take every slot from root's scraper. */
		bool denied = !h->token[0] && c->loopback && !local_allowed(c);
		pthread_mutex_lock(&h->lock);
		bool full = false, mine = false;
		if (!denied && !(full = h->active >= VP_HTTP_MAX_CONNS) && !(mine = !peer_take(h, &c->key)))
			h->active++;
		pthread_mutex_unlock(&h->lock);
		if (denied || full || mine) {
			/* Answered here, without reading the request: cheap, and never blocks
			 * long (the answer fits the socket's buffer; the send timeout bounds it). */
			struct vp_http_req none = { 0 };
			if (denied)
				deny_local(c);
			else if (full)
				vp_http__respond_text(c, 503, "busy: %d requests are being served; retry later",
						      VP_HTTP_MAX_CONNS);
			else
				vp_http__respond_text(c, 503, "busy: %s has %d connections open already, the most one "
						      "peer may; retry when one is answered", c->peer, VP_HTTP_MAX_PER_PEER);
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
			pthread_mutex_lock(&h->lock);
			peer_put(h, &c->key);
			h->active--;
			pthread_mutex_unlock(&h->lock);
			free(c);
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
