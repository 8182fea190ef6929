/* viprof stat [-e EV,..] [--per-thread] [--no-group] [-x SEP] (-p PID | -- CMD...)
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
 * The events of each thread (or inherit set) are one perf group, the first event
 * leading, read with one read() (PERF_FORMAT_GROUP, TOTAL_TIME_ENABLED|RUNNING) at one
 * instant; where the kernel refuses the group, or with --no-group, each event is its
 * own, and ratios of two events (IPC, page faults per ms of task-clock) are then not
 * printed but said to be not shown and why. Every poll (10 ms) is scaled interval by
 * interval, each by its own enabled/running
 * (common/count_scale.h), so that contention that comes and goes stretches only the
 * intervals it was in; "(multiplexed, NN%)" marks events that were not on a counter
 * all the time.
 * Stolen time (the hypervisor's share of a clock event) is printed only where a steal
 * clock runs (vp_steal__clock_runs: /proc/stat's steal moved since boot), and is taken
 * from the switch tracer (sampler-kernel/sched_tracer.h), which charges each thread the
 * run queue's steal clock that advanced while it ran, exactly; the difference of
 * task-clock and the scheduler's runtime is clock skew as much as steal and is not used.
 * Without the tracer (it needs root, or CAP_BPF and CAP_PERFMON) stat says so instead
 * of printing a stolen row. Output goes to stderr, as perf stat's does; the exit status
 * is the command's. */
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
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/commands.h"
#include "common/count_scale.h"
#include "common/session_format.h"
#include "common/util.h"
#include "common/launch.h"
#include "common/steal_est.h"
#include "cli/stat_est.h"
#include "hv-glue/events.h"
#include "hv-glue/steal.h"
#include "common/steal_clock.h"
#include "sampler-kernel/sched_tracer.h"

#define STAT_POLL_MS 10
/* The steal estimate's sampling rate: odd, as record's default, so that it does not beat
 * with 1000 Hz timers; each gap is estimated within one period (1 ms). */
#define STAT_EST_HZ 999
#define STAT_DEFAULT_EVENTS "task-clock,context-switches,cpu-migrations,page-faults"

struct stat_thread {
	pid_t tid;
	char comm[16];
	int fd[VP_MAX_EVENTS];
	uint64_t val[VP_MAX_EVENTS], ena[VP_MAX_EVENTS], run[VP_MAX_EVENTS];
	bool grouped;           /* fd[0] leads a group of all: read at one instant */
	/* The reading that ended the last interval, and the intervals so far, each
	 * scaled by its own multiplexing ratio. */
	struct vp_count_snap last[VP_MAX_EVENTS];
	uint64_t scaled[VP_MAX_EVENTS];
};

/* Stolen time from the switch tracer: its per-thread totals (THREAD_TIME records, at
 * its stop), or why there is none to print. */
struct stat_steal {
	struct vp_sched *sched;
	bool measured;
	char why[448];
	struct vp_thread_time *tt;
	int ntt;
	size_t cap;
};

struct stat_opts {
	const char *events;
	bool per_thread;
	bool no_group;          /* --no-group: each event on its own */
	const char *sep;        /* -x: CSV-like output with this separator */
	pid_t pid;
	char **cmd;
	bool no_est;            /* --no-steal-estimate */
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
	/* The first clock event (-1: none): its rows lose the stolen time, printed after. */
	int clock_ev;
	/* Some event set was opened as separate events (--no-group, or the kernel refused
	 * the group): ratios of two events are then not printed. */
	bool ungrouped;
	struct stat_steal steal;
	/* The host's share estimated from late sampler timers (stat_est.h), apart from
	 * stolen; est_why says why there is none. */
	struct stat_est *est;
	char est_why[320];
};

static volatile sig_atomic_t stat_interrupted;

static void on_signal(int sig)
{
	stat_interrupted = sig;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: viprof stat [-e EV,..] [--per-thread] [--no-group] [-x SEP] [--no-steal-estimate] (-p PID | -- CMD [ARGS...])\n\n"
		   "Counts events (perf_event_open counting mode) for a command and all it creates,\n"
		   "or for a running process until it exits or you press Ctrl-C.\n\n"
		   "  -e, --event EV,..   events (default " STAT_DEFAULT_EVENTS ")\n"
		   "  --per-thread        one row per thread (tid, comm); new threads are found by\n"
		   "                      polling /proc every 10 ms, child processes are not followed\n"
		   "  --no-group          count each event on its own instead of one group per\n"
		   "                      thread (read at one instant); ratios (IPC) are then not shown\n"
		   "  -x, --field-separator SEP  machine-readable rows:\n"
		   "                      [comm-tid SEP] value SEP unit SEP event SEP running-ns SEP pct-running\n"
		   "                      (rows only; value <not counted> or <not measured> where none was taken)\n"
		   "  --no-steal-estimate do not estimate the host's share (row hypervisor-estimated:\n"
		   "                      a 999 Hz bpf sampler reads its late timers; never stolen)\n"
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

static int open_event_in(const struct sampler_event *ev, pid_t tid, bool inherit, bool on_exec, int leader)
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
	if (leader == -2) {
		/* A group's leader: its read returns the whole group. It stays off until the
		 * members are attached (open_set says why), or until exec. */
		attr.read_format |= PERF_FORMAT_GROUP;
		attr.disabled = 1;
		leader = -1;
	} else if (leader >= 0) {
		attr.disabled = 0;     /* goes on and off with its leader */
		attr.enable_on_exec = 0;
	}
	int fd = (int)syscall(SYS_perf_event_open, &attr, tid, -1, leader, PERF_FLAG_FD_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

static int open_event(const struct sampler_event *ev, pid_t tid, bool inherit, bool on_exec)
{
	return open_event_in(ev, tid, inherit, on_exec, -1);
}

/* Opens every event for tid into t->fd: as one group (the first event leading), so that
 * all are read at one instant and a ratio of two (IPC) is of one interval, or as
 * separate events when the kernel refuses the group (hardware events that do not fit
 * the PMU together) or --no-group asks for that. 0 or -errno of the separate open. */
static int open_set(struct stat_ctx *s, struct stat_thread *t, pid_t tid, bool inherit, bool on_exec)
{
	int e, err = 0;

	if (!s->o.no_group && s->nev > 1) {
		for (e = 0; e < s->nev; e++) {
			int fd = open_event_in(&s->ev[e], tid, inherit, on_exec, e ? t->fd[0] : -2);

			if (fd < 0)
				break;
			t->fd[e] = fd;
		}
		/* A member attached to a group that already runs is scheduled in with it only
		 * at the thread's next switch when its pmu is not the leader's (task-clock
		 * and page-faults are two): the leader goes on last (hv-glue/counters.c). */
		if (e == s->nev && (on_exec || ioctl(t->fd[0], PERF_EVENT_IOC_ENABLE, PERF_IOC_FLAG_GROUP) == 0)) {
			t->grouped = true;
			return 0;
		}
		while (e-- > 0)
			close(t->fd[e]);
	}
	for (e = 0; e < s->nev && !err; e++) {
		int fd = open_event(&s->ev[e], tid, inherit, on_exec);

		if (fd < 0)
			err = fd;
		else
			t->fd[e] = fd;
	}
	if (err) {
		for (int j = 0; j < e - 1; j++)
			close(t->fd[j]);
		return err;
	}
	t->grouped = false;
	if (s->nev > 1)
		s->ungrouped = true;
	return 0;
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
	int err = open_set(s, t, tid, inherit, on_exec);
	if (err)
		return err;
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

		t->tid = s->th[i].tid;
		if (open_set(s, t, t->tid, true, false) == 0)
			s->ninh++;
		/* else a thread that exited since the scan: its row has all it did. */
	}
	s->have_all = true;
	return 0;
}

static void read_thread(struct stat_thread *t, int nev)
{
	uint64_t grp[3 + VP_MAX_EVENTS];   /* nr, time_enabled, time_running, values */
	size_t want = (size_t)(3 + nev) * sizeof(uint64_t);
	bool group_ok = t->grouped && read(t->fd[0], grp, want) == (ssize_t)want && grp[0] == (uint64_t)nev;

	if (t->grouped && !group_ok)
		return;
	for (int e = 0; e < nev; e++) {
		uint64_t buf[3];

		if (group_ok) {
			buf[0] = grp[3 + e];
			buf[1] = grp[1];
			buf[2] = grp[2];
		} else if (read(t->fd[e], buf, sizeof(buf)) != (ssize_t)sizeof(buf)) {
			/* A thread that has exited keeps its final count in its event. */
			continue;
		}
		t->val[e] = buf[0];
		t->ena[e] = buf[1];
		t->run[e] = buf[2];
		/* An interval in which the event never ran is scaled with the next that did. */
		struct vp_count_snap now = { buf[0], buf[1], buf[2] };
		if (now.running == t->last[e].running && now.count == t->last[e].count)
			continue;
		t->scaled[e] += vp_counts__scaled_delta(&t->last[e], &now);
		t->last[e] = now;
	}
}

static void read_all(struct stat_ctx *s)
{
	if (s->have_all && !s->inh)
		read_thread(&s->all, s->nev);
	if (s->inh)
		for (int e = 0; e < s->nev; e++)
			s->all.val[e] = s->all.ena[e] = s->all.run[e] = s->all.scaled[e] = 0;
	for (int i = 0; i < s->ninh; i++) {
		read_thread(&s->inh[i], s->nev);
		for (int e = 0; e < s->nev; e++) {
			s->all.val[e] += s->inh[i].val[e];
			s->all.ena[e] += s->inh[i].ena[e];
			s->all.run[e] += s->inh[i].run[e];
			s->all.scaled[e] += s->inh[i].scaled[e];
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
	const char *what = "stolen";

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

/* The switch tracer's steal for one thread (tid > 0), or for every thread it saw (the
 * command, its threads and its children: what the inherited totals cover). */
static double steal_of(const struct stat_ctx *s, pid_t tid)
{
	uint64_t sum = 0;

	for (int i = 0; i < s->steal.ntt; i++)
		if (tid <= 0 || s->steal.tt[i].tid == (uint32_t)tid)
			sum += s->steal.tt[i].steal_ns;
	return (double)sum;
}

/* Why no stolen figure follows the clock rows: one line. With -x the output is rows
 * only, so a script never meets a line it cannot parse: the stolen row carries
 * "<not measured>" as its value (perf stat's "<not counted>" convention), and the why
 * is for the human form. */
static void print_no_steal(const struct stat_ctx *s)
{
	if (s->clock_ev < 0 || s->steal.measured || !s->steal.why[0])
		return;
	if (s->o.sep)
		fprintf(stderr, "<not measured>%smsec%sstolen%s0%s0.00\n", s->o.sep, s->o.sep, s->o.sep, s->o.sep);
	else if (!strncmp(s->steal.why, VP_STEAL_NOT_MEASURED, strlen(VP_STEAL_NOT_MEASURED)))
		fprintf(stderr, "\n  %s\n", s->steal.why);   /* the one wording every view uses */
	else
		fprintf(stderr, "\n  stolen: not reported: %s\n", s->steal.why);
}

/* Ratios of two counted events, printed under the rows only when every set held both
 * in one group: separately opened events are multiplexed each on its own, and their
 * ratio would divide two independent estimates (with no PMU here, page faults per ms of
 * task-clock shows the same rule with software events). */
static const struct stat_ratio {
	uint32_t num_type, den_type;
	uint64_t num, den;
	const char *label, *unit;
	double mult;
} stat_ratios[] = {
	{ PERF_TYPE_HARDWARE, PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS, PERF_COUNT_HW_CPU_CYCLES, "IPC",
	  "instructions per cycle", 1.0 },
	{ PERF_TYPE_SOFTWARE, PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS, PERF_COUNT_SW_TASK_CLOCK, "page faults",
	  "per ms of task-clock", 1e6 },
};

static int find_event(const struct stat_ctx *s, uint32_t type, uint64_t config)
{
	for (int e = 0; e < s->nev; e++)
		if (s->ev[e].type == type && s->ev[e].config == config)
			return e;
	return -1;
}

static void print_ratios(const struct stat_ctx *s)
{
	for (size_t r = 0; r < sizeof(stat_ratios) / sizeof(stat_ratios[0]); r++) {
		const struct stat_ratio *m = &stat_ratios[r];
		int n = find_event(s, m->num_type, m->num), d = find_event(s, m->den_type, m->den);
		double nv = 0, dv = 0;

		if (n < 0 || d < 0)
			continue;
		if (s->ungrouped) {
			fprintf(stderr, " # %s %s not shown: %s and %s were counted as separate events (%s), each "
				"multiplexed on its own, so their ratio would divide two independent estimates\n", m->label,
				m->unit, s->ev[n].name, s->ev[d].name,
				s->o.no_group ? "--no-group" : "the kernel refused them as one group");
			continue;
		}
		if (s->have_all) {
			nv = (double)s->all.scaled[n];
			dv = (double)s->all.scaled[d];
		} else {
			for (int i = 0; i < s->nth; i++) {
				nv += (double)s->th[i].scaled[n];
				dv += (double)s->th[i].scaled[d];
			}
		}
		/* A clock event's rows are printed without the stolen time; its ratio is the
		 * quotient of the rows as printed, not of the raw clock. */
		if (s->steal.measured) {
			double stolen = steal_of(s, 0);
			if (n == s->clock_ev)
				nv -= stolen < nv ? stolen : nv;
			if (d == s->clock_ev)
				dv -= stolen < dv ? stolen : dv;
		}
		if (dv > 0)
			fprintf(stderr, " # %s %.2f %s (%s / %s, counted as one group)\n", m->label, nv / dv * m->mult,
				m->unit, s->ev[n].name, s->ev[d].name);
	}
}

/* The estimate's row (ms, and its share of the raw clock): never subtracted from the
 * clock rows nor added to stolen, since it is a guess at time the clock counted (no
 * steal clock) or that stolen holds already (a steal clock). */
static void print_est(const struct stat_ctx *s, const char *who, double ns, double raw)
{
	double pct = raw > 0 ? 100.0 * ns / raw : 0;

	if (s->o.sep) {
		const char *x = s->o.sep;

		if (who)
			fprintf(stderr, "%s%s", who, x);
		fprintf(stderr, "%.2f%smsec%s%s%s0%s%.2f\n", ns / 1e6, x, x, VP_STEAL_EST_EVENT, x, x, pct);
		return;
	}
	if (who)
		fprintf(stderr, "%24s ", who);
	fprintf(stderr, "%20.2f %-5s %s  (%.2f%% of the clock: the host's share estimated from sampler timers that "
		"fired late; not stolen, and left in the rows above)\n", ns / 1e6, "msec", VP_STEAL_EST_EVENT, pct);
}

/* The estimate's rows after the clock event's: per thread or in total, as the clock's. */
static void print_est_rows(const struct stat_ctx *s)
{
	if (s->clock_ev < 0 || s->o.no_est)
		return;
	if (!s->est) {
		if (s->o.sep)
			fprintf(stderr, "<not estimated>%smsec%s%s%s0%s0.00\n", s->o.sep, s->o.sep, VP_STEAL_EST_EVENT,
				s->o.sep, s->o.sep);
		else
			fprintf(stderr, "\n  %s: not estimated: %s\n", VP_STEAL_EST_EVENT, s->est_why);
		return;
	}
	double total = 0;
	for (int i = 0; i < s->nth; i++) {
		const struct stat_thread *t = &s->th[i];
		char who[48];

		total += (double)t->scaled[s->clock_ev];
		snprintf(who, sizeof(who), "%s-%d", t->comm, (int)t->tid);
		if (s->o.per_thread)
			print_est(s, who, stat_est__ns(s->est, t->tid), (double)t->scaled[s->clock_ev]);
	}
	if (!s->o.per_thread)
		print_est(s, NULL, stat_est__ns(s->est, 0), total);
	if (s->have_all)
		print_est(s, "[all threads]", stat_est__ns(s->est, 0), (double)s->all.scaled[s->clock_ev]);
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
		/* The clock rows lose what the tracer measured as stolen: task-clock runs on
		 * while the hypervisor holds the vCPU under the thread. */
		bool steal = e == s->clock_ev && s->steal.measured;
		double total = 0, total_stolen = 0;
		uint64_t ena = 0, run = 0;

		for (int i = 0; i < s->nth; i++) {
			const struct stat_thread *t = &s->th[i];
			double scaled = (double)t->scaled[e];
			double stolen = steal ? steal_of(s, t->tid) : 0;
			char who[48];

			if (stolen > scaled)
				stolen = scaled;   /* the tracer starts before exec, the clock at it */
			snprintf(who, sizeof(who), "%s-%d", t->comm, (int)t->tid);
			if (s->o.per_thread) {
				print_row(s, who, e, scaled - stolen, t->run[e],
					  t->ena[e] ? 100.0 * (double)t->run[e] / (double)t->ena[e] : 100.0,
					  t->ena[e] && !t->run[e]);
				if (steal)
					print_stolen(s, who, stolen, scaled);
			}
			total += scaled;
			total_stolen += stolen;
			ena += t->ena[e];
			run += t->run[e];
		}
		/* Totals: the sum of the per-thread scaled counts, and the overall share of
		 * enabled time on a counter as the multiplexing ratio. The inherited totals
		 * also hold children, whose steal the tracer followed too. */
		if (!s->o.per_thread) {
			double stolen = steal ? steal_of(s, 0) : 0;

			if (stolen > total)
				stolen = total;
			print_row(s, NULL, e, total - stolen, run, ena ? 100.0 * (double)run / (double)ena : 100.0,
				  ena && !run);
			if (steal)
				print_stolen(s, NULL, stolen, total);
		}
		if (s->have_all) {
			const struct stat_thread *a = &s->all;
			double all = (double)a->scaled[e];
			double all_stolen = steal ? steal_of(s, 0) : 0;

			if (all_stolen > all)
				all_stolen = all;
			print_row(s, "[all threads]", e, all - all_stolen, a->run[e],
				  a->ena[e] ? 100.0 * (double)a->run[e] / (double)a->ena[e] : 100.0,
				  a->ena[e] && !a->run[e]);
			if (steal)
				print_stolen(s, "[all threads]", all_stolen, all);
			double rest = (all - all_stolen) - (total - total_stolen);
			print_row(s, "[not per-thread]", e, rest > 0 ? rest : 0, a->run[e], 100.0, false);
		}
	}
	print_est_rows(s);
	if (!s->o.sep)
		print_ratios(s);
	print_no_steal(s);
	if (!s->o.sep)
		fprintf(stderr, "\n %14.9f seconds time elapsed\n\n", secs);
}

static int steal_sink(void *ctx, uint32_t type, uint64_t time, const void *body, size_t len)
{
	struct stat_steal *st = ctx;

	(void)time;
	if (type != VP_REC_THREAD_TIME || len < sizeof(struct vp_thread_time))
		return 0;   /* the per-stack steal samples and the event records: not needed here */
	if (vp_grow((void **)&st->tt, &st->cap, (size_t)st->ntt + 1, sizeof(*st->tt)))
		return -ENOMEM;
	memcpy(&st->tt[st->ntt++], body, sizeof(*st->tt));
	return 0;
}

/* Starts the switch tracer on pid (launch: the held child, before its exec) when a
 * clock event is counted and a steal clock runs here; otherwise, or when the tracer
 * cannot run, says why in s->steal.why. */
static void steal_start(struct stat_ctx *s, pid_t pid, bool launch)
{
	char why[320], err[320];

	if (s->clock_ev < 0)
		return;
	if (vp_steal__clock_runs(why, sizeof(why)) != 1) {
		snprintf(s->steal.why, sizeof(s->steal.why), "%s", why);
		return;
	}
	struct vp_sched_config cfg = {
		.target = launch ? SAMPLER_TARGET_LAUNCH : SAMPLER_TARGET_PIDS,
		.pids = &pid,
		.nr_pids = 1,
		.sink = { .emit = steal_sink, .ctx = &s->steal },
	};
	s->steal.sched = vp_sched__start(&cfg, err, sizeof(err));
	if (!s->steal.sched)
		snprintf(s->steal.why, sizeof(s->steal.why), "stolen time is measured by the switch tracer, which did "
			 "not start: %s", err);
}

/* Starts the steal estimate's sampler (stat_est.h) on pid with a clock event counted. */
static void est_start(struct stat_ctx *s, pid_t pid, bool launch)
{
	if (s->clock_ev < 0 || s->o.no_est)
		return;
	s->est = stat_est__start(pid, launch, STAT_EST_HZ, s->est_why, sizeof(s->est_why));
}

/* Stops the estimate's sampler, which drains what is left. */
static void est_stop(struct stat_ctx *s)
{
	int err = stat_est__stop(s->est);

	if (err) {
		snprintf(s->est_why, sizeof(s->est_why), "the sampler could not deliver its samples: %s", strerror(-err));
		stat_est__free(s->est);
		s->est = NULL;
	}
}

/* Stops the tracer, which emits its per-thread totals into s->steal. */
static void steal_stop(struct stat_ctx *s)
{
	if (!s->steal.sched)
		return;
	int err = vp_sched__stop(s->steal.sched);
	if (err)
		snprintf(s->steal.why, sizeof(s->steal.why), "the switch tracer could not deliver its totals: %s",
			 strerror(-err));
	else
		s->steal.measured = true;
	vp_sched__free(s->steal.sched);
	s->steal.sched = NULL;
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
	else if (vp_events__check_count(&s->ev[e], msg, sizeof(msg)) == 0 || !msg[0])
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
		{ "no-group", no_argument, NULL, 'G' },
		{ "field-separator", required_argument, NULL, 'x' },
		{ "pid", required_argument, NULL, 'p' },
		{ "no-steal-estimate", no_argument, NULL, 'E' },
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
		case 'G': o->no_group = true; break;
		case 'E': o->no_est = true; break;
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
			if ((err = open_set(s, &s->all, pid, true, true)) < 0) {
				vp_child__close(&held);
				waitpid(pid, NULL, 0);
				return open_failed(s, 0, err);
			}
			s->have_all = true;
		}
		/* The name exec will give it, kept should the command exit before its
		 * name can be read below; it would otherwise show under our own name. */
		const char *base = strrchr(s->o.cmd[0], '/');
		snprintf(s->th[0].comm, sizeof(s->th[0].comm), "%.15s", base ? base + 1 : s->o.cmd[0]);
		steal_start(s, pid, true);
		est_start(s, pid, true);
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
	} else {
		s->target = s->o.pid;
		if (kill(s->target, 0) && errno == ESRCH) {
			char why[256];
			vp_err_no_process(why, sizeof(why), (long)s->target);
			fprintf(stderr, "viprof stat: %s\n", why);
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
		steal_start(s, s->target, false);
		est_start(s, s->target, false);
		t0 = now_s();
	}

	for (;;) {
		struct timespec ts = { 0, STAT_POLL_MS * 1000000L };

		if (s->o.cmd) {
			if (waitpid(s->target, &status, WNOHANG) == s->target)
				break;
			if (stat_interrupted) {
				/* Forward once, as the terminal would, and keep waiting for it. */
				kill(s->target, stat_interrupted);
				stat_interrupted = 0;
			}
		} else {
			if (stat_interrupted || target_gone(s->target))
				break;
		}
		/* Every poll closes an interval of every event (scaled by its own ratio),
		 * and lets the switch tracer drain its sums before its hash fills. */
		read_all(s);
		if (s->steal.sched)
			vp_sched__poll(s->steal.sched, (uint64_t)(now_s() * 1e9));
		stat_est__poll(s->est);
		if (s->o.per_thread && (err = scan_threads(s, false, false)) < 0 && err != -ENOENT) {
			fprintf(stderr, "viprof stat: cannot follow the threads of %d: %s\n",
				(int)s->target, strerror(-err));
			ret = 1;
			break;
		}
		nanosleep(&ts, NULL);
	}
	read_all(s);
	steal_stop(s);
	est_stop(s);
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
		if (vp_events__check_count(&s.ev[e], err, sizeof(err)) != 0) {
			fprintf(stderr, "viprof stat: %s\n", err);
			return 2;
		}
	}
	s.clock_ev = -1;
	for (int e = 0; e < s.nev && s.clock_ev < 0; e++)
		if (is_clock(&s.ev[e]) && !s.ev[e].exclude_kernel)
			s.clock_ev = e;   /* :u clocks leave out the kernel, the tracer's steal does not */
	ret = run(&s);
	vp_sched__free(s.steal.sched);   /* an early return of run() leaves it running */
	stat_est__free(s.est);
	free(s.steal.tt);
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
