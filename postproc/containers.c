/* Each process's container in a profile (VP_REC_CONTAINER): see profile.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "postproc/profile.h"

struct ctab {
	struct vp_proc_container *v;
	size_t n, cap;
	uint32_t *slot;          /* index + 1 into v, by pid; 0 = empty */
	size_t nslot;
};

static size_t slot_of(const struct ctab *t, uint32_t pid)
{
	size_t j = (pid * 2654435761u) & (t->nslot - 1);
	while (t->slot[j] && t->v[t->slot[j] - 1].pid != pid)
		j = (j + 1) & (t->nslot - 1);
	return j;
}

const struct vp_proc_container *vp_profile__container(const struct vp_profile *p, uint32_t pid)
{
	const struct ctab *t = p->containers;
	if (!t || !t->nslot)
		return NULL;
	size_t j = slot_of(t, pid);
	return t->slot[j] ? &t->v[t->slot[j] - 1] : NULL;
}

int vp_profile__set_container(struct vp_profile *p, uint32_t pid, uint32_t nspid, const char *cgroup,
			      const struct vp_container_id *c)
{
	struct ctab *t = p->containers;
	char *cg = strdup(cgroup ? cgroup : "/");

	if (!cg)
		return -ENOMEM;
	if (!t && !(t = p->containers = calloc(1, sizeof(*t)))) {
		free(cg);
		return -ENOMEM;
	}
	struct vp_proc_container *x = (struct vp_proc_container *)vp_profile__container(p, pid);
	if (x) {   /* exec, or pid reuse: the latest wins */
		free(x->cgroup);
		x->cgroup = cg;
		x->nspid = nspid;
		x->c = *c;
		return 0;
	}
	if ((t->n + 1) * 2 > t->nslot) {
		size_t ns = t->nslot ? t->nslot * 2 : 64;
		uint32_t *s = calloc(ns, sizeof(*s));
		if (!s) {
			free(cg);
			return -ENOMEM;
		}
		free(t->slot);
		t->slot = s;
		t->nslot = ns;
		for (size_t i = 0; i < t->n; i++)
			t->slot[slot_of(t, t->v[i].pid)] = (uint32_t)i + 1;
	}
	if (vp_grow((void **)&t->v, &t->cap, t->n + 1, sizeof(*t->v))) {
		free(cg);
		return -ENOMEM;
	}
	t->v[t->n] = (struct vp_proc_container){ .pid = pid, .nspid = nspid, .cgroup = cg, .c = *c };
	t->slot[slot_of(t, pid)] = (uint32_t)++t->n;
	return 0;
}

size_t vp_profile__containers(const struct vp_profile *p, const struct vp_proc_container **out)
{
	const struct ctab *t = p->containers;
	*out = t ? t->v : NULL;
	return t ? t->n : 0;
}

int vp_profile__merge_containers(struct vp_profile *dst, const struct vp_profile *src)
{
	const struct vp_proc_container *v;
	size_t n = vp_profile__containers(src, &v);
	for (size_t i = 0; i < n; i++) {
		int e = vp_profile__set_container(dst, v[i].pid, v[i].nspid, v[i].cgroup, &v[i].c);
		if (e)
			return e;
	}
	return 0;
}

void vp_profile__free_containers(struct vp_profile *p)
{
	struct ctab *t = p->containers;
	if (!t)
		return;
	for (size_t i = 0; i < t->n; i++)
		free(t->v[i].cgroup);
	free(t->v);
	free(t->slot);
	free(t);
	p->containers = NULL;
}

const char *vp_profile__container_id(const struct vp_profile *p, uint32_t pid)
{
	const struct vp_proc_container *c = vp_profile__container(p, pid);
	return c ? c->c.id : "";
}
