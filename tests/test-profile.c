/* The profile model: frame and stack interning, events, metadata, warnings, and merge
 * (events matched by name, frames re-interned, counts added). */
#include <errno.h>

#include "postproc/profile.h"
#include "test.h"

static uint32_t fr(struct vp_profile *p, int layer, const char *name, const char *image)
{
	struct vp_frame f = { .name = name, .image = image, .layer = (uint8_t)layer };
	uint32_t id = vp_profile__frame(p, &f);
	ASSERT_NE(id, UINT32_MAX);
	return id;
}

static uint64_t total(const struct vp_profile *p, int ev, bool weight)
{
	uint64_t t = 0;
	for (size_t i = 0; i < p->nstacks; i++)
		t += weight ? p->stacks[i].weight[ev] : p->stacks[i].samples[ev];
	return t;
}

static void test_layers(void)
{
	ASSERT_STREQ(vp_layer_name(VP_LAYER_HYPERVISOR), "hypervisor");
	ASSERT_STREQ(vp_layer_name(VP_LAYER_KERNEL), "kernel");
	ASSERT_STREQ(vp_layer_name(VP_LAYER_NATIVE), "native");
	ASSERT_STREQ(vp_layer_name(VP_LAYER_JVM), "jvm");
	ASSERT_STREQ(vp_layer_name(VP_LAYER_JIT), "jit");
	ASSERT_STREQ(vp_layer_name(VP_LAYER_INLINED), "inlined");
	ASSERT_STREQ(vp_layer_name(VP_LAYER_INTERPRETED), "interpreted");
	ASSERT_STREQ(vp_layer_name(VP_LAYER_UNKNOWN), "unknown");
	ASSERT_STREQ(vp_layer_name((enum vp_layer)200), "unknown");
}

static void test_interning(void)
{
	struct vp_profile *p = vp_profile__new();
	ASSERT_NOT_NULL(p);
	uint32_t a = fr(p, VP_LAYER_NATIVE, "main", "/usr/bin/app");
	uint32_t b = fr(p, VP_LAYER_NATIVE, "main", "/usr/bin/app");
	ASSERT_EQ(a, b);
	/* Same name, another image or layer: another frame. */
	ASSERT_NE(fr(p, VP_LAYER_NATIVE, "main", "/usr/bin/other"), a);
	ASSERT_NE(fr(p, VP_LAYER_JIT, "main", "/usr/bin/app"), a);
	/* Strings are copied, not borrowed. */
	char name[32] = "Foo.bar";
	uint32_t c = fr(p, VP_LAYER_JIT, name, "[jit]");
	strcpy(name, "XXXXXXX");
	ASSERT_STREQ(p->frames[c].name, "Foo.bar");
	/* A NULL/empty name becomes "[unknown]"; NULL strings become "". */
	struct vp_frame f = { .layer = VP_LAYER_UNKNOWN };
	uint32_t u = vp_profile__frame(p, &f);
	ASSERT_STREQ(p->frames[u].name, "[unknown]");
	ASSERT_STREQ(p->frames[u].image, "");
	ASSERT_STREQ(p->frames[u].build_id, "");
	ASSERT_STREQ(p->frames[u].file, "");
	ASSERT_EQ(p->nframes, 5);

	/* Many frames: the table grows and every id stays findable. */
	char buf[64];
	for (int i = 0; i < 50000; i++) {
		snprintf(buf, sizeof(buf), "fn_%d", i);
		ASSERT_EQ(fr(p, VP_LAYER_KERNEL, buf, "[kernel.kallsyms]"), 5 + i);
	}
	for (int i = 0; i < 50000; i += 997) {
		snprintf(buf, sizeof(buf), "fn_%d", i);
		ASSERT_EQ(fr(p, VP_LAYER_KERNEL, buf, "[kernel.kallsyms]"), 5 + i);
	}
	ASSERT_EQ(p->nframes, 50005);
	vp_profile__free(p);
	vp_profile__free(NULL);
}

static void test_stacks_and_events(void)
{
	struct vp_profile *p = vp_profile__new();
	ASSERT_NOT_NULL(p);
	ASSERT_EQ(vp_profile__add_event(p, "cpu-clock", "nanoseconds"), 0);
	ASSERT_EQ(vp_profile__add_event(p, "cpu-clock", "nanoseconds"), 0);
	ASSERT_EQ(vp_profile__add_event(p, "page-faults", NULL), 1);
	ASSERT_STREQ(p->events[1].unit, "events");
	ASSERT_EQ(vp_profile__add_event(p, "", NULL), -EINVAL);

	uint32_t st[3] = { fr(p, VP_LAYER_NATIVE, "main", "/app"), fr(p, VP_LAYER_JIT, "Foo.run", "[jit]"),
			   fr(p, VP_LAYER_KERNEL, "do_syscall_64", "[kernel.kallsyms]") };
	ASSERT_OK(vp_profile__add(p, st, 3, 10, 11, "worker", 0, 1, 1000000));
	ASSERT_OK(vp_profile__add(p, st, 3, 10, 11, "worker", 0, 2, 2000000));
	ASSERT_OK(vp_profile__add(p, st, 3, 10, 11, "worker", 1, 1, 1));
	ASSERT_EQ(p->nstacks, 1);
	ASSERT_UEQ(p->stacks[0].samples[0], 3);
	ASSERT_UEQ(p->stacks[0].weight[0], 3000000);
	ASSERT_UEQ(p->stacks[0].samples[1], 1);
	/* Another tid, comm, or a prefix of the stack: distinct stacks. */
	ASSERT_OK(vp_profile__add(p, st, 3, 10, 12, "worker", 0, 1, 1));
	ASSERT_OK(vp_profile__add(p, st, 3, 10, 11, "other", 0, 1, 1));
	ASSERT_OK(vp_profile__add(p, st, 2, 10, 11, "worker", 0, 1, 1));
	ASSERT_OK(vp_profile__add(p, st, 0, 10, 11, "worker", 0, 1, 1));
	ASSERT_OK(vp_profile__add(p, st, 0, 10, 11, NULL, 0, 1, 1));
	ASSERT_EQ(p->nstacks, 6);
	ASSERT_STREQ(p->stacks[5].comm, "");
	/* Bad event or frame id is rejected, not stored. */
	ASSERT_EQ(vp_profile__add(p, st, 3, 10, 11, "worker", 2, 1, 1), -EINVAL);
	ASSERT_EQ(vp_profile__add(p, st, 3, 10, 11, "worker", -1, 1, 1), -EINVAL);
	uint32_t bad[1] = { 9999 };
	ASSERT_EQ(vp_profile__add(p, bad, 1, 10, 11, "worker", 0, 1, 1), -EINVAL);
	ASSERT_EQ(p->nstacks, 6);

	/* Events added later start at zero in existing stacks; eight at most. */
	char name[16];
	for (int i = 2; i < 8; i++) {
		snprintf(name, sizeof(name), "ev%d", i);
		ASSERT_EQ(vp_profile__add_event(p, name, NULL), i);
	}
	ASSERT_EQ(vp_profile__add_event(p, "one-too-many", NULL), -ENOSPC);
	for (size_t i = 0; i < p->nstacks; i++)
		ASSERT_UEQ(p->stacks[i].samples[7], 0);
	ASSERT_OK(vp_profile__add(p, st, 3, 10, 11, "worker", 7, 5, 5));
	ASSERT_UEQ(p->stacks[0].samples[7], 5);

	/* Many distinct stacks survive table growth. */
	for (uint32_t t = 0; t < 20000; t++)
		ASSERT_OK(vp_profile__add(p, st, 1 + t % 3, 100 + t, t, "w", 0, 1, 10));
	for (uint32_t t = 0; t < 20000; t++)
		ASSERT_OK(vp_profile__add(p, st, 1 + t % 3, 100 + t, t, "w", 0, 1, 10));
	ASSERT_EQ(p->nstacks, 6 + 20000);
	for (size_t i = 6; i < p->nstacks; i++)
		ASSERT_UEQ(p->stacks[i].samples[0], 2);
	vp_profile__free(p);
}

static void test_meta_warnings(void)
{
	struct vp_profile *p = vp_profile__new();
	ASSERT_NOT_NULL(p);
	ASSERT_NULL(vp_profile__meta(p, "host"));
	vp_profile__set_meta(p, "host", "vm1");
	vp_profile__set_meta(p, "event", "cpu-clock");
	vp_profile__set_meta(p, "host", "vm2");
	ASSERT_EQ(p->nmeta, 2);
	ASSERT_STREQ(vp_profile__meta(p, "host"), "vm2");
	ASSERT_STREQ(p->meta[0].key, "host");
	ASSERT_STREQ(p->meta[1].key, "event");

	ASSERT_NULL(p->warnings);
	vp_profile__warn(p, "lost %d samples", 12);
	vp_profile__warn(p, "session %s is incomplete\n", "S");
	vp_profile__warn(p, "lost %d samples", 12);   /* duplicate: dropped */
	ASSERT_STREQ(p->warnings, "lost 12 samples\nsession S is incomplete\n");
	vp_profile__free(p);
}

static struct vp_profile *sample_profile(const char *ev0, const char *ev1)
{
	struct vp_profile *p = vp_profile__new();
	ASSERT_NOT_NULL(p);
	int e0 = vp_profile__add_event(p, ev0, "nanoseconds");
	int e1 = vp_profile__add_event(p, ev1, "events");
	uint32_t k = fr(p, VP_LAYER_KERNEL, "clear_page_erms", "[kernel.kallsyms]");
	uint32_t m = fr(p, VP_LAYER_NATIVE, "main", "/app");
	uint32_t j = fr(p, VP_LAYER_JIT, "Foo.run", "[jit]");
	uint32_t in = fr(p, VP_LAYER_INLINED, "Foo.inner", "[jit]");
	uint32_t s1[3] = { m, j, in }, s2[3] = { m, j, k };
	ASSERT_OK(vp_profile__add(p, s1, 3, 1, 1, "main", e0, 7, 7000));
	ASSERT_OK(vp_profile__add(p, s2, 3, 1, 2, "gc", e0, 3, 3000));
	ASSERT_OK(vp_profile__add(p, s2, 3, 1, 2, "gc", e1, 4, 4));
	return p;
}

static void test_merge(void)
{
	struct vp_profile *a = sample_profile("cpu-clock", "page-faults");
	/* b has the events in the other order and its frames interned differently. */
	struct vp_profile *b = vp_profile__new();
	ASSERT_NOT_NULL(b);
	fr(b, VP_LAYER_NATIVE, "unrelated", "/lib/x.so");
	int bf = vp_profile__add_event(b, "page-faults", "events");
	int bc = vp_profile__add_event(b, "cpu-clock", "nanoseconds");
	int bs = vp_profile__add_event(b, "steal", "nanoseconds");
	uint32_t j = fr(b, VP_LAYER_JIT, "Foo.run", "[jit]");
	uint32_t m = fr(b, VP_LAYER_NATIVE, "main", "/app");
	uint32_t in = fr(b, VP_LAYER_INLINED, "Foo.inner", "[jit]");
	uint32_t s1[3] = { m, j, in };
	ASSERT_OK(vp_profile__add(b, s1, 3, 1, 1, "main", bc, 2, 2000));
	ASSERT_OK(vp_profile__add(b, s1, 3, 1, 1, "main", bf, 1, 1));
	ASSERT_OK(vp_profile__add(b, s1, 3, 1, 1, "main", bs, 1, 500));
	vp_profile__set_meta(a, "host", "vmA");
	vp_profile__set_meta(b, "host", "vmB");
	vp_profile__set_meta(b, "kernel", "6.18");
	vp_profile__warn(b, "b was cut short");
	b->lost = 5;
	b->incomplete = true;

	ASSERT_OK(vp_profile__merge(a, b));
	ASSERT_EQ(a->nevents, 3);
	ASSERT_STREQ(a->events[2].name, "steal");
	ASSERT_EQ(a->nframes, 5);
	ASSERT_EQ(a->nstacks, 2);   /* b's stack is a's s1: merged into it */
	ASSERT_UEQ(a->stacks[0].samples[0], 9);
	ASSERT_UEQ(a->stacks[0].weight[0], 9000);
	ASSERT_UEQ(a->stacks[0].samples[1], 1);
	ASSERT_UEQ(a->stacks[0].weight[2], 500);
	ASSERT_STREQ(vp_profile__meta(a, "host"), "vmA");
	ASSERT_STREQ(vp_profile__meta(a, "kernel"), "6.18");
	ASSERT_STREQ(a->warnings, "b was cut short\n");
	ASSERT_UEQ(a->lost, 5);
	ASSERT_TRUE(a->incomplete);

	/* Merging a profile with a copy of itself doubles every count. */
	struct vp_profile *c = sample_profile("cpu-clock", "page-faults");
	struct vp_profile *d = sample_profile("cpu-clock", "page-faults");
	uint64_t t0 = total(c, 0, true), t1 = total(c, 1, false);
	ASSERT_OK(vp_profile__merge(c, d));
	ASSERT_UEQ(total(c, 0, true), 2 * t0);
	ASSERT_UEQ(total(c, 1, false), 2 * t1);
	ASSERT_EQ(c->nstacks, d->nstacks);
	ASSERT_EQ(c->nframes, d->nframes);
	/* ... and into an empty profile it copies. */
	struct vp_profile *e = vp_profile__new();
	ASSERT_OK(vp_profile__merge(e, d));
	ASSERT_UEQ(total(e, 0, true), t0);
	ASSERT_EQ(e->nevents, 2);
	vp_profile__free(a);
	vp_profile__free(b);
	vp_profile__free(c);
	vp_profile__free(d);
	vp_profile__free(e);
}

int main(void)
{
	test_layers();
	test_interning();
	test_stacks_and_events();
	test_meta_warnings();
	test_merge();
	return 0;
}
