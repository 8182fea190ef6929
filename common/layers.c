#include "common/layers.h"

static const char *const layer_names[VP_LAYER__COUNT] = {
	[VP_LAYER_HYPERVISOR] = "hypervisor",
	[VP_LAYER_KERNEL] = "kernel",
	[VP_LAYER_NATIVE] = "native",
	[VP_LAYER_JVM] = "jvm",
	[VP_LAYER_JIT] = "jit",
	[VP_LAYER_INLINED] = "inlined",
	[VP_LAYER_INTERPRETED] = "interpreted",
	[VP_LAYER_UNKNOWN] = "unknown",
	[VP_LAYER_HYPERVISOR_EST] = "hypervisor (estimated)",
};

const char *vp_layer_name(enum vp_layer l)
{
	if ((unsigned)l >= VP_LAYER__COUNT)
		return "unknown";
	return layer_names[l];
}
