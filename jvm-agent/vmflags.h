/* HotSpot flags the agent sets, through the flag table of hotspot/vmstructs.h.
 * Internal to jvm-agent/. */
#ifndef VIPROF_JVM_AGENT_VMFLAGS_H
#define VIPROF_JVM_AGENT_VMFLAGS_H

#include <stdbool.h>

#include "hotspot/vmstructs.h"

/* Sets HotSpot's DebugNonSafepoints when the user left it at its default, as enabling
 * CompiledMethodLoad does by itself: without it compiled code records scopes at
 * safepoints only and samples elsewhere lose their inlined frames. True when set (or
 * already on). */
bool vp_agent__debug_nonsafepoints(const struct vp_hs_vm *vm);

#endif
