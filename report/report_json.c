/* The JSON report: the whole profile (frames, stacks, per-event totals) plus the
 * summaries a script wants without recomputing them (layers, top frames), and with
 * --diff a per-frame comparison in percent of each side's total. The schema is
 * docs/report-json-schema.json; bump "version" on any incompatible change. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/session_format.h"
#include "common/util.h"
#include "common/steal_clock.h"
#include "report/report_util.h"

#define DEFAULT_TOP 25

static void kv_str(struct vp_out *o, const char *key, const char *value)
{
	vp_json_str(o, key, false);
	vp_out__puts(o, ":");
	vp_json_str(o, value, false);
}

/* A compiled Java frame's compile tier (issue 25): "tier" ("C1" or "C2", as the text
 * report's [jit C1] says it) and HotSpot's "compile_level" (1-3 C1, 4 C2). Frames whose
 * tier is unknown (interpreted, native, or maps without levels) have neither key. The
 * tier is part of a frame's identity: a method's C1 and C2 code are two frames. */
static void tier_fields(struct vp_out *o, const struct vp_frame *f)
{
	const char *tn = vp_tier_name((uint8_t)vp_tier_level(f->tier));   /* OSR or not, one tier */
	if (!*tn)
		return;
	vp_out__puts(o, ",");
	kv_str(o, "tier", tn);
	vp_out__printf(o, ",\"compile_level\":%u", vp_tier_level(f->tier));
}

/* How the user stacks ended, as numbers (the loader keeps them as stack_end.* session
 * metadata); "truncated" is every ending but the root, unknown endings not counted. */
static void stack_ends(const struct vp_profile *p, struct vp_out *o)
{
	uint64_t truncated = 0;
	bool any = false;

	for (int k = 0; k < VP_WALK__COUNT; k++) {
		char key[48];
		const char *v;

		snprintf(key, sizeof(key), "stack_end.%s", vp_walk_end_name(k));
		if (!(v = vp_profile__meta(p, key)))
			continue;
		uint64_t n = strtoull(v, NULL, 10);
		vp_out__printf(o, "%s\"%s\":%llu", any ? "," : "\"stack_ends\":{", vp_walk_end_name(k),
			       (unsigned long long)n);
		any = true;
		if (k != VP_WALK_ROOT && k != VP_WALK_UNKNOWN)
			truncated += n;
	}
	if (any)
		vp_out__printf(o, ",\"truncated\":%llu},\n", (unsigned long long)truncated);
}

/* %.6g keeps the file short while holding percentages exactly enough; JSON has no NaN. */
static void num(struct vp_out *o, double v)
{
	vp_out__printf(o, "%.6g", v == v ? v : 0.0);
}

static void write_u64_array(struct vp_out *o, const uint64_t *v, int n)
{
	vp_out__puts(o, "[");
	for (int i = 0; i < n; i++)
		vp_out__printf(o, "%s%llu", i ? "," : "", (unsigned long long)v[i]);
	vp_out__puts(o, "]");
}

struct rank {
	uint32_t id;
	uint64_t key, other;
};

static int rank_cmp(const void *a, const void *b)
{
	const struct rank *x = a, *y = b;
	if (x->key != y->key)
		return x->key < y->key ? 1 : -1;
	if (x->other != y->other)
		return x->other < y->other ? 1 : -1;
	return x->id < y->id ? -1 : x->id > y->id;
}

static void write_top(struct vp_out *o, const struct vp_profile *p, const struct vp_frame_count *c, uint64_t tot,
		      const struct vp_report_opts *opts)
{
	int top = opts && opts->top > 0 ? opts->top : DEFAULT_TOP;
	bool by_total = opts && opts->sort == VP_SORT_TOTAL;
	struct rank *r = malloc((p->nframes ? p->nframes : 1) * sizeof(*r));
	size_t n = 0;
	if (!r) {
		o->err = o->err ? o->err : -ENOMEM;
		return;
	}
	for (size_t i = 0; i < p->nframes; i++) {
		if (!c[i].total)
			continue;
		r[n].id = (uint32_t)i;
		r[n].key = by_total ? c[i].total : c[i].self;
		r[n].other = by_total ? c[i].self : c[i].total;
		n++;
	}
	vp_sort(r, n, sizeof(*r), rank_cmp);
	vp_out__puts(o, "\"top\":[");
	for (size_t i = 0; i < n && i < (size_t)top; i++) {
		const struct vp_frame *f = &p->frames[r[i].id];
		const struct vp_frame_count *fc = &c[r[i].id];
		vp_out__printf(o, "%s\n{\"id\":%u,", i ? "," : "", r[i].id);
		kv_str(o, "name", f->name);
		vp_out__puts(o, ",");
		kv_str(o, "layer", vp_layer_name(f->layer));
		vp_out__puts(o, ",");
		kv_str(o, "image", f->image);
		tier_fields(o, f);
		vp_out__printf(o, ",\"self\":%llu,\"total\":%llu,\"self_pct\":", (unsigned long long)fc->self,
			       (unsigned long long)fc->total);
		num(o, vp_pct(fc->self, tot));
		vp_out__puts(o, ",\"total_pct\":");
		num(o, vp_pct(fc->total, tot));
		vp_out__puts(o, "}");
	}
	vp_out__puts(o, "]");
	free(r);
}

/* Per-frame comparison over the union of both profiles' frames, as percentages of each
 * side's total, so that recordings of different lengths compare. */
static int write_diff(struct vp_out *o, const struct vp_profile *p, const struct vp_profile *base, int ev,
		      const struct vp_frame_count *c, uint64_t tot)
{
	struct vp_keyspace k;
	int err = vp_keyspace__init(&k, p, base);
	if (err)
		return err;
	int bev = vp_event_match(p, ev, base);
	struct vp_frame_count *bc = vp_frame_counts(base, bev);
	struct vp_frame_count *uc = calloc(k.u->nframes ? k.u->nframes : 1, sizeof(*uc));
	if (!bc || !uc) {
		err = -ENOMEM;
		goto cleanup;
	}
	for (size_t i = 0; i < base->nframes; i++) {
		uc[k.base_map[i]].self += bc[i].self;
		uc[k.base_map[i]].total += bc[i].total;
	}
	uint64_t btot = vp_event_samples(base, bev);
	vp_out__puts(o, ",\n\"diff\":{\"event\":");
	vp_json_str(o, p->events[ev].name, false);
	vp_out__printf(o, ",\"base_event_found\":%s,\"total\":%llu,\"base_total\":%llu,\"frames\":[",
		       bev >= 0 ? "true" : "false", (unsigned long long)tot, (unsigned long long)btot);
	bool first = true;
	for (size_t i = 0; i < k.u->nframes; i++) {
		uint64_t ns = i < p->nframes ? c[i].self : 0, nt = i < p->nframes ? c[i].total : 0;
		uint64_t bs = uc[i].self, bt = uc[i].total;
		if (!nt && !bt)
			continue;
		const struct vp_frame *f = &k.u->frames[i];
		double sp = vp_pct(ns, tot), tp = vp_pct(nt, tot), bsp = vp_pct(bs, btot), btp = vp_pct(bt, btot);
		vp_out__printf(o, "%s\n{", first ? "" : ",");
		first = false;
		kv_str(o, "name", f->name);
		vp_out__puts(o, ",");
		kv_str(o, "layer", vp_layer_name(f->layer));
		vp_out__puts(o, ",");
		kv_str(o, "image", f->image);
		vp_out__printf(o, ",\"id\":%lld,\"self\":%llu,\"total\":%llu,\"base_self\":%llu,\"base_total\":%llu",
			       i < p->nframes ? (long long)i : -1LL, (unsigned long long)ns, (unsigned long long)nt,
			       (unsigned long long)bs, (unsigned long long)bt);
		vp_out__puts(o, ",\"self_pct\":");
		num(o, sp);
		vp_out__puts(o, ",\"base_self_pct\":");
		num(o, bsp);
		vp_out__puts(o, ",\"delta_self_pct\":");
		num(o, sp - bsp);
		vp_out__puts(o, ",\"total_pct\":");
		num(o, tp);
		vp_out__puts(o, ",\"base_total_pct\":");
		num(o, btp);
		vp_out__puts(o, ",\"delta_total_pct\":");
		num(o, tp - btp);
		vp_out__puts(o, "}");
	}
	vp_out__puts(o, "]}");
cleanup:
	free(bc);
	free(uc);
	vp_keyspace__fini(&k);
	return err;
}

/* "events": each event's name and unit, and what one of its samples is. */
static void write_events(struct vp_out *o, const struct vp_profile *p)
{
	vp_out__puts(o, "\"events\":[");
	for (int e = 0; e < p->nevents; e++) {
		vp_out__puts(o, e ? ",{" : "{");
		kv_str(o, "name", p->events[e].name);
		vp_out__puts(o, ",");
		kv_str(o, "unit", p->events[e].unit);
		/* What a sample of it is: one sample of the event, or, for time measured at
		 * context switches and the wall view, a period of the recording's time event
		 * (its weight, in the unit above, is the time). */
		vp_out__printf(o, ",\"measured\":%s,\"samples_are\":", vp_event_measured(p, e) ? "true" : "false");
		vp_json_str(o, vp_event_measured(p, e) ? "periods of the time event; weight is the time" :
			       vp_event_estimated(p, e) ? "periods of the time event; weight is the time, estimated" : "samples",
			    false);
		/* The host's share estimated from late timers, apart from measured steal. */
		if (vp_event_estimated(p, e))
			vp_out__puts(o, ",\"estimated\":true");
		vp_out__puts(o, "}");
	}
}

/* The body of "totals": per event, its samples and weight. */
static void write_totals(struct vp_out *o, const struct vp_profile *p)
{
	for (int e = 0; e < p->nevents; e++) {
		vp_out__puts(o, e ? "," : "");
		vp_json_str(o, p->events[e].name, false);
		/* No steal clock ran: the steal event's figures are unknown, not 0. */
		if (!strcmp(p->events[e].name, "steal") && vp_profile__steal_unmeasured(p))
			vp_out__puts(o, ":{\"samples\":null,\"weight\":null,\"note\":\"" VP_STEAL_NOT_MEASURED "\"}");
		else
			vp_out__printf(o, ":{\"samples\":%llu,\"weight\":%llu}", (unsigned long long)vp_event_samples(p, e),
				       (unsigned long long)vp_event_weight(p, e));
	}
}

/* The body of "layers": layers by the leaf frame, where the samples landed, summing
 * to 100% per event. */
static void write_layers(struct vp_out *o, const struct vp_profile *p)
{
	uint64_t lay[VP_LAYER__COUNT][8] = { { 0 } }, evt[8] = { 0 };
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct vp_stack *s = &p->stacks[i];
		int l = s->nframes ? p->frames[s->frames[s->nframes - 1]].layer : VP_LAYER_UNKNOWN;
		for (int e = 0; e < p->nevents; e++) {
			lay[l][e] += s->samples[e];
			evt[e] += s->samples[e];
		}
	}
	for (int l = 0; l < VP_LAYER__COUNT; l++) {
		vp_out__puts(o, l ? ",\n{" : "\n{");
		kv_str(o, "layer", vp_layer_name(l));
		vp_out__puts(o, ",\"samples\":");
		write_u64_array(o, lay[l], p->nevents);
		vp_out__puts(o, ",\"percent\":[");
		for (int e = 0; e < p->nevents; e++) {
			vp_out__puts(o, e ? "," : "");
			num(o, vp_pct(lay[l][e], evt[e]));
		}
		vp_out__puts(o, "]}");
	}
}

/* The body of "stacks": frame ids leaf last, the thread, its container, the counts. */
static void write_stacks(struct vp_out *o, const struct vp_profile *p)
{
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct vp_stack *s = &p->stacks[i];
		vp_out__puts(o, i ? ",\n{\"frames\":[" : "\n{\"frames\":[");
		for (uint32_t k = 0; k < s->nframes; k++)
			vp_out__printf(o, "%s%u", k ? "," : "", s->frames[k]);
		vp_out__printf(o, "],\"pid\":%u,\"tid\":%u,", s->pid, s->tid);
		const char *cid = vp_profile__container_id(p, s->pid);
		if (*cid) {
			kv_str(o, "container", cid);
			vp_out__puts(o, ",");
		}
		kv_str(o, "comm", s->comm);
		vp_out__puts(o, ",\"samples\":");
		write_u64_array(o, s->samples, p->nevents);
		vp_out__puts(o, ",\"weight\":");
		write_u64_array(o, s->weight, p->nevents);
		vp_out__puts(o, "}");
	}
}

/* The body of "containers": the processes that ran in one. */
static void write_containers(struct vp_out *o, const struct vp_profile *p)
{
	const struct vp_proc_container *pc;
	size_t npc = vp_profile__containers(p, &pc);
	for (size_t i = 0, k = 0; i < npc; i++) {
		if (!pc[i].c.id[0])
			continue;
		vp_out__printf(o, "%s\n{\"pid\":%u,\"nspid\":%u,", k++ ? "," : "", pc[i].pid, pc[i].nspid);
		kv_str(o, "container", pc[i].c.id);
		if (pc[i].c.pod[0]) {
			vp_out__puts(o, ",");
			kv_str(o, "pod", pc[i].c.pod);
		}
		vp_out__puts(o, ",");
		kv_str(o, "cgroup", pc[i].cgroup);
		vp_out__puts(o, "}");
	}
}

/* The body of "frames": every frame, by id. */
static void write_frames(struct vp_out *o, const struct vp_profile *p)
{
	for (size_t i = 0; i < p->nframes; i++) {
		const struct vp_frame *f = &p->frames[i];
		vp_out__printf(o, "%s\n{\"id\":%zu,", i ? "," : "", i);
		kv_str(o, "name", f->name);
		vp_out__puts(o, ",");
		kv_str(o, "layer", vp_layer_name(f->layer));
		vp_out__puts(o, ",");
		kv_str(o, "image", f->image);
		tier_fields(o, f);
		vp_out__puts(o, ",");
		kv_str(o, "build_id", f->build_id);
		vp_out__puts(o, ",");
		kv_str(o, "file", f->file);
		vp_out__printf(o, ",\"line\":%u,\"addr\":%llu}", f->line, (unsigned long long)f->addr);
	}
}

/* The body of "warnings": one string per line of the session's warnings. */
static int write_warnings(struct vp_out *o, const struct vp_profile *p)
{
	bool first = true;
	for (const char *w = p->warnings; w && *w;) {
		const char *nl = strchr(w, '\n');
		size_t l = nl ? (size_t)(nl - w) : strlen(w);
		char *line = strndup(w, l);
		if (!line)
			return -ENOMEM;
		vp_out__puts(o, first ? "" : ",");
		first = false;
		vp_json_str(o, line, false);
		free(line);
		w = nl ? nl + 1 : w + l;
	}
	return 0;
}

int report_json(const struct vp_profile *p, const struct vp_profile *base, struct vp_out *o,
		const struct vp_report_opts *opts)
{
	int ev = opts ? opts->sort_event : 0;
	if (ev < 0 || (p->nevents && ev >= p->nevents))
		return -EINVAL;
	struct vp_frame_count *c = vp_frame_counts(p, p->nevents ? ev : -1);
	if (!c)
		return -ENOMEM;
	uint64_t tot = vp_event_samples(p, ev);
	int err = 0;

	vp_out__puts(o, "{\"schema\":\"viprof-report\",\"version\":1,\n\"session\":{");
	for (size_t i = 0; i < p->nmeta; i++) {
		if (i)
			vp_out__puts(o, ",");
		kv_str(o, p->meta[i].key, p->meta[i].value);
	}
	vp_out__printf(o, "},\n\"lost\":%llu,\"incomplete\":%s,\n", (unsigned long long)p->lost,
		       p->incomplete ? "true" : "false");
	stack_ends(p, o);
	write_events(o, p);
	vp_out__puts(o, "],\n\"sort_event\":");
	vp_json_str(o, p->nevents ? p->events[ev].name : "", false);
	vp_out__puts(o, ",\n\"totals\":{");
	write_totals(o, p);
	vp_out__puts(o, "},\n\"layers\":[");
	write_layers(o, p);
	vp_out__puts(o, "],\n");
	write_top(o, p, c, tot, opts);
	vp_out__puts(o, ",\n\"stacks\":[");
	write_stacks(o, p);
	vp_out__puts(o, "],\n\"containers\":[");
	write_containers(o, p);
	vp_out__puts(o, "],\n\"frames\":[");
	write_frames(o, p);
	vp_out__puts(o, "],\n\"warnings\":[");
	err = write_warnings(o, p);
	if (err)
		goto cleanup;
	vp_out__puts(o, "]");
	if (base && p->nevents) {
		err = write_diff(o, p, base, ev, c, tot);
		if (err)
			goto cleanup;
	}
	vp_out__puts(o, "}\n");
	err = o->err;
cleanup:
	free(c);
	return err;
}
