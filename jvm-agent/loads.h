/* Code loads and method names: what a compiled method's load becomes in the queue
 * (METHOD_LOAD2, INLINE2 and the METHOD_NAMEs it needs), from the CompiledMethodLoad
 * callback or from a walk of the code heaps, and the naming of a prepared class's
 * methods into the map (METHOD_NAMES). The encoding is maps/codemap_writer.h's; what is
 * read here is JVMTI's. Internal to jvm-agent/. */
#ifndef VIPROF_JVM_AGENT_LOADS_H
#define VIPROF_JVM_AGENT_LOADS_H

#include <stdint.h>

#include <jvmti.h>
#include <jvmticmlr.h>

#include "common/chunkfile.h"

struct vp_cm_writer;

#define NAME_MAX_LEN 1024
#define MAX_LINES 2048

/* One method's names, as the records want them. */
struct mnames {
	char readable[NAME_MAX_LEN];  /* "java.util.HashMap.get(Object)" */
	char klass[NAME_MAX_LEN];     /* "Ljava/util/HashMap;" */
	char kreadable[NAME_MAX_LEN]; /* "java.util.HashMap" */
	char mpart[NAME_MAX_LEN];     /* "get(Object)" */
	char file[256];
};

/* The calling thread is the agent's own (jni its JNIEnv): class references made while
 * naming are freed in a local frame, since this thread never returns to Java. */
void vp_loads__agent_thread(JNIEnv *jni);
/* JVMTI's inlining record among a load's compile_info, or NULL. */
const jvmtiCompiledMethodLoadInlineRecord *vp_loads__find_inline(const void *compile_info);
/* Queues a compiled method's load at t: its METHOD_NAME and those of the methods inlined
 * into it unless queued already, METHOD_LOAD2, and INLINE2. In callbacks (no malloc). */
void vp_loads__compiled(jvmtiEnv *jvmti, jmethodID method, jint code_size, const void *code_addr,
			const void *compile_info, uint64_t t, uint8_t level, uint8_t flags);
/* Names the methods of METHOD_PTR record r (one class's) not named yet, straight into
 * w as METHOD_NAMES: on the agent thread, so the JVMTI calls cost the application
 * nothing. 0 or -errno. */
int vp_loads__name_class(jvmtiEnv *jvmti, struct vp_cm_writer *w, const struct vp_record *r);

#endif
