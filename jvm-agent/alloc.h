/* Sampled allocations (record -e alloc): JVMTI's SampledObjectAlloc at the mean
 * interval alloc=BYTES asks for, each sample queued as ALLOC_SAMPLE with its stack and
 * the object's class. Internal to jvm-agent/. */
#ifndef VIPROF_JVM_AGENT_ALLOC_H
#define VIPROF_JVM_AGENT_ALLOC_H

#include <stdbool.h>
#include <stdint.h>

#include <jvmti.h>

/* The first session's alloc= (0: off), before vp_alloc__start. */
void vp_alloc__set(uint64_t interval);
/* Turns sampling on when asked for; a JVM that cannot (before JDK 11) says so once and
 * records the rest. */
void vp_alloc__start(jvmtiEnv *jvmti);
/* A later session's alloc=: before its switch (starting=false) sampling stops if it asks
 * for none, after it (starting=true) it starts or is retuned. */
void vp_alloc__apply(jvmtiEnv *jvmti, uint64_t alloc, bool starting);
/* SampledObjectAlloc, on the allocating thread: reads its stack and the class and
 * queues the sample (the queue's lock briefly; a full queue drops it, counted). */
void vp_alloc__sampled(jvmtiEnv *jvmti, jclass klass, jlong size);

#endif
