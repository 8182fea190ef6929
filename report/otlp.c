/* OTLP Profiles by hand (common/pbuf.h): see otlp.h. Messages are built inside out: each nested message
 * is written into a buffer of its own, then framed (tag, length) into its parent. */
#define _GNU_SOURCE
#include "report/otlp.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/pbuf.h"
#include "common/strtab.h"
#include "common/util.h"
#include "postproc/profile.h"

/* An AnyValue: a string, or an int. */
static void any_value(struct vp_buf *out, unsigned field, const char *s, int64_t i, struct vp_buf *tmp)
{
	if (s)
		vp_pb__str(tmp, 1, s);
	else {
		vp_pb__tag(tmp, 3, VP_PB_VARINT);
		vp_buf__varint(tmp, (uint64_t)i);
	}
	vp_pb__msg(out, field, tmp);
}

/* A resource's KeyValue (common.v1: key string 1, value AnyValue 2). */
static void key_value(struct vp_buf *out, unsigned field, const char *key, const char *s, struct vp_buf *kv, struct vp_buf *tmp)
{
	vp_pb__str(kv, 1, key);
	any_value(kv, 2, s, 0, tmp);
	vp_pb__msg(out, field, kv);
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

/* Tables, each with its null entry 0: mappings (none other: frames carry no address), then one
 * Function and one Location per frame (ids frame + 1), then the null link. */
static int dict_frames(struct vp_buf *dict, const struct vp_profile *p, struct vp_strtab *st, struct vp_buf *a, struct vp_buf *b)
{
	vp_pb__msg(dict, 1, a);                        /* mapping_table[0] */
	vp_pb__msg(dict, 2, a);                        /* location_table[0] */
	for (size_t f = 0; f < p->nframes; f++) {
		const struct vp_frame *fr = &p->frames[f];
		vp_pb__int(a, 1, 0);                   /* mapping_index: the null mapping */
		vp_pb__int(b, 1, (int64_t)f + 1);      /* Line.function_index */
		vp_pb__int(b, 2, fr->line);
		vp_pb__msg(a, 3, b);                   /* Location.lines */
		vp_pb__msg(dict, 2, a);
	}
	vp_pb__msg(dict, 3, a);                        /* function_table[0] */
	for (size_t f = 0; f < p->nframes; f++) {
		const struct vp_frame *fr = &p->frames[f];
		int32_t name = vp_strtab__id(st, fr->name), file = vp_strtab__id(st, *fr->file ? fr->file : fr->image);
		if (name < 0 || file < 0)
			return -ENOMEM;
		vp_pb__int(a, 1, name);
		vp_pb__int(a, 2, name);
		vp_pb__int(a, 3, file);
		vp_pb__msg(dict, 3, a);
	}
	vp_pb__msg(dict, 4, a);                        /* link_table[0] */
	return 0;
}

/* Attributes: attribute_table[0] null, then four per stack (they differ by thread):
 * KeyValueAndUnit {key_strindex 1, value 2, unit_strindex 3}. attr_of_stack[i] is stack i's first. */
static int dict_attributes(struct vp_buf *dict, const struct vp_profile *p, struct vp_strtab *st, int32_t *attr_of_stack,
			   struct vp_buf *a, struct vp_buf *b)
{
	struct exe *exes = NULL;
	size_t nexes = 0;
	int err = -ENOMEM;
	int32_t k_pid = vp_strtab__id(st, "process.pid"), k_exe = vp_strtab__id(st, "process.executable.name");
	int32_t k_tid = vp_strtab__id(st, "thread.id"), k_tname = vp_strtab__id(st, "thread.name");
	if (k_pid < 0 || k_exe < 0 || k_tid < 0 || k_tname < 0)
		goto cleanup;
	vp_pb__msg(dict, 6, a);
	exes = malloc((p->nmappings ? p->nmappings : 1) * sizeof(*exes));
	if (!exes)
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
		vp_pb__int(a, 1, k_pid);
		any_value(a, 2, NULL, s->pid, b);
		vp_pb__msg(dict, 6, a);
		vp_pb__int(a, 1, k_exe);
		any_value(a, 2, exe, 0, b);
		vp_pb__msg(dict, 6, a);
		vp_pb__int(a, 1, k_tid);
		any_value(a, 2, NULL, s->tid, b);
		vp_pb__msg(dict, 6, a);
		vp_pb__int(a, 1, k_tname);
		any_value(a, 2, s->comm ? s->comm : "", 0, b);
		vp_pb__msg(dict, 6, a);
		nattr += 4;
	}
	err = 0;
cleanup:
	free(exes);
	return err;
}

/* stack_table: [0] null, then stack i + 1 = p->stacks[i], leaf first. */
static int dict_stacks(struct vp_buf *dict, const struct vp_profile *p, struct vp_buf *a)
{
	int32_t *idx = NULL;
	size_t idx_cap = 0;
	int err = -ENOMEM;
	vp_pb__msg(dict, 7, a);
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct vp_stack *s = &p->stacks[i];
		if (vp_grow((void **)&idx, &idx_cap, s->nframes + 1, sizeof(*idx)))
			goto cleanup;
		for (uint32_t k = 0; k < s->nframes; k++)
			idx[k] = (int32_t)s->frames[s->nframes - 1 - k] + 1;
		vp_pb__packed_i32(a, 1, idx, s->nframes);
		vp_pb__msg(dict, 7, a);
	}
	err = 0;
cleanup:
	free(idx);
	return err;
}

/* The profile: sample_type 1, samples 2, time 3 (fixed64), duration 4, period_type 5,
 * period 6. A sample: stack_index 1, attribute_indices 2, values 4. */
static void profile_msg(struct vp_buf *prof, const struct vp_profile *p, const struct vp_otlp_meta *m, bool cpu, int32_t s_type,
			int32_t s_unit, const int32_t *attr_of_stack, struct vp_buf *a)
{
	vp_pb__int(a, 1, s_type);
	vp_pb__int(a, 2, s_unit);
	vp_pb__msg(prof, 1, a);
	uint64_t nsamp = 0, weight = 0;
	for (size_t i = 0; i < p->nstacks && p->nevents; i++) {
		const struct vp_stack *s = &p->stacks[i];
		uint64_t v = cpu ? s->weight[0] : s->samples[0];
		if (!v)
			continue;
		nsamp += s->samples[0];
		weight += s->weight[0];
		vp_pb__int(a, 1, (int64_t)i + 1);
		int32_t ai[4] = { attr_of_stack[i], attr_of_stack[i] + 1, attr_of_stack[i] + 2, attr_of_stack[i] + 3 };
		vp_pb__packed_i32(a, 2, ai, 4);
		vp_pb__packed_u64(a, 4, &v, 1);  /* values */
		vp_pb__msg(prof, 2, a);
	}
	vp_pb__fixed64(prof, 3, m->time_unix_nano);
	vp_pb__uint(prof, 4, m->duration_nano);
	vp_pb__int(a, 1, s_type);
	vp_pb__int(a, 2, s_unit);
	vp_pb__msg(prof, 5, a);
	vp_pb__int(prof, 6, cpu && nsamp ? (int64_t)(weight / nsamp) : 1);
}

/* ExportProfilesServiceRequest { resource_profiles 1, dictionary 2 }; ResourceProfiles
 * { resource 1 { attributes 1 }, scope_profiles 2 { scope 1 { name 1, version 2 },
 * profiles 2 } }. */
static void request_msg(struct vp_buf *req, struct vp_buf *dict, struct vp_buf *prof, const struct vp_otlp_meta *m,
			struct vp_buf *a, struct vp_buf *b)
{
	struct vp_buf rp = { 0 }, res = { 0 }, sp = { 0 };
	key_value(&res, 1, "host.name", m->host ? m->host : "", a, b);
	key_value(&res, 1, "service.name", m->service ? m->service : "viprof", a, b);
	vp_pb__msg(&rp, 1, &res);
	vp_pb__str(a, 1, "viprof");
	vp_pb__str(a, 2, VIPROF_VERSION);
	vp_pb__msg(&sp, 1, a);
	vp_pb__msg(&sp, 2, prof);
	vp_pb__msg(&rp, 2, &sp);
	vp_pb__msg(req, 1, &rp);
	vp_pb__msg(req, 2, dict);
	free(rp.b);
	free(res.b);
	free(sp.b);
}

int vp_otlp__encode(const struct vp_profile *p, const struct vp_otlp_meta *m, uint8_t **buf, size_t *len)
{
	struct vp_buf dict = { 0 }, req = { 0 }, prof = { 0 }, a = { 0 }, b = { 0 };
	struct vp_strtab st = { 0 };
	int32_t *attr_of_stack = NULL;
	int err = -ENOMEM;
	*buf = NULL;
	*len = 0;
	if (vp_strtab__id(&st, "") != 0)
		goto cleanup;
	bool cpu = p->nevents > 0 && !strcmp(p->events[0].unit, "nanoseconds");
	int32_t s_type = vp_strtab__id(&st, cpu ? "cpu" : p->nevents ? p->events[0].name : "samples");
	int32_t s_unit = vp_strtab__id(&st, cpu ? "nanoseconds" : "count");

	attr_of_stack = calloc(p->nstacks ? p->nstacks : 1, sizeof(*attr_of_stack));
	if (!attr_of_stack)
		goto cleanup;
	if ((err = dict_frames(&dict, p, &st, &a, &b)) || (err = dict_attributes(&dict, p, &st, attr_of_stack, &a, &b)) ||
	    (err = dict_stacks(&dict, p, &a)))
		goto cleanup;
	err = -ENOMEM;
	profile_msg(&prof, p, m, cpu, s_type, s_unit, attr_of_stack, &a);

	/* The strings last: everything above has interned its own. */
	for (size_t i = 0; i < st.n; i++)
		vp_pb__str(&dict, 5, st.v[i]);

	request_msg(&req, &dict, &prof, m, &a, &b);
	if (req.err || a.err || b.err)
		goto cleanup;
	*buf = req.b;
	*len = req.len;
	req.b = NULL;
	err = 0;
cleanup:
	free(req.b);
	free(dict.b);
	free(prof.b);
	free(a.b);
	free(b.b);
	free(attr_of_stack);
	vp_strtab__free(&st);
	return err;
}
