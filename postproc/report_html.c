/* The HTML flame graph: one self-contained file (postproc/flame.html, embedded at build
 * time) with the call tree embedded as JSON. The tree is merged here, in C, so that the
 * page only has to draw it: every node is [frame, value, children(, base)] in preorder,
 * children sorted by name as flamegraph.pl does. With --diff the base profile's counts
 * ride along on the new profile's tree and the page colours by the change in share. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "postproc/report_util.h"

extern const char vp_flame_html[];   /* generated from flame.html, NUL-terminated */

#define ROOT_FRAME UINT32_MAX
#define NONE UINT32_MAX

struct node {
	uint32_t frame, parent;
	uint32_t first_child, next_sibling;
	uint64_t value, base;
};

struct tree {
	struct node *n;
	size_t len, cap;
	uint32_t *slot;     /* (parent, frame) -> node, open addressing */
	size_t size;
};

static uint64_t child_hash(uint32_t parent, uint32_t frame)
{
	uint64_t h = ((uint64_t)parent << 32 | frame) * 0x9e3779b97f4a7c15ull;
	return h ^ (h >> 29);
}

static int tree_rehash(struct tree *t)
{
	size_t size = t->size ? t->size * 2 : 4096;
	uint32_t *slot = malloc(size * sizeof(*slot));
	if (!slot)
		return -ENOMEM;
	memset(slot, 0xff, size * sizeof(*slot));
	for (size_t i = 1; i < t->len; i++) {
		size_t j = child_hash(t->n[i].parent, t->n[i].frame) & (size - 1);
		while (slot[j] != NONE)
			j = (j + 1) & (size - 1);
		slot[j] = (uint32_t)i;
	}
	free(t->slot);
	t->slot = slot;
	t->size = size;
	return 0;
}

static uint32_t tree_add_node(struct tree *t, uint32_t parent, uint32_t frame)
{
	if (t->len == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 4096;
		struct node *n = realloc(t->n, cap * sizeof(*n));
		if (!n)
			return NONE;
		t->n = n;
		t->cap = cap;
	}
	uint32_t id = (uint32_t)t->len++;
	t->n[id] = (struct node){ .frame = frame, .parent = parent, .first_child = NONE, .next_sibling = NONE };
	if (parent != NONE) {
		t->n[id].next_sibling = t->n[parent].first_child;
		t->n[parent].first_child = id;
	}
	return id;
}

static uint32_t tree_child(struct tree *t, uint32_t parent, uint32_t frame)
{
	if ((t->len + 1) * 2 > t->size && tree_rehash(t))
		return NONE;
	size_t j = child_hash(parent, frame) & (t->size - 1);
	for (; t->slot[j] != NONE; j = (j + 1) & (t->size - 1)) {
		const struct node *c = &t->n[t->slot[j]];
		if (c->parent == parent && c->frame == frame)
			return t->slot[j];
	}
	uint32_t id = tree_add_node(t, parent, frame);
	if (id != NONE)
		t->slot[j] = id;
	return id;
}

/* Adds one stack's count along its path; frames are mapped through map when not NULL. */
static int tree_add(struct tree *t, const struct vp_stack *s, const uint32_t *map, uint64_t v, bool base)
{
	uint32_t cur = 0;
	if (base)
		t->n[0].base += v;
	else
		t->n[0].value += v;
	for (uint32_t k = 0; k < s->nframes; k++) {
		uint32_t f = map ? map[s->frames[k]] : s->frames[k];
		cur = tree_child(t, cur, f);
		if (cur == NONE)
			return -ENOMEM;
		if (base)
			t->n[cur].base += v;
		else
			t->n[cur].value += v;
	}
	return 0;
}

struct sort_ctx {
	const struct vp_profile *prof;
	const struct node *nodes;
};

static int child_cmp(const void *a, const void *b, void *arg)
{
	const struct sort_ctx *c = arg;
	const struct node *x = &c->nodes[*(const uint32_t *)a], *y = &c->nodes[*(const uint32_t *)b];
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
static char *make_title(const struct vp_profile *p, int ev, uint64_t samples, bool diff)
{
	static const char *const k_rate[] = { "rate", "freq", "frequency", NULL };
	static const char *const k_dur[] = { "duration_ns", "duration_nanos", NULL };
	static const char *const k_host[] = { "hostname", "host", NULL };
	static const char *const k_hv[] = { "probe.hypervisor", "hypervisor", NULL };
	static const char *const k_pmu[] = { "probe.pmu.device", "pmu", NULL };
	static const char *const k_why[] = { "event.why", "probe.default_event.why", NULL };
	const char *rate = meta_any(p, k_rate), *dur = meta_any(p, k_dur), *host = meta_any(p, k_host);
	const char *hv = meta_any(p, k_hv), *pmu = meta_any(p, k_pmu), *why = meta_any(p, k_why);
	char *t = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&t, &len);
	if (!f)
		return NULL;
	fprintf(f, "%s%s, %llu samples", diff ? "Differential flame graph: " : "Flame graph: ",
		p->nevents ? p->events[ev].name : "no events", (unsigned long long)samples);
	if (rate)
		fprintf(f, " at %s Hz", rate);
	if (dur)
		fprintf(f, " in %.1f s", strtod(dur, NULL) / 1e9);
	if (host)
		fprintf(f, " on %s", host);
	if (hv || pmu) {
		fprintf(f, " (");
		if (hv)
			fprintf(f, "hypervisor: %s%s", hv, pmu ? "; " : "");
		if (pmu)
			fprintf(f, "PMU: %s", pmu);
		fprintf(f, ")");
	}
	/* Whether this is the PMU or the hrtimer fallback, in the recorder's words. */
	if (why && p->nevents && !strncmp(why, p->events[ev].name, strlen(p->events[ev].name)))
		fprintf(f, " \xe2\x80\x94 %s", why);
	fclose(f);
	return t;
}

/* One tree in preorder, [frame, value, nchildren(, base)] per node; only nodes with
 * samples in the new profile. */
static int write_tree(struct vp_out *o, const struct vp_keyspace *k, const struct tree *t, const uint32_t *fidx,
		      bool base)
{
	uint32_t *kids = malloc(t->len * sizeof(*kids));
	uint32_t *stack = malloc(t->len * sizeof(*stack));
	if (!kids || !stack) {
		free(kids);
		free(stack);
		return -ENOMEM;
	}
	vp_out__puts(o, "[");
	struct sort_ctx sc = { .prof = k->u, .nodes = t->n };
	size_t sp = 0, nout = 0;
	stack[sp++] = 0;
	while (sp) {
		uint32_t id = stack[--sp];
		const struct node *nd = &t->n[id];
		size_t nk = 0;
		for (uint32_t c = nd->first_child; c != NONE; c = t->n[c].next_sibling)
			if (t->n[c].value)
				kids[nk++] = c;
		if (nk > 1)
			qsort_r(kids, nk, sizeof(*kids), child_cmp, &sc);
		vp_out__printf(o, "%s%d,%llu,%zu", nout++ ? "," : "", id ? (int)fidx[nd->frame] - 1 : -1,
			       (unsigned long long)nd->value, nk);
		if (base)
			vp_out__printf(o, ",%llu", (unsigned long long)nd->base);
		if (nout % 16 == 0)
			vp_out__puts(o, "\n");
		/* Pushed in reverse so that the first child by name is emitted first. */
		for (size_t c = nk; c-- > 0;)
			stack[sp++] = kids[c];
	}
	vp_out__puts(o, "]");
	free(kids);
	free(stack);
	return 0;
}

/* The JSON data: html_safe escaping keeps "</script>" out of it. views[] are the
 * other events' trees (the page switches between them; NULL trees are skipped); the
 * drawn event's is t, written as "tree". */
static int write_data(struct vp_out *o, const struct vp_profile *p, const struct vp_profile *base, int ev,
		      const struct vp_keyspace *k, const struct tree *t, const char *title, const struct tree *views)
{
	uint32_t *fidx = calloc(k->u->nframes ? k->u->nframes : 1, sizeof(*fidx));
	int err = -ENOMEM;
	if (!fidx)
		goto cleanup;
	vp_out__puts(o, "{\"title\":");
	vp_json_str(o, title, true);
	vp_out__puts(o, ",\"event\":");
	vp_json_str(o, p->nevents ? p->events[ev].name : "", true);
	vp_out__printf(o, ",\"diff\":%s,\"total\":%llu,\"baseTotal\":%llu,\"meta\":[", base ? "true" : "false",
		       (unsigned long long)t->n[0].value, (unsigned long long)t->n[0].base);
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
	/* Only the frames the drawn trees use, numbered densely in output order. */
	for (size_t i = 1; i < t->len; i++)
		if (t->n[i].value)
			fidx[t->n[i].frame] = 1;
	for (int e = 0; views && e < p->nevents; e++)
		for (size_t i = 1; views[e].n && i < views[e].len; i++)
			if (views[e].n[i].value)
				fidx[views[e].n[i].frame] = 1;
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
		vp_out__puts(o, "]");
	}
	vp_out__puts(o, "],\n\"tree\":");
	if ((err = write_tree(o, k, t, fidx, base != NULL)))
		goto cleanup;
	/* Every event the page can switch to, in recorded order; the drawn one's tree is
	 * "tree" above (null here). */
	vp_out__puts(o, ",\n\"views\":[");
	for (int e = 0, nv = 0; views && e < p->nevents; e++) {
		if (e != ev && !views[e].n)
			continue;
		vp_out__puts(o, nv++ ? ",\n{\"event\":" : "{\"event\":");
		vp_json_str(o, p->events[e].name, true);
		vp_out__puts(o, ",\"unit\":");
		vp_json_str(o, p->events[e].unit, true);
		vp_out__printf(o, ",\"total\":%llu,\"tree\":",
			       (unsigned long long)(e == ev ? t->n[0].value : views[e].n[0].value));
		if (e == ev)
			vp_out__puts(o, "null");
		else if ((err = write_tree(o, k, &views[e], fidx, false)))
			goto cleanup;
		vp_out__puts(o, "}");
	}
	vp_out__puts(o, "]}");
	err = o->err;
cleanup:
	free(fidx);
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
	struct tree *views = NULL;
	int err = vp_keyspace__init(&k, p, base);
	if (err)
		return err;
	err = -ENOMEM;
	if (tree_add_node(&t, NONE, ROOT_FRAME) == NONE)
		goto cleanup;
	for (size_t i = 0; p->nevents && i < p->nstacks; i++)
		if (p->stacks[i].samples[ev] && tree_add(&t, &p->stacks[i], NULL, p->stacks[i].samples[ev], false))
			goto cleanup;
	int bev = vp_event_match(p, ev, base);
	for (size_t i = 0; bev >= 0 && i < base->nstacks; i++)
		if (base->stacks[i].samples[bev] &&
		    tree_add(&t, &base->stacks[i], k.base_map, base->stacks[i].samples[bev], true))
			goto cleanup;
	/* The other events' trees, for the page's event switch (not in a diff, which
	 * compares one event). */
	if (!base) {
		views = calloc((size_t)(p->nevents ? p->nevents : 1), sizeof(*views));
		if (!views)
			goto cleanup;
		for (int e = 0; e < p->nevents; e++) {
			if (e == ev || !vp_event_samples(p, e))
				continue;
			if (tree_add_node(&views[e], NONE, ROOT_FRAME) == NONE)
				goto cleanup;
			for (size_t i = 0; i < p->nstacks; i++)
				if (p->stacks[i].samples[e] && tree_add(&views[e], &p->stacks[i], NULL, p->stacks[i].samples[e], false))
					goto cleanup;
		}
	}
	title = opts && opts->title ? strdup(opts->title) : make_title(p, ev, t.n[0].value, base != NULL);
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
			err = write_data(o, p, base, ev, &k, &t, title, views);
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
	for (int e = 0; views && e < p->nevents; e++) {
		free(views[e].n);
		free(views[e].slot);
	}
	free(views);
	free(title);
	free(t.n);
	free(t.slot);
	vp_keyspace__fini(&k);
	return err;
}
