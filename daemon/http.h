/* A small HTTP/1.1 server for the service's pprof endpoint and pages: one thread
 * accepts, one thread per connection reads one request (request line and headers
 * only, size- and time-limited), calls the handler, answers with Connection: close
 * and closes.
 *
 * Who may ask: a peer that sends "Authorization: Bearer <token>" with the token of
 * --http-token's file, from anywhere; without a token, only a loopback peer whose
 * socket belongs to an allowed local uid (root, the uids of --http-allow-user, the
 * members of --http-allow-group). The kernel says who owns the peer's socket: the
 * exact 4-tuple is looked up with NETLINK_SOCK_DIAG, so no peer can claim a uid. Every
 * other peer gets 401 (remote, no header) or 403, on every path. Without a token file
 * only loopback addresses may be bound at all.
 *
 * What costs the server: a connection thread, held from accept to the answer. The head
 * must arrive within VP_HTTP_HEAD_TIMEOUT_MS of accept (a slow sender loses its slot
 * then, not the server), and one peer (a local uid, or a remote address) holds at
 * most VP_HTTP_MAX_PER_PEER connections; beyond either cap a peer gets 503 at once.
 * A local uid counts as the owner of its subordinate-uid range (common/userns.h), a
 * remote IPv6 address as its /64; and without a token file a local peer that may not
 * read is answered 403 at accept, so that it never holds a slot. */
#ifndef VIPROF_SERVICE_HTTP_H
#define VIPROF_SERVICE_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/types.h>

#define VP_HTTP_MAX_HEAD 8192          /* request line + headers */
#define VP_HTTP_HEAD_TIMEOUT_MS 3000   /* to send them, from accept */
#define VP_HTTP_SEND_TIMEOUT_MS 30000  /* per blocked write of the answer */
#define VP_HTTP_MAX_CONNS 64           /* connections served at once; more get 503 */
#define VP_HTTP_MAX_PER_PEER 8         /* of them from one local uid or remote address */
#define VP_HTTP_MAX_ALLOW 32           /* uids of --http-allow-user */
#define VP_HTTP_MIN_TOKEN 16           /* characters a bearer token needs at least */

struct vp_http_req {
	char method[16];
	char path[1024];      /* the target before '?', as sent (not decoded) */
	char query[1024];     /* after '?', or "" */
	char auth[512];       /* the Authorization header's value, or "" */
	int minor;            /* HTTP/1.<minor> */
};

/* Parses a request head at buf[0..len). Returns the head's length (through the blank
 * line) when it is complete, 0 when more bytes are needed, -EMSGSIZE when it does not
 * fit VP_HTTP_MAX_HEAD (or a field does not fit req), -EINVAL when it is malformed,
 * -EPROTONOSUPPORT for a version other than HTTP/1.x. Pure: no I/O. */
int vp_http__parse(const char *buf, size_t len, struct vp_http_req *req);

/* The value of name in a query string "a=1&b=2" into val (percent-decoding not
 * needed for the service's numbers and names: a '%' makes it fail). true if present. */
bool vp_http__query(const char *query, const char *name, char *val, size_t len);

/* Whether sa is 127.0.0.0/8, ::1 or ::ffff:127.0.0.0/104. */
bool vp_http__is_loopback(const struct sockaddr *sa);

/* "ADDR:PORT" or "[V6ADDR]:PORT" (numeric addresses only; "localhost" is taken as
 * 127.0.0.1) into ss. 0, or -EINVAL with a one-line reason in err. */
int vp_http__parse_listen(const char *s, struct sockaddr_storage *ss, socklen_t *sslen, char *err, size_t errlen);

/* Reads a bearer token file: one line, at least VP_HTTP_MIN_TOKEN characters, no
 * white space inside; the file must not be readable or writable by group or others.
 * 0, or -errno with a one-line reason in err. */
int vp_http__read_token(const char *path, char *tok, size_t len, char *err, size_t errlen);

/* Whether the header value auth is "Bearer <token>", compared in constant time. */
bool vp_http__bearer_ok(const char *auth, const char *token);

/* The uid that owns the socket at the other end of fd, a TCP connection between two
 * loopback addresses of this machine (IPv4, IPv6, or IPv4 mapped into IPv6): asked
 * of the kernel (NETLINK_SOCK_DIAG, the exact 4-tuple). A socket no process holds any
 * more (closed, or in TIME_WAIT, which the kernel reports as uid 0) is no answer.
 * 0, -ENOENT (no such socket, or not held), or -errno. */
int vp_http__loopback_peer_uid(int fd, uid_t *uid);

/* What a peer that is not a known local uid counts against for VP_HTTP_MAX_PER_PEER,
 * into key[16]: an IPv4 address (IPv4 mapped into IPv6 too) whole, an IPv6 address by
 * its /64 (a host is given a /64 at least: one per address would let one host take
 * every slot with addresses of its own). */
void vp_http__peer_key(const struct sockaddr_storage *ss, uint8_t key[16]);

/* The uid that owns the TCP socket of this machine whose local end is local and whose
 * remote end is remote, or with remote NULL the listening socket that a connection to
 * local would reach now (the push client asks before it connects). IPv4 mapped into
 * IPv6 is taken as IPv4. The same kernel lookup as above, with the same rule: a socket
 * no process holds (closed, TIME_WAIT, or accepted by nobody yet) is no answer.
 * 0, -ENOENT, or -errno. */
int vp_http__tcp_owner(const struct sockaddr *local, socklen_t len, const struct sockaddr *remote, uid_t *uid);

/* Who may read without a token: root, the uids listed, and with group set the
 * members (primary or supplementary) of gid. All zero: root only. */
struct vp_http_allow {
	uid_t uids[VP_HTTP_MAX_ALLOW];
	int nuids;
	bool group;
	gid_t gid;
};
bool vp_http__uid_allowed(const struct vp_http_allow *a, uid_t uid);

/* One connection, as its handler sees it. */
struct vp_http_conn;

/* Sends the status line, headers (Content-Type, Content-Length, Connection: close and
 * extra, CRLF-separated lines without the last CRLF, or NULL) and the body. One call
 * per request. 0 or -errno (the peer went away). */
int vp_http__respond(struct vp_http_conn *c, int status, const char *ctype, const char *extra, const void *body,
		     size_t len);
/* A text/plain answer of one line. */
int vp_http__respond_text(struct vp_http_conn *c, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Whether the handler should give up: the peer closed its end, or the server stops. */
bool vp_http__cancelled(struct vp_http_conn *c);
/* The peer's address as text ("127.0.0.1:5432", "127.0.0.1:5432 uid 1001"), for messages. */
const char *vp_http__peer(const struct vp_http_conn *c);
/* Whether the peer may see kernel addresses and symbols: root's own sockets and peers
 * with the bearer token; an allowed non-root uid is not (the kernel hides them from it
 * when kptr_restrict or perf_event_paranoid are set, as they are by default). */
bool vp_http__kernel_ok(const struct vp_http_conn *c);

typedef void (*vp_http_handler)(void *ctx, const struct vp_http_req *req, struct vp_http_conn *c);

struct vp_httpd_opts {
	const char *listen;        /* ADDR:PORT */
	const char *token_file;    /* NULL: loopback only */
	struct vp_http_allow allow; /* local uids served without the token */
	vp_http_handler handler;
	void *ctx;
	FILE *log;                 /* one line per request, or NULL */
};

struct vp_httpd;
/* Binds and listens, then serves on threads of its own. NULL with errno and a
 * one-line reason in err: a non-loopback address without a token file is refused. */
struct vp_httpd *vp_httpd__start(const struct vp_httpd_opts *o, char *err, size_t errlen);
/* The port actually bound (useful with port 0). */
int vp_httpd__port(const struct vp_httpd *h);
/* Stops accepting, asks running handlers to give up (vp_http__cancelled), waits for
 * them and frees everything. Accepts NULL. */
void vp_httpd__stop(struct vp_httpd *h);

#endif
