/* Report writers: one output interface with a sticky error, one options struct, one
 * function per format. Callers (report_cmd.c, the service's pages) build the profile
 * (postproc/session.h) and reach the writers through report/report_pipeline.h. */
#ifndef VIPROF_REPORT_REPORT_H
#define VIPROF_REPORT_REPORT_H

#include <stdbool.h>
#include <stdio.h>
#include "common/output.h"
#include "postproc/profile.h"

enum vp_sort { VP_SORT_SELF, VP_SORT_TOTAL };

struct vp_report_opts {
	int top;                 /* rows in hotspot tables; 0 = default (25) */
	enum vp_sort sort;
	int sort_event;          /* which event column to sort by */
	bool layers;             /* print the per-layer summary (text) */
	bool color;              /* colour allowed: a terminal and no NO_COLOR */
	const char *title;       /* overrides the generated title */
	bool threads;            /* folded: each line starts with its thread's name (async-profiler's
				  * -t); without, stacks of every thread merge, as its collapsed output */
	bool reverse;            /* inverted, callee first: folded lines leaf first; text adds the
				  * callers of the hottest frames (the HTML page has its own control) */
};

/* Each returns 0 or -errno (the output's sticky error included). base is the profile
 * to compare against for --diff, or NULL. */
int report_text(const struct vp_profile *p, const struct vp_profile *base, struct vp_out *o,
		const struct vp_report_opts *opts);
int report_folded(const struct vp_profile *p, struct vp_out *o, const struct vp_report_opts *opts);
int report_html(const struct vp_profile *p, const struct vp_profile *base, struct vp_out *o,
		const struct vp_report_opts *opts);
/* The HTML report's time strip (p->times): at most this many buckets, each
 * vp_html_bucket_ns(span) wide, a round number of milliseconds or more. */
#define VP_HTML_TIME_BUCKETS 300
uint64_t vp_html_bucket_ns(uint64_t span);
int report_pprof(const struct vp_profile *p, struct vp_out *o, const struct vp_report_opts *opts);
int report_json(const struct vp_profile *p, const struct vp_profile *base, struct vp_out *o,
		const struct vp_report_opts *opts);
/* JDK Flight Recorder (report_jfr.c): the samples of opts->sort_event as jdk.ExecutionSample
 * events (the first CPU event when that is alloc, lock or off-cpu), and the alloc, lock and
 * off-cpu events' own, each at its time from p->spans (vp_session_opts.spans); -EINVAL for
 * an event that is no CPU time and has no events of its own (vp_jfr_refuses_event). */
int report_jfr(const struct vp_profile *p, struct vp_out *o, const struct vp_report_opts *opts);
/* Whether JFR output refuses this event as the one drawn: steal and the wall views (wall,
 * blocked, runnable) are neither CPU samples nor events of their own. */
bool vp_jfr_refuses_event(const char *name);

#endif
