/* Addresses in the profile: mappings, locations (one per sampled address, with the
 * frames inlined there and their lines) and the samples per location stack. Frames and
 * stacks (profile.c) are what the text, folded, JSON and HTML reports aggregate; pprof
 * wants the addresses underneath, so the loader records both and pprof reads these.
 * Three open-addressing tables of ids, keyed by hashes recomputed from the arrays, as in
 * profile.c; the tables live in p->loc_priv. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "postproc/profile.h"

#define EMPTY UINT32_MAX
#define MAX_EVENTS ((int)(sizeof(((struct vp_profile *)0)->events) / sizeof(struct vp_prof_event)))

struct ids {
	uint32_t *slot;
	size_t size, used;
};

struct locpriv {
	struct ids maps, locs, stacks;
	size_t maps_cap, locs_cap, stacks_cap;
	struct vp_arena stack_mem;   /* each loc_stack's locations and counts, as profile.c */
};

static uint64_t fnv(uint64_t h, const void *buf, size_t len)
{
	const unsigned char *b = buf;
	for (size_t i = 0; i < len; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

static uint64_t fnv_str(uint64_t h, const char *s)
{
	return fnv(h, s ? s : "", strlen(s ? s : "") + 1);
}

static uint64_t map_hash(uint32_t pid, const char *file, uint64_t start, uint64_t offset)
{
	uint64_t h = fnv(0xcbf29ce484222325ull, &pid, sizeof(pid));
	h = fnv_str(h, file);
	h = fnv(h, &start, sizeof(start));
	return fnv(h, &offset, sizeof(offset));
}

static uint64_t loc_hash(uint32_t mapping, uint64_t addr, const uint32_t *frames, const uint32_t *lines, uint32_t n)
{
	uint64_t h = fnv(0xcbf29ce484222325ull, &mapping, sizeof(mapping));
	h = fnv(h, &addr, sizeof(addr));
	h = fnv(h, &n, sizeof(n));
	h = fnv(h, frames, n * sizeof(*frames));
	return fnv(h, lines, n * sizeof(*lines));
}

/* Word at a time, as profile.c's stack_hash: once per sample over every location. */
static uint64_t lstack_hash(uint32_t stack, const uint32_t *locs, uint32_t n)
{
	uint64_t h = (0xcbf29ce484222325ull ^ stack) * 0x9e3779b97f4a7c15ull;
	h = (h ^ n) * 0x9e3779b97f4a7c15ull;
	for (uint32_t i = 0; i < n; i++) {
		h = (h ^ locs[i]) * 0x9e3779b97f4a7c15ull;
		h ^= h >> 32;
	}
	return h;
}

static uint64_t map_id_hash(const struct vp_profile *p, size_t i)
{
	const struct vp_mapping *m = &p->mappings[i];
	return map_hash(m->pid, m->file, m->start, m->offset);
}

static uint64_t loc_id_hash(const struct vp_profile *p, size_t i)
{
	const struct vp_location *l = &p->locations[i];
	return loc_hash(l->mapping, l->addr, l->frames, l->lines, l->nframes);
}

static uint64_t lstack_id_hash(const struct vp_profile *p, size_t i)
{
	const struct vp_loc_stack *s = &p->loc_stacks[i];
	return lstack_hash(s->stack, s->locs, s->nlocs);
}

static int ids_init(struct ids *t, size_t size)
{
	t->slot = malloc(size * sizeof(*t->slot));
	if (!t->slot)
		return -ENOMEM;
	memset(t->slot, 0xff, size * sizeof(*t->slot));
	t->size = size;
	t->used = 0;
	return 0;
}

/* Records id at slot j; keeps the load at or under one half (a failed growth leaves a
 * fuller but valid table). */
static void ids_put(struct ids *t, size_t j, uint32_t id, const struct vp_profile *p, size_t n,
		    uint64_t (*hash)(const struct vp_profile *, size_t))
{
	t->slot[j] = id;
	if (++t->used * 2 <= t->size)
		return;
	struct ids nt;
	if (ids_init(&nt, t->size * 2))
		return;
	for (size_t i = 0; i < n; i++) {
		size_t k = hash(p, i) & (nt.size - 1);
		while (nt.slot[k] != EMPTY)
			k = (k + 1) & (nt.size - 1);
		nt.slot[k] = (uint32_t)i;
		nt.used++;
	}
	free(t->slot);
	*t = nt;
}

static struct locpriv *lp(struct vp_profile *p)
{
	if (p->loc_priv)
		return p->loc_priv;
	struct locpriv *l = calloc(1, sizeof(*l));
	if (!l)
		return NULL;
	if (ids_init(&l->maps, 256) || ids_init(&l->locs, 1024) || ids_init(&l->stacks, 1024)) {
		free(l->maps.slot);
		free(l->locs.slot);
		free(l->stacks.slot);
		free(l);
		return NULL;
	}
	p->loc_priv = l;
	return l;
}

static const char *nz(const char *s)
{
	return s ? s : "";
}

uint32_t vp_profile__mapping(struct vp_profile *p, const struct vp_mapping *m)
{
	struct locpriv *l = lp(p);
	if (!l)
		return UINT32_MAX;
	size_t mask = l->maps.size - 1;
	size_t j = map_hash(m->pid, nz(m->file), m->start, m->offset) & mask;
	for (; l->maps.slot[j] != EMPTY; j = (j + 1) & mask) {
		struct vp_mapping *c = &p->mappings[l->maps.slot[j]];
		if (c->pid == m->pid && c->start == m->start && c->offset == m->offset && !strcmp(c->file, nz(m->file))) {
			c->exe |= m->exe;
			if (m->limit > c->limit)
				c->limit = m->limit;
			return l->maps.slot[j];
		}
	}
	if (vp_grow((void **)&p->mappings, &l->maps_cap, p->nmappings + 1, sizeof(*p->mappings)))
		return UINT32_MAX;
	struct vp_mapping *d = &p->mappings[p->nmappings];
	*d = *m;
	d->file = strdup(nz(m->file));
	d->build_id = strdup(nz(m->build_id));
	if (!d->file || !d->build_id) {
		free((char *)d->file);
		free((char *)d->build_id);
		return UINT32_MAX;
	}
	uint32_t id = (uint32_t)p->nmappings++;
	ids_put(&l->maps, j, id, p, p->nmappings, map_id_hash);
	return id;
}

uint32_t vp_profile__location(struct vp_profile *p, uint32_t mapping, uint64_t addr, const uint32_t *frames,
			      const uint32_t *lines, uint32_t n)
{
	struct locpriv *l = lp(p);
	if (!l || !n)
		return UINT32_MAX;
	size_t mask = l->locs.size - 1;
	size_t j = loc_hash(mapping, addr, frames, lines, n) & mask;
	for (; l->locs.slot[j] != EMPTY; j = (j + 1) & mask) {
		const struct vp_location *c = &p->locations[l->locs.slot[j]];
		if (c->mapping == mapping && c->addr == addr && c->nframes == n &&
		    !memcmp(c->frames, frames, n * sizeof(*frames)) && !memcmp(c->lines, lines, n * sizeof(*lines)))
			return l->locs.slot[j];
	}
	if (vp_grow((void **)&p->locations, &l->locs_cap, p->nlocations + 1, sizeof(*p->locations)))
		return UINT32_MAX;
	struct vp_location *d = &p->locations[p->nlocations];
	d->mapping = mapping;
	d->addr = addr;
	d->nframes = n;
	d->frames = malloc(n * sizeof(*frames));
	d->lines = malloc(n * sizeof(*lines));
	if (!d->frames || !d->lines) {
		free(d->frames);
		free(d->lines);
		return UINT32_MAX;
	}
	memcpy(d->frames, frames, n * sizeof(*frames));
	memcpy(d->lines, lines, n * sizeof(*lines));
	uint32_t id = (uint32_t)p->nlocations++;
	ids_put(&l->locs, j, id, p, p->nlocations, loc_id_hash);
	return id;
}

int vp_profile__add_locs(struct vp_profile *p, uint32_t stack, const uint32_t *locs, uint32_t n, int event,
			 uint64_t samples, uint64_t weight)
{
	struct locpriv *l = lp(p);
	if (!l)
		return -ENOMEM;
	if (event < 0 || event >= p->nevents || stack >= p->nstacks || (n && !locs))
		return -EINVAL;
	for (uint32_t i = 0; i < n; i++)
		if (locs[i] >= p->nlocations)
			return -EINVAL;
	size_t mask = l->stacks.size - 1;
	size_t j = lstack_hash(stack, locs, n) & mask;
	struct vp_loc_stack *s = NULL;
	for (; l->stacks.slot[j] != EMPTY; j = (j + 1) & mask) {
		struct vp_loc_stack *c = &p->loc_stacks[l->stacks.slot[j]];
		if (c->stack == stack && c->nlocs == n && (!n || !memcmp(c->locs, locs, n * sizeof(*locs)))) {
			s = c;
			break;
		}
	}
	if (!s) {
		if (vp_grow((void **)&p->loc_stacks, &l->stacks_cap, p->nloc_stacks + 1, sizeof(*p->loc_stacks)))
			return -ENOMEM;
		s = &p->loc_stacks[p->nloc_stacks];
		memset(s, 0, sizeof(*s));
		/* Sized for every event up front, like vp_stack: events added later need no copy. */
		uint64_t *m = vp_arena__alloc(&l->stack_mem, 2 * MAX_EVENTS * sizeof(uint64_t) + n * sizeof(*locs));
		if (!m)
			return -ENOMEM;
		s->samples = m;
		s->weight = m + MAX_EVENTS;
		s->locs = (uint32_t *)(m + 2 * MAX_EVENTS);
		if (n)
			memcpy(s->locs, locs, n * sizeof(*locs));
		s->nlocs = n;
		s->stack = stack;
		p->nloc_stacks++;
		ids_put(&l->stacks, j, (uint32_t)(p->nloc_stacks - 1), p, p->nloc_stacks, lstack_id_hash);
	}
	s->samples[event] += samples;
	s->weight[event] += weight;
	return 0;
}

int vp_profile__merge_locs(struct vp_profile *dst, const struct vp_profile *src, const uint32_t *fmap,
			   const uint32_t *smap, const int *evmap)
{
	uint32_t *mmap_ = NULL, *lmap = NULL, *fr = NULL, *buf = NULL;
	size_t frcap = 0, bufcap = 0;
	int err = -ENOMEM;
	if (!src->nloc_stacks)
		return 0;
	mmap_ = malloc((src->nmappings ? src->nmappings : 1) * sizeof(*mmap_));
	lmap = malloc((src->nlocations ? src->nlocations : 1) * sizeof(*lmap));
	if (!mmap_ || !lmap)
		goto cleanup;
	for (size_t i = 0; i < src->nmappings; i++)
		if ((mmap_[i] = vp_profile__mapping(dst, &src->mappings[i])) == UINT32_MAX)
			goto cleanup;
	for (size_t i = 0; i < src->nlocations; i++) {
		const struct vp_location *l = &src->locations[i];
		if (vp_grow((void **)&fr, &frcap, l->nframes, sizeof(*fr)))
			goto cleanup;
		for (uint32_t k = 0; k < l->nframes; k++)
			fr[k] = fmap[l->frames[k]];
		lmap[i] = vp_profile__location(dst, l->mapping == UINT32_MAX ? UINT32_MAX : mmap_[l->mapping], l->addr,
					       fr, l->lines, l->nframes);
		if (lmap[i] == UINT32_MAX)
			goto cleanup;
	}
	for (size_t i = 0; i < src->nloc_stacks; i++) {
		const struct vp_loc_stack *s = &src->loc_stacks[i];
		if (smap[s->stack] == UINT32_MAX)
			continue;   /* a stack without any count: nothing was merged for it */
		if (vp_grow((void **)&buf, &bufcap, s->nlocs, sizeof(*buf)))
			goto cleanup;
		for (uint32_t k = 0; k < s->nlocs; k++)
			buf[k] = lmap[s->locs[k]];
		for (int e = 0; e < src->nevents; e++) {
			if (!s->samples[e] && !s->weight[e])
				continue;
			if ((err = vp_profile__add_locs(dst, smap[s->stack], buf, s->nlocs, evmap[e], s->samples[e],
							s->weight[e])))
				goto cleanup;
		}
	}
	err = 0;
cleanup:
	free(mmap_);
	free(lmap);
	free(fr);
	free(buf);
	return err;
}

void vp_profile__free_locs(struct vp_profile *p)
{
	for (size_t i = 0; i < p->nmappings; i++) {
		free((char *)p->mappings[i].file);
		free((char *)p->mappings[i].build_id);
	}
	free(p->mappings);
	for (size_t i = 0; i < p->nlocations; i++) {
		free(p->locations[i].frames);
		free(p->locations[i].lines);
	}
	free(p->locations);
	free(p->loc_stacks);
	struct locpriv *l = p->loc_priv;
	if (l) {
		free(l->maps.slot);
		free(l->locs.slot);
		free(l->stacks.slot);
		vp_arena__free(&l->stack_mem);
		free(l);
	}
	p->mappings = NULL;
	p->locations = NULL;
	p->loc_stacks = NULL;
	p->loc_priv = NULL;
	p->nmappings = p->nlocations = p->nloc_stacks = 0;
}
