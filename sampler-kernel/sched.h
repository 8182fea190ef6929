/* The one header shared by sched.bpf.c (the context-switch tracer) and its user side
 * (sched_tracer.c): plain __u32/__u64 structs and constants only.
 *
 * The tracer runs at every sched_switch, sched_wakeup and sched_wakeup_new on every CPU.
 * It charges each thread, in nanoseconds:
 *   - steal: the run queue's steal clock (rq->prev_steal_time_rq, advanced by the
 *     kernel at every update_rq_clock from the paravirt steal clock) that advanced on
 *     that CPU between the thread's switch-in and its switch-out, under its stack at
 *     switch-out;
 *   - off-CPU: from its switch-out to its next switch-in, split into the blocked part
 *     (switch-out to wakeup) and the run-queue part (wakeup, or switch-out when it was
 *     preempted, to switch-in), under its stack at switch-out.
 * Intervals are not sent one by one: they are summed in a hash keyed by (thread,
 * state, kernel stack id, user stack id), one of two that user space swaps and drains
 * on a timer, so the ring-buffer-free cost per switch is a hash update and the bytes
 * written per second are bounded by the distinct keys per drain period. */
#ifndef VIPROF_SAMPLER_SCHED_H
#define VIPROF_SAMPLER_SCHED_H

#include "profile.h"   /* the walker's frame limits and struct vpb_jframe */

/* vps_key.state: what the thread was doing in the interval (the values of
 * VP_SCHED_* in common/session_format.h). */
#define VPS_STEAL            1   /* running while the hypervisor ran something else */
#define VPS_BLOCKED_SLEEP    2   /* blocked: in nanosleep/clock_nanosleep (a timed sleep) */
#define VPS_BLOCKED_IO       3   /* blocked: in I/O wait (task->in_iowait) */
#define VPS_BLOCKED_LOCK     4   /* blocked: in futex (a user-space lock or condition) */
#define VPS_RUNNABLE_PREEMPT 5   /* runnable: preempted, waiting on the run queue */
#define VPS_RUNNABLE_WOKEN   6   /* runnable: woken (or new), waiting on the run queue */
#define VPS_BLOCKED_OTHER    7   /* blocked: uninterruptible, not I/O (D state) */
#define VPS_BLOCKED_FD       8   /* blocked: waiting for a file descriptor (poll, epoll, select,
				  * read, recv, accept): sockets, pipes, terminals */
#define VPS_BLOCKED_WAIT     9   /* blocked: any other interruptible wait (wait4, pause, ...) */
#define VPS_STATE_MAX        10

#define VPS_MAX_THREADS 65536
#define VPS_MAX_STACKS  16384
#define VPS_MAX_DEPTH   127      /* perf_event_max_stack's default */
#define VPS_AGG_ENTRIES 32768    /* per aggregation hash; resized by user space */
#define VPS_MAX_CPUS    1024

/* The tracked processes and the target_mode values are the sampler's (tracked.bpf.h,
 * profile.h): one map, shared by the two objects when both run. */

/* Indexes into the per-CPU counters array. */
#define VPS_CNT_SWITCHES   0     /* sched_switch calls seen */
#define VPS_CNT_AGG_FULL   1     /* an interval not summed: the aggregation hash was full (its ns in VPS_CNT_AGG_FULL_NS) */
#define VPS_CNT_AGG_FULL_NS 2
#define VPS_CNT_NO_STACK   3     /* a stack id could not be taken (-EEXIST, -EFAULT) */
#define VPS_CNT_NO_RQ      4     /* a switch where this CPU's run queue could not be found */
#define VPS_CNT_MISSED_IN  5     /* a tracked thread's switch-in the program did not see (see sched.bpf.c) */
#define VPS_CNT_MISSED_NS  6     /* the on-CPU time of those runs, from the task's own runtime */
#define VPS_CNT_WALKS      7     /* user stacks taken with the sampler's walker (walked or reused) */
#define VPS_CNT_WALK_NS    8     /* the time those took (walk, interning, or the check for reuse) */
#define VPS_CNT_USTACK_FULL 9    /* a walked stack not interned: the ustacks hash was full */
#define VPS_CNT_EARLY      10    /* an interval dropped: opened before the walking object took over */
#define VPS_CNT_EARLY_NS   11    /* their duration */
#define VPS_CNT_OPENED     12    /* intervals opened at the window's start by sched_open.bpf.c */
#define VPS_CNT_REUSED     13    /* of VPS_CNT_WALKS: the thread's last walk reused (its stack unchanged) */
#define VPS_CNT_REUSED_NS  14    /* the time those took (the check) */
/* Where the switch-out walks' time goes (bench/cost-breakdown.sh, VIPROF_DEBUG_TIMING). */
#define VPS_CNT_WALK_PREEMPT 15  /* of VPS_CNT_WALKS: at a preemption (walked, not kept for reuse) */
#define VPS_CNT_WALK_PREEMPT_NS 16
#define VPS_CNT_MISS_NOLAST 17   /* a block walked: no kept walk for its thread (first, or last not kept) */
#define VPS_CNT_MISS_REGS  18    /* a block walked: its registers or tables differ from the kept walk's */
#define VPS_CNT_MISS_WORDS 19    /* a block walked: the same registers, a word the kept walk read differs */
#define VPS_CNT_CHECK_WORDS 20   /* words compared by the reuse checks that passed */
#define VPS_CNT_CHECK_BYTES 21   /* stack bytes those checks copied */
#define VPS_CNT_WALK_FRAMES 22   /* frames walked by the walks not reused */
#define VPS_CNT_REUSED_PREEMPT 23 /* of VPS_CNT_REUSED: at a preemption (the walk kept at the thread's last block) */
/* Without --off-cpu (sched_lite.bpf.c): a thread that ended or was counted at the end
 * although it ran before the window opened and the pass that opened it did not see it
 * (it was born, or ended, while that pass ran): no sums for it (it had no baseline). */
#define VPS_CNT_NO_BASE    24
#define VPS_CNT_NR         25

/* vps_key.ustack: 0 = no user stack; VPS_USTACK_FP | id = a frame-pointer walk, id in
 * the stacks map (no walker, or the process's tables not loaded yet); anything else =
 * the key of a walked stack in the ustacks map (walker.bpf.h). */
#define VPS_USTACK_FP (1ull << 63)

/* An off-CPU interval (a part: blocked, or on the run queue) at least this long is kept
 * apart, under its own start (vps_key.start), so that its duration and times reach the
 * session whole (issue 33: JFR's events need each wait's start and length; JFR's own
 * profile settings record parks, monitor waits and sleeps from 10 ms on). Shorter ones
 * are summed per stack. At most 1 / VPS_SPLIT_NS entries a second per thread. */
#define VPS_SPLIT_NS (10ull * 1000000)   /* = VP_OFFCPU_SPLIT_NS, asserted in sched_tracer.c */

struct vps_key {
	__u32 pid, tid;
	__u32 state;                 /* VPS_* */
	__s32 kstack;                /* stack id in the stacks map, or < 0 */
	__u64 ustack;                /* VPS_USTACK_FP | id, a ustacks key, or 0 */
	__u64 start;                 /* a long interval's start (see VPS_SPLIT_NS), else 0 */
};

/* A user stack walked at switch-out by the sampler's walker (walker.bpf.h), interned in
 * the ustacks hash under a 64-bit hash of its contents: the frames, the interpreted
 * frames' Method* and bytecode index, and how the walk ended. An off-CPU stack is
 * walked as deep as an on-CPU one (VPB_MAX_WALK frames, each possibly interpreted: a
 * thread waiting 1000 calls deep keeps its main). Every distinct stack is kept whole
 * for the whole recording, so it is stored in parts (struct vps_ustack, keyed by hash and
 * part): part k holds frames k*VPS_PART_FRAMES.. and interpreted frames
 * k*VPS_PART_JFRAMES..; a stack of up to 127 frames and 48 interpreted ones, nearly
 * all of them, costs one part as before, a 2048-frame one 17. Part 0 (in ustacks) is
 * written last, so that a reader who finds it finds the others (in uparts). Deeper stacks end with
 * VPB_WALK_DEPTH (docs/stacks.md). */
#define VPS_MAX_USTACKS 16384        /* stacks (their part 0); resized by user space */
#define VPS_MAX_UPARTS  2048         /* the other parts of deep stacks, preallocated */
#define VPS_MAX_UFRAMES VPB_MAX_WALK
#define VPS_MAX_JFRAMES VPB_MAX_JFRAMES
#define VPS_PART_FRAMES 127
#define VPS_PART_JFRAMES 48
#define VPS_MAX_PARTS ((VPS_MAX_JFRAMES + VPS_PART_JFRAMES - 1) / VPS_PART_JFRAMES)
struct vps_ukey {
	__u64 hash;                  /* vps_key.ustack */
	__u32 part;
	__u32 pad;
};
struct vps_ustack {
	__u16 n, nj;                 /* the whole stack's frames, interpreted frames */
	__u16 walk_end;              /* VPB_WALK_* */
	__u16 pad;
	__u64 ips[VPS_PART_FRAMES];  /* leaf first */
	struct vpb_jframe jframes[VPS_PART_JFRAMES];
};

struct vps_val {
	__u64 ns;                    /* summed duration */
	__u64 count;                 /* intervals */
	__u64 last;                  /* CLOCK_MONOTONIC of the last interval's end (a blocked
				      * part's at its wakeup, a run-queue part's at switch-in) */
};

/* Per CPU: the steal clock at the last switch on it, and what the tracer charged. */
struct vps_cpu {
	__u64 steal_last;            /* rq->prev_steal_time_rq at the last switch (first_time 0: none yet) */
	__u64 steal_first;           /* ... at the first switch the tracer saw */
	__u64 charged;               /* steal charged to threads (and idle) since then */
	__u64 kstat_first, kstat_last; /* rq->prev_steal_time at those switches: what the kernel
					* accounted (at ticks) into CPUTIME_STEAL, /proc/stat's steal */
	__u64 first_time, last_time;
	__u64 idle_steal;            /* of charged: while the idle task ran */
	/* The thread the last switch on this CPU brought in, when, and its runtime then:
	 * without off-CPU intervals, a thread's switch-in is this, not a task storage
	 * lookup per switch (sched.bpf.c, on_switch). 0: none seen yet. */
	__u32 in_tid, pad;
	__u64 in_time, in_sum;
};

/* Per tracked thread: exact on-CPU time and switches (read at the end). With --off-cpu
 * (sched.bpf.c) they are summed at its switches; without (sched_lite.bpf.c) they are
 * the kernel's own counters (se.sum_exec_runtime, nvcsw + nivcsw) at the window's edges
 * or the thread's end, less what they were when the window opened. */
struct vps_thread {
	__u32 pid, pad;
	__u64 oncpu_ns;
	__u64 switches;
	__u64 steal_ns;
	__u64 first, last;           /* first switch-in and last switch seen */
};

#endif
