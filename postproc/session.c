/* Loading a session: read the whole stream first (sideband into the mapping history,
 * KSYM into the kernel table; samples counted), then resolve every sample. Two passes
 * because the recorder may write a KSYM or an MMAP after the first sample that needs it
 * (it flushes them before that sample's chunk ends, not before the sample). The first
 * pass keeps the sample records it inflated while they fit SAMPLE_KEEP_BYTES, and the
 * second resolves those from memory: a session of that size is inflated and checked
 * once. A larger one is read again from the first chunk whose samples were not kept,
 * so that memory holds interned frames and stacks, never all of the samples.
 *
 * Steal time: STEAL and SWITCH records go to victim attribution (postproc/steal.h);
 * after the samples, each victim thread's steal becomes one stack under the event
 * "steal" (unit nanoseconds): the thread's most frequent sampled stack plus a leaf
 * "[hypervisor: steal]" (idle: "[idle]", a thread never sampled: "[not sampled]", a
 * vCPU without switch records: "[thread unknown: no switch records]"). Its weight is
 * the ns, its samples the ns in periods of the first time event (1 ms without one).
 * --from/--to select the STEAL records that bracket the steal counted; --pid/--tid/
 * --comm select the victims. The meta keys steal.cpuN and steal.total hold the VM's
 * per-vCPU steal in the time window whatever the thread filters (summed over the
 * sessions merged into one profile). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <elf.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/utsname.h>

#include "common/session_format.h"
#include "common/util.h"
#include "postproc/vthreads.h"
#include "postproc/elfsym.h"
#include "postproc/hvsyms.h"
#include "postproc/ksyms.h"
#include "postproc/procmaps.h"
#include "postproc/session.h"
#include "postproc/steal.h"
#include "postproc/wall.h"

#if __has_include("maps/jit_index.h")
#include "maps/codemap.h"
#include "maps/codemap_format.h"
#include "maps/jit_index.h"
#define HAVE_JIT_INDEX 1
#else
#define HAVE_JIT_INDEX 0
#endif

#define MAX_EVENTS 256
#define VP_MAX_SAMPLED_EVENTS 16  /* events with totals: record takes at most 8 */
#define MAX_OUT_FRAMES 8192   /* a sample's VP_MAX_FRAMES, with room for their inlined frames */
#define MAX_JIT_DEPTH 16

static char *debug_root;

void vp_session__set_debug_root(const char *root)
{
	free(debug_root);
	debug_root = root ? strdup(root) : NULL;
}

struct jvm {
	uint32_t pid;
	bool tried;
	bool has_dir;
	int8_t hotspot;              /* maps libjvm.so: 1 yes, 0 no, -1 not asked yet */
#if HAVE_JIT_INDEX
	struct vp_jit_index *idx;
	struct vp_vthreads *vt;      /* its virtual threads' mounts and waits, or NULL */
#endif
};

/* What one sampled address resolved to: its frames (innermost first, more than one for
 * inlined JIT code) and its pprof location. Resolving names the frames by strings
 * (symbol, image, file), and hashing those for every frame of every sample was most of
 * a report's time; an address seen again with the same key takes this instead. The key
 * holds everything the resolution depends on: for user code the mapping found at the
 * sample's time and the JIT method (or stub) that owned the address then, so that a
 * remapped library or reused code-cache memory is resolved afresh. */
struct addr_ent {
	uint64_t ip;
	const void *map, *jit;       /* identity of the resolution; NULL when not used */
	uint32_t pid;
	uint8_t kind;                /* AC_* (0 = empty slot) */
	uint8_t caller;
	uint8_t n;                   /* frames, 1..MAX_JIT_DEPTH */
	uint8_t unmapped;            /* counted as a user frame in no mapping */
	uint8_t flat_wrong;          /* a leaf in JIT code: FLAT_OK, or FLAT_WRONG when a flat map names it
				      * after another method; 0 otherwise */
	uint32_t loc;                /* pprof location, or UINT32_MAX */
	uint32_t first;              /* frames at pool[first..first+n) */
	uint64_t t_lo, t_hi;         /* AC_SPAN: the times at which the answer holds */
};
/* AC_SPAN entries are keyed by (pid, ip, caller) alone and hold the last answer with
 * the span of times it is sure for (the mapping live, the JIT method in its epoch): a
 * repeated address at such a time skips the mapping search and the code-map lookup. */
enum { AC_KERNEL = 1, AC_HYPERVISOR = 2, AC_USER = 3, AC_INTERP = 4, AC_SPAN = 5 };
struct addr_cache {
	struct addr_ent *t; size_t size, used;
	uint32_t *pool; size_t npool, cappool;
};

/* A container thread's tid in its own pid namespace (VP_REC_NSTID). */
struct nstid {
	uint32_t pid, tid, nstid;
};

/* The sample records the first pass kept for the second, in blocks (records are copied
 * whole, 8-byte aligned as in a chunk). */
#define SAMPLE_KEEP_BYTES (32u << 20)
#define SAMPLE_KEEP_BLOCK (1u << 20)
struct sample_keep {
	struct keep_block { uint8_t *b; size_t used, cap; } *blocks;
	size_t nblocks, capblocks;
	size_t bytes;                /* kept, in all blocks */
	uint64_t nrecs;              /* records kept */
	bool full;                   /* stopped keeping: the rest is read again from resume_off */
	uint64_t resume_off;         /* the chunk whose samples were the first not kept */
	uint64_t chunk;              /* the chunk (cfile_reader__chunks) the last kept record came from */
	uint64_t chunk_off;          /* its offset */
	size_t mark_block, mark_used, mark_bytes; /* where that chunk's records start */
	uint64_t mark_nrecs;
};

struct loader {
	struct nstid *nstids;        /* threads of processes in other pid namespaces */
	size_t nnstids, capnstids;
	const char *dir;
	struct vp_profile *p;
	const struct vp_session_opts *o;
	struct vp_procmaps *pm;
	struct vp_ksyms *ks;
	struct vp_elfsym *elfs;
	struct vp_hvsyms *hv;        /* --hv-syms */
	int evmap[MAX_EVENTS];       /* session event index -> profile event index */
	/* Per session event: the sampler's totals (COUNTER records) and the factor that
	 * makes up for multiplexing (time_enabled / time_running, 1 when not multiplexed). */
	struct vp_counter totals[VP_MAX_SAMPLED_EVENTS];
	bool has_total[VP_MAX_SAMPLED_EVENTS];
	double scale[VP_MAX_SAMPLED_EVENTS];
	/* Per session event: its totals read while recording (VP_COUNTER_INTERVAL) and the
	 * final ones, in stream order, each with the factor for the samples between the
	 * one before and it: multiplexing made up for per interval. */
	struct mux_point { uint64_t time, enabled, running; double scale; } *mux[VP_MAX_SAMPLED_EVENTS];
	size_t nmux[VP_MAX_SAMPLED_EVENTS], capmux[VP_MAX_SAMPLED_EVENTS];
	uint64_t period_sum[VP_MAX_SAMPLED_EVENTS]; /* sum of the samples' periods, per event */
	uint64_t tail_sum[VP_MAX_SAMPLED_EVENTS];   /* of VP_SAMPLE_TAIL records: counts after the last samples */
	/* Samples are counted in the first pass and resolved in the second, from the
	 * records kept (at most SAMPLE_KEEP_BYTES) and then as the stream is read again. */
	uint64_t nsamples;
	uint64_t nsample_recs;      /* SAMPLE records the first pass read: samples and tails */
	struct sample_keep keep;
	bool ev_sampled[MAX_EVENTS]; /* session events that have samples */
	bool ev_user_clock[MAX_EVENTS]; /* a clock event sampled in user mode only (VP_EVENT_USER_ONLY) */
	struct addr_cache ac;
	struct jvm *jvms; size_t njvms, capjvms;
	uint64_t t0, t_last;
	uint64_t sample_lo, sample_hi;   /* the first and last sample's times: when it sampled */
	uint64_t lost, end_lost, end_duration;
	bool saw_end;
	uint64_t unmapped;           /* user frames in no known mapping */
	uint64_t jit_leaves, flat_wrong; /* samples whose leaf is JIT code; of them, misnamed by a flat map */
	uint64_t walk[VP_WALK__COUNT]; /* samples with a user stack, by how its walk ended */
	struct mapinfo *mapinfos;    /* owned; vp_map.priv points at them */
	struct vp_elf *vdso;         /* the recorded kernel's vDSO */
	bool vdso_tried;
	void *vdso_img;              /* its image from the VDSO record, when the session has one */
	size_t vdso_len;
	struct vp_steal_acct *steal; /* STEAL + SWITCH records, charged to victims at the end */
	bool saw_steal;
	uint64_t *cpu_steal;         /* per vCPU: steal charged in the time window */
	bool *cpu_seen;              /* per vCPU: a STEAL record was fed for it */
	uint32_t ncpus;
	size_t cap_steal, cap_seen;  /* allocated lengths of the two above */
	uint64_t time_period;        /* ns per sample of the first time-based event, 0 if none */
	int time_event;              /* its profile index, or -1 */
	struct victim *victims; size_t nvictims, capvictims;
	int steal_err;
	bool exact_steal;            /* the switch tracer measured steal per thread ("steal" samples) */
	uint64_t sched_cpu[4];       /* SCHED_CPU sums: clock, charged, idle, kernel-accounted */
	bool saw_sched_cpu;
	/* Addresses for pprof (profile_loc.c): each process's main executable, and the
	 * lines the JIT index gave for the frames user_frames returned last. */
	struct exe *exes; size_t nexes, capexes;
	uint32_t jit_lines[MAX_JIT_DEPTH]; int jit_n;
};

/* A process's main executable: the first file it mapped (after its exec), and the
 * executable mapping of that file, which pprof lists first ("File: ..."). */
struct exe {
	uint32_t pid;
	char *file;
	char bid[41];                /* the recorded build-id in hex, or "" */
	struct vp_mapping m;         /* m.file == file, m.build_id == bid; limit 0 until its text is mapped */
	bool used;                   /* interned into the profile */
};

/* One thread that was on a vCPU while the hypervisor stole it, summed over vCPUs. */
struct victim {
	uint32_t pid, tid;
	uint64_t ns;
	size_t best;                 /* index of its most frequent stack in p->stacks */
	uint64_t best_n;             /* that stack's samples; 0 = no sampled stack */
};

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

static void hex(const uint8_t *b, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
	out[2 * n] = '\0';
}

static void on_meta(struct loader *l, const struct vp_record *r)
{
	const char *b = vp_record_body(r), *end = b + vp_record_body_len(r);
	while (b < end) {
		const char *k = b, *kz = memchr(k, '\0', (size_t)(end - k));
		if (!kz || kz + 1 >= end)
			break;
		const char *v = kz + 1, *vz = memchr(v, '\0', (size_t)(end - v));
		if (!vz)
			break;
		/* Sessions loaded into one profile: it starts when the first of them did
		 * (pprof's "Time:"), whatever order they were named in. */
		const char *old = NULL;
		if (!strcmp(k, "start_realtime_ns") || !strcmp(k, "start_monotonic_ns"))
			old = vp_profile__meta(l->p, k);
		if (*k && !(old && strtoull(old, NULL, 10) <= strtoull(v, NULL, 10)))
			vp_profile__set_meta(l->p, k, v);
		b = vz + 1;
	}
}

static int on_event(struct loader *l, const struct vp_record *r)
{
	if (vp_record_body_len(r) < sizeof(struct vp_event_desc))
		return 0;
	const struct vp_event_desc *e = vp_record_body(r);
	if (e->index >= MAX_EVENTS)
		return 0;
	char name[sizeof(e->name) + 1];
	memcpy(name, e->name, sizeof(e->name));
	name[sizeof(e->name)] = '\0';
	int idx = vp_profile__add_event(l->p, name, e->flags & VP_EVENT_TIME_UNITS ? "nanoseconds" : "events");
	if (idx < 0)
		return idx;
	l->evmap[e->index] = idx;
	l->ev_user_clock[e->index] = (e->flags & VP_EVENT_TIME_UNITS) && !(e->flags & VP_EVENT_SCHED) &&
				     ((e->flags & VP_EVENT_USER_ONLY) || strstr(name, ":u"));
	if ((e->flags & VP_EVENT_SCHED) && !strcmp(name, "steal"))
		l->exact_steal = true;
	if ((e->flags & VP_EVENT_TIME_UNITS) && !(e->flags & VP_EVENT_SCHED) && l->time_event < 0) {
		/* Steal is shown in samples of this event's period so that its columns compare. */
		l->time_event = idx;
		l->time_period = e->period ? e->period : e->freq ? 1000000000ull / e->freq : 0;
	}
	return 0;
}

static bool in_window(const struct loader *l, uint64_t t)
{
	double rel = t >= l->t0 ? (double)(t - l->t0) / 1e9 : 0;
	return rel >= l->o->t_from && (l->o->t_to <= 0 || rel <= l->o->t_to);
}

static int on_steal(struct loader *l, const struct vp_record *r)
{
	if (vp_record_body_len(r) < sizeof(struct vp_steal))
		return 0;
	const struct vp_steal *st = vp_record_body(r);
	/* Only the STEAL records inside --from/--to bracket the steal that is counted;
	 * every SWITCH is fed, because the one before the window says who was running. */
	if (!in_window(l, r->time) || st->cpu >= 65536)
		return 0;
	if (st->cpu >= l->ncpus) {
		uint32_t n = st->cpu + 1;
		if (vp_grow((void **)&l->cpu_steal, &l->cap_steal, n, sizeof(*l->cpu_steal)) ||
		    vp_grow((void **)&l->cpu_seen, &l->cap_seen, n, sizeof(*l->cpu_seen)))
			return -ENOMEM;
		for (uint32_t c = l->ncpus; c < n; c++) {
			l->cpu_steal[c] = 0;
			l->cpu_seen[c] = false;
		}
		l->ncpus = n;
	}
	l->cpu_seen[st->cpu] = true;
	l->saw_steal = true;
	vp_steal_acct__steal(l->steal, r->time, st);
	return 0;
}

/* A sample whose stack fits its record; others are skipped rather than read past. */
static bool sample_ok(const struct vp_record *r)
{
	size_t blen = vp_record_body_len(r);
	if (blen < sizeof(struct vp_sample))
		return false;
	const struct vp_sample *s = vp_record_body(r);
	return sizeof(*s) + 8 * ((size_t)s->nr_kernel + s->nr_user) <= blen;
}

static int count_sample(struct loader *l, const struct vp_record *r)
{
	if (!sample_ok(r))
		return 0;
	const struct vp_sample *s = vp_record_body(r);
	if (s->event < MAX_EVENTS)
		l->ev_sampled[s->event] = true;
	l->nsample_recs++;
	if (s->flags & VP_SAMPLE_TAIL) {
		if (s->event < VP_MAX_SAMPLED_EVENTS)
			l->tail_sum[s->event] += s->period;
		return 0;
	}
	if (s->event < VP_MAX_SAMPLED_EVENTS)
		l->period_sum[s->event] += s->period;
	l->nsamples++;
	if (!l->sample_lo || r->time < l->sample_lo)
		l->sample_lo = r->time;
	if (r->time > l->sample_hi)
		l->sample_hi = r->time;
	return 0;
}

/* Remembers each process's main executable as its mappings stream in: the first
 * file-backed mapping after its exec (or in its first snapshot) names the file, and
 * that file's first executable mapping is the one pprof lists first. */
static void note_exe(struct loader *l, const struct vp_mmap *m, const char *name)
{
	struct exe *x = NULL;
	if (name[0] != '/' || !strncmp(name, "/memfd:", 7) || !strncmp(name, "/dev/", 5) || !strncmp(name, "/SYSV", 5))
		return;
	for (size_t i = 0; i < l->nexes && !x; i++)
		if (l->exes[i].pid == m->pid)
			x = &l->exes[i];
	if (!x) {
		if (vp_grow((void **)&l->exes, &l->capexes, l->nexes + 1, sizeof(*l->exes)))
			return;
		x = &l->exes[l->nexes++];
		memset(x, 0, sizeof(*x));
		x->pid = m->pid;
		x->file = strdup(name);
		x->m.file = x->file;
		x->m.pid = m->pid;
		x->m.exe = true;
	}
	if (x->m.limit || !x->file || strcmp(x->file, name) || !(m->prot & 4 /* PROT_EXEC */))
		return;
	x->m.start = m->start;
	x->m.limit = m->start + m->len;
	x->m.offset = m->pgoff;
	if (m->build_id_size && m->build_id_size <= 20)
		hex(m->build_id, m->build_id_size, x->bid);
}

static bool in_list(const uint32_t *v, int n, uint32_t x)
{
	if (!v || n <= 0)
		return true;
	for (int i = 0; i < n; i++)
		if (v[i] == x)
			return true;
	return false;
}

static void meta_add(struct vp_profile *p, const char *key, uint64_t ns);

static const char *thread_name(struct loader *l, uint32_t pid, uint32_t tid, uint64_t t, const char **kernel);
static bool comm_selected(const struct loader *l, const char *name, const char *kernel);

/* --container: the process's container (VP_REC_CONTAINER, read in the first pass)
 * matches; a process without a record is on the host as far as we know. */
static bool container_selected(const struct loader *l, uint32_t pid)
{
	if (!l->o->container || !*l->o->container)
		return true;
	const struct vp_proc_container *c = vp_profile__container(l->p, pid);
	static const struct vp_container_id host;
	return vp_container__matches(l->o->container, c ? c->cgroup : "/", c ? &c->c : &host);
}

static int on_record(struct loader *l, const struct vp_record *r)
{
	size_t blen = vp_record_body_len(r);
	const void *b = vp_record_body(r);
	if (r->time > l->t_last)
		l->t_last = r->time;
	switch (r->type) {
	case VP_REC_META:
		on_meta(l, r);
		return 0;
	case VP_REC_VDSO:
		/* The first one: a recorder writes one, at the start. */
		if (!l->vdso_img && blen >= SELFMAG && blen <= VP_VDSO_MAX && !memcmp(b, ELFMAG, SELFMAG) &&
		    (l->vdso_img = malloc(blen))) {
			memcpy(l->vdso_img, b, blen);
			l->vdso_len = blen;
		}
		return 0;
	case VP_REC_EVENT:
		return on_event(l, r);
	case VP_REC_SAMPLE:
		return count_sample(l, r);
	case VP_REC_MMAP: {
		const struct vp_mmap *m = b;
		/* The filename starts at its offset, not at sizeof (the struct has tail
		 * padding before the flexible member's alignment would end it). */
		const size_t fn_off = offsetof(struct vp_mmap, filename);
		if (blen <= fn_off)
			return 0;
		char name[4096];
		size_t n = strnlen(m->filename, blen - fn_off);
		if (n >= sizeof(name))
			n = sizeof(name) - 1;
		memcpy(name, m->filename, n);
		name[n] = '\0';
		note_exe(l, m, name);
		return vp_procmaps__mmap(l->pm, r->time, m, name);
	}
	case VP_REC_COMM: {
		const struct vp_comm *c = b;
		if (blen < sizeof(*c))
			return 0;
		char comm[17];
		memcpy(comm, c->comm, 16);
		comm[16] = '\0';
		if (c->exec)   /* exec drops the old image: the next file mapped is the new one */
			for (size_t i = 0; i < l->nexes; i++)
				if (l->exes[i].pid == c->pid)
					l->exes[i].pid = UINT32_MAX;
		return vp_procmaps__comm(l->pm, r->time, c->pid, c->tid, comm, c->exec);
	}
	case VP_REC_FORK:
		return blen < sizeof(struct vp_task) ? 0 : vp_procmaps__fork(l->pm, r->time, b);
	case VP_REC_EXIT:
		return blen < sizeof(struct vp_task) ? 0 : vp_procmaps__exit(l->pm, r->time, b);
	case VP_REC_COUNTER: {
		struct vp_counter c;
		if (blen < sizeof(c))
			return 0;
		memcpy(&c, b, sizeof(c));
		if (!(c.flags & VP_COUNTER_SAMPLED) || c.pid != VP_COUNTER_ALL || c.event >= VP_MAX_SAMPLED_EVENTS)
			return 0;   /* a per-thread count: nothing in the report uses it yet */
		uint32_t e = c.event;
		if (vp_grow((void **)&l->mux[e], &l->capmux[e], l->nmux[e] + 1, sizeof(*l->mux[e])))
			return -ENOMEM;
		l->mux[e][l->nmux[e]++] = (struct mux_point){ r->time, c.time_enabled, c.time_running, 1.0 };
		if (c.flags & VP_COUNTER_INTERVAL)
			return 0;   /* a running total: the final one has the count */
		if ((c.flags & VP_COUNTER_UNGROUPED) && e < MAX_EVENTS && l->evmap[e] >= 0) {
			char key[96];
			snprintf(key, sizeof(key), "ungrouped.%s", l->p->events[l->evmap[e]].name);
			vp_profile__set_meta(l->p, key, "1");
		}
		l->totals[e] = c;
		l->has_total[e] = true;
		return 0;
	}
	case VP_REC_LOST:
		if (blen >= sizeof(struct vp_lost))
			l->lost += ((const struct vp_lost *)b)->count;
		return 0;
	case VP_REC_KSYM: {
		const struct vp_ksym *k = b;
		if (blen <= sizeof(*k))
			return 0;
		char module[sizeof(k->module) + 1], name[512];
		memcpy(module, k->module, sizeof(k->module));
		module[sizeof(k->module)] = '\0';
		size_t n = blen - sizeof(*k);
		if (n >= sizeof(name))
			n = sizeof(name) - 1;
		memcpy(name, k->name, n);
		name[n] = '\0';
		return vp_ksyms__add(l->ks, k->addr, k->size, module, name);
	}
	case VP_REC_JVM: {
		const struct vp_jvm *j = b;
		const char *walk = vp_profile__meta(l->p, "stack_walk");
		/* Only the frame-pointer walk needs them (META records come first). */
		if (blen >= sizeof(*j) && (j->flags & VP_JVM_NO_FRAME_POINTERS) && !(walk && !strcmp(walk, "tables")))
			vp_profile__warn(l->p, "JVM %u ran without -XX:+PreserveFramePointer: its Java stacks are cut "
					 "short; restart it with that flag for full stacks", j->pid);
		return 0;
	}
	case VP_REC_CONTAINER: {
		const struct vp_container *c = b;
		if (blen <= sizeof(*c))
			return 0;
		char cg[4096];
		size_t cl = strnlen(c->cgroup, blen - sizeof(*c));
		struct vp_container_id id;
		snprintf(cg, sizeof(cg), "%.*s", (int)(cl < sizeof(cg) ? cl : sizeof(cg) - 1), c->cgroup);
		vp_container__describe(cg, c->pidns, c->host_pidns, &id);
		return vp_profile__set_container(l->p, c->pid, c->nspid, cg, &id);
	}
	case VP_REC_NSTID: {
		const struct vp_nstid *t = b;
		if (blen < sizeof(*t) || vp_grow((void **)&l->nstids, &l->capnstids, l->nnstids + 1, sizeof(*l->nstids)))
			return 0;   /* without it, only that thread's full Java name is missed */
		l->nstids[l->nnstids++] = (struct nstid){ .pid = t->pid, .tid = t->tid, .nstid = t->nstid };
		return 0;
	}
	case VP_REC_STEAL:
		return on_steal(l, r);
	case VP_REC_THREAD_TIME: {
		const struct vp_thread_time *t = b;
		if (blen < sizeof(*t))
			return 0;
		if (!in_list(l->o->pids, l->o->npids, t->pid) || !in_list(l->o->tids, l->o->ntids, t->tid))
			return 0;
		/* Totals over the whole recording: they do not fit a --time window (the wall
		 * view then uses the sampled on-CPU time alone). */
		if (l->o->t_from > 0 || l->o->t_to > 0)
			return 0;
		if (l->o->comm) {
			const char *k, *c = thread_name(l, t->pid, t->tid, t->last, &k);
			if (!c || !comm_selected(l, c, k))
				return 0;
		}
		struct vp_thread_times tt = { .pid = t->pid, .tid = t->tid, .oncpu_ns = t->oncpu_ns,
					      .steal_ns = t->steal_ns, .switches = t->switches };
		return vp_profile__thread_times(l->p, &tt);
	}
	case VP_REC_SCHED_STATS: {
		const struct vp_sched_stats *st = b;
		if (blen < offsetof(struct vp_sched_stats, missed_in))
			return 0;
		meta_add(l->p, "sched.switches", st->switches);
		meta_add(l->p, "sched.records", st->records);
		meta_add(l->p, "sched.bytes", st->bytes);
		meta_add(l->p, "sched.agg_full", st->agg_full);
		meta_add(l->p, "sched.agg_full_ns", st->agg_full_ns);
		meta_add(l->p, "sched.no_stack", st->no_stack);
		meta_add(l->p, "sched.no_rq", st->no_rq);
		if (blen >= offsetof(struct vp_sched_stats, missed_ns) + sizeof(st->missed_ns)) {
			meta_add(l->p, "sched.missed_in", st->missed_in);
			meta_add(l->p, "sched.missed_ns", st->missed_ns);
		}
		if (blen >= offsetof(struct vp_sched_stats, ustack_full) + sizeof(st->ustack_full)) {
			meta_add(l->p, "sched.walks", st->walks);
			meta_add(l->p, "sched.walk_ns", st->walk_ns);
			meta_add(l->p, "sched.ustack_full", st->ustack_full);
			if (st->ustack_full)
				vp_profile__warn(l->p, "%llu off-CPU intervals lost their user stack: the switch tracer's "
						 "stack hash was full", (unsigned long long)st->ustack_full);
		}
		if (st->agg_full)
			vp_profile__warn(l->p, "%llu off-CPU intervals (%.1f ms) were not recorded: the switch tracer's "
					 "hash was full", (unsigned long long)st->agg_full, (double)st->agg_full_ns / 1e6);
		return 0;
	}
	case VP_REC_SCHED_CPU: {
		const struct vp_sched_cpu *c = b;
		if (blen < sizeof(*c))
			return 0;
		l->saw_sched_cpu = true;
		l->sched_cpu[0] += c->steal_clock_ns;
		l->sched_cpu[1] += c->charged_ns;
		l->sched_cpu[2] += c->idle_ns;
		l->sched_cpu[3] += c->kernel_steal_ns;
		return 0;
	}
	case VP_REC_SWITCH:
		if (blen >= sizeof(struct vp_switch))
			vp_steal_acct__switch(l->steal, r->time, b);
		return 0;
	case VP_REC_END: {
		const struct vp_end *e = b;
		l->saw_end = true;
		if (blen >= sizeof(*e)) {
			l->end_lost = e->lost;
			l->end_duration = e->duration_ns;
		}
		return 0;
	}
	default:
		return 0;  /* counters are for other readers; unknown types skipped */
	}
}

static struct jvm *jvm_get(struct loader *l, uint32_t pid)
{
	for (size_t i = 0; i < l->njvms; i++)
		if (l->jvms[i].pid == pid)
			return &l->jvms[i];
	if (vp_grow((void **)&l->jvms, &l->capjvms, l->njvms + 1, sizeof(*l->jvms)))
		return NULL;
	struct jvm *j = &l->jvms[l->njvms++];
	memset(j, 0, sizeof(*j));
	j->pid = pid;
	j->hotspot = -1;
	return j;
}

/* Opens <session>/jit/<pid> the first time a pid needs it. */
static struct jvm *jvm_open(struct loader *l, uint32_t pid)
{
	struct jvm *j = jvm_get(l, pid);
	if (!j || j->tried)
		return j;
	j->tried = true;
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s/%u", l->dir, VP_SESSION_JIT_DIR, pid);
	struct stat st;
	j->has_dir = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
	if (!j->has_dir)
		return j;
#if HAVE_JIT_INDEX
	char err[256] = "";
	j->idx = vp_jit_index__open(path, err, sizeof(err));
	if (!j->idx && errno != ENOENT)
		vp_profile__warn(l->p, "%s", err[0] ? err : "cannot read JIT code maps");
	const struct vp_codemap *cm = j->idx ? vp_jit_index__codemap(j->idx) : NULL;
	if (cm && cm->damage[0])
		vp_profile__warn(l->p, "%s", cm->damage);
	const char *walk = vp_profile__meta(l->p, "stack_walk");
	if (j->idx && !vp_jit_index__frame_pointers(j->idx) && !(walk && !strcmp(walk, "tables")))
		vp_profile__warn(l->p, "JVM %u ran without -XX:+PreserveFramePointer: its Java stacks are cut "
				 "short; restart it with that flag for full stacks", pid);
#else
	vp_profile__warn(l->p, "%s has JIT code maps but this viprof was built without the JIT index "
			 "(maps/jit_index.h); Java frames are unnamed", path);
#endif
	return j;
}

/* The name of thread tid of pid at t: the full Java thread name when the JVM's agent
 * recorded one (the kernel keeps 15 characters) and the kernel's name at t is its first
 * 15 bytes, as HotSpot names native threads (so a thread renamed since, or a tid the
 * agent's record does not fit, keeps the kernel's name); else the kernel's. *kernel gets
 * the kernel's (NULL when unknown), which --comm also matches. */
static const char *thread_name(struct loader *l, uint32_t pid, uint32_t tid, uint64_t t, const char **kernel)
{
	const char *k = vp_procmaps__comm_at(l->pm, tid, t);
	if (!k)
		k = vp_procmaps__comm_at(l->pm, pid, t);
	if (kernel)
		*kernel = k;
#if HAVE_JIT_INDEX
	struct jvm *j = pid ? jvm_open(l, pid) : NULL;
	const struct vp_codemap *cm = j && j->idx ? vp_jit_index__codemap(j->idx) : NULL;
	/* The agent of a JVM in another pid namespace names its threads by their tids
	 * there. */
	uint32_t agent_tid = tid;
	const struct vp_proc_container *pc = cm ? vp_profile__container(l->p, pid) : NULL;
	if (pc && pc->nspid && pc->nspid != pid) {
		agent_tid = tid == pid ? pc->nspid : 0;
		for (size_t i = l->nnstids; i-- > 0 && !agent_tid;)
			if (l->nstids[i].pid == pid && l->nstids[i].tid == tid)
				agent_tid = l->nstids[i].nstid;
	}
	const char *full = cm && agent_tid ? vp_codemap__thread_name(cm, agent_tid, t) : NULL;
	if (full && (!k || (!strncmp(k, full, 15) && strlen(k) == strnlen(full, 15))))
		return full;
	/* A thread that still has its process's kernel name was never named natively (the
	 * java launcher's main thread, "java"): the agent's name for it (from its own tid)
	 * is the only one it has. */
	const char *pk = full && k && tid != pid ? vp_procmaps__comm_at(l->pm, pid, t) : NULL;
	if (pk && !strcmp(pk, k))
		return full;
#endif
	return k;
}

/* Does --comm (o->comm) select this thread: its Java name or its kernel name? */
static bool comm_selected(const struct loader *l, const char *name, const char *kernel)
{
	return !l->o->comm || (name && !strcmp(l->o->comm, name)) || (kernel && !strcmp(l->o->comm, kernel));
}

static uint32_t add_frame(struct loader *l, uint8_t layer, const char *name, const char *image,
			  const char *build_id, uint64_t addr, const char *file, uint32_t line)
{
	struct vp_frame f = { .name = name, .image = image ? image : "", .build_id = build_id ? build_id : "",
			      .file = file ? file : "", .addr = addr, .line = line, .layer = layer };
	return vp_profile__frame(l->p, &f);
}

static bool is_file_backed(const char *f)
{
	return f[0] == '/' && f[1] != '/' && strncmp(f, "/memfd:", 7) && strncmp(f, "/dev/zero", 9) &&
	       strncmp(f, "/SYSV", 5);
}

static uint32_t kernel_frame(struct loader *l, uint64_t ip, bool caller)
{
	char name[64];
	const struct vp_ksym_entry *k = vp_ksyms__find(l->ks, caller ? ip - 1 : ip);
	if (!k) {
		snprintf(name, sizeof(name), "[kernel] 0x%llx", (unsigned long long)ip);
		return add_frame(l, VP_LAYER_KERNEL, name, "[kernel.kallsyms]", "", ip, "", 0);
	}
	char image[64 + 2];
	if (k->module[0])
		snprintf(image, sizeof(image), "[%s]", k->module);
	else
		snprintf(image, sizeof(image), "[kernel.kallsyms]");
	return add_frame(l, VP_LAYER_KERNEL, k->name, image, "", k->addr, "", 0);
}

/* A sample in Xen itself: taken in hypervisor mode, or at an address in Xen's range
 * (the x86 kernel reports samples that interrupted Xen as kernel mode, so the address
 * is what tells). Named from --hv-syms when given. */
static uint32_t hypervisor_frame(struct loader *l, uint64_t ip)
{
	char name[64];
	if (l->hv) {
		uint64_t off;
		const char *s = vp_hvsyms__name(l->hv, ip, &off);
		if (s)
			return add_frame(l, VP_LAYER_HYPERVISOR, s, base_name(l->o->hv_syms), "", ip - off, "", 0);
	}
	snprintf(name, sizeof(name), "[hypervisor] 0x%llx", (unsigned long long)ip);
	return add_frame(l, VP_LAYER_HYPERVISOR, name, "[hypervisor]", "", ip, "", 0);
}

/* In Xen PMU mode "all", dom0 also receives samples of other domains (guest kernel
 * or guest user mode). Their addresses mean nothing in dom0's kallsyms or processes,
 * and perf does not say which domain it was: one frame per mode, under its own
 * thread name, so that they are counted and never misnamed. */
static bool other_domain(const struct vp_sample *s)
{
	return s->mode == VP_MODE_GUEST_KERNEL || s->mode == VP_MODE_GUEST_USER;
}

/* What a mapping resolves through, worked out once per mapping: its ELF, whether the
 * ELF is the file that was recorded (build-ids), and the recorded build-id in hex. */
struct mapinfo {
	struct vp_elf *elf;
	bool trusted;
	char recbid[41];
	struct mapinfo *next;
};

static struct mapinfo *map_info(struct loader *l, struct vp_map *m, uint32_t pid)
{
	if (m->priv_set)
		return m->priv;
	m->priv_set = true;
	struct mapinfo *mi = calloc(1, sizeof(*mi));
	if (!mi)
		return NULL;
	mi->next = l->mapinfos;
	l->mapinfos = mi;
	m->priv = mi;
	struct vp_elf *e = vp_elfsym__open(l->elfs, m->filename, pid);
	mi->elf = e;
	if (m->build_id_size)
		hex(m->build_id, m->build_id_size, mi->recbid);
	mi->trusted = e != NULL;
	if (e && mi->recbid[0]) {
		const char *now = vp_elf__build_id(e);
		if (now[0] && strcmp(now, mi->recbid)) {
			/* The symbols of another build name the wrong functions: offsets only. */
			mi->trusted = false;
			vp_profile__warn(l->p, "%s: file changed since recording (build-id %s, recorded %s); "
					 "its symbols are not trusted: copy the recorded file back or "
					 "place its debug file under the debug root", vp_elf__path(e), now, mi->recbid);
		}
	} else if (!e) {
		vp_profile__warn(l->p, "%s: cannot open for symbols (%s); its frames show as image+offset",
				 m->filename, strerror(errno));
	}
	return mi;
}

/* The vDSO is not on disk. The recorder saves its image in the session (VP_REC_VDSO);
 * a session from before that is named with the vDSO mapped into this process, which is
 * the same image when the report runs on the kernel release that recorded. */
static struct vp_elf *vdso_elf(struct loader *l)
{
	if (l->vdso_tried)
		return l->vdso;
	l->vdso_tried = true;
	if (l->vdso_img) {
		l->vdso = vp_elfsym__open_memory(l->elfs, "[vdso] (recorded)", l->vdso_img, l->vdso_len);
		return l->vdso;
	}
	const char *k = vp_profile__meta(l->p, "kernel");
	struct utsname u;
	size_t len;
	const void *img;
	if (!k || uname(&u) || strcmp(k, u.release) || !(img = vp_vdso_image(&len)))
		return NULL;
	l->vdso = vp_elfsym__open_memory(l->elfs, "[vdso] (this process)", img, len);
	return l->vdso;
}

/* What one user address was looked up to at a sample's time: its mapping, and for code
 * outside files the JIT index's answer. Each is searched for once per uncached address;
 * the cache key, the frames and the pprof location all come from these. */
struct user_hit {
	struct vp_map *m;
#if HAVE_JIT_INDEX
	struct vp_jit_hit jit;
#endif
	bool jit_looked;             /* jit holds the index's answer */
};

/* Appends the frames for one user address, leaf first; returns how many. */
static int user_frames(struct loader *l, uint32_t pid, uint64_t t, uint64_t ip, bool caller,
		       const struct user_hit *h, uint32_t *out, int max)
{
	uint64_t look = caller ? ip - 1 : ip;
	struct vp_map *m = h->m;
	char name[512];
	if (m && is_file_backed(m->filename)) {
		struct mapinfo *mi = map_info(l, m, pid);
		struct vp_elf *e = mi ? mi->elf : NULL;
		bool trusted = mi && mi->trusted;
		const char *recbid = mi ? mi->recbid : "";
		const char *bname = base_name(m->filename);
		uint8_t layer = !strncmp(bname, "libjvm.so", 9) ? VP_LAYER_JVM : VP_LAYER_NATIVE;
		uint64_t vaddr, off;
		if (trusted && vp_elf__to_vaddr(e, m->start, m->pgoff, look, &vaddr)) {
			const char *s = vp_elf__symbol(e, vaddr, &off);
			if (s) {
				out[0] = add_frame(l, layer, s, m->filename, vp_elf__build_id(e), vaddr - off, "", 0);
				return 1;
			}
			vp_elf__to_vaddr(e, m->start, m->pgoff, ip, &vaddr);
			snprintf(name, sizeof(name), "%s+0x%llx", bname, (unsigned long long)vaddr);
			out[0] = add_frame(l, layer, name, m->filename, vp_elf__build_id(e), vaddr, "", 0);
			return 1;
		}
		uint64_t foff = ip - m->start + m->pgoff;
		snprintf(name, sizeof(name), "%s+0x%llx", bname, (unsigned long long)foff);
		out[0] = add_frame(l, layer, name, m->filename, recbid, foff, "", 0);
		return 1;
	}
	struct jvm *j = jvm_open(l, pid);
#if HAVE_JIT_INDEX
	if (j && j->idx) {
		struct vp_jit_frame jf[MAX_JIT_DEPTH];
		int cap = max < MAX_JIT_DEPTH ? max : MAX_JIT_DEPTH;
		int n = h->jit_looked ? vp_jit_index__expand(j->idx, &h->jit, ip, jf, cap)
				      : vp_jit_index__resolve(j->idx, ip, t, l->o->map_mode_flat, jf, cap);
		for (int i = 0; i < n; i++) {
			/* The compiled method's frame carries its tier (issue 25): C1 and C2 code of
			 * one method are two frames, as in async-profiler's _[1] and _[j]. Whether
			 * it was an OSR compilation is left to 'maps show': a method's OSR and
			 * normal code as two rows of every report told little and split its time. */
			uint8_t tier = jf[i].level >= 1 && jf[i].level <= VP_TIER_C2 ? jf[i].level : 0;
			struct vp_frame vf = { .name = jf[i].name ? jf[i].name : "[unknown]", .image = "[jit]",
					       .build_id = "", .file = jf[i].file ? jf[i].file : "",
					       .line = jf[i].line, .layer = jf[i].layer, .tier = tier };
			out[i] = vp_profile__frame(l->p, &vf);
			l->jit_lines[i] = jf[i].line;  /* this address's lines; the frame keeps its first */
		}
		l->jit_n = n;
		if (n > 0)
			return n;
	}
#else
	(void)j;
#endif
	struct vp_elf *vd;
	uint64_t vv, voff;
	const char *vs;
	if (m && !strcmp(m->filename, "[vdso]") && (vd = vdso_elf(l)) && vp_elf__to_vaddr(vd, m->start, 0, look, &vv) &&
	    (vs = vp_elf__symbol(vd, vv, &voff))) {
		out[0] = add_frame(l, VP_LAYER_NATIVE, vs, "[vdso]", vp_elf__build_id(vd), vv - voff, "", 0);
		return 1;
	}
	if (m && m->filename[0] == '[' && strncmp(m->filename, "[anon", 5)) {  /* [vdso], [vsyscall] */
		snprintf(name, sizeof(name), "%s+0x%llx", m->filename, (unsigned long long)(ip - m->start));
		out[0] = add_frame(l, VP_LAYER_NATIVE, name, m->filename, "", ip - m->start, "", 0);
		return 1;
	}
	if (!m)
		l->unmapped++;
	/* Anonymous memory in a HotSpot JVM is Java code (compiled, the interpreter or a
	 * stub) even when no code map names it: saying so is better than "[unknown]", and
	 * says what to do (the agent). Other anonymous code is another runtime's. */
	if (m && j && j->hotspot < 0)
		j->hotspot = vp_procmaps__maps_file(l->pm, pid, t, "libjvm.so");
	if (m && j && j->hotspot > 0) {
		out[0] = add_frame(l, VP_LAYER_JIT, j->has_dir ? VP_FRAME_JAVA_UNMAPPED : VP_FRAME_JAVA_NO_AGENT, "[jit]",
				   "", 0, "", 0);
		return 1;
	}
	out[0] = add_frame(l, VP_LAYER_UNKNOWN, "[unknown]", m ? "[anon]" : "", "", 0, "", 0);
	return 1;
}

/* An interpreted frame the walker identified: named by its Method* through the agent's
 * METHOD_PTR records at the sample's time, with the line of its bytecode index (also
 * left in l->jit_lines[0]: the frame keeps the line of its first sample, a location
 * needs this one's). */
/* The method id a Method* named at t (0 when unknown): with the bci, all that an
 * interpreted frame resolves through. */
static uint64_t interp_method(struct loader *l, uint32_t pid, uint64_t t, const struct vp_java_frame *jf)
{
#if HAVE_JIT_INDEX
	struct jvm *j = jvm_open(l, pid);
	const struct vp_codemap *cm = j && j->idx ? vp_jit_index__codemap(j->idx) : NULL;
	return cm ? vp_codemap__method_at(cm, jf->method, t) : 0;
#else
	(void)l, (void)pid, (void)t, (void)jf;
	return 0;
#endif
}

static uint32_t interpreted_frame(struct loader *l, uint32_t pid, uint64_t t, const struct vp_java_frame *jf)
{
	l->jit_lines[0] = 0;
#if HAVE_JIT_INDEX
	struct jvm *j = jvm_open(l, pid);
	const struct vp_codemap *cm = j && j->idx ? vp_jit_index__codemap(j->idx) : NULL;
	uint64_t id = cm ? vp_codemap__method_at(cm, jf->method, t) : 0;
	const struct vp_cm_name_info *n = id ? vp_codemap__name(cm, id) : NULL;

	if (n && n->name && n->name[0]) {
		l->jit_lines[0] = vp_codemap__line(n, jf->bci);
		return add_frame(l, VP_LAYER_INTERPRETED, n->name, "[jit]", "", 0, n->file ? n->file : "",
				 l->jit_lines[0]);
	}
#endif
	return add_frame(l, VP_LAYER_INTERPRETED, "[interpreted]", "[jit]", "", 0, "", 0);
}

const char *vp_walk_end_name(int k)
{
	static const char *const names[VP_WALK__COUNT] = {
		[VP_WALK_UNKNOWN] = "unknown", [VP_WALK_ROOT] = "root", [VP_WALK_NO_RULE] = "no_rule",
		[VP_WALK_UNREADABLE] = "unreadable", [VP_WALK_DEPTH] = "depth", [VP_WALK_BAD_FRAME] = "bad_frame",
		[VP_WALK_NO_PROC] = "tables_not_loaded",
	};
	return k >= 0 && k < VP_WALK__COUNT ? names[k] : "unknown";
}

static uint64_t ac_hash(const struct addr_ent *k)
{
	uint64_t h = k->ip * 0x9e3779b97f4a7c15ull;
	h ^= ((uint64_t)k->pid << 16 | (uint64_t)k->kind << 8 | k->caller) * 0xff51afd7ed558ccdull;
	h ^= (uint64_t)(uintptr_t)k->map * 0xc4ceb9fe1a85ec53ull;
	h ^= (uint64_t)(uintptr_t)k->jit * 0x94d049bb133111ebull;
	return h ^ (h >> 31);
}

static bool ac_eq(const struct addr_ent *a, const struct addr_ent *b)
{
	return a->ip == b->ip && a->kind == b->kind && a->caller == b->caller && a->pid == b->pid &&
	       a->map == b->map && a->jit == b->jit;
}

static const struct addr_ent *ac_find(const struct addr_cache *c, const struct addr_ent *k)
{
	if (!c->size)
		return NULL;
	size_t mask = c->size - 1;
	for (size_t j = ac_hash(k) & mask; c->t[j].kind; j = (j + 1) & mask)
		if (ac_eq(&c->t[j], k))
			return &c->t[j];
	return NULL;
}

static void ac_insert(struct addr_cache *c, const struct addr_ent *e)
{
	size_t mask = c->size - 1, j = ac_hash(e) & mask;
	while (c->t[j].kind)
		j = (j + 1) & mask;
	c->t[j] = *e;
	c->used++;
}

/* Remembers what key resolved to. The cache only saves time: when memory runs short it
 * stops growing and the loader resolves as before. */
static void ac_put(struct addr_cache *c, const struct addr_ent *key, const uint32_t *frames, int n, uint32_t loc,
		   bool unmapped)
{
	if (n <= 0 || n > MAX_JIT_DEPTH)
		return;
	for (int i = 0; i < n; i++)
		if (frames[i] == UINT32_MAX)
			return;
	if ((c->used + 1) * 2 > c->size) {
		size_t size = c->size ? c->size * 2 : 4096;
		struct addr_ent *t = calloc(size, sizeof(*t)), *old = c->t;
		if (!t)
			return;
		size_t oldsize = c->size;
		c->t = t;
		c->size = size;
		c->used = 0;
		for (size_t i = 0; i < oldsize; i++)
			if (old[i].kind)
				ac_insert(c, &old[i]);
		free(old);
	}
	if (c->npool + (size_t)n > UINT32_MAX ||
	    vp_grow((void **)&c->pool, &c->cappool, c->npool + (size_t)n, sizeof(*c->pool)))
		return;
	struct addr_ent e = *key;
	e.n = (uint8_t)n;
	e.unmapped = unmapped;
	e.loc = loc;
	e.first = (uint32_t)c->npool;
	memcpy(c->pool + c->npool, frames, (size_t)n * sizeof(*frames));
	c->npool += (size_t)n;
	ac_insert(c, &e);
}

/* Sets key's span entry to frames and loc for the times [lo, hi). */
static void span_put(struct addr_cache *c, struct addr_ent *key, uint64_t lo, uint64_t hi, const uint32_t *frames,
		     int n, uint32_t loc)
{
	struct addr_ent *e = (struct addr_ent *)ac_find(c, key);
	key->t_lo = lo;
	key->t_hi = hi;
	if (!e) {
		ac_put(c, key, frames, n, loc, false);
		return;
	}
	if (n <= 0 || n > MAX_JIT_DEPTH || c->npool + (size_t)n > UINT32_MAX ||
	    vp_grow((void **)&c->pool, &c->cappool, c->npool + (size_t)n, sizeof(*c->pool))) {
		e->t_lo = 1;   /* no room for the new answer: forget the old one */
		e->t_hi = 0;
		return;
	}
	for (int i = 0; i < n; i++)
		if (frames[i] == UINT32_MAX)
			return;
	memcpy(c->pool + c->npool, frames, (size_t)n * sizeof(*frames));
	e->first = (uint32_t)c->npool;
	c->npool += (size_t)n;
	e->n = (uint8_t)n;
	e->loc = loc;
	e->t_lo = lo;
	e->t_hi = hi;
	e->flat_wrong = key->flat_wrong;
}

enum { FLAT_OK = 1, FLAT_WRONG = 2 };

/* A sample's leaf (frame 0 of its user stack) in JIT code (v nonzero), and whether a
 * flat map would have named it after another method. */
static void count_flat(struct loader *l, int frame, uint8_t v)
{
	if (frame != 0 || !v)
		return;
	l->jit_leaves++;
	l->flat_wrong += v == FLAT_WRONG;
}

/* Whether a flat code map (the last method ever loaded at each address, as in a
 * perf-PID.map) names the JIT address ip other than epoch_name: code freed at a GC and
 * its address reused by a later method. Only asked on a cache miss. */
static bool flat_misnames(struct loader *l, uint32_t pid, uint64_t ip, uint64_t t, const char *epoch_name)
{
#if HAVE_JIT_INDEX
	struct jvm *j = jvm_open(l, pid);
	struct vp_jit_frame jf[MAX_JIT_DEPTH];
	if (!j || !j->idx || l->o->map_mode_flat)
		return false;
	int n = vp_jit_index__resolve(j->idx, ip, t, true, jf, MAX_JIT_DEPTH);
	return n > 0 && jf[0].name && strcmp(jf[0].name, epoch_name);
#else
	(void)l, (void)pid, (void)ip, (void)t, (void)epoch_name;
	return false;
#endif
}

/* The JIT method or stub that owned ip in pid at t, as vp_jit_index__owner names it,
 * and the span of times it surely did (*lo > *hi: none known); the index's answer is
 * kept in h for the frames. */
static const void *jit_owner(struct loader *l, uint32_t pid, uint64_t ip, uint64_t t, struct user_hit *h,
			     uint64_t *lo, uint64_t *hi)
{
	*lo = 1;
	*hi = 0;
#if HAVE_JIT_INDEX
	struct jvm *j = jvm_open(l, pid);
	if (j && j->idx) {
		const void *owner = vp_jit_index__lookup(j->idx, ip, t, l->o->map_mode_flat, &h->jit);
		h->jit_looked = true;
		*lo = h->jit.lo;
		*hi = h->jit.hi;
		return owner;
	}
#else
	(void)l, (void)pid, (void)ip, (void)t, (void)h;
#endif
	return NULL;
}

/* The location of frames f[0..k-1] (innermost first) that the sampled address look
 * resolved to, for pprof: its mapping (vm, the one the sample's lookup found, for user
 * code; the kernel's or hypervisor's image otherwise) and the lines at this very address
 * (a frame keeps the line of the first address that named it). UINT32_MAX when none. */
static uint32_t frame_loc(struct loader *l, uint32_t pid, uint64_t look, const uint32_t *f, int k, bool user,
			  const struct vp_map *vm)
{
	uint32_t lines[MAX_JIT_DEPTH];
	if (k <= 0 || k > MAX_JIT_DEPTH)
		return UINT32_MAX;
	for (int i = 0; i < k; i++) {
		if (f[i] == UINT32_MAX)
			return UINT32_MAX;
		lines[i] = l->jit_n == k ? l->jit_lines[i] : l->p->frames[f[i]].line;
	}
	const struct vp_frame *fr = &l->p->frames[f[k - 1]];
	struct vp_mapping m = { .file = fr->image, .build_id = fr->build_id, .pid = user ? pid : 0 };
	uint32_t mid = UINT32_MAX;
	if (user) {
		for (size_t i = 0; i < l->nexes; i++) {
			struct exe *x = &l->exes[i];
			if (x->pid == pid && x->m.limit && !x->used) {
				x->used = true;
				/* Pointed here, not in note_exe: l->exes moves when it grows. */
				x->m.build_id = x->bid;
				vp_profile__mapping(l->p, &x->m);
			}
		}
	}
	if (user && strcmp(fr->image, "[jit]")) {
		if (vm && vm->filename[0] && strncmp(vm->filename, "[anon", 5)) {
			m.file = vm->filename;
			m.start = vm->start;
			m.limit = vm->start + vm->len;
			m.offset = vm->pgoff;
			mid = vp_profile__mapping(l->p, &m);
		}
	} else if (fr->image[0]) {
		mid = vp_profile__mapping(l->p, &m);
	}
	return vp_profile__location(l->p, mid, look, f, lines, (uint32_t)k);
}

/* Samples of an event whose EVENT record was in a skipped chunk (the first chunk
 * holds them all): counted under a stand-in name rather than dropped. Its unit is
 * unknown, so its periods are shown as plain events. */
/* Whether a recorder still writes the stream at path: it holds an exclusive lock on
 * the file while it does (daemon/session_writer.c, and the service's client). */
static bool recording_in_progress(const char *path)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	bool busy = fd >= 0 && flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
	if (fd >= 0)
		close(fd);
	return busy;
}

static void events_lost_in_damage(struct loader *l)
{
	for (unsigned ev = 0; ev < MAX_EVENTS; ev++) {
		char name[32];
		int idx;

		if (!l->ev_sampled[ev] || l->evmap[ev] >= 0)
			continue;
		snprintf(name, sizeof(name), "event#%u", ev);
		if ((idx = vp_profile__add_event(l->p, name, "events")) < 0)
			continue;  /* no room for another event: these samples stay dropped */
		l->evmap[ev] = idx;
		vp_profile__warn(l->p, "samples of event %u are counted as '%s': its description was lost with a damaged chunk",
				 ev, name);
	}
}

/* Sampled events the (v)PMU multiplexed counted (and sampled) only part of the time
 * they were enabled: their weights are scaled up by time_enabled / time_running, as
 * perf stat scales counts, and the report says so and by how much. The raw count of
 * each event goes into the metadata (count.EVENT) for scripts and tests. */
/* Each interval between two totals of an event gets its own factor, enabled/running
 * over that interval (common/count_scale.h's rule), so that stacks sampled while the
 * event had a counter to itself are not stretched by contention that came later. An
 * interval in which the event never ran has no samples; its enabled time goes to the
 * next interval that ran, as the counters library does. */
static void interval_scales(struct loader *l, int e)
{
	uint64_t pe = 0, pr = 0, carry = 0;

	for (size_t i = 0; i < l->nmux[e]; i++) {
		struct mux_point *m = &l->mux[e][i];
		uint64_t de = m->enabled >= pe ? m->enabled - pe : 0, dr = m->running >= pr ? m->running - pr : 0;

		m->scale = 1.0;
		if (dr == 0) {
			carry += de;
		} else {
			de += carry;
			carry = 0;
			if (dr < de)
				m->scale = (double)de / (double)dr;
		}
		pe = m->enabled;
		pr = m->running;
	}
}

/* The factor for a sample of session event e at time t: that of the first totals read
 * at or after t; after the last one (none, in a whole session), the last's. */
static double sample_scale(const struct loader *l, uint32_t e, uint64_t t)
{
	if (e >= VP_MAX_SAMPLED_EVENTS || !l->nmux[e])
		return 1.0;
	size_t lo = 0, hi = l->nmux[e];
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (l->mux[e][mid].time < t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return l->mux[e][lo < l->nmux[e] ? lo : l->nmux[e] - 1].scale;
}

static void multiplexing(struct loader *l, bool damaged)
{
	for (int e = 0; e < VP_MAX_SAMPLED_EVENTS; e++) {
		const struct vp_counter *c = &l->totals[e];
		l->scale[e] = 1.0;
		interval_scales(l, e);
		if (!l->has_total[e] || l->evmap[e] < 0)
			continue;
		const char *name = l->p->events[l->evmap[e]].name;
		char key[96], val[32];
		snprintf(key, sizeof(key), "count.%s", name);
		snprintf(val, sizeof(val), "%llu", (unsigned long long)c->value);
		vp_profile__set_meta(l->p, key, val);
		/* Each sample weighs the events since its thread's previous one, so what a
		 * thread did after its last sample is in no sample: say how much, when it is
		 * more than noise (few samples: a burst, or a rate the kernel's frequency loop
		 * did not follow). */
		uint64_t sum = l->period_sum[e] + l->tail_sum[e];
		/* A user-mode clock event counts its threads' kernel time too, which none of
		 * its samples can hold: that share is not a tail (issue 23: a service user's
		 * cpu-clock showed 25% "after the last sample"). The perf backend notes
		 * sampler.kernel when it had to exclude the kernel itself. */
		const char *kexcl = vp_profile__meta(l->p, "sampler.kernel");
		bool user_clock = l->ev_user_clock[e] ||
				  (!strcmp(l->p->events[l->evmap[e]].unit, "nanoseconds") &&
				   kexcl && !strncmp(kexcl, "excluded", 8));
		if (user_clock && sum && c->value > sum + sum / 50 && c->time_running >= c->time_enabled) {
			vp_profile__warn(l->p, "%llu of the %llu ns '%s' counted (%.1f%%) are in no stack: the event samples user "
					 "mode only, and its count includes the time its threads spent in the kernel",
					 (unsigned long long)(c->value - sum), (unsigned long long)c->value, name,
					 100.0 * (double)(c->value - sum) / (double)c->value);
			sum = c->value;   /* said: not a tail */
		}
		if (l->tail_sum[e]) {
			snprintf(key, sizeof(key), "tail.%s", name);
			snprintf(val, sizeof(val), "%llu", (unsigned long long)l->tail_sum[e]);
			vp_profile__set_meta(l->p, key, val);
		}
		if (sum && c->value > sum + sum / 50 && c->time_running >= c->time_enabled && damaged)
			vp_profile__warn(l->p, "%llu of the %llu '%s' events counted (%.1f%%) are in no stack: their samples were "
					 "in the damaged part of the session, or came after their thread's last sample",
					 (unsigned long long)(c->value - sum), (unsigned long long)c->value, name,
					 100.0 * (double)(c->value - sum) / (double)c->value);
		else if (sum && c->value > sum + sum / 50 && c->time_running >= c->time_enabled)
			vp_profile__warn(l->p, "%llu of the %llu '%s' events counted (%.1f%%) came after their thread's last "
					 "sample and are in no stack (the thread's final count could not be read); sample "
					 "more often (-F, -c) for more of them",
					 (unsigned long long)(c->value - sum), (unsigned long long)c->value, name,
					 100.0 * (double)(c->value - sum) / (double)c->value);
		if (c->time_running == 0 || c->time_running >= c->time_enabled)
			continue;
		l->scale[e] = (double)c->time_enabled / (double)c->time_running;
		snprintf(key, sizeof(key), "multiplexed.%s", name);
		snprintf(val, sizeof(val), "%.4f", (double)c->time_running / (double)c->time_enabled);
		vp_profile__set_meta(l->p, key, val);
		/* Under half a percent is the scheduler's own jitter, not a shared counter. */
		if (c->time_running < c->time_enabled - c->time_enabled / 200)
			vp_profile__warn(l->p, "event '%s' was multiplexed: on a counter %.1f%% of the time it was enabled; "
					 "its weights are scaled by %.2f (record fewer hardware events at once for exact counts)",
					 name, 100.0 * (double)c->time_running / (double)c->time_enabled, l->scale[e]);
	}
}

#if HAVE_JIT_INDEX
/* The virtual-thread index of JVM pid (built the first time), or NULL. */
static struct vp_vthreads *jvm_vthreads(struct loader *l, uint32_t pid)
{
	struct jvm *j = pid ? jvm_open(l, pid) : NULL;
	const struct vp_codemap *cm = j && j->idx ? vp_jit_index__codemap(j->idx) : NULL;
	if (!cm || !cm->nvthreads)
		return NULL;
	if (!j->vt)
		j->vt = vp_vthreads__build(cm);
	return j->vt;
}
#endif

/* Whether a virtual thread was mounted on carrier tid of pid at t: its report thread id
 * and name. The agent of a JVM in another pid namespace names carriers by their tids
 * there: those are not matched (docs/offcpu.md). */
static bool vthread_at(struct loader *l, uint32_t pid, uint32_t tid, uint64_t t, uint32_t *vtid, char *label,
		       size_t len)
{
#if HAVE_JIT_INDEX
	uint64_t id;
	const char *name;
	if (!vp_vthreads__at(jvm_vthreads(l, pid), tid, t, &id, &name))
		return false;
	*vtid = vp_vthread_tid(id);
	vp_vthreads__label(id, name, label, len);
	return true;
#else
	(void)l, (void)pid, (void)tid, (void)t, (void)vtid, (void)label, (void)len;
	return false;
#endif
}

static int resolve_sample(struct loader *l, const struct vp_record *r)
{
	const struct vp_sample *s = vp_record_body(r);
	const struct vp_session_opts *o = l->o;
	if (!in_list(o->pids, o->npids, s->pid) || !in_list(o->tids, o->ntids, s->tid))
		return 0;
	double rel = r->time >= l->t0 ? (double)(r->time - l->t0) / 1e9 : 0;
	if (rel < o->t_from || (o->t_to > 0 && rel > o->t_to))
		return 0;
	const char *kcomm, *comm = thread_name(l, s->pid, s->tid, r->time, &kcomm);
	if (!comm)
		comm = s->pid == 0 ? "swapper" : "";  /* the idle task has no COMM record; perf's name */
	if (!comm_selected(l, comm, kcomm) || !container_selected(l, s->pid))
		return 0;
	if (s->event >= MAX_EVENTS || l->evmap[s->event] < 0)
		return 0;  /* a sample of an event never described: nothing to count it as */
	/* report --vthreads: a carrier's samples while a virtual thread is mounted on it are
	 * that virtual thread's. */
	uint32_t tid = s->tid;
	char vlabel[300];
	bool moved = o->vthreads && vthread_at(l, s->pid, s->tid, r->time, &tid, vlabel, sizeof(vlabel));
	if (moved)
		comm = vlabel;

	uint32_t leaf_first[MAX_OUT_FRAMES], locs[MAX_OUT_FRAMES];
	int n = 0, nl = 0;
	l->jit_n = 0;
	if (other_domain(s)) {
		comm = "[other domains]";
		leaf_first[n++] = add_frame(l, VP_LAYER_HYPERVISOR,
					    s->mode == VP_MODE_GUEST_KERNEL ? "[other domain: kernel]" : "[other domain: user]",
					    "[domU]", "", 0, "", 0);
	}
	for (int i = 0; i < s->nr_kernel && n < MAX_OUT_FRAMES && !other_domain(s); i++) {
		bool hv = (i == 0 && s->mode == VP_MODE_HYPERVISOR) || vp_hvsyms__is_xen_addr(s->ips[i]);
		struct addr_ent key = { .ip = s->ips[i], .kind = hv ? AC_HYPERVISOR : AC_KERNEL, .caller = i > 0 };
		const struct addr_ent *e = ac_find(&l->ac, &key);
		if (e) {
			leaf_first[n++] = l->ac.pool[e->first];
			locs[nl++] = e->loc;
			continue;
		}
		if (hv)
			leaf_first[n++] = hypervisor_frame(l, s->ips[i]);
		else
			leaf_first[n++] = kernel_frame(l, s->ips[i], i > 0);
		locs[nl++] = frame_loc(l, s->pid, i > 0 ? s->ips[i] - 1 : s->ips[i], leaf_first + n - 1, 1, false, NULL);
		ac_put(&l->ac, &key, leaf_first + n - 1, 1, locs[nl - 1], false);
	}
	if (s->nr_user)
		l->walk[s->walk_end < VP_WALK__COUNT ? s->walk_end : VP_WALK_UNKNOWN]++;
	/* Interpreted frames follow ips[]; entries that do not fit the record are ignored. */
	const struct vp_java_frame *jf = (const struct vp_java_frame *)(s->ips + s->nr_kernel + s->nr_user);
	size_t blen = vp_record_body_len(r), used = sizeof(*s) + 8 * ((size_t)s->nr_kernel + s->nr_user);
	int nj = (int)vp_sample_nr_java(s);
	if (used > blen || (blen - used) / sizeof(*jf) < (size_t)nj)
		nj = used > blen ? 0 : (int)((blen - used) / sizeof(*jf));
	int k = 0;
	for (int i = 0; i < s->nr_user && n < MAX_OUT_FRAMES && !other_domain(s); i++) {
		struct vp_java_frame jcur;

		while (k < nj) {
			memcpy(&jcur, jf + k, sizeof(jcur));
			if (jcur.frame >= i)
				break;
			k++;
		}
		uint64_t ip = s->ips[s->nr_kernel + i], look = i > 0 ? ip - 1 : ip;
		if (k < nj && jcur.frame == i) {
			/* An interpreted frame resolves through the method its Method* named at
			 * this time, and its bytecode index. */
			struct addr_ent key = { .ip = look, .kind = AC_INTERP, .caller = i > 0, .pid = s->pid,
						.map = (const void *)(uintptr_t)interp_method(l, s->pid, r->time, &jcur),
						.jit = (const void *)(uintptr_t)(uint32_t)jcur.bci };
			const struct addr_ent *e = ac_find(&l->ac, &key);
			k++;
			if (e) {
				leaf_first[n++] = l->ac.pool[e->first];
				locs[nl++] = e->loc;
				continue;
			}
			leaf_first[n++] = interpreted_frame(l, s->pid, r->time, &jcur);
			l->jit_n = 1;
			locs[nl++] = frame_loc(l, s->pid, look, leaf_first + n - 1, 1, true, NULL);
			l->jit_n = 0;
			ac_put(&l->ac, &key, leaf_first + n - 1, 1, locs[nl - 1], false);
			continue;
		}
		/* Seen at a time its last answer holds for: that answer. */
		struct addr_ent skey = { .ip = ip, .kind = AC_SPAN, .caller = i > 0, .pid = s->pid };
		const struct addr_ent *e = ac_find(&l->ac, &skey);
		if (e && e->t_lo <= r->time && r->time < e->t_hi && n + e->n <= MAX_OUT_FRAMES) {
			memcpy(leaf_first + n, l->ac.pool + e->first, e->n * sizeof(*leaf_first));
			n += e->n;
			locs[nl++] = e->loc;
			count_flat(l, i, e->flat_wrong);
			continue;
		}
		/* The mapping at this time, and for code outside files the JIT method that
		 * owned the address then, are what the address resolves through. */
		struct addr_ent key = { .ip = ip, .kind = AC_USER, .caller = i > 0, .pid = s->pid };
		uint64_t lo, hi, jlo, jhi;
		struct user_hit uh = { .m = vp_procmaps__find_span(l->pm, s->pid, look, r->time, &lo, &hi) };
		const struct vp_map *vm = uh.m;
		key.map = vm;
		if (!(vm && is_file_backed(vm->filename))) {
			key.jit = jit_owner(l, s->pid, ip, r->time, &uh, &jlo, &jhi);
			lo = jlo > lo ? jlo : lo;
			hi = jhi < hi ? jhi : hi;
		}
		int n0 = n;
		e = ac_find(&l->ac, &key);
		if (e && n + e->n <= MAX_OUT_FRAMES) {
			memcpy(leaf_first + n, l->ac.pool + e->first, e->n * sizeof(*leaf_first));
			n += e->n;
			locs[nl++] = e->loc;
			l->unmapped += e->unmapped;
			skey.flat_wrong = e->flat_wrong;
			count_flat(l, i, e->flat_wrong);
			if (e->unmapped)
				continue;   /* counted as unmapped each time: never by span */
		} else {
			uint64_t unmapped = l->unmapped;
			l->jit_n = 0;
			n += user_frames(l, s->pid, r->time, ip, i > 0, &uh, leaf_first + n, MAX_OUT_FRAMES - n);
			locs[nl++] = frame_loc(l, s->pid, look, leaf_first + n0, n - n0, true, vm);
			l->jit_n = 0;
			/* What a flat map would call this leaf, when JIT code resolved it. */
			key.flat_wrong = skey.flat_wrong = i != 0 || !key.jit || n <= n0 ? 0
				: flat_misnames(l, s->pid, ip, r->time, l->p->frames[leaf_first[n0]].name) ? FLAT_WRONG : FLAT_OK;
			count_flat(l, i, key.flat_wrong);
			if (MAX_OUT_FRAMES - n0 < MAX_JIT_DEPTH)
				continue;   /* cut short by the frame limit: not an answer to keep */
			ac_put(&l->ac, &key, leaf_first + n0, n - n0, locs[nl - 1], l->unmapped != unmapped);
			if (l->unmapped != unmapped)
				continue;   /* counted as unmapped each time: never by span */
		}
		if (lo <= r->time && r->time < hi)
			span_put(&l->ac, &skey, lo, hi, leaf_first + n0, n - n0, locs[nl - 1]);
	}
	if (s->sched_state && s->sched_state < VP_SCHED__COUNT) {
		/* Off-CPU and steal sums end in a frame saying what the thread was doing.
		 * It has no address: for pprof it is a location of its own without a
		 * mapping, above the stack's own locations (a 0x0 address in the kernel's
		 * or a made-up mapping would claim code that is not there). */
		bool by_addr = nl > 0 || n == 0;
		if (n == MAX_OUT_FRAMES) {
			n--;
			by_addr = false;  /* the frames lost their root; the locations did not */
		}
		/* A Java thread's wait is named by its Java frames where they say more than
		 * the kernel (every Java sleep, park and monitor wait is a futex). */
		const char *names[MAX_OUT_FRAMES];
		char detail[64], label[128];
		for (int i = 0; i < n; i++)
			names[i] = leaf_first[i] == UINT32_MAX ? "" : l->p->frames[leaf_first[i]].name;
		int state = vp_sched_java_state(s->sched_state, names, n, detail, sizeof(detail));
		const char *sf = vp_sched_state_frame(state);
		if (detail[0]) {
			snprintf(label, sizeof(label), "%.*s: %s]", (int)strlen(sf) - 1, sf, detail);
			sf = label;
		}
		memmove(leaf_first + 1, leaf_first, (size_t)n * sizeof(leaf_first[0]));
		leaf_first[0] = s->sched_state == VP_SCHED_STEAL
				? add_frame(l, VP_LAYER_HYPERVISOR, "[hypervisor: steal]", "[hypervisor]", "", 0, "", 0)
				: add_frame(l, VP_LAYER_KERNEL, sf, "[kernel.kallsyms]", "", 0, "", 0);
		n++;
		if (by_addr && nl < MAX_OUT_FRAMES && leaf_first[0] != UINT32_MAX) {
			uint32_t no_line = 0;
			memmove(locs + 1, locs, (size_t)nl * sizeof(locs[0]));
			locs[0] = vp_profile__location(l->p, UINT32_MAX, 0, leaf_first, &no_line, 1);
			nl++;
		} else {
			nl = 0;
		}
	}
	if (n == 0)
		leaf_first[n++] = add_frame(l, VP_LAYER_UNKNOWN, "[unknown]", "[no stack]", "", 0, "", 0);
	uint32_t root_first[MAX_OUT_FRAMES];
	for (int i = 0; i < n; i++) {
		if (leaf_first[i] == UINT32_MAX)
			return -ENOMEM;
		root_first[n - 1 - i] = leaf_first[i];
	}
	uint32_t sid;
	/* The count after the thread's last sample: a weight under that sample's stack,
	 * not a sample. */
	uint64_t nsamp = s->flags & VP_SAMPLE_TAIL ? 0 : 1;
	if (s->sched_state) {
		/* A sum of intervals: counted in periods of the time event, like steal, so
		 * that its sample columns and flame graphs compare with cpu-clock's. */
		uint64_t period = l->time_period ? l->time_period : 1000000;
		nsamp = (s->period + period / 2) / period;
		if (!nsamp)
			nsamp = 1;
	}
	uint64_t weight = s->period;
	double scale = sample_scale(l, s->event, r->time);
	if (scale > 1.0)
		weight = (uint64_t)((double)s->period * scale + 0.5);
	int ret = vp_profile__add_stack(l->p, root_first, (uint32_t)n, s->pid, tid, comm, l->evmap[s->event], nsamp,
					weight, &sid);
	if (!ret && moved && l->evmap[s->event] == l->time_event) {
		struct vp_thread_times tt = { .pid = s->pid, .tid = s->tid, .vthread_ns = weight };
		ret = vp_profile__thread_times(l->p, &tt);
	}
	/* The same sample by address, for pprof; a frame without a location (no image)
	 * leaves the sample to the frame view, which pprof falls back to. */
	for (int i = 0; i < nl; i++)
		if (locs[i] == UINT32_MAX)
			nl = 0;
	if (!ret && nl && !(l->o && l->o->no_locations))
		ret = vp_profile__add_locs(l->p, sid, locs, (uint32_t)nl, l->evmap[s->event], nsamp, weight);
	if (!ret && l->o && l->o->times)
		ret = vp_profile__add_time(l->p, sid, l->evmap[s->event], r->time >= l->t0 ? r->time - l->t0 : 0, nsamp);
	return ret;
}

static void on_victim(void *ctx, uint32_t cpu, uint32_t pid, uint32_t tid, uint64_t ns)
{
	struct loader *l = ctx;
	const struct vp_session_opts *o = l->o;
	if (cpu < l->ncpus)
		l->cpu_steal[cpu] += ns;
	/* The per-vCPU totals above are the VM's; only the stacks honour --pid/--tid. */
	if (pid == VP_STEAL_UNKNOWN && (o->npids > 0 || o->ntids > 0))
		return;
	if (pid != VP_STEAL_UNKNOWN && (!in_list(o->pids, o->npids, pid) || !in_list(o->tids, o->ntids, tid)))
		return;
	if (vp_grow((void **)&l->victims, &l->capvictims, l->nvictims + 1, sizeof(*l->victims))) {
		l->steal_err = -ENOMEM;
		return;
	}
	/* One entry per (cpu, thread) for now: merged per thread after sorting. */
	l->victims[l->nvictims++] = (struct victim){ .pid = pid, .tid = tid, .ns = ns };
}

static int cmp_victim(const void *a, const void *b)
{
	const struct victim *x = a, *y = b;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->tid < y->tid ? -1 : x->tid > y->tid;
}

/* Sorts the victims by thread, sums each thread's vCPUs, and finds every thread's most
 * frequent stack in one pass over the profile (a -a recording has many of both). */
static void victims_index(struct loader *l)
{
	const struct vp_profile *p = l->p;
	size_t n = 0;
	if (!l->nvictims)
		return;
	vp_sort(l->victims, l->nvictims, sizeof(*l->victims), cmp_victim);
	for (size_t i = 1; i < l->nvictims; i++) {
		if (!cmp_victim(&l->victims[n], &l->victims[i]))
			l->victims[n].ns += l->victims[i].ns;
		else
			l->victims[++n] = l->victims[i];
	}
	l->nvictims = n + 1;
	int prior = -1;  /* "steal" of a session loaded before into the same profile */
	for (int e = 0; e < p->nevents; e++)
		if (!strcmp(p->events[e].name, "steal"))
			prior = e;
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct vp_stack *s = &p->stacks[i];
		if (!s->nframes || (prior >= 0 && s->weight[prior]))
			continue;
		struct victim key = { .pid = s->pid, .tid = s->tid };
		struct victim *v = bsearch(&key, l->victims, l->nvictims, sizeof(key), cmp_victim);
		if (!v || v->pid == 0 || v->pid == VP_STEAL_UNKNOWN)
			continue;
		uint64_t k = 0;
		if (l->time_event >= 0)
			k = s->samples[l->time_event];
		else
			for (int e = 0; e < p->nevents; e++)
				k += s->samples[e];
		if (k > v->best_n) {
			v->best = i;
			v->best_n = k;
		}
	}
}

/* Adds ns to the profile meta value key (sessions merged into one profile add up). */
static void meta_add(struct vp_profile *p, const char *key, uint64_t ns)
{
	const char *old = vp_profile__meta(p, key);
	char v[32];
	snprintf(v, sizeof(v), "%llu", (unsigned long long)(ns + (old ? strtoull(old, NULL, 10) : 0)));
	vp_profile__set_meta(p, key, v);
}

/* The stack a victim's steal hangs under: its most frequent sampled stack (by samples
 * of the time event, else of all events). Most frequent rather than most recent
 * because victim attribution sums an interval's steal over the whole recording, so no
 * single moment stands for it; copied because adding stacks moves p->stacks. */
struct steal_stack {
	uint32_t *frames;
	uint32_t n;
	char *comm;
	uint32_t *locs;   /* the same stack by address for pprof, leaf first; NULL: by frame */
	uint32_t nlocs;
};

/* Per stack of p, its loc stack with the most samples (as victims count them), or
 * UINT32_MAX: the addresses a victim's steal stack is shown at in pprof. */
static uint32_t *best_loc_stacks(struct loader *l)
{
	const struct vp_profile *p = l->p;
	uint32_t *best = malloc((p->nstacks ? p->nstacks : 1) * sizeof(*best));
	uint64_t *best_n = calloc(p->nstacks ? p->nstacks : 1, sizeof(*best_n));
	if (!best || !best_n) {
		free(best);
		free(best_n);
		return NULL;
	}
	for (size_t i = 0; i < p->nstacks; i++)
		best[i] = UINT32_MAX;
	for (size_t i = 0; i < p->nloc_stacks; i++) {
		const struct vp_loc_stack *ls = &p->loc_stacks[i];
		uint64_t k = 0;
		if (l->time_event >= 0)
			k = ls->samples[l->time_event];
		else
			for (int e = 0; e < p->nevents; e++)
				k += ls->samples[e];
		if (ls->stack < p->nstacks && k > best_n[ls->stack]) {
			best[ls->stack] = (uint32_t)i;
			best_n[ls->stack] = k;
		}
	}
	free(best_n);
	return best;
}

static int victim_stack(struct loader *l, const struct victim *v, const uint32_t *best_ls, struct steal_stack *out)
{
	const struct vp_stack *best = v->best_n ? &l->p->stacks[v->best] : NULL;
	uint32_t extra = 1;
	const char *comm, *kcomm = NULL;
	if (v->pid == 0 && v->tid == 0) {
		comm = "swapper";  /* the idle task's name, as perf shows it */
	} else if (v->pid == VP_STEAL_UNKNOWN) {
		comm = "[unknown]";
	} else if (best) {
		comm = best->comm;
	} else {
		comm = thread_name(l, v->pid, v->tid, l->t_last, &kcomm);
	}
	if (!comm)
		comm = "";
	if (!comm_selected(l, comm, kcomm) || !container_selected(l, v->pid))
		return 0;
	if (!best)
		extra = 2;  /* a root saying why there is no stack, then the leaf */
	out->n = (best ? best->nframes : 0) + extra;
	out->frames = malloc(out->n * sizeof(uint32_t));
	out->comm = strdup(comm);
	if (!out->frames || !out->comm)
		return -ENOMEM;
	if (best) {
		memcpy(out->frames, best->frames, best->nframes * sizeof(uint32_t));
	} else if (v->pid == 0 && v->tid == 0) {
		out->frames[0] = add_frame(l, VP_LAYER_KERNEL, "[idle]", "[kernel.kallsyms]", "", 0, "", 0);
	} else if (v->pid == VP_STEAL_UNKNOWN) {
		out->frames[0] = add_frame(l, VP_LAYER_UNKNOWN, "[thread unknown: no switch records]", "", "", 0, "", 0);
	} else {
		out->frames[0] = add_frame(l, VP_LAYER_UNKNOWN, "[not sampled]", "", "", 0, "", 0);
	}
	out->frames[out->n - 1] = add_frame(l, VP_LAYER_HYPERVISOR, "[hypervisor: steal]", "[hypervisor]", "", 0, "", 0);
	for (uint32_t i = 0; i < out->n; i++)
		if (out->frames[i] == UINT32_MAX)
			return -ENOMEM;
	/* By address too when the stack was sampled by address: the steal leaf is a
	 * location without a mapping (it has no address), over the stack's locations. */
	if (best && best_ls[v->best] != UINT32_MAX) {
		const struct vp_loc_stack *ls = &l->p->loc_stacks[best_ls[v->best]];
		uint32_t no_line = 0;
		out->locs = malloc(((size_t)ls->nlocs + 1) * sizeof(uint32_t));
		if (!out->locs)
			return -ENOMEM;
		memcpy(out->locs + 1, ls->locs, ls->nlocs * sizeof(uint32_t));
		out->locs[0] = vp_profile__location(l->p, UINT32_MAX, 0, &out->frames[out->n - 1], &no_line, 1);
		if (out->locs[0] == UINT32_MAX)
			return -ENOMEM;
		out->nlocs = ls->nlocs + 1;
	}
	return 1;
}

/* Charges the session's steal to its victims: per-vCPU totals into the meta, and one
 * stack per victim thread under the event "steal" (weight ns; samples ns divided by
 * the time event's period, so that its columns read like cpu-clock's). */
static int add_steal(struct loader *l)
{
	struct steal_stack *ss = NULL;
	uint32_t *best_ls = NULL;
	int ret;
	if (!l->saw_steal)
		return 0;
	if ((ret = vp_steal_acct__finish(l->steal, on_victim, l)) < 0)
		return ret;
	if (l->steal_err)
		return l->steal_err;
	uint64_t total = 0;
	for (uint32_t c = 0; c < l->ncpus; c++) {
		if (!l->cpu_seen[c])
			continue;
		char key[32];
		snprintf(key, sizeof(key), "steal.cpu%u", c);
		meta_add(l->p, key, l->cpu_steal[c]);
		total += l->cpu_steal[c];
	}
	meta_add(l->p, "steal.total", total);
	/* Measured per thread at every switch: /proc/stat's totals above stay as the
	 * cross-check, and the proportional split is not needed. */
	if (l->exact_steal || !l->nvictims)
		return 0;
	victims_index(l);
	ss = calloc(l->nvictims, sizeof(*ss));
	best_ls = best_loc_stacks(l);
	if (!ss || !best_ls) {
		ret = -ENOMEM;
		goto cleanup;
	}
	size_t nss = 0;
	for (size_t i = 0; i < l->nvictims; i++) {
		ret = victim_stack(l, &l->victims[i], best_ls, &ss[i]);
		if (ret < 0)
			goto cleanup;
		nss += ret > 0;
	}
	ret = 0;
	if (!nss)
		goto cleanup;
	int ev = vp_profile__add_event(l->p, "steal", "nanoseconds");
	if (ev < 0) {
		ret = ev;
		goto cleanup;
	}
	uint64_t period = l->time_period ? l->time_period : 1000000;
	for (size_t i = 0; i < l->nvictims; i++) {
		const struct victim *v = &l->victims[i];
		if (!ss[i].frames)
			continue;
		/* Rounded to the nearest period, but a thread that lost time never shows 0. */
		uint64_t n = (v->ns + period / 2) / period;
		uint32_t sid;
		ret = vp_profile__add_stack(l->p, ss[i].frames, ss[i].n, v->pid, v->tid, ss[i].comm, ev, n ? n : 1, v->ns,
					    &sid);
		if (!ret && ss[i].locs)
			ret = vp_profile__add_locs(l->p, sid, ss[i].locs, ss[i].nlocs, ev, n ? n : 1, v->ns);
		if (ret < 0)
			goto cleanup;
	}
cleanup:
	for (size_t i = 0; ss && i < l->nvictims; i++) {
		free(ss[i].frames);
		free(ss[i].comm);
		free(ss[i].locs);
	}
	free(ss);
	free(best_ls);
	return ret;
}

static void loader_free(struct loader *l)
{
	for (size_t i = 0; i < l->nexes; i++)
		free(l->exes[i].file);
	free(l->exes);
	free(l->nstids);
	for (struct mapinfo *mi = l->mapinfos, *n; mi; mi = n) {
		n = mi->next;
		free(mi);
	}
	free(l->ac.t);
	free(l->ac.pool);
#if HAVE_JIT_INDEX
	for (size_t i = 0; i < l->njvms; i++) {
		vp_jit_index__close(l->jvms[i].idx);
		vp_vthreads__free(l->jvms[i].vt);
	}
#endif
	free(l->jvms);
	for (int e = 0; e < VP_MAX_SAMPLED_EVENTS; e++)
		free(l->mux[e]);
	vp_steal_acct__free(l->steal);
	free(l->cpu_steal);
	free(l->cpu_seen);
	free(l->victims);
	vp_procmaps__free(l->pm);
	vp_ksyms__free(l->ks);
	vp_hvsyms__close(l->hv);
	vp_elfsym__free(l->elfs);
	free(l->vdso_img);
	for (size_t i = 0; i < l->keep.nblocks; i++)
		free(l->keep.blocks[i].b);
	free(l->keep.blocks);
}

#if HAVE_JIT_INDEX
/* Frames the agent recorded through JVMTI (jmethodID and bci, innermost first, at
 * cm->alloc_frames[first ..]) into fr, root first, at most MAX_OUT_FRAMES - 1 (room for a
 * leaf). JVMTI does not say which frames were compiled: they are drawn in the JIT layer. */
static uint32_t jvmti_frames(struct loader *l, const struct vp_codemap *cm, size_t first, uint32_t nframes, uint32_t *fr)
{
	uint32_t n = 0, nf = nframes < MAX_OUT_FRAMES - 1 ? nframes : MAX_OUT_FRAMES - 1;
	/* Root first: the outermost caller is the last JVMTI frame. */
	for (uint32_t k = nf; k-- > 0;) {
		const struct vp_cm_alloc_frame *f = &cm->alloc_frames[first + k];
		const struct vp_cm_name_info *ni = vp_codemap__name(cm, f->method_id);
		struct vp_frame vf = { .name = ni ? ni->name : "[unknown Java method]", .image = "[jit]",
				       .build_id = "", .file = ni && ni->file ? ni->file : "",
				       .line = ni ? vp_codemap__line(ni, f->bci) : 0, .layer = VP_LAYER_JIT };
		if ((fr[n] = vp_profile__frame(l->p, &vf)) == UINT32_MAX)
			break;
		n++;
	}
	return n;
}

/* The machinery a virtual thread unmounts through (continuation yield, VirtualThread's
 * park and sleep, the JDK's internal park bridge): what it waits for is above it. */
static bool unmount_machinery(const char *f)
{
	static const char *const pre[] = { "jdk.internal.vm.Continuation", "java.lang.VirtualThread.",
					   "jdk.internal.misc.VirtualThreads.", "java.lang.System$", NULL };
	for (int i = 0; pre[i]; i++)
		if (!strncmp(f, pre[i], strlen(pre[i])))
			return true;
	return false;
}

/* Each time a virtual thread of JVM pid waited unmounted (postproc/vthreads.h), as an
 * "off-cpu" stack of its own report thread (only in sessions recorded with --off-cpu,
 * which have that event): the Java stack it waited at under a leaf "[unmounted: STATE]",
 * STATE from its Java frames (vp_sched_java_state; "other wait" when they do not say), or
 * "[unmounted: short wait]" with no stack for one the agent found too short to walk.
 * Unmounted time is no kernel thread's: the tracer never sees it. */
static int add_vthread_waits(struct loader *l, uint32_t pid, const struct vp_codemap *cm)
{
	const struct vp_vt_wait *w;
	size_t nw = vp_vthreads__waits(jvm_vthreads(l, pid), &w);
	int ev = -1;
	for (int e = 0; e < l->p->nevents; e++)
		if (!strcmp(l->p->events[e].name, "off-cpu"))
			ev = e;
	if (ev < 0 || !container_selected(l, pid))
		return 0;
	uint64_t period = l->time_period ? l->time_period : 1000000;
	/* Only what falls between the session's first and last sample, as for the kernel
	 * threads' off-CPU time: an agent attached to a running JVM writes from before the
	 * sampling starts until it notices the recording's end, and on to the JVM's exit when
	 * it does not (a -p run's code map went on 4.5 s past the session's last record). */
	uint64_t lo = l->sample_lo, hi = l->sample_hi;
	for (size_t i = 0; i < nw; i++) {
		uint32_t vtid = vp_vthread_tid(w[i].id), fr[MAX_OUT_FRAMES];
		char label[300], detail[64], leaf[128];
		const char *names[MAX_OUT_FRAMES];
		uint64_t from = w[i].from > lo ? w[i].from : lo, to = w[i].to < hi ? w[i].to : hi;
		vp_vthreads__label(w[i].id, w[i].name, label, sizeof(label));
		if (to <= from || !in_window(l, to) || !in_list(l->o->tids, l->o->ntids, vtid) ||
		    (l->o->comm && strcmp(l->o->comm, label)))
			continue;
		uint32_t n = jvmti_frames(l, cm, w[i].first, w[i].nframes, fr);
		int nn = 0, skip = 0;
		for (uint32_t k = n; k-- > 0;)
			names[nn++] = l->p->frames[fr[k]].name;   /* leaf first */
		while (skip < nn && unmount_machinery(names[skip]))
			skip++;
		int state = vp_sched_java_state(VP_SCHED_BLOCKED_WAIT, names + skip, nn - skip, detail, sizeof(detail));
		const char *sf = vp_sched_state_frame(state), *colon = strchr(sf, ':');
		if (w[i].short_wait)
			snprintf(leaf, sizeof(leaf), "[unmounted: short wait]");
		else
			snprintf(leaf, sizeof(leaf), "[unmounted%.*s%s%s]", colon ? (int)strcspn(colon, "]") : 0,
				 colon ? colon : "", detail[0] ? ": " : "", detail);
		struct vp_frame lf = { .name = leaf, .image = "[vthread]", .build_id = "", .file = "",
				       .layer = VP_LAYER_KERNEL };
		if ((fr[n] = vp_profile__frame(l->p, &lf)) == UINT32_MAX)
			return -ENOMEM;
		uint64_t weight = to - from, nsamp = (weight + period / 2) / period;
		int ret = vp_profile__add(l->p, fr, n + 1, pid, vtid, label, ev, nsamp ? nsamp : 1, weight);
		if (ret)
			return ret;
	}
	return 0;
}
#endif

/* Sampled allocations and contended locks (record -e alloc, -e lock; issue 25): each
 * ALLOC_SAMPLE of each JVM's code map is a stack of event "alloc" (bytes: the bytes it
 * stands for), each LOCK_SAMPLE one of event "lock" (nanoseconds waited), its Java frames
 * from the agent's method names and the allocated class, or the lock's, as the leaf
 * frame, like async-profiler's allocation and lock profiles. JVMTI does not say which
 * frames were compiled: they are drawn in the JIT layer, the class in the JVM layer. */
static int add_allocs(struct loader *l)
{
#if HAVE_JIT_INDEX
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", l->dir, VP_SESSION_JIT_DIR);
	DIR *d = opendir(path);
	struct dirent *de;
	int evs[2] = { -1, -1 }, ret = 0;
	if (!d)
		return 0;
	while (!ret && (de = readdir(d))) {
		char *end;
		unsigned long pid = strtoul(de->d_name, &end, 10);
		/* --pid first: a JVM left out is not worth reading its code map for. */
		if (*end || end == de->d_name || !pid || pid > UINT32_MAX || !in_list(l->o->pids, l->o->npids, (uint32_t)pid))
			continue;
		struct jvm *j = jvm_open(l, (uint32_t)pid);
		const struct vp_codemap *cm = j && j->idx ? vp_jit_index__codemap(j->idx) : NULL;
		if (cm && cm->nvthreads && (ret = add_vthread_waits(l, (uint32_t)pid, cm)))
			break;
		if (!cm || !cm->nallocs)
			continue;
		for (size_t i = 0; i < cm->nallocs && !ret; i++) {
			const struct vp_cm_alloc_info *a = &cm->allocs[i];
			bool lk = a->kind == VP_CM_LOCK_SAMPLE;
			int *ev = &evs[lk];
			if (*ev < 0 && (*ev = vp_profile__add_event(l->p, lk ? "lock" : "alloc", lk ? "nanoseconds" : "bytes")) < 0) {
				ret = *ev;
				break;
			}
			if (!in_list(l->o->pids, l->o->npids, (uint32_t)pid) || !in_list(l->o->tids, l->o->ntids, a->tid) ||
			    !in_window(l, a->time))
				continue;
			const char *kcomm, *comm = thread_name(l, (uint32_t)pid, a->tid, a->time, &kcomm);
			if (!comm_selected(l, comm, kcomm))
				continue;
			uint32_t fr[MAX_OUT_FRAMES];
			uint32_t n = jvmti_frames(l, cm, a->first, a->nframes, fr);
			char cls[512];
			if (lk && !a->klass[0])
				snprintf(cls, sizeof(cls), "[unknown lock]");
			else
				vp_cm_class_name(a->klass, cls, sizeof(cls));
			struct vp_frame cf = { .name = cls, .image = lk ? "[lock]" : "[class]", .build_id = "", .file = "",
					       .layer = VP_LAYER_JVM };
			if ((fr[n] = vp_profile__frame(l->p, &cf)) == UINT32_MAX) {
				ret = -ENOMEM;
				break;
			}
			n++;
			ret = vp_profile__add(l->p, fr, n, (uint32_t)pid, a->tid, comm ? comm : "", *ev, 1, a->weight);
		}
	}
	closedir(d);
	return ret;
#else
	(void)l;
	return 0;
#endif
}

/* Stops keeping samples: the records of the current chunk are dropped, and the second
 * pass reads the file again from that chunk. */
static void keep_stop(struct sample_keep *k)
{
	k->full = true;
	k->resume_off = k->chunk_off;
	for (size_t i = k->mark_block + 1; i < k->nblocks; i++)
		k->blocks[i].used = 0;
	if (k->mark_block < k->nblocks)
		k->blocks[k->mark_block].used = k->mark_used;
	k->bytes = k->mark_bytes;
	k->nrecs = k->mark_nrecs;
}

/* Keeps the first pass's sample record rec (of the reader r's current chunk) for the
 * second pass, while they fit; memory running short only ends the keeping. */
static void keep_sample(struct sample_keep *k, struct cfile_reader *r, const struct vp_record *rec)
{
	if (k->full)
		return;
	if (cfile_reader__chunks(r) != k->chunk) {
		k->chunk = cfile_reader__chunks(r);
		k->chunk_off = cfile_reader__chunk_offset(r);
		k->mark_block = k->nblocks ? k->nblocks - 1 : 0;
		k->mark_used = k->nblocks ? k->blocks[k->nblocks - 1].used : 0;
		k->mark_bytes = k->bytes;
		k->mark_nrecs = k->nrecs;
	}
	if (k->bytes + rec->size > SAMPLE_KEEP_BYTES) {
		keep_stop(k);
		return;
	}
	struct keep_block *b = k->nblocks ? &k->blocks[k->nblocks - 1] : NULL;
	if (!b || b->cap - b->used < rec->size) {
		size_t cap = rec->size > SAMPLE_KEEP_BLOCK ? rec->size : SAMPLE_KEEP_BLOCK;
		uint8_t *m;
		if (vp_grow((void **)&k->blocks, &k->capblocks, k->nblocks + 1, sizeof(*k->blocks)) ||
		    !(m = malloc(cap))) {
			keep_stop(k);
			return;
		}
		b = &k->blocks[k->nblocks++];
		*b = (struct keep_block){ .b = m, .cap = cap };
	}
	memcpy(b->b + b->used, rec, rec->size);
	b->used += rec->size;
	k->bytes += rec->size;
	k->nrecs++;
}

int vp_session__load(const char *dir, struct vp_profile *p, const struct vp_session_opts *o, char *err,
		     size_t errlen)
{
	static const struct vp_session_opts none;
	struct loader l = { .dir = dir, .p = p, .o = o ? o : &none, .time_event = -1 };
	char path[4096];
	int ret = 0;
	struct cfile_reader *r = NULL;
	for (int i = 0; i < MAX_EVENTS; i++)
		l.evmap[i] = -1;
	l.pm = vp_procmaps__new();
	l.ks = vp_ksyms__new();
	l.elfs = vp_elfsym__new(debug_root ? debug_root : getenv("VIPROF_DEBUG_ROOT"));
	l.steal = vp_steal_acct__new();
	if (!l.pm || !l.ks || !l.elfs || !l.steal) {
		ret = -ENOMEM;
		vp_set_err(err, errlen, "out of memory loading %s", dir);
		goto cleanup;
	}
	if (l.o->hv_syms) {
		char why[512];
		l.hv = vp_hvsyms__open(l.o->hv_syms, why, sizeof(why));
		if (!l.hv) {
			ret = -errno;
			vp_set_err(err, errlen, "%s", why);
			goto cleanup;
		}
	}
	snprintf(path, sizeof(path), "%s/%s", dir, VP_SESSION_STREAM);
	r = cfile_reader__open(path, VP_KIND_SESSION_STREAM, err, errlen);
	if (!r) {
		ret = errno ? -errno : -EINVAL;
		struct stat dst;
		if (ret == -ENOENT && stat(dir, &dst) == 0 && S_ISDIR(dst.st_mode))
			vp_set_err(err, errlen, "%s is not a viprof session (it has no " VP_SESSION_STREAM "); record one with "
				   "'viprof record -o %s ...', or give the session's directory", dir, dir);
		goto cleanup;
	}
	if (cfile_reader__header(r)->format_version > VP_SESSION_FORMAT_VERSION) {
		ret = -EPROTO;
		vp_set_err(err, errlen, "%s: session format version %u is newer than this viprof reads (%u); use a newer viprof",
			   path, cfile_reader__header(r)->format_version, VP_SESSION_FORMAT_VERSION);
		goto cleanup;
	}
	l.t0 = cfile_reader__header(r)->created_ns;
	const struct vp_record *rec;
	int k;
	bool first = true;
	uint64_t bad_records = 0;
	while ((k = cfile_reader__next(r, &rec)) == 1) {
		if (first && !l.t0)
			l.t0 = rec->time;
		first = false;
		/* A record that does not make sense is skipped and counted, like a damaged
		 * chunk; only running out of memory ends the load. */
		if ((ret = on_record(&l, rec)) == -ENOMEM) {
			vp_set_err(err, errlen, "%s: cannot load: %s", path, strerror(-ret));
			goto cleanup;
		}
		bad_records += ret < 0;
		ret = 0;
		if (rec->type == VP_REC_SAMPLE && sample_ok(rec))
			keep_sample(&l.keep, r, rec);
	}
	if (k == -ENOMEM) {
		ret = k;
		vp_set_err(err, errlen, "%s", cfile_reader__error(r));
		goto cleanup;
	}
	/* Damage and read errors cost what they cover, not the report: what was read is
	 * shown, with one line saying what was not. */
	if (k < 0)
		vp_profile__warn(p, "%s; the records before it are shown", cfile_reader__error(r));
	char what[512];
	bool damaged = cfile_reader__damage(r, what, sizeof(what));
	if (damaged)
		vp_profile__warn(p, "%s", what);
	if (bad_records)
		vp_profile__warn(p, "%s: skipped %llu malformed record(s)", path, (unsigned long long)bad_records);
	if (damaged)
		events_lost_in_damage(&l);
	if (k < 0) {
		p->incomplete = true;
	} else if (!l.saw_end && damaged && !cfile_reader__truncated(r)) {
		p->incomplete = true;
		vp_profile__warn(p, "session has no end record: it was in a damaged chunk, or the recorder was killed");
	} else if (!l.saw_end && recording_in_progress(path)) {
		p->incomplete = true;
		vp_profile__warn(p, "the recording is still in progress: read up to its last flushed chunk (it flushes "
				 "every second); report again when it has ended for all of it");
	} else if (!l.saw_end || cfile_reader__truncated(r)) {
		p->incomplete = true;
		vp_profile__warn(p, "session ended without its end record (the recorder was killed, or could not write: a "
				 "full disk?); read up to the last complete chunk");
	}
	multiplexing(&l, damaged || k < 0);
	/* The second pass: every mapping, name, symbol and code map is known now, whatever
	 * order the recorder's buffers delivered them in. The kept samples first; then, if
	 * not all were kept, the file again from the first chunk whose samples were not.
	 * It stops after the samples the first pass counted, should the file have grown
	 * since (a recording still running). */
	uint64_t seen = 0;
	for (size_t i = 0; i < l.keep.nblocks; i++) {
		const struct keep_block *b = &l.keep.blocks[i];
		for (size_t at = 0; at < b->used && seen < l.keep.nrecs; seen++) {
			rec = (const struct vp_record *)(b->b + at);
			at += rec->size;
			if ((ret = resolve_sample(&l, rec)) < 0) {
				vp_set_err(err, errlen, "%s: cannot add samples: %s", path, strerror(-ret));
				goto cleanup;
			}
		}
	}
	if (l.keep.full && seen < l.nsample_recs) {
		cfile_reader__close(r);
		r = cfile_reader__open(path, VP_KIND_SESSION_STREAM, err, errlen);
		if (!r) {
			ret = errno ? -errno : -EINVAL;
			goto cleanup;
		}
		cfile_reader__seek_chunk(r, l.keep.resume_off);
	}
	while (l.keep.full && seen < l.nsample_recs && cfile_reader__next(r, &rec) == 1) {
		if (rec->type != VP_REC_SAMPLE || !sample_ok(rec))
			continue;
		seen++;
		if ((ret = resolve_sample(&l, rec)) < 0) {
			vp_set_err(err, errlen, "%s: cannot add samples: %s", path, strerror(-ret));
			goto cleanup;
		}
	}
	if (l.saw_sched_cpu) {
		meta_add(p, "sched_steal.clock_ns", l.sched_cpu[0]);
		meta_add(p, "sched_steal.charged_ns", l.sched_cpu[1]);
		meta_add(p, "sched_steal.idle_ns", l.sched_cpu[2]);
		meta_add(p, "sched_steal.kernel_ns", l.sched_cpu[3]);
	}
	if ((ret = add_steal(&l)) < 0) {
		vp_set_err(err, errlen, "%s: cannot add steal time: %s", path, strerror(-ret));
		goto cleanup;
	}
	if ((ret = add_allocs(&l)) < 0) {
		vp_set_err(err, errlen, "%s: cannot add sampled allocations: %s", path, strerror(-ret));
		goto cleanup;
	}
	p->lost += l.lost > l.end_lost ? l.lost : l.end_lost;
	uint64_t dur = l.end_duration ? l.end_duration : l.t_last > l.t0 ? l.t_last - l.t0 : 0;
	/* The duration is the time the samples cover: a --time window (cut to the session),
	 * and the sum over sessions loaded into one profile, so that shares of it (pprof's
	 * "Total samples = ... (NN%)") stay true. */
	if (l.o->t_from > 0 || l.o->t_to > 0) {
		double to = l.o->t_to > 0 && l.o->t_to * 1e9 < (double)dur ? l.o->t_to * 1e9 : (double)dur;
		double from = l.o->t_from * 1e9;
		dur = to > from ? (uint64_t)(to - from) : 0;
	}
	{
		const char *old = vp_profile__meta(p, "duration_ns");
		char d[32];
		snprintf(d, sizeof(d), "%llu", (unsigned long long)(dur + (old ? strtoull(old, NULL, 10) : 0)));
		vp_profile__set_meta(p, "duration_ns", d);
	}
	/* How the user stacks ended, summed over merged sessions. */
	for (int k = 0; k < VP_WALK__COUNT; k++) {
		char key[48], v[32];
		const char *old;

		snprintf(key, sizeof(key), "stack_end.%s", vp_walk_end_name(k));
		old = vp_profile__meta(p, key);
		if (!l.walk[k] && !old)
			continue;
		snprintf(v, sizeof(v), "%llu", (unsigned long long)(l.walk[k] + (old ? strtoull(old, NULL, 10) : 0)));
		vp_profile__set_meta(p, key, v);
	}
	/* Samples in JIT code, and how many of them a flat map would have misnamed: what
	 * the epochs are for, summed over merged sessions. */
	static const char *const jit_keys[2] = { "jit.leaf_samples", "jit.flat_misnamed" };
	uint64_t jit_v[2] = { l.jit_leaves, l.flat_wrong };
	for (int k = 0; k < 2 && l.jit_leaves; k++) {
		const char *old = vp_profile__meta(p, jit_keys[k]);
		char v[32];
		snprintf(v, sizeof(v), "%llu", (unsigned long long)(jit_v[k] + (old ? strtoull(old, NULL, 10) : 0)));
		vp_profile__set_meta(p, jit_keys[k], v);
	}
#if HAVE_JIT_INDEX
	/* The code-map epochs of the JVMs sampled, for the HTML report's time strip. */
	for (size_t i = 0; l.o->times && i < l.njvms; i++) {
		const struct vp_codemap *cm = l.jvms[i].idx ? vp_jit_index__codemap(l.jvms[i].idx) : NULL;
		for (size_t e = 1; cm && e < cm->nepochs; e++) {
			char gc[64];
			if (cm->epochs[e].t_begin < l.t0)
				continue;
			vp_codemap__gc_text(cm, e, gc, sizeof(gc));
			if ((ret = vp_profile__add_mark(p, cm->epochs[e].t_begin - l.t0, l.jvms[i].pid,
							gc[0] ? gc : vp_cm_reason_name(cm->epochs[e].reason))) < 0) {
				vp_set_err(err, errlen, "%s: out of memory", path);
				goto cleanup;
			}
		}
	}
#endif
	/* Frames outside every recorded mapping: anonymous code no agent described, or a
	 * mapping whose record was lost (the LOST count says whether any were). */
	if (l.unmapped)
		vp_profile__warn(p, "%llu user frames were in no recorded mapping and show as [unknown]%s",
				 (unsigned long long)l.unmapped,
				 p->lost ? " (some records were lost while recording)"
					 : " (code that no map describes: a JIT other than HotSpot's, or a JVM recorded "
					   "with --no-jit or without the agent)");
	ret = 0;
cleanup:
	cfile_reader__close(r);
	loader_free(&l);
	return ret;
}
