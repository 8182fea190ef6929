/* What one sample weighs: the session's events as the profile's, their totals from the
 * sampler's COUNTER records, the factors that make up for multiplexing (per interval
 * between two totals), the counts after each thread's last sample (VP_SAMPLE_TAIL), and
 * the records the sampler lost. See postproc/session_weights.h. */
#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/count_scale.h"
#include "common/util.h"
#include "postproc/session_weights.h"

#define MAX_EVENTS 256
#define VP_MAX_SAMPLED_EVENTS 16  /* events with totals: record takes at most 8 */

struct vp_weights {
	struct vp_profile *p;
	int evmap[MAX_EVENTS];       /* session event index -> profile event index */
	/* Per session event: the sampler's totals (COUNTER records) and the factor that
	 * makes up for multiplexing (time_enabled / time_running, 1 when not multiplexed). */
	struct vp_counter totals[VP_MAX_SAMPLED_EVENTS];
	bool has_total[VP_MAX_SAMPLED_EVENTS];
	double scale[VP_MAX_SAMPLED_EVENTS];
	/* Per session event: its totals read while recording (VP_COUNTER_INTERVAL) and the
	 * final ones, in stream order, each with the factor for the samples between the
	 * one before and it: multiplexing made up for per interval. */
	struct mux_point { uint64_t time, enabled, running; double scale; } *mux[VP_MAX_SAMPLED_EVENTS];
	size_t nmux[VP_MAX_SAMPLED_EVENTS], capmux[VP_MAX_SAMPLED_EVENTS];
	uint64_t period_sum[VP_MAX_SAMPLED_EVENTS]; /* sum of the samples' periods, per event */
	uint64_t tail_sum[VP_MAX_SAMPLED_EVENTS];   /* of VP_SAMPLE_TAIL records: counts after the last samples */
	/* Samples are counted in the first pass and resolved in the second. */
	uint64_t nsamples;
	uint64_t nsample_recs;      /* SAMPLE records the first pass read: samples and tails */
	bool ev_sampled[MAX_EVENTS]; /* session events that have samples */
	bool ev_user_clock[MAX_EVENTS]; /* a clock event sampled in user mode only (VP_EVENT_USER_ONLY) */
	bool ev_software[MAX_EVENTS];   /* a software or tracepoint event: the kernel never multiplexes it */
	uint64_t sample_lo, sample_hi;   /* the first and last sample's times: when it sampled */
	uint64_t time_period;        /* ns per sample of the first time-based event, 0 if none */
	int time_event;              /* its profile index, or -1 */
	uint64_t lost, end_lost;
};

struct vp_weights *vp_weights__new(struct vp_profile *p)
{
	struct vp_weights *w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	w->p = p;
	w->time_event = -1;
	for (int i = 0; i < MAX_EVENTS; i++)
		w->evmap[i] = -1;
	return w;
}

void vp_weights__free(struct vp_weights *w)
{
	if (!w)
		return;
	for (int e = 0; e < VP_MAX_SAMPLED_EVENTS; e++)
		free(w->mux[e]);
	free(w);
}

int vp_weights__event(struct vp_weights *w, const struct vp_event_desc *e, const char *name)
{
	if (e->index >= MAX_EVENTS)
		return 0;
	int idx = vp_profile__add_event(w->p, name, e->flags & VP_EVENT_TIME_UNITS ? "nanoseconds" : "events");
	if (idx < 0)
		return idx;
	w->evmap[e->index] = idx;
	w->ev_software[e->index] = e->perf_type == PERF_TYPE_SOFTWARE || e->perf_type == PERF_TYPE_TRACEPOINT;
	w->ev_user_clock[e->index] = (e->flags & VP_EVENT_TIME_UNITS) && !(e->flags & VP_EVENT_SCHED) &&
				     ((e->flags & VP_EVENT_USER_ONLY) || strstr(name, ":u"));
	if ((e->flags & VP_EVENT_TIME_UNITS) && !(e->flags & VP_EVENT_SCHED) && w->time_event < 0) {
		/* Steal is shown in samples of this event's period so that its columns compare. */
		w->time_event = idx;
		w->time_period = e->period ? e->period : e->freq ? 1000000000ull / e->freq : 0;
	}
	return 1;
}

void vp_weights__count(struct vp_weights *w, const struct vp_sample *s, uint64_t t)
{
	if (s->event < MAX_EVENTS)
		w->ev_sampled[s->event] = true;
	w->nsample_recs++;
	if (s->flags & VP_SAMPLE_TAIL) {
		if (s->event < VP_MAX_SAMPLED_EVENTS)
			w->tail_sum[s->event] += s->period;
		return;
	}
	if (s->event < VP_MAX_SAMPLED_EVENTS)
		w->period_sum[s->event] += s->period;
	w->nsamples++;
	if (!w->sample_lo || t < w->sample_lo)
		w->sample_lo = t;
	if (t > w->sample_hi)
		w->sample_hi = t;
}


int vp_weights__counter(struct vp_weights *w, uint64_t t, const void *b, size_t blen)
{
	struct vp_counter c;
	if (blen < sizeof(c))
		return 0;
	memcpy(&c, b, sizeof(c));
	if (!(c.flags & VP_COUNTER_SAMPLED) || c.pid != VP_COUNTER_ALL || c.event >= VP_MAX_SAMPLED_EVENTS)
		return 0;   /* a per-thread count: nothing in the report uses it yet */
	uint32_t e = c.event;
	if (vp_grow((void **)&w->mux[e], &w->capmux[e], w->nmux[e] + 1, sizeof(*w->mux[e])))
		return -ENOMEM;
	w->mux[e][w->nmux[e]++] = (struct mux_point){ t, c.time_enabled, c.time_running, 1.0 };
	if (c.flags & VP_COUNTER_INTERVAL)
		return 0;   /* a running total: the final one has the count */
	if ((c.flags & VP_COUNTER_UNGROUPED) && e < MAX_EVENTS && w->evmap[e] >= 0) {
		char key[96];
		snprintf(key, sizeof(key), "ungrouped.%s", w->p->events[w->evmap[e]].name);
		vp_profile__set_meta(w->p, key, "1");
	}
	w->totals[e] = c;
	w->has_total[e] = true;
	return 0;
}

void vp_weights__lost(struct vp_weights *w, uint64_t n)
{
	w->lost += n;
}

void vp_weights__end_lost(struct vp_weights *w, uint64_t n)
{
	w->end_lost = n;
}

/* Samples of an event whose EVENT record was in a skipped chunk (the first chunk
 * holds them all): counted under a stand-in name rather than dropped. Its unit is
 * unknown, so its periods are shown as plain events. */
void vp_weights__damaged_events(struct vp_weights *w)
{
	for (unsigned ev = 0; ev < MAX_EVENTS; ev++) {
		char name[32];
		int idx;

		if (!w->ev_sampled[ev] || w->evmap[ev] >= 0)
			continue;
		snprintf(name, sizeof(name), "event#%u", ev);
		if ((idx = vp_profile__add_event(w->p, name, "events")) < 0)
			continue;  /* no room for another event: these samples stay dropped */
		w->evmap[ev] = idx;
		vp_profile__warn(w->p, "samples of event %u are counted as '%s': its description was lost with a damaged chunk",
				 ev, name);
	}
}

/* Sampled events the (v)PMU multiplexed counted (and sampled) only part of the time
 * they were enabled: their weights are scaled up by time_enabled / time_running, as
 * perf stat scales counts, and the report says so and by how much. The raw count of
 * each event goes into the metadata (count.EVENT) for scripts and tests. */
/* Each interval between two totals of an event gets its own factor, enabled/running
 * over that interval (common/count_scale.h's rule), so that stacks sampled while the
 * event had a counter to itself are not stretched by contention that came later. An
 * interval in which the event never ran has no samples; its enabled time goes to the
 * next interval that ran, as the counters library does. */
static void interval_scales(struct vp_weights *w, int e)
{
	uint64_t pe = 0, pr = 0, carry = 0;

	for (size_t i = 0; i < w->nmux[e]; i++) {
		struct mux_point *m = &w->mux[e][i];
		uint64_t de = m->enabled >= pe ? m->enabled - pe : 0, dr = m->running >= pr ? m->running - pr : 0;

		m->scale = 1.0;
		if (dr == 0) {
			carry += de;
		} else {
			de += carry;
			carry = 0;
			/* Software events are never taken off a counter: a running time behind the
			 * enabled time there is the drift of per-CPU counters read one after
			 * another, not multiplexing (page-fault weights came out +0.35%). */
			if (!w->ev_software[e] && vp_counts__multiplexed(de, dr))
				m->scale = (double)de / (double)dr;
		}
		pe = m->enabled;
		pr = m->running;
	}
}

/* The factor for a sample of session event e at time t: that of the first totals read
 * at or after t; after the last one (none, in a whole session), the last's. */
static double sample_scale(const struct vp_weights *w, uint32_t e, uint64_t t)
{
	if (e >= VP_MAX_SAMPLED_EVENTS || !w->nmux[e])
		return 1.0;
	size_t lo = 0, hi = w->nmux[e];
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (w->mux[e][mid].time < t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return w->mux[e][lo < w->nmux[e] ? lo : w->nmux[e] - 1].scale;
}

void vp_weights__multiplexing(struct vp_weights *w, bool damaged)
{
	for (int e = 0; e < VP_MAX_SAMPLED_EVENTS; e++) {
		const struct vp_counter *c = &w->totals[e];
		w->scale[e] = 1.0;
		interval_scales(w, e);
		if (!w->has_total[e] || w->evmap[e] < 0)
			continue;
		const char *name = w->p->events[w->evmap[e]].name;
		char key[96], val[32];
		snprintf(key, sizeof(key), "count.%s", name);
		snprintf(val, sizeof(val), "%llu", (unsigned long long)c->value);
		vp_profile__set_meta(w->p, key, val);
		/* Each sample weighs the events since its thread's previous one, so what a
		 * thread did after its last sample is in no sample: say how much, when it is
		 * more than noise (few samples: a burst, or a rate the kernel's frequency loop
		 * did not follow). */
		uint64_t sum = w->period_sum[e] + w->tail_sum[e];
		/* A user-mode clock event counts its threads' kernel time too, which none of
		 * its samples can hold: that share is not a tail (issue 23: a service user's
		 * cpu-clock showed 25% "after the last sample"). The perf backend notes
		 * sampler.kernel when it had to exclude the kernel itself. */
		const char *kexcl = vp_profile__meta(w->p, "sampler.kernel");
		bool user_clock = w->ev_user_clock[e] ||
				  (!strcmp(w->p->events[w->evmap[e]].unit, "nanoseconds") &&
				   kexcl && !strncmp(kexcl, "excluded", 8));
		if (user_clock && sum && c->value > sum + sum / 50 && c->time_running >= c->time_enabled) {
			vp_profile__warn(w->p, "%llu of the %llu ns '%s' counted (%.1f%%) are in no stack: the event samples user "
					 "mode only, and its count includes the time its threads spent in the kernel",
					 (unsigned long long)(c->value - sum), (unsigned long long)c->value, name,
					 100.0 * (double)(c->value - sum) / (double)c->value);
			sum = c->value;   /* said: not a tail */
		}
		if (w->tail_sum[e]) {
			snprintf(key, sizeof(key), "tail.%s", name);
			snprintf(val, sizeof(val), "%llu", (unsigned long long)w->tail_sum[e]);
			vp_profile__set_meta(w->p, key, val);
		}
		if (sum && c->value > sum + sum / 50 && c->time_running >= c->time_enabled && damaged)
			vp_profile__warn(w->p, "%llu of the %llu '%s' events counted (%.1f%%) are in no stack: their samples were "
					 "in the damaged part of the session, or came after their thread's last sample",
					 (unsigned long long)(c->value - sum), (unsigned long long)c->value, name,
					 100.0 * (double)(c->value - sum) / (double)c->value);
		else if (sum && c->value > sum + sum / 10 && c->time_running >= c->time_enabled)
			vp_profile__warn(w->p, "%llu of the %llu '%s' events counted (%.1f%%) are in no sample's weight: more "
					 "than the few percent a sampled event leaves after each thread's last sample (the "
					 "threads' final counts were not read); sample more often (-F, -c) for more of them",
					 (unsigned long long)(c->value - sum), (unsigned long long)c->value, name,
					 100.0 * (double)(c->value - sum) / (double)c->value);
		else if (sum && c->value > sum + sum / 50 && c->time_running >= c->time_enabled) {
			/* A few percent is what sampling leaves out (issue 33: 2.0-7.1% on every Java
			 * report, called a problem): a note in the header, not a warning. */
			snprintf(key, sizeof(key), "unsampled.%s", name);
			snprintf(val, sizeof(val), "%llu", (unsigned long long)(c->value - sum));
			vp_profile__set_meta(w->p, key, val);
		}
		if (c->time_running == 0 || !vp_counts__multiplexed(c->time_enabled, c->time_running) || w->ev_software[e])
			continue;
		w->scale[e] = (double)c->time_enabled / (double)c->time_running;
		snprintf(key, sizeof(key), "multiplexed.%s", name);
		snprintf(val, sizeof(val), "%.4f", (double)c->time_running / (double)c->time_enabled);
		vp_profile__set_meta(w->p, key, val);
		vp_profile__warn(w->p, "event '%s' was multiplexed: on a counter %.1f%% of the time it was enabled; "
				 "its weights are scaled by %.2f (record fewer hardware events at once for exact counts)",
				 name, 100.0 * (double)c->time_running / (double)c->time_enabled, w->scale[e]);
	}
}

int vp_weights__profile_event(const struct vp_weights *w, uint32_t e)
{
	return e < MAX_EVENTS ? w->evmap[e] : -1;
}

uint64_t vp_weights__weigh(const struct vp_weights *w, const struct vp_sample *s, uint64_t t, uint64_t *nsamp)
{
	/* The count after the thread's last sample: a weight under that sample's stack,
	 * not a sample. */
	*nsamp = s->flags & VP_SAMPLE_TAIL ? 0 : 1;
	if (s->sched_state) {
		/* A sum of intervals: counted in periods of the time event, like steal, so
		 * that its sample columns and flame graphs compare with cpu-clock's. */
		uint64_t period = vp_weights__sample_ns(w);
		*nsamp = (s->period + period / 2) / period;
		if (!*nsamp)
			*nsamp = 1;
	}
	uint64_t weight = s->period;
	double scale = sample_scale(w, s->event, t);
	if (scale > 1.0)
		weight = (uint64_t)((double)s->period * scale + 0.5);
	return weight;
}

int vp_weights__time_event(const struct vp_weights *w)
{
	return w->time_event;
}

uint64_t vp_weights__sample_ns(const struct vp_weights *w)
{
	return w->time_period ? w->time_period : 1000000;
}

void vp_weights__sampled(const struct vp_weights *w, uint64_t *lo, uint64_t *hi)
{
	*lo = w->sample_lo;
	*hi = w->sample_hi;
}

uint64_t vp_weights__sample_records(const struct vp_weights *w)
{
	return w->nsample_recs;
}

uint64_t vp_weights__lost_total(const struct vp_weights *w)
{
	return w->lost > w->end_lost ? w->lost : w->end_lost;
}
