/* Questions tests ask of a recorded profile, declared instead of hand-rolled: "what share
 * of the samples (or of an event's weight) has a frame F on its stack", among the stacks
 * of one process or thread name. Header-only; the test links vp_postproc. */
#ifndef VIPROF_TEST_PROFILE_H
#define VIPROF_TEST_PROFILE_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "postproc/profile.h"
#include "postproc/session.h"
#include "test.h"

/* How a frame's name is matched. */
enum tp_match {
	TP_EXACT,      /* the whole name */
	TP_PREFIX,     /* its beginning ("JitSplit.hot" for JitSplit.hotA(...)) */
	TP_SUBSTR,     /* anywhere in it */
};

/* Which stacks count, and what is counted of them. Zero means "any" / samples of event 0. */
struct tp_filter {
	uint32_t pid;             /* 0: every process */
	uint32_t tid;             /* 0: every thread */
	const char *comm;         /* exact thread name, NULL: any */
	const char *comm_prefix;  /* the thread name's beginning ("worker-"), NULL: any */
	int event;                /* index in the profile's events */
	bool weight;              /* sum the event's weight (periods: events or ns), not samples */
};

/* The index of event name in p, or -1. */
static inline int tp_find_event(const struct vp_profile *p, const char *name)
{
	for (int e = 0; e < p->nevents; e++)
		if (!strcmp(p->events[e].name, name))
			return e;
	return -1;
}

/* The session at sess loaded with o (NULL: everything), or the test fails saying why. */
static inline struct vp_profile *tp_load(const char *sess, const struct vp_session_opts *o)
{
	struct vp_session_opts none = { 0 };
	char err[512];
	struct vp_profile *p = vp_profile__new();

	ASSERT_NOT_NULL(p);
	if (vp_session__load(sess, p, o ? o : &none, err, sizeof(err)))
		FAIL("load %s: %s", sess, err);
	return p;
}

static inline bool tp_name_matches(const char *name, const char *want, enum tp_match m)
{
	switch (m) {
	case TP_PREFIX: return !strncmp(name, want, strlen(want));
	case TP_SUBSTR: return strstr(name, want) != NULL;
	default: return !strcmp(name, want);
	}
}

/* Whether stack s has a frame named name (matched by m) anywhere; name NULL: yes. */
static inline bool tp_stack_has(const struct vp_profile *p, const struct vp_stack *s, const char *name, enum tp_match m)
{
	if (!name)
		return true;
	for (uint32_t k = 0; k < s->nframes; k++)
		if (tp_name_matches(p->frames[s->frames[k]].name, name, m))
			return true;
	return false;
}

static inline bool tp_stack_passes(const struct vp_stack *s, const struct tp_filter *f)
{
	return (!f->pid || s->pid == f->pid) && (!f->tid || s->tid == f->tid) &&
	       (!f->comm || (s->comm && !strcmp(s->comm, f->comm))) &&
	       (!f->comm_prefix || (s->comm && !strncmp(s->comm, f->comm_prefix, strlen(f->comm_prefix))));
}

static inline double tp_stack_count(const struct vp_stack *s, const struct tp_filter *f)
{
	return (double)(f->weight ? s->weight[f->event] : s->samples[f->event]);
}

/* Whether a frame of s is Java code (compiled, inlined or interpreted). */
static inline bool tp_stack_has_java(const struct vp_profile *p, const struct vp_stack *s)
{
	for (uint32_t k = 0; k < s->nframes; k++) {
		int l = p->frames[s->frames[k]].layer;

		if (l == VP_LAYER_JIT || l == VP_LAYER_INLINED || l == VP_LAYER_INTERPRETED)
			return true;
	}
	return false;
}

/* The samples (or weight) of the stacks that pass f; *with (when not NULL) gets the part
 * whose stack satisfies has(p, stack, ctx). */
static inline double tp_sum_if(const struct vp_profile *p, const struct tp_filter *f,
			       bool (*has)(const struct vp_profile *p, const struct vp_stack *s, const void *ctx),
			       const void *ctx, double *with)
{
	double all = 0, in = 0;

	for (size_t i = 0; i < p->nstacks; i++) {
		const struct vp_stack *s = &p->stacks[i];

		if (!tp_stack_passes(s, f))
			continue;
		all += tp_stack_count(s, f);
		if (with && has(p, s, ctx))
			in += tp_stack_count(s, f);
	}
	if (with)
		*with = in;
	return all;
}

struct tp_frame_query {
	const char *name;
	enum tp_match m;
};

static inline bool tp_has_query(const struct vp_profile *p, const struct vp_stack *s, const void *q)
{
	const struct tp_frame_query *fq = q;

	return tp_stack_has(p, s, fq->name, fq->m);
}

static inline bool tp_has_java(const struct vp_profile *p, const struct vp_stack *s, const void *ctx)
{
	(void)ctx;
	return tp_stack_has_java(p, s);
}

/* The samples (or weight) of the stacks that pass f; *with (when not NULL) gets the part
 * whose stack has a frame named name (matched by m). */
static inline double tp_sum(const struct vp_profile *p, const struct tp_filter *f, const char *name, enum tp_match m,
			    double *with)
{
	return tp_sum_if(p, f, tp_has_query, &(struct tp_frame_query){ name, m }, with);
}

/* The samples (or weight) of the stacks that pass f whose stack has a frame named name. */
static inline double tp_with(const struct vp_profile *p, const struct tp_filter *f, const char *name, enum tp_match m)
{
	double with;

	tp_sum(p, f, name, m, &with);
	return with;
}

/* The share of the samples (or weight) of the stacks that pass f whose stack has a frame
 * named name (the report's total%); 0 when nothing passes. */
static inline double tp_share(const struct vp_profile *p, const struct tp_filter *f, const char *name, enum tp_match m)
{
	double with, all = tp_sum(p, f, name, m, &with);

	return all > 0 ? with / all : 0;
}

#endif
