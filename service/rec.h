/* One whole-VM recording as the service makes them (-a, -g, cpu-clock at a given rate,
 * the JVM agent attached to the machine's JVMs unless they opt out): start, poll, stop.
 * Kept behind this small interface so that the pprof endpoint and the continuous
 * recording do not depend on how the recorder is driven: the recorder library
 * (daemon/recorder.h) once it exists, and until then a 'viprof record' child. */
#ifndef VIPROF_SERVICE_REC_H
#define VIPROF_SERVICE_REC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct vp_svc_rec_opts {
	const char *viprof;        /* the viprof executable (the child implementation) */
	const char *dir;           /* the session directory to create (must not exist) */
	uint64_t freq;             /* Hz */
	double seconds;            /* 0: until stopped */
	const char *jvm_attach;    /* record's --jvm-attach value, or NULL (all) */
	bool no_jit;               /* no agent at all */
};

struct vp_svc_rec;
/* NULL with errno and a one-line reason in err. */
struct vp_svc_rec *vp_svc_rec__start(const struct vp_svc_rec_opts *o, char *err, size_t errlen);
/* Waits up to timeout_ms: >0 still recording, 0 finished (its duration elapsed), <0
 * -errno (the recording failed; vp_svc_rec__stop says why). */
int vp_svc_rec__poll(struct vp_svc_rec *r, int timeout_ms);
/* Ends the recording cleanly (the session is complete and readable afterwards) and
 * waits for it. 0, or -errno with a one-line reason in err. */
int vp_svc_rec__stop(struct vp_svc_rec *r, char *err, size_t errlen);
/* CPU time the recording has cost so far (user + system, ns). */
uint64_t vp_svc_rec__cpu_ns(const struct vp_svc_rec *r);
void vp_svc_rec__free(struct vp_svc_rec *r);   /* stops first if needed; accepts NULL */

#endif
