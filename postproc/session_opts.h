/* What a report asks of a session's loading (postproc/session.h): the threads, times
 * and views it selects. Its own header so that the loader's parts read it without
 * including the loader. */
#ifndef VIPROF_SESSION_OPTS_H
#define VIPROF_SESSION_OPTS_H

#include <stdbool.h>
#include <stdint.h>

struct vp_session_opts {
	const uint32_t *pids; int npids;    /* keep only these pids (0 = all) */
	const uint32_t *tids; int ntids;
	const char *comm;                   /* keep only threads with this comm, or NULL */
	const char *container;              /* keep only processes of this container (common/container.h's
					     * vp_container__matches), or NULL */
	double t_from, t_to;                /* seconds since the start of recording; t_to <= 0 = to the end */
	bool map_mode_flat;                 /* --map-mode flat */
	const char *hv_syms;                /* --hv-syms: a Xen symbol ELF, or NULL */
	bool vthreads;                      /* report --vthreads: a carrier's samples while a virtual
					     * thread was mounted are that virtual thread's */
	bool no_locations;                  /* no by-address view (p->locations, the stacks'
					     * locs): only pprof reads it, and it is a third
					     * of a large profile's memory */
	bool times;                         /* keep each sample's time (p->times), for the
					     * HTML report's time strip */
	bool spans;                         /* keep each sample record's time and weight
					     * (p->spans), for the JFR writer's events */
};

#endif
