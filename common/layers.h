/* The layers of the stack a frame belongs to: shared by the code maps (maps/), which
 * name a JIT frame's layer, and the profile (postproc/), which counts samples by it. */
#ifndef VIPROF_COMMON_LAYERS_H
#define VIPROF_COMMON_LAYERS_H

enum vp_layer {
	VP_LAYER_HYPERVISOR = 0, /* steal time, Xen symbols */
	VP_LAYER_KERNEL,
	VP_LAYER_NATIVE,         /* native user code: executables, libc, JNI libraries */
	VP_LAYER_JVM,            /* the JVM runtime: libjvm.so, stubs, adapters */
	VP_LAYER_JIT,            /* JIT-compiled Java methods */
	VP_LAYER_INLINED,        /* Java methods inlined into a JIT-compiled one */
	VP_LAYER_INTERPRETED,    /* interpreted Java methods, and the interpreter */
	VP_LAYER_UNKNOWN,
	/* Time the host took, estimated from the guest's late timers (common/steal_est.h),
	 * kept apart from measured steal (VP_LAYER_HYPERVISOR) in every view. Last, so that
	 * the numbers of the layers above, which code maps store, stay as they were. */
	VP_LAYER_HYPERVISOR_EST,
	VP_LAYER__COUNT
};
const char *vp_layer_name(enum vp_layer l);  /* "kernel", "jit", ... */

#endif
