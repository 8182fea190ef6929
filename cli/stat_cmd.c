/* viprof stat [-e EV,..] [--per-thread] [-x SEP] (-p PID | -- CMD...)
 *
 * Counting-mode perf events, like perf stat. Totals: one event per existing thread with
 * inherit, so that threads and processes created later are counted in their creator's
 * event (the kernel folds inherited counts into the parent's read()). --per-thread: one
 * event per thread WITHOUT inherit, and /proc/PID/task is polled every 10 ms for new
 * threads, because an inherited counter cannot be read per thread; a new thread's
 * first <= 10 ms and child processes are therefore not in its rows; an inherit set
 * (on the command, or with -p on each thread that existed at the start) is read too
 * and printed as "[all threads]", and what no row holds as "[not per-thread]", so that
 * the rows add up to the total.
 * Each event is its own (ungrouped) event, read with TOTAL_TIME_ENABLED|RUNNING and
 * scaled by enabled/running; "(multiplexed, NN%)" marks events that were not on a
 * counter all the time. Output goes to stderr, as perf stat's does; the exit status is
 * the command's. */
#define _GNU_SOURCE   /* pipe2 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <getopt.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/commands.h"
#include "common/util.h"
#include "common/launch.h"
#include "hv-glue/events.h"
#include "hv-glue/steal.h"

#define STAT_POLL_MS 10
#define STAT_DEFAULT_EVENTS "task-clock,context-switches,cpu-migrations,page-faults"

struct stat_thread {
	pid_t tid;
	char comm[16];
	int fd[VP_MAX_EVENTS];
	uint64_t val[VP_MAX_EVENTS], ena[VP_MAX_EVENTS], run[VP_MAX_EVENTS];
	/* The stolen share (hv-glue/steal.h): task-clock minus scheduler runtime, from a
	 * pair read at the same poll; the steal of the thread's last <= 10 ms is not in it. */
	uint64_t stolen;
	bool stolen_ok;
};

struct stat_opts {
	const char *events;
	bool per_thread;
	const char *sep;        /* -x: CSV-like output with this separator */
	pid_t pid;
	char **cmd;
};

struct stat_ctx {
	struct stat_opts o;
	struct sampler_event ev[VP_MAX_EVENTS];
	int nev;
	pid_t target;           /* the process whose threads are counted */
	struct stat_thread *th;
	int nth;
	size_t capth;
	/* --per-thread -- CMD: one inherit event set on the command as well, so that the
	 * time threads ran before the poll found them (and child processes) still shows,
	 * as the difference between the total and the per-thread rows. */
	struct stat_thread all;
	bool have_all;
	/* --per-thread -p: an inherit event set on each thread that existed at the start,
	 * whose sum is everything the process did after it (threads that came and went
	 * between two polls, child processes), so that what no row holds gets a row. */
	struct stat_thread *inh;
	int ninh;
	/* Steal: what the clock difference measures here (vp_steal__accounting), the first
	 * clock event (-1: none), and for -- CMD the command's scheduler runtime (wait4). */
	int steal_acct;
	int clock_ev;
	uint64_t cmd_runtime;
	bool cmd_runtime_ok;
	/* -- CMD: the command's runtime and its clock events' counts right after its exec:
	 * the runtimes include the fork glue and the exec itself, which the clocks
	 * (enabled in the middle of exec) do not, so steal is measured from here on. */
	uint64_t runtime0, clock0, all_clock0;
};

static volatile sig_atomic_t stat_interrupted;

static void on_signal(int sig)
{
	stat_interrupted = sig;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: viprof stat [-e EV,..] [--per-thread] [-x SEP] (-p PID | -- CMD [ARGS...])\n\n"
		   "Counts events (perf_event_open counting mode) for a command and all it creates,\n"
		   "or for a running process until it exits or you press Ctrl-C.\n\n"
		   "  -e, --event EV,..   events (default " STAT_DEFAULT_EVENTS ")\n"
		   "  --per-thread        one row per thread (tid, comm); new threads are found by\n"
		   "                      polling /proc every 10 ms, child processes are not followed\n"
		   "  -x, --field-separator SEP  machine-readable rows:\n"
		   "                      [comm-tid SEP] value SEP unit SEP event SEP running-ns SEP pct-running\n"
		   "  -p, --pid PID       count an existing process\n"
		   "  -h, --help          this text\n\n"
		   "examples:\n  viprof stat -- make -j2\n"
		   "  viprof stat --per-thread -e task-clock,cs -p 1234\n"
		   "  viprof stat -x, -e page-faults -- ./a.out\n");
}

static bool is_clock(const struct sampler_event *ev)
{
	return ev->type == PERF_TYPE_SOFTWARE &&
	       (ev->config == PERF_COUNT_SW_TASK_CLOCK || ev->config == PERF_COUNT_SW_CPU_CLOCK);
}

static int open_event(const struct sampler_event *ev, pid_t tid, bool inherit, bool on_exec)
{
	struct perf_event_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = ev->type;
	attr.config = ev->config;
	attr.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
	attr.inherit = inherit;
	attr.exclude_kernel = ev->exclude_kernel;
	attr.exclude_user = ev->exclude_user;
	attr.exclude_hv = 1;
	/* For a launched command, start at its exec, not in our fork/exec glue. */
	attr.disabled = on_exec;
	attr.enable_on_exec = on_exec;
	int fd = (int)syscall(SYS_perf_event_open, &attr, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

static void read_comm(pid_t pid, pid_t tid, char *comm, size_t len)
{
	char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", (int)pid, (int)tid);
	f = fopen(path, "r");
	if (!f)
		return;     /* gone: keep the last name seen */
	if (fgets(comm, (int)len, f))
		comm[strcspn(comm, "\n")] = '\0';
	fclose(f);
}

static struct stat_thread *find_thread(struct stat_ctx *s, pid_t tid)
{
	for (int i = 0; i < s->nth; i++)
		if (s->th[i].tid == tid)
			return &s->th[i];
	return NULL;
}

/* Opens every event for tid. -ESRCH (the thread exited meanwhile) is not an error. */
static int add_thread(struct stat_ctx *s, pid_t tid, bool inherit, bool on_exec)
{
	struct stat_thread *t;

	if (vp_grow((void **)&s->th, &s->capth, (size_t)s->nth + 1, sizeof(*s->th)))
		return -ENOMEM;
	t = &s->th[s->nth];
	memset(t, 0, sizeof(*t));
	t->tid = tid;
	for (int i = 0; i < s->nev; i++) {
		int fd = open_event(&s->ev[i], tid, inherit, on_exec);

		if (fd < 0) {
			for (int j = 0; j < i; j++)
				close(t->fd[j]);
			return fd;
		}
		t->fd[i] = fd;
	}
	read_comm(s->target, tid, t->comm, sizeof(t->comm));
	s->nth++;
	return 0;
}

/* Picks up threads of the target that are not counted yet, and refreshes names (a
 * thread often names itself after it starts, e.g. every JVM thread). */
static int scan_threads(struct stat_ctx *s, bool inherit, bool on_exec)
{
	char path[64];
	struct dirent *d;
	DIR *dir;
	int err = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)s->target);
	dir = opendir(path);
	if (!dir)
		return -errno;
	while (!err && (d = readdir(dir))) {
		pid_t tid = (pid_t)atoi(d->d_name);
		struct stat_thread *t;

		if (tid <= 0)
			continue;
		if ((t = find_thread(s, tid))) {
			read_comm(s->target, tid, t->comm, sizeof(t->comm));
			continue;
		}
		err = add_thread(s, tid, inherit, on_exec);
		if (err == -ESRCH)
			err = 0;
	}
	closedir(dir);
	return err;
}

/* --per-thread -p: the inherit set on every thread counted so far (see inh). */
static int open_inherited(struct stat_ctx *s)
{
	s->inh = calloc(s->nth ? s->nth : 1, sizeof(*s->inh));
	if (!s->inh)
		return -ENOMEM;
	for (int i = 0; i < s->nth; i++) {
		struct stat_thread *t = &s->inh[s->ninh];
		int e;

		t->tid = s->th[i].tid;
		for (e = 0; e < s->nev; e++) {
			int fd = open_event(&s->ev[e], t->tid, true, false);

			if (fd < 0)
				break;
			t->fd[e] = fd;
		}
		if (e == s->nev) {
			s->ninh++;
			continue;
		}
		for (int j = 0; j < e; j++)
			close(t->fd[j]);
		/* A thread that exited since the scan: its row has all it did. */
	}
	s->have_all = true;
	return 0;
}

static void read_thread(struct stat_thread *t, int nev)
{
	for (int e = 0; e < nev; e++) {
		uint64_t buf[3];

		/* A thread that has exited keeps its final count in its event. */
		if (read(t->fd[e], buf, sizeof(buf)) == (ssize_t)sizeof(buf)) {
			t->val[e] = buf[0];
			t->ena[e] = buf[1];
			t->run[e] = buf[2];
		}
	}
}

/* --per-thread: each thread's task-clock and scheduler runtime, read together, so that
 * a thread that exits keeps the stolen share it had at the last poll. */
static void poll_stolen(struct stat_ctx *s)
{
	if (s->clock_ev < 0 || s->steal_acct <= 0)
		return;
	for (int i = 0; i < s->nth; i++) {
		struct stat_thread *t = &s->th[i];
		uint64_t buf[3], rt;

		if (read(t->fd[s->clock_ev], buf, sizeof(buf)) != (ssize_t)sizeof(buf) ||
		    vp_steal__runtime(s->target, t->tid, &rt))
			continue;   /* gone: keep the last pair */
		if (s->o.cmd && t->tid == s->target) {
			rt = rt > s->runtime0 ? rt - s->runtime0 : 0;
			buf[0] = buf[0] > s->clock0 ? buf[0] - s->clock0 : 0;
		}
		t->stolen = vp_steal__stolen(buf[0], rt);
		t->stolen_ok = true;
	}
}

static void read_all(struct stat_ctx *s)
{
	if (s->have_all && !s->inh)
		read_thread(&s->all, s->nev);
	for (int i = 0; i < s->ninh; i++) {
		read_thread(&s->inh[i], s->nev);
		for (int e = 0; e < s->nev; e++) {
			s->all.val[e] += s->inh[i].val[e];
			s->all.ena[e] += s->inh[i].ena[e];
			s->all.run[e] += s->inh[i].run[e];
		}
	}
	for (int i = 0; i < s->nth; i++)
		read_thread(&s->th[i], s->nev);
}

/* One output row. scaled is the count scaled to the enabled time; pct the share of
 * enabled time the event spent on a counter; not_counted when it never got one. */
static void print_row(const struct stat_ctx *s, const char *who, int e,
		      double scaled, uint64_t run, double pct, bool not_counted)
{
	const struct sampler_event *ev = &s->ev[e];
	bool clock = is_clock(ev);
	const char *unit = clock ? "msec" : "";
	char val[32];

	if (not_counted)
		snprintf(val, sizeof(val), "<not counted>");
	else if (clock)
		snprintf(val, sizeof(val), "%.2f", scaled / 1e6);
	else
		snprintf(val, sizeof(val), "%.0f", scaled);
	if (s->o.sep) {
		const char *x = s->o.sep;

		if (who)
			fprintf(stderr, "%s%s", who, x);
		fprintf(stderr, "%s%s%s%s%s%s%" PRIu64 "%s%.2f\n", val, x, unit, x, ev->name, x, run, x, pct);
		return;
	}
	if (who)
		fprintf(stderr, "%24s ", who);
	fprintf(stderr, "%20s %-5s %s", val, unit, ev->name);
	if (!not_counted && pct < 100.0)
		fprintf(stderr, "  (multiplexed, %.2f%%)", pct);
	fputc('\n', stderr);
}

/* The stolen row after a clock event's row: ms, and the share of the raw clock. */
static void print_stolen(const struct stat_ctx *s, const char *who, double stolen, double raw)
{
	double pct = raw > 0 ? 100.0 * stolen / raw : 0;
	const char *what = s->steal_acct == VP_STEAL_ACCT_IRQ ? "stolen+irq" : "stolen";

	if (s->o.sep) {
		const char *x = s->o.sep;

		if (who)
			fprintf(stderr, "%s%s", who, x);
		fprintf(stderr, "%.2f%smsec%s%s%s0%s%.2f\n", stolen / 1e6, x, x, what, x, x, pct);
		return;
	}
	if (who)
		fprintf(stderr, "%24s ", who);
	fprintf(stderr, "%20.2f %-5s %s  (%.2f%% of the clock, taken by the hypervisor; not in the row above)\n",
		stolen / 1e6, "msec", what, pct);
}

static void print_report(const struct stat_ctx *s, double secs)
{
	if (!s->o.sep) {
		fprintf(stderr, "\n Performance counter stats for ");
		if (s->o.cmd) {
			fprintf(stderr, "'");
			for (char **a = s->o.cmd; *a; a++)
				fprintf(stderr, "%s%s", a == s->o.cmd ? "" : " ", *a);
			fprintf(stderr, "'");
		} else {
			fprintf(stderr, "process id '%d'", (int)s->o.pid);
		}
		fprintf(stderr, "%s:\n\n", s->o.per_thread ? " per thread" : "");
	}
	for (int e = 0; e < s->nev; e++) {
		double total = 0;
		uint64_t ena = 0, run = 0;

		for (int i = 0; i < s->nth; i++) {
			const struct stat_thread *t = &s->th[i];
			double scaled = t->run[e] ? (double)t->val[e] * ((double)t->ena[e] / (double)t->run[e]) : 0;

			char who[48];

			snprintf(who, sizeof(who), "%s-%d", t->comm, (int)t->tid);
			bool steal = s->o.per_thread && e == s->clock_ev && t->stolen_ok;
			double stolen = steal ? (double)t->stolen : 0;
			if (s->o.per_thread)
				print_row(s, who, e, scaled - (stolen < scaled ? stolen : scaled), t->run[e],
					  t->ena[e] ? 100.0 * (double)t->run[e] / (double)t->ena[e] : 100.0,
					  t->ena[e] && !t->run[e]);
			if (steal)
				print_stolen(s, who, stolen, scaled);
			total += scaled - (stolen < scaled ? stolen : scaled);
			ena += t->ena[e];
			run += t->run[e];
		}
		/* Totals: the sum of the per-thread scaled counts, and the overall share of
		 * enabled time on a counter as the multiplexing ratio. */
		/* -- CMD: the command's runtime from wait4 is free of steal; the difference
		 * from its task-clock is the stolen share. */
		bool steal = e == s->clock_ev && s->cmd_runtime_ok;
		double cmd_stolen = steal && total > (double)s->clock0 ?
			(double)vp_steal__stolen((uint64_t)total - s->clock0, s->cmd_runtime) : 0;
		if (!s->o.per_thread) {
			print_row(s, NULL, e, total - cmd_stolen, run, ena ? 100.0 * (double)run / (double)ena : 100.0,
				  ena && !run);
			if (steal)
				print_stolen(s, NULL, cmd_stolen, total);
		}
		if (s->have_all) {
			const struct stat_thread *a = &s->all;
			double all = a->run[e] ? (double)a->val[e] * ((double)a->ena[e] / (double)a->run[e]) : 0;

			double all_stolen = steal && all > (double)s->all_clock0 ?
				(double)vp_steal__stolen((uint64_t)all - s->all_clock0, s->cmd_runtime) : 0;
			print_row(s, "[all threads]", e, all - all_stolen, a->run[e],
				  a->ena[e] ? 100.0 * (double)a->run[e] / (double)a->ena[e] : 100.0,
				  a->ena[e] && !a->run[e]);
			if (steal)
				print_stolen(s, "[all threads]", all_stolen, all);
			all -= all_stolen;
			print_row(s, "[not per-thread]", e, all > total ? all - total : 0, a->run[e], 100.0, false);
		}
	}
	if (!s->o.sep)
		fprintf(stderr, "\n %14.9f seconds time elapsed\n\n", secs);
}

/* Right after the command's exec: its runtime (the process CPU clock, which the
 * kernel brings up to date when read, unlike schedstat) and its clock events' counts,
 * read back to back, as the origin of its stolen share. */
static void steal_origin(struct stat_ctx *s, pid_t pid)
{
	struct timespec ts;
	uint64_t buf[3];
	/* MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED) of the kernel's posix-timers.h. */
	clockid_t clk = (clockid_t)((~(unsigned int)pid << 3) | 2);

	if (s->clock_ev < 0 || s->steal_acct <= 0)
		return;
	if (read(s->th[0].fd[s->clock_ev], buf, sizeof(buf)) == (ssize_t)sizeof(buf))
		s->clock0 = buf[0];
	if (s->have_all && read(s->all.fd[s->clock_ev], buf, sizeof(buf)) == (ssize_t)sizeof(buf))
		s->all_clock0 = buf[0];
	if (clock_gettime(clk, &ts) == 0)
		s->runtime0 = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A -p target has ended when it no longer exists or is a zombie that its parent has
 * not reaped yet (kill(pid, 0) still succeeds for those). */
static bool target_gone(pid_t pid)
{
	char path[64], buf[256], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT || errno == ESRCH;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return true;
	buf[n] = '\0';
	/* "pid (comm) S ...": comm may hold spaces and parentheses; the state follows the last ')'. */
	p = strrchr(buf, ')');
	return p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Explains a failed open of event e in one line and returns the exit status 1. */
static int open_failed(const struct stat_ctx *s, int e, int err)
{
	char msg[512];

	if ((err == -EACCES || err == -EPERM) && vp_perm__explain(s->target, msg, sizeof(msg)))
		; /* another user's process: paranoia is not the cause */
	else if (vp_events__check(&s->ev[e], msg, sizeof(msg)) == 0 || !msg[0])
		snprintf(msg, sizeof(msg), "event '%s' cannot be counted for pid %d: %s; "
			 "run as root or set kernel.perf_event_paranoid <= 2", s->ev[e].name,
			 (int)s->target, strerror(-err));
	fprintf(stderr, "viprof stat: %s\n", msg);
	return 1;
}

static int parse_args(int argc, char **argv, struct stat_opts *o)
{
	static const struct option opts[] = {
		{ "event", required_argument, NULL, 'e' },
		{ "per-thread", no_argument, NULL, 'T' },
		{ "field-separator", required_argument, NULL, 'x' },
		{ "pid", required_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	optind = 1;
	/* '+': stop at the first non-option so that the command keeps its own options. */
	while ((c = getopt_long(argc, argv, "+e:x:p:h", opts, NULL)) != -1) {
		switch (c) {
		case 'e': o->events = optarg; break;
		case 'T': o->per_thread = true; break;
		case 'x':
			if (!*optarg) {
				fprintf(stderr, "viprof stat: -x needs a non-empty separator, e.g. -x,\n");
				return 2;
			}
			o->sep = optarg;
			break;
		case 'p': {
			char *end;
			long v = strtol(optarg, &end, 10);

			if (*end || v <= 0 || v > INT32_MAX) {
				fprintf(stderr, "viprof stat: -p '%s' is not a process id; give a positive number\n", optarg);
				return 2;
			}
			o->pid = (pid_t)v;
			break;
		}
		case 'h': usage(stdout); return -1;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc)
		o->cmd = &argv[optind];
	if (!!o->pid == !!o->cmd) {
		fprintf(stderr, "viprof stat: give either -p PID or -- CMD (exactly one); see viprof stat --help\n");
		return 2;
	}
	return 0;
}

static int run(struct stat_ctx *s)
{
	struct sigaction sa = { .sa_handler = on_signal };
	bool inherit = !s->o.per_thread;
	struct vp_held_child held = { .pid = -1, .go_fd = -1, .exec_fd = -1 };
	int status = 0, ret = 0, err;
	double t0;

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if (s->o.cmd) {
		const struct vp_launch_opts lo = { .who = "viprof stat" };
		int le = vp_child__launch(&held, s->o.cmd, &lo);

		if (le < 0) {
			fprintf(stderr, "viprof stat: cannot start '%s': %s\n", s->o.cmd[0], strerror(-le));
			return 1;
		}
		pid_t pid = held.pid;
		s->target = pid;
		/* One thread so far, held before exec: events enable themselves at exec. */
		if ((err = add_thread(s, pid, inherit, true)) < 0) {
			int e = 0;

			/* Find which event failed, for the message. */
			for (; e < s->nev; e++) {
				int fd = open_event(&s->ev[e], pid, inherit, true);

				if (fd < 0)
					break;
				close(fd);
			}
			vp_child__close(&held);   /* the child exits 127 without exec */
			waitpid(pid, NULL, 0);
			return open_failed(s, e < s->nev ? e : 0, err);
		}
		if (s->o.per_thread) {
			for (int e = 0; e < s->nev; e++) {
				int fd = open_event(&s->ev[e], pid, true, true);

				if (fd < 0) {
					vp_child__close(&held);
					waitpid(pid, NULL, 0);
					return open_failed(s, e, fd);
				}
				s->all.fd[e] = fd;
				s->have_all = true;
			}
		}
		/* The name exec will give it, kept should the command exit before its
		 * name can be read below; it would otherwise show under our own name. */
		const char *base = strrchr(s->o.cmd[0], '/');
		snprintf(s->th[0].comm, sizeof(s->th[0].comm), "%.15s", base ? base + 1 : s->o.cmd[0]);
		t0 = now_s();
		/* Let it exec and wait for the exec; then take the command's real name. An
		 * errno instead means exec failed: the child said why; no counts to show. */
		int exec_err = 0;
		if ((err = vp_child__release(&held, &exec_err)) < 0) {
			fprintf(stderr, "viprof stat: cannot release the command: %s\n", strerror(-err));
			vp_child__close(&held);
			waitpid(pid, NULL, 0);
			return 1;
		}
		vp_child__close(&held);
		if (exec_err) {
			waitpid(pid, NULL, 0);
			return 127;
		}
		read_comm(pid, pid, s->th[0].comm, sizeof(s->th[0].comm));
		steal_origin(s, pid);
	} else {
		s->target = s->o.pid;
		if (kill(s->target, 0) && errno == ESRCH) {
			fprintf(stderr, "viprof stat: no process %d; check the pid (ps -e)\n", (int)s->target);
			return 1;
		}
		if ((err = scan_threads(s, inherit, false)) < 0) {
			for (int e = 0; e < s->nev; e++) {
				int fd = open_event(&s->ev[e], s->target, false, false);

				if (fd < 0)
					return open_failed(s, e, fd);
				close(fd);
			}
			fprintf(stderr, "viprof stat: cannot count the threads of %d: %s\n",
				(int)s->target, strerror(-err));
			return 1;
		}
		if (s->o.per_thread && (err = open_inherited(s)) < 0) {
			fprintf(stderr, "viprof stat: cannot count the threads of %d with their children: %s\n",
				(int)s->target, strerror(-err));
			return 1;
		}
		t0 = now_s();
	}

	for (;;) {
		struct timespec ts = { 0, STAT_POLL_MS * 1000000L };

		if (s->o.cmd) {
			struct rusage ru;
			pid_t w = wait4(s->target, &status, WNOHANG, &ru);

			if (w == s->target) {
				/* utime + stime: the kernel scales them to the command's
				 * sum_exec_runtime (its threads and reaped children), us. */
				s->cmd_runtime = ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) * 1000000000ull +
						 ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) * 1000ull;
				s->cmd_runtime -= s->cmd_runtime > s->runtime0 ? s->runtime0 : s->cmd_runtime;
				s->cmd_runtime_ok = s->steal_acct > 0;
				break;
			}
			if (stat_interrupted) {
				/* Forward once, as the terminal would, and keep waiting for it. */
				kill(s->target, stat_interrupted);
				stat_interrupted = 0;
			}
		} else {
			if (stat_interrupted || target_gone(s->target))
				break;
		}
		if (s->o.per_thread)
			poll_stolen(s);
		if (s->o.per_thread && (err = scan_threads(s, false, false)) < 0 && err != -ENOENT) {
			fprintf(stderr, "viprof stat: cannot follow the threads of %d: %s\n",
				(int)s->target, strerror(-err));
			ret = 1;
			break;
		}
		nanosleep(&ts, NULL);
	}
	if (s->o.per_thread)
		poll_stolen(s);    /* -p: the threads still run; -- CMD: gone, the last poll stands */
	read_all(s);
	print_report(s, now_s() - t0);
	if (ret)
		return ret;
	if (s->o.cmd) {
		if (WIFEXITED(status))
			return WEXITSTATUS(status);
		if (WIFSIGNALED(status))
			return 128 + WTERMSIG(status);
	}
	return 0;
}

int cmd_stat(int argc, char **argv)
{
	struct stat_ctx s;
	char err[512];
	int ret;

	memset(&s, 0, sizeof(s));
	s.o.events = STAT_DEFAULT_EVENTS;
	ret = parse_args(argc, argv, &s.o);
	if (ret)
		return ret < 0 ? 0 : ret;
	s.nev = vp_events__parse(s.o.events, s.ev, VP_MAX_EVENTS, err, sizeof(err));
	if (s.nev <= 0) {
		fprintf(stderr, "viprof stat: %s\n", s.nev < 0 ? err : "no events given; e.g. -e task-clock");
		return 2;
	}
	/* An event this machine cannot count is a usage error, found before the command
	 * runs, with record's exit status (2) so that scripts can treat both alike. */
	for (int e = 0; e < s.nev; e++) {
		if (vp_events__check(&s.ev[e], err, sizeof(err)) != 0) {
			fprintf(stderr, "viprof stat: %s\n", err);
			return 2;
		}
	}
	s.clock_ev = -1;
	for (int e = 0; e < s.nev && s.clock_ev < 0; e++)
		if (is_clock(&s.ev[e]) && !s.ev[e].exclude_kernel)
			s.clock_ev = e;   /* :u clocks leave out the kernel, the runtime does not */
	s.steal_acct = vp_steal__accounting();
	ret = run(&s);
	for (int i = 0; i < s.nth; i++)
		for (int e = 0; e < s.nev; e++)
			close(s.th[i].fd[e]);
	for (int e = 0; s.have_all && !s.inh && e < s.nev; e++)
		if (s.all.fd[e] > 0)
			close(s.all.fd[e]);
	for (int i = 0; i < s.ninh; i++)
		for (int e = 0; e < s.nev; e++)
			close(s.inh[i].fd[e]);
	free(s.inh);
	free(s.th);
	return ret;
}
