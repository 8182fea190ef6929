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

/* The agent's own state (struct agent) is agent.c's; the other files ask. */
bool vp_agent__writing(void);        /* a session's map is open (not idle) */
bool vp_agent__classes_known(void);  /* the classes loaded before the agent are enumerated */
jvmtiEnv *vp_agent__jvmti(void);
/* Writes what is queued now, if it is at least at_least bytes; on the agent thread (or
 * the one that replaced it), which cannot wait for the queue to make room. */
void vp_agent__write_queue(size_t at_least);

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

/* ---- code loads from walking the code heaps (walk.c, which owns their state) ---- */
/* Options jit=events, jit=scan, scancheck and gcwalk=no: true when p (len bytes) was one. */
bool vp_scan__option(const char *p, size_t len);
bool vp_scan__on(void);       /* code loads come from walks, not CompiledMethodLoad */
bool vp_scan__checking(void); /* scancheck: events on, each checked against a decode */
bool vp_scan__at_gc(void);    /* walks also at each GC's start (GarbageCollectionStart) */
void vp_scan__free(void);     /* nothing walks any more */

int vp_scan__method_ptr(uint64_t ptr, uint64_t id, uint64_t t);
void vp_scan__walk(jvmtiEnv *jvmti);
bool vp_scan__due(void);
jlong vp_scan__wait_ms(void);
void vp_scan__reset(void);
void vp_scan__gc_start(void);
void vp_scan__check(jmethodID method, jint code_size, const void *code_addr, const void *compile_info);
void vp_scan__print(void);
void vp_scan__choose_source(void);

#endif
