/* The service's recordings (rec.h), in-process through the recorder library: the same
 * code path as 'viprof record -a -g -q', so the sessions are what users know, without
 * a child's start-up (loading the sampler, reading kernel symbols, building unwind
 * tables) per recording. */
#define _GNU_SOURCE
#include "daemon/rec.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "recorder/record_request.h"
#include "recorder/recorder.h"

struct vp_svc_rec {
	struct vp_record_opts o;   /* the recorder points at o and dir: they live as long */
	struct vp_recorder *rec;
	bool stopped;
	int stop_err;
	uint64_t samples, lost;    /* after stop */
	struct vp_svc_rec_costs costs;   /* after stop */
	char dir[4096];
};

uint64_t vp_svc__cpu_ns(void)
{
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return 0;
	return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000ull +
	       (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ull;
}

/* mkdirat 0700 under the caller's directory fd and open it without following links:
 * the recorder writes through the fd, and no path is walked (the directory above may
 * sit where users can reach, e.g. /tmp or a continuous DIR). */
static int make_dir(int parent_fd, const char *name, const char *dir, char *err, size_t errlen)
{
	if (mkdirat(parent_fd, name, 0700) != 0) {
		int e = errno;
		vp_set_err(err, errlen, "cannot create the session directory %s: %s", dir, strerror(e));
		return -e;
	}
	int fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		vp_set_err(err, errlen, "cannot open the session directory %s: %s", dir, strerror(e));
		unlinkat(parent_fd, name, AT_REMOVEDIR);
		return -e;
	}
	return fd;
}

struct vp_svc_rec *vp_svc_rec__start(const struct vp_svc_rec_opts *so, char *err, size_t errlen)
{
	struct vp_svc_rec *r = calloc(1, sizeof(*r));
	if (!r) {
		vp_set_err(err, errlen, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	snprintf(r->dir, sizeof(r->dir), "%s", so->dir);
	struct vp_record_opts *o = &r->o;
	vp_record_opts__defaults(o);
	if (so->jvm) {
		o->jvm_attach = so->jvm->jvm_attach;
		o->jvm_attach_given = so->jvm->jvm_attach_given;
		o->jvm_n = so->jvm->jvm_n;
		memcpy(o->jvm_uids, so->jvm->jvm_uids, sizeof(o->jvm_uids));
		memcpy(o->jvm_pids, so->jvm->jvm_pids, sizeof(o->jvm_pids));
	}
	/* The service picks its JVMs on purpose: no warning per interval about every user's. */
	o->jvm_attach_given = true;
	o->target = RECORD_TARGET_ALL;
	/* A JVM that starts during an interval is named from seconds after its start. */
	o->watch_jvms = true;
	/* Unwind tables for what is sampled only: building them for every program a busy
	 * VM starts was most of the service's CPU (issue 27). */
	o->unwind_sampled_only = true;
	/* Nothing per context switch unless off-CPU time is asked for (issue 27). */
	o->switches_if_off_cpu = true;
	o->off_cpu = so->off_cpu;
	/* Samples wait a second in the buffer, longer while a rotation or a slow start
	 * holds the drain: four pages per Hz per CPU hold eight seconds of full-depth
	 * stacks (two pages at 199 Hz lost samples after a start on a loaded VM). The
	 * sampler's default (16 MiB, mapped twice) was a quarter of the service's memory
	 * at the fleet rates. With switch records, the default. */
	if (!so->off_cpu)
		o->ring_pages = 4 * (size_t)(so->max_freq > so->freq ? so->max_freq : so->freq);
	o->callchain = true;
	o->quiet = true;
	o->freq = so->freq;
	o->duration = so->seconds;
	o->output = r->dir;
	o->no_jit = so->no_jit || !so->agent;
	o->agent = so->agent;
	o->log = so->log;
	o->cmdline = "viprof serve";
	int fd = make_dir(so->parent_fd, so->name, r->dir, err, errlen);
	if (fd < 0) {
		free(r);
		errno = -fd;
		return NULL;
	}
	r->rec = vp_recorder__start(o, fd, err, errlen);
	int e = errno;
	close(fd);
	if (!r->rec) {
		unlinkat(so->parent_fd, so->name, AT_REMOVEDIR);   /* the recorder left it empty */
		free(r);
		errno = e;
		return NULL;
	}
	return r;
}

int vp_svc_rec__poll(struct vp_svc_rec *r, int timeout_ms)
{
	if (r->stopped)
		return r->stop_err;
	return vp_recorder__poll(r->rec, timeout_ms);
}

int vp_svc_rec__rotate(struct vp_svc_rec *r, int parent_fd, const char *name, const char *dir, char *err,
		       size_t errlen)
{
	char old[sizeof(r->dir)];
	if (r->stopped) {
		vp_set_err(err, errlen, "the recording has ended");
		return -EINVAL;
	}
	int fd = make_dir(parent_fd, name, dir, err, errlen);
	if (fd < 0)
		return fd;
	/* o.output names the session in its messages: it points at r->dir. */
	memcpy(old, r->dir, sizeof(old));
	snprintf(r->dir, sizeof(r->dir), "%s", dir);
	int e = vp_recorder__rotate(r->rec, fd, r->dir, err, errlen);
	close(fd);
	if (e) {
		/* Not rotated: the old session goes on under its name. */
		memcpy(r->dir, old, sizeof(old));
		unlinkat(parent_fd, name, AT_REMOVEDIR);
	}
	return e;
}

int vp_svc_rec__set_freq(struct vp_svc_rec *r, uint64_t freq)
{
	return r->stopped ? -EINVAL : vp_recorder__set_freq(r->rec, freq);
}

int vp_svc_rec__stop(struct vp_svc_rec *r, char *err, size_t errlen)
{
	if (r->stopped)
		return r->stop_err;
	r->stopped = true;
	int e = vp_recorder__stop(r->rec);
	struct vp_recorder_stats st;
	vp_recorder__stats(r->rec, &st);
	r->samples = st.samples;
	r->lost = st.lost;
	r->costs = (struct vp_svc_rec_costs){ st.jvm_cpu_ns, st.rotate_cpu_ns, st.tables_ns, st.table_files };
	if (e) {
		const char *why = vp_recorder__error(r->rec);
		vp_set_err(err, errlen, "the recording %s failed: %s", r->dir, why && *why ? why : strerror(-e));
	}
	r->stop_err = e;
	return e;
}

uint64_t vp_svc_rec__samples(const struct vp_svc_rec *r)
{
	if (r->stopped)
		return r->samples;
	struct vp_recorder_stats st;
	vp_recorder__stats(r->rec, &st);
	return st.samples;
}

void vp_svc_rec__counts(const struct vp_svc_rec *r, uint64_t *samples, uint64_t *lost)
{
	if (r->stopped) {
		*samples = r->samples;
		*lost = r->lost;
		return;
	}
	struct vp_recorder_stats st;
	vp_recorder__stats(r->rec, &st);
	*samples = st.samples;
	*lost = st.lost;
}

void vp_svc_rec__costs(const struct vp_svc_rec *r, struct vp_svc_rec_costs *c)
{
	if (r->stopped) {
		*c = r->costs;
		return;
	}
	struct vp_recorder_stats st;
	vp_recorder__stats(r->rec, &st);
	*c = (struct vp_svc_rec_costs){ st.jvm_cpu_ns, st.rotate_cpu_ns, st.tables_ns, st.table_files };
}

void vp_svc_rec__free(struct vp_svc_rec *r)
{
	if (!r)
		return;
	if (!r->stopped && r->rec)
		vp_svc_rec__stop(r, NULL, 0);
	vp_recorder__free(r->rec);
	free(r);
}
