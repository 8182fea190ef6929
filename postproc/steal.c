/* Steal-time victim attribution (see steal.h). Records are buffered per CPU and
 * replayed in time order at finish, because the recorder's per-CPU buffers are
 * drained independently and a SWITCH can reach the stream after a later STEAL. */
#include "postproc/steal.h"
#include "common/util.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Linux's NR_CPUS upper bound; a larger cpu number can only come from a corrupt record. */
#define STEAL_MAX_CPUS 8192

enum { EV_SWITCH, EV_STEAL };

struct steal_ev {
	uint64_t time;
	uint64_t seq;           /* arrival order, to keep equal times stable */
	uint64_t steal_ns;
	uint32_t prev_pid, prev_tid, next_pid, next_tid;
	int kind;
};

struct cpu_evs {
	struct steal_ev *v;
	size_t n, cap;
};

struct run {                    /* run time of one thread within the open interval */
	uint32_t pid, tid;
	uint64_t ns;
};

struct charge {
	uint32_t cpu, pid, tid;
	uint64_t ns;
};

struct vp_steal_acct {
	struct cpu_evs *cpus;
	uint32_t ncpus;
	size_t capcpus;
	uint64_t seq;
	int err;                /* sticky: the first failure, returned by finish */
	/* scratch used by finish */
	struct run *runs;
	size_t nruns, capruns;
	struct charge *charges;
	size_t ncharges, capcharges;
};

struct vp_steal_acct *vp_steal_acct__new(void)
{
	struct vp_steal_acct *a = calloc(1, sizeof(*a));

	if (!a)
		errno = ENOMEM;
	return a;
}

void vp_steal_acct__free(struct vp_steal_acct *a)
{
	if (!a)
		return;
	for (uint32_t i = 0; i < a->ncpus; i++)
		free(a->cpus[i].v);
	free(a->cpus);
	free(a->runs);
	free(a->charges);
	free(a);
}

static struct steal_ev *push_ev(struct vp_steal_acct *a, uint32_t cpu)
{
	struct cpu_evs *c;

	if (a->err)
		return NULL;
	if (cpu >= STEAL_MAX_CPUS)
		return NULL;    /* corrupt record: ignore it rather than allocate for it */
	if (cpu >= a->ncpus) {
		if (vp_grow((void **)&a->cpus, &a->capcpus, (size_t)cpu + 1, sizeof(*a->cpus))) {
			a->err = -ENOMEM;
			return NULL;
		}
		memset(a->cpus + a->ncpus, 0, (cpu + 1 - a->ncpus) * sizeof(*a->cpus));
		a->ncpus = cpu + 1;
	}
	c = &a->cpus[cpu];
	if (vp_grow((void **)&c->v, &c->cap, c->n + 1, sizeof(*c->v))) {
		a->err = -ENOMEM;
		return NULL;
	}
	memset(&c->v[c->n], 0, sizeof(c->v[0]));
	c->v[c->n].seq = a->seq++;
	return &c->v[c->n++];
}

void vp_steal_acct__switch(struct vp_steal_acct *a, uint64_t time, const struct vp_switch *sw)
{
	struct steal_ev *e = push_ev(a, sw->cpu);

	if (!e)
		return;
	e->kind = EV_SWITCH;
	e->time = time;
	e->prev_pid = sw->prev_pid;
	e->prev_tid = sw->prev_tid;
	e->next_pid = sw->next_pid;
	e->next_tid = sw->next_tid;
}

void vp_steal_acct__steal(struct vp_steal_acct *a, uint64_t time, const struct vp_steal *st)
{
	struct steal_ev *e = push_ev(a, st->cpu);

	if (!e)
		return;
	e->kind = EV_STEAL;
	e->time = time;
	e->steal_ns = st->steal_ns;
}

static int cmp_ev(const void *x, const void *y)
{
	const struct steal_ev *a = x, *b = y;

	if (a->time != b->time)
		return a->time < b->time ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static int cmp_charge(const void *x, const void *y)
{
	const struct charge *a = x, *b = y;

	if (a->cpu != b->cpu)
		return a->cpu < b->cpu ? -1 : 1;
	if (a->pid != b->pid)
		return a->pid < b->pid ? -1 : 1;
	return a->tid < b->tid ? -1 : a->tid > b->tid;
}

static int add_run(struct vp_steal_acct *a, uint32_t pid, uint32_t tid, uint64_t ns)
{
	if (ns == 0)
		return 0;
	for (size_t i = 0; i < a->nruns; i++) {
		if (a->runs[i].pid == pid && a->runs[i].tid == tid) {
			a->runs[i].ns += ns;
			return 0;
		}
	}
	if (vp_grow((void **)&a->runs, &a->capruns, a->nruns + 1, sizeof(*a->runs)))
		return -ENOMEM;
	a->runs[a->nruns++] = (struct run){ pid, tid, ns };
	return 0;
}

static int add_charge(struct vp_steal_acct *a, uint32_t cpu, uint32_t pid, uint32_t tid, uint64_t ns)
{
	if (ns == 0)
		return 0;
	if (vp_grow((void **)&a->charges, &a->capcharges, a->ncharges + 1, sizeof(*a->charges)))
		return -ENOMEM;
	a->charges[a->ncharges++] = (struct charge){ cpu, pid, tid, ns };
	return 0;
}

/* Splits delta over the open interval's runs in proportion to run time. Integer
 * shares are rounded down and the remainder goes to the longest runner, so that the
 * charges add up to the steal delta exactly. */
static int distribute(struct vp_steal_acct *a, uint32_t cpu, uint64_t delta,
		      uint32_t cur_pid, uint32_t cur_tid)
{
	unsigned __int128 total = 0;
	uint64_t given = 0;
	size_t longest = 0;
	int err;

	for (size_t i = 0; i < a->nruns; i++) {
		total += a->runs[i].ns;
		if (a->runs[i].ns > a->runs[longest].ns)
			longest = i;
	}
	if (total == 0)         /* a zero-length interval: whoever is on the CPU now */
		return add_charge(a, cpu, cur_pid, cur_tid, delta);
	for (size_t i = 0; i < a->nruns; i++) {
		uint64_t share = (uint64_t)((unsigned __int128)delta * a->runs[i].ns / total);

		given += share;
		if (i != longest && (err = add_charge(a, cpu, a->runs[i].pid, a->runs[i].tid, share)))
			return err;
	}
	return add_charge(a, cpu, a->runs[longest].pid, a->runs[longest].tid,
			  (uint64_t)((unsigned __int128)delta * a->runs[longest].ns / total) + (delta - given));
}

/* Until the first SWITCH of a CPU, nobody knows who was running; the first switch's
 * prev names that thread, so the runs and charges made so far are relabelled. */
static void resolve_unknown(struct vp_steal_acct *a, size_t first_charge, uint32_t pid, uint32_t tid)
{
	for (size_t i = 0; i < a->nruns; i++)
		if (a->runs[i].pid == VP_STEAL_UNKNOWN && a->runs[i].tid == VP_STEAL_UNKNOWN)
			a->runs[i].pid = pid, a->runs[i].tid = tid;
	for (size_t i = first_charge; i < a->ncharges; i++)
		if (a->charges[i].pid == VP_STEAL_UNKNOWN && a->charges[i].tid == VP_STEAL_UNKNOWN)
			a->charges[i].pid = pid, a->charges[i].tid = tid;
}

static int replay_cpu(struct vp_steal_acct *a, uint32_t cpu)
{
	struct cpu_evs *c = &a->cpus[cpu];
	uint32_t cur_pid = VP_STEAL_UNKNOWN, cur_tid = VP_STEAL_UNKNOWN;
	bool known = false, have_base = false;
	uint64_t base = 0, seg_start = 0;
	size_t first_charge = a->ncharges;
	int err;

	vp_sort(c->v, c->n, sizeof(*c->v), cmp_ev);
	a->nruns = 0;
	for (size_t i = 0; i < c->n; i++) {
		const struct steal_ev *e = &c->v[i];

		if (e->kind == EV_SWITCH) {
			if (!known) {
				resolve_unknown(a, first_charge, e->prev_pid, e->prev_tid);
				known = true;
			}
			/* The record's prev is the kernel's word on who ran until now; it
			 * wins over our idea of cur should a switch have been lost. */
			if (have_base && (err = add_run(a, e->prev_pid, e->prev_tid, e->time - seg_start)))
				return err;
			cur_pid = e->next_pid;
			cur_tid = e->next_tid;
			seg_start = e->time;
			continue;
		}
		if (!have_base) {
			have_base = true;
			base = e->steal_ns;
			seg_start = e->time;
			a->nruns = 0;
			continue;
		}
		if ((err = add_run(a, cur_pid, cur_tid, e->time - seg_start)))
			return err;
		seg_start = e->time;
		if (e->steal_ns >= base &&
		    (err = distribute(a, cpu, e->steal_ns - base, cur_pid, cur_tid)))
			return err;
		base = e->steal_ns;
		a->nruns = 0;
	}
	return 0;
}

int vp_steal_acct__finish(struct vp_steal_acct *a,
			  void (*cb)(void *ctx, uint32_t cpu, uint32_t pid, uint32_t tid, uint64_t ns),
			  void *ctx)
{
	int err;

	if (a->err)
		return a->err;
	a->ncharges = 0;
	for (uint32_t cpu = 0; cpu < a->ncpus; cpu++) {
		if ((err = replay_cpu(a, cpu))) {
			a->err = err;
			return err;
		}
	}
	vp_sort(a->charges, a->ncharges, sizeof(*a->charges), cmp_charge);
	for (size_t i = 0; i < a->ncharges;) {
		struct charge m = a->charges[i++];

		while (i < a->ncharges && !cmp_charge(&m, &a->charges[i]))
			m.ns += a->charges[i++].ns;
		cb(ctx, m.cpu, m.pid, m.tid, m.ns);
	}
	return 0;
}
