// SPDX-License-Identifier: GPL-2.0
/* The eBPF sampler: runs on every overflow of the perf events the bpf backend opens
 * (one per CPU per event) and stores one struct vpb_sample per overflow in a ring
 * buffer that user space drains on a timer. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "profile.h"

char LICENSE[] SEC("license") = "GPL";

/* Set by user space between open and load; the verifier prunes the dead branches. */
const volatile __u32 target_mode = VPB_TARGET_ALL;
const volatile bool callchain = false;
const volatile __u32 event_index = 0;

#define PF_KTHREAD 0x00200000

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 24); /* resized by user space before load */
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, VPB_MAX_TRACKED);
	__type(key, __u32);
	__type(value, __u8);
} tracked SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, VPB_LOST_NR);
	__type(key, __u32);
	__type(value, __u64);
} lost SEC(".maps");

static __always_inline void count_lost(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&lost, &idx);

	if (v)
		*v += 1;
}

static __always_inline bool is_kernel_ip(struct bpf_perf_event_data *ctx)
{
#if defined(__TARGET_ARCH_x86)
	/* The privilege level of the interrupted context lives in the low bits of CS.
	 * The verifier only allows 8-byte loads of the regs in the context, and CS is a
	 * 16-bit field in the low bytes of its 8-byte slot (little-endian). */
	__u64 cs = *(volatile __u64 *)((char *)&ctx->regs + __builtin_offsetof(struct pt_regs, cs));

	return (cs & 3) == 0;
#else
	return (long)PT_REGS_IP(&ctx->regs) < 0;
#endif
}

/* Everything but the stacks; shared by the two reservation sizes below. */
static __always_inline void fill(struct vpb_sample *s, struct bpf_perf_event_data *ctx,
				 __u64 id, bool kernel)
{
	s->kind = VPB_KIND_SAMPLE;
	s->cpu = bpf_get_smp_processor_id();
	s->time = bpf_ktime_get_ns();
	s->pid = id >> 32;
	s->tid = (__u32)id;
	s->ip = PT_REGS_IP(&ctx->regs);
	s->period = ctx->sample_period;
	s->event = event_index;
	s->mode = kernel ? VPB_MODE_KERNEL : VPB_MODE_USER;
	s->flags = 0;
	s->kstack_bytes = 0;
	s->ustack_bytes = 0;
	s->walk_end = 0;
	s->nr_jframes = 0;
}

SEC("perf_event")
int on_sample(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;
	bool kernel = is_kernel_ip(ctx);
	struct vpb_sample *s;

	if (target_mode == VPB_TARGET_TRACKED && !bpf_map_lookup_elem(&tracked, &tgid))
		return 0;

	if (!callchain) {
		s = bpf_ringbuf_reserve(&events, VPB_SAMPLE_HDR, 0);
		if (!s) {
			count_lost(VPB_LOST_RINGBUF);
			return 0;
		}
		fill(s, ctx, id, kernel);
		/* No wakeup: a wakeup per sample collapses the delivered rate on a VM;
		 * user space consumes on a timer instead. */
		bpf_ringbuf_submit(s, BPF_RB_NO_WAKEUP);
		return 0;
	}

	s = bpf_ringbuf_reserve(&events, sizeof(*s), 0);
	if (!s) {
		count_lost(VPB_LOST_RINGBUF);
		return 0;
	}
	fill(s, ctx, id, kernel);
	if (kernel) {
		s->kstack_bytes = bpf_get_stack(ctx, s->kstack, sizeof(s->kstack), 0);
		if (s->kstack_bytes < 0) {
			s->flags |= VPB_F_KERNEL_ERROR;
			count_lost(VPB_LOST_STACK);
		}
	}
	/* Kernel threads have no user stack; asking for one is not a failure. */
	struct task_struct *task = bpf_get_current_task_btf();
	if (!(task->flags & PF_KTHREAD)) {
		s->ustack_bytes = bpf_get_stack(ctx, s->ustack, sizeof(s->ustack), BPF_F_USER_STACK);
		if (s->ustack_bytes < 0) {
			s->flags |= VPB_F_USER_ERROR;
			count_lost(VPB_LOST_STACK);
		}
	}
	bpf_ringbuf_submit(s, BPF_RB_NO_WAKEUP);
	return 0;
}

/* Launch and -p modes follow children: a fork whose parent's process is tracked makes
 * the child's process tracked too (threads share the tgid and need nothing). */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = parent->tgid, ctgid = child->tgid;
	__u8 one = 1;

	if (ptgid != ctgid && bpf_map_lookup_elem(&tracked, &ptgid))
		bpf_map_update_elem(&tracked, &ctgid, &one, BPF_ANY);
	return 0;
}

/* Every context switch on every CPU, for steal-time victim attribution. */
SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	struct vpb_switch *w = bpf_ringbuf_reserve(&events, sizeof(*w), 0);

	if (!w) {
		count_lost(VPB_LOST_RINGBUF);
		return 0;
	}
	w->kind = VPB_KIND_SWITCH;
	w->cpu = bpf_get_smp_processor_id();
	w->time = bpf_ktime_get_ns();
	w->prev_pid = prev->tgid;
	w->prev_tid = prev->pid;
	w->next_pid = next->tgid;
	w->next_tid = next->pid;
	bpf_ringbuf_submit(w, BPF_RB_NO_WAKEUP);
	return 0;
}
