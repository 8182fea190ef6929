/* The session loader's first pass: each record of the stream into the loader. Sideband
 * (mappings, thread names, kernel symbols, containers) fills the histories the second
 * pass resolves samples through; samples are only counted; counters give the factors
 * that make up for multiplexing. */
#include <elf.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/container.h"
#include "common/count_scale.h"
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
	if (e->index >= MAX_EVENTS)
		return 0;
	char name[sizeof(e->name) + 1];
	memcpy(name, e->name, sizeof(e->name));
	name[sizeof(e->name)] = '\0';
	int idx = vp_profile__add_event(l->p, name, e->flags & VP_EVENT_TIME_UNITS ? "nanoseconds" : "events");
	if (idx < 0)
		return idx;
	l->evmap[e->index] = idx;
	l->ev_software[e->index] = e->perf_type == PERF_TYPE_SOFTWARE || e->perf_type == PERF_TYPE_TRACEPOINT;
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

bool loader_in_window(const struct loader *l, uint64_t t)
{
	double rel = t >= l->t0 ? (double)(t - l->t0) / 1e9 : 0;
	return rel >= l->o->t_from && (l->o->t_to <= 0 || rel <= l->o->t_to);
}

static int on_steal(struct loader *l, const struct vp_record *r)
{
	if (vp_record_body_len(r) < sizeof(struct vp_steal))
		return 0;
	const struct vp_steal *st = vp_record_body(r);
	/* Cumulative since boot: any value above 0, inside the window or not, says a steal
	 * clock ran (common/steal_clock.h). */
	if (st->steal_ns)
		l->steal_clock_moved = true;
	l->saw_steal_snapshot = true;
	/* Only the STEAL records inside --from/--to bracket the steal that is counted;
	 * every SWITCH is fed, because the one before the window says who was running. */
	if (!loader_in_window(l, r->time) || st->cpu >= 65536)
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
			/* Software events are never taken off a counter: a running time behind the
			 * enabled time there is the drift of per-CPU counters read one after
			 * another, not multiplexing (page-fault weights came out +0.35%). */
			if (!l->ev_software[e] && vp_counts__multiplexed(de, dr))
				m->scale = (double)de / (double)dr;
		}
		pe = m->enabled;
		pr = m->running;
	}
}

/* The factor for a sample of session event e at time t: that of the first totals read
 * at or after t; after the last one (none, in a whole session), the last's. */
double loader_sample_scale(const struct loader *l, uint32_t e, uint64_t t)
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

void loader_multiplexing(struct loader *l, bool damaged)
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
		else if (sum && c->value > sum + sum / 10 && c->time_running >= c->time_enabled)
			vp_profile__warn(l->p, "%llu of the %llu '%s' events counted (%.1f%%) are in no sample's weight: more "
					 "than the few percent a sampled event leaves after each thread's last sample (the "
					 "threads' final counts were not read); sample more often (-F, -c) for more of them",
					 (unsigned long long)(c->value - sum), (unsigned long long)c->value, name,
					 100.0 * (double)(c->value - sum) / (double)c->value);
		else if (sum && c->value > sum + sum / 50 && c->time_running >= c->time_enabled) {
			/* A few percent is what sampling leaves out (issue 33: 2.0-7.1% on every Java
			 * report, called a problem): a note in the header, not a warning. */
			snprintf(key, sizeof(key), "unsampled.%s", name);
			snprintf(val, sizeof(val), "%llu", (unsigned long long)(c->value - sum));
			vp_profile__set_meta(l->p, key, val);
		}
		if (c->time_running == 0 || !vp_counts__multiplexed(c->time_enabled, c->time_running) || l->ev_software[e])
			continue;
		l->scale[e] = (double)c->time_enabled / (double)c->time_running;
		snprintf(key, sizeof(key), "multiplexed.%s", name);
		snprintf(val, sizeof(val), "%.4f", (double)c->time_running / (double)c->time_enabled);
		vp_profile__set_meta(l->p, key, val);
		vp_profile__warn(l->p, "event '%s' was multiplexed: on a counter %.1f%% of the time it was enabled; "
				 "its weights are scaled by %.2f (record fewer hardware events at once for exact counts)",
				 name, 100.0 * (double)c->time_running / (double)c->time_enabled, l->scale[e]);
	}
}
