/* One report pipeline for every caller: `viprof report` and the service's pages
 * (/flame/NAME, /pprof/NAME, /debug/pprof/profile) load a session with the options
 * the format needs, add the format's views, and write through one switch, so that the
 * same session gives the same bytes from both. What differs is the caller's to decide
 * and to say: the CLI's filters, --wall, -e and --diff; the service's title, its
 * interval windows and kernel folding for clients that may not see kernel frames. */
#ifndef VIPROF_REPORT_PIPELINE_H
#define VIPROF_REPORT_PIPELINE_H

#include <stdbool.h>

#include "report/report.h"
#include "postproc/session.h"

enum vp_report_format {
	VP_REPORT_TEXT,
	VP_REPORT_FOLDED,
	VP_REPORT_HTML,
	VP_REPORT_PPROF,
	VP_REPORT_JSON,
	VP_REPORT_JFR,
	VP_REPORT_NFORMATS
};

/* "text", "folded", "html", "pprof", "json", "jfr"; NULL past the last. */
const char *vp_report_format_name(enum vp_report_format f);

/* Sets what the loader keeps for format f: by-address locations for pprof only (they
 * are a third of a large profile's memory), each sample's time for the HTML time strip,
 * each sample record's time and weight for JFR's events.
 * The caller's other options (filters, windows) stay as they are. */
void vp_report__session_opts(enum vp_report_format f, struct vp_session_opts *so);

/* The format's own additions to a loaded profile: the flame graph offers the combined
 * wall view (running, runnable, blocked) beside the recorded events whenever the session
 * has off-CPU time, unless it draws a diff (base) or the caller chose the wall events
 * itself (wall_chosen). Without room for them the events stay alone. */
void vp_report__add_views(struct vp_profile *p, enum vp_report_format f, const struct vp_profile *base,
			  bool wall_chosen);

/* Writes p (against base for --diff, or NULL) in format f. wall_table: the text format
 * writes the --wall table instead of the hotspots (which adds the wall events to p). 0 or -errno, the output's sticky
 * error included. */
int vp_report__write(struct vp_profile *p, const struct vp_profile *base, enum vp_report_format f,
		     bool wall_table, struct vp_out *o, const struct vp_report_opts *ro);

#endif
