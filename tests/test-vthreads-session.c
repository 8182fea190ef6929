/* Virtual threads through the session loader, without a JVM: a synthetic session (a
 * cpu-clock event and the switch tracer's off-cpu, kernel-only samples of carrier 501 of
 * JVM 500) and a code map with a virtual thread's mounts and unmounts. With
 * report --vthreads (vp_session_opts.vthreads) the carrier's samples inside a mount
 * interval are the virtual thread's ("[vthread #7 worker-a]", tid 0x80000007), those
 * outside stay the carrier's; its unmounted waits are off-cpu time of the virtual thread
 * under its Java stack and "[unmounted: sleep]" (a short one "[unmounted: short wait]"),
 * whether or not --vthreads groups on-CPU samples; a session without off-cpu gets none;
 * --wall spreads the carrier's exact on-CPU time over its own samples and its virtual
 * thread's. */
#include <sys/stat.h>
#include <time.h>

#include "common/chunkfile.h"
#include "common/session_format.h"
#include "maps/codemap_format.h"
#include "postproc/session.h"
#include "test-profile.h"
#include "postproc/vthreads.h"
#include "report/wall.h"
#include "test.h"
#include "test-helpers.h"
#include "test-run.h"

#define MS 1000000ull
#define K_A 0xffffffff81001000ull
static uint64_t base;

static void put(struct cfile_writer *w, uint32_t type, uint64_t t, const void *b, size_t n)
{
	ASSERT_OK(cfile_writer__append(w, type, t, b, n));
}

static void event(struct cfile_writer *w, uint32_t index, const char *name, uint32_t flags)
{
	struct vp_event_desc e = { .index = index, .period = MS, .flags = flags };
	snprintf(e.name, sizeof(e.name), "%s", name);
	put(w, VP_REC_EVENT, base, &e, sizeof(e));
}

static void sample(struct cfile_writer *w, uint64_t t, uint32_t event)
{
	char buf[sizeof(struct vp_sample) + 8] = { 0 };
	struct vp_sample *s = (void *)buf;
	s->pid = 500;
	s->tid = 501;
	s->event = (uint16_t)event;
	s->mode = VP_MODE_KERNEL;
	s->period = MS;
	s->nr_kernel = 1;
	s->ips[0] = K_A;
	put(w, VP_REC_SAMPLE, base + t, buf, sizeof(buf));
}

static void vt(struct cfile_writer *w, uint32_t type, uint64_t t, uint32_t flags, const char *name,
	       const uint64_t *frames, uint16_t nframes)
{
	uint8_t b[512];
	struct vp_cm_vthread h = { .vthread_id = 7, .carrier_tid = 501, .flags = flags, .nframes = nframes,
				   .name_len = (uint16_t)(name ? strlen(name) : 0) };
	memcpy(b, &h, sizeof(h));
	for (uint16_t i = 0; i < nframes; i++) {
		struct vp_cm_alloc_frame f = { .method_id = frames[i], .bci = 1 };
		memcpy(b + sizeof(h) + i * sizeof(f), &f, sizeof(f));
	}
	memcpy(b + sizeof(h) + nframes * sizeof(struct vp_cm_alloc_frame), name ? name : "", h.name_len);
	put(w, type, base + t, b, sizeof(h) + nframes * sizeof(struct vp_cm_alloc_frame) + h.name_len);
}

static void mname(struct cfile_writer *w, uint64_t id, const char *name)
{
	uint8_t b[256];
	struct vp_cm_method_name n = { .method_id = id, .name_len = (uint16_t)strlen(name) };
	memcpy(b, &n, sizeof(n));
	memcpy(b + sizeof(n), name, n.name_len);
	put(w, VP_CM_METHOD_NAME, base, b, sizeof(n) + n.name_len);
}

static void write_session(const char *dir, bool offcpu)
{
	char path[600];
	snprintf(path, sizeof(path), "%s/%s", dir, VP_SESSION_STREAM);
	struct cfile_writer *w = cfile_writer__create(path, VP_KIND_SESSION_STREAM, VP_SESSION_FORMAT_VERSION, 0, false);
	ASSERT_NOT_NULL(w);
	event(w, 0, "cpu-clock", VP_EVENT_SOFTWARE | VP_EVENT_TIME_UNITS);
	if (offcpu)
		event(w, 1, "off-cpu", VP_EVENT_TIME_UNITS | VP_EVENT_SCHED);
	struct vp_comm c = { .pid = 500, .tid = 501 };
	snprintf(c.comm, sizeof(c.comm), "ForkJoinPool-1-");
	put(w, VP_REC_COMM, base, &c, sizeof(c));
	char kb[sizeof(struct vp_ksym) + 16] = { 0 };
	struct vp_ksym *k = (void *)kb;
	k->addr = K_A;
	k->size = 0x100;
	strcpy(k->name, "kfunc");
	put(w, VP_REC_KSYM, 0, kb, sizeof(kb));
	/* Mounted from 10 to 20 ms and from 50 to 60 ms: 4 samples in, 3 out. */
	static const uint64_t at[] = { 5, 12, 15, 19, 30, 55, 70 };
	for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++)
		sample(w, at[i] * MS, 0);
	if (offcpu) {
		struct vp_thread_time tt = { .pid = 500, .tid = 501, .oncpu_ns = 14 * MS, .switches = 10 };
		put(w, VP_REC_THREAD_TIME, base + 80 * MS, &tt, sizeof(tt));
	}
	struct vp_end e = { .samples = 7, .duration_ns = 100 * MS };
	put(w, VP_REC_END, base + 100 * MS, &e, sizeof(e));
	ASSERT_OK(cfile_writer__close(w));

	snprintf(path, sizeof(path), "%s/jit", dir);
	ASSERT_OK(mkdir(path, 0700));
	snprintf(path, sizeof(path), "%s/jit/500", dir);
	ASSERT_OK(mkdir(path, 0700));
	snprintf(path, sizeof(path), "%s/jit/500/%s", dir, VP_CODEMAP_FILE);
	w = cfile_writer__create(path, VP_KIND_CODEMAP, VP_CODEMAP_FORMAT_VERSION, 0, false);
	ASSERT_NOT_NULL(w);
	struct vp_cm_meta meta = { .pid = 500, .agent_version = VP_AGENT_VERSION };
	put(w, VP_CM_META, base, &meta, sizeof(meta));
	struct vp_cm_epoch_begin b0 = { 0, VP_EPOCH_START };
	put(w, VP_CM_EPOCH_BEGIN, base, &b0, sizeof(b0));
	mname(w, 1, "jdk.internal.vm.Continuation.yield(ContinuationScope)");
	mname(w, 2, "java.lang.VirtualThread.parkNanos(long)");
	mname(w, 3, "java.lang.Thread.sleep(long)");
	mname(w, 4, "App.nap()");
	mname(w, 5, "App.run()");
	static const uint64_t stack[] = { 1, 2, 3, 4, 5 };
	vt(w, VP_CM_VTHREAD_MOUNT, 10 * MS, VP_CM_VT_START, "worker-a", NULL, 0);
	vt(w, VP_CM_VTHREAD_UNMOUNT, 20 * MS, 0, NULL, NULL, 0);
	vt(w, VP_CM_VTHREAD_MOUNT, 50 * MS, 0, NULL, stack, 5);       /* waited 30 ms in nap() */
	vt(w, VP_CM_VTHREAD_UNMOUNT, 60 * MS, 0, NULL, NULL, 0);
	vt(w, VP_CM_VTHREAD_MOUNT, 60 * MS + 20000, VP_CM_VT_SHORT, NULL, NULL, 0);
	vt(w, VP_CM_VTHREAD_UNMOUNT, 61 * MS, VP_CM_VT_END, NULL, NULL, 0);
	ASSERT_OK(cfile_writer__close(w));
}

static const char *leaf(const struct vp_profile *p, const struct vp_stack *s)
{
	return p->frames[s->frames[s->nframes - 1]].name;
}

static void check(const char *dir, bool offcpu, bool vthreads)
{
	struct vp_session_opts o = { .vthreads = vthreads };
	struct vp_profile *p = vp_profile__new();
	char err[512];
	if (vp_session__load(dir, p, &o, err, sizeof(err)))
		FAIL("load: %s", err);
	int cpu = tp_find_event(p, "cpu-clock"), off = tp_find_event(p, "off-cpu");
	uint64_t on_vt = 0, on_carrier = 0, sleep_ns = 0, short_ns = 0, other_ns = 0;
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct vp_stack *s = &p->stacks[i];
		bool is_vt = s->tid == vp_vthread_tid(7);
		if (is_vt)
			ASSERT_STREQ(s->comm, "[vthread #7 worker-a]");
		else
			ASSERT_EQ(s->tid, 501);
		if (s->samples[cpu])
			*(is_vt ? &on_vt : &on_carrier) += s->samples[cpu];
		if (off >= 0 && s->weight[off]) {
			ASSERT_TRUE(is_vt);
			if (!strcmp(leaf(p, s), "[unmounted: sleep]")) {
				sleep_ns += s->weight[off];
				ASSERT_EQ(s->nframes, 6);
				ASSERT_STREQ(p->frames[s->frames[0]].name, "App.run()");
				ASSERT_STREQ(p->frames[s->frames[1]].name, "App.nap()");
			} else if (!strcmp(leaf(p, s), "[unmounted: short wait]")) {
				short_ns += s->weight[off];
			} else {
				other_ns += s->weight[off];
			}
		}
	}
	ASSERT_EQ(on_vt, vthreads ? 4 : 0);
	ASSERT_EQ(on_carrier, vthreads ? 3 : 7);
	ASSERT_EQ(sleep_ns, offcpu ? 30 * MS : 0);
	ASSERT_EQ(short_ns, offcpu ? 20000 : 0);
	ASSERT_EQ(other_ns, 0);
	if (offcpu && vthreads) {
		/* --wall: the carrier's exact 14 ms on CPU over its 3 sampled ms and the 4 its
		 * virtual thread had: 2 ms per sample, not 14/3. */
		char werr[256];
		int wall = vp_wall__add_events(p, werr, sizeof(werr));
		ASSERT_GE(wall, 0);
		int run = tp_find_event(p, "running");
		ASSERT_GE(run, 0);
		uint64_t carrier_run = (uint64_t)tp_sum(p, &(struct tp_filter){ .tid = 501, .event = run, .weight = true },
							NULL, TP_EXACT, NULL);
		ASSERT_EQ(carrier_run, 6 * MS);
	}
	vp_profile__free(p);
}

int main(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	base = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec + 1000 * MS;  /* after the files' creation */
	for (int offcpu = 0; offcpu < 2; offcpu++) {
		char dir[] = "/tmp/vp-test-vtsess-XXXXXX";
		ASSERT_NOT_NULL(mkdtemp(dir));
		write_session(dir, offcpu);
		check(dir, offcpu, false);
		check(dir, offcpu, true);
		char cmd[600];
		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		ASSERT_EQ(run_sh(cmd, 110), 0);
	}
	printf("vthreads through the loader: ok\n");
	return 0;
}
