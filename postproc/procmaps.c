/* Process mapping history. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "postproc/procmaps.h"
#include "common/util.h"

#define NBUCKETS 4096

/* One process instance: a pid lives again as a new struct proc after exit/reuse. */
struct proc {
	uint32_t pid;
	uint64_t t_start, t_end;
	struct vp_map *maps; size_t nmaps, cap;
	uint64_t max_len;
	bool sorted;
	/* The mappings found last (indices + 1; 0 = none): consecutive frames mostly fall
	 * in the same few (the code cache, libjvm), and a live hit is the only answer. */
	size_t recent[4];
	unsigned recent_next;
	struct proc *next_gen;       /* the later instance of the same pid */
	struct proc *next;           /* hash chain (first instance of each pid) */
};

struct comm_ent {
	uint64_t t;
	char comm[16];
	bool inherited;              /* the parent's name, from the FORK that made the thread */
};

struct thread {
	uint32_t tid;
	struct comm_ent *h; size_t n, cap;
	uint64_t *exits; size_t nexits, exits_cap;   /* EXIT times of this tid, any order */
	struct thread *next;
};

struct str {
	struct str *next;
	char s[];
};

struct vp_procmaps {
	struct proc *procs[NBUCKETS];
	struct thread *threads[NBUCKETS];
	struct str *strs[NBUCKETS];
};

static unsigned hash32(uint32_t x)
{
	x ^= x >> 16;
	x *= 0x45d9f3bu;
	x ^= x >> 16;
	return x % NBUCKETS;
}

static const char *intern(struct vp_procmaps *pm, const char *s)
{
	unsigned h = 5381;
	for (const char *c = s; *c; c++)
		h = h * 33 + (unsigned char)*c;
	h %= NBUCKETS;
	for (struct str *x = pm->strs[h]; x; x = x->next)
		if (!strcmp(x->s, s))
			return x->s;
	size_t l = strlen(s);
	struct str *x = malloc(sizeof(*x) + l + 1);
	if (!x)
		return NULL;
	memcpy(x->s, s, l + 1);
	x->next = pm->strs[h];
	pm->strs[h] = x;
	return x->s;
}

struct vp_procmaps *vp_procmaps__new(void)
{
	return calloc(1, sizeof(struct vp_procmaps));
}

void vp_procmaps__free(struct vp_procmaps *pm)
{
	if (!pm)
		return;
	for (int i = 0; i < NBUCKETS; i++) {
		for (struct proc *p = pm->procs[i], *pn; p; p = pn) {
			pn = p->next;
			for (struct proc *g = p, *gn; g; g = gn) {
				gn = g->next_gen;
				free(g->maps);
				free(g);
			}
		}
		for (struct thread *t = pm->threads[i], *tn; t; t = tn) {
			tn = t->next;
			free(t->h);
			free(t->exits);
			free(t);
		}
		for (struct str *s = pm->strs[i], *sn; s; s = sn) {
			sn = s->next;
			free(s);
		}
	}
	free(pm);
}

static struct proc *first_gen(struct vp_procmaps *pm, uint32_t pid)
{
	for (struct proc *p = pm->procs[hash32(pid)]; p; p = p->next)
		if (p->pid == pid)
			return p;
	return NULL;
}

/* The latest instance of pid, created (valid from time 0: it existed before the
 * recording) when the pid is new. */
static struct proc *current_gen(struct vp_procmaps *pm, uint32_t pid)
{
	struct proc *p = first_gen(pm, pid);
	if (!p) {
		p = calloc(1, sizeof(*p));
		if (!p)
			return NULL;
		p->pid = pid;
		p->t_end = UINT64_MAX;
		p->sorted = true;
		p->next = pm->procs[hash32(pid)];
		pm->procs[hash32(pid)] = p;
		return p;
	}
	while (p->next_gen)
		p = p->next_gen;
	return p;
}

static struct proc *new_gen(struct vp_procmaps *pm, uint32_t pid, uint64_t t)
{
	struct proc *last = first_gen(pm, pid);
	if (!last)
		return current_gen(pm, pid);
	while (last->next_gen)
		last = last->next_gen;
	struct proc *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->pid = pid;
	p->t_start = t;
	p->t_end = UINT64_MAX;
	p->sorted = true;
	if (last->t_end > t)  /* its exit was lost: the new process ends it */
		last->t_end = t;
	last->next_gen = p;
	return p;
}

static int add_map(struct proc *p, const struct vp_map *m)
{
	if (vp_grow((void **)&p->maps, &p->cap, p->nmaps + 1, sizeof(*p->maps)))
		return -ENOMEM;
	p->maps[p->nmaps++] = *m;
	memset(p->recent, 0, sizeof(p->recent));
	if (m->len > p->max_len)
		p->max_len = m->len;
	p->sorted = false;
	return 0;
}

int vp_procmaps__mmap(struct vp_procmaps *pm, uint64_t t, const struct vp_mmap *m,
		      const char *filename)
{
	struct proc *p = current_gen(pm, m->pid);
	if (!p)
		return -ENOMEM;
	if (!m->len)
		return 0;
	uint64_t s = m->start, e = m->start + m->len;
	/* A new mapping replaces whatever was live in its range from t on; the parts of
	 * an old mapping outside the range live on as new entries. */
	size_t n = p->nmaps;
	for (size_t i = 0; i < n; i++) {
		struct vp_map o = p->maps[i];
		if (o.t_end != UINT64_MAX || o.start >= e || o.start + o.len <= s)
			continue;
		p->maps[i].t_end = t;
		if (o.t_start >= t)  /* replaced at the same instant: it never was valid */
			p->maps[i].t_end = o.t_start;
		o.t_start = t;
		o.priv = NULL;
		o.priv_set = false;
		if (o.start < s) {
			struct vp_map l = o;
			l.len = s - o.start;
			if (add_map(p, &l))
				return -ENOMEM;
		}
		if (o.start + o.len > e) {
			struct vp_map r = o;
			r.start = e;
			r.len = o.start + o.len - e;
			r.pgoff = o.pgoff + (e - o.start);
			if (add_map(p, &r))
				return -ENOMEM;
		}
	}
	struct vp_map nm = {
		.start = m->start, .len = m->len, .pgoff = m->pgoff,
		.t_start = t, .t_end = UINT64_MAX,
		.filename = intern(pm, filename ? filename : ""),
		.build_id_size = m->build_id_size > 20 ? 20 : m->build_id_size,
		.prot = m->prot,
		.synthesized = m->synthesized != 0,
	};
	if (!nm.filename)
		return -ENOMEM;
	memcpy(nm.build_id, m->build_id, sizeof(nm.build_id));
	return add_map(p, &nm);
}

static struct proc *gen_at(struct vp_procmaps *pm, uint32_t pid, uint64_t t)
{
	struct proc *p = first_gen(pm, pid), *best = p;
	for (; p; p = p->next_gen)
		if (p->t_start <= t)
			best = p;
	return best;
}

static struct thread *thread_get(struct vp_procmaps *pm, uint32_t tid, bool create)
{
	for (struct thread *x = pm->threads[hash32(tid)]; x; x = x->next)
		if (x->tid == tid)
			return x;
	if (!create)
		return NULL;
	struct thread *x = calloc(1, sizeof(*x));
	if (!x)
		return NULL;
	x->tid = tid;
	x->next = pm->threads[hash32(tid)];
	pm->threads[hash32(tid)] = x;
	return x;
}

/* Adds a name to tid's history, kept in time order: the stream is not (each CPU's
 * buffer is drained in turn, so a thread's own COMM can come before the FORK that made
 * it, though it happened after). A FORK's inherited name (first) goes before a name set
 * at the same instant, a COMM's after. */
static int set_comm(struct vp_procmaps *pm, uint64_t t, uint32_t tid, const char *comm, bool first)
{
	struct thread *x = thread_get(pm, tid, true);
	if (!x)
		return -ENOMEM;
	size_t i = x->n;
	while (i > 0 && (x->h[i - 1].t > t || (first && x->h[i - 1].t == t)))
		i--;
	if (i > 0 && !strncmp(x->h[i - 1].comm, comm, 15))
		return 0;   /* the name it had already */
	if (i < x->n && !strncmp(x->h[i].comm, comm, 15)) {
		x->h[i].t = t;   /* the same name, known from earlier on */
		return 0;
	}
	if (vp_grow((void **)&x->h, &x->cap, x->n + 1, sizeof(*x->h)))
		return -ENOMEM;
	struct comm_ent *h = x->h;
	memmove(h + i + 1, h + i, (x->n - i) * sizeof(*h));
	h[i].t = t;
	strncpy(h[i].comm, comm, 15);
	h[i].comm[15] = '\0';
	h[i].inherited = first;
	x->n++;
	return 0;
}

int vp_procmaps__fork(struct vp_procmaps *pm, uint64_t t, const struct vp_task *task)
{
	const char *pc = vp_procmaps__comm_at(pm, task->ptid, t);
	if (pc) {
		char c[16];
		snprintf(c, sizeof(c), "%s", pc);
		int err = set_comm(pm, t, task->tid, c, true);
		if (err)
			return err;
	}
	if (task->pid == task->ppid)
		return 0;
	struct proc *parent = gen_at(pm, task->ppid, t);
	struct proc *child = new_gen(pm, task->pid, t);
	if (!child)
		return -ENOMEM;
	if (!parent)
		return 0;
	for (size_t i = 0; i < parent->nmaps; i++) {
		struct vp_map m = parent->maps[i];
		if (m.t_start > t || m.t_end <= t)
			continue;
		m.t_start = t;
		m.priv = NULL;
		m.priv_set = false;
		if (add_map(child, &m))
			return -ENOMEM;
	}
	return 0;
}

int vp_procmaps__exit(struct vp_procmaps *pm, uint64_t t, const struct vp_task *task)
{
	/* Kept per thread so that a name given before an exit is not taken for the name
	 * of a later thread with the same tid (see vp_procmaps__comm_at). */
	struct thread *x = thread_get(pm, task->tid, true);
	if (!x || vp_grow((void **)&x->exits, &x->exits_cap, x->nexits + 1, sizeof(*x->exits)))
		return -ENOMEM;
	x->exits[x->nexits++] = t;
	if (task->pid != task->tid)  /* a thread: the process lives on */
		return 0;
	struct proc *p = first_gen(pm, task->pid);
	if (!p)
		return 0;
	while (p->next_gen)
		p = p->next_gen;
	if (p->t_end > t)
		p->t_end = t;
	return 0;
}

int vp_procmaps__comm(struct vp_procmaps *pm, uint64_t t, uint32_t pid, uint32_t tid,
		      const char *comm, bool exec)
{
	if (exec) {
		struct proc *p = current_gen(pm, pid);
		if (!p)
			return -ENOMEM;
		for (size_t i = 0; i < p->nmaps; i++)
			if (p->maps[i].t_end > t)
				p->maps[i].t_end = p->maps[i].t_start > t ? p->maps[i].t_start : t;
	}
	return set_comm(pm, t, tid, comm, false);
}

static int cmp_map(const void *a, const void *b)
{
	const struct vp_map *x = a, *y = b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->t_start < y->t_start ? -1 : x->t_start > y->t_start;
}

struct vp_map *vp_procmaps__find(struct vp_procmaps *pm, uint32_t pid, uint64_t ip, uint64_t t)
{
	struct proc *p = gen_at(pm, pid, t);
	if (!p || !p->nmaps)
		return NULL;
	if (!p->sorted) {
		vp_sort(p->maps, p->nmaps, sizeof(*p->maps), cmp_map);
		p->sorted = true;
		memset(p->recent, 0, sizeof(p->recent));
	}
	/* Live mappings never overlap: one that holds ip and is live at t is the answer. */
	for (int r = 0; r < 4; r++) {
		if (!p->recent[r])
			continue;
		struct vp_map *m = &p->maps[p->recent[r] - 1];
		if (ip >= m->start && ip < m->start + m->len && m->t_start <= t && t < m->t_end)
			return m;
	}
	size_t lo = 0, hi = p->nmaps;
	while (lo < hi) {  /* first map starting above ip */
		size_t mid = lo + (hi - lo) / 2;
		if (p->maps[mid].start <= ip)
			lo = mid + 1;
		else
			hi = mid;
	}
	struct vp_map *later = NULL;
	/* Live mappings never overlap, so at most one holds ip at t; older ones that
	 * did are further left, bounded by the longest mapping. */
	for (size_t i = lo; i-- > 0;) {
		struct vp_map *m = &p->maps[i];
		if (m->start + p->max_len <= ip)
			break;
		if (ip >= m->start + m->len)
			continue;
		if (m->t_start <= t && t < m->t_end) {
			p->recent[p->recent_next++ & 3] = i + 1;
			return m;
		}
		if (m->synthesized && m->t_start > t && (!later || m->t_start < later->t_start))
			later = m;
	}
	return later;
}

bool vp_procmaps__maps_file(struct vp_procmaps *pm, uint32_t pid, uint64_t t, const char *suffix)
{
	struct proc *p = gen_at(pm, pid, t);
	size_t sl = strlen(suffix);
	for (size_t i = 0; p && i < p->nmaps; i++) {
		const struct vp_map *m = &p->maps[i];
		size_t fl = strlen(m->filename);
		if (fl > sl && m->filename[fl - sl - 1] == '/' && !strcmp(m->filename + fl - sl, suffix) &&
		    (m->t_start <= t || m->synthesized) && t < m->t_end)
			return true;   /* a snapshot's mapping may be stamped after the first samples */
	}
	return false;
}

struct vp_map *vp_procmaps__find_span(struct vp_procmaps *pm, uint32_t pid, uint64_t ip, uint64_t t,
				      uint64_t *lo, uint64_t *hi)
{
	struct vp_map *m = vp_procmaps__find(pm, pid, ip, t);
	struct proc *p = gen_at(pm, pid, t);
	*lo = 1;
	*hi = 0;
	/* Live mappings never overlap, so while m is live it is the answer, as long as
	 * the lookup lands in the same instance of the process (an exec starts another). */
	if (m && p && m->t_start <= t && t < m->t_end) {
		*lo = m->t_start > p->t_start ? m->t_start : p->t_start;
		*hi = m->t_end;
	} else if (!m && p) {
		/* No mapping: until the next one that holds ip starts, and since the last one
		 * that held it ended (a synthesized one starting later would have been the
		 * answer, so there is none). Anonymous JIT code is mostly here. */
		*lo = p->t_start;
		*hi = UINT64_MAX;
		for (size_t i = 0; i < p->nmaps; i++) {
			const struct vp_map *x = &p->maps[i];
			if (ip < x->start || ip >= x->start + x->len)
				continue;
			if (x->t_start > t && x->t_start < *hi)
				*hi = x->t_start;
			if (x->t_end <= t && x->t_end > *lo)
				*lo = x->t_end;
		}
		if (*lo > t)
			*lo = t;   /* a process instance that started after t: this lookup only */
	}
	if (*lo <= *hi && p && p->next_gen && p->next_gen->t_start < *hi)
		*hi = p->next_gen->t_start;
	return m;
}

static bool exited_between(const struct thread *x, uint64_t from, uint64_t to)
{
	for (size_t i = 0; i < x->nexits; i++)
		if (x->exits[i] >= from && x->exits[i] <= to)
			return true;
	return false;
}

const char *vp_procmaps__comm_at(struct vp_procmaps *pm, uint32_t tid, uint64_t t)
{
	struct thread *x = thread_get(pm, tid, false);
	if (!x || !x->n)
		return NULL;
	/* The history is in time order (set_comm): the last entry at or before t. */
	size_t lo = 0, hi = x->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (x->h[mid].t <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	size_t k = lo ? lo - 1 : 0;
	/* A thread's own COMM can be stamped before the FORK that made it (the recorder's
	 * /proc snapshot of a thread born as recording began, or CPUs' clocks a little
	 * apart), so the FORK's inherited parent name would follow it and win. A name the
	 * thread set itself, with no exit of this tid in between, is the later truth. */
	if (k > 0 && x->h[k].inherited && !x->h[k - 1].inherited && !exited_between(x, x->h[k - 1].t, x->h[k].t))
		k--;
	return x->h[k].comm;
}
