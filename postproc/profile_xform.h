/* Views of a profile for comparison and reading (issue 25): a new profile made from a
 * loaded one, with frame names normalised (--norm) or simplified (--simple), stacks kept
 * or dropped by frame regex (--include/--exclude), cut to their Java part (--java-only)
 * or to the nodes at least a given share wide (--minwidth). Every report writer reads
 * the result like any other profile, so all formats agree on what a view shows. */
#ifndef VIPROF_PROFILE_XFORM_H
#define VIPROF_PROFILE_XFORM_H

#include <stdbool.h>
#include <stddef.h>

#include "postproc/profile.h"

#define VP_XFORM_MAX_RE 8

struct vp_xform {
	bool norm;          /* lambda and hidden-class addresses, generated accessor numbers */
	bool simple;        /* no argument lists (Java and C++ signatures) */
	bool java_only;     /* stacks start at their outermost Java frame */
	/* A Java method is one frame whatever ran it: interpreted, C1, C2, OSR or inlined
	 * code of the same name merge (--merge-tiers), drawn in the layer where most of the
	 * method's samples were, without a tier. */
	bool merge_tiers;
	/* POSIX extended regexes on frame names (after norm and simple): a stack is kept
	 * if any of its frames matches any include, dropped if any matches any exclude. */
	const char *include[VP_XFORM_MAX_RE]; int ninclude;
	const char *exclude[VP_XFORM_MAX_RE]; int nexclude;
	/* Percent of event minwidth_event's samples: a call-tree node narrower than that is
	 * cut off with its subtree, its samples left to its caller as self (the flame graph
	 * then looks as if the node were not drawn). 0 = off. */
	double minwidth;
	int minwidth_event;
	bool minwidth_by_thread; /* the tree's first level is the thread name (folded) */
};

/* Whether x changes anything. */
bool vp_xform__active(const struct vp_xform *x);

/* A new profile holding src as x sees it; src is unchanged. NULL with errno set and a
 * one-line message in err (a regex that does not compile: EINVAL). */
struct vp_profile *vp_profile__transform(const struct vp_profile *src, const struct vp_xform *x, char *err,
					 size_t errlen);

/* The normalised form of a Java frame name into out (always NUL-terminated): ".0x…" and
 * "/0x…" hidden-class addresses removed, "$$Lambda$12" -> "$$Lambda", "$Proxy12" ->
 * "$Proxy", "GeneratedMethodAccessor12" (and the constructor and serialization
 * accessors) without the number. Returns the length. */
size_t vp_name__norm(const char *name, char *out, size_t outlen);
/* name without its argument list: "a.B.m(int, long)" -> "a.B.m",
 * "ns::f(int) const [clone .cold]" -> "ns::f", "operator()(int)" -> "operator()". */
size_t vp_name__simple(const char *name, char *out, size_t outlen);

#endif
