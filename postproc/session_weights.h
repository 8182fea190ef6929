/* What one sample weighs (the session loader's, postproc/session.c): the session's events
 * as the profile's, their totals, the factors that make up for multiplexing, the counts
 * after each thread's last sample (tails), and the records the sampler lost. Fed by the
 * first pass; asked by the second, for each sample. */
#ifndef VIPROF_SESSION_WEIGHTS_H
#define VIPROF_SESSION_WEIGHTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/session_format.h"
#include "postproc/profile.h"

struct vp_weights;

/* NULL with errno set. Events are added to p. */
struct vp_weights *vp_weights__new(struct vp_profile *p);
void vp_weights__free(struct vp_weights *w);   /* accepts NULL */

/* The first pass: an EVENT record (name: its NUL-terminated name) is registered as the
 * profile's event; 1, 0 when its index is out of range (skipped), or -errno. */
int vp_weights__event(struct vp_weights *w, const struct vp_event_desc *e, const char *name);
/* A SAMPLE record that fits its record (counted, not resolved). */
void vp_weights__count(struct vp_weights *w, const struct vp_sample *s, uint64_t t);
/* A COUNTER record's body (blen bytes). 0 or -ENOMEM. */
int vp_weights__counter(struct vp_weights *w, uint64_t t, const void *body, size_t blen);
/* Records lost: from LOST records (add), and the END record's count. */
void vp_weights__lost(struct vp_weights *w, uint64_t n);
void vp_weights__end_lost(struct vp_weights *w, uint64_t n);

/* After the first pass: samples of an event whose description was in a damaged chunk
 * are counted under a stand-in; then the factors and the meta and warnings about counts
 * (count.EVENT, tail., unsampled., multiplexed.). */
void vp_weights__damaged_events(struct vp_weights *w);
void vp_weights__multiplexing(struct vp_weights *w, bool damaged);

/* The profile's index of session event e, or -1 (never described: not counted). */
int vp_weights__profile_event(const struct vp_weights *w, uint32_t e);
/* The weight of sample s at time t (its period, scaled up where multiplexed), and in
 * *nsamp how many samples it counts as. */
uint64_t vp_weights__weigh(const struct vp_weights *w, const struct vp_sample *s, uint64_t t, uint64_t *nsamp);
/* The first time-based event's profile index (-1: none) and the ns one of its samples
 * stands for (1 ms without one): steal and off-CPU time are counted in samples of it,
 * so that their columns compare with cpu-clock's. */
int vp_weights__time_event(const struct vp_weights *w);
uint64_t vp_weights__sample_ns(const struct vp_weights *w);
/* The first and the last sample's times: when it sampled. */
void vp_weights__sampled(const struct vp_weights *w, uint64_t *lo, uint64_t *hi);
/* SAMPLE records the first pass read (samples and tails). */
uint64_t vp_weights__sample_records(const struct vp_weights *w);
/* What the sampler lost: the larger of the LOST records' sum and the END record's. */
uint64_t vp_weights__lost_total(const struct vp_weights *w);

#endif
