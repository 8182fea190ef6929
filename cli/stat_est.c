/* `viprof stat`'s steal estimate: see stat_est.h. */
#include "cli/stat_est.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/perf_event.h>

#include "common/session_format.h"
#include "common/util.h"
#include "sampler-kernel/sampler.h"

/* The estimate's event index in the sampler's records: any but the cpu-clock's 0. */
#define EST_EVENT 1

struct est_thread {
	pid_t tid;
	uint64_t ns;
};

struct stat_est {
	struct sampler *s;
	pid_t pid;
	struct est_thread *th;
	size_t nth, cap;
	unsigned long late;
	int err;
};

/* Only the estimate's samples are kept; the cpu-clock samples under them and the rest
 * of what the sampler emits are what stat does not need. */
static int est_sink(void *ctx, uint32_t type, uint64_t time, const void *body, size_t len)
{
	struct stat_est *e = ctx;
	const struct vp_sample *sm = body;

	(void)time;
	if (type != VP_REC_SAMPLE || len < sizeof(*sm) || sm->event != EST_EVENT ||
	    sm->sched_state != VP_SCHED_HV_ESTIMATED)
		return 0;
	e->late++;
	for (size_t i = 0; i < e->nth; i++) {
		if (e->th[i].tid == (pid_t)sm->tid) {
			e->th[i].ns += sm->period;
			return 0;
		}
	}
	if (vp_grow((void **)&e->th, &e->cap, e->nth + 1, sizeof(*e->th)))
		return -ENOMEM;
	e->th[e->nth++] = (struct est_thread){ (pid_t)sm->tid, sm->period };
	return 0;
}

struct stat_est *stat_est__start(pid_t pid, bool launch, unsigned hz, char *why, size_t whylen)
{
	struct stat_est *e = calloc(1, sizeof(*e));
	char err[256] = "";

	if (!e) {
		snprintf(why, whylen, "out of memory");
		return NULL;
	}
	e->pid = pid;
	struct sampler_config cfg = {
		.nr_events = 1,
		.target = launch ? SAMPLER_TARGET_LAUNCH : SAMPLER_TARGET_PIDS,
		.pids = &e->pid,
		.nr_pids = 1,
		.steal_est_event = EST_EVENT,
		.sink = { .emit = est_sink, .ctx = e },
	};
	cfg.events[0] = (struct sampler_event){ .type = PERF_TYPE_SOFTWARE, .config = PERF_COUNT_SW_CPU_CLOCK,
						.freq = hz, .software = true, .name = "cpu-clock" };
	char bwhy[256];
	if (!sampler_backend_bpf.supported(&cfg, bwhy, sizeof(bwhy))) {
		snprintf(why, whylen, "the bpf sampler cannot run here (%s)", bwhy);
		free(e);
		return NULL;
	}
	e->s = sampler_backend_bpf.start(&cfg, err, sizeof(err));
	if (!e->s) {
		snprintf(why, whylen, "the bpf sampler did not start: %s", err);
		free(e);
		return NULL;
	}
	return e;
}

int stat_est__poll(struct stat_est *e)
{
	if (!e || !e->s)
		return 0;
	int n = sampler_backend_bpf.poll(e->s, 0);
	return n < 0 ? n : e->err;
}

int stat_est__stop(struct stat_est *e)
{
	if (!e || !e->s)
		return 0;
	int err = sampler_backend_bpf.stop(e->s);
	return err < 0 ? err : 0;
}

double stat_est__ns(const struct stat_est *e, pid_t tid)
{
	uint64_t sum = 0;

	for (size_t i = 0; e && i < e->nth; i++)
		if (tid <= 0 || e->th[i].tid == tid)
			sum += e->th[i].ns;
	return (double)sum;
}

unsigned long stat_est__late(const struct stat_est *e)
{
	return e ? e->late : 0;
}

void stat_est__free(struct stat_est *e)
{
	if (!e)
		return;
	if (e->s)
		sampler_backend_bpf.destroy(e->s);
	free(e->th);
	free(e);
}
