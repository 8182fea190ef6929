/* Virtual threads in the code map (VTHREAD_MOUNT/UNMOUNT, maps/codemap_format.h) and
 * their index (postproc/vthreads.h), without a JVM: records written out of time order
 * read back sorted; a carrier's samples between a mount and its unmount belong to the
 * virtual thread, not after the unmount, nor on a mount whose unmount was lost; an
 * unmount to the next mount (on another carrier) is one wait with the stack the mount
 * carries (or, else, the unmount's), an END unmount none, a SHORT mount a wait without a
 * stack; the name of a START mount labels every interval; a record whose
 * frames overrun it is skipped and counted, never a crash. */
#include "test.h"

#include <stdlib.h>
#include <sys/stat.h>

#include "common/chunkfile.h"
#include "maps/codemap.h"
#include "maps/codemap_format.h"
#include "postproc/vthreads.h"

static void put(struct cfile_writer *w, uint32_t type, uint64_t t, const void *b, size_t n)
{
	ASSERT_OK(cfile_writer__append(w, type, t, b, n));
}

static void vt(struct cfile_writer *w, uint32_t type, uint64_t t, uint32_t carrier, uint64_t id, uint32_t flags,
	       const char *name, const uint64_t *frames, uint16_t nframes)
{
	uint8_t b[1024];
	struct vp_cm_vthread h = { .vthread_id = id, .carrier_tid = carrier, .flags = flags, .nframes = nframes,
				   .name_len = (uint16_t)(name ? strlen(name) : 0) };
	memcpy(b, &h, sizeof(h));
	for (uint16_t i = 0; i < nframes; i++) {
		struct vp_cm_alloc_frame f = { .method_id = frames[i], .bci = (int32_t)i };
		memcpy(b + sizeof(h) + i * sizeof(f), &f, sizeof(f));
	}
	if (h.name_len)
		memcpy(b + sizeof(h) + nframes * sizeof(struct vp_cm_alloc_frame), name, h.name_len);
	put(w, type, t, b, sizeof(h) + nframes * sizeof(struct vp_cm_alloc_frame) + h.name_len);
}

int main(void)
{
	char dir[256], path[300], err[512];
	snprintf(dir, sizeof(dir), "/tmp/viprof-test-vtidx.%d", (int)getpid());
	mkdir(dir, 0700);
	snprintf(path, sizeof(path), "%s/codemap.vpm", dir);
	struct cfile_writer *w = cfile_writer__create(path, VP_KIND_CODEMAP, VP_CODEMAP_FORMAT_VERSION, 0, true);
	ASSERT_NOT_NULL(w);
	struct vp_cm_epoch_begin eb = { .epoch = 0, .reason = VP_EPOCH_START };
	put(w, VP_CM_EPOCH_BEGIN, 1, &eb, sizeof(eb));
	static const uint64_t stack[] = { 4, 3, 2, 1, 5 };   /* yield, parkNanos, sleep, napStep, body */
	/* Carrier 101's records first, though they are later: the queue orders by lock. */
	vt(w, VP_CM_VTHREAD_MOUNT, 5000, 101, 7, 0, NULL, stack, 5);   /* the stack it waited at */
	vt(w, VP_CM_VTHREAD_UNMOUNT, 6000, 101, 7, VP_CM_VT_END, NULL, NULL, 0);
	vt(w, VP_CM_VTHREAD_MOUNT, 1000, 100, 7, VP_CM_VT_START, "worker-a", NULL, 0);
	vt(w, VP_CM_VTHREAD_UNMOUNT, 2000, 100, 7, 0, NULL, NULL, 0);
	vt(w, VP_CM_VTHREAD_MOUNT, 2100, 100, 8, VP_CM_VT_START, NULL, NULL, 0);
	vt(w, VP_CM_VTHREAD_UNMOUNT, 2500, 100, 8, VP_CM_VT_END, NULL, NULL, 0);
	/* Carrier 102: virtual thread 9's unmount was dropped; 10 still runs at the end. */
	vt(w, VP_CM_VTHREAD_MOUNT, 100, 102, 9, VP_CM_VT_START, NULL, NULL, 0);
	vt(w, VP_CM_VTHREAD_MOUNT, 200, 102, 10, VP_CM_VT_START, NULL, NULL, 0);
	vt(w, VP_CM_VTHREAD_UNMOUNT, 300, 102, 10, 0, NULL, stack, 5);   /* an unmount's stack reads too */
	vt(w, VP_CM_VTHREAD_MOUNT, 400, 102, 10, 0, NULL, NULL, 0);
	vt(w, VP_CM_VTHREAD_UNMOUNT, 500, 102, 10, 0, NULL, NULL, 0);
	vt(w, VP_CM_VTHREAD_MOUNT, 510, 102, 10, VP_CM_VT_SHORT, NULL, NULL, 0);
	/* A record whose frames overrun it. */
	struct vp_cm_vthread bad = { .vthread_id = 11, .carrier_tid = 103, .nframes = 50 };
	put(w, VP_CM_VTHREAD_UNMOUNT, 700, &bad, sizeof(bad));
	ASSERT_OK(cfile_writer__close(w));

	struct vp_codemap *m = vp_codemap__load_file(path, err, sizeof(err));
	if (!m)
		FAIL("load: %s", err);
	ASSERT_EQ(m->nvthreads, 12);
	ASSERT_EQ(m->skipped_records, 1);
	struct vp_vthreads *v = vp_vthreads__build(m);
	ASSERT_NOT_NULL(v);
	ASSERT_TRUE(vp_vthreads__any(v));

	uint64_t id = 0;
	const char *name = NULL;
	ASSERT_TRUE(vp_vthreads__at(v, 100, 1000, &id, &name));
	ASSERT_EQ(id, 7);
	ASSERT_STREQ(name, "worker-a");
	ASSERT_TRUE(vp_vthreads__at(v, 100, 1999, &id, &name));
	ASSERT_FALSE(vp_vthreads__at(v, 100, 2000, &id, &name));   /* the carrier's own code */
	ASSERT_FALSE(vp_vthreads__at(v, 100, 2050, &id, &name));
	ASSERT_FALSE(vp_vthreads__at(v, 100, 999, &id, &name));
	ASSERT_TRUE(vp_vthreads__at(v, 100, 2200, &id, &name));
	ASSERT_EQ(id, 8);
	ASSERT_STREQ(name, "");
	ASSERT_FALSE(vp_vthreads__at(v, 100, 2600, &id, &name));
	ASSERT_TRUE(vp_vthreads__at(v, 101, 5500, &id, &name));
	ASSERT_EQ(id, 7);
	ASSERT_STREQ(name, "worker-a");
	ASSERT_FALSE(vp_vthreads__at(v, 102, 150, &id, &name));    /* unmount lost: not trusted */
	ASSERT_TRUE(vp_vthreads__at(v, 102, 250, &id, &name));
	ASSERT_EQ(id, 10);
	ASSERT_TRUE(vp_vthreads__at(v, 102, 1000000, &id, &name)); /* still mounted at the end */
	ASSERT_FALSE(vp_vthreads__at(v, 99, 1500, &id, &name));
	ASSERT_FALSE(vp_vthreads__at(v, 104, 1500, &id, &name));

	const struct vp_vt_wait *wt;
	size_t nw = vp_vthreads__waits(v, &wt);
	ASSERT_EQ(nw, 3);
	ASSERT_EQ(wt[0].id, 7);
	ASSERT_EQ(wt[0].from, 2000);
	ASSERT_EQ(wt[0].to, 5000);
	ASSERT_STREQ(wt[0].name, "worker-a");
	ASSERT_EQ(wt[0].nframes, 5);
	ASSERT_EQ(m->alloc_frames[wt[0].first].method_id, 4);
	ASSERT_EQ(m->alloc_frames[wt[0].first + 4].method_id, 5);
	ASSERT_FALSE(wt[0].short_wait);
	ASSERT_EQ(wt[1].id, 10);
	ASSERT_EQ(wt[1].to - wt[1].from, 100);
	ASSERT_EQ(wt[1].nframes, 5);
	ASSERT_EQ(m->alloc_frames[wt[1].first].method_id, 4);
	ASSERT_EQ(wt[2].to - wt[2].from, 10);
	ASSERT_EQ(wt[2].nframes, 0);
	ASSERT_TRUE(wt[2].short_wait);

	char label[64];
	vp_vthreads__label(7, "worker-a", label, sizeof(label));
	ASSERT_STREQ(label, "[vthread #7 worker-a]");
	vp_vthreads__label(8, "", label, sizeof(label));
	ASSERT_STREQ(label, "[vthread #8]");
	ASSERT_EQ(vp_vthread_tid(8), 0x80000008u);

	vp_vthreads__free(v);
	vp_codemap__free(m);
	/* No records: an empty index. */
	struct vp_vthreads *e = vp_vthreads__build(NULL);
	ASSERT_NOT_NULL(e);
	ASSERT_FALSE(vp_vthreads__any(e));
	ASSERT_FALSE(vp_vthreads__at(e, 100, 1500, &id, &name));
	vp_vthreads__free(e);
	unlink(path);
	rmdir(dir);
	printf("vthread index: ok\n");
	return 0;
}
