/* The service's HTTP server (daemon/http.h): the request parser's limits and
 * refusals, query values, loopback and listen-address checks, the token file's rules
 * and the bearer comparison, then a real server on 127.0.0.1 answering GET, refusing
 * other methods, oversized heads and garbage, and refusing to bind a non-loopback
 * address without a token. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "daemon/http.h"
#include "test.h"

static void test_parse(void)
{
	struct vp_http_req r;
	const char *ok = "GET /debug/pprof/profile?seconds=3&x=1 HTTP/1.1\r\nHost: a\r\n"
			 "authorization:   Bearer abc  \r\nAccept: */*\r\n\r\nBODY";
	ASSERT_EQ(vp_http__parse(ok, strlen(ok), &r), strlen(ok) - 4);
	ASSERT_STREQ(r.method, "GET");
	ASSERT_STREQ(r.path, "/debug/pprof/profile");
	ASSERT_STREQ(r.query, "seconds=3&x=1");
	ASSERT_STREQ(r.auth, "Bearer abc");
	ASSERT_EQ(r.minor, 1);
	/* Every prefix of a good head asks for more. */
	for (size_t n = 0; n < strlen(ok) - 4; n++)
		ASSERT_EQ(vp_http__parse(ok, n, &r), 0);
	const char *h10 = "HEAD / HTTP/1.0\r\n\r\n";
	ASSERT_EQ(vp_http__parse(h10, strlen(h10), &r), strlen(h10));
	ASSERT_STREQ(r.query, "");
	ASSERT_EQ(r.minor, 0);

	static const char *const bad[] = {
		"GET\r\n\r\n", "GET / \r\n\r\n", " GET / HTTP/1.1\r\n\r\n", "GET  / HTTP/1.1\r\n\r\n",
		"GET x HTTP/1.1\r\n\r\n", "GET / HTTP/1.1 \r\n\r\n", "GET / HTTP/1.1\r\nNoColon\r\n\r\n",
		"GET / HTTP/1.1\r\n: v\r\n\r\n", "GET / HTTP/1.1\r\nBad Name: v\r\n\r\n",
		"G(T / HTTP/1.1\r\n\r\n", "GET /\x7f HTTP/1.1\r\n\r\n", "GET / FTP/1.1\r\n\r\n",
		"GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (vp_http__parse(bad[i], strlen(bad[i]), &r) != -EINVAL)
			FAIL("accepted or misjudged: \"%s\" (%d)", bad[i], vp_http__parse(bad[i], strlen(bad[i]), &r));
	const char *v2 = "GET / HTTP/2.0\r\n\r\n";
	ASSERT_EQ(vp_http__parse(v2, strlen(v2), &r), -EPROTONOSUPPORT);
	const char *nul = "GET / HTTP/1.1\r\nA: \0b\r\n\r\n";
	ASSERT_EQ(vp_http__parse(nul, 26, &r), -EINVAL);

	/* Too big: a head without an end that reached the limit, a head past it, a field
	 * that does not fit. */
	char *big = malloc(VP_HTTP_MAX_HEAD + 64);
	memset(big, 'a', VP_HTTP_MAX_HEAD + 64);
	memcpy(big, "GET / HTTP/1.1\r\nX: ", 19);
	ASSERT_EQ(vp_http__parse(big, VP_HTTP_MAX_HEAD, &r), -EMSGSIZE);
	ASSERT_EQ(vp_http__parse(big, VP_HTTP_MAX_HEAD - 1, &r), 0);
	memcpy(big + VP_HTTP_MAX_HEAD + 10, "\r\n\r\n", 4);
	ASSERT_EQ(vp_http__parse(big, VP_HTTP_MAX_HEAD + 14, &r), -EMSGSIZE);
	memset(big, 'a', 2000);
	memcpy(big, "GET /", 5);
	memcpy(big + 2000, " HTTP/1.1\r\n\r\n", 13);
	ASSERT_EQ(vp_http__parse(big, 2013, &r), -EMSGSIZE);
	free(big);
}

static void test_query(void)
{
	char v[16];
	ASSERT_TRUE(vp_http__query("seconds=3&x=1", "seconds", v, sizeof(v)));
	ASSERT_STREQ(v, "3");
	ASSERT_TRUE(vp_http__query("a=1&x=22", "x", v, sizeof(v)));
	ASSERT_STREQ(v, "22");
	ASSERT_TRUE(vp_http__query("debug", "debug", v, sizeof(v)));
	ASSERT_STREQ(v, "");
	ASSERT_FALSE(vp_http__query("secondsx=3", "seconds", v, sizeof(v)));
	ASSERT_FALSE(vp_http__query("", "seconds", v, sizeof(v)));
	ASSERT_FALSE(vp_http__query("seconds=%33", "seconds", v, sizeof(v)));
	ASSERT_FALSE(vp_http__query("seconds=12345678901234567890", "seconds", v, sizeof(v)));
}

static void test_addresses(void)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	char err[256];
	ASSERT_OK(vp_http__parse_listen("127.0.0.1:6060", &ss, &sl, err, sizeof(err)));
	ASSERT_EQ(ss.ss_family, AF_INET);
	ASSERT_EQ(ntohs(((struct sockaddr_in *)&ss)->sin_port), 6060);
	ASSERT_TRUE(vp_http__is_loopback((struct sockaddr *)&ss));
	ASSERT_OK(vp_http__parse_listen("127.8.9.10:0", &ss, &sl, err, sizeof(err)));
	ASSERT_TRUE(vp_http__is_loopback((struct sockaddr *)&ss));
	ASSERT_OK(vp_http__parse_listen("localhost:1", &ss, &sl, err, sizeof(err)));
	ASSERT_TRUE(vp_http__is_loopback((struct sockaddr *)&ss));
	ASSERT_OK(vp_http__parse_listen("0.0.0.0:6060", &ss, &sl, err, sizeof(err)));
	ASSERT_FALSE(vp_http__is_loopback((struct sockaddr *)&ss));
	ASSERT_OK(vp_http__parse_listen("10.1.2.3:6060", &ss, &sl, err, sizeof(err)));
	ASSERT_FALSE(vp_http__is_loopback((struct sockaddr *)&ss));
	ASSERT_OK(vp_http__parse_listen("[::1]:6060", &ss, &sl, err, sizeof(err)));
	ASSERT_EQ(ss.ss_family, AF_INET6);
	ASSERT_TRUE(vp_http__is_loopback((struct sockaddr *)&ss));
	ASSERT_OK(vp_http__parse_listen("[::ffff:127.0.0.1]:6060", &ss, &sl, err, sizeof(err)));
	ASSERT_TRUE(vp_http__is_loopback((struct sockaddr *)&ss));
	ASSERT_OK(vp_http__parse_listen("[::ffff:10.0.0.1]:6060", &ss, &sl, err, sizeof(err)));
	ASSERT_FALSE(vp_http__is_loopback((struct sockaddr *)&ss));
	ASSERT_OK(vp_http__parse_listen("[::]:6060", &ss, &sl, err, sizeof(err)));
	ASSERT_FALSE(vp_http__is_loopback((struct sockaddr *)&ss));
	static const char *const bad[] = { "6060", ":6060", "127.0.0.1", "127.0.0.1:", "127.0.0.1:65536",
					   "127.0.0.1:-1", "::1:6060", "[::1]6060", "host.example:80", "1.2.3:4",
					   "[127.0.0.1]:80" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = 0;
		if (vp_http__parse_listen(bad[i], &ss, &sl, err, sizeof(err)) != -EINVAL)
			FAIL("accepted --http %s", bad[i]);
		ASSERT_CONTAINS(err, "ADDR:PORT");
	}
}

static void write_file(const char *path, const char *s, mode_t mode)
{
	unlink(path);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
	ASSERT_TRUE(fd >= 0);
	ASSERT_EQ(write(fd, s, strlen(s)), strlen(s));
	fchmod(fd, mode);
	close(fd);
}

static void test_token(void)
{
	char tok[256], err[512];
	const char *f = "test-http.token";
	write_file(f, "s3cr3t-t0ken-0123456789\n", 0600);
	ASSERT_OK(vp_http__read_token(f, tok, sizeof(tok), err, sizeof(err)));
	ASSERT_STREQ(tok, "s3cr3t-t0ken-0123456789");
	ASSERT_TRUE(vp_http__bearer_ok("Bearer s3cr3t-t0ken-0123456789", tok));
	ASSERT_TRUE(vp_http__bearer_ok("bearer s3cr3t-t0ken-0123456789", tok));
	ASSERT_FALSE(vp_http__bearer_ok("Bearer s3cr3t-t0ken-012345678", tok));
	ASSERT_FALSE(vp_http__bearer_ok("Bearer s3cr3t-t0ken-01234567890", tok));
	ASSERT_FALSE(vp_http__bearer_ok("Bearer s3cr3t-t0ken-0123456788", tok));
	ASSERT_FALSE(vp_http__bearer_ok("Basic s3cr3t-t0ken-0123456789", tok));
	ASSERT_FALSE(vp_http__bearer_ok("Bearer ", tok));
	ASSERT_FALSE(vp_http__bearer_ok("Bearer ", ""));

	write_file(f, "s3cr3t-t0ken-0123456789\n", 0644);
	ASSERT_EQ(vp_http__read_token(f, tok, sizeof(tok), err, sizeof(err)), -EPERM);
	ASSERT_CONTAINS(err, "chmod 600");
	write_file(f, "short\n", 0600);
	ASSERT_EQ(vp_http__read_token(f, tok, sizeof(tok), err, sizeof(err)), -EINVAL);
	ASSERT_CONTAINS(err, "needs");
	write_file(f, "two words in the token file\n", 0600);
	ASSERT_EQ(vp_http__read_token(f, tok, sizeof(tok), err, sizeof(err)), -EINVAL);
	ASSERT_EQ(vp_http__read_token("/nonexistent/token", tok, sizeof(tok), err, sizeof(err)), -ENOENT);
	ASSERT_CONTAINS(err, "/nonexistent/token");
	unlink(f);
}

static void handler(void *ctx, const struct vp_http_req *req, struct vp_http_conn *c)
{
	(*(int *)ctx)++;
	if (!strcmp(req->path, "/hello"))
		vp_http__respond(c, 200, "text/plain", NULL, "hello\n", 6);
	else
		vp_http__respond_text(c, 404, "no page %s", req->path);
}

/* Sends req to 127.0.0.1:port and returns the whole answer (malloc'ed). */
static char *ask(int port, const char *req, size_t len)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ASSERT_OK(connect(fd, (struct sockaddr *)&a, sizeof(a)) ? -errno : 0);
	ASSERT_EQ(write(fd, req, len), len);
	char *buf = calloc(1, 1 << 16);
	size_t got = 0;
	ssize_t k;
	while ((k = read(fd, buf + got, (1 << 16) - 1 - got)) > 0)
		got += (size_t)k;
	close(fd);
	return buf;
}

static void test_server(void)
{
	int calls = 0;
	char err[512] = "";
	/* Whoever runs the test is let in (root always is). */
	struct vp_httpd_opts o = { .listen = "127.0.0.1:0", .allow = { .uids = { geteuid() }, .nuids = 1 },
				   .handler = handler, .ctx = &calls, .log = stderr };
	struct vp_httpd *h = vp_httpd__start(&o, err, sizeof(err));
	if (!h)
		FAIL("cannot start: %s", err);
	int port = vp_httpd__port(h);
	ASSERT_GT(port, 0);

	char *r = ask(port, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n", 32);
	ASSERT_CONTAINS(r, "HTTP/1.1 200 OK\r\n");
	ASSERT_CONTAINS(r, "Content-Length: 6\r\n");
	ASSERT_CONTAINS(r, "Connection: close\r\n");
	ASSERT_CONTAINS(r, "\r\n\r\nhello\n");
	free(r);
	r = ask(port, "HEAD /hello HTTP/1.1\r\n\r\n", 24);
	ASSERT_CONTAINS(r, "Content-Length: 6\r\n");
	ASSERT_TRUE(strstr(r, "hello\n") == NULL);
	free(r);
	r = ask(port, "GET /nope HTTP/1.0\r\n\r\n", 22);
	ASSERT_CONTAINS(r, "HTTP/1.1 404 ");
	ASSERT_CONTAINS(r, "no page /nope");
	free(r);
	r = ask(port, "POST /hello HTTP/1.1\r\nContent-Length: 0\r\n\r\n", 43);
	ASSERT_CONTAINS(r, "HTTP/1.1 405 ");
	ASSERT_CONTAINS(r, "Allow: GET");
	free(r);
	r = ask(port, "garbage\r\n\r\n", 11);
	ASSERT_CONTAINS(r, "HTTP/1.1 400 ");
	free(r);
	char *big = malloc(VP_HTTP_MAX_HEAD + 100);
	memset(big, 'a', VP_HTTP_MAX_HEAD + 100);
	memcpy(big, "GET / HTTP/1.1\r\nX: ", 19);
	r = ask(port, big, VP_HTTP_MAX_HEAD + 100);
	ASSERT_CONTAINS(r, "HTTP/1.1 431 ");
	free(r);
	free(big);
	/* A loopback request needs no token; the handler ran for GET, HEAD and 404 only. */
	ASSERT_EQ(calls, 3);
	vp_httpd__stop(h);

	/* Binding a non-loopback address without a token is refused in one line. */
	o.listen = "0.0.0.0:0";
	ASSERT_NULL(vp_httpd__start(&o, err, sizeof(err)));
	ASSERT_CONTAINS(err, "not a loopback address");
	ASSERT_CONTAINS(err, "--http-token");
	ASSERT_TRUE(strchr(err, '\n') == NULL);
	o.listen = "[::]:0";
	ASSERT_NULL(vp_httpd__start(&o, err, sizeof(err)));
	ASSERT_CONTAINS(err, "not a loopback address");
}

/* A connected loopback pair in family fam (client, accepted server end). */
static void pair(int fam, int *cli, int *srv)
{
	struct sockaddr_storage ss = { 0 };
	socklen_t sl;
	if (fam == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)&ss;
		in->sin_family = AF_INET;
		in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		sl = sizeof(*in);
	} else {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
		in6->sin6_family = AF_INET6;
		in6->sin6_addr = in6addr_loopback;
		sl = sizeof(*in6);
	}
	int l = socket(fam, SOCK_STREAM, 0);
	ASSERT_GE(l, 0);
	ASSERT_OK(bind(l, (struct sockaddr *)&ss, sl) ? -errno : 0);
	ASSERT_OK(listen(l, 1) ? -errno : 0);
	ASSERT_OK(getsockname(l, (struct sockaddr *)&ss, &sl) ? -errno : 0);
	*cli = socket(fam, SOCK_STREAM, 0);
	ASSERT_OK(connect(*cli, (struct sockaddr *)&ss, sl) ? -errno : 0);
	*srv = accept(l, NULL, NULL);
	ASSERT_GE(*srv, 0);
	close(l);
}

/* The kernel names the owner of the peer's socket, for IPv4 and IPv6; a peer that
 * closed its socket (TIME_WAIT, which the kernel reports as uid 0) has no owner. */
static void test_peer_uid(void)
{
	int fams[] = { AF_INET, AF_INET6 };
	for (int i = 0; i < 2; i++) {
		int cli, srv;
		uid_t uid = 12345;
		pair(fams[i], &cli, &srv);
		int e = vp_http__loopback_peer_uid(srv, &uid);
		if (e == -EPROTONOSUPPORT || e == -EAFNOSUPPORT)
			SKIP("no NETLINK_SOCK_DIAG for TCP here (inet_diag, tcp_diag modules)");
		ASSERT_OK(e);
		ASSERT_EQ(uid, geteuid());
		/* The client's end, looked up from there, is ours too (its peer is srv). */
		ASSERT_OK(vp_http__loopback_peer_uid(cli, &uid));
		ASSERT_EQ(uid, geteuid());
		close(cli);
		/* Gone: the server end sees the FIN; the client's socket is no process's now. */
		char b;
		ASSERT_EQ(read(srv, &b, 1), 0);
		ASSERT_EQ(vp_http__loopback_peer_uid(srv, &uid), -ENOENT);
		close(srv);
	}
	/* The listener a connection would reach (issue 31: the push client asks before it
	 * connects), for IPv4, IPv6 and IPv4 mapped into IPv6; none once it is closed. */
	for (int i = 0; i < 3; i++) {
		struct sockaddr_storage ss = { 0 };
		socklen_t sl;
		int fam = i == 0 ? AF_INET : AF_INET6;
		if (fam == AF_INET) {
			struct sockaddr_in *in = (struct sockaddr_in *)&ss;
			in->sin_family = AF_INET;
			in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
			sl = sizeof(*in);
		} else {
			struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
			in6->sin6_family = AF_INET6;
			in6->sin6_addr = in6addr_loopback;
			sl = sizeof(*in6);
		}
		int l = socket(i == 2 ? AF_INET : fam, SOCK_STREAM, 0);
		struct sockaddr_in l4 = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		ASSERT_OK(bind(l, i == 2 ? (struct sockaddr *)&l4 : (struct sockaddr *)&ss, i == 2 ? sizeof(l4) : sl)
			  ? -errno : 0);
		ASSERT_OK(listen(l, 1) ? -errno : 0);
		struct sockaddr_storage bound;
		socklen_t bl = sizeof(bound);
		ASSERT_OK(getsockname(l, (struct sockaddr *)&bound, &bl) ? -errno : 0);
		if (i == 2) {
			/* ::ffff:127.0.0.1, the port of the IPv4 listener. */
			struct sockaddr_in6 *m = (struct sockaddr_in6 *)&ss;
			m->sin6_port = ((struct sockaddr_in *)&bound)->sin_port;
			memset(&m->sin6_addr, 0, 16);
			m->sin6_addr.s6_addr[10] = m->sin6_addr.s6_addr[11] = 0xff;
			memcpy(&m->sin6_addr.s6_addr[12], &l4.sin_addr, 4);
		} else {
			ss = bound;
			sl = bl;
		}
		uid_t uid = 12345;
		ASSERT_OK(vp_http__tcp_owner((struct sockaddr *)&ss, sl, NULL, &uid));
		ASSERT_EQ(uid, geteuid());
		close(l);
		ASSERT_EQ(vp_http__tcp_owner((struct sockaddr *)&ss, sl, NULL, &uid), -ENOENT);
	}
	/* Root always; the listed uids; nobody else without a group. */
	struct vp_http_allow a = { .uids = { 1001 }, .nuids = 1 };
	ASSERT_TRUE(vp_http__uid_allowed(&a, 0));
	ASSERT_TRUE(vp_http__uid_allowed(&a, 1001));
	ASSERT_TRUE(!vp_http__uid_allowed(&a, 1002));
	struct vp_http_allow none = { 0 };
	ASSERT_TRUE(!vp_http__uid_allowed(&none, 65534));
}

int main(void)
{
	test_parse();
	test_peer_uid();
	test_query();
	test_addresses();
	test_token();
	test_server();
	printf("test-http: ok\n");
	return 0;
}
