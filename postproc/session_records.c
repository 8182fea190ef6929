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

bool loader_in_window(const struct loader *l, uint64_t t)
{
	double rel = t >= l->t0 ? (double)(t - l->t0) / 1e9 : 0;
	return rel >= l->o->t_from && (l->o->t_to <= 0 || rel <= l->o->t_to);
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
		vp_hex(m->build_id, m->build_id_size, x->bid);
}

/* --container: the process's container (VP_REC_CONTAINER, read in the first pass)
 * matches; a process without a record is on the host as far as we know. */
bool loader_container_selected(const struct loader *l, uint32_t pid)
{
	if (!l->o->container || !*l->o->container)
		return true;
	const struct vp_proc_container *c = vp_profile__container(l->p, pid);
	static const struct vp_container_id host;
	return vp_container__matches(l->o->container, c ? c->cgroup : "/", c ? &c->c : &host);
}

int loader_on_record(struct loader *l, const struct vp_record *r)
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
		if (sample_ok(r))
			vp_weights__count(l->w, b, r->time);
		return 0;
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
	case VP_REC_COUNTER:
		return vp_weights__counter(l->w, r->time, b, blen);
	case VP_REC_LOST:
		if (blen >= sizeof(struct vp_lost))
			vp_weights__lost(l->w, ((const struct vp_lost *)b)->count);
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
	case VP_REC_NSTID: {
		const struct vp_nstid *t = b;
		if (blen < sizeof(*t) || vp_grow((void **)&l->nstids, &l->capnstids, l->nnstids + 1, sizeof(*l->nstids)))
			return 0;   /* without it, only that thread's full Java name is missed */
		l->nstids[l->nnstids++] = (struct nstid){ .pid = t->pid, .tid = t->tid, .nstid = t->nstid };
		return 0;
	}
	case VP_REC_STEAL:
		return blen < sizeof(struct vp_steal) ? 0 : vp_steal_ledger__steal(l->steal, r->time, b, loader_in_window(l, r->time));
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
			const char *k, *c = loader_thread_name(l, t->pid, t->tid, t->last, &k);
			if (!c || !loader_comm_selected(l, c, k))
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
		const struct vp_end *e = b;
		l->saw_end = true;
		if (blen >= sizeof(*e)) {
			vp_weights__end_lost(l->w, e->lost);
			l->end_duration = e->duration_ns;
		}
		return 0;
	}
	default:
		return 0;  /* counters are for other readers; unknown types skipped */
	}
}

/* The name of thread tid of pid at t: the full Java thread name when the JVM's agent
 * recorded one (the kernel keeps 15 characters) and the kernel's name at t is its first
 * 15 bytes, as HotSpot names native threads (so a thread renamed since, or a tid the
 * agent's record does not fit, keeps the kernel's name); else the kernel's. *kernel gets
 * the kernel's (NULL when unknown), which --comm also matches. */
const char *loader_thread_name(struct loader *l, uint32_t pid, uint32_t tid, uint64_t t, const char **kernel)
{
	const char *k = vp_procmaps__comm_at(l->pm, tid, t);
	if (!k)
		k = vp_procmaps__comm_at(l->pm, pid, t);
	if (kernel)
		*kernel = k;
#if HAVE_JIT_INDEX
	struct jvm *j = pid ? loader_jvm_open(l, pid) : NULL;
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
bool loader_comm_selected(const struct loader *l, const char *name, const char *kernel)
{
	return !l->o->comm || (name && !strcmp(l->o->comm, name)) || (kernel && !strcmp(l->o->comm, kernel));
}
