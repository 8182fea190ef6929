/* record's weights scaled per interval (issue 23), on a synthetic session: an event
 * on its counter all of the first second and a quarter of the second (another user's
 * events came and went, the Metis case) has its first second's samples weighed as
 * sampled (x1) and its second second's x4, as the running totals the sampler writes
 * every 250 ms (VP_COUNTER_INTERVAL) say; one ratio for the whole recording
 * (enabled/running = 2 s / 1.25 s = 1.6) would have inflated the first by 60% and
 * deflated the second. Also: an interval with no running time is folded into the next;
 * a session with only the final totals (recorded before issue 23) keeps the one ratio;
 * and the real sampler writes the running totals (checked live by test-mux-weights-live
 * through `viprof record`). */
#define _GNU_SOURCE
#include <sys/stat.h>

#include "common/chunkfile.h"
#include "recorder/session_writer.h"
#include "postproc/profile.h"
#include "postproc/session.h"
#include "sampler-kernel/sampler.h"
#include "test.h"

#define MS 1000000ull

static void sample(struct vp_session_writer *w, uint64_t t, uint64_t ip)
{
	uint64_t buf[(sizeof(struct vp_sample) + 8) / 8 + 1] = { 0 };
	struct vp_sample *s = (struct vp_sample *)buf;
	s->pid = s->tid = 10;
	s->mode = VP_MODE_KERNEL;
	s->period = MS;
	s->nr_kernel = 1;
	s->ips[0] = ip;
	ASSERT_OK(vp_session_writer__emit(w, VP_REC_SAMPLE, t, s, sizeof(*s) + 8));
}

static void counter(struct vp_session_writer *w, uint64_t t, uint32_t flags, uint64_t value, uint64_t enabled,
		    uint64_t running)
{
	struct vp_counter c = { .pid = VP_COUNTER_ALL, .tid = VP_COUNTER_ALL, .event = 0,
				.flags = VP_COUNTER_SAMPLED | flags, .value = value, .time_enabled = enabled,
				.time_running = running };
	ASSERT_OK(vp_session_writer__emit(w, VP_REC_COUNTER, t, &c, sizeof(c)));
}

/* Weight of the stacks whose leaf is the kernel address ip (named [unknown] or by
 * address: the test only needs to tell the two phases apart, by their addresses). */
static uint64_t weight_at(const struct vp_profile *p, const char *leaf)
{
	uint64_t w = 0;
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct vp_stack *s = &p->stacks[i];
		if (strstr(p->frames[s->frames[s->nframes - 1]].name, leaf))
			w += s->weight[0];
	}
	return w;
}

static struct vp_profile *load(const char *dir)
{
	char err[512];
	struct vp_session_opts o = { 0 };
	struct vp_profile *p = vp_profile__new();
	ASSERT_NOT_NULL(p);
	if (vp_session__load(dir, p, &o, err, sizeof(err)))
		FAIL("load: %s", err);
	return p;
}

/* Phase 1 (0-1 s): 10 samples at 0xffffffff81000100, the event on its counter all the
 * time. Phase 2 (1-2 s): 10 samples at 0xffffffff81000200, on its counter 25%. */
static void write_session(const char *dir, bool intervals, bool idle_gap)
{
	char err[512];
	struct vp_session_writer *w = vp_session_writer__create(dir, true, 0, err, sizeof(err));
	if (!w)
		FAIL("%s", err);
	/* A hardware event: the kernel never takes a software event off its counter, and
	 * the loader does not scale one. */
	struct sampler_event ev = { .type = 0, .config = 0, .period = MS };
	snprintf(ev.name, sizeof(ev.name), "cycles");
	ASSERT_OK(vp_session_writer__event(w, &ev));
	uint64_t t0 = 1000 * MS;
	for (int i = 0; i < 10; i++)
		sample(w, t0 + (uint64_t)i * 90 * MS, 0xffffffff81000100ull);
	if (intervals)
		counter(w, t0 + 1000 * MS, VP_COUNTER_INTERVAL, 10 * MS, 1000 * MS, 1000 * MS);
	if (intervals && idle_gap)   /* 0.5 s enabled, never on a counter: no samples */
		counter(w, t0 + 1500 * MS, VP_COUNTER_INTERVAL, 10 * MS, 1500 * MS, 1000 * MS);
	uint64_t t1 = t0 + (idle_gap ? 1500 : 1000) * MS;
	for (int i = 0; i < 10; i++)
		sample(w, t1 + 10 * MS + (uint64_t)i * 90 * MS, 0xffffffff81000200ull);
	uint64_t end_enabled = (idle_gap ? 2500 : 2000) * MS;
	counter(w, t1 + 1000 * MS, 0, 20 * MS, end_enabled, 1250 * MS);
	struct vp_end end = { .duration_ns = end_enabled };
	ASSERT_OK(vp_session_writer__finish(w, t1 + 1000 * MS, &end, err, sizeof(err)));
	vp_session_writer__free(w);
}

/* A user-mode cpu-clock whose count holds 100 ms of which its samples hold 75: the
 * rest is kernel time, said as such, not as a tail after the last sample. */
static void user_mode_clock(void)
{
	char err[512];
	struct vp_session_writer *w = vp_session_writer__create("mux-user", true, 0, err, sizeof(err));
	if (!w)
		FAIL("%s", err);
	struct sampler_event ev = { .type = 1, .config = 0, .period = MS, .software = true, .exclude_kernel = true };
	snprintf(ev.name, sizeof(ev.name), "cpu-clock");
	ASSERT_OK(vp_session_writer__event(w, &ev));
	for (int i = 0; i < 75; i++)
		sample(w, 1000 * MS + (uint64_t)i * MS, 0x401000);
	counter(w, 1100 * MS, 0, 100 * MS, 100 * MS, 100 * MS);
	struct vp_end end = { .duration_ns = 100 * MS };
	ASSERT_OK(vp_session_writer__finish(w, 1100 * MS, &end, err, sizeof(err)));
	vp_session_writer__free(w);
	struct vp_profile *p = load("mux-user");
	ASSERT_NOT_NULL(p->warnings);
	fprintf(stderr, "user-mode clock: %s\n", p->warnings);
	ASSERT_CONTAINS(p->warnings, "samples user mode only, and its count includes the time its threads spent in the kernel");
	ASSERT_NULL(strstr(p->warnings, "after their thread's last sample"));
	vp_profile__free(p);
}

/* A software event whose running time trails its enabled time (per-CPU counters of one
 * thread read one after another) is not multiplexed: the kernel never takes one off a
 * counter. Its weights stay as sampled and no report calls it multiplexed (issue 34:
 * page-fault weights came out 60,221 against the kernel's 60,008). */
static void software_never_scaled(void)
{
	char err[512];
	struct vp_session_writer *w = vp_session_writer__create("mux-soft", true, 0, err, sizeof(err));
	if (!w)
		FAIL("%s", err);
	struct sampler_event ev = { .type = 1, .config = 2 /* page-faults */, .period = 1, .software = true };
	snprintf(ev.name, sizeof(ev.name), "page-faults");
	ASSERT_OK(vp_session_writer__event(w, &ev));
	for (int i = 0; i < 100; i++)
		sample(w, 1000 * MS + (uint64_t)i * MS, 0x401000);
	counter(w, 1050 * MS, 0, 50, 50 * MS, 49 * MS);         /* 2% behind: drift */
	counter(w, 1100 * MS, 0, 100, 100 * MS, 90 * MS);
	struct vp_end end = { .duration_ns = 100 * MS };
	ASSERT_OK(vp_session_writer__finish(w, 1100 * MS, &end, err, sizeof(err)));
	vp_session_writer__free(w);
	struct vp_profile *p = load("mux-soft");
	uint64_t total = 0;
	for (size_t i = 0; i < p->nstacks; i++)
		total += p->stacks[i].weight[0];
	ASSERT_UEQ(total, 100 * MS);   /* each sample as written (sample() weighs 1 ms) */
	ASSERT_TRUE(!p->warnings || !strstr(p->warnings, "multiplexed"));
	vp_profile__free(p);
}

int main(void)
{
	software_never_scaled();
	user_mode_clock();
	write_session("mux-weights", true, false);
	struct vp_profile *p = load("mux-weights");
	uint64_t w1 = weight_at(p, "81000100"), w2 = weight_at(p, "81000200");
	fprintf(stderr, "per interval: phase 1 %.1f ms, phase 2 %.1f ms\n", (double)w1 / 1e6, (double)w2 / 1e6);
	ASSERT_UEQ(w1, 10 * MS);       /* on its counter all the time: as sampled */
	ASSERT_UEQ(w2, 40 * MS);       /* a quarter of the time: x4 */
	ASSERT_STREQ(vp_profile__meta(p, "count.cycles"), "20000000");
	vp_profile__free(p);

	/* 0.5 s in which the event never ran: its enabled time belongs with the next
	 * interval that ran (1.5 s enabled for 0.25 s running: x6), not lost. */
	write_session("mux-weights-gap", true, true);
	p = load("mux-weights-gap");
	w1 = weight_at(p, "81000100");
	w2 = weight_at(p, "81000200");
	fprintf(stderr, "with a gap: phase 1 %.1f ms, phase 2 %.1f ms\n", (double)w1 / 1e6, (double)w2 / 1e6);
	ASSERT_UEQ(w1, 10 * MS);
	ASSERT_UEQ(w2, 60 * MS);
	vp_profile__free(p);

	/* Only the final totals (a session from before the running totals): one ratio. */
	write_session("mux-weights-old", false, false);
	p = load("mux-weights-old");
	w1 = weight_at(p, "81000100");
	w2 = weight_at(p, "81000200");
	fprintf(stderr, "final totals only: phase 1 %.1f ms, phase 2 %.1f ms\n", (double)w1 / 1e6, (double)w2 / 1e6);
	ASSERT_UEQ(w1, 16 * MS);
	ASSERT_UEQ(w2, 16 * MS);
	vp_profile__free(p);
	printf("test-mux-weights: ok\n");
	return 0;
}
