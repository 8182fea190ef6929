/* Virtual threads (JDK 21+): the agent option vthreads=1 records each mount of a virtual
 * thread on a carrier and each unmount, with the virtual thread's Java stack at the
 * unmount (VP_CM_VTHREAD_MOUNT/UNMOUNT, maps/codemap_format.h), from HotSpot's extension
 * events com.sun.hotspot.events.VirtualThreadMount/Unmount and the standard
 * VirtualThreadStart/End. Internal to jvm-agent/. */
#ifndef VIPROF_AGENT_VTHREAD_H
#define VIPROF_AGENT_VTHREAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jvmti.h>

/* Takes "vthreads=0|1" from the agent's options; false when p is another option. NULL
 * (before a session's options are parsed) resets it to "not asked for". */
bool vp_vthread__option(const char *p, size_t len);
/* When vthreads=1 (once; vm NULL after the first call: the one given then): takes a
 * JVMTI 21 environment of its own, asks it for can_support_virtual_threads and turns
 * the four events on; a later session without vthreads=1 leaves them on but records
 * nothing. A JVM before JDK 21 (no
 * virtual threads) is left alone silently; one that refuses them (not HotSpot) says so
 * once and records the rest. */
void vp_vthread__start(JavaVM *vm);

/* Provided by agent.c: queues one record whose body is head (hlen bytes) then tail
 * (tlen bytes) then tail2 (t2len bytes). Takes the queue's raw monitor briefly and never
 * waits for room (a full queue drops the record and counts it); does nothing while the
 * agent is idle or disabled. Safe in any callback that may take a raw monitor. */
void vp_agent__queue(uint32_t type, uint64_t time, const void *head, size_t hlen, const void *tail, size_t tlen,
		     const void *tail2, size_t t2len);

/* Provided by agent.c: whether the agent records nothing now (between sessions, or
 * failed), so that callbacks skip their work. */
bool vp_agent__idle(void);

#endif
