/* Xen in a report, on a synthetic session (issue 11 item 6): samples whose address is
 * in Xen's range reach the hypervisor layer and are named from --hv-syms even when the
 * kernel reported them as kernel mode; hypervisor-mode samples too; other domains'
 * samples (Xen PMU mode "all": guest kernel/user mode) are counted under their own
 * frame instead of being looked up in dom0's symbols; --hv-syms refuses a file that
 * is not a Xen image; and a multiplexed event (COUNTER record with time_running <
 * time_enabled) is scaled and reported. argv[1] = the xen-syms stand-in
 * (fixtures/xen/xen-fixture: idle_loop at +0x100, svm_vmexit_handler at +0x200). */
#define _GNU_SOURCE
#include <sys/stat.h>

#include "recorder/session_writer.h"
#include "postproc/profile.h"
#include "postproc/session.h"
#include "sampler-kernel/sampler.h"
#include "test.h"

#define XEN_TEXT 0xffff82d040200000ull

static void sample(struct vp_session_writer *w, uint64_t t, uint32_t tid, uint8_t mode, uint64_t ip)
{
	uint64_t buf[(sizeof(struct vp_sample) + 8) / 8 + 1] = { 0 };
	struct vp_sample *s = (struct vp_sample *)buf;
	s->pid = s->tid = tid;
	s->mode = mode;
	s->period = 1000000;
	s->nr_kernel = 1;
	s->ips[0] = ip;
	ASSERT_OK(vp_session_writer__emit(w, VP_REC_SAMPLE, t, s, sizeof(*s) + 8));
}

/* Weight of the stacks whose leaf frame is called name, and that frame's layer. */
static uint64_t leaf_weight(const struct vp_profile *p, const char *name, int *layer, const char **comm)
{
	uint64_t w = 0;
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct vp_stack *s = &p->stacks[i];
		const struct vp_frame *f = &p->frames[s->frames[s->nframes - 1]];
		if (strcmp(f->name, name))
			continue;
		w += s->weight[0];
		*layer = f->layer;
		if (comm)
			*comm = s->comm;
	}
	return w;
}

int main(int argc, char **argv)
{
	char err[512];
	if (argc < 2)
		FAIL("usage: test-xen-session xen-syms");
	const char *dir = "xen-session";
	struct vp_session_writer *w = vp_session_writer__create(dir, true, 0, err, sizeof(err));
	if (!w)
		FAIL("%s", err);
	struct sampler_event ev = { .type = 0, .config = 0, .period = 1000000 };   /* cycles: hardware, may multiplex */
	snprintf(ev.name, sizeof(ev.name), "cycles");
	ASSERT_OK(vp_session_writer__event(w, &ev));
	/* Kernel mode at Xen addresses (what the x86 kernel reports), hypervisor mode, and
	 * another domain's kernel and user samples at addresses dom0 could misname. */
	for (int i = 0; i < 3; i++)
		sample(w, 1000 + i, 10, VP_MODE_KERNEL, XEN_TEXT + 0x200);
	sample(w, 2000, 10, VP_MODE_HYPERVISOR, XEN_TEXT + 0x110);
	sample(w, 2001, 10, VP_MODE_KERNEL, XEN_TEXT + 0x7f0000);   /* in Xen, in no symbol */
	for (int i = 0; i < 2; i++)
		sample(w, 3000 + i, 11, VP_MODE_GUEST_KERNEL, 0xffffffff81001000ull);
	sample(w, 3100, 11, VP_MODE_GUEST_USER, 0x401000);
	/* The event was on a counter half the time it was enabled. */
	struct vp_counter c = { .pid = VP_COUNTER_ALL, .tid = VP_COUNTER_ALL, .event = 0, .flags = VP_COUNTER_SAMPLED,
				.value = 7000000, .time_enabled = 2000000000, .time_running = 1000000000 };
	ASSERT_OK(vp_session_writer__emit(w, VP_REC_COUNTER, 4000, &c, sizeof(c)));
	struct vp_end end = { .duration_ns = 4000 };
	ASSERT_OK(vp_session_writer__finish(w, 4000, &end, err, sizeof(err)));
	vp_session_writer__free(w);

	struct vp_session_opts o = { .hv_syms = argv[1] };
	struct vp_profile *p = vp_profile__new();
	ASSERT_NOT_NULL(p);
	if (vp_session__load(dir, p, &o, err, sizeof(err)))
		FAIL("load: %s", err);
	int layer = -1;
	const char *comm = NULL;
	/* Weights are doubled: 1 ms samples of an event on a counter half the time. */
	ASSERT_UEQ(leaf_weight(p, "svm_vmexit_handler", &layer, NULL), 3 * 2000000ull);
	ASSERT_EQ(layer, VP_LAYER_HYPERVISOR);
	layer = -1;
	ASSERT_UEQ(leaf_weight(p, "idle_loop", &layer, NULL), 2000000ull);
	ASSERT_EQ(layer, VP_LAYER_HYPERVISOR);
	layer = -1;
	ASSERT_UEQ(leaf_weight(p, "[hypervisor] 0xffff82d0409f0000", &layer, NULL), 2000000ull);
	ASSERT_EQ(layer, VP_LAYER_HYPERVISOR);
	ASSERT_UEQ(leaf_weight(p, "[other domain: kernel]", &layer, &comm), 2 * 2000000ull);
	ASSERT_STREQ(comm, "[other domains]");
	ASSERT_UEQ(leaf_weight(p, "[other domain: user]", &layer, &comm), 2000000ull);
	for (size_t i = 0; i < p->nframes; i++)
		ASSERT_TRUE(p->frames[i].layer != VP_LAYER_KERNEL);   /* nothing went to dom0's kallsyms */
	ASSERT_NOT_NULL(p->warnings);
	ASSERT_CONTAINS(p->warnings, "'cycles' was multiplexed: on a counter 50.0%");
	ASSERT_STREQ(vp_profile__meta(p, "count.cycles"), "7000000");
	vp_profile__free(p);

	/* A file that is not a Xen image is refused with one line naming it. */
	o.hv_syms = "/bin/true";
	p = vp_profile__new();
	ASSERT_NE(vp_session__load(dir, p, &o, err, sizeof(err)), 0);
	ASSERT_CONTAINS(err, "/bin/true is not a Xen image");
	ASSERT_TRUE(strchr(err, '\n') == NULL);
	vp_profile__free(p);
	printf("test-xen-session: ok\n");
	return 0;
}
