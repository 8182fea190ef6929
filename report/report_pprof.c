/* The pprof report: a gzipped perftools.profiles.Profile (postproc/profile.proto, its
 * field numbers; encoded with common/pbuf.h) that `pprof`, `go tool pprof` and the many
 * UIs built on it read. One Location per sampled address (its inlined frames as Lines,
 * one Function per frame), the recorded Mappings with their real ranges, the main
 * executable first, and per event a (samples, count) and a weight value: cpu/nanoseconds
 * for the clock events, as the fleet tools expect, (event, count) for counting events.
 *
 * The Profile's repeated fields are each encoded into a buffer of their own, in the order
 * that numbers the strings (sample types, samples, mappings, functions, locations,
 * comments), then joined in field order with the string table between them. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "common/pbuf.h"
#include "common/strtab.h"
#include "common/util.h"
#include "common/steal_clock.h"
#include "report/report_util.h"

/* Field numbers of postproc/profile.proto. */
enum {
	PROFILE_SAMPLE_TYPE = 1, PROFILE_SAMPLE, PROFILE_MAPPING, PROFILE_LOCATION, PROFILE_FUNCTION,
	PROFILE_STRING_TABLE, PROFILE_TIME_NANOS = 9, PROFILE_DURATION_NANOS, PROFILE_PERIOD_TYPE, PROFILE_PERIOD,
	PROFILE_COMMENT, PROFILE_DEFAULT_SAMPLE_TYPE,
	VALUE_TYPE_TYPE = 1, VALUE_TYPE_UNIT,
	SAMPLE_LOCATION_ID = 1, SAMPLE_VALUE, SAMPLE_LABEL,
	LABEL_KEY = 1, LABEL_STR, LABEL_NUM,
	MAPPING_ID = 1, MAPPING_MEMORY_START, MAPPING_MEMORY_LIMIT, MAPPING_FILE_OFFSET, MAPPING_FILENAME,
	MAPPING_BUILD_ID, MAPPING_HAS_FUNCTIONS, MAPPING_HAS_FILENAMES, MAPPING_HAS_LINE_NUMBERS,
	MAPPING_HAS_INLINE_FRAMES,
	LOCATION_ID = 1, LOCATION_MAPPING_ID, LOCATION_ADDRESS, LOCATION_LINE,
	LINE_FUNCTION_ID = 1, LINE_LINE,
	FUNCTION_ID = 1, FUNCTION_NAME, FUNCTION_SYSTEM_NAME, FUNCTION_FILENAME,
};

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

/* Writer state: the string table, the sections encoded so far and what later sections
 * need of earlier ones. */
struct pp {
	const struct vp_profile *p;
	int ev;              /* the ranked event */
	size_t nv;           /* values per sample: per event its count and its weight */
	struct vp_strtab st;
	int64_t *vt;         /* per value: its type and unit strings, at 2 * k and 2 * k + 1 */
	struct vp_buf sample_types, samples, mappings, functions, locations, comments, tmp, tmp2;
	int64_t k_pid, k_tid, k_thread, k_layer, k_process, k_host, k_tier, v_tier[2];
	int64_t host;        /* the recording machine's name (meta "hostname"), or 0 */
	int64_t k_container, k_pod, k_cgroup;
	struct pname *pnames;
	size_t npnames;
	uint64_t *frame_loc; /* per frame: the id of its own location (samples by frame), 0 = none */
	uint32_t *loc_frame; /* per such location, in id order: its frame */
	size_t nframe_locs;
	uint64_t *mapid;     /* per profile mapping: its Mapping id */
};

/* The string's id; a failed allocation gives -1, which the caller checks once. */
#define STR(w, s) vp_strtab__id(&(w)->st, (s))

/* Sample types: per event its sample count and its weight. pprof addresses a type by
 * name, so only the first event's count is plain "samples"; the event each type comes
 * from is said in a comment (pprof -comments). */
static int pp_sample_types(struct pp *w)
{
	const struct vp_profile *p = w->p;
	if (!(w->vt = calloc(2 * w->nv, sizeof(*w->vt))))
		return -ENOMEM;
	for (int e = 0; e < p->nevents; e++) {
		int64_t *c = &w->vt[4 * e], *wt = &w->vt[4 * e + 2];
		char *name = NULL;
		if (e == 0)
			c[0] = STR(w, "samples");
		else if (!strcmp(p->events[e].name, "alloc"))
			c[0] = STR(w, "alloc_objects");
		else if (asprintf(&name, "%s_samples", p->events[e].name) >= 0)
			c[0] = vp_strtab__id_owned(&w->st, name);
		else
			c[0] = -1;
		c[1] = STR(w, "count");
		const char *type, *unit;
		weight_type(p, e, &type, &unit);
		wt[0] = STR(w, type);
		wt[1] = STR(w, unit);
		if (c[0] < 0 || c[1] < 0 || wt[0] < 0 || wt[1] < 0)
			return -ENOMEM;
	}
	for (size_t k = 0; k < w->nv; k++) {
		vp_pb__int(&w->tmp, VALUE_TYPE_TYPE, w->vt[2 * k]);
		vp_pb__int(&w->tmp, VALUE_TYPE_UNIT, w->vt[2 * k + 1]);
		vp_pb__msg(&w->sample_types, PROFILE_SAMPLE_TYPE, &w->tmp);
	}
	return w->sample_types.err;
}

/* The label keys and the values all samples share. */
static int pp_label_keys(struct pp *w)
{
	w->k_pid = STR(w, "pid");
	w->k_tid = STR(w, "tid");
	w->k_thread = STR(w, "thread");
	w->k_layer = STR(w, "layer");
	w->k_process = STR(w, "process");
	w->k_tier = STR(w, "tier");
	w->v_tier[0] = STR(w, "C1");
	w->v_tier[1] = STR(w, "C2");
	if (!(w->pnames = pnames_build(w->p, &w->npnames)))
		return -ENOMEM;
	const char *host = vp_profile__meta(w->p, "hostname");
	w->k_host = STR(w, "hostname");
	w->host = host && *host ? STR(w, host) : 0;
	w->k_container = STR(w, "container_id");
	w->k_pod = STR(w, "pod_uid");
	w->k_cgroup = STR(w, "cgroup");
	bool bad = w->k_pid < 0 || w->k_tid < 0 || w->k_thread < 0 || w->k_layer < 0 || w->k_process < 0 ||
		   w->k_tier < 0 || w->v_tier[0] < 0 || w->v_tier[1] < 0 || w->k_host < 0 || w->host < 0 ||
		   w->k_container < 0 || w->k_pod < 0 || w->k_cgroup < 0;
	return bad ? -ENOMEM : 0;
}

static void pp_label(struct pp *w, int64_t key, int64_t str, int64_t num)
{
	vp_pb__int(&w->tmp2, LABEL_KEY, key);
	vp_pb__int(&w->tmp2, LABEL_STR, str);
	vp_pb__int(&w->tmp2, LABEL_NUM, num);
	vp_pb__msg(&w->tmp, SAMPLE_LABEL, &w->tmp2);
}

/* Labels per sample: pid, tid, thread, layer, process (its executable's name: a whole-VM
 * profile is split by it, `pprof -tagroot=process`), and the host, so that profiles
 * scraped from many VMs stay apart when a fleet tool merges them; for a process in a
 * container also container_id, pod_uid (Kubernetes) and cgroup, the names the
 * OpenTelemetry profiler's container attributes use in spirit, so one VM's profile
 * splits by container. A sample whose leaf is compiled Java code also has its compiler,
 * tier C1 or C2 (async-profiler's _[1] and _[j]): `pprof -tagfocus=tier=C1`. Only the
 * leaf's, as labels belong to samples; a method's C1 and C2 code are two Functions of
 * one name, which pprof shows as one function. */
static int pp_sample(struct pp *w, const struct vp_stack *s, const uint64_t *ids, size_t nids, const int64_t *v)
{
	const struct vp_profile *p = w->p;
	const struct vp_frame *leaf = s->nframes ? &p->frames[s->frames[s->nframes - 1]] : NULL;
	int64_t thread = STR(w, s->comm);
	int64_t layer = STR(w, vp_layer_name(leaf ? leaf->layer : VP_LAYER_UNKNOWN));
	int64_t process = STR(w, pname_of(w->pnames, w->npnames, s->pid));
	vp_pb__packed_u64(&w->tmp, SAMPLE_LOCATION_ID, ids, nids);
	vp_pb__packed_i64(&w->tmp, SAMPLE_VALUE, v, w->nv);
	pp_label(w, w->k_pid, 0, s->pid);
	pp_label(w, w->k_tid, 0, s->tid);
	pp_label(w, w->k_thread, thread, 0);
	pp_label(w, w->k_layer, layer, 0);
	pp_label(w, w->k_process, process, 0);
	if (leaf && (leaf->layer == VP_LAYER_JIT || leaf->layer == VP_LAYER_INLINED) && vp_tier_level(leaf->tier) &&
	    vp_tier_level(leaf->tier) <= VP_TIER_C2)
		pp_label(w, w->k_tier, w->v_tier[vp_tier_is_c1(leaf->tier) ? 0 : 1], 0);
	if (w->host > 0)
		pp_label(w, w->k_host, w->host, 0);
	const struct vp_proc_container *c = vp_profile__container(p, s->pid);
	bool bad = thread < 0 || layer < 0 || process < 0;
	if (c && c->c.id[0]) {
		int64_t id = STR(w, c->c.id), pod = c->c.pod[0] ? STR(w, c->c.pod) : 0;
		pp_label(w, w->k_container, id, 0);
		if (c->c.pod[0])
			pp_label(w, w->k_pod, pod, 0);
		int64_t cg = STR(w, c->cgroup);
		pp_label(w, w->k_cgroup, cg, 0);
		bad |= id < 0 || pod < 0 || cg < 0;
	}
	vp_pb__msg(&w->samples, PROFILE_SAMPLE, &w->tmp);
	return bad ? -ENOMEM : w->samples.err;
}

/* Samples by address first (the loader's location stacks); what they do not cover
 * (steal, profiles built from frames alone) goes by frame, each frame that needs it
 * getting a location of its own after the profile's. */
static int pp_samples(struct pp *w)
{
	const struct vp_profile *p = w->p;
	size_t nv = w->nv, ns = p->nstacks, nf = p->nframes, nl = p->nlocations, ids_cap = 0;
	int64_t *rem = calloc((ns ? ns : 1) * nv, sizeof(*rem)), *v = calloc(nv, sizeof(*v));
	uint64_t *ids = NULL;
	int err = -ENOMEM;
	w->frame_loc = calloc(nf ? nf : 1, sizeof(*w->frame_loc));
	w->loc_frame = calloc(nf ? nf : 1, sizeof(*w->loc_frame));
	if (!rem || !v || !w->frame_loc || !w->loc_frame)
		goto cleanup;
	for (size_t i = 0; i < ns; i++)
		for (int e = 0; e < p->nevents; e++) {
			rem[i * nv + 2 * e] = (int64_t)p->stacks[i].samples[e];
			rem[i * nv + 2 * e + 1] = (int64_t)p->stacks[i].weight[e];
		}
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
		if (vp_grow((void **)&ids, &ids_cap, ls->nlocs + 1, sizeof(*ids)))
			goto cleanup;
		for (uint32_t k = 0; k < ls->nlocs; k++)
			ids[k] = (uint64_t)ls->locs[k] + 1;
		if ((err = pp_sample(w, &p->stacks[ls->stack], ids, ls->nlocs, v)))
			goto cleanup;
		err = -ENOMEM;
		for (size_t k = 0; k < nv; k++)
			rem[ls->stack * nv + k] -= v[k];
	}
	for (size_t i = 0; i < ns; i++) {
		bool any = false;
		for (size_t k = 0; k < nv; k++)
			any |= rem[i * nv + k] > 0;
		if (!any)
			continue;
		const struct vp_stack *s = &p->stacks[i];
		if (vp_grow((void **)&ids, &ids_cap, s->nframes + 1, sizeof(*ids)))
			goto cleanup;
		for (uint32_t k = 0; k < s->nframes; k++) {
			uint32_t f = s->frames[s->nframes - 1 - k];
			if (!w->frame_loc[f]) {
				w->loc_frame[w->nframe_locs] = f;
				w->frame_loc[f] = nl + ++w->nframe_locs;
			}
			ids[k] = w->frame_loc[f];
		}
		for (size_t k = 0; k < nv; k++)
			v[k] = rem[i * nv + k] > 0 ? rem[i * nv + k] : 0;
		if ((err = pp_sample(w, s, ids, s->nframes, v)))
			goto cleanup;
		err = -ENOMEM;
	}
	err = 0;
cleanup:
	free(ids);
	free(rem);
	free(v);
	return err;
}

/* The mapping listed first: the main executable of the process with the most samples
 * of the ranked event (pprof names the profile after it), the last it exec'd; else any executable;
 * SIZE_MAX when there is none. */
static size_t pp_first_mapping(const struct pp *w)
{
	const struct vp_profile *p = w->p;
	size_t ns = p->nstacks, nm = p->nmappings, first = SIZE_MAX;
	uint32_t best_pid = 0;
	uint64_t best = 0;
	for (size_t i = 0; i < ns; i++) {
		uint64_t n = 0;
		for (size_t j = 0; j < ns; j++)
			if (p->stacks[j].pid == p->stacks[i].pid)
				n += p->stacks[j].samples[w->ev];
		if (n > best) {
			best = n;
			best_pid = p->stacks[i].pid;
		}
		if (i > 64)
			break;  /* a sampled estimate is enough to pick the name */
	}
	/* The last executable of that process: the program it ran after its last exec (a
	 * launched command's pid runs viprof's launcher first, then exec's the command; a
	 * busy machine gave the launcher samples and pprof said "File: viprof"). */
	for (size_t i = nm; i-- > 0 && first == SIZE_MAX;)
		if (p->mappings[i].exe && p->mappings[i].pid == best_pid)
			first = i;
	for (size_t i = 0; i < nm && first == SIZE_MAX; i++)
		if (p->mappings[i].exe)
			first = i;
	return first;
}

/* A whole-VM profile (record -a) is no one program's: pprof would name it after the
 * first executable it finds ("File: java"). A first mapping that names the VM instead,
 * with no address range, no locations and no claim to symbols, makes pprof say what it
 * is ("File: whole VM HOST (12 processes)"). Its name starts with no '[' and has no '/'
 * (pprof would move it) and no ':' (pprof takes "x:..." for a URL and drops it). */
static int pp_vm_mapping(struct pp *w, size_t nprocs, uint64_t id)
{
	const char *host = vp_profile__meta(w->p, "hostname");
	char host_[256], *vmname = NULL;
	snprintf(host_, sizeof(host_), "%s", host && *host ? host : "");
	for (char *c = host_; *c; c++)
		if (*c == '/' || *c == ':')
			*c = '_';
	if (asprintf(&vmname, "whole VM%s%s (%zu processes)", *host_ ? " " : "", host_, nprocs) < 0)
		return -ENOMEM;
	int64_t name = vp_strtab__id_owned(&w->st, vmname);
	if (name < 0)
		return -ENOMEM;
	vp_pb__uint(&w->tmp, MAPPING_ID, id);
	vp_pb__int(&w->tmp, MAPPING_FILENAME, name);
	vp_pb__msg(&w->mappings, PROFILE_MAPPING, &w->tmp);
	return 0;
}

/* Mappings: the profile's own (real ranges and offsets). A range the loader did not know
 * (the kernel, JIT code) spans the addresses located in it. Frames located without an
 * address get no mapping: a made-up one (0x0/0x0) claiming functions and lines would
 * misstate the memory they were in. */
static int pp_mappings(struct pp *w)
{
	const struct vp_profile *p = w->p;
	size_t nm = p->nmappings, nmaps = 0, nprocs = 0;
	uint64_t *lo = calloc(nm ? nm : 1, sizeof(*lo)), *hi = calloc(nm ? nm : 1, sizeof(*hi));
	int err = -ENOMEM;
	w->mapid = calloc(nm ? nm : 1, sizeof(*w->mapid));
	if (!lo || !hi || !w->mapid)
		goto cleanup;
	for (size_t i = 0; i < nm; i++)
		lo[i] = UINT64_MAX;
	for (size_t i = 0; i < p->nlocations; i++) {
		const struct vp_location *l = &p->locations[i];
		if (l->mapping >= nm)
			continue;
		if (l->addr < lo[l->mapping])
			lo[l->mapping] = l->addr;
		if (l->addr >= hi[l->mapping])
			hi[l->mapping] = l->addr + 1;
	}
	size_t first = pp_first_mapping(w);
	for (size_t i = 0; i < w->npnames; i++)
		nprocs += w->pnames[i].pid != 0;
	const char *target = vp_profile__meta(p, "target");
	if (target && !strcmp(target, "all") && (err = pp_vm_mapping(w, nprocs, ++nmaps)))
		goto cleanup;
	err = -ENOMEM;
	for (size_t k = 0; k < nm; k++) {
		size_t i = first == SIZE_MAX ? k : k == 0 ? first : k <= first ? k - 1 : k;
		const struct vp_mapping *m = &p->mappings[i];
		int64_t file;
		/* pprof takes mappings of one file name and size for one binary loaded at
		 * different addresses, and merges them, moving their addresses: two JVMs'
		 * code caches would be mixed up. In a profile of several processes, a range
		 * made up from its locations ([jit], [anon]) says whose it is. */
		if (nprocs > 1 && m->pid && !m->limit && m->file[0] == '[') {
			char *f = NULL;
			if (asprintf(&f, "%s %s %u", m->file, pname_of(w->pnames, w->npnames, m->pid), m->pid) < 0)
				f = NULL;
			file = vp_strtab__id_owned(&w->st, f);
		} else {
			file = STR(w, m->file);
		}
		int64_t build_id = STR(w, m->build_id);
		if (file < 0 || build_id < 0)
			goto cleanup;
		w->mapid[i] = ++nmaps;
		vp_pb__uint(&w->tmp, MAPPING_ID, nmaps);
		vp_pb__uint(&w->tmp, MAPPING_MEMORY_START, m->limit ? m->start : lo[i] != UINT64_MAX ? lo[i] : 0);
		vp_pb__uint(&w->tmp, MAPPING_MEMORY_LIMIT, m->limit ? m->limit : hi[i]);
		vp_pb__uint(&w->tmp, MAPPING_FILE_OFFSET, m->offset);
		vp_pb__int(&w->tmp, MAPPING_FILENAME, file);
		vp_pb__int(&w->tmp, MAPPING_BUILD_ID, build_id);
		/* Symbolized already: pprof must not try to symbolize again. */
		vp_pb__uint(&w->tmp, MAPPING_HAS_FUNCTIONS, 1);
		vp_pb__uint(&w->tmp, MAPPING_HAS_FILENAMES, 1);
		vp_pb__uint(&w->tmp, MAPPING_HAS_LINE_NUMBERS, 1);
		vp_pb__uint(&w->tmp, MAPPING_HAS_INLINE_FRAMES, 1);
		vp_pb__msg(&w->mappings, PROFILE_MAPPING, &w->tmp);
	}
	err = w->mappings.err;
cleanup:
	free(lo);
	free(hi);
	return err;
}

/* One Function per frame (id = frame + 1). */
static int pp_functions(struct pp *w)
{
	for (size_t i = 0; i < w->p->nframes; i++) {
		const struct vp_frame *f = &w->p->frames[i];
		int64_t name = STR(w, f->name), file = STR(w, *f->file ? f->file : f->image);
		if (name < 0 || file < 0)
			return -ENOMEM;
		vp_pb__uint(&w->tmp, FUNCTION_ID, i + 1);
		vp_pb__int(&w->tmp, FUNCTION_NAME, name);
		vp_pb__int(&w->tmp, FUNCTION_SYSTEM_NAME, name);
		vp_pb__int(&w->tmp, FUNCTION_FILENAME, file);
		vp_pb__msg(&w->functions, PROFILE_FUNCTION, &w->tmp);
	}
	return w->functions.err;
}

static void pp_line(struct pp *w, uint64_t function_id, int64_t line)
{
	vp_pb__uint(&w->tmp2, LINE_FUNCTION_ID, function_id);
	vp_pb__int(&w->tmp2, LINE_LINE, line);
	vp_pb__msg(&w->tmp, LOCATION_LINE, &w->tmp2);
}

/* Locations: one per sampled address with the frames inlined there, innermost first
 * (pprof's order), then one per frame for the samples left by frame. */
static int pp_locations(struct pp *w)
{
	const struct vp_profile *p = w->p;
	for (size_t i = 0; i < p->nlocations; i++) {
		const struct vp_location *l = &p->locations[i];
		vp_pb__uint(&w->tmp, LOCATION_ID, i + 1);
		vp_pb__uint(&w->tmp, LOCATION_MAPPING_ID, l->mapping < p->nmappings ? w->mapid[l->mapping] : 0);
		vp_pb__uint(&w->tmp, LOCATION_ADDRESS, l->addr);
		for (uint32_t k = 0; k < l->nframes; k++)
			pp_line(w, (uint64_t)l->frames[k] + 1, l->lines[k]);
		vp_pb__msg(&w->locations, PROFILE_LOCATION, &w->tmp);
	}
	/* No sampled address: a frame's own address is image-relative or a symbol's start,
	 * neither an address in a mapping, so these locations carry none. */
	for (size_t k = 0; k < w->nframe_locs; k++) {
		uint32_t f = w->loc_frame[k];
		vp_pb__uint(&w->tmp, LOCATION_ID, w->frame_loc[f]);
		pp_line(w, (uint64_t)f + 1, p->frames[f].line);
		vp_pb__msg(&w->locations, PROFILE_LOCATION, &w->tmp);
	}
	return w->locations.err;
}

/* Warnings travel as comments (pprof -comments shows them), after one line per event
 * saying which sample types it gives and one counting why some frames have no name
 * (pprof -top shows it under the header). */
static int pp_comments(struct pp *w)
{
	const struct vp_profile *p = w->p;
	int64_t *ids = NULL;
	size_t n = (size_t)p->nevents + 2, cap;
	int err = -ENOMEM;
	for (const char *c = p->warnings; c && *c; c = strchr(c, '\n') ? strchr(c, '\n') + 1 : c + strlen(c))
		n++;
	cap = n;
	if (!(ids = calloc(cap, sizeof(*ids))))
		return -ENOMEM;
	n = 0;
	for (int e = 0; e < p->nevents; e++) {
		char *c = NULL;
		/* The estimate says so where a pprof user reads what the sample types are. */
		if (asprintf(&c, "event %s%s: sample types %s/count and %s/%s", p->events[e].name,
			     vp_event_estimated(p, e) ? " (the host's share estimated from sampler timers that fired late; "
							"not measured steal)" : "",
			     w->st.v[w->vt[4 * e]], w->st.v[w->vt[4 * e + 2]], w->st.v[w->vt[4 * e + 3]]) < 0)
			c = NULL;
		if ((ids[n++] = vp_strtab__id_owned(&w->st, c)) < 0)
			goto cleanup;
	}
	if (vp_profile__steal_unmeasured(p)) {
		char *c = malloc(512);
		if (c)
			vp_steal_clock__why(c, 512);
		if ((ids[n++] = vp_strtab__id_owned(&w->st, c)) < 0)
			goto cleanup;
	}
	char *unk = vp_profile__unknowns_line(p, w->ev);
	if (unk && (ids[n++] = vp_strtab__id_owned(&w->st, unk)) < 0)
		goto cleanup;
	for (const char *c = p->warnings; c && *c;) {
		const char *eol = strchr(c, '\n');
		size_t l = eol ? (size_t)(eol - c) : strlen(c);
		if ((ids[n++] = vp_strtab__id_owned(&w->st, strndup(c, l))) < 0)
			goto cleanup;
		c = eol ? eol + 1 : c + l;
	}
	vp_pb__packed_i64(&w->comments, PROFILE_COMMENT, ids, n);
	err = w->comments.err;
cleanup:
	free(ids);
	return err;
}

/* The Profile: its fields in number order, each section as encoded above. */
static int pp_profile(struct pp *w, struct vp_buf *out)
{
	const struct vp_profile *p = w->p;
	const char *const tkeys[] = { "start_realtime_ns", "start_time_ns", "time_ns", "time_nanos", NULL };
	const char *const dkeys[] = { "duration_ns", "duration_nanos", NULL };
	const int64_t *wt = &w->vt[4 * w->ev + 2];   /* the ranked event's weight type */
	uint64_t es = vp_event_samples(p, w->ev);
	const struct vp_buf *before[] = { &w->sample_types, &w->samples, &w->mappings, &w->locations, &w->functions };
	for (size_t k = 0; k < sizeof(before) / sizeof(before[0]); k++) {
		if (before[k]->err)
			return before[k]->err;
		vp_buf__put(out, before[k]->b, before[k]->len);
	}
	for (size_t i = 0; i < w->st.n; i++)
		vp_pb__str(out, PROFILE_STRING_TABLE, w->st.v[i]);
	vp_pb__int(out, PROFILE_TIME_NANOS, meta_int(p, tkeys));
	vp_pb__int(out, PROFILE_DURATION_NANOS, meta_int(p, dkeys));
	vp_pb__int(&w->tmp, VALUE_TYPE_TYPE, wt[0]);
	vp_pb__int(&w->tmp, VALUE_TYPE_UNIT, wt[1]);
	vp_pb__msg(out, PROFILE_PERIOD_TYPE, &w->tmp);
	vp_pb__int(out, PROFILE_PERIOD, es ? (int64_t)(vp_event_weight(p, w->ev) / es) : 0);
	vp_buf__put(out, w->comments.b, w->comments.len);
	vp_pb__int(out, PROFILE_DEFAULT_SAMPLE_TYPE, wt[0]);
	return out->err ? out->err : w->comments.err;
}

int report_pprof(const struct vp_profile *p, struct vp_out *o, const struct vp_report_opts *opts)
{
	int ev = opts ? opts->sort_event : 0;
	if (!p->nevents)
		return -ENODATA;
	if (ev < 0 || ev >= p->nevents)
		return -EINVAL;
	struct pp w = { .p = p, .ev = ev, .nv = 2 * (size_t)p->nevents };
	struct vp_buf out = { 0 };
	int err = -ENOMEM;
	/* The order of these calls numbers the strings; "" must be 0, as pprof requires. */
	if (STR(&w, "") != 0 || (err = pp_sample_types(&w)) || (err = pp_label_keys(&w)) || (err = pp_samples(&w)) ||
	    (err = pp_mappings(&w)) || (err = pp_functions(&w)) || (err = pp_locations(&w)) ||
	    (err = pp_comments(&w)) || (err = pp_profile(&w, &out)))
		goto cleanup;
	err = write_gzip(o, out.b, out.len);
cleanup:
	free(out.b);
	struct vp_buf *bufs[] = { &w.sample_types, &w.samples, &w.mappings, &w.functions, &w.locations, &w.comments,
				  &w.tmp, &w.tmp2 };
	for (size_t k = 0; k < sizeof(bufs) / sizeof(bufs[0]); k++)
		free(bufs[k]->b);
	vp_strtab__free(&w.st);
	free(w.vt);
	free(w.pnames);
	free(w.frame_loc);
	free(w.loc_frame);
	free(w.mapid);
	return err;
}
