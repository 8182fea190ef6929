/* 'viprof serve': the long-running service. This file holds its HTTP side (pprof over
 * HTTP, --http) and the continuous whole-VM recording (--continuous); one struct of
 * defaults, one parser that checks every value, then the service runs until SIGINT or
 * SIGTERM. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/record_opts.h"
#include "common/paths.h"
#include "recorder/jvm_attach.h"
#include "recorder/record_request.h"
#include "common/util.h"
#include "daemon/api.h"
#include "daemon/caps.h"
#include "daemon/continuous.h"
#include "daemon/metrics.h"
#include "daemon/push.h"
#include "daemon/sock.h"
#include "daemon/sock_proto.h"

struct serve_args {
	const char *http, *http_token;
	const char *allow_group;   /* --http-allow-group */
	struct vp_http_allow allow;
	const char *continuous;
	unsigned interval_s;
	uint64_t keep_age_s, keep_bytes;
	double cpu_budget;
	uint64_t freq;             /* -F, or 0: each one's default */
	const char *jvm_attach;
	bool no_jit;
	bool off_cpu;
	const char *tmpdir;
	const char *socket;        /* --socket, or NULL */
	struct vp_sock_limits limits;
	struct vp_push_target push[VP_PUSH_MAX];   /* --push, parsed (credentials read) */
	int npush;
	unsigned push_queue;
	const char *push_app;
	uid_t push_owners[VP_PUSH_MAX_OWNERS];   /* --push-owner */
	int npush_owners;
};

#define SERVE_PPROF_FREQ 99   /* /debug/pprof/profile without -F */

_Static_assert(VP_INTERVAL_NAME_LEN <= VP_PUSH_NAME_MAX, "the pusher keeps whole interval names");

/* The continuous recording's ended intervals, to the pusher. */
static void push_interval(void *push, const char *name, uint64_t from_s, uint64_t until_s, uint64_t freq)
{
	vp_push__interval(push, name, from_s, until_s, freq);
}

static void serve_defaults(struct serve_args *a)
{
	memset(a, 0, sizeof(*a));
	a->interval_s = VP_CONT_DEFAULT_INTERVAL;
	a->keep_age_s = 24 * 3600;
	a->keep_bytes = 1ull << 30;
	a->cpu_budget = VP_CONT_DEFAULT_BUDGET;
	a->limits = (struct vp_sock_limits)VP_SOCK_DEFAULT_LIMITS;
	a->push_queue = VP_PUSH_DEFAULT_QUEUE;
	a->push_app = "viprof";
}

static void serve_usage(FILE *f)
{
	fprintf(f,
		"usage: viprof serve [--socket PATH] [--http ADDR:PORT [--http-token FILE]] [--continuous DIR [options]]\n"
		"\n"
		"Runs the profiling service (as root) until SIGINT or SIGTERM.\n"
		"\n"
		"  --http ADDR:PORT       serve pprof over HTTP: GET /debug/pprof/profile?seconds=N (a\n"
		"                         gzipped whole-VM CPU profile of the next N s, default 30, at\n"
		"                         most 300), GET / (the continuous intervals), /flame/INTERVAL,\n"
		"                         /pprof/INTERVAL, /metrics (Prometheus). A loopback address unless\n"
		"                         --http-token is given\n"
		"  --http-token FILE      a bearer token (one line, >= 16 characters, file mode 0600) that\n"
		"                         requests from other hosts must send as 'Authorization: Bearer'\n"
		"                         (and local users who are not allowed below)\n"
		"  --http-allow-group GROUP  local users of GROUP may read without the token (loopback;\n"
		"                         default: root only); they get kernel frames folded to [kernel]\n"
		"  --http-allow-user NAME[,NAME..]  the same for these users\n"
		"  --continuous DIR       record the whole VM continuously, one session per interval in\n"
		"                         DIR/<UTC start>/ (readable with viprof report DIR/<interval>)\n"
		"  --interval SEC         length of an interval (default 60)\n"
		"  --keep-age DURATION    remove intervals older than this (default 24h; 0 = never;\n"
		"                         units s, m, h, d)\n"
		"  --keep-bytes SIZE      remove the oldest intervals while all of them hold more (default\n"
		"                         1G; 0 = no limit; units K, M, G)\n"
		"  --cpu-budget PCT       the continuous recording's CPU time, in %% of one CPU, that the\n"
		"                         service keeps under by lowering the rate (default %.1f; 0 = none)\n"
		"  -F, --freq HZ          sampling rate of both (default: %d Hz per CPU for --continuous,\n"
		"                         lowered by the budget; %d Hz for /debug/pprof/profile)\n"
		"  --off-cpu              the continuous recording also records where threads wait\n"
		"                         (the switch tracer: a cost per context switch of the VM; without\n"
		"                         it nothing runs per switch, and steal is shared out in proportion)\n"
		"  --jvm-attach SEL       which JVMs the service loads the agent into (for named JIT\n"
		"                         frames): none (default), all, user:NAME,.. or PID,..; a JVM\n"
		"                         started with VIPROF_NO_AGENT=1 never gets it\n"
		"  --no-jit               no JVM agent at all\n"
		"  --push KIND=URL[,OPTION..]  send each continuous interval to a fleet backend\n"
		"                         (repeatable): KIND pyroscope (Pyroscope's ingest API, pprof),\n"
		"                         otlp (OTLP Profiles over HTTP) or clickhouse (the fleet store,\n"
		"                         docs/fleet.md; ,database=DB,prefix=P); URL https://HOST[:PORT][/PATH],\n"
		"                         unix:/SOCKET (with ,path=/P) or http://HOST[:PORT][/PATH];\n"
		"                         OPTIONs bearer=FILE or basic=FILE (a token or user:password),\n"
		"                         ca=FILE (the CAs https trusts), cert=FILE and key=FILE (a client\n"
		"                         certificate); retried with back-off from a queue on disk under\n"
		"                         DIR/.push/. A socket of this machine (loopback, unix:) is sent\n"
		"                         nothing unless root or a --push-owner holds it\n"
		"  --push-owner USER[,USER..]  users besides root whose sockets may receive pushes (the\n"
		"                         user a local collector or agent runs as)\n"
		"  --push-queue N         intervals a backend may fall behind before the oldest are dropped\n"
		"                         (default %u)\n"
		"  --push-app NAME        the application (service.name) the pushes are filed under\n"
		"                         (default viprof)\n"
		"  --tmpdir DIR           where /debug/pprof/profile records (default /tmp)\n"
		"  --socket PATH          record for users who cannot sample by themselves: their 'viprof\n"
		"                         record' asks here (default " VP_SOCK_DEFAULT ", on when neither\n"
		"                         --http nor --continuous is given; clients read $VIPROF_SOCKET)\n"
		"  --max-sessions N       recordings per user at once (default 2)\n"
		"  --max-requests N       requests per user per minute (default 30)\n"
		"  --max-freq HZ          a user's highest -F (default 4000)\n"
		"  --max-seconds T        a user's longest recording (default 1h; also when no -d is given)\n"
		"  --max-bytes SIZE       a user's largest session stream (default 1G)\n"
		"  -h, --help             this text\n"
		"\n"
		"examples:\n"
		"  viprof serve --http 127.0.0.1:6060\n"
		"      then: pprof -top http://127.0.0.1:6060/debug/pprof/profile?seconds=10\n"
		"  viprof serve --http 0.0.0.0:6060 --http-token /etc/viprof/token --continuous /var/lib/viprof\n"
		"      a fleet scraper sends 'Authorization: Bearer <token>'; http://HOST:6060/ lists the intervals\n"
		"  viprof serve --continuous /var/lib/viprof --push otlp=unix:/run/otelcol/otlp.sock --push-owner otelcol\n"
		"      every interval also goes to the local OpenTelemetry Collector's Unix socket, queued on\n"
		"      disk while it is down\n"
		"  viprof serve --continuous /var/lib/viprof \\\n"
		"      --push pyroscope=https://pyroscope.internal:4040,ca=/etc/viprof/ca.pem,basic=/etc/viprof/pyro\n"
		"      every interval also goes to Pyroscope over TLS\n",
		VP_CONT_DEFAULT_BUDGET, VP_CONT_DEFAULT_FREQ, SERVE_PPROF_FREQ, VP_PUSH_DEFAULT_QUEUE);
}

static int serve_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int serve_usage_error(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "viprof serve: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "; see 'viprof serve --help'\n");
	return 2;
}

/* A comma-separated list of user names (option opt) appended to uids[*n], at most max in
 * all. 0, or the usage error's status. */
static int parse_users(const char *opt, const char *arg, uid_t *uids, int *n, int max, const char *hint)
{
	char list[1024], *save = NULL;
	snprintf(list, sizeof(list), "%s", arg);
	for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		struct passwd pw, *pwp = NULL;
		char buf[8192];
		if (getpwnam_r(t, &pw, buf, sizeof(buf), &pwp) != 0 || !pwp)
			return serve_usage_error("%s %s: no such user on this machine", opt, t);
		if (*n >= max)
			return serve_usage_error("%s: at most %d users%s", opt, max, hint);
		uids[(*n)++] = pw.pw_uid;
	}
	return 0;
}

/* A number with an optional unit suffix from units ("smhd" with mult), or -1. */
static long long parse_with_unit(const char *s, const char *units, const long long *mult)
{
	char num[32];
	size_t n = strlen(s);
	if (!n || n >= sizeof(num))
		return -1;
	memcpy(num, s, n + 1);
	long long m = 1;
	const char *u = strchr(units, s[n - 1]);
	if (u && s[n - 1]) {
		m = mult[u - units];
		num[n - 1] = '\0';
	}
	long long v = vp_parse_num(num, 0, (1ll << 62) / m);
	return v < 0 ? -1 : v * m;
}

enum { OPT_HTTP = 256, OPT_TOKEN, OPT_CONT, OPT_INTERVAL, OPT_KEEP_AGE, OPT_KEEP_BYTES, OPT_BUDGET,
       OPT_JVM_ATTACH, OPT_NO_JIT, OPT_TMPDIR, OPT_SOCKET, OPT_MAX_SESSIONS, OPT_MAX_FREQ, OPT_MAX_SECONDS,
       OPT_MAX_BYTES, OPT_MAX_REQUESTS, OPT_ALLOW_GROUP, OPT_ALLOW_USER, OPT_PUSH, OPT_PUSH_QUEUE,
       OPT_PUSH_APP, OPT_OFF_CPU, OPT_PUSH_OWNER };
static const struct option serve_longopts[] = {
	{ "http", required_argument, NULL, OPT_HTTP },
	{ "http-token", required_argument, NULL, OPT_TOKEN },
	{ "http-allow-group", required_argument, NULL, OPT_ALLOW_GROUP },
	{ "http-allow-user", required_argument, NULL, OPT_ALLOW_USER },
	{ "continuous", required_argument, NULL, OPT_CONT },
	{ "interval", required_argument, NULL, OPT_INTERVAL },
	{ "keep-age", required_argument, NULL, OPT_KEEP_AGE },
	{ "keep-bytes", required_argument, NULL, OPT_KEEP_BYTES },
	{ "cpu-budget", required_argument, NULL, OPT_BUDGET },
	{ "freq", required_argument, NULL, 'F' },
	{ "jvm-attach", required_argument, NULL, OPT_JVM_ATTACH },
	{ "no-jit", no_argument, NULL, OPT_NO_JIT },
	{ "off-cpu", no_argument, NULL, OPT_OFF_CPU },
	{ "tmpdir", required_argument, NULL, OPT_TMPDIR },
	{ "push", required_argument, NULL, OPT_PUSH },
	{ "push-queue", required_argument, NULL, OPT_PUSH_QUEUE },
	{ "push-app", required_argument, NULL, OPT_PUSH_APP },
	{ "push-owner", required_argument, NULL, OPT_PUSH_OWNER },
	{ "socket", required_argument, NULL, OPT_SOCKET },
	{ "max-sessions", required_argument, NULL, OPT_MAX_SESSIONS },
	{ "max-freq", required_argument, NULL, OPT_MAX_FREQ },
	{ "max-seconds", required_argument, NULL, OPT_MAX_SECONDS },
	{ "max-bytes", required_argument, NULL, OPT_MAX_BYTES },
	{ "max-requests", required_argument, NULL, OPT_MAX_REQUESTS },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};
static const long long tmult[] = { 1, 60, 3600, 86400 }, bmult[] = { 1ll << 10, 1ll << 20, 1ll << 30 };

/* The per-group option parsers below return 0 when they took option c, the exit status
 * (2) after printing a usage error, or NOT_MINE when c belongs to another group. */
#define NOT_MINE (-1)

/* The HTTP endpoint and who may use it. */
static int parse_http_opt(int c, const char *arg, struct serve_args *a)
{
	switch (c) {
	case OPT_HTTP: a->http = arg; return 0;
	case OPT_TOKEN: a->http_token = arg; return 0;
	case OPT_ALLOW_GROUP: {
		struct group gr, *grp = NULL;
		char buf[8192];
		if (getgrnam_r(arg, &gr, buf, sizeof(buf), &grp) != 0 || !grp)
			return serve_usage_error("--http-allow-group %s: no such group on this machine "
						 "(groupadd it, or name another)", arg);
		a->allow.gid = gr.gr_gid;
		a->allow.group = true;
		a->allow_group = arg;
		return 0;
	}
	case OPT_ALLOW_USER:
		return parse_users("--http-allow-user", arg, a->allow.uids, &a->allow.nuids, VP_HTTP_MAX_ALLOW,
				   " (name a group with --http-allow-group instead)");
	}
	return NOT_MINE;
}

/* The continuous recording: where, how often, how much is kept, what it costs. */
static int parse_continuous_opt(int c, const char *arg, struct serve_args *a)
{
	long long v;

	switch (c) {
	case OPT_CONT:
		if (!*arg)
			return serve_usage_error("--continuous needs a directory");
		a->continuous = arg;
		return 0;
	case OPT_INTERVAL:
		if ((v = vp_parse_num(arg, 2, 86400)) < 0)
			return serve_usage_error("--interval '%s': expected whole seconds from 2 to 86400", arg);
		a->interval_s = (unsigned)v;
		return 0;
	case OPT_KEEP_AGE:
		if ((v = parse_with_unit(arg, "smhd", tmult)) < 0)
			return serve_usage_error("--keep-age '%s': expected a duration such as 3600, 90m, 24h or 7d", arg);
		a->keep_age_s = (uint64_t)v;
		return 0;
	case OPT_KEEP_BYTES:
		if ((v = parse_with_unit(arg, "KMG", bmult)) < 0)
			return serve_usage_error("--keep-bytes '%s': expected a size such as 500M or 10G", arg);
		a->keep_bytes = (uint64_t)v;
		return 0;
	case OPT_BUDGET: {
		char *end;
		errno = 0;
		double d = strtod(arg, &end);
		if (errno || *end || !*arg || !(d >= 0 && d <= 100))
			return serve_usage_error("--cpu-budget '%s': expected a percentage of one CPU from 0 to 100 "
						 "(e.g. 1.5)", arg);
		a->cpu_budget = d;
		return 0;
	}
	case 'F':
		if ((v = vp_parse_num(arg, VP_CONT_MIN_FREQ, 10000)) < 0)
			return serve_usage_error("--freq '%s': expected a rate in Hz from %d to 10000", arg,
						 VP_CONT_MIN_FREQ);
		a->freq = (uint64_t)v;
		return 0;
	case OPT_JVM_ATTACH: a->jvm_attach = arg; return 0;
	case OPT_NO_JIT: a->no_jit = true; return 0;
	case OPT_OFF_CPU: a->off_cpu = true; return 0;
	case OPT_TMPDIR: a->tmpdir = arg; return 0;
	}
	return NOT_MINE;
}

/* Pushing the intervals to Pyroscope. */
static int parse_push_opt(int c, const char *arg, struct serve_args *a)
{
	long long v;

	switch (c) {
	case OPT_PUSH: {
		char perr[768];
		if (a->npush == VP_PUSH_MAX)
			return serve_usage_error("--push: at most %d targets", VP_PUSH_MAX);
		if (vp_push__parse(arg, &a->push[a->npush], perr, sizeof(perr)))
			return serve_usage_error("%s", perr);
		a->npush++;
		return 0;
	}
	case OPT_PUSH_QUEUE:
		if ((v = vp_parse_num(arg, 1, 1000000)) < 0)
			return serve_usage_error("--push-queue %s: expected a number of intervals from 1 to 1000000",
						 arg);
		a->push_queue = (unsigned)v;
		return 0;
	case OPT_PUSH_OWNER:
		return parse_users("--push-owner", arg, a->push_owners, &a->npush_owners, VP_PUSH_MAX_OWNERS, "");
	case OPT_PUSH_APP:
		/* It goes into URLs and Pyroscope's name syntax unescaped: keep it plain. */
		if (!*arg || strspn(arg, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
				    strlen(arg) || strlen(arg) > 100)
			return serve_usage_error("--push-app %s: letters, digits, '.', '_' and '-' only", arg);
		a->push_app = arg;
		return 0;
	}
	return NOT_MINE;
}

/* The socket that users record through, and its limits per user. */
static int parse_socket_opt(int c, const char *arg, struct serve_args *a)
{
	long long v;

	switch (c) {
	case OPT_SOCKET:
		if (!*arg)
			return serve_usage_error("--socket needs a path");
		a->socket = arg;
		return 0;
	case OPT_MAX_SESSIONS:
		if ((v = vp_parse_num(arg, 1, 1000)) < 0)
			return serve_usage_error("--max-sessions '%s': expected 1 to 1000 recordings per user", arg);
		a->limits.sessions = (unsigned)v;
		return 0;
	case OPT_MAX_FREQ:
		if ((v = vp_parse_num(arg, 1, 100000)) < 0)
			return serve_usage_error("--max-freq '%s': expected 1 to 100000 Hz", arg);
		a->limits.max_freq = (uint64_t)v;
		return 0;
	case OPT_MAX_SECONDS:
		if ((v = parse_with_unit(arg, "smhd", tmult)) <= 0)
			return serve_usage_error("--max-seconds '%s': expected a duration such as 600, 10m or 1h", arg);
		a->limits.max_seconds = (double)v;
		return 0;
	case OPT_MAX_BYTES:
		if ((v = parse_with_unit(arg, "KMG", bmult)) <= 0)
			return serve_usage_error("--max-bytes '%s': expected a size such as 500M or 10G", arg);
		a->limits.max_bytes = (uint64_t)v;
		return 0;
	case OPT_MAX_REQUESTS:
		if ((v = vp_parse_num(arg, 1, 100000)) < 0)
			return serve_usage_error("--max-requests '%s': expected 1 to 100000 requests per minute", arg);
		a->limits.requests_per_min = (unsigned)v;
		return 0;
	}
	return NOT_MINE;
}

/* The options that each parse alone but need another. */
static int serve_check(int argc, char **argv, const struct serve_args *a)
{
	if (optind < argc)
		return serve_usage_error("unexpected argument '%s'", argv[optind]);
	if (a->http_token && !a->http)
		return serve_usage_error("--http-token without --http");
	if (a->off_cpu && !a->continuous)
		return serve_usage_error("--off-cpu is for the recording of --continuous DIR: give that too");
	if (a->npush && !a->continuous)
		return serve_usage_error("--push sends the intervals of --continuous DIR: give that too");
	if (a->npush_owners && !a->npush)
		return serve_usage_error("--push-owner without --push");
	if ((a->allow_group || a->allow.nuids) && !a->http)
		return serve_usage_error("--http-allow-group/--http-allow-user without --http");
	return 0;
}

static int serve_parse(int argc, char **argv, struct serve_args *a, bool *help)
{
	int c, ret;
	*help = false;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":F:h", serve_longopts, NULL)) != -1) {
		if (c == 'h') {
			*help = true;
			return 0;
		}
		if (c == ':')
			return serve_usage_error("option '%s' needs a value", argv[optind - 1]);
		ret = parse_http_opt(c, optarg, a);
		if (ret == NOT_MINE)
			ret = parse_continuous_opt(c, optarg, a);
		if (ret == NOT_MINE)
			ret = parse_push_opt(c, optarg, a);
		if (ret == NOT_MINE)
			ret = parse_socket_opt(c, optarg, a);
		if (ret == NOT_MINE)
			return serve_usage_error("unknown option '%s'", argv[optind - 1]);
		if (ret)
			return ret;
	}
	return serve_check(argc, argv, a);
}

static volatile sig_atomic_t serve_stop;
static int stop_pipe[2] = { -1, -1 };   /* the handler's byte wakes the main thread */

static void on_stop(int sig)
{
	int e = errno;
	serve_stop = sig;
	if (stop_pipe[1] >= 0 && write(stop_pipe[1], "", 1) < 0) {
		/* Full (signals before the main thread read): it wakes already. */
	}
	errno = e;
}

int cmd_serve(int argc, char **argv)
{
	struct serve_args a;
	bool help;
	char err[1024] = "";
	serve_defaults(&a);
	int ret = serve_parse(argc, argv, &a, &help);
	if (ret)
		return ret;
	if (help) {
		serve_usage(stdout);
		return 0;
	}
	/* --jvm-attach is read by record's own parser, so both take the same values; -a
	 * stands for the service's whole-VM target, which that parser wants named. The
	 * service's default is none: root loads code into no user's JVM unless the
	 * administrator names which (on a shared machine, other users' JVMs are theirs). */
	struct vp_record_opts jvm;
	vp_record_opts__defaults(&jvm);
	/* -a: record's parser wants a target; the service's is the whole VM. In this frame,
	 * not a block's: the parser may keep pointers into its argv (a launch's command), and
	 * jvm lives as long as the service. */
	char *jargv[] = { "record", "-a", "--jvm-attach", (char *)(a.jvm_attach ? a.jvm_attach : "none"), NULL };
	optind = 0;
	if (record_opts__parse(&jvm, 4, jargv, err, sizeof(err)))
		return serve_usage_error("%s", err);
	/* Found once, before any thread: the session loader asks for it too (to name a
	 * container's removed agent copy), from the threads that serve reports. */
	const char *found_agent = viprof_agent_path();
	const char *agent = a.no_jit ? NULL : found_agent;
	struct vp_cont *cont = NULL;
	struct vp_api *api = NULL;
	struct vp_sock *sock = NULL;
	struct vp_push *push = NULL;
	struct vp_svc_metrics metrics;
	vp_svc_metrics__init(&metrics);
	setvbuf(stderr, NULL, _IOLBF, 0);
	/* Confined to a bounding set (the unit file): each capability it lacks, named. */
	vp_svc_caps__check(stderr);
	/* Any thread may take the signal (blocking it in the service's threads would
	 * block it in the recorders they start too: a mask survives fork and exec), so
	 * the handler writes a byte that the main thread waits for: no wake-up while
	 * nothing happens (looking at the flag every 200 ms was five a second, for days). */
	if (pipe2(stop_pipe, O_CLOEXEC | O_NONBLOCK)) {
		fprintf(stderr, "viprof serve: cannot create the stop pipe: %s\n", strerror(errno));
		return 1;
	}
	struct sigaction sa = { .sa_handler = on_stop };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	ret = 1;
	/* The continuous recording runs always: it samples at the fleet profilers' rate. A
	 * profile request is a short look: Go's pprof rate. */
	uint64_t cont_freq = a.freq ? a.freq : VP_CONT_DEFAULT_FREQ;
	uint64_t pprof_freq = a.freq ? a.freq : SERVE_PPROF_FREQ;
	if (a.continuous) {
		struct vp_cont_opts co = { .dir = a.continuous, .interval_s = a.interval_s,
					   .keep_age_s = a.keep_age_s, .keep_bytes = a.keep_bytes,
					   .cpu_budget_pct = a.cpu_budget, .freq = cont_freq, .jvm = &jvm,
					   .agent = agent, .no_jit = a.no_jit, .off_cpu = a.off_cpu, .metrics = &metrics,
					   .log = stderr };
		cont = vp_cont__start(&co, err, sizeof(err));
		if (!cont) {
			fprintf(stderr, "viprof serve: %s\n", err);
			goto cleanup;
		}
		fprintf(stderr, "viprof serve: continuous recording in %s: %u s intervals at %llu Hz, CPU budget %.2f%% of "
				"one CPU, keeping %llu s and %llu MiB%s\n", a.continuous, a.interval_s,
			(unsigned long long)cont_freq, a.cpu_budget, (unsigned long long)a.keep_age_s,
			(unsigned long long)(a.keep_bytes >> 20), a.off_cpu ? ", with off-CPU time" : "");
		if (a.npush) {
			/* The pusher copies what po points to (the hostname it asks for itself): a
			 * buffer of this block, as it once was, is gone when its thread reads it. */
			struct vp_push_opts po = { .targets = a.push, .ntargets = a.npush, .dirfd = vp_cont__dirfd(cont),
						   .queue_max = a.push_queue, .interval_s = a.interval_s,
						   .app = a.push_app, .owners = a.push_owners, .nowners = a.npush_owners,
						   .metrics = &metrics, .log = stderr };
			push = vp_push__start(&po, err, sizeof(err));
			if (!push) {
				fprintf(stderr, "viprof serve: %s\n", err);
				goto cleanup;
			}
			vp_cont__on_ended(cont, push_interval, push);
			for (int i = 0; i < a.npush; i++)
				fprintf(stderr, "viprof serve: pushing each interval to %s (%s%s%s), queue of %u intervals\n",
					a.push[i].url, a.push[i].kind == VP_PUSH_OTLP ? "OTLP Profiles" : a.push[i].kind == VP_PUSH_CLICKHOUSE ? "ClickHouse fleet store" : "Pyroscope ingest",
					a.push[i].scheme == VP_PUSH_HTTPS ? ", TLS" : "",
					a.push[i].auth[0] ? ", with credentials" : "", a.push_queue);
		}
	}
	if (a.http) {
		struct vp_api_opts ao = { .listen = a.http, .token_file = a.http_token, .allow = a.allow, .freq = pprof_freq,
					  .jvm = &jvm, .agent = agent, .no_jit = a.no_jit, .tmpdir = a.tmpdir,
					  .cont = cont, .cont_dir = a.continuous, .interval_s = a.interval_s,
					  .cpu_budget_pct = a.cpu_budget, .metrics = &metrics, .log = stderr };
		api = vp_api__start(&ao, err, sizeof(err));
		if (!api) {
			fprintf(stderr, "viprof serve: %s\n", err);
			goto cleanup;
		}
		fprintf(stderr, "viprof serve: pprof over HTTP on %s (port %d)%s; without a token: root%s%s%s\n", a.http,
			vp_api__port(api), a.http_token ? ", other hosts with the bearer token" : ", loopback only",
			a.allow.nuids ? ", --http-allow-user" : "", a.allow_group ? ", group " : "",
			a.allow_group ? a.allow_group : "");
	}
	/* Said once the services are up, so that a refusal at start stays one line. */
	if (a.continuous || a.http)
		fprintf(stderr, "viprof serve: whole-VM recordings load the JVM agent into %s%s\n",
			a.no_jit ? "no JVM (--no-jit)" : a.jvm_attach ? "the JVMs of --jvm-attach " : "no JVM",
			a.no_jit ? "" : a.jvm_attach ? a.jvm_attach : " (the default; --jvm-attach all|user:NAME,..|PID,.. "
			"names JIT frames)");
	/* The socket for users: asked for, or what a plain 'viprof serve' (the unit file) does. */
	if (a.socket || (!a.http && !a.continuous)) {
		struct vp_sock_opts so = { .path = a.socket ? a.socket : VP_SOCK_DEFAULT, .limits = a.limits,
					   .agent = a.no_jit || (a.jvm_attach && !strcmp(a.jvm_attach, "none")) ? NULL
						    : viprof_agent_path(), .log = stderr };
		sock = vp_sock__start(&so, err, sizeof(err));
		if (!sock) {
			fprintf(stderr, "viprof serve: %s\n", err);
			goto cleanup;
		}
		fprintf(stderr, "viprof serve: recordings for users on %s (per user: %u at once, %u requests a minute, "
				"at most %llu Hz, %.0f s, %llu MiB)\n", so.path, a.limits.sessions, a.limits.requests_per_min,
			(unsigned long long)a.limits.max_freq, a.limits.max_seconds,
			(unsigned long long)(a.limits.max_bytes >> 20));
	}
	while (!serve_stop) {
		struct pollfd pf = { .fd = stop_pipe[0], .events = POLLIN };
		if (poll(&pf, 1, -1) < 0 && errno != EINTR)
			break;
	}
	fprintf(stderr, "viprof serve: stopping (%s)\n", strsignal(serve_stop));
	ret = 0;
cleanup:
	vp_jvm__abort_all();   /* no recorder's stop waits for a JVM's user */
	vp_sock__stop(sock);
	vp_api__stop(api);
	/* The recording first: its last interval is handed to the pusher, which queues it
	 * on disk as it stops. */
	vp_cont__stop(cont);
	vp_push__stop(push);
	explicit_bzero(a.push, sizeof(a.push));
	vp_svc_metrics__fini(&metrics);
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	for (int i = 0; i < 2; i++) {
		if (stop_pipe[i] >= 0)
			close(stop_pipe[i]);
		stop_pipe[i] = -1;
	}
	return ret;
}
