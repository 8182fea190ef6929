/* libviprof-jvmti.so: records where the JVM puts compiled code, stubs and the
 * interpreter, and when (epochs), into <dir>/<pid>/codemap.vpm (maps/codemap_format.h).
 *
 * Threads: JVMTI callbacks run on compiler threads, the GC thread and whichever thread
 * calls GenerateEvents. They only append finished records to a preallocated, bounded
 * queue under one raw monitor; the agent's own Java thread (RunAgentThread) swaps the
 * queue out, decides the epochs and writes the file. The GC callback touches nothing but
 * the raw monitor and the preallocated queue, as the JVMTI spec demands there.
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
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
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
#include "jvm-agent/names.h"
#include "jvm-agent/vmstructs.h"
#include "maps/codemap_format.h"

#define EXPORT __attribute__((visibility("default")))

/* Each of the two queue halves; callbacks fill one while the agent thread writes the
 * other. Only touched pages cost memory. */
#define QUEUE_BYTES (8u << 20)
#define NAME_MAX_LEN 1024
#define MAX_LINES 2048
#define SEEN_SLOTS (1u << 18) /* method ids already named; open addressing, no growth */

/* GC finish times, published lock-free by the GC callback (see cb_gc_finish). */
#define GC_RING 64

struct interval {
	uint64_t start, end;
};

/* A sorted array of disjoint [start,end) ranges; only the agent thread uses it. */
struct ranges {
	struct interval *v;
	size_t n, cap;
};

/* Where one session's maps go: dir=, and lock= when a recorder holds that file locked
 * for as long as its session lasts (the agent stops writing when the lock is free). */
struct session_opts {
	char dir[PATH_MAX];
	char lock[PATH_MAX];
	bool default_dir;      /* no dir= option: the per-user default under /tmp */
};

static struct agent {
	jvmtiEnv *jvmti;
	jrawMonitorID lock;
	volatile bool disabled; /* callbacks queue nothing: idle between sessions, or failed */
	volatile bool failed;   /* for good: the agent thread is gone or never came */
	bool idle;              /* agent thread: no session (no file, events off) */
	bool attached;
	bool frame_pointers;
	char dir[PATH_MAX];
	char path[PATH_MAX + 32];

	/* Under lock: the queue. */
	uint8_t *qbuf[2];
	size_t qlen;
	int qcur;
	uint64_t dropped;
	bool stopping, thread_running, thread_done;
	uint64_t *seen;  /* jmethodIDs with a METHOD_NAME queued; 0 = empty slot */
	size_t nseen;

	/* Written only by the GC callback (one VM thread at a time), read by the writer. */
	uint64_t gc_time[GC_RING];
	uint64_t gc_head;      /* published with release semantics */
	uint64_t gc_tail;      /* writer side */

	/* Agent thread only (or the unloading thread once the agent thread is gone). */
	struct cfile_writer *w;
	uint32_t epoch;
	bool epoch_dirty;      /* the current epoch holds loads or unloads */
	struct ranges epoch_used;
	struct ranges live;
	uint64_t live_methods;
	uint64_t last_flush;
	bool warned_drops;

	/* Method* records (interpreted frames): -1 unusable here, 0 not checked, 1 usable. */
	volatile int method_ptrs;
	bool classes_enumerated;
	bool threads_named;    /* this session has the names of the threads it found running */
	JNIEnv *agent_jni;     /* the agent thread's, for its local reference frames */
	bool default_dir;      /* no dir= option: the per-user default under /tmp */

	/* The session's end: a recorder holds lock_path locked while it records. */
	char lock_path[PATH_MAX];
	int lock_fd;
	uint64_t lock_checked;

	/* A new session (another attach), under lock: the attach thread asks (switch_want),
	 * the agent thread switches files and answers (switch_done, switch_err). */
	struct session_opts next;
	uint64_t switch_want, switch_done;
	int switch_err;
} A = { .lock_fd = -1 };

static __thread bool tl_replaying; /* this thread runs GenerateEvents: it may wait for room */
static __thread bool tl_agent_thread; /* this is the agent's own thread */
static __thread bool tl_named;        /* ThreadStart wrote this thread's name */

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static const char *jvmti_err(jvmtiError e)
{
	static char buf[64];
	char *name = NULL;
	if (A.jvmti && (*A.jvmti)->GetErrorName(A.jvmti, e, &name) == JVMTI_ERROR_NONE && name) {
		snprintf(buf, sizeof(buf), "%s", name);
		(*A.jvmti)->Deallocate(A.jvmti, (unsigned char *)name);
	} else {
		snprintf(buf, sizeof(buf), "JVMTI error %d", (int)e);
	}
	return buf;
}

static void fail(const char *what, const char *why)
{
	fprintf(stderr, "viprof agent: %s failed: %s; JIT frames will not be named\n", what, why);
	A.disabled = true;
	A.failed = true;
}

/* ---- the queue (callbacks) ---- */

/* Reserves a record in the queue; the caller holds A.lock. NULL when full (counted as a
 * drop), except on the replaying thread, which waits for the agent thread to make room:
 * that thread is ours for the duration of GenerateEvents, so waiting stalls no Java code. */
static void *q_reserve(uint32_t type, uint64_t time, size_t body_len)
{
	size_t size = (sizeof(struct vp_record) + body_len + 7) & ~(size_t)7;
	if (size > VP_MAX_RECORD_SIZE) {
		A.dropped++;
		return NULL;
	}
	while (A.qlen + size > QUEUE_BYTES) {
		if (!tl_replaying || !A.thread_running || A.stopping) {
			A.dropped++;
			return NULL;
		}
		(*A.jvmti)->RawMonitorNotifyAll(A.jvmti, A.lock);
		(*A.jvmti)->RawMonitorWait(A.jvmti, A.lock, 100);
	}
	struct vp_record *r = (struct vp_record *)(A.qbuf[A.qcur] + A.qlen);
	memset(r, 0, size);
	r->type = type;
	r->size = (uint32_t)size;
	r->time = time;
	A.qlen += size;
	return r + 1;
}

static void lock(void) { (*A.jvmti)->RawMonitorEnter(A.jvmti, A.lock); }
/* Wakes the writer only once the queue is half full: a wakeup per record put a context
 * switch on every compiled method (the cost the sampler avoids with its ring buffer).
 * The writer also wakes every second on its own, and a full queue wakes it too. */
static void unlock_notify(void)
{
	if (A.qlen >= QUEUE_BYTES / 2)
		(*A.jvmti)->RawMonitorNotifyAll(A.jvmti, A.lock);
	(*A.jvmti)->RawMonitorExit(A.jvmti, A.lock);
}

static size_t seen_slot(uint64_t id)
{
	uint64_t h = id * 0x9e3779b97f4a7c15ull;
	return (size_t)(h >> 40) & (SEEN_SLOTS - 1);
}

/* Under lock. */
static bool seen_has(uint64_t id)
{
	for (size_t i = seen_slot(id), k = 0; k < SEEN_SLOTS; i = (i + 1) & (SEEN_SLOTS - 1), k++) {
		if (A.seen[i] == id)
			return true;
		if (!A.seen[i])
			return false;
	}
	return false;
}

/* Under lock. A full table just means names get queued again, which readers tolerate. */
static void seen_add(uint64_t id)
{
	if (A.nseen >= SEEN_SLOTS / 2)
		return;
	size_t i = seen_slot(id);
	while (A.seen[i] && A.seen[i] != id)
		i = (i + 1) & (SEEN_SLOTS - 1);
	if (!A.seen[i]) {
		A.seen[i] = id;
		A.nseen++;
	}
}

struct mnames {
	char readable[NAME_MAX_LEN];
	char klass[NAME_MAX_LEN];
	char name[NAME_MAX_LEN / 4];
	char sig[NAME_MAX_LEN];
	char file[256];
};

static void copy_str(char *dst, size_t len, const char *src)
{
	snprintf(dst, len, "%s", src ? src : "");
}

/* Resolves a method's names; allowed in CompiledMethodLoad, where the class is pinned. */
static int resolve_names(jvmtiEnv *jvmti, jmethodID m, struct mnames *out)
{
	char *name = NULL, *sig = NULL, *csig = NULL, *file = NULL;
	jclass cls = NULL;
	int err = 0;
	memset(out, 0, sizeof(*out));
	if ((*jvmti)->GetMethodName(jvmti, m, &name, &sig, NULL) != JVMTI_ERROR_NONE) {
		err = -EINVAL;
		goto cleanup;
	}
	if ((*jvmti)->GetMethodDeclaringClass(jvmti, m, &cls) == JVMTI_ERROR_NONE) {
		if ((*jvmti)->GetClassSignature(jvmti, cls, &csig, NULL) != JVMTI_ERROR_NONE)
			csig = NULL;
		if ((*jvmti)->GetSourceFileName(jvmti, cls, &file) != JVMTI_ERROR_NONE)
			file = NULL;
	}
	copy_str(out->klass, sizeof(out->klass), csig ? csig : "L?;");
	copy_str(out->name, sizeof(out->name), name);
	copy_str(out->sig, sizeof(out->sig), sig);
	copy_str(out->file, sizeof(out->file), file);
	vp_java_readable_name(out->klass, out->name, out->sig, out->readable, sizeof(out->readable));
cleanup:
	(*jvmti)->Deallocate(jvmti, (unsigned char *)name);
	(*jvmti)->Deallocate(jvmti, (unsigned char *)sig);
	(*jvmti)->Deallocate(jvmti, (unsigned char *)csig);
	(*jvmti)->Deallocate(jvmti, (unsigned char *)file);
	return err;
}

/* Resolves and queues METHOD_NAME for m unless it was queued before. */
static void queue_method_name(jvmtiEnv *jvmti, jmethodID m, struct mnames *scratch)
{
	uint64_t id = (uint64_t)(uintptr_t)m;
	lock();
	bool have = seen_has(id);
	(*jvmti)->RawMonitorExit(jvmti, A.lock);
	if (have || resolve_names(jvmti, m, scratch))
		return;

	jvmtiLineNumberEntry *lines = NULL;
	jint nlines = 0;
	if ((*jvmti)->GetLineNumberTable(jvmti, m, &nlines, &lines) != JVMTI_ERROR_NONE) {
		lines = NULL;
		nlines = 0;
	}
	if (nlines > MAX_LINES)
		nlines = MAX_LINES;
	size_t nl = strlen(scratch->readable), fl = strlen(scratch->file);
	lock();
	struct vp_cm_method_name *b = q_reserve(VP_CM_METHOD_NAME, now_ns(),
						sizeof(*b) + nl + fl + (size_t)nlines * sizeof(struct vp_cm_line));
	if (b) {
		b->method_id = id;
		b->name_len = (uint16_t)nl;
		b->file_len = (uint16_t)fl;
		b->nlines = (uint32_t)nlines;
		char *p = (char *)(b + 1);
		memcpy(p, scratch->readable, nl);
		memcpy(p + nl, scratch->file, fl);
		/* Lines follow the strings unaligned; readers memcpy them out. */
		uint8_t *lp = (uint8_t *)p + nl + fl;
		for (jint i = 0; i < nlines; i++) {
			struct vp_cm_line l = { .start_bci = (uint32_t)lines[i].start_location,
						.line = (uint32_t)lines[i].line_number };
			memcpy(lp + (size_t)i * sizeof(l), &l, sizeof(l));
		}
		seen_add(id);
	}
	unlock_notify();
	(*jvmti)->Deallocate(jvmti, (unsigned char *)lines);
}

#define LOCAL_SEEN 256 /* power of two: methods named per load, deduplicated on the stack */

static const jvmtiCompiledMethodLoadInlineRecord *find_inline(const void *compile_info)
{
	const jvmtiCompiledMethodLoadRecordHeader *h = compile_info;
	for (int guard = 0; h && guard < 16; h = h->next, guard++)
		if (h->kind == JVMTI_CMLR_INLINE_INFO)
			return (const jvmtiCompiledMethodLoadInlineRecord *)h;
	return NULL;
}

static void JNICALL cb_compiled_load(jvmtiEnv *jvmti, jmethodID method, jint code_size,
				     const void *code_addr, jint map_length,
				     const jvmtiAddrLocationMap *map, const void *compile_info)
{
	if (A.disabled)
		return;
	uint64_t t = now_ns();
	struct mnames nm;
	if (resolve_names(jvmti, method, &nm))
		return;
	const jvmtiCompiledMethodLoadInlineRecord *inl = find_inline(compile_info);

	/* Names of every method that shows up in the inlining, once each per JVM. */
	struct mnames *scratch = &nm; /* reuse after the load record is queued */
	size_t nl = strlen(nm.readable), cl = strlen(nm.klass), ml = strlen(nm.name),
	       sl = strlen(nm.sig);
	lock();
	struct vp_cm_method_load *b = q_reserve(VP_CM_METHOD_LOAD, t, sizeof(*b) + nl + cl + ml + sl);
	if (b) {
		b->code_start = (uint64_t)(uintptr_t)code_addr;
		b->code_size = (uint32_t)code_size;
		b->level = VP_CM_LEVEL_UNKNOWN;
		b->method_id = (uint64_t)(uintptr_t)method;
		b->name_len = (uint16_t)nl;
		b->class_len = (uint16_t)cl;
		b->mname_len = (uint16_t)ml;
		b->sig_len = (uint16_t)sl;
		char *p = (char *)(b + 1);
		memcpy(p, nm.readable, nl);
		memcpy(p + nl, nm.klass, cl);
		memcpy(p + nl + cl, nm.name, ml);
		memcpy(p + nl + cl + ml, nm.sig, sl);
	}
	unlock_notify();
	if (!b)
		return;

	queue_method_name(jvmti, method, scratch);
	if (!inl || inl->numpcs <= 0)
		return;
	/* The same few methods recur at every pc: look each up (under the monitor) once
	 * per callback. A small set on the stack; no allocation in a callback. */
	jmethodID local[LOCAL_SEEN];
	memset(local, 0, sizeof(local));
	local[(uintptr_t)method * 0x9e3779b97f4a7c15ull >> 56 & (LOCAL_SEEN - 1)] = method;
	size_t nframes = 0;
	for (jint i = 0; i < inl->numpcs; i++) {
		const PCStackInfo *pc = &inl->pcinfo[i];
		for (jint k = 0; k < pc->numstackframes; k++) {
			jmethodID m = pc->methods[k];
			size_t h = (uintptr_t)m * 0x9e3779b97f4a7c15ull >> 56 & (LOCAL_SEEN - 1), probe = 0;
			while (local[h] && local[h] != m && ++probe < LOCAL_SEEN)
				h = (h + 1) & (LOCAL_SEEN - 1);
			if (local[h] == m)
				continue;
			if (probe < LOCAL_SEEN)
				local[h] = m;
			queue_method_name(jvmti, m, scratch);
		}
		if (pc->numstackframes > 0)
			nframes += (size_t)pc->numstackframes;
	}
	size_t body = sizeof(struct vp_cm_inline) + (size_t)inl->numpcs * sizeof(struct vp_cm_pc) +
		      nframes * sizeof(struct vp_cm_frame);
	lock();
	struct vp_cm_inline *ib = q_reserve(VP_CM_INLINE, t, body);
	if (ib) {
		ib->code_start = (uint64_t)(uintptr_t)code_addr;
		ib->method_id = (uint64_t)(uintptr_t)method;
		struct vp_cm_pc *pcs = (struct vp_cm_pc *)(ib + 1);
		struct vp_cm_frame *fr = (struct vp_cm_frame *)(pcs + inl->numpcs);
		uint32_t np = 0, nf = 0;
		for (jint i = 0; i < inl->numpcs; i++) {
			const PCStackInfo *pc = &inl->pcinfo[i];
			uintptr_t a = (uintptr_t)pc->pc, s = (uintptr_t)code_addr;
			if (a < s || a - s > (uintptr_t)code_size || pc->numstackframes <= 0)
				continue;
			pcs[np] = (struct vp_cm_pc){ .pc_offset = (uint32_t)(a - s),
						     .depth = (uint16_t)pc->numstackframes, .first = nf };
			for (jint k = 0; k < pc->numstackframes; k++)
				fr[nf++] = (struct vp_cm_frame){ .method_id = (uint64_t)(uintptr_t)pc->methods[k],
								 .bci = pc->bcis[k] };
			np++;
		}
		/* HotSpot lists pc descriptors by address already; keep it that way if not. */
		for (uint32_t i = 1; i < np; i++) {
			struct vp_cm_pc x = pcs[i];
			uint32_t j = i;
			for (; j > 0 && pcs[j - 1].pc_offset > x.pc_offset; j--)
				pcs[j] = pcs[j - 1];
			pcs[j] = x;
		}
		/* Frames of skipped pcs leave no gap: compact by moving the frame block. */
		if (np < (uint32_t)inl->numpcs)
			memmove(pcs + np, fr, nf * sizeof(*fr));
		ib->npcs = np;
		ib->nframes = nf;
	}
	unlock_notify();
}

static void JNICALL cb_compiled_unload(jvmtiEnv *jvmti, jmethodID method, const void *code_addr)
{
	if (A.disabled)
		return;
	lock();
	struct vp_cm_method_unload *b = q_reserve(VP_CM_METHOD_UNLOAD, now_ns(), sizeof(*b));
	if (b) {
		b->code_start = (uint64_t)(uintptr_t)code_addr;
		b->method_id = (uint64_t)(uintptr_t)method;
	}
	unlock_notify();
}

static void JNICALL cb_dynamic_code(jvmtiEnv *jvmti, const char *name, const void *address, jint length)
{
	if (A.disabled)
		return;
	size_t nl = strnlen(name ? name : "", 255);
	lock();
	struct vp_cm_code_blob *b = q_reserve(VP_CM_CODE_BLOB, now_ns(), sizeof(*b) + nl);
	if (b) {
		b->code_start = (uint64_t)(uintptr_t)address;
		b->code_size = (uint32_t)length;
		b->kind = (name && !strcmp(name, "Interpreter")) ? VP_BLOB_INTERPRETER : VP_BLOB_STUB;
		b->name_len = (uint16_t)nl;
		memcpy(b + 1, name, nl);
	}
	unlock_notify();
}

/* Runs inside the GC, on the VM thread, at a safepoint. It must not even enter our raw
 * monitor: a Java thread that holds it blocks for this very safepoint inside
 * RawMonitorNotifyAll/Exit, and the GC would then wait for it forever (seen on JDK 25).
 * So it only stores the time into a preallocated ring and publishes it; the writer
 * polls the ring at least once a second and places the epoch boundary by time. */
static void JNICALL cb_gc_finish(jvmtiEnv *jvmti)
{
	if (A.disabled)
		return;
	uint64_t h = __atomic_load_n(&A.gc_head, __ATOMIC_RELAXED);
	A.gc_time[h % GC_RING] = now_ns();
	__atomic_store_n(&A.gc_head, h + 1, __ATOMIC_RELEASE);
}

/* ---- the writer side (agent thread) ---- */

static size_t ranges_find(const struct ranges *r, uint64_t start)
{
	size_t lo = 0, hi = r->n; /* first index with v[i].start >= start */
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (r->v[mid].start < start)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static bool ranges_overlaps(const struct ranges *r, uint64_t s, uint64_t e)
{
	size_t i = ranges_find(r, s);
	if (i < r->n && r->v[i].start < e)
		return true;
	return i > 0 && r->v[i - 1].end > s;
}

static int ranges_insert(struct ranges *r, uint64_t s, uint64_t e)
{
	if (r->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 1024;
		struct interval *v = realloc(r->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		r->v = v;
		r->cap = cap;
	}
	size_t i = ranges_find(r, s);
	memmove(r->v + i + 1, r->v + i, (r->n - i) * sizeof(*r->v));
	r->v[i] = (struct interval){ s, e };
	r->n++;
	return 0;
}

static void ranges_remove_start(struct ranges *r, uint64_t s)
{
	size_t i = ranges_find(r, s);
	if (i < r->n && r->v[i].start == s) {
		memmove(r->v + i, r->v + i + 1, (r->n - i - 1) * sizeof(*r->v));
		r->n--;
	}
}

static int write_epoch_end(uint64_t t)
{
	uint64_t bytes = 0;
	for (size_t i = 0; i < A.live.n; i++)
		bytes += A.live.v[i].end - A.live.v[i].start;
	lock();
	uint64_t dropped = A.dropped;
	(*A.jvmti)->RawMonitorExit(A.jvmti, A.lock);
	if (dropped && !A.warned_drops) {
		/* Once per JVM: the count itself goes into every EPOCH_END. */
		fprintf(stderr, "viprof agent: event queue full, %llu events dropped; some JIT frames may be unnamed\n",
			(unsigned long long)dropped);
		A.warned_drops = true;
	}
	struct vp_cm_epoch_end e = { .epoch = A.epoch, .live_methods = (uint32_t)A.live.n,
				     .live_bytes = bytes, .dropped = dropped };
	int err = cfile_writer__append(A.w, VP_CM_EPOCH_END, t, &e, sizeof(e));
	return err ? err : cfile_writer__flush(A.w);
}

static int begin_epoch(uint32_t reason, uint64_t t)
{
	struct vp_cm_epoch_begin b = { .epoch = A.epoch, .reason = reason };
	A.epoch_used.n = 0;
	A.epoch_dirty = false;
	return cfile_writer__append(A.w, VP_CM_EPOCH_BEGIN, t, &b, sizeof(b));
}

static int next_epoch(uint32_t reason, uint64_t t)
{
	int err = write_epoch_end(t);
	if (err)
		return err;
	A.epoch++;
	return begin_epoch(reason, t);
}

static int name_ptr_methods(const struct vp_record *r);

static int write_record(const struct vp_record *r)
{
	const void *body = vp_record_body(r);
	int err = 0;
	switch (r->type) {
	case VP_CM_METHOD_LOAD: {
		const struct vp_cm_method_load *l = body;
		uint64_t s = l->code_start, e = l->code_start + (l->code_size ? l->code_size : 1);
		if (ranges_overlaps(&A.epoch_used, s, e) && (err = next_epoch(VP_EPOCH_REUSE, r->time)))
			return err;
		if ((err = ranges_insert(&A.epoch_used, s, e)))
			return err;
		ranges_remove_start(&A.live, s); /* a missed unload must not double count */
		if ((err = ranges_insert(&A.live, s, e)))
			return err;
		A.epoch_dirty = true;
		break;
	}
	case VP_CM_METHOD_UNLOAD:
		ranges_remove_start(&A.live, ((const struct vp_cm_method_unload *)body)->code_start);
		A.epoch_dirty = true;
		break;
	default:
		break;
	}
	err = cfile_writer__append(A.w, r->type, r->time, body, vp_record_body_len(r));
	if (!err && r->type == VP_CM_METHOD_PTR)
		err = name_ptr_methods(r);
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
	struct iovec local = { &v, sizeof(v) }, remote = { (void *)m, sizeof(v) };

	if ((uintptr_t)m < 4096 || ((uintptr_t)m & 7) ||
	    process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != sizeof(v) || v < 4096 || (v & 7)) {
		A.method_ptrs = -1;
		fprintf(stderr, "viprof agent: this JVM's jmethodIDs do not lead to Method*; interpreted frames "
				"will show as [interpreted]\n");
		return -1;
	}
	A.method_ptrs = 1;
	return 0;
}

/* Queues one METHOD_PTR record for a prepared class; names follow on the agent thread
 * (METHOD_NAME records when a method id is first seen). Never blocks: a full queue
 * drops the record (counted). */
static void queue_class_ptrs(jvmtiEnv *jvmti, jclass klass, uint64_t t, uint32_t flags)
{
	jint n = 0;
	jmethodID *ms = NULL;

	if (A.disabled || A.method_ptrs < 0)
		return;
	if ((*jvmti)->GetClassMethods(jvmti, klass, &n, &ms) != JVMTI_ERROR_NONE || n <= 0 || !ms)
		goto cleanup;
	if (!A.method_ptrs && check_method_ptrs(ms[0]))
		goto cleanup;
	lock();
	struct vp_cm_method_ptrs *b = q_reserve(VP_CM_METHOD_PTR, t,
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
	unlock_notify();
cleanup:
	(*jvmti)->Deallocate(jvmti, (unsigned char *)ms);
}

static void JNICALL cb_class_prepare(jvmtiEnv *jvmti, JNIEnv *jni, jthread thread, jclass klass)
{
	queue_class_ptrs(jvmti, klass, now_ns(), 0);
}

/* Classes loaded before the agent could see them: their pointers were valid before the
 * record's time as well. Runs on the agent thread. */
static void enumerate_classes(jvmtiEnv *jvmti, JNIEnv *jni)
{
	jint n = 0;
	jclass *cls = NULL;

	A.classes_enumerated = true;
	if ((*jvmti)->GetLoadedClasses(jvmti, &n, &cls) != JVMTI_ERROR_NONE)
		return;
	tl_replaying = true;   /* our own thread: it may wait for queue room */
	for (jint i = 0; i < n && !A.disabled; i++) {
		jint st = 0;

		if ((*jvmti)->GetClassStatus(jvmti, cls[i], &st) == JVMTI_ERROR_NONE &&
		    (st & JVMTI_CLASS_STATUS_PREPARED) && !(st & (JVMTI_CLASS_STATUS_ARRAY | JVMTI_CLASS_STATUS_PRIMITIVE)))
			queue_class_ptrs(jvmti, cls[i], now_ns(), VP_CM_PTRS_PREEXISTING);
		/* This thread never returns to Java: its local references would pin every
		 * class forever and keep them from unloading. */
		(*jni)->DeleteLocalRef(jni, cls[i]);
	}
	tl_replaying = false;
	(*jvmti)->Deallocate(jvmti, (unsigned char *)cls);
}

/* The class half of resolve_names, asked once per METHOD_PTR record: its methods are all
 * of one class (queue_class_ptrs), and its signature and source file cost as much as the
 * method's own names and lines. The class reference GetMethodDeclaringClass makes is
 * freed with a local frame: on the agent thread, which never returns to Java, it would
 * pin the class (no unloading, no code reuse). An unreadable class leaves "L?;". */
static void class_names(jvmtiEnv *jvmti, jmethodID m, struct mnames *out)
{
	JNIEnv *jni = A.agent_jni && tl_agent_thread ? A.agent_jni : NULL;
	char *csig = NULL, *file = NULL;
	jclass cls = NULL;

	if (jni && (*jni)->PushLocalFrame(jni, 8) != 0)
		jni = NULL;
	if ((*jvmti)->GetMethodDeclaringClass(jvmti, m, &cls) == JVMTI_ERROR_NONE) {
		if ((*jvmti)->GetClassSignature(jvmti, cls, &csig, NULL) != JVMTI_ERROR_NONE)
			csig = NULL;
		if ((*jvmti)->GetSourceFileName(jvmti, cls, &file) != JVMTI_ERROR_NONE)
			file = NULL;
	}
	if (jni)
		(*jni)->PopLocalFrame(jni, NULL);
	copy_str(out->klass, sizeof(out->klass), csig ? csig : "L?;");
	copy_str(out->file, sizeof(out->file), file);
	(*jvmti)->Deallocate(jvmti, (unsigned char *)csig);
	(*jvmti)->Deallocate(jvmti, (unsigned char *)file);
}

/* The method half: name, signature and the readable name, with out's class. */
static int method_names(jvmtiEnv *jvmti, jmethodID m, struct mnames *out)
{
	char *name = NULL, *sig = NULL;
	int err = 0;

	if ((*jvmti)->GetMethodName(jvmti, m, &name, &sig, NULL) != JVMTI_ERROR_NONE) {
		err = -EINVAL;
		goto cleanup;
	}
	copy_str(out->name, sizeof(out->name), name);
	copy_str(out->sig, sizeof(out->sig), sig);
	vp_java_readable_name(out->klass, out->name, out->sig, out->readable, sizeof(out->readable));
cleanup:
	(*jvmti)->Deallocate(jvmti, (unsigned char *)name);
	(*jvmti)->Deallocate(jvmti, (unsigned char *)sig);
	return err;
}

/* The writer names the methods of the METHOD_PTR records it writes, once each, straight
 * into the file: this is the agent's own thread (or the one shutting it down), so the
 * JVMTI calls cost the application nothing. A class unloaded in between leaves its
 * methods unnamed. */
static int name_ptr_methods(const struct vp_record *r)
{
	static struct mnames nm;
	static uint8_t buf[sizeof(struct vp_cm_method_name) + NAME_MAX_LEN + 256 + MAX_LINES * sizeof(struct vp_cm_line)];
	const struct vp_cm_method_ptrs *b = vp_record_body(r);
	const struct vp_cm_method_ptr *p = (const struct vp_cm_method_ptr *)(b + 1);
	jvmtiEnv *jvmti = A.jvmti;
	bool have_class = false;
	int err = 0;

	for (uint32_t i = 0; i < b->n && !err; i++) {
		jmethodID m = (jmethodID)(uintptr_t)p[i].method_id;

		if (!m)
			continue;
		lock();
		bool have = seen_has(p[i].method_id);
		(*jvmti)->RawMonitorExit(jvmti, A.lock);
		if (have)
			continue;
		if (!have_class) {
			class_names(jvmti, m, &nm);
			have_class = true;
		}
		if (method_names(jvmti, m, &nm))
			continue;
		jvmtiLineNumberEntry *lines = NULL;
		jint nlines = 0;
		if ((*jvmti)->GetLineNumberTable(jvmti, m, &nlines, &lines) != JVMTI_ERROR_NONE) {
			lines = NULL;
			nlines = 0;
		}
		if (nlines > MAX_LINES)
			nlines = MAX_LINES;
		size_t nl = strlen(nm.readable), fl = strlen(nm.file);
		struct vp_cm_method_name *h = (struct vp_cm_method_name *)buf;
		h->method_id = p[i].method_id;
		h->name_len = (uint16_t)nl;
		h->file_len = (uint16_t)fl;
		h->nlines = (uint32_t)nlines;
		uint8_t *q = buf + sizeof(*h);
		memcpy(q, nm.readable, nl);
		memcpy(q + nl, nm.file, fl);
		for (jint k = 0; k < nlines; k++) {
			struct vp_cm_line l = { .start_bci = (uint32_t)lines[k].start_location,
						.line = (uint32_t)lines[k].line_number };
			memcpy(q + nl + fl + (size_t)k * sizeof(l), &l, sizeof(l));
		}
		(*jvmti)->Deallocate(jvmti, (unsigned char *)lines);
		err = cfile_writer__append(A.w, VP_CM_METHOD_NAME, r->time, buf,
					   sizeof(*h) + nl + fl + (size_t)nlines * sizeof(struct vp_cm_line));
		lock();
		seen_add(p[i].method_id);
		(*jvmti)->RawMonitorExit(jvmti, A.lock);
	}
	return err;
}

/* Starts a GC epoch for each GC that finished at or before t.
 * An epoch that saw no code change needs no successor, so idle GCs add no epochs. */
static int apply_gcs(uint64_t t)
{
	uint64_t head = __atomic_load_n(&A.gc_head, __ATOMIC_ACQUIRE);
	if (head - A.gc_tail > GC_RING)
		A.gc_tail = head - GC_RING; /* overrun: the older boundaries collapse into these */
	while (A.gc_tail < head) {
		uint64_t g = A.gc_time[A.gc_tail % GC_RING];
		if (g > t)
			break;
		A.gc_tail++;
		if (A.epoch_dirty) {
			int err = next_epoch(VP_EPOCH_GC, g);
			if (err)
				return err;
		}
	}
	return 0;
}

/* Writes the queue half the callbacks no longer fill, with GC boundaries placed by time. */
static int drain(const uint8_t *buf, size_t len)
{
	int err;
	for (size_t off = 0; off < len;) {
		const struct vp_record *r = (const struct vp_record *)(buf + off);
		if ((err = apply_gcs(r->time)) || (err = write_record(r)))
			return err;
		off += r->size;
	}
	/* GCs after the last record wait for the next one: records still on their way
	 * into the other queue half may predate them. */
	uint64_t t = now_ns();
	if (t - A.last_flush >= 1000000000ull) {
		A.last_flush = t;
		return cfile_writer__flush(A.w);
	}
	return 0;
}

/* Takes the current queue half under the lock; returns its length. */
static size_t take(const uint8_t **buf)
{
	*buf = A.qbuf[A.qcur];
	size_t n = A.qlen;
	A.qcur ^= 1;
	A.qlen = 0;
	return n;
}

static void finish_file(void)
{
	if (!A.w)
		return;
	int err = write_epoch_end(now_ns());
	int cerr = cfile_writer__close(A.w);
	A.w = NULL;
	if (err || cerr)
		fprintf(stderr, "viprof agent: closing %s failed: %s; the last JIT names may be missing\n",
			A.path, strerror(-(err ? err : cerr)));
}

/* ---- sessions ---- */

static int open_file(void);
static void name_running_threads(jvmtiEnv *jvmti, JNIEnv *jni);
static int write_meta(void);
static void use_options(const struct session_opts *o);

/* The events a session needs; VMInit and VMDeath stay on between sessions. */
static const jvmtiEvent session_events[] = {
	JVMTI_EVENT_COMPILED_METHOD_LOAD, JVMTI_EVENT_COMPILED_METHOD_UNLOAD,
	JVMTI_EVENT_DYNAMIC_CODE_GENERATED, JVMTI_EVENT_GARBAGE_COLLECTION_FINISH,
	JVMTI_EVENT_CLASS_PREPARE, JVMTI_EVENT_THREAD_START, JVMTI_EVENT_THREAD_END,
};

static jvmtiError set_session_events(jvmtiEventMode mode)
{
	jvmtiError first = JVMTI_ERROR_NONE;
	for (size_t i = 0; i < sizeof(session_events) / sizeof(session_events[0]); i++) {
		jvmtiError e = (*A.jvmti)->SetEventNotificationMode(A.jvmti, mode, session_events[i], NULL);
		if (e != JVMTI_ERROR_NONE && first == JVMTI_ERROR_NONE)
			first = e;
	}
	return first;
}

/* Opens the file the recorder holds locked while its session lasts (lock=). Without
 * one (the JVM's own -agentpath, `viprof attach`) a session lasts until the next. */
static void watch_open(void)
{
	struct stat st;

	if (A.lock_fd >= 0)
		close(A.lock_fd);
	A.lock_fd = -1;
	if (!A.lock_path[0])
		return;
	A.lock_fd = open(A.lock_path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (A.lock_fd >= 0 && (fstat(A.lock_fd, &st) || !S_ISREG(st.st_mode))) {
		close(A.lock_fd);
		A.lock_fd = -1;
		errno = EINVAL;
	}
	if (A.lock_fd < 0)
		fprintf(stderr, "viprof agent: cannot watch the recording's lock file %s: %s; this session's code map "
			"goes on after the recording ends, until the next attach\n", A.lock_path, strerror(errno));
}

/* Has the recorder let go of its lock (stopped, or was killed: the kernel releases it)?
 * Asked at most twice a second, with a lock attempt that never blocks. */
static bool session_ended(void)
{
	if (A.lock_fd < 0)
		return false;
	uint64_t t = now_ns();
	if (t - A.lock_checked < 500000000ull)
		return false;
	A.lock_checked = t;
	if (flock(A.lock_fd, LOCK_SH | LOCK_NB) == 0) {
		flock(A.lock_fd, LOCK_UN);
		return true;
	}
	return errno != EWOULDBLOCK && errno != EINTR;
}

/* The session ended: no more events, what is queued written, the file closed. Until
 * the next attach the agent costs nothing but this thread's wait. */
static void go_idle(void)
{
	const uint8_t *buf;

	A.disabled = true;
	set_session_events(JVMTI_DISABLE);
	lock();
	size_t n = take(&buf);
	(*A.jvmti)->RawMonitorExit(A.jvmti, A.lock);
	if (A.w && n)
		drain(buf, n);
	finish_file();
	if (A.lock_fd >= 0)
		close(A.lock_fd);
	A.lock_fd = -1;
	A.idle = true;
}

/* Another attach: the current session (if any) ends here, cleanly, and a new map begins
 * in the new directory, as a late attach (the attaching thread replays live code once
 * this returns). Runs on the agent thread; 0 or -errno (the agent then stays idle). */
static int switch_session(void)
{
	bool was_idle = A.idle;
	const uint8_t *buf;

	lock();
	size_t n = take(&buf);
	(*A.jvmti)->RawMonitorExit(A.jvmti, A.lock);
	if (A.w && n)
		drain(buf, n);
	finish_file();

	lock();
	use_options(&A.next);
	/* Every name is written again into the new file; what an idle agent's callbacks
	 * queued while it turned idle belongs to no session. */
	memset(A.seen, 0, SEEN_SLOTS * sizeof(*A.seen));
	A.nseen = 0;
	A.dropped = 0;
	if (was_idle)
		A.qlen = 0;
	A.gc_tail = __atomic_load_n(&A.gc_head, __ATOMIC_ACQUIRE);
	(*A.jvmti)->RawMonitorExit(A.jvmti, A.lock);
	A.epoch = 0;
	A.epoch_used.n = 0;
	A.live.n = 0;
	A.live_methods = 0;
	A.epoch_dirty = false;
	A.warned_drops = false;
	A.classes_enumerated = false;
	A.threads_named = false;
	A.attached = true;
	A.lock_checked = 0;
	watch_open();
	int err = open_file();
	if (!err && (err = write_meta())) {
		cfile_writer__close(A.w);
		A.w = NULL;
	}
	if (err) {
		A.disabled = true;
		A.idle = true;
		set_session_events(JVMTI_DISABLE);
		return err;
	}
	A.last_flush = now_ns();
	A.idle = false;
	A.disabled = false;
	jvmtiError e = set_session_events(JVMTI_ENABLE);
	if (e != JVMTI_ERROR_NONE)
		fprintf(stderr, "viprof agent: SetEventNotificationMode failed: %s; some JIT code may be unnamed\n",
			jvmti_err(e));
	return 0;
}

static void JNICALL agent_thread(jvmtiEnv *jvmti, JNIEnv *jni, void *arg)
{
	tl_agent_thread = true;
	A.agent_jni = jni;
	for (;;) {
		const uint8_t *buf = NULL;
		(*jvmti)->RawMonitorEnter(jvmti, A.lock);
		/* Idle: nothing to do until the next session (or the JVM's end). */
		while (A.idle && !A.stopping && A.switch_want == A.switch_done)
			(*jvmti)->RawMonitorWait(jvmti, A.lock, 0);
		if (A.qlen == 0 && !A.stopping && A.switch_want == A.switch_done)
			(*jvmti)->RawMonitorWait(jvmti, A.lock, 1000);
		size_t n = A.idle ? 0 : take(&buf);
		bool stop = A.stopping, sw = A.switch_want != A.switch_done;
		/* Room was made: wake a replaying thread that waits for it. */
		(*jvmti)->RawMonitorNotifyAll(jvmti, A.lock);
		(*jvmti)->RawMonitorExit(jvmti, A.lock);

		/* With nothing new, drain still flushes what was written over a second ago: a
		 * JVM that compiles nothing more (a steady service) would otherwise keep its
		 * last records (the class enumeration, thread names) in memory until the
		 * session ends, and lose them if it is killed first. */
		int err = n || (A.w && !A.idle) ? drain(buf, n) : 0;
		if (err) {
			fail("writing the code map", strerror(-err));
			lock();
			A.qlen = 0;
			(*jvmti)->RawMonitorExit(jvmti, A.lock);
		}
		if (stop || A.failed)
			break;
		if (sw) {
			int serr = switch_session();
			lock();
			A.switch_err = serr;
			A.switch_done = A.switch_want;
			(*jvmti)->RawMonitorNotifyAll(jvmti, A.lock);
			(*jvmti)->RawMonitorExit(jvmti, A.lock);
			continue;
		}
		if (!A.idle && session_ended()) {
			go_idle();
			continue;
		}
		/* Classes prepared before ClassPrepare was on (or before an attach), after the
		 * first batch of code records so that those reach the file first. */
		if (!A.idle && !A.classes_enumerated)
			enumerate_classes(jvmti, jni);
		if (!A.idle && !A.threads_named)
			name_running_threads(jvmti, jni);
	}
	(*jvmti)->RawMonitorEnter(jvmti, A.lock);
	/* Anything queued after the last take is written by whoever waits for us. */
	A.thread_done = true;
	A.thread_running = false;
	(*jvmti)->RawMonitorNotifyAll(jvmti, A.lock);
	(*jvmti)->RawMonitorExit(jvmti, A.lock);
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
	A.thread_running = true;
	jvmtiError e = (*A.jvmti)->RunAgentThread(A.jvmti, th, agent_thread, NULL, JVMTI_THREAD_NORM_PRIORITY);
	if (e != JVMTI_ERROR_NONE) {
		A.thread_running = false;
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
	if (!A.jvmti || !A.lock)
		return;
	(*A.jvmti)->RawMonitorEnter(A.jvmti, A.lock);
	A.stopping = true;
	(*A.jvmti)->RawMonitorNotifyAll(A.jvmti, A.lock);
	for (int i = 0; i < 20 && A.thread_running; i++)
		(*A.jvmti)->RawMonitorWait(A.jvmti, A.lock, 100);
	bool can_write = !A.thread_running;
	const uint8_t *buf = NULL;
	size_t n = can_write ? take(&buf) : 0;
	(*A.jvmti)->RawMonitorExit(A.jvmti, A.lock);
	if (!can_write)
		return; /* never race the writer; the file stays readable up to its last chunk */
	if (A.w && !A.disabled && n)
		drain(buf, n);
	finish_file();
	A.disabled = true;
}

static void JNICALL cb_vm_init(jvmtiEnv *jvmti, JNIEnv *jni, jthread thread)
{
	if (!A.disabled)
		start_thread(jni);
}

static void JNICALL cb_vm_death(jvmtiEnv *jvmti, JNIEnv *jni)
{
	shutdown_agent();
}

/* ---- full Java thread names (THREAD_NAME) ---- */

/* The kernel keeps 15 bytes of a thread name (HotSpot gives a Java thread's native
 * thread the first 15 bytes of its Java name): only longer names tell more. */
#define KERNEL_NAME_LEN 15

/* Queues THREAD_NAME for tid; never blocks (a full queue drops it, counted), except on
 * the agent thread. */
static void queue_thread_name(uint32_t tid, uint16_t flags, const char *name, uint64_t t)
{
	size_t nl = name ? strnlen(name, NAME_MAX_LEN) : 0;
	lock();
	struct vp_cm_thread_name *b = q_reserve(VP_CM_THREAD_NAME, t, sizeof(*b) + nl);
	if (b) {
		b->tid = tid;
		b->name_len = (uint16_t)nl;
		b->flags = flags;
		memcpy(b + 1, name, nl);
	}
	unlock_notify();
}

/* Runs on the new thread itself, before its run(): gettid() is its kernel thread id. */
static void JNICALL cb_thread_start(jvmtiEnv *jvmti, JNIEnv *jni, jthread thread)
{
	jvmtiThreadInfo ti;

	if (A.disabled || (*jvmti)->GetThreadInfo(jvmti, thread, &ti) != JVMTI_ERROR_NONE)
		return;
	if (ti.name && strlen(ti.name) > KERNEL_NAME_LEN) {
		queue_thread_name((uint32_t)syscall(SYS_gettid), 0, ti.name, now_ns());
		tl_named = true;
	}
	(*jvmti)->Deallocate(jvmti, (unsigned char *)ti.name);
	/* thread_group and context_class_loader are local references: freed on return. */
}

/* Also on the thread itself: once it ends its tid may go to a thread we do not name.
 * A thread that was running before the session began was named (if at all) by
 * name_running_threads, not here: its name is asked again. */
static void JNICALL cb_thread_end(jvmtiEnv *jvmti, JNIEnv *jni, jthread thread)
{
	jvmtiThreadInfo ti;
	bool named = tl_named;

	if (A.disabled)
		return;
	tl_named = false;
	if (!named && (*jvmti)->GetThreadInfo(jvmti, thread, &ti) == JVMTI_ERROR_NONE) {
		named = ti.name && strlen(ti.name) > KERNEL_NAME_LEN;
		(*jvmti)->Deallocate(jvmti, (unsigned char *)ti.name);
	}
	if (named)
		queue_thread_name((uint32_t)syscall(SYS_gettid), VP_CM_THREAD_ENDED, "", now_ns());
}

struct task_name {
	uint32_t tid;
	char comm[KERNEL_NAME_LEN + 1];
};

/* The kernel names of this process's threads; returns how many (at most max). */
static size_t read_task_names(struct task_name *out, size_t max)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;
	size_t n = 0;

	while (d && n < max && (de = readdir(d))) {
		char path[300];
		ssize_t k;
		int fd;

		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", de->d_name);
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
			continue;
		k = read(fd, out[n].comm, KERNEL_NAME_LEN + 1);
		close(fd);
		if (k <= 0)
			continue;
		while (k > 0 && (out[n].comm[k - 1] == '\n' || out[n].comm[k - 1] == '\0'))
			k--;
		out[n].comm[k] = '\0';
		out[n].tid = (uint32_t)strtoul(de->d_name, NULL, 10);
		n++;
	}
	if (d)
		closedir(d);
	return n;
}

#define MAX_TASKS 16384

/* Where HotSpot keeps a Java thread's kernel tid: java.lang.Thread.eetop holds its
 * JavaThread*, whose _osthread (of JavaThread in JDK 17, of Thread in JDK 25) has
 * _thread_id. Read through the exported VM structure tables, once; memory is read with
 * process_vm_readv, which fails instead of faulting on a thread freed meanwhile. */
static struct {
	bool tried, ok;
	jfieldID eetop;
	uint64_t osthread, thread_id;
} HS;

static void hs_tid_init(JNIEnv *jni)
{
	HS.tried = true;
	void *h = dlopen("libjvm.so", RTLD_LAZY | RTLD_NOLOAD);
	struct vp_vm_field os17 = { "JavaThread", "_osthread" }, os25 = { "Thread", "_osthread" },
			   tid = { "OSThread", "_thread_id" };
	bool have_os = vp_vm__find_fields(h, &os17, 1) || vp_vm__find_fields(h, &os25, 1);
	const struct vp_vm_field *os = os17.found ? &os17 : &os25;
	if (have_os && vp_vm__find_fields(h, &tid, 1) && !os->is_static && !tid.is_static) {
		jclass cls = (*jni)->FindClass(jni, "java/lang/Thread");
		HS.eetop = cls ? (*jni)->GetFieldID(jni, cls, "eetop", "J") : NULL;
		if ((*jni)->ExceptionCheck(jni))
			(*jni)->ExceptionClear(jni);
		if (cls)
			(*jni)->DeleteLocalRef(jni, cls);
		HS.osthread = os->offset;
		HS.thread_id = tid.offset;
		HS.ok = HS.eetop != NULL;
	}
	if (h)
		dlclose(h);
}

static bool read_self(uint64_t addr, void *out, size_t len)
{
	struct iovec local = { out, len }, remote = { (void *)(uintptr_t)addr, len };
	return addr >= 4096 && process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)len;
}

/* The kernel tid of a running Java thread per HotSpot, or 0. */
static uint32_t hs_tid(JNIEnv *jni, jthread t)
{
	uint64_t jt, os = 0;
	int32_t tid = 0;

	if (!HS.tried)
		hs_tid_init(jni);
	if (!HS.ok)
		return 0;
	jt = (uint64_t)(*jni)->GetLongField(jni, t, HS.eetop);
	if (!read_self(jt + HS.osthread, &os, sizeof(os)) || !read_self(os + HS.thread_id, &tid, sizeof(tid)))
		return 0;
	return tid > 0 ? (uint32_t)tid : 0;
}

/* The threads already running when a session begins (ThreadStart came before it): the
 * long-named ones, each with its tid as HotSpot knows it when that tid's kernel name is
 * the name's first 15 bytes (HotSpot's naming, so a freed or misread thread cannot name
 * another); else the one tid with that kernel name, when exactly one thread has it and
 * exactly one Java thread that prefix (pool threads that share one stay unnamed rather
 * than named wrong). Runs on the agent thread, once per session. */
static void name_running_threads(jvmtiEnv *jvmti, JNIEnv *jni)
{
	static struct task_name tasks[MAX_TASKS];
	jthread *th = NULL;
	jint nth = 0;
	char **names = NULL;
	uint32_t *tids = NULL;

	A.threads_named = true;
	if ((*jvmti)->GetAllThreads(jvmti, &nth, &th) != JVMTI_ERROR_NONE)
		return;
	size_t ntasks = read_task_names(tasks, MAX_TASKS);
	names = calloc((size_t)nth + 1, sizeof(*names));
	tids = calloc((size_t)nth + 1, sizeof(*tids));
	for (jint i = 0; names && tids && i < nth; i++) {
		jvmtiThreadInfo ti;

		if ((*jvmti)->GetThreadInfo(jvmti, th[i], &ti) == JVMTI_ERROR_NONE) {
			if (ti.name && strlen(ti.name) > KERNEL_NAME_LEN) {
				names[i] = strdup(ti.name);
				tids[i] = hs_tid(jni, th[i]);
			}
			(*jvmti)->Deallocate(jvmti, (unsigned char *)ti.name);
			if (ti.thread_group)
				(*jni)->DeleteLocalRef(jni, ti.thread_group);
			if (ti.context_class_loader)
				(*jni)->DeleteLocalRef(jni, ti.context_class_loader);
		}
		/* This thread never returns to Java: free what would pin the threads. */
		(*jni)->DeleteLocalRef(jni, th[i]);
	}
	uint64_t t = now_ns();
	tl_replaying = true;   /* our own thread: it may wait for queue room */
	for (jint i = 0; names && tids && i < nth; i++) {
		if (!names[i])
			continue;
		size_t hit = SIZE_MAX, nhits = 0, exact = SIZE_MAX;
		for (size_t k = 0; k < ntasks; k++) {
			if (strlen(tasks[k].comm) != KERNEL_NAME_LEN || strncmp(tasks[k].comm, names[i], KERNEL_NAME_LEN))
				continue;
			hit = k;
			nhits++;
			if (tids[i] && tasks[k].tid == tids[i])
				exact = k;
		}
		int same = 0;   /* Java threads with this prefix */
		for (jint j = 0; j < nth; j++)
			same += names[j] && !strncmp(names[j], names[i], KERNEL_NAME_LEN);
		if (exact != SIZE_MAX)
			queue_thread_name(tasks[exact].tid, VP_CM_THREAD_PREEXISTING, names[i], t);
		else if (same == 1 && nhits == 1)
			queue_thread_name(tasks[hit].tid, VP_CM_THREAD_PREEXISTING, names[i], t);
	}
	tl_replaying = false;
	for (jint i = 0; names && i < nth; i++)
		free(names[i]);
	free(names);
	free(tids);
	(*jvmti)->Deallocate(jvmti, (unsigned char *)th);
}

/* ---- setup ---- */

/* -XX:[+-]PreserveFramePointer in one whitespace- or NUL-separated list; last one wins. */
static void scan_fp(const char *s, size_t len, int *state)
{
	static const char on[] = "-XX:+PreserveFramePointer", off[] = "-XX:-PreserveFramePointer";
	for (size_t i = 0; i + sizeof(on) - 1 <= len; i++) {
		if (i > 0 && s[i - 1] != '\0' && s[i - 1] != ' ' && s[i - 1] != '\t')
			continue;
		if (!memcmp(s + i, on, sizeof(on) - 1))
			*state = 1;
		else if (!memcmp(s + i, off, sizeof(off) - 1))
			*state = 0;
	}
}

/* JVMTI does not expose VM flags, so read them where the JVM did: JAVA_TOOL_OPTIONS,
 * then JDK_JAVA_OPTIONS, then the command line, then _JAVA_OPTIONS (HotSpot's order). */
static bool detect_frame_pointers(void)
{
	int state = 0;
	const char *env = getenv("JAVA_TOOL_OPTIONS");
	if (env)
		scan_fp(env, strlen(env), &state);
	if ((env = getenv("JDK_JAVA_OPTIONS")))
		scan_fp(env, strlen(env), &state);
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		char buf[65536];
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n > 0)
			scan_fp(buf, (size_t)n, &state);
		close(fd);
	}
	if ((env = getenv("_JAVA_OPTIONS")))
		scan_fp(env, strlen(env), &state);
	return state == 1;
}

/* dir=DIR[,lock=FILE]: both optional; DIR defaults to /tmp/viprof-jit-<euid>. */
static int parse_options(const char *options, struct session_opts *o)
{
	memset(o, 0, sizeof(*o));
	if (!options)
		options = "";
	const char *p = options;
	while (*p) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		char *dst = NULL;
		size_t skip = 0;
		if (len > 4 && !strncmp(p, "dir=", 4)) {
			dst = o->dir;
			skip = 4;
		} else if (len > 5 && !strncmp(p, "lock=", 5)) {
			dst = o->lock;
			skip = 5;
		} else if (len) {
			return -EINVAL;
		}
		if (dst) {
			if (len - skip >= PATH_MAX)
				return -ENAMETOOLONG;
			memcpy(dst, p + skip, len - skip);
			dst[len - skip] = '\0';
		}
		p += len + (end ? 1 : 0);
	}
	if (!o->dir[0]) {
		snprintf(o->dir, sizeof(o->dir), "/tmp/viprof-jit-%u", (unsigned)geteuid());
		o->default_dir = true;
	}
	return 0;
}

static void use_options(const struct session_opts *o)
{
	memcpy(A.dir, o->dir, sizeof(A.dir));
	memcpy(A.lock_path, o->lock, sizeof(A.lock_path));
	A.default_dir = o->default_dir;
}

/* Opens the map directory. It is walked one component at a time without following a
 * symlink that a user other than root or us could have made (a dir= path an
 * administrator wrote, with /var/run -> /run in it, opens), missing directories made
 * 0700 on the way; it must be ours or root's and not open to others' writes (unless
 * sticky): a JVM running as root must not write where another user points it. The
 * default, /tmp/viprof-jit-<uid>, is the user's own: no link at all, a directory of ours,
 * made 0700; one a user planted is refused. Returns the fd or -errno. */
static int open_map_dir(void)
{
	struct stat st;
	int dfd;

	if (A.default_dir) {
		int tmp = vp_safe_opendir("/tmp", 0);

		if (tmp < 0)
			return tmp;
		dfd = vp_safe_mkdirat(tmp, A.dir + strlen("/tmp/"), 0700, (uid_t)-1, NULL);
		close(tmp);
		if (dfd >= 0 && fchmod(dfd, 0700)) {
			int e = -errno;

			close(dfd);
			return e;
		}
		return dfd == -EPERM ? -EACCES : dfd;
	}
	dfd = vp_safe_opendir(A.dir, VP_SAFE_TRUSTED_LINKS | VP_SAFE_CREATE);
	if (dfd < 0)
		return dfd;
	if (fstat(dfd, &st) || (st.st_uid != geteuid() && st.st_uid != 0) ||
	    ((st.st_mode & 0022) && !(st.st_mode & S_ISVTX))) {
		close(dfd);
		return -EACCES;
	}
	return dfd;
}

/* <dir>/<pid> must be a directory of our own, made for us (by us, or by the recorder
 * for us), and the code map a new file in it. */
static int open_file(void)
{
	char real[PATH_MAX], name[32], fdpath[64];
	int dfd = open_map_dir();
	if (dfd < 0)
		return dfd;
	/* The directory's name as opened, for the messages that name the file. */
	snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", dfd);
	ssize_t rn = readlink(fdpath, real, sizeof(real) - 1);
	if (rn <= 0)
		snprintf(real, sizeof(real), "%s", A.dir);
	else
		real[rn] = '\0';
	snprintf(name, sizeof(name), "%d", (int)getpid());
	int pfd = vp_safe_mkdirat(dfd, name, 0700, (uid_t)-1, NULL);
	close(dfd);
	if (pfd < 0)
		return pfd == -EPERM ? -EACCES : pfd;
	/* A second agent in the same pid directory (pid reuse, a second attach) gets its own
	 * file; readers take all codemap*.vpm files of the directory in creation order. */
	for (int i = 0; i < 100; i++) {
		char file[64];

		if (i == 0)
			snprintf(file, sizeof(file), "%s", VP_CODEMAP_FILE);
		else
			snprintf(file, sizeof(file), "codemap.%d.vpm", i);
		if (snprintf(A.path, sizeof(A.path), "%.3800s/%s/%s", real, name, file) >= (int)sizeof(A.path))
			A.path[sizeof(A.path) - 1] = '\0';
		A.w = cfile_writer__create_at(pfd, file, VP_KIND_CODEMAP, VP_CODEMAP_FORMAT_VERSION, 0, true);
		if (A.w) {
			close(pfd);
			return 0;
		}
		if (errno != EEXIST) {
			int e = -errno;

			close(pfd);
			return e;
		}
	}
	close(pfd);
	return -EEXIST;
}

static int write_meta(void)
{
	char vm[256] = "";
	char *name = NULL, *ver = NULL;
	(*A.jvmti)->GetSystemProperty(A.jvmti, "java.vm.name", &name);
	(*A.jvmti)->GetSystemProperty(A.jvmti, "java.vm.version", &ver);
	snprintf(vm, sizeof(vm), "%s %s", name ? name : "?", ver ? ver : "?");
	(*A.jvmti)->Deallocate(A.jvmti, (unsigned char *)name);
	(*A.jvmti)->Deallocate(A.jvmti, (unsigned char *)ver);
	size_t vl = strlen(vm);
	uint8_t body[sizeof(struct vp_cm_meta) + sizeof(vm)];
	struct vp_cm_meta m = { .pid = (uint32_t)getpid(), .agent_version = VP_AGENT_VERSION,
				.vm_len = (uint16_t)vl };
	m.flags = (A.frame_pointers ? VP_CM_META_FRAME_POINTERS : 0) | (A.attached ? VP_CM_META_LATE_ATTACH : 0);
	memcpy(body, &m, sizeof(m));
	memcpy(body + sizeof(m), vm, vl);
	int err = cfile_writer__append(A.w, VP_CM_META, now_ns(), body, sizeof(m) + vl);
	if (!err)
		err = begin_epoch(A.attached ? VP_EPOCH_ATTACH : VP_EPOCH_START, now_ns());
	return err ? err : cfile_writer__flush(A.w);
}

static int setup(JavaVM *vm, const char *options, bool attach)
{
	jvmtiError e;
	int err;
	if (A.jvmti) {  /* -agentpath twice: the first one serves */
		fprintf(stderr, "viprof agent: already loaded in this JVM (writing %s); ignoring the second load\n", A.path);
		return 0;
	}
	A.attached = attach;
	if ((*vm)->GetEnv(vm, (void **)&A.jvmti, JVMTI_VERSION_1_2) != JNI_OK) {
		A.jvmti = NULL;
		fail("GetEnv(JVMTI 1.2)", "this JVM offers no JVMTI 1.2");
		return -ENOTSUP;
	}
	struct session_opts so;
	if ((err = parse_options(options, &so))) {
		fail("parsing the options", err == -EINVAL ? "expected dir=<directory>[,lock=<file>]" : strerror(-err));
		return err;
	}
	use_options(&so);
	watch_open();
	A.frame_pointers = detect_frame_pointers();
	A.qbuf[0] = malloc(QUEUE_BYTES);
	A.qbuf[1] = malloc(QUEUE_BYTES);
	A.seen = calloc(SEEN_SLOTS, sizeof(*A.seen));
	if (!A.qbuf[0] || !A.qbuf[1] || !A.seen) {
		fail("allocating the event queue", strerror(ENOMEM));
		return -ENOMEM;
	}
	if ((e = (*A.jvmti)->CreateRawMonitor(A.jvmti, "viprof-queue", &A.lock)) != JVMTI_ERROR_NONE) {
		fail("CreateRawMonitor", jvmti_err(e));
		return -EINVAL;
	}
	if ((err = open_file())) {
		char why[PATH_MAX + 64];
		snprintf(why, sizeof(why), "%s (in %s: it must be this user's or root's and not writable by others, "
			 "with no symlink on the way that a user other than root could have made, and %s/%d this "
			 "user's own; pass dir=<a directory of yours>)", strerror(-err), A.dir, A.dir, (int)getpid());
		fail("creating the code map", why);
		return err;
	}
	if ((err = write_meta())) {
		fail("writing the code map header", strerror(-err));
		return err;
	}
	A.last_flush = now_ns();

	jvmtiCapabilities caps = { 0 };
	caps.can_generate_compiled_method_load_events = 1;
	caps.can_generate_garbage_collection_events = 1;
	if ((e = (*A.jvmti)->AddCapabilities(A.jvmti, &caps)) != JVMTI_ERROR_NONE) {
		fail("AddCapabilities(compiled method load, garbage collection)", jvmti_err(e));
		return -EINVAL;
	}
	/* Source files and line numbers only improve the output; go on without them. */
	jvmtiCapabilities opt = { 0 };
	opt.can_get_source_file_name = 1;
	opt.can_get_line_numbers = 1;
	(*A.jvmti)->AddCapabilities(A.jvmti, &opt);

	jvmtiEventCallbacks cb = { 0 };
	cb.CompiledMethodLoad = cb_compiled_load;
	cb.CompiledMethodUnload = cb_compiled_unload;
	cb.DynamicCodeGenerated = cb_dynamic_code;
	cb.GarbageCollectionFinish = cb_gc_finish;
	cb.VMInit = cb_vm_init;
	cb.VMDeath = cb_vm_death;
	cb.ClassPrepare = cb_class_prepare;
	cb.ThreadStart = cb_thread_start;
	cb.ThreadEnd = cb_thread_end;
	if ((e = (*A.jvmti)->SetEventCallbacks(A.jvmti, &cb, sizeof(cb))) != JVMTI_ERROR_NONE) {
		fail("SetEventCallbacks", jvmti_err(e));
		return -EINVAL;
	}
	static const jvmtiEvent events[] = {
		JVMTI_EVENT_COMPILED_METHOD_LOAD, JVMTI_EVENT_COMPILED_METHOD_UNLOAD,
		JVMTI_EVENT_DYNAMIC_CODE_GENERATED, JVMTI_EVENT_GARBAGE_COLLECTION_FINISH,
		JVMTI_EVENT_VM_INIT, JVMTI_EVENT_VM_DEATH, JVMTI_EVENT_CLASS_PREPARE,
		JVMTI_EVENT_THREAD_START, JVMTI_EVENT_THREAD_END,
	};
	for (size_t i = 0; i < sizeof(events) / sizeof(events[0]); i++) {
		if (attach && events[i] == JVMTI_EVENT_VM_INIT)
			continue;
		e = (*A.jvmti)->SetEventNotificationMode(A.jvmti, JVMTI_ENABLE, events[i], NULL);
		if (e != JVMTI_ERROR_NONE) {
			fail("SetEventNotificationMode", jvmti_err(e));
			return -EINVAL;
		}
	}
	return 0;
}

/* Stops the events after a failure in setup so that nothing reaches a half-made agent. */
static void disable_events(void)
{
	A.disabled = true;
	A.failed = true;
	if (A.jvmti) {
		jvmtiEventCallbacks cb = { 0 };
		(*A.jvmti)->SetEventCallbacks(A.jvmti, &cb, sizeof(cb));
	}
	if (A.w) {
		cfile_writer__close(A.w);
		A.w = NULL;
	}
}

EXPORT JNIEXPORT jint JNICALL Agent_OnLoad(JavaVM *vm, char *options, void *reserved)
{
	if (setup(vm, options, false))
		disable_events();
	return JNI_OK; /* a failed agent must not stop the JVM from starting */
}

/* A second attach to a JVM that has the agent: the agent thread ends the current
 * session's map (if any) and opens the new one; then this thread replays. */
static int new_session(const char *options)
{
	struct session_opts so;
	int err;

	if (A.failed) {
		fprintf(stderr, "viprof agent: loading again failed: the agent disabled itself earlier in this JVM; "
			"restart the JVM to profile its JIT code\n");
		return -EALREADY;
	}
	if ((err = parse_options(options, &so))) {
		fprintf(stderr, "viprof agent: loading again failed: %s; expected dir=<directory>[,lock=<file>]\n",
			strerror(-err));
		return err;
	}
	lock();
	if (!A.thread_running) {
		(*A.jvmti)->RawMonitorExit(A.jvmti, A.lock);
		fprintf(stderr, "viprof agent: loading again failed: the agent's thread is not running (the JVM is "
			"starting or ending); attach again later\n");
		return -ESRCH;
	}
	A.next = so;
	uint64_t want = ++A.switch_want;
	(*A.jvmti)->RawMonitorNotifyAll(A.jvmti, A.lock);
	/* Closing the old map writes what its queue holds: seconds at worst. */
	for (int i = 0; i < 300 && A.switch_done < want && A.thread_running; i++)
		(*A.jvmti)->RawMonitorWait(A.jvmti, A.lock, 100);
	err = A.switch_done >= want ? A.switch_err : -ETIMEDOUT;
	(*A.jvmti)->RawMonitorExit(A.jvmti, A.lock);
	if (err)
		fprintf(stderr, "viprof agent: starting a new code map in %s failed: %s (it must be this user's or "
			"root's and not writable by others); JIT frames of this session will not be named\n", so.dir,
			strerror(-err));
	return err;
}

/* Replays what was compiled and generated before the session began. The calling thread
 * (the attach listener, not application code) may wait for queue room. */
static void replay(void)
{
	tl_replaying = true;
	jvmtiError e = (*A.jvmti)->GenerateEvents(A.jvmti, JVMTI_EVENT_DYNAMIC_CODE_GENERATED);
	if (e == JVMTI_ERROR_NONE)
		e = (*A.jvmti)->GenerateEvents(A.jvmti, JVMTI_EVENT_COMPILED_METHOD_LOAD);
	tl_replaying = false;
	if (e != JVMTI_ERROR_NONE)
		fprintf(stderr, "viprof agent: GenerateEvents failed: %s; code compiled before the attach will not be named\n",
			jvmti_err(e));
}

EXPORT JNIEXPORT jint JNICALL Agent_OnAttach(JavaVM *vm, char *options, void *reserved)
{
	if (A.jvmti) {
		if (new_session(options))
			return JNI_ERR;
		replay();
		return JNI_OK;
	}
	if (setup(vm, options, true)) {
		disable_events();
		return JNI_ERR; /* tells the attaching tool that it did not work */
	}
	JNIEnv *jni = NULL;
	if ((*vm)->GetEnv(vm, (void **)&jni, JNI_VERSION_1_6) != JNI_OK || start_thread(jni)) {
		if (!A.disabled)
			fail("GetEnv(JNI)", "no JNI environment on the attach thread");
		disable_events();
		return JNI_ERR;
	}
	replay();
	return JNI_OK;
}

EXPORT JNIEXPORT void JNICALL Agent_OnUnload(JavaVM *vm)
{
	if (!A.disabled)
		shutdown_agent();
}
