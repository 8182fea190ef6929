/* The perf backend: plain perf_event_open and mmap rings, no BPF, for users and
 * containers that may not load BPF programs. Samples and sideband share one ring per
 * CPU; every other fd on that CPU is redirected into it (PERF_EVENT_IOC_SET_OUTPUT),
 * as perf record does. */
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/sysinfo.h>
#include <time.h>
#include <unistd.h>
#include "common/session_format.h"
#include "common/util.h"
#include "sampler-kernel/perf_ring.h"
#include "sampler-kernel/sampler.h"
#include "sampler-kernel/tails.h"

#define DEFAULT_PAGES 256      /* 1 MiB per CPU: ~100 ms of -g samples at 10 kHz */

#define SAMPLE_TYPE (PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID | \
		     PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD)
/* A software event with a fixed period and PERF_SAMPLE_PERIOD makes the kernel take a
 * sample at every event (weight 1: perf_swevent_event), 50 times the samples asked for
 * with -c 50; perf itself asks for the period only in frequency mode. Events with a
 * fixed period leave it out: their samples weigh the period. */
#define FIXED_SAMPLE_TYPE (SAMPLE_TYPE & ~(uint64_t)PERF_SAMPLE_PERIOD)

/* The depth the kernel walks frame pointers to for this backend: perf's default
 * kernel.perf_event_max_stack (a larger sample_max_stack is refused with EOVERFLOW
 * unless root raised the sysctl). Deeper stacks are the bpf backend's walker's
 * (docs/stacks.md). */
#define PERF_MAX_STACK 127

struct id_map {
	uint64_t id;
	int fd;                /* owned by fds[]: read for the event's totals at stop */
	pid_t tid;             /* the thread the fd counts, -1 for a whole CPU */
	int cpu;               /* the CPU it counts on, -1 for any */
	uint16_t event;
	uint64_t exited;       /* final counts of inherited copies (PERF_RECORD_READ at their exit) */
};

struct sampler {
	struct sampler_config cfg;
	uint64_t sample_type;
	uint64_t last_totals;   /* CLOCK_MONOTONIC of the last VP_COUNTER_INTERVAL records */
	bool ungrouped[VP_MAX_EVENTS];   /* opened outside its group somewhere (EINVAL fallback) */
	int *fds;
	int nr_fds;
	size_t cap_fds;
	struct perf_ring **rings;      /* one per CPU that could be opened */
	int nr_rings;
	struct pollfd *pfds;
	struct id_map *ids;
	int nr_ids;
	size_t cap_ids;
	struct perf_sideband sb;
	struct vp_sample *buf;         /* room for PERF_MAX_STACK ips */
	bool user_only;                /* kernel excluded: not permitted (paranoid 2) */
	/* PERF_SAMPLE_READ: each sample carries its event's count on its thread and CPU,
	 * and the sample's weight is the difference from that copy's previous sample. */
	bool sample_read;
	struct last_count { uint64_t key, value; bool exited; } *last;   /* open addressing, key 0 = free */
	/* Each thread's last sample per event read, for the count after it (tails.h). */
	struct vp_tails *tails;
	size_t cap_last, nr_last;
	uint64_t samples;
	bool stopped;
};

/* Takes fd over: it is closed with the sampler, or at once if it cannot be kept. */
static int push_fd(struct sampler *s, int fd)
{
	if (vp_grow((void **)&s->fds, &s->cap_fds, (size_t)s->nr_fds + 1, sizeof(*s->fds))) {
		close(fd);
		return -ENOMEM;
	}
	s->fds[s->nr_fds++] = fd;
	return 0;
}

static int push_id(struct sampler *s, int fd, pid_t tid, int cpu, int event)
{
	uint64_t id;

	if (ioctl(fd, PERF_EVENT_IOC_ID, &id) < 0)
		return -errno;
	if (vp_grow((void **)&s->ids, &s->cap_ids, (size_t)s->nr_ids + 1, sizeof(*s->ids)))
		return -ENOMEM;
	s->ids[s->nr_ids++] = (struct id_map){ .id = id, .fd = fd, .tid = tid, .cpu = cpu, .event = (uint16_t)event };
	return 0;
}

/* Events whose samples are weighted by the count they read: frequency-driven ones
 * that count things (a fixed period is exact; a clock event's period is its time). */
static bool wants_read(const struct sampler_event *ev)
{
	return !ev->period && !(ev->type == PERF_TYPE_SOFTWARE &&
				(ev->config == PERF_COUNT_SW_CPU_CLOCK || ev->config == PERF_COUNT_SW_TASK_CLOCK));
}

static void fill_attr(struct perf_event_attr *a, const struct sampler_config *cfg,
		      const struct sampler_event *ev, bool sideband, size_t ring_bytes,
		      bool user_only, bool sample_read)
{
	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	a->type = ev->type;
	a->config = ev->config;
	if (ev->period) {
		a->sample_period = ev->period;
	} else {
		a->freq = 1;
		a->sample_freq = ev->freq ? ev->freq : 1000;
	}
	a->sample_type = (ev->period ? FIXED_SAMPLE_TYPE : SAMPLE_TYPE) | (cfg->callchain ? PERF_SAMPLE_CALLCHAIN : 0) |
			 (sample_read && wants_read(ev) ? PERF_SAMPLE_READ : 0);
	a->sample_max_stack = PERF_MAX_STACK;
	/* Read at stop: the exact count, and how long the event was on a counter out of
	 * how long it was enabled (less when the (v)PMU multiplexed it). */
	a->read_format = VP_READ_FORMAT;
	a->disabled = 1;
	a->inherit = cfg->target != SAMPLER_TARGET_ALL;
	/* An inherited copy writes its final count (PERF_RECORD_READ) when its thread
	 * exits: the count after the thread's last sample (tails.h). */
	a->inherit_stat = a->inherit && sample_read && wants_read(ev);
	a->use_clockid = 1;
	a->clockid = CLOCK_MONOTONIC;
	a->sample_id_all = 1;
	/* perf_event_paranoid 2 (the default) lets ordinary users sample their own
	 * processes only in user mode. */
	a->exclude_kernel = user_only || ev->exclude_kernel;
	a->exclude_user = ev->exclude_user;
	a->exclude_hv = user_only;
	a->exclude_callchain_kernel = user_only && cfg->callchain;
	/* Wake the poller when a quarter of the ring is full, not per sample: a wakeup
	 * per sample costs more than the sample itself on a VM. */
	a->watermark = 1;
	a->wakeup_watermark = (uint32_t)(ring_bytes / 4);
	if (sideband && cfg->want_sideband) {
		a->mmap = 1;
		a->mmap2 = 1;
		a->comm = 1;
		a->comm_exec = 1;
		a->task = 1;
		a->build_id = 1;
	}
}

static size_t ring_pages(const struct sampler_config *cfg)
{
	return cfg->buffer_pages ? cfg->buffer_pages : DEFAULT_PAGES;
}

/* The number of events since the previous sample of the same copy of the event
 * (thread, CPU, event): the kernel's own period for a frequency-driven software event
 * is the period it meant to arm, which lags the one it armed whenever it retunes the
 * rate (a burst of page faults is counted ~10% high), so the count it reads is the
 * truth. A copy seen for the first time started at 0; a smaller value is a new thread
 * that reused the tid. Falls back to the kernel's period when the table cannot grow. */
static struct last_count *last_of(struct sampler *s, uint32_t tid, uint32_t cpu, uint16_t event, bool *fresh);

static uint64_t true_period(struct sampler *s, uint32_t tid, uint32_t cpu, uint16_t event, uint64_t value,
			    uint64_t period)
{
	bool fresh;
	struct last_count *l = last_of(s, tid, cpu, event, &fresh);
	uint64_t d;

	if (!l)
		return period;
	d = fresh ? value : value >= l->value ? value - l->value : value;
	l->value = value;
	l->exited = false;
	return d;
}

/* The entry of one copy of an event (thread, CPU, event), created empty when missing
 * (*fresh); NULL when the table cannot grow. */
static struct last_count *last_of(struct sampler *s, uint32_t tid, uint32_t cpu, uint16_t event, bool *fresh)
{
	uint64_t key = ((uint64_t)tid << 24 | (uint64_t)(cpu & 0xffff) << 8 | event) + 1;
	size_t i;

	if (s->nr_last * 2 >= s->cap_last) {
		size_t cap = s->cap_last ? s->cap_last * 2 : 1024;
		struct last_count *t = calloc(cap, sizeof(*t));

		if (!t)
			return NULL;
		for (size_t j = 0; j < s->cap_last; j++) {
			if (!s->last[j].key)
				continue;
			for (i = s->last[j].key * 0x9e3779b97f4a7c15ull >> 40 & (cap - 1); t[i].key; i = (i + 1) & (cap - 1))
				;
			t[i] = s->last[j];
		}
		free(s->last);
		s->last = t;
		s->cap_last = cap;
	}
	for (i = key * 0x9e3779b97f4a7c15ull >> 40 & (s->cap_last - 1); s->last[i].key && s->last[i].key != key;
	     i = (i + 1) & (s->cap_last - 1))
		;
	*fresh = !s->last[i].key;
	if (*fresh) {
		s->last[i] = (struct last_count){ .key = key };
		s->nr_last++;
	}
	return &s->last[i];
}

static int emit_sample(struct sampler *s, const struct perf_event_header *h)
{
	const uint64_t *p = (const void *)(h + 1);
	const uint64_t *end = (const void *)((const char *)h + h->size);
	struct vp_sample *out = s->buf;
	const struct sampler_event *ev;
	uint64_t id, ip, time, nr = 0;
	uint32_t pid, tid, cpu;
	int n = 0, kernel_n = 0, user_n = 0, ctx = 0;
	uint8_t mode = h->misc & PERF_RECORD_MISC_CPUMODE_MASK;

	/* IDENTIFIER, IP, TID, TIME, CPU, [PERIOD], [READ], [CALLCHAIN]: the order is the
	 * kernel's; which of the optional ones are there depends on the event (fill_attr). */
	if (end - p < 5)
		return -EBADMSG;
	id = p[0];
	ip = p[1];
	pid = (uint32_t)p[2];
	tid = (uint32_t)(p[2] >> 32);
	time = p[3];
	cpu = (uint32_t)p[4];
	p += 5;
	memset(out, 0, sizeof(*out));
	out->pid = pid;
	out->tid = tid;
	out->cpu = cpu;
	out->mode = mode;
	if (s->cfg.nr_events > 1) {
		for (int i = 0; i < s->nr_ids; i++) {
			if (s->ids[i].id == id) {
				out->event = s->ids[i].event;
				break;
			}
		}
	}
	ev = &s->cfg.events[out->event % VP_MAX_EVENTS];
	if (ev->period) {
		out->period = ev->period;
	} else {
		if (end - p < 1)
			return -EBADMSG;
		out->period = *p++;
	}
	if (s->sample_read && wants_read(ev)) {
		if (end - p < 3)
			return -EBADMSG;
		out->period = true_period(s, tid, cpu, out->event, p[0], out->period);
		p += 3;
	}
	if (s->sample_type & PERF_SAMPLE_CALLCHAIN) {
		if (end - p < 1)
			return -EBADMSG;
		nr = *p++;
		if (nr > (uint64_t)(end - p))
			return -EBADMSG;
		/* Kernel frames come first, then user frames; the PERF_CONTEXT_* markers
		 * between them say which is which and are not frames themselves. */
		for (uint64_t i = 0; i < nr; i++) {
			uint64_t a = p[i];

			if (a >= (uint64_t)PERF_CONTEXT_MAX) {
				ctx = a == (uint64_t)PERF_CONTEXT_KERNEL ? 1 :
				      a == (uint64_t)PERF_CONTEXT_USER ? 2 : 3;
				continue;
			}
			if (ctx != 1 && ctx != 2)
				continue;   /* hypervisor/guest frames have no place here */
			if (n >= PERF_MAX_STACK) {
				out->flags |= VP_SAMPLE_USER_TRUNCATED;
				break;
			}
			if (ctx == 1) {
				if (user_n)
					continue;   /* not expected: kernel after user */
				kernel_n++;
			} else {
				user_n++;
			}
			out->ips[n++] = a;
		}
		/* The kernel stops the walk at sample_max_stack frames. */
		if (n >= PERF_MAX_STACK)
			out->flags |= VP_SAMPLE_USER_TRUNCATED;
	}
	if (n == 0) {
		out->ips[n++] = ip;
		if (mode == PERF_RECORD_MISC_KERNEL || mode == PERF_RECORD_MISC_HYPERVISOR ||
		    mode == PERF_RECORD_MISC_GUEST_KERNEL)
			kernel_n = 1;
		else
			user_n = 1;
	}
	out->nr_kernel = (uint16_t)kernel_n;
	out->nr_user = (uint16_t)user_n;
	s->samples++;
	if (s->tails && s->sample_read && wants_read(ev)) {
		int err = vp_tails__note(s->tails, out, sizeof(*out) + (size_t)n * sizeof(uint64_t));

		if (err)
			return err;
	}
	return s->cfg.sink.emit(s->cfg.sink.ctx, VP_REC_SAMPLE, time, out,
				sizeof(*out) + (size_t)n * sizeof(uint64_t));
}

static struct id_map *id_find(struct sampler *s, uint64_t id)
{
	for (int i = 0; i < s->nr_ids; i++)
		if (s->ids[i].id == id)
			return &s->ids[i];
	return NULL;
}

/* An inherited copy's final count, written as its thread exited (inherit_stat): what
 * came after the copy's last sample goes to the thread's last sampled stack. */
static int on_read(struct sampler *s, const struct perf_event_header *h)
{
	const struct { uint32_t pid, tid; uint64_t value, enabled, running; } *r = (const void *)(h + 1);
	struct perf_sample_id sid;
	struct last_count *l;
	struct id_map *m;
	bool fresh;
	int n = perf_sample_id__parse(h, s->sample_type, &sid);

	if (n < 0 || h->size < sizeof(*h) + sizeof(*r) + (size_t)n)
		return n < 0 ? n : -EBADMSG;
	m = id_find(s, sid.id);
	if (!m || !s->tails || m->cpu < 0)
		return 0;
	m->exited += r->value;
	l = last_of(s, r->tid, (uint32_t)m->cpu, m->event, &fresh);
	if (!l)
		return -ENOMEM;
	uint64_t rest = fresh ? r->value : r->value > l->value ? r->value - l->value : 0;
	l->value = r->value;
	l->exited = true;
	return vp_tails__charge(s->tails, &s->cfg.sink, r->pid, r->tid, m->event, rest, sid.time, false);
}

static int on_record(void *ctx, const struct perf_event_header *h)
{
	struct sampler *s = ctx;
	int err;

	if (h->type == PERF_RECORD_SAMPLE)
		return emit_sample(s, h);
	if (h->type == PERF_RECORD_READ) {
		err = on_read(s, h);
		return err < 0 ? err : 0;
	}
	err = perf_sideband__handle(&s->sb, h);
	return err < 0 ? err : 0;
}

static int drain(struct sampler *s)
{
	int total = 0;

	for (int i = 0; i < s->nr_rings; i++) {
		int n = perf_ring__drain(s->rings[i], on_record, s);

		if (n < 0)
			return n;
		total += n;
	}
	return total;
}

/* Opens every event of one target thread (or -1 = all) on one CPU; the first fd on
 * a CPU gets the mmap ring, the rest write into it. ENODEV/ENOENT = offline CPU or a
 * thread that already exited: skipped. */
static int open_on_cpu(struct sampler *s, pid_t pid, int cpu, int *ring_fd)
{
	size_t pages = ring_pages(&s->cfg);
	size_t bytes = pages * (size_t)sysconf(_SC_PAGESIZE);

	int leader = -1;

	for (int e = 0; e < s->cfg.nr_events; e++) {
		struct perf_event_attr a;
		int fd, err;

		fill_attr(&a, &s->cfg, &s->cfg.events[e], e == 0, bytes, s->user_only, s->sample_read);
		/* One group per thread and CPU, so that a (v)PMU schedules the events
		 * together; each still samples on its own. A mix the PMU cannot group
		 * (EINVAL) falls back to separate events. */
		fd = vp_perf_event_open(&a, pid, cpu, leader, PERF_FLAG_FD_CLOEXEC);
		if (fd == -EINVAL && leader >= 0) {
			fd = vp_perf_event_open(&a, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
			s->ungrouped[e] = fd >= 0;
		}
		if (fd == -ENODEV || (fd == -ESRCH && pid > 0))
			return 0;
		if (e == 0)
			leader = fd;
		if (fd < 0)
			return fd;
		err = push_fd(s, fd);
		if (err)
			return err;
		err = push_id(s, fd, pid, cpu, e);
		if (err)
			return err;
		if (*ring_fd < 0) {
			struct perf_ring *r = perf_ring__open(fd, pages);

			if (!r)
				return -errno;
			s->rings[s->nr_rings++] = r;
			*ring_fd = fd;
		} else if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, *ring_fd) < 0) {
			return -errno;
		}
	}
	return 0;
}

static int open_pid_threads(struct sampler *s, pid_t pid, int cpu, int *ring_fd)
{
	char path[64];
	struct dirent *d;
	DIR *dir;
	int err = 0, n = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	dir = opendir(path);
	if (!dir)
		return -errno;
	while ((d = readdir(dir)) && !err) {
		if (d->d_name[0] < '0' || d->d_name[0] > '9')
			continue;
		err = open_on_cpu(s, (pid_t)atoi(d->d_name), cpu, ring_fd);
		n++;
	}
	closedir(dir);
	return err ? err : (n ? 0 : -ESRCH);
}

/* Every context switch on this CPU, whichever process it involves (steal-time victim
 * attribution needs them all): a CPU-wide dummy event writing into the CPU's ring.
 * Caveat seen on 6.18: the kernel reports few of the switches made in the idle task's
 * context (idle -> task), so who left idle is only known at its next switch; the bpf
 * backend's sched_switch tracepoint has them all. */
static int open_switches(struct sampler *s, int cpu, int ring_fd)
{
	struct perf_event_attr a = {
		.size = sizeof(a), .type = PERF_TYPE_SOFTWARE, .config = PERF_COUNT_SW_DUMMY,
		/* The same sample_type as the ring's other events: one trailer layout. */
		.sample_type = s->sample_type, .sample_id_all = 1, .context_switch = 1,
		.use_clockid = 1, .clockid = CLOCK_MONOTONIC, .disabled = 1,
	};
	int fd = vp_perf_event_open(&a, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
	int err;

	if (fd < 0)
		return fd;
	err = push_fd(s, fd);
	if (err)
		return err;
	return ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, ring_fd) < 0 ? -errno : 0;
}

/* A warning for the session: the sampler runs, but with less than was asked for. */
static int note(struct sampler *s, const char *key, const char *value)
{
	size_t kl = strlen(key) + 1, vl = strlen(value) + 1;
	char body[512];
	struct timespec ts;

	if (kl + vl > sizeof(body))
		return -EINVAL;
	memcpy(body, key, kl);
	memcpy(body + kl, value, vl);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return s->cfg.sink.emit(s->cfg.sink.ctx, VP_REC_META,
				(uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec, body, kl + vl);
}

static int open_all(struct sampler *s, int ncpu)
{
	const struct sampler_config *cfg = &s->cfg;
	bool switches_denied = false;
	int rc = 0;

	for (int cpu = 0; cpu < ncpu && !rc; cpu++) {
		int ring_fd = -1;

		if (cfg->target == SAMPLER_TARGET_ALL) {
			rc = open_on_cpu(s, -1, cpu, &ring_fd);
		} else if (cfg->target == SAMPLER_TARGET_LAUNCH) {
			rc = open_on_cpu(s, cfg->pids[0], cpu, &ring_fd);
		} else {
			for (int i = 0; i < cfg->nr_pids && !rc; i++)
				rc = open_pid_threads(s, cfg->pids[i], cpu, &ring_fd);
		}
		if (!rc && ring_fd >= 0 && cfg->want_switches && !switches_denied) {
			rc = open_switches(s, cpu, ring_fd);
			if (rc == -EACCES || rc == -EPERM) {
				switches_denied = true;
				rc = 0;
			}
		}
	}
	if (rc == 0 && s->nr_rings == 0)
		rc = -ESRCH;
	/* Steal attribution is a bonus; sampling without it beats not sampling. */
	if (rc == 0 && switches_denied)
		rc = note(s, "sampler.switches",
			  "unavailable: context switches of all CPUs need CAP_PERFMON or 'sysctl kernel.perf_event_paranoid=0'; steal time cannot be charged to threads");
	return rc;
}

static void close_all(struct sampler *s)
{
	for (int i = 0; i < s->nr_rings; i++)
		perf_ring__free(s->rings[i]);
	for (int i = 0; i < s->nr_fds; i++)
		close(s->fds[i]);
	s->nr_rings = s->nr_fds = s->nr_ids = 0;
}

static void perf_destroy(struct sampler *s);

static struct sampler *perf_start(const struct sampler_config *cfg, char *err, size_t errlen)
{
	int ncpu = get_nprocs_conf(), rc = 0;
	struct sampler *s;

	if (cfg->nr_events < 1 || cfg->nr_events > VP_MAX_EVENTS ||
	    (cfg->target != SAMPLER_TARGET_ALL && cfg->nr_pids < 1) || !cfg->sink.emit) {
		snprintf(err, errlen, "perf sampler: bad configuration (need 1..%d events, a sink, and pids unless -a)",
			 VP_MAX_EVENTS);
		errno = EINVAL;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		goto nomem;
	s->cfg = *cfg;
	s->sample_type = SAMPLE_TYPE | (cfg->callchain ? PERF_SAMPLE_CALLCHAIN : 0);
	s->rings = calloc(ncpu, sizeof(*s->rings));
	s->pfds = calloc(ncpu, sizeof(*s->pfds));
	s->buf = malloc(sizeof(struct vp_sample) + PERF_MAX_STACK * sizeof(uint64_t));
	if (!s->rings || !s->pfds || !s->buf)
		goto nomem;
	s->sb.sample_type = s->sample_type;
	s->sb.sink = &s->cfg.sink;
	for (int e = 0; e < cfg->nr_events && !s->tails && cfg->target != SAMPLER_TARGET_ALL; e++)
		if (wants_read(&cfg->events[e]) && !(s->tails = vp_tails__new()))
			goto nomem;
	/* The kernel filters sideband for per-task events (only the inherited tasks
	 * report), so no user-space filter is needed in any mode. */
	s->sb.filter = NULL;

	/* PERF_SAMPLE_READ with inherit needs Linux 6.12; older kernels refuse it (EINVAL)
	 * and get the kernel's periods, with a note in the session. */
	s->sample_read = true;
	rc = open_all(s, ncpu);
	if (rc == -EINVAL && s->sample_read) {
		close_all(s);
		s->sample_read = false;
		rc = open_all(s, ncpu);
		if (!rc)
			rc = note(s, "sampler.weights",
				  "kernel periods: this kernel cannot read counts in samples of inherited events (Linux 6.12+), so frequency-driven weights may be off by a period");
	}
	if ((rc == -EACCES || rc == -EPERM) && cfg->target != SAMPLER_TARGET_ALL) {
		/* Not allowed to see the kernel: sample user mode only, and say so. */
		close_all(s);
		s->user_only = true;
		rc = open_all(s, ncpu);
		if (!rc)
			rc = note(s, "sampler.kernel",
				  "excluded: sampling the kernel needs CAP_PERFMON or 'sysctl kernel.perf_event_paranoid=1'; samples show user mode only");
	}
	if (rc) {
		char why[400] = "";
		for (int i = 0; (rc == -EACCES || rc == -EPERM) && cfg->target == SAMPLER_TARGET_PIDS && i < cfg->nr_pids; i++)
			if (vp_perm__explain(cfg->pids[i], why, sizeof(why)))
				break;
		if (why[0])
			snprintf(err, errlen, "perf sampler: %s", why);
		else if (rc == -EACCES || rc == -EPERM)
			snprintf(err, errlen, "perf sampler: perf_event_open: %s; run as root, grant CAP_PERFMON, or 'sysctl kernel.perf_event_paranoid=%d'",
				 strerror(-rc), cfg->target == SAMPLER_TARGET_ALL ? 0 : 1);
		else if (rc == -ESRCH)
			snprintf(err, errlen, "perf sampler: no such process to sample; check the pid");
		else if (rc == -EMFILE)
			snprintf(err, errlen, "perf sampler: out of file descriptors (one per thread, CPU and event with -p); raise 'ulimit -n' or use the bpf backend");
		else
			snprintf(err, errlen, "perf sampler: perf_event_open of '%s': %s; check the event with 'viprof probe'",
				 cfg->events[0].name, strerror(-rc));
		perf_destroy(s);
		errno = -rc;
		return NULL;
	}
	for (int i = 0; i < s->nr_rings; i++)
		s->pfds[i] = (struct pollfd){ .fd = perf_ring__fd(s->rings[i]), .events = POLLIN };
	for (int i = 0; i < s->nr_fds; i++)
		ioctl(s->fds[i], PERF_EVENT_IOC_ENABLE, 0);
	return s;
nomem:
	snprintf(err, errlen, "perf sampler: out of memory");
	perf_destroy(s);
	errno = ENOMEM;
	return NULL;
}

static int emit_totals(struct sampler *s, bool interval);

static int perf_poll(struct sampler *s, int timeout_ms)
{
	if (!s->stopped && poll(s->pfds, s->nr_rings, timeout_ms) < 0 && errno != EINTR)
		return -errno;
	int n = drain(s);
	/* Running totals every VP_COUNTER_INTERVAL_NS, after the drain (see bpf_poll). */
	uint64_t t = vp_sampler_now_ns();
	if (n >= 0 && !s->stopped && t - s->last_totals >= VP_COUNTER_INTERVAL_NS) {
		int rc = emit_totals(s, true);

		if (rc)
			return rc;
		s->last_totals = t;
	}
	return n;
}

static int emit_lost(const struct vp_sink *sink, uint32_t source, uint64_t count)
{
	struct vp_lost l = { .cpu = UINT32_MAX, .source = source, .count = count };
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return sink->emit(sink->ctx, VP_REC_LOST,
			  (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec, &l, sizeof(l));
}

/* Whether a thread has an fd of its own (not an inherited copy). */
static bool is_owner(const struct sampler *s, uint32_t tid)
{
	for (int i = 0; i < s->nr_ids; i++)
		if (s->ids[i].tid >= 0 && (uint32_t)s->ids[i].tid == tid)
			return true;
	return false;
}

/* At stop, the count after the last sample of each thread that has fds of its own
 * (the launched command's first thread, or -p's threads): its fd's count v[i] less
 * what its inherited copies counted until they exited. A copy on the same CPU and
 * event that has not exited (a thread still running) would be in that count too and
 * cannot be told apart: then nothing is charged there (the report's residual says how
 * much is in no stack). */
static int owner_tails(struct sampler *s, uint64_t (*v)[3])
{
	for (int i = 0; i < s->nr_ids; i++) {
		const struct id_map *m = &s->ids[i];
		bool live = false, fresh;

		if (m->tid < 0 || m->cpu < 0 || !wants_read(&s->cfg.events[m->event % VP_MAX_EVENTS]))
			continue;
		for (size_t j = 0; j < s->cap_last && !live; j++) {
			uint64_t k = s->last[j].key - 1;

			if (!s->last[j].key || s->last[j].exited || (k & 0xff) != m->event ||
			    (k >> 8 & 0xffff) != ((uint32_t)m->cpu & 0xffff))
				continue;
			live = !is_owner(s, (uint32_t)(k >> 24));
		}
		if (live)
			continue;
		uint64_t own = v[i][0] > m->exited ? v[i][0] - m->exited : 0;
		struct last_count *l = last_of(s, (uint32_t)m->tid, (uint32_t)m->cpu, m->event, &fresh);
		if (!l)
			return -ENOMEM;
		uint64_t rest = fresh ? own : own > l->value ? own - l->value : 0;
		l->value = own;
		int rc = vp_tails__charge(s->tails, &s->cfg.sink, (uint32_t)m->tid, (uint32_t)m->tid, m->event, rest,
					  vp_sampler_now_ns(), false);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* One COUNTER record per event with its totals over every thread and CPU: the count
 * the samples' weights must add up to, and time_enabled/time_running, whose ratio
 * says whether (and how much) the event was multiplexed. */
static int emit_totals(struct sampler *s, bool interval)
{
	struct vp_counter tot[VP_MAX_EVENTS] = { 0 };
	uint64_t (*v)[3] = calloc(s->nr_ids ? s->nr_ids : 1, sizeof(*v));
	int rc = 0;

	if (!v)
		return -ENOMEM;
	for (int i = 0; i < s->nr_ids; i++)
		if (read(s->ids[i].fd, v[i], sizeof(v[i])) != (ssize_t)sizeof(v[i]))
			v[i][0] = v[i][1] = v[i][2] = 0;   /* unreadable: counts nothing */
	/* A thread's event is opened once per CPU, and each of those copies is "enabled"
	 * whenever the thread runs, on any CPU, while it runs on a counter only on its own
	 * CPU: the thread's enabled time is the largest of its copies', its running time
	 * the sum. A CPU-wide fd (tid -1) has both for its own CPU. */
	for (int i = 0; i < s->nr_ids; i++) {
		struct vp_counter *c = &tot[s->ids[i].event % VP_MAX_EVENTS];
		uint64_t enabled = v[i][1];
		bool first = true;

		c->value += v[i][0];
		c->time_running += v[i][2];
		if (s->ids[i].tid < 0) {
			c->time_enabled += enabled;
			continue;
		}
		for (int j = 0; j < s->nr_ids && first; j++) {
			if (j == i || s->ids[j].tid != s->ids[i].tid || s->ids[j].event != s->ids[i].event)
				continue;
			if (v[j][1] > enabled || (v[j][1] == enabled && j < i))
				first = false;   /* another copy of this thread's event carries it */
		}
		if (first)
			c->time_enabled += enabled;
	}
	if (s->tails && s->sample_read && !interval)
		rc = owner_tails(s, v);
	free(v);
	for (int e = 0; e < s->cfg.nr_events && !rc; e++) {
		tot[e].pid = tot[e].tid = VP_COUNTER_ALL;
		tot[e].event = (uint32_t)e;
		tot[e].flags = VP_COUNTER_SAMPLED | (interval ? VP_COUNTER_INTERVAL : 0) |
			       (s->ungrouped[e] ? VP_COUNTER_UNGROUPED : 0);
		rc = s->cfg.sink.emit(s->cfg.sink.ctx, VP_REC_COUNTER, vp_sampler_now_ns(), &tot[e], sizeof(tot[e]));
	}
	return rc;
}

static int perf_stop(struct sampler *s)
{
	int n;

	if (s->stopped)
		return 0;
	for (int i = 0; i < s->nr_fds; i++)
		ioctl(s->fds[i], PERF_EVENT_IOC_DISABLE, 0);
	s->stopped = true;
	n = drain(s);
	if (n < 0)
		return n;
	if ((n = emit_totals(s, false)))
		return n;
	return emit_lost(&s->cfg.sink, VP_LOST_KERNEL_RING, s->sb.lost);
}

static void perf_counts(const struct sampler *s, uint64_t *samples, uint64_t *lost)
{
	*samples = s->samples;
	*lost = s->sb.lost;
}

static void perf_destroy(struct sampler *s)
{
	if (!s)
		return;
	close_all(s);
	free(s->rings);
	free(s->pfds);
	free(s->fds);
	free(s->ids);
	free(s->buf);
	free(s->last);
	vp_tails__free(s->tails);
	free(s);
}

/* A real open of the first event, the way start() will open it, is the only reliable
 * test: paranoia level, capabilities, seccomp and the event itself all play a part. */
static bool perf_supported(const struct sampler_config *cfg, char *why, size_t whylen)
{
	struct perf_event_attr a;
	bool all = cfg->target == SAMPLER_TARGET_ALL;
	int fd;

	if (cfg->nr_events < 1) {
		snprintf(why, whylen, "perf: no event requested");
		return false;
	}
	fill_attr(&a, cfg, &cfg->events[0], false, 4096 * 4, false, false);
	fd = vp_perf_event_open(&a, all ? -1 : 0, all ? 0 : -1, -1, PERF_FLAG_FD_CLOEXEC);
	if ((fd == -EACCES || fd == -EPERM) && !all) {
		fill_attr(&a, cfg, &cfg->events[0], false, 4096 * 4, true, false);
		fd = vp_perf_event_open(&a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	}
	if (fd < 0) {
		if (fd == -EACCES || fd == -EPERM)
			snprintf(why, whylen, "perf: perf_event_open not permitted (%s); run as root, grant CAP_PERFMON, or 'sysctl kernel.perf_event_paranoid=%d'",
				 strerror(-fd), all ? 0 : 1);
		else
			snprintf(why, whylen, "perf: cannot open event '%s' (%s); see 'viprof probe'",
				 cfg->events[0].name, strerror(-fd));
		return false;
	}
	close(fd);
	snprintf(why, whylen, "perf: perf_event_open works here");
	return true;
}

const struct sampler_backend sampler_backend_perf = {
	.name = "perf",
	.supported = perf_supported,
	.start = perf_start,
	.poll = perf_poll,
	.stop = perf_stop,
	.counts = perf_counts,
	.destroy = perf_destroy,
};
