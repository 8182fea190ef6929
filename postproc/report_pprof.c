/* The pprof report: a gzipped perftools.profiles.Profile (postproc/profile.proto,
 * compiled with protoc-c at build time) that `pprof`, `go tool pprof` and the many UIs
 * built on it read. One Location (with one Line and one Function) per interned frame,
 * one Mapping per image, and per event a (samples, count) and an (event, unit) value. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

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
	size_t nowned;
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
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 1024;
		char **v = realloc(t->v, cap * sizeof(*v));
		if (!v)
			return -1;
		t->v = v;
		t->cap = cap;
	}
	t->v[t->n] = (char *)s;
	t->slot[j] = (int64_t)t->n;
	return (int64_t)t->n++;
}

/* Adds a string this writer formatted itself; the table takes ownership. */
static int64_t strtab_add_owned(struct strtab *t, char *s)
{
	if (!s)
		return -1;
	char **o = realloc(t->owned, (t->nowned + 1) * sizeof(*o));
	if (!o) {
		free(s);
		return -1;
	}
	t->owned = o;
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

int report_pprof(const struct vp_profile *p, struct vp_out *o, const struct vp_report_opts *opts)
{
	int ev = opts ? opts->sort_event : 0;
	if (!p->nevents)
		return -ENODATA;
	if (ev < 0 || ev >= p->nevents)
		return -EINVAL;
	int err = -ENOMEM;
	struct strtab st = { 0 };
	PbProfile prof = PERFTOOLS__PROFILES__PROFILE__INIT;
	PbValueType *vt = NULL, **vtp = NULL, period_type = PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
	PbMapping *maps = NULL, **mapp = NULL;
	PbFunction *fns = NULL, **fnp = NULL;
	PbLocation *locs = NULL, **locp = NULL;
	PbLine *lines = NULL, **linep = NULL;
	PbSample *samples = NULL, **samplep = NULL;
	PbLabel *labels = NULL, **labelp = NULL;
	uint64_t *locids = NULL, *mapid_of_frame = NULL;
	int64_t *values = NULL, *comments = NULL;
	uint8_t *buf = NULL;
	size_t nv = 2 * (size_t)p->nevents, nmaps = 0, ncomments = 0;
	size_t nf = p->nframes, ns = p->nstacks;
	size_t totframes = 0;

	if (strtab_add(&st, "") != 0)
		goto cleanup;

	/* Sample types: per event its sample count and its weight. pprof addresses a type by
	 * name, so only the first event's count is plain "samples". */
	vt = calloc(nv, sizeof(*vt));
	vtp = calloc(nv, sizeof(*vtp));
	if (!vt || !vtp)
		goto cleanup;
	for (int e = 0; e < p->nevents; e++) {
		PbValueType *c = &vt[2 * e], *w = &vt[2 * e + 1];
		perftools__profiles__value_type__init(c);
		perftools__profiles__value_type__init(w);
		char *name = NULL;
		if (e == 0)
			c->type = strtab_add(&st, "samples");
		else if (asprintf(&name, "%s_samples", p->events[e].name) >= 0)
			c->type = strtab_add_owned(&st, name);
		else
			c->type = -1;
		c->unit = strtab_add(&st, "count");
		w->type = strtab_add(&st, p->events[e].name);
		w->unit = strtab_add(&st, p->events[e].unit);
		if (c->type < 0 || c->unit < 0 || w->type < 0 || w->unit < 0)
			goto cleanup;
		vtp[2 * e] = c;
		vtp[2 * e + 1] = w;
	}
	prof.n_sample_type = nv;
	prof.sample_type = vtp;
	prof.default_sample_type = vt[2 * ev + 1].type;
	period_type.type = vt[2 * ev + 1].type;
	period_type.unit = vt[2 * ev + 1].unit;
	prof.period_type = &period_type;
	uint64_t es = vp_event_samples(p, ev);
	prof.period = es ? (int64_t)(vp_event_weight(p, ev) / es) : 0;

	/* Mappings: one per distinct non-empty image. Addresses are image-relative, so the
	 * memory range is unknown and left 0, as pprof allows. */
	maps = calloc(nf ? nf : 1, sizeof(*maps));
	mapp = calloc(nf ? nf : 1, sizeof(*mapp));
	mapid_of_frame = calloc(nf ? nf : 1, sizeof(*mapid_of_frame));
	if (!maps || !mapp || !mapid_of_frame)
		goto cleanup;
	{
		/* Index the mapping of each image through the string table's ids. */
		size_t cap = 1024;
		int64_t *img_map = NULL;
		img_map = calloc(cap, sizeof(*img_map));
		if (!img_map)
			goto cleanup;
		for (size_t i = 0; i < nf; i++) {
			const struct vp_frame *f = &p->frames[i];
			if (!*f->image)
				continue;
			int64_t s = strtab_add(&st, f->image);
			if (s < 0) {
				free(img_map);
				goto cleanup;
			}
			if ((size_t)s >= cap) {
				size_t nc = cap;
				while ((size_t)s >= nc)
					nc *= 2;
				int64_t *ni = realloc(img_map, nc * sizeof(*ni));
				if (!ni) {
					free(img_map);
					goto cleanup;
				}
				memset(ni + cap, 0, (nc - cap) * sizeof(*ni));
				img_map = ni;
				cap = nc;
			}
			if (!img_map[s]) {
				PbMapping *m = &maps[nmaps];
				perftools__profiles__mapping__init(m);
				m->id = nmaps + 1;
				m->filename = s;
				m->build_id = strtab_add(&st, f->build_id);
				/* Symbolized already: pprof must not try to symbolize again. */
				m->has_functions = true;
				m->has_filenames = true;
				m->has_line_numbers = true;
				m->has_inline_frames = true;
				mapp[nmaps] = m;
				img_map[s] = (int64_t)++nmaps;
			}
			mapid_of_frame[i] = (uint64_t)img_map[s];
		}
		free(img_map);
	}
	prof.n_mapping = nmaps;
	prof.mapping = mapp;

	/* One Function, Location and Line per frame; ids are frame id + 1 (0 is invalid). */
	fns = calloc(nf ? nf : 1, sizeof(*fns));
	fnp = calloc(nf ? nf : 1, sizeof(*fnp));
	locs = calloc(nf ? nf : 1, sizeof(*locs));
	locp = calloc(nf ? nf : 1, sizeof(*locp));
	lines = calloc(nf ? nf : 1, sizeof(*lines));
	linep = calloc(nf ? nf : 1, sizeof(*linep));
	if (!fns || !fnp || !locs || !locp || !lines || !linep)
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
		PbLine *ln = &lines[i];
		perftools__profiles__line__init(ln);
		ln->function_id = i + 1;
		ln->line = f->line;
		linep[i] = ln;
		PbLocation *l = &locs[i];
		perftools__profiles__location__init(l);
		l->id = i + 1;
		l->mapping_id = mapid_of_frame[i];
		l->address = f->addr;
		l->n_line = 1;
		l->line = &linep[i];
		locp[i] = l;
	}
	prof.n_function = nf;
	prof.function = fnp;
	prof.n_location = nf;
	prof.location = locp;

	/* Samples, leaf first, with pid/tid/thread/layer labels. */
	for (size_t i = 0; i < ns; i++)
		totframes += p->stacks[i].nframes;
	samples = calloc(ns ? ns : 1, sizeof(*samples));
	samplep = calloc(ns ? ns : 1, sizeof(*samplep));
	labels = calloc(4 * (ns ? ns : 1), sizeof(*labels));
	labelp = calloc(4 * (ns ? ns : 1), sizeof(*labelp));
	locids = calloc(totframes ? totframes : 1, sizeof(*locids));
	values = calloc(nv * (ns ? ns : 1), sizeof(*values));
	if (!samples || !samplep || !labels || !labelp || !locids || !values)
		goto cleanup;
	int64_t k_pid = strtab_add(&st, "pid"), k_tid = strtab_add(&st, "tid");
	int64_t k_thread = strtab_add(&st, "thread"), k_layer = strtab_add(&st, "layer");
	if (k_pid < 0 || k_tid < 0 || k_thread < 0 || k_layer < 0)
		goto cleanup;
	size_t nsamples = 0, li = 0;
	for (size_t i = 0; i < ns; i++) {
		const struct vp_stack *s = &p->stacks[i];
		bool any = false;
		for (int e = 0; e < p->nevents; e++)
			any |= s->samples[e] || s->weight[e];
		if (!any)
			continue;
		PbSample *sm = &samples[nsamples];
		perftools__profiles__sample__init(sm);
		uint64_t *ids = locids + li;
		for (uint32_t k = 0; k < s->nframes; k++)
			ids[k] = (uint64_t)s->frames[s->nframes - 1 - k] + 1;
		li += s->nframes;
		sm->n_location_id = s->nframes;
		sm->location_id = ids;
		int64_t *v = values + nv * nsamples;
		for (int e = 0; e < p->nevents; e++) {
			v[2 * e] = (int64_t)s->samples[e];
			v[2 * e + 1] = (int64_t)s->weight[e];
		}
		sm->n_value = nv;
		sm->value = v;
		PbLabel *lb = &labels[4 * nsamples];
		PbLabel **lbp = &labelp[4 * nsamples];
		for (int k = 0; k < 4; k++) {
			perftools__profiles__label__init(&lb[k]);
			lbp[k] = &lb[k];
		}
		lb[0].key = k_pid;
		lb[0].num = s->pid;
		lb[1].key = k_tid;
		lb[1].num = s->tid;
		lb[2].key = k_thread;
		lb[2].str = strtab_add(&st, s->comm);
		lb[3].key = k_layer;
		lb[3].str = strtab_add(&st, vp_layer_name(s->nframes ? p->frames[s->frames[s->nframes - 1]].layer
								     : VP_LAYER_UNKNOWN));
		if (lb[2].str < 0 || lb[3].str < 0)
			goto cleanup;
		sm->n_label = 4;
		sm->label = lbp;
		samplep[nsamples++] = sm;
	}
	prof.n_sample = nsamples;
	prof.sample = samplep;

	const char *const tkeys[] = { "start_realtime_ns", "start_time_ns", "time_ns", "time_nanos", NULL };
	const char *const dkeys[] = { "duration_ns", "duration_nanos", NULL };
	prof.time_nanos = meta_int(p, tkeys);
	prof.duration_nanos = meta_int(p, dkeys);

	/* Warnings travel as comments (pprof -comments shows them). */
	for (const char *w = p->warnings; w && *w; w = strchr(w, '\n') ? strchr(w, '\n') + 1 : w + strlen(w))
		ncomments++;
	comments = calloc(ncomments ? ncomments : 1, sizeof(*comments));
	if (!comments)
		goto cleanup;
	ncomments = 0;
	for (const char *w = p->warnings; w && *w;) {
		const char *nl = strchr(w, '\n');
		size_t l = nl ? (size_t)(nl - w) : strlen(w);
		comments[ncomments] = strtab_add_owned(&st, strndup(w, l));
		if (comments[ncomments++] < 0)
			goto cleanup;
		w = nl ? nl + 1 : w + l;
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
	free(values);
	free(locids);
	free(labelp);
	free(labels);
	free(samplep);
	free(samples);
	free(linep);
	free(lines);
	free(locp);
	free(locs);
	free(fnp);
	free(fns);
	free(mapid_of_frame);
	free(mapp);
	free(maps);
	free(vtp);
	free(vt);
	strtab_free(&st);
	return err;
}
