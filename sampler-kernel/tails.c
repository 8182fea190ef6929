/* The count after a thread's last sample: see tails.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "sampler-kernel/tails.h"

struct tail {
	uint64_t key;                  /* (tid << 16 | event) + 1, 0 = free */
	struct vp_sample *last;        /* a copy of the last sample's body */
	size_t len, cap;
};

struct vp_tails {
	struct tail *t;
	size_t cap, n;
};

static uint64_t key_of(uint32_t tid, uint16_t event)
{
	return ((uint64_t)tid << 16 | event) + 1;
}

static size_t slot(uint64_t key, size_t cap)
{
	return (size_t)(key * 0x9e3779b97f4a7c15ull >> 32) & (cap - 1);
}

struct vp_tails *vp_tails__new(void)
{
	struct vp_tails *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->cap = 256;
	t->t = calloc(t->cap, sizeof(*t->t));
	if (!t->t) {
		free(t);
		return NULL;
	}
	return t;
}

void vp_tails__free(struct vp_tails *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->cap; i++)
		free(t->t[i].last);
	free(t->t);
	free(t);
}

static struct tail *find(struct vp_tails *t, uint64_t key)
{
	size_t i = slot(key, t->cap);

	while (t->t[i].key && t->t[i].key != key)
		i = (i + 1) & (t->cap - 1);
	return &t->t[i];
}

static int grow(struct vp_tails *t)
{
	size_t cap = t->cap * 2;
	struct tail *n = calloc(cap, sizeof(*n));

	if (!n)
		return -ENOMEM;
	for (size_t i = 0; i < t->cap; i++) {
		size_t j;

		if (!t->t[i].key)
			continue;
		for (j = slot(t->t[i].key, cap); n[j].key; j = (j + 1) & (cap - 1))
			;
		n[j] = t->t[i];
	}
	free(t->t);
	t->t = n;
	t->cap = cap;
	return 0;
}

int vp_tails__note(struct vp_tails *t, const struct vp_sample *s, size_t len)
{
	uint64_t key = key_of(s->tid, s->event);
	struct tail *e;

	if (!t)
		return 0;
	if ((t->n + 1) * 2 > t->cap && grow(t))
		return -ENOMEM;
	e = find(t, key);
	if (e->cap < len) {
		void *p = realloc(e->last, len);

		if (!p)
			return -ENOMEM;
		e->last = p;
		e->cap = len;
	}
	if (!e->key) {
		e->key = key;
		t->n++;
	}
	memcpy(e->last, s, len);
	e->len = len;
	return 0;
}

/* Removes the entry at e, moving later entries of its probe run back into the hole
 * (linear probing without tombstones). */
static void drop(struct vp_tails *t, struct tail *e)
{
	size_t i = (size_t)(e - t->t), j = i;

	free(e->last);
	memset(e, 0, sizeof(*e));
	t->n--;
	for (;;) {
		j = (j + 1) & (t->cap - 1);
		if (!t->t[j].key)
			return;
		size_t h = slot(t->t[j].key, t->cap);
		/* Entry j stays when its home lies cyclically in (i, j]. */
		if (i <= j ? (h > i && h <= j) : (h > i || h <= j))
			continue;
		t->t[i] = t->t[j];
		memset(&t->t[j], 0, sizeof(t->t[j]));
		i = j;
	}
}

int vp_tails__charge(struct vp_tails *t, const struct vp_sink *sink, uint32_t pid, uint32_t tid, uint16_t event,
		     uint64_t count, uint64_t time, bool forget)
{
	struct tail *e = t ? find(t, key_of(tid, event)) : NULL;
	struct vp_sample bare = { .pid = pid, .tid = tid, .cpu = UINT32_MAX, .event = event, .mode = VP_MODE_USER };
	struct vp_sample *o = e && e->key ? e->last : &bare;
	size_t len = e && e->key ? e->len : sizeof(bare);
	uint64_t period;
	uint8_t flags;
	int rc = 0;

	if (count) {
		/* The stored copy is the record; patched for the write, then restored. */
		period = o->period;
		flags = o->flags;
		o->period = count;
		o->flags |= VP_SAMPLE_TAIL;
		rc = sink->emit(sink->ctx, VP_REC_SAMPLE, time, o, len);
		o->period = period;
		o->flags = flags;
		if (rc >= 0)
			rc = 1;
	}
	if (forget && e && e->key)
		drop(t, e);
	return rc;
}
