#include "common/strtab.h"

#include <stdlib.h>
#include <string.h>

#include "common/util.h"

static uint64_t str_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return h;
}

static int rehash(struct vp_strtab *t)
{
	size_t size = t->size ? t->size * 2 : 1024;
	int64_t *slot = malloc(size * sizeof(*slot));
	if (!slot)
		return -1;
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

/* The slot that holds s, or the empty one where it would go. */
static size_t find(const struct vp_strtab *t, const char *s)
{
	size_t j = str_hash(s) & (t->size - 1);
	while (t->slot[j] >= 0 && strcmp(t->v[t->slot[j]], s))
		j = (j + 1) & (t->size - 1);
	return j;
}

/* Adds s at slot j (empty); own: the table frees it. */
static int64_t insert(struct vp_strtab *t, size_t j, const char *s, char *own)
{
	if (vp_grow((void **)&t->v, &t->cap, t->n + 1, sizeof(*t->v)))
		return -1;
	if (own && vp_grow((void **)&t->owned, &t->owned_cap, t->nowned + 1, sizeof(*t->owned)))
		return -1;
	if (own)
		t->owned[t->nowned++] = own;
	t->v[t->n] = s;
	t->slot[j] = (int64_t)t->n;
	return (int64_t)t->n++;
}

/* The id of s when it is there; else ABSENT with *j the slot it would take, or -1 when
 * the table could not grow. */
#define ABSENT (-2)
static int64_t lookup(struct vp_strtab *t, const char *s, size_t *j)
{
	if ((t->n + 1) * 2 > t->size && rehash(t))
		return -1;
	*j = find(t, s);
	return t->slot[*j] >= 0 ? t->slot[*j] : ABSENT;
}

int64_t vp_strtab__id(struct vp_strtab *t, const char *s)
{
	size_t j;
	if (!s)
		s = "";
	int64_t id = lookup(t, s, &j);
	return id != ABSENT ? id : insert(t, j, s, NULL);
}

int64_t vp_strtab__id_owned(struct vp_strtab *t, char *s)
{
	size_t j;
	if (!s)
		return -1;
	int64_t id = lookup(t, s, &j);
	if (id == ABSENT)
		id = insert(t, j, s, s);
	if (id < 0 || t->v[id] != s)
		free(s);   /* there already, or not added */
	return id;
}

int64_t vp_strtab__id_copy(struct vp_strtab *t, const char *s)
{
	size_t j;
	if (!s)
		s = "";
	int64_t id = lookup(t, s, &j);
	if (id != ABSENT)
		return id;
	char *c = strdup(s);
	if (!c)
		return -1;
	id = insert(t, j, c, c);
	if (id < 0)
		free(c);
	return id;
}

void vp_strtab__free(struct vp_strtab *t)
{
	for (size_t i = 0; i < t->nowned; i++)
		free(t->owned[i]);
	free(t->owned);
	free(t->v);
	free(t->slot);
	memset(t, 0, sizeof(*t));
}
