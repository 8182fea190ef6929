/* Helpers shared by the JSON, HTML and pprof writers. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/steal_est.h"
#include "report/report_util.h"

static void out_sink(void *ctx, const char *p, size_t n)
{
	vp_out__write(ctx, p, n);
}

void vp_json_str(struct vp_out *o, const char *s, bool html_safe)
{
	vp_json_quote(s, html_safe ? VP_JSON_HTML_SAFE : 0, out_sink, o);
}

struct vp_frame_count *vp_frame_counts(const struct vp_profile *p, int event)
{
	size_t n = p->nframes ? p->nframes : 1;
	struct vp_frame_count *c = calloc(n, sizeof(*c));
	/* seen[f] == stack index + 1 when f was already counted for this stack. */
	size_t *seen = calloc(n, sizeof(*seen));
	if (!c || !seen) {
		free(c);
		free(seen);
		errno = ENOMEM;
		return NULL;
	}
	for (size_t i = 0; event >= 0 && event < p->nevents && i < p->nstacks; i++) {
		const struct vp_stack *s = &p->stacks[i];
		uint64_t v = s->samples[event];
		if (!v || !s->nframes)
			continue;
		c[s->frames[s->nframes - 1]].self += v;
		for (uint32_t k = 0; k < s->nframes; k++) {
			uint32_t f = s->frames[k];
			if (seen[f] == i + 1)
				continue;
			seen[f] = i + 1;
			c[f].total += v;
		}
	}
	free(seen);
	return c;
}

uint64_t vp_event_samples(const struct vp_profile *p, int event)
{
	uint64_t t = 0;
	for (size_t i = 0; event >= 0 && event < p->nevents && i < p->nstacks; i++)
		t += p->stacks[i].samples[event];
	return t;
}

bool vp_event_measured(const struct vp_profile *p, int event)
{
	static const char *const m[] = { "off-cpu", "steal", "running", "runnable", "blocked", "wall", NULL };
	if (event < 0 || event >= p->nevents || strcmp(p->events[event].unit, "nanoseconds"))
		return false;
	for (int i = 0; m[i]; i++)
		if (!strcmp(p->events[event].name, m[i]))
			return true;
	return false;
}

bool vp_event_estimated(const struct vp_profile *p, int event)
{
	return event >= 0 && event < p->nevents && !strcmp(p->events[event].unit, "nanoseconds") &&
	       !strcmp(p->events[event].name, VP_STEAL_EST_EVENT);
}

uint64_t vp_event_weight(const struct vp_profile *p, int event)
{
	uint64_t t = 0;
	for (size_t i = 0; event >= 0 && event < p->nevents && i < p->nstacks; i++)
		t += p->stacks[i].weight[event];
	return t;
}

int vp_event_match(const struct vp_profile *p, int event, const struct vp_profile *base)
{
	if (!base || event < 0 || event >= p->nevents)
		return -1;
	for (int i = 0; i < base->nevents; i++)
		if (!strcmp(base->events[i].name, p->events[event].name))
			return i;
	return -1;
}

int vp_keyspace__init(struct vp_keyspace *k, const struct vp_profile *p, const struct vp_profile *base)
{
	memset(k, 0, sizeof(*k));
	k->u = vp_profile__new();
	if (!k->u)
		return -ENOMEM;
	for (size_t i = 0; i < p->nframes; i++)
		if (vp_profile__frame(k->u, &p->frames[i]) != i)
			goto fail;
	if (base) {
		k->base_map = malloc((base->nframes ? base->nframes : 1) * sizeof(*k->base_map));
		if (!k->base_map)
			goto fail;
		for (size_t i = 0; i < base->nframes; i++) {
			k->base_map[i] = vp_profile__frame(k->u, &base->frames[i]);
			if (k->base_map[i] == UINT32_MAX)
				goto fail;
		}
	}
	return 0;
fail:
	vp_keyspace__fini(k);
	return -ENOMEM;
}

void vp_keyspace__fini(struct vp_keyspace *k)
{
	vp_profile__free(k->u);
	free(k->base_map);
	memset(k, 0, sizeof(*k));
}
