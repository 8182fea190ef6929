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
 * (Start, Mount: just mounted; Unmount, End: about to leave), so JVMTI's current thread
 * (NULL) is the virtual thread. None may block: each builds its record on the stack and
 * hands it to vp_queue__put, which takes the queue's raw monitor briefly and drops the
 * record when the queue is full. No JVMTI memory is allocated except GetThreadInfo's
 * name at a virtual thread's start. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "jvm-agent/locks.h"
#include "jvm-agent/queue.h"
#include "jvm-agent/vthread.h"
#include "maps/codemap_format.h"

#define VT_JVMTI_VERSION_21 0x30150000
#define VT_EVENT_START 87
#define VT_EVENT_END 88
/* Frames kept of a virtual thread's stack at unmount: the parking machinery takes about
 * ten, so this reaches the run() of ordinary request handlers. */
#define VT_MAX_FRAMES 64
#define VT_NAME_MAX 256
/* Waits shorter than this get no stack: the walk costs several microseconds of the
 * JVM's CPU (bench/vthreads-cost.sh), more than such a wait. */
#define VT_STACK_MIN_NS 50000ull

/* JDK 17's jvmtiEventCallbacks followed by the two events JDK 21 added. */
struct vt_callbacks {
	jvmtiEventCallbacks base;
	void (JNICALL *start)(jvmtiEnv *, JNIEnv *, jthread);
	void (JNICALL *end)(jvmtiEnv *, JNIEnv *, jthread);
};

/* Each virtual thread's last unmount time, for its next mount, by id in a fixed table:
 * 1 MiB, no allocation, no lock. Only one carrier at a time mounts or unmounts a given
 * virtual thread; virtual threads whose ids share a slot overwrite each other, and a
 * mount that finds another id there takes the stack (the safe side). JVMTI thread-local
 * storage could hold the time too, at the price of a JVMTI call per event; whether
 * HotSpot keeps a virtual thread's across its unmounts was not checked. */
#define VT_SLOTS (1u << 16)
static struct { uint64_t id, time; } vt_last[VT_SLOTS];
#define VT_JUST_STARTED UINT64_MAX

static int vt_wanted = -1;     /* vthreads= of the current session: 1 on, 0 off, -1 not given (off) */
static JavaVM *vt_vm;          /* from the first vp_vthread__start */
static const volatile bool vt_never;
static const volatile bool *vt_disabled = &vt_never;   /* the agent's, from vp_vthread__start */
static bool vt_started;        /* the environment and its events are on */
static jfieldID tid_field;     /* java.lang.Thread.tid: the id threadId() returns */
static __thread uint32_t tl_tid;

bool vp_vthread__option(const char *p, size_t len)
{
	if (!p)
		vt_wanted = -1;
	else if (len == 10 && !strncmp(p, "vthreads=1", 10))
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

/* The virtual thread's Java stack into f, innermost first; how many frames. */
static jint java_stack(jvmtiEnv *jvmti, jthread vt, struct vp_cm_alloc_frame *f)
{
	jvmtiFrameInfo fr[VT_MAX_FRAMES];
	jint n = 0;
	if ((*jvmti)->GetStackTrace(jvmti, vt, 0, VT_MAX_FRAMES, fr, &n) != JVMTI_ERROR_NONE)
		return 0;
	for (jint i = 0; i < n; i++)
		f[i] = (struct vp_cm_alloc_frame){ .method_id = (uint64_t)(uintptr_t)fr[i].method,
						   .bci = (int32_t)fr[i].location };
	return n;
}

/* Notes virtual thread id's last unmount time for its next mount. */
static void note_unmount(uint64_t id, uint64_t t)
{
	size_t k = id & (VT_SLOTS - 1);
	__atomic_store_n(&vt_last[k].id, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&vt_last[k].time, t, __ATOMIC_RELAXED);
	__atomic_store_n(&vt_last[k].id, id, __ATOMIC_RELEASE);
}

/* A mount. The wait it ends began at the virtual thread's last unmount, whose time that
 * callback left in vt_last: unless the wait was too short to be worth the walk, the
 * record carries the stack the virtual thread waited at, which is the one it resumes
 * with now (a first mount, right after VirtualThreadStart, ends no wait). Walking at the mount
 * rather than at every unmount spares the walk for the short waits of yield- and
 * handoff-heavy code (docs/offcpu.md, "Virtual threads"). */
static void queue_mount(jvmtiEnv *jvmti, JNIEnv *jni, jthread vt, uint32_t flags, const char *name)
{
	struct vp_cm_alloc_frame f[VT_MAX_FRAMES];
	jint n = 0;
	if (vt_wanted != 1 || *vt_disabled)
		return;
	uint64_t t = vt_now(), id = vt_id(jni, vt), since = 0;
	size_t nl = name ? strnlen(name, VT_NAME_MAX) : 0;
	if (!(flags & VP_CM_VT_START)) {
		size_t k = id & (VT_SLOTS - 1);
		if (__atomic_load_n(&vt_last[k].id, __ATOMIC_ACQUIRE) == id)
			since = __atomic_load_n(&vt_last[k].time, __ATOMIC_RELAXED);
		if (since != VT_JUST_STARTED && since)
			vp_locks__vthread_mount(jvmti, jni, vt, since, t);   /* -e lock: a park that unmounted */
		if (since == VT_JUST_STARTED)
			;
		else if (since && t > since && t - since < VT_STACK_MIN_NS)
			flags |= VP_CM_VT_SHORT;
		else
			n = java_stack(jvmti, vt, f);
	}
	struct vp_cm_vthread b = { .vthread_id = id, .carrier_tid = carrier_tid(), .flags = flags,
				   .nframes = (uint16_t)n, .name_len = (uint16_t)nl };
	vp_queue__put(VP_CM_VTHREAD_MOUNT, t, &b, sizeof(b), f, (size_t)n * sizeof(f[0]), name, nl);
	if (flags & VP_CM_VT_START)
		note_unmount(id, VT_JUST_STARTED);
}

static void queue_unmount(JNIEnv *jni, jthread vt, uint32_t flags)
{
	if (vt_wanted != 1 || *vt_disabled)
		return;
	uint64_t t = vt_now(), id = vt_id(jni, vt);
	if (!(flags & VP_CM_VT_END))
		note_unmount(id, t);
	struct vp_cm_vthread b = { .vthread_id = id, .carrier_tid = carrier_tid(), .flags = flags };
	vp_queue__put(VP_CM_VTHREAD_UNMOUNT, t, &b, sizeof(b), NULL, 0, NULL, 0);
}

static void JNICALL cb_vt_start(jvmtiEnv *jvmti, JNIEnv *jni, jthread vt)
{
	jvmtiThreadInfo ti = { 0 };
	/* Virtual threads are unnamed unless the program names them: only then is the name
	 * worth GetThreadInfo's allocation. */
	bool named = (*jvmti)->GetThreadInfo(jvmti, vt, &ti) == JVMTI_ERROR_NONE && ti.name && ti.name[0];
	queue_mount(jvmti, jni, vt, VP_CM_VT_START, named ? ti.name : NULL);
	if (ti.name)
		(*jvmti)->Deallocate(jvmti, (unsigned char *)ti.name);
	if (ti.thread_group)
		(*jni)->DeleteLocalRef(jni, ti.thread_group);
	if (ti.context_class_loader)
		(*jni)->DeleteLocalRef(jni, ti.context_class_loader);
}

static void JNICALL cb_vt_end(jvmtiEnv *jvmti, JNIEnv *jni, jthread vt)
{
	queue_unmount(jni, vt, VP_CM_VT_END);
}

/* HotSpot's extension events are declared variadic (jvmtiExtensionEvent); these two
 * pass (jvmtiEnv *, JNIEnv *, jthread), as GetExtensionEvents describes them. */
static void ext_event(jvmtiEnv *jvmti, va_list ap, bool mount)
{
	JNIEnv *jni = va_arg(ap, JNIEnv *);
	jthread vt = va_arg(ap, jthread);
	if (mount)
		queue_mount(jvmti, jni, vt, 0, NULL);
	else
		queue_unmount(jni, vt, 0);
}

static void JNICALL cb_vt_mount(jvmtiEnv *jvmti, ...)
{
	va_list ap;
	va_start(ap, jvmti);
	ext_event(jvmti, ap, true);
	va_end(ap);
}

static void JNICALL cb_vt_unmount(jvmtiEnv *jvmti, ...)
{
	va_list ap;
	va_start(ap, jvmti);
	ext_event(jvmti, ap, false);
	va_end(ap);
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

void vp_vthread__start(JavaVM *vm, const volatile bool *disabled)
{
	jvmtiEnv *jvmti = NULL;
	jvmtiCapabilities caps = { 0 };
	struct vt_callbacks cb = { 0 };
	jvmtiError e = JVMTI_ERROR_NONE;
	const char *what = "GetEnv(JVMTI 21)";

	if (vm)
		vt_vm = vm;
	if (disabled)
		vt_disabled = disabled;
	if (vt_wanted != 1 || vt_started || !vt_vm)
		return;
	vm = vt_vm;
	/* A JVM before JDK 21 has no virtual threads: nothing to record, nothing to say (the
	 * recorder asks for them with every --off-cpu). */
	if ((*vm)->GetEnv(vm, (void **)&jvmti, VT_JVMTI_VERSION_21) != JNI_OK || !jvmti)
		return;
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
		return;
	}
	vt_started = true;
}
