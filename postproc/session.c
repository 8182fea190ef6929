/* Loading a session: read the whole stream first (sideband into the mapping history,
 * KSYM into the kernel table; samples counted), then resolve every sample. Two passes
 * because the recorder may write a KSYM or an MMAP after the first sample that needs it
 * (it flushes them before that sample's chunk ends, not before the sample). The first
 * pass keeps the sample records it inflated while they fit SAMPLE_KEEP_BYTES, and the
 * second resolves those from memory: a session of that size is inflated and checked
 * once. A larger one is read again from the first chunk whose samples were not kept,
 * so that memory holds interned frames and stacks, never all of the samples.
 *
 * The loader's parts, each owning its state: the timeline (session_timeline.c: what ran
 * where and when), the weights (session_weights.c: what a sample weighs), the resolver
 * (session_resolver.c: a sample's addresses into frames) and the steal accountant
 * (session_steal.c); session_jvm.c adds the agent's own samples. The first pass hands
 * each record to the part that owns what it says; the second resolves, weighs and adds
 * each sample. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/stat.h>

#include "common/chunkfile.h"
#include "common/container.h"
#include "common/session_format.h"
#include "common/timezero.h"
#include "common/util.h"
#include "postproc/session.h"
#include "postproc/session_jvm.h"
#include "postproc/session_resolver.h"
#include "postproc/session_steal.h"
#include "postproc/session_timeline.h"
#include "postproc/session_weights.h"

/* The sample records the first pass kept for the second, in blocks (records are copied
 * whole, 8-byte aligned as in a chunk). 32 MiB holds about 110k samples of deep Java
 * stacks (280 bytes each), a minute at 99 Hz on 16 vCPUs; keeping every sample would
 * make a report's memory grow with its length (bench/report-scale.sh holds it to 100 MB
 * per million samples), so a longer session is read twice past that. */
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

/* The loader: the parts that own what a session says, by pointer, and the samples the
 * first pass kept for the second. The passes themselves keep nothing else. */
struct loader {
	const char *dir;
	struct vp_profile *p;
	const struct vp_session_opts *o;
	struct vp_timeline *tl;
	struct vp_resolver *rs;
	struct vp_resolved *out;    /* the sample the second pass resolves */
	struct vp_weights *w;
	/* The sample records the first pass kept for the second (at most SAMPLE_KEEP_BYTES),
	 * and then the stream is read again. */
	struct sample_keep keep;
	struct vp_steal_ledger *steal;
};

/* A sample whose stack fits its record; others are skipped rather than read past. */
static inline bool sample_ok(const struct vp_record *r)
{
	size_t blen = vp_record_body_len(r);
	if (blen < sizeof(struct vp_sample))
		return false;
	const struct vp_sample *s = vp_record_body(r);
	return sizeof(*s) + 8 * ((size_t)s->nr_kernel + s->nr_user) <= blen;
}

static char *debug_root;
static size_t keep_bytes = SAMPLE_KEEP_BYTES;

void vp_session__set_debug_root(const char *root)
{
	free(debug_root);
	debug_root = root ? strdup(root) : NULL;
}

size_t vp_session__set_keep_bytes(size_t bytes)
{
	size_t old = keep_bytes;
	keep_bytes = bytes;
	return old;
}

/* Whether a recorder still writes the stream at path: it holds an exclusive lock on
 * the file while it does (recorder/session_writer.c, and the service's client). */
static bool recording_in_progress(const char *path)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	bool busy = fd >= 0 && flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
	if (fd >= 0)
		close(fd);
	return busy;
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
	char name[sizeof(e->name) + 1];
	memcpy(name, e->name, sizeof(e->name));
	name[sizeof(e->name)] = '\0';
	int ret = vp_weights__event(l->w, e, name);
	if (ret <= 0)
		return ret;
	if ((e->flags & VP_EVENT_SCHED) && !strcmp(name, "steal"))
		vp_steal_ledger__exact(l->steal);
	return 0;
}

/* A JVM the recorder met: one without frame pointers cuts the frame-pointer walk short. */
static int on_jvm(struct loader *l, const void *b, size_t blen)
{
	const struct vp_jvm *j = b;
	const char *walk = vp_profile__meta(l->p, "stack_walk");
	/* Only the frame-pointer walk needs them (META records come first). */
	const char *cc = vp_profile__meta(l->p, "callchain");
	if (blen >= sizeof(*j) && (j->flags & VP_JVM_NO_FRAME_POINTERS) && !(walk && !strcmp(walk, "tables")) &&
	    !(cc && !strcmp(cc, "no")))
		vp_profile__warn(l->p, "JVM %u ran without -XX:+PreserveFramePointer: its Java stacks are cut "
				 "short; restart it with that flag for full stacks", j->pid);
	return 0;
}

/* A process's container, into the profile (--container reads it back). */
static int on_container(struct loader *l, const void *b, size_t blen)
{
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

/* A thread's exact times from the switch tracer, for the wall view. */
static int on_thread_time(struct loader *l, const void *b, size_t blen)
{
	const struct vp_thread_time *t = b;
	if (blen < sizeof(*t))
		return 0;
	if (!vp_timeline__selects(l->tl, t->pid, t->tid))
		return 0;
	/* Totals over the whole recording: they do not fit a --time window (the wall
	 * view then uses the sampled on-CPU time alone). */
	if (l->o->t_from > 0 || l->o->t_to > 0)
		return 0;
	if (l->o->comm) {
		const char *k, *c = vp_timeline__thread_name(l->tl, t->pid, t->tid, t->last, &k);
		if (!c || !vp_timeline__comm_selected(l->tl, c, k))
			return 0;
	}
	struct vp_thread_times tt = { .pid = t->pid, .tid = t->tid, .oncpu_ns = t->oncpu_ns,
				      .steal_ns = t->steal_ns, .switches = t->switches };
	return vp_profile__thread_times(l->p, &tt);
}

/* The switch tracer's own counts, summed into the meta, with warnings for what it lost. */
static int on_sched_stats(struct loader *l, const void *b, size_t blen)
{
	const struct vp_sched_stats *st = b;
	if (blen < offsetof(struct vp_sched_stats, missed_in))
		return 0;
	vp_profile__meta_add(l->p, "sched.switches", st->switches);
	vp_profile__meta_add(l->p, "sched.records", st->records);
	vp_profile__meta_add(l->p, "sched.bytes", st->bytes);
	vp_profile__meta_add(l->p, "sched.agg_full", st->agg_full);
	vp_profile__meta_add(l->p, "sched.agg_full_ns", st->agg_full_ns);
	vp_profile__meta_add(l->p, "sched.no_stack", st->no_stack);
	vp_profile__meta_add(l->p, "sched.no_rq", st->no_rq);
	if (blen >= offsetof(struct vp_sched_stats, missed_ns) + sizeof(st->missed_ns)) {
		vp_profile__meta_add(l->p, "sched.missed_in", st->missed_in);
		vp_profile__meta_add(l->p, "sched.missed_ns", st->missed_ns);
	}
	if (blen >= offsetof(struct vp_sched_stats, ustack_full) + sizeof(st->ustack_full)) {
		vp_profile__meta_add(l->p, "sched.walks", st->walks);
		vp_profile__meta_add(l->p, "sched.walk_ns", st->walk_ns);
		vp_profile__meta_add(l->p, "sched.ustack_full", st->ustack_full);
		if (st->ustack_full)
			vp_profile__warn(l->p, "%llu off-CPU intervals lost their user stack: the switch tracer's "
					 "stack hash was full", (unsigned long long)st->ustack_full);
	}
	if (st->agg_full)
		vp_profile__warn(l->p, "%llu off-CPU intervals (%.1f ms) were not recorded: the switch tracer's "
				 "hash was full", (unsigned long long)st->agg_full, (double)st->agg_full_ns / 1e6);
	return 0;
}

/* The first pass, for one record: each goes to the part that owns what it says (the
 * timeline, the weights, the resolver, the steal accountant), or into the profile. */
static int on_record(struct loader *l, const struct vp_record *r)
{
	size_t blen = vp_record_body_len(r);
	const void *b = vp_record_body(r);
	vp_timeline__reached(l->tl, r->time);
	switch (r->type) {
	case VP_REC_META:
		on_meta(l, r);
		return 0;
	case VP_REC_VDSO:
		vp_timeline__vdso(l->tl, b, blen);
		return 0;
	case VP_REC_EVENT:
		return on_event(l, r);
	case VP_REC_SAMPLE:
		if (sample_ok(r))
			vp_weights__count(l->w, b, r->time);
		return 0;
	case VP_REC_MMAP:
		return vp_timeline__mmap(l->tl, r->time, b, blen);
	case VP_REC_COMM:
		return blen < sizeof(struct vp_comm) ? 0 : vp_timeline__comm(l->tl, r->time, b);
	case VP_REC_FORK:
		return blen < sizeof(struct vp_task) ? 0 : vp_timeline__fork(l->tl, r->time, b);
	case VP_REC_EXIT:
		return blen < sizeof(struct vp_task) ? 0 : vp_timeline__exit(l->tl, r->time, b);
	case VP_REC_COUNTER:
		return vp_weights__counter(l->w, r->time, b, blen);
	case VP_REC_LOST:
		if (blen >= sizeof(struct vp_lost))
			vp_weights__lost(l->w, ((const struct vp_lost *)b)->count);
		return 0;
	case VP_REC_KSYM:
		return vp_resolver__ksym(l->rs, b, blen);
	case VP_REC_JVM:
		return on_jvm(l, b, blen);
	case VP_REC_CONTAINER:
		return on_container(l, b, blen);
	case VP_REC_NSTID:
		if (blen >= sizeof(struct vp_nstid))
			vp_timeline__nstid(l->tl, b);
		return 0;
	case VP_REC_STEAL:
		return blen < sizeof(struct vp_steal) ? 0 : vp_steal_ledger__steal(l->steal, r->time, b, vp_timeline__in_window(l->tl, r->time));
	case VP_REC_THREAD_TIME:
		return on_thread_time(l, b, blen);
	case VP_REC_SCHED_STATS:
		return on_sched_stats(l, b, blen);
	case VP_REC_SCHED_CPU:
		if (blen >= sizeof(struct vp_sched_cpu))
			vp_steal_ledger__sched_cpu(l->steal, b);
		return 0;
	case VP_REC_SWITCH:
		if (blen >= sizeof(struct vp_switch))
			vp_steal_ledger__switch(l->steal, r->time, b);
		return 0;
	case VP_REC_END: {
		/* An older session's END ends before window_start: read as 0. */
		struct vp_end ecopy = { 0 };
		const struct vp_end *e = NULL;
		if (blen >= offsetof(struct vp_end, window_start)) {
			memcpy(&ecopy, b, blen < sizeof(ecopy) ? blen : sizeof(ecopy));
			e = &ecopy;
		}
		vp_timeline__end(l->tl, e);
		if (e)
			vp_weights__end_lost(l->w, e->lost);
		return 0;
	}
	default:
		return 0;  /* counters are for other readers; unknown types skipped */
	}
}

static void keep_free(struct sample_keep *k)
{
	for (size_t i = 0; i < k->nblocks; i++)
		free(k->blocks[i].b);
	free(k->blocks);
	k->blocks = NULL;
	k->nblocks = k->capblocks = 0;
}

static void loader_free(struct loader *l)
{
	vp_resolver__free(l->rs);
	free(l->out);
	vp_weights__free(l->w);
	vp_steal_ledger__free(l->steal);
	vp_timeline__free(l->tl);
	keep_free(&l->keep);
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
	if (k->bytes + rec->size > keep_bytes) {
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

/* The second pass, for one sample: the threads, times and events the report selects,
 * resolved into frames (the resolver, reading the timeline), weighed (the weights), and
 * added to the profile. */
static int resolve_sample(struct loader *l, const struct vp_record *r)
{
	const struct vp_sample *s = vp_record_body(r);
	const struct vp_session_opts *o = l->o;
	/* An off-CPU sum is the interval [end - period, end] (one wait, or a thread's waits
	 * of one stack between two drains), clipped at time zero: it counts in a --time
	 * window by the part that overlaps it (vp_span_share), a sample by its instant. */
	uint64_t t0 = vp_timeline__t0(l->tl), end = r->time >= t0 ? r->time - t0 : 0, dur = 0,
		 wa = (uint64_t)(o->t_from * 1e9), wb = o->t_to > 0 ? (uint64_t)(o->t_to * 1e9) : UINT64_MAX;
	uint64_t t_sel = r->time;   /* a moment inside the window, for the selection */
	if (s->sched_state)
		dur = s->period < end ? s->period : end;
	if (dur) {
		if (end <= wa || end - dur >= wb)
			return 0;
		if (end > wb || end < wa)
			t_sel = t0 + (wa > end - dur ? wa : end - dur);
	}
	const char *kcomm, *comm = vp_timeline__select(l->tl, s->pid, s->tid, t_sel, &kcomm);
	if (!comm)
		return 0;
	int ev = vp_weights__profile_event(l->w, s->event);
	if (ev < 0)
		return 0;  /* a sample of an event never described: nothing to count it as */
	/* report --vthreads: a carrier's samples while a virtual thread is mounted on it are
	 * that virtual thread's. */
	uint32_t tid = s->tid;
	char vlabel[300];
	bool moved = o->vthreads && vp_timeline__vthread_at(l->tl, s->pid, s->tid, r->time, &tid, vlabel, sizeof(vlabel));
	if (moved)
		comm = vlabel;
	struct vp_resolved *out = l->out;
	int ret = vp_resolver__sample(l->rs, s, vp_record_body_len(r), r->time, comm, kcomm, out);
	if (ret < 0)
		return ret;
	uint32_t sid;
	uint64_t nsamp, weight = vp_weights__weigh(l->w, s, r->time, &nsamp);
	uint64_t t_at = end - dur;
	if (dur && (wa > end - dur || wb < end)) {
		/* The part of the interval in the window: its share of the time and samples. */
		uint64_t lo = wa > end - dur ? wa : end - dur, hi = wb < end ? wb : end;
		weight = (uint64_t)((double)weight * (double)(hi - lo) / (double)dur + 0.5);
		nsamp = vp_span_share(end - dur, dur, nsamp, lo, hi);
		t_at = lo;
		dur = hi - lo;
	}
	ret = vp_profile__add_stack(l->p, out->frames, out->n, s->pid, tid, out->comm, ev, nsamp, weight, &sid);
	if (!ret && moved && ev == vp_weights__time_event(l->w)) {
		struct vp_thread_times tt = { .pid = s->pid, .tid = s->tid, .vthread_ns = weight };
		ret = vp_profile__thread_times(l->p, &tt);
	}
	/* The same sample by address, for pprof. */
	if (!ret && out->nlocs && !(l->o && l->o->no_locations))
		ret = vp_profile__add_locs(l->p, sid, out->locs, out->nlocs, ev, nsamp, weight);
	if (!ret && l->o && l->o->times)
		ret = vp_profile__add_time_span(l->p, sid, ev, t_at, dur, nsamp);
	if (!ret && l->o && l->o->spans && nsamp)
		ret = vp_profile__add_span(l->p, sid, ev, r->time, weight,
					   s->flags & VP_SAMPLE_ONE_INTERVAL ? VP_SPAN_ONE_INTERVAL : 0);
	return ret;
}

/* The stream of session directory dir (its path in path), checked to be one this viprof
 * reads. NULL with *ret set and err saying why. */
static struct cfile_reader *open_stream(const char *dir, const char *path, int *ret, char *err, size_t errlen)
{
	struct cfile_reader *r = cfile_reader__open(path, VP_KIND_SESSION_STREAM, err, errlen);
	if (!r) {
		*ret = errno ? -errno : -EINVAL;
		struct stat dst;
		if (*ret == -ENOENT && stat(dir, &dst) == 0 && S_ISDIR(dst.st_mode))
			vp_set_err(err, errlen, "%s is not a viprof session (it has no " VP_SESSION_STREAM "); record one with "
				   "'viprof record -o %s ...', or give the session's directory", dir, dir);
		return NULL;
	}
	if (cfile_reader__header(r)->format_version > VP_SESSION_FORMAT_VERSION) {
		*ret = -EPROTO;
		vp_set_err(err, errlen, "%s: session format version %u is newer than this viprof reads (%u); use a newer viprof",
			   path, cfile_reader__header(r)->format_version, VP_SESSION_FORMAT_VERSION);
		cfile_reader__close(r);
		return NULL;
	}
	return r;
}

/* The first pass: every record to on_record, the samples kept while they fit. *end
 * gets the reader's last answer (0 at the end of the stream; below 0 a read error or
 * damage, which cost what they cover), *bad the records that made no sense. 0, or
 * -ENOMEM with err set: only running out of memory ends the load. */
static int first_pass(struct loader *l, struct cfile_reader *r, const char *path, int *end, uint64_t *bad, char *err,
		      size_t errlen)
{
	const struct vp_record *rec;
	bool first = true;
	int k, ret;
	/* One time zero for every view (common/timezero.h): when sampling started, stated
	 * in the profile's meta; a session older than that record counts from its creation. */
	bool sampling_zero;
	uint64_t t0 = vp_session_time_zero(path, &sampling_zero);
	if (!t0)
		t0 = cfile_reader__header(r)->created_ns;
	vp_profile__set_time_zero(l->p, t0, sampling_zero);
	vp_timeline__start(l->tl, t0);
	while ((k = cfile_reader__next(r, &rec)) == 1) {
		if (first && !vp_timeline__t0(l->tl))
			vp_timeline__start(l->tl, rec->time);
		first = false;
		/* A record that does not make sense is skipped and counted, like a damaged
		 * chunk. */
		if ((ret = on_record(l, rec)) == -ENOMEM) {
			vp_set_err(err, errlen, "%s: cannot load: %s", path, strerror(-ret));
			return ret;
		}
		*bad += ret < 0;
		if (rec->type == VP_REC_SAMPLE && sample_ok(rec))
			keep_sample(&l->keep, r, rec);
	}
	*end = k;
	if (k == -ENOMEM) {
		vp_set_err(err, errlen, "%s", cfile_reader__error(r));
		return k;
	}
	return 0;
}

/* What the first pass could not read, said once: damage, malformed records, a stream
 * that ended without its END record. Returns whether a chunk was damaged. */
static bool stream_warnings(struct loader *l, struct cfile_reader *r, const char *path, int end, uint64_t bad)
{
	struct vp_profile *p = l->p;
	/* Damage and read errors cost what they cover, not the report: what was read is
	 * shown, with one line saying what was not. */
	if (end < 0)
		vp_profile__warn(p, "%s; the records before it are shown", cfile_reader__error(r));
	char what[512];
	bool damaged = cfile_reader__damage(r, what, sizeof(what));
	if (damaged)
		vp_profile__warn(p, "%s", what);
	if (bad)
		vp_profile__warn(p, "%s: skipped %llu malformed record(s)", path, (unsigned long long)bad);
	if (damaged)
		vp_weights__damaged_events(l->w);
	if (end < 0) {
		p->incomplete = true;
	} else if (!vp_timeline__ended(l->tl) && damaged && !cfile_reader__truncated(r)) {
		p->incomplete = true;
		vp_profile__warn(p, "session has no end record: it was in a damaged chunk, or the recorder was killed");
	} else if (!vp_timeline__ended(l->tl) && recording_in_progress(path)) {
		p->incomplete = true;
		vp_profile__warn(p, "the recording is still in progress: read up to its last flushed chunk (it flushes "
				 "every second); report again when it has ended for all of it");
	} else if (!vp_timeline__ended(l->tl) || cfile_reader__truncated(r)) {
		p->incomplete = true;
		vp_profile__warn(p, "session ended without its end record (the recorder was killed, or could not write: a "
				 "full disk?); read up to the last complete chunk");
	}
	return damaged;
}

/* The second pass: every mapping, name, symbol and code map is known now, whatever
 * order the recorder's buffers delivered them in. The kept samples first; then, if
 * not all were kept, the file again (*r reopened) from the first chunk whose samples
 * were not. It stops after the samples the first pass counted, should the file have
 * grown since (a recording still running). 0, or -errno with err set. */
static int second_pass(struct loader *l, struct cfile_reader **r, const char *path, char *err, size_t errlen)
{
	const struct vp_record *rec;
	uint64_t seen = 0;
	int ret;
	for (size_t i = 0; i < l->keep.nblocks; i++) {
		const struct keep_block *b = &l->keep.blocks[i];
		for (size_t at = 0; at < b->used && seen < l->keep.nrecs; seen++) {
			rec = (const struct vp_record *)(b->b + at);
			at += rec->size;
			if ((ret = resolve_sample(l, rec)) < 0) {
				vp_set_err(err, errlen, "%s: cannot add samples: %s", path, strerror(-ret));
				return ret;
			}
		}
	}
	uint64_t nrecs = vp_weights__sample_records(l->w);
	if (l->keep.full && seen < nrecs) {
		cfile_reader__close(*r);
		*r = cfile_reader__open(path, VP_KIND_SESSION_STREAM, err, errlen);
		if (!*r)
			return errno ? -errno : -EINVAL;
		cfile_reader__seek_chunk(*r, l->keep.resume_off);
	}
	keep_free(&l->keep);   /* resolved: not needed by what follows */
	while (l->keep.full && seen < nrecs && cfile_reader__next(*r, &rec) == 1) {
		if (rec->type != VP_REC_SAMPLE || !sample_ok(rec))
			continue;
		seen++;
		if ((ret = resolve_sample(l, rec)) < 0) {
			vp_set_err(err, errlen, "%s: cannot add samples: %s", path, strerror(-ret));
			return ret;
		}
	}
	return 0;
}

/* After the samples: steal charged to its victims, the agents' own samples, and what the
 * session says about itself (lost records, its duration, how stacks ended, the code-map
 * epochs). 0, or -errno with err set. */
static int after_samples(struct loader *l, const char *path, char *err, size_t errlen)
{
	struct vp_profile *p = l->p;
	int ret;
	vp_steal_ledger__clock(l->steal, p);
	if ((ret = vp_steal_ledger__add(l->steal, l->tl, l->w, p)) < 0) {
		vp_set_err(err, errlen, "%s: cannot add steal time: %s", path, strerror(-ret));
		return ret;
	}
	if ((ret = vp_session_jvm__add(l->dir, l->tl, l->w, p)) < 0) {
		vp_set_err(err, errlen, "%s: cannot add sampled allocations: %s", path, strerror(-ret));
		return ret;
	}
	p->lost += vp_weights__lost_total(l->w);
	uint64_t dur = vp_timeline__duration(l->tl);
	/* The duration is the time the samples cover: a --time window (cut to the session),
	 * and the sum over sessions loaded into one profile, so that shares of it (pprof's
	 * "Total samples = ... (NN%)") stay true. */
	if (l->o->t_from > 0 || l->o->t_to > 0) {
		double to = l->o->t_to > 0 && l->o->t_to * 1e9 < (double)dur ? l->o->t_to * 1e9 : (double)dur;
		double from = l->o->t_from * 1e9;
		dur = to > from ? (uint64_t)(to - from) : 0;
	}
	vp_profile__meta_add(p, "duration_ns", dur);
	/* What resolving found: how stacks ended, JIT leaves, addresses in no mapping. */
	vp_resolver__finish(l->rs);
	/* The code-map epochs of the JVMs sampled, for the HTML report's time strip. */
	if (l->o->times && (ret = vp_timeline__add_marks(l->tl)) < 0) {
		vp_set_err(err, errlen, "%s: out of memory", path);
		return ret;
	}
#if HAVE_JIT_INDEX
	/* The perf backend (an unprivileged user's own recording) walks frame pointers only:
	 * it reads no interpreter frame's Method*, so interpreted Java methods (a thread's
	 * run() and most of a start-up) stay unnamed, and nothing else would say why. */
	const char *be = vp_profile__meta(p, "backend");
	if (vp_timeline__any_jit(l->tl) && be && !strcmp(be, "perf"))
		vp_profile__warn(p, "interpreted Java frames are unnamed: the perf backend (what an unprivileged user "
				 "records with alone) reads no Java frames; record through the service ('viprof serve', "
				 "run by root: 'viprof record' then goes through it) or as root to name them");
#endif
	return 0;
}

int vp_session__load(const char *dir, struct vp_profile *p, const struct vp_session_opts *o, char *err,
		     size_t errlen)
{
	static const struct vp_session_opts none;
	struct loader l = { .dir = dir, .p = p, .o = o ? o : &none };
	char path[4096];
	int ret = 0, end;
	uint64_t bad = 0;
	struct cfile_reader *r = NULL;
	l.w = vp_weights__new(p);
	l.tl = vp_timeline__new(dir, p, l.o);
	l.rs = l.tl ? vp_resolver__new(l.tl, p, l.o, debug_root ? debug_root : getenv("VIPROF_DEBUG_ROOT")) : NULL;
	l.out = malloc(sizeof(*l.out));
	l.steal = vp_steal_ledger__new();
	if (!l.w || !l.tl || !l.rs || !l.out || !l.steal) {
		ret = -ENOMEM;
		vp_set_err(err, errlen, "out of memory loading %s", dir);
		goto cleanup;
	}
	if (l.o->hv_syms && (ret = vp_resolver__hv_syms(l.rs, l.o->hv_syms, err, errlen)) < 0)
		goto cleanup;
	snprintf(path, sizeof(path), "%s/%s", dir, VP_SESSION_STREAM);
	if (!(r = open_stream(dir, path, &ret, err, errlen)) ||
	    (ret = first_pass(&l, r, path, &end, &bad, err, errlen)) < 0)
		goto cleanup;
	bool damaged = stream_warnings(&l, r, path, end, bad);
	vp_weights__multiplexing(l.w, damaged || end < 0);
	if ((ret = second_pass(&l, &r, path, err, errlen)) < 0 || (ret = after_samples(&l, path, err, errlen)) < 0)
		goto cleanup;
	ret = 0;
cleanup:
	cfile_reader__close(r);
	loader_free(&l);
	return ret;
}
