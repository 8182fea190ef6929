/* The recorder library: see recorder.h. This is the body of what used to be one long
 * cmd_record(): the command (cli/record_cmd.c) keeps option parsing, signals, the
 * launched command and the status line. */
#define _GNU_SOURCE
#include "recorder/recorder.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/perf_event.h>

#include "common/timezero.h"
#include "common/util.h"
#include "recorder/kallsyms.h"
#include "recorder/offcpu.h"
#include "recorder/procsynth.h"
#include "recorder/container.h"
#include "recorder/record_jvm.h"
#include "recorder/session_writer.h"
#include "recorder/unwinder.h"
#include "hv-glue/events.h"
#include "hv-glue/probe.h"
#include "hv-glue/steal.h"
#include "hv-glue/xen.h"
#include "sampler-kernel/sampler.h"

#ifndef VIPROF_VERSION
#define VIPROF_VERSION "0.0.0"
#endif

#define NSEC 1000000000ull
#define STEAL_INTERVAL_NS (100ull * 1000000)
#define FLUSH_INTERVAL_NS NSEC          /* a kill -9 loses at most about this much */
#define ALIVE_INTERVAL_NS (500ull * 1000000)
#define MAX_CPUS 4096

static uint64_t now_ns(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * NSEC + (uint64_t)ts.tv_nsec;
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

struct unwind_start {
	struct vp_unwind_sink *sink;
	const struct vp_record_opts *o;
	const pid_t *pids;
	int npids;
	struct vp_unwinder *u;
	int failed;              /* errno when the unwinder could not start */
	bool prewarm;            /* the command's files may be read by its name */
};

/* record -a: the processes that run a java launcher binary (the JVMs, in containers
 * too: their exe link names the file in their own mount namespace) go to the unwinder
 * now rather than at their first sample. Returns how many. */
static int add_java_processes(struct vp_unwinder *u)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d))) {
		char path[300], exe[PATH_MAX];

		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/exe", e->d_name);
		ssize_t k = readlink(path, exe, sizeof(exe) - 1);
		if (k < 5)
			continue;
		exe[k] = '\0';
		if (strcmp(exe + k - 5, "/java"))
			continue;
		vp_unwinder__add_pid(u, (pid_t)atoi(e->d_name));
		n++;
	}
	if (d)
		closedir(d);
	return n;
}

/* Called by the sampler between loading its program and enabling the events: the
 * tables of processes that already run (-p) are in place before their first sample.
 * record -a loads tables lazily, for the processes that show up in samples. */
static void start_unwinder(void *ctx, const struct sampler_unwind *uwm)
{
	struct unwind_start *us = ctx;

	us->u = vp_unwinder__new(uwm, us->o->target != RECORD_TARGET_ALL ? VP_UNWIND_EAGER
				 : us->o->unwind_sampled_only ? VP_UNWIND_SAMPLED : VP_UNWIND_LAZY);
	if (!us->u) {
		us->failed = errno;
		return;
	}
	us->sink->u = us->u;
	/* Not a launched command: it is held before exec (recorder.h), so its mappings are
	 * still its launcher's (viprof's own forty libraries), whose tables were read, copied
	 * into the walker's maps and thrown away at its exec, 13-20 ms of start-up CPU. Its
	 * exec's COMM record schedules it (vp_unwinder__observe), as does its first sample
	 * that finds no tables; the prewarm below builds its program's tables meanwhile. */
	for (int i = 0; i < us->npids; i++)
		if (!(us->o->target == RECORD_TARGET_LAUNCH && us->pids[i] == us->o->launched))
			vp_unwinder__add_pid(us->u, us->pids[i]);
	/* A launched command is still held: its files' tables are built before it runs.
	 * Not for the service's users: the name is only what a client says it runs, and
	 * root would resolve and open it (a device, a file in a directory only root may
	 * read); their command's tables are built from its mappings once it runs. */
	if (us->prewarm && us->o->target == RECORD_TARGET_LAUNCH && us->o->cmd && us->o->cmd[0])
		vp_unwinder__prewarm(us->u, us->o->cmd[0]);
	if (us->o->target != RECORD_TARGET_ALL) {
		vp_unwinder__settle(us->u, 10000);
	} else if (add_java_processes(us->u)) {
		/* The JVMs -a just gave the agent: their HotSpot layout is read before their
		 * first sample, so that their interpreted frames are named from the start
		 * (lazily, the first seconds of a busy VM's JVMs went unnamed). */
		vp_unwinder__settle(us->u, 5000);
	}
}

/* The session's time zero, when its sampling started (common/timezero.h). */
static int write_sampling_start(struct vp_session_writer *w, uint64_t start)
{
	char buf[32];
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)start);
	return vp_session_writer__meta(w, VP_META_SAMPLING_START, buf);
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

/* The session index of the steal estimate (common/steal_est.h), or 0: none. Only the
 * bpf sampler reads its timers' expiries, and only clock events have timers; the index
 * follows the switch tracer's two (steal, off-cpu: recorder/offcpu.c), which it never
 * shares a sample with. */
static uint32_t steal_est_event(const struct vp_record_opts *o, const struct sampler_config *cfg, const char *backend)
{
	if (o->no_steal_est || strcmp(backend, "bpf"))
		return 0;
	for (int i = 0; i < cfg->nr_events; i++)
		if (cfg->events[i].type == PERF_TYPE_SOFTWARE && (cfg->events[i].config == PERF_COUNT_SW_CPU_CLOCK ||
								  cfg->events[i].config == PERF_COUNT_SW_TASK_CLOCK))
			return (uint32_t)cfg->nr_events + 2;
	return 0;
}

static int write_metadata(struct vp_session_writer *w, const struct vp_record_opts *o, const char *backend, const char *backend_why, const char *event_why,
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
	META("cmdline", o->cmdline ? o->cmdline : "");
	META("target", target_name(o->target));
	if (o->xen_pmu_mode)
		META("xen.pmu_mode", o->xen_pmu_mode);
	if (o->target == RECORD_TARGET_LAUNCH && o->cmd) {
		size_t off = 0;
		buf[0] = '\0';
		for (int i = 0; o->cmd[i] && off < sizeof(buf); i++)
			off += (size_t)snprintf(buf + off, sizeof(buf) - off, "%s%s", i ? " " : "", o->cmd[i]);
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
	/* The agent's settings, for JFR's jdk.ActiveSetting events. */
	if (o->alloc_bytes) {
		snprintf(buf, sizeof(buf), "%llu", (unsigned long long)o->alloc_bytes);
		META("alloc.interval_bytes", buf);
	}
	if (o->lock) {
		snprintf(buf, sizeof(buf), "%llu", (unsigned long long)o->lock_ns);
		META("lock.threshold_ns", buf);
	}
	if (o->off_cpu) {   /* which off-CPU intervals the stream holds one by one */
		snprintf(buf, sizeof(buf), "%llu", (unsigned long long)VP_OFFCPU_SPLIT_NS);
		META("offcpu.split_ns", buf);
	}
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
	/* The vDSO is in no file: its image goes into the session, after the metadata, so
	 * that a report on another kernel still names its frames (perf keeps a copy in its
	 * build-id cache). */
	size_t vlen;
	const void *vdso = vp_vdso_image(&vlen);
	if (!e && vdso)
		e = vp_session_writer__emit(w, VP_REC_VDSO, start_mono, vdso, vlen);
	return e;
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

/* The kernel hides kallsyms addresses for two different reasons (kallsyms_show_value):
 * kptr_restrict, and, when that is 0, perf_event_paranoid > 1 for users without
 * CAP_SYSLOG. Name the one that applies, so the suggested fix actually works. */
static void warn_hidden_kallsyms(FILE *log)
{
	int kr = vp_read_int_file("/proc/sys/kernel/kptr_restrict", -1);
	int pp = vp_read_int_file("/proc/sys/kernel/perf_event_paranoid", -1);
	const char *fix;
	if (kr >= 2)
		fix = "sysctl kernel.kptr_restrict=0";
	else if (kr == 1)
		fix = "run as root (CAP_SYSLOG), or sysctl kernel.kptr_restrict=0";
	else
		fix = "run as root, or sysctl kernel.perf_event_paranoid=1";
	fprintf(log, "viprof: warning: /proc/kallsyms shows every address as 0 to this user (kptr_restrict=%d, "
			"perf_event_paranoid=%d); kernel frames will not be named; fix: %s\n", kr, pp, fix);
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
			  const struct sampler_config *cfg, FILE *log)
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
		fprintf(log, "viprof: warning: cannot read /proc/kallsyms (%s); kernel frames will not be named\n",
			strerror(errno));
	else if (all_zero && !sampler_config__user_only(cfg))
		warn_hidden_kallsyms(log);
	vp_session_writer__set_ksyms(w, ks);
}

/* JVMs started while recording get the agent (record_jvm__watch). */
#define WATCH_JVMS(o) ((o)->watch_jvms && (o)->target == RECORD_TARGET_ALL && !(o)->no_jit && (o)->agent && \
		       *(o)->agent)

struct vp_recorder {
	struct vp_record_opts o;     /* the caller's strings and arrays, not copied */
	FILE *log;
	struct sampler_config cfg;
	char why[512], event_why[512], err[1024];
	struct vp_session_writer *w;
	const struct sampler_backend *be;
	struct sampler *s;
	struct vp_unwind_sink unwind_sink;
	struct unwind_start unwind_start;
	struct vp_kallsyms_loader *ksl;
	struct vp_sched *sched;
	uint64_t *steal;
	pid_t launched;              /* cfg.pids points here for RECORD_TARGET_LAUNCH */
	uint64_t start, deadline, last_steal, last_alive_check;
	uint64_t lost_seen, last_resync;   /* resync_after_loss: the sampler's lost count, when */
	uint64_t sb_lost_seen;             /* ... and its side band's */
	uint64_t jvm_cpu_ns, rotate_cpu_ns;   /* vp_recorder_stats */
	uint64_t tables_ns, table_files;      /* ... the walker's, once it is freed */
	bool started;                /* sampling began: the session is kept from here on */
	bool halted;                 /* the sampler was stopped after a failure */
	bool stopped;                /* vp_recorder__stop ran */
	int exit_status;             /* for END */
	uint64_t samples_base, lost_base;   /* the sampler's counts when this session began (rotate) */
	struct vp_end end;
	struct record_jvm_lock jvm_lock;   /* held while the JVM agents write this session */
	struct record_jvm_watch jwatch;    /* o.watch_jvms: JVMs started while recording */
	struct vp_sink watched;            /* -a: where the recorder's sink (cfg.sink) passes records on */
	struct vp_procsynth_cache *pcache; /* -a, from the first rotation: the last scan's records */
	struct vp_container_sink *ctr;     /* labels processes with their containers, or NULL */
};

void vp_record_opts__defaults(struct vp_record_opts *o)
{
	*o = (struct vp_record_opts){
		.freq = RECORD_DEFAULT_FREQ,
		.output = RECORD_DEFAULT_DIR,
		.backend = "auto",
		.target = RECORD_TARGET_NONE,
	};
}

#define PRIVILEGE_FIX "; run as root, or grant CAP_PERFMON and CAP_BPF, or lower 'sysctl kernel.perf_event_paranoid'"

/* Events: parsed and live-checked before anything is created, so that a typo or an
 * event this VM cannot count costs nothing but one clear line. */
static int check_events(struct vp_recorder *r, char *err, size_t errlen)
{
	const struct vp_record_opts *o = &r->o;
	struct sampler_config *cfg = &r->cfg;

	if (o->events) {
		int n = vp_events__parse(o->events, cfg->events, VP_MAX_EVENTS, err, errlen);
		if (n < 0)
			return -EINVAL;
		cfg->nr_events = n;
	} else {
		if (vp_events__default(&cfg->events[0], r->event_why, sizeof(r->event_why)) != 0) {
			vp_set_err(err, errlen, "%s", r->event_why[0] ? r->event_why : "no event can be sampled here");
			return -EINVAL;
		}
		cfg->nr_events = 1;
	}
	for (int i = 0; i < cfg->nr_events; i++) {
		/* As in perf, -c/-F set the rate of every event without its own period=/freq= term. */
		if (!cfg->events[i].period && !cfg->events[i].freq) {
			cfg->events[i].freq = o->freq;
			cfg->events[i].period = o->period;
		}
		if (r->o.user_only)
			cfg->events[i].exclude_kernel = true;
		if (vp_events__check(&cfg->events[i], err, errlen) != 0)
			return -EINVAL;
	}
	return 0;
}

/* Processes that already run: their mappings predate any live MMAP event. The scan
 * comes after the sampler started, so that a process which execs or maps a library
 * between the scan and the start cannot fall between the two (the loader lets these
 * synthesized mappings serve samples stamped before them). */
static void scan_processes(struct vp_recorder *r, struct vp_sink *sink)
{
	const struct vp_record_opts *o = &r->o;
	struct vp_procsynth *ps = vp_procsynth__new();
	int e = 0;

	if (!ps) {
		e = -ENOMEM;
	} else if (o->target == RECORD_TARGET_ALL) {
		e = vp_procsynth__all(ps, now_ns(CLOCK_MONOTONIC), sink);
		e = e < 0 ? e : 0;
	} else if (o->target == RECORD_TARGET_PIDS) {
		for (int i = 0; i < o->npids && !e; i++) {
			e = vp_procsynth__process(ps, o->pids[i], now_ns(CLOCK_MONOTONIC), sink);
			if (e == -ESRCH)
				e = 0;   /* exited since the check: its EXIT comes from the sampler */
		}
	}
	vp_procsynth__free(ps);
	if (e)
		fprintf(r->log, "viprof: warning: cannot read the running processes' mappings (%s); "
				"their native frames will show as [unknown]\n", strerror(-e));
}

/* At a rotation, -a: the processes that did not change since the last rotation (by
 * the side band) are replayed from what it read, the rest read from /proc. */
static void rescan_processes(struct vp_recorder *r, struct vp_sink *sink)
{
	struct vp_procsynth *ps = vp_procsynth__new();
	int e = 0;

	if (!r->pcache)
		r->pcache = vp_procsynth_cache__new();
	if (!ps || !r->pcache) {
		e = -ENOMEM;
	} else {
		e = vp_procsynth_cache__all(r->pcache, ps, now_ns(CLOCK_MONOTONIC), sink, NULL);
		e = e < 0 ? e : 0;
	}
	vp_procsynth__free(ps);
	if (e)
		fprintf(r->log, "viprof: warning: cannot read the running processes' mappings (%s); "
				"their native frames will show as [unknown]\n", strerror(-e));
}

/* The session writer (the owner's streams, a directory under session_dirfd, or a
 * new directory), and the kernel's symbols read on a thread of their own from here on
 * (the most costly step of starting: ~60 ms of kernel time), while the sampler loads
 * and the command runs; the session gets them when they are ready, at the latest at
 * the end. */
static int open_session(struct vp_recorder *r, int session_dirfd, const struct vp_recorder_owner *owner, char *err,
			size_t errlen)
{
	const struct vp_record_opts *o = &r->o;
	struct sampler_config *cfg = &r->cfg;
	r->ksl = o->user_only ? NULL : vp_kallsyms_loader__start(NULL);
	if (owner)
		r->w = vp_session_writer__create_stream(owner->stream_fd, owner->meta_fd, o->output, 0, err, errlen);
	else if (session_dirfd >= 0)
		r->w = vp_session_writer__create_at(session_dirfd, o->output, 0, err, errlen);
	else
		r->w = vp_session_writer__create(o->output, o->force, 0, err, errlen);
	if (!r->w)
		return -errno;
	if (r->ksl)
		vp_session_writer__defer_ksyms(r->w);
	else if (!o->user_only)
		take_kallsyms(&r->ksl, r->w, cfg, r->log);   /* no thread: read them here */
	return 0;
}

/* The sampler's configuration from the options, and the sinks every record passes
 * on its way to the session. */
/* With -a, every record passes here first: a libjvm.so mapped is a JVM starting, for
 * the watch (on the recording's thread, which drains the side band) ... */
static int watch_emit(void *ctx, uint32_t type, uint64_t time, const void *body, size_t len)
{
	struct vp_recorder *r = ctx;

	if (type == VP_REC_SAMPLE)
		return r->watched.emit(r->watched.ctx, type, time, body, len);
	if (type == VP_REC_MMAP && WATCH_JVMS(&r->o))
		record_jvm__watch_mmap(&r->jwatch, body, len, now_ns(CLOCK_MONOTONIC));
	/* ... and a process that changed is read again at the next rotation. */
	vp_procsynth_cache__observe(r->pcache, type, body, len);
	return r->watched.emit(r->watched.ctx, type, time, body, len);
}

static void configure_sampler(struct vp_recorder *r, const struct vp_recorder_owner *owner)
{
	const struct vp_record_opts *o = &r->o;
	struct sampler_config *cfg = &r->cfg;

	cfg->callchain = o->callchain;
	cfg->unwind = o->callchain && !o->fp_walk;
	/* Steal-time victim attribution needs who ran when; the service asks for switch
	 * records only when it records off-CPU time (each costs per context switch of the VM). */
	cfg->want_switches = !o->switches_if_off_cpu || o->off_cpu;
	/* Benchmarks measure what the switch tracer costs by leaving it out
	 * (bench/suite.py service): steal is then neither measured per thread nor split. */
	if (!o->off_cpu && getenv("VIPROF_DEBUG_NO_SWITCHES"))
		cfg->want_switches = false;
	/* The walker takes its tables from samples, not from the sideband: the sideband can
	 * wait for the next drain instead of waking the recorder at every mmap of the VM. */
	cfg->sideband_batched = o->unwind_sampled_only;
	cfg->buffer_pages = o->ring_pages;
	cfg->guest_modes = o->xen_pmu_mode && !strcmp(o->xen_pmu_mode, "all");   /* bpf declines: perf */
	cfg->want_sideband = true;
	/* Every record passes the unwinder on its way to the session, so that it learns of
	 * new processes and mappings (it is attached once the sampler has started). */
	r->unwind_sink.next = vp_session_writer__sink(r->w);
	/* ... and the container labeller, which adds a process's cgroup and namespaces
	 * before its first record in the session. */
	if ((r->ctr = vp_container_sink__new(r->unwind_sink.next))) {
		if (o->unwind_sampled_only)   /* the service: only what is sampled costs */
			vp_container_sink__set_lazy(r->ctr);
		r->unwind_sink.next = vp_container_sink__sink(r->ctr);
	}
	cfg->sink = vp_unwind_sink(&r->unwind_sink);
	if (o->target == RECORD_TARGET_ALL) {
		r->watched = cfg->sink;
		cfg->sink = (struct vp_sink){ .emit = watch_emit, .ctx = r };
	}
	r->unwind_start = (struct unwind_start){ .sink = &r->unwind_sink, .o = o, .prewarm = !owner };
	cfg->before_sampling = start_unwinder;
	cfg->before_ctx = &r->unwind_start;
}

/* Whom to sample: a user of the service their own processes only; -a, -p or the
 * launched command. */
static int set_target(struct vp_recorder *r, const struct vp_recorder_owner *owner, char *err, size_t errlen)
{
	const struct vp_record_opts *o = &r->o;
	struct sampler_config *cfg = &r->cfg;
	int e;

	/* For a user of the service: their processes only, whatever the target grows into
	 * (a set-uid program they start is not theirs), and never the whole VM. */
	if (owner && owner->uid != 0) {
		if (o->target == RECORD_TARGET_ALL) {
			vp_set_err(err, errlen, "-a records every user's processes: only root may ask for it");
			e = -EPERM;
			return e;
		}
		cfg->filter_uid = true;
		cfg->only_uid = owner->uid;
		/* Only the bpf sampler filters by user (tasks, side band, set-uid execs): the
		 * perf one would record whatever the pids grow into. */
		r->o.backend = "bpf";
	}
	switch (o->target) {
	case RECORD_TARGET_ALL:
		cfg->target = SAMPLER_TARGET_ALL;
		break;
	case RECORD_TARGET_PIDS:
		cfg->target = SAMPLER_TARGET_PIDS;
		cfg->pids = o->pids;
		cfg->nr_pids = o->npids;
		break;
	case RECORD_TARGET_LAUNCH:
		if (o->launched <= 0) {
			vp_set_err(err, errlen, "no launched process to record (the caller launches the command)");
			e = -ESRCH;
			return e;
		}
		cfg->target = SAMPLER_TARGET_LAUNCH;
		r->launched = o->launched;
		cfg->pids = &r->launched;
		cfg->nr_pids = 1;
		break;
	default:
		vp_set_err(err, errlen, "nothing to record: give -a, -p PID or a command");
		e = -ENOENT;
		return e;
	}
	return 0;
}

/* The sampler backend, and the session's metadata and events (which name it). */
static int select_backend(struct vp_recorder *r, uint64_t start_real, char *err, size_t errlen)
{
	const struct vp_record_opts *o = &r->o;
	struct sampler_config *cfg = &r->cfg;
	int e;

	r->be = sampler__select(o->backend, cfg, r->why, sizeof(r->why));
	if (!r->be) {
		vp_set_err(err, errlen, "%s%s%s", strstr(r->why, "no sampler backend") ? "" : "no sampler backend can run here: ",
			   r->why, geteuid() != 0 && !names_privilege_fix(r->why) ? PRIVILEGE_FIX : "");
		e = -EPERM;
		return e;
	}
	e = write_metadata(r->w, o, r->be->name, r->why, o->events ? NULL : r->event_why, r->start, start_real);
	for (int i = 0; !e && i < cfg->nr_events; i++)
		e = vp_session_writer__event(r->w, &cfg->events[i]);
	cfg->steal_est_event = steal_est_event(o, cfg, r->be->name);
	if (!e && cfg->steal_est_event)
		e = vp_session_writer__estimate_event(r->w, cfg->steal_est_event);
	if (e) {
		vp_set_err(err, errlen, "cannot write the session in %s: %s", vp_session_writer__dir(r->w), strerror(-e));
		return e;
	}
	return 0;
}

/* Running JVMs get the agent before sampling starts, so that every sample of their
 * JIT code falls after the code maps began. */
static int attach_jvms(struct vp_recorder *r, const struct vp_recorder_owner *owner, char *err, size_t errlen)
{
	const struct vp_record_opts *o = &r->o;
	int e;

	if (owner) {
		/* The user's client attached its own JVMs (as that user); their records. */
		for (int i = 0; i < owner->njvms; i++) {
			char body[sizeof(struct vp_jvm) + 32];
			struct vp_jvm *j = (struct vp_jvm *)body;
			memset(body, 0, sizeof(body));
			j->pid = (uint32_t)owner->jvms[i].pid;
			j->flags = owner->jvms[i].flags & (VP_JVM_AGENT_LOADED | VP_JVM_NO_FRAME_POINTERS | VP_JVM_ATTACH_REFUSED);
			int n = snprintf(j->maps_dir, sizeof(body) - sizeof(*j), VP_SESSION_JIT_DIR "/%d", (int)j->pid);
			if ((e = vp_session_writer__emit(r->w, VP_REC_JVM, now_ns(CLOCK_MONOTONIC), body,
							 sizeof(*j) + (size_t)n + 1))) {
				vp_set_err(err, errlen, "cannot write the session's stream: %s", strerror(-e));
				return e;
			}
		}
	} else if (o->target != RECORD_TARGET_LAUNCH && !o->no_jit) {
		if (!o->agent || !*o->agent) {
			fprintf(r->log, "viprof: warning: the JVM agent libviprof-jvmti.so was not found next to viprof; "
					"Java methods will not be named (build it, or set VIPROF_AGENT=/path/to/libviprof-jvmti.so)\n");
		} else {
			e = record_jvm__attach(r->w, &r->jvm_lock, o->pids, o->npids, o->target == RECORD_TARGET_ALL, o->agent, o);
			if (e < 0) {
				vp_set_err(err, errlen, "cannot write the session in %s: %s",
					   vp_session_writer__dir(r->w), strerror(-e));
				return e;
			}
			/* From here the watch looks for JVMs that start later (its first look
			 * takes what runs now as the attach's above). */
			if (WATCH_JVMS(o))
				record_jvm__watch(&r->jwatch, r->w, &r->jvm_lock, o->agent, o, now_ns(CLOCK_MONOTONIC));
		}
	}
	return 0;
}

/* The switch tracer, then the sampler; time zero from here. */
static int start_sampling(struct vp_recorder *r, char *err, size_t errlen)
{
	const struct vp_record_opts *o = &r->o;
	struct sampler_config *cfg = &r->cfg;
	int e;

	if (cfg->want_switches &&
	    (e = record_sched__start(cfg, o->off_cpu, o->quiet, r->log, &r->sched, r->err, sizeof(r->err)))) {
		vp_set_err(err, errlen, "--off-cpu: %s", r->err);
		r->err[0] = '\0';
		return e;
	}
	/* With the switch tracer measuring steal per thread, the sampler's record of every
	 * context switch of the VM (for the proportional split, which the report then
	 * skips) would be read by nobody: 50-120 thousand per javac run on a busy VM, each
	 * a BPF run charged to the task switching and a record for this process to drain. */
	if (r->sched)
		cfg->want_switches = false;
	vp_timing("record: switch tracer started");
	r->s = r->be->start(cfg, r->err, sizeof(r->err));
	if (!r->s) {
		e = errno ? -errno : -EIO;
		vp_set_err(err, errlen, "%s backend: %s%s", r->be->name, r->err,
			   geteuid() != 0 && !names_privilege_fix(r->err) ? PRIVILEGE_FIX : "");
		r->err[0] = '\0';
		return e;
	}
	r->started = true;
	vp_timing("record: sampler started");
	if (r->unwind_start.failed)
		fprintf(r->log, "viprof: warning: cannot start the stack walker's table loader (%s); "
				"user stacks will follow frame pointers only\n", strerror(r->unwind_start.failed));
	/* Durations (-d, the status line, END) count from here, not from the setup above;
	 * the switch tracer charges time from here on too. */
	r->start = now_ns(CLOCK_MONOTONIC);
	record_sched__window(r->sched, r->start, 0);
	/* Every view's time zero (common/timezero.h): written before the first drain, so
	 * that it precedes every sample in the stream. */
	if ((e = write_sampling_start(r->w, r->start))) {
		vp_set_err(err, errlen, "cannot write the session in %s: %s", vp_session_writer__dir(r->w), strerror(-e));
		return e;
	}
	return 0;
}

static struct vp_recorder *start(const struct vp_record_opts *opts, int session_dirfd,
				 const struct vp_recorder_owner *owner, char *err, size_t errlen)
{
	struct vp_recorder *r = calloc(1, sizeof(*r));
	struct sampler_config *cfg;
	bool checked = false;   /* past the usage checks: -EINVAL no longer means "usage" */
	bool streams_taken = false;   /* owner's fds are the session writer's */
	int e;

	if (!r) {
		vp_set_err(err, errlen, "out of memory");
		if (owner) {
			close(owner->stream_fd);
			close(owner->meta_fd);
		}
		return NULL;
	}
	r->jvm_lock.fd = -1;
	r->o = *opts;
	r->log = opts->log ? opts->log : stderr;
	cfg = &r->cfg;
	const struct vp_record_opts *o = &r->o;

	if ((e = check_events(r, err, errlen)))
		goto fail;
	/* Xen decides in dom0 whose samples the PMU interrupt delivers (this domain only,
	 * also the hypervisor, or every domain); set it before any event is opened, and
	 * put the old one back at exit, whatever the exit. */
	if (o->xen_pmu_mode && vp_xen__push_pmu_mode(o->xen_pmu_mode, err, errlen) != 0) {
		e = -EINVAL;
		goto fail;
	}
	checked = true;
	if (!o->events && !o->quiet) {
		if (o->period)
			fprintf(r->log, "viprof: sampling %s every %llu: %s\n", cfg->events[0].name,
				(unsigned long long)o->period, r->event_why);
		else
			fprintf(r->log, "viprof: sampling %s at %llu Hz: %s\n", cfg->events[0].name,
				(unsigned long long)o->freq, r->event_why);
	}

	vp_timing("record: options and events checked");
	streams_taken = owner != NULL;
	if ((e = open_session(r, session_dirfd, owner, err, errlen)))
		goto fail;

	uint64_t start_real = now_ns(CLOCK_REALTIME);
	r->start = now_ns(CLOCK_MONOTONIC);
	configure_sampler(r, owner);
	if ((e = set_target(r, owner, err, errlen)))
		goto fail;

	vp_timing("record: session created");
	r->unwind_start.pids = cfg->pids;
	r->unwind_start.npids = cfg->nr_pids;
	if ((e = select_backend(r, start_real, err, errlen)))
		goto fail;

	/* A -p target that is gone is refused before anything is recorded. */
	for (int i = 0; o->target == RECORD_TARGET_PIDS && i < o->npids; i++) {
		if (kill(o->pids[i], 0) != 0 && errno == ESRCH) {
			e = vp_err_no_process(err, errlen, (long)o->pids[i]);
			goto fail;
		}
	}

	if ((e = attach_jvms(r, owner, err, errlen)))
		goto fail;

	vp_timing("record: backend selected, metadata written");
	if ((e = start_sampling(r, err, errlen)))
		goto fail;
	scan_processes(r, &r->cfg.sink);
	r->steal = calloc(MAX_CPUS, sizeof(*r->steal));
	if (r->steal)
		steal_snapshot(r->w, r->steal, MAX_CPUS);
	vp_timing("record: processes scanned, steal read");
	r->last_steal = now_ns(CLOCK_MONOTONIC);
	r->deadline = o->duration > 0 ? r->start + (uint64_t)(o->duration * 1e9) : 0;
	return r;

fail:
	if (owner && !streams_taken) {
		close(owner->stream_fd);
		close(owner->meta_fd);
	}
	vp_recorder__free(r);
	/* errno EINVAL tells the caller "usage error" (exit 2): only for options and events. */
	errno = checked && e == -EINVAL ? EIO : e < 0 ? -e : EIO;
	return NULL;
}

struct vp_recorder *vp_recorder__start(const struct vp_record_opts *opts, int session_dirfd, char *err, size_t errlen)
{
	return start(opts, session_dirfd, NULL, err, errlen);
}

struct vp_recorder *vp_recorder__start_owned(const struct vp_record_opts *opts, const struct vp_recorder_owner *owner,
					     char *err, size_t errlen)
{
	return start(opts, -1, owner, err, errlen);
}

/* After a failure: sampling stops at once (a full disk, a broken sampler), and what
 * was written stays readable. */
static int fail_poll(struct vp_recorder *r, int e)
{
	if (!r->halted) {
		r->be->stop(r->s);
		r->halted = true;
	}
	return e < 0 ? e : -EIO;
}

/* Records lost in the sampler's ring (a consumer starved on a busy machine) may be the
 * MMAP records of an exec: every later sample of that process would be [unknown]. After
 * a loss, the recorded processes' mappings are read again from /proc, at most once a
 * second; the loader lets synthesized mappings serve the samples before them. Not for a
 * user's recording through the service (filter_uid): the sampler decides which of a
 * user's mappings may be shown (an execute-only program's are not), /proc does not. */
static void resync_after_loss(struct vp_recorder *r, uint64_t now)
{
	const struct vp_record_opts *o = &r->o;
	uint64_t samples = 0, lost = 0;

	if (r->cfg.filter_uid || now - r->last_resync < 1000000000ull)
		return;
	r->be->counts(r->s, &samples, &lost);
	uint64_t sb = r->be->sideband_lost ? r->be->sideband_lost(r->s) : lost;
	if (r->be->sideband_lost)   /* the BPF backend's MMAP records are not in its sample ring */
		lost += sb;
	if (lost <= r->lost_seen)
		return;
	r->lost_seen = lost;
	vp_procsynth_cache__invalidate(r->pcache);   /* an exec or a mapping may be among them */
	/* A JVM's libjvm.so mapping may be among the records lost: the watch lists /proc. */
	if (WATCH_JVMS(o) && sb > r->sb_lost_seen)
		record_jvm__watch_lost(&r->jwatch);
	r->sb_lost_seen = sb;
	r->last_resync = now;
	struct vp_procsynth *ps = vp_procsynth__new();
	if (!ps)
		return;
	if (o->target == RECORD_TARGET_ALL)
		(void)vp_procsynth__all(ps, now, &r->cfg.sink);
	else if (o->target == RECORD_TARGET_LAUNCH)
		(void)vp_procsynth__process(ps, r->launched, now, &r->cfg.sink);
	else if (o->target == RECORD_TARGET_PIDS)
		for (int i = 0; i < o->npids; i++)
			(void)vp_procsynth__process(ps, o->pids[i], now, &r->cfg.sink);
	vp_procsynth__free(ps);
}

int vp_recorder__poll(struct vp_recorder *r, int timeout_ms)
{
	const struct vp_record_opts *o = &r->o;
	int e;

	if (r->halted || r->stopped)
		return r->halted ? -EIO : 0;
	int n = r->be->poll(r->s, timeout_ms);
	uint64_t now = now_ns(CLOCK_MONOTONIC);
	if (n < 0 && n != -EINTR) {
		e = vp_session_writer__error(r->w);
		if (e)
			vp_set_err(r->err, sizeof(r->err), "cannot write the session stream (%s: %s); stopping "
				   "(what was written stays readable)", vp_session_writer__dir(r->w), strerror(-e));
		else
			vp_set_err(r->err, sizeof(r->err), "the sampler failed; stopping (what was recorded stays readable)");
		return fail_poll(r, e ? e : n);
	}
	if ((e = record_sched__poll(r->sched, now)) < 0) {
		vp_set_err(r->err, sizeof(r->err), "cannot write the switch tracer's records; stopping");
		return fail_poll(r, e);
	}
	resync_after_loss(r, now);
	if (r->ksl && vp_kallsyms_loader__done(r->ksl))
		take_kallsyms(&r->ksl, r->w, &r->cfg, r->log);
	if (r->steal && now - r->last_steal >= STEAL_INTERVAL_NS) {
		steal_snapshot(r->w, r->steal, MAX_CPUS);
		r->last_steal = now;
	}
	if (vp_session_writer__maybe_flush(r->w, now, FLUSH_INTERVAL_NS)) {
		e = vp_session_writer__error(r->w);
		vp_set_err(r->err, sizeof(r->err), "cannot write %s: %s; stopping", vp_session_writer__dir(r->w),
			   strerror(-e));
		return fail_poll(r, e);
	}
	if (r->deadline && now >= r->deadline)
		return 0;
	/* A JVM that started since the last look gets the agent now, not at the next
	 * session: a service's whole start-up would otherwise go unnamed. */
	if (WATCH_JVMS(o) && now >= r->jwatch.next_ns) {
		uint64_t c0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
		e = record_jvm__watch(&r->jwatch, r->w, &r->jvm_lock, o->agent, o, now);
		r->jvm_cpu_ns += now_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
		if (e < 0) {
			vp_set_err(r->err, sizeof(r->err), "cannot write the session in %s: %s; stopping",
				   vp_session_writer__dir(r->w), strerror(-e));
			return fail_poll(r, e);
		}
	}
	if (o->target == RECORD_TARGET_PIDS && now - r->last_alive_check >= ALIVE_INTERVAL_NS) {
		r->last_alive_check = now;
		if (!any_alive(o->pids, o->npids))
			return 0;   /* like perf: nothing left to profile */
	}
	return 1;
}

/* The old session's end at a rotation: what stop writes after the sampler is drained,
 * without stopping it. Messages go to the log; 0 or -errno. */
static int finish_session(struct vp_recorder *r, struct vp_session_writer *w, struct vp_kallsyms_loader **ksl,
			  uint64_t start, uint64_t lost_base, uint64_t end_time)
{
	uint64_t samples = 0, lost = 0;
	char err[1024];
	int e;

	r->be->counts(r->s, &samples, &lost);
	if (*ksl)
		take_kallsyms(ksl, w, &r->cfg, r->log);
	if (r->steal)
		steal_snapshot(w, r->steal, MAX_CPUS);
	struct vp_end end = { .lost = lost - lost_base, .duration_ns = end_time - start, .window_start = start };
	if ((e = vp_session_writer__finish(w, end_time, &end, err, sizeof(err))))
		fprintf(r->log, "viprof record: %s\n", err);
	return e;
}

int vp_recorder__set_freq(struct vp_recorder *r, uint64_t freq)
{
	if (r->stopped || r->halted || r->o.events || r->o.period || !r->be->set_freq)
		return -ENOTSUP;   /* an event with its own rate term, or the perf backend */
	int e = r->be->set_freq(r->s, freq);
	if (e)
		return e;
	/* The next session's EVENT records say the new rate (reports weigh samples by it). */
	for (int i = 0; i < r->cfg.nr_events; i++)
		r->cfg.events[i].freq = freq;
	r->o.freq = freq;
	return 0;
}

int vp_recorder__rotate(struct vp_recorder *r, int session_dirfd, const char *name, char *err, size_t errlen)
{
	const struct vp_record_opts *o = &r->o;
	struct vp_kallsyms_loader *nksl = NULL;
	struct record_jvm_lock nlock = { .fd = -1 };
	int e;

	if (r->stopped || r->halted) {
		vp_set_err(err, errlen, "the recording has %s; nothing to rotate", r->stopped ? "ended" : "failed");
		return -EINVAL;
	}
	uint64_t rot0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
	/* Everything the kernel has buffered so far belongs to the old session: drained
	 * until a pass finds nothing (bounded: new samples keep coming). */
	int n = 0;
	for (int i = 0; i < 64 && (n = r->be->poll(r->s, 0)) > 0; i++)
		;
	if (n < 0 && n != -EINTR) {
		vp_set_err(err, errlen, "the sampler failed before the rotation; stopping");
		return fail_poll(r, n);
	}
	if ((e = record_sched__poll(r->sched, now_ns(CLOCK_MONOTONIC))) < 0) {
		vp_set_err(err, errlen, "cannot write the switch tracer's records; stopping");
		return fail_poll(r, e);
	}

	/* The next session, complete with its metadata, before anything is switched: a
	 * session that cannot be created leaves the old one recording. */
	struct vp_session_writer *nw = vp_session_writer__create_at(session_dirfd, name, 0, err,
								    errlen);
	if (!nw)
		return errno ? -errno : -EIO;
	uint64_t start_real = now_ns(CLOCK_REALTIME), start_mono = now_ns(CLOCK_MONOTONIC);
	e = write_metadata(nw, o, r->be->name, r->why, o->events ? NULL : r->event_why, start_mono, start_real);
	for (int i = 0; !e && i < r->cfg.nr_events; i++)
		e = vp_session_writer__event(nw, &r->cfg.events[i]);
	if (!e && r->cfg.steal_est_event)
		e = vp_session_writer__estimate_event(nw, r->cfg.steal_est_event);
	if (e) {
		vp_set_err(err, errlen, "cannot write the session in %s: %s", vp_session_writer__dir(nw), strerror(-e));
		vp_session_writer__discard(nw);
		vp_session_writer__free(nw);
		return e;
	}
	/* Kernel symbols are read again for each session (modules come and go, and each
	 * session must stand alone), on the loader thread as at start. */
	nksl = o->user_only ? NULL : vp_kallsyms_loader__start(NULL);
	if (nksl)
		vp_session_writer__defer_ksyms(nw);
	else if (!o->user_only)
		take_kallsyms(&nksl, nw, &r->cfg, r->log);

	/* The switch: from here every record goes to the new session. The sampler, the
	 * switch tracer and the stack walker stay as they are (one sink pointer moves). */
	struct vp_session_writer *ow = r->w;
	struct vp_kallsyms_loader *oksl = r->ksl;
	struct record_jvm_lock olock = r->jvm_lock;
	uint64_t ostart = r->start, olost = r->lost_base, end_time = now_ns(CLOCK_MONOTONIC);
	if (r->ctr)
		vp_container_sink__retarget(r->ctr, vp_session_writer__sink(nw));
	else
		r->unwind_sink.next = vp_session_writer__sink(nw);
	r->w = nw;
	r->ksl = nksl;
	r->start = end_time;
	if ((e = write_sampling_start(nw, end_time)))   /* a failed write stays sticky in nw: its finish says so */
		fprintf(r->log, "viprof: warning: cannot write the sampling start of %s: %s\n", vp_session_writer__dir(nw),
			strerror(-e));
	r->be->counts(r->s, &r->samples_base, &r->lost_base);
	r->last_steal = end_time;
	/* The switch tracer's events (steal, off-cpu) are the new session's too. */
	if ((e = record_sched__rotated(r->sched)))
		fprintf(r->log, "viprof: warning: cannot declare the switch tracer's events in %s: %s\n",
			vp_session_writer__dir(nw), strerror(-e));

	/* What the new session needs to stand alone: the processes and mappings that
	 * exist (written straight to the session: the stack walker knows them already),
	 * a steal baseline, and the JVMs' code maps: an attach to a JVM that has the
	 * agent moves it to this session's jit/<pid>/ with its live code replayed. */
	/* Through the container labeller (pointed at nw already): the new session gets its
	 * processes' containers and their threads' namespace tids too. */
	struct vp_sink ws = r->ctr ? vp_container_sink__sink(r->ctr) : vp_session_writer__sink(nw);
	if (o->target == RECORD_TARGET_ALL)
		rescan_processes(r, &ws);
	else
		scan_processes(r, &ws);
	if (r->steal)
		steal_snapshot(nw, r->steal, MAX_CPUS);
	r->jvm_lock = nlock;
	record_jvm__carry(&olock, &r->jvm_lock);   /* the agents' channels serve the new session */
	if (o->target != RECORD_TARGET_LAUNCH && !o->no_jit && o->agent && *o->agent) {
		uint64_t c0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
		e = record_jvm__attach(nw, &r->jvm_lock, o->pids, o->npids, o->target == RECORD_TARGET_ALL, o->agent, o);
		r->jvm_cpu_ns += now_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
		if (e < 0)
			fprintf(r->log, "viprof: warning: cannot give the JVMs' code maps to %s: %s\n",
				vp_session_writer__dir(nw), strerror(-e));
	}

	/* A failure to end the old session is logged by finish_session: it stays readable
	 * to its last chunk, and recording goes on in the new one. */
	finish_session(r, ow, &oksl, ostart, olost, end_time);
	record_jvm__end(&olock);   /* agents not moved to the new session end the old maps */
	vp_session_writer__free(ow);
	r->rotate_cpu_ns += now_ns(CLOCK_THREAD_CPUTIME_ID) - rot0;
	return 0;
}

void vp_recorder__set_exit_status(struct vp_recorder *r, int wait_status)
{
	if (WIFEXITED(wait_status))
		r->exit_status = WEXITSTATUS(wait_status);
	else if (WIFSIGNALED(wait_status))
		r->exit_status = 128 + WTERMSIG(wait_status);
	else
		r->exit_status = 1;
}

/* The stack walker's summary, then frees it: it writes into the sampler's maps. */
static void finish_unwinder(struct vp_recorder *r)
{
	struct vp_unwinder *uw = r->unwind_start.u;
	struct vp_unwinder_stats us;

	if (!uw)
		return;
	vp_unwinder__stats(uw, &us);
	r->tables_ns = us.parse_ns;   /* vp_recorder__stats after the walker is gone */
	r->table_files = us.files;
	if (!r->o.quiet)
		fprintf(r->log, "viprof: stack walker: unwind tables of %llu files (%llu rules, %.0f ms to build, "
				"%llu of them from the unwind-rule cache), %llu JVM(s) understood; %llu reads of mappings, "
				"%llu code-heap mmaps needed none\n", (unsigned long long)us.files,
			(unsigned long long)us.rules, (double)us.parse_ns / 1e6, (unsigned long long)us.cached,
			(unsigned long long)us.jvms, (unsigned long long)us.refreshes, (unsigned long long)us.mmaps_skipped);
	if (us.table_full)
		fprintf(r->log, "viprof: warning: %llu files' unwind tables did not fit the walker's maps; "
				"their frames were walked by frame pointer\n", (unsigned long long)us.table_full);
	if (us.cfi_refused)
		fprintf(r->log, "viprof: warning: the unwind information of %llu mapped files was refused as crafted "
				"or damaged (last: %s); their frames have no unwind rules\n",
			(unsigned long long)us.cfi_refused, us.cfi_error);
	if (us.jvm_failed)
		fprintf(r->log, "viprof: warning: the walker could not read HotSpot's layout of %llu JVM(s) (%s); "
				"their Java frames need -XX:+PreserveFramePointer\n",
			(unsigned long long)us.jvm_failed, us.jvm_error);
	vp_unwinder__free(uw);
	r->unwind_start.u = NULL;
}

int vp_recorder__stop(struct vp_recorder *r)
{
	uint64_t samples = 0, lost = 0;
	int ret = 0;

	if (r->stopped)
		return -EALREADY;
	r->stopped = true;
	/* The last steal reading closes the sampling window, before the switch tracer
	 * stops: /proc/stat's window then lies inside the tracer's, and the teardown below
	 * (draining, unwind tables, kallsyms: a loaded VM's steal goes on during it) is in
	 * neither. */
	if (r->steal)
		steal_snapshot(r->w, r->steal, MAX_CPUS);
	/* The window END's duration measures: the switch tracer charges nothing after it. */
	uint64_t window_end = now_ns(CLOCK_MONOTONIC);
	record_sched__window(r->sched, 0, window_end);
	if (r->be->stop(r->s) < 0 && !r->halted) {
		fprintf(r->log, "viprof record: the sampler failed while draining its buffers; the session may miss the last samples\n");
		ret = -EIO;
	}
	if (record_sched__finish(r->sched, r->o.quiet, r->log) < 0 && !r->halted && !ret) {
		fprintf(r->log, "viprof record: cannot write the switch tracer's last records\n");
		ret = -EIO;
	}
	r->sched = NULL;
	vp_timing("record: sampler stopped and drained");
	r->be->counts(r->s, &samples, &lost);
	finish_unwinder(r);
	vp_timing("record: stack walker freed");
	if (r->ksl)
		take_kallsyms(&r->ksl, r->w, &r->cfg, r->log);   /* the samples' KSYM records go in before END */
	uint64_t end_time = now_ns(CLOCK_MONOTONIC);
	r->end = (struct vp_end){
		.lost = lost - r->lost_base,
		.duration_ns = window_end - r->start,
		.window_start = r->start,
		.exit_status = (uint32_t)r->exit_status,
	};
	if (vp_session_writer__finish(r->w, end_time, &r->end, r->err, sizeof(r->err))) {
		fprintf(r->log, "viprof record: %s\n", r->err);
		ret = ret ? ret : -EIO;
	}
	record_jvm__end(&r->jvm_lock);   /* attached JVM agents finish this session's maps and go idle */
	vp_timing("record: session finished");
	return r->halted && !ret ? -EIO : ret;
}

void vp_recorder__free(struct vp_recorder *r)
{
	if (!r)
		return;
	record_jvm__watch_free(&r->jwatch);
	vp_procsynth_cache__free(r->pcache);
	if (r->ksl)
		take_kallsyms(&r->ksl, NULL, &r->cfg, r->log);
	/* The unwinder writes into the sampler's maps: it goes first. */
	vp_unwinder__free(r->unwind_start.u);
	record_sched__free(r->sched);
	if (r->s)
		r->be->destroy(r->s);
	if (!r->started && r->w) {
		/* Nothing was recorded: leave no half-made session behind to trip --force
		 * (an empty directory the user gave us stays, empty). Through the session's
		 * directory fds, never by path. */
		vp_session_writer__discard(r->w);
		r->w = NULL;
	}
	vp_session_writer__free(r->w);
	vp_container_sink__free(r->ctr);
	record_jvm__end(&r->jvm_lock);
	free(r->steal);
	free(r);
}

void vp_recorder__stats(const struct vp_recorder *r, struct vp_recorder_stats *st)
{
	uint64_t samples = 0, lost = 0;

	*st = (struct vp_recorder_stats){ 0 };
	if (r->stopped) {
		st->samples = r->end.samples;
		st->lost = r->end.lost;
		st->elapsed_ns = r->end.duration_ns;
		st->disk_bytes = vp_session_writer__disk_bytes(r->w);
	} else {
		r->be->counts(r->s, &samples, &lost);
		st->samples = samples - r->samples_base;
		st->lost = lost - r->lost_base;
		st->elapsed_ns = now_ns(CLOCK_MONOTONIC) - r->start;
	}
	st->stream_bytes = vp_session_writer__bytes(r->w);
	st->jvm_cpu_ns = r->jvm_cpu_ns;
	st->rotate_cpu_ns = r->rotate_cpu_ns;
	st->tables_ns = r->tables_ns;
	st->table_files = r->table_files;
	if (r->unwind_start.u) {
		struct vp_unwinder_stats us;
		vp_unwinder__stats(r->unwind_start.u, &us);
		st->tables_ns = us.parse_ns;
		st->table_files = us.files;
	}
	st->written = vp_session_writer__samples_written(r->w);
}

const char *vp_recorder__error(const struct vp_recorder *r)
{
	return r->err;
}

const char *vp_recorder__session_dir(const struct vp_recorder *r)
{
	return vp_session_writer__dir(r->w);
}

const char *vp_recorder__backend(const struct vp_recorder *r)
{
	return r->be->name;
}
