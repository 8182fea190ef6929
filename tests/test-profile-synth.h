/* Synthetic but realistic profiles for the report tests, built through the profile API:
 * a Java service with hypervisor, kernel, native, JVM, JIT, inlined and interpreted
 * frames and known shares, and a large tree for the size and speed tests. And synthetic
 * sessions (synth_session_*): a stream.vps written record by record as the recorder
 * writes it, for the loader's tests whose answer is worked out by hand. */
#ifndef VIPROF_TEST_PROFILE_SYNTH_H
#define VIPROF_TEST_PROFILE_SYNTH_H

#include <sys/stat.h>
#include <time.h>

#include "common/chunkfile.h"
#include "common/session_format.h"
#include "postproc/profile.h"
#include "test-helpers.h"
#include "test.h"

static inline uint32_t synth_frame(struct vp_profile *p, int layer, const char *name, const char *image, uint64_t addr)
{
	/* Native images get a build id derived from their path: distinct files, distinct ids. */
	char bid[20] = "";
	if (layer == VP_LAYER_NATIVE || layer == VP_LAYER_JVM) {
		uint32_t h = 2166136261u;
		for (const char *c = image; *c; c++)
			h = (h ^ (unsigned char)*c) * 16777619u;
		snprintf(bid, sizeof(bid), "%08x%08x", h, h ^ 0x5bd1e995u);
	}
	struct vp_frame f = { .name = name, .image = image, .layer = (uint8_t)layer, .addr = addr, .build_id = bid };
	uint32_t id = vp_profile__frame(p, &f);
	ASSERT_NE(id, UINT32_MAX);
	return id;
}

/* Self shares of cpu-clock (1000 samples, 1 ms each):
 *   com.example.Codec.encode (inlined) 40%, java.util.HashMap.get (inlined) 20%,
 *   ksys_write (kernel) 15%, JLI_Launch (native) 10%, G1CollectedHeap::do_collection
 *   (jvm) 10%, [steal] (hypervisor) 5%. Server.handle (jit) has 75% total.
 * page-faults: 30 under do_collection, 10 under ksys_write. */
#define SYNTH_SAMPLES 1000
#define SYNTH_PERIOD_NS 1000000ull
static inline struct vp_profile *synth_java_profile(void)
{
	struct vp_profile *p = vp_profile__new();
	ASSERT_NOT_NULL(p);
	int cpu = vp_profile__add_event(p, "cpu-clock", "nanoseconds");
	int pf = vp_profile__add_event(p, "page-faults", "events");
	ASSERT_EQ(cpu, 0);
	ASSERT_EQ(pf, 1);
	vp_profile__set_meta(p, "event", "cpu-clock");
	vp_profile__set_meta(p, "rate", "1000");
	vp_profile__set_meta(p, "duration_ns", "1000000000");
	/* The recorder's own keys (recorder/record_cmd.c and the probe). */
	vp_profile__set_meta(p, "start_realtime_ns", "1700000000000000000");
	vp_profile__set_meta(p, "hostname", "vm-test");
	vp_profile__set_meta(p, "probe.hypervisor", "KVM");
	vp_profile__set_meta(p, "probe.pmu.device", "none");
	vp_profile__set_meta(p, "event.why", "cpu-clock (hrtimer): this VM (KVM) exposes no PMU, so cycles cannot be sampled");

	const char *libc = "/usr/lib/x86_64-linux-gnu/libc.so.6";
	const char *jvm = "/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so";
	const char *k = "[kernel.kallsyms]";
	uint32_t start = synth_frame(p, VP_LAYER_NATIVE, "start_thread", libc, 0x8a0);
	uint32_t tne = synth_frame(p, VP_LAYER_JVM, "thread_native_entry", jvm, 0xc1d000);
	uint32_t jc = synth_frame(p, VP_LAYER_JVM, "JavaCalls::call_helper", jvm, 0x851000);
	uint32_t interp = synth_frame(p, VP_LAYER_INTERPRETED, "com.example.Main.run", "[interpreter]", 0);
	uint32_t handle = synth_frame(p, VP_LAYER_JIT, "com.example.Server.handle", "[jit]", 0);
	uint32_t enc = synth_frame(p, VP_LAYER_INLINED, "com.example.Codec.encode", "[jit]", 0);
	uint32_t hget = synth_frame(p, VP_LAYER_INLINED, "java.util.HashMap.get", "[jit]", 0);
	uint32_t wr = synth_frame(p, VP_LAYER_NATIVE, "__GI___libc_write", libc, 0x10e2a0);
	uint32_t esc = synth_frame(p, VP_LAYER_KERNEL, "entry_SYSCALL_64_after_hwframe", k, 0);
	uint32_t dsc = synth_frame(p, VP_LAYER_KERNEL, "do_syscall_64", k, 0);
	uint32_t ksw = synth_frame(p, VP_LAYER_KERNEL, "ksys_write", k, 0);
	uint32_t vmt = synth_frame(p, VP_LAYER_JVM, "VMThread::run", jvm, 0xe9a000);
	uint32_t gc = synth_frame(p, VP_LAYER_JVM, "G1CollectedHeap::do_collection", jvm, 0x7a1000);
	uint32_t steal = synth_frame(p, VP_LAYER_HYPERVISOR, "[steal]", "[hypervisor]", 0);
	uint32_t lsm = synth_frame(p, VP_LAYER_NATIVE, "__libc_start_main", libc, 0x271c0);
	uint32_t jmain = synth_frame(p, VP_LAYER_NATIVE, "main", "/usr/lib/jvm/java-17-openjdk-amd64/bin/java", 0x1130);
	uint32_t jli = synth_frame(p, VP_LAYER_NATIVE, "JLI_Launch", "/usr/lib/jvm/java-17-openjdk-amd64/lib/libjli.so", 0x5a30);

	uint32_t s1[] = { start, tne, jc, interp, handle, enc };
	uint32_t s2[] = { start, tne, jc, interp, handle, hget };
	uint32_t s3[] = { start, tne, jc, interp, handle, wr, esc, dsc, ksw };
	uint32_t s4[] = { start, tne, vmt, gc };
	uint32_t s5[] = { steal };
	uint32_t s6[] = { lsm, jmain, jli };
#define ADD(s, tid, comm, n) ASSERT_OK(vp_profile__add(p, s, sizeof(s) / sizeof(s[0]), 4242, tid, comm, cpu, n, (n) * SYNTH_PERIOD_NS))
	ADD(s1, 4243, "worker-1", 300);
	ADD(s1, 4244, "worker-2", 100);
	ADD(s2, 4244, "worker-2", 200);
	ADD(s3, 4243, "worker-1", 150);
	ADD(s4, 4250, "VM Thread", 100);
	ADD(s5, 4243, "worker-1", 50);
	ADD(s6, 4242, "java", 100);
#undef ADD
	ASSERT_OK(vp_profile__add(p, s4, 4, 4242, 4250, "VM Thread", pf, 30, 30));
	ASSERT_OK(vp_profile__add(p, s3, 9, 4242, 4243, "worker-1", pf, 10, 10));
	return p;
}

/* A tree of about n_leaves * 1.11 nodes: every stack is a distinct path of base-10
 * digits under a shared root, so the trie has 10 + 100 + ... + n_leaves nodes. */
static inline struct vp_profile *synth_big_profile(int digits)
{
	struct vp_profile *p = vp_profile__new();
	ASSERT_NOT_NULL(p);
	int cpu = vp_profile__add_event(p, "cpu-clock", "nanoseconds");
	uint32_t ids[16][10];
	char name[96];
	static const int layers[] = { VP_LAYER_NATIVE, VP_LAYER_JVM, VP_LAYER_INTERPRETED, VP_LAYER_JIT, VP_LAYER_INLINED, VP_LAYER_KERNEL };
	for (int l = 0; l < digits; l++)
		for (int d = 0; d < 10; d++) {
			snprintf(name, sizeof(name), "com.example.level%d.Class%d.method%d", l, d, l * 10 + d);
			ids[l][d] = synth_frame(p, layers[l % 6], name, l % 6 == 5 ? "[kernel.kallsyms]" : "[jit]", 0);
		}
	uint32_t root = synth_frame(p, VP_LAYER_NATIVE, "start_thread", "/usr/lib/x86_64-linux-gnu/libc.so.6", 0);
	long n = 1;
	for (int l = 0; l < digits; l++)
		n *= 10;
	uint32_t st[17];
	for (long i = 0; i < n; i++) {
		st[0] = root;
		long v = i;
		for (int l = digits - 1; l >= 0; l--) {
			st[1 + l] = ids[l][v % 10];
			v /= 10;
		}
		uint64_t c = 1 + (uint64_t)(i % 7);
		ASSERT_OK(vp_profile__add(p, st, (uint32_t)digits + 1, 1, 1, "big", cpu, c, c * SYNTH_PERIOD_NS));
	}
	return p;
}

/* A session stream being written; its records' times are ns after base, the clock read
 * when the file was created (so that --to and --from count from the header's clock: a
 * base taken earlier let a slow start move a record inside a window). */
struct synth_session {
	struct cfile_writer *w;
	uint64_t base;
};

#define SYNTH_MS 1000000ull
#define SYNTH_K_SYSCALL 0xffffffff81001000ull   /* do_syscall_64, under every kernel leaf */

static inline void synth_session_open(struct synth_session *s, const char *dir)
{
	char path[512];
	struct timespec ts;

	mkdir(dir, 0700);
	snprintf(path, sizeof(path), "%s/%s", dir, VP_SESSION_STREAM);
	s->w = cfile_writer__create(path, VP_KIND_SESSION_STREAM, VP_SESSION_FORMAT_VERSION, 0, false);
	ASSERT_NOT_NULL(s->w);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	s->base = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void synth_event(struct synth_session *s, uint32_t index, const char *name, uint32_t flags,
			       uint32_t perf_type, uint64_t period)
{
	struct vp_event_desc ev = { .index = index, .perf_type = perf_type, .period = period, .flags = flags };
	snprintf(ev.name, sizeof(ev.name), "%s", name);
	ASSERT_OK(cfile_writer__append(s->w, VP_REC_EVENT, s->base, &ev, sizeof(ev)));
}

static inline void synth_ksym(struct synth_session *s, uint64_t addr, const char *name)
{
	char buf[sizeof(struct vp_ksym) + 64] = { 0 };
	struct vp_ksym *k = (void *)buf;
	k->addr = addr;
	k->size = 0x100;
	snprintf(k->name, 64, "%s", name);
	ASSERT_OK(cfile_writer__append(s->w, VP_REC_KSYM, s->base, buf, sizeof(*k) + strlen(k->name) + 1));
}

static inline void synth_comm(struct synth_session *s, uint32_t pid, const char *comm)
{
	struct vp_comm r = { .pid = pid, .tid = pid };
	strncpy(r.comm, comm, sizeof(r.comm) - 1);
	ASSERT_OK(cfile_writer__append(s->w, VP_REC_COMM, s->base, &r, sizeof(r)));
}

/* What a kernel-mode sample of synth_ksample says beside its stack. */
struct synth_sample {
	uint32_t pid;          /* its tid too */
	uint32_t cpu;
	uint16_t event;
	uint64_t period;
	uint8_t sched_state;
	uint64_t leaf;         /* the address of the leaf's symbol: the stack is do_syscall_64 -> leaf */
};

/* times samples at t of the two-frame kernel stack do_syscall_64 -> m->leaf. */
static inline void synth_ksample(struct synth_session *s, uint64_t t, const struct synth_sample *m, int times)
{
	char buf[sizeof(struct vp_sample) + 16] = { 0 };
	struct vp_sample *v = (void *)buf;
	v->pid = v->tid = m->pid;
	v->cpu = m->cpu;
	v->event = m->event;
	v->mode = VP_MODE_KERNEL;
	v->period = m->period;
	v->sched_state = m->sched_state;
	v->nr_kernel = 2;
	v->ips[0] = m->leaf + 0x10;
	v->ips[1] = SYNTH_K_SYSCALL + 0x20;
	for (int i = 0; i < times; i++)
		ASSERT_OK(cfile_writer__append(s->w, VP_REC_SAMPLE, s->base + t, buf, sizeof(*v) + 16));
}

/* A STEAL snapshot: vCPU cpu's cumulative steal clock at t. */
static inline void synth_steal(struct synth_session *s, uint64_t t, uint32_t cpu, uint64_t ns)
{
	struct vp_steal r = { .cpu = cpu, .steal_ns = ns };
	ASSERT_OK(cfile_writer__append(s->w, VP_REC_STEAL, s->base + t, &r, sizeof(r)));
}

static inline void synth_switch(struct synth_session *s, uint64_t t, uint32_t cpu, uint32_t prev, uint32_t next)
{
	struct vp_switch r = { .cpu = cpu, .prev_pid = prev, .prev_tid = prev, .next_pid = next, .next_tid = next };
	ASSERT_OK(cfile_writer__append(s->w, VP_REC_SWITCH, s->base + t, &r, sizeof(r)));
}

/* END at t (the session's duration), saying it holds samples samples; closes the file. */
static inline void synth_session_close(struct synth_session *s, uint64_t t, uint64_t samples)
{
	struct vp_end e = { .samples = samples, .duration_ns = t };
	ASSERT_OK(cfile_writer__append(s->w, VP_REC_END, s->base + t, &e, sizeof(e)));
	ASSERT_OK(cfile_writer__close(s->w));
	s->w = NULL;
}

#endif
