/* Looking things up in a loaded profile, for the tests that check one: an event by name,
 * a frame on a stack by a part of its name. Header-only. */
#ifndef VIPROF_TEST_PROFILE_UTIL_H
#define VIPROF_TEST_PROFILE_UTIL_H

#include <stdbool.h>
#include <string.h>

#include "postproc/profile.h"

/* The index of event name in p, or -1. */
static inline int tp_find_event(const struct vp_profile *p, const char *name)
{
	for (int e = 0; e < p->nevents; e++)
		if (!strcmp(p->events[e].name, name))
			return e;
	return -1;
}

/* Whether a frame of s has needle in its name. */
static inline bool tp_has_frame(const struct vp_profile *p, const struct vp_stack *s, const char *needle)
{
	for (uint32_t i = 0; i < s->nframes; i++)
		if (strstr(p->frames[s->frames[i]].name, needle))
			return true;
	return false;
}

#endif
