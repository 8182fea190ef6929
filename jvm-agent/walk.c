/* The agent's code loads from walking HotSpot's code heaps (the default on HotSpot),
 * on top of hotspot/codeheap.h: see the section comment below and walk.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"
#include "hotspot/memory.h"
#include <jvmti.h>
#include <jvmticmlr.h>

#include "common/chunkfile.h"
#include "hotspot/codeheap.h"
#include "hotspot/vmstructs.h"
#include "maps/codemap_format.h"
#include "maps/codemap_writer.h"
#include "jvm-agent/stats.h"
#include "jvm-agent/walk.h"
#include "jvm-agent/gcs.h"
#include "jvm-agent/loads.h"
#include "jvm-agent/queue.h"
#include "jvm-agent/names.h"
#include "jvm-agent/vmflags.h"

/* ---- code loads from walking the code heaps (the default on HotSpot) ----
 * The agent thread walks HotSpot's code heaps (hotspot/codeheap.h) every SCAN_MIN_MS to
 * SCAN_MAX_MS, sooner after a GC, and diffs what it finds against the previous walk:
 * new compiled methods become METHOD_LOAD2 + INLINE2 records, vanished ones
 * METHOD_UNLOAD, exactly what the CompiledMethodLoad/Unload callbacks would have queued,
 * through the same queue. The JVM then posts no per-method event and builds no inline
 * record on its Service Thread; the cost moves to this thread.
 *
 * Times. Code absent from the walk that started at s and present in the next one was
 * installed after s: its load record carries s, the earliest moment it can have run
 * (a reader may find it in the epoch after a GC that fell in between; see
 * maps/jit_index.c). Code that vanished is declared gone when two complete walks in a
 * row miss it (a walk racing the allocator can skip a block without noticing), or at
 * once when new code takes its place; its unload carries the last GC that finished
 * between the walk that last saw it and the first that missed it (JDK 20+ frees code
 * only at GC), else the end of that first walk. */
#define SCAN_MIN_MS 50
#define SCAN_MAX_MS 800
/* ... and not before the JVM has used WALK_DUTY times the last walk's CPU since it (or
 * SCAN_MAX_MS went by): walks cost at most 1/WALK_DUTY of the JVM's own CPU, however
 * long its run is stretched. A walk reads every block of the heaps and is bound by its
 * cache misses (javac's ~4k nmethods: 0.35 ms quiet, 0.65 ms with other processes on the
 * CPUs); paced by the wall clock alone, a JVM starved by other work (javac of 300
 * classes taking 10-36 s instead of 2.5 s under load 15-24) got 161-482 walks, 105-310
 * ms of CPU, most of the agent's. Code a later walk finds is dated at the walk before
 * (installed after its start) and code that a GC frees is read at that GC's start, so
 * fewer walks date nothing later; the map on disk trails by up to one period. Since
 * the walk prefetches the blocks ahead (hotspot/codeheap.c: 0.28 instead of 0.5 ms a
 * walk under load) the duty is 400, not 200: as many walks as before, at half the CPU,
 * instead of twice the walks at the same CPU. */
#define WALK_DUTY 400

/* What the last walk made of known code. */
enum known_mark {
	K_SEEN,                  /* there, as before */
	K_NEW,                   /* first seen by this walk: to be loaded */
	K_MISSED,                /* missed once: kept, maybe the walk skipped it */
	K_GONE,                  /* missed twice, or replaced: to be unloaded */
};

struct known {
	uint64_t blob, code_start, method;
	uint64_t jmid;           /* its method's id, once loaded (0: none) */
	uint64_t seen_start;     /* start of the last walk that saw it */
	uint64_t missed_end;     /* end of the first walk that missed it */
	uint64_t after;          /* new code: the unload of code it replaced */
	uint64_t gc_t;           /* short-lived code: the last GC start that saw it */
	uint32_t names;          /* short-lived code: its names in scan.eph_pool, or UINT32_MAX */
	uint32_t code_size;
	int32_t compile_id;
	int8_t level;
	bool osr;
	uint8_t mark;            /* enum known_mark */
};

/* The code heap at a GC's start (vp_scan__gc_start): compiled methods the agent thread's
 * last walk did not hold, found at the start of the GC that may free them. Filled by the
 * GC callback, which cannot malloc: preallocated, SNAP_CAP entries a buffer. */
#define SNAP_CAP 16384
#define SNAP_POOL (256u << 10)
struct snap_nm {
	uint64_t blob, code_start, method;
	uint64_t t;               /* the GC's start */
	uint64_t since;           /* start of the walk it was missing from: installed after */
	uint32_t code_size;
	int32_t compile_id;
	uint32_t names;           /* into pool: class, name and signature, each NUL-ended;
				   * UINT32_MAX: none copied */
	int8_t level;
	bool osr;
};
struct snap_buf {
	struct snap_nm *v;
	char *pool;               /* the methods' names, read while their classes are loaded */
	uint32_t pool_used;
	uint32_t n;
	uint32_t lost;            /* entries that found the buffer full */
	uint32_t incomplete;      /* walks that met a changing heap (-EAGAIN) */
};
/* The last walk's code as the GC callback reads it: blob addresses and compile ids,
 * sorted by blob. */
struct snap_pub {
	uint64_t *blob;
	int32_t *cid;
	size_t n, cap;
	uint64_t start;           /* that walk's start */
};

/* What a METHOD_PTR record said of one Method*. */
struct mptr {
	uint64_t key;            /* the Method* (0: empty slot) */
	uint64_t id;             /* its jmethodID */
	uint64_t time;           /* when its class was prepared (0: before the agent) */
};

struct scan {
	jvmtiEnv *jvmti;
	void (*flush)(size_t at_least);   /* writes the queue (the agent's writer) */
	bool on;                 /* code loads come from walks, not CompiledMethodLoad */
	bool check;              /* option scancheck: events on, each checked against a decode */
	bool forced_events;      /* option jit=events */
	bool redrained;          /* this walk wrote the queue again for its new code's Method* */
	uint64_t walk_end;       /* end of the walk being diffed */
	uint64_t reset_t;        /* this session's first walk was asked for (vp_scan__reset) */
	uint64_t blobs[8];       /* code of unreported blobs named in this session (blob_visit) */
	size_t nblobs;
	struct vp_ch ch;
	struct vp_ch_scopes sc;
	struct known *prev, *cur, *next;
	size_t nprev, ncur, nnext, cap_prev, cap_cur, cap_next;
	uint64_t last_start;     /* start of the last complete walk (0: none yet) */
	uint64_t due;            /* next walk at or after this time */
	uint32_t period_ms;
	uint64_t cpu_due;        /* the JVM's CPU (all threads) the next walk waits for */
	uint64_t latest;         /* ... or this time, whichever comes first */
	uint64_t gc_seen;        /* GC ring head at the last walk */
	struct mptr *mtab;       /* Method* -> jmethodID, open addressing (vp_near_slot) */
	size_t mcap, mn;
	PCStackInfo *pcinfo;
	jmethodID *ids;
	jint *bcis;
	size_t cap_pcinfo, cap_ids, cap_bcis;
	uint64_t walks, incomplete, loads, unloads, unknown, undecoded, fallback;
	/* At each GC's start (vp_scan__gc_start): the callback fills snap[snap_cur] while in_cb
	 * is set and reads pub[pub_cur]; the agent thread flips either index and waits for
	 * in_cb to clear before it touches the other buffer (sequentially consistent, so a
	 * callback that saw the old index is seen in it). */
	bool gc_walk_off;         /* option gcwalk=no (to measure what the walk at GC costs) */
	struct snap_buf snap[2];
	struct snap_pub pub[2];
	int snap_cur, pub_cur, in_cb;
	int mtab_ok;              /* the GC callback may read mtab (not while it grows) */
	struct known *eph;        /* agent thread: short-lived code found by the last take */
	const char *eph_pool;     /* ... and the names copied with it */
	size_t neph, cap_eph;
	uint64_t gc_walk_max_ns;  /* the longest walk at a GC's start (with stats) */
	uint64_t ephemeral, ephemeral_unknown, snap_lost, snap_incomplete;
	/* scancheck */
	jrawMonitorID chk_lock;
	struct vp_ch_scopes chk_sc;
	uint64_t chk_n, chk_same, chk_differ, chk_missing;
	char chk_first[256];
};

static struct scan scan = { .period_ms = SCAN_MIN_MS, .mtab_ok = 1 };


static void wait_gc_callback(void);

static size_t method_ptr_slot(uint64_t k)
{
	size_t mask = scan.mcap - 1, h = vp_near_slot(k, mask);
	while (scan.mtab[h].key && scan.mtab[h].key != k)
		h = (h + 1) & mask;
	return h;
}

/* Remembers that Method* ptr is jmethodID id (from a METHOD_PTR record, on the agent
 * thread); a later record for a reused Method* replaces the earlier one. */
int vp_scan__method_ptr(uint64_t ptr, uint64_t id, uint64_t t)
{
	if (!ptr || !id)
		return 0;
	if ((scan.mn + 1) * 2 > scan.mcap) {
		size_t ocap = scan.mcap, ncap = ocap ? ocap * 2 : 1u << 14;
		struct mptr *old = scan.mtab, *nt = calloc(ncap, sizeof(*nt));
		if (!nt)
			return -ENOMEM;
		/* The GC callback reads the table (name_written): off while it moves. */
		__atomic_store_n(&scan.mtab_ok, 0, __ATOMIC_SEQ_CST);
		wait_gc_callback();
		scan.mtab = nt;
		scan.mcap = ncap;
		scan.mn = 0;
		for (size_t i = 0; i < ocap; i++)
			if (old[i].key) {
				scan.mtab[method_ptr_slot(old[i].key)] = old[i];
				scan.mn++;
			}
		free(old);
		__atomic_store_n(&scan.mtab_ok, 1, __ATOMIC_SEQ_CST);
	}
	struct mptr *e = &scan.mtab[method_ptr_slot(ptr)];
	if (!e->key)
		scan.mn++;
	/* The value before the key: a GC callback that finds the key finds its value. */
	__atomic_store_n(&e->id, id, __ATOMIC_RELEASE);
	e->time = t;
	__atomic_store_n(&e->key, ptr, __ATOMIC_RELEASE);
	return 0;
}

/* In the GC callback (no lock, no allocation): is the name of Method* m written to the
 * map already, under a jmethodID that still leads to m? Then the agent thread will find
 * it there (queue_ephemeral) and copy_names need not read it from the metadata: at
 * javac's GCs that copy, nine process_vm_readv for each method compiled since the last
 * walk, was most of the walk at GC start. A Method* whose class was unloaded may be
 * another class's by now, its table entry the old one's: the old jmethodID's slot no
 * longer holds m (HotSpot clears it at the unload), so its names are copied. */
static bool name_written(uint64_t m)
{
	if (!__atomic_load_n(&scan.mtab_ok, __ATOMIC_SEQ_CST) || !scan.mcap || !m)
		return false;
	size_t mask = scan.mcap - 1, h = vp_near_slot(m, mask);
	for (size_t k = 0; k <= mask; k++, h = (h + 1) & mask) {
		uint64_t key = __atomic_load_n(&scan.mtab[h].key, __ATOMIC_ACQUIRE), id, now = 0;
		if (!key)
			return false;
		if (key != m)
			continue;
		id = __atomic_load_n(&scan.mtab[h].id, __ATOMIC_ACQUIRE);
		return id && !(id & 7) && vp_queue__named(id) && !vp_hs_mem__read(&vp_hs_mem_self, id, &now, 8) && now == m;
	}
	return false;
}

/* ptr's jmethodID (0: unknown) and when its class was prepared (*t, if asked). */
static uint64_t method_ptr_get(uint64_t ptr, uint64_t *t)
{
	if (!scan.mcap || !ptr)
		return 0;
	const struct mptr *e = &scan.mtab[method_ptr_slot(ptr)];
	if (t)
		*t = e->key ? e->time : 0;
	return e->key ? e->id : 0;
}

static int walk_visit(void *ctx, const struct vp_ch_nm *nm)
{
	(void)ctx;
	if (!vp_ch__alive(nm))
		return 0;
	if (vp_grow((void **)&scan.cur, &scan.cap_cur, scan.ncur + 1, sizeof(*scan.cur)))
		return -ENOMEM;
	scan.cur[scan.ncur++] = (struct known){ .blob = nm->blob, .code_start = nm->code_start, .method = nm->method,
					    .code_size = nm->code_size, .compile_id = nm->compile_id,
					    .level = nm->level, .osr = nm->osr };
	return 0;
}

/* Blobs of generated code that no JVMTI event reports but Java threads run: the
 * interpreter's native signature handlers (a buffer that HotSpot fills as native methods
 * of new signatures are first called; samples there showed as "[java code: in no code
 * map]" under an interpreted native method). Each is named as a stub once, when a walk
 * first meets it; the buffer lives as long as the JVM. */
static const char *const unreported_blobs[] = { "native signature handlers" };

static int blob_visit(void *ctx, const struct vp_ch_blob *bl)
{
	(void)ctx;
	bool wanted = false;
	for (size_t i = 0; i < sizeof(unreported_blobs) / sizeof(unreported_blobs[0]) && !wanted; i++)
		wanted = !strcmp(bl->name, unreported_blobs[i]);
	if (!wanted)
		return 0;
	for (size_t i = 0; i < scan.nblobs; i++)
		if (scan.blobs[i] == bl->code_start)
			return 0;
	if (scan.nblobs == sizeof(scan.blobs) / sizeof(scan.blobs[0]))
		return 0;
	size_t nl = strlen(bl->name);
	vp_queue__lock();
	struct vp_cm_code_blob *b = vp_queue__reserve(VP_CM_CODE_BLOB, now_ns(), sizeof(*b) + nl);
	if (b) {
		b->code_start = bl->code_start;
		b->code_size = bl->code_size;
		b->kind = VP_BLOB_STUB;
		b->name_len = (uint16_t)nl;
		memcpy(b + 1, bl->name, nl);
		scan.blobs[scan.nblobs++] = bl->code_start;
	}
	vp_queue__unlock_notify();
	return 0;
}

/* When missed code k went (see the top of this section). */
static uint64_t unload_time(const struct known *k)
{
	uint64_t t = vp_gcs__last_between(k->seen_start, k->missed_end);
	return t ? t : k->missed_end;
}

static void queue_unload(const struct known *k)
{
	vp_queue__lock();
	struct vp_cm_method_unload *b = vp_queue__reserve(VP_CM_METHOD_UNLOAD, unload_time(k), sizeof(*b));
	if (b) {
		b->code_start = k->code_start;
		b->method_id = k->jmid;
	}
	vp_queue__unlock_notify();
	scan.unloads++;
}

/* Queues METHOD_NAME for id: the class in nm->klass (a signature), the method name and
 * sig, no source file and no lines; nm is the caller's scratch. false when the queue had
 * no room (the id is then not marked seen). */
static bool queue_name(uint64_t id, struct mnames *nm, const char *name, const char *sig)
{
	vp_java_readable_class(nm->klass, nm->kreadable, sizeof(nm->kreadable));
	vp_java_readable_method(name, sig, nm->mpart, sizeof(nm->mpart));
	if (snprintf(nm->readable, sizeof(nm->readable), "%s.%s", nm->kreadable, nm->mpart) >= (int)sizeof(nm->readable))
		nm->readable[sizeof(nm->readable) - 1] = '\0';
	nm->file[0] = '\0';
	vp_queue__lock();
	void *b = vp_queue__reserve(VP_CM_METHOD_NAME, now_ns(), vp_cm_method_name__size(nm->readable, nm->file, 0));
	if (b) {
		vp_cm_method_name__fill(b, id, nm->readable, nm->file, NULL, 0);
		vp_queue__add_named(id);
	}
	vp_queue__unlock_notify();
	return b != NULL;
}

/* An id and a name for a Method* that no METHOD_PTR record gave a jmethodID (method
 * handle intrinsics are made at run time, outside any class's method list): the
 * Method* with bit 0 set (jmethodIDs and Method* are 8-aligned, so ids stay distinct
 * and queue_method_name knows not to hand it to JVMTI), named from its metadata,
 * without lines. 0 when unreadable. */
static uint64_t fallback_id(uint64_t mptr)
{
	static struct mnames nm;   /* agent thread only */
	char name[256], sig[NAME_MAX_LEN];
	uint64_t id = mptr | 1;

	if (!mptr)
		return 0;
	if (vp_queue__named(id))
		return id;
	if (vp_ch__method_names(&scan.ch, mptr, nm.klass, sizeof(nm.klass), name, sizeof(name), sig, sizeof(sig)))
		return 0;
	if (!queue_name(id, &nm, name, sig))
		return 0;
	scan.fallback++;
	return id;
}

/* Queues the load of new code k, installed after not_before;
 * sets k->jmid to its jmethodID, or 0 when its method is unknown (not named). */
static void queue_scanned_load(jvmtiEnv *jvmti, struct known *k, uint64_t not_before)
{
	struct vp_ch_nm nm = { .blob = k->blob, .code_start = k->code_start, .code_size = k->code_size,
			       .compile_id = k->compile_id, .method = k->method };
	jvmtiCompiledMethodLoadInlineRecord rec = { .header = { .kind = JVMTI_CMLR_INLINE_INFO,
								.majorinfoversion = JVMTI_CMLR_MAJOR_VERSION,
								.minorinfoversion = JVMTI_CMLR_MINOR_VERSION } };
	const void *info = NULL;

	uint64_t prepared = 0;
	/* Once per walk with new code, whether its Method* is known or not: a class prepared
	 * during the walk may have taken the Method* of an unloaded one (a starved agent
	 * thread's walk can last a generation of CodeReuse), which the table would still
	 * give to the old class's jmethodID. */
	if (!scan.redrained) {
		scan.redrained = true;
		scan.flush(0);
	}
	k->jmid = method_ptr_get(k->method, &prepared);
	/* Prepared after the walk saw this code: a later class at a reused Method*, and
	 * so is the metadata there now (no fallback name either). */
	if (k->jmid && prepared > scan.walk_end) {
		scan.unknown++;
		k->jmid = 0;
		return;
	}
	/* Nor can it have run before its class was prepared, or before code it replaced went. */
	if (prepared > not_before)
		not_before = prepared;
	if (k->after > not_before)
		not_before = k->after;
	if (!k->jmid)
		k->jmid = fallback_id(k->method);
	if (!k->jmid) {
		scan.unknown++;
		return;
	}
	if (!vp_stats__no_inline()) {
		int err = vp_ch__scopes(&scan.ch, &nm, &scan.sc);
		bool ok = !err && !vp_grow((void **)&scan.pcinfo, &scan.cap_pcinfo, scan.sc.npcs + 1, sizeof(*scan.pcinfo)) &&
			  !vp_grow((void **)&scan.ids, &scan.cap_ids, scan.sc.nframes + 1, sizeof(*scan.ids)) &&
			  !vp_grow((void **)&scan.bcis, &scan.cap_bcis, scan.sc.nframes + 1, sizeof(*scan.bcis));
		/* An nmethod's frames name few methods many times over (every pc repeats its
		 * outer scopes): each Method* is looked up in the table once per nmethod, in
		 * a small cache, not once per frame (a cache miss in a table of every method). */
		static struct { uint64_t m, id; uint32_t gen; } memo[256];
		static uint32_t gen;
		if (++gen == 0) {
			memset(memo, 0, sizeof(memo));
			gen = 1;
		}
		for (size_t i = 0; ok && i < scan.sc.nframes; i++) {
			uint64_t m = scan.sc.frames[i].method, id;
			size_t slot = (size_t)((m >> 3) ^ (m >> 11)) & 255;
			if (memo[slot].gen == gen && memo[slot].m == m) {
				id = memo[slot].id;
			} else {
				id = method_ptr_get(m, NULL);
				if (!id)
					id = fallback_id(m);
				memo[slot].m = m;
				memo[slot].id = id;
				memo[slot].gen = gen;
			}
			scan.ids[i] = (jmethodID)(uintptr_t)id;
			scan.bcis[i] = scan.sc.frames[i].bci;
			ok = scan.ids[i] != NULL;
		}
		for (size_t i = 0; ok && i < scan.sc.npcs; i++) {
			const struct vp_ch_pc *p = &scan.sc.pcs[i];
			scan.pcinfo[i] = (PCStackInfo){ .pc = (void *)(uintptr_t)(k->code_start + p->pc_offset),
						      .numstackframes = (jint)p->depth, .methods = scan.ids + p->first,
						      .bcis = scan.bcis + p->first };
		}
		if (ok) {
			rec.numpcs = (jint)scan.sc.npcs;
			rec.pcinfo = scan.pcinfo;
			info = &rec;
		} else {
			scan.undecoded++;
		}
	}
	vp_loads__compiled(jvmti, (jmethodID)(uintptr_t)k->jmid, (jint)k->code_size, (const void *)(uintptr_t)k->code_start,
		      info, not_before, (uint8_t)k->level, k->osr ? VP_CM_LOAD_OSR : 0);
	scan.loads++;
}

static bool overlaps(const struct known *a, const struct known *b)
{
	return a->code_start < b->code_start + (b->code_size ? b->code_size : 1) &&
	       b->code_start < a->code_start + (a->code_size ? a->code_size : 1);
}

static int cmp_known(const void *a, const void *b)
{
	const struct known *x = a, *y = b;
	return x->blob < y->blob ? -1 : x->blob > y->blob;
}

/* ---- the code heap at each GC's start ----
 * A walk every 50-800 ms misses code that is installed and freed between two walks: a
 * starved agent thread (a busy machine) walked after the GC that freed a generation's
 * code, whose samples then lay in no code map (issue 32). The GC cannot overtake a read
 * made at its own start: GarbageCollectionStart runs on the VM thread at the safepoint,
 * before anything is unlinked or freed, and no compiler thread can install code until
 * the safepoint ends. There the callback walks the heaps (plain loads, as the agent
 * thread's walk) and copies, into a preallocated buffer, every compiled method that the
 * last completed walk did not hold (pub: blobs and compile ids, sorted). It takes no
 * lock and calls no JVMTI function: a Java thread holding one of ours may be blocked for
 * this very safepoint.
 *
 * The agent thread's next complete walk takes the buffer: what it found again is
 * ordinary new code; what is gone now (vp_ch__find no longer finds it) lived only
 * between two walks and gets a load dated at the start of the walk it was missing from
 * (or its class's preparation, or the unload of code it replaced) and an unload at the
 * end of the first GC after the last start that saw it: the earliest it can have run,
 * and a GC that provably had not freed it before it began. Its method's jmethodID comes
 * from the METHOD_PTR records when its name was written (when its class was prepared);
 * a starved agent thread may come to that record after the class was unloaded, so the
 * callback also copies the method's names from its metadata (the safe reader, into a
 * preallocated pool) while the class is still loaded. Its debug information may be
 * freed by now: no inlining. The cost: bench/gcwalk-cost.sh. */

/* Is (blob, compile id) in the last walk's published list? pos: a cursor, as the GC's
 * walk goes in address order too. */
static bool pub_has(const struct snap_pub *p, size_t *pos, uint64_t blob, int32_t cid)
{
	size_t i = *pos;
	if (i > p->n || (i > 0 && p->blob[i - 1] > blob)) {
		size_t lo = 0, hi = p->n;   /* out of order: search */
		while (lo < hi) {
			size_t mid = (lo + hi) / 2;
			if (p->blob[mid] < blob)
				lo = mid + 1;
			else
				hi = mid;
		}
		i = lo;
	}
	while (i < p->n && p->blob[i] < blob)
		i++;
	*pos = i;
	for (size_t k = i; k < p->n && p->blob[k] == blob; k++)
		if (p->cid[k] == cid)
			return true;
	return false;
}

struct gc_walk {
	struct snap_buf *b;
	const struct snap_pub *p;
	size_t pos;
	uint64_t t;
	char klass[512], name[256], sig[1024];
};

/* The names of Method* m into b's pool (UINT32_MAX when they do not fit or cannot be
 * read): its class may be unloaded by this GC before the agent thread names it. */
static uint32_t copy_names(struct gc_walk *w, uint64_t m)
{
	struct snap_buf *b = w->b;
	if (vp_ch__method_names(&scan.ch, m, w->klass, sizeof(w->klass), w->name, sizeof(w->name), w->sig,
				sizeof(w->sig)))
		return UINT32_MAX;
	size_t kl = strlen(w->klass) + 1, nl = strlen(w->name) + 1, sl = strlen(w->sig) + 1;
	if (b->pool_used + kl + nl + sl > SNAP_POOL)
		return UINT32_MAX;
	uint32_t at = b->pool_used;
	memcpy(b->pool + at, w->klass, kl);
	memcpy(b->pool + at + kl, w->name, nl);
	memcpy(b->pool + at + kl + nl, w->sig, sl);
	b->pool_used += (uint32_t)(kl + nl + sl);
	return at;
}

/* In the GC callback: no allocation, no lock. */
static int gc_visit(void *ctx, const struct vp_ch_nm *nm)
{
	struct gc_walk *w = ctx;
	if (!vp_ch__alive(nm) || pub_has(w->p, &w->pos, nm->blob, nm->compile_id))
		return 0;
	if (w->b->n >= SNAP_CAP) {
		w->b->lost++;
		return 0;
	}
	/* Names only once a walk was published: before it, everything is new. */
	uint32_t names = w->p->start && !name_written(nm->method) ? copy_names(w, nm->method) : UINT32_MAX;
	w->b->v[w->b->n++] = (struct snap_nm){ .blob = nm->blob, .code_start = nm->code_start, .method = nm->method,
					       .t = w->t, .since = w->p->start, .code_size = nm->code_size,
					       .compile_id = nm->compile_id, .names = names, .level = nm->level,
					       .osr = nm->osr };
	return 0;
}

void vp_scan__gc_start(void)
{
	struct st_mark m;
	if (!scan.on || scan.gc_walk_off || !scan.snap[0].v || !scan.snap[1].v)
		return;
	vp_stats__begin(&m);
	__atomic_store_n(&scan.in_cb, 1, __ATOMIC_SEQ_CST);
	int sc = __atomic_load_n(&scan.snap_cur, __ATOMIC_SEQ_CST), pc = __atomic_load_n(&scan.pub_cur, __ATOMIC_SEQ_CST);
	static struct gc_walk w;   /* one GC callback at a time (the VM thread) */
	w = (struct gc_walk){ .b = &scan.snap[sc], .p = &scan.pub[pc], .t = now_ns() };
	/* An incomplete walk keeps what it copied: each entry was code in the heap. */
	if (vp_ch__walk(&scan.ch, gc_visit, &w))
		w.b->incomplete++;
	__atomic_store_n(&scan.in_cb, 0, __ATOMIC_SEQ_CST);
	vp_stats__end(ST_GC_WALK, &m);
	if (vp_stats__on() && now_ns() - w.t > scan.gc_walk_max_ns)
		scan.gc_walk_max_ns = now_ns() - w.t;
}

/* Waits until no GC callback reads or fills a buffer it may have picked before a flip;
 * the callback's walk takes well under a millisecond. */
static void wait_gc_callback(void)
{
	while (__atomic_load_n(&scan.in_cb, __ATOMIC_SEQ_CST)) {
		struct timespec ts = { 0, 100000 };
		nanosleep(&ts, NULL);
	}
}

/* Publishes the walk that started at start (scan.next, sorted by blob) for the GC
 * callback; on failure to grow the list the old one stays (the callback then copies
 * more than it needs). */
static void publish_walk(uint64_t start)
{
	if (!scan.snap[0].v)
		return;
	int cur = __atomic_load_n(&scan.pub_cur, __ATOMIC_SEQ_CST);
	struct snap_pub *p = &scan.pub[cur ^ 1];
	wait_gc_callback();
	size_t cap_b = p->cap, cap_c = p->cap;
	if (vp_grow((void **)&p->blob, &cap_b, scan.nnext + 1, sizeof(*p->blob)) ||
	    vp_grow((void **)&p->cid, &cap_c, scan.nnext + 1, sizeof(*p->cid)))
		return;
	p->cap = cap_b < cap_c ? cap_b : cap_c;
	for (size_t i = 0; i < scan.nnext; i++) {
		p->blob[i] = scan.next[i].blob;
		p->cid[i] = scan.next[i].compile_id;
	}
	p->n = scan.nnext;
	p->start = start;
	__atomic_store_n(&scan.pub_cur, cur ^ 1, __ATOMIC_SEQ_CST);
}

static int cmp_snap(const void *a, const void *b)
{
	const struct snap_nm *x = a, *y = b;
	if (x->blob != y->blob)
		return x->blob < y->blob ? -1 : 1;
	if (x->compile_id != y->compile_id)
		return x->compile_id < y->compile_id ? -1 : 1;
	return x->t < y->t ? -1 : x->t > y->t;
}

/* Is code (blob, compile id, method) in scan.next (sorted by blob)? */
static bool next_has(uint64_t blob, int32_t cid, uint64_t method)
{
	size_t lo = 0, hi = scan.nnext;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (scan.next[mid].blob < blob)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t k = lo; k < scan.nnext && scan.next[k].blob == blob; k++)
		if (scan.next[k].compile_id == cid && scan.next[k].method == method)
			return true;
	return false;
}

/* Takes what the GC callbacks copied since the last complete walk and keeps, in
 * scan.eph, the code that came and went between two walks (see the section's top), with
 * its unload time in missed_end and the unloads of older code it replaced in after.
 * Marks the code of scan.next that such code proves gone (K_GONE), and raises the
 * load time of new code that took its place. Before the unloads are queued. */
static void take_gc_snapshots(uint64_t now)
{
	scan.neph = 0;
	if (!scan.snap[0].v)
		return;
	int cur = __atomic_load_n(&scan.snap_cur, __ATOMIC_SEQ_CST);
	__atomic_store_n(&scan.snap_cur, cur ^ 1, __ATOMIC_SEQ_CST);
	wait_gc_callback();
	struct snap_buf *b = &scan.snap[cur];
	scan.eph_pool = b->pool;   /* read by queue_ephemeral before the buffer is flipped back */
	scan.snap_lost += b->lost;
	scan.snap_incomplete += b->incomplete;
	if (b->n > 1)
		qsort(b->v, b->n, sizeof(*b->v), cmp_snap);
	for (uint32_t i = 0; i < b->n; i++) {
		const struct snap_nm *e = &b->v[i];
		/* Of one code's copies (one per GC) the last, which ends its life latest. */
		if (i + 1 < b->n && b->v[i + 1].blob == e->blob && b->v[i + 1].compile_id == e->compile_id &&
		    b->v[i + 1].method == e->method)
			continue;
		if (next_has(e->blob, e->compile_id, e->method) || e->t < scan.reset_t)
			continue;   /* this walk found it (ordinary new code), or an earlier session's */
		struct vp_ch_nm now_nm;
		if (!vp_ch__find(&scan.ch, e->code_start, &now_nm) && now_nm.blob == e->blob &&
		    now_nm.compile_id == e->compile_id && now_nm.method == e->method)
			continue;   /* still there, installed after the walk passed: the next walk's */
		if (vp_grow((void **)&scan.eph, &scan.cap_eph, scan.neph + 1, sizeof(*scan.eph)))
			break;
		uint64_t end = vp_gcs__first_after(e->t);
		scan.eph[scan.neph++] = (struct known){ .blob = e->blob, .code_start = e->code_start, .method = e->method,
						       .code_size = e->code_size, .compile_id = e->compile_id,
						       .level = e->level, .osr = e->osr, .seen_start = e->since,
						       .missed_end = end ? end : now, .gc_t = e->t, .names = e->names,
						       .mark = K_NEW };
	}
	b->n = b->lost = b->incomplete = b->pool_used = 0;
	/* Code of this walk's list at the same addresses: older code (missed now) was gone
	 * before the short-lived code came; newer code came after it went. Short-lived code
	 * at the same addresses as other short-lived code: the earlier ended first. */
	for (size_t a = 0; a < scan.neph; a++) {
		struct known *x = &scan.eph[a];
		for (size_t k = 0; k < scan.nnext; k++) {
			struct known *o = &scan.next[k];
			if (!overlaps(x, o))
				continue;
			if (o->mark == K_MISSED || o->mark == K_GONE) {
				/* Gone before x came, so by the last GC before x was copied (JDK 20+
				 * frees code only at GC), not the last GC before this walk: dated
				 * that late, its life would overlap x's. */
				uint64_t u = vp_gcs__last_between(o->seen_start, x->gc_t);
				if (!u)
					u = unload_time(o) < x->gc_t ? unload_time(o) : x->gc_t;
				if (u < unload_time(o))
					o->missed_end = u;
				o->mark = K_GONE;
				if (unload_time(o) > x->after)
					x->after = unload_time(o);
			} else if (o->mark == K_NEW && x->missed_end > o->after) {
				o->after = x->missed_end;
			}
		}
		for (size_t k = 0; k < scan.neph; k++) {
			struct known *y = &scan.eph[k];
			if (k != a && overlaps(x, y) && y->missed_end < x->missed_end && y->missed_end > x->after)
				x->after = y->missed_end;
		}
	}
}

/* An id and a METHOD_NAME for short-lived code whose method has no name written (its
 * class was unloaded before the agent thread named it), from the names the GC callback
 * copied. Not the Method* (fallback_id's): a Method* of an unloaded class is reused by
 * the next class, which must not inherit this name. Bit 0 set as fallback_id's (no
 * jmethodID), bit 63 set (no user-space Method*). 0 when none was copied. */
static uint64_t copied_id(const struct known *k)
{
	static struct mnames nm;   /* agent thread only */
	static uint64_t serial;
	if (k->names == UINT32_MAX || !scan.eph_pool)
		return 0;
	const char *klass = scan.eph_pool + k->names, *name = klass + strlen(klass) + 1, *sig = name + strlen(name) + 1;
	uint64_t id = (1ull << 63) | (++serial << 1) | 1;
	snprintf(nm.klass, sizeof(nm.klass), "%s", klass);
	return queue_name(id, &nm, name, sig) ? id : 0;
}

/* Queues the load and the unload of each short-lived code take_gc_snapshots kept. */
static void queue_ephemeral(jvmtiEnv *jvmti)
{
	/* Every class with code in the copies was prepared before the GC that copied it:
	 * its METHOD_PTR record is queued, and written (and named, if it still can be) now. */
	if (scan.neph)
		scan.flush(0);
	for (size_t a = 0; a < scan.neph; a++) {
		struct known *k = &scan.eph[a];
		uint64_t prepared = 0, not_before = k->seen_start;
		k->jmid = method_ptr_get(k->method, &prepared);
		/* A Method* prepared after the GC that saw the code is a later class's, at the
		 * address of the unloaded one; one without a name written lost its class first. */
		if (k->jmid && (prepared > k->gc_t || !vp_queue__named(k->jmid))) {
			k->jmid = 0;
			prepared = 0;   /* that time is the other class's */
		}
		if (!k->jmid)
			k->jmid = copied_id(k);
		if (!k->jmid) {
			scan.ephemeral_unknown++;   /* no name from metadata that may be freed */
			continue;
		}
		if (prepared > not_before)
			not_before = prepared;
		if (k->after > not_before)
			not_before = k->after;
		if (not_before > k->missed_end)
			not_before = k->missed_end;
		vp_loads__compiled(jvmti, (jmethodID)(uintptr_t)k->jmid, (jint)k->code_size,
			      (const void *)(uintptr_t)k->code_start, NULL, not_before, (uint8_t)k->level,
			      k->osr ? VP_CM_LOAD_OSR : 0);
		vp_queue__lock();
		struct vp_cm_method_unload *b = vp_queue__reserve(VP_CM_METHOD_UNLOAD, k->missed_end, sizeof(*b));
		if (b) {
			b->code_start = k->code_start;
			b->method_id = k->jmid;
		}
		vp_queue__unlock_notify();
		scan.ephemeral++;
	}
	scan.neph = 0;
}

static uint64_t cpu_ns(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* One walk and its diff against the previous one; on the agent thread. */
void vp_scan__walk(jvmtiEnv *jvmti)
{
	struct st_mark m, md;

	if (!scan.on || vp_stats__noop())
		return;
	/* Every class with code the walk can meet was prepared before that code was made,
	 * and its METHOD_PTR record queued: write those first, so that each Method* is known
	 * (a class prepared during the walk is written in queue_scanned_load). */
	scan.flush(0);
	scan.redrained = false;
	uint64_t start = now_ns();
	vp_stats__begin(&m);
	scan.ncur = 0;
	scan.gc_seen = vp_gcs__count();
	uint64_t cpu0 = cpu_ns(CLOCK_THREAD_CPUTIME_ID);
	int err = vp_ch__walk_all(&scan.ch, walk_visit, blob_visit, NULL);
	uint64_t end = now_ns();
	/* The next walk waits for the JVM to do WALK_DUTY times this walk's work. */
	scan.cpu_due = cpu_ns(CLOCK_PROCESS_CPUTIME_ID) + (cpu_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0) * WALK_DUTY;
	scan.latest = end + SCAN_MAX_MS * 1000000ull;
	scan.walk_end = end;
	scan.walks++;
	if (err) {
		scan.incomplete++;
		scan.due = end + SCAN_MIN_MS * 1000000ull;
		vp_stats__end(ST_SCAN, &m);
		return;
	}
	/* The walk goes in address order; sort only if the heaps overlapped oddly. */
	for (size_t i = 1; i < scan.ncur; i++)
		if (scan.cur[i - 1].blob > scan.cur[i].blob) {
			qsort(scan.cur, scan.ncur, sizeof(*scan.cur), cmp_known);
			break;
		}
	vp_stats__end(ST_SCAN, &m);
	vp_stats__begin(&md);

	/* Merge by blob address: carried over, new, or missed. */
	size_t i = 0, j = 0, fresh = 0, gone = 0;
	scan.nnext = 0;
	if (vp_grow((void **)&scan.next, &scan.cap_next, scan.nprev + scan.ncur + 1, sizeof(*scan.next)))
		goto out;
	while (i < scan.nprev || j < scan.ncur) {
		struct known *p = i < scan.nprev ? &scan.prev[i] : NULL, *c = j < scan.ncur ? &scan.cur[j] : NULL;
		if (p && c && p->blob == c->blob && p->compile_id == c->compile_id && p->method == c->method) {
			struct known k = *p;
			k.seen_start = start;
			k.mark = K_SEEN;
			scan.next[scan.nnext++] = k;
			i++, j++;
		} else if (p && (!c || p->blob <= c->blob)) {
			/* Missed: kept once, gone when missed again or replaced at its address. */
			struct known k = *p;
			if (k.mark != K_MISSED)
				k.missed_end = end;
			k.mark = k.mark == K_MISSED || (c && p->blob == c->blob) ? K_GONE : K_MISSED;
			scan.next[scan.nnext++] = k;
			i++;
		} else {
			struct known k = *c;
			k.seen_start = start;
			k.mark = K_NEW;
			scan.next[scan.nnext++] = k;
			j++;
		}
	}
	/* New code that overlaps missed code proves that code gone, and came after it. */
	for (size_t a = 0; a < scan.nnext; a++) {
		struct known *n = &scan.next[a];
		if (n->mark != K_NEW)
			continue;
		n->after = 0;
		for (size_t b = a > 64 ? a - 64 : 0; b < scan.nnext && b < a + 64; b++) {
			struct known *o = &scan.next[b];
			if (b == a || (o->mark != K_MISSED && o->mark != K_GONE) || !overlaps(n, o))
				continue;
			o->mark = K_GONE;
			if (unload_time(o) > n->after)
				n->after = unload_time(o);
		}
	}
	/* What the GCs' own walks found that this one did not. */
	take_gc_snapshots(end);
	/* Unloads first (new code may take their place), then loads. */
	size_t keep = 0;
	for (size_t a = 0; a < scan.nnext; a++) {
		struct known *k = &scan.next[a];
		if (k->mark == K_GONE) {
			if (k->jmid)
				queue_unload(k);
			gone++;
			continue;
		}
		scan.next[keep++] = *k;
	}
	scan.nnext = keep;
	fresh += scan.neph;
	queue_ephemeral(jvmti);
	for (size_t a = 0; a < scan.nnext; a++) {
		struct known *k = &scan.next[a];
		if (k->mark != K_NEW)
			continue;
		k->mark = K_SEEN;
		queue_scanned_load(jvmti, k, scan.last_start);
		fresh++;
		if ((fresh & 63) == 0)
			scan.flush(VP_QUEUE_BYTES / 2);   /* before the queue fills */
	}
	scan.last_start = start;
	publish_walk(start);
	struct known *t = scan.prev;
	size_t tc = scan.cap_prev;
	scan.prev = scan.next;
	scan.cap_prev = scan.cap_next;
	scan.nprev = scan.nnext;
	scan.next = t;
	scan.cap_next = tc;
	/* Busy code heaps are walked often, quiet ones less and less. */
	scan.period_ms = fresh || gone ? SCAN_MIN_MS : scan.period_ms * 2 > SCAN_MAX_MS ? SCAN_MAX_MS : scan.period_ms * 2;
out:
	scan.due = now_ns() + (uint64_t)scan.period_ms * 1000000ull;
	if (fresh || gone)
		vp_stats__end(ST_SCAN_DECODE, &md);
}

/* A walk is due: a GC finished since the last one, or its time came and the JVM did
 * its share of work since (WALK_DUTY), or SCAN_MAX_MS went by. */
bool vp_scan__due(void)
{
	if (!scan.on || vp_stats__noop())
		return false;
	if (vp_gcs__count() != scan.gc_seen)
		return true;
	uint64_t t = now_ns();
	return t >= scan.due && (t >= scan.latest || cpu_ns(CLOCK_PROCESS_CPUTIME_ID) >= scan.cpu_due);
}

/* Milliseconds the agent thread may wait for queue records before it asks
 * vp_scan__due again: until the next walk's time, then every SCAN_MIN_MS (the JVM's
 * CPU is read then) until SCAN_MAX_MS. */
jlong vp_scan__wait_ms(void)
{
	if (!scan.on || vp_stats__noop())
		return 1000;
	uint64_t t = now_ns(), next = scan.due;
	if (next <= t) {
		next = t + SCAN_MIN_MS * 1000000ull;
		if (scan.latest < next)
			next = scan.latest > t ? scan.latest : t;
	}
	return (jlong)((next - t) / 1000000ull) + 1;
}

/* A new session's map starts with every live method again, as at an attach. */
void vp_scan__reset(void)
{
	scan.reset_t = now_ns();
	scan.nblobs = 0;   /* a new session's map names them again */
	scan.nprev = 0;
	scan.last_start = 0;
	scan.due = 0;
	scan.cpu_due = 0;
	scan.latest = 0;
	scan.period_ms = SCAN_MIN_MS;
}

/* Option scancheck: CompiledMethodLoad stays on, and each event's method is looked up
 * in the code heap and decoded as a walk would, then compared with what HotSpot gave.
 * A test mode (it runs on the Service Thread and allocates); the counts are printed
 * when the agent stops. */
static void scan_check_differ(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void scan_check_differ(const char *fmt, ...)
{
	va_list ap;
	scan.chk_differ++;
	if (scan.chk_first[0])
		return;
	va_start(ap, fmt);
	vsnprintf(scan.chk_first, sizeof(scan.chk_first), fmt, ap);
	va_end(ap);
}

/* Two Method* for one method. The code of a method handle intrinsic (linkToStatic,
 * invokeBasic: signature-polymorphic, one Method* made per signature at run time) names
 * its own Method*, but the event's jmethodID for it can lead to another intrinsic (seen
 * on JDK 17 and 25: an event said invokeBasic(Object[]) for linkToStatic's code): those
 * the check takes as equal, the walk's name being the right one. */
static bool same_method(uint64_t a, uint64_t b)
{
	static char k1[512], n1[256], s1[1024], k2[512], n2[256], s2[1024];   /* under chk_lock */
	if (a == b)
		return true;
	return !vp_ch__method_names(&scan.ch, a, k1, sizeof(k1), n1, sizeof(n1), s1, sizeof(s1)) &&
	       !vp_ch__method_names(&scan.ch, b, k2, sizeof(k2), n2, sizeof(n2), s2, sizeof(s2)) && !strcmp(k1, k2) &&
	       ((!strcmp(n1, n2) && !strcmp(s1, s2)) || !strcmp(k1, "Ljava/lang/invoke/MethodHandle;"));
}

void vp_scan__check(jmethodID method, jint code_size, const void *code_addr, const void *compile_info)
{
	const jvmtiCompiledMethodLoadInlineRecord *inl = vp_loads__find_inline(compile_info);
	struct vp_ch_nm nm;

	(*scan.jvmti)->RawMonitorEnter(scan.jvmti, scan.chk_lock);
	scan.chk_n++;
	if (vp_ch__find(&scan.ch, (uint64_t)(uintptr_t)code_addr, &nm)) {
		scan.chk_missing++;
		goto out;
	}
	uint64_t mptr = *(volatile uint64_t *)method;
	if (nm.code_start != (uint64_t)(uintptr_t)code_addr || nm.code_size != (uint32_t)code_size ||
	    !same_method(nm.method, mptr)) {
		char k1[256] = "?", n1[128] = "?", s1[256] = "?", k2[256] = "?", n2[128] = "?", s2[256] = "?";
		vp_ch__method_names(&scan.ch, mptr, k1, sizeof(k1), n1, sizeof(n1), s1, sizeof(s1));
		vp_ch__method_names(&scan.ch, nm.method, k2, sizeof(k2), n2, sizeof(n2), s2, sizeof(s2));
		scan_check_differ("code at %p: event %d bytes %s.%s%s, heap %#llx %u bytes %s.%s%s", code_addr,
				  (int)code_size, k1, n1, s1, (unsigned long long)nm.code_start, nm.code_size, k2, n2, s2);
		goto out;
	}
	int err = vp_ch__scopes(&scan.ch, &nm, &scan.chk_sc);
	if (err) {
		scan_check_differ("code at %p: decoding failed: %s", code_addr, strerror(-err));
		goto out;
	}
	size_t n = 0;
	for (jint i = 0; inl && i < inl->numpcs; i++) {
		const PCStackInfo *pc = &inl->pcinfo[i];
		if (n >= scan.chk_sc.npcs) {
			scan_check_differ("code at %p: event has more pcs (%d) than the decode (%zu)", code_addr,
					  (int)inl->numpcs, scan.chk_sc.npcs);
			goto out;
		}
		const struct vp_ch_pc *d = &scan.chk_sc.pcs[n++];
		if ((uint64_t)(uintptr_t)pc->pc != nm.code_start + d->pc_offset || (uint32_t)pc->numstackframes != d->depth) {
			scan_check_differ("code at %p: pc %zu: event %p depth %d, decode +%u depth %u", code_addr, n - 1,
					  pc->pc, (int)pc->numstackframes, d->pc_offset, d->depth);
			goto out;
		}
		for (jint k = 0; k < pc->numstackframes; k++) {
			const struct vp_ch_frame *f = &scan.chk_sc.frames[d->first + (size_t)k];
			uint64_t em = pc->methods[k] ? *(volatile uint64_t *)pc->methods[k] : 0;
			if (!same_method(em, f->method) || pc->bcis[k] != f->bci) {
				scan_check_differ("code at %p: pc %zu frame %d: event method %#llx bci %d, decode %#llx bci %d",
						  code_addr, n - 1, (int)k, (unsigned long long)em, (int)pc->bcis[k],
						  (unsigned long long)f->method, (int)f->bci);
				goto out;
			}
		}
	}
	if (inl && n != scan.chk_sc.npcs) {
		scan_check_differ("code at %p: decode has more pcs (%zu) than the event (%zu)", code_addr,
				  scan.chk_sc.npcs, n);
		goto out;
	}
	scan.chk_same++;
out:
	(*scan.jvmti)->RawMonitorExit(scan.jvmti, scan.chk_lock);
}

void vp_scan__print(void)
{

	if (scan.check)
		fprintf(stderr, "viprof agent: scan check: %llu loads, %llu same, %llu differ, %llu not found%s%s\n",
			(unsigned long long)scan.chk_n, (unsigned long long)scan.chk_same, (unsigned long long)scan.chk_differ,
			(unsigned long long)scan.chk_missing, scan.chk_first[0] ? "; first: " : "", scan.chk_first);
	if (vp_stats__on() && scan.on)
		fprintf(stderr, "viprof agent stats: code heap walks=%llu incomplete=%llu loads=%llu unloads=%llu "
			"unknown_methods=%llu undecoded=%llu named_from_metadata=%llu\n", (unsigned long long)scan.walks,
			(unsigned long long)scan.incomplete, (unsigned long long)scan.loads, (unsigned long long)scan.unloads,
			(unsigned long long)scan.unknown, (unsigned long long)scan.undecoded, (unsigned long long)scan.fallback);
	if (vp_stats__on() && scan.on && !scan.gc_walk_off)
		fprintf(stderr, "viprof agent stats: walks at GC start=%llu longest_us=%.1f short_lived_loads=%llu "
			"short_lived_unknown=%llu lost=%llu incomplete=%llu\n", (unsigned long long)vp_stats__n(ST_GC_WALK),
			scan.gc_walk_max_ns / 1e3, (unsigned long long)scan.ephemeral,
			(unsigned long long)scan.ephemeral_unknown, (unsigned long long)scan.snap_lost,
			(unsigned long long)scan.snap_incomplete);
}

/* Where code loads come from: walks of the code heaps when this JVM's layout is one
 * codeheap.c reads (and jit=events was not asked for), else CompiledMethodLoad. With
 * walks the agent sets DebugNonSafepoints as enabling that event would have, so that
 * samples between safepoints keep their inlined frames. */
void vp_scan__choose_source(jvmtiEnv *jvmti, const struct vp_hs_vm *vm, void (*flush)(size_t at_least))
{
	char why[160] = "no HotSpot VM structure tables";

	scan.jvmti = jvmti;
	scan.flush = flush;
	bool ok = vm && vp_ch__init(&scan.ch, vm, &vp_hs_mem_direct, &vp_hs_mem_self, why, sizeof(why)) == 0;

	if (scan.check) {
		if (!ok || (*jvmti)->CreateRawMonitor(jvmti, "viprof-scancheck", &scan.chk_lock) != JVMTI_ERROR_NONE) {
			fprintf(stderr, "viprof agent: scancheck: %s\n", ok ? "no raw monitor" : why);
			scan.check = false;
		}
	} else if (ok && !scan.forced_events) {
		scan.on = true;
		vp_agent__debug_nonsafepoints(vm);
		/* For the walk at each GC's start, which cannot allocate: without the buffers
		 * there is none (only the periodic walks). */
		if (!scan.gc_walk_off) {
			for (int i = 0; i < 2; i++) {
				scan.snap[i].v = calloc(SNAP_CAP, sizeof(*scan.snap[i].v));
				scan.snap[i].pool = malloc(SNAP_POOL);
			}
			if (!scan.snap[0].v || !scan.snap[1].v || !scan.snap[0].pool || !scan.snap[1].pool) {
				for (int i = 0; i < 2; i++) {
					free(scan.snap[i].v);
					free(scan.snap[i].pool);
					scan.snap[i].v = NULL;
					scan.snap[i].pool = NULL;
				}
				scan.gc_walk_off = true;
			}
		}
	}
}

bool vp_scan__option(const char *p, size_t len)
{
	if (len == 10 && !strncmp(p, "jit=events", 10))
		scan.forced_events = true;
	else if (len == 8 && !strncmp(p, "jit=scan", 8))
		scan.forced_events = false;
	else if (len == 9 && !strncmp(p, "scancheck", 9))
		scan.check = true;
	else if (len == 9 && !strncmp(p, "gcwalk=no", 9))
		scan.gc_walk_off = true;
	else
		return false;
	return true;
}

bool vp_scan__on(void)
{
	return scan.on;
}

bool vp_scan__checking(void)
{
	return scan.check;
}

bool vp_scan__at_gc(void)
{
	return scan.on && !scan.gc_walk_off;
}

void vp_scan__free(void)
{
	vp_ch__scopes_free(&scan.sc);
}
