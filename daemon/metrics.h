/* What viprof serve says about itself, for operators who alert on the profiler: the
 * counters behind GET /metrics (the Prometheus text format, version 0.0.4) and the
 * cumulative figures in each interval's service.json. One struct shared by the
 * continuous recording (which counts), the pusher and the HTTP endpoints (which read);
 * every field is read and written under its lock, which nothing holds while doing I/O. */
#ifndef VIPROF_SERVICE_METRICS_H
#define VIPROF_SERVICE_METRICS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define VP_METRICS_MAX_PUSH 8          /* push targets (--push) counted one by one */

struct vp_push_counts {
	char target[128];                 /* "pyroscope http://127.0.0.1:4040" (no credentials) */
	uint64_t ok, failed;              /* attempts that were answered 2xx / were not */
	uint64_t sent;                    /* intervals delivered */
	uint64_t dropped;                 /* intervals dropped from a full queue, oldest first */
	uint64_t rejected;                /* intervals dropped because the backend refused them for good (4xx) */
	uint64_t refused;                 /* attempts not made: the target's socket belongs to a user not allowed */
	uint64_t queued;                  /* intervals waiting now */
	uint64_t queued_bytes;
};

struct vp_svc_metrics {
	pthread_mutex_t lock;
	/* The continuous recording: intervals ended, and what they held. */
	uint64_t intervals, interval_errors;
	uint64_t samples, lost, bytes;    /* over the ended intervals */
	uint64_t cur_samples, cur_lost;   /* the interval being recorded, so far */
	uint64_t freq;                    /* its rate now (Hz), 0 when none */
	/* Its costs besides sampling, over the ended intervals (ns): the JVM attaches' CPU,
	 * the rotations' CPU (their attaches included), the unwind tables' building or loading. */
	uint64_t jvm_cpu_ns, rotate_cpu_ns, tables_ns;
	/* The HTTP side. */
	uint64_t profile_requests, scrapes;
	struct vp_push_counts push[VP_METRICS_MAX_PUSH];
	int npush;
};

void vp_svc_metrics__init(struct vp_svc_metrics *m);
void vp_svc_metrics__fini(struct vp_svc_metrics *m);
/* Registers a push target; returns its index (for the vp_push_counts updates) or -1. */
int vp_svc_metrics__add_push(struct vp_svc_metrics *m, const char *target);
/* The Prometheus text exposition of m, with the service's CPU seconds and resident
 * memory read now; malloc'd into *buf. 0 or -ENOMEM. */
int vp_svc_metrics__render(struct vp_svc_metrics *m, char **buf, size_t *len);
/* The same figures as one JSON object's members (no braces), for service.json. */
int vp_svc_metrics__json(struct vp_svc_metrics *m, char **buf, size_t *len);

#endif
