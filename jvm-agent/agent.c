/* libviprof-jvmti.so: records where the JVM puts compiled code, stubs and the
 * interpreter, and when (epochs), into <dir>/<pid>/codemap.vpm (maps/codemap_format.h).
 *
 * Where records come from. Compiled code: by default the agent thread walks HotSpot's
 * code heaps (walk.c on hotspot/codeheap.h) and diffs each walk against
 * the last, so HotSpot posts no per-method event; with jit=events, or on a JVM whose
 * layout hotspot/ does not know, the CompiledMethodLoad/Unload callbacks do it instead.
 * Stubs and the interpreter: DynamicCodeGenerated. Method* of interpreted frames:
 * ClassPrepare (METHOD_PTR). Epochs: GarbageCollectionFinish (gcs.c). Java thread names:
 * ThreadStart/End (threads.c). Allocation (alloc=) and lock (locks=) samples:
 * SampledObjectAlloc (alloc.c), and locks.c (monitor events and a wrapper of Unsafe.park).
 *
 * Who owns what: each file below keeps its state to itself and is asked through its
 * vp_<name>__ functions. This file: the sessions, the callbacks' dispatch, the agent
 * thread and the map's file. queue.c: the record queue and the names already queued.
 * loads.c: what a code load and a class's method names become in the queue and the
 * map. maps/codemap_writer.c: the encoders and the epoch decisions. gcs.c, threads.c,
 * alloc.c, locks.c, vthread.c, walk.c, stats.c: as named.
 *
 * Threads: JVMTI callbacks run on compiler threads, the GC thread, application threads
 * and whichever thread calls GenerateEvents. They only append finished records to a
 * preallocated, bounded queue under one raw monitor (the GC callback only publishes its
 * time in a lock-free ring), as the JVMTI spec demands; the agent's own Java thread
 * (RunAgentThread) walks the code heaps, swaps the queue out and has the writer place
 * the epochs and write the file.
 *
 * Sessions: each Agent_OnAttach after the first ends the current map and starts one in
 * the new directory, replaying live code (switch_session, on the agent thread). With
 * lock=FILE the session ends when the recorder lets go of its flock on FILE: the agent
 * then closes the map, turns its events off and idles until the next attach.
 *
 * The agent never takes the JVM down: on any failure it prints one line, disables
 * itself, and returns JNI_OK so the JVM keeps running without JIT names. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE      /* process_vm_readv */
#endif
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <dirent.h>
#include <dlfcn.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <jvmti.h>
#include <jvmticmlr.h>

#include "common/chunkfile.h"
#include "common/safefs.h"
#include "common/util.h"
#include "hotspot/codeheap.h"
#include "hotspot/memory.h"
#include "jvm-agent/stats.h"
#include "jvm-agent/alloc.h"
#include "jvm-agent/gcs.h"
#include "jvm-agent/loads.h"
#include "jvm-agent/mapfile.h"
#include "jvm-agent/queue.h"
#include "jvm-agent/locks.h"
#include "jvm-agent/names.h"
#include "jvm-agent/options.h"
#include "jvm-agent/threads.h"
#include "hotspot/vmstructs.h"
#include "jvm-agent/vmflags.h"
#include "jvm-agent/vthread.h"
#include "jvm-agent/walk.h"
#include "maps/codemap_format.h"
#include "maps/codemap_writer.h"

#define EXPORT __attribute__((visibility("default")))

/* Reads this process's memory through process_vm_readv: fails instead of faulting. */
static bool read_self(uint64_t addr, void *out, size_t len)
{
	return vp_hs_mem__read(&vp_hs_mem_self, addr, out, len) == 0;
}

/* HotSpot's VM structure tables, read once (hotspot/vmstructs.h); NULL when this JVM
 * has none. On the agent thread or in setup only. */
static const struct vp_hs_vm *hotspot_vm(void)
{
	static struct vp_hs_vm vm;
	static int state;   /* 0 not read, 1 read, -1 failed */

	if (!state) {
		char why[160];
		void *h = dlopen("libjvm.so", RTLD_LAZY | RTLD_NOLOAD);
		int rc = vp_hs_vm__read_self(&vm, h, why, sizeof(why));
		/* Tables not published yet (-EAGAIN): ask again next time. */
		state = rc == -EAGAIN ? 0 : rc ? -1 : 1;
		if (h)
			dlclose(h);
	}
	return state > 0 ? &vm : NULL;
}

struct agent {
	jvmtiEnv *jvmti;
	volatile bool disabled; /* callbacks queue nothing: idle between sessions, or failed */
	volatile bool failed;   /* for good: the agent thread is gone or never came */
	bool idle;              /* agent thread: no session (no file, events off) */
	bool attached;
	bool frame_pointers;

	/* Under the queue's lock (jvm-agent/queue.h): the agent thread's life. */
	bool stopping, thread_running, thread_done;

	/* Agent thread only (or the unloading thread once the agent thread is gone). */
	struct vp_cm_writer *w; /* the map: its epochs and encoders (maps/codemap_writer.h) */
	uint64_t last_flush;

	/* Method* records (interpreted frames): -1 unusable here, 0 not checked, 1 usable. */
	volatile int method_ptrs;
	bool classes_enumerated;
	bool threads_named;    /* this session has the names of the threads it found running */
	/* The channel of the attach in progress, for Agent_OnAttach to start its thread. */
	int new_chan;

	/* A new session (another attach), under lock: the attach thread asks (switch_want),
	 * the agent thread switches files and answers (switch_done, switch_err). */
	struct vp_agent_opts next;
	uint64_t switch_want, switch_done;
	int switch_err;
	/* The recorder's "end" over its channel, under lock: the channel thread asks
	 * (end_want), the agent thread looks at the lock at once and answers (end_done). */
	uint64_t end_want, end_done;
};

static struct agent agent = { .next = { .map_fd = -1, .lock_fd = -1, .chan_fd = -1 }, .new_chan = -1 };


static const char *jvmti_err(jvmtiError e)
{
	static char buf[64];
	char *name = NULL;
	if (agent.jvmti && (*agent.jvmti)->GetErrorName(agent.jvmti, e, &name) == JVMTI_ERROR_NONE && name) {
		snprintf(buf, sizeof(buf), "%s", name);
		(*agent.jvmti)->Deallocate(agent.jvmti, (unsigned char *)name);
	} else {
		snprintf(buf, sizeof(buf), "JVMTI error %d", (int)e);
	}
	return buf;
}

static void fail(const char *what, const char *why)
{
	fprintf(stderr, "viprof agent: %s failed: %s; JIT frames will not be named\n", what, why);
	agent.disabled = true;
	agent.failed = true;
}

static void JNICALL cb_compiled_load(jvmtiEnv *jvmti, jmethodID method, jint code_size,
				     const void *code_addr, jint map_length,
				     const jvmtiAddrLocationMap *map, const void *compile_info)
{
	struct st_mark m;
	if (agent.disabled || vp_stats__noop())
		return;
	vp_stats__begin(&m);
	if (vp_scan__checking())
		vp_scan__check(method, code_size, code_addr, compile_info);
	vp_loads__compiled(jvmti, method, code_size, code_addr, compile_info, now_ns(), VP_CM_LEVEL_UNKNOWN, 0);
	vp_stats__end(ST_LOAD, &m);
}

static void JNICALL cb_compiled_unload(jvmtiEnv *jvmti, jmethodID method, const void *code_addr)
{
	struct st_mark m;
	if (agent.disabled || vp_stats__noop())
		return;
	vp_stats__begin(&m);
	vp_queue__lock();
	struct vp_cm_method_unload *b = vp_queue__reserve(VP_CM_METHOD_UNLOAD, now_ns(), sizeof(*b));
	if (b) {
		b->code_start = (uint64_t)(uintptr_t)code_addr;
		b->method_id = (uint64_t)(uintptr_t)method;
	}
	vp_queue__unlock_notify();
	vp_stats__end(ST_UNLOAD, &m);
}

static void JNICALL cb_dynamic_code(jvmtiEnv *jvmti, const char *name, const void *address, jint length)
{
	struct st_mark m;
	if (agent.disabled || vp_stats__noop())
		return;
	vp_stats__begin(&m);
	size_t nl = strnlen(name ? name : "", 255);
	vp_queue__lock();
	struct vp_cm_code_blob *b = vp_queue__reserve(VP_CM_CODE_BLOB, now_ns(), sizeof(*b) + nl);
	if (b) {
		b->code_start = (uint64_t)(uintptr_t)address;
		b->code_size = (uint32_t)length;
		b->kind = (name && !strcmp(name, "Interpreter")) ? VP_BLOB_INTERPRETER : VP_BLOB_STUB;
		b->name_len = (uint16_t)nl;
		memcpy(b + 1, name, nl);
	}
	vp_queue__unlock_notify();
	vp_stats__end(ST_DYNAMIC, &m);
}

/* Runs inside the GC, on the VM thread, at a safepoint. It must not even enter our raw
 * monitor: a Java thread that holds it blocks for this very safepoint inside
 * RawMonitorNotifyAll/Exit, and the GC would then wait for it forever (seen on JDK 25).
 * So it only stores the time into a preallocated ring and publishes it; the writer
 * polls the ring at least once a second and places the epoch boundary by time. */
static void JNICALL cb_gc_finish(jvmtiEnv *jvmti)
{
	if (agent.disabled || vp_stats__noop())
		return;
	vp_stats__count(ST_GC);
	vp_gcs__finished(now_ns());
}

/* At the start of each GC, on the VM thread at a safepoint: the code heap is read before
 * the GC can free what no walk saw yet (vp_scan__gc_start: plain loads into preallocated
 * memory, no lock, no JVMTI call). */
static void JNICALL cb_gc_start(jvmtiEnv *jvmti)
{
	(void)jvmti;
	if (agent.disabled || vp_stats__noop())
		return;
	vp_scan__gc_start();
}

/* ---- the writer side (agent thread) ---- */


/* For each EPOCH_END: the events the queue dropped so far. */
static uint64_t dropped_events(void *ctx)
{
	(void)ctx;
	return vp_queue__dropped();
}

/* One queued record into the file (the writer places the epochs); a METHOD_PTR also
 * teaches the code-heap walk its Method*s and has its methods named. */
static int write_record(const struct vp_record *r)
{
	const void *body = vp_record_body(r);
	int err = vp_cm_writer__put(agent.w, r->type, r->time, body, vp_record_body_len(r));

	if (!err && r->type == VP_CM_METHOD_PTR && vp_scan__on()) {
		const struct vp_cm_method_ptrs *b = body;
		const struct vp_cm_method_ptr *p = (const struct vp_cm_method_ptr *)(b + 1);
		for (uint32_t i = 0; i < b->n && !err; i++)
			err = vp_scan__method_ptr(p[i].method_ptr, p[i].method_id,
					     (b->flags & VP_CM_PTRS_PREEXISTING) ? 0 : r->time);
	}
	if (!err && r->type == VP_CM_METHOD_PTR) {
		struct st_mark m;
		vp_stats__begin(&m);
		err = vp_loads__name_class(agent.jvmti, agent.w, r);
		vp_stats__end(ST_WRITER_NAMES, &m);
	}
	return err;
}


/* ---- Method* of each method, for the sampler's interpreted frames ---- */

/* In HotSpot a jmethodID points at a slot that holds the Method*. That is not part of
 * JVMTI's contract, so the first one is read through process_vm_readv, which fails
 * instead of faulting, and must look like a pointer; after that the slots are read
 * directly (they stay valid while their class is loaded, which GetClassMethods ensures). */
static int check_method_ptrs(jmethodID m)
{
	uint64_t v = 0;

	if (((uintptr_t)m & 7) || !read_self((uint64_t)(uintptr_t)m, &v, sizeof(v)) || v < 4096 || (v & 7)) {
		agent.method_ptrs = -1;
		fprintf(stderr, "viprof agent: this JVM's jmethodIDs do not lead to Method*; interpreted frames "
				"will show as [interpreted]\n");
		return -1;
	}
	agent.method_ptrs = 1;
	return 0;
}

/* Queues one METHOD_PTR record for a prepared class; names follow on the agent thread
 * (METHOD_NAME records when a method id is first seen). Never blocks: a full queue
 * drops the record (counted). */
static void queue_class_ptrs(jvmtiEnv *jvmti, jclass klass, uint64_t t, uint32_t flags)
{
	jint n = 0;
	jmethodID *ms = NULL;

	if (agent.disabled || agent.method_ptrs < 0 || vp_stats__noop())
		return;
	if ((*jvmti)->GetClassMethods(jvmti, klass, &n, &ms) != JVMTI_ERROR_NONE || n <= 0 || !ms)
		goto cleanup;
	if (!agent.method_ptrs && check_method_ptrs(ms[0]))
		goto cleanup;
	vp_queue__lock();
	struct vp_cm_method_ptrs *b = vp_queue__reserve(VP_CM_METHOD_PTR, t,
						 sizeof(*b) + (size_t)n * sizeof(struct vp_cm_method_ptr));
	if (b) {
		struct vp_cm_method_ptr *p = (struct vp_cm_method_ptr *)(b + 1);

		b->n = (uint32_t)n;
		b->flags = flags;
		for (jint i = 0; i < n; i++) {
			p[i].method_id = (uint64_t)(uintptr_t)ms[i];
			p[i].method_ptr = ms[i] ? *(volatile uint64_t *)ms[i] : 0;
		}
	}
	vp_queue__unlock_notify();
cleanup:
	(*jvmti)->Deallocate(jvmti, (unsigned char *)ms);
}

static void JNICALL cb_class_prepare(jvmtiEnv *jvmti, JNIEnv *jni, jthread thread, jclass klass)
{
	struct st_mark m;
	if (vp_stats__noop())
		return;
	vp_stats__begin(&m);
	queue_class_ptrs(jvmti, klass, now_ns(), 0);
	vp_stats__end(ST_PREPARE, &m);
}

/* Classes loaded before the agent could see them: their pointers were valid before the
 * record's time as well. Runs on the agent thread. */
static void enumerate_classes(jvmtiEnv *jvmti, JNIEnv *jni)
{
	jint n = 0;
	jclass *cls = NULL;

	agent.classes_enumerated = true;
	if ((*jvmti)->GetLoadedClasses(jvmti, &n, &cls) != JVMTI_ERROR_NONE)
		return;
	vp_queue__replaying(true);   /* our own thread: it may wait for queue room */
	for (jint i = 0; i < n && !agent.disabled; i++) {
		jint st = 0;

		if ((*jvmti)->GetClassStatus(jvmti, cls[i], &st) == JVMTI_ERROR_NONE &&
		    (st & JVMTI_CLASS_STATUS_PREPARED) && !(st & (JVMTI_CLASS_STATUS_ARRAY | JVMTI_CLASS_STATUS_PRIMITIVE)))
			queue_class_ptrs(jvmti, cls[i], now_ns(), VP_CM_PTRS_PREEXISTING);
		/* This thread never returns to Java: its local references would pin every
		 * class forever and keep them from unloading. */
		(*jni)->DeleteLocalRef(jni, cls[i]);
	}
	vp_queue__replaying(false);
	(*jvmti)->Deallocate(jvmti, (unsigned char *)cls);
}

/* Writes the queue half the callbacks no longer fill, with GC boundaries placed by time. */
static int drain(const uint8_t *buf, size_t len)
{
	struct st_mark m;
	int err;
	vp_stats__begin(&m);
	for (size_t off = 0; off < len;) {
		const struct vp_record *r = (const struct vp_record *)(buf + off);
		if ((err = vp_gcs__write(agent.w, r->time)) || (err = write_record(r)))
			return err;
		off += r->size;
	}
	if (len)
		vp_stats__end(ST_WRITER, &m);
	/* GCs after the last record wait for the next one: records still on their way
	 * into the other queue half may predate them. */
	uint64_t t = now_ns();
	if (t - agent.last_flush >= 1000000000ull) {
		agent.last_flush = t;
		vp_stats__begin(&m);
		err = vp_cm_writer__flush(agent.w);
		vp_stats__end(ST_FLUSH, &m);
		return err;
	}
	return 0;
}

/* Writes what is queued now, if it is at least at_least bytes; on the agent thread (or
 * the one that replaced it), which cannot wait for the queue to make room. */
static void write_queue(size_t at_least)
{
	const uint8_t *buf;
	vp_queue__lock();
	size_t n = vp_queue__len() >= at_least ? vp_queue__take(&buf) : 0;
	vp_queue__unlock();
	if (n && agent.w)
		drain(buf, n);
}

/* The code-heap walk (walk.c) runs only while a session's map is open: a walk, whether
 * one is due (the classes loaded before the agent are enumerated first, so that every
 * Method* a walk can meet is known), and how long the agent thread may wait for it. */
static void walk_code(jvmtiEnv *jvmti)
{
	if (!agent.idle && agent.w)
		vp_scan__walk(jvmti);
}

static bool walk_due(void)
{
	return !agent.idle && agent.w && agent.classes_enumerated && vp_scan__due();
}

static jlong walk_wait_ms(void)
{
	return !agent.idle && agent.w ? vp_scan__wait_ms() : 1000;
}

static void finish_file(void)
{
	if (!agent.w)
		return;
	uint64_t n[16] = { 0 }, bytes[16] = { 0 };
	vp_cm_writer__counts(agent.w, n, bytes);
	vp_stats__records(n, bytes);
	vp_stats__print();
	vp_scan__print();
	int err = vp_cm_writer__close(agent.w, now_ns());
	agent.w = NULL;
	if (err)
		fprintf(stderr, "viprof agent: closing %s failed: %s; the last JIT names may be missing\n",
			vp_mapfile__path(), strerror(-err));
}


/* SampledObjectAlloc, on the allocating Java thread (alloc.c). */
static void JNICALL cb_sampled_alloc(jvmtiEnv *jvmti, JNIEnv *jni, jthread thread, jobject object,
				     jclass klass, jlong size)
{
	(void)jni, (void)thread, (void)object;
	if (!agent.disabled)
		vp_alloc__sampled(jvmti, klass, size);
}

/* ---- contended locks (record -e lock): locks.c ---- */

/* A session's alloc= and locks= on a JVM that has the agent already (a new attach or
 * the recorder's channel), on a thread that may call JNI (vp_locks__live): called before
 * the switch (starting=false) it turns off what the new session does not record, so that
 * none of it lands in the new map; after the switch (starting=true) it turns on or
 * retunes what the new session asks for, so that none of it lands in the old one. */
static void profiles_apply(jvmtiEnv *jvmti, JNIEnv *jni, uint64_t alloc, int64_t locks, bool starting)
{
	vp_alloc__apply(jvmti, alloc, starting);
	vp_locks__apply(jvmti, jni, locks, starting);
}

/* ---- sessions ---- */

static int open_file(void);
static int write_meta(void);
static void use_options(const struct vp_agent_opts *o);

/* The events a session needs; VMInit and VMDeath stay on between sessions. */
static const jvmtiEvent session_events[] = {
	JVMTI_EVENT_COMPILED_METHOD_LOAD, JVMTI_EVENT_COMPILED_METHOD_UNLOAD,
	JVMTI_EVENT_DYNAMIC_CODE_GENERATED, JVMTI_EVENT_GARBAGE_COLLECTION_FINISH,
	JVMTI_EVENT_CLASS_PREPARE, JVMTI_EVENT_THREAD_START, JVMTI_EVENT_THREAD_END,
	JVMTI_EVENT_GARBAGE_COLLECTION_START,
};

static jvmtiError set_session_events(jvmtiEventMode mode)
{
	jvmtiError first = JVMTI_ERROR_NONE;
	for (size_t i = 0; i < sizeof(session_events) / sizeof(session_events[0]); i++) {
		if (vp_scan__on() && (session_events[i] == JVMTI_EVENT_COMPILED_METHOD_LOAD ||
			      session_events[i] == JVMTI_EVENT_COMPILED_METHOD_UNLOAD))
			continue;
		if (session_events[i] == JVMTI_EVENT_GARBAGE_COLLECTION_START && !vp_scan__at_gc())
			continue;
		jvmtiError e = (*agent.jvmti)->SetEventNotificationMode(agent.jvmti, mode, session_events[i], NULL);
		if (e != JVMTI_ERROR_NONE && first == JVMTI_ERROR_NONE)
			first = e;
	}
	return first;
}

/* The session ended: no more events, what is queued written, the file closed. Until
 * the next attach the agent costs nothing but this thread's wait. */
static void go_idle(void)
{
	walk_code(agent.jvmti);   /* what was compiled since the last walk */
	agent.disabled = true;
	set_session_events(JVMTI_DISABLE);
	write_queue(0);
	finish_file();
	vp_mapfile__unwatch();
	agent.idle = true;
}

/* Another attach: the current session (if any) ends here, cleanly, and a new map begins
 * in the new directory, as a late attach (the attaching thread replays live code once
 * this returns). Runs on the agent thread; 0 or -errno (the agent then stays idle). */
static int switch_session(void)
{
	bool was_idle = agent.idle;

	if (!was_idle)
		walk_code(agent.jvmti);
	write_queue(0);
	finish_file();

	vp_queue__lock();
	use_options(&agent.next);
	agent.next.map_fd = agent.next.lock_fd = -1;   /* mapfile.c owns them now */
	/* Every name is written again into the new file; what an idle agent's callbacks
	 * queued while it turned idle belongs to no session. */
	vp_queue__new_session(was_idle);
	vp_gcs__skip();
	vp_queue__unlock();
	agent.classes_enumerated = false;
	agent.threads_named = false;
	agent.attached = true;
	vp_scan__reset();
	vp_mapfile__watch();
	int err = open_file();
	if (!err && (err = write_meta())) {
		vp_cm_writer__close(agent.w, now_ns());
		agent.w = NULL;
	}
	if (err) {
		agent.disabled = true;
		agent.idle = true;
		set_session_events(JVMTI_DISABLE);
		return err;
	}
	agent.last_flush = now_ns();
	agent.idle = false;
	agent.disabled = false;
	jvmtiError e = set_session_events(JVMTI_ENABLE);
	if (e != JVMTI_ERROR_NONE)
		fprintf(stderr, "viprof agent: SetEventNotificationMode failed: %s; some JIT code may be unnamed\n",
			jvmti_err(e));
	return 0;
}

static void JNICALL agent_thread(jvmtiEnv *jvmti, JNIEnv *jni, void *arg)
{
	struct st_mark all;

	vp_stats__begin(&all);
	vp_loads__agent_thread(jni);
	for (;;) {
		const uint8_t *buf = NULL;
		vp_queue__lock();
		/* Idle: nothing to do until the next session (or the JVM's end). */
		while (agent.idle && !agent.stopping && agent.switch_want == agent.switch_done &&
		       agent.end_want == agent.end_done)
			vp_queue__wait(0);
		if (vp_queue__len() == 0 && !agent.stopping && agent.switch_want == agent.switch_done &&
		    agent.end_want == agent.end_done && !walk_due())
			vp_queue__wait(walk_wait_ms());
		size_t n = agent.idle ? 0 : vp_queue__take(&buf);
		bool stop = agent.stopping, sw = agent.switch_want != agent.switch_done;
		uint64_t end = agent.end_want != agent.end_done ? agent.end_want : 0;
		/* Room was made: wake a replaying thread that waits for it. */
		vp_queue__notify_all();
		vp_queue__unlock();

		/* With nothing new, drain still flushes what was written over a second ago: a
		 * JVM that compiles nothing more (a steady service) would otherwise keep its
		 * last records (the class enumeration, thread names) in memory until the
		 * session ends, and lose them if it is killed first. */
		int err = n || (agent.w && !agent.idle) ? drain(buf, n) : 0;
		if (err) {
			fail("writing the code map", strerror(-err));
			vp_queue__lock();
			const uint8_t *lost;
			vp_queue__take(&lost);   /* what the failed writer cannot write */
			vp_queue__unlock();
		}
		if (stop || agent.failed)
			break;
		if (sw) {
			int serr = switch_session();
			vp_queue__lock();
			agent.switch_err = serr;
			agent.switch_done = agent.switch_want;
			vp_queue__notify_all();
			vp_queue__unlock();
			continue;
		}
		if (end) {
			/* Only a session whose lock is free ends: a later recorder's goes on. */
			if (!agent.idle && vp_mapfile__ended(true))
				go_idle();
			vp_queue__lock();
			agent.end_done = end;
			vp_queue__notify_all();
			vp_queue__unlock();
			continue;
		}
		if (!agent.idle && vp_mapfile__ended(false)) {
			go_idle();
			continue;
		}
		/* A walk of the code heaps needs the Method* of every class that can have code:
		 * only once the enumeration below has been written. */
		if (walk_due())
			walk_code(jvmti);
		/* Classes prepared before ClassPrepare was on (or before an attach), after the
		 * first batch of code records so that those reach the file first. */
		if (!agent.idle && !agent.classes_enumerated) {
			struct st_mark m;
			vp_stats__begin(&m);
			enumerate_classes(jvmti, jni);
			vp_stats__end(ST_ENUMERATE, &m);
		}
		if (!agent.idle && !agent.threads_named) {
			struct st_mark m;
			vp_stats__begin(&m);
			agent.threads_named = true;
			vp_threads__name_running(jvmti, jni, hotspot_vm());
			vp_stats__end(ST_THREAD_NAMES, &m);
		}
	}
	vp_stats__end(ST_AGENT_THREAD, &all);
	vp_queue__lock();
	/* Anything queued after the last take is written by whoever waits for us. */
	agent.thread_done = true;
	agent.thread_running = false;
	vp_queue__writer(false);
	vp_queue__notify_all();
	vp_queue__unlock();
}

static int start_thread(JNIEnv *jni)
{
	jclass cls = (*jni)->FindClass(jni, "java/lang/Thread");
	if (!cls)
		goto jni_fail;
	jmethodID init = (*jni)->GetMethodID(jni, cls, "<init>", "(Ljava/lang/String;)V");
	jstring name = (*jni)->NewStringUTF(jni, "viprof-jvmti");
	if (!init || !name)
		goto jni_fail;
	jthread th = (*jni)->NewObject(jni, cls, init, name);
	if (!th)
		goto jni_fail;
	agent.thread_running = true;
	vp_queue__writer(!agent.stopping);
	jvmtiError e = (*agent.jvmti)->RunAgentThread(agent.jvmti, th, agent_thread, NULL, JVMTI_THREAD_NORM_PRIORITY);
	if (e != JVMTI_ERROR_NONE) {
		agent.thread_running = false;
		vp_queue__writer(false);
		fail("RunAgentThread", jvmti_err(e));
		return -EINVAL;
	}
	return 0;
jni_fail:
	if ((*jni)->ExceptionCheck(jni))
		(*jni)->ExceptionClear(jni);
	fail("creating the agent thread", "JNI could not create a java.lang.Thread");
	return -EINVAL;
}

/* Stops the agent thread (waiting at most ~2 s), then writes what is left and closes. */
static void shutdown_agent(void)
{
	if (!agent.jvmti || !vp_queue__ready())
		return;
	vp_queue__lock();
	agent.stopping = true;
	vp_queue__writer(false);
	vp_queue__notify_all();
	for (int i = 0; i < 20 && agent.thread_running; i++)
		vp_queue__wait(100);
	bool can_write = !agent.thread_running;
	vp_queue__unlock();
	/* The agent thread is gone: this thread may walk in its place, once. */
	if (can_write && agent.w && !agent.disabled && agent.classes_enumerated)
		walk_code(agent.jvmti);
	vp_queue__lock();
	const uint8_t *buf = NULL;
	size_t n = can_write ? vp_queue__take(&buf) : 0;
	vp_queue__unlock();
	if (!can_write)
		return; /* never race the writer; the file stays readable up to its last chunk */
	if (agent.w && !agent.disabled && n)
		drain(buf, n);
	finish_file();
	agent.disabled = true;
	vp_scan__free();
}

static void JNICALL cb_vm_init(jvmtiEnv *jvmti, JNIEnv *jni, jthread thread)
{
	if (!agent.disabled)
		start_thread(jni);
	vp_locks__live(jvmti, jni);
}

static void JNICALL cb_vm_death(jvmtiEnv *jvmti, JNIEnv *jni)
{
	shutdown_agent();
}

/* ---- full Java thread names (THREAD_NAME) ---- */

/* ThreadStart and ThreadEnd run on the thread itself (threads.c names it). */
static void JNICALL cb_thread_start(jvmtiEnv *jvmti, JNIEnv *jni, jthread thread)
{
	if (!agent.disabled)
		vp_threads__started(jvmti, thread);
}

static void JNICALL cb_thread_end(jvmtiEnv *jvmti, JNIEnv *jni, jthread thread)
{
	if (!agent.disabled)
		vp_threads__ended(jvmti, thread);
}

/* ---- setup ---- */


static void use_options(const struct vp_agent_opts *o)
{
	vp_mapfile__use(o->dir, o->lock, o->default_dir, o->map_fd, o->lock_fd);
}

/* The session's map, a new file where vp_mapfile__use said (maps/codemap_writer.h). */
static int open_file(void)
{
	int err = vp_mapfile__open(&agent.w);

	if (!err)
		vp_cm_writer__on_dropped(agent.w, dropped_events, NULL);
	return err;
}

static int write_meta(void)
{
	char vm[256] = "";
	char *name = NULL, *ver = NULL;
	(*agent.jvmti)->GetSystemProperty(agent.jvmti, "java.vm.name", &name);
	(*agent.jvmti)->GetSystemProperty(agent.jvmti, "java.vm.version", &ver);
	snprintf(vm, sizeof(vm), "%s %s", name ? name : "?", ver ? ver : "?");
	(*agent.jvmti)->Deallocate(agent.jvmti, (unsigned char *)name);
	(*agent.jvmti)->Deallocate(agent.jvmti, (unsigned char *)ver);
	uint32_t flags = (agent.frame_pointers ? VP_CM_META_FRAME_POINTERS : 0) |
			 (agent.attached ? VP_CM_META_LATE_ATTACH : 0) | (vp_scan__on() ? VP_CM_META_CODE_WALK : 0);
	return vp_cm_writer__start(agent.w, now_ns(), (uint32_t)getpid(), flags, vm);
}

static int setup(JavaVM *vm, const char *options, bool attach)
{
	jvmtiError e;
	int err;
	if (agent.jvmti) {  /* -agentpath twice: the first one serves */
		fprintf(stderr, "viprof agent: already loaded in this JVM (writing %s); ignoring the second load\n", vp_mapfile__path());
		return 0;
	}
	agent.attached = attach;
	if ((*vm)->GetEnv(vm, (void **)&agent.jvmti, JVMTI_VERSION_1_2) != JNI_OK) {
		agent.jvmti = NULL;
		fail("GetEnv(JVMTI 1.2)", "this JVM offers no JVMTI 1.2");
		return -ENOTSUP;
	}
	struct vp_agent_opts so;
	if ((err = vp_agent_opts__parse(options, &so))) {
		fail("parsing the options", err == -EINVAL ? "expected dir=<directory>[,lock=<file>]" : strerror(-err));
		return err;
	}
	use_options(&so);
	vp_alloc__set(so.alloc);
	agent.new_chan = so.chan_fd;
	vp_mapfile__watch();
	agent.frame_pointers = vp_agent_opts__frame_pointers();
	vp_scan__choose_source(agent.jvmti, hotspot_vm(), write_queue);
	vp_gcs__init(hotspot_vm());
	const char *what = NULL;
	if ((err = vp_queue__init(agent.jvmti, &what))) {
		fail(what, strerror(-err));
		return err;
	}
	if ((err = open_file())) {
		char why[2 * PATH_MAX + 320];
		snprintf(why, sizeof(why), "%s (in %s: it must be this user's or root's and not writable by others, "
			 "with no symlink on the way that a user other than root could have made, and %s/%d this "
			 "user's own; pass dir=<a directory of yours>)", strerror(-err), vp_mapfile__dir(), vp_mapfile__dir(), (int)getpid());
		fail("creating the code map", why);
		return err;
	}
	if ((err = write_meta())) {
		fail("writing the code map header", strerror(-err));
		return err;
	}
	agent.last_flush = now_ns();

	jvmtiCapabilities caps = { 0 };
	caps.can_generate_compiled_method_load_events = 1;
	caps.can_generate_garbage_collection_events = 1;
	if ((e = (*agent.jvmti)->AddCapabilities(agent.jvmti, &caps)) != JVMTI_ERROR_NONE) {
		fail("AddCapabilities(compiled method load, garbage collection)", jvmti_err(e));
		return -EINVAL;
	}
	/* Source files and line numbers only improve the output; go on without them. */
	jvmtiCapabilities opt = { 0 };
	opt.can_get_source_file_name = 1;
	opt.can_get_line_numbers = 1;
	(*agent.jvmti)->AddCapabilities(agent.jvmti, &opt);

	jvmtiEventCallbacks cb = { 0 };
	cb.CompiledMethodLoad = cb_compiled_load;
	cb.CompiledMethodUnload = cb_compiled_unload;
	cb.DynamicCodeGenerated = cb_dynamic_code;
	cb.GarbageCollectionFinish = cb_gc_finish;
	cb.GarbageCollectionStart = cb_gc_start;
	cb.VMInit = cb_vm_init;
	cb.VMDeath = cb_vm_death;
	cb.ClassPrepare = cb_class_prepare;
	cb.ThreadStart = cb_thread_start;
	cb.ThreadEnd = cb_thread_end;
	cb.SampledObjectAlloc = cb_sampled_alloc;
	vp_locks__callbacks(&cb);
	if ((e = (*agent.jvmti)->SetEventCallbacks(agent.jvmti, &cb, sizeof(cb))) != JVMTI_ERROR_NONE) {
		fail("SetEventCallbacks", jvmti_err(e));
		return -EINVAL;
	}
	static const jvmtiEvent events[] = {
		JVMTI_EVENT_COMPILED_METHOD_LOAD, JVMTI_EVENT_COMPILED_METHOD_UNLOAD,
		JVMTI_EVENT_DYNAMIC_CODE_GENERATED, JVMTI_EVENT_GARBAGE_COLLECTION_FINISH,
		JVMTI_EVENT_VM_INIT, JVMTI_EVENT_VM_DEATH, JVMTI_EVENT_CLASS_PREPARE,
		JVMTI_EVENT_THREAD_START, JVMTI_EVENT_THREAD_END, JVMTI_EVENT_GARBAGE_COLLECTION_START,
	};
	for (size_t i = 0; i < sizeof(events) / sizeof(events[0]); i++) {
		if (attach && events[i] == JVMTI_EVENT_VM_INIT)
			continue;
		if (events[i] == JVMTI_EVENT_GARBAGE_COLLECTION_START && !vp_scan__at_gc())
			continue;
		if (vp_scan__on() && (events[i] == JVMTI_EVENT_COMPILED_METHOD_LOAD || events[i] == JVMTI_EVENT_COMPILED_METHOD_UNLOAD))
			continue;
		e = (*agent.jvmti)->SetEventNotificationMode(agent.jvmti, JVMTI_ENABLE, events[i], NULL);
		if (e != JVMTI_ERROR_NONE) {
			fail("SetEventNotificationMode", jvmti_err(e));
			return -EINVAL;
		}
	}
	vp_alloc__start(agent.jvmti);
	vp_locks__start(&(struct vp_locks_host){ .jvmti = agent.jvmti, .now_ns = now_ns, .lock = vp_queue__lock,
					  .unlock_notify = vp_queue__unlock_notify, .q_reserve = vp_queue__reserve,
					  .disabled = &agent.disabled, .verbose = vp_stats__on_flag() }, so.locks);
	vp_vthread__start(vm, &agent.disabled);
	return 0;
}

/* Stops the events after a failure in setup so that nothing reaches a half-made agent. */
static void disable_events(void)
{
	agent.disabled = true;
	agent.failed = true;
	if (agent.jvmti) {
		jvmtiEventCallbacks cb = { 0 };
		(*agent.jvmti)->SetEventCallbacks(agent.jvmti, &cb, sizeof(cb));
	}
	if (agent.w) {
		vp_cm_writer__close(agent.w, now_ns());
		agent.w = NULL;
	}
}

EXPORT JNIEXPORT jint JNICALL Agent_OnLoad(JavaVM *vm, char *options, void *reserved)
{
	if (setup(vm, options, false))
		disable_events();
	return JNI_OK; /* a failed agent must not stop the JVM from starting */
}

static int switch_to(struct vp_agent_opts *so);

/* A second attach to a JVM that has the agent: the agent thread ends the current
 * session's map (if any) and opens the new one; then this thread replays. */
static int new_session(JavaVM *vm, const char *options)
{
	struct vp_agent_opts so;
	int err;

	if (agent.failed) {
		fprintf(stderr, "viprof agent: loading again failed: the agent disabled itself earlier in this JVM; "
			"restart the JVM to profile its JIT code\n");
		return -EALREADY;
	}
	if ((err = vp_agent_opts__parse(options, &so))) {
		fprintf(stderr, "viprof agent: loading again failed: %s; expected dir=<directory>[,lock=<file>]\n",
			strerror(-err));
		return err;
	}
	agent.new_chan = so.chan_fd;
	JNIEnv *jni = NULL;
	if ((*vm)->GetEnv(vm, (void **)&jni, JNI_VERSION_1_6) != JNI_OK)
		jni = NULL;
	if (jni)
		profiles_apply(agent.jvmti, jni, so.alloc, so.locks, false);
	if ((err = switch_to(&so)))
		return err;
	if (jni)
		profiles_apply(agent.jvmti, jni, so.alloc, so.locks, true);
	return 0;
}

/* Hands so (its descriptors with it) to the agent thread for a new session and waits
 * until it switched. 0 or -errno. */
static int switch_to(struct vp_agent_opts *so_in)
{
	struct vp_agent_opts so = *so_in;
	int err;

	vp_queue__lock();
	if (!agent.thread_running) {
		vp_queue__unlock();
		if (so.map_fd >= 0)
			close(so.map_fd);
		if (so.lock_fd >= 0)
			close(so.lock_fd);
		fprintf(stderr, "viprof agent: loading again failed: the agent's thread is not running (the JVM is "
			"starting or ending); attach again later\n");
		return -ESRCH;
	}
	/* A switch asked for before and not yet taken: its descriptors go unused. */
	if (agent.next.map_fd >= 0)
		close(agent.next.map_fd);
	if (agent.next.lock_fd >= 0)
		close(agent.next.lock_fd);
	agent.next = so;
	uint64_t want = ++agent.switch_want;
	vp_queue__notify_all();
	/* Closing the old map writes what its queue holds: seconds at worst. */
	for (int i = 0; i < 300 && agent.switch_done < want && agent.thread_running; i++)
		vp_queue__wait(100);
	err = agent.switch_done >= want ? agent.switch_err : -ETIMEDOUT;
	vp_queue__unlock();
	if (err)
		fprintf(stderr, "viprof agent: starting a new code map in %s failed: %s (it must be this user's or "
			"root's and not writable by others); JIT frames of this session will not be named\n", so.dir,
			strerror(-err));
	return err;
}

/* The recorder of this channel let go of its lock and asks for its map's end now,
 * rather than at the agent's next look at the lock (up to 1.5 s later: a JVM killed as
 * the recording returns lost that much of its waits and allocations). Waits for the
 * agent thread's answer, 5 s at most. 0 or -errno. */
static int end_now(void)
{
	vp_queue__lock();
	if (!agent.thread_running) {
		vp_queue__unlock();
		return -ESRCH;
	}
	uint64_t want = ++agent.end_want;
	vp_queue__notify_all();
	for (int i = 0; i < 50 && agent.end_done < want && agent.thread_running; i++)
		vp_queue__wait(100);
	int err = agent.end_done >= want ? 0 : -ETIMEDOUT;
	vp_queue__unlock();
	return err;
}

/* Replays what was compiled and generated before the session began. The calling thread
 * (the attach listener, not application code) may wait for queue room. */
static void replay(void)
{
	vp_queue__replaying(true);
	jvmtiError e = (*agent.jvmti)->GenerateEvents(agent.jvmti, JVMTI_EVENT_DYNAMIC_CODE_GENERATED);
	/* A walk finds the compiled code by itself (its first one names all that is live). */
	if (e == JVMTI_ERROR_NONE && !vp_scan__on())
		e = (*agent.jvmti)->GenerateEvents(agent.jvmti, JVMTI_EVENT_COMPILED_METHOD_LOAD);
	vp_queue__replaying(false);
	if (e != JVMTI_ERROR_NONE)
		fprintf(stderr, "viprof agent: GenerateEvents failed: %s; code compiled before the attach will not be named\n",
			jvmti_err(e));
}

/* The recorder's channel (fds=): each message is a next session, "dir=<path>" with the
 * session's jit/<pid> and lock file as descriptors, answered with one byte (0: the new
 * map is open and the live code replayed) once done, or "end" (the recorder let go of
 * its lock: the map ends now, answered once it is closed); the recorder then needs no
 * attach, so the JVM sees no attach listener traffic at all. Blocks in recvmsg between
 * sessions (no wakeups); ends when the recorder closes the channel or goes away. A JVMTI
 * agent thread, so that it may replay. */
static void JNICALL channel_thread(jvmtiEnv *jvmti, JNIEnv *jni, void *arg)
{
	int fd = (int)(intptr_t)arg;
	struct timeval none = { 0 };

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof(none));
	for (;;) {
		char payload[PATH_MAX + 8];
		union {
			struct cmsghdr h;
			char buf[CMSG_SPACE(2 * sizeof(int))];
		} cm;
		struct iovec iov = { .iov_base = payload, .iov_len = sizeof(payload) - 1 };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf, .msg_controllen = sizeof(cm.buf) };
		int got[2] = { -1, -1 }, ngot = 0;
		struct stat st;
		ssize_t n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		payload[n] = '\0';
		if (!strcmp(payload, "end")) {   /* no descriptors with it; any sent are closed below */
			char ack = end_now() ? 1 : 0;
			for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
				if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
					for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
						int x;
						memcpy(&x, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
						close(x);
					}
			if (send(fd, &ack, 1, MSG_NOSIGNAL) != 1)
				break;
			continue;
		}
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
			size_t k = c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS ?
				   (c->cmsg_len - CMSG_LEN(0)) / sizeof(int) : 0;
			for (size_t i = 0; i < k; i++) {
				int x;
				memcpy(&x, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
				if (ngot < 2)
					got[ngot++] = x;
				else
					close(x);
			}
		}
		struct vp_agent_opts so;
		int err = ngot == 2 && strncmp(payload, "dir=", 4) == 0 && vp_agent_opts__parse(payload, &so) == 0 ? 0 : -EPROTO;
		if (!err && (fstat(got[0], &st) || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 0022) ||
			     fstat(got[1], &st) || !S_ISREG(st.st_mode)))
			err = -EACCES;
		if (!err) {
			so.map_fd = got[0];
			so.lock_fd = got[1];
			got[0] = got[1] = -1;
			if (!agent.failed)
				profiles_apply(jvmti, jni, so.alloc, so.locks, false);
			err = agent.failed ? -EALREADY : switch_to(&so);
			if (!err) {
				profiles_apply(jvmti, jni, so.alloc, so.locks, true);
				replay();
			}
		}
		for (int i = 0; i < 2; i++)
			if (got[i] >= 0)
				close(got[i]);
		char ack = err ? 1 : 0;
		if (send(fd, &ack, 1, MSG_NOSIGNAL) != 1)
			break;
	}
	close(fd);
}

/* Starts channel_thread on fd (taken); without a thread the channel is closed, and
 * the recorder attaches again next time. */
static void start_channel(JavaVM *vm, int fd)
{
	JNIEnv *jni = NULL;
	jclass cls;
	jmethodID init;
	jstring name;
	jthread th;

	if (fd < 0)
		return;
	if ((*vm)->GetEnv(vm, (void **)&jni, JNI_VERSION_1_6) != JNI_OK || !(cls = (*jni)->FindClass(jni, "java/lang/Thread")) ||
	    !(init = (*jni)->GetMethodID(jni, cls, "<init>", "(Ljava/lang/String;)V")) ||
	    !(name = (*jni)->NewStringUTF(jni, "viprof-channel")) || !(th = (*jni)->NewObject(jni, cls, init, name)) ||
	    (*agent.jvmti)->RunAgentThread(agent.jvmti, th, channel_thread, (void *)(intptr_t)fd, JVMTI_THREAD_MIN_PRIORITY) !=
		    JVMTI_ERROR_NONE) {
		if (jni && (*jni)->ExceptionCheck(jni))
			(*jni)->ExceptionClear(jni);
		close(fd);
	}
}

EXPORT JNIEXPORT jint JNICALL Agent_OnAttach(JavaVM *vm, char *options, void *reserved)
{
	if (agent.jvmti) {
		agent.new_chan = -1;
		if (new_session(vm, options)) {
			if (agent.new_chan >= 0)
				close(agent.new_chan);
			agent.new_chan = -1;
			return JNI_ERR;
		}
		replay();
		start_channel(vm, agent.new_chan);
		agent.new_chan = -1;
		return JNI_OK;
	}
	if (setup(vm, options, true)) {
		disable_events();
		if (agent.new_chan >= 0)
			close(agent.new_chan);
		agent.new_chan = -1;
		return JNI_ERR; /* tells the attaching tool that it did not work */
	}
	JNIEnv *jni = NULL;
	if ((*vm)->GetEnv(vm, (void **)&jni, JNI_VERSION_1_6) != JNI_OK || start_thread(jni)) {
		if (!agent.disabled)
			fail("GetEnv(JNI)", "no JNI environment on the attach thread");
		disable_events();
		if (agent.new_chan >= 0)
			close(agent.new_chan);
		agent.new_chan = -1;
		return JNI_ERR;
	}
	vp_locks__live(agent.jvmti, jni);   /* locks= on attach: java.util.concurrent's parks too */
	replay();
	start_channel(vm, agent.new_chan);
	agent.new_chan = -1;
	return JNI_OK;
}

EXPORT JNIEXPORT void JNICALL Agent_OnUnload(JavaVM *vm)
{
	if (!agent.disabled)
		shutdown_agent();
}
