/* Event names: perf-style parsing, a live test of whether this machine (or VM) can
 * sample an event, and the default event with the reason for choosing it. */
#ifndef VIPROF_HV_EVENTS_H
#define VIPROF_HV_EVENTS_H

#include <stddef.h>

#include "sampler-kernel/sampler.h"

/* Parses a comma list of perf-style names (cycles, instructions, cache-misses, branch-misses,
 * cache-references, branches, cpu-clock, task-clock, page-faults/faults, context-switches/cs,
 * cpu-migrations, minor-faults, major-faults, ...), the generic cache events
 * (L1-dcache-load-misses, LLC-load-misses, dTLB-load-misses, ...) and raw "rNNNN" (hex,
 * PERF_TYPE_RAW), each optionally followed by ":u" (user only) or ":k" (kernel only).
 * perf's term syntax sets one event's rate: "page-faults/period=1/", "cpu-clock/freq=999/u"
 * (terms period=N and freq=N; the event keeps its plain name, e.g. "page-faults").
 * Returns the number parsed or -errno with a one-line message in err. Rates are set only
 * from terms (else period = freq = 0: the caller applies -c/-F). */
int vp_events__parse(const char *list, struct sampler_event *out, int max, char *err, size_t errlen);

/* Live perf_event_open test of one event on this machine. 0 if it can be sampled; else -errno
 * and a one-line message naming the event, the cause, and what IS available here, e.g.
 * "event 'cycles' cannot be counted on this VM: the hypervisor exposes no PMU; available: cpu-clock, task-clock, page-faults, ...; try -e cpu-clock" */
/* As vp_events__check, for counting: an event a counting-only vPMU can count but not
 * sample (no overflow interrupt) passes, which `viprof stat` needs. 0 or -errno. */
int vp_events__check_count(const struct sampler_event *ev, char *err, size_t errlen);
int vp_events__check(const struct sampler_event *ev, char *err, size_t errlen);

/* The default event: cycles where the (v)PMU counts it, else cpu-clock; why says which and why in one line. */
int vp_events__default(struct sampler_event *out, char *why, size_t whylen);

#endif
