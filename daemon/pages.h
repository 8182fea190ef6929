/* What the service's HTTP side serves from session directories: a recorded session as
 * a gzipped pprof or an HTML flame graph (through report/report_pipeline.h, the path
 * `viprof report` takes: the same session gives the same bytes), and the index page listing the continuous recording's intervals. Each returns a malloc'ed
 * buffer the caller frees. */
#ifndef VIPROF_SERVICE_PAGES_H
#define VIPROF_SERVICE_PAGES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The session at dir (a path) as a gzipped pprof / an HTML flame graph. With
 * fold_kernel, every run of kernel frames becomes one frame "[kernel]" and no address
 * is written (for peers the kernel would not show kernel addresses). 0, or -errno with
 * a one-line reason in err; -ENODATA when it holds no sample. */
int vp_pages__pprof(const char *dir, bool fold_kernel, char **buf, size_t *len, char *err, size_t errlen);
int vp_pages__flame(const char *dir, const char *title, bool fold_kernel, char **buf, size_t *len, char *err,
		    size_t errlen);

/* A time window of one session: [from_ns, to_ns] in CLOCK_MONOTONIC, the clock the
 * session's records are stamped with; 0, 0 for all of it. */
struct vp_pages_part {
	const char *dir;
	uint64_t from_ns, to_ns;
};
/* The windows of several sessions (the shared recording's segments) merged into one
 * gzipped pprof of duration_ns (the window the request asked for). As vp_pages__pprof
 * otherwise. */
int vp_pages__pprof_parts(const struct vp_pages_part *parts, int n, uint64_t duration_ns, bool fold_kernel, char **buf,
			  size_t *len, char *err, size_t errlen);

/* What the index page says about the service, besides the intervals. */
struct vp_pages_status {
	const char *hostname;
	const char *continuous_dir;   /* NULL: no --continuous; for the page only */
	int continuous_dirfd;         /* DIR as the service opened it: read through it alone */
	unsigned interval_s;
	double cpu_budget_pct;        /* of one CPU */
	uint64_t freq;                /* the continuous recording's rate now */
	const char *current;          /* the interval being recorded, or NULL */
	const char *last_error;       /* or NULL */
};

/* The index page (HTML): the endpoints, and the continuous intervals (newest first, at
 * most max) with their start, length, samples, size, the service's CPU time and links
 * to each one's flame graph and pprof. 0 or -errno. */
int vp_pages__index(const struct vp_pages_status *st, int max, char **buf, size_t *len);

#endif
