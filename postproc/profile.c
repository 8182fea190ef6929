/* The aggregated profile: interned frames and stacks, per-event counts, metadata and
 * warnings. Two open-addressing hash tables (frames by (layer, name, image), stacks by
 * (frames, pid, tid, comm)) live in p->priv; the public arrays stay plain so that
 * writers can walk them without any accessor. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "postproc/profile.h"

#define EMPTY UINT32_MAX
#define MAX_EVENTS ((int)(sizeof(((struct vp_profile *)0)->events) / sizeof(struct vp_prof_event)))

/* A table of ids into the profile's frames or stacks; size is a power of two. */
struct idtab {
	uint32_t *slot;
	size_t size, used;
};

struct priv {
	struct idtab frames, stacks;
	size_t frames_cap, stacks_cap, meta_cap, threads_cap;
	size_t warn_len, warn_cap;
	/* Every stack's frames, counts and thread name: one allocation each, freed at once
	 * (per-stack mallocs were a tenth of a large report, half of it in free at exit). */
	struct vp_arena stack_mem;
};

/* FNV-1a, folded a word at a time for the integer parts. */
static uint64_t hash_bytes(uint64_t h, const void *buf, size_t len)
{
	const unsigned char *b = buf;
	for (size_t i = 0; i < len; i++) {
		h ^= b[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

static uint64_t hash_str(uint64_t h, const char *s)
{
	/* The terminating NUL is hashed too, so ("ab","c") and ("a","bc") differ. */
	return hash_bytes(h, s ? s : "", strlen(s ? s : "") + 1);
}

static uint64_t frame_hash(uint8_t layer, uint8_t tier, const char *name, const char *image)
{
	uint64_t h = 0xcbf29ce484222325ull;
	h = hash_bytes(h, &layer, 1);
	h = hash_bytes(h, &tier, 1);
	h = hash_str(h, name);
	return hash_str(h, image);
}

/* Frame ids a word at a time: a sample's stack is hashed once per sample (50-odd frames
 * for Java), and byte-wise FNV there was the largest cost of a report after caching. */
static uint64_t hash_u32s(uint64_t h, const uint32_t *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		h = (h ^ v[i]) * 0x9e3779b97f4a7c15ull;
		h ^= h >> 32;
	}
	return h;
}

static uint64_t stack_hash(const uint32_t *frames, uint32_t n, uint32_t pid, uint32_t tid, const char *comm)
{
	uint64_t h = 0xcbf29ce484222325ull;
	h = hash_u32s(h, &n, 1);
	h = hash_u32s(h, frames, n);
	h = hash_u32s(h, &pid, 1);
	h = hash_u32s(h, &tid, 1);
	return hash_str(h, comm);
}

static const char *nz(const char *s)
{
	return s ? s : "";
}

static bool frame_eq(const struct vp_frame *f, uint8_t layer, uint8_t tier, const char *name, const char *image)
{
	return f->layer == layer && f->tier == tier && !strcmp(f->name, nz(name)) && !strcmp(f->image, nz(image));
}

static bool stack_eq(const struct vp_stack *s, const uint32_t *frames, uint32_t n, uint32_t pid, uint32_t tid,
		     const char *comm)
{
	return s->nframes == n && s->pid == pid && s->tid == tid && !strcmp(s->comm, nz(comm)) &&
	       (n == 0 || !memcmp(s->frames, frames, n * sizeof(*frames)));
}

static int idtab_init(struct idtab *t, size_t size)
{
	t->slot = malloc(size * sizeof(*t->slot));
	if (!t->slot)
		return -ENOMEM;
	memset(t->slot, 0xff, size * sizeof(*t->slot));
	t->size = size;
	t->used = 0;
	return 0;
}

static uint64_t frame_id_hash(const struct vp_profile *p, size_t i)
{
	const struct vp_frame *f = &p->frames[i];
	return frame_hash(f->layer, f->tier, f->name, f->image);
}

static uint64_t stack_id_hash(const struct vp_profile *p, size_t i)
{
	const struct vp_stack *s = &p->stacks[i];
	return stack_hash(s->frames, s->nframes, s->pid, s->tid, s->comm);
}

/* Doubles t and puts ids 0..n-1 back in; rehash needs each id's hash, which hash
 * recomputes from the profile (the table keeps only ids). */
static int idtab_rehash(struct idtab *t, const struct vp_profile *p, size_t n,
			uint64_t (*hash)(const struct vp_profile *p, size_t id))
{
	struct idtab nt;
	if (idtab_init(&nt, t->size * 2))
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		size_t j = hash(p, i) & (nt.size - 1);
		while (nt.slot[j] != EMPTY)
			j = (j + 1) & (nt.size - 1);
		nt.slot[j] = (uint32_t)i;
		nt.used++;
	}
	free(t->slot);
	*t = nt;
	return 0;
}

static int frames_rehash(struct vp_profile *p)
{
	struct priv *pv = p->priv;
	return idtab_rehash(&pv->frames, p, p->nframes, frame_id_hash);
}

static int stacks_rehash(struct vp_profile *p)
{
	struct priv *pv = p->priv;
	return idtab_rehash(&pv->stacks, p, p->nstacks, stack_id_hash);
}

struct vp_profile *vp_profile__new(void)
{
	struct vp_profile *p = calloc(1, sizeof(*p));
	struct priv *pv = calloc(1, sizeof(*pv));
	if (!p || !pv)
		goto fail;
	p->priv = pv;
	if (idtab_init(&pv->frames, 1024) || idtab_init(&pv->stacks, 1024))
		goto fail;
	return p;
fail:
	if (pv) {
		free(pv->frames.slot);
		free(pv->stacks.slot);
	}
	free(pv);
	free(p);
	errno = ENOMEM;
	return NULL;
}

const char *vp_tier_name(uint8_t tier)
{
	static const char *const names[2][5] = {
		{ "", "C1", "C1", "C1", "C2" }, { "", "C1 OSR", "C1 OSR", "C1 OSR", "C2 OSR" },
	};
	unsigned l = vp_tier_level(tier);
	return l <= 4 ? names[(tier & VP_TIER_OSR) != 0][l] : "";
}

bool vp_profile__has_samples(const struct vp_profile *p)
{
	for (size_t i = 0; i < p->nstacks; i++)
		for (int e = 0; e < p->nevents; e++)
			if (p->stacks[i].samples[e])
				return true;
	return false;
}

void vp_profile__free(struct vp_profile *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->nframes; i++) {
		struct vp_frame *f = &p->frames[i];
		free((char *)f->name);
		free((char *)f->image);
		free((char *)f->build_id);
		free((char *)f->file);
	}
	free(p->frames);
	free(p->stacks);
	free(p->threads);
	free(p->times);
	free(p->spans);
	free(p->marks);
	vp_profile__free_containers(p);
	for (size_t i = 0; i < p->nmeta; i++) {
		free(p->meta[i].key);
		free(p->meta[i].value);
	}
	free(p->meta);
	free(p->warnings);
	vp_profile__free_locs(p);
	struct priv *pv = p->priv;
	if (pv) {
		free(pv->frames.slot);
		free(pv->stacks.slot);
		vp_arena__free(&pv->stack_mem);
		free(pv);
	}
	free(p);
}

int vp_profile__add_event(struct vp_profile *p, const char *name, const char *unit)
{
	if (!name || !*name || strlen(name) >= sizeof(p->events[0].name))
		return -EINVAL;
	for (int i = 0; i < p->nevents; i++)
		if (!strcmp(p->events[i].name, name))
			return i;
	if (p->nevents >= MAX_EVENTS)
		return -ENOSPC;
	struct vp_prof_event *e = &p->events[p->nevents];
	memset(e, 0, sizeof(*e));
	snprintf(e->name, sizeof(e->name), "%s", name);
	snprintf(e->unit, sizeof(e->unit), "%s", unit && *unit ? unit : "events");
	/* Stacks carry arrays sized for all MAX_EVENTS up front (see new_stack), so adding an
	 * event never has to touch existing stacks: their new column is already zero. */
	return p->nevents++;
}

uint32_t vp_profile__add_frame(struct vp_profile *p, uint8_t layer, const char *name, const char *image,
			       const char *build_id, uint64_t addr, const char *file, uint32_t line)
{
	struct vp_frame f = { .name = name, .image = image ? image : "", .build_id = build_id ? build_id : "",
			      .file = file ? file : "", .addr = addr, .line = line, .layer = layer };
	return vp_profile__frame(p, &f);
}

uint32_t vp_profile__frame(struct vp_profile *p, const struct vp_frame *f)
{
	struct priv *pv = p->priv;
	const char *name = f->name && *f->name ? f->name : "[unknown]";
	uint8_t layer = f->layer < VP_LAYER__COUNT ? f->layer : VP_LAYER_UNKNOWN;
	size_t mask = pv->frames.size - 1;
	size_t j = frame_hash(layer, f->tier, name, f->image) & mask;
	for (; pv->frames.slot[j] != EMPTY; j = (j + 1) & mask)
		if (frame_eq(&p->frames[pv->frames.slot[j]], layer, f->tier, name, f->image))
			return pv->frames.slot[j];
	if (p->nframes >= UINT32_MAX - 1)
		return UINT32_MAX;
	if (vp_grow((void **)&p->frames, &pv->frames_cap, p->nframes + 1, sizeof(*p->frames)))
		return UINT32_MAX;
	struct vp_frame *d = &p->frames[p->nframes];
	d->name = strdup(name);
	d->image = strdup(nz(f->image));
	d->build_id = strdup(nz(f->build_id));
	d->file = strdup(nz(f->file));
	d->addr = f->addr;
	d->line = f->line;
	d->layer = layer;
	d->tier = f->tier;
	if (!d->name || !d->image || !d->build_id || !d->file) {
		free((char *)d->name);
		free((char *)d->image);
		free((char *)d->build_id);
		free((char *)d->file);
		return UINT32_MAX;
	}
	uint32_t id = (uint32_t)p->nframes++;
	pv->frames.slot[j] = id;
	/* Keep the load at or under one half so probes stay short. */
	if (++pv->frames.used * 2 > pv->frames.size && frames_rehash(p)) {
		/* The frame is in the array and the old table; only growth failed. */
	}
	return id;
}

static struct vp_stack *new_stack(struct vp_profile *p, const uint32_t *frames, uint32_t n, uint32_t pid,
				  uint32_t tid, const char *comm)
{
	struct priv *pv = p->priv;
	if (vp_grow((void **)&p->stacks, &pv->stacks_cap, p->nstacks + 1, sizeof(*p->stacks)))
		return NULL;
	struct vp_stack *s = &p->stacks[p->nstacks];
	memset(s, 0, sizeof(*s));
	size_t clen = strlen(nz(comm)) + 1;
	/* Counts first (8-byte aligned), then frames, then the name. */
	char *m = vp_arena__alloc(&pv->stack_mem, 2 * MAX_EVENTS * sizeof(uint64_t) + n * sizeof(*frames) + clen);
	if (!m)
		return NULL;
	s->samples = (uint64_t *)m;
	s->weight = s->samples + MAX_EVENTS;
	s->frames = (uint32_t *)(s->weight + MAX_EVENTS);
	if (n)
		memcpy(s->frames, frames, n * sizeof(*frames));
	s->comm = memcpy((char *)(s->frames + n), nz(comm), clen);
	s->nframes = n;
	s->pid = pid;
	s->tid = tid;
	p->nstacks++;
	return s;
}

_Static_assert(sizeof(struct vp_sample_time) == 24, "a sample's time in 24 bytes");

int vp_profile__add_time_span(struct vp_profile *p, uint32_t stack, int event, uint64_t t, uint64_t dur, uint64_t samples)
{
	if (!samples)
		return 0;   /* a tail count: weight without a sample, nothing to place in time */
	if (event < 0 || event > 255 || (t + dur) >> 56 || samples > UINT32_MAX)
		return 0;   /* beyond what the strip holds (2 years, 4G periods): its event has no strip */
	if (vp_grow((void **)&p->times, &p->timescap, p->ntimes + 1, sizeof(*p->times)))
		return -ENOMEM;
	p->times[p->ntimes++] = (struct vp_sample_time){ .t = t, .event = (uint64_t)event, .dur = dur, .stack = stack,
							 .samples = (uint32_t)samples };
	return 0;
}

int vp_profile__add_time(struct vp_profile *p, uint32_t stack, int event, uint64_t t, uint64_t samples)
{
	return vp_profile__add_time_span(p, stack, event, t, 0, samples);
}

/* Rounded cumulative shares: the part of [a, b) is share(b) - share(a), so that the
 * parts of any partition of the interval add up to samples exactly. */
static uint64_t cum_share(uint64_t samples, uint64_t x, uint64_t dur)
{
	return (uint64_t)(((unsigned __int128)samples * x + dur / 2) / dur);
}

uint64_t vp_span_share(uint64_t start, uint64_t dur, uint64_t samples, uint64_t a, uint64_t b)
{
	if (!dur)
		return start >= a && start < b ? samples : 0;
	uint64_t end = start + dur, lo = a > start ? a : start, hi = b < end ? b : end;
	if (hi <= lo)
		return 0;
	return cum_share(samples, hi - start, dur) - cum_share(samples, lo - start, dur);
}

void vp_profile__set_time_zero(struct vp_profile *p, uint64_t t0, bool sampling)
{
	char v[32];
	const char *old = vp_profile__meta(p, "time_zero_monotonic_ns");
	snprintf(v, sizeof(v), "%llu", (unsigned long long)t0);
	if (old && strcmp(old, v)) {
		/* No one instant: each session's times count from its own zero. */
		vp_profile__set_meta(p, "time_zero", "each merged session's own sampling start");
		vp_profile__set_meta(p, "time_zero_monotonic_ns", "");
		return;
	}
	vp_profile__set_meta(p, "time_zero_monotonic_ns", v);
	vp_profile__set_meta(p, "time_zero", sampling ? "sampling start" : "recorder start (the session does not say when its sampling started)");
}

int vp_profile__add_span(struct vp_profile *p, uint32_t stack, int event, uint64_t end, uint64_t weight,
			 unsigned flags)
{
	if (event < 0 || event > 255)
		return 0;
	if (vp_grow((void **)&p->spans, &p->spanscap, p->nspans + 1, sizeof(*p->spans)))
		return -ENOMEM;
	p->spans[p->nspans++] = (struct vp_sample_span){ .end = end, .weight = weight, .stack = stack,
							 .event = (uint8_t)event, .flags = (uint8_t)flags };
	return 0;
}

int vp_profile__add_mark(struct vp_profile *p, uint64_t t, uint32_t pid, const char *label)
{
	if (vp_grow((void **)&p->marks, &p->markscap, p->nmarks + 1, sizeof(*p->marks)))
		return -ENOMEM;
	struct vp_time_mark *m = &p->marks[p->nmarks++];
	m->t = t;
	m->pid = pid;
	snprintf(m->label, sizeof(m->label), "%s", label);
	return 0;
}

int vp_profile__merge_times(struct vp_profile *dst, const struct vp_profile *src, const uint32_t *smap,
			    const int *evmap)
{
	for (size_t i = 0; i < src->nmarks; i++) {
		int err = vp_profile__add_mark(dst, src->marks[i].t, src->marks[i].pid, src->marks[i].label);
		if (err)
			return err;
	}
	for (size_t i = 0; i < src->ntimes; i++) {
		const struct vp_sample_time *x = &src->times[i];
		if (x->stack >= src->nstacks || smap[x->stack] == UINT32_MAX || x->event >= (uint32_t)src->nevents)
			continue;
		int err = vp_profile__add_time_span(dst, smap[x->stack], evmap[x->event], x->t, x->dur, x->samples);
		if (err)
			return err;
	}
	for (size_t i = 0; i < src->nspans; i++) {
		const struct vp_sample_span *x = &src->spans[i];
		if (x->stack >= src->nstacks || smap[x->stack] == UINT32_MAX || x->event >= (uint32_t)src->nevents)
			continue;
		int err = vp_profile__add_span(dst, smap[x->stack], evmap[x->event], x->end, x->weight, x->flags);
		if (err)
			return err;
	}
	return 0;
}

int vp_profile__add(struct vp_profile *p, const uint32_t *frames, uint32_t n, uint32_t pid, uint32_t tid,
		    const char *comm, int event, uint64_t samples, uint64_t weight)
{
	return vp_profile__add_stack(p, frames, n, pid, tid, comm, event, samples, weight, NULL);
}

int vp_profile__add_stack(struct vp_profile *p, const uint32_t *frames, uint32_t n, uint32_t pid, uint32_t tid,
			  const char *comm, int event, uint64_t samples, uint64_t weight, uint32_t *stack)
{
	struct priv *pv = p->priv;
	if (event < 0 || event >= p->nevents || (n && !frames))
		return -EINVAL;
	for (uint32_t i = 0; i < n; i++)
		if (frames[i] >= p->nframes)
			return -EINVAL;
	size_t mask = pv->stacks.size - 1;
	size_t j = stack_hash(frames, n, pid, tid, nz(comm)) & mask;
	struct vp_stack *s = NULL;
	for (; pv->stacks.slot[j] != EMPTY; j = (j + 1) & mask) {
		struct vp_stack *c = &p->stacks[pv->stacks.slot[j]];
		if (stack_eq(c, frames, n, pid, tid, comm)) {
			s = c;
			break;
		}
	}
	if (!s) {
		s = new_stack(p, frames, n, pid, tid, comm);
		if (!s)
			return -ENOMEM;
		pv->stacks.slot[j] = (uint32_t)(p->nstacks - 1);
		if (++pv->stacks.used * 2 > pv->stacks.size) {
			/* s points into p->stacks, which rehash does not move. */
			int err = stacks_rehash(p);
			(void)err; /* a failed growth leaves a fuller but valid table */
		}
	}
	s->samples[event] += samples;
	s->weight[event] += weight;
	if (stack)
		*stack = (uint32_t)(s - p->stacks);
	return 0;
}

void vp_profile__meta_add(struct vp_profile *p, const char *key, uint64_t n)
{
	const char *old = vp_profile__meta(p, key);
	char v[32];
	snprintf(v, sizeof(v), "%llu", (unsigned long long)(n + (old ? strtoull(old, NULL, 10) : 0)));
	vp_profile__set_meta(p, key, v);
}

void vp_profile__set_meta(struct vp_profile *p, const char *key, const char *value)
{
	if (!key)
		return;
	for (size_t i = 0; i < p->nmeta; i++) {
		if (!strcmp(p->meta[i].key, key)) {
			char *v = strdup(nz(value));
			if (v) {
				free(p->meta[i].value);
				p->meta[i].value = v;
			}
			return;
		}
	}
	struct priv *pv = p->priv;
	if (vp_grow((void **)&p->meta, &pv->meta_cap, p->nmeta + 1, sizeof(*p->meta)))
		return;
	char *k = strdup(key), *v = strdup(nz(value));
	if (!k || !v) {
		free(k);
		free(v);
		return;
	}
	p->meta[p->nmeta].key = k;
	p->meta[p->nmeta].value = v;
	p->nmeta++;
}

const char *vp_profile__meta(const struct vp_profile *p, const char *key)
{
	for (size_t i = 0; key && i < p->nmeta; i++)
		if (!strcmp(p->meta[i].key, key))
			return p->meta[i].value;
	return NULL;
}

bool vp_profile__steal_unmeasured(const struct vp_profile *p)
{
	const char *c = vp_profile__meta(p, "steal.clock");
	return c && !strcmp(c, "none");
}

/* True when the warnings already hold this exact line: merging the same session twice,
 * or a loader warning once per sample, must not repeat the note. */
static bool has_warning(const struct vp_profile *p, const char *line, size_t len)
{
	for (const char *w = p->warnings; w && *w;) {
		const char *nl = strchr(w, '\n');
		size_t l = nl ? (size_t)(nl - w) : strlen(w);
		if (l == len && !memcmp(w, line, len))
			return true;
		w = nl ? nl + 1 : w + l;
	}
	return false;
}

static void append_warning(struct vp_profile *p, const char *msg)
{
	struct priv *pv = p->priv;
	size_t len = strlen(msg);
	while (len && msg[len - 1] == '\n')
		len--;
	if (!len || has_warning(p, msg, len))
		return;
	if (vp_grow((void **)&p->warnings, &pv->warn_cap, pv->warn_len + len + 2, 1))
		return;
	char *w = p->warnings;
	memcpy(w + pv->warn_len, msg, len);
	w[pv->warn_len + len] = '\n';
	w[pv->warn_len + len + 1] = '\0';
	pv->warn_len += len + 1;
}

void vp_profile__warn(struct vp_profile *p, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	append_warning(p, buf);
}

int vp_profile__merge(struct vp_profile *dst, const struct vp_profile *src)
{
	int evmap[MAX_EVENTS];
	uint32_t *fmap = NULL, *buf = NULL, *smap = NULL;
	int err = 0;

	for (int e = 0; e < src->nevents; e++) {
		evmap[e] = vp_profile__add_event(dst, src->events[e].name, src->events[e].unit);
		if (evmap[e] < 0)
			return evmap[e];
	}
	fmap = malloc((src->nframes ? src->nframes : 1) * sizeof(*fmap));
	if (!fmap)
		return -ENOMEM;
	for (size_t i = 0; i < src->nframes; i++) {
		fmap[i] = vp_profile__frame(dst, &src->frames[i]);
		if (fmap[i] == UINT32_MAX) {
			err = -ENOMEM;
			goto cleanup;
		}
	}
	smap = malloc((src->nstacks ? src->nstacks : 1) * sizeof(*smap));
	if (!smap) {
		err = -ENOMEM;
		goto cleanup;
	}
	size_t bufcap = 0;
	for (size_t i = 0; i < src->nstacks; i++) {
		smap[i] = UINT32_MAX;
		const struct vp_stack *s = &src->stacks[i];
		if (vp_grow((void **)&buf, &bufcap, s->nframes, sizeof(*buf))) {
			err = -ENOMEM;
			goto cleanup;
		}
		for (uint32_t k = 0; k < s->nframes; k++)
			buf[k] = fmap[s->frames[k]];
		for (int e = 0; e < src->nevents; e++) {
			if (!s->samples[e] && !s->weight[e])
				continue;
			err = vp_profile__add_stack(dst, buf, s->nframes, s->pid, s->tid, s->comm, evmap[e],
						    s->samples[e], s->weight[e], &smap[i]);
			if (err)
				goto cleanup;
		}
	}
	if ((err = vp_profile__merge_locs(dst, src, fmap, smap, evmap)) ||
	    (err = vp_profile__merge_times(dst, src, smap, evmap)))
		goto cleanup;
	if ((err = vp_profile__merge_containers(dst, src)))
		goto cleanup;
	for (size_t i = 0; i < src->nthreads; i++)
		if ((err = vp_profile__thread_times(dst, &src->threads[i])))
			goto cleanup;
	/* The first session's metadata describes the merged profile; later sessions only
	 * fill in keys it did not have, but durations add up (the samples cover both). */
	const char *dd = vp_profile__meta(dst, "duration_ns"), *sd = vp_profile__meta(src, "duration_ns");
	if (dd && sd) {
		char d[32];
		snprintf(d, sizeof(d), "%llu", strtoull(dd, NULL, 10) + strtoull(sd, NULL, 10));
		vp_profile__set_meta(dst, "duration_ns", d);
	}
	for (size_t i = 0; i < src->nmeta; i++)
		if (!vp_profile__meta(dst, src->meta[i].key))
			vp_profile__set_meta(dst, src->meta[i].key, src->meta[i].value);
	for (const char *w = src->warnings; w && *w;) {
		const char *nl = strchr(w, '\n');
		size_t l = nl ? (size_t)(nl - w) : strlen(w);
		char line[1024];
		snprintf(line, sizeof(line), "%.*s", (int)l, w);
		append_warning(dst, line);
		w = nl ? nl + 1 : w + l;
	}
	dst->lost += src->lost;
	dst->incomplete |= src->incomplete;
cleanup:
	free(fmap);
	free(smap);
	free(buf);
	return err;
}

const struct vp_thread_times *vp_profile__find_thread(const struct vp_profile *p, uint32_t pid, uint32_t tid)
{
	for (size_t i = 0; i < p->nthreads; i++)
		if (p->threads[i].pid == pid && p->threads[i].tid == tid)
			return &p->threads[i];
	return NULL;
}

int vp_profile__thread_times(struct vp_profile *p, const struct vp_thread_times *t)
{
	struct vp_thread_times *o = (struct vp_thread_times *)vp_profile__find_thread(p, t->pid, t->tid);

	if (!o) {
		struct priv *pv = p->priv;

		if (vp_grow((void **)&p->threads, &pv->threads_cap, p->nthreads + 1, sizeof(*p->threads)))
			return -ENOMEM;
		o = &p->threads[p->nthreads++];
		*o = (struct vp_thread_times){ .pid = t->pid, .tid = t->tid };
	}
	o->oncpu_ns += t->oncpu_ns;
	o->steal_ns += t->steal_ns;
	o->vthread_ns += t->vthread_ns;
	o->switches += t->switches;
	return 0;
}

uint64_t vp_profile__unknowns(const struct vp_profile *p, int ev, uint64_t why[VP_UNKNOWN__COUNT], uint64_t *all)
{
	uint64_t sum = 0, total = 0;
	for (int k = 0; k < VP_UNKNOWN__COUNT; k++)
		why[k] = 0;
	if (ev < 0 || ev >= p->nevents)
		return 0;
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct vp_stack *s = &p->stacks[i];
		uint64_t n = s->samples[ev];
		total += n;
		if (!n)
			continue;
		/* Leaf-most first: the frame that cut the naming short where it matters most. */
		for (uint32_t k = s->nframes; k-- > 0;) {
			const struct vp_frame *f = &p->frames[s->frames[k]];
			if (strcmp(f->name, "[unknown]"))
				continue;
			int r = !strcmp(f->image, "[anon]")	 ? VP_UNKNOWN_ANON
				: !strcmp(f->image, "[no stack]") ? VP_UNKNOWN_NO_STACK
								  : VP_UNKNOWN_NO_MAPPING;
			why[r] += n;
			sum += n;
			break;
		}
	}
	if (all)
		*all = total;
	return sum;
}

char *vp_profile__unknowns_line(const struct vp_profile *p, int ev)
{
	static const char *const reason[VP_UNKNOWN__COUNT] = {
		[VP_UNKNOWN_NO_MAPPING] = "in no recorded mapping (a process that started, exec'd or exited while "
					  "recording before its mappings were read, or lost records)",
		[VP_UNKNOWN_ANON] = "in anonymous memory of a process that is no JVM (code another runtime generated)",
		[VP_UNKNOWN_NO_STACK] = "without any stack",
	};
	uint64_t why[VP_UNKNOWN__COUNT], all = 0;
	uint64_t sum = vp_profile__unknowns(p, ev, why, &all);
	if (!sum)
		return NULL;
	char *line = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&line, &len);
	if (!f)
		return NULL;
	fprintf(f, "[unknown] frames in %llu of %llu samples (%.2f%%):", (unsigned long long)sum,
		(unsigned long long)all, all ? 100.0 * (double)sum / (double)all : 0.0);
	const char *sep = " ";
	for (int k = 0; k < VP_UNKNOWN__COUNT; k++)
		if (why[k]) {
			fprintf(f, "%s%llu %s", sep, (unsigned long long)why[k], reason[k]);
			sep = "; ";
		}
	if (fclose(f) != 0) {
		free(line);
		return NULL;
	}
	return line;
}
