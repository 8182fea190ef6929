/* The session loader's first pass: each record of the stream into the loader. Sideband
 * (mappings, thread names, kernel symbols, containers) fills the histories the second
 * pass resolves samples through; samples are only counted; counters give the factors
 * that make up for multiplexing. */
#include <elf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/container.h"
#include "common/util.h"
#include "postproc/session.h"
#include "postproc/session_internal.h"

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

int loader_on_record(struct loader *l, const struct vp_record *r)
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
	case VP_REC_JVM: {
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
	case VP_REC_NSTID:
		if (blen >= sizeof(struct vp_nstid))
			vp_timeline__nstid(l->tl, b);
		return 0;
	case VP_REC_STEAL:
		return blen < sizeof(struct vp_steal) ? 0 : vp_steal_ledger__steal(l->steal, r->time, b, vp_timeline__in_window(l->tl, r->time));
	case VP_REC_THREAD_TIME: {
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
	case VP_REC_SCHED_STATS: {
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
	case VP_REC_SCHED_CPU:
		if (blen >= sizeof(struct vp_sched_cpu))
			vp_steal_ledger__sched_cpu(l->steal, b);
		return 0;
	case VP_REC_SWITCH:
		if (blen >= sizeof(struct vp_switch))
			vp_steal_ledger__switch(l->steal, r->time, b);
		return 0;
	case VP_REC_END: {
		const struct vp_end *e = blen >= sizeof(struct vp_end) ? b : NULL;
		vp_timeline__end(l->tl, e);
		if (e)
			vp_weights__end_lost(l->w, e->lost);
		return 0;
	}
	default:
		return 0;  /* counters are for other readers; unknown types skipped */
	}
}
