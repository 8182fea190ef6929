/* The resolver (the session loader's second pass, postproc/session.c): one sample's
 * addresses into frames. Kernel addresses through the KSYM table, hypervisor ones through
 * --hv-syms, user ones through the mapping the timeline had at the sample's time and its
 * ELF symbols, or for code outside files the JVM's code maps; interpreted frames through
 * the agent's Method* records; an off-CPU sample's state as a frame of its own. An
 * address is looked up once and the address cache keeps what it resolved to. */
#ifndef VIPROF_SESSION_RESOLVER_H
#define VIPROF_SESSION_RESOLVER_H

#include <stddef.h>
#include <stdint.h>

#include "common/session_format.h"
#include "postproc/profile.h"
#include "postproc/session_opts.h"
#include "postproc/session_timeline.h"

/* A sample's VP_MAX_FRAMES, with room for their inlined frames. */
#define VP_MAX_OUT_FRAMES 8192

struct vp_resolver;

/* One sample resolved: its frames root first, the same stack by address for pprof
 * (locations, leaf first; nlocs 0: by frame only), and the thread name it is shown
 * under (the caller's, or one the resolver gives: "[other domains]"). */
struct vp_resolved {
	uint32_t frames[VP_MAX_OUT_FRAMES];
	uint32_t n;
	uint32_t locs[VP_MAX_OUT_FRAMES];
	uint32_t nlocs;
	const char *comm;
};

/* A resolver reading tl, interning frames into p; debug_root: where separate debug
 * files are looked for (NULL: the default). NULL with errno set. */
struct vp_resolver *vp_resolver__new(struct vp_timeline *tl, struct vp_profile *p, const struct vp_session_opts *o,
				     const char *debug_root);
void vp_resolver__free(struct vp_resolver *rs);   /* accepts NULL */
/* --hv-syms: Xen's symbols from the ELF at path. 0, or -errno with why in err. */
int vp_resolver__hv_syms(struct vp_resolver *rs, const char *path, char *err, size_t errlen);

/* The first pass: a KSYM record's body (blen bytes). 0 or -errno. */
int vp_resolver__ksym(struct vp_resolver *rs, const struct vp_ksym *k, size_t blen);

/* Sample s at time t of thread comm (kcomm: its kernel name, or NULL) into out. 0 or
 * -ENOMEM. */
int vp_resolver__sample(struct vp_resolver *rs, const struct vp_sample *s, size_t blen, uint64_t t, const char *comm,
			const char *kcomm, struct vp_resolved *out);

/* After the samples: the meta and warnings of what resolving found (how the user stacks
 * ended, samples in JIT code and what a flat map would have misnamed). */
void vp_resolver__finish(struct vp_resolver *rs);
/* Then the warnings about addresses in no mapping. */
void vp_resolver__warn_unmapped(struct vp_resolver *rs);

#endif
