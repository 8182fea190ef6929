/* viprof serve --http and --continuous, live, one scenario per ctest entry:
 *   pprof       the real pprof fetches /debug/pprof/profile?seconds=3 while split3 runs
 *               and shows work50 > work30 > work20 at the top
 *   token       a request from a non-loopback address (a dummy interface's, or the VM's
 *               own) is refused without the bearer token (401), with a wrong one (403),
 *               served with it; loopback needs none; a non-loopback bind without a
 *               token is refused at start in one line
 *   continuous  --interval 3 rotates sessions, each with its CPU time in service.json,
 *               the budget lowers the rate, retention removes old intervals, and the
 *               index, flame graph and pprof pages serve them
 * usage: test-serve-http SCENARIO VIPROF SPLIT3 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "test.h"

static const char *viprof, *split3;
static pid_t serve_pid;
static char logpath[] = "/tmp/vp-test-serve-http-log-XXXXXX";

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return strdup("");
	char *buf = calloc(1, 1 << 20);
	size_t n = fread(buf, 1, (1 << 20) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static int free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t l = sizeof(a);
	bind(fd, (struct sockaddr *)&a, sizeof(a));
	getsockname(fd, (struct sockaddr *)&a, &l);
	close(fd);
	return ntohs(a.sin_port);
}

/* Starts viprof serve with args (NULL-terminated) and waits for its "ready" line;
 * returns its exit status if it ended first, else -1 (running). */
static int start_serve(const char *const *args, const char *ready)
{
	strcpy(logpath, "/tmp/vp-test-serve-http-log-XXXXXX");
	int lfd = mkstemp(logpath);
	ASSERT_TRUE(lfd >= 0);
	serve_pid = fork();
	if (serve_pid == 0) {
		dup2(lfd, 2);
		dup2(lfd, 1);
		const char *argv[32] = { viprof, "serve" };
		int n = 2;
		for (; *args && n < 31; args++)
			argv[n++] = *args;
		argv[n] = NULL;
		execv(viprof, (char **)argv);
		_exit(127);
	}
	close(lfd);
	for (int i = 0; i < 200; i++) {
		int status;
		if (waitpid(serve_pid, &status, WNOHANG) == serve_pid) {
			serve_pid = 0;
			return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
		}
		char *log = slurp(logpath);
		bool ok = strstr(log, ready) != NULL;
		free(log);
		if (ok)
			return -1;
		usleep(50000);
	}
	FAIL("viprof serve did not say '%s' within 10 s", ready);
}

static char *last_log;   /* the log of the last service stopped */

static void stop_serve(void)
{
	if (serve_pid > 0) {
		kill(serve_pid, SIGTERM);
		int status;
		waitpid(serve_pid, &status, 0);
		ASSERT_TRUE(WIFEXITED(status));
		ASSERT_EQ(WEXITSTATUS(status), 0);
		serve_pid = 0;
	}
	free(last_log);
	last_log = slurp(logpath);
	fprintf(stderr, "--- service log ---\n%s-------------------\n", last_log);
	unlink(logpath);
}

struct answer {
	int status;
	char *head, *body;
	size_t len;
};

/* GET path from dst:port, from the source address src (NULL: any), with the
 * Authorization value auth (NULL: none). */
static struct answer get(const char *src, const char *dst, int port, const char *path, const char *auth)
{
	struct answer a = { 0 };
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (src) {
		struct sockaddr_in s = { .sin_family = AF_INET };
		inet_pton(AF_INET, src, &s.sin_addr);
		ASSERT_OK(bind(fd, (struct sockaddr *)&s, sizeof(s)) ? -errno : 0);
	}
	struct sockaddr_in d = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	inet_pton(AF_INET, dst, &d.sin_addr);
	ASSERT_OK(connect(fd, (struct sockaddr *)&d, sizeof(d)) ? -errno : 0);
	char req[1024];
	int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: %s\r\n%s%s%sConnection: close\r\n\r\n", path, dst,
			 auth ? "Authorization: " : "", auth ? auth : "", auth ? "\r\n" : "");
	ASSERT_EQ(write(fd, req, (size_t)n), n);
	size_t cap = 1 << 16, got = 0;
	char *buf = malloc(cap + 1);
	ssize_t k;
	while ((k = read(fd, buf + got, cap - got)) > 0) {
		got += (size_t)k;
		if (got == cap)
			buf = realloc(buf, (cap *= 2) + 1);
	}
	close(fd);
	buf[got] = '\0';
	char *sep = strstr(buf, "\r\n\r\n");
	ASSERT_NOT_NULL(sep);
	*sep = '\0';
	a.head = buf;
	a.body = sep + 4;
	a.len = got - (size_t)(a.body - buf);
	ASSERT_EQ(sscanf(buf, "HTTP/1.1 %d", &a.status), 1);
	return a;
}

static char *run(const char *cmd)
{
	FILE *p = popen(cmd, "r");
	ASSERT_NOT_NULL(p);
	char *buf = calloc(1, 1 << 20);
	size_t n = fread(buf, 1, (1 << 20) - 1, p);
	buf[n] = '\0';
	pclose(p);
	return buf;
}

/* The flat percentage of function name in pprof -top's output, or -1. */
static double flat_pct(const char *top, const char *name)
{
	for (const char *l = top; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		char fn[256];
		double flat, pct;
		char unit[8];
		if (sscanf(l, " %lf%7[a-z] %lf%% %*f%% %*f%*[a-z] %*f%% %255s", &flat, unit, &pct, fn) == 4 &&
		    !strcmp(fn, name))
			return pct;
	}
	return -1;
}

static const char *pprof_bin(void)
{
	static char path[] = "./pprof";
	struct stat sb;
	if (system("command -v go >/dev/null 2>&1") != 0)
		SKIP("go is not installed (apt-get install golang-go golang-github-google-pprof-dev)");
	if (stat(path, &sb) != 0) {
		if (stat("/usr/share/gocode/src/github.com/google/pprof", &sb) != 0)
			SKIP("pprof sources missing (apt-get install golang-github-google-pprof-dev)");
		if (system("GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE=$PWD/.gocache go build -o pprof.tmp "
			   "github.com/google/pprof && mv pprof.tmp pprof") != 0)
			SKIP("could not build pprof");
	}
	return path;
}

static void scenario_pprof(void)
{
	const char *pprof = pprof_bin();
	int port = free_port();
	char listen[64], cmd[1024];
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
	const char *args[] = { "--http", listen, NULL };
	ASSERT_EQ(start_serve(args, "pprof over HTTP on"), -1);
	pid_t w = fork();
	if (w == 0) {
		execl(split3, split3, "10", (char *)NULL);
		_exit(127);
	}
	usleep(500000);
	snprintf(cmd, sizeof(cmd), "%s -top -nodecount=40 -symbolize=none "
		 "'http://127.0.0.1:%d/debug/pprof/profile?seconds=3' 2>&1", pprof, port);
	char *top = run(cmd);
	fprintf(stderr, "%s\n", top);
	kill(w, SIGTERM);
	waitpid(w, NULL, 0);
	stop_serve();
	ASSERT_CONTAINS(top, "Type: cpu");
	ASSERT_CONTAINS(top, "Duration: 3");
	double p50 = flat_pct(top, "work50"), p30 = flat_pct(top, "work30"), p20 = flat_pct(top, "work20");
	fprintf(stderr, "work50 %.2f%% work30 %.2f%% work20 %.2f%% of the whole VM\n", p50, p30, p20);
	/* split3 spends 50/30/20 of its time in them; its share of the whole VM depends on
	 * what else runs, so the split among the three is what is checked (within 10 pp). */
	ASSERT_TRUE(p50 > 1 && p30 > 1 && p20 > 1);
	ASSERT_TRUE(p50 > p30 && p30 > p20);
	double sum = p50 + p30 + p20;
	fprintf(stderr, "split among the three: %.1f/%.1f/%.1f\n", 100 * p50 / sum, 100 * p30 / sum, 100 * p20 / sum);
	ASSERT_DBL_NEAR(100 * p50 / sum, 50, 10);
	ASSERT_DBL_NEAR(100 * p30 / sum, 30, 10);
	ASSERT_DBL_NEAR(100 * p20 / sum, 20, 10);
	free(top);

	/* Bad requests: a rate out of bounds, an unknown page. */
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", port = free_port());
	ASSERT_EQ(start_serve(args, "pprof over HTTP on"), -1);
	struct answer a = get(NULL, "127.0.0.1", port, "/debug/pprof/profile?seconds=100000", NULL);
	ASSERT_EQ(a.status, 400);
	ASSERT_CONTAINS(a.body, "from 1 to 300");
	free(a.head);
	a = get(NULL, "127.0.0.1", port, "/nothing", NULL);
	ASSERT_EQ(a.status, 404);
	free(a.head);
	a = get(NULL, "127.0.0.1", port, "/", NULL);
	ASSERT_EQ(a.status, 200);
	ASSERT_CONTAINS(a.body, "/debug/pprof/profile");
	ASSERT_CONTAINS(a.body, "No continuous recording");
	free(a.head);
	stop_serve();
}

/* A non-loopback IPv4 address of this machine to send from: a dummy interface's made
 * here (removed at the end), or the first global one. */
static bool made_dummy;
static void drop_dummy(void)
{
	if (made_dummy && system("ip link del vptesthttp0 2>/dev/null") != 0)
		fprintf(stderr, "could not remove vptesthttp0\n");
}

static bool own_address(char *buf, size_t len)
{
	if (system("ip link add vptesthttp0 type dummy 2>/dev/null && ip addr add 10.254.77.1/32 dev vptesthttp0 "
		   "&& ip link set vptesthttp0 up") == 0) {
		made_dummy = true;
		atexit(drop_dummy);
		snprintf(buf, len, "10.254.77.1");
		return true;
	}
	struct ifaddrs *ifa, *i;
	if (getifaddrs(&ifa) != 0)
		return false;
	bool found = false;
	for (i = ifa; i && !found; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || (i->ifa_flags & IFF_LOOPBACK))
			continue;
		struct sockaddr_in *in = (struct sockaddr_in *)i->ifa_addr;
		if ((ntohl(in->sin_addr.s_addr) >> 24) == 127)
			continue;
		inet_ntop(AF_INET, &in->sin_addr, buf, (socklen_t)len);
		found = true;
	}
	freeifaddrs(ifa);
	return found;
}

static void scenario_token(void)
{
	REQUIRE_ROOT();
	char ip[64], listen[64], tokpath[] = "/tmp/vp-test-serve-token-XXXXXX";
	if (!own_address(ip, sizeof(ip)))
		SKIP("no non-loopback address here and no dummy interface could be made");
	fprintf(stderr, "non-loopback address: %s%s\n", ip, made_dummy ? " (dummy interface)" : "");

	/* Without a token a non-loopback bind is refused in one line. */
	int port = free_port();
	snprintf(listen, sizeof(listen), "0.0.0.0:%d", port);
	const char *bare[] = { "--http", listen, NULL };
	ASSERT_EQ(start_serve(bare, "pprof over HTTP on"), 1);
	char *log = slurp(logpath);
	ASSERT_CONTAINS(log, "not a loopback address");
	ASSERT_CONTAINS(log, "--http-token");
	ASSERT_EQ(strchr(log, '\n') - log + 1, strlen(log));
	free(log);
	unlink(logpath);

	int tfd = mkstemp(tokpath);
	const char *tok = "test-token-4f1c9a77e2b0d3c5";
	ASSERT_EQ(write(tfd, tok, strlen(tok)), strlen(tok));
	close(tfd);
	const char *args[] = { "--http", listen, "--http-token", tokpath, NULL };
	ASSERT_EQ(start_serve(args, "pprof over HTTP on"), -1);

	struct answer a = get(ip, ip, port, "/", NULL);
	ASSERT_EQ(a.status, 401);
	ASSERT_CONTAINS(a.head, "WWW-Authenticate: Bearer");
	free(a.head);
	a = get(ip, ip, port, "/debug/pprof/profile?seconds=1", "Bearer test-token-4f1c9a77e2b0d3c6");
	ASSERT_EQ(a.status, 403);
	free(a.head);
	a = get(ip, ip, port, "/debug/pprof/profile?seconds=1", "Basic dGVzdA==");
	ASSERT_EQ(a.status, 403);
	free(a.head);
	char auth[128];
	snprintf(auth, sizeof(auth), "Bearer %s", tok);
	a = get(ip, ip, port, "/", auth);
	ASSERT_EQ(a.status, 200);
	free(a.head);
	a = get(ip, ip, port, "/debug/pprof/profile?seconds=1", auth);
	ASSERT_EQ(a.status, 200);
	ASSERT_CONTAINS(a.head, "Content-Type: application/octet-stream");
	ASSERT_GT(a.len, 100);
	ASSERT_EQ((unsigned char)a.body[0], 0x1f);   /* gzip */
	ASSERT_EQ((unsigned char)a.body[1], 0x8b);
	free(a.head);
	/* Loopback is served without a token. */
	a = get(NULL, "127.0.0.1", port, "/", NULL);
	ASSERT_EQ(a.status, 200);
	free(a.head);
	stop_serve();
	unlink(tokpath);
}

static int count_intervals(const char *dir, char *newest, size_t len)
{
	DIR *d = opendir(dir);
	int n = 0;
	struct dirent *de;
	newest[0] = '\0';
	while (d && (de = readdir(d))) {
		if (strlen(de->d_name) != 16 || de->d_name[8] != 'T')
			continue;
		n++;
		if (strcmp(de->d_name, newest) > 0)
			snprintf(newest, len, "%s", de->d_name);
	}
	if (d)
		closedir(d);
	return n;
}

static double json_num(const char *json, const char *key)
{
	char pat[64];
	snprintf(pat, sizeof(pat), "\"%s\": ", key);
	const char *p = strstr(json, pat);
	return p ? atof(p + strlen(pat)) : -1;
}

static void scenario_continuous(void)
{
	REQUIRE_ROOT();
	char dir[] = "/tmp/vp-test-serve-cont-XXXXXX", listen[64], path[512], newest[32];
	ASSERT_NOT_NULL(mkdtemp(dir));
	int port = free_port();
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
	/* A budget no recording can meet: every interval must lower the rate. Intervals
	 * older than 4 s past their end go. */
	const char *args[] = { "--continuous", dir, "--interval", "3", "--keep-age", "4", "--cpu-budget", "0.01",
			       "-F", "199", "--http", listen, "--no-jit", NULL };
	ASSERT_EQ(start_serve(args, "pprof over HTTP on"), -1);
	pid_t w = fork();
	if (w == 0) {
		execl(split3, split3, "16", (char *)NULL);
		_exit(127);
	}
	sleep(14);
	int n = count_intervals(dir, newest, sizeof(newest));
	struct answer idx = get(NULL, "127.0.0.1", port, "/", NULL);
	kill(w, SIGTERM);
	waitpid(w, NULL, 0);
	/* Three or four intervals ended in 14 s; with --keep-age 4 at most three remain
	 * (the one being recorded, and two younger than 3 + 4 s). */
	ASSERT_EQ(idx.status, 200);
	ASSERT_CONTAINS(idx.body, "Continuous recording");
	fprintf(stderr, "%d intervals on disk, newest %s\n", n, newest);
	ASSERT_GE(n, 1);
	ASSERT_LE(n, 3);
	stop_serve();

	/* Every interval left: a complete session with service.json; the rate went down. */
	DIR *d = opendir(dir);
	struct dirent *de;
	int checked = 0;
	double first_freq = 0, last_next = 0;
	char names[8][32];
	int nn = 0;
	while (d && (de = readdir(d)))
		if (strlen(de->d_name) == 16 && nn < 8)
			snprintf(names[nn++], 32, "%s", de->d_name);
	closedir(d);
	for (int i = 0; i < nn; i++) {
		snprintf(path, sizeof(path), "%s/%s/service.json", dir, names[i]);
		char *svc = slurp(path);
		snprintf(path, sizeof(path), "%s/%s/meta.json", dir, names[i]);
		char *meta = slurp(path);
		fprintf(stderr, "%s: %s", names[i], svc);
		ASSERT_GT_F(json_num(meta, "samples"), 0);
		ASSERT_GT_F(json_num(svc, "cpu_ns"), 0);
		ASSERT_GT_F(json_num(svc, "wall_ns"), 0.2e9);   /* the last one ends early, at the stop */
		double f = json_num(svc, "freq"), next = json_num(svc, "next_freq");
		/* Over a 0.01% budget: lowered, down to the floor. */
		ASSERT_TRUE(next < f || f == 19);
		ASSERT_GE_F(next, 19);
		if (!first_freq || f > first_freq)
			first_freq = f;
		last_next = next;
		checked++;
		free(svc);
		free(meta);
	}
	ASSERT_GE(checked, 1);
	ASSERT_LT_F(last_next, 199);
	/* The log said each interval's CPU time, the lowered rate, and that retention
	 * removed the old intervals; the index showed the measured columns. */
	ASSERT_CONTAINS(last_log, "at 199 Hz, service CPU ");
	ASSERT_CONTAINS(last_log, "next interval at 19 Hz (the lowest rate; the budget is still missed)");
	ASSERT_CONTAINS(last_log, "(older than --keep-age, ");
	ASSERT_CONTAINS(idx.body, "service CPU ms");
	free(idx.head);

	/* The pages serve a finished interval: the flame graph and the pprof. */
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", port = free_port());
	const char *args2[] = { "--continuous", dir, "--interval", "60", "--http", listen, "--no-jit", NULL };
	ASSERT_EQ(start_serve(args2, "pprof over HTTP on"), -1);
	snprintf(path, sizeof(path), "/flame/%s", names[0]);
	struct answer a = get(NULL, "127.0.0.1", port, path, NULL);
	ASSERT_EQ(a.status, 200);
	ASSERT_CONTAINS(a.head, "text/html");
	ASSERT_CONTAINS(a.body, "<html");
	ASSERT_CONTAINS(a.body, "work50");
	free(a.head);
	snprintf(path, sizeof(path), "/pprof/%s", names[0]);
	a = get(NULL, "127.0.0.1", port, path, NULL);
	ASSERT_EQ(a.status, 200);
	ASSERT_EQ((unsigned char)a.body[0], 0x1f);
	free(a.head);
	a = get(NULL, "127.0.0.1", port, "/flame/../../etc", NULL);
	ASSERT_EQ(a.status, 404);
	free(a.head);
	a = get(NULL, "127.0.0.1", port, "/", NULL);
	ASSERT_CONTAINS(a.body, names[0]);
	free(a.head);
	stop_serve();
	char rm[600];
	snprintf(rm, sizeof(rm), "rm -rf %s", dir);
	ASSERT_EQ(system(rm), 0);
}

int main(int argc, char **argv)
{
	if (argc != 4)
		FAIL("usage: test-serve-http pprof|token|continuous VIPROF SPLIT3");
	viprof = argv[2];
	split3 = argv[3];
	REQUIRE_ROOT();
	signal(SIGPIPE, SIG_IGN);
	if (!strcmp(argv[1], "pprof"))
		scenario_pprof();
	else if (!strcmp(argv[1], "token"))
		scenario_token();
	else if (!strcmp(argv[1], "continuous"))
		scenario_continuous();
	else
		FAIL("unknown scenario %s", argv[1]);
	printf("test-serve-http %s: ok\n", argv[1]);
	return 0;
}
