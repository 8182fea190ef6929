/* Helpers shared by the report writers that owner "reports" maintains (JSON, HTML,
 * pprof): JSON string escaping, per-frame self/total counts, and the diff key space. */
#ifndef VIPROF_REPORT_UTIL_H
#define VIPROF_REPORT_UTIL_H

#include "report/report.h"

/* Writes s as a quoted JSON string: quotes, backslashes and control characters escaped,
 * invalid UTF-8 replaced by U+FFFD. html_safe also escapes '<', '>' and '&' so that the
 * text can sit inside a <script> element ("</script>" can never appear). */
void vp_json_str(struct vp_out *o, const char *s, bool html_safe);

/* Per-frame counts for one event: self = samples whose leaf is the frame, total =
 * samples whose stack holds the frame (once per stack, however deep the recursion). */
struct vp_frame_count {
	uint64_t self, total;
};
/* Returns a calloc'ed array of p->nframes counts (at least one element), or NULL. */
struct vp_frame_count *vp_frame_counts(const struct vp_profile *p, int event);
/* Total samples of one event over all stacks. */
uint64_t vp_event_samples(const struct vp_profile *p, int event);
/* Is the event time measured at context switches (off-cpu, steal) or the wall view's
 * (running, runnable, blocked, wall)? Its samples are then only its nanoseconds in
 * periods of the sampling clock, and reports show its time (ms) instead. */
bool vp_event_measured(const struct vp_profile *p, int event);
/* Is the event the host's share estimated from late sampler timers (VP_STEAL_EST_EVENT,
 * common/steal_est.h)? Its samples are its nanoseconds in periods of the time event, as
 * a measured event's are, but it is never called measured: views say "estimated". */
bool vp_event_estimated(const struct vp_profile *p, int event);
uint64_t vp_event_weight(const struct vp_profile *p, int event);
/* The index in base of the event called p->events[event].name, or -1. */
int vp_event_match(const struct vp_profile *p, int event, const struct vp_profile *base);

/* A common frame key space for p and base: union ids for frames of both profiles, equal
 * when (layer, name, image) are equal. Construction interns p's frames first, so a frame
 * of p keeps its id. */
struct vp_keyspace {
	struct vp_profile *u;    /* the union's frames; its stacks stay empty */
	uint32_t *base_map;      /* base frame id -> union id */
};
int vp_keyspace__init(struct vp_keyspace *k, const struct vp_profile *p, const struct vp_profile *base);
void vp_keyspace__fini(struct vp_keyspace *k);

/* Percent with a zero denominator treated as 0. */
static inline double vp_pct(uint64_t n, uint64_t d)
{
	return d ? 100.0 * (double)n / (double)d : 0.0;
}

#endif
