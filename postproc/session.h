/* Loading a recorded session directory into a profile: the record stream, the process
 * and mapping history, kernel, native (ELF), JIT and hypervisor symbols, layers. */
#ifndef VIPROF_SESSION_H
#define VIPROF_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/session_format.h"   /* vp_walk_end_name */
#include "postproc/profile.h"
#include "postproc/session_opts.h"

/* Reads the session directory dir and adds its samples to p (events matched by name; p may
 * already hold other sessions: that is how merge works). Symbolizes kernel (KSYM records), native
 * (ELF), JIT (maps/jit_index.h) frames and assigns layers. 0, or -errno with a one-line message
 * in err. A torn tail is not an error: p->incomplete is set and a warning added. */
int vp_session__load(const char *dir, struct vp_profile *p, const struct vp_session_opts *o,
		     char *err, size_t errlen);

/* Where separate debug files are looked for (default "/usr/lib/debug"); for tests and
 * for a symbol tree copied from the recording machine. NULL restores the default. */
void vp_session__set_debug_root(const char *root);

/* How many bytes of sample records the first pass keeps for the second (32 MiB unless
 * set); the rest is read from the file again. For tests of that re-read. Returns the
 * previous value. */
size_t vp_session__set_keep_bytes(size_t bytes);

#endif
