/* viprof record: opens the events, runs a sampler backend, and writes the session
 * directory (common/session_format.h) through the session writer. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/commands.h"
#include "common/launch.h"
#include "common/util.h"
#include "daemon/kallsyms.h"
#include "daemon/procsynth.h"
#include "daemon/record_jvm.h"
#include "daemon/record_opts.h"
#include "daemon/session_writer.h"
#include "daemon/unwinder.h"
#include "hv-glue/events.h"
#include "hv-glue/xen.h"
#include "hv-glue/probe.h"
#include "hv-glue/steal.h"
#include "daemon/offcpu.h"
#include "sampler-kernel/sampler.h"

#ifndef VIPROF_VERSION
#define VIPROF_VERSION "0.0.0"
#endif

#define NSEC 1000000000ull
#define POLL_MS 100
#define STEAL_INTERVAL_NS (100ull * 1000000)
#define FLUSH_INTERVAL_NS NSEC          /* a kill -9 loses at most about this much */
#define STATUS_INTERVAL_NS (500ull * 1000000)
#define MAX_CPUS 4096

static volatile sig_atomic_t stop_signal;
static volatile sig_atomic_t child_exited;   /* a SIGCHLD came since the last reap */
static volatile pid_t launched_child;   /* for the handler: 0 when there is none */

/* The first SIGINT/SIGTERM asks for a clean end (drain, LOST, END, meta.json); a
 * second one exits at once. The stream is flushed every second and its chunks are
 * self-contained, so what was flushed stays readable. Only async-signal-safe calls. */
static void on_signal(int sig)
{
	if (stop_signal) {
		/* The launched command must not outlive its recording unprofiled. */
		if (launched_child > 0)
			kill(launched_child, SIGTERM);
		vp_xen__restore_pmu_mode();   /* _exit skips atexit: leave dom0 as found */
		_exit(128 + sig);
	}
	stop_signal = sig;
}

static void on_sigchld(int sig)
{
	(void)sig;
	child_exited = 1;
}

static uint64_t now_ns(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * NSEC + (uint64_t)ts.tv_nsec;
}

static void join_args(char *buf, size_t len, char **argv, int argc)
{
	size_t off = 0;
	buf[0] = '\0';
	for (int i = 0; (argc < 0 ? argv[i] != NULL : i < argc) && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%s", i ? " " : "", argv[i]);
}

/* A helper for META records from vp_probe__foreach_meta, kept apart from ours by a prefix. */
struct meta_ctx {
	struct vp_session_writer *w;
	int err;
};

static void probe_meta_cb(void *ctx, const char *key, const char *value)
{
	struct meta_ctx *m = ctx;
	char k[160];
	snprintf(k, sizeof(k), "probe.%s", key);
	if (!m->err)
		m->err = vp_session_writer__meta(m->w, k, value);
}

static int exit_code(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return 1;
}

/* The agent options for a launched JVM, appended to what the user already set. */
static char *java_tool_options(const char *session_dir, bool no_jit, bool frame_pointers)
{
	if (no_jit)
		return NULL;
	const char *agent = viprof_agent_path();
	if (!agent || !*agent) {
		fprintf(stderr, "viprof: warning: the JVM agent libviprof-jvmti.so was not found next to viprof; "
				"Java methods will not be named (build it, or set VIPROF_AGENT=/path/to/libviprof-jvmti.so)\n");
		return NULL;
	}
	const char *old = getenv("JAVA_TOOL_OPTIONS");
	char *s = NULL;
	/* The BPF walker steps over compiled Java frames by their frame size, so the JVM
	 * runs as it would in production; only the frame-pointer walk of the perf backend
	 * needs -XX:+PreserveFramePointer (it costs 3-4% here). DebugNonSafepoints makes the
	 * agent's PC-to-line tables precise between safepoints. */
	if (asprintf(&s, "%s%s-agentpath:%s=dir=%s/" VP_SESSION_JIT_DIR
			 "%s -XX:+UnlockDiagnosticVMOptions -XX:+DebugNonSafepoints",
		     old && *old ? old : "", old && *old ? " " : "", agent, session_dir,
		     frame_pointers ? " -XX:+PreserveFramePointer" : "") < 0)
		return NULL;
	return s;
}

struct unwind_start {
	struct vp_unwind_sink *sink;
	const struct record_opts *o;
	const pid_t *pids;
	int npids;
	struct vp_unwinder *u;
	int failed;              /* errno when the unwinder could not start */
};

/* Called by the sampler between loading its program and enabling the events: the
 * tables of processes that already run (-p) are in place before their first sample.
 * record -a loads tables lazily, for the processes that show up in samples. */
static void start_unwinder(void *ctx, const struct sampler_unwind *uwm)
{
	struct unwind_start *us = ctx;

	us->u = vp_unwinder__new(uwm, us->o->target == RECORD_TARGET_ALL);
	if (!us->u) {
		us->failed = errno;
		return;
	}
	us->sink->u = us->u;
	for (int i = 0; i < us->npids; i++)
		vp_unwinder__add_pid(us->u, us->pids[i]);
	/* A launched command is still held: its files' tables are built before it runs. */
	if (us->o->target == RECORD_TARGET_LAUNCH)
		vp_unwinder__prewarm(us->u, us->o->cmd[0]);
	if (us->o->target != RECORD_TARGET_ALL)
		vp_unwinder__settle(us->u, 10000);
}

static const char *target_name(enum record_target t)
{
	switch (t) {
	case RECORD_TARGET_ALL: return "all";
	case RECORD_TARGET_PIDS: return "pids";
	case RECORD_TARGET_LAUNCH: return "launch";
	default: return "none";
	}
}

static int write_metadata(struct vp_session_writer *w, const struct record_opts *o, int argc, char **argv,
			  const char *backend, const char *backend_why, const char *event_why,
			  uint64_t start_mono, uint64_t start_real)
{
	char buf[4096];
	struct utsname u;
	int e = 0;
#define META(k, v) do { if (!e) e = vp_session_writer__meta(w, (k), (v)); } while (0)
	META("version", VIPROF_VERSION);
	if (gethostname(buf, sizeof(buf)) == 0) {
		buf[sizeof(buf) - 1] = '\0';
		META("hostname", buf);
	}
	if (uname(&u) == 0) {
		META("kernel", u.release);
		META("machine", u.machine);
	}
	join_args(buf, sizeof(buf), argv, argc);
	META("cmdline", buf);
	META("target", target_name(o->target));
	if (o->xen_pmu_mode)
		META("xen.pmu_mode", o->xen_pmu_mode);
	if (o->target == RECORD_TARGET_LAUNCH) {
		join_args(buf, sizeof(buf), o->cmd, -1);
		META("command", buf);
	} else if (o->target == RECORD_TARGET_PIDS) {
		size_t off = 0;
		buf[0] = '\0';
		for (int i = 0; i < o->npids && off < sizeof(buf); i++)
			off += (size_t)snprintf(buf + off, sizeof(buf) - off, "%s%d", i ? "," : "", (int)o->pids[i]);
		META("pids", buf);
	}
	META("backend", backend);
	META("backend.why", backend_why);
	if (event_why)
		META("event.why", event_why);
	META("callchain", o->callchain ? "yes" : "no");
	/* How user stacks are walked: the report only blames missing frame pointers for
	 * sessions that depended on them. */
	if (o->callchain)
		META("stack_walk", o->fp_walk || strcmp(backend, "bpf") ? "fp" : "tables");
	META("clock", "CLOCK_MONOTONIC");
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)start_mono);
	META("start_monotonic_ns", buf);
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)start_real);
	META("start_realtime_ns", buf);
	snprintf(buf, sizeof(buf), "%ld", sysconf(_SC_NPROCESSORS_ONLN));
	META("ncpus", buf);
#undef META
	if (e)
		return e;
	struct vp_probe *p = vp_probe__run();
	if (p) {
		struct meta_ctx m = { .w = w };
		vp_probe__foreach_meta(p, probe_meta_cb, &m);
		vp_probe__free(p);
		e = m.err;
	}
	return e;
}

static void print_status(uint64_t elapsed_ns, uint64_t samples, uint64_t lost)
{
	double t = (double)elapsed_ns / 1e9;
	fprintf(stderr, "\rviprof: %6.1f s  %10llu samples  %8llu lost  %8.0f/s   ", t, (unsigned long long)samples,
		(unsigned long long)lost, t > 0 ? (double)samples / t : 0.0);
}

/* Whether err already tells the user how to get the privilege. */
static bool names_privilege_fix(const char *err)
{
	return strstr(err, "paranoid") || strstr(err, "CAP_") || strstr(err, "root");
}

static int steal_snapshot(struct vp_session_writer *w, uint64_t *steal, int max)
{
	int n = vp_steal__read(steal, max);
	if (n <= 0)
		return 0;   /* no steal accounting here: nothing to record, not a failure */
	return vp_session_writer__steal(w, now_ns(CLOCK_MONOTONIC), steal, n);
}

static int read_sysctl_int(const char *path, int dflt)
{
	FILE *f = fopen(path, "re");
	int v = dflt;
	if (f) {
		if (fscanf(f, "%d", &v) != 1)
			v = dflt;
		fclose(f);
	}
	return v;
}

/* The kernel hides kallsyms addresses for two different reasons (kallsyms_show_value):
 * kptr_restrict, and, when that is 0, perf_event_paranoid > 1 for users without
 * CAP_SYSLOG. Name the one that applies, so the suggested fix actually works. */
static void warn_hidden_kallsyms(void)
{
	int kr = read_sysctl_int("/proc/sys/kernel/kptr_restrict", -1);
	int pp = read_sysctl_int("/proc/sys/kernel/perf_event_paranoid", -1);
	const char *fix;
	if (kr >= 2)
		fix = "sysctl kernel.kptr_restrict=0";
	else if (kr == 1)
		fix = "run as root (CAP_SYSLOG), or sysctl kernel.kptr_restrict=0";
	else
		fix = "run as root, or sysctl kernel.perf_event_paranoid=1";
	fprintf(stderr, "viprof: warning: /proc/kallsyms shows every address as 0 to this user (kptr_restrict=%d, "
			"perf_event_paranoid=%d); kernel frames will not be named; fix: %s\n", kr, pp, fix);
}

/* Whether no event can sample the kernel (":u" on every one): kernel symbols are moot. */
static bool user_only(const struct sampler_config *cfg)
{
	for (int i = 0; i < cfg->nr_events; i++)
		if (!cfg->events[i].exclude_kernel)
			return false;
	return cfg->nr_events > 0;
}

/* Whether any of the -p processes still runs: exists (EPERM means it does, as another
 * user's) and is not a zombie waiting for a parent that is not us. */
static bool any_alive(const pid_t *pids, int n)
{
	for (int i = 0; i < n; i++) {
		if (kill(pids[i], 0) != 0 && errno != EPERM)
			continue;
		char path[64], buf[256];
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)pids[i]);
		FILE *f = fopen(path, "re");
		if (!f)
			continue;
		size_t k = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[k] = '\0';
		const char *rp = strrchr(buf, ')');   /* comm may hold spaces and parentheses */
		if (rp && rp[1] == ' ' && rp[2] != 'Z' && rp[2] != 'X')
			return true;
	}
	return false;
}

/* Collects the kernel symbols from the loader thread (waiting for it) and gives them to
 * the session, with the warnings about them; w NULL only joins and frees them. Without a
 * loader (no thread could start) reads them here. */
static void take_kallsyms(struct vp_kallsyms_loader **ksl, struct vp_session_writer *w,
			  const struct sampler_config *cfg)
{
	bool all_zero = false;
	struct vp_kallsyms *ks;

	if (!w) {
		vp_kallsyms__free(vp_kallsyms_loader__join(*ksl, NULL));
		*ksl = NULL;
		return;
	}
	ks = *ksl ? vp_kallsyms_loader__join(*ksl, &all_zero) : vp_kallsyms__load(NULL, &all_zero);
	*ksl = NULL;
	vp_timing("record: kallsyms taken");
	if (!ks)
		fprintf(stderr, "viprof: warning: cannot read /proc/kallsyms (%s); kernel frames will not be named\n",
			strerror(errno));
	else if (all_zero && !user_only(cfg))
		warn_hidden_kallsyms();
	vp_session_writer__set_ksyms(w, ks);
}

int cmd_record(int argc, char **argv)
{
	struct record_opts o;
	struct sampler_config cfg = { 0 };
	char err[1024] = "", why[512] = "", event_why[512] = "";
	struct vp_session_writer *w = NULL;
	const struct sampler_backend *be = NULL;
	struct sampler *s = NULL;
	struct vp_unwind_sink unwind_sink = { 0 };
	struct unwind_start unwind_start = { 0 };
	struct vp_unwinder *uw = NULL;
	uint64_t *steal = NULL;
	struct vp_sched *sched = NULL;
	char *java_opts = NULL;
	pid_t child = 0;
	struct vp_held_child held = { .pid = -1, .go_fd = -1, .exec_fd = -1 };
	int child_status = 0, ret = 1, e;
	bool child_done = false, started = false;

	record_opts__defaults(&o);
	if (record_opts__parse(&o, argc, argv, err, sizeof(err))) {
		fprintf(stderr, "viprof record: %s\n", err);
		return 2;
	}
	if (o.help) {
		record_opts__usage(stdout);
		return 0;
	}

	/* Events: parsed and live-checked before anything is created, so that a typo or
	 * an event this VM cannot count costs nothing but one clear line. */
	if (o.events) {
		int n = vp_events__parse(o.events, cfg.events, VP_MAX_EVENTS, err, sizeof(err));
		if (n < 0) {
			fprintf(stderr, "viprof record: %s\n", err);
			return 2;
		}
		cfg.nr_events = n;
	} else {
		if (vp_events__default(&cfg.events[0], event_why, sizeof(event_why)) != 0) {
			fprintf(stderr, "viprof record: %s\n", event_why[0] ? event_why : "no event can be sampled here");
			return 2;
		}
		cfg.nr_events = 1;
	}
	for (int i = 0; i < cfg.nr_events; i++) {
		/* As in perf, -c/-F set the rate of every event without its own period=/freq= term. */
		if (!cfg.events[i].period && !cfg.events[i].freq) {
			cfg.events[i].freq = o.freq;
			cfg.events[i].period = o.period;
		}
		if (vp_events__check(&cfg.events[i], err, sizeof(err)) != 0) {
			fprintf(stderr, "viprof record: %s\n", err);
			return 2;
		}
	}
	/* Xen decides in dom0 whose samples the PMU interrupt delivers (this domain only,
	 * also the hypervisor, or every domain); set it before any event is opened, and
	 * put the old one back at exit, whatever the exit. */
	if (o.xen_pmu_mode && vp_xen__push_pmu_mode(o.xen_pmu_mode, err, sizeof(err)) != 0) {
		fprintf(stderr, "viprof record: %s\n", err);
		return 2;
	}
	if (!o.events && !o.quiet) {
		if (o.period)
			fprintf(stderr, "viprof: sampling %s every %llu: %s\n", cfg.events[0].name,
				(unsigned long long)o.period, event_why);
		else
			fprintf(stderr, "viprof: sampling %s at %llu Hz: %s\n", cfg.events[0].name,
				(unsigned long long)o.freq, event_why);
	}

	vp_timing("record: options and events checked");
	/* Kernel symbols are read on a thread of their own from here on (the most costly
	 * step of starting: ~60 ms of kernel time), while the sampler loads and the command
	 * runs; the session gets them when they are ready, at the latest at the end. */
	struct vp_kallsyms_loader *ksl = vp_kallsyms_loader__start(NULL);
	w = vp_session_writer__create(o.output, o.force, 0, err, sizeof(err));
	if (!w) {
		take_kallsyms(&ksl, NULL, &cfg);
		fprintf(stderr, "viprof record: %s\n", err);
		return 1;
	}
	if (ksl)
		vp_session_writer__defer_ksyms(w);
	else
		take_kallsyms(&ksl, w, &cfg);   /* no thread: read them here */

	uint64_t start_real = now_ns(CLOCK_REALTIME), start = now_ns(CLOCK_MONOTONIC);
	cfg.callchain = o.callchain;
	cfg.unwind = o.callchain && !o.fp_walk;
	cfg.want_switches = true;   /* steal-time victim attribution needs who ran when */
	cfg.want_sideband = true;
	/* Every record passes the unwinder on its way to the session, so that it learns of
	 * new processes and mappings (it is attached once the sampler has started). */
	unwind_sink.next = vp_session_writer__sink(w);
	cfg.sink = vp_unwind_sink(&unwind_sink);
	unwind_start = (struct unwind_start){ .sink = &unwind_sink, .o = &o };
	cfg.before_sampling = start_unwinder;
	cfg.before_ctx = &unwind_start;
	switch (o.target) {
	case RECORD_TARGET_ALL:
		cfg.target = SAMPLER_TARGET_ALL;
		break;
	case RECORD_TARGET_PIDS:
		cfg.target = SAMPLER_TARGET_PIDS;
		cfg.pids = o.pids;
		cfg.nr_pids = o.npids;
		break;
	default:
		cfg.target = SAMPLER_TARGET_LAUNCH;
		java_opts = java_tool_options(vp_session_writer__dir(w), o.no_jit,
					      o.callchain && (o.fp_walk || !strcmp(o.backend, "perf")));
		/* Orphaned grandchildren are reparented to us, so "the command and its
		 * descendants are done" is simply "no child is left". */
		prctl(PR_SET_CHILD_SUBREAPER, 1);
		/* Held before exec until the sampler watches its pid (released below). */
		struct vp_launch_opts lo = { .env_name = java_opts ? "JAVA_TOOL_OPTIONS" : NULL,
					     .env_value = java_opts, .who = "viprof" };
		if ((e = vp_child__launch(&held, o.cmd, &lo)) < 0) {
			fprintf(stderr, "viprof record: cannot fork for '%s': %s\n", o.cmd[0], strerror(-e));
			child = 0;
			goto cleanup;
		}
		child = held.pid;
		launched_child = child;
		cfg.pids = &child;
		cfg.nr_pids = 1;
		break;
	}

	vp_timing("record: session created, command launched (held)");
	unwind_start.pids = cfg.pids;
	unwind_start.npids = cfg.nr_pids;
	be = sampler__select(o.backend, &cfg, why, sizeof(why));
	if (!be) {
		fprintf(stderr, "viprof record: %s%s%s\n",
			strstr(why, "no sampler backend") ? "" : "no sampler backend can run here: ", why,
			geteuid() != 0 && !names_privilege_fix(why)
				? "; run as root, or grant CAP_PERFMON and CAP_BPF, or lower 'sysctl kernel.perf_event_paranoid'"
				: "");
		goto cleanup;
	}
	e = write_metadata(w, &o, argc, argv, be->name, why, o.events ? NULL : event_why, start, start_real);
	for (int i = 0; !e && i < cfg.nr_events; i++)
		e = vp_session_writer__event(w, &cfg.events[i]);
	if (e) {
		fprintf(stderr, "viprof record: cannot write the session in %s: %s\n", vp_session_writer__dir(w),
			strerror(-e));
		goto cleanup;
	}

	/* A -p target that is gone is refused before anything is recorded. */
	for (int i = 0; o.target == RECORD_TARGET_PIDS && i < o.npids; i++) {
		if (kill(o.pids[i], 0) != 0 && errno == ESRCH) {
			fprintf(stderr, "viprof record: process %d does not exist (or exited before recording started)\n",
				(int)o.pids[i]);
			goto cleanup;
		}
	}

	/* Running JVMs get the agent before sampling starts, so that every sample of their
	 * JIT code falls after the code maps began. */
	if (o.target != RECORD_TARGET_LAUNCH && !o.no_jit) {
		const char *agent = viprof_agent_path();
		if (!agent || !*agent) {
			fprintf(stderr, "viprof: warning: the JVM agent libviprof-jvmti.so was not found next to viprof; "
					"Java methods will not be named (build it, or set VIPROF_AGENT=/path/to/libviprof-jvmti.so)\n");
		} else {
			e = record_jvm__attach(w, o.pids, o.npids, o.target == RECORD_TARGET_ALL, agent, &o);
			if (e < 0) {
				fprintf(stderr, "viprof record: cannot write the session in %s: %s\n",
					vp_session_writer__dir(w), strerror(-e));
				goto cleanup;
			}
		}
	}

	vp_timing("record: backend selected, metadata written");
	struct sigaction sa = { .sa_handler = on_signal };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if (child) {
		/* The command's exit interrupts the poll below (no SA_RESTART: poll and
		 * nanosleep return EINTR), or, when it came before the poll, makes the poll
		 * not wait; so the recording ends when the command does, not up to a poll
		 * period later (that period was half of a short command's cost). */
		struct sigaction sc = { .sa_handler = on_sigchld };
		sigemptyset(&sc.sa_mask);
		sigaction(SIGCHLD, &sc, NULL);
	}

	if (record_sched__start(&cfg, o.off_cpu, o.quiet, &sched, err, sizeof(err))) {
		fprintf(stderr, "viprof record: --off-cpu: %s\n", err);
		goto cleanup;
	}
	s = be->start(&cfg, err, sizeof(err));
	if (!s) {
		fprintf(stderr, "viprof record: %s backend: %s%s\n", be->name, err,
			geteuid() != 0 && !names_privilege_fix(err)
				? "; run as root, or grant CAP_PERFMON and CAP_BPF, or lower 'sysctl kernel.perf_event_paranoid'"
				: "");
		goto cleanup;
	}
	started = true;
	vp_timing("record: sampler started");
	if (unwind_start.failed)
		fprintf(stderr, "viprof: warning: cannot start the stack walker's table loader (%s); "
				"user stacks will follow frame pointers only\n", strerror(unwind_start.failed));
	/* Durations (-d, the status line, END) count from here, not from the setup above. */
	start = now_ns(CLOCK_MONOTONIC);

	/* Processes that already run: their mappings predate any live MMAP event. The scan
	 * comes after the sampler started, so that a process which execs or maps a library
	 * between the scan and the start cannot fall between the two (the loader lets
	 * these synthesized mappings serve samples stamped before them). */
	struct vp_procsynth *ps = vp_procsynth__new();
	e = 0;
	if (!ps) {
		e = -ENOMEM;
	} else if (o.target == RECORD_TARGET_ALL) {
		e = vp_procsynth__all(ps, now_ns(CLOCK_MONOTONIC), &cfg.sink);
		e = e < 0 ? e : 0;
	} else if (o.target == RECORD_TARGET_PIDS) {
		for (int i = 0; i < o.npids && !e; i++) {
			e = vp_procsynth__process(ps, o.pids[i], now_ns(CLOCK_MONOTONIC), &cfg.sink);
			if (e == -ESRCH)
				e = 0;   /* exited since the check: its EXIT comes from the sampler */
		}
	}
	vp_procsynth__free(ps);
	if (e)
		fprintf(stderr, "viprof: warning: cannot read the running processes' mappings (%s); "
				"their native frames will show as [unknown]\n", strerror(-e));
	steal = calloc(MAX_CPUS, sizeof(*steal));
	if (steal)
		steal_snapshot(w, steal, MAX_CPUS);
	vp_timing("record: processes scanned, steal read");
	vp_child__release(&held, NULL);
	vp_timing("record: command released");

	bool tty = isatty(STDERR_FILENO) && !o.quiet;
	uint64_t last_steal = now_ns(CLOCK_MONOTONIC), last_status = 0, last_alive_check = 0, samples = 0, lost = 0;
	uint64_t deadline = o.duration > 0 ? start + (uint64_t)(o.duration * 1e9) : 0;
	bool failed = false;
	while (!stop_signal) {
		int r = be->poll(s, child_exited ? 0 : POLL_MS);
		uint64_t now = now_ns(CLOCK_MONOTONIC);
		if (r < 0 && r != -EINTR) {
			e = vp_session_writer__error(w);
			fprintf(stderr, "%sviprof record: %s\n", tty ? "\n" : "",
				e ? "cannot write the session stream; stopping (what was written stays readable)"
				  : "the sampler failed; stopping (what was recorded stays readable)");
			if (e)
				fprintf(stderr, "viprof record: %s: %s\n", vp_session_writer__dir(w), strerror(-e));
			failed = true;
			break;
		}
		if (record_sched__poll(sched, now) < 0) {
			fprintf(stderr, "%sviprof record: cannot write the switch tracer's records; stopping\n", tty ? "\n" : "");
			failed = true;
			break;
		}
		if (ksl && vp_kallsyms_loader__done(ksl))
			take_kallsyms(&ksl, w, &cfg);
		if (steal && now - last_steal >= STEAL_INTERVAL_NS) {
			steal_snapshot(w, steal, MAX_CPUS);
			last_steal = now;
		}
		if (vp_session_writer__maybe_flush(w, now, FLUSH_INTERVAL_NS)) {
			fprintf(stderr, "%sviprof record: cannot write %s: %s; stopping\n", tty ? "\n" : "",
				vp_session_writer__dir(w), strerror(-vp_session_writer__error(w)));
			failed = true;
			break;
		}
		if (tty && now - last_status >= STATUS_INTERVAL_NS) {
			be->counts(s, &samples, &lost);
			print_status(now - start, samples, lost);
			last_status = now;
		}
		if (deadline && now >= deadline)
			break;
		if (o.target == RECORD_TARGET_PIDS && now - last_alive_check >= STATUS_INTERVAL_NS) {
			last_alive_check = now;
			if (!any_alive(o.pids, o.npids))
				break;   /* like perf: nothing left to profile */
		}
		if (child) {
			/* Reap the command and any orphaned descendant; stop when none is left. */
			int status;
			pid_t p;
			child_exited = 0;   /* before reaping: a later exit sets it again */
			while ((p = waitpid(-1, &status, WNOHANG)) > 0) {
				if (p == child) {
					child_status = status;
					child_done = true;
				}
			}
			if (p < 0 && errno == ECHILD)
				break;
		}
	}
	vp_timing("record: loop left (command exited)");
	if (tty)
		fputc('\n', stderr);

	/* A clean end even when the command still runs (-d, Ctrl-C): stop it, so its exit
	 * status is known and nothing keeps running unprofiled behind the user's back. */
	bool we_stopped_child = false;
	if (child && !child_done && failed && !stop_signal) {
		/* The recording failed (a full disk, a broken sampler): that is no reason to
		 * end the program. It runs to its own end, unprofiled. */
		int status;

		fprintf(stderr, "viprof record: %s (pid %d) keeps running without profiling; waiting for it to exit\n",
			o.cmd[0], (int)child);
		be->stop(s);
		for (;;) {
			pid_t r = waitpid(child, &status, 0);

			if (r == child) {
				child_status = status;
				child_done = true;
				break;
			}
			if ((r < 0 && errno != EINTR) || stop_signal)
				break;   /* Ctrl-C, SIGTERM: the user ends it after all (below) */
		}
	}
	if (child && !child_done) {
		int status;
		kill(child, SIGTERM);
		we_stopped_child = true;
		for (int i = 0; i < 20 && !child_done; i++) {
			if (waitpid(child, &status, WNOHANG) == child) {
				child_status = status;
				child_done = true;
			} else {
				usleep(50000);
			}
		}
	}

	if (be->stop(s) < 0 && !failed) {
		fprintf(stderr, "viprof record: the sampler failed while draining its buffers; the session may miss the last samples\n");
		failed = true;
	}
	if (record_sched__finish(sched, o.quiet) < 0 && !failed) {
		fprintf(stderr, "viprof record: cannot write the switch tracer's last records\n");
		failed = true;
	}
	sched = NULL;
	vp_timing("record: sampler stopped and drained");
	be->counts(s, &samples, &lost);
	uw = unwind_start.u;
	if (uw) {
		struct vp_unwinder_stats us;

		vp_unwinder__stats(uw, &us);
		if (!o.quiet)
			fprintf(stderr, "viprof: stack walker: unwind tables of %llu files (%llu rules, %.0f ms to build), "
					"%llu JVM(s) understood\n", (unsigned long long)us.files,
				(unsigned long long)us.rules, (double)us.parse_ns / 1e6, (unsigned long long)us.jvms);
		if (us.table_full)
			fprintf(stderr, "viprof: warning: %llu files' unwind tables did not fit the walker's maps; "
					"their frames were walked by frame pointer\n", (unsigned long long)us.table_full);
		if (us.jvm_failed)
			fprintf(stderr, "viprof: warning: the walker could not read HotSpot's layout of %llu JVM(s) (%s); "
					"their Java frames need -XX:+PreserveFramePointer\n",
				(unsigned long long)us.jvm_failed, us.jvm_error);
		vp_unwinder__free(uw);
		unwind_start.u = uw = NULL;
	}
	vp_timing("record: stack walker freed");
	if (ksl)
		take_kallsyms(&ksl, w, &cfg);   /* the samples' KSYM records go in before END */
	if (steal)
		steal_snapshot(w, steal, MAX_CPUS);
	uint64_t end_time = now_ns(CLOCK_MONOTONIC);
	struct vp_end end = {
		.lost = lost,
		.duration_ns = end_time - start,
		.exit_status = child_done && !we_stopped_child ? (uint32_t)exit_code(child_status) : 0,
	};
	if (vp_session_writer__finish(w, end_time, &end, err, sizeof(err))) {
		fprintf(stderr, "viprof record: %s\n", err);
		failed = true;
	}
	record_jvm__end();   /* attached JVM agents finish this session's maps and go idle */
	vp_timing("record: session finished");
	uint64_t du_bytes = vp_session_writer__disk_bytes(w);
	double secs = (double)end.duration_ns / 1e9;
	fprintf(stderr, "viprof: %llu samples (%llu lost) in %.1f s, %.0f/s; session %s (%llu bytes)\n",
		(unsigned long long)end.samples, (unsigned long long)lost, secs,
		secs > 0 ? (double)end.samples / secs : 0.0, vp_session_writer__dir(w), (unsigned long long)du_bytes);
	if (stop_signal && !o.quiet)
		fprintf(stderr, "viprof: stopped by %s\n", strsignal(stop_signal));
	/* A command that ran to its own end gives its own status, also when the recording
	 * failed (said above): a profiler must not turn a program's success into failure
	 * because it could not write. */
	ret = child && child_done && !we_stopped_child ? exit_code(child_status) : failed ? 1 : 0;

cleanup:
	if (ksl)
		take_kallsyms(&ksl, NULL, &cfg);
	vp_child__close(&held);   /* a held child reads EOF and exits without running the command */
	if (child && !started) {
		int status;
		waitpid(child, &status, 0);
	}
	/* The unwinder writes into the sampler's maps: it goes first. */
	vp_unwinder__free(unwind_start.u);
	record_sched__free(sched);
	if (s)
		be->destroy(s);
	if (!started && w) {
		/* Nothing was recorded: leave no half-made session behind to trip --force
		 * (an empty directory the user gave us stays, empty). Through the session's
		 * directory fds, never by path. */
		vp_session_writer__discard(w);
		w = NULL;
	}
	vp_session_writer__free(w);
	free(steal);
	free(java_opts);
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGCHLD, SIG_DFL);
	vp_timing("record: cleaned up");
	return ret;
}
