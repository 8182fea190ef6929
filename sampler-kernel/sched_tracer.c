/* User side of the context-switch tracer (sched.bpf.c, sched.h): loads it, swaps and
 * drains its two aggregation hashes on a timer, and turns their sums into session
 * records (sched_tracer.h says which). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "common/session_format.h"
#include "sampler-kernel/sched.h"
#include "sampler-kernel/sched_tracer.h"
#include "sched.skel.h"

#define DEFAULT_DRAIN_NS (250ull * 1000000)
#define MAX_KEYS_PER_DRAIN 65536

struct vp_sched {
	struct vp_sched_config cfg;
	struct sched *skel;
	struct bpf_link *links[4];
	int nr_links;
	int ncpu;
	uint64_t last_drain;
	struct vps_key *keys;            /* scratch for one drain */
	struct vp_sample *buf;           /* one record being built */
	uint64_t *kips, *uips;           /* stack map values */
	struct vp_sched_stats st;
	bool stopped;
};

static int quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	/* Our own message says what failed and what to do; libbpf's lines only with
	 * VIPROF_DEBUG. */
	return level == LIBBPF_WARN && getenv("VIPROF_DEBUG") ? vfprintf(stderr, fmt, ap) : 0;
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
				   .flags = VP_EVENT_SOFTWARE | VP_EVENT_TIME_UNITS | VP_EVENT_SCHED };

	snprintf(d.name, sizeof(d.name), "%s", name);
	return s->cfg.sink.emit(s->cfg.sink.ctx, VP_REC_EVENT, 0, &d, sizeof(d));
}

/* Frames of a stack map entry (zero-terminated when shorter than the map's depth). */
static int stack_frames(struct vp_sched *s, int32_t id, uint64_t *ips)
{
	int n = 0;

	if (id < 0 || bpf_map_lookup_elem(bpf_map__fd(s->skel->maps.stacks), &id, ips))
		return 0;
	while (n < VPS_MAX_DEPTH && ips[n])
		n++;
	return n;
}

static int emit_sum(struct vp_sched *s, const struct vps_key *k, const struct vps_val *v)
{
	struct vp_sample *o = s->buf;
	int nk = stack_frames(s, k->kstack, s->kips), nu = stack_frames(s, k->ustack, s->uips);
	size_t len;
	int err;

	if (!v->ns || k->state == 0 || k->state >= VPS_STATE_MAX)
		return 0;
	if (nk > VP_MAX_FRAMES)
		nk = VP_MAX_FRAMES;
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
	if (k->kstack < 0 && k->ustack < 0 && k->state != VPS_RUNNABLE_WOKEN)
		s->st.no_stack++;
	memcpy(o->ips, s->kips, (size_t)nk * 8);
	memcpy(o->ips + nk, s->uips, (size_t)nu * 8);
	len = sizeof(*o) + (size_t)(nk + nu) * 8;
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
	uint32_t sel = s->skel->bss->agg_sel;
	int n = drain_map(s, sel & 1 ? s->skel->maps.agg0 : s->skel->maps.agg1);

	/* The idle hash is empty now: make it the one written, and drain the other
	 * next time. */
	s->skel->bss->agg_sel = sel ^ 1;
	s->last_drain = now;
	return n;
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

	if (v && bpf_map_lookup_elem(bpf_map__fd(s->skel->maps.counters), &idx, v) == 0)
		for (int c = 0; c < s->ncpu; c++)
			sum += v[c];
	free(v);
	return sum;
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
	int tfd = bpf_map__fd(s->skel->maps.threads);
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
	int cfd = bpf_map__fd(s->skel->maps.cpus);
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
	free(s->keys);
	free(s->buf);
	free(s->kips);
	free(s->uips);
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
	if (!s->cfg.drain_ns)
		s->cfg.drain_ns = DEFAULT_DRAIN_NS;
	s->ncpu = libbpf_num_possible_cpus();
	s->keys = calloc(MAX_KEYS_PER_DRAIN, sizeof(*s->keys));
	s->buf = malloc(sizeof(struct vp_sample) + VP_MAX_FRAMES * sizeof(uint64_t));
	s->kips = calloc(VPS_MAX_DEPTH, sizeof(uint64_t));
	s->uips = calloc(VPS_MAX_DEPTH, sizeof(uint64_t));
	if (s->ncpu <= 0 || !s->keys || !s->buf || !s->kips || !s->uips) {
		rc = -ENOMEM;
		snprintf(err, errlen, "switch tracer: out of memory");
		goto cleanup;
	}
	s->skel = sched__open();
	if (!s->skel) {
		rc = -errno;
		snprintf(err, errlen, "switch tracer: cannot open the BPF object: %s", strerror(-rc));
		goto cleanup;
	}
	s->skel->rodata->target_mode = tracked ? VPS_TARGET_TRACKED : VPS_TARGET_ALL;
	s->skel->rodata->off_cpu = cfg->off_cpu;
	s->skel->rodata->filter_uid = cfg->filter_uid ? (uint32_t)cfg->only_uid : (uint32_t)-1;
	bpf_program__set_autoload(s->skel->progs.on_fork, tracked);
	bpf_program__set_autoload(s->skel->progs.on_wakeup, cfg->off_cpu);
	bpf_program__set_autoload(s->skel->progs.on_wakeup_new, cfg->off_cpu);
	rc = sched__load(s->skel);
	if (rc) {
		snprintf(err, errlen, "switch tracer: the kernel refused the BPF program (%s); it needs root (or CAP_BPF "
			 "and CAP_PERFMON), BTF, and task storage (kernel 5.11+)", strerror(-rc));
		goto cleanup;
	}
	for (int i = 0; tracked && i < cfg->nr_pids; i++) {
		uint32_t pid = (uint32_t)cfg->pids[i];

		if (bpf_map_update_elem(bpf_map__fd(s->skel->maps.tracked), &pid, &one, BPF_ANY)) {
			rc = -errno;
			snprintf(err, errlen, "switch tracer: cannot track pid %u: %s", pid, strerror(-rc));
			goto cleanup;
		}
	}
	if ((rc = emit_event(s, cfg->first_event, "steal")) ||
	    (cfg->off_cpu && (rc = emit_event(s, cfg->first_event + 1, "off-cpu")))) {
		snprintf(err, errlen, "switch tracer: cannot write the event records: %s", strerror(-rc));
		goto cleanup;
	}
	/* Forks first, so that no child escapes; then wakeups before switches, so that
	 * no switch-in finds a wakeup missing. */
	if ((tracked && (rc = attach(s, s->skel->progs.on_fork, "sched_process_fork", err, errlen))) ||
	    (cfg->off_cpu && (rc = attach(s, s->skel->progs.on_wakeup, "sched_wakeup", err, errlen))) ||
	    (cfg->off_cpu && (rc = attach(s, s->skel->progs.on_wakeup_new, "sched_wakeup_new", err, errlen))) ||
	    (rc = attach(s, s->skel->progs.on_switch, "sched_switch", err, errlen)))
		goto cleanup;
	s->last_drain = mono_ns();
cleanup:
	if (rc) {
		vp_sched__free(s);
		errno = -rc;
		return NULL;
	}
	return s;
}
