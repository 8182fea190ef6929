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
 *   access      (issue 20) a local user without a token gets 403 on every path, with
 *               the fix in the answer; a member of --http-allow-group gets the pages
 *               with kernel frames folded into [kernel]; root gets them whole
 *   slow        (issue 20) 16 half-sent heads held by a user do not keep root's
 *               scraper from an answer within 2 s; three concurrent
 *               /debug/pprof/profile?seconds=5 are all answered from one recorder
 *               start, and the real pprof reads each
 *   contdir     (issue 20) --continuous refuses a DIR a user owns or that group or
 *               others may write, in one line
 *   jvmattach   (issue 20) --jvm-attach is accepted by serve; the default is none
 *   push        (issue 27) --push to a Pyroscope and an OTLP receiver that the test runs
 *               (one process, killed by pid to take the backend down): the Pyroscope
 *               ingest request's method, path, query parameters and basic auth, its body
 *               read by the real pprof; the OTLP body decoded by protoc with
 *               tests/otlp-profiles.proto (tests/test-push-otlp-check.py): cpu/nanoseconds,
 *               split3's stacks, the process and thread attributes, the bearer token. The
 *               backend down for 3 intervals, then up: every interval arrives, none twice.
 *   push-host   (issue 31) --push with --http: the pushed hostname equals `hostname`'s
 *               (Pyroscope's name label, OTLP's host.name)
 *   push-rejected (issue 31) a backend answering 400: /metrics counts failures and
 *               rejected intervals, no success
 *   push-squatter (issue 31) a user binds the loopback port of a backend that is down:
 *               over 3+ intervals it reads no byte; refusals logged once, counted;
 *               root's backend back on the port gets the queue
 *   push-handoff (issue 31) root's listening socket, a user's process accepting on it:
 *               the check after the connection refuses it, no byte read
 *   push-unix   (issue 31) unix: targets: root's socket gets OTLP; a user's socket file
 *               is refused (no byte) until --push-owner names the user
 *   push-https  (issue 31) https to a TLS receiver requiring a client certificate (openssl
 *               makes the CA at run time): the right CA delivers, a wrong one fails clearly
 *   metrics     (issue 27) a real Prometheus (Debian's package), started here on loopback
 *               with a config written here, scrapes GET /metrics of a continuous
 *               recording, and its query API returns viprof_samples_total rising;
 *               service.json carries the same totals. Skipped without prometheus.
 * usage: test-serve-http SCENARIO VIPROF SPLIT3 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <pwd.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>

#include "test.h"
#include "test-helpers.h"
#include "test-run.h"

static const char *viprof, *split3;
static pid_t serve_pid;
static char logpath[] = "/tmp/vp-test-serve-http-log-XXXXXX";

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
	close(lfd);
	const char *argv[32] = { viprof, "serve" };
	int n = 2;
	for (; *args && n < 31; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	serve_pid = run_start((char **)argv, logpath, logpath);
	for (int i = 0; i < 200; i++) {
		int code;
		if (run_exited(serve_pid, &code)) {
			serve_pid = 0;
			return code;
		}
		char *log = test_slurp_str(logpath);
		bool ok = strstr(log, ready) != NULL;
		free(log);
		if (ok)
			return -1;
		usleep(50000);
	}
	FAIL("viprof serve did not say '%s' within 10 s", ready);
}

static char *last_log;   /* the log of the last service stopped */

/* Whether the running service said that interval NAME held no sample and was not pushed. */
static bool interval_empty(const char *name)
{
	char want[320];
	char *log = test_slurp_str(logpath);
	snprintf(want, sizeof(want), "interval %s holds no sample", name);
	bool empty = log && strstr(log, want);
	free(log);
	return empty;
}

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
	last_log = test_slurp_str(logpath);
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
	if (run_sh("command -v go >/dev/null 2>&1", 110) != 0)
		SKIP("go is not installed (apt-get install golang-go golang-github-google-pprof-dev)");
	if (stat(path, &sb) != 0) {
		if (stat("/usr/share/gocode/src/github.com/google/pprof", &sb) != 0)
			SKIP("pprof sources missing (apt-get install golang-github-google-pprof-dev)");
		if (run_sh("GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE=$PWD/.gocache go build -o pprof.tmp "
			   "github.com/google/pprof && mv pprof.tmp pprof", 110) != 0)
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
	pid_t w = run_start((char *const[]){ (char *)split3, "10", NULL }, RUN_KEEP, RUN_KEEP);
	run_wait_state(w, 0, 10000, "running split3");   /* before the profile's window opens */
	snprintf(cmd, sizeof(cmd), "%s -top -nodecount=40 -symbolize=none "
		 "'http://127.0.0.1:%d/debug/pprof/profile?seconds=3' 2>&1", pprof, port);
	char *top = run_sh_read(cmd, NULL);
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
	if (made_dummy && run_sh("ip link del vptesthttp0 2>/dev/null", 110) != 0)
		fprintf(stderr, "could not remove vptesthttp0\n");
}

static bool own_address(char *buf, size_t len)
{
	if (run_sh("ip link add vptesthttp0 type dummy 2>/dev/null && ip addr add 10.254.77.1/32 dev vptesthttp0 "
		   "&& ip link set vptesthttp0 up", 110) == 0) {
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
	char *log = test_slurp_str(logpath);
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
	/* Until the service said what is checked below: an interval at the floor rate and
	 * one removed by retention (about 10 s: the first interval goes when the third
	 * ends, 3 + 4 s after its end), rather than a fixed 14 s. */
	for (int i = 0; i < 600; i++) {
		char *log = test_slurp_str(logpath);
		bool seen = strstr(log, "(older than --keep-age, ") && strstr(log, "next interval at 19 Hz");
		free(log);
		if (seen)
			break;
		usleep(100000);
	}
	/* Retention runs as an interval ends: give the next one half a second, so that
	 * the interval cut short by the stop still runs over 0.2 s (checked below). */
	usleep(500000);
	int n = count_intervals(dir, newest, sizeof(newest));
	struct answer idx = get(NULL, "127.0.0.1", port, "/", NULL);
	kill(w, SIGTERM);
	waitpid(w, NULL, 0);
	/* With --keep-age 4 at most three remain (the one being recorded, and two younger
	 * than 3 + 4 s). */
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
		char *svc = test_slurp_str(path);
		snprintf(path, sizeof(path), "%s/%s/meta.json", dir, names[i]);
		char *meta = test_slurp_str(path);
		fprintf(stderr, "%s: %s", names[i], svc);
		ASSERT_GT_F(json_num(meta, "samples"), 0);
		ASSERT_GT_F(json_num(svc, "cpu_ns"), 0);
		/* The interval's memory peak (issue 27): the service is resident, so above 1 MiB. */
		ASSERT_GT_F(json_num(svc, "rss_peak_bytes"), 1 << 20);
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
	ASSERT_EQ(run_sh(rm, 110), 0);
}

/* ---- issue 20: who may read, slow heads, the shared recording ---- */

#define ASSERT_NOT_CONTAINS(hay, needle) do { if (strstr((hay), (needle))) \
	FAIL("found '%s' where it must not be", (needle)); } while (0)

#define USER_A "vphttpa"   /* a local user the service does not allow */
#define USER_B "vphttpb"   /* a member of GROUP_G, which it allows */
#define GROUP_G "vphttpg"

static bool users_made;
static pid_t main_pid, slow_pid, work_pid, prom_pid, recv_pid;  /* Prometheus (metrics), the receiver (push) */
#define PUSH_USER "pushsq"         /* a squatter on push targets (issue 31), made with useradd */
static bool push_user_made;
static pid_t squat_pid;

static void drop_users(void)
{
	if (run_sh("userdel " USER_A " 2>/dev/null; userdel " USER_B " 2>/dev/null; groupdel " GROUP_G
		   " 2>/dev/null", 110) != 0) {
		/* Gone already: nothing to do. */
	}
}

/* The test's users (made here with useradd, removed at exit). */
static void make_users(void)
{
	drop_users();
	if (run_sh("groupadd " GROUP_G " && useradd -M -N -s /usr/sbin/nologin " USER_A
		   " && useradd -M -N -s /usr/sbin/nologin -G " GROUP_G " " USER_B, 110) != 0)
		SKIP("cannot create the test users with useradd/groupadd");
	users_made = true;
}

/* At exit of the test's own process (a FAIL too, not a child's): what it started goes,
 * then its users (userdel refuses a user with processes). */
static void at_end(void)
{
	if (getpid() != main_pid)
		return;
	pid_t kids[] = { slow_pid, work_pid, serve_pid, prom_pid, recv_pid, squat_pid };
	for (int i = 0; i < 6; i++)
		if (kids[i] > 0) {
			kill(kids[i], SIGKILL);
			waitpid(kids[i], NULL, 0);
		}
	if (users_made)
		drop_users();
	if (push_user_made && run_sh("userdel " PUSH_USER " 2>/dev/null", 110) != 0)
		fprintf(stderr, "could not remove the user " PUSH_USER "\n");
}

static void user_ids(const char *name, uid_t *uid, gid_t *gid)
{
	struct passwd *pw = getpwnam(name);
	ASSERT_NOT_NULL(pw);
	*uid = pw->pw_uid;
	*gid = pw->pw_gid;
}

/* Becomes the user (groups as login would give them). In a child only. */
static void become(const char *name)
{
	uid_t uid;
	gid_t gid;
	user_ids(name, &uid, &gid);
	ASSERT_OK(initgroups(name, gid) ? -errno : 0);
	ASSERT_OK(setgid(gid) ? -errno : 0);
	ASSERT_OK(setuid(uid) ? -errno : 0);
}

/* GET path from 127.0.0.1:port as the user name (NULL: root), in a child. */
static struct answer get_as(const char *name, int port, const char *path)
{
	int pfd[2];
	ASSERT_OK(pipe(pfd) ? -errno : 0);
	pid_t pid = fork();
	if (pid == 0) {
		close(pfd[0]);
		if (name)
			become(name);
		struct answer a = get(NULL, "127.0.0.1", port, path, NULL);
		char line[32];
		int n = snprintf(line, sizeof(line), "%d %zu\n", a.status, a.len);
		if (write(pfd[1], line, (size_t)n) != n || write(pfd[1], a.body, a.len) != (ssize_t)a.len ||
		    write(pfd[1], a.head, strlen(a.head) + 1) < 0)
			_exit(3);
		_exit(0);
	}
	close(pfd[1]);
	size_t cap = 1 << 16, got = 0;
	char *buf = malloc(cap + 1);
	ssize_t k;
	while ((k = read(pfd[0], buf + got, cap - got)) > 0) {
		got += (size_t)k;
		if (got == cap)
			buf = realloc(buf, (cap *= 2) + 1);
	}
	close(pfd[0]);
	buf[got] = '\0';
	int status;
	waitpid(pid, &status, 0);
	ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	struct answer a = { 0 };
	char *nl = strchr(buf, '\n');
	ASSERT_NOT_NULL(nl);
	ASSERT_EQ(sscanf(buf, "%d %zu", &a.status, &a.len), 2);
	/* The body, NUL-terminated in place of the head's first byte; the head after it. */
	char *body = nl + 1;
	char *head = strdup(body + a.len);
	char *copy = malloc(a.len + 1);
	memcpy(copy, body, a.len);
	copy[a.len] = '\0';
	free(buf);
	a.head = head;
	a.body = copy;
	return a;
}

static void free_answer(struct answer *a)
{
	free(a->head);
	free(a->body);
}

/* Waits for a finished interval in dir (its service.json written) and names it. */
static void wait_interval(const char *dir, char *name, size_t len)
{
	for (int i = 0; i < 300; i++) {
		DIR *d = opendir(dir);
		struct dirent *de;
		while (d && (de = readdir(d))) {
			char p[600];
			struct stat st;
			snprintf(p, sizeof(p), "%s/%s/service.json", dir, de->d_name);
			if (strlen(de->d_name) == 16 && stat(p, &st) == 0) {
				snprintf(name, len, "%s", de->d_name);
				closedir(d);
				return;
			}
		}
		if (d)
			closedir(d);
		usleep(100000);
	}
	FAIL("no interval of %s finished within 30 s", dir);
}

/* A process that spends its time in system calls, so that kernel frames are sampled. */
static pid_t kernel_load(void)
{
	pid_t pid = fork();
	if (pid == 0) {
		int fd = open("/dev/null", O_WRONLY);
		char b[64] = { 0 };
		for (;;) {
			if (write(fd, b, sizeof(b)) < 0 || getppid() == 1)
				_exit(0);
		}
	}
	return pid;
}

static void scenario_access(void)
{
	REQUIRE_ROOT();
	const char *pprof_tool = pprof_bin();
	make_users();
	char dir[] = "/tmp/vp-test-serve-access-XXXXXX", listen[64], name[32], path[128];
	ASSERT_NOT_NULL(mkdtemp(dir));
	int port = free_port();
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
	/* First a service that lets in root only (the default). */
	const char *args0[] = { "--http", listen, "--continuous", dir, "--interval", "2", "--no-jit", NULL };
	ASSERT_EQ(start_serve(args0, "pprof over HTTP on"), -1);
	pid_t load = work_pid = kernel_load();
	wait_interval(dir, name, sizeof(name));
	kill(load, SIGKILL);
	waitpid(load, NULL, 0);
	work_pid = 0;

	/* A user the service does not allow: 403 on every path, one line saying what to do. */
	char flame[64], pprof[64];
	snprintf(flame, sizeof(flame), "/flame/%s", name);
	snprintf(pprof, sizeof(pprof), "/pprof/%s", name);
	const char *paths[] = { "/", "/index.html", "/debug/pprof/profile?seconds=1", flame, pprof, "/metrics",
				"/nothing" };
	for (int round = 0; round < 2; round++) {
		for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
			/* USER_B is no one special to the first service. */
			const char *who = round ? USER_A : USER_B;
			struct answer a = get_as(who, port, paths[i]);
			fprintf(stderr, "%s as %s: %d %s", paths[i], who, a.status, a.status == 403 ? a.body : "\n");
			ASSERT_EQ(a.status, 403);
			ASSERT_CONTAINS(a.body, "--http-token");
			ASSERT_CONTAINS(a.body, "--http-allow-group");
			ASSERT_EQ(strchr(a.body, '\n') - a.body + 1, (long)strlen(a.body));
			free_answer(&a);
		}
		if (round)
			break;
		/* Then the group let in: USER_A is still refused. */
		stop_serve();
		const char *args[] = { "--http", listen, "--continuous", dir, "--interval", "60", "--http-allow-group",
				       GROUP_G, "--no-jit", NULL };
		ASSERT_EQ(start_serve(args, "pprof over HTTP on"), -1);
	}

	/* Root: the pages whole, kernel frames named. */
	struct answer r = get_as(NULL, port, flame);
	ASSERT_EQ(r.status, 200);
	ASSERT_CONTAINS(r.body, "[kernel.kallsyms]");
	struct answer rp = get_as(NULL, port, pprof);
	ASSERT_EQ(rp.status, 200);
	/* The allowed group's member: the pages, kernel frames folded into [kernel], no
	 * kernel symbol of root's page in them. */
	struct answer b = get_as(USER_B, port, flame);
	ASSERT_EQ(b.status, 200);
	ASSERT_CONTAINS(b.body, "[kernel]");
	ASSERT_NOT_CONTAINS(b.body, "[kernel.kallsyms]");
	ASSERT_NOT_CONTAINS(b.body, "entry_SYSCALL_64");
	ASSERT_CONTAINS(b.body, "work");
	struct answer bp = get_as(USER_B, port, pprof);
	ASSERT_EQ(bp.status, 200);
	ASSERT_EQ((unsigned char)bp.body[0], 0x1f);
	snprintf(path, sizeof(path), "/debug/pprof/profile?seconds=1");
	struct answer bprof = get_as(USER_B, port, path);
	ASSERT_EQ(bprof.status, 200);
	/* Read by the real pprof: the member's profiles carry no kernel address (kernel
	 * halves start at 0xffff), where root's do. */
	struct answer *reads[] = { &rp, &bp, &bprof };
	for (int i = 0; i < 3; i++) {
		char file[128], cmd[300];
		snprintf(file, sizeof(file), "/tmp/vp-test-serve-access-%d-%d.pb.gz", (int)getpid(), i);
		FILE *f = fopen(file, "we");
		ASSERT_NOT_NULL(f);
		ASSERT_EQ(fwrite(reads[i]->body, 1, reads[i]->len, f), reads[i]->len);
		fclose(f);
		snprintf(cmd, sizeof(cmd), "%s -raw %s 2>&1", pprof_tool, file);
		char *raw = run_sh_read(cmd, NULL);
		unlink(file);
		ASSERT_CONTAINS(raw, "Locations");
		if (i == 0) {
			ASSERT_CONTAINS(raw, ": 0xffff");
		} else {
			ASSERT_NOT_CONTAINS(raw, ": 0xffff");
			ASSERT_NOT_CONTAINS(raw, "entry_SYSCALL_64");
			/* The interval's profile holds the kernel frames its flame graph showed,
			 * folded; the 1 s profile (about 38 samples at 19 Hz) may hold none
			 * beside two CPU hogs (busy lane, clean clone at e164ad2). */
			if (i == 1 && !strstr(raw, "[kernel]"))
				FAIL("the member's interval pprof has no [kernel] frame where its flame graph had one:\n%s", raw);
		}
		free(raw);
	}
	free_answer(&r);
	free_answer(&rp);
	free_answer(&b);
	free_answer(&bp);
	free_answer(&bprof);
	stop_serve();
	char rm[600];
	snprintf(rm, sizeof(rm), "rm -rf %s", dir);
	ASSERT_EQ(run_sh(rm, 110), 0);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* As USER_A: holds n connections with half-sent heads, opening a new one as each is
 * closed, until killed; writes one byte to ready once n are open. */
static pid_t slow_heads(int port, int n, int ready)
{
	pid_t pid = fork();
	if (pid != 0)
		return pid;
	become(USER_A);
	int fds[64];
	bool told = false;
	for (int i = 0; i < n; i++)
		fds[i] = -1;
	for (;;) {
		for (int i = 0; i < n; i++) {
			char b;
			if (fds[i] >= 0 && recv(fds[i], &b, 1, MSG_DONTWAIT | MSG_PEEK) == -1 && errno == EAGAIN)
				continue;   /* still held */
			if (fds[i] >= 0)
				close(fds[i]);
			fds[i] = socket(AF_INET, SOCK_STREAM, 0);
			struct sockaddr_in d = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
			inet_pton(AF_INET, "127.0.0.1", &d.sin_addr);
			if (connect(fds[i], (struct sockaddr *)&d, sizeof(d)) != 0 ||
			    write(fds[i], "GET / HTTP/1.1\r\nHost: x\r\n", 25) != 25) {
				close(fds[i]);
				fds[i] = -1;
			}
		}
		if (!told) {
			told = true;
			if (write(ready, "r", 1) != 1)
				_exit(1);
		}
		usleep(20000);
	}
}

static void scenario_slow(void)
{
	REQUIRE_ROOT();
	make_users();
	const char *pprof = pprof_bin();
	char listen[64];
	int port = free_port();
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
	const char *args[] = { "--http", listen, "--no-jit", NULL };
	ASSERT_EQ(start_serve(args, "pprof over HTTP on"), -1);
	int rp[2];
	ASSERT_OK(pipe(rp) ? -errno : 0);
	pid_t slow = slow_pid = slow_heads(port, 16, rp[1]);
	char b;
	ASSERT_EQ(read(rp[0], &b, 1), 1);

	/* A scraper (root) is answered within 2 s, each time, while the heads are held
	 * and re-opened; the rounds span the head deadline, so re-opened ones are in. */
	for (int i = 0; i < 8; i++) {
		double t0 = now_s();
		struct answer a = get_as(NULL, port, "/");
		double dt = now_s() - t0;
		fprintf(stderr, "round %d: %d in %.3f s\n", i, a.status, dt);
		ASSERT_EQ(a.status, 200);
		ASSERT_TRUE(dt < 2.0);
		free_answer(&a);
		usleep(500000);
	}

	/* Three scrapers at once, each its own 5 s window: all answered, from one recorder
	 * start (the same X-Viprof-Recording, one "started" line in the log). */
	char files[3][64];
	pid_t kids[3];
	pid_t w = work_pid = fork();
	if (w == 0) {
		execl(split3, split3, "12", (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 3; i++) {
		snprintf(files[i], sizeof(files[i]), "/tmp/vp-test-serve-slow-%d-%d.pb.gz", (int)getpid(), i);
		kids[i] = fork();
		if (kids[i] == 0) {
			struct answer a = get(NULL, "127.0.0.1", port, "/debug/pprof/profile?seconds=5", NULL);
			FILE *f = fopen(files[i], "we");
			fwrite(a.body, 1, a.len, f);
			fclose(f);
			char hf[256];
			snprintf(hf, sizeof(hf), "%s.head", files[i]);
			f = fopen(hf, "we");
			fputs(a.head, f);
			fclose(f);
			_exit(a.status == 200 ? 0 : 10 + a.status / 100);
		}
	}
	int ok = 0;
	for (int i = 0; i < 3; i++) {
		int status;
		waitpid(kids[i], &status, 0);
		fprintf(stderr, "scraper %d: exit %d\n", i, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
		ok += WIFEXITED(status) && WEXITSTATUS(status) == 0;
	}
	kill(slow, SIGKILL);
	waitpid(slow, NULL, 0);
	kill(w, SIGTERM);
	waitpid(w, NULL, 0);
	slow_pid = work_pid = 0;
	stop_serve();
	ASSERT_EQ(ok, 3);
	int starts = 0;
	for (const char *p = last_log; (p = strstr(p, "shared recording #")); p++) {
		const char *eol = strchr(p, '\n'), *st = strstr(p, " started for ");
		starts += st && (!eol || st < eol);
	}
	ASSERT_EQ(starts, 1);
	ASSERT_CONTAINS(last_log, "shared recording #1 started for");
	for (int i = 0; i < 3; i++) {
		char hf[256], cmd[512];
		snprintf(hf, sizeof(hf), "%s.head", files[i]);
		char *head = test_slurp_str(hf);
		ASSERT_CONTAINS(head, "X-Viprof-Recording: 1");
		free(head);
		unlink(hf);
		snprintf(cmd, sizeof(cmd), "%s -top -nodecount=10 -symbolize=none %s 2>&1", pprof, files[i]);
		char *top = run_sh_read(cmd, NULL);
		fprintf(stderr, "%s\n", top);
		ASSERT_CONTAINS(top, "Type: cpu");
		ASSERT_CONTAINS(top, "Duration: 5");
		ASSERT_CONTAINS(top, "work50");
		free(top);
		unlink(files[i]);
	}
}

static void scenario_contdir(void)
{
	REQUIRE_ROOT();
	make_users();
	uid_t ua;
	gid_t ga;
	user_ids(USER_A, &ua, &ga);
	char dir[] = "/tmp/vp-test-serve-contdir-XXXXXX";
	ASSERT_NOT_NULL(mkdtemp(dir));
	/* A user's DIR, then root's DIR open to others, then to its group: each refused
	 * in one line naming the fix, and nothing made in it. */
	struct { uid_t uid; mode_t mode; const char *says; } cases[] = {
		{ ua, 0700, "not root" }, { 0, 0777, "chmod go-w" }, { 0, 0770, "its group" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ASSERT_OK(chown(dir, cases[i].uid, 0) ? -errno : 0);
		ASSERT_OK(chmod(dir, cases[i].mode) ? -errno : 0);
		const char *args[] = { "--continuous", dir, "--interval", "2", "--no-jit", NULL };
		ASSERT_EQ(start_serve(args, "continuous recording in"), 1);
		char *log = test_slurp_str(logpath);
		fprintf(stderr, "%s", log);
		ASSERT_CONTAINS(log, cases[i].says);
		ASSERT_CONTAINS(log, dir);
		/* One line of refusal after the service's note about the JVM agent. */
		ASSERT_EQ(strchr(strstr(log, "--continuous"), '\n') - strstr(log, "--continuous") + 1,
			  (long)strlen(strstr(log, "--continuous")));
		free(log);
		unlink(logpath);
		DIR *d = opendir(dir);
		struct dirent *de;
		int n = 0;
		while ((de = readdir(d)))
			n += de->d_name[0] != '.';
		closedir(d);
		ASSERT_EQ(n, 0);
	}
	/* Root's and closed to others: it records. */
	ASSERT_OK(chown(dir, 0, 0) ? -errno : 0);
	ASSERT_OK(chmod(dir, 0755) ? -errno : 0);
	const char *args[] = { "--continuous", dir, "--interval", "2", "--no-jit", NULL };
	ASSERT_EQ(start_serve(args, "continuous recording in"), -1);
	stop_serve();
	char rm[600];
	snprintf(rm, sizeof(rm), "rm -rf %s", dir);
	ASSERT_EQ(run_sh(rm, 110), 0);
}

/* --jvm-attach alone is a service option (it said "nothing to record" before); the
 * default, and what was chosen, is said at start. */
static void scenario_jvmattach(void)
{
	char listen[64];
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", free_port());
	const char *args[] = { "--http", listen, "--jvm-attach", "user:root", NULL };
	ASSERT_EQ(start_serve(args, "load the JVM agent into"), -1);
	stop_serve();
	ASSERT_CONTAINS(last_log, "the JVMs of --jvm-attach user:root");
	const char *dflt[] = { "--http", listen, NULL };
	ASSERT_EQ(start_serve(dflt, "load the JVM agent into"), -1);
	stop_serve();
	ASSERT_CONTAINS(last_log, "into no JVM (the default;");
}

/* The value of the first series Prometheus's query API returns for query, or -1. */
static double prom_query(int port, const char *query)
{
	char path[512];
	snprintf(path, sizeof(path), "/api/v1/query?query=%s", query);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in d = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	inet_pton(AF_INET, "127.0.0.1", &d.sin_addr);
	bool up = connect(fd, (struct sockaddr *)&d, sizeof(d)) == 0;
	close(fd);
	if (!up)
		return -1;   /* not listening yet */
	struct answer a = get(NULL, "127.0.0.1", port, path, NULL);
	double v = -1;
	const char *val = a.status == 200 ? strstr(a.body, "\"value\":[") : NULL;
	const char *q = val ? strchr(val + 9, '"') : NULL;
	if (q)
		v = strtod(q + 1, NULL);
	free(a.head);   /* get()'s body is inside its head's buffer */
	return v;
}

static void scenario_metrics(void)
{
	REQUIRE_ROOT();
	if (run_sh("command -v prometheus >/dev/null 2>&1", 110) != 0)
		SKIP("prometheus is not installed (apt-get install prometheus; scripts/deps.sh does)");
	char dir[] = "/tmp/vp-test-serve-metrics-XXXXXX", listen[64], path[600], cont[512], name[300] = "";
	ASSERT_NOT_NULL(mkdtemp(dir));
	int port = free_port(), pport = free_port();
	while (pport == port)
		pport = free_port();
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
	snprintf(cont, sizeof(cont), "%s/cont", dir);
	const char *args[] = { "--http", listen, "--continuous", cont, "--interval", "2", "--no-jit", NULL };
	ASSERT_EQ(start_serve(args, "pprof over HTTP on"), -1);
	pid_t w = work_pid = fork();
	if (w == 0) {
		execl(split3, split3, "120", (char *)NULL);
		_exit(127);
	}

	/* Our own /metrics first: the exposition format, the families an operator alerts on. */
	struct answer m = get(NULL, "127.0.0.1", port, "/metrics", NULL);
	ASSERT_EQ(m.status, 200);
	ASSERT_CONTAINS(m.head, "Content-Type: text/plain; version=0.0.4");
	const char *fams[] = { "viprof_samples_total", "viprof_lost_samples_total", "viprof_intervals_total",
			       "viprof_interval_bytes_total", "viprof_service_cpu_seconds_total",
			       "viprof_push_success_total", "viprof_push_failures_total", "viprof_push_queue_depth",
			       "viprof_scrapes_total", "viprof_service_resident_memory_bytes" };
	for (size_t i = 0; i < sizeof(fams) / sizeof(fams[0]); i++) {
		char want[128];
		snprintf(want, sizeof(want), "# TYPE %s ", fams[i]);
		ASSERT_CONTAINS(m.body, want);
	}
	free(m.head);

	/* A real Prometheus, on loopback, scraping every second; it runs as root here, so
	 * its socket is root's and the service lets it in as it would any root scraper. */
	snprintf(path, sizeof(path), "%s/prometheus.yml", dir);
	FILE *f = fopen(path, "w");
	ASSERT_NOT_NULL(f);
	fprintf(f, "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
		   "scrape_configs:\n  - job_name: viprof\n    static_configs:\n      - targets: ['127.0.0.1:%d']\n",
		port);
	ASSERT_EQ(fclose(f), 0);
	prom_pid = fork();
	if (prom_pid == 0) {
		char cfg[700], data[700], web[64], logf[700];
		snprintf(cfg, sizeof(cfg), "--config.file=%s", path);
		snprintf(data, sizeof(data), "--storage.tsdb.path=%s/data", dir);
		snprintf(web, sizeof(web), "--web.listen-address=127.0.0.1:%d", pport);
		snprintf(logf, sizeof(logf), "%s/prometheus.log", dir);
		int lfd = open(logf, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		dup2(lfd, 1);
		dup2(lfd, 2);
		execlp("prometheus", "prometheus", cfg, data, web, (char *)NULL);
		_exit(127);
	}
	/* Waits for two readings of the counter through the query API, the second higher. */
	double first = -1, last = -1;
	for (int i = 0; i < 600 && !(first > 0 && last > first); i++) {
		int st;
		if (waitpid(prom_pid, &st, WNOHANG) == prom_pid) {
			prom_pid = 0;
			snprintf(path, sizeof(path), "%s/prometheus.log", dir);
			char *log = test_slurp_str(path);
			FAIL("prometheus exited: %s", log);
		}
		double v = prom_query(pport, "viprof_samples_total");
		if (v > 0 && first < 0)
			first = v;
		last = v;
		usleep(100000);
	}
	fprintf(stderr, "Prometheus read viprof_samples_total %.0f, then %.0f\n", first, last);
	ASSERT_TRUE(first > 0);
	ASSERT_TRUE(last > first);
	ASSERT_EQ((int)prom_query(pport, "up%7Bjob%3D%22viprof%22%7D"), 1);
	double scrapes = prom_query(pport, "viprof_scrapes_total");
	fprintf(stderr, "viprof_scrapes_total as Prometheus read it: %.0f\n", scrapes);
	ASSERT_TRUE(scrapes >= 2);
	kill(prom_pid, SIGTERM);
	waitpid(prom_pid, NULL, 0);
	prom_pid = 0;
	kill(w, SIGKILL);
	waitpid(w, NULL, 0);
	work_pid = 0;
	stop_serve();

	/* service.json of an interval: the same totals. */
	DIR *d = opendir(cont);
	ASSERT_NOT_NULL(d);
	struct dirent *de;
	while ((de = readdir(d)))
		if (de->d_name[0] == '2')
			snprintf(name, sizeof(name), "%s", de->d_name);
	closedir(d);
	ASSERT_TRUE(name[0]);
	snprintf(path, sizeof(path), "%s/%s/service.json", cont, name);
	char *js = test_slurp_str(path);
	ASSERT_CONTAINS(js, "\"samples_total\": ");
	ASSERT_CONTAINS(js, "\"service_cpu_seconds_total\": ");
	ASSERT_CONTAINS(js, "\"scrapes_total\": ");
	free(js);
	snprintf(path, sizeof(path), "rm -rf %s", dir);
	if (run_sh(path, 110) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
}

/* The status the push receiver answers (a backend that refuses: 400). */
static int recv_status = 200;
/* Whether the receiver's user takes over after root made the listening socket (root's
 * listener, a user's accepted connections). */
static bool recv_user_accepts;

/* The push receiver, as the user name (NULL: root): accepts POSTs on 127.0.0.1:port, or
 * on the Unix socket upath when given, keeps each request's head and body in dir as
 * <pid>-<n>.head / .body, answering recv_status, and every byte it reads is counted in
 * dir/<pid>.bytes (a squatter's haul). A child; down = killed. Its pid, once it listens. */
static pid_t receiver_run(int port, const char *upath, const char *dir, const char *user)
{
	pid_t pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		if (user && !recv_user_accepts)
			become(user);
		int ls, one = 1;
		if (upath) {
			struct sockaddr_un u = { .sun_family = AF_UNIX };
			snprintf(u.sun_path, sizeof(u.sun_path), "%s", upath);
			ls = socket(AF_UNIX, SOCK_STREAM, 0);
			unlink(upath);
			if (bind(ls, (struct sockaddr *)&u, sizeof(u)) || listen(ls, 16))
				_exit(2);
		} else {
			ls = socket(AF_INET, SOCK_STREAM, 0);
			setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
			struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
			inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
			if (bind(ls, (struct sockaddr *)&a, sizeof(a)) || listen(ls, 16))
				_exit(2);
		}
		if (user && recv_user_accepts)
			become(user);
		unsigned long long total = 0;
		char bpath[600];
		snprintf(bpath, sizeof(bpath), "%s/%d.bytes", dir, (int)getpid());
		for (unsigned n = 0;; n++) {
			int c = accept(ls, NULL, NULL);
			if (c < 0)
				continue;
			size_t cap = 1 << 16, got = 0;
			char *buf = malloc(cap + 1), *end = NULL;
			ssize_t k;
			while (!end && got < cap && (k = read(c, buf + got, cap - got)) > 0) {
				got += (size_t)k;
				buf[got] = '\0';
				end = strstr(buf, "\r\n\r\n");
			}
			total += got;
			FILE *bf = fopen(bpath, "w");
			if (bf) {
				fprintf(bf, "%llu\n", total);
				fclose(bf);
			}
			if (!end) {
				close(c);
				free(buf);
				continue;
			}
			size_t hl = (size_t)(end - buf) + 4, clen = 0;
			const char *cl = strcasestr(buf, "\r\nContent-Length:");
			if (cl)
				clen = strtoul(cl + 17, NULL, 10);
			char *body = malloc(clen + 1);
			size_t have = got - hl < clen ? got - hl : clen;
			memcpy(body, buf + hl, have);
			while (have < clen && (k = read(c, body + have, clen - have)) > 0) {
				have += (size_t)k;
				total += (size_t)k;
			}
			bf = fopen(bpath, "w");
			if (bf) {
				fprintf(bf, "%llu\n", total);
				fclose(bf);
			}
			char path[600];
			snprintf(path, sizeof(path), "%s/%d-%04u.body", dir, (int)getpid(), n);
			FILE *f = fopen(path, "w");
			fwrite(body, 1, have, f);
			fclose(f);
			/* The head last: a reader that sees it finds the body whole. */
			snprintf(path, sizeof(path), "%s/%d-%04u.head", dir, (int)getpid(), n);
			char tmp[620];
			snprintf(tmp, sizeof(tmp), "%s.tmp", path);
			f = fopen(tmp, "w");
			fwrite(buf, 1, hl, f);
			fclose(f);
			rename(tmp, path);
			char ok[128];
			int ol = snprintf(ok, sizeof(ok), "HTTP/1.1 %d %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
					  recv_status, recv_status == 200 ? "OK" : "Bad Request");
			if (write(c, ok, (size_t)ol) < 0)
				perror("receiver");
			close(c);
			free(buf);
			free(body);
		}
	}
	/* Up when it listens: its socket in the kernel's table (no connection of ours, which
	 * a squatter would count). */
	for (int i = 0; i < 100; i++) {
		char cmd[700];
		if (upath)
			snprintf(cmd, sizeof(cmd), "ss -xlnH src %s | grep -q .", upath);
		else
			snprintf(cmd, sizeof(cmd), "ss -tlnH src 127.0.0.1:%d | grep -q .", port);
		if (run_sh(cmd, 110) == 0)
			return pid;
		usleep(50000);
	}
	FAIL("the push receiver did not listen on %s (port %d)", upath ? upath : "127.0.0.1", port);
}

static void receiver_start(int port, const char *dir)
{
	recv_pid = receiver_run(port, NULL, dir, NULL);
}

/* The bytes the receiver pid read, from its count file in dir. */
static unsigned long long received_bytes(const char *dir, pid_t pid)
{
	char path[600];
	snprintf(path, sizeof(path), "%s/%d.bytes", dir, (int)pid);
	char *t = test_slurp_str(path);
	unsigned long long n = t ? strtoull(t, NULL, 10) : 0;
	free(t);
	return n;
}

struct pushed {
	char file[300];            /* the head's file */
	char interval[32];         /* X-Viprof-Interval */
	bool otlp;
};
static struct pushed pushed[512];
static int npushed;

/* Reads the receiver's heads into pushed[]. */
static void read_pushed(const char *dir)
{
	npushed = 0;
	DIR *d = opendir(dir);
	ASSERT_NOT_NULL(d);
	struct dirent *de;
	while ((de = readdir(d)) && npushed < 512) {
		size_t l = strlen(de->d_name);
		if (l < 6 || strcmp(de->d_name + l - 5, ".head"))
			continue;
		struct pushed *p = &pushed[npushed];
		snprintf(p->file, sizeof(p->file), "%s/%s", dir, de->d_name);
		char *h = test_slurp_str(p->file);
		const char *iv = strstr(h, "X-Viprof-Interval: ");
		if (iv)
			sscanf(iv + 19, "%31s", p->interval);
		p->otlp = !strncmp(h, "POST /v1development/profiles ", 29);
		free(h);
		npushed++;
	}
	closedir(d);
}

static int times_pushed(const char *interval, bool otlp)
{
	int n = 0;
	for (int i = 0; i < npushed; i++)
		n += pushed[i].otlp == otlp && !strcmp(pushed[i].interval, interval);
	return n;
}

/* The ended intervals (those with service.json) under cont. */
static int ended_intervals(const char *cont, char names[][32], int max)
{
	int n = 0;
	DIR *d = opendir(cont);
	if (!d)
		return 0;
	struct dirent *de;
	while ((de = readdir(d)) && n < max) {
		char p[600];
		struct stat sb;
		snprintf(p, sizeof(p), "%s/%s/service.json", cont, de->d_name);
		if (de->d_name[0] == '2' && stat(p, &sb) == 0)
			snprintf(names[n++], 32, "%.31s", de->d_name);
	}
	closedir(d);
	return n;
}

static void scenario_push(void)
{
	REQUIRE_ROOT();
	const char *pprof = pprof_bin();
	if (run_sh("command -v protoc >/dev/null 2>&1", 110) != 0)
		SKIP("protoc is not installed (apt-get install protobuf-compiler; scripts/deps.sh does)");
	char dir[] = "/tmp/vp-test-serve-push-XXXXXX", cont[300], rdir[300], basic[300], bearer[300], path[900];
	char pyro[400], otlp[400], names[256][32], cmd[1400];
	ASSERT_NOT_NULL(mkdtemp(dir));
	snprintf(cont, sizeof(cont), "%s/cont", dir);
	snprintf(rdir, sizeof(rdir), "%s/received", dir);
	ASSERT_EQ(mkdir(rdir, 0700), 0);
	snprintf(basic, sizeof(basic), "%s/basic", dir);
	snprintf(bearer, sizeof(bearer), "%s/bearer", dir);
	FILE *f = fopen(basic, "w");
	fputs("viprof:s3cret\n", f);
	fclose(f);
	f = fopen(bearer, "w");
	fputs("otlp-token-7d1e90c4a5b2\n", f);
	fclose(f);
	ASSERT_EQ(chmod(basic, 0600), 0);
	ASSERT_EQ(chmod(bearer, 0600), 0);
	int rport = free_port();
	receiver_start(rport, rdir);
	pid_t w = work_pid = fork();
	if (w == 0) {
		execl(split3, split3, "300", (char *)NULL);
		_exit(127);
	}
	snprintf(pyro, sizeof(pyro), "pyroscope=http://127.0.0.1:%d,basic=%s", rport, basic);
	snprintf(otlp, sizeof(otlp), "otlp=http://127.0.0.1:%d,bearer=%s", rport, bearer);
	const char *args[] = { "--continuous", cont, "--interval", "2", "--no-jit", "--push", pyro, "--push", otlp,
			       "--push-queue", "100", NULL };
	ASSERT_EQ(start_serve(args, "pushing each interval to"), -1);

	/* Up: the first intervals arrive, one request each per backend. */
	for (int i = 0; i < 600; i++) {
		read_pushed(rdir);
		int p = 0, o = 0;
		for (int k = 0; k < npushed; k++) {
			o += pushed[k].otlp;
			p += !pushed[k].otlp;
		}
		if (p >= 1 && o >= 1)
			break;
		usleep(100000);
	}
	if (npushed <= 1) {
		int rst = 0;
		char *log = test_slurp_str(logpath);
		pid_t gone = waitpid(recv_pid, &rst, WNOHANG);
		fprintf(stderr, "nothing pushed in 60 s; receiver %s (status %d); service log:\n%s\n",
			gone == recv_pid ? "exited" : "running", rst, log ? log : "(none)");
		free(log);
	}
	ASSERT_GT(npushed, 1);
	/* Down for three intervals. */
	kill(recv_pid, SIGKILL);
	waitpid(recv_pid, NULL, 0);
	recv_pid = 0;
	int n0 = ended_intervals(cont, names, 256), n;
	for (int i = 0; i < 600 && (n = ended_intervals(cont, names, 256)) < n0 + 3; i++)
		usleep(100000);
	ASSERT_GE(n, n0 + 3);
	fprintf(stderr, "backend down while %d intervals ended\n", n - n0);
	/* Up again: every interval ended by now arrives at both, but one that held no
	 * sample (the first, on a loaded VM whose sampler took its time to start), which
	 * the service says it does not send. */
	receiver_start(rport, rdir);
	n = ended_intervals(cont, names, 256);
	bool all = false;
	for (int i = 0; i < 900 && !all; i++) {
		read_pushed(rdir);
		all = true;
		for (int k = 0; k < n && all; k++)
			all = interval_empty(names[k]) ||
			      (times_pushed(names[k], false) >= 1 && times_pushed(names[k], true) >= 1);
		if (!all)
			usleep(100000);
	}
	stop_serve();
	kill(recv_pid, SIGKILL);
	waitpid(recv_pid, NULL, 0);
	recv_pid = 0;
	kill(w, SIGKILL);
	waitpid(w, NULL, 0);
	work_pid = 0;
	ASSERT_CONTAINS(last_log, "no answer");   /* the attempts while it was down */
	read_pushed(rdir);
	fprintf(stderr, "%d requests received for %d intervals ended before the check\n", npushed, n);
	int sent = 0;
	for (int k = 0; k < n; k++) {
		bool empty = interval_empty(names[k]);
		fprintf(stderr, "  %s: pyroscope %d, otlp %d%s\n", names[k], times_pushed(names[k], false),
			times_pushed(names[k], true), empty ? " (held no sample: not sent)" : "");
		ASSERT_EQ(times_pushed(names[k], false), !empty);
		ASSERT_EQ(times_pushed(names[k], true), !empty);
		sent += !empty;
	}
	ASSERT_GE(sent, 3);
	for (int k = 0; k < npushed; k++) {
		ASSERT_TRUE(pushed[k].interval[0]);
		ASSERT_EQ(times_pushed(pushed[k].interval, pushed[k].otlp), 1);   /* none twice, the last too */
	}

	/* What a backend checks, on one request of each. */
	int pi = -1, oi = -1;
	for (int k = 0; k < npushed; k++)
		*(pushed[k].otlp ? &oi : &pi) = k;
	char *h = test_slurp_str(pushed[pi].file);
	fprintf(stderr, "pyroscope request: %.*s\n", (int)strcspn(h, "\r"), h);
	ASSERT_TRUE(!strncmp(h, "POST /ingest?", 13));
	ASSERT_CONTAINS(h, "name=viprof.cpu%7Bhostname%3D");
	ASSERT_CONTAINS(h, "&format=pprof");
	unsigned long long from = 0, until = 0;
	const char *fp = strstr(h, "&from="), *up = strstr(h, "&until=");
	ASSERT_NOT_NULL(fp);
	ASSERT_NOT_NULL(up);
	from = strtoull(fp + 6, NULL, 10);
	until = strtoull(up + 7, NULL, 10);
	ASSERT_GT(from, 1700000000ull);
	ASSERT_GE(until, from);
	ASSERT_CONTAINS(h, "Authorization: Basic dmlwcm9mOnMzY3JldA==\r\n");   /* viprof:s3cret */
	free(h);
	/* The Pyroscope body, by the real pprof. */
	snprintf(path, sizeof(path), "%.*s.body", (int)(strlen(pushed[pi].file) - 5), pushed[pi].file);
	snprintf(cmd, sizeof(cmd), "%s -raw -symbolize=none %s 2>&1", pprof, path);
	char *raw = run_sh_read(cmd, NULL);
	ASSERT_CONTAINS(raw, "samples/count cpu/nanoseconds[dflt]");
	free(raw);
	snprintf(cmd, sizeof(cmd), "%s -top -symbolize=none -nodecount=2000 %s 2>&1", pprof, path);
	raw = run_sh_read(cmd, NULL);
	ASSERT_CONTAINS(raw, "work50");
	free(raw);
	h = test_slurp_str(pushed[oi].file);
	fprintf(stderr, "otlp request: %.*s\n", (int)strcspn(h, "\r"), h);
	ASSERT_CONTAINS(h, "Content-Type: application/x-protobuf\r\n");
	ASSERT_CONTAINS(h, "Authorization: Bearer otlp-token-7d1e90c4a5b2\r\n");
	free(h);
	/* The OTLP body, by protoc with the published schema. */
	snprintf(path, sizeof(path), "%.*s.body", (int)(strlen(pushed[oi].file) - 5), pushed[oi].file);
	snprintf(cmd, sizeof(cmd), "python3 %s/test-push-otlp-check.py %s %s split3 work50 2>&1", TESTS_SRC, path,
		 TESTS_SRC);
	char *out = run_sh_read(cmd, NULL);
	fprintf(stderr, "%s", out);
	ASSERT_CONTAINS(out, "otlp body: ");
	ASSERT_NOT_CONTAINS(out, "no sample");
	ASSERT_NOT_CONTAINS(out, "Traceback");
	ASSERT_NOT_CONTAINS(out, "without");
	free(out);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (run_sh(cmd, 110) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
}

/* Waits (up to 60 s) until the receiver holds a request of each kind; their indices in pushed[]. */
static void wait_both_pushed(const char *rdir, int *pi, int *oi)
{
	*pi = *oi = -1;
	for (int i = 0; i < 600 && (*pi < 0 || *oi < 0); i++) {
		read_pushed(rdir);
		for (int k = 0; k < npushed; k++)
			*(pushed[k].otlp ? oi : pi) = k;
		if (*pi < 0 || *oi < 0)
			usleep(100000);
	}
	if (*pi < 0 || *oi < 0) {
		char *log = test_slurp_str(logpath);
		FAIL("no request of each kind in 60 s (pyroscope %d, otlp %d); service log:\n%s", *pi, *oi, log);
	}
}

/* The value of a /metrics series whose line starts with prefix, or -1. */
static long long metric_value(const char *text, const char *prefix)
{
	for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		if (!strncmp(l, prefix, strlen(prefix)) && l[strlen(prefix)] == ' ')
			return strtoll(l + strlen(prefix) + 1, NULL, 10);
	return -1;
}

/* (issue 31) --push with --http: the hostname pushed is `hostname`'s, in Pyroscope's
 * name label and in OTLP's host.name (the service's stack buffer used to go out of scope
 * before the push thread read it). */
static void scenario_push_host(void)
{
	REQUIRE_ROOT();
	if (run_sh("command -v protoc >/dev/null 2>&1", 110) != 0)
		SKIP("protoc is not installed (apt-get install protobuf-compiler; scripts/deps.sh does)");
	char dir[] = "/tmp/vp-test-serve-pushhost-XXXXXX", cont[300], rdir[300], pyro[400], otlp[400], listen[64];
	char host[256] = "", want[600], path[900], cmd[1400];
	ASSERT_OK(gethostname(host, sizeof(host) - 1) ? -errno : 0);
	ASSERT_NOT_NULL(mkdtemp(dir));
	snprintf(cont, sizeof(cont), "%s/cont", dir);
	snprintf(rdir, sizeof(rdir), "%s/received", dir);
	ASSERT_EQ(mkdir(rdir, 0700), 0);
	int rport = free_port(), hport = free_port();
	receiver_start(rport, rdir);
	pid_t w = work_pid = fork();
	if (w == 0) {
		execl(split3, split3, "300", (char *)NULL);
		_exit(127);
	}
	snprintf(pyro, sizeof(pyro), "pyroscope=http://127.0.0.1:%d", rport);
	snprintf(otlp, sizeof(otlp), "otlp=http://127.0.0.1:%d", rport);
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", hport);
	const char *args[] = { "--continuous", cont, "--interval", "2", "--no-jit", "--http", listen, "--push", pyro,
			       "--push", otlp, NULL };
	ASSERT_EQ(start_serve(args, "pprof over HTTP on"), -1);
	int pi, oi;
	wait_both_pushed(rdir, &pi, &oi);
	stop_serve();
	kill(w, SIGKILL);
	waitpid(w, NULL, 0);
	work_pid = 0;
	char *h = test_slurp_str(pushed[pi].file);
	fprintf(stderr, "pyroscope request: %.*s\n", (int)strcspn(h, "\r"), h);
	snprintf(want, sizeof(want), "name=viprof.cpu%%7Bhostname%%3D%s%%2C", host);
	ASSERT_CONTAINS(h, want);
	free(h);
	snprintf(path, sizeof(path), "%.*s.body", (int)(strlen(pushed[oi].file) - 5), pushed[oi].file);
	snprintf(cmd, sizeof(cmd), "python3 %s/test-push-otlp-check.py %s %s split3 work50 %s 2>&1", TESTS_SRC, path,
		 TESTS_SRC, host);
	char *out = run_sh_read(cmd, NULL);
	fprintf(stderr, "%s", out);
	snprintf(want, sizeof(want), "host.name=%s\n", host);
	ASSERT_CONTAINS(out, want);
	ASSERT_NOT_CONTAINS(out, "Traceback");
	ASSERT_NOT_CONTAINS(out, "host.name is not");
	free(out);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (run_sh(cmd, 110) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
}

/* (issue 31) A backend that answers 400 gets each interval once and it is dropped: /metrics
 * counts a failure and a rejected interval for it, and no success. */
static void scenario_push_rejected(void)
{
	REQUIRE_ROOT();
	char dir[] = "/tmp/vp-test-serve-pushrej-XXXXXX", cont[300], rdir[300], pyro[400], listen[64], cmd[700];
	ASSERT_NOT_NULL(mkdtemp(dir));
	snprintf(cont, sizeof(cont), "%s/cont", dir);
	snprintf(rdir, sizeof(rdir), "%s/received", dir);
	ASSERT_EQ(mkdir(rdir, 0700), 0);
	int rport = free_port(), hport = free_port();
	recv_status = 400;
	receiver_start(rport, rdir);
	pid_t w = work_pid = fork();
	if (w == 0) {
		execl(split3, split3, "300", (char *)NULL);
		_exit(127);
	}
	snprintf(pyro, sizeof(pyro), "pyroscope=http://127.0.0.1:%d", rport);
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", hport);
	const char *args[] = { "--continuous", cont, "--interval", "2", "--no-jit", "--http", listen, "--push", pyro, NULL };
	ASSERT_EQ(start_serve(args, "pprof over HTTP on"), -1);
	bool dropped = false;
	for (int i = 0; i < 600 && !dropped; i++) {
		char *log = test_slurp_str(logpath);
		dropped = strstr(log, "HTTP 400") != NULL;
		free(log);
		if (!dropped)
			usleep(100000);
	}
	ASSERT_TRUE(dropped);
	struct answer m = get(NULL, "127.0.0.1", hport, "/metrics", NULL);
	stop_serve();
	kill(w, SIGKILL);
	waitpid(w, NULL, 0);
	work_pid = 0;
	ASSERT_EQ(m.status, 200);
	char prefix[200];
	snprintf(prefix, sizeof(prefix), "viprof_push_success_total{target=\"pyroscope http://127.0.0.1:%d\"}", rport);
	long long ok = metric_value(m.body, prefix);
	snprintf(prefix, sizeof(prefix), "viprof_push_failures_total{target=\"pyroscope http://127.0.0.1:%d\"}", rport);
	long long failed = metric_value(m.body, prefix);
	snprintf(prefix, sizeof(prefix), "viprof_push_rejected_total{target=\"pyroscope http://127.0.0.1:%d\"}", rport);
	long long rejected = metric_value(m.body, prefix);
	fprintf(stderr, "success %lld, failures %lld, rejected %lld\n", ok, failed, rejected);
	ASSERT_EQ(ok, 0);
	ASSERT_GE(failed, 1);
	ASSERT_GE(rejected, 1);
	free(m.head);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (run_sh(cmd, 110) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
}

/* ---- issue 31: a socket of this machine is sent nothing unless root or --push-owner holds it ---- */

static void make_push_user(void)
{
	if (run_sh("userdel " PUSH_USER " 2>/dev/null; useradd -M -N -s /usr/sbin/nologin " PUSH_USER, 110) != 0)
		SKIP("cannot create the test user " PUSH_USER " with useradd");
	push_user_made = true;
}

/* How many times needle occurs in hay. */
static int occurrences(const char *hay, const char *needle)
{
	int n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* Waits (up to 60 s) until the service's log holds needle n times. */
static void wait_log(const char *needle, int n)
{
	for (int i = 0; i < 600; i++) {
		char *log = test_slurp_str(logpath);
		int k = occurrences(log, needle);
		free(log);
		if (k >= n)
			return;
		usleep(100000);
	}
	char *log = test_slurp_str(logpath);
	FAIL("the service did not say '%s' %d times in 60 s; its log:\n%s", needle, n, log);
}

/* A user binds the loopback port of a backend that is down and answers like one: over
 * 3+ intervals it reads no byte (no connection is even made), the refusal is logged once
 * per target and counted in /metrics; once root's backend has the port again, the
 * queued intervals go to it. */
static void scenario_push_squatter(void)
{
	REQUIRE_ROOT();
	make_push_user();
	char dir[] = "/tmp/vp-test-serve-pushsq-XXXXXX", cont[300], sdir[300], rdir[300], bearer[300];
	char pyro[400], otlp[400], listen[64], names[256][32], prefix[200], cmd[700];
	ASSERT_NOT_NULL(mkdtemp(dir));
	ASSERT_EQ(chmod(dir, 0711), 0);
	snprintf(cont, sizeof(cont), "%s/cont", dir);
	snprintf(sdir, sizeof(sdir), "%s/squatter", dir);
	snprintf(rdir, sizeof(rdir), "%s/received", dir);
	snprintf(bearer, sizeof(bearer), "%s/bearer", dir);
	ASSERT_EQ(mkdir(sdir, 0700), 0);
	ASSERT_EQ(chown(sdir, getpwnam(PUSH_USER)->pw_uid, 0), 0);
	ASSERT_EQ(mkdir(rdir, 0700), 0);
	FILE *f = fopen(bearer, "w");
	fputs("squatter-must-not-see-this-token\n", f);
	fclose(f);
	ASSERT_EQ(chmod(bearer, 0600), 0);
	int port = free_port(), hport = free_port();
	squat_pid = receiver_run(port, NULL, sdir, PUSH_USER);
	pid_t w = work_pid = fork();
	if (w == 0) {
		execl(split3, split3, "300", (char *)NULL);
		_exit(127);
	}
	snprintf(pyro, sizeof(pyro), "pyroscope=http://127.0.0.1:%d,bearer=%s", port, bearer);
	snprintf(otlp, sizeof(otlp), "otlp=http://127.0.0.1:%d,bearer=%s", port, bearer);
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", hport);
	const char *args[] = { "--continuous", cont, "--interval", "2", "--no-jit", "--http", listen, "--push", pyro,
			       "--push", otlp, NULL };
	ASSERT_EQ(start_serve(args, "pprof over HTTP on"), -1);
	/* Three intervals ended and at least three attempts refused per target. */
	int n0 = ended_intervals(cont, names, 256), n = n0;
	long long rp = 0, ro = 0;
	for (int i = 0; i < 900 && (n < n0 + 3 || rp < 3 || ro < 3); i++) {
		usleep(100000);
		n = ended_intervals(cont, names, 256);
		struct answer m = get(NULL, "127.0.0.1", hport, "/metrics", NULL);
		snprintf(prefix, sizeof(prefix), "viprof_push_refused_total{target=\"pyroscope http://127.0.0.1:%d\"}", port);
		rp = metric_value(m.body, prefix);
		snprintf(prefix, sizeof(prefix), "viprof_push_refused_total{target=\"otlp http://127.0.0.1:%d\"}", port);
		ro = metric_value(m.body, prefix);
		free(m.head);
	}
	unsigned long long got = received_bytes(sdir, squat_pid);
	fprintf(stderr, "%d intervals ended with the squatter on port %d: refused %lld (pyroscope) and %lld (otlp) "
		"attempts; the squatter read %llu bytes\n", n - n0, port, rp, ro, got);
	ASSERT_UEQ(got, 0);
	ASSERT_GE(n, n0 + 3);
	ASSERT_GE(rp, 3);
	ASSERT_GE(ro, 3);
	read_pushed(sdir);
	ASSERT_EQ(npushed, 0);
	char *log = test_slurp_str(logpath);
	ASSERT_EQ(occurrences(log, ": refused: "), 2);   /* once per target, not per attempt */
	ASSERT_CONTAINS(log, "(" PUSH_USER "), not root");
	free(log);
	/* Root's backend takes the port back: the queued intervals go to it. */
	kill(squat_pid, SIGKILL);
	waitpid(squat_pid, NULL, 0);
	squat_pid = 0;
	receiver_start(port, rdir);
	int pi, oi;
	wait_both_pushed(rdir, &pi, &oi);
	wait_log("again: sending", 2);
	stop_serve();
	kill(w, SIGKILL);
	waitpid(w, NULL, 0);
	work_pid = 0;
	char *h = test_slurp_str(pushed[oi].file);
	ASSERT_CONTAINS(h, "Authorization: Bearer squatter-must-not-see-this-token\r\n");
	free(h);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (run_sh(cmd, 110) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
}

/* Root's listening socket, a user's accepting process (root's listener handed over, or the
 * port taken between the check and the connection): the check before the connection
 * passes, the one after it sees the accepted socket's owner and sends no byte. */
static void scenario_push_handoff(void)
{
	REQUIRE_ROOT();
	make_push_user();
	char dir[] = "/tmp/vp-test-serve-pushho-XXXXXX", cont[300], sdir[300], pyro[400], cmd[700];
	ASSERT_NOT_NULL(mkdtemp(dir));
	ASSERT_EQ(chmod(dir, 0711), 0);
	snprintf(cont, sizeof(cont), "%s/cont", dir);
	snprintf(sdir, sizeof(sdir), "%s/squatter", dir);
	ASSERT_EQ(mkdir(sdir, 0700), 0);
	ASSERT_EQ(chown(sdir, getpwnam(PUSH_USER)->pw_uid, 0), 0);
	int port = free_port();
	recv_user_accepts = true;
	squat_pid = receiver_run(port, NULL, sdir, PUSH_USER);
	pid_t w = work_pid = fork();
	if (w == 0) {
		execl(split3, split3, "300", (char *)NULL);
		_exit(127);
	}
	snprintf(pyro, sizeof(pyro), "pyroscope=http://127.0.0.1:%d", port);
	const char *args[] = { "--continuous", cont, "--interval", "2", "--no-jit", "--push", pyro, NULL };
	ASSERT_EQ(start_serve(args, "pushing each interval to"), -1);
	wait_log("refused: the socket that accepted the connection belongs to uid", 1);
	char names[256][32];
	int n0 = ended_intervals(cont, names, 256), n = n0;
	for (int i = 0; i < 600 && n < n0 + 3; i++) {
		usleep(100000);
		n = ended_intervals(cont, names, 256);
	}
	stop_serve();
	kill(w, SIGKILL);
	waitpid(w, NULL, 0);
	work_pid = 0;
	unsigned long long got = received_bytes(sdir, squat_pid);
	fprintf(stderr, "%d intervals ended; the user's accepting process read %llu bytes\n", n - n0, got);
	ASSERT_UEQ(got, 0);
	ASSERT_GE(n, n0 + 3);
	ASSERT_CONTAINS(last_log, "(" PUSH_USER "), not root");
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (run_sh(cmd, 110) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
}

/* unix: targets: root's collector socket gets the intervals; a socket a user owns gets
 * no byte (its file's owner is refused) until --push-owner names that user. */
static void scenario_push_unix(void)
{
	REQUIRE_ROOT();
	make_push_user();
	char dir[] = "/tmp/vp-test-serve-pushux-XXXXXX", cont[300], udir[300], rdir[300], rsock[330], usock[330];
	char rt[400], ut[400], cmd[700];
	ASSERT_NOT_NULL(mkdtemp(dir));
	ASSERT_EQ(chmod(dir, 0711), 0);
	snprintf(cont, sizeof(cont), "%s/cont", dir);
	snprintf(udir, sizeof(udir), "%s/user", dir);
	snprintf(rdir, sizeof(rdir), "%s/root", dir);
	snprintf(rsock, sizeof(rsock), "%s/otlp.sock", rdir);
	snprintf(usock, sizeof(usock), "%s/pyro.sock", udir);
	ASSERT_EQ(mkdir(udir, 0700), 0);
	ASSERT_EQ(chown(udir, getpwnam(PUSH_USER)->pw_uid, 0), 0);
	ASSERT_EQ(mkdir(rdir, 0700), 0);
	recv_pid = receiver_run(0, rsock, rdir, NULL);
	squat_pid = receiver_run(0, usock, udir, PUSH_USER);
	pid_t w = work_pid = fork();
	if (w == 0) {
		execl(split3, split3, "300", (char *)NULL);
		_exit(127);
	}
	snprintf(rt, sizeof(rt), "otlp=unix:%s", rsock);
	snprintf(ut, sizeof(ut), "pyroscope=unix:%s,path=/base", usock);
	const char *args[] = { "--continuous", cont, "--interval", "2", "--no-jit", "--push", rt, "--push", ut, NULL };
	ASSERT_EQ(start_serve(args, "pushing each interval to"), -1);
	int oi = -1;
	for (int i = 0; i < 600 && oi < 0; i++) {
		read_pushed(rdir);
		for (int k = 0; k < npushed; k++)
			if (pushed[k].otlp)
				oi = k;
		if (oi < 0)
			usleep(100000);
	}
	ASSERT_GE(oi, 0);
	/* The user's socket: refused at least twice, no byte read. */
	for (int i = 0; i < 600; i++) {
		char *log = test_slurp_str(logpath);
		bool said = strstr(log, ": refused: the socket file belongs to uid") != NULL;
		free(log);
		if (said)
			break;
		usleep(100000);
	}
	char names[256][32];
	int n0 = ended_intervals(cont, names, 256), n = n0;
	for (int i = 0; i < 600 && n < n0 + 2; i++) {
		usleep(100000);
		n = ended_intervals(cont, names, 256);
	}
	stop_serve();
	ASSERT_CONTAINS(last_log, ": refused: the socket file belongs to uid");
	ASSERT_CONTAINS(last_log, "(" PUSH_USER "), not root");
	ASSERT_UEQ(received_bytes(udir, squat_pid), 0);
	char *h = test_slurp_str(pushed[oi].file);
	fprintf(stderr, "otlp request over %s: %.*s\n", rsock, (int)strcspn(h, "\r"), h);
	ASSERT_TRUE(!strncmp(h, "POST /v1development/profiles HTTP/1.1\r\n", 39));
	free(h);
	/* Named with --push-owner, the user's socket gets them (under its base path). */
	const char *args2[] = { "--continuous", cont, "--interval", "2", "--no-jit", "--push", ut, "--push-owner",
				PUSH_USER, NULL };
	ASSERT_EQ(start_serve(args2, "pushing each interval to"), -1);
	int pi = -1;
	for (int i = 0; i < 600 && pi < 0; i++) {
		read_pushed(udir);
		for (int k = 0; k < npushed; k++)
			if (!pushed[k].otlp)
				pi = k;
		if (pi < 0)
			usleep(100000);
	}
	stop_serve();
	kill(w, SIGKILL);
	waitpid(w, NULL, 0);
	work_pid = 0;
	ASSERT_GE(pi, 0);
	h = test_slurp_str(pushed[pi].file);
	fprintf(stderr, "pyroscope request to the --push-owner's socket: %.*s\n", (int)strcspn(h, "\r"), h);
	ASSERT_TRUE(!strncmp(h, "POST /base/ingest?", 18));
	free(h);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (run_sh(cmd, 110) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
}

/* https: a TLS receiver (python3's ssl, certificates made here by openssl) that requires a
 * client certificate. With the right CA (and the client certificate) the intervals
 * arrive; with a wrong CA none does, and the log says why. */
static void scenario_push_https(void)
{
	REQUIRE_ROOT();
	if (run_sh("command -v openssl >/dev/null 2>&1 && command -v python3 >/dev/null 2>&1", 110) != 0)
		SKIP("openssl or python3 is not installed (apt-get install openssl python3; scripts/deps.sh does)");
	char dir[] = "/tmp/vp-test-serve-pushtls-XXXXXX", cont[300], rdir[300], good[400], bad[400], cmd[3000];
	ASSERT_NOT_NULL(mkdtemp(dir));
	snprintf(cont, sizeof(cont), "%s/cont", dir);
	snprintf(rdir, sizeof(rdir), "%s/received", dir);
	ASSERT_EQ(mkdir(rdir, 0700), 0);
	/* A CA, a server certificate for 127.0.0.1 and a client certificate signed by it; and
	 * another CA that signed neither. */
	snprintf(cmd, sizeof(cmd),
		 "cd %s && exec >openssl.log 2>&1 && "
		 "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj /CN=viprof-test-ca && "
		 "openssl req -x509 -newkey rsa:2048 -nodes -keyout wrong.key -out wrong.pem -days 2 -subj /CN=other-ca && "
		 "openssl req -newkey rsa:2048 -nodes -keyout srv.key -out srv.csr -subj /CN=127.0.0.1 && "
		 "printf 'subjectAltName=IP:127.0.0.1\\n' > srv.ext && "
		 "openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out srv.pem -days 2 -extfile srv.ext && "
		 "openssl req -newkey rsa:2048 -nodes -keyout cli.key -out cli.csr -subj /CN=viprof-client && "
		 "openssl x509 -req -in cli.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out cli.pem -days 2 && "
		 "chmod 600 cli.key", dir);
	if (run_sh(cmd, 110) != 0) {
		snprintf(cmd, sizeof(cmd), "%s/openssl.log", dir);
		char *l = test_slurp_str(cmd);
		FAIL("openssl could not make the test certificates:\n%s", l);
	}
	int port = free_port();
	recv_pid = fork();
	ASSERT_GE(recv_pid, 0);
	if (recv_pid == 0) {
		char ps[16], script[600], crt[400], key[400], ca[400];
		snprintf(ps, sizeof(ps), "%d", port);
		snprintf(script, sizeof(script), "%s/test-push-tls-server.py", TESTS_SRC);
		snprintf(crt, sizeof(crt), "%s/srv.pem", dir);
		snprintf(key, sizeof(key), "%s/srv.key", dir);
		snprintf(ca, sizeof(ca), "%s/ca.pem", dir);
		execlp("python3", "python3", script, ps, rdir, crt, key, ca, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 200; i++) {
		snprintf(cmd, sizeof(cmd), "ss -tlnH src 127.0.0.1:%d | grep -q .", port);
		if (run_sh(cmd, 110) == 0)
			break;
		ASSERT_LT(i, 199);
		usleep(50000);
	}
	pid_t w = work_pid = fork();
	if (w == 0) {
		execl(split3, split3, "300", (char *)NULL);
		_exit(127);
	}
	snprintf(good, sizeof(good), "pyroscope=https://127.0.0.1:%d,ca=%s/ca.pem,cert=%s/cli.pem,key=%s/cli.key", port,
		 dir, dir, dir);
	snprintf(bad, sizeof(bad), "otlp=https://127.0.0.1:%d,ca=%s/wrong.pem,cert=%s/cli.pem,key=%s/cli.key", port, dir,
		 dir, dir);
	const char *args[] = { "--continuous", cont, "--interval", "2", "--no-jit", "--push", good, "--push", bad, NULL };
	ASSERT_EQ(start_serve(args, "pushing each interval to"), -1);
	int pi = -1;
	for (int i = 0; i < 600 && pi < 0; i++) {
		read_pushed(rdir);
		for (int k = 0; k < npushed; k++)
			if (!pushed[k].otlp)
				pi = k;
		if (pi < 0)
			usleep(100000);
	}
	wait_log("SSL certificate problem", 2);
	stop_serve();
	kill(recv_pid, SIGKILL);
	waitpid(recv_pid, NULL, 0);
	recv_pid = 0;
	kill(w, SIGKILL);
	waitpid(w, NULL, 0);
	work_pid = 0;
	ASSERT_GE(pi, 0);
	read_pushed(rdir);
	for (int k = 0; k < npushed; k++)
		ASSERT_FALSE(pushed[k].otlp);   /* the target with the wrong CA sent nothing */
	char *h = test_slurp_str(pushed[pi].file);
	fprintf(stderr, "pyroscope request over TLS: %.*s\n", (int)strcspn(h, "\r"), h);
	ASSERT_TRUE(!strncmp(h, "POST /ingest?", 13));
	free(h);
	ASSERT_CONTAINS(last_log, "SSL certificate problem");
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (run_sh(cmd, 110) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
}

/* ---- one report pipeline: a page and `viprof report` give the same bytes ---- */

/* Writes `viprof report DIR -F FMT [--title T]` to a file and reads it back. */
static char *report_file(const char *dir, const char *fmt, const char *title, size_t *len)
{
	char out[] = "/tmp/vp-test-serve-report-XXXXXX";
	int fd = mkstemp(out);
	ASSERT_TRUE(fd >= 0);
	close(fd);
	char *with[] = { (char *)viprof, "report", (char *)dir, "-F", (char *)fmt, "--title", (char *)title, "-o", out, NULL };
	char *without[] = { (char *)viprof, "report", (char *)dir, "-F", (char *)fmt, "-o", out, NULL };
	ASSERT_EQ(run_argv(title ? with : without, RUN_KEEP, RUN_KEEP, 100), 0);
	char *buf = test_slurp(out, len);
	unlink(out);
	return buf;
}

static void assert_same_bytes(const char *what, const char *a, size_t alen, const char *b, size_t blen)
{
	size_t i = 0;
	while (i < alen && i < blen && a[i] == b[i])
		i++;
	if (i < alen || i < blen)
		FAIL("%s: the page (%zu bytes) and viprof report (%zu bytes) differ from byte %zu: '%.60s' vs '%.60s'",
		     what, alen, blen, i, i < alen ? a + i : "", i < blen ? b + i : "");
}

/* Drops the reason from each "cannot open for symbols (REASON)" warning, in place. The
 * interval records the whole VM, so it can hold another test's process whose library is
 * gone by now: whether the page (rendered while that process lived) and the later command
 * were refused with ENOENT or EINVAL depends on the moment, not on the pipeline this
 * compares; every other byte of the warning, and the frames, must still be equal. */
static size_t drop_open_reasons(char *b, size_t len)
{
	static const char key[] = "cannot open for symbols (";
	size_t r = 0, w = 0, k = sizeof(key) - 1;

	while (r < len) {
		if (len - r >= k && !memcmp(b + r, key, k)) {
			memmove(b + w, b + r, k);
			w += k;
			r += k;
			while (r < len && b[r] != ')' && b[r] != '\n')
				r++;
			continue;
		}
		b[w++] = b[r++];
	}
	return w;
}

/* An interval's flame graph and pprof, as the service serves them to root on the
 * loopback (kernel frames shown), equal `viprof report` of the interval's directory:
 * the title, which names the host and the interval, is the page's own and is given to
 * the command. With --off-cpu, so that the flame graph's wall view is in both. */
static void scenario_same_report(void)
{
	REQUIRE_ROOT();
	char dir[] = "/tmp/vp-test-serve-same-XXXXXX", listen[64], path[600], name[32], title[512], host[256];
	ASSERT_NOT_NULL(mkdtemp(dir));
	int port = free_port();
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
	const char *args[] = { "--continuous", dir, "--interval", "2", "--off-cpu", "-F", "199", "--http", listen,
			       "--no-jit", NULL };
	ASSERT_EQ(start_serve(args, "pprof over HTTP on"), -1);
	pid_t w = fork();
	if (w == 0) {
		execl(split3, split3, "4", (char *)NULL);
		_exit(127);
	}
	wait_interval(dir, name, sizeof(name));
	snprintf(path, sizeof(path), "/flame/%s", name);
	struct answer flame = get(NULL, "127.0.0.1", port, path, NULL);
	snprintf(path, sizeof(path), "/pprof/%s", name);
	struct answer pprof = get(NULL, "127.0.0.1", port, path, NULL);
	kill(w, SIGTERM);
	waitpid(w, NULL, 0);
	stop_serve();
	ASSERT_EQ(flame.status, 200);
	ASSERT_EQ(pprof.status, 200);

	ASSERT_OK(gethostname(host, sizeof(host)) ? -errno : 0);
	host[sizeof(host) - 1] = '\0';
	snprintf(title, sizeof(title), "%s: whole VM, interval %s", host, name);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	size_t hlen, plen;
	char *html = report_file(path, "html", title, &hlen);
	char *pb = report_file(path, "pprof", NULL, &plen);
	ASSERT_CONTAINS(html, "running");   /* the wall view beside off-cpu */
	flame.len = drop_open_reasons(flame.body, flame.len);
	hlen = drop_open_reasons(html, hlen);
	assert_same_bytes("flame graph", flame.body, flame.len, html, hlen);
	assert_same_bytes("pprof", pprof.body, pprof.len, pb, plen);
	fprintf(stderr, "%s: flame graph %zu bytes, pprof %zu bytes, equal\n", name, hlen, plen);
	free(html);
	free(pb);
	free(flame.head);
	free(pprof.head);
	char rm[700];
	snprintf(rm, sizeof(rm), "rm -rf %s", dir);
	ASSERT_EQ(run_sh(rm, 110), 0);
}

int main(int argc, char **argv)
{
	if (argc != 4)
		FAIL("usage: test-serve-http pprof|token|continuous|access|slow|contdir|jvmattach|metrics|push|push-host|push-rejected|push-squatter|push-handoff|push-unix|push-https|same-report VIPROF SPLIT3");
	viprof = argv[2];
	split3 = argv[3];
	REQUIRE_ROOT();
	main_pid = getpid();
	atexit(at_end);
	signal(SIGPIPE, SIG_IGN);
	if (!strcmp(argv[1], "pprof"))
		scenario_pprof();
	else if (!strcmp(argv[1], "token"))
		scenario_token();
	else if (!strcmp(argv[1], "continuous"))
		scenario_continuous();
	else if (!strcmp(argv[1], "access"))
		scenario_access();
	else if (!strcmp(argv[1], "slow"))
		scenario_slow();
	else if (!strcmp(argv[1], "contdir"))
		scenario_contdir();
	else if (!strcmp(argv[1], "jvmattach"))
		scenario_jvmattach();
	else if (!strcmp(argv[1], "metrics"))
		scenario_metrics();
	else if (!strcmp(argv[1], "push"))
		scenario_push();
	else if (!strcmp(argv[1], "push-host"))
		scenario_push_host();
	else if (!strcmp(argv[1], "push-rejected"))
		scenario_push_rejected();
	else if (!strcmp(argv[1], "push-squatter"))
		scenario_push_squatter();
	else if (!strcmp(argv[1], "push-handoff"))
		scenario_push_handoff();
	else if (!strcmp(argv[1], "push-unix"))
		scenario_push_unix();
	else if (!strcmp(argv[1], "push-https"))
		scenario_push_https();
	else if (!strcmp(argv[1], "same-report"))
		scenario_same_report();
	else
		FAIL("unknown scenario %s", argv[1]);
	printf("test-serve-http %s: ok\n", argv[1]);
	return 0;
}
