/* Virtual threads: see vthread.h.
 *
 * The agent is built against JDK 17's jvmti.h, which knows neither virtual threads nor
 * their events, and its main JVMTI environment is a version 1.2 one. So this file takes
 * an environment of its own at JVMTI version 21 and speaks the few JDK 21 additions it
 * needs by their ABI: the can_support_virtual_threads bit (the one after
 * can_generate_sampled_object_alloc_events), and the two callbacks that follow
 * SampledObjectAlloc in jvmtiEventCallbacks (events 87 and 88).
 *
 * Threads: every callback runs on the carrier thread with the virtual thread mounted
 * (Start, Mount: just mounted; Unmount, End: about to leave). None may block: each
 * builds its record on the stack and hands it to vp_agent__queue, which takes the queue's
 * raw monitor briefly and drops the record when the queue is full. No JVMTI memory is
 * allocated except GetThreadInfo's name at a virtual thread's start. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "jvm-agent/vthread.h"
#include "maps/codemap_format.h"

#define VT_JVMTI_VERSION_21 0x30150000
#define VT_EVENT_START 87
#define VT_EVENT_END 88
/* Frames kept of a virtual thread's stack at unmount: the parking machinery takes about
 * ten, so this reaches the run() of ordinary request handlers. */
#define VT_MAX_FRAMES 64
#define VT_NAME_MAX 256

/* JDK 17's jvmtiEventCallbacks followed by the two events JDK 21 added. */
struct vt_callbacks {
	jvmtiEventCallbacks base;
	void (JNICALL *start)(jvmtiEnv *, JNIEnv *, jthread);
	void (JNICALL *end)(jvmtiEnv *, JNIEnv *, jthread);
};

static int vt_wanted = -1;     /* vthreads=: 1 on, 0 off, -1 not given (off) */
static jfieldID tid_field;     /* java.lang.Thread.tid: the id threadId() returns */
static __thread uint32_t tl_tid;

bool vthread_option(const char *p, size_t len)
{
	if (len == 10 && !strncmp(p, "vthreads=1", 10))
		vt_wanted = 1;
	else if (len == 10 && !strncmp(p, "vthreads=0", 10))
		vt_wanted = 0;
	else
		return false;
	return true;
}

static uint64_t vt_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);   /* the clock of every viprof record */
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint32_t carrier_tid(void)
{
	if (!tl_tid)
		tl_tid = (uint32_t)syscall(SYS_gettid);
	return tl_tid;
}

/* The virtual thread's id, read from its field (no Java call, no allocation); 0 when
 * the field cannot be found. */
static uint64_t vt_id(JNIEnv *jni, jthread vt)
{
	jfieldID f = __atomic_load_n(&tid_field, __ATOMIC_ACQUIRE);
	if (!f) {
		jclass k = (*jni)->FindClass(jni, "java/lang/Thread");
		if (k) {
			f = (*jni)->GetFieldID(jni, k, "tid", "J");
			(*jni)->DeleteLocalRef(jni, k);
		}
		if (!f) {
			(*jni)->ExceptionClear(jni);
			return 0;
		}
		__atomic_store_n(&tid_field, f, __ATOMIC_RELEASE);
	}
	return (uint64_t)(*jni)->GetLongField(jni, vt, f);
}

static void queue_mount(JNIEnv *jni, jthread vt, uint32_t flags, const char *name)
{
	uint64_t t = vt_now();
	size_t nl = name ? strnlen(name, VT_NAME_MAX) : 0;
	struct vp_cm_vthread b = { .vthread_id = vt_id(jni, vt), .carrier_tid = carrier_tid(), .flags = flags,
				   .name_len = (uint16_t)nl };
	vp_agent__queue(VP_CM_VTHREAD_MOUNT, t, &b, sizeof(b), name, nl, NULL, 0);
}

static void queue_unmount(jvmtiEnv *jvmti, JNIEnv *jni, jthread vt, uint32_t flags)
{
	struct vp_cm_alloc_frame f[VT_MAX_FRAMES];
	jvmtiFrameInfo fr[VT_MAX_FRAMES];
	jint n = 0;
	/* The time first: the wait begins now, and reading the stack takes a while. */
	uint64_t t = vt_now();
	if (!(flags & VP_CM_VT_END) && (*jvmti)->GetStackTrace(jvmti, vt, 0, VT_MAX_FRAMES, fr, &n) != JVMTI_ERROR_NONE)
		n = 0;
	for (jint i = 0; i < n; i++)
		f[i] = (struct vp_cm_alloc_frame){ .method_id = (uint64_t)(uintptr_t)fr[i].method,
						   .bci = (int32_t)fr[i].location };
	struct vp_cm_vthread b = { .vthread_id = vt_id(jni, vt), .carrier_tid = carrier_tid(), .flags = flags,
				   .nframes = (uint16_t)n };
	vp_agent__queue(VP_CM_VTHREAD_UNMOUNT, t, &b, sizeof(b), f, (size_t)n * sizeof(f[0]), NULL, 0);
}

static void JNICALL cb_vt_start(jvmtiEnv *jvmti, JNIEnv *jni, jthread vt)
{
	jvmtiThreadInfo ti = { 0 };
	/* Virtual threads are unnamed unless the program names them: only then is the name
	 * worth GetThreadInfo's allocation. */
	bool named = (*jvmti)->GetThreadInfo(jvmti, vt, &ti) == JVMTI_ERROR_NONE && ti.name && ti.name[0];
	queue_mount(jni, vt, VP_CM_VT_START, named ? ti.name : NULL);
	if (ti.name)
		(*jvmti)->Deallocate(jvmti, (unsigned char *)ti.name);
	if (ti.thread_group)
		(*jni)->DeleteLocalRef(jni, ti.thread_group);
	if (ti.context_class_loader)
		(*jni)->DeleteLocalRef(jni, ti.context_class_loader);
}

static void JNICALL cb_vt_end(jvmtiEnv *jvmti, JNIEnv *jni, jthread vt)
{
	queue_unmount(jvmti, jni, vt, VP_CM_VT_END);
}

/* HotSpot's extension events are declared variadic (jvmtiExtensionEvent); these two
 * pass (jvmtiEnv *, JNIEnv *, jthread), as GetExtensionEvents describes them. */
static void JNICALL cb_vt_mount(jvmtiEnv *jvmti, ...)
{
	va_list ap;
	va_start(ap, jvmti);
	JNIEnv *jni = va_arg(ap, JNIEnv *);
	jthread vt = va_arg(ap, jthread);
	va_end(ap);
	queue_mount(jni, vt, 0, NULL);
}

static void JNICALL cb_vt_unmount(jvmtiEnv *jvmti, ...)
{
	va_list ap;
	va_start(ap, jvmti);
	JNIEnv *jni = va_arg(ap, JNIEnv *);
	jthread vt = va_arg(ap, jthread);
	va_end(ap);
	queue_unmount(jvmti, jni, vt, 0);
}

/* Sets can_support_virtual_threads in caps: the bit after
 * can_generate_sampled_object_alloc_events (JDK 21's jvmti.h). */
static void set_vt_capability(jvmtiCapabilities *caps)
{
	jvmtiCapabilities probe = { 0 };
	probe.can_generate_sampled_object_alloc_events = 1;
	const unsigned char *pb = (const unsigned char *)&probe;
	unsigned char *cb = (unsigned char *)caps;
	for (size_t i = 0; i < sizeof(probe); i++)
		for (int bit = 0; bit < 8; bit++)
			if (pb[i] & (1u << bit)) {
				size_t at = i * 8 + (size_t)bit + 1;
				cb[at / 8] |= (unsigned char)(1u << (at % 8));
				return;
			}
}

/* Enables the extension event named id with callback cb; 0 or a JVMTI error. */
static jvmtiError enable_extension(jvmtiEnv *jvmti, const char *id, jvmtiExtensionEvent cb)
{
	jint n = 0;
	jvmtiExtensionEventInfo *ev = NULL;
	jvmtiError e = (*jvmti)->GetExtensionEvents(jvmti, &n, &ev);
	jint index = -1;
	if (e != JVMTI_ERROR_NONE)
		return e;
	for (jint i = 0; i < n; i++) {
		if (!strcmp(ev[i].id, id) && ev[i].param_count == 2)
			index = ev[i].extension_event_index;
		(*jvmti)->Deallocate(jvmti, (unsigned char *)ev[i].id);
		(*jvmti)->Deallocate(jvmti, (unsigned char *)ev[i].short_description);
		for (jint k = 0; k < ev[i].param_count; k++)
			(*jvmti)->Deallocate(jvmti, (unsigned char *)ev[i].params[k].name);
		(*jvmti)->Deallocate(jvmti, (unsigned char *)ev[i].params);
	}
	(*jvmti)->Deallocate(jvmti, (unsigned char *)ev);
	if (index < 0)
		return JVMTI_ERROR_NOT_AVAILABLE;
	/* Setting the callback is not enough: HotSpot posts an extension event only once it
	 * is also enabled by its index. */
	if ((e = (*jvmti)->SetExtensionEventCallback(jvmti, index, cb)) != JVMTI_ERROR_NONE)
		return e;
	return (*jvmti)->SetEventNotificationMode(jvmti, JVMTI_ENABLE, (jvmtiEvent)index, NULL);
}

static const char *err_name(jvmtiEnv *jvmti, jvmtiError e)
{
	static char buf[64];
	char *name = NULL;
	if (jvmti && (*jvmti)->GetErrorName(jvmti, e, &name) == JVMTI_ERROR_NONE && name) {
		snprintf(buf, sizeof(buf), "%s", name);
		(*jvmti)->Deallocate(jvmti, (unsigned char *)name);
	} else {
		snprintf(buf, sizeof(buf), "JVMTI error %d", (int)e);
	}
	return buf;
}

void vthread_start(JavaVM *vm)
{
	jvmtiEnv *jvmti = NULL;
	jvmtiCapabilities caps = { 0 };
	struct vt_callbacks cb = { 0 };
	jvmtiError e = JVMTI_ERROR_NONE;
	const char *what = "GetEnv(JVMTI 21)";

	if (vt_wanted != 1)
		return;
	if ((*vm)->GetEnv(vm, (void **)&jvmti, VT_JVMTI_VERSION_21) != JNI_OK || !jvmti) {
		fprintf(stderr, "viprof agent: virtual threads are not recorded: this JVM has no JVMTI 21 (virtual threads "
			"need JDK 21 or later)\n");
		return;
	}
	set_vt_capability(&caps);
	cb.start = cb_vt_start;
	cb.end = cb_vt_end;
	if ((what = "AddCapabilities(can_support_virtual_threads)", e = (*jvmti)->AddCapabilities(jvmti, &caps)) ||
	    (what = "SetEventCallbacks", e = (*jvmti)->SetEventCallbacks(jvmti, &cb.base, (jint)sizeof(cb))) ||
	    (what = "VirtualThreadMount", e = enable_extension(jvmti, "com.sun.hotspot.events.VirtualThreadMount",
							       (jvmtiExtensionEvent)cb_vt_mount)) ||
	    (what = "VirtualThreadUnmount", e = enable_extension(jvmti, "com.sun.hotspot.events.VirtualThreadUnmount",
								 (jvmtiExtensionEvent)cb_vt_unmount)) ||
	    (what = "enabling VirtualThreadStart",
	     e = (*jvmti)->SetEventNotificationMode(jvmti, JVMTI_ENABLE, (jvmtiEvent)VT_EVENT_START, NULL)) ||
	    (what = "enabling VirtualThreadEnd",
	     e = (*jvmti)->SetEventNotificationMode(jvmti, JVMTI_ENABLE, (jvmtiEvent)VT_EVENT_END, NULL))) {
		fprintf(stderr, "viprof agent: virtual threads are not recorded: %s failed: %s; recording the rest\n", what,
			err_name(jvmti, e));
		(*jvmti)->DisposeEnvironment(jvmti);
	}
}
