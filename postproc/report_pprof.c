/* The pprof report: a gzipped perftools.profiles.Profile (postproc/profile.proto,
 * compiled with protoc-c at build time) that `pprof`, `go tool pprof` and the many UIs
 * built on it read. One Location per sampled address (its inlined frames as Lines, one
 * Function per frame), the recorded Mappings with their real ranges, the main executable
 * first, and per event a (samples, count) and a weight value: cpu/nanoseconds for the
 * clock events, as the fleet tools expect, (event, count) for counting events. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "common/util.h"
#include "postproc/profile.pb-c.h"
#include "postproc/report_util.h"

typedef Perftools__Profiles__Profile PbProfile;
typedef Perftools__Profiles__ValueType PbValueType;
typedef Perftools__Profiles__Sample PbSample;
typedef Perftools__Profiles__Label PbLabel;
typedef Perftools__Profiles__Mapping PbMapping;
typedef Perftools__Profiles__Location PbLocation;
typedef Perftools__Profiles__Line PbLine;
typedef Perftools__Profiles__Function PbFunction;

/* The string table: interned strings with "" at index 0, as pprof requires. The table
 * borrows the strings; they all outlive the writer (profile, or the strs pool). */
struct strtab {
	char **v;
	size_t n, cap;
	int64_t *slot;   /* open addressing over v, -1 = empty */
	size_t size;
	char **owned;    /* strings this writer built (labels, names), freed at the end */
	size_t nowned, owned_cap;
};

static uint64_t str_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return h;
}

static int strtab_grow(struct strtab *t)
{
	size_t size = t->size ? t->size * 2 : 4096;
	int64_t *slot = malloc(size * sizeof(*slot));
	if (!slot)
		return -ENOMEM;
	for (size_t i = 0; i < size; i++)
		slot[i] = -1;
	for (size_t i = 0; i < t->n; i++) {
		size_t j = str_hash(t->v[i]) & (size - 1);
		while (slot[j] >= 0)
			j = (j + 1) & (size - 1);
		slot[j] = (int64_t)i;
	}
	free(t->slot);
	t->slot = slot;
	t->size = size;
	return 0;
}

/* Returns the string's index, or -1 when out of memory. */
static int64_t strtab_add(struct strtab *t, const char *s)
{
	if (!s)
		s = "";
	if ((t->n + 1) * 2 > t->size && strtab_grow(t))
		return -1;
	size_t j = str_hash(s) & (t->size - 1);
	for (; t->slot[j] >= 0; j = (j + 1) & (t->size - 1))
		if (!strcmp(t->v[t->slot[j]], s))
			return t->slot[j];
	if (vp_grow((void **)&t->v, &t->cap, t->n + 1, sizeof(*t->v)))
		return -1;
	t->v[t->n] = (char *)s;
	t->slot[j] = (int64_t)t->n;
	return (int64_t)t->n++;
}

/* Adds a string this writer formatted itself; the table takes ownership. */
static int64_t strtab_add_owned(struct strtab *t, char *s)
{
	if (!s)
		return -1;
	if (vp_grow((void **)&t->owned, &t->owned_cap, t->nowned + 1, sizeof(*t->owned))) {
		free(s);
		return -1;
	}
	t->owned[t->nowned++] = s;
	return strtab_add(t, s);
}

static void strtab_free(struct strtab *t)
{
	for (size_t i = 0; i < t->nowned; i++)
		free(t->owned[i]);
	free(t->owned);
	free(t->v);
	free(t->slot);
}

static int64_t meta_int(const struct vp_profile *p, const char *const *keys)
{
	for (; *keys; keys++) {
		const char *v = vp_profile__meta(p, *keys);
		if (v && *v) {
			char *end;
			long long n = strtoll(v, &end, 10);
			if (*end == 0 && n > 0)
				return n;
		}
	}
	return 0;
}

/* Gzip (deflate with a gzip header, windowBits 15 + 16) buf into o. */
static int write_gzip(struct vp_out *o, const uint8_t *buf, size_t len)
{
	z_stream z;
	memset(&z, 0, sizeof(z));
	if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -ENOMEM;
	unsigned char out[65536];
	z.next_in = (Bytef *)buf;
	int ret, err = 0;
	/* Feed the input in pieces so that sizes above UINT_MAX stay correct. */
	size_t left = len;
	do {
		uInt chunk = left > (1u << 30) ? (1u << 30) : (uInt)left;
		z.avail_in = chunk;
		left -= chunk;
		int flush = left ? Z_NO_FLUSH : Z_FINISH;
		do {
			z.next_out = out;
			z.avail_out = sizeof(out);
			ret = deflate(&z, flush);
			if (ret == Z_STREAM_ERROR) {
				err = -EIO;
				goto cleanup;
			}
			vp_out__write(o, out, sizeof(out) - z.avail_out);
		} while (z.avail_out == 0);
	} while (left);
	if (ret != Z_STREAM_END)
		err = -EIO;
cleanup:
	deflateEnd(&z);
	return err ? err : o->err;
}

/* The clock events whose weight is CPU time: pprof, Pyroscope, Parca and Grafana know a
 * CPU profile by the sample type cpu/nanoseconds. */
static bool is_cpu_clock(const struct vp_prof_event *e)
{
	return !strcmp(e->unit, "nanoseconds") && (!strcmp(e->name, "cpu-clock") || !strcmp(e->name, "task-clock"));
}

/* The pprof name and unit of event e's weight: "cpu"/"nanoseconds" for the first clock
 * event, the event's own name otherwise; counts are "count" (pprof's unit for plain
 * numbers), times "nanoseconds". */
static void weight_type(const struct vp_profile *p, int e, const char **type, const char **unit)
{
	bool first_clock = is_cpu_clock(&p->events[e]);
	for (int k = 0; k < e && first_clock; k++)
		first_clock = !is_cpu_clock(&p->events[k]);
	*type = first_clock ? "cpu" : p->events[e].name;
	*unit = !strcmp(p->events[e].unit, "nanoseconds") ? "nanoseconds" : "count";
	/* Sampled allocations (record -e alloc) in Go's heap-profile names. */
	if (!strcmp(p->events[e].name, "alloc")) {
		*type = "alloc_space";
		*unit = "bytes";
	}
}

/* Each process's name, for the "process" label: its main executable's file name, else
 * the name of its main thread (tid == pid), else of any of its threads. Sorted by pid. */
struct pname {
	uint32_t pid;
	int rank;            /* 3 executable, 2 main thread, 1 a thread */
	const char *name;    /* borrowed from the profile */
};

static int pname_cmp(const void *a, const void *b)
{
	const struct pname *x = a, *y = b;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

/* By pid, the best-ranked name first. */
static int pname_rank_cmp(const void *a, const void *b)
{
	const struct pname *x = a, *y = b;
	int c = pname_cmp(a, b);
	return c ? c : y->rank - x->rank;
}

static const char *base_name(const char *path)
{
	const char *b = strrchr(path, '/');
	return b ? b + 1 : path;
}

/* Returns the sorted table (*n entries, one per pid), or NULL when out of memory. */
static struct pname *pnames_build(const struct vp_profile *p, size_t *n)
{
	struct pname *v = malloc((p->nmappings + p->nstacks + 1) * sizeof(*v));
	size_t nv = 0;
	if (!v)
		return NULL;
	for (size_t i = 0; i < p->nmappings; i++) {
		const struct vp_mapping *m = &p->mappings[i];
		if (m->exe && m->pid && *m->file)
			v[nv++] = (struct pname){ .pid = m->pid, .rank = 3, .name = base_name(m->file) };
	}
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct vp_stack *s = &p->stacks[i];
		if (s->comm && *s->comm)
			v[nv++] = (struct pname){ .pid = s->pid, .rank = s->tid == s->pid ? 2 : 1, .name = s->comm };
	}
	vp_sort(v, nv, sizeof(*v), pname_rank_cmp);
	size_t k = 0;
	for (size_t i = 0; i < nv; i++)
		if (!k || v[k - 1].pid != v[i].pid)
			v[k++] = v[i];
	*n = k;
	return v;
}

static const char *pname_of(const struct pname *v, size_t n, uint32_t pid)
{
	struct pname key = { .pid = pid };
	const struct pname *h = n ? bsearch(&key, v, n, sizeof(*v), pname_cmp) : NULL;
	return h ? h->name : "";
}

/* Writer state: everything a sample needs to be packed, grown as samples are added. */
struct pp {
	struct strtab *st;
	PbSample *samples; size_t nsamples, cap, values_cap, ids_cap, labels_cap;
	int64_t *values;   /* nv per sample, in a separate array so that pointers stay valid: */
	uint64_t **ids;    /* per sample, its location ids (owned) */
	PbLabel *labels;   /* NLABELS per sample */
	size_t nv;
	int64_t k_pid, k_tid, k_thread, k_layer, k_process, k_host, k_tier, v_tier[2];
	int64_t host;      /* the recording machine's name (meta "hostname"), or -1 */
	int64_t k_container, k_pod, k_cgroup;
	struct pname *pnames; size_t npnames;
};

/* Labels per sample: pid, tid, thread, layer, process (its executable's name: a whole-VM
 * profile is split by it, `pprof -tagroot=process`), and the host, so that profiles
 * scraped from many VMs stay apart when a fleet tool merges them; for a process in a
 * container also container_id, pod_uid (Kubernetes) and cgroup, the names the
 * OpenTelemetry profiler's container attributes use in spirit, so one VM's profile
 * splits by container. A sample whose leaf is compiled Java code also has its compiler,
 * tier C1 or C2 (issue 25; async-profiler's _[1] and _[j]): `pprof -tagfocus=tier=C1`.
 * Only the leaf's, as labels belong to samples; a method's C1 and C2 code are two
 * Functions of one name, which pprof shows as one function. */
#define NLABELS 10

static int pp_sample(struct pp *w, const struct vp_profile *p, const struct vp_stack *s, uint64_t *ids, size_t nids,
		     const int64_t *v)
{
	size_t i = w->nsamples;
	if (vp_grow((void **)&w->samples, &w->cap, i + 1, sizeof(*w->samples)) ||
	    vp_grow((void **)&w->values, &w->values_cap, (i + 1) * w->nv, sizeof(*w->values)) ||
	    vp_grow((void **)&w->ids, &w->ids_cap, i + 1, sizeof(*w->ids)) ||
	    vp_grow((void **)&w->labels, &w->labels_cap, (i + 1) * NLABELS, sizeof(*w->labels)))
		return -ENOMEM;
	perftools__profiles__sample__init(&w->samples[i]);
	memcpy(w->values + i * w->nv, v, w->nv * sizeof(*v));
	w->ids[i] = ids;
	PbLabel *lb = &w->labels[NLABELS * i];
	for (int k = 0; k < NLABELS; k++)
		perftools__profiles__label__init(&lb[k]);
	lb[0].key = w->k_pid;
	lb[0].num = s->pid;
	lb[1].key = w->k_tid;
	lb[1].num = s->tid;
	lb[2].key = w->k_thread;
	lb[2].str = strtab_add(w->st, s->comm);
	lb[3].key = w->k_layer;
	lb[3].str = strtab_add(w->st, vp_layer_name(s->nframes ? p->frames[s->frames[s->nframes - 1]].layer
							      : VP_LAYER_UNKNOWN));
	lb[4].key = w->k_process;
	lb[4].str = strtab_add(w->st, pname_of(w->pnames, w->npnames, s->pid));
	w->samples[i].n_location_id = nids;
	w->samples[i].n_value = w->nv;
	size_t nl = 5;
	const struct vp_frame *leaf = s->nframes ? &p->frames[s->frames[s->nframes - 1]] : NULL;
	if (leaf && (leaf->layer == VP_LAYER_JIT || leaf->layer == VP_LAYER_INLINED) && vp_tier_level(leaf->tier) &&
	    vp_tier_level(leaf->tier) <= VP_TIER_C2) {
		lb[nl].key = w->k_tier;
		lb[nl++].str = w->v_tier[vp_tier_is_c1(leaf->tier) ? 0 : 1];
	}
	if (w->host > 0) {
		lb[nl].key = w->k_host;
		lb[nl++].str = w->host;
	}
	const struct vp_proc_container *c = vp_profile__container(p, s->pid);
	int bad = lb[2].str < 0 || lb[3].str < 0 || lb[4].str < 0;
	if (c && c->c.id[0]) {
		lb[nl].key = w->k_container;
		bad |= (lb[nl++].str = strtab_add(w->st, c->c.id)) < 0;
		if (c->c.pod[0]) {
			lb[nl].key = w->k_pod;
			bad |= (lb[nl++].str = strtab_add(w->st, c->c.pod)) < 0;
		}
		lb[nl].key = w->k_cgroup;
		bad |= (lb[nl++].str = strtab_add(w->st, c->cgroup)) < 0;
	}
	w->samples[i].n_label = nl;
	w->nsamples++;
	return bad ? -ENOMEM : 0;
}

int report_pprof(const struct vp_profile *p, struct vp_out *o, const struct vp_report_opts *opts)
{
	int ev = opts ? opts->sort_event : 0;
	if (!p->nevents)
		return -ENODATA;
	if (ev < 0 || ev >= p->nevents)
		return -EINVAL;
	int err = -ENOMEM;
	struct strtab st = { 0 };
	struct pp w = { .st = &st, .nv = 2 * (size_t)p->nevents };
	PbProfile prof = PERFTOOLS__PROFILES__PROFILE__INIT;
	PbValueType *vt = NULL, **vtp = NULL, period_type = PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
	PbMapping *maps = NULL, **mapp = NULL;
	PbFunction *fns = NULL, **fnp = NULL;
	PbLocation *locs = NULL, **locp = NULL;
	PbLine *lines = NULL, **linep = NULL;
	PbSample **samplep = NULL;
	PbLabel **labelp = NULL;
	uint64_t *mapid = NULL, *frame_loc = NULL, *lo = NULL, *hi = NULL;
	int64_t *comments = NULL, *rem = NULL, *v = NULL;
	uint8_t *buf = NULL;
	char *vmname = NULL;    /* the whole VM's first mapping, when it has several processes */
	size_t nv = w.nv, nmaps = 0, ncomments = 0, nlocs = 0, nlines = 0;
	size_t nf = p->nframes, ns = p->nstacks, nm = p->nmappings, nl = p->nlocations;

	if (strtab_add(&st, "") != 0)
		goto cleanup;

	/* Sample types: per event its sample count and its weight. pprof addresses a type by
	 * name, so only the first event's count is plain "samples"; the event each type
	 * comes from is said in a comment (pprof -comments). */
	vt = calloc(nv, sizeof(*vt));
	vtp = calloc(nv, sizeof(*vtp));
	if (!vt || !vtp)
		goto cleanup;
	for (int e = 0; e < p->nevents; e++) {
		PbValueType *c = &vt[2 * e], *wt = &vt[2 * e + 1];
		perftools__profiles__value_type__init(c);
		perftools__profiles__value_type__init(wt);
		char *name = NULL;
		if (e == 0)
			c->type = strtab_add(&st, "samples");
		else if (!strcmp(p->events[e].name, "alloc"))
			c->type = strtab_add(&st, "alloc_objects");
		else if (asprintf(&name, "%s_samples", p->events[e].name) >= 0)
			c->type = strtab_add_owned(&st, name);
		else
			c->type = -1;
		c->unit = strtab_add(&st, "count");
		const char *type, *unit;
		weight_type(p, e, &type, &unit);
		wt->type = strtab_add(&st, type);
		wt->unit = strtab_add(&st, unit);
		if (c->type < 0 || c->unit < 0 || wt->type < 0 || wt->unit < 0)
			goto cleanup;
		vtp[2 * e] = c;
		vtp[2 * e + 1] = wt;
	}
	prof.n_sample_type = nv;
	prof.sample_type = vtp;
	prof.default_sample_type = vt[2 * ev + 1].type;
	period_type.type = vt[2 * ev + 1].type;
	period_type.unit = vt[2 * ev + 1].unit;
	prof.period_type = &period_type;
	uint64_t es = vp_event_samples(p, ev);
	prof.period = es ? (int64_t)(vp_event_weight(p, ev) / es) : 0;

	/* Samples by address first (the loader's location stacks); what they do not cover
	 * (steal, profiles built from frames alone) goes by frame below. */
	rem = calloc((ns ? ns : 1) * nv, sizeof(*rem));
	v = calloc(nv, sizeof(*v));
	if (!rem || !v)
		goto cleanup;
	for (size_t i = 0; i < ns; i++)
		for (int e = 0; e < p->nevents; e++) {
			rem[i * nv + 2 * e] = (int64_t)p->stacks[i].samples[e];
			rem[i * nv + 2 * e + 1] = (int64_t)p->stacks[i].weight[e];
		}
	w.k_pid = strtab_add(&st, "pid");
	w.k_tid = strtab_add(&st, "tid");
	w.k_thread = strtab_add(&st, "thread");
	w.k_layer = strtab_add(&st, "layer");
	w.k_process = strtab_add(&st, "process");
	w.k_tier = strtab_add(&st, "tier");
	w.v_tier[0] = strtab_add(&st, "C1");
	w.v_tier[1] = strtab_add(&st, "C2");
	if (w.k_tier < 0 || w.v_tier[0] < 0 || w.v_tier[1] < 0)
		goto cleanup;
	if (!(w.pnames = pnames_build(p, &w.npnames)))
		goto cleanup;
	const char *host = vp_profile__meta(p, "hostname");
	w.k_host = strtab_add(&st, "hostname");
	w.host = host && *host ? strtab_add(&st, host) : 0;
	w.k_container = strtab_add(&st, "container_id");
	w.k_pod = strtab_add(&st, "pod_uid");
	w.k_cgroup = strtab_add(&st, "cgroup");
	if (w.k_container < 0 || w.k_pod < 0 || w.k_cgroup < 0)
		goto cleanup;
	if (w.k_pid < 0 || w.k_tid < 0 || w.k_thread < 0 || w.k_layer < 0 || w.k_process < 0 || w.k_host < 0 ||
	    w.host < 0)
		goto cleanup;
	for (size_t i = 0; i < p->nloc_stacks; i++) {
		const struct vp_loc_stack *ls = &p->loc_stacks[i];
		bool any = false;
		for (int e = 0; e < p->nevents; e++) {
			v[2 * e] = (int64_t)ls->samples[e];
			v[2 * e + 1] = (int64_t)ls->weight[e];
			any |= ls->samples[e] || ls->weight[e];
		}
		if (!any || ls->stack >= ns)
			continue;
		uint64_t *ids = malloc((ls->nlocs ? ls->nlocs : 1) * sizeof(*ids));
		if (!ids)
			goto cleanup;
		for (uint32_t k = 0; k < ls->nlocs; k++)
			ids[k] = (uint64_t)ls->locs[k] + 1;
		if ((err = pp_sample(&w, p, &p->stacks[ls->stack], ids, ls->nlocs, v))) {
			if (w.nsamples == 0 || w.ids[w.nsamples - 1] != ids)
				free(ids);
			goto cleanup;
		}
		err = -ENOMEM;
		for (size_t k = 0; k < nv; k++)
			rem[ls->stack * nv + k] -= v[k];
	}
	/* Frames that need a location of their own: those of stacks with samples left. */
	frame_loc = calloc(nf ? nf : 1, sizeof(*frame_loc));
	if (!frame_loc)
		goto cleanup;
	for (size_t i = 0; i < ns; i++) {
		bool any = false;
		for (size_t k = 0; k < nv; k++)
			any |= rem[i * nv + k] > 0;
		if (!any)
			continue;
		const struct vp_stack *s = &p->stacks[i];
		uint64_t *ids = malloc((s->nframes ? s->nframes : 1) * sizeof(*ids));
		if (!ids)
			goto cleanup;
		for (uint32_t k = 0; k < s->nframes; k++) {
			uint32_t f = s->frames[s->nframes - 1 - k];
			if (!frame_loc[f])
				frame_loc[f] = nl + ++nlocs;
			ids[k] = frame_loc[f];
		}
		for (size_t k = 0; k < nv; k++)
			v[k] = rem[i * nv + k] > 0 ? rem[i * nv + k] : 0;
		if ((err = pp_sample(&w, p, s, ids, s->nframes, v))) {
			if (w.nsamples == 0 || w.ids[w.nsamples - 1] != ids)
				free(ids);
			goto cleanup;
		}
		err = -ENOMEM;
	}

	/* Mappings: the profile's own (real ranges and offsets). A range the loader did not
	 * know (the kernel, JIT code) spans the addresses located in it. The main executable
	 * of the process with the most samples comes first: pprof names the profile after it.
	 * Frames located above without an address get no mapping: a made-up one (0x0/0x0)
	 * claiming functions and lines would misstate the memory they were in. */
	size_t maxmaps = nm + 1;
	maps = calloc(maxmaps, sizeof(*maps));
	mapp = calloc(maxmaps, sizeof(*mapp));
	mapid = calloc(nm ? nm : 1, sizeof(*mapid));
	lo = calloc(nm ? nm : 1, sizeof(*lo));
	hi = calloc(nm ? nm : 1, sizeof(*hi));
	if (!maps || !mapp || !mapid || !lo || !hi)
		goto cleanup;
	for (size_t i = 0; i < nm; i++)
		lo[i] = UINT64_MAX;
	for (size_t i = 0; i < nl; i++) {
		const struct vp_location *l = &p->locations[i];
		if (l->mapping >= nm)
			continue;
		if (l->addr < lo[l->mapping])
			lo[l->mapping] = l->addr;
		if (l->addr >= hi[l->mapping])
			hi[l->mapping] = l->addr + 1;
	}
	size_t first = SIZE_MAX;
	{
		/* The busiest process, by samples of the ranked event. */
		uint32_t best_pid = 0;
		uint64_t best = 0;
		for (size_t i = 0; i < ns; i++) {
			uint64_t n = 0;
			for (size_t j = 0; j < ns; j++)
				if (p->stacks[j].pid == p->stacks[i].pid)
					n += p->stacks[j].samples[ev];
			if (n > best) {
				best = n;
				best_pid = p->stacks[i].pid;
			}
			if (i > 64)
				break;  /* a sampled estimate is enough to pick the name */
		}
		for (size_t i = 0; i < nm && first == SIZE_MAX; i++)
			if (p->mappings[i].exe && p->mappings[i].pid == best_pid)
				first = i;
		for (size_t i = 0; i < nm && first == SIZE_MAX; i++)
			if (p->mappings[i].exe)
				first = i;
	}
	/* A whole-VM profile (record -a) is no one program's: pprof would
	 * name it after the first executable it finds ("File: java"). A first mapping that
	 * names the VM instead, with no address range, no locations and no claim to
	 * symbols, makes pprof say what it is ("File: whole VM HOST (12 processes)"). Its
	 * name starts with no '[' and has no '/' (pprof would move it) and no ':' (pprof
	 * takes "x:..." for a URL and drops it). */
	size_t nprocs = 0;
	for (size_t i = 0; i < w.npnames; i++)
		nprocs += w.pnames[i].pid != 0;
	const char *target = vp_profile__meta(p, "target");
	if (target && !strcmp(target, "all")) {
		char host_[256];
		snprintf(host_, sizeof(host_), "%s", host && *host ? host : "");
		for (char *c = host_; *c; c++)
			if (*c == '/' || *c == ':')
				*c = '_';
		if (asprintf(&vmname, "whole VM%s%s (%zu processes)", *host_ ? " " : "", host_, nprocs) < 0) {
			vmname = NULL;
			goto cleanup;
		}
		PbMapping *pm = &maps[nmaps];
		perftools__profiles__mapping__init(pm);
		pm->id = nmaps + 1;
		pm->filename = strtab_add(&st, vmname);
		if (pm->filename < 0)
			goto cleanup;
		mapp[nmaps++] = pm;
	}
	for (size_t k = 0; k < nm; k++) {
		size_t i = first == SIZE_MAX ? k : k == 0 ? first : k <= first ? k - 1 : k;
		const struct vp_mapping *m = &p->mappings[i];
		PbMapping *pm = &maps[nmaps];
		perftools__profiles__mapping__init(pm);
		pm->id = nmaps + 1;
		pm->memory_start = m->limit ? m->start : lo[i] != UINT64_MAX ? lo[i] : 0;
		pm->memory_limit = m->limit ? m->limit : hi[i];
		pm->file_offset = m->offset;
		/* pprof takes mappings of one file name and size for one binary loaded at
		 * different addresses, and merges them, moving their addresses: two JVMs'
		 * code caches would be mixed up. In a profile of several processes, a range
		 * made up from its locations ([jit], [anon]) says whose it is. */
		if (nprocs > 1 && m->pid && !m->limit && m->file[0] == '[') {
			char *f = NULL;
			if (asprintf(&f, "%s %s %u", m->file, pname_of(w.pnames, w.npnames, m->pid), m->pid) < 0)
				f = NULL;
			pm->filename = strtab_add_owned(&st, f);
		} else {
			pm->filename = strtab_add(&st, m->file);
		}
		pm->build_id = strtab_add(&st, m->build_id);
		if (pm->filename < 0 || pm->build_id < 0)
			goto cleanup;
		/* Symbolized already: pprof must not try to symbolize again. */
		pm->has_functions = pm->has_filenames = pm->has_line_numbers = pm->has_inline_frames = true;
		mapp[nmaps] = pm;
		mapid[i] = ++nmaps;
	}
	prof.n_mapping = nmaps;
	prof.mapping = mapp;

	/* One Function per frame (id = frame + 1). */
	fns = calloc(nf ? nf : 1, sizeof(*fns));
	fnp = calloc(nf ? nf : 1, sizeof(*fnp));
	if (!fns || !fnp)
		goto cleanup;
	for (size_t i = 0; i < nf; i++) {
		const struct vp_frame *f = &p->frames[i];
		PbFunction *fn = &fns[i];
		perftools__profiles__function__init(fn);
		fn->id = i + 1;
		fn->name = strtab_add(&st, f->name);
		fn->system_name = fn->name;
		fn->filename = strtab_add(&st, *f->file ? f->file : f->image);
		if (fn->name < 0 || fn->filename < 0)
			goto cleanup;
		fnp[i] = fn;
	}
	prof.n_function = nf;
	prof.function = fnp;

	/* Locations: one per sampled address with the frames inlined there, innermost first
	 * (pprof's order), then one per frame for the samples left by frame. */
	for (size_t i = 0; i < nl; i++)
		nlines += p->locations[i].nframes;
	nlines += nlocs;
	locs = calloc(nl + nlocs + 1, sizeof(*locs));
	locp = calloc(nl + nlocs + 1, sizeof(*locp));
	lines = calloc(nlines + 1, sizeof(*lines));
	linep = calloc(nlines + 1, sizeof(*linep));
	if (!locs || !locp || !lines || !linep)
		goto cleanup;
	size_t li = 0;
	for (size_t i = 0; i < nl; i++) {
		const struct vp_location *l = &p->locations[i];
		PbLocation *pl = &locs[i];
		perftools__profiles__location__init(pl);
		pl->id = i + 1;
		pl->mapping_id = l->mapping < nm ? mapid[l->mapping] : 0;
		pl->address = l->addr;
		pl->n_line = l->nframes;
		pl->line = &linep[li];
		for (uint32_t k = 0; k < l->nframes; k++, li++) {
			perftools__profiles__line__init(&lines[li]);
			lines[li].function_id = (uint64_t)l->frames[k] + 1;
			lines[li].line = l->lines[k];
			linep[li] = &lines[li];
		}
		locp[i] = pl;
	}
	for (size_t f = 0; f < nf; f++) {
		if (!frame_loc[f])
			continue;
		const struct vp_frame *fr = &p->frames[f];
		PbLocation *pl = &locs[frame_loc[f] - 1];
		perftools__profiles__location__init(pl);
		pl->id = frame_loc[f];
		/* No sampled address: a frame's own address is image-relative or a symbol's
		 * start, neither an address in a mapping, so the location carries none. */
		pl->mapping_id = 0;
		pl->address = 0;
		pl->n_line = 1;
		pl->line = &linep[li];
		perftools__profiles__line__init(&lines[li]);
		lines[li].function_id = f + 1;
		lines[li].line = fr->line;
		linep[li] = &lines[li];
		li++;
		locp[frame_loc[f] - 1] = pl;
	}
	prof.n_location = nl + nlocs;
	prof.location = locp;

	/* The samples' pointers, now that their arrays stopped moving. */
	samplep = calloc(w.nsamples ? w.nsamples : 1, sizeof(*samplep));
	labelp = calloc(NLABELS * (w.nsamples ? w.nsamples : 1), sizeof(*labelp));
	if (!samplep || !labelp)
		goto cleanup;
	for (size_t i = 0; i < w.nsamples; i++) {
		PbSample *sm = &w.samples[i];
		sm->location_id = w.ids[i];
		sm->value = w.values + i * nv;
		for (int k = 0; k < NLABELS; k++)
			labelp[NLABELS * i + k] = &w.labels[NLABELS * i + k];
		sm->label = &labelp[NLABELS * i];
		samplep[i] = sm;
	}
	prof.n_sample = w.nsamples;
	prof.sample = samplep;

	const char *const tkeys[] = { "start_realtime_ns", "start_time_ns", "time_ns", "time_nanos", NULL };
	const char *const dkeys[] = { "duration_ns", "duration_nanos", NULL };
	prof.time_nanos = meta_int(p, tkeys);
	prof.duration_nanos = meta_int(p, dkeys);

	/* Warnings travel as comments (pprof -comments shows them), after one line per
	 * event saying which sample types it gives. */
	ncomments = (size_t)p->nevents + 1;
	for (const char *c = p->warnings; c && *c; c = strchr(c, '\n') ? strchr(c, '\n') + 1 : c + strlen(c))
		ncomments++;
	comments = calloc(ncomments ? ncomments : 1, sizeof(*comments));
	if (!comments)
		goto cleanup;
	ncomments = 0;
	for (int e = 0; e < p->nevents; e++) {
		char *c = NULL;
		if (asprintf(&c, "event %s: sample types %s/count and %s/%s", p->events[e].name, st.v[vt[2 * e].type],
			     st.v[vt[2 * e + 1].type], st.v[vt[2 * e + 1].unit]) < 0)
			c = NULL;
		if ((comments[ncomments++] = strtab_add_owned(&st, c)) < 0)
			goto cleanup;
	}
	/* Why some frames have no name, counted: pprof -top shows it under the header. */
	char *unk = vp_profile__unknowns_line(p, ev);
	if (unk && (comments[ncomments++] = strtab_add_owned(&st, unk)) < 0)
		goto cleanup;
	for (const char *c = p->warnings; c && *c;) {
		const char *eol = strchr(c, '\n');
		size_t l = eol ? (size_t)(eol - c) : strlen(c);
		comments[ncomments] = strtab_add_owned(&st, strndup(c, l));
		if (comments[ncomments++] < 0)
			goto cleanup;
		c = eol ? eol + 1 : c + l;
	}
	prof.n_comment = ncomments;
	prof.comment = comments;

	prof.n_string_table = st.n;
	prof.string_table = st.v;
	size_t len = perftools__profiles__profile__get_packed_size(&prof);
	buf = malloc(len ? len : 1);
	if (!buf)
		goto cleanup;
	perftools__profiles__profile__pack(&prof, buf);
	err = write_gzip(o, buf, len);
cleanup:
	free(buf);
	free(comments);
	for (size_t i = 0; i < w.nsamples; i++)
		free(w.ids[i]);
	free(w.ids);
	free(w.values);
	free(w.labels);
	free(w.samples);
	free(w.pnames);
	free(vmname);
	free(labelp);
	free(samplep);
	free(linep);
	free(lines);
	free(locp);
	free(locs);
	free(fnp);
	free(fns);
	free(frame_loc);
	free(mapid);
	free(lo);
	free(hi);
	free(mapp);
	free(maps);
	free(rem);
	free(v);
	free(vtp);
	free(vt);
	strtab_free(&st);
	return err;
}
