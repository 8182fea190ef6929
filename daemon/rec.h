/* One whole-VM recording as the service makes them (-a, -g, cpu-clock at a given rate,
 * the JVM agent attached to the machine's JVMs unless they opt out): start, poll,
 * rotate, stop. In-process, through the recorder library (recorder/recorder.h), on the
 * calling thread: the pprof endpoint and the continuous recording each drive their own. */
#ifndef VIPROF_SERVICE_REC_H
#define VIPROF_SERVICE_REC_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

struct vp_record_opts;

struct vp_svc_rec_opts {
	int parent_fd;             /* the directory to create the session in, opened by the caller */
	const char *name;          /* the session's name under it (created; must not exist) */
	const char *dir;           /* its path, for messages only: never opened */
	uint64_t freq;             /* Hz */
	uint64_t max_freq;         /* the highest rate it may be set to later (0: freq) */
	double seconds;            /* 0: until stopped */
	const struct vp_record_opts *jvm;   /* --jvm-attach's selection (jvm_* fields), or NULL: all */
	const char *agent;         /* the JVM agent, or NULL: none */
	bool no_jit;               /* no agent at all */
	bool off_cpu;              /* also off-CPU time (the switch tracer; else nothing per switch) */
	FILE *log;                 /* the recorder's warnings; NULL: stderr */
};

struct vp_svc_rec;
/* NULL with errno and a one-line reason in err. */
struct vp_svc_rec *vp_svc_rec__start(const struct vp_svc_rec_opts *o, char *err, size_t errlen);
/* Waits up to timeout_ms: >0 still recording, 0 finished (its duration elapsed), <0
 * -errno (the recording failed; vp_svc_rec__stop says why). */
int vp_svc_rec__poll(struct vp_svc_rec *r, int timeout_ms);
/* Ends the current session (complete and readable) and records on into name under
 * parent_fd (created, must not exist; dir is its path for messages), without reloading
 * the sampler. 0, or -errno with a one-line reason in err (the old session then goes on). */
int vp_svc_rec__rotate(struct vp_svc_rec *r, int parent_fd, const char *name, const char *dir, char *err,
		       size_t errlen);
/* Changes the rate before the next rotation, without reloading the sampler. 0, or
 * -ENOTSUP when the sampler cannot (then stop and start a new recording). */
int vp_svc_rec__set_freq(struct vp_svc_rec *r, uint64_t freq);
/* Ends the recording cleanly (the session is complete and readable afterwards).
 * 0, or -errno with a one-line reason in err. */
int vp_svc_rec__stop(struct vp_svc_rec *r, char *err, size_t errlen);
/* Samples of the current session so far (final after stop). */
uint64_t vp_svc_rec__samples(const struct vp_svc_rec *r);
/* Its samples and lost samples so far (final after stop). */
void vp_svc_rec__counts(const struct vp_svc_rec *r, uint64_t *samples, uint64_t *lost);
/* What the recording cost besides sampling so far, over its life (all its sessions):
 * CPU time of JVM attaches and of rotations, time spent on unwind tables (ns), and the
 * files with tables. Running totals, also after stop. */
struct vp_svc_rec_costs {
	uint64_t jvm_cpu_ns, rotate_cpu_ns, tables_ns, table_files;
};
void vp_svc_rec__costs(const struct vp_svc_rec *r, struct vp_svc_rec_costs *c);
void vp_svc_rec__free(struct vp_svc_rec *r);   /* stops first if needed; accepts NULL */

/* CPU time (user + system, ns) the whole service process has used so far, every
 * thread: the recorders run inside it. */
uint64_t vp_svc__cpu_ns(void);

#endif
