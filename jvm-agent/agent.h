/* What the JVMTI agent's parts ask of each other: agent.c (sessions, callbacks, the
 * agent thread, naming), walk.c (the code-heap walks), measurement. Each owns its state;
 * the record queue is queue.h's, the GCs gcs.h's, the map's writer maps/codemap_writer.h.
 * Internal to jvm-agent/.
 *
 * Callbacks run on JVM threads and only append finished records to the preallocated
 * queue; they never malloc. Everything else runs on the agent thread. */
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
#include "jvm-agent/stats.h"

#define NAME_MAX_LEN 1024
#define MAX_LINES 2048

/* The agent's own state (struct agent) is agent.c's; the other files ask. */
bool vp_agent__writing(void);        /* a session's map is open (not idle) */
bool vp_agent__classes_known(void);  /* the classes loaded before the agent are enumerated */
jvmtiEnv *vp_agent__jvmti(void);
/* Writes what is queued now, if it is at least at_least bytes; on the agent thread (or
 * the one that replaced it), which cannot wait for the queue to make room. */
void vp_agent__write_queue(size_t at_least);

struct mnames {
	char readable[NAME_MAX_LEN];  /* "java.util.HashMap.get(Object)" */
	char klass[NAME_MAX_LEN];     /* "Ljava/util/HashMap;" */
	char kreadable[NAME_MAX_LEN]; /* "java.util.HashMap" */
	char mpart[NAME_MAX_LEN];     /* "get(Object)" */
	char file[256];
};

const jvmtiCompiledMethodLoadInlineRecord *vp_agent__find_inline(const void *compile_info);
void vp_agent__compiled_load(jvmtiEnv *jvmti, jmethodID method, jint code_size, const void *code_addr,
		   const void *compile_info, uint64_t t, uint8_t level, uint8_t flags);
/* HotSpot's VM structure tables, read once; NULL when this JVM has none. */
const struct vp_hs_vm *vp_agent__hotspot_vm(void);

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
