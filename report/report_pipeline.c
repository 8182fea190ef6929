#include "report/report_pipeline.h"

#include <errno.h>
#include <string.h>

#include "report/wall.h"

static const char *const format_names[VP_REPORT_NFORMATS] = {
	[VP_REPORT_TEXT] = "text", [VP_REPORT_FOLDED] = "folded", [VP_REPORT_HTML] = "html",
	[VP_REPORT_PPROF] = "pprof", [VP_REPORT_JSON] = "json", [VP_REPORT_JFR] = "jfr",
};

const char *vp_report_format_name(enum vp_report_format f)
{
	return (unsigned)f < VP_REPORT_NFORMATS ? format_names[f] : NULL;
}

void vp_report__session_opts(enum vp_report_format f, struct vp_session_opts *so)
{
	so->no_locations = f != VP_REPORT_PPROF;
	so->times = f == VP_REPORT_HTML;
	so->spans = f == VP_REPORT_JFR;
}

void vp_report__add_views(struct vp_profile *p, enum vp_report_format f, const struct vp_profile *base,
			  bool wall_chosen)
{
	if (f != VP_REPORT_HTML || base || wall_chosen)
		return;
	bool has_off = false;
	for (int e = 0; e < p->nevents; e++)
		has_off |= !strcmp(p->events[e].name, "off-cpu");
	char err[256];
	if (has_off)
		vp_wall__add_events(p, err, sizeof(err));
}

int vp_report__write(struct vp_profile *p, const struct vp_profile *base, enum vp_report_format f,
		     bool wall_table, struct vp_out *o, const struct vp_report_opts *ro)
{
	switch (f) {
	case VP_REPORT_TEXT:
		return wall_table ? report_wall_text(p, o, ro) : report_text(p, base, o, ro);
	case VP_REPORT_FOLDED:
		return report_folded(p, o, ro);
	case VP_REPORT_HTML:
		return report_html(p, base, o, ro);
	case VP_REPORT_PPROF:
		return report_pprof(p, o, ro);
	case VP_REPORT_JSON:
		return report_json(p, base, o, ro);
	case VP_REPORT_JFR:
		return report_jfr(p, o, ro);
	default:
		return -EINVAL;
	}
}
