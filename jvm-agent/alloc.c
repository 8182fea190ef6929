/* Sampled allocations (record -e alloc; issue 25): jvm-agent/alloc.h. */
#define _GNU_SOURCE
#include "jvm-agent/alloc.h"

#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "jvm-agent/queue.h"
#include "jvm-agent/stats.h"
#include "maps/codemap_format.h"

/* alloc=BYTES: the mean number of bytes between two sampled allocations (JVMTI's heap
 * sampling interval); 0 = off. */
static uint64_t alloc_interval;
#define ALLOC_MAX_FRAMES 128

/* SampledObjectAlloc, on the allocating Java thread. Its stack and the object's class
 * are read here, the only place they can be, and queued as ALLOC_SAMPLE; like the
 * other callbacks it takes the queue's raw monitor briefly and drops the sample when
 * the queue is full. GetClassSignature allocates JVMTI memory, which JVMTI allows in
 * this event (it is posted where the allocating thread may run Java code). */
void vp_alloc__sampled(jvmtiEnv *jvmti, jclass klass, jlong size)
{
	jvmtiFrameInfo fr[ALLOC_MAX_FRAMES];
	jint n = 0;
	char *sig = NULL;

	if (!alloc_interval)
		return;
	if ((*jvmti)->GetStackTrace(jvmti, NULL, 0, ALLOC_MAX_FRAMES, fr, &n) != JVMTI_ERROR_NONE)
		n = 0;
	if ((*jvmti)->GetClassSignature(jvmti, klass, &sig, NULL) != JVMTI_ERROR_NONE)
		sig = NULL;
	size_t sl = sig ? strnlen(sig, 1024) : 0;
	uint64_t t = now_ns(), sz = size > 0 ? (uint64_t)size : 0;
	vp_queue__lock();
	/* Checked again under the queue's lock: a session that turned sampling off before its
	 * switch (vp_alloc__apply) gets none of it, not even from a thread preempted above. */
	struct vp_cm_alloc_sample *b = !alloc_interval ? NULL :
		vp_queue__reserve(VP_CM_ALLOC_SAMPLE, t, sizeof(*b) + (size_t)n * sizeof(struct vp_cm_alloc_frame) + sl);
	if (b) {
		struct vp_cm_alloc_frame *f = (struct vp_cm_alloc_frame *)(b + 1);
		b->tid = (uint32_t)syscall(SYS_gettid);
		b->nframes = (uint16_t)n;
		b->class_len = (uint16_t)sl;
		b->size = sz;
		/* Sampling picks about one allocation per interval bytes: one sample stands for
		 * the interval, or for the object itself when it is larger. */
		b->weight = sz > alloc_interval ? sz : alloc_interval;
		for (jint i = 0; i < n; i++)
			f[i] = (struct vp_cm_alloc_frame){ .method_id = (uint64_t)(uintptr_t)fr[i].method,
							   .bci = (int32_t)fr[i].location };
		memcpy(f + n, sig, sl);
	}
	vp_queue__unlock_notify();
	if (sig)
		(*jvmti)->Deallocate(jvmti, (unsigned char *)sig);
}

/* Turns allocation sampling on when alloc= asked for it; a JVM that cannot (before JDK
 * 11) says so once and records the rest. */
void vp_alloc__start(jvmtiEnv *jvmti)
{
	jvmtiCapabilities caps = { 0 };
	jvmtiError e;

	if (!alloc_interval)
		return;
	caps.can_generate_sampled_object_alloc_events = 1;
	if ((e = (*jvmti)->AddCapabilities(jvmti, &caps)) != JVMTI_ERROR_NONE ||
	    (e = (*jvmti)->SetHeapSamplingInterval(jvmti, (jint)(alloc_interval > INT32_MAX ? INT32_MAX : alloc_interval))) !=
		    JVMTI_ERROR_NONE ||
	    (e = (*jvmti)->SetEventNotificationMode(jvmti, JVMTI_ENABLE, JVMTI_EVENT_SAMPLED_OBJECT_ALLOC, NULL)) !=
		    JVMTI_ERROR_NONE) {
		char *name = NULL;
		if ((*jvmti)->GetErrorName(jvmti, e, &name) != JVMTI_ERROR_NONE)
			name = NULL;
		fprintf(stderr, "viprof agent: allocation sampling is unavailable: %s (SampledObjectAlloc needs JDK 11 or later); "
			"recording without it\n", name ? name : "JVMTI error");
		(*jvmti)->Deallocate(jvmti, (unsigned char *)name);
		alloc_interval = 0;
	}
}

void vp_alloc__set(uint64_t interval)
{
	alloc_interval = interval;
}

void vp_alloc__apply(jvmtiEnv *jvmti, uint64_t alloc, bool starting)
{
	if (!starting) {
		if (!alloc && alloc_interval) {
			alloc_interval = 0;
			(*jvmti)->SetEventNotificationMode(jvmti, JVMTI_DISABLE, JVMTI_EVENT_SAMPLED_OBJECT_ALLOC, NULL);
		}
		return;
	}
	if (alloc && alloc != alloc_interval) {
		alloc_interval = alloc;
		vp_alloc__start(jvmti);
	}
}
