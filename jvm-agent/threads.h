/* Java thread names by kernel tid (THREAD_NAME records): the kernel keeps 15 bytes of a
 * name, the map keeps the rest. Internal to jvm-agent/. */
#ifndef VIPROF_JVM_AGENT_THREADS_H
#define VIPROF_JVM_AGENT_THREADS_H

#include <jvmti.h>

struct vp_hs_vm;

/* ThreadStart and ThreadEnd, on the thread itself (gettid() is its tid): queue its long
 * name, and its end (the tid may then go to a thread the agent does not name). Never
 * block: a full queue drops the record, counted. */
void vp_threads__started(jvmtiEnv *jvmti, jthread thread);
void vp_threads__ended(jvmtiEnv *jvmti, jthread thread);
/* The threads already running when a session begins; on the agent thread, once a
 * session. vm: HotSpot's structure tables, where it keeps a Java thread's tid (NULL:
 * not known; read on the first call that has them). */
void vp_threads__name_running(jvmtiEnv *jvmti, JNIEnv *jni, const struct vp_hs_vm *vm);

#endif
