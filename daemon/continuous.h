/* viprof serve --continuous DIR: a rolling whole-VM recording, one session per fixed
 * interval in DIR/<UTC start>/ (VP_INTERVAL_FMT below), old intervals
 * removed by age and by total size, and a CPU budget: the recording's own CPU time is
 * measured per interval, logged, written beside the session (service.json), and the
 * next interval samples at a lower rate when it went over. JVMs get the agent at the
 * start of each interval (so JVMs started later are covered from their first full
 * interval), except those that opt out (VIPROF_NO_AGENT=1 in their environment) or
 * that --jvm-attach leaves out. */
#ifndef VIPROF_SERVICE_CONTINUOUS_H
#define VIPROF_SERVICE_CONTINUOUS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#define VP_CONT_DEFAULT_INTERVAL 60
#define VP_CONT_DEFAULT_BUDGET 2.0       /* % of one CPU */
#define VP_CONT_MIN_FREQ 19              /* never below: a profile needs samples */
#define VP_CONT_DEFAULT_FREQ 19          /* Hz per CPU, as fleet profilers sample (Parca 19, OTel 20) */
#define VP_CONT_FILE "service.json"      /* per interval, beside the session's files */

struct vp_record_opts;
struct vp_svc_metrics;

struct vp_cont_opts {
	const char *dir;
	unsigned interval_s;
	uint64_t keep_age_s;       /* 0: no age limit */
	uint64_t keep_bytes;       /* 0: no size limit */
	double cpu_budget_pct;     /* of one CPU; 0: no budget */
	uint64_t freq;             /* the rate asked for (Hz) */
	const struct vp_record_opts *jvm;   /* --jvm-attach's selection, or NULL: all */
	const char *agent;         /* the JVM agent, or NULL: none */
	bool no_jit;
	bool off_cpu;              /* also off-CPU time: the switch tracer runs (a cost per switch) */
	struct vp_svc_metrics *metrics;   /* counted into (daemon/metrics.h), or NULL */
	FILE *log;
};

/* The rate of the next interval: lower, in proportion and with 10% room, when the last
 * one used more than the budget (never below min); back up by at most half when it
 * used less than half of it (never above want, and never past what the last cost
 * predicts for the budget); else unchanged. Pure. */
uint64_t vp_budget__next_freq(uint64_t cur, uint64_t want, uint64_t min, double used_pct, double budget_pct);

/* Removes intervals under dirfd, oldest first, while one is older than keep_age_s
 * (by the start time in its name, plus interval_s) or all of them hold more than
 * keep_bytes on disk; never the one named keep (being recorded). Only names of the
 * interval format are considered; removal goes through descriptors
 * (vp_safe_remove_tree). Returns the number removed or -errno; each removal is logged. */
int vp_retention__apply(int dirfd, time_t now, unsigned interval_s, uint64_t keep_age_s, uint64_t keep_bytes,
			const char *keep, FILE *log);

/* The format of a continuous interval's directory name: its UTC start time, so that
 * names sort by time ("20261123T075056Z"). */
#define VP_INTERVAL_FMT "%Y%m%dT%H%M%SZ"
#define VP_INTERVAL_NAME_LEN 16

/* Whether name is an interval name (exactly the format above): the only names the
 * HTTP pages open under the continuous directory. */
bool vp_interval__name_ok(const char *name);


struct vp_cont;
/* Opens (creating, 0700) DIR and starts recording on a thread of its own. DIR must be
 * owned by root and not writable by group or others (-EPERM, with the fix). NULL with
 * errno and a one-line reason in err. */
struct vp_cont *vp_cont__start(const struct vp_cont_opts *o, char *err, size_t errlen);
/* What the index page shows: the interval being recorded, the rate now, the last
 * error ("" when none). */
void vp_cont__status(struct vp_cont *c, char *current, size_t curlen, uint64_t *freq, char *lasterr,
		     size_t errlen);
/* The O_PATH descriptor of DIR, opened once at start: the pages read intervals through
 * it (/proc/self/fd/N/NAME), never by DIR's path again. */
int vp_cont__dirfd(const struct vp_cont *c);
/* Calls fn(ctx, ...) with each interval that ends from now on: its name, its wall-clock
 * span (seconds since the epoch) and its rate. On the recording thread; the service
 * hands intervals to the pusher (daemon/push.h) this way, so that this room does not
 * depend on the pusher (which reads the pages, which read the interval names here). */
typedef void (*vp_cont_ended_fn)(void *ctx, const char *name, uint64_t from_s, uint64_t until_s, uint64_t freq);
void vp_cont__on_ended(struct vp_cont *c, vp_cont_ended_fn fn, void *ctx);
/* Ends the current interval cleanly (its session is complete) and stops. NULL ok. */
void vp_cont__stop(struct vp_cont *c);

#endif
