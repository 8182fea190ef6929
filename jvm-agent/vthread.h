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
 * once and records the rest. disabled (kept from the first call that gives one): set
 * while the agent records nothing (between sessions, or failed); callbacks then skip
 * their work. */
void vp_vthread__start(JavaVM *vm, const volatile bool *disabled);

#endif
