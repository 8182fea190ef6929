/* The JVMTI agent's shared state and the helpers its parts share: the record queue, the
 * method-name records, measurement. Internal to jvm-agent/ (agent.c, walk.c).
 *
 * Callbacks run on JVM threads and only append finished records to the preallocated
 * queue under agent.lock; they never malloc. Everything else runs on the agent thread. */
#ifndef VIPROF_JVM_AGENT_AGENT_H
#define VIPROF_JVM_AGENT_AGENT_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jvmti.h>
#include <jvmticmlr.h>

#include "common/chunkfile.h"
#include "hotspot/codeheap.h"
#include "hotspot/vmstructs.h"
#include "maps/codemap_format.h"
#include "maps/codemap_writer.h"

/* Each of the two queue halves; callbacks fill one while the agent thread writes the
 * other. Only touched pages cost memory. */
#define QUEUE_BYTES (8u << 20)
#define NAME_MAX_LEN 1024
#define MAX_LINES 2048
#define SEEN_SLOTS (1u << 18) /* method ids already named; open addressing, no growth */

/* GC finish times, published lock-free by the GC callback (see cb_gc_finish). */
#define GC_RING 64

/* Where one session's maps go: dir=, and lock= when a recorder holds that file locked
 * for as long as its session lasts (the agent stops writing when the lock is free). */
struct session_opts {
	char dir[PATH_MAX];
	char lock[PATH_MAX];
	bool default_dir;      /* no dir= option: the per-user default under /tmp */
	/* fds=SOCKET: the recorder hands over, on that Unix socket, the session's own
	 * jit/<pid> directory and its lock file as descriptors (map_fd, lock_fd; -1 until
	 * received), so that a JVM in a container, or one whose user cannot reach the
	 * session's path, writes straight into the session and nothing into its own /tmp. */
	char sock[PATH_MAX];
	int map_fd, lock_fd;
	/* The connection they came on, kept: the recorder's next session comes on it
	 * (channel_thread) instead of another attach. -1 if none. */
	int chan_fd;
	/* alloc=BYTES (0: off) and locks=NS (-1: off): each session says what it records. */
	uint64_t alloc;
	int64_t locks;
};

struct agent {
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
	uint32_t gc_id[GC_RING], gc_full[GC_RING];   /* the JVM's counters after each (gc_info) */
	uint8_t gc_kind[GC_RING];                    /* enum vp_cm_gc_kind */
	uint64_t gc_head;      /* published with release semantics */
	uint64_t gc_tail;      /* writer side */

	/* Agent thread only (or the unloading thread once the agent thread is gone). */
	struct vp_cm_writer *w; /* the map: its epochs and encoders (maps/codemap_writer.h) */
	uint64_t last_flush;
	bool warned_drops;

	/* Method* records (interpreted frames): -1 unusable here, 0 not checked, 1 usable. */
	volatile int method_ptrs;
	bool classes_enumerated;
	bool threads_named;    /* this session has the names of the threads it found running */
	JNIEnv *agent_jni;     /* the agent thread's, for its local reference frames */
	uint64_t *named;       /* name_ptr_methods' scratch: ids named from one record */
	size_t named_cap;
	bool default_dir;      /* no dir= option: the per-user default under /tmp */

	/* The session's end: a recorder holds lock_path locked while it records. */
	char lock_path[PATH_MAX];
	int lock_fd;
	uint64_t lock_checked;
	/* Handed over by the recorder (fds=), taken by watch_open and open_file; -1 if none. */
	int given_map_fd, given_lock_fd;
	/* The channel of the attach in progress, for Agent_OnAttach to start its thread. */
	int new_chan;

	/* A new session (another attach), under lock: the attach thread asks (switch_want),
	 * the agent thread switches files and answers (switch_done, switch_err). */
	struct session_opts next;
	uint64_t switch_want, switch_done;
	int switch_err;
};
extern struct agent agent;

/* ---- measurement (option "stats" or VIPROF_AGENT_STATS=1; off by default) ---- */
enum st_kind {
	ST_LOAD, ST_UNLOAD, ST_DYNAMIC, ST_PREPARE, ST_GC, ST_WRITER, ST_WRITER_NAMES, ST_SCAN, ST_SCAN_DECODE,
	ST_GC_WALK,
	ST_NKINDS
};
struct st_mark {
	uint64_t wall, cpu;
};
struct agent_stats {
	bool on;
	bool noop;       /* option "noop": callbacks return at once (what the JVM itself pays) */
	bool no_inline;  /* option "inline=no": no INLINE records */
	uint64_t n[ST_NKINDS], wall[ST_NKINDS], cpu[ST_NKINDS];
	uint64_t rec_n[16], rec_bytes[16];   /* written to the file, by record type */
};
extern struct agent_stats stats;

struct mnames {
	char readable[NAME_MAX_LEN];  /* "java.util.HashMap.get(Object)" */
	char klass[NAME_MAX_LEN];     /* "Ljava/util/HashMap;" */
	char kreadable[NAME_MAX_LEN]; /* "java.util.HashMap" */
	char mpart[NAME_MAX_LEN];     /* "get(Object)" */
	char file[256];
};

uint64_t now_ns(void);
void st_begin(struct st_mark *m);
void st_end(enum st_kind k, const struct st_mark *m);
/* The queue, under agent.lock (lock ... unlock_notify). */
void lock(void);
void unlock_notify(void);
void *q_reserve(uint32_t type, uint64_t time, size_t body_len);
bool seen_has(uint64_t id);
void seen_add(uint64_t id);
const jvmtiCompiledMethodLoadInlineRecord *find_inline(const void *compile_info);
void compiled_load(jvmtiEnv *jvmti, jmethodID method, jint code_size, const void *code_addr,
		   const void *compile_info, uint64_t t, uint8_t level, uint8_t flags);
/* The writer, on the agent thread. */
size_t take(const uint8_t **buf);
int drain(const uint8_t *buf, size_t len);
/* HotSpot's VM structure tables, read once; NULL when this JVM has none. */
const struct vp_hs_vm *hotspot_vm(void);

/* ---- code loads from walking the code heaps (walk.c) ---- */
struct known;

/* The code heap at a GC's start (scan_gc_start): compiled methods the agent thread's
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

struct scan {
	bool on;                 /* code loads come from walks, not CompiledMethodLoad */
	bool check;              /* option scancheck: events on, each checked against a decode */
	bool forced_events;      /* option jit=events */
	bool redrained;          /* this walk wrote the queue again for its new code's Method* */
	uint64_t walk_end;       /* end of the walk being diffed */
	uint64_t reset_t;        /* this session's first walk was asked for (scan_reset) */
	uint64_t blobs[8];       /* code of unreported blobs named in this session (blob_visit) */
	size_t nblobs;
	struct vp_ch ch;
	struct vp_ch_scopes sc;
	struct known *prev, *cur, *next;
	size_t nprev, ncur, nnext, cap_prev, cap_cur, cap_next;
	uint64_t last_start;     /* start of the last complete walk (0: none yet) */
	uint64_t due;            /* next walk at or after this time */
	uint32_t period_ms;
	uint64_t gc_seen;        /* GC ring head at the last walk */
	uint64_t *mkey, *mval;   /* Method* -> jmethodID, open addressing */
	uint64_t *mtime;         /* ... and the time of its METHOD_PTR record */
	size_t mcap, mn;
	PCStackInfo *pcinfo;
	jmethodID *ids;
	jint *bcis;
	size_t cap_pcinfo, cap_ids, cap_bcis;
	uint64_t walks, incomplete, loads, unloads, unknown, undecoded, fallback;
	/* At each GC's start (scan_gc_start): the callback fills snap[snap_cur] while in_cb
	 * is set and reads pub[pub_cur]; the agent thread flips either index and waits for
	 * in_cb to clear before it touches the other buffer (sequentially consistent, so a
	 * callback that saw the old index is seen in it). */
	bool gc_walk_off;         /* option gcwalk=no (to measure what the walk at GC costs) */
	struct snap_buf snap[2];
	struct snap_pub pub[2];
	int snap_cur, pub_cur, in_cb;
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
extern struct scan scan;

int method_ptr_put(uint64_t ptr, uint64_t id, uint64_t t);
void write_queue(size_t at_least);
void scan_code(jvmtiEnv *jvmti);
bool scan_due(void);
jlong scan_wait_ms(void);
void scan_reset(void);
void scan_gc_start(void);
void scan_check(jmethodID method, jint code_size, const void *code_addr, const void *compile_info);
void scan_print(void);
void choose_code_source(void);

#endif
