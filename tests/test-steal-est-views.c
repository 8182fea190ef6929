/* The steal estimate in every view, kept apart from measured steal (issue 34 item 1):
 * a synthetic session of a VM without a steal clock (every STEAL snapshot 0), with
 * cpu-clock samples of app (pid 100, 1 ms period, 10 under app_hot), off-CPU time for the
 * wall view, and the bpf backend's estimate: the EVENT hypervisor-estimated (flags
 * SCHED | TIME_UNITS | ESTIMATE) and two of its samples under app_hot, 2 ms and 1 ms
 * (sched_state VP_SCHED_HV_ESTIMATED). Worked out by hand: 3 ms estimated for app, under
 * do_syscall_64;app_hot;[hypervisor: estimated], the leaf in the layer
 * "hypervisor (estimated)". Checks the profile, then each view: the text report's event
 * line and layer summary (estimated; measured steal "not measured", never 0 or "took
 * no time"), the hotspot table without an estimate column unless ranked, folded, JSON
 * (events[].estimated, its total, steal's null), pprof (its sample type and comment), the
 * wall view (a header line, not in the steal column). */
#define _GNU_SOURCE   /* memmem */
#include <errno.h>
#include <sys/stat.h>
#include <time.h>
#include <zlib.h>

#include "common/chunkfile.h"
#include "common/layers.h"
#include "common/session_format.h"
#include "common/steal_clock.h"
#include "common/steal_est.h"
#include "report/report.h"
#include "postproc/session.h"
#include "report/wall.h"
#include "test.h"
#include "test-profile.h"
#include "test-profile-synth.h"
#include "test-run.h"

#define MS SYNTH_MS
#define K_APP_HOT 0xffffffff81002000ull

static struct synth_session ss;

/* A sample of app (pid 100) in do_syscall_64 -> app_hot. */
static void w_sample(uint64_t t, uint16_t event, uint64_t period, uint8_t state)
{
	synth_ksample(&ss, t, &(struct synth_sample){ .pid = 100, .event = event, .period = period, .sched_state = state,
						      .leaf = K_APP_HOT }, 1);
}

static void write_session(const char *dir)
{
	synth_session_open(&ss, dir);
	/* As the recorder numbers them: cpu-clock 0, the tracer's steal 1 and off-cpu 2, the
	 * estimate 3. */
	synth_event(&ss, 0, "cpu-clock", VP_EVENT_SOFTWARE | VP_EVENT_TIME_UNITS, 1, MS);
	synth_event(&ss, 1, "steal", VP_EVENT_SCHED | VP_EVENT_TIME_UNITS, UINT32_MAX, 0);
	synth_event(&ss, 2, "off-cpu", VP_EVENT_SCHED | VP_EVENT_TIME_UNITS, UINT32_MAX, 0);
	synth_event(&ss, 3, VP_STEAL_EST_EVENT, VP_EVENT_SCHED | VP_EVENT_TIME_UNITS | VP_EVENT_ESTIMATE, UINT32_MAX, 0);
	synth_ksym(&ss, SYNTH_K_SYSCALL, "do_syscall_64");
	synth_ksym(&ss, K_APP_HOT, "app_hot");
	synth_comm(&ss, 100, "app");
	for (uint32_t cpu = 0; cpu < 2; cpu++)   /* no steal clock: every snapshot 0 */
		synth_steal(&ss, 0, cpu, 0);
	for (int i = 0; i < 10; i++)
		w_sample((uint64_t)(i + 1) * MS, 0, MS, 0);
	w_sample(4 * MS, 3, 2 * MS, VP_SCHED_HV_ESTIMATED);
	w_sample(8 * MS, 3, 1 * MS, VP_SCHED_HV_ESTIMATED);
	w_sample(20 * MS, 2, 5 * MS, VP_SCHED_BLOCKED_SLEEP);
	for (uint32_t cpu = 0; cpu < 2; cpu++)
		synth_steal(&ss, 20 * MS, cpu, 0);
	synth_session_close(&ss, 20 * MS, 13);
}

/* 0 text, 1 folded of the estimate, 2 JSON, 3 pprof (gunzipped), 4 the wall view. */
static char *render(struct vp_profile *p, int which, size_t *outlen)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	ASSERT_NOT_NULL(f);
	struct vp_out o = { .f = f, .width = 200 };
	struct vp_report_opts ro = { .layers = true, .sort_event = which == 1 ? tp_find_event(p, VP_STEAL_EST_EVENT) : 0 };
	switch (which) {
	case 0: ASSERT_OK(report_text(p, NULL, &o, &ro)); break;
	case 1: ASSERT_OK(report_folded(p, &o, &ro)); break;
	case 2: ASSERT_OK(report_json(p, NULL, &o, &ro)); break;
	case 3: ASSERT_OK(report_pprof(p, &o, &ro)); break;
	default: ASSERT_OK(report_wall_text(p, &o, &ro)); break;
	}
	fclose(f);
	*outlen = len;
	if (which != 3)
		return buf;
	size_t cap = 1 << 22;
	char *raw = calloc(1, cap);
	ASSERT_NOT_NULL(raw);
	z_stream z = { .next_in = (Bytef *)buf, .avail_in = (uInt)len, .next_out = (Bytef *)raw, .avail_out = (uInt)cap - 1 };
	ASSERT_EQ(inflateInit2(&z, 16 + MAX_WBITS), Z_OK);
	ASSERT_EQ(inflate(&z, Z_FINISH), Z_STREAM_END);
	*outlen = z.total_out;
	inflateEnd(&z);
	free(buf);
	return raw;
}

int main(void)
{
	char dir[64];
	snprintf(dir, sizeof(dir), "/tmp/eststeal-views-%d", (int)getpid());
	write_session(dir);
	struct vp_profile *p = tp_load(dir, NULL);

	/* The profile: 3 ms under app_hot, in the estimate's own layer. */
	int es = tp_find_event(p, VP_STEAL_EST_EVENT), st = tp_find_event(p, "steal");
	ASSERT_GE(es, 0);
	ASSERT_STREQ(p->events[es].unit, "nanoseconds");
	ASSERT_TRUE(vp_profile__steal_unmeasured(p));
	uint64_t w = 0;
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct vp_stack *s = &p->stacks[i];
		if (!s->weight[es])
			continue;
		ASSERT_EQ(s->pid, 100);
		ASSERT_EQ(s->nframes, 3);
		const struct vp_frame *leaf = &p->frames[s->frames[2]];
		ASSERT_STREQ(leaf->name, VP_STEAL_EST_FRAME);
		ASSERT_EQ(leaf->layer, VP_LAYER_HYPERVISOR_EST);
		ASSERT_STREQ(p->frames[s->frames[1]].name, "app_hot");
		ASSERT_EQ(st >= 0 ? s->weight[st] : 0, 0);   /* never measured steal */
		w += s->weight[es];
	}
	ASSERT_UEQ(w, 3 * MS);
	ASSERT_STREQ(vp_layer_name(VP_LAYER_HYPERVISOR_EST), "hypervisor (estimated)");

	size_t len;
	char *t = render(p, 0, &len);
	fprintf(stderr, "%s", t);
	ASSERT_CONTAINS(t, "# event: " VP_STEAL_EST_EVENT " (nanoseconds), 3 samples = 3.0 ms (estimated, not measured");
	ASSERT_CONTAINS(t, "#   hypervisor (estimated) 3.0 ms  = 30.0% of sampled time (cpu-clock 10.0 ms)");
	ASSERT_CONTAINS(t, VP_STEAL_NOT_MEASURED);
	ASSERT_CONTAINS(t, "#   hypervisor (steal) not measured (no steal clock)");
	ASSERT_NULL(strstr(t, "took no time"));
	/* Ranked by cpu-clock, the hotspot table has no estimate column. */
	ASSERT_NULL(strstr(t, "cpu-clock hypervisor-estimated"));
	free(t);

	t = render(p, 1, &len);
	fprintf(stderr, "%s", t);
	/* Folded merges threads (async-profiler's collapsed form): no thread prefix. */
	ASSERT_CONTAINS(t, "do_syscall_64_[k];app_hot_[k];" VP_STEAL_EST_FRAME " 3");
	free(t);

	t = render(p, 2, &len);
	ASSERT_CONTAINS(t, "{\"name\":\"" VP_STEAL_EST_EVENT "\",\"unit\":\"nanoseconds\",\"measured\":false,"
			   "\"samples_are\":\"periods of the time event; weight is the time, estimated\",\"estimated\":true}");
	ASSERT_CONTAINS(t, "\"" VP_STEAL_EST_EVENT "\":{\"samples\":3,\"weight\":3000000}");
	ASSERT_CONTAINS(t, "\"steal\":{\"samples\":null,\"weight\":null");
	ASSERT_CONTAINS(t, "\"hypervisor (estimated)\"");
	free(t);

	t = render(p, 3, &len);
	ASSERT_NOT_NULL(memmem(t, len, VP_STEAL_EST_EVENT, strlen(VP_STEAL_EST_EVENT)));
	const char *cm = "event " VP_STEAL_EST_EVENT " (the host's share estimated from sampler timers that fired late";
	ASSERT_NOT_NULL(memmem(t, len, cm, strlen(cm)));
	free(t);

	t = render(p, 4, &len);
	fprintf(stderr, "%s", t);
	ASSERT_CONTAINS(t, "# hypervisor (estimated): 3.000 ms from sampler timers that fired late (an estimate, not a "
			   "column: with no steal clock the guest counted it as running)");
	free(t);

	vp_profile__free(p);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ASSERT_EQ(run_sh(cmd, 110), 0);
	return 0;
}
