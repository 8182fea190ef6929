/* The bpf backend: profile.bpf.c attached to one perf event per CPU per requested
 * event, samples in one BPF ring buffer consumed on a timer, and sideband from a dummy
 * perf event per CPU (perf_ring.c). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "common/session_format.h"
#include "common/steal_est.h"
#include "common/util.h"
#include "sampler-kernel/perf_ring.h"
#include "sampler-kernel/profile.h"
#include "sampler-kernel/sampler.h"
#include "sampler-kernel/tails.h"
#include "profile.skel.h"

/* How a walk ended goes from the BPF program into the session as it is. */
_Static_assert(VPB_WALK_NONE == VP_WALK_UNKNOWN && VPB_WALK_ROOT == VP_WALK_ROOT &&
	       VPB_WALK_NO_RULE == VP_WALK_NO_RULE && VPB_WALK_UNREADABLE == VP_WALK_UNREADABLE &&
	       VPB_WALK_DEPTH == VP_WALK_DEPTH && VPB_WALK_BAD_FRAME == VP_WALK_BAD_FRAME &&
	       VPB_WALK_NO_PROC == VP_WALK_NO_PROC, "profile.h walk ends differ from session_format.h's");
/* So do a sample's flags and its mode. */
_Static_assert(VPB_F_KERNEL_ERROR == VP_SAMPLE_KERNEL_ERROR && VPB_F_USER_ERROR == VP_SAMPLE_USER_ERROR,
	       "profile.h sample flags differ from session_format.h's");
_Static_assert(VPB_MODE_KERNEL == VP_MODE_KERNEL && VPB_MODE_USER == VP_MODE_USER,
	       "profile.h modes differ from session_format.h's enum vp_mode");
/* A session sample holds every frame the program can take (kernel, then the walked
 * user stack), and the count of its interpreted frames fits the 16 bits of nr_java. */
_Static_assert(VP_MAX_FRAMES == VPB_MAX_KSTACK + VPB_MAX_WALK && VPB_MAX_USTACK <= VPB_MAX_WALK,
	       "profile.h stack depths differ from session_format.h's VP_MAX_FRAMES");
_Static_assert(VPB_MAX_JFRAMES <= VPB_MAX_WALK && VPB_MAX_JFRAMES <= UINT16_MAX,
	       "profile.h interpreted frames exceed what a session sample holds");

/* Per CPU: ~0.12 s of -g samples (1.6 KiB each) at 10 kHz, so a 100 ms drain keeps up. */
#define DEFAULT_RINGBUF_PER_CPU (2u << 20)
#define MIN_RINGBUF (16u << 20)
#define SIDEBAND_PAGES 64
/* The sideband rings wake the recorder at each record when the walker is on
 * (open_sideband), so that it learns a new process's mappings at once. On a VM that
 * keeps starting programs (a build, other users' jobs) that was 370 wakeups a second,
 * each a drain of every ring: the recorder took 1.3% of a recorded JVM's CPU, 0.9% with
 * this gap (bench/suite.py service-breakdown). A record that comes sooner than this
 * after the last drain waits for the rest of it, and one drain takes all that came
 * meanwhile. A new process's tables come at
 * most this much later; building them takes longer. */
#define SIDEBAND_GAP_NS 10000000ull

struct sampler {
	struct sampler_config cfg;
	int ncpu;
	uint64_t last_totals;   /* CLOCK_MONOTONIC of the last VP_COUNTER_INTERVAL records */
	bool ungrouped[VP_MAX_EVENTS];   /* opened outside its group somewhere (EINVAL fallback) */
	/* One skeleton per event: each carries its event_index in rodata; the first one
	 * owns the maps and the fork/switch programs, the others reuse its maps. */
	struct profile *skel[VP_MAX_EVENTS];
	int nr_skel;
	struct bpf_link **links;       /* perf event links (they own the perf fds) */
	int nr_links;
	size_t cap_links, cap_counted;   /* of links[] and counted[], each grown by vp_grow */
	/* A copy of each event fd, read for the event's totals when sampling stops. */
	struct counted { int fd; pid_t tid; uint16_t event; } *counted;
	int nr_counted;
	struct bpf_link *fork_link, *switch_link, *creds_link;
	struct bpf_link *exit_links[VP_MAX_EVENTS];   /* on_exit of exactly weighed events */
	struct bpf_link *exec_links[VP_MAX_EVENTS];   /* their on_exec */
	/* Each thread's last sample of those events, for the count after it (tails.h). */
	struct vp_tails *tails;
	bool no_sample_read;           /* the kernel refused PERF_SAMPLE_READ on inherited events */
	struct ring_buffer *rb;
	int *sb_fds;
	struct perf_ring **sb_rings;
	struct pollfd *pfds;
	int nr_sb;
	struct perf_sideband sb;
	struct pid_set *filter;
	struct vp_sample *buf;
	struct sampler_unwind uw;      /* when cfg.unwind */
	uint64_t samples;
	uint64_t est_threshold;        /* common/steal_est.h: VP_STEAL_EST_THRESHOLD_NS, or the
					* environment's VIPROF_STEAL_EST_THRESHOLD_NS (measurements) */
	int cb_err;
	bool stopped;
	uint64_t last_drain;           /* CLOCK_MONOTONIC of the last drain (SIDEBAND_GAP_NS) */
};

static int libbpf_quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	/* The verifier log is long, and our own message says what failed and what to
	 * do: libbpf's warnings only with VIPROF_DEBUG. */
	return level == LIBBPF_WARN && getenv("VIPROF_DEBUG") ? vfprintf(stderr, fmt, ap) : 0;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static bool exact_weights(const struct sampler_event *ev);

/* A clock event sampled by perf's hrtimer: its samples can say how late they fired. */
static bool timer_event(const struct sampler_event *ev)
{
	return ev->type == PERF_TYPE_SOFTWARE &&
	       (ev->config == PERF_COUNT_SW_CPU_CLOCK || ev->config == PERF_COUNT_SW_TASK_CLOCK);
}

/* The steal estimate of a late clock sample (common/steal_est.h), as a sample of its own
 * under the same stack: the thread on the vCPU when the host took it is the one the
 * late timer interrupted (the guest switches nothing while it does not run). out is
 * the sample just emitted; it is reused. */
static int emit_estimate(struct sampler *s, const struct vpb_sample *b, struct vp_sample *out, size_t olen)
{
	uint64_t ns = vp_steal_est__ns(b->late_ns, b->period, s->est_threshold);

	if (!ns || !s->cfg.steal_est_event)
		return 0;
	out->event = (uint16_t)s->cfg.steal_est_event;
	out->period = ns;
	out->sched_state = VP_SCHED_HV_ESTIMATED;
	out->flags &= (uint8_t)~VP_SAMPLE_TAIL;
	return s->cfg.sink.emit(s->cfg.sink.ctx, VP_REC_SAMPLE, b->time, out, olen);
}

/* One sample, its stacks where the entry put them: a VPB_KIND_SAMPLE entry at fixed
 * places (kstack, ustack), a VPB_KIND_WALKED one packed after the header (profile.h).
 * nk, nu, nj are what the entry holds; stacked is false without -g. */
static int on_sample(struct sampler *s, const struct vpb_sample *b, bool stacked, const uint64_t *kstack, int nk,
		     const uint64_t *ustack, int nu, const struct vpb_jframe *jframes, int nj, bool walked)
{
	struct vp_sample *out = s->buf;
	int n = 0, njout = 0;

	memset(out, 0, sizeof(*out));
	out->pid = b->pid;
	out->tid = b->tid;
	out->cpu = b->cpu;
	out->event = (uint16_t)b->event;
	out->mode = (uint8_t)b->mode;
	out->flags = (uint8_t)b->flags;
	out->period = b->period;
	if (!stacked)
		nk = nu = nj = 0;
	if (stacked) {
		/* A full frame-pointer buffer means the walk was cut, like perf's
		 * sample_max_stack (also the fallback of a walked sample whose process had
		 * no tables yet); a walk says so itself (VPB_WALK_DEPTH). */
		bool fp = !walked || b->walk_end == VPB_WALK_NO_PROC;
		if (fp ? nu == VPB_MAX_USTACK : b->walk_end == VPB_WALK_DEPTH)
			out->flags |= VP_SAMPLE_USER_TRUNCATED;
		/* The session format holds at most VP_MAX_FRAMES in all; keep the kernel
		 * frames and as much of the user stack as fits. */
		if (nk > VP_MAX_FRAMES)
			nk = VP_MAX_FRAMES;
		if (nk + nu > VP_MAX_FRAMES) {
			nu = VP_MAX_FRAMES - nk;
			out->flags |= VP_SAMPLE_USER_TRUNCATED;
		}
		memcpy(out->ips, kstack, (size_t)nk * 8);
		memcpy(out->ips + nk, ustack, (size_t)nu * 8);
		n = nk + nu;
	}
	/* Without -g, or when the interrupted side's stack could not be read, the IP
	 * alone stands for that side. */
	if (b->mode == VPB_MODE_KERNEL && nk == 0) {
		memmove(out->ips + 1, out->ips, (size_t)n * 8);
		out->ips[0] = b->ip;
		nk = 1;
		n++;
	} else if (b->mode == VPB_MODE_USER && nu == 0 && n < VP_MAX_FRAMES) {
		out->ips[n++] = b->ip;
		nu = 1;
	}
	out->nr_kernel = (uint16_t)nk;
	out->nr_user = (uint16_t)nu;
	if (stacked) {
		struct vp_java_frame *jf = (struct vp_java_frame *)(out->ips + n);

		out->walk_end = b->walk_end < VP_WALK__COUNT ? (uint8_t)b->walk_end : VP_WALK_UNKNOWN;
		if (!walked && nu == VPB_MAX_USTACK && out->walk_end != VP_WALK_NO_PROC)
			out->walk_end = VP_WALK_DEPTH;
		/* Interpreted frames cut off with the user stack go with it. */
		for (int i = 0; i < nj && njout < VPB_MAX_JFRAMES; i++) {
			struct vpb_jframe j;

			memcpy(&j, jframes + i, sizeof(j));
			if (j.frame >= nu)
				continue;
			jf->frame = j.frame;
			jf->reserved = 0;
			jf->bci = j.bci;
			jf->method = j.method;
			jf++;
			njout++;
		}
		vp_sample_set_nr_java(out, (unsigned)njout);
	}
	s->samples++;
	size_t olen = sizeof(*out) + (size_t)n * 8 + (size_t)njout * sizeof(struct vp_java_frame);
	if (s->tails && out->event < s->cfg.nr_events && exact_weights(&s->cfg.events[out->event])) {
		int err = vp_tails__note(s->tails, out, olen);

		if (err)
			return err;
	}
	int err = s->cfg.sink.emit(s->cfg.sink.ctx, VP_REC_SAMPLE, b->time, out, olen);
	if (err || !b->late_ns)
		return err;
	return emit_estimate(s, b, out, olen);
}

/* A VPB_KIND_SAMPLE entry: the header alone, or (with -g) the fixed layout. */
static int on_fixed(struct sampler *s, const struct vpb_sample *b, size_t len)
{
	int nk = 0, nu = 0;
	bool stacked = s->cfg.callchain && len >= sizeof(*b);

	if (len < VPB_SAMPLE_HDR)
		return -EBADMSG;
	if (stacked) {
		nk = b->kstack_bytes > 0 ? b->kstack_bytes / 8 : 0;
		nu = b->ustack_bytes > 0 ? b->ustack_bytes / 8 : 0;
		nk = nk < VPB_MAX_KSTACK ? nk : VPB_MAX_KSTACK;
		nu = nu < VPB_MAX_USTACK ? nu : VPB_MAX_USTACK;
	}
	return on_sample(s, b, stacked, (const uint64_t *)b->kstack, nk, (const uint64_t *)b->ustack, nu, NULL, 0, false);
}

/* A VPB_KIND_WALKED entry: every length checked against the entry's. */
static int on_walked(struct sampler *s, const struct vpb_sample *b, size_t len)
{
	const char *p = (const char *)b + VPB_SAMPLE_HDR;
	size_t kb, ub, jb;

	if (len < VPB_SAMPLE_HDR)
		return -EBADMSG;
	kb = b->kstack_bytes > 0 ? (size_t)b->kstack_bytes : 0;
	ub = b->ustack_bytes > 0 ? (size_t)b->ustack_bytes : 0;
	jb = (size_t)b->nr_jframes * sizeof(struct vpb_jframe);
	if (kb % 8 || ub % 8 || kb > VPB_MAX_KSTACK * 8 || ub > VPB_MAX_WALK * 8 || b->nr_jframes > VPB_MAX_JFRAMES ||
	    VPB_SAMPLE_HDR + kb + ub + jb != len)
		return -EBADMSG;
	return on_sample(s, b, s->cfg.callchain, (const uint64_t *)p, (int)(kb / 8), (const uint64_t *)(p + kb),
			 (int)(ub / 8), (const struct vpb_jframe *)(p + kb + ub), b->nr_jframes, true);
}

static int on_ringbuf(void *ctx, void *data, size_t len)
{
	struct sampler *s = ctx;
	const uint32_t *kind = data;
	int err;

	if (len < 4)
		return 0;
	if (*kind == VPB_KIND_SAMPLE) {
		err = on_fixed(s, data, len);
	} else if (*kind == VPB_KIND_WALKED) {
		err = on_walked(s, data, len);
	} else if (*kind == VPB_KIND_TAIL && len >= sizeof(struct vpb_tail)) {
		const struct vpb_tail *t = data;

		err = vp_tails__charge(s->tails, &s->cfg.sink, t->pid, t->tid, (uint16_t)t->event, t->count, t->time, true);
		err = err < 0 ? err : 0;
	} else if (*kind == VPB_KIND_SWITCH && len >= sizeof(struct vpb_switch)) {
		const struct vpb_switch *w = data;
		struct vp_switch out = { .cpu = w->cpu, .prev_pid = w->prev_pid,
					 .prev_tid = w->prev_tid, .next_pid = w->next_pid,
					 .next_tid = w->next_tid };

		err = s->cfg.sink.emit(s->cfg.sink.ctx, VP_REC_SWITCH, w->time, &out, sizeof(out));
	} else {
		return 0;
	}
	if (err < 0)
		s->cb_err = err;
	return err;
}

/* The tracked map is filled by the fork program at the moment of the fork, so it
 * knows a new child even when that child's FORK record is still unread in another
 * CPU's ring. */
static bool tracked_in_kernel(void *ctx, uint32_t pid)
{
	struct sampler *s = ctx;
	uint8_t v;

	return bpf_map_lookup_elem(bpf_map__fd(s->skel[0]->maps.tracked), &pid, &v) == 0;
}

/* Whether pid had stopped being the user's at time (the on_creds program). */
static bool foreign_in_kernel(void *ctx, uint32_t pid, uint64_t time)
{
	struct sampler *s = ctx;
	uint64_t since;

	return bpf_map_lookup_elem(bpf_map__fd(s->skel[0]->maps.foreign), &pid, &since) == 0 && time >= since;
}

static int on_sideband(void *ctx, const struct perf_event_header *h)
{
	struct sampler *s = ctx;
	int err = perf_sideband__handle(&s->sb, h);

	return err < 0 ? err : 0;
}

static int drain(struct sampler *s)
{
	int total = 0, n;

	/* Sideband first, so that the MMAP of a new executable precedes its samples. */
	perf_sideband__batch(&s->sb);
	for (int i = 0; i < s->nr_sb; i++) {
		n = perf_ring__drain(s->sb_rings[i], on_sideband, s);
		if (n < 0)
			return n;
		total += n;
	}
	s->cb_err = 0;
	n = ring_buffer__consume(s->rb);
	if (n < 0)
		return s->cb_err ? s->cb_err : n;
	return total + n;
}

static void bpf_destroy(struct sampler *s);

static int open_sideband(struct sampler *s)
{
	size_t bytes = SIDEBAND_PAGES * (size_t)sysconf(_SC_PAGESIZE);

	for (int cpu = 0; cpu < s->ncpu; cpu++) {
		struct perf_event_attr a = {
			.size = sizeof(a), .type = PERF_TYPE_SOFTWARE, .config = PERF_COUNT_SW_DUMMY,
			.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU,
			.sample_id_all = 1, .mmap = 1, .mmap2 = 1, .comm = 1, .comm_exec = 1,
			.task = 1, .build_id = 1, .use_clockid = 1, .clockid = CLOCK_MONOTONIC,
			.watermark = 1, .wakeup_watermark = (uint32_t)(bytes / 4),
		};
		/* The stack walker needs a new process's mappings at once: until the
		 * unwinder has loaded its tables, its samples walk by frame pointer only.
		 * Side-band records are few, so a wakeup per record is cheap (not on a
		 * VM that keeps starting programs: there the whole-VM service, whose
		 * walker does not need them at once, drains them on its timer). */
		if (s->uw.rules && !s->cfg.sideband_batched)
			a.wakeup_watermark = 1;
		struct perf_ring *r;
		int fd = vp_perf_event_open(&a, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);

		if (fd == -ENODEV)
			continue;   /* offline CPU */
		if (fd < 0)
			return fd;
		r = perf_ring__open(fd, SIDEBAND_PAGES);
		if (!r) {
			int e = -errno;

			close(fd);
			return e;
		}
		s->sb_fds[s->nr_sb] = fd;
		s->sb_rings[s->nr_sb] = r;
		s->pfds[s->nr_sb] = (struct pollfd){ .fd = fd, .events = POLLIN };
		s->nr_sb++;
	}
	return 0;
}

static uint32_t ringbuf_size(const struct sampler_config *cfg, int ncpu)
{
	uint64_t want = cfg->buffer_pages ? (uint64_t)cfg->buffer_pages * 4096 * ncpu
					  : (uint64_t)DEFAULT_RINGBUF_PER_CPU * ncpu;
	uint32_t sz = cfg->buffer_pages ? 1u << 20 : MIN_RINGBUF;

	while (sz < want && sz < (1u << 30))
		sz <<= 1;
	return sz;
}

/* Frequency-driven counting events get their weights from their counts (exact_period
 * in profile.bpf.c); fixed periods are exact as they are, clock periods are time. */
static bool exact_weights(const struct sampler_event *ev)
{
	return !ev->period && !(ev->type == PERF_TYPE_SOFTWARE &&
				(ev->config == PERF_COUNT_SW_CPU_CLOCK || ev->config == PERF_COUNT_SW_TASK_CLOCK));
}

static int load_skeletons(struct sampler *s, char *err, size_t errlen)
{
	bool tracked = s->cfg.target != SAMPLER_TARGET_ALL;
	int rc;

	for (int e = 0; e < s->cfg.nr_events; e++) {
		struct profile *k = profile__open();

		if (!k) {
			rc = -errno;
			snprintf(err, errlen, "bpf sampler: cannot open the BPF object: %s", strerror(-rc));
			return rc;
		}
		s->skel[s->nr_skel++] = k;
		k->rodata->target_mode = tracked ? VPB_TARGET_TRACKED : VPB_TARGET_ALL;
		k->rodata->callchain = s->cfg.callchain;
		k->rodata->event_index = (uint32_t)e;
		k->rodata->unwind = s->cfg.callchain && s->cfg.unwind;
		k->rodata->exact_period = exact_weights(&s->cfg.events[e]);
		k->rodata->filter_uid = s->cfg.filter_uid ? (uint32_t)s->cfg.only_uid : (uint32_t)-1;
		k->rodata->exclude_kernel = s->cfg.events[e].exclude_kernel;
		k->rodata->est_timer = s->cfg.steal_est_event && timer_event(&s->cfg.events[e]);
		/* The walker's rule cache checked against its slow path (walker.bpf.h). */
		const char *rcm = getenv("VIPROF_DEBUG_RCACHE");
		k->rodata->walk_rcache_mode = rcm && !strcmp(rcm, "check") ? 1 : rcm && !strcmp(rcm, "plant") ? 2 : 0;
		bpf_program__set_autoload(k->progs.on_fork, e == 0 && tracked);
		bpf_program__set_autoload(k->progs.on_creds, e == 0 && tracked && s->cfg.filter_uid);
		bpf_program__set_autoload(k->progs.on_switch, e == 0 && s->cfg.want_switches);
		bpf_program__set_autoload(k->progs.on_exit, tracked && k->rodata->exact_period);
		bpf_program__set_autoload(k->progs.on_exec, tracked && k->rodata->exact_period);
		if (e == 0) {
			bool any_exact = false;
			for (int i = 0; i < s->cfg.nr_events; i++)
				any_exact |= exact_weights(&s->cfg.events[i]);
			if (!any_exact) {
				bpf_map__set_max_entries(k->maps.last_count, 1);
				bpf_map__set_max_entries(k->maps.thread_ev, 1);
				bpf_map__set_max_entries(k->maps.families, 1);
			}
			bpf_map__set_max_entries(k->maps.events, ringbuf_size(&s->cfg, s->ncpu));
			/* Maps this recording never touches get one entry: a preallocated hash of
			 * 65536 is 5 MB the kernel allocates, fills in and frees again at every
			 * start and stop. foreign serves only the one-user filter (on_creds,
			 * on_fork, foreign_in_kernel, all behind filter_uid); tracked is not read
			 * with -a (follows() returns early). */
			if (!s->cfg.filter_uid)
				bpf_map__set_max_entries(k->maps.foreign, 1);
			if (!tracked)
				bpf_map__set_max_entries(k->maps.tracked, 1);
			if (tracked && s->cfg.tracked_fd > 0 &&
			    (rc = bpf_map__reuse_fd(k->maps.tracked, s->cfg.tracked_fd))) {
				snprintf(err, errlen, "bpf sampler: cannot share the switch tracer's process map: %s",
					 strerror(-rc));
				return rc;
			}
			if (!k->rodata->unwind) {
				/* The walker's big arrays are only needed when it runs. */
				bpf_map__set_max_entries(k->maps.unwind_procs, 1);
				bpf_map__set_max_entries(k->maps.unwind_rules, 1);
				bpf_map__set_max_entries(k->maps.unwind_pages, 2);
				bpf_map__set_max_entries(k->maps.unwind_tables, 1);
				bpf_map__set_max_entries(k->maps.proc_slots, 1);
			} else {
				/* The walk's scratch is an array indexed by CPU (walker.bpf.h). */
				bpf_map__set_max_entries(k->maps.scratch, (uint32_t)libbpf_num_possible_cpus());
				/* One process and its children need few slots. */
				if (s->cfg.target != SAMPLER_TARGET_ALL)
					bpf_map__set_max_entries(k->maps.unwind_procs, 64);
				/* The page index needs one entry per 4 KiB of a table's code (and one
				 * more): clang 14, whose libLLVM and libclang-cpp give one process 2.5
				 * million rules, needs about 35,000, javac's 272,000 rules about 6,000.
				 * A quarter of a million (1 GiB of code, 2 MB) leaves the rules array
				 * to fill first; VPB_MAX_PAGES, four times that, was 6 MB more for the
				 * kernel to allocate, zero and map at every start. */
				bpf_map__set_max_entries(k->maps.unwind_pages, VPB_MAX_PAGES / 4);
			}
		} else {
			struct profile *k0 = s->skel[0];

			if ((rc = bpf_map__reuse_fd(k->maps.events, bpf_map__fd(k0->maps.events))) ||
			    (rc = bpf_map__reuse_fd(k->maps.last_count, bpf_map__fd(k0->maps.last_count))) ||
			    (rc = bpf_map__reuse_fd(k->maps.thread_ev, bpf_map__fd(k0->maps.thread_ev))) ||
			    (rc = bpf_map__reuse_fd(k->maps.families, bpf_map__fd(k0->maps.families))) ||
			    (rc = bpf_map__reuse_fd(k->maps.tracked, bpf_map__fd(k0->maps.tracked))) ||
			    (rc = bpf_map__reuse_fd(k->maps.foreign, bpf_map__fd(k0->maps.foreign))) ||
			    (rc = bpf_map__reuse_fd(k->maps.lost, bpf_map__fd(k0->maps.lost))) ||
			    (rc = bpf_map__reuse_fd(k->maps.proc_slots, bpf_map__fd(k0->maps.proc_slots))) ||
			    (rc = bpf_map__reuse_fd(k->maps.unwind_procs, bpf_map__fd(k0->maps.unwind_procs))) ||
			    (rc = bpf_map__reuse_fd(k->maps.unwind_tables, bpf_map__fd(k0->maps.unwind_tables))) ||
			    (rc = bpf_map__reuse_fd(k->maps.unwind_rules, bpf_map__fd(k0->maps.unwind_rules))) ||
			    (rc = bpf_map__reuse_fd(k->maps.unwind_pages, bpf_map__fd(k0->maps.unwind_pages))) ||
			    (rc = bpf_map__reuse_fd(k->maps.scratch, bpf_map__fd(k0->maps.scratch)))) {
				snprintf(err, errlen, "bpf sampler: cannot share maps between events: %s",
					 strerror(-rc));
				return rc;
			}
		}
		/* The walker's rule cache, each event's own (walker.bpf.h): VPB_RCACHE entries
		 * per possible CPU, one entry without the walker (nothing reads it then). */
		bpf_map__set_max_entries(k->maps.walk_rcache, k->rodata->unwind ?
					 VPB_RCACHE * (uint32_t)libbpf_num_possible_cpus() : 1);
		/* VIPROF_DEBUG_TIMING: the verifier's own account of on_sample (its time and
		 * the instructions it walked), the bulk of start-up. */
		static char vlog[4096];
		const char *dbg = getenv("VIPROF_DEBUG_TIMING");
		bool vstats = dbg && *dbg && *dbg != '0' && bpf_program__autoload(k->progs.on_sample);
		if (vstats) {
			vlog[0] = '\0';
			bpf_program__set_log_buf(k->progs.on_sample, vlog, sizeof(vlog));
			bpf_program__set_log_level(k->progs.on_sample, 4);
		}
		vp_timing("bpf: skeleton opened and configured");
		rc = profile__load(k);
		if (vstats && !rc) {
			char *save = NULL;
			for (char *l = strtok_r(vlog, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
				if (!strncmp(l, "verification time", 17) || !strncmp(l, "processed", 9))
					fprintf(stderr, "viprof timing: bpf: on_sample: %s\n", l);
		}
		if (rc) {
			snprintf(err, errlen, "bpf sampler: the kernel refused the BPF program (%s); use --backend perf",
				 strerror(-rc));
			return rc;
		}
	}
	return 0;
}

/* Opens every event on one thread (pid > 0, followed into the threads and processes
 * it creates: inherit) or one CPU (pid -1), as one group so that a (v)PMU schedules
 * them together and their ratios hold; a mix the PMU cannot group (EINVAL) falls back
 * to separate events. ENODEV (offline CPU) and ESRCH (a thread that exited) skip. */
static int attach_one(struct sampler *s, pid_t pid, int cpu, char *err, size_t errlen)
{
	int leader = -1;

	for (int e = 0; e < s->cfg.nr_events; e++) {
		const struct sampler_event *ev = &s->cfg.events[e];
		struct perf_event_attr a = { .size = sizeof(a), .type = ev->type,
					     .config = ev->config, .disabled = 1,
					     .exclude_kernel = ev->exclude_kernel,
					     .exclude_user = ev->exclude_user,
					     .read_format = VP_READ_FORMAT,
					     .inherit = pid > 0 };
		struct bpf_link *l;
		int fd, copy;

		/* Without it the kernel swaps equal perf contexts between a parent and a
		 * child thread at a switch on one CPU (perf_event_context_sched_out), and the
		 * perf_event behind a sample then counts for another thread: the program's
		 * per-instance counts (true_period, on_exit) mix threads. PERF_SAMPLE_READ
		 * on an inherited event (Linux 6.12+) makes the kernel keep each thread's
		 * context; no sample is written anyway (the program takes the overflow). */
		if (a.inherit && exact_weights(ev) && !s->no_sample_read)
			a.sample_type = PERF_SAMPLE_READ | PERF_SAMPLE_TID;   /* the kernel wants TID with it */

		if (ev->period) {
			a.sample_period = ev->period;
		} else {
			a.freq = 1;
			a.sample_freq = ev->freq ? ev->freq : 1000;
		}
		fd = vp_perf_event_open(&a, pid, cpu, leader, PERF_FLAG_FD_CLOEXEC);
		if (fd == -EINVAL && a.sample_type) {
			/* A kernel before 6.12: per-thread counts only for single-threaded targets. */
			s->no_sample_read = true;
			a.sample_type = 0;
			fd = vp_perf_event_open(&a, pid, cpu, leader, PERF_FLAG_FD_CLOEXEC);
		}
		if (fd == -EINVAL && leader >= 0) {
			fd = vp_perf_event_open(&a, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
			s->ungrouped[e] = fd >= 0;
		}
		if (fd == -ENODEV || (fd == -ESRCH && pid > 0))
			return 0;
		if (fd < 0) {
			if (pid > 0)
				snprintf(err, errlen, "bpf sampler: perf_event_open of '%s' on thread %d: %s; check the event with 'viprof probe'",
					 ev->name, (int)pid, strerror(-fd));
			else
				snprintf(err, errlen, "bpf sampler: perf_event_open of '%s' on CPU %d: %s; check the event with 'viprof probe'",
					 ev->name, cpu, strerror(-fd));
			return fd;
		}
		if (vp_grow((void **)&s->links, &s->cap_links, (size_t)s->nr_links + 1, sizeof(*s->links)) ||
		    vp_grow((void **)&s->counted, &s->cap_counted, (size_t)s->nr_links + 1, sizeof(*s->counted))) {
			close(fd);
			snprintf(err, errlen, "bpf sampler: out of memory");
			return -ENOMEM;
		}
		copy = fcntl(fd, F_DUPFD_CLOEXEC, 0);
		l = bpf_program__attach_perf_event(s->skel[e]->progs.on_sample, fd);
		if (!l) {
			int rc = -errno;

			close(fd);
			if (copy >= 0)
				close(copy);
			snprintf(err, errlen, "bpf sampler: cannot attach to the '%s' event: %s",
				 ev->name, strerror(-rc));
			return rc;
		}
		if (e == 0)
			leader = fd;
		s->links[s->nr_links++] = l;
		if (copy >= 0)
			s->counted[s->nr_counted++] = (struct counted){ copy, pid, (uint16_t)e };
	}
	return 0;
}

/* -a: every CPU. Otherwise the target's threads themselves, inherited by the threads
 * and processes they create: a sample's period (perf's data->period) then counts the
 * events of its own thread since that thread's last sample, so the weights add up to
 * the thread's count. A CPU-wide event would spread each period over every task that
 * ran on the CPU in between and leave the target's total to chance. */
static int attach_events(struct sampler *s, char *err, size_t errlen)
{
	int rc = 0;

	if (s->cfg.target == SAMPLER_TARGET_ALL) {
		for (int cpu = 0; cpu < s->ncpu && !rc; cpu++)
			rc = attach_one(s, -1, cpu, err, errlen);
		return rc;
	}
	if (s->cfg.target == SAMPLER_TARGET_LAUNCH)
		return attach_one(s, s->cfg.pids[0], -1, err, errlen);
	for (int i = 0; i < s->cfg.nr_pids && !rc; i++) {
		char path[64];
		struct dirent *d;
		DIR *dir;

		snprintf(path, sizeof(path), "/proc/%d/task", (int)s->cfg.pids[i]);
		if (!(dir = opendir(path))) {
			rc = -errno;
			snprintf(err, errlen, "bpf sampler: cannot list the threads of %d: %s; check the pid",
				 (int)s->cfg.pids[i], strerror(-rc));
			break;
		}
		while ((d = readdir(dir)) && !rc)
			if (d->d_name[0] >= '0' && d->d_name[0] <= '9')
				rc = attach_one(s, (pid_t)atoi(d->d_name), -1, err, errlen);
		closedir(dir);
	}
	return rc;
}

/* One COUNTER record per event: its count over every thread (children included) or
 * CPU, and its enabled and running times, which differ when the (v)PMU multiplexed it.
 * flags adds VP_COUNTER_INTERVAL for the running totals read while recording. */
static int emit_totals(struct sampler *s, uint32_t flags)
{
	for (int e = 0; e < s->cfg.nr_events; e++) {
		struct vp_counter c = { .pid = VP_COUNTER_ALL, .tid = VP_COUNTER_ALL, .event = (uint32_t)e,
					.flags = VP_COUNTER_SAMPLED | flags |
						 (s->ungrouped[e] ? VP_COUNTER_UNGROUPED : 0) };
		uint64_t v[3];
		int rc;

		for (int i = 0; i < s->nr_counted; i++) {
			if (s->counted[i].event != e || read(s->counted[i].fd, v, sizeof(v)) != (ssize_t)sizeof(v))
				continue;
			c.value += v[0];
			c.time_enabled += v[1];
			c.time_running += v[2];
		}
		if ((rc = s->cfg.sink.emit(s->cfg.sink.ctx, VP_REC_COUNTER, now_ns(), &c, sizeof(c))))
			return rc;
	}
	return 0;
}

/* Address space for an mmapable array, not a mapping of it: the unwinder maps the part
 * its tables reach as they grow (recorder/unwinder.c, sampler.h). bpf_destroy unmaps the
 * whole span, mapped or not. */
static void *map_reserve(size_t elem, uint32_t n)
{
	size_t len = ((size_t)elem * n + 4095) & ~(size_t)4095;
	void *p = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static int setup_unwind(struct sampler *s, char *err, size_t errlen)
{
	struct profile *k = s->skel[0];
	struct sampler_unwind *u = &s->uw;

	u->proc_slots_fd = bpf_map__fd(k->maps.proc_slots);
	u->procs_fd = bpf_map__fd(k->maps.unwind_procs);
	u->tables_fd = bpf_map__fd(k->maps.unwind_tables);
	u->rules_fd = bpf_map__fd(k->maps.unwind_rules);
	u->pages_fd = bpf_map__fd(k->maps.unwind_pages);
	u->max_procs = bpf_map__max_entries(k->maps.unwind_procs);
	u->max_tables = bpf_map__max_entries(k->maps.unwind_tables);
	u->max_rules = bpf_map__max_entries(k->maps.unwind_rules);
	u->max_pages = bpf_map__max_entries(k->maps.unwind_pages);
	u->rules = map_reserve(sizeof(struct vpb_rule), u->max_rules);
	u->pages = map_reserve(sizeof(uint64_t), u->max_pages);
	if (!u->rules || !u->pages) {
		int rc = -errno;

		snprintf(err, errlen, "bpf sampler: cannot reserve address space for the unwind tables: %s", strerror(-rc));
		return rc;
	}
	return 0;
}

static int bpf_unwind_tables(struct sampler *s, struct sampler_unwind *out)
{
	if (!s->uw.rules)
		return -ENOTSUP;
	*out = s->uw;
	return 0;
}

static struct sampler *bpf_start(const struct sampler_config *cfg, char *err, size_t errlen)
{
	int ncpu = libbpf_num_possible_cpus(), rc = 0;
	struct sampler *s = NULL;
	uint8_t one = 1;

	if (cfg->nr_events < 1 || cfg->nr_events > VP_MAX_EVENTS ||
	    (cfg->target != SAMPLER_TARGET_ALL && cfg->nr_pids < 1) || !cfg->sink.emit) {
		snprintf(err, errlen, "bpf sampler: bad configuration (need 1..%d events, a sink, and pids unless -a)",
			 VP_MAX_EVENTS);
		errno = EINVAL;
		return NULL;
	}
	libbpf_set_print(libbpf_quiet);
	if (ncpu <= 0 || !(s = calloc(1, sizeof(*s)))) {
		snprintf(err, errlen, "bpf sampler: out of memory");
		errno = ENOMEM;
		return NULL;
	}
	s->cfg = *cfg;
	/* The threshold is the rule's; a study of the rule itself (bench/steal-est.sh, the
	 * live test) may move it through the environment, to see gaps it does not. */
	const char *th = getenv("VIPROF_STEAL_EST_THRESHOLD_NS");
	s->est_threshold = th && *th ? strtoull(th, NULL, 10) : VP_STEAL_EST_THRESHOLD_NS;
	s->ncpu = ncpu;
	s->sb_fds = calloc(ncpu, sizeof(*s->sb_fds));
	s->sb_rings = calloc(ncpu, sizeof(*s->sb_rings));
	s->pfds = calloc(ncpu, sizeof(*s->pfds));
	s->buf = malloc(sizeof(struct vp_sample) + VP_MAX_FRAMES * sizeof(uint64_t) +
			VPB_MAX_JFRAMES * sizeof(struct vp_java_frame));
	if (!s->sb_fds || !s->sb_rings || !s->pfds || !s->buf) {
		rc = -ENOMEM;
		snprintf(err, errlen, "bpf sampler: out of memory");
		goto cleanup;
	}
	rc = load_skeletons(s, err, errlen);
	if (rc)
		goto cleanup;
	vp_timing("bpf: skeletons loaded (verified)");
	if (s->skel[0]->rodata->unwind && (rc = setup_unwind(s, err, errlen)))
		goto cleanup;

	if (cfg->target != SAMPLER_TARGET_ALL) {
		s->filter = pid_set__new();
		if (!s->filter) {
			rc = -ENOMEM;
			snprintf(err, errlen, "bpf sampler: out of memory");
			goto cleanup;
		}
		for (int i = 0; i < cfg->nr_pids; i++) {
			uint32_t pid = (uint32_t)cfg->pids[i];

			if ((rc = pid_set__add(s->filter, pid)) ||
			    (rc = bpf_map_update_elem(bpf_map__fd(s->skel[0]->maps.tracked), &pid, &one, BPF_ANY))) {
				snprintf(err, errlen, "bpf sampler: cannot track pid %u: %s", pid, strerror(-rc));
				goto cleanup;
			}
		}
		/* Fork tracking goes live before the events so no child slips through. */
		s->fork_link = bpf_program__attach(s->skel[0]->progs.on_fork);
		if (!s->fork_link) {
			rc = -errno;
			snprintf(err, errlen, "bpf sampler: cannot attach to sched_process_fork: %s", strerror(-rc));
			goto cleanup;
		}
		/* Recording for one user: who stops being theirs is watched from before the
		 * events open. Without it a set-uid child's mappings would reach the user. */
		if (cfg->filter_uid && !(s->creds_link = bpf_program__attach(s->skel[0]->progs.on_creds))) {
			rc = -errno;
			snprintf(err, errlen, "bpf sampler: cannot watch set-uid execs (tracepoint sched_prepare_exec, Linux 6.10+): %s",
				 strerror(-rc));
			goto cleanup;
		}
	}
	/* The count after each thread's last sample, read as it exits (tails.h), and at each
	 * exec, where it is the old program's (on_exec in profile.bpf.c). */
	for (int e = 0; cfg->target != SAMPLER_TARGET_ALL && e < s->nr_skel; e++) {
		if (!s->skel[e]->rodata->exact_period)
			continue;
		if (!s->tails && !(s->tails = vp_tails__new())) {
			rc = -ENOMEM;
			snprintf(err, errlen, "bpf sampler: out of memory");
			goto cleanup;
		}
		s->exit_links[e] = bpf_program__attach(s->skel[e]->progs.on_exit);
		if (!s->exit_links[e]) {
			rc = -errno;
			snprintf(err, errlen, "bpf sampler: cannot attach to sched_process_exit: %s", strerror(-rc));
			goto cleanup;
		}
		s->exec_links[e] = bpf_program__attach(s->skel[e]->progs.on_exec);
		if (!s->exec_links[e]) {
			rc = -errno;
			snprintf(err, errlen, "bpf sampler: cannot attach to task_rename (to split counts at execs): %s",
				 strerror(-rc));
			goto cleanup;
		}
	}
	s->rb = ring_buffer__new(bpf_map__fd(s->skel[0]->maps.events), on_ringbuf, s, NULL);
	if (!s->rb) {
		rc = -errno;
		snprintf(err, errlen, "bpf sampler: cannot map the ring buffer: %s", strerror(-rc));
		goto cleanup;
	}
	s->sb.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU;
	s->sb.filter = s->filter;
	if (s->filter) {
		s->sb.follows = tracked_in_kernel;
		s->sb.follows_ctx = s;
		if (s->cfg.filter_uid)
			s->sb.foreign = foreign_in_kernel;
	}
	s->sb.sink = &s->cfg.sink;
	if (cfg->want_sideband && (rc = open_sideband(s))) {
		snprintf(err, errlen, "bpf sampler: cannot open the sideband event: %s; run as root or grant CAP_PERFMON",
			 strerror(-rc));
		goto cleanup;
	}
	vp_timing("bpf: ring buffer and sideband open");
	if (cfg->want_switches) {
		s->switch_link = bpf_program__attach(s->skel[0]->progs.on_switch);
		if (!s->switch_link) {
			rc = -errno;
			snprintf(err, errlen, "bpf sampler: cannot attach to sched_switch: %s", strerror(-rc));
			goto cleanup;
		}
	}
	if (s->uw.rules && cfg->before_sampling) {
		cfg->before_sampling(cfg->before_ctx, &s->uw);
		vp_timing("bpf: stack walker's tables loaded");
	}
	rc = attach_events(s, err, errlen);
	vp_timing("bpf: events attached");
	if (rc == 0 && s->nr_links == 0) {
		rc = -ENODEV;
		snprintf(err, errlen, cfg->target == SAMPLER_TARGET_ALL ? "bpf sampler: no online CPU to sample"
			 : "bpf sampler: every thread of the target exited before sampling began; check the pid");
	}
cleanup:
	if (rc) {
		bpf_destroy(s);
		errno = -rc;
		return NULL;
	}
	return s;
}

static int bpf_poll(struct sampler *s, int timeout_ms)
{
	/* The BPF side never wakes us (BPF_RB_NO_WAKEUP); the sideband rings wake at a
	 * watermark. Either way the timeout is the drain period. */
	if (!s->stopped && timeout_ms > 0) {
		if (s->nr_sb) {
			int ready = poll(s->pfds, s->nr_sb, timeout_ms);

			if (ready < 0 && errno != EINTR)
				return -errno;
			uint64_t t = now_ns(), due = s->last_drain + SIDEBAND_GAP_NS;
			if (ready > 0 && t < due) {
				struct timespec ts = { 0, (long)(due - t) };

				nanosleep(&ts, NULL);
			}
		} else {
			struct timespec ts = { timeout_ms / 1000, (timeout_ms % 1000) * 1000000L };

			nanosleep(&ts, NULL);
		}
	}
	int n = drain(s);
	s->last_drain = now_ns();
	/* Running totals every VP_COUNTER_INTERVAL_NS, after the drain so that the
	 * samples before them in the stream are the ones they cover. */
	uint64_t t = now_ns();
	if (n >= 0 && !s->stopped && t - s->last_totals >= VP_COUNTER_INTERVAL_NS) {
		int rc = emit_totals(s, VP_COUNTER_INTERVAL);

		if (rc)
			return rc;
		s->last_totals = t;
	}
	return n;
}

static void read_lost(const struct sampler *s, uint64_t out[VPB_LOST_NR])
{
	uint64_t *v = calloc(s->ncpu, sizeof(*v));

	memset(out, 0, VPB_LOST_NR * sizeof(*out));
	if (!v || !s->nr_skel)
		goto out;
	for (uint32_t k = 0; k < VPB_LOST_NR; k++) {
		if (bpf_map_lookup_elem(bpf_map__fd(s->skel[0]->maps.lost), &k, v))
			continue;
		for (int c = 0; c < s->ncpu; c++)
			out[k] += v[c];
	}
out:
	free(v);
}

/* VIPROF_DEBUG_RCACHE=check|plant: what the walker's rule cache would have served,
 * against what the searches found (test-walk-rcache reads this line). */
static void report_rcache(const struct sampler *s)
{
	uint64_t n[VPB_RC_NR] = { 0 }, *v = calloc(s->ncpu, sizeof(*v));

	if (!v || !s->nr_skel || !s->skel[0]->rodata->walk_rcache_mode) {
		free(v);
		return;
	}
	for (int e = 0; e < s->nr_skel; e++)
		for (uint32_t k = 0; k < VPB_RC_NR; k++)
			if (bpf_map_lookup_elem(bpf_map__fd(s->skel[e]->maps.walk_rcache_stats), &k, v) == 0)
				for (int c = 0; c < s->ncpu; c++)
					n[k] += v[c];
	fprintf(stderr, "viprof debug: walker rule cache: %llu hits compared, %llu wrong, %llu fills; "
		"segment map window: %llu blobs compared, %llu wrong\n",
		(unsigned long long)n[VPB_RC_HIT], (unsigned long long)n[VPB_RC_WRONG], (unsigned long long)n[VPB_RC_FILL],
		(unsigned long long)n[VPB_RC_SEG], (unsigned long long)n[VPB_RC_SEG_WRONG]);
	free(v);
}

static int emit_lost(struct sampler *s, uint32_t source, uint64_t count, uint64_t t)
{
	struct vp_lost l = { .cpu = UINT32_MAX, .source = source, .count = count };

	return s->cfg.sink.emit(s->cfg.sink.ctx, VP_REC_LOST, t, &l, sizeof(l));
}

static int bpf_stop(struct sampler *s)
{
	uint64_t lost[VPB_LOST_NR], t;
	int n, rc;

	if (s->stopped)
		return 0;
	/* Destroying a perf link disables and closes its event. */
	for (int i = 0; i < s->nr_links; i++)
		bpf_link__destroy(s->links[i]);
	s->nr_links = 0;
	bpf_link__destroy(s->switch_link);
	s->switch_link = NULL;
	s->stopped = true;
	n = drain(s);
	if (n < 0)
		return n;
	if ((rc = emit_totals(s, 0)))
		return rc;
	read_lost(s, lost);
	report_rcache(s);
	t = now_ns();
	rc = emit_lost(s, VP_LOST_KERNEL_RING, lost[VPB_LOST_RINGBUF], t);
	if (!rc && lost[VPB_LOST_STACK])
		rc = emit_lost(s, VP_LOST_STACK, lost[VPB_LOST_STACK], t);
	if (!rc && s->sb.lost)
		rc = emit_lost(s, VP_LOST_SIDEBAND, s->sb.lost, t);
	return rc;
}

static int bpf_set_freq(struct sampler *s, uint64_t freq)
{
	int ret = 0;

	/* counted[] holds a copy of every event fd: the ioctl reaches the same event. */
	for (int i = 0; i < s->nr_counted; i++) {
		const struct sampler_event *ev = &s->cfg.events[s->counted[i].event];
		uint64_t f = freq;
		if (ev->period)
			continue;
		/* The kernel turns a clock event's frequency into a fixed period in ns when it
		 * opens (perf_swevent_init_hrtimer), so the ioctl takes a period for those: a
		 * rate in Hz given as-is made 19 Hz a 19 ns period and flooded the service. */
		if (ev->type == PERF_TYPE_SOFTWARE &&
		    (ev->config == PERF_COUNT_SW_CPU_CLOCK || ev->config == PERF_COUNT_SW_TASK_CLOCK))
			f = 1000000000ull / (freq ? freq : 1);
		if (ioctl(s->counted[i].fd, PERF_EVENT_IOC_PERIOD, &f) != 0 && !ret)
			ret = -errno;
	}
	for (int e = 0; !ret && e < s->cfg.nr_events; e++)
		if (!s->cfg.events[e].period)
			s->cfg.events[e].freq = freq;
	return ret;
}

static void bpf_counts(const struct sampler *s, uint64_t *samples, uint64_t *lost)
{
	uint64_t l[VPB_LOST_NR];

	read_lost(s, l);
	*samples = s->samples;
	*lost = l[VPB_LOST_RINGBUF];
}

/* The MMAP records travel in the side-band rings, not in the BPF ring: their losses are
 * what makes the recorder read the processes' mappings again (resync_after_loss). */
static uint64_t bpf_sideband_lost(const struct sampler *s)
{
	return s->sb.lost;
}

static void bpf_destroy(struct sampler *s)
{
	if (!s)
		return;
	for (int i = 0; i < s->nr_links; i++)
		bpf_link__destroy(s->links[i]);
	bpf_link__destroy(s->switch_link);
	bpf_link__destroy(s->fork_link);
	bpf_link__destroy(s->creds_link);
	for (int e = 0; e < VP_MAX_EVENTS; e++) {
		bpf_link__destroy(s->exit_links[e]);
		bpf_link__destroy(s->exec_links[e]);
	}
	vp_tails__free(s->tails);
	ring_buffer__free(s->rb);
	for (int i = 0; i < s->nr_sb; i++) {
		perf_ring__free(s->sb_rings[i]);
		close(s->sb_fds[i]);
	}
	if (s->uw.rules)
		munmap(s->uw.rules, ((size_t)s->uw.max_rules * sizeof(struct vpb_rule) + 4095) & ~(size_t)4095);
	if (s->uw.pages)
		munmap(s->uw.pages, ((size_t)s->uw.max_pages * 8 + 4095) & ~(size_t)4095);
	for (int i = 0; i < s->nr_skel; i++)
		profile__destroy(s->skel[i]);
	perf_sideband__fini(&s->sb);
	pid_set__free(s->filter);
	free(s->links);
	for (int i = 0; i < s->nr_counted; i++)
		close(s->counted[i].fd);
	free(s->counted);
	free(s->sb_fds);
	free(s->sb_rings);
	free(s->pfds);
	free(s->buf);
	free(s);
}

static bool bpf_supported(const struct sampler_config *cfg, char *why, size_t whylen)
{
	int r;

	if (cfg->guest_modes) {
		/* A BPF perf_event program sees regs and a kernel/user split only: another
		 * domain's kernel sample would be charged to dom0's current thread and
		 * named from dom0's kallsyms. The perf backend records PERF_RECORD_MISC_GUEST_*. */
		snprintf(why, whylen, "with Xen PMU mode 'all' other domains' samples must be kept apart, and the bpf "
			 "sampler cannot tell guest mode from dom0's own; the perf backend can (--backend perf)");
		return false;
	}
	libbpf_set_print(libbpf_quiet);
	r = libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_PERF_EVENT, NULL);
	if (r <= 0) {
		/* The probe reports a refusal as "unsupported" too; the uid tells them apart. */
		snprintf(why, whylen, "BPF unavailable (needs CAP_BPF and CAP_PERFMON, or root): cannot load a perf_event program (%s)",
			 r < 0 ? strerror(-r) : geteuid() != 0 ? "not permitted for this user" :
			 "not supported by this kernel");
		return false;
	}
	r = libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF, NULL);
	if (r <= 0) {
		snprintf(why, whylen, "BPF unavailable: no BPF ring buffer: the BPF backend needs Linux 5.19 or later with BTF; --backend perf works without (%s)",
			 r < 0 ? strerror(-r) : "not supported");
		return false;
	}
	snprintf(why, whylen, "BPF programs and ring buffers load here");
	return true;
}

const struct sampler_backend sampler_backend_bpf = {
	.name = "bpf",
	.supported = bpf_supported,
	.start = bpf_start,
	.poll = bpf_poll,
	.stop = bpf_stop,
	.counts = bpf_counts,
	.sideband_lost = bpf_sideband_lost,
	.destroy = bpf_destroy,
	.unwind_tables = bpf_unwind_tables,
	.set_freq = bpf_set_freq,
};
