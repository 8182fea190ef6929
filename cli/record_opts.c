/* 'viprof record' option parsing: see cli/record_opts.h. */
#define _GNU_SOURCE
#include "cli/record_opts.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <pwd.h>
#include <sys/stat.h>

#include "common/util.h"
#include "recorder/jvm_find.h"

void record_opts__usage(FILE *f)
{
	fprintf(f,
		"usage: viprof record [options] [-a | -p PID[,PID..] | [--] CMD [ARGS...]]\n"
		"\n"
		"Samples the target and writes a session directory for 'viprof report'.\n"
		"\n"
		"  -e, --event EV[,EV..]  events to sample (perf names, e.g. cycles, cpu-clock,\n"
		"                         page-faults, or raw rNNNN); default: cycles where this\n"
		"                         machine counts them, else cpu-clock (see 'viprof probe');\n"
		"                         EV/period=N/ or EV/freq=N/ sets that event's own rate;\n"
		"                         alloc: the JVMs' allocations (JVMTI sampling every 512 KiB,\n"
		"                         alloc/period=BYTES/ to change), as event alloc;\n"
		"                         lock: their contended monitors and java.util.concurrent\n"
		"                         waits of 10 us or more (lock/period=NS/), as event lock\n"
		"                         (running JVMs too, -p or -a; see docs/java.md)\n"
		"  -F, --freq HZ          samples per second per CPU (default %d: odd, so it does\n"
		"                         not beat with 1000 Hz timers), at most %d\n"
		"  -c, --count N          sample every N events (ns for cpu-clock); not with -F\n"
		"  -g, --call-graph       record kernel and user call stacks\n"
		"      --stack-walk MODE  how -g walks user stacks: tables (default: unwind rules from\n"
		"                         .eh_frame and HotSpot's frame layout, no frame pointers\n"
		"                         needed; bpf backend) or fp (frame pointers only; launched\n"
		"                         JVMs then get -XX:+PreserveFramePointer)\n"
		"  -a, --all-cpus         every process on every CPU\n"
		"  -p, --pid PID[,PID..]  these running processes (and what they fork); a JVM also by\n"
		"                         its main class or jar as 'jps -l' shows it (-p Shop,\n"
		"                         -p com.example.Shop, -p app.jar), when exactly one matches\n"
		"  -d, --duration TIME    stop after TIME: seconds, or 500ms, 30s, 5m, 1h (default: when\n"
		"                         CMD exits, or Ctrl-C)\n"
		"  -o, --output DIR       session directory (default %s)\n"
		"      --force            replace a non-empty DIR (the old one is kept as DIR.old)\n"
		"      --backend NAME     auto (default: bpf, else perf), bpf or perf\n"
		"      --no-jit           do not load the JVM agent into Java processes\n"
		"      --jvm-attach WHO   which running JVMs get the agent (-a, -p): all (default;\n"
		"                         with -a that is every user's JVMs), none, user:NAME[,..]\n"
		"                         (names or uids), or PID[,PID..]; a JVM started with\n"
		"                         VIPROF_NO_AGENT=1 in its environment never gets it\n"
		"      --off-cpu          also record where threads wait: event off-cpu (ns), the\n"
		"                         time each thread spent blocked (sleep, I/O, lock) or\n"
		"                         runnable on the run queue, under its stack at switch-out\n"
		"                         (needs BPF and BTF; see 'viprof report --wall')\n"
		"      --no-steal-estimate  do not estimate the host's share from late sampler timers\n"
		"                         (event hypervisor-estimated, on by default with a clock\n"
		"                         event and the bpf backend; see docs/hypervisor.md)\n"
		"      --xen-pmu-mode M   in a Xen dom0: set /sys/hypervisor/pmu/pmu_mode to off, self,\n"
		"                         hv (also sample Xen) or all (also other domains) first\n"
		"  -q, --quiet            no live status line and no progress or summary lines;\n"
		"                         warnings that bear on the results are still printed\n"
		"  -h, --help             this text\n"
		"\n"
		"examples:\n"
		"  viprof record -g -- java -jar app.jar        launch and profile a JVM\n"
		"  viprof record -F 4000 -g -p 1234 -d 30       a running process for 30 s\n"
		"  viprof record -g -p com.example.Shop -d 30   the running JVM whose main class it is\n"
		"  viprof record -a -e page-faults -c 1 -d 5    every page fault, system-wide\n"
		"  viprof record -o run1 --force -- ./bench     replace run1 (old kept as run1.old)\n"
		"  viprof record -g --off-cpu -- ./server       on-CPU, off-CPU and steal: wall time\n",
		RECORD_DEFAULT_FREQ, RECORD_MAX_FREQ, RECORD_DEFAULT_DIR);
}

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vp_vset_err(err, errlen, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static int parse_pids(struct vp_record_opts *o, const char *arg, char *err, size_t errlen)
{
	char *copy = strdup(arg), *save = NULL;
	int ret = 0;
	if (!copy)
		return -ENOMEM;
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		long long pid = vp_parse_num(tok, 0, 4194304);   /* PID_MAX_LIMIT */
		if (pid < 0 && !isdigit((unsigned char)tok[0]) && tok[0] != '-') {
			/* A JVM by its main class or jar, as async-profiler takes it. */
			pid_t found;
			char why[1024];
			if (vp_jvm__find(tok, &found, why, sizeof(why))) {
				ret = fail(err, errlen, "-p %s: %s", tok, why);
				goto out;
			}
			pid = found;
		}
		if (pid <= 0) {
			ret = fail(err, errlen, "-p %s: '%s' is not a process id (a number from 1 to 4194304) or a JVM's main class or jar",
				   arg, tok);
			goto out;
		}
		char path[64];
		struct stat st;
		snprintf(path, sizeof(path), "/proc/%lld", pid);
		if (stat(path, &st) != 0) {
			vp_err_no_process(err, errlen, (long)pid);
			ret = -EINVAL;
			goto out;
		}
		if (o->npids == RECORD_MAX_PIDS) {
			ret = fail(err, errlen, "-p: at most %d processes", RECORD_MAX_PIDS);
			goto out;
		}
		o->pids[o->npids++] = (pid_t)pid;
	}
	if (!o->npids)
		ret = fail(err, errlen, "-p needs a process id, e.g. -p 1234 or -p 1234,5678");
out:
	free(copy);
	return ret;
}

/* --jvm-attach all | none | user:NAME[,NAME..] | PID[,PID..] */
static int parse_jvm_attach(struct vp_record_opts *o, const char *arg, char *err, size_t errlen)
{
	char buf[1024];
	bool users = !strncmp(arg, "user:", 5);

	o->jvm_attach_given = true;
	o->jvm_n = 0;
	if (!strcmp(arg, "all")) {
		o->jvm_attach = RECORD_JVM_ALL;
		return 0;
	}
	if (!strcmp(arg, "none")) {
		o->jvm_attach = RECORD_JVM_NONE;
		return 0;
	}
	snprintf(buf, sizeof(buf), "%s", users ? arg + 5 : arg);
	o->jvm_attach = users ? RECORD_JVM_UIDS : RECORD_JVM_PIDS;
	char *save = NULL;
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		char *end;
		long v;
		if (o->jvm_n >= RECORD_MAX_PIDS)
			return fail(err, errlen, "--jvm-attach: at most %d entries", RECORD_MAX_PIDS);
		errno = 0;
		v = strtol(t, &end, 10);
		if (users) {
			if (*end || end == t || errno || v < 0) {
				struct passwd *pw = getpwnam(t);
				if (!pw)
					return fail(err, errlen, "--jvm-attach user:%s: no such user on this machine", t);
				v = (long)pw->pw_uid;
			}
			o->jvm_uids[o->jvm_n++] = (uid_t)v;
		} else {
			if (*end || end == t || errno || v <= 0 || v > INT_MAX)
				return fail(err, errlen, "--jvm-attach %s: takes all, none, user:NAME[,..] or PID[,PID..]", arg);
			o->jvm_pids[o->jvm_n++] = (pid_t)v;
		}
	}
	if (!o->jvm_n)
		return fail(err, errlen, "--jvm-attach %s: takes all, none, user:NAME[,..] or PID[,PID..]", arg);
	return 0;
}

/* -e alloc[/period=BYTES/] is the JVM agent's allocation sampling (JVMTI
 * SampledObjectAlloc) and -e lock[/period=NS/] its contended-lock recording, not perf
 * events: they are taken out of the list (what is left, or the default event when
 * nothing is, is sampled as usual) into o->alloc_bytes, o->lock and o->lock_ns. */
static int take_alloc(struct vp_record_opts *o, char *err, size_t errlen)
{
	static char rest[4096];
	char copy[4096];
	size_t n = 0;
	if (strlen(o->events) >= sizeof(copy))
		return 0;   /* the event parser names what is wrong with a list that long */
	snprintf(copy, sizeof(copy), "%s", o->events);
	rest[0] = '\0';
	for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (!strcmp(tok, "lock") || !strncmp(tok, "lock/", 5)) {
			o->lock = true;
			o->lock_ns = 10000;   /* async-profiler's default threshold: 10 us */
			if (tok[4] == '/') {
				long long v = -1;
				char term[8] = "";
				if (sscanf(tok + 5, "period=%lld%7s", &v, term) != 2 || strcmp(term, "/") || v < 0)
					return fail(err, errlen, "-e %s: expected lock or lock/period=NS/ (record waits of at least NS nanoseconds, e.g. lock/period=1000/)", tok);
				o->lock_ns = (uint64_t)v;
			}
			continue;
		}
		if (strcmp(tok, "alloc") && strncmp(tok, "alloc/", 6)) {
			n += (size_t)snprintf(rest + n, sizeof(rest) - n, "%s%s", n ? "," : "", tok);
			continue;
		}
		o->alloc_bytes = 512 * 1024;   /* async-profiler's default interval */
		if (tok[5] == '/') {
			long long v = -1;
			char term[8] = "";
			if (sscanf(tok + 6, "period=%lld%7s", &v, term) != 2 || strcmp(term, "/") || v <= 0 || v > INT32_MAX)
				return fail(err, errlen, "-e %s: expected alloc or alloc/period=BYTES/ (the mean bytes between two sampled allocations, e.g. alloc/period=524288/)", tok);
			o->alloc_bytes = (uint64_t)v;
		}
	}
	o->events = n ? rest : NULL;
	return 0;
}

enum { OPT_FORCE = 256, OPT_BACKEND, OPT_NO_JIT, OPT_XEN_PMU_MODE, OPT_STACK_WALK, OPT_OFF_CPU, OPT_JVM_ATTACH,
       OPT_NO_STEAL_EST };
static const struct option record_longopts[] = {
	{ "event", required_argument, NULL, 'e' },
	{ "freq", required_argument, NULL, 'F' },
	{ "count", required_argument, NULL, 'c' },
	{ "call-graph", no_argument, NULL, 'g' },
	{ "all-cpus", no_argument, NULL, 'a' },
	{ "pid", required_argument, NULL, 'p' },
	{ "duration", required_argument, NULL, 'd' },
	{ "output", required_argument, NULL, 'o' },
	{ "force", no_argument, NULL, OPT_FORCE },
	{ "backend", required_argument, NULL, OPT_BACKEND },
	{ "no-jit", no_argument, NULL, OPT_NO_JIT },
	{ "jvm-attach", required_argument, NULL, OPT_JVM_ATTACH },
	{ "off-cpu", no_argument, NULL, OPT_OFF_CPU },
	{ "no-steal-estimate", no_argument, NULL, OPT_NO_STEAL_EST },
	{ "stack-walk", required_argument, NULL, OPT_STACK_WALK },
	{ "xen-pmu-mode", required_argument, NULL, OPT_XEN_PMU_MODE },
	{ "quiet", no_argument, NULL, 'q' },
	{ "help", no_argument, NULL, 'h' },
	{ 0 },
};

/* After the options: one target (-a, -p or a command), and the options that each parse
 * alone but have no meaning together. */
static int check_target(struct vp_record_opts *o, int argc, char **argv, bool have_freq, bool have_all,
			bool have_pids, char *err, size_t errlen)
{
	int ret;
	if (have_freq && o->period)
		return fail(err, errlen, "-F and -c exclude each other: sample by frequency (-F HZ) or every N events (-c N)");
	if (o->events && (ret = take_alloc(o, err, errlen)))
		return ret;
	bool have_cmd = optind < argc;
	if (have_all + have_pids + have_cmd > 1)
		return fail(err, errlen, "choose one target: -a, -p PID, or -- CMD");
	if (!have_all && !have_pids && !have_cmd)
		return fail(err, errlen, "nothing to record: give -a, -p PID, or -- CMD; see 'viprof record --help'");
	if (have_all)
		o->target = RECORD_TARGET_ALL;
	else if (have_pids)
		o->target = RECORD_TARGET_PIDS;
	else {
		o->target = RECORD_TARGET_LAUNCH;
		o->cmd = argv + optind;
	}
	if (o->period)
		o->freq = 0;
	/* On -p and -a the agent goes into running JVMs by attach, with the session's alloc=
	 * and locks= (issue 25); --jvm-attach none would leave nothing to record them. */
	if ((o->alloc_bytes || o->lock) && o->target != RECORD_TARGET_LAUNCH && o->jvm_attach == RECORD_JVM_NONE)
		return fail(err, errlen, "-e %s needs the JVM agent in the running JVMs, which --jvm-attach none keeps out; "
			    "leave --jvm-attach none out, or name the JVMs (--jvm-attach PID,..)", o->alloc_bytes ? "alloc" : "lock");
	if ((o->alloc_bytes || o->lock) && o->no_jit)
		return fail(err, errlen, "-e alloc and -e lock need the JVM agent, which --no-jit turns off");
	return 0;
}

int record_opts__parse(struct vp_record_opts *o, int argc, char **argv, char *err, size_t errlen)
{
	bool have_freq = false, have_all = false, have_pids = false;
	int c, ret;
	long long v;

	optind = 0;   /* full reinitialization: we may be called more than once */
	opterr = 0;   /* our own one-line messages instead of getopt's */
	/* '+': stop at the first non-option, so CMD's own options stay CMD's. */
	while ((c = getopt_long(argc, argv, "+:e:F:c:gap:d:o:qh", record_longopts, NULL)) != -1) {
		switch (c) {
		case 'e':
			if (!*optarg)
				return fail(err, errlen, "-e needs an event list, e.g. -e cpu-clock");
			o->events = optarg;
			break;
		case 'F':
			v = vp_parse_num(optarg, 0, RECORD_MAX_FREQ);
			if (v <= 0)
				return fail(err, errlen, "-F %s: the frequency must be a whole number from 1 to %d (samples/s)",
					    optarg, RECORD_MAX_FREQ);
			o->freq = (uint64_t)v;
			have_freq = true;
			break;
		case 'c':
			v = vp_parse_num(optarg, 0, 1ll << 62);
			if (v <= 0)
				return fail(err, errlen, "-c %s: the period must be a positive whole number of events", optarg);
			o->period = (uint64_t)v;
			break;
		case 'g':
			o->callchain = true;
			break;
		case 'a':
			have_all = true;
			break;
		case 'p':
			if ((ret = parse_pids(o, optarg, err, errlen)))
				return ret;
			have_pids = true;
			break;
		case 'd': {
			double d = vp_parse_duration(optarg);
			if (!(d > 0) || d > 31 * 86400.0)
				return fail(err, errlen, "-d %s: the duration must be positive: seconds, or with a unit (500ms, "
					    "30s, 5m, 1h)", optarg);
			o->duration = d;
			break;
		}
		case 'o':
			if (!*optarg)
				return fail(err, errlen, "-o needs a directory name");
			o->output = optarg;
			break;
		case OPT_FORCE:
			o->force = true;
			break;
		case OPT_BACKEND:
			if (strcmp(optarg, "auto") && strcmp(optarg, "bpf") && strcmp(optarg, "perf"))
				return fail(err, errlen, "--backend %s: must be auto, bpf or perf", optarg);
			o->backend = optarg;
			break;
		case OPT_STACK_WALK:
			if (strcmp(optarg, "tables") && strcmp(optarg, "fp"))
				return fail(err, errlen, "--stack-walk takes 'tables' or 'fp', not '%s'", optarg);
			o->fp_walk = !strcmp(optarg, "fp");
			break;
		case OPT_OFF_CPU:
			o->off_cpu = true;
			break;
		case OPT_NO_STEAL_EST:
			o->no_steal_est = true;
			break;
		case OPT_NO_JIT:
			o->no_jit = true;
			break;
		case OPT_JVM_ATTACH:
			if (parse_jvm_attach(o, optarg, err, errlen))
				return -EINVAL;
			break;
		case OPT_XEN_PMU_MODE:
			if (strcmp(optarg, "off") && strcmp(optarg, "self") && strcmp(optarg, "hv") && strcmp(optarg, "all"))
				return fail(err, errlen, "--xen-pmu-mode %s: must be off, self, hv or all", optarg);
			o->xen_pmu_mode = optarg;
			break;
		case 'q':
			o->quiet = true;
			break;
		case 'h':
			o->help = true;
			return 0;
		case ':':
			if (optopt)
				return fail(err, errlen, "option -%c needs a value; see 'viprof record --help'", optopt);
			return fail(err, errlen, "option '%s' needs a value; see 'viprof record --help'",
				    argv[optind - 1]);
		default:
			if (optopt)
				return fail(err, errlen, "unknown option -%c; see 'viprof record --help'", optopt);
			return fail(err, errlen, "unknown option '%s'; see 'viprof record --help'",
				    argv[optind - 1]);
		}
	}
	return check_target(o, argc, argv, have_freq, have_all, have_pids, err, errlen);
}
