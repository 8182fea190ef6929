/* A small HTTP/1.1 server for the service's pprof endpoint and pages: one thread
 * accepts, one thread per connection reads one request (request line and headers
 * only, size- and time-limited), calls the handler, answers with Connection: close
 * and closes. Loopback peers are served as they come; any other peer must send
 * "Authorization: Bearer <token>" with the token read from --http-token's file, and
 * without a token file only loopback addresses may be bound at all. */
#ifndef VIPROF_SERVICE_HTTP_H
#define VIPROF_SERVICE_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/socket.h>

#define VP_HTTP_MAX_HEAD 8192          /* request line + headers */
#define VP_HTTP_HEAD_TIMEOUT_MS 10000  /* to send them, from connect */
#define VP_HTTP_SEND_TIMEOUT_MS 30000  /* per blocked write of the answer */
#define VP_HTTP_MAX_CONNS 16           /* connections served at once; more get 503 */
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
/* The peer's address as text ("127.0.0.1:5432"), for messages. */
const char *vp_http__peer(const struct vp_http_conn *c);

typedef void (*vp_http_handler)(void *ctx, const struct vp_http_req *req, struct vp_http_conn *c);

struct vp_httpd_opts {
	const char *listen;        /* ADDR:PORT */
	const char *token_file;    /* NULL: loopback only */
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
