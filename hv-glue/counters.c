/* Per-thread virtualized counters (see counters.h). */
#include "hv-glue/counters.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hv-glue/events.h"
#include "hv-glue/hv_internal.h"
#include "hv-glue/steal.h"
#include <time.h>

struct ctr {
	int fd;
	struct perf_event_mmap_page *pc;  /* the user page, read-only */
	uint64_t sum;                     /* logical count of finished periods */
	uint64_t start;                   /* phys at the start of the current period */
	bool rdpmc;                       /* the last read used rdpmc */
	bool clock;                       /* task-clock or cpu-clock: ns, and steal inflates it */
	char name[64];
};

/* The two clocks whose difference is the steal that passed while the thread ran
 * (hv-glue/steal.h): a task-clock of its own and the scheduler's runtime. Tests put a
 * synthetic source in their place (vp_counters__time_source in hv_internal.h). */
typedef int (*time_source_fn)(void *ctx, uint64_t *clock_ns, uint64_t *runtime_ns);

struct vp_counters {
	int n;
	bool started;
	long page;
	struct ctr c[VP_MAX_EVENTS];
	/* Steal: a hidden task-clock of the thread (-1 when it could not be opened), the
	 * clocks at the start of the current period and the stolen ns of finished ones. */
	int steal_fd;
	int steal_acct;                   /* vp_steal__accounting() at open */
	time_source_fn source;
	void *source_ctx;
	uint64_t clock0, runtime0, stolen_sum;
};

#define barrier() __asm__ __volatile__("" ::: "memory")

#if defined(__x86_64__) || defined(__i386__)
static inline uint64_t rdtsc(void)
{
	uint32_t lo, hi;

	__asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
	return ((uint64_t)hi << 32) | lo;
}

static inline uint64_t rdpmc(uint32_t counter)
{
	uint32_t lo, hi;

	__asm__ __volatile__("rdpmc" : "=a"(lo), "=d"(hi) : "c"(counter));
	return ((uint64_t)hi << 32) | lo;
}
#define HAVE_RDPMC 1
#else
#define HAVE_RDPMC 0
#endif

/* value * enabled / running without overflowing: 128-bit intermediate. */
static uint64_t scale(uint64_t value, uint64_t enabled, uint64_t running)
{
	if (running == 0)
		return 0;       /* never scheduled on a counter: nothing is known */
	if (running >= enabled)
		return value;
	return (uint64_t)((unsigned __int128)value * enabled / running);
}

static int read_syscall(struct ctr *e, uint64_t *phys)
{
	uint64_t buf[3];    /* value, time_enabled, time_running (read_format) */
	ssize_t n = read(e->fd, buf, sizeof(buf));

	if (n < 0)
		return -errno;
	if (n != (ssize_t)sizeof(buf))
		return -EIO;
	*phys = scale(buf[0], buf[1], buf[2]);
	return 0;
}

/* The self-monitoring protocol of include/uapi/linux/perf_event.h: read the page's
 * fields between two loads of pc->lock and retry if the kernel updated the page in
 * between (it does so at every sched-in/out of the event). */
static int read_phys(struct ctr *e, uint64_t *phys)
{
#if HAVE_RDPMC
	volatile struct perf_event_mmap_page *pc = e->pc;
	uint64_t count, enabled, running, cyc = 0, time_offset = 0, time_cycles = 0, time_mask = 0;
	uint32_t seq, idx, time_mult = 0;
	uint16_t time_shift = 0;
	bool cap_time, cap_short = false, cap_rdpmc;

	do {
		seq = pc->lock;
		barrier();
		enabled = pc->time_enabled;
		running = pc->time_running;
		cap_time = pc->cap_user_time;
		if (cap_time && enabled != running) {
			cyc = rdtsc();
			time_offset = pc->time_offset;
			time_mult = pc->time_mult;
			time_shift = pc->time_shift;
			cap_short = pc->cap_user_time_short;
			if (cap_short) {
				time_cycles = pc->time_cycles;
				time_mask = pc->time_mask;
			}
		}
		idx = pc->index;
		cap_rdpmc = pc->cap_user_rdpmc;
		count = pc->offset;
		if (cap_rdpmc && idx) {
			uint16_t width = pc->pmc_width;
			int64_t pmc = (int64_t)rdpmc(idx - 1);

			/* Sign-extend the counter's width: offset may be negative. */
			pmc <<= 64 - width;
			pmc >>= 64 - width;
			count += (uint64_t)pmc;
		}
		barrier();
	} while (pc->lock != seq);

	if (cap_rdpmc && idx) {
		if (cap_time && enabled != running) {
			/* Extend the times from the last page update to now (TSC based).
			 * With a counter narrower than 64 bits (cap_user_time_short) the
			 * cycles are relative to time_cycles. */
			if (cap_short)
				cyc = time_cycles + ((cyc - time_cycles) & time_mask);
			uint64_t quot = cyc >> time_shift;
			uint64_t rem = cyc & (((uint64_t)1 << time_shift) - 1);
			uint64_t delta = time_offset + quot * time_mult + ((rem * time_mult) >> time_shift);

			enabled += delta;
			running += delta;   /* idx != 0: the event is on a counter right now */
		}
		e->rdpmc = true;
		*phys = scale(count, enabled, running);
		return 0;
	}
#endif
	/* index 0: a software event, or not on a counter now; the kernel must read it. */
	e->rdpmc = false;
	return read_syscall(e, phys);
}

static int open_one(struct vp_counters *c, const struct sampler_event *ev, char *err, size_t errlen)
{
	struct perf_event_attr attr;
	struct ctr *e = &c->c[c->n];
	void *page;
	int fd;

	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = ev->type;
	attr.config = ev->config;
	attr.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
	attr.exclude_kernel = ev->exclude_kernel;
	attr.exclude_user = ev->exclude_user;
	attr.exclude_hv = 1;
	fd = (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0) {
		int e0 = errno;

		/* vp_events__check says what is available here and what to try instead. */
		if (vp_events__check(ev, err, errlen) == 0)
			snprintf(err, errlen, "event '%s' cannot be counted for this thread: %s; "
				 "check kernel.perf_event_paranoid (<= 2 needed)", ev->name, strerror(e0));
		return -e0;
	}
	page = mmap(NULL, (size_t)c->page, PROT_READ, MAP_SHARED, fd, 0);
	if (page == MAP_FAILED) {
		int e0 = errno;

		snprintf(err, errlen, "cannot map the perf user page of event '%s': %s; "
			 "raise the locked-memory limit (ulimit -l)", ev->name, strerror(e0));
		close(fd);
		return -e0;
	}
	e->fd = fd;
	e->clock = ev->type == PERF_TYPE_SOFTWARE &&
		   (ev->config == PERF_COUNT_SW_TASK_CLOCK || ev->config == PERF_COUNT_SW_CPU_CLOCK);
	e->pc = page;
	snprintf(e->name, sizeof(e->name), "%s", ev->name);
	c->n++;
	return 0;
}

/* The real source: the hidden task-clock (read(): a software event) and the calling
 * thread's scheduler runtime (CLOCK_THREAD_CPUTIME_ID is sum_exec_runtime). */
static int own_clocks(void *ctx, uint64_t *clock_ns, uint64_t *runtime_ns)
{
	struct vp_counters *c = ctx;
	struct timespec ts;

	if (c->steal_fd < 0)
		return -ENOTSUP;
	if (read(c->steal_fd, clock_ns, sizeof(*clock_ns)) != (ssize_t)sizeof(*clock_ns))
		return -EIO;
	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts))
		return -errno;
	*runtime_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	return 0;
}

void vp_counters__time_source(struct vp_counters *c, int (*fn)(void *ctx, uint64_t *clock_ns, uint64_t *runtime_ns),
			      void *ctx)
{
	c->source = fn ? fn : own_clocks;
	c->source_ctx = fn ? ctx : c;
	if (fn)
		c->steal_acct = VP_STEAL_ACCT_STEAL;
}

/* Stolen ns of the current period so far. */
static int period_stolen(struct vp_counters *c, uint64_t *stolen)
{
	uint64_t clock, runtime;
	int err;

	if ((err = c->source(c->source_ctx, &clock, &runtime)))
		return err;
	*stolen = vp_steal__stolen(clock - c->clock0, runtime - c->runtime0);
	return 0;
}

struct vp_counters *vp_counters__open(const char *events, char *err, size_t errlen)
{
	struct sampler_event evs[VP_MAX_EVENTS];
	struct vp_counters *c;
	int n, ret = 0;

	if (err && errlen)
		err[0] = '\0';
	memset(evs, 0, sizeof(evs));
	n = vp_events__parse(events, evs, VP_MAX_EVENTS, err, errlen);
	if (n < 0) {
		errno = -n;
		return NULL;
	}
	if (n == 0) {
		snprintf(err, errlen, "no events given; name at least one, e.g. \"task-clock\"");
		errno = EINVAL;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		snprintf(err, errlen, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	c->page = sysconf(_SC_PAGESIZE);
	c->steal_fd = -1;
	c->source = own_clocks;
	c->source_ctx = c;
	c->steal_acct = vp_steal__accounting();
	if (c->steal_acct > 0) {
		/* Steal is a bonus: a thread that may not open task-clock still counts. */
		struct perf_event_attr a = { .size = sizeof(a), .type = PERF_TYPE_SOFTWARE,
					     .config = PERF_COUNT_SW_TASK_CLOCK, .exclude_hv = 1 };
		c->steal_fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	}
	for (int i = 0; i < n && !ret; i++)
		ret = open_one(c, &evs[i], err, errlen);
	if (ret) {
		vp_counters__close(c);
		errno = -ret;
		return NULL;
	}
	return c;
}

int vp_counters__count(const struct vp_counters *c)
{
	return c->n;
}

const char *vp_counters__name(const struct vp_counters *c, int i)
{
	return i >= 0 && i < c->n ? c->c[i].name : NULL;
}

int vp_counters__start(struct vp_counters *c)
{
	int err;

	if (c->started)
		return -EALREADY;
	for (int i = 0; i < c->n; i++)
		if ((err = read_phys(&c->c[i], &c->c[i].start)))
			return err;
	if (c->source(c->source_ctx, &c->clock0, &c->runtime0))
		c->clock0 = c->runtime0 = 0;   /* no steal source: vp_counters__stolen says so */
	c->started = true;
	return 0;
}

int vp_counters__read(struct vp_counters *c, uint64_t *values)
{
	for (int i = 0; i < c->n; i++) {
		uint64_t phys;
		int err;

		if (!c->started) {
			values[i] = c->c[i].sum;
			continue;
		}
		if ((err = read_phys(&c->c[i], &phys)))
			return err;
		/* Scaling can make an estimate dip below an earlier one; never go back. */
		values[i] = c->c[i].sum + (phys > c->c[i].start ? phys - c->c[i].start : 0);
	}
	return 0;
}

int vp_counters__stop(struct vp_counters *c)
{
	uint64_t phys[VP_MAX_EVENTS];
	int err;

	if (!c->started)
		return -EINVAL;
	for (int i = 0; i < c->n; i++)
		if ((err = read_phys(&c->c[i], &phys[i])))
			return err;
	for (int i = 0; i < c->n; i++)
		c->c[i].sum += phys[i] > c->c[i].start ? phys[i] - c->c[i].start : 0;
	uint64_t stolen;
	if (period_stolen(c, &stolen) == 0)
		c->stolen_sum += stolen;
	c->started = false;
	return 0;
}

int vp_counters__used_rdpmc(const struct vp_counters *c, int i)
{
	if (i < 0 || i >= c->n)
		return -EINVAL;
	return c->c[i].rdpmc;
}

int vp_counters__stolen(struct vp_counters *c, uint64_t *stolen_ns)
{
	uint64_t now = 0;
	int err;

	if (c->steal_acct <= 0 || (c->steal_fd < 0 && c->source == own_clocks))
		return -ENOTSUP;
	if (c->started && (err = period_stolen(c, &now)))
		return err;
	*stolen_ns = c->stolen_sum + now;
	return 0;
}

int vp_counters__read_corrected(struct vp_counters *c, uint64_t *values)
{
	uint64_t stolen;
	int err;

	if ((err = vp_counters__read(c, values)))
		return err;
	if ((err = vp_counters__stolen(c, &stolen)))
		return err;
	/* Steal stretches only the clocks; events are not counted while the vCPU does
	 * not run, so the other counts need nothing taken off. */
	for (int i = 0; i < c->n; i++)
		if (c->c[i].clock)
			values[i] = values[i] > stolen ? values[i] - stolen : 0;
	return 0;
}

void vp_counters__close(struct vp_counters *c)
{
	if (!c)
		return;
	if (c->steal_fd >= 0)
		close(c->steal_fd);
	for (int i = 0; i < c->n; i++) {
		munmap(c->c[i].pc, (size_t)c->page);
		close(c->c[i].fd);
	}
	free(c);
}
