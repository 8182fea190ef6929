// SPDX-License-Identifier: GPL-2.0
/* The switch tracer's opening pass: run once by user space when the recording's window
 * opens (sched_tracer.c, vp_sched__window), over every task. A tracked thread that is
 * off CPU then, and whose switch-out the tracer did not walk (it blocked before the
 * tracer started, or the frame-pointer object took its stack before the walking one
 * took over), gets its off-CPU interval opened at the window's start, with its user
 * stack walked now: it has not run since it left the CPU, so its saved user registers
 * and its stack are what they were then. Without this a thread blocked across the
 * window's start (one parked for good, say) was charged nothing until it woke.
 *
 * The walk is the sampler's (walker.bpf.h), reading the thread's memory with
 * bpf_copy_from_user_task, which needs a sleepable program: hence an object of its own,
 * whose maps are the tracer's (sched_state.bpf.h) and the sampler's tables, all reused. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "sched.h"

extern struct task_struct *bpf_task_from_pid(s32 pid) __ksym;
extern void bpf_task_release(struct task_struct *p) __ksym;

struct walk;
static __always_inline long read_task(struct walk *w, void *dst, __u32 size, const void *src);
#define WALK_READ(w, dst, size, src) read_task(w, dst, size, src)
#define WALK_MAX VPS_MAX_UFRAMES
#define WALK_MAXJ VPS_MAX_JFRAMES
#define STK_BYTES 65536
#include "walker.bpf.h"
#include "tracked.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* As the tracer's (sched.bpf.c). */
const volatile __u32 filter_uid = (__u32)-1;
/* When the walking object took over: an interval opened before it has a frame-pointer
 * stack, and is opened again here. */
const volatile __u64 walk_since = 0;
/* The window's start, set by user space just before the pass runs. */
volatile __u64 win_start = 0;

#include "sched_state.bpf.h"

/* The thread being walked, looked up for each read: a task pointer cannot be kept in
 * the walk's state (a map value) for the bpf_loop steps to use. */
static __always_inline long read_task(struct walk *w, void *dst, __u32 size, const void *src)
{
	struct task_struct *t = bpf_task_from_pid((s32)w->s.tid);
	long rc;

	if (!t)
		return -3;   /* -ESRCH */
	rc = bpf_copy_from_user_task(dst, size, src, t, 0);
	bpf_task_release(t);
	return rc;
}

/* One walk at a time (user space runs the pass once): the switch programs that run on
 * this CPU while the pass sleeps in a page fault have their own scratch. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct walk);
} open_scratch SEC(".maps");

SEC("iter.s/task")
int open_blocked(struct bpf_iter__task *ctx)
{
	struct task_struct *t = ctx->task;
	__u64 out, last, in, us = 0;
	struct tstate *ts;
	struct pt_regs *r;
	struct walk *w;
	__u32 zero = 0;
	unsigned int state;

	if (!t || !win_start || (t->flags & PF_KTHREAD) || !is_tracked(t))
		return 0;
	/* On a CPU now: its next switch-out is seen and walked. */
	if (BPF_CORE_READ(t, on_cpu))
		return 0;
	ts = bpf_task_storage_get(&tstates, t, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!ts)
		return 0;
	out = ts->out_time;
	last = ts->last_out;
	in = ts->in_time;
	/* Seen leaving the CPU under the walking object, or running: nothing to do. */
	if (in || (out && out >= walk_since) || (!out && last))
		return 0;
	state = BPF_CORE_READ(t, __state);
	w = bpf_map_lookup_elem(&open_scratch, &zero);
	r = (struct pt_regs *)bpf_task_pt_regs(t);
	if (w && r) {
		w->s.pid = t->tgid;
		w->s.tid = t->pid;
		if (walk_regs(w, t->tgid, BPF_CORE_READ(r, ip), BPF_CORE_READ(r, sp), BPF_CORE_READ(r, bp),
			      BPF_CORE_READ(r, r13)))
			us = intern_walk(w);
	}
	/* The thread may have run while the walk slept: then its own switches hold the truth. */
	if (ts->out_time != out || ts->last_out != last || ts->in_time != in || BPF_CORE_READ(t, on_cpu))
		return 0;
	if (!out) {
		ts->wake_time = 0;
		ts->state = state == TASK_RUNNING ? VPS_RUNNABLE_PREEMPT : blocked_state(t, state);
	} else if (ts->wake_time && ts->wake_time < win_start) {
		ts->wake_time = win_start;   /* woken before the window: runnable from its start */
	}
	ts->kstack = -1;     /* a kernel stack of another task has no id in the stack map */
	ts->ustack = us;
	ts->out_time = win_start;
	count(VPS_CNT_OPENED, 1);
	return 0;
}
