/* Steal time: STEAL and SWITCH records go to victim attribution (postproc/steal.h);
 * after the samples, each victim thread's steal becomes one stack under the event
 * "steal" (unit nanoseconds): the thread's most frequent sampled stack plus a leaf
 * "[hypervisor: steal]" (idle: "[idle]", a thread never sampled: "[not sampled]", a
 * vCPU without switch records: "[thread unknown: no switch records]"). Its weight is
 * the ns, its samples the ns in periods of the first time event (1 ms without one).
 * --from/--to select the STEAL records that bracket the steal counted; --pid/--tid/
 * --comm select the victims. The meta keys steal.cpuN and steal.total hold the VM's
 * per-vCPU steal in the time window whatever the thread filters (summed over the
 * sessions merged into one profile). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/steal_clock.h"
#include "common/util.h"
#include "postproc/session_steal.h"
#include "postproc/steal.h"

/* One thread that was on a vCPU while the hypervisor stole it, summed over vCPUs. */
struct victim {
	uint32_t pid, tid;
	uint64_t ns;
	size_t best;                 /* index of its most frequent stack in p->stacks */
	uint64_t best_n;             /* that stack's samples; 0 = no sampled stack */
};

struct vp_steal_ledger {
	struct vp_steal_acct *acct;  /* STEAL + SWITCH records, charged to victims at the end */
	bool saw_steal;
	bool saw_steal_snapshot;     /* a STEAL record of any time (saw_steal: inside the window) */
	bool steal_clock_moved;      /* some STEAL record's cumulative steal was above 0 */
	bool steal_clock_none;       /* decided at the end: no steal clock ran (vp_steal_clock__ran) */
	uint64_t *cpu_steal;         /* per vCPU: steal charged in the time window */
	bool *cpu_seen;              /* per vCPU: a STEAL record was fed for it */
	uint32_t ncpus;
	size_t cap_steal, cap_seen;  /* allocated lengths of the two above */
	struct victim *victims; size_t nvictims, capvictims;
	int steal_err;
	bool exact_steal;            /* the switch tracer measured steal per thread ("steal" samples) */
	uint64_t sched_cpu[4];       /* SCHED_CPU sums: clock, charged, idle, kernel-accounted */
	bool saw_sched_cpu;
};

struct vp_steal_ledger *vp_steal_ledger__new(void)
{
	struct vp_steal_ledger *sl = calloc(1, sizeof(*sl));
	if (sl && !(sl->acct = vp_steal_acct__new())) {
		free(sl);
		return NULL;
	}
	return sl;
}

void vp_steal_ledger__free(struct vp_steal_ledger *sl)
{
	if (!sl)
		return;
	vp_steal_acct__free(sl->acct);
	free(sl->cpu_steal);
	free(sl->cpu_seen);
	free(sl->victims);
	free(sl);
}

void vp_steal_ledger__exact(struct vp_steal_ledger *sl)
{
	sl->exact_steal = true;
}

int vp_steal_ledger__steal(struct vp_steal_ledger *sl, uint64_t t, const struct vp_steal *st, bool in_window)
{
	/* Cumulative since boot: any value above 0, inside the window or not, says a steal
	 * clock ran (common/steal_clock.h). */
	if (st->steal_ns)
		sl->steal_clock_moved = true;
	sl->saw_steal_snapshot = true;
	/* Only the STEAL records inside --from/--to bracket the steal that is counted;
	 * every SWITCH is fed, because the one before the window says who was running. */
	if (!in_window || st->cpu >= 65536)
		return 0;
	if (st->cpu >= sl->ncpus) {
		uint32_t n = st->cpu + 1;
		if (vp_grow((void **)&sl->cpu_steal, &sl->cap_steal, n, sizeof(*sl->cpu_steal)) ||
		    vp_grow((void **)&sl->cpu_seen, &sl->cap_seen, n, sizeof(*sl->cpu_seen)))
			return -ENOMEM;
		for (uint32_t c = sl->ncpus; c < n; c++) {
			sl->cpu_steal[c] = 0;
			sl->cpu_seen[c] = false;
		}
		sl->ncpus = n;
	}
	sl->cpu_seen[st->cpu] = true;
	sl->saw_steal = true;
	vp_steal_acct__steal(sl->acct, t, st);
	return 0;
}

void vp_steal_ledger__switch(struct vp_steal_ledger *sl, uint64_t t, const struct vp_switch *sw)
{
	vp_steal_acct__switch(sl->acct, t, sw);
}

void vp_steal_ledger__sched_cpu(struct vp_steal_ledger *sl, const struct vp_sched_cpu *c)
{
	sl->saw_sched_cpu = true;
	sl->sched_cpu[0] += c->steal_clock_ns;
	sl->sched_cpu[1] += c->charged_ns;
	sl->sched_cpu[2] += c->idle_ns;
	sl->sched_cpu[3] += c->kernel_steal_ns;
}

void vp_steal_ledger__clock(struct vp_steal_ledger *sl, struct vp_profile *p)
{
	/* Whether a steal clock ran during this recording, from its own snapshots and its
	 * switch tracer: where none did, steal is unknown, so no view gets a 0 to print. */
	if (sl->saw_steal_snapshot || sl->saw_sched_cpu) {
		bool ran = vp_steal_clock__ran(sl->steal_clock_moved, sl->sched_cpu[0] + sl->sched_cpu[3]);
		const char *prev = vp_profile__meta(p, "steal.clock");
		sl->steal_clock_none = !ran;
		if (!prev || strcmp(prev, "runs"))
			vp_profile__set_meta(p, "steal.clock", ran ? "runs" : "none");
		/* The JSON report carries the meta as it is: the words, not a 0. */
		if (!ran && (!prev || strcmp(prev, "runs")))
			vp_profile__set_meta(p, "steal.note", VP_STEAL_NOT_MEASURED);
		else if (ran && prev && !strcmp(prev, "none"))   /* merged with a session without one */
			vp_profile__set_meta(p, "steal.note", "steal: measured in some of the merged sessions only (the others "
					     "had no steal clock)");
	}
	if (sl->saw_sched_cpu && !sl->steal_clock_none) {
		vp_profile__meta_add(p, "sched_steal.clock_ns", sl->sched_cpu[0]);
		vp_profile__meta_add(p, "sched_steal.charged_ns", sl->sched_cpu[1]);
		vp_profile__meta_add(p, "sched_steal.idle_ns", sl->sched_cpu[2]);
		vp_profile__meta_add(p, "sched_steal.kernel_ns", sl->sched_cpu[3]);
	}
}

/* What the victims are charged with: the ledger, the timeline (the report's filters,
 * thread names), the weights (the time event) and the profile. */
struct victims_ctx {
	struct vp_steal_ledger *sl;
	struct vp_timeline *tl;
	const struct vp_weights *w;
	struct vp_profile *p;
};

static void on_victim(void *ctx, uint32_t cpu, uint32_t pid, uint32_t tid, uint64_t ns)
{
	const struct victims_ctx *x = ctx;
	struct vp_steal_ledger *sl = x->sl;
	struct vp_timeline *tl = x->tl;
	if (cpu < sl->ncpus)
		sl->cpu_steal[cpu] += ns;
	/* The per-vCPU totals above are the VM's; only the stacks honour --pid/--tid. */
	if (pid == VP_STEAL_UNKNOWN && vp_timeline__filters_threads(tl))
		return;
	if (pid != VP_STEAL_UNKNOWN && !vp_timeline__selects(tl, pid, tid))
		return;
	if (vp_grow((void **)&sl->victims, &sl->capvictims, sl->nvictims + 1, sizeof(*sl->victims))) {
		sl->steal_err = -ENOMEM;
		return;
	}
	/* One entry per (cpu, thread) for now: merged per thread after sorting. */
	sl->victims[sl->nvictims++] = (struct victim){ .pid = pid, .tid = tid, .ns = ns };
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
static void victims_index(struct vp_steal_ledger *sl, const struct victims_ctx *x)
{
	const struct vp_profile *p = x->p;
	size_t n = 0;
	if (!sl->nvictims)
		return;
	vp_sort(sl->victims, sl->nvictims, sizeof(*sl->victims), cmp_victim);
	for (size_t i = 1; i < sl->nvictims; i++) {
		if (!cmp_victim(&sl->victims[n], &sl->victims[i]))
			sl->victims[n].ns += sl->victims[i].ns;
		else
			sl->victims[++n] = sl->victims[i];
	}
	sl->nvictims = n + 1;
	int prior = -1;  /* "steal" of a session loaded before into the same profile */
	for (int e = 0; e < p->nevents; e++)
		if (!strcmp(p->events[e].name, "steal"))
			prior = e;
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct vp_stack *s = &p->stacks[i];
		if (!s->nframes || (prior >= 0 && s->weight[prior]))
			continue;
		struct victim key = { .pid = s->pid, .tid = s->tid };
		struct victim *v = bsearch(&key, sl->victims, sl->nvictims, sizeof(key), cmp_victim);
		if (!v || v->pid == 0 || v->pid == VP_STEAL_UNKNOWN)
			continue;
		uint64_t k = 0;
		if (vp_weights__time_event(x->w) >= 0)
			k = s->samples[vp_weights__time_event(x->w)];
		else
			for (int e = 0; e < p->nevents; e++)
				k += s->samples[e];
		if (k > v->best_n) {
			v->best = i;
			v->best_n = k;
		}
	}
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
static uint32_t *best_loc_stacks(const struct victims_ctx *x)
{
	const struct vp_profile *p = x->p;
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
		if (vp_weights__time_event(x->w) >= 0)
			k = ls->samples[vp_weights__time_event(x->w)];
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

static int victim_stack(const struct victims_ctx *x, const struct victim *v, const uint32_t *best_ls, struct steal_stack *out)
{
	const struct vp_stack *best = v->best_n ? &x->p->stacks[v->best] : NULL;
	uint32_t extra = 1;
	const char *comm, *kcomm = NULL;
	if (v->pid == 0 && v->tid == 0) {
		comm = "swapper";  /* the idle task's name, as perf shows it */
	} else if (v->pid == VP_STEAL_UNKNOWN) {
		comm = "[unknown]";
	} else if (best) {
		comm = best->comm;
	} else {
		comm = vp_timeline__thread_name(x->tl, v->pid, v->tid, vp_timeline__last(x->tl), &kcomm);
	}
	if (!comm)
		comm = "";
	if (!vp_timeline__comm_selected(x->tl, comm, kcomm) || !vp_timeline__container_selected(x->tl, v->pid))
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
		out->frames[0] = vp_profile__add_frame(x->p, VP_LAYER_KERNEL, "[idle]", "[kernel.kallsyms]", "", 0, "", 0);
	} else if (v->pid == VP_STEAL_UNKNOWN) {
		out->frames[0] = vp_profile__add_frame(x->p, VP_LAYER_UNKNOWN, "[thread unknown: no switch records]", "", "", 0, "", 0);
	} else {
		out->frames[0] = vp_profile__add_frame(x->p, VP_LAYER_UNKNOWN, "[not sampled]", "", "", 0, "", 0);
	}
	out->frames[out->n - 1] = vp_profile__add_frame(x->p, VP_LAYER_HYPERVISOR, "[hypervisor: steal]", "[hypervisor]", "", 0, "", 0);
	for (uint32_t i = 0; i < out->n; i++)
		if (out->frames[i] == UINT32_MAX)
			return -ENOMEM;
	/* By address too when the stack was sampled by address: the steal leaf is a
	 * location without a mapping (it has no address), over the stack's locations. */
	if (best && best_ls[v->best] != UINT32_MAX) {
		const struct vp_loc_stack *ls = &x->p->loc_stacks[best_ls[v->best]];
		uint32_t no_line = 0;
		out->locs = malloc(((size_t)ls->nlocs + 1) * sizeof(uint32_t));
		if (!out->locs)
			return -ENOMEM;
		memcpy(out->locs + 1, ls->locs, ls->nlocs * sizeof(uint32_t));
		out->locs[0] = vp_profile__location(x->p, UINT32_MAX, 0, &out->frames[out->n - 1], &no_line, 1);
		if (out->locs[0] == UINT32_MAX)
			return -ENOMEM;
		out->nlocs = ls->nlocs + 1;
	}
	return 1;
}

/* Charges the session's steal to its victims: per-vCPU totals into the meta, and one
 * stack per victim thread under the event "steal" (weight ns; samples ns divided by
 * the time event's period, so that its columns read like cpu-clock's). */
int vp_steal_ledger__add(struct vp_steal_ledger *sl, struct vp_timeline *tl, const struct vp_weights *w,
			 struct vp_profile *p)
{
	struct victims_ctx x = { sl, tl, w, p };
	struct steal_stack *ss = NULL;
	uint32_t *best_ls = NULL;
	int ret;
	if (!sl->saw_steal)
		return 0;
	if ((ret = vp_steal_acct__finish(sl->acct, on_victim, &x)) < 0)
		return ret;
	if (sl->steal_err)
		return sl->steal_err;
	uint64_t total = 0;
	if (sl->steal_clock_none)
		return 0;   /* nothing was measured: no per-vCPU 0s for a view to print */
	for (uint32_t c = 0; c < sl->ncpus; c++) {
		if (!sl->cpu_seen[c])
			continue;
		char key[32];
		snprintf(key, sizeof(key), "steal.cpu%u", c);
		vp_profile__meta_add(p, key, sl->cpu_steal[c]);
		total += sl->cpu_steal[c];
	}
	vp_profile__meta_add(p, "steal.total", total);
	/* Measured per thread at every switch: /proc/stat's totals above stay as the
	 * cross-check, and the proportional split is not needed. */
	if (sl->exact_steal || !sl->nvictims)
		return 0;
	victims_index(sl, &x);
	ss = calloc(sl->nvictims, sizeof(*ss));
	best_ls = best_loc_stacks(&x);
	if (!ss || !best_ls) {
		ret = -ENOMEM;
		goto cleanup;
	}
	size_t nss = 0;
	for (size_t i = 0; i < sl->nvictims; i++) {
		ret = victim_stack(&x, &sl->victims[i], best_ls, &ss[i]);
		if (ret < 0)
			goto cleanup;
		nss += ret > 0;
	}
	ret = 0;
	if (!nss)
		goto cleanup;
	int ev = vp_profile__add_event(p, "steal", "nanoseconds");
	if (ev < 0) {
		ret = ev;
		goto cleanup;
	}
	uint64_t period = vp_weights__sample_ns(w);
	for (size_t i = 0; i < sl->nvictims; i++) {
		const struct victim *v = &sl->victims[i];
		if (!ss[i].frames)
			continue;
		/* Rounded to the nearest period, but a thread that lost time never shows 0. */
		uint64_t n = (v->ns + period / 2) / period;
		uint32_t sid;
		ret = vp_profile__add_stack(p, ss[i].frames, ss[i].n, v->pid, v->tid, ss[i].comm, ev, n ? n : 1, v->ns,
					    &sid);
		if (!ret && ss[i].locs)
			ret = vp_profile__add_locs(p, sid, ss[i].locs, ss[i].nlocs, ev, n ? n : 1, v->ns);
		if (ret < 0)
			goto cleanup;
	}
cleanup:
	for (size_t i = 0; ss && i < sl->nvictims; i++) {
		free(ss[i].frames);
		free(ss[i].comm);
		free(ss[i].locs);
	}
	free(ss);
	free(best_ls);
	return ret;
}
