/* The agent's code loads from walking HotSpot's code heaps (walk.c, which owns that
 * state). Internal to jvm-agent/. */
#ifndef VIPROF_JVM_AGENT_WALK_H
#define VIPROF_JVM_AGENT_WALK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jvmti.h>

struct vp_hs_vm;

/* Options jit=events, jit=scan, scancheck and gcwalk=no: true when p (len bytes) was one. */
bool vp_scan__option(const char *p, size_t len);
bool vp_scan__on(void);       /* code loads come from walks, not CompiledMethodLoad */
bool vp_scan__checking(void); /* scancheck: events on, each checked against a decode */
bool vp_scan__at_gc(void);    /* walks also at each GC's start (GarbageCollectionStart) */
void vp_scan__free(void);     /* nothing walks any more */

int vp_scan__method_ptr(uint64_t ptr, uint64_t id, uint64_t t);
/* One walk and its diff against the previous one; on the agent thread, while a map is
 * open. Whether one is due (its time came, or a GC finished since the last one), and
 * how long the agent thread may wait for queue records before the next. */
void vp_scan__walk(jvmtiEnv *jvmti);
bool vp_scan__due(void);
jlong vp_scan__wait_ms(void);
void vp_scan__reset(void);
void vp_scan__gc_start(void);
void vp_scan__check(jmethodID method, jint code_size, const void *code_addr, const void *compile_info);
void vp_scan__print(void);
/* Where code loads come from (at setup): walks when vm's layout is one hotspot/ reads
 * (and jit=events was not asked for), else CompiledMethodLoad. flush writes what is
 * queued when at least at_least bytes are: the walk queues its loads and must not fill
 * the queue. */
void vp_scan__choose_source(jvmtiEnv *jvmti, const struct vp_hs_vm *vm, void (*flush)(size_t at_least));

#endif
