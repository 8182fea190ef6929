/* Java thread names by kernel tid (jvm-agent/threads.h). */
#define _GNU_SOURCE
#include "jvm-agent/threads.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hotspot/memory.h"
#include "hotspot/vmstructs.h"
#include "jvm-agent/queue.h"
#include "jvm-agent/stats.h"
#include "jvm-agent/tasks.h"
#include "maps/codemap_format.h"

#define THREAD_NAME_MAX 1024
static __thread bool tl_named;          /* ThreadStart wrote this thread's name */

/* The kernel keeps 15 bytes of a thread name (HotSpot gives a Java thread's native
 * thread the first 15 bytes of its Java name): only longer names tell more. */
#define KERNEL_NAME_LEN VP_TASK_NAME_LEN

/* Queues THREAD_NAME for tid; never blocks (a full queue drops it, counted), except on
 * the agent thread. */
static void queue_thread_name(uint32_t tid, uint16_t flags, const char *name, uint64_t t)
{
	size_t nl = name ? strnlen(name, THREAD_NAME_MAX) : 0;
	vp_queue__lock();
	struct vp_cm_thread_name *b = vp_queue__reserve(VP_CM_THREAD_NAME, t, sizeof(*b) + nl);
	if (b) {
		b->tid = tid;
		b->name_len = (uint16_t)nl;
		b->flags = flags;
		memcpy(b + 1, name, nl);
	}
	vp_queue__unlock_notify();
}

void vp_threads__started(jvmtiEnv *jvmti, jthread thread)
{
	jvmtiThreadInfo ti;

	if ((*jvmti)->GetThreadInfo(jvmti, thread, &ti) != JVMTI_ERROR_NONE)
		return;
	if (ti.name && strlen(ti.name) > KERNEL_NAME_LEN) {
		queue_thread_name((uint32_t)syscall(SYS_gettid), 0, ti.name, now_ns());
		tl_named = true;
	}
	(*jvmti)->Deallocate(jvmti, (unsigned char *)ti.name);
	/* thread_group and context_class_loader are local references: freed on return. */
}

/* A thread that was running before the session began was named (if at all) by
 * vp_threads__name_running, not at its start: its name is asked again. */
void vp_threads__ended(jvmtiEnv *jvmti, jthread thread)
{
	jvmtiThreadInfo ti;
	bool named = tl_named;

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
struct task_list {
	struct task_name *v;
	size_t n, max;
};

static bool add_task(uint32_t tid, const char *name, void *ctx)
{
	struct task_list *l = ctx;
	struct task_name *t = &l->v[l->n++];
	t->tid = tid;
	snprintf(t->comm, sizeof(t->comm), "%s", name);
	return l->n == l->max;
}

static size_t read_task_names(struct task_name *out, size_t max)
{
	struct task_list l = { out, 0, max };
	if (max)
		vp_tasks__each(add_task, &l);
	return l.n;
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
} tid_path;

static void hs_tid_init(JNIEnv *jni, const struct vp_hs_vm *vm)
{
	tid_path.tried = true;
	int64_t os = vm ? vp_hs_vm__offset(vm, VP_HS_THREAD_OSTHREAD) : -1;
	int64_t tid = vm ? vp_hs_vm__offset(vm, VP_HS_OSTHREAD_TID) : -1;
	if (os >= 0 && tid >= 0) {
		jclass cls = (*jni)->FindClass(jni, "java/lang/Thread");
		tid_path.eetop = cls ? (*jni)->GetFieldID(jni, cls, "eetop", "J") : NULL;
		if ((*jni)->ExceptionCheck(jni))
			(*jni)->ExceptionClear(jni);
		if (cls)
			(*jni)->DeleteLocalRef(jni, cls);
		tid_path.osthread = (uint64_t)os;
		tid_path.thread_id = (uint64_t)tid;
		tid_path.ok = tid_path.eetop != NULL;
	}
}

/* The kernel tid of a running Java thread per HotSpot, or 0. */
static uint32_t hs_tid(JNIEnv *jni, const struct vp_hs_vm *vm, jthread t)
{
	uint64_t jt, os = 0;
	int32_t tid = 0;

	if (!tid_path.tried)
		hs_tid_init(jni, vm);
	if (!tid_path.ok)
		return 0;
	jt = (uint64_t)(*jni)->GetLongField(jni, t, tid_path.eetop);
	if (vp_hs_mem__read(&vp_hs_mem_self, jt + tid_path.osthread, &os, sizeof(os)) ||
	    vp_hs_mem__read(&vp_hs_mem_self, os + tid_path.thread_id, &tid, sizeof(tid)))
		return 0;
	return tid > 0 ? (uint32_t)tid : 0;
}

/* The threads already running when a session begins (ThreadStart came before it): the
 * long-named ones, each with its tid as HotSpot knows it when that tid's kernel name is
 * the name's first 15 bytes (HotSpot's naming, so a freed or misread thread cannot name
 * another); else the one tid with that kernel name, when exactly one thread has it and
 * exactly one Java thread that prefix (pool threads that share one stay unnamed rather
 * than named wrong). Runs on the agent thread, once per session. */
void vp_threads__name_running(jvmtiEnv *jvmti, JNIEnv *jni, const struct vp_hs_vm *vm)
{
	static struct task_name tasks[MAX_TASKS];
	jthread *th = NULL;
	jint nth = 0;
	char **names = NULL;
	uint32_t *tids = NULL;

	if ((*jvmti)->GetAllThreads(jvmti, &nth, &th) != JVMTI_ERROR_NONE)
		return;
	size_t ntasks = read_task_names(tasks, MAX_TASKS);
	names = calloc((size_t)nth + 1, sizeof(*names));
	tids = calloc((size_t)nth + 1, sizeof(*tids));
	for (jint i = 0; names && tids && i < nth; i++) {
		jvmtiThreadInfo ti;

		if ((*jvmti)->GetThreadInfo(jvmti, th[i], &ti) == JVMTI_ERROR_NONE) {
			/* Short names too: the launcher's "main" thread keeps the process's
			 * kernel name ("java"), which no prefix rule can tell. */
			if (ti.name && ti.name[0]) {
				names[i] = strdup(ti.name);
				tids[i] = hs_tid(jni, vm, th[i]);
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
	vp_queue__replaying(true);   /* our own thread: it may wait for queue room */
	for (jint i = 0; names && tids && i < nth; i++) {
		if (!names[i])
			continue;
		if (strlen(names[i]) <= KERNEL_NAME_LEN) {
			/* A short name is written only for the very thread (its tid from HotSpot)
			 * whose kernel name differs: HotSpot's own threads carry theirs already. */
			for (size_t k = 0; tids[i] && k < ntasks; k++)
				if (tasks[k].tid == tids[i] && strcmp(tasks[k].comm, names[i]))
					queue_thread_name(tids[i], VP_CM_THREAD_PREEXISTING, names[i], t);
			continue;
		}
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
			same += names[j] && strlen(names[j]) > KERNEL_NAME_LEN && !strncmp(names[j], names[i], KERNEL_NAME_LEN);
		if (exact != SIZE_MAX)
			queue_thread_name(tasks[exact].tid, VP_CM_THREAD_PREEXISTING, names[i], t);
		else if (same == 1 && nhits == 1)
			queue_thread_name(tasks[hit].tid, VP_CM_THREAD_PREEXISTING, names[i], t);
	}
	vp_queue__replaying(false);
	for (jint i = 0; names && i < nth; i++)
		free(names[i]);
	free(names);
	free(tids);
	(*jvmti)->Deallocate(jvmti, (unsigned char *)th);
}

