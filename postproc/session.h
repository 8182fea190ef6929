/* Loading a recorded session directory into a profile: the record stream, the process
 * and mapping history, kernel, native (ELF), JIT and hypervisor symbols, layers. */
#ifndef VIPROF_SESSION_H
#define VIPROF_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "postproc/profile.h"

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

/* Reads the session directory dir and adds its samples to p (events matched by name; p may
 * already hold other sessions: that is how merge works). Symbolizes kernel (KSYM records), native
 * (ELF), JIT (maps/jit_index.h) frames and assigns layers. 0, or -errno with a one-line message
 * in err. A torn tail is not an error: p->incomplete is set and a warning added. */
int vp_session__load(const char *dir, struct vp_profile *p, const struct vp_session_opts *o,
		     char *err, size_t errlen);

/* The name of an enum vp_walk_end value in reports ("root", "no_rule", ...); the loader
 * counts samples by it in the profile's meta as "stack_end.<name>". */
const char *vp_walk_end_name(int k);

/* Where separate debug files are looked for (default "/usr/lib/debug"); for tests and
 * for a symbol tree copied from the recording machine. NULL restores the default. */
void vp_session__set_debug_root(const char *root);

/* How many bytes of sample records the first pass keeps for the second (32 MiB unless
 * set); the rest is read from the file again. For tests of that re-read. Returns the
 * previous value. */
size_t vp_session__set_keep_bytes(size_t bytes);

#endif
