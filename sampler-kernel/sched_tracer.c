/* User side of the context-switch tracer (sched.bpf.c, sched.h): loads it, swaps and
 * drains its two aggregation hashes on a timer, and turns their sums into session
 * records (sched_tracer.h says which). */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "common/session_format.h"
#include "common/util.h"
#include "sampler-kernel/sched.h"
#include "sampler-kernel/sched_tracer.h"
#include "sched.skel.h"
#include "sched_open.skel.h"
#include "sched_lite.skel.h"

/* The BPF program writes its states into the session as they are: the two lists must
 * stay equal, which the compiler checks rather than a comment. */
_Static_assert(VPS_STEAL == VP_SCHED_STEAL && VPS_BLOCKED_SLEEP == VP_SCHED_BLOCKED_SLEEP &&
	       VPS_BLOCKED_IO == VP_SCHED_BLOCKED_IO && VPS_BLOCKED_LOCK == VP_SCHED_BLOCKED_LOCK &&
	       VPS_RUNNABLE_PREEMPT == VP_SCHED_RUNNABLE_PREEMPT && VPS_RUNNABLE_WOKEN == VP_SCHED_RUNNABLE_WOKEN &&
	       VPS_BLOCKED_OTHER == VP_SCHED_BLOCKED_OTHER && VPS_BLOCKED_FD == VP_SCHED_BLOCKED_FD &&
	       VPS_BLOCKED_WAIT == VP_SCHED_BLOCKED_WAIT, "sched.h states differ from session_format.h's");
_Static_assert(VPS_STATE_MAX <= VP_SCHED__COUNT, "sched.h has states session_format.h does not name");
/* An off-CPU sample holds its whole walked user stack, as much of its kernel stack as
 * the rest of VP_MAX_FRAMES takes (KSTACK_ROOM, the sampler's too), and names its
 * interpreted frames among the user ones. */
#define KSTACK_ROOM (VP_MAX_FRAMES - VPS_MAX_UFRAMES)
_Static_assert(KSTACK_ROOM >= 64 && VPS_MAX_JFRAMES <= VPS_MAX_UFRAMES,
	       "sched.h stack depths exceed session_format.h's VP_MAX_FRAMES");

#define DEFAULT_DRAIN_NS (250ull * 1000000)
#define MAX_KEYS_PER_DRAIN 65536

struct vp_sched {
	struct vp_sched_config cfg;
	/* With --off-cpu the full object (sched.bpf.c), else the lite one (sched_lite.bpf.c):
	 * one of the two is loaded. m and the pointers below name the loaded one's maps and
	 * variables (bind_full, bind_lite), which both objects share by name. */
	struct sched *skel;
	struct sched_lite *lite;
	struct {
		struct bpf_map *stacks, *agg0, *agg1, *threads, *cpus, *counters, *tracked;
		struct bpf_map *ustacks, *uparts;   /* NULL in the lite object (no walker) */
	} m;
	volatile __u32 *agg_sel;
	volatile __u64 *win_start, *win_end;
	struct bpf_link *links[4];
	int nr_links;
	int ncpu;
	uint64_t last_drain;
	struct vps_key *keys;            /* scratch for one drain */
	struct vp_sample *buf;           /* one record being built */
	uint64_t *kips, *uips;           /* stack map values */
	struct vps_ustack *ustk;         /* a part of a walked stack read back */
	struct vpb_jframe *jf;           /* its interpreted frames, VPS_MAX_JFRAMES */
	struct vp_sched_stats st;
	bool stopped;
	bool walker;                     /* the loaded object walks with the sampler's tables */
	/* Loaded with the walking object, run once when the window opens, then freed: opens
	 * the intervals of threads already off CPU then (sched_open.bpf.c). */
	struct sched_open *opener;
	/* The sampler's before_sampling callback this tracer wrapped (vp_sched__hook). */
	void (*next_before)(void *ctx, const struct sampler_unwind *uw);
	void *next_ctx;
	char walker_err[256];            /* why the walker could not be used, or "" */
	/* The tracked map, lent to the sampler (vp_sched__hook): a descriptor of its own,
	 * since use_walker() closes the first object's. -1 when not lent. */
	int tracked_fd;
};

/* The maps and variables both objects have (sched.bpf.c and sched_lite.bpf.c declare them
 * under the same names; their skeletons are different types). */
#define BIND_COMMON(s, k)                              \
	do {                                           \
		(s)->m.stacks = (k)->maps.stacks;      \
		(s)->m.agg0 = (k)->maps.agg0;          \
		(s)->m.agg1 = (k)->maps.agg1;          \
		(s)->m.threads = (k)->maps.threads;    \
		(s)->m.cpus = (k)->maps.cpus;          \
		(s)->m.counters = (k)->maps.counters;  \
		(s)->m.tracked = (k)->maps.tracked;    \
		(s)->agg_sel = &(k)->bss->agg_sel;     \
		(s)->win_start = &(k)->bss->win_start; \
		(s)->win_end = &(k)->bss->win_end;     \
	} while (0)

static void bind_full(struct vp_sched *s)
{
	BIND_COMMON(s, s->skel);
	s->m.ustacks = s->skel->maps.ustacks;
	s->m.uparts = s->skel->maps.uparts;
}

/* The lite object walks no user stack: no ustacks or uparts. */
static void bind_lite(struct vp_sched *s)
{
	BIND_COMMON(s, s->lite);
	s->m.ustacks = NULL;
	s->m.uparts = NULL;
}

static int quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	/* Our own message says what failed and what to do; libbpf's lines only with
	 * VIPROF_DEBUG. */
	return level == LIBBPF_WARN && getenv("VIPROF_DEBUG") ? vfprintf(stderr, fmt, ap) : 0;
}

/* VIPROF_DEBUG_TIMING: the verifier's account of each program an object loads (its time
 * and the instructions it walked, global subprograms included), to tell the cost of
 * verification from that of map creation in the tracer's share of start-up. */
struct vstats {
	bool on;
	int n;
	struct bpf_program *p[8];
	char log[8][1024];
};

static void vstats__arm(struct vstats *v, struct bpf_object *obj)
{
	const char *dbg = getenv("VIPROF_DEBUG_TIMING");
	struct bpf_program *p;

	v->on = dbg && *dbg && *dbg != '0';
	v->n = 0;
	if (!v->on)
		return;
	bpf_object__for_each_program(p, obj) {
		if (v->n >= 8 || !bpf_program__autoload(p))
			continue;
		v->log[v->n][0] = '\0';
		bpf_program__set_log_buf(p, v->log[v->n], sizeof(v->log[v->n]));
		bpf_program__set_log_level(p, 4);
		v->p[v->n++] = p;
	}
}

static void vstats__print(struct vstats *v, const char *obj)
{
	for (int i = 0; v->on && i < v->n; i++) {
		char *save = NULL;

		for (char *l = strtok_r(v->log[i], "\n", &save); l; l = strtok_r(NULL, "\n", &save))
			if (!strncmp(l, "verification time", 17) || !strncmp(l, "processed", 9))
				fprintf(stderr, "viprof timing: %s: %s: %s\n", obj, bpf_program__name(v->p[i]), l);
	}
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int emit_event(struct vp_sched *s, uint32_t index, const char *name)
{
	struct vp_event_desc d = { .index = index, .perf_type = UINT32_MAX,
				   .flags = VP_EVENT_SOFTWARE | VP_EVENT_TIME_UNITS | VP_EVENT_SCHED |
					    (s->cfg.user_only ? VP_EVENT_USER_ONLY : 0) };

	snprintf(d.name, sizeof(d.name), "%s", name);
	return s->cfg.sink.emit(s->cfg.sink.ctx, VP_REC_EVENT, 0, &d, sizeof(d));
}

int vp_sched__emit_events(struct vp_sched *s)
{
	int rc;

	if (!s)
		return 0;
	if ((rc = emit_event(s, s->cfg.first_event, "steal")))
		return rc;
	return s->cfg.off_cpu ? emit_event(s, s->cfg.first_event + 1, "off-cpu") : 0;
}

/* Frames of a stack map entry (zero-terminated when shorter than the map's depth). */
static int stack_frames(struct vp_sched *s, int32_t id, uint64_t *ips)
{
	int n = 0;

	if (id < 0 || bpf_map_lookup_elem(bpf_map__fd(s->m.stacks), &id, ips))
		return 0;
	while (n < VPS_MAX_DEPTH && ips[n])
		n++;
	return n;
}

/* The user frames of a key into s->uips, and its interpreted frames into s->jf when it
 * is a walked stack (*nj, *walk_end set); frame-pointer stacks have neither. A walked
 * stack is read part by part (sched.h); one whose part is missing (the hash was full)
 * keeps the frames read before it and ends as cut. */
static int user_frames(struct vp_sched *s, uint64_t us, int *nj, int *walk_end)
{
	struct vps_ukey k = { .hash = us };
	int fd = s->m.ustacks ? bpf_map__fd(s->m.ustacks) : -1, pfd = s->m.uparts ? bpf_map__fd(s->m.uparts) : -1, n, parts;

	*nj = 0;
	*walk_end = s->walker ? VP_WALK_NO_PROC : VP_WALK_UNKNOWN;
	if (!us)
		return 0;
	if (us & VPS_USTACK_FP)
		return stack_frames(s, (int32_t)(uint32_t)us, s->uips);
	if (fd < 0)
		return 0;   /* the lite object takes frame-pointer stacks only */
	if (bpf_map_lookup_elem(fd, &k, s->ustk))
		return 0;
	n = s->ustk->n < VPS_MAX_UFRAMES ? s->ustk->n : VPS_MAX_UFRAMES;
	*nj = s->ustk->nj < VPS_MAX_JFRAMES ? s->ustk->nj : VPS_MAX_JFRAMES;
	*walk_end = s->ustk->walk_end < VP_WALK__COUNT ? s->ustk->walk_end : VP_WALK_UNKNOWN;
	if (n == VPS_MAX_UFRAMES)
		*walk_end = VP_WALK_DEPTH;
	parts = (n + VPS_PART_FRAMES - 1) / VPS_PART_FRAMES;
	if ((*nj + VPS_PART_JFRAMES - 1) / VPS_PART_JFRAMES > parts)
		parts = (*nj + VPS_PART_JFRAMES - 1) / VPS_PART_JFRAMES;
	for (int p = 0; p < parts && p < VPS_MAX_PARTS; p++) {
		int fi = p * VPS_PART_FRAMES, ji = p * VPS_PART_JFRAMES;

		k.part = (uint32_t)p;
		if (p && bpf_map_lookup_elem(pfd, &k, s->ustk)) {
			n = fi < n ? fi : n;
			*nj = ji < *nj ? ji : *nj;
			*walk_end = VP_WALK_DEPTH;
			break;
		}
		if (fi < n)
			memcpy(s->uips + fi, s->ustk->ips, (size_t)(n - fi < VPS_PART_FRAMES ? n - fi : VPS_PART_FRAMES) * 8);
		if (ji < *nj)
			memcpy(s->jf + ji, s->ustk->jframes,
			       (size_t)(*nj - ji < VPS_PART_JFRAMES ? *nj - ji : VPS_PART_JFRAMES) * sizeof(*s->jf));
	}
	return n;
}

_Static_assert(VPS_SPLIT_NS == VP_OFFCPU_SPLIT_NS, "the split the session's meta states is the tracer's");

static int emit_sum(struct vp_sched *s, const struct vps_key *k, const struct vps_val *v)
{
	struct vp_sample *o = s->buf;
	/* A user-only recording's program takes no kernel stack; should an id come anyway,
	 * its frames still stay out of the session. */
	int nj, walk_end, nk = s->cfg.user_only ? 0 : stack_frames(s, k->kstack, s->kips),
			  nu = user_frames(s, k->ustack, &nj, &walk_end);
	size_t len;
	int err;

	if (!v->ns || k->state == 0 || k->state >= VPS_STATE_MAX)
		return 0;
	if (nk > KSTACK_ROOM)
		nk = KSTACK_ROOM;   /* the leaf's side kept; switch-out stacks are far shallower */
	memset(o, 0, sizeof(*o));
	if (nk + nu > VP_MAX_FRAMES) {
		nu = VP_MAX_FRAMES - nk;
		o->flags |= VP_SAMPLE_USER_TRUNCATED;
	}
	o->pid = k->pid;
	o->tid = k->tid;
	o->cpu = UINT32_MAX;     /* a sum over the thread's CPUs */
	o->event = (uint16_t)(s->cfg.first_event + (k->state == VPS_STEAL ? 0 : 1));
	o->mode = VP_MODE_KERNEL;
	o->period = v->ns;
	o->nr_kernel = (uint16_t)nk;
	o->nr_user = (uint16_t)nu;
	o->sched_state = (uint8_t)k->state;
	if (v->count == 1)
		o->flags |= VP_SAMPLE_ONE_INTERVAL;
	if ((k->kstack < 0 || s->cfg.user_only) && !k->ustack && k->state != VPS_RUNNABLE_WOKEN)
		s->st.no_stack++;
	memcpy(o->ips, s->kips, (size_t)nk * 8);
	memcpy(o->ips + nk, s->uips, (size_t)nu * 8);
	o->walk_end = k->ustack ? (uint8_t)walk_end : VP_WALK_UNKNOWN;
	/* Interpreted frames cut off with the user stack go with it. */
	struct vp_java_frame *jf = (struct vp_java_frame *)(o->ips + nk + nu);
	unsigned njout = 0;
	for (int i = 0; i < nj; i++) {
		if (s->jf[i].frame >= nu)
			continue;
		*jf++ = (struct vp_java_frame){ .frame = s->jf[i].frame, .bci = s->jf[i].bci, .method = s->jf[i].method };
		njout++;
	}
	vp_sample_set_nr_java(o, njout);
	len = sizeof(*o) + (size_t)(nk + nu) * 8 + (size_t)njout * sizeof(struct vp_java_frame);
	err = s->cfg.sink.emit(s->cfg.sink.ctx, VP_REC_SAMPLE, v->last, o, len);
	if (err < 0)
		return err;
	s->st.records++;
	s->st.bytes += len + sizeof(struct vp_record);
	return 1;
}

/* Emits and deletes every entry of one aggregation hash. The programs write to the
 * other one (agg_sel), except for those that were running when it was flipped, which
 * finish within microseconds: drains are a period apart. */
static int drain_map(struct vp_sched *s, struct bpf_map *m)
{
	int fd = bpf_map__fd(m), n = 0, total = 0, err;
	struct vps_key *prev = NULL;

	while (n < MAX_KEYS_PER_DRAIN && bpf_map_get_next_key(fd, prev, &s->keys[n]) == 0) {
		prev = &s->keys[n];
		n++;
	}
	for (int i = 0; i < n; i++) {
		struct vps_val v;

		if (bpf_map_lookup_and_delete_elem(fd, &s->keys[i], &v) != 0)
			continue;
		err = emit_sum(s, &s->keys[i], &v);
		if (err < 0)
			return err;
		total += err;
	}
	return total;
}

static int drain(struct vp_sched *s, uint64_t now)
{
	uint32_t sel = *s->agg_sel;
	int n = drain_map(s, sel & 1 ? s->m.agg0 : s->m.agg1);

	/* The idle hash is empty now: make it the one written, and drain the other
	 * next time. */
	*s->agg_sel = sel ^ 1;
	s->last_drain = now;
	return n;
}

/* Runs a task iterator program once, over every task. 0 or -errno. */
static int run_iter(struct bpf_program *p)
{
	struct bpf_link *l = bpf_program__attach_iter(p, NULL);
	char buf[64];
	int fd, rc = 0;
	ssize_t n;

	if (!l)
		return -errno;
	fd = bpf_iter_create(bpf_link__fd(l));
	if (fd < 0) {
		rc = -errno;
		goto cleanup;
	}
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		;
	if (n < 0)
		rc = -errno;
	close(fd);
cleanup:
	bpf_link__destroy(l);
	return rc;
}

void vp_sched__window(struct vp_sched *s, uint64_t start, uint64_t end)
{
	if (!s || s->stopped)
		return;
	if (start) {
		*s->win_start = start;
		/* Without off-CPU: the recorded threads' counters now are their baseline
		 * (sched_lite.bpf.c); one born since start has none. */
		if (s->lite) {
			s->lite->data->base_time = start;
			if (run_iter(s->lite->progs.base_threads) && getenv("VIPROF_DEBUG"))
				fprintf(stderr, "viprof: switch tracer: the opening pass failed: %s\n", strerror(errno));
			vp_timing("switch tracer: baseline pass");
		}
		/* Threads that left the CPU before the walking object saw them: their
		 * intervals open now, with their stacks walked from outside. */
		if (s->opener) {
			s->opener->bss->win_start = start;
			if (run_iter(s->opener->progs.open_blocked) && getenv("VIPROF_DEBUG"))
				fprintf(stderr, "viprof: switch tracer: the opening pass failed: %s\n", strerror(errno));
			sched_open__destroy(s->opener);
			s->opener = NULL;
		}
	}
	if (end) {
		*s->win_end = end;
		/* Intervals still open are charged up to the end, runs too; without off-CPU,
		 * the threads' counters are read. */
		if (s->lite && run_iter(s->lite->progs.finish_threads) && getenv("VIPROF_DEBUG"))
			fprintf(stderr, "viprof: switch tracer: the closing pass failed: %s\n", strerror(errno));
		if (s->skel && s->cfg.off_cpu && run_iter(s->skel->progs.close_open) && getenv("VIPROF_DEBUG"))
			fprintf(stderr, "viprof: switch tracer: the closing pass failed: %s\n", strerror(errno));
	}
}

int vp_sched__poll(struct vp_sched *s, uint64_t now)
{
	if (!s || s->stopped || now - s->last_drain < s->cfg.drain_ns)
		return 0;
	return drain(s, now);
}

static uint64_t percpu_sum(struct vp_sched *s, uint32_t idx)
{
	uint64_t *v = calloc((size_t)s->ncpu, sizeof(*v)), sum = 0;

	if (v && bpf_map_lookup_elem(bpf_map__fd(s->m.counters), &idx, v) == 0)
		for (int c = 0; c < s->ncpu; c++)
			sum += v[c];
	free(v);
	return sum;
}

uint64_t vp_sched__counter(struct vp_sched *s, uint32_t idx)
{
	return s && s->m.counters && idx < VPS_CNT_NR ? percpu_sum(s, idx) : 0;
}

int vp_sched__stop(struct vp_sched *s)
{
	uint64_t t;
	uint32_t tid, *prev = NULL;
	int err = 0, n;

	if (!s || s->stopped)
		return 0;
	for (int i = 0; i < s->nr_links; i++)
		bpf_link__destroy(s->links[i]);
	s->nr_links = 0;
	s->stopped = true;
	/* Both hashes: the one last written and the idle one. */
	t = mono_ns();
	if ((n = drain(s, t)) < 0 || (n = drain(s, t)) < 0)
		return n;
	/* The live threads' sums are in their task storage (sched.bpf.c, flush_thread), or
	 * their counters in the kernel (sched_lite.bpf.c, finish). */
	if ((err = run_iter(s->lite ? s->lite->progs.finish_threads : s->skel->progs.flush_threads))) {
		fprintf(stderr, "viprof: switch tracer: cannot collect the threads' on-CPU times and switches "
			"(task iterator: %s); the session has those of the threads that ended only\n", strerror(-err));
		err = 0;
	}
	int tfd = bpf_map__fd(s->m.threads);
	while (bpf_map_get_next_key(tfd, prev, &tid) == 0) {
		struct vps_thread th;
		static uint32_t cur;

		cur = tid;
		prev = &cur;
		if (bpf_map_lookup_elem(tfd, &tid, &th) != 0)
			continue;
		struct vp_thread_time tt = { .pid = th.pid, .tid = tid, .oncpu_ns = th.oncpu_ns,
					     .steal_ns = th.steal_ns, .switches = th.switches,
					     .first = th.first, .last = th.last };
		if ((err = s->cfg.sink.emit(s->cfg.sink.ctx, VP_REC_THREAD_TIME, t, &tt, sizeof(tt))) < 0)
			return err;
	}
	int cfd = bpf_map__fd(s->m.cpus);
	for (uint32_t c = 0; c < (uint32_t)s->ncpu && c < VPS_MAX_CPUS; c++) {
		struct vps_cpu v;

		if (bpf_map_lookup_elem(cfd, &c, &v) != 0 || !v.first_time)
			continue;
		struct vp_sched_cpu sc = { .cpu = c, .first = v.first_time, .last = v.last_time,
					   .steal_clock_ns = v.steal_last - v.steal_first,
					   .charged_ns = v.charged, .idle_ns = v.idle_steal,
					   .kernel_steal_ns = v.kstat_last - v.kstat_first };
		if ((err = s->cfg.sink.emit(s->cfg.sink.ctx, VP_REC_SCHED_CPU, t, &sc, sizeof(sc))) < 0)
			return err;
	}
	s->st.switches = percpu_sum(s, VPS_CNT_SWITCHES);
	s->st.agg_full = percpu_sum(s, VPS_CNT_AGG_FULL);
	s->st.agg_full_ns = percpu_sum(s, VPS_CNT_AGG_FULL_NS);
	s->st.no_stack += percpu_sum(s, VPS_CNT_NO_STACK);
	s->st.no_rq = percpu_sum(s, VPS_CNT_NO_RQ);
	s->st.missed_in = percpu_sum(s, VPS_CNT_MISSED_IN);
	s->st.missed_ns = percpu_sum(s, VPS_CNT_MISSED_NS);
	s->st.walks = percpu_sum(s, VPS_CNT_WALKS);
	s->st.walk_ns = percpu_sum(s, VPS_CNT_WALK_NS);
	s->st.ustack_full = percpu_sum(s, VPS_CNT_USTACK_FULL);
	s->st.early = percpu_sum(s, VPS_CNT_EARLY);
	s->st.early_ns = percpu_sum(s, VPS_CNT_EARLY_NS);
	s->st.opened = percpu_sum(s, VPS_CNT_OPENED);
	s->st.reused = percpu_sum(s, VPS_CNT_REUSED);
	s->st.reused_ns = percpu_sum(s, VPS_CNT_REUSED_NS);
	if ((err = s->cfg.sink.emit(s->cfg.sink.ctx, VP_REC_SCHED_STATS, t, &s->st, sizeof(s->st))) < 0)
		return err;
	return 0;
}

void vp_sched__stats(const struct vp_sched *s, struct vp_sched_stats *out)
{
	*out = s->st;
}

void vp_sched__free(struct vp_sched *s)
{
	if (!s)
		return;
	for (int i = 0; i < s->nr_links; i++)
		bpf_link__destroy(s->links[i]);
	sched__destroy(s->skel);
	sched_lite__destroy(s->lite);
	sched_open__destroy(s->opener);
	if (s->tracked_fd >= 0)
		close(s->tracked_fd);
	free(s->keys);
	free(s->buf);
	free(s->kips);
	free(s->uips);
	free(s->ustk);
	free(s->jf);
	free(s);
}

static int attach(struct vp_sched *s, struct bpf_program *p, const char *tp, char *err, size_t errlen)
{
	struct bpf_link *l = bpf_program__attach(p);

	if (!l) {
		int rc = -errno;

		snprintf(err, errlen, "switch tracer: cannot attach to the %s tracepoint: %s; the kernel needs BTF "
			 "(CONFIG_DEBUG_INFO_BTF) and tracepoints", tp, strerror(-rc));
		return rc;
	}
	s->links[s->nr_links++] = l;
	return 0;
}

/* VIPROF_DEBUG_STEAL_CLOCK=rq: tests only (sched_common.bpf.h, debug_steal_rq_clock). */
static bool debug_steal_rq_clock(void)
{
	const char *v = getenv("VIPROF_DEBUG_STEAL_CLOCK");

	return v && !strcmp(v, "rq");
}

static void configure(struct sched *k, const struct vp_sched_config *cfg)
{
	bool tracked = cfg->target != SAMPLER_TARGET_ALL;

	k->rodata->target_mode = tracked ? VPB_TARGET_TRACKED : VPB_TARGET_ALL;
	k->rodata->off_cpu = cfg->off_cpu;
	k->rodata->filter_uid = cfg->filter_uid ? (uint32_t)cfg->only_uid : (uint32_t)-1;
	k->rodata->user_only = cfg->user_only;
	k->rodata->debug_steal_rq_clock = debug_steal_rq_clock();
	bpf_program__set_autoload(k->progs.on_fork, tracked);
	bpf_program__set_autoload(k->progs.on_wakeup, cfg->off_cpu);
	bpf_program__set_autoload(k->progs.on_wakeup_new, cfg->off_cpu);
	bpf_program__set_autoload(k->progs.close_open, cfg->off_cpu);
}

/* The programs s->skel loaded, in the order that loses nothing: forks first, so that
 * no child escapes; then wakeups before switches, so that no switch-in finds a wakeup
 * missing. */
static int attach_all(struct vp_sched *s, char *err, size_t errlen)
{
	bool tracked = s->cfg.target != SAMPLER_TARGET_ALL, off = s->skel && s->cfg.off_cpu;
	struct bpf_program *fork = s->lite ? s->lite->progs.on_fork : s->skel->progs.on_fork;
	struct bpf_program *sw = s->lite ? s->lite->progs.on_switch : s->skel->progs.on_switch;
	int rc = 0;

	if ((tracked && (rc = attach(s, fork, "sched_process_fork", err, errlen))) ||
	    (off && (rc = attach(s, s->skel->progs.on_wakeup, "sched_wakeup", err, errlen))) ||
	    (off && (rc = attach(s, s->skel->progs.on_wakeup_new, "sched_wakeup_new", err, errlen))) ||
	    (rc = attach(s, sw, "sched_switch", err, errlen)))
		return rc;
	return 0;
}

/* Loads the opening pass (sched_open.bpf.c) on the walking object's maps, for
 * vp_sched__window to run. Only for processes that ran before the recording (-p): a
 * launched command is held before its exec until sampling starts, and under -a a pass
 * over every thread of the VM, each walked, would cost the start more than it brings.
 * Loading costs a verification of the walker (0.2-0.5 s of CPU on this project's VMs).
 * On failure there is no pass (threads blocked across the window's start are then
 * charged from their first switch in it). */
static void load_opener(struct vp_sched *s, const struct sampler_unwind *uw)
{
	struct sched_open *o;
	struct sched *k = s->skel;
	int rc;

	if (!s->cfg.off_cpu || s->cfg.target != SAMPLER_TARGET_PIDS || !(o = sched_open__open()))
		return;
	o->rodata->target_mode = VPB_TARGET_TRACKED;
	o->rodata->filter_uid = k->rodata->filter_uid;
	o->rodata->walk_since = k->bss->walk_since;
#define REUSE(m, fd) (rc = bpf_map__reuse_fd(o->maps.m, (fd)))
	if (REUSE(tracked, bpf_map__fd(k->maps.tracked)) || REUSE(tstates, bpf_map__fd(k->maps.tstates)) ||
	    REUSE(ustacks, bpf_map__fd(k->maps.ustacks)) || REUSE(uparts, bpf_map__fd(k->maps.uparts)) ||
	    REUSE(counters, bpf_map__fd(k->maps.counters)) ||
	    REUSE(proc_slots, uw->proc_slots_fd) || REUSE(unwind_procs, uw->procs_fd) ||
	    REUSE(unwind_tables, uw->tables_fd) || REUSE(unwind_rules, uw->rules_fd) ||
	    REUSE(unwind_pages, uw->pages_fd) || (rc = sched_open__load(o))) {
#undef REUSE
		if (getenv("VIPROF_DEBUG"))
			fprintf(stderr, "viprof: switch tracer: no opening pass: %s\n", strerror(-rc));
		sched_open__destroy(o);
		return;
	}
	vp_timing("switch tracer: opening pass loaded");
	s->opener = o;
}

/* Replaces the frame-pointer object with one that walks user stacks with the sampler's
 * tables: the new object reuses every map of the old one (so no thread's open
 * interval, sum or counter is lost) and the sampler's walker maps, is loaded, and
 * takes over the tracepoints. Switches in the moment between the old program's
 * detach and the new one's attach are missed switches, which the program already
 * accounts for (sched.bpf.c). 0 or -errno with the reason in s->walker_err; the old
 * object keeps running on failure. */
static int use_walker(struct vp_sched *s, const struct sampler_unwind *uw)
{
	struct sched *old = s->skel, *k = sched__open();
	int rc = 0;

	if (!k) {
		rc = -errno;
		snprintf(s->walker_err, sizeof(s->walker_err), "cannot open a second BPF object: %s", strerror(-rc));
		return rc;
	}
	configure(k, &s->cfg);
	k->rodata->walker = true;
	/* For benchmarks (bench/cost-breakdown.sh): every switch-out walked, as before issue 37. */
	k->rodata->walk_reuse = !getenv("VIPROF_DEBUG_NO_WALK_REUSE");
	/* The walk's scratch is an array indexed by CPU (walker.bpf.h). */
	bpf_map__set_max_entries(k->maps.scratch, (uint32_t)libbpf_num_possible_cpus());
#define REUSE(m, fd) (rc = bpf_map__reuse_fd(k->maps.m, (fd)))
	if (REUSE(tracked, bpf_map__fd(old->maps.tracked)) || REUSE(stacks, bpf_map__fd(old->maps.stacks)) ||
	    REUSE(agg0, bpf_map__fd(old->maps.agg0)) || REUSE(agg1, bpf_map__fd(old->maps.agg1)) ||
	    REUSE(threads, bpf_map__fd(old->maps.threads)) || REUSE(cpus, bpf_map__fd(old->maps.cpus)) ||
	    REUSE(counters, bpf_map__fd(old->maps.counters)) || REUSE(tstates, bpf_map__fd(old->maps.tstates)) ||
	    REUSE(bss, bpf_map__fd(old->maps.bss)) || REUSE(proc_slots, uw->proc_slots_fd) ||
	    REUSE(unwind_procs, uw->procs_fd) || REUSE(unwind_tables, uw->tables_fd) ||
	    REUSE(unwind_rules, uw->rules_fd) || REUSE(unwind_pages, uw->pages_fd)) {
		snprintf(s->walker_err, sizeof(s->walker_err), "cannot share the sampler's maps: %s", strerror(-rc));
		goto cleanup;
	}
#undef REUSE
	vp_timing("switch tracer: walking object opened");
	if ((rc = sched__load(k))) {
		snprintf(s->walker_err, sizeof(s->walker_err), "the kernel refused the walking program (%s)",
			 strerror(-rc));
		goto cleanup;
	}
	vp_timing("switch tracer: walking object loaded");
	for (int i = 0; i < s->nr_links; i++)
		bpf_link__destroy(s->links[i]);
	s->nr_links = 0;
	vp_timing("switch tracer: old links detached");
	/* Every interval the old object opened began before this moment. */
	k->bss->walk_since = mono_ns();
	s->skel = k;
	bind_full(s);
	if ((rc = attach_all(s, s->walker_err, sizeof(s->walker_err)))) {
		/* Back to the old object, whose programs attached before. */
		for (int i = 0; i < s->nr_links; i++)
			bpf_link__destroy(s->links[i]);
		s->nr_links = 0;
		s->skel = old;
		bind_full(s);
		char ignored[256];
		attach_all(s, ignored, sizeof(ignored));
		goto cleanup;
	}
	s->walker = true;
	vp_timing("switch tracer: walking object attached");
	load_opener(s, uw);
	k = old;   /* the old object goes; its maps live on in the new one */
cleanup:
	sched__destroy(k);
	vp_timing("switch tracer: old object freed");
	return rc;
}

static void before_sampling(void *ctx, const struct sampler_unwind *uw)
{
	struct vp_sched *s = ctx;

	/* The recorder's unwinder first: the tables of the processes that run already. */
	if (s->next_before)
		s->next_before(s->next_ctx, uw);
	if (!s->stopped && uw && uw->rules_fd > 0 && uw->pages_fd > 0)
		use_walker(s, uw);
}

void vp_sched__hook(struct vp_sched *s, struct sampler_config *cfg)
{
	if (!s)
		return;
	/* One set of recorded processes: the sampler's object takes this tracer's tracked
	 * map, so a child one of them follows is followed by the other (tracked.bpf.h). */
	if (s->cfg.target != SAMPLER_TARGET_ALL && cfg->target == s->cfg.target) {
		if (s->tracked_fd < 0)
			s->tracked_fd = fcntl(bpf_map__fd(s->m.tracked), F_DUPFD_CLOEXEC, 3);
		if (s->tracked_fd >= 0)
			cfg->tracked_fd = s->tracked_fd;
	}
	/* Only for off-CPU time: the walking object costs a second verification of the
	 * walker (about 0.3 s of CPU on this project's VMs), which steal stacks alone do
	 * not repay. */
	if (!s->cfg.off_cpu || !cfg->unwind || !cfg->callchain)
		return;
	s->next_before = cfg->before_sampling;
	s->next_ctx = cfg->before_ctx;
	cfg->before_sampling = before_sampling;
	cfg->before_ctx = s;
	snprintf(s->walker_err, sizeof(s->walker_err), "the sampler did not share its stack walker's tables");
}

const char *vp_sched__walker(const struct vp_sched *s)
{
	return !s || s->walker || !s->walker_err[0] ? NULL : s->walker_err;
}

/* The full object (sched.bpf.c), for --off-cpu. */
static int load_full(struct vp_sched *s, char *err, size_t errlen)
{
	static struct vstats vs;
	int rc;

	s->skel = sched__open();
	if (!s->skel) {
		rc = -errno;
		snprintf(err, errlen, "switch tracer: cannot open the BPF object: %s", strerror(-rc));
		return rc;
	}
	configure(s->skel, &s->cfg);
	/* This first object walks user stacks by frame pointer: the walker's maps are the
	 * sampler's, which does not exist yet (vp_sched__hook swaps in a walking object
	 * once it does). They get one entry each here. */
	bpf_map__set_max_entries(s->skel->maps.proc_slots, 1);
	bpf_map__set_max_entries(s->skel->maps.unwind_procs, 1);
	bpf_map__set_max_entries(s->skel->maps.unwind_tables, 1);
	bpf_map__set_max_entries(s->skel->maps.unwind_rules, 1);
	bpf_map__set_max_entries(s->skel->maps.unwind_pages, 2);
	bpf_map__set_max_entries(s->skel->maps.ustacks, 1);
	bpf_map__set_max_entries(s->skel->maps.uparts, 1);
	vstats__arm(&vs, s->skel->obj);
	vp_timing("switch tracer: object opened and configured");
	rc = sched__load(s->skel);
	vstats__print(&vs, "switch tracer");
	vp_timing("switch tracer: object loaded");
	if (rc) {
		snprintf(err, errlen, "switch tracer: the kernel refused the BPF program (%s); it needs root (or CAP_BPF "
			 "and CAP_PERFMON), BTF, and task storage (kernel 5.11+)", strerror(-rc));
		return rc;
	}
	bind_full(s);
	return 0;
}

/* The lite object (sched_lite.bpf.c), without --off-cpu: steal, on-CPU time and
 * switches only, at a fraction of the full one's cost per switch and at load. */
static int load_lite(struct vp_sched *s, char *err, size_t errlen)
{
	static struct vstats vs;
	struct sched_lite *k;
	bool tracked = s->cfg.target != SAMPLER_TARGET_ALL;
	int rc;

	s->lite = k = sched_lite__open();
	if (!k) {
		rc = -errno;
		snprintf(err, errlen, "switch tracer: cannot open the BPF object: %s", strerror(-rc));
		return rc;
	}
	k->rodata->target_mode = tracked ? VPB_TARGET_TRACKED : VPB_TARGET_ALL;
	k->rodata->filter_uid = s->cfg.filter_uid ? (uint32_t)s->cfg.only_uid : (uint32_t)-1;
	k->rodata->user_only = s->cfg.user_only;
	k->rodata->debug_steal_rq_clock = debug_steal_rq_clock();
	bpf_program__set_autoload(k->progs.on_fork, tracked);
	/* Written only where steal moved and at threads' ends here, not at every switch:
	 * allocated as entries come rather than all at load (about 4 of the object's
	 * 15 ms of map creation on this project's VMs). */
	bpf_map__set_map_flags(k->maps.threads, bpf_map__map_flags(k->maps.threads) | BPF_F_NO_PREALLOC);
	bpf_map__set_map_flags(k->maps.agg0, bpf_map__map_flags(k->maps.agg0) | BPF_F_NO_PREALLOC);
	bpf_map__set_map_flags(k->maps.agg1, bpf_map__map_flags(k->maps.agg1) | BPF_F_NO_PREALLOC);
	vstats__arm(&vs, k->obj);
	vp_timing("switch tracer: object opened and configured");
	rc = sched_lite__load(k);
	vstats__print(&vs, "switch tracer");
	vp_timing("switch tracer: object loaded");
	if (rc) {
		snprintf(err, errlen, "switch tracer: the kernel refused the BPF program (%s); it needs root (or CAP_BPF "
			 "and CAP_PERFMON), BTF, and task storage (kernel 5.11+)", strerror(-rc));
		return rc;
	}
	bind_lite(s);
	return 0;
}

struct vp_sched *vp_sched__start(const struct vp_sched_config *cfg, char *err, size_t errlen)
{
	struct vp_sched *s = NULL;
	bool tracked = cfg->target != SAMPLER_TARGET_ALL;
	uint8_t one = 1;
	int rc = 0;

	if (!cfg->sink.emit || (tracked && cfg->nr_pids < 1)) {
		snprintf(err, errlen, "switch tracer: bad configuration (needs a sink, and pids unless -a)");
		errno = EINVAL;
		return NULL;
	}
	if (access("/sys/kernel/btf/vmlinux", R_OK) != 0) {
		snprintf(err, errlen, "switch tracer: the kernel has no BTF (/sys/kernel/btf/vmlinux: %s); "
			 "off-CPU and exact steal need a kernel built with CONFIG_DEBUG_INFO_BTF", strerror(errno));
		errno = ENOTSUP;
		return NULL;
	}
	libbpf_set_print(quiet);
	s = calloc(1, sizeof(*s));
	if (!s) {
		snprintf(err, errlen, "switch tracer: out of memory");
		return NULL;
	}
	s->cfg = *cfg;
	s->tracked_fd = -1;
	if (!s->cfg.drain_ns)
		s->cfg.drain_ns = DEFAULT_DRAIN_NS;
	s->ncpu = libbpf_num_possible_cpus();
	s->keys = calloc(MAX_KEYS_PER_DRAIN, sizeof(*s->keys));
	s->buf = malloc(sizeof(struct vp_sample) + VP_MAX_FRAMES * sizeof(uint64_t) +
			VPS_MAX_JFRAMES * sizeof(struct vp_java_frame));
	s->kips = calloc(VPS_MAX_DEPTH, sizeof(uint64_t));
	s->uips = calloc(VPS_MAX_DEPTH > VPS_MAX_UFRAMES ? VPS_MAX_DEPTH : VPS_MAX_UFRAMES, sizeof(uint64_t));
	s->ustk = calloc(1, sizeof(*s->ustk));
	s->jf = calloc(VPS_MAX_JFRAMES, sizeof(*s->jf));
	if (s->ncpu <= 0 || !s->keys || !s->buf || !s->kips || !s->uips || !s->ustk || !s->jf) {
		rc = -ENOMEM;
		snprintf(err, errlen, "switch tracer: out of memory");
		goto cleanup;
	}
	if ((rc = cfg->off_cpu ? load_full(s, err, errlen) : load_lite(s, err, errlen)))
		goto cleanup;
	if (cfg->windowed)
		*s->win_start = UINT64_MAX;
	for (int i = 0; tracked && i < cfg->nr_pids; i++) {
		uint32_t pid = (uint32_t)cfg->pids[i];

		if (bpf_map_update_elem(bpf_map__fd(s->m.tracked), &pid, &one, BPF_ANY)) {
			rc = -errno;
			snprintf(err, errlen, "switch tracer: cannot track pid %u: %s", pid, strerror(-rc));
			goto cleanup;
		}
	}
	if ((rc = vp_sched__emit_events(s))) {
		snprintf(err, errlen, "switch tracer: cannot write the event records: %s", strerror(-rc));
		goto cleanup;
	}
	/* Without a window, it opens now: base_time before the programs run, so that a
	 * thread born from here on starts at 0, and the baseline pass after, so that one
	 * that ends in between is seen ending (sched_lite.bpf.c). */
	if (s->lite && !cfg->windowed)
		s->lite->data->base_time = mono_ns();
	if ((rc = attach_all(s, err, errlen)))
		goto cleanup;
	if (s->lite && !cfg->windowed && (rc = run_iter(s->lite->progs.base_threads))) {
		snprintf(err, errlen, "switch tracer: cannot read the threads' counters (task iterator: %s); the kernel "
			 "needs task iterators (5.8+)", strerror(-rc));
		goto cleanup;
	}
	s->last_drain = mono_ns();
cleanup:
	if (rc) {
		vp_sched__free(s);
		errno = -rc;
		return NULL;
	}
	return s;
}
