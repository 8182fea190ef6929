/* The HTML flame graph: one self-contained file (report/flame.html, embedded at build
 * time) with the call tree embedded as JSON. The tree is merged here, in C, so that the
 * page only has to draw it: every node is [frame, value, children(, base)] in preorder,
 * children sorted by name as flamegraph.pl does. With --diff the base profile's counts
 * ride along on the new profile's tree and the page colours by the change in share. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "postproc/calltree.h"
#include "report/report_util.h"

extern const char vp_flame_html[];   /* generated from flame.html, NUL-terminated */

#define ROOT_FRAME UINT32_MAX
#define NONE VP_CALLTREE_NONE
/* Depth 1 of the tree is the thread: a node's frame is then THREAD_BIT | thread index.
 * The page merges threads away unless the user asks for the per-thread view. */
#define THREAD_BIT 0x80000000u

/* One thread of either profile, by (pid, tid, name). */
struct thread {
	uint32_t pid, tid;
	const char *comm;
};

struct tree {
	struct vp_calltree ct;   /* node 0 is the root */
	/* Per event: samples of the profile (val) and of the base profile (bval), at
	 * val[node * ne + event]: the page draws any event without another report. */
	uint64_t *val, *bval;
	size_t vcap, bcap;   /* in weights, not nodes */
	int ne;
	/* Thread level at depth 1; not in a diff, whose two runs share no threads. */
	bool threads;
	struct thread *th;
	size_t nth, thcap;
	uint32_t *thslot;   /* (pid, tid, comm) -> thread */
	size_t thsize;
	/* The last stack added: its frame at each depth and the node it reached, so that the
	 * next stack walks its common prefix without hashing (neighbouring stacks share
	 * most of their callers). */
	uint32_t *pframe, *pnode;
	size_t plen, pcap, pncap;
	/* Stacks come in path order (cmp_path) and nothing is looked up later: past the
	 * prefix it shares with the stack before, a stack's path is new (all stacks with one
	 * prefix are adjacent in that order), so its nodes are made without the hash. */
	bool sorted;
	/* A container level above the threads (per-thread view), when any process of the
	 * profile is in a container: one VM's profile splits by container first. */
	const struct vp_profile *prof;
	bool containers;
};

/* The pseudo-thread that stands for a container at depth 1: pid CONTAINER_PID, its id
 * (or "host") as the name; the page draws it as "container <id>". */
#define CONTAINER_PID UINT32_MAX

static uint64_t thread_hash(uint32_t pid, uint32_t tid, const char *comm)
{
	uint64_t h = ((uint64_t)pid << 32 | tid) * 0x9e3779b97f4a7c15ull;
	for (const unsigned char *c = (const unsigned char *)comm; *c; c++)
		h = (h ^ *c) * 0x100000001b3ull;
	return h ^ (h >> 29);
}

/* A node's weights, zeroed: one per event for every node; base weights only in a diff
 * (no thread level there). */
static uint32_t tree_weights(struct tree *t, uint32_t id)
{
	size_t ne = (size_t)t->ne, need = ((size_t)id + 1) * ne;
	if (id == NONE || vp_grow((void **)&t->val, &t->vcap, need, sizeof(*t->val)) ||
	    (!t->threads && vp_grow((void **)&t->bval, &t->bcap, need, sizeof(*t->bval))))
		return NONE;
	memset(t->val + (size_t)id * ne, 0, ne * sizeof(*t->val));
	if (t->bval)
		memset(t->bval + (size_t)id * ne, 0, ne * sizeof(*t->bval));
	return id;
}

static uint32_t tree_add_node(struct tree *t, uint32_t parent, uint32_t frame)
{
	return tree_weights(t, vp_calltree__add(&t->ct, parent, frame));
}

static uint32_t tree_child(struct tree *t, uint32_t parent, uint32_t frame)
{
	size_t len = t->ct.len;
	uint32_t id = vp_calltree__child(&t->ct, parent, frame);
	return id != NONE && id < len ? id : tree_weights(t, id);
}

/* The index of a stack's thread, THREAD_BIT set; NONE when out of memory. */
static uint32_t tree_thread(struct tree *t, const struct vp_stack *s)
{
	const char *comm = s->comm ? s->comm : "";
	if ((t->nth + 1) * 2 > t->thsize) {
		size_t size = t->thsize ? t->thsize * 2 : 256;
		uint32_t *slot = malloc(size * sizeof(*slot));
		if (!slot)
			return NONE;
		memset(slot, 0xff, size * sizeof(*slot));
		for (size_t i = 0; i < t->nth; i++) {
			size_t j = thread_hash(t->th[i].pid, t->th[i].tid, t->th[i].comm) & (size - 1);
			while (slot[j] != NONE)
				j = (j + 1) & (size - 1);
			slot[j] = (uint32_t)i;
		}
		free(t->thslot);
		t->thslot = slot;
		t->thsize = size;
	}
	size_t j = thread_hash(s->pid, s->tid, comm) & (t->thsize - 1);
	for (; t->thslot[j] != NONE; j = (j + 1) & (t->thsize - 1)) {
		const struct thread *x = &t->th[t->thslot[j]];
		if (x->pid == s->pid && x->tid == s->tid && !strcmp(x->comm, comm))
			return THREAD_BIT | t->thslot[j];
	}
	if (t->nth >= THREAD_BIT - 1 || vp_grow((void **)&t->th, &t->thcap, t->nth + 1, sizeof(*t->th)))
		return NONE;
	t->th[t->nth] = (struct thread){ .pid = s->pid, .tid = s->tid, .comm = comm };
	t->thslot[j] = (uint32_t)t->nth;
	return THREAD_BIT | (uint32_t)t->nth++;
}

static const char *container_of(const struct vp_profile *p, uint32_t pid)
{
	const char *id = vp_profile__container_id(p, pid);
	return *id ? id : "host";
}

/* The container level's node for a stack's process. */
static uint32_t tree_container(struct tree *t, const struct vp_stack *s)
{
	struct vp_stack c = { .pid = CONTAINER_PID, .comm = container_of(t->prof, s->pid) };
	return tree_thread(t, &c);
}

/* Whether any process of p is in a container. */
static bool has_containers(const struct vp_profile *p)
{
	const struct vp_proc_container *v;
	size_t n = vp_profile__containers(p, &v);
	for (size_t i = 0; i < n; i++)
		if (v[i].c.id[0])
			return true;
	return false;
}

/* Adds one stack's counts along its path (under its thread when the tree has a thread
 * level): v[e] for each event e, walking the path once for all of them. Frames are
 * mapped through map when not NULL. */
/* Orders stack indices by container (when the profile has any), thread, then by frames
 * from the root. */
static int cmp_path(const void *a, const void *b, void *ctx)
{
	const struct vp_profile *p = ctx;
	const struct vp_stack *x = &p->stacks[*(const uint32_t *)a], *y = &p->stacks[*(const uint32_t *)b];
	if (x->pid != y->pid && p->containers) {
		int cc = strcmp(container_of(p, x->pid), container_of(p, y->pid));
		if (cc)
			return cc;
	}
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	int c = strcmp(x->comm ? x->comm : "", y->comm ? y->comm : "");
	if (c)
		return c;
	uint32_t n = x->nframes < y->nframes ? x->nframes : y->nframes;
	for (uint32_t i = 0; i < n; i++)
		if (x->frames[i] != y->frames[i])
			return x->frames[i] < y->frames[i] ? -1 : 1;
	return (x->nframes > y->nframes) - (x->nframes < y->nframes);
}

static int tree_add(struct tree *t, const struct vp_stack *s, const uint32_t *map, const uint64_t *v, bool base,
		    uint32_t *leaf)
{
	size_t ne = (size_t)t->ne, d = 0;
	uint32_t cur = 0;
	bool same = true;   /* so far the same path as the last stack's */
	if (vp_grow((void **)&t->pframe, &t->pcap, (size_t)s->nframes + 2, sizeof(*t->pframe)) ||
	    vp_grow((void **)&t->pnode, &t->pncap, (size_t)s->nframes + 2, sizeof(*t->pnode)))
		return -ENOMEM;
	for (size_t e = 0; e < ne; e++)
		(base ? t->bval : t->val)[e] += v[e];
	int first = t->threads ? (t->containers ? -1 : 0) : 1;
	for (int64_t k = first; k <= (int64_t)s->nframes; k++, d++) {
		uint32_t f = k == -1 ? tree_container(t, s)
			   : k == 0  ? tree_thread(t, s)
			   : map     ? map[s->frames[k - 1]] : s->frames[k - 1];
		if (f == NONE)
			return -ENOMEM;
		if (same && d < t->plen && t->pframe[d] == f) {
			cur = t->pnode[d];
		} else {
			same = false;
			if ((cur = t->sorted ? tree_add_node(t, cur, f) : tree_child(t, cur, f)) == NONE)
				return -ENOMEM;
			t->pframe[d] = f;
			t->pnode[d] = cur;
		}
		/* The arrays move as the tree grows: index them after tree_child. */
		uint64_t *w = (base ? t->bval : t->val) + (size_t)cur * ne;
		for (size_t e = 0; e < ne; e++)
			w[e] += v[e];
	}
	t->plen = d;
	if (leaf)
		*leaf = cur;
	return 0;
}

static bool has_value(const struct tree *t, size_t id)
{
	for (int e = 0; e < t->ne; e++)
		if (t->val[id * (size_t)t->ne + (size_t)e])
			return true;
	return false;
}

struct sort_ctx {
	const struct vp_profile *prof;
	const struct tree *t;
};

/* Children by name, as flamegraph.pl orders them; threads by name, then tid. */
static int child_cmp(const void *a, const void *b, void *arg)
{
	const struct sort_ctx *c = arg;
	const struct vp_calltree_node *x = &c->t->ct.n[*(const uint32_t *)a], *y = &c->t->ct.n[*(const uint32_t *)b];
	if ((x->frame & THREAD_BIT) && (y->frame & THREAD_BIT)) {
		const struct thread *tx = &c->t->th[x->frame & ~THREAD_BIT], *ty = &c->t->th[y->frame & ~THREAD_BIT];
		int r = strcmp(tx->comm, ty->comm);
		if (r)
			return r;
		if (tx->tid != ty->tid)
			return tx->tid < ty->tid ? -1 : 1;
		return tx->pid < ty->pid ? -1 : tx->pid > ty->pid;
	}
	const struct vp_frame *fx = &c->prof->frames[x->frame], *fy = &c->prof->frames[y->frame];
	int r = strcmp(fx->name, fy->name);
	if (r)
		return r;
	return x->frame < y->frame ? -1 : x->frame > y->frame;
}

static void html_escape(struct vp_out *o, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '&': vp_out__puts(o, "&amp;"); break;
		case '<': vp_out__puts(o, "&lt;"); break;
		case '>': vp_out__puts(o, "&gt;"); break;
		case '"': vp_out__puts(o, "&quot;"); break;
		default: vp_out__write(o, s, 1);
		}
	}
}

static const char *meta_any(const struct vp_profile *p, const char *const *keys)
{
	for (; *keys; keys++) {
		const char *v = vp_profile__meta(p, *keys);
		if (v && *v)
			return v;
	}
	return NULL;
}

/* "cpu-clock, 2006 samples for 2.6 s on vm (hypervisor: KVM; PMU: none) - why this
 * event": what was recorded, from the session metadata (the recorder's keys first, then
 * generic ones), leaving out whatever the session did not say. */
/* Nanoseconds per sample of a time event (its weight over its samples), 0 otherwise. */
static double ns_per_sample(const struct vp_profile *p, int ev)
{
	uint64_t w = 0, n = 0;
	if (ev < 0 || ev >= p->nevents || strcmp(p->events[ev].unit, "nanoseconds"))
		return 0;
	for (size_t i = 0; i < p->nstacks; i++) {
		w += p->stacks[i].weight[ev];
		n += p->stacks[i].samples[ev];
	}
	return n ? (double)w / (double)n : 0;
}

static char *make_title(const struct vp_profile *p, int ev, uint64_t samples, bool diff)
{
	static const char *const k_rate[] = { "rate", "freq", "frequency", NULL };
	static const char *const k_dur[] = { "duration_ns", "duration_nanos", NULL };
	static const char *const k_host[] = { "hostname", "host", NULL };
	const char *rate = meta_any(p, k_rate), *dur = meta_any(p, k_dur), *host = meta_any(p, k_host);
	char *t = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&t, &len);
	if (!f)
		return NULL;
	/* Measured time says its time; a sampled event its samples (cpu-clock's time
	 * is in the tooltip and legend). */
	double nsps = ns_per_sample(p, ev);
	if (p->nevents && nsps > 0 && (vp_event_measured(p, ev) || vp_event_estimated(p, ev)))
		fprintf(f, "%s%s, %.1f ms", diff ? "Differential flame graph: " : "Flame graph: ", p->events[ev].name,
			(double)samples * nsps / 1e6);
	else
		fprintf(f, "%s%s, %llu samples", diff ? "Differential flame graph: " : "Flame graph: ",
			p->nevents ? p->events[ev].name : "no events", (unsigned long long)samples);
	if (rate)
		fprintf(f, " at %s Hz", rate);
	if (dur)
		fprintf(f, " in %.1f s", strtod(dur, NULL) / 1e9);
	if (host)
		fprintf(f, " on %s", host);
	/* The hypervisor, the PMU and why this event was chosen are in the metadata table
	 * below the graph: a title says what is drawn, in one line. */
	fclose(f);
	return t;
}

/* Writes v in decimal at b; returns the end. */
static char *put_u64(char *b, uint64_t v)
{
	char tmp[20];
	int n = 0;
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n)
		*b++ = tmp[--n];
	return b;
}

/* One cell of the time strip's data: samples of one tree node in one time bucket. */
struct tcell {
	uint32_t node, bucket;
	uint64_t n;
};

static int tcell_cmp(const void *a, const void *b)
{
	const struct tcell *x = a, *y = b;
	if (x->node != y->node)
		return x->node < y->node ? -1 : 1;
	return (x->bucket > y->bucket) - (x->bucket < y->bucket);
}

/* The bucket width for a span: 1, 2 or 5 times a power of ten nanoseconds, the smallest
 * that fits the span into VP_HTML_TIME_BUCKETS buckets (round numbers on the axis and in
 * the equivalent 'report --time'). */
uint64_t vp_html_bucket_ns(uint64_t span)
{
	static const uint64_t step[3] = { 1, 2, 5 };
	for (uint64_t p10 = 1000000; p10 <= 100000000000000ull; p10 *= 10)   /* from 1 ms */
		for (int i = 0; i < 3; i++)
			if (span / (p10 * step[i]) < VP_HTML_TIME_BUCKETS)
				return p10 * step[i];
	return span / VP_HTML_TIME_BUCKETS + 1;
}

/* The time strip's data, "time":{"from":NS,"bucket":NS,"n":N,"ev":[...]}: per event, the
 * samples of each tree node (its own, not its children's) per time bucket, as groups
 * [node - previous group's node, k, then k pairs (bucket - previous bucket, samples)],
 * nodes in the tree's output order; null for an event whose samples do not all have a
 * time (steal split by the hypervisor's clock, a wait of a virtual thread). An off-CPU interval's samples are
 * spread over the buckets it overlaps (vp_span_share). Sparse and delta-coded: a node is in a
 * few buckets of a few hundred, and small numbers are short in decimal. */
static int write_times(struct vp_out *o, const struct vp_profile *p, const struct tree *t, const uint32_t *snode,
		       const uint32_t *outid)
{
	size_t ne = (size_t)t->ne;
	uint64_t lo = UINT64_MAX, hi = 0, sum[8] = { 0 };
	for (size_t i = 0; i < p->ntimes; i++) {
		const struct vp_sample_time *x = &p->times[i];
		if (x->event >= ne || x->stack >= p->nstacks)
			continue;
		sum[x->event] += x->samples;
		lo = x->t < lo ? x->t : lo;
		/* An interval's last instant: its end, less one ns (it is [t, t + dur)). */
		uint64_t last = x->t + (x->dur ? x->dur - 1 : 0);
		hi = last > hi ? last : hi;
	}
	if (lo > hi)
		return 0;
	/* The strip starts at time zero, the axis's origin, as report --time counts; only
	 * samples that all come late in the span (a --time window far into a long session)
	 * start it at their first bucket instead. */
	if (lo <= hi - lo)
		lo = 0;
	uint64_t bw = vp_html_bucket_ns(hi - lo);
	lo -= lo % bw;
	uint64_t nb = (hi - lo) / bw + 1;
	size_t cap = p->ntimes, nc;
	struct tcell *c = malloc(cap * sizeof(*c));
	if (!c)
		return -ENOMEM;
	vp_out__printf(o, ",\n\"time\":{\"from\":%llu,\"bucket\":%llu,\"n\":%llu,\"ev\":[",
		       (unsigned long long)lo, (unsigned long long)bw, (unsigned long long)nb);
	for (size_t e = 0; e < ne; e++) {
		vp_out__puts(o, e ? "," : "");
		if (!sum[e] || sum[e] != t->val[e]) {
			vp_out__puts(o, "null");
			continue;
		}
		nc = 0;
		for (size_t i = 0; i < p->ntimes; i++) {
			const struct vp_sample_time *x = &p->times[i];
			if (x->event != e || x->stack >= p->nstacks)
				continue;
			uint32_t node = outid[snode[x->stack]];
			uint64_t b0 = (x->t - lo) / bw, b1 = x->dur ? (x->t + x->dur - 1 - lo) / bw : b0;
			/* An interval's samples go to the buckets it overlaps, by the part of it in
			 * each (the rule report --time applies to a window). */
			for (uint64_t b = b0; b <= b1; b++) {
				uint64_t n = b0 == b1 ? x->samples : vp_span_share(x->t, x->dur, x->samples, lo + b * bw, lo + (b + 1) * bw);
				if (!n)
					continue;
				if (nc == cap) {
					cap *= 2;
					struct tcell *g = realloc(c, cap * sizeof(*c));
					if (!g) {
						free(c);
						return -ENOMEM;
					}
					c = g;
				}
				c[nc++] = (struct tcell){ .node = node, .bucket = (uint32_t)b, .n = n };
			}
		}
		qsort(c, nc, sizeof(*c), tcell_cmp);
		vp_out__puts(o, "\n[");
		uint32_t pnode = 0;
		bool first = true;
		for (size_t i = 0; i < nc;) {
			size_t j = i, k = 0;
			/* One group per node; equal (node, bucket) cells add up. */
			for (; j < nc && c[j].node == c[i].node; j++)
				k += j == i || c[j].bucket != c[j - 1].bucket;
			vp_out__printf(o, "%s%u,%zu", first ? "" : ",", c[i].node - pnode, k);
			first = false;
			pnode = c[i].node;
			uint32_t pb = 0;
			for (size_t m = i; m < j;) {
				uint64_t n = 0;
				size_t q = m;
				for (; q < j && c[q].bucket == c[m].bucket; q++)
					n += c[q].n;
				vp_out__printf(o, ",%u,%llu", c[m].bucket - pb, (unsigned long long)n);
				pb = c[m].bucket;
				m = q;
			}
			vp_out__puts(o, (k > 8) ? "\n" : "");
			i = j;
		}
		vp_out__puts(o, "]");
	}
	/* The JVMs' code-map epoch boundaries in the strip's span: [ns, pid, label]. */
	vp_out__puts(o, "],\n\"marks\":[");
	bool first = true;
	for (size_t i = 0; i < p->nmarks; i++) {
		const struct vp_time_mark *m = &p->marks[i];
		if (m->t < lo || (m->t - lo) / bw >= nb)
			continue;
		vp_out__printf(o, "%s[%llu,%u,", first ? "" : ",", (unsigned long long)m->t, m->pid);
		vp_json_str(o, m->label, true);
		vp_out__puts(o, "]");
		first = false;
	}
	vp_out__puts(o, "]}");
	free(c);
	return o->err;
}

/* The JSON data: html_safe escaping keeps "</script>" out of it. The model is generic
 * in events: "events" lists them, each tree node carries one weight per event (and in a
 * diff, then one base weight per event), and "ev" says which one to draw first. */
static int write_data(struct vp_out *o, const struct vp_profile *p, const struct vp_profile *base, int ev,
		      const struct vp_keyspace *k, const struct tree *t, const char *title, bool per_event_titles,
		      const uint32_t *snode)
{
	uint32_t *fidx = calloc(k->u->nframes ? k->u->nframes : 1, sizeof(*fidx));
	uint32_t *kids = malloc(t->ct.len * sizeof(*kids));
	uint32_t *stack = malloc(t->ct.len * sizeof(*stack));
	uint32_t *outid = snode ? malloc(t->ct.len * sizeof(*outid)) : NULL;
	size_t ne = (size_t)t->ne;
	int err = -ENOMEM;
	if (!fidx || !kids || !stack || (snode && !outid))
		goto cleanup;
	vp_out__puts(o, "{\"title\":");
	vp_json_str(o, title, true);
	vp_out__printf(o, ",\"diff\":%s,\"ev\":%d,\"events\":[", base ? "true" : "false", ne ? ev : 0);
	for (size_t e = 0; e < ne; e++) {
		vp_out__puts(o, e ? ",{\"name\":" : "{\"name\":");
		vp_json_str(o, p->events[e].name, true);
		vp_out__puts(o, ",\"unit\":");
		vp_json_str(o, p->events[e].unit, true);
		/* Time events are drawn from sample counts and shown in milliseconds: the
		 * page converts with nsPerSample; measured ones (off-cpu, wall, ...) and the
		 * steal estimate say time alone. Each event has its own title for when the page switches to it. */
		vp_out__printf(o, ",\"nsPerSample\":%.3f,\"measured\":%s", ns_per_sample(p, (int)e),
			       vp_event_measured(p, (int)e) || vp_event_estimated(p, (int)e) ? "true" : "false");
		if (per_event_titles) {
			char *et = make_title(p, (int)e, t->val[e], base != NULL);
			vp_out__puts(o, ",\"title\":");
			vp_json_str(o, et ? et : title, true);
			free(et);
		}
		vp_out__printf(o, ",\"total\":%llu,\"baseTotal\":%llu}", (unsigned long long)t->val[e],
			       (unsigned long long)(t->bval ? t->bval[e] : 0));
	}
	vp_out__puts(o, "],\"meta\":[");
	for (size_t i = 0; i < p->nmeta; i++) {
		vp_out__puts(o, i ? ",[" : "[");
		vp_json_str(o, p->meta[i].key, true);
		vp_out__puts(o, ",");
		vp_json_str(o, p->meta[i].value, true);
		vp_out__puts(o, "]");
	}
	vp_out__puts(o, "],\"warnings\":");
	vp_json_str(o, p->warnings ? p->warnings : "", true);
	vp_out__puts(o, ",\"layers\":[");
	for (int l = 0; l < VP_LAYER__COUNT; l++) {
		vp_out__puts(o, l ? "," : "");
		vp_json_str(o, vp_layer_name(l), true);
	}
	vp_out__puts(o, "],\n\"threads\":[");
	for (size_t i = 0; i < t->nth; i++) {
		vp_out__printf(o, "%s[%u,%u,", i ? "," : "", t->th[i].pid, t->th[i].tid);
		vp_json_str(o, t->th[i].comm, true);
		vp_out__puts(o, "]");
	}
	/* Only the frames the drawn tree uses, numbered densely in output order. */
	for (size_t i = 1; i < t->ct.len; i++)
		if (!(t->ct.n[i].frame & THREAD_BIT) && has_value(t, i))
			fidx[t->ct.n[i].frame] = 1;
	vp_out__puts(o, "],\n\"frames\":[");
	uint32_t w = 0;
	for (size_t i = 0; i < k->u->nframes; i++) {
		if (!fidx[i])
			continue;
		const struct vp_frame *f = &k->u->frames[i];
		fidx[i] = ++w;
		vp_out__puts(o, w > 1 ? ",\n[" : "\n[");
		vp_json_str(o, f->name, true);
		vp_out__printf(o, ",%u,", f->layer);
		vp_json_str(o, f->image, true);
		if (f->tier)   /* a compiled method's tier (issue 25), coloured apart when C1 */
			vp_out__printf(o, ",%u", f->tier);
		vp_out__puts(o, "]");
	}

	/* Preorder walk with an explicit stack; only nodes with samples in the new profile.
	 * A node is [frame, children, weight per event(, base weight per event)]; frame -1
	 * is the root, -2 - i thread i. */
	vp_out__puts(o, "],\n\"tree\":[");
	struct sort_ctx sc = { .prof = k->u, .t = t };
	size_t sp = 0, nout = 0;
	stack[sp++] = 0;
	while (sp) {
		uint32_t id = stack[--sp];
		const struct vp_calltree_node *nd = &t->ct.n[id];
		size_t nk = 0;
		for (uint32_t c = nd->first_child; c != NONE; c = t->ct.n[c].next_sibling)
			if (has_value(t, c))
				kids[nk++] = c;
		if (nk > 1)
			qsort_r(kids, nk, sizeof(*kids), child_cmp, &sc);
		long long fr = !id ? -1 : (nd->frame & THREAD_BIT) ? -2 - (long long)(nd->frame & ~THREAD_BIT)
								 : (long long)fidx[nd->frame] - 1;
		/* Formatted by hand: printf was a fifth of a large report. */
		char buf[24 * (2 + 2 * 8) + 2], *b = buf;
		if (outid)
			outid[id] = (uint32_t)nout;
		if (nout++)
			*b++ = ',';
		if (fr < 0) {
			*b++ = '-';
			fr = -fr;
		}
		b = put_u64(b, (uint64_t)fr);
		*b++ = ',';
		b = put_u64(b, nk);
		for (size_t e = 0; e < ne; e++) {
			*b++ = ',';
			b = put_u64(b, t->val[id * ne + e]);
		}
		for (size_t e = 0; base && e < ne; e++) {
			*b++ = ',';
			b = put_u64(b, t->bval[id * ne + e]);
		}
		if (nout % 16 == 0)
			*b++ = '\n';
		vp_out__write(o, buf, (size_t)(b - buf));
		/* Pushed in reverse so that the first child by name is emitted first. */
		for (size_t c = nk; c-- > 0;)
			stack[sp++] = kids[c];
	}
	vp_out__puts(o, "]");
	if (snode && (err = write_times(o, p, t, snode, outid)))
		goto cleanup;
	vp_out__puts(o, "}");
	err = o->err;
cleanup:
	free(fidx);
	free(kids);
	free(stack);
	free(outid);
	return err;
}

int report_html(const struct vp_profile *p, const struct vp_profile *base, struct vp_out *o,
		const struct vp_report_opts *opts)
{
	int ev = opts ? opts->sort_event : 0;
	if (p->nevents && (ev < 0 || ev >= p->nevents))
		return -EINVAL;
	struct vp_keyspace k = { 0 };
	struct tree t = { 0 };
	char *title = NULL;
	uint32_t *order = NULL, *snode = NULL;
	int err = vp_keyspace__init(&k, p, base);
	if (err)
		return err;
	err = -ENOMEM;
	t.ne = p->nevents ? p->nevents : 1;
	t.threads = base == NULL;
	t.prof = p;
	t.containers = t.threads && has_containers(p);
	if (tree_add_node(&t, NONE, ROOT_FRAME) == NONE)
		goto cleanup;
	uint64_t v[8] = { 0 };
	_Static_assert(sizeof(v) / sizeof(v[0]) >= sizeof(p->events) / sizeof(p->events[0]), "one weight per event");
	/* Stacks in the order of their paths (thread, then frames from the root), so that
	 * each one shares the longest prefix with the one before (tree_add). */
	order = malloc((p->nstacks ? p->nstacks : 1) * sizeof(*order));
	/* Each stack's node, for the time strip's data (not in a diff: the base's samples
	 * have no place on this recording's clock). */
	if (!base && p->ntimes && !(snode = malloc(p->nstacks * sizeof(*snode))))
		goto cleanup;
	if (!order)
		goto cleanup;
	for (size_t i = 0; i < p->nstacks; i++)
		order[i] = (uint32_t)i;
	qsort_r(order, p->nstacks, sizeof(*order), cmp_path, (void *)p);
	/* The base (a diff) is added by look-ups into this tree: keep the hash then. */
	t.sorted = base == NULL;
	for (size_t i = 0; p->nevents && i < p->nstacks; i++)
		if (tree_add(&t, &p->stacks[order[i]], NULL, p->stacks[order[i]].samples, false,
			     snode ? &snode[order[i]] : NULL))
			goto cleanup;
	/* The base's counts in the columns of the events they match by name. */
	int bev[8];
	bool any = false;
	for (int e = 0; e < p->nevents; e++)
		any |= (bev[e] = vp_event_match(p, e, base)) >= 0;
	t.plen = 0;   /* the base's frames are another profile's, mapped */
	for (size_t i = 0; any && i < base->nstacks; i++) {
		for (int e = 0; e < p->nevents; e++)
			v[e] = bev[e] >= 0 ? base->stacks[i].samples[bev[e]] : 0;
		if (tree_add(&t, &base->stacks[i], k.base_map, v, true, NULL))
			goto cleanup;
	}
	if (!p->nevents)
		t.ne = 0;   /* no weights to write */
	title = opts && opts->title ? strdup(opts->title) : make_title(p, ev, p->nevents ? t.val[ev] : 0, base != NULL);
	if (!title)
		goto cleanup;

	/* The template holds {{TITLE}} (HTML-escaped here) and one {{DATA}} (the JSON). */
	const char *tpl = vp_flame_html;
	bool have_data = false;
	for (;;) {
		const char *m = strstr(tpl, "{{");
		if (!m) {
			vp_out__puts(o, tpl);
			break;
		}
		vp_out__write(o, tpl, (size_t)(m - tpl));
		if (!strncmp(m, "{{TITLE}}", 9)) {
			html_escape(o, title);
			tpl = m + 9;
		} else if (!strncmp(m, "{{DATA}}", 8) && !have_data) {
			have_data = true;
			err = write_data(o, p, base, ev, &k, &t, title, !(opts && opts->title), snode);
			if (err)
				goto cleanup;
			tpl = m + 8;
		} else {
			vp_out__write(o, m, 2);
			tpl = m + 2;
		}
	}
	err = have_data ? o->err : -EINVAL;   /* a template without data is a build error */
cleanup:
	free(title);
	vp_calltree__free(&t.ct);
	free(t.val);
	free(t.bval);
	free(t.th);
	free(t.thslot);
	free(t.pframe);
	free(t.pnode);
	free(order);
	free(snode);
	vp_keyspace__fini(&k);
	return err;
}
