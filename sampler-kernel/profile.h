/* The one header shared by profile.bpf.c and the bpf backend (bpf_backend.c): plain
 * __u32/__u64 structs and constants only, so that both clang -target bpf (through
 * vmlinux.h) and the host compiler (through linux/types.h) read the same layout. */
#ifndef VIPROF_SAMPLER_PROFILE_H
#define VIPROF_SAMPLER_PROFILE_H

/* Stack depths the BPF side stores. The kernel side is short in practice; user stacks
 * of JVMs are deep, so they get the full perf default (perf_event_max_stack = 127). */
#define VPB_MAX_KSTACK 64
#define VPB_MAX_USTACK 127

/* Values of the target_mode rodata global. */
#define VPB_TARGET_ALL     0
#define VPB_TARGET_TRACKED 1   /* only tgids present in the tracked map */

#define VPB_MAX_TRACKED 65536

/* Record kinds in the ring buffer. */
#define VPB_KIND_SAMPLE 1
#define VPB_KIND_SWITCH 2

/* Sample flags (the same bits as VP_SAMPLE_* in common/session_format.h). */
#define VPB_F_KERNEL_ERROR 0x2
#define VPB_F_USER_ERROR   0x4

/* Modes (the same values as enum vp_mode). */
#define VPB_MODE_KERNEL 1
#define VPB_MODE_USER   2

/* Indexes into the per-CPU lost array. */
#define VPB_LOST_RINGBUF 0     /* bpf_ringbuf_reserve failed: the consumer fell behind */
#define VPB_LOST_STACK   1     /* a stack that should exist could not be read */
#define VPB_LOST_NR      2

struct vpb_sample {
	__u32 kind;            /* VPB_KIND_SAMPLE */
	__u32 cpu;
	__u64 time;            /* bpf_ktime_get_ns: CLOCK_MONOTONIC */
	__u32 pid, tid;
	__u64 ip;
	__u64 period;
	__u32 event;
	__u32 mode;            /* VPB_MODE_* */
	__u32 flags;           /* VPB_F_* */
	__s32 kstack_bytes;    /* bpf_get_stack result: bytes stored, or -errno */
	__s32 ustack_bytes;
	__u32 pad;
	/* Present only when the program was loaded with callchain = true; the ring
	 * buffer entry is then sizeof(struct vpb_sample), else VPB_SAMPLE_HDR. */
	__u64 kstack[VPB_MAX_KSTACK];
	__u64 ustack[VPB_MAX_USTACK];
};
#define VPB_SAMPLE_HDR (sizeof(struct vpb_sample) - (VPB_MAX_KSTACK + VPB_MAX_USTACK) * sizeof(__u64))

struct vpb_switch {
	__u32 kind;            /* VPB_KIND_SWITCH */
	__u32 cpu;
	__u64 time;
	__u32 prev_pid, prev_tid;
	__u32 next_pid, next_tid;
};

#endif
