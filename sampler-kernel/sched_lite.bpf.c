// SPDX-License-Identifier: GPL-2.0
/* The context-switch tracer without --off-cpu (plain `record -g`, and `stat`): exact
 * steal per thread and per vCPU, and each thread's on-CPU time and switches. It runs at
 * every switch of the VM, so a switch costs as little as it can:
 *   - steal: the steal clock that moved on a vCPU between two switches belongs to the
 *     thread that ran between them (sched_common.bpf.h, switch_steal). A switch where it
 *     did not move (nearly all: on many VMs it never does) looks up no task, takes no
 *     stack and writes nothing but the vCPU's record. Where it did, the charge is
 *     sched.bpf.c's: under prev's stacks, to its threads entry, idle steal to the vCPU.
 *   - on-CPU time and switches are the kernel's own per-task counters
 *     (se.sum_exec_runtime, nvcsw + nivcsw), read when the window opens (base_threads:
 *     the baseline of the threads alive then; a thread born later starts at 0), at the
 *     thread's last switch (TASK_DEAD), and when the window closes or the tracer stops
 *     (finish_threads), instead of summed at every switch.
 * No walker, no off-CPU state and none of their maps: the object verifies and loads in a
 * fraction of sched.bpf.c's time (docs/offcpu.md, "Without --off-cpu: the lite tracer"). User space: sched_tracer.c. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "sched.h"
#include "tracked.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* Only tasks whose real, effective and saved uid are this one (the service's users). */
const volatile __u32 filter_uid = (__u32)-1;

#define VPS_LITE
#include "sched_state.bpf.h"
#include "sched_common.bpf.h"

/* When the window opened for the per-thread counters (CLOCK_MONOTONIC ns; ~0: not yet):
 * a thread that started since then has no baseline, its counters started at 0 with it.
 * Set by user space just before the baseline pass (vp_sched__window, or at start). */
volatile __u64 base_time = ~0ull;

/* A thread's counters when the window opened, and whether its sums were written. */
struct tbase {
	__u64 sum;         /* se.sum_exec_runtime */
	__u64 sw;          /* nvcsw + nivcsw */
	__u64 first;       /* when its part of the window began */
	__u64 based;       /* sum, sw, first are set (by base_threads) */
	__u64 done;        /* its sums are in the threads hash: at its last switch, or by a pass
			    * (64 bits: the atomic exchange that claims it is) */
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct tbase);
} tbases SEC(".maps");

static __always_inline __u64 task_switches(struct task_struct *t)
{
	return t->nvcsw + t->nivcsw;
}

/* Writes t's on-CPU time and switches in the window (its counters now less their
 * baseline) to the threads hash, once. now: the end of its part of the window. */
static __always_inline void finish(struct task_struct *t, __u64 now)
{
	struct tbase *b = bpf_task_storage_get(&tbases, t, 0, 0);
	__u64 sum = t->se.sum_exec_runtime, sw = task_switches(t), bsum = 0, bsw = 0, first;
	__u64 born = t->start_time, we = win_end;
	struct vps_thread *th;

	if (b && b->done)
		return;
	if (we && born >= we)
		return;         /* born after the window closed: none of its time is in it */
	if (b && b->based) {
		bsum = b->sum;
		bsw = b->sw;
		first = b->first;
	} else if (born >= base_time) {
		first = born;   /* born in the window: its counters began at 0 */
	} else {
		/* Alive before the window opened, yet the opening pass did not see it (it
		 * ended while the pass ran, or the tracer stops without a window): its
		 * counters hold time from before the window. */
		count(VPS_CNT_NO_BASE, 1);
		return;
	}
	/* Marked first, so that the pass at the end and this thread's last switch, which
	 * may meet here, do not both add it. */
	if (!b)
		b = bpf_task_storage_get(&tbases, t, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (b) {
		if (__sync_lock_test_and_set(&b->done, 1))
			return;
	}
	th = thread_entry(t->tgid, t->pid, first);
	if (!th)
		return;
	__sync_fetch_and_add(&th->oncpu_ns, sum > bsum ? sum - bsum : 0);
	__sync_fetch_and_add(&th->switches, sw > bsw ? sw - bsw : 0);
	if (!th->first || first < th->first)
		th->first = first;
	if (now > th->last)
		th->last = now;
}

/* Charges delta ns of steal to prev, which leaves the CPU: under its stacks (current is
 * still prev here), and to its threads entry. */
static __always_inline void charge_steal(void *ctx, struct task_struct *prev, __u64 delta, __u64 now)
{
	__u32 pid = prev->tgid, tid = prev->pid;
	struct vps_thread *th;
	__s32 ks = -1;
	__u64 us = 0;

	if (!is_tracked(prev))
		return;
	if (!user_only)
		ks = bpf_get_stackid(ctx, &stacks, KSTACK_SKIP);
	if (!(prev->flags & PF_KTHREAD)) {
		long id = bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK);

		us = id < 0 ? 0 : VPS_USTACK_FP | (__u32)id;
	}
	if ((!user_only && ks < 0) || (!(prev->flags & PF_KTHREAD) && !us))
		count(VPS_CNT_NO_STACK, 1);
	agg(pid, tid, VPS_STEAL, ks, us, delta, 0, now);
	th = thread_entry(pid, tid, now);
	if (th) {
		__sync_fetch_and_add(&th->steal_ns, delta);
		if (now > th->last)
			th->last = now;
	}
}

SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct vps_cpu *c = bpf_map_lookup_elem(&cpus, &cpu);
	struct rq *rq = this_rq(prev, next, cpu);
	__u64 now, delta, we;

	/* Counted per CPU, not in c: a write to c at every switch would share its cache
	 * line with the next vCPU's record, which that vCPU reads at every switch. */
	count(VPS_CNT_SWITCHES, 1);
	/* Nearly every switch: this vCPU's window has begun and neither steal clock moved
	 * since its last switch. switch_steal would charge nothing and change nothing but
	 * the vCPU's last_time (which then means its last switch that found a clock moved,
	 * or its first in the window): not even the time is read. */
	if (!c || !rq || !c->first_time || steal_clock(rq) != c->steal_last || rq->prev_steal_time != c->kstat_last) {
		now = bpf_ktime_get_ns();
		delta = switch_steal(c, rq, prev, now);
		if (delta)
			charge_steal(ctx, prev, delta, now);
	}
	/* Its last switch: its counters are final (this switch is counted in them), and
	 * its task storage goes with it. Inside the window only: a thread that ends after
	 * it was finished by the closing pass. */
	if (prev_state & TASK_DEAD) {
		now = bpf_ktime_get_ns();
		we = win_end;
		if (now >= win_start && (!we || now <= we) && is_tracked(prev))
			finish(prev, now);
	}
	return 0;
}

/* Run once by user space when the window opens (after setting base_time), over every
 * task: the counters of the recorded threads alive then are their baseline. */
SEC("iter/task")
int base_threads(struct bpf_iter__task *ctx)
{
	struct task_struct *t = ctx->task;
	struct tbase *b;

	if (!t || !is_tracked(t) || t->start_time >= base_time)
		return 0;   /* one born since the window opened starts at 0: no storage needed */
	b = bpf_task_storage_get(&tbases, t, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!b || b->based || b->done)
		return 0;
	b->sum = t->se.sum_exec_runtime;
	b->sw = task_switches(t);
	b->first = base_time;
	b->based = 1;
	return 0;
}

/* Run by user space when the window closes and again when the tracer stops (its
 * programs detached), over every task: the recorded threads alive then that were not
 * written yet are (finish). */
SEC("iter/task")
int finish_threads(struct bpf_iter__task *ctx)
{
	struct task_struct *t = ctx->task;
	__u64 we = win_end, now = bpf_ktime_get_ns();

	if (!t || !is_tracked(t))
		return 0;
	finish(t, we && we < now ? we : now);
	return 0;
}

/* -p and launched commands follow the processes they fork (tracked.bpf.h). */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	follow_fork(parent, child);
	return 0;
}
