/* JDK 21+ prints three "WARNING: A JVM TI agent has been loaded dynamically" lines into the
 * application's stderr when an agent is attached, unless -XX:+EnableDynamicAgentLoading
 * was given on the command line (JEP 451). HotSpot tests where the flag's value came
 * from (FLAG_IS_CMDLINE), after it has loaded the library and before it calls
 * Agent_OnAttach. So, when this library is loaded into a JVM that is already running (a
 * dynamic attach), its constructor sets that flag's "set on the command line" bit if its
 * value is still the default: the value (true until a future JDK) and its origin are left
 * alone, so nothing the JVM allows changes; only the warning goes (async-profiler does
 * the same). The flag table is found through HotSpot's exported VM structure tables
 * (hotspot/vmstructs.h), as serviceability tools do; anything unexpected (no such
 * tables, no such flag: JDK <= 20, a layout we do not know) leaves the JVM untouched and
 * the warning printed. At JVM start (-agentpath) nothing is done: no warning is printed
 * then, and the flag must stay as the user left it for agents that others load later. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "hotspot/memory.h"
#include "hotspot/vmstructs.h"
#include "jvm-agent/tasks.h"
#include "jvm-agent/vmflags.h"


/* Is HotSpot's VM thread running, i.e. is the JVM past its start-up (where -agentpath
 * agents are loaded, before that thread exists)? */
static bool is_vm_thread(uint32_t tid, const char *name, void *ctx)
{
	(void)tid;
	return *(bool *)ctx = !strncmp(name, "VM Thread", 9);
}

static bool vm_running(void)
{
	bool found = false;
	vp_tasks__each(is_vm_thread, &found);
	return found;
}

__attribute__((constructor)) static void quiet_dynamic_load_warning(void)
{
	static struct vp_hs_vm vm;   /* static: a few kB, read once */
	char why[160];
	uint64_t value, flags;

	if (!vm_running())
		return;
	void *h = dlopen("libjvm.so", RTLD_LAZY | RTLD_NOLOAD);
	if (!vp_hs_vm__read_self(&vm, h, why, sizeof(why)) &&
	    !vp_hs_vm__find_flag(&vm, &vp_hs_mem_direct, "EnableDynamicAgentLoading", &value, &flags)) {
		uint32_t bits;
		memcpy(&bits, (void *)(uintptr_t)flags, sizeof(bits));
		if ((bits & VP_VM_FLAG_ORIGIN_MASK) == VP_VM_FLAG_ORIGIN_DEFAULT) {
			bits |= VP_VM_FLAG_WAS_SET_ON_COMMAND_LINE;
			memcpy((void *)(uintptr_t)flags, &bits, sizeof(bits));
		}
	}
	if (h)
		dlclose(h);
}

bool vp_agent__debug_nonsafepoints(const struct vp_hs_vm *vm)
{
	uint64_t value, flags;
	uint32_t bits;

	if (vp_hs_vm__find_flag(vm, &vp_hs_mem_direct, "DebugNonSafepoints", &value, &flags))
		return false;
	memcpy(&bits, (void *)(uintptr_t)flags, sizeof(bits));
	if (*(bool *)(uintptr_t)value)
		return true;
	if ((bits & VP_VM_FLAG_ORIGIN_MASK) != VP_VM_FLAG_ORIGIN_DEFAULT)
		return false;   /* the user turned it off: leave it so */
	*(bool *)(uintptr_t)value = true;
	return true;
}
