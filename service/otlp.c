/* OTLP Profiles by hand: see otlp.h. Messages are built inside out: each nested message
 * is written into a buffer of its own, then framed (tag, length) into its parent. */
#define _GNU_SOURCE
#include "service/otlp.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "postproc/profile.h"

/* A growable byte buffer whose error sticks once an allocation fails. */
struct pb {
	uint8_t *b;
	size_t n, cap;
	bool err;
};

static void pb_raw(struct pb *p, const void *d, size_t n)
{
	if (p->err)
		return;
	if (vp_grow((void **)&p->b, &p->cap, p->n + n, 1)) {
		p->err = true;
		return;
	}
	memcpy(p->b + p->n, d, n);
	p->n += n;
}

static void pb_varint(struct pb *p, uint64_t v)
{
	uint8_t t[10];
	int k = 0;
	do {
		t[k++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		v >>= 7;
	} while (v);
	pb_raw(p, t, (size_t)k);
}

enum { WT_VARINT = 0, WT_FIXED64 = 1, WT_LEN = 2 };

static void pb_tag(struct pb *p, unsigned field, unsigned wt)
{
	pb_varint(p, (uint64_t)field << 3 | wt);
}

/* proto3 leaves zero scalars out. */
static void pb_uint(struct pb *p, unsigned field, uint64_t v)
{
	if (!v)
		return;
	pb_tag(p, field, WT_VARINT);
	pb_varint(p, v);
}

/* int32/int64 fields: negative values are ten-byte varints of their two's complement. */
static void pb_int(struct pb *p, unsigned field, int64_t v)
{
	pb_uint(p, field, (uint64_t)v);
}

static void pb_fixed64(struct pb *p, unsigned field, uint64_t v)
{
	if (!v)
		return;
	uint8_t t[8];
	for (int i = 0; i < 8; i++)
		t[i] = (uint8_t)(v >> (8 * i));
	pb_tag(p, field, WT_FIXED64);
	pb_raw(p, t, 8);
}

static void pb_bytes(struct pb *p, unsigned field, const void *d, size_t n)
{
	pb_tag(p, field, WT_LEN);
	pb_varint(p, n);
	pb_raw(p, d, n);
}

static void pb_str(struct pb *p, unsigned field, const char *s)
{
	pb_bytes(p, field, s, strlen(s));
}

/* Frames child (then emptied for reuse) into p as field. */
static void pb_msg(struct pb *p, unsigned field, struct pb *child)
{
	p->err |= child->err;
	pb_bytes(p, field, child->b, child->n);
	child->n = 0;
	child->err = false;
}

/* A packed repeated int32 (indices are never negative). */
static void pb_packed(struct pb *p, unsigned field, const int32_t *v, size_t n, struct pb *tmp)
{
	if (!n)
		return;
	for (size_t i = 0; i < n; i++)
		pb_varint(tmp, (uint64_t)v[i]);
	pb_msg(p, field, tmp);
}

/* The dictionary's string table: interned, "" at 0. Linear probing over a power of two. */
struct strs {
	const char **v;
	size_t n, cap;
	int32_t *slot;
	size_t size;
};

static uint64_t hash_str(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return h;
}

static int32_t str_id(struct strs *t, const char *s)
{
	if (!s)
		s = "";
	if ((t->n + 1) * 2 > t->size) {
		size_t size = t->size ? t->size * 2 : 1024;
		int32_t *slot = malloc(size * sizeof(*slot));
		if (!slot)
			return -1;
		memset(slot, 0xff, size * sizeof(*slot));
		for (size_t i = 0; i < t->n; i++) {
			size_t j = hash_str(t->v[i]) & (size - 1);
			while (slot[j] >= 0)
				j = (j + 1) & (size - 1);
			slot[j] = (int32_t)i;
		}
		free(t->slot);
		t->slot = slot;
		t->size = size;
	}
	size_t j = hash_str(s) & (t->size - 1);
	for (; t->slot[j] >= 0; j = (j + 1) & (t->size - 1))
		if (!strcmp(t->v[t->slot[j]], s))
			return t->slot[j];
	if (vp_grow((void **)&t->v, &t->cap, t->n + 1, sizeof(*t->v)))
		return -1;
	t->v[t->n] = s;
	t->slot[j] = (int32_t)t->n;
	return (int32_t)t->n++;
}

/* An AnyValue: a string, or an int. */
static void any_value(struct pb *out, unsigned field, const char *s, int64_t i, struct pb *tmp)
{
	if (s)
		pb_str(tmp, 1, s);
	else {
		pb_tag(tmp, 3, WT_VARINT);
		pb_varint(tmp, (uint64_t)i);
	}
	pb_msg(out, field, tmp);
}

/* A resource's KeyValue (common.v1: key string 1, value AnyValue 2). */
static void key_value(struct pb *out, unsigned field, const char *key, const char *s, struct pb *kv, struct pb *tmp)
{
	pb_str(kv, 1, key);
	any_value(kv, 2, s, 0, tmp);
	pb_msg(out, field, kv);
}

static const char *base_name(const char *path)
{
	const char *b = strrchr(path, '/');
	return b ? b + 1 : path;
}

/* Each process's executable, by pid. */
struct exe {
	uint32_t pid;
	const char *name;
};

static int cmp_exe(const void *a, const void *b)
{
	const struct exe *x = a, *y = b;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

int vp_otlp__encode(const struct vp_profile *p, const struct vp_otlp_meta *m, uint8_t **buf, size_t *len)
{
	struct pb dict = { 0 }, req = { 0 }, prof = { 0 }, a = { 0 }, b = { 0 };
	struct strs st = { 0 };
	int32_t *idx = NULL, *attr_of_stack = NULL;
	struct exe *exes = NULL;
	size_t nexes = 0;
	size_t idx_cap = 0;
	int err = -ENOMEM;
	*buf = NULL;
	*len = 0;
	if (str_id(&st, "") != 0)
		goto cleanup;
	bool cpu = p->nevents > 0 && !strcmp(p->events[0].unit, "nanoseconds");
	int32_t s_type = str_id(&st, cpu ? "cpu" : p->nevents ? p->events[0].name : "samples");
	int32_t s_unit = str_id(&st, cpu ? "nanoseconds" : "count");

	/* Tables, each with its null entry 0: mappings (none other: frames carry no
	 * address), then one Function and one Location per frame (ids frame + 1). */
	pb_msg(&dict, 1, &a);                      /* mapping_table[0] */
	pb_msg(&dict, 2, &a);                      /* location_table[0] */
	for (size_t f = 0; f < p->nframes; f++) {
		const struct vp_frame *fr = &p->frames[f];
		pb_int(&a, 1, 0);                  /* mapping_index: the null mapping */
		pb_int(&b, 1, (int64_t)f + 1);     /* Line.function_index */
		pb_int(&b, 2, fr->line);
		pb_msg(&a, 3, &b);                 /* Location.lines */
		pb_msg(&dict, 2, &a);
	}
	pb_msg(&dict, 3, &a);                      /* function_table[0] */
	for (size_t f = 0; f < p->nframes; f++) {
		const struct vp_frame *fr = &p->frames[f];
		int32_t name = str_id(&st, fr->name), file = str_id(&st, *fr->file ? fr->file : fr->image);
		if (name < 0 || file < 0)
			goto cleanup;
		pb_int(&a, 1, name);
		pb_int(&a, 2, name);
		pb_int(&a, 3, file);
		pb_msg(&dict, 3, &a);
	}
	pb_msg(&dict, 4, &a);                      /* link_table[0] */

	/* Attributes: attribute_table[0] null, then four per stack (they differ by thread):
	 * KeyValueAndUnit {key_strindex 1, value 2, unit_strindex 3}. */
	int32_t k_pid = str_id(&st, "process.pid"), k_exe = str_id(&st, "process.executable.name");
	int32_t k_tid = str_id(&st, "thread.id"), k_tname = str_id(&st, "thread.name");
	if (k_pid < 0 || k_exe < 0 || k_tid < 0 || k_tname < 0)
		goto cleanup;
	pb_msg(&dict, 6, &a);
	attr_of_stack = calloc(p->nstacks ? p->nstacks : 1, sizeof(*attr_of_stack));
	exes = malloc((p->nmappings ? p->nmappings : 1) * sizeof(*exes));
	if (!attr_of_stack || !exes)
		goto cleanup;
	for (size_t k = 0; k < p->nmappings; k++)
		if (p->mappings[k].exe && p->mappings[k].pid)
			exes[nexes++] = (struct exe){ .pid = p->mappings[k].pid, .name = base_name(p->mappings[k].file) };
	vp_sort(exes, nexes, sizeof(*exes), cmp_exe);
	int32_t nattr = 1;
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct vp_stack *s = &p->stacks[i];
		/* The process's name: its executable's file name, else the thread's name. */
		struct exe key = { .pid = s->pid };
		const struct exe *x = nexes ? bsearch(&key, exes, nexes, sizeof(*exes), cmp_exe) : NULL;
		const char *exe = x ? x->name : s->comm ? s->comm : "";
		attr_of_stack[i] = nattr;
		pb_int(&a, 1, k_pid);
		any_value(&a, 2, NULL, s->pid, &b);
		pb_msg(&dict, 6, &a);
		pb_int(&a, 1, k_exe);
		any_value(&a, 2, exe, 0, &b);
		pb_msg(&dict, 6, &a);
		pb_int(&a, 1, k_tid);
		any_value(&a, 2, NULL, s->tid, &b);
		pb_msg(&dict, 6, &a);
		pb_int(&a, 1, k_tname);
		any_value(&a, 2, s->comm ? s->comm : "", 0, &b);
		pb_msg(&dict, 6, &a);
		nattr += 4;
	}
	/* stack_table: [0] null, then stack i + 1 = p->stacks[i], leaf first. */
	pb_msg(&dict, 7, &a);
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct vp_stack *s = &p->stacks[i];
		if (vp_grow((void **)&idx, &idx_cap, s->nframes + 1, sizeof(*idx)))
			goto cleanup;
		for (uint32_t k = 0; k < s->nframes; k++)
			idx[k] = (int32_t)s->frames[s->nframes - 1 - k] + 1;
		pb_packed(&a, 1, idx, s->nframes, &b);
		pb_msg(&dict, 7, &a);
	}

	/* The profile: sample_type 1, samples 2, time 3 (fixed64), duration 4, period_type 5,
	 * period 6. A sample: stack_index 1, attribute_indices 2, values 4. */
	pb_int(&a, 1, s_type);
	pb_int(&a, 2, s_unit);
	pb_msg(&prof, 1, &a);
	uint64_t nsamp = 0, weight = 0;
	for (size_t i = 0; i < p->nstacks && p->nevents; i++) {
		const struct vp_stack *s = &p->stacks[i];
		uint64_t v = cpu ? s->weight[0] : s->samples[0];
		if (!v)
			continue;
		nsamp += s->samples[0];
		weight += s->weight[0];
		pb_int(&a, 1, (int64_t)i + 1);
		int32_t ai[4] = { attr_of_stack[i], attr_of_stack[i] + 1, attr_of_stack[i] + 2, attr_of_stack[i] + 3 };
		pb_packed(&a, 2, ai, 4, &b);
		pb_varint(&b, v);
		pb_msg(&a, 4, &b);  /* values, packed */
		pb_msg(&prof, 2, &a);
	}
	pb_fixed64(&prof, 3, m->time_unix_nano);
	pb_uint(&prof, 4, m->duration_nano);
	pb_int(&a, 1, s_type);
	pb_int(&a, 2, s_unit);
	pb_msg(&prof, 5, &a);
	pb_int(&prof, 6, cpu && nsamp ? (int64_t)(weight / nsamp) : 1);

	/* The strings last: everything above has interned its own. */
	for (size_t i = 0; i < st.n; i++)
		pb_str(&dict, 5, st.v[i]);

	/* ExportProfilesServiceRequest { resource_profiles 1, dictionary 2 }; ResourceProfiles
	 * { resource 1 { attributes 1 }, scope_profiles 2 { scope 1 { name 1, version 2 },
	 * profiles 2 } }. */
	struct pb rp = { 0 }, res = { 0 }, sp = { 0 };
	key_value(&res, 1, "host.name", m->host ? m->host : "", &a, &b);
	key_value(&res, 1, "service.name", m->service ? m->service : "viprof", &a, &b);
	pb_msg(&rp, 1, &res);
	pb_str(&a, 1, "viprof");
	pb_str(&a, 2, VIPROF_VERSION);
	pb_msg(&sp, 1, &a);
	pb_msg(&sp, 2, &prof);
	pb_msg(&rp, 2, &sp);
	pb_msg(&req, 1, &rp);
	pb_msg(&req, 2, &dict);
	free(rp.b);
	free(res.b);
	free(sp.b);
	if (req.err || a.err || b.err)
		goto cleanup;
	*buf = req.b;
	*len = req.n;
	req.b = NULL;
	err = 0;
cleanup:
	free(req.b);
	free(dict.b);
	free(prof.b);
	free(a.b);
	free(b.b);
	free(idx);
	free(attr_of_stack);
	free(exes);
	free(st.v);
	free(st.slot);
	return err;
}
