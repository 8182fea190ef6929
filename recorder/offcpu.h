/* The recorder's hook for the context-switch tracer (sampler-kernel/sched_tracer.h):
 * started beside the sampler in every recording that can load it, for exact steal per
 * thread; with --off-cpu it must start, and also charges off-CPU intervals. Without
 * it (no BPF, e.g. the perf backend as an unprivileged user) steal falls back to the
 * proportional attribution of postproc/steal.c. With -g it hooks cfg->before_sampling
 * so that, once the bpf sampler has loaded its stack walker, user stacks at switch-out
 * are walked with it (vp_sched__hook). Internal to recorder/. */
#ifndef VIPROF_RECORDER_OFFCPU_H
#define VIPROF_RECORDER_OFFCPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "sampler-kernel/sampler.h"

struct vp_sched;

/* Starts the tracer for the sampler's target, writing through cfg->sink, with the
 * session event indexes after cfg's events. *out is NULL when the tracer was not
 * wanted or could not start without being required. 0, or -errno with a one-line
 * message in err when off_cpu was asked for and cannot be had. Notes go to log
 * (NULL: stderr). */
int record_sched__start(struct sampler_config *cfg, bool off_cpu, bool quiet, FILE *log,
			struct vp_sched **out, char *err, size_t errlen);
/* The recording's sampling window opens (start) or closes (end): see vp_sched__window.
 * Accepts NULL. */
void record_sched__window(struct vp_sched *s, uint64_t start, uint64_t end);
/* In the record loop: drains the tracer's sums when due. 0 or -errno. */
int record_sched__poll(struct vp_sched *s, uint64_t now);
/* After a rotation, once the sink writes the new session: the tracer's events are
 * declared in it too. 0 or -errno. */
int record_sched__rotated(struct vp_sched *s);
/* After the sampler stopped: the last sums and the totals; prints the cross-check
 * unless quiet. 0 or -errno. Frees the tracer. */
int record_sched__finish(struct vp_sched *s, bool quiet, FILE *log);

/* Detaches and frees without writing anything (a recording that failed to start).
 * Accepts NULL. */
void record_sched__free(struct vp_sched *s);

#endif
