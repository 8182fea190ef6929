/* Contended locks (record -e lock, agent option locks=NS; issue 25, issue 32): a thread
 * that blocks on a synchronized monitor another thread holds (JVMTI MonitorContendedEnter
 * to MonitorContendedEntered), and a java.util.concurrent park with a blocker, timed by a
 * wrapper around the JDK's own Unsafe.park native (no JVMTI event, no VM operation per
 * park; a running JVM gets it too). Each wait of at least NS is queued as LOCK_SAMPLE
 * (maps/codemap_format.h). Internal to jvm-agent/. */
#ifndef VIPROF_AGENT_LOCKS_H
#define VIPROF_AGENT_LOCKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jvmti.h>

/* What the agent lends the lock profiler (agent.c): its environment, clock, event queue
 * and idle flag. Given once, at vp_locks__start, so that this file includes nothing else of
 * the agent's and its state has one owner. */
struct vp_locks_host {
	jvmtiEnv *jvmti;
	uint64_t (*now_ns)(void);
	void (*lock)(void);             /* the queue's lock; unlock_notify releases it */
	void (*unlock_notify)(void);
	void *(*q_reserve)(uint32_t type, uint64_t time, size_t body_len);   /* under lock */
	const volatile bool *disabled;  /* callbacks queue nothing while it is set */
	const bool *verbose;            /* the agent's stats option: say which park was wrapped */
};

/* Puts the monitor callbacks into cb (before SetEventCallbacks). */
void vp_locks__callbacks(jvmtiEventCallbacks *cb);
/* At setup (OnLoad or OnAttach), ns = locks= (-1: off): the monitor events' capability
 * and the events, when on. Any phase. */
void vp_locks__start(const struct vp_locks_host *host, int64_t ns);
/* In the live phase, on a Java thread (VMInit, OnAttach, a session switch): binds the
 * park wrapper, once per JVM, when locks are on. A JVM where it cannot says so once
 * and records monitors only. */
void vp_locks__live(jvmtiEnv *jvmti, JNIEnv *jni);
/* A later session's locks= on a JVM that has the agent (see profiles_apply in agent.c):
 * before its switch (starting=false) turns recording off when the session does not ask
 * for it; after (starting=true) turns it on or retunes the threshold. */
void vp_locks__apply(jvmtiEnv *jvmti, JNIEnv *jni, int64_t ns, bool starting);
/* A virtual thread vt mounted again at t after it unmounted at since (vthread.c, with
 * its events on: --off-cpu). A virtual thread that parks unmounts instead of calling
 * Unsafe.park: when it left with a park blocker, the wait is queued as one. jvmti: an
 * environment with can_support_virtual_threads (vthread.c's), for vt's stack. */
void vp_locks__vthread_mount(jvmtiEnv *jvmti, JNIEnv *jni, jthread vt, uint64_t since, uint64_t t);

#endif
