/* Per-thread virtualized counters (see counters.h). */
#define _GNU_SOURCE   /* F_SETSIG, F_SETOWN_EX */
#include "hv-glue/counters.h"
#include "hv-glue/counters_math.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/ioctl.h>
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
	uint64_t acc;                     /* of the current period: its intervals, each scaled */
	struct vp_count_snap last;        /* the reading that ends the last interval in acc */
	bool rdpmc;                       /* the last read used rdpmc */
	bool clock;                       /* task-clock or cpu-clock: ns, and steal inflates it */
	bool bound;                       /* counts on one CPU only (vp_counters__open_cpu) */
	struct perf_event_attr attr;      /* as opened: the overflow event copies it */
	int ovf_fd;                       /* the overflow (sampling) copy, -1: none */
	char name[64];
};

/* The two clocks whose difference is the steal that passed while the thread ran
 * (hv-glue/steal.h): a task-clock of its own and the scheduler's runtime. Tests put a
 * synthetic source in their place (vp_counters__time_source in hv_internal.h). */
typedef int (*time_source_fn)(void *ctx, uint64_t *clock_ns, uint64_t *runtime_ns);

struct vp_counters {
	int n;
	bool started;
	bool grouped;                     /* one perf group led by c[0]: read at one instant */
	int reads;                        /* read() calls of the last read of the set (tests) */
	long page;
	struct ctr c[VP_MAX_EVENTS];
	/* Steal: a hidden task-clock of the thread (-1 when it could not be opened), the
	 * clocks at the start of the current period and the stolen ns of finished ones. */
	int steal_fd;
	int steal_acct;                   /* vp_steal__accounting() at open */
	bool steal_runs;                  /* a steal clock runs on this VM (vp_steal__clock_runs) */
	char steal_why[320];              /* why no stolen time is reported, when it is not */
	time_source_fn source;
	void *source_ctx;
	uint64_t clock0, runtime0, stolen_sum, runtime_sum;
	uint64_t vm_steal0;               /* /proc/stat's steal, all vCPUs, at the period's start */
	bool vm_steal0_ok;
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
static uint64_t (*rdpmc_default(void))(uint32_t) { return rdpmc; }
static uint64_t (*rdtsc_default(void))(void) { return rdtsc; }
#else
#define HAVE_RDPMC 0
static uint64_t (*rdpmc_default(void))(uint32_t) { return NULL; }
static uint64_t (*rdtsc_default(void))(void) { return NULL; }
#endif

static int read_syscall(struct ctr *e, struct vp_count_snap *snap)
{
	uint64_t buf[3];    /* value, time_enabled, time_running (read_format) */
	ssize_t n = read(e->fd, buf, sizeof(buf));

	if (n < 0)
		return -errno;
	if (n != (ssize_t)sizeof(buf))
		return -EIO;
	snap->count = buf[0];
	snap->enabled = buf[1];
	snap->running = buf[2];
	return 0;
}

/* The instructions the page protocol uses, replaceable by tests (hv_internal.h). */
static uint64_t (*pc_rdpmc)(uint32_t counter) =
#if HAVE_RDPMC
	rdpmc;
#else
	NULL;
#endif
static uint64_t (*pc_rdtsc)(void) =
#if HAVE_RDPMC
	rdtsc;
#else
	NULL;
#endif

/* Whether rdpmc works in user mode here: -1 not yet known, 0 no, 1 yes. The page's
 * cap_user_rdpmc says what the kernel allows, not what the CPU does: a Xen PV guest
 * keeps CR4.PCE clear while the guest kernel sets the bit, and the first rdpmc would
 * take the process down with SIGSEGV. So the first counter read with rdpmc is tried
 * once under a SIGSEGV handler, and its answer kept for the process. */
static int rdpmc_ok = -1;
static pthread_mutex_t rdpmc_probe_lock = PTHREAD_MUTEX_INITIALIZER;
static sigjmp_buf rdpmc_probe_jmp;

static void rdpmc_probe_segv(int sig)
{
	(void)sig;
	siglongjmp(rdpmc_probe_jmp, 1);
}

static bool rdpmc_usable(uint32_t counter)
{
	int ok = __atomic_load_n(&rdpmc_ok, __ATOMIC_ACQUIRE);
	if (ok >= 0)
		return ok;
	pthread_mutex_lock(&rdpmc_probe_lock);
	if (rdpmc_ok < 0) {
		struct sigaction sa = { .sa_handler = rdpmc_probe_segv }, old;
		volatile int works = 0;   /* set between sigsetjmp and a possible longjmp */
		sigemptyset(&sa.sa_mask);
		if (sigaction(SIGSEGV, &sa, &old) == 0) {
			if (!sigsetjmp(rdpmc_probe_jmp, 1)) {
				(void)pc_rdpmc(counter);
				works = 1;
			}
			sigaction(SIGSEGV, &old, NULL);
		}
		__atomic_store_n(&rdpmc_ok, works, __ATOMIC_RELEASE);
	}
	ok = rdpmc_ok;
	pthread_mutex_unlock(&rdpmc_probe_lock);
	return ok;
}

/* One raw reading (count, enabled, running) from an event's user page, by the
 * self-monitoring protocol of include/uapi/linux/perf_event.h: copy the page's fields
 * between two loads of pc->lock and retry if the kernel updated the page in between (it
 * does so at every sched-in/out of the event); the arithmetic is vp_pc__compute. 1 when
 * the page gave the reading, 0 when the kernel must be asked (a software event, an
 * event not on a counter now, or no usable rdpmc). */
int vp_pc__read(volatile struct perf_event_mmap_page *pc, struct vp_count_snap *snap)
{
	struct vp_pc_fields f;
	uint64_t pmc = 0, cyc = 0;
	uint32_t seq;

	if (!pc_rdpmc || !pc_rdtsc)
		return 0;
	do {
		seq = pc->lock;
		barrier();
		f.time_enabled = pc->time_enabled;
		f.time_running = pc->time_running;
		f.cap_user_time = pc->cap_user_time;
		f.cap_user_time_short = pc->cap_user_time_short;
		f.time_offset = pc->time_offset;
		f.time_mult = pc->time_mult;
		f.time_shift = pc->time_shift;
		f.time_cycles = pc->time_cycles;
		f.time_mask = pc->time_mask;
		f.index = pc->index;
		f.cap_user_rdpmc = pc->cap_user_rdpmc;
		f.pmc_width = pc->pmc_width;
		f.offset = pc->offset;
		if (f.cap_user_rdpmc && f.index) {
			if (!rdpmc_usable(f.index - 1))
				return 0;
			cyc = pc_rdtsc();
			pmc = pc_rdpmc(f.index - 1);   /* the page's index is the counter + 1 */
		}
		barrier();
	} while (pc->lock != seq);
	return vp_pc__compute(&f, pmc, cyc, snap) ? 1 : 0;
}

void vp_pc__hooks(uint64_t (*rdpmc_fn)(uint32_t counter), uint64_t (*rdtsc_fn)(void))
{
	pc_rdpmc = rdpmc_fn ? rdpmc_fn : rdpmc_default();
	pc_rdtsc = rdtsc_fn ? rdtsc_fn : rdtsc_default();
	__atomic_store_n(&rdpmc_ok, -1, __ATOMIC_RELEASE);   /* probed again with the new one */
}

static int read_snap(struct ctr *e, struct vp_count_snap *snap)
{
	if (vp_pc__read(e->pc, snap)) {
		e->rdpmc = true;
		return 0;
	}
	e->rdpmc = false;
	return read_syscall(e, snap);
}

/* Adds the interval since e->last to the period's sum, scaled by its own multiplexing
 * ratio. An interval in which the event never ran says nothing yet: its enabled time
 * is kept and scaled with the next interval that ran (as one interval). */
static void add_interval(struct ctr *e, const struct vp_count_snap *now)
{
	if (now->running == e->last.running && now->count == e->last.count)
		return;
	/* The kernel never takes a software event off its counter: running trails enabled
	 * only for one bound to a CPU the thread leaves (the tests' stand-in for
	 * multiplexing), where scaling estimates the whole thread's count. */
	if ((e->attr.type == PERF_TYPE_SOFTWARE || e->attr.type == PERF_TYPE_TRACEPOINT) && !e->bound)
		e->acc += now->count >= e->last.count ? now->count - e->last.count : 0;
	else
		e->acc += vp_counts__scaled_delta(&e->last, now);
	e->last = *now;
}

/* One reading of every event of the set. A group is read with one read() of its leader
 * (PERF_FORMAT_GROUP): the kernel takes all the counts under the group's context lock,
 * at one instant, with one enabled/running pair (a group is on the PMU as a whole or not
 * at all), so ratios between them are of the same interval. Otherwise each event is
 * read on its own (rdpmc where it can), one after another. */
static int read_set(struct vp_counters *c, struct vp_count_snap *snaps)
{
	int err;

	c->reads = 0;
	if (c->grouped) {
		uint64_t buf[3 + VP_MAX_EVENTS];   /* nr, time_enabled, time_running, values */
		ssize_t want = (ssize_t)((size_t)(3 + c->n) * sizeof(uint64_t));
		ssize_t got = read(c->c[0].fd, buf, (size_t)want);

		c->reads = 1;
		if (got < 0)
			return -errno;
		if (got != want || buf[0] != (uint64_t)c->n)
			return -EIO;
		for (int i = 0; i < c->n; i++) {
			snaps[i].count = buf[3 + i];
			snaps[i].enabled = buf[1];
			snaps[i].running = buf[2];
			c->c[i].rdpmc = false;
		}
		return 0;
	}
	for (int i = 0; i < c->n; i++) {
		if ((err = read_snap(&c->c[i], &snaps[i])))
			return err;
		c->reads += !c->c[i].rdpmc;
	}
	return 0;
}

static int open_one(struct vp_counters *c, const struct sampler_event *ev, int cpu, char *err, size_t errlen)
{
	struct perf_event_attr attr;
	struct ctr *e = &c->c[c->n];
	bool leader = c->grouped && c->n == 0;
	int group_fd = c->grouped && c->n > 0 ? c->c[0].fd : -1;
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
	if (leader) {
		/* The leader's read returns the whole group; it stays off until every member
		 * is attached (open_group says why). Members read alone return their own
		 * value, as ungrouped events do (the overflow handler reads them so). */
		attr.read_format |= PERF_FORMAT_GROUP;
		attr.disabled = 1;
	}
	e->bound = cpu >= 0;
	fd = (int)syscall(SYS_perf_event_open, &attr, 0, cpu, group_fd, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0) {
		int e0 = errno;

		if (group_fd >= 0 && vp_events__check_count(ev, err, errlen) == 0) {
			snprintf(err, errlen, "event '%s' cannot join one group with '%s': %s; open the set with "
				 "vp_counters__open (separate events, not read at one instant) or count '%s' in a set of its own",
				 ev->name, c->c[0].name, strerror(e0), ev->name);
			return -e0;
		}
		/* vp_events__check says what is available here and what to try instead. */
		if (vp_events__check_count(ev, err, errlen) == 0)
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
	e->attr = attr;
	e->ovf_fd = -1;
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

	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts))
		return -errno;
	*runtime_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	/* Without the hidden task-clock (no steal clock here, or refused) the runtime
	 * stands for both: no difference, and vp_counters__stolen says why. */
	*clock_ns = *runtime_ns;
	if (c->steal_fd >= 0 && read(c->steal_fd, clock_ns, sizeof(*clock_ns)) != (ssize_t)sizeof(*clock_ns))
		return -EIO;
	return 0;
}

void vp_counters__time_source(struct vp_counters *c, int (*fn)(void *ctx, uint64_t *clock_ns, uint64_t *runtime_ns),
			      void *ctx)
{
	c->source = fn ? fn : own_clocks;
	c->source_ctx = fn ? ctx : c;
}

/* Stolen ns of the current period so far. The two clocks also differ by skew (they
 * are advanced at different points of the scheduler: 1.0 ms of a 1.5 s spin here, on
 * a vCPU whose steal did not move), so with the real source the difference is held to
 * the steal /proc/stat saw accrue on the whole VM over the period, rounded up by one
 * USER_HZ tick per vCPU (no thread lost more than the VM did); and a period in which
 * not one tick of steal accrued on any vCPU gets 0: what the hypervisor took then is
 * below /proc/stat's resolution, and the difference is skew, not steal. */
static int period_stolen(struct vp_counters *c, uint64_t *stolen)
{
	uint64_t clock, runtime, vm;
	int err;

	if ((err = c->source(c->source_ctx, &clock, &runtime)))
		return err;
	*stolen = vp_steal__stolen(clock - c->clock0, runtime - c->runtime0);
	if (c->source == own_clocks && c->vm_steal0_ok && vp_steal__total(&vm) == 0) {
		long hz = sysconf(_SC_CLK_TCK), ncpu = sysconf(_SC_NPROCESSORS_ONLN);
		uint64_t grew = vm > c->vm_steal0 ? vm - c->vm_steal0 : 0;
		uint64_t bound = grew ? grew + (uint64_t)(ncpu > 0 ? ncpu : 1) * (1000000000ull / (uint64_t)(hz > 0 ? hz : 100))
				      : 0;

		if (*stolen > bound)
			*stolen = bound;
	}
	return 0;
}

static struct vp_counters *open_on(const char *events, int cpu, bool group, char *err, size_t errlen)
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
	c->grouped = group;
	c->steal_fd = -1;
	c->source = own_clocks;
	c->source_ctx = c;
	c->steal_acct = vp_steal__accounting();
	c->steal_runs = vp_steal__clock_runs(c->steal_why, sizeof(c->steal_why)) == 1;
	if (c->steal_acct <= 0)
		snprintf(c->steal_why, sizeof(c->steal_why), "%s",
			 c->steal_acct == 0 ? "this kernel keeps steal in thread runtimes (no CONFIG_PARAVIRT_TIME_ACCOUNTING), "
					      "so the stolen share cannot be told apart"
					    : "this kernel's configuration cannot be read (/boot/config-RELEASE, /proc/config.gz), "
					      "so it is unknown whether runtimes exclude steal");
	if (c->steal_acct > 0 && c->steal_runs) {
		/* Steal is a bonus: a thread that may not open task-clock still counts. */
		struct perf_event_attr a = { .size = sizeof(a), .type = PERF_TYPE_SOFTWARE,
					     .config = PERF_COUNT_SW_TASK_CLOCK, .exclude_hv = 1 };
		c->steal_fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	}
	for (int i = 0; i < n && !ret; i++)
		ret = open_one(c, &evs[i], cpu, err, errlen);
	/* The group starts counting only now, as a whole. A member attached to a group that
	 * already runs is scheduled in with it only at the thread's next context switch
	 * when its pmu is not the leader's (task-clock, cpu-clock and the other software
	 * events are three pmus): a cpu-clock-led group counted 113 of 1,000 page faults
	 * touched right after open, a page-faults-led one 1.0 of 3.2 ms of task-clock, on
	 * this 6.18 kernel. Enabling the leader last schedules all members at once. */
	if (!ret && group && ioctl(c->c[0].fd, PERF_EVENT_IOC_ENABLE, PERF_IOC_FLAG_GROUP)) {
		ret = -errno;
		snprintf(err, errlen, "cannot enable the group of '%s': %s", c->c[0].name, strerror(-ret));
	}
	if (ret) {
		vp_counters__close(c);
		errno = -ret;
		return NULL;
	}
	return c;
}

struct vp_counters *vp_counters__open(const char *events, char *err, size_t errlen)
{
	return open_on(events, -1, false, err, errlen);
}

struct vp_counters *vp_counters__open_group(const char *events, char *err, size_t errlen)
{
	return open_on(events, -1, true, err, errlen);
}

struct vp_counters *vp_counters__open_cpu(const char *events, int cpu, char *err, size_t errlen)
{
	return open_on(events, cpu, false, err, errlen);
}

int vp_counters__reads(const struct vp_counters *c)
{
	return c->reads;
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

	struct vp_count_snap now[VP_MAX_EVENTS];

	if (c->started)
		return -EALREADY;
	if ((err = read_set(c, now)))
		return err;
	for (int i = 0; i < c->n; i++) {
		c->c[i].last = now[i];
		c->c[i].acc = 0;
	}
	if (c->source(c->source_ctx, &c->clock0, &c->runtime0))
		c->clock0 = c->runtime0 = 0;   /* no steal source: vp_counters__stolen says so */
	c->vm_steal0_ok = vp_steal__total(&c->vm_steal0) == 0;
	c->started = true;
	return 0;
}

int vp_counters__read(struct vp_counters *c, uint64_t *values)
{
	struct vp_count_snap now[VP_MAX_EVENTS];
	int err;

	if (c->started && (err = read_set(c, now)))
		return err;
	for (int i = 0; i < c->n; i++) {
		if (!c->started) {
			values[i] = c->c[i].sum;
			continue;
		}
		/* Each read closes an interval, scaled by its own ratio: the value never
		 * goes back, and a change of contention affects only the intervals it was in. */
		add_interval(&c->c[i], &now[i]);
		values[i] = c->c[i].sum + c->c[i].acc;
	}
	return 0;
}

int vp_counters__stop(struct vp_counters *c)
{
	struct vp_count_snap now[VP_MAX_EVENTS];
	int err;

	if (!c->started)
		return -EINVAL;
	if ((err = read_set(c, now)))
		return err;
	for (int i = 0; i < c->n; i++) {
		add_interval(&c->c[i], &now[i]);
		c->c[i].sum += c->c[i].acc;
		c->c[i].acc = 0;
	}
	uint64_t stolen, clock, runtime;
	if (period_stolen(c, &stolen) == 0)
		c->stolen_sum += stolen;
	if (c->source(c->source_ctx, &clock, &runtime) == 0)
		c->runtime_sum += runtime - c->runtime0;
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

	if (c->source == own_clocks && (c->steal_acct <= 0 || !c->steal_runs || c->steal_fd < 0))
		return -ENOTSUP;
	if (c->started && (err = period_stolen(c, &now)))
		return err;
	*stolen_ns = c->stolen_sum + now;
	return 0;
}

const char *vp_counters__stolen_why(const struct vp_counters *c)
{
	if (c->source != own_clocks)
		return NULL;
	if (c->steal_acct <= 0 || !c->steal_runs)
		return c->steal_why;
	if (c->steal_fd < 0)
		return "the thread's task-clock cannot be opened (kernel.perf_event_paranoid), and the stolen share is "
		       "measured against it";
	return NULL;
}

int vp_counters__read_corrected(struct vp_counters *c, uint64_t *values)
{
	uint64_t clock, runtime, now = 0;
	int err;

	/* A steal clock runs, but this kernel leaves steal in the runtimes: nothing here
	 * tells the thread's own time from the hypervisor's. */
	if (c->source == own_clocks && c->steal_runs && c->steal_acct <= 0)
		return -ENOTSUP;
	if ((err = vp_counters__read(c, values)))
		return err;
	/* No steal clock: there is nothing to take out, and the runtime is no better a
	 * clock than task-clock (on a PVM guest it also holds the switch path, 7-27 us per
	 * switch: a thread that sleeps a lot came out 16-31% above its task-clock). */
	if (c->source == own_clocks && !c->steal_runs)
		return 0;
	if (c->started) {
		if ((err = c->source(c->source_ctx, &clock, &runtime)))
			return err;
		now = runtime - c->runtime0;
	}
	/* The time the thread itself ran is its scheduler runtime, from which the kernel
	 * takes the paravirt steal clock out at every update: exact, where task-clock minus
	 * a stolen estimate was off by up to 15 ms in 1.5 s on a VM without steal on the
	 * vCPU (the two clocks advance at different points). A correction for steal can only
	 * lower a clock, so a runtime above the task-clock (clocks read a few us apart, or a
	 * runtime that holds more than the event's periods) leaves it as read. Steal
	 * stretches only the clocks; events are not counted while the vCPU does not run, so
	 * the other counts come back as read. */
	for (int i = 0; i < c->n; i++)
		if (c->c[i].clock && c->runtime_sum + now < values[i])
			values[i] = c->runtime_sum + now;
	return 0;
}

void vp_counters__assume_steal_clock(struct vp_counters *c, bool runs)
{
	c->steal_runs = runs;
}

/* ---- Overflow callbacks (i-mode).
 *
 * An overflow event is a sampling copy of a counted event, opened for the calling
 * thread with the period asked for; the kernel queues a realtime signal to that thread
 * (F_SETOWN_EX with F_OWNER_TID, F_SETSIG) at every overflow, with the fd in si_fd,
 * without any ring buffer (perf_event's fasync path). Realtime signals queue instead of
 * merging, so each overflow gets its own call. The handler finds the fd in a fixed
 * table (no locks, no malloc: it runs in a signal handler), reads the thread's counts
 * with read(), which is async-signal-safe, and calls the callback. */
#define OVF_SLOTS 256

struct ovf_slot {
	volatile int fd;                  /* published last, cleared first: -1 or 0 = free */
	struct vp_counters *c;
	int event;
	vp_counters_overflow_fn fn;
	void *ctx;
};

static struct ovf_slot ovf_tab[OVF_SLOTS];
static int ovf_signal;                    /* the signal installed, 0 = none yet */
/* Taken by vp_counters__overflow only (never in the handler): two threads registering
 * at once must neither both install the handler nor both take the same free slot, in
 * which case one thread's fd was overwritten and its overflows went nowhere. */
static pthread_mutex_t ovf_lock = PTHREAD_MUTEX_INITIALIZER;
#define OVF_CLAIMED (-2)                  /* a slot being filled: not free, not matched */

static void on_overflow(int sig, siginfo_t *si, void *uc)
{
	int saved = errno;

	(void)sig;
	(void)uc;
	for (int s = 0; s < OVF_SLOTS; s++) {
		struct ovf_slot *o = &ovf_tab[s];
		uint64_t v[VP_MAX_EVENTS];

		int fd = __atomic_load_n(&o->fd, __ATOMIC_ACQUIRE);

		if (fd <= 0 || fd != si->si_fd)
			continue;
		if (o->c->grouped) {
			/* One read of the leader: the set's counts at one instant. */
			uint64_t b[3 + VP_MAX_EVENTS];
			size_t want = (size_t)(3 + o->c->n) * sizeof(uint64_t);
			bool ok = read(o->c->c[0].fd, b, want) == (ssize_t)want;

			for (int i = 0; i < o->c->n; i++)
				v[i] = ok ? b[3 + i] : 0;
		} else {
			for (int i = 0; i < o->c->n; i++) {
				uint64_t b[3];

				v[i] = read(o->c->c[i].fd, b, sizeof(b)) == (ssize_t)sizeof(b) ? b[0] : 0;
			}
		}
		o->fn(o->c, o->event, v, o->ctx);
		break;
	}
	errno = saved;
}

static int install_handler(void)
{
	struct sigaction sa, old;
	int sig = SIGRTMIN + 7;

	if (ovf_signal)
		return 0;
	if (sigaction(sig, NULL, &old))
		return -errno;
	/* Another handler on that signal is someone else's: do not take it over. */
	if ((old.sa_flags & SA_SIGINFO) ? old.sa_sigaction != NULL : (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN))
		return -EBUSY;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_overflow;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(sig, &sa, NULL))
		return -errno;
	ovf_signal = sig;
	return 0;
}

int vp_counters__overflow(struct vp_counters *c, int i, uint64_t period, vp_counters_overflow_fn fn, void *ctx)
{
	struct perf_event_attr attr;
	struct f_owner_ex owner = { .type = F_OWNER_TID, .pid = (pid_t)syscall(SYS_gettid) };
	int fd = -1, slot = -1, err;

	if (i < 0 || i >= c->n || !period || !fn)
		return -EINVAL;
	if (c->c[i].ovf_fd >= 0)
		return -EALREADY;
	pthread_mutex_lock(&ovf_lock);
	err = install_handler();
	for (int s = 0; !err && s < OVF_SLOTS && slot < 0; s++)
		if (ovf_tab[s].fd == 0 || ovf_tab[s].fd == -1) {
			slot = s;
			__atomic_store_n(&ovf_tab[s].fd, OVF_CLAIMED, __ATOMIC_RELEASE);
		}
	pthread_mutex_unlock(&ovf_lock);
	if (err)
		return err;
	if (slot < 0)
		return -ENOSPC;
	attr = c->c[i].attr;
	attr.read_format &= ~(uint64_t)PERF_FORMAT_GROUP;   /* a copy of its own, not a group */
	attr.sample_period = period;
	attr.wakeup_events = 1;    /* a wakeup, hence a signal, at every overflow */
	attr.disabled = 1;         /* enabled once the signal is routed */
	fd = (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		__atomic_store_n(&ovf_tab[slot].fd, -1, __ATOMIC_RELEASE);
		return err;
	}
	if (fcntl(fd, F_SETFL, O_ASYNC | O_NONBLOCK) || fcntl(fd, F_SETSIG, ovf_signal) ||
	    fcntl(fd, F_SETOWN_EX, &owner)) {
		err = -errno;
		close(fd);
		__atomic_store_n(&ovf_tab[slot].fd, -1, __ATOMIC_RELEASE);
		return err;
	}
	ovf_tab[slot].c = c;
	ovf_tab[slot].event = i;
	ovf_tab[slot].fn = fn;
	ovf_tab[slot].ctx = ctx;
	__atomic_store_n(&ovf_tab[slot].fd, fd, __ATOMIC_RELEASE);
	c->c[i].ovf_fd = fd;
	if (ioctl(fd, PERF_EVENT_IOC_ENABLE, 0)) {
		err = -errno;
		__atomic_store_n(&ovf_tab[slot].fd, -1, __ATOMIC_RELEASE);
		close(fd);
		c->c[i].ovf_fd = -1;
		return err;
	}
	return 0;
}

void vp_counters__close(struct vp_counters *c)
{
	if (!c)
		return;
	if (c->steal_fd >= 0)
		close(c->steal_fd);
	for (int i = 0; i < c->n; i++) {
		if (c->c[i].ovf_fd >= 0) {
			/* Off the table before the fd goes, so that no late signal reads it. */
			ioctl(c->c[i].ovf_fd, PERF_EVENT_IOC_DISABLE, 0);
			for (int s = 0; s < OVF_SLOTS; s++)
				if (ovf_tab[s].fd == c->c[i].ovf_fd)
					__atomic_store_n(&ovf_tab[s].fd, -1, __ATOMIC_RELEASE);
			close(c->c[i].ovf_fd);
		}
		munmap(c->c[i].pc, (size_t)c->page);
		close(c->c[i].fd);
	}
	free(c);
}
