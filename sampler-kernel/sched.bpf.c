// SPDX-License-Identifier: GPL-2.0
/* The context-switch tracer: exact steal per thread from the run queue's steal clock,
 * and off-CPU intervals (blocked and runnable) with the stack at switch-out. See
 * sched.h for what is charged; user space is sampler-kernel/sched_tracer.c. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "sched.h"
/* Off-CPU stacks are walked to perf's depth (sched.h), with the stack copy they had. */
#define WALK_MAX VPS_MAX_UFRAMES
#define WALK_MAXJ VPS_MAX_JFRAMES
#define STK_BYTES 8192
#include "walker.bpf.h"
#include "tracked.bpf.h"

char LICENSE[] SEC("license") = "GPL";

const volatile bool off_cpu = false;   /* --off-cpu: charge off-CPU intervals too */
/* Only tasks whose real, effective and saved uid are this one (the service's users). */
const volatile __u32 filter_uid = (__u32)-1;
/* Walk user stacks at switch-out with the sampler's unwind-table and HotSpot walker
 * (walker.bpf.h, its maps reused from the sampler's object) instead of frame pointers. */
const volatile bool walker = false;
/* No kernel stacks: the recording is user-only (every event ":u", as the service makes
 * it for a user the kernel shows no kernel address: perf_event_paranoid 2 or
 * kptr_restrict). The sampler's perf events exclude the kernel themselves; a switch
 * always happens in the kernel, so here it is this program that must not look. */
const volatile bool user_only = false;

/* Which aggregation hash the programs add to; user space flips it and drains the other. */
volatile __u32 agg_sel = 0;
/* The recording's sampling window (CLOCK_MONOTONIC ns, set by user space: sched.h): time
 * is charged only inside it. The tracer runs from before the sampler starts (it must see
 * the switch-outs of threads that block before the window opens) to after it stops; an
 * interval or a run that straddles an edge is cut at it, so that a thread's running,
 * runnable, blocked and steal add up to the window's length, not more. win_start ~0: not
 * open yet (vp_sched_config.windowed), 0: open from the start; win_end 0: not closed. */
volatile __u64 win_start = 0, win_end = 0;
/* When the walking object took over (use_walker): intervals opened before it carry
 * frame-pointer user stacks, which lose a Java thread's callers; they are dropped, and
 * counted (VPS_CNT_EARLY), not charged to a stack that says less than the rest. */
volatile __u64 walk_since = 0;

#define PF_KTHREAD 0x00200000
/* The tracer's own frames at the leaf of a kernel stack taken here: the program,
 * bpf_trace_run4 and __traceiter_sched_switch; the stack then starts in __schedule. */
#define KSTACK_SKIP 3
#define TASK_RUNNING 0x0000
#define TASK_UNINTERRUPTIBLE 0x0002
#define TASK_DEAD 0x0080
#define TASK_WAKEKILL 0x0100


struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, VPS_MAX_STACKS);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, VPS_MAX_DEPTH * sizeof(__u64));
} stacks SEC(".maps");

/* Walked user stacks, by the hash of their contents; kept for the whole recording like
 * the stack-trace map (user space reads them when it drains the sums). Allocated as
 * stacks appear, not up front: most recordings need a few hundred. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, VPS_MAX_USTACKS);
	__type(key, __u64);
	__type(value, struct vps_ustack);
} ustacks SEC(".maps");

/* One stack being interned, per CPU (too large for the BPF stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct vps_ustack);
} ustack_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, VPS_AGG_ENTRIES);
	__type(key, struct vps_key);
	__type(value, struct vps_val);
} agg0 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, VPS_AGG_ENTRIES);
	__type(key, struct vps_key);
	__type(value, struct vps_val);
} agg1 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, VPS_MAX_THREADS);
	__type(key, __u32);
	__type(value, struct vps_thread);
} threads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, VPS_MAX_CPUS);
	__type(key, __u32);
	__type(value, struct vps_cpu);
} cpus SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, VPS_CNT_NR);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

/* What a thread was doing when it left the CPU, until it is back on one. */
struct tstate {
	__u64 in_time;     /* last switch-in, 0 = not seen running yet */
	__u64 out_time;    /* last switch-out with an off-CPU interval open, 0 = none */
	__u64 wake_time;   /* wakeup after out_time (or sched_wakeup_new), 0 = none */
	__u64 last_out;    /* last switch-out seen, 0 = none */
	__u64 sum_out;     /* the task's se.sum_exec_runtime then */
	__u64 ustack;      /* vps_key.ustack of the open interval */
	__s32 kstack;
	__u32 state;       /* VPS_* of the open interval */
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct tstate);
} tstates SEC(".maps");

static __always_inline void count(__u32 idx, __u64 n)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &idx);

	if (v)
		*v += n;
}

static __always_inline bool is_tracked(struct task_struct *t)
{
	__u32 tgid = t->tgid;

	if (t->pid == 0)
		return false;   /* the idle task: its steal goes to the CPU's idle total */
	if (filter_uid != (__u32)-1 &&
	    (BPF_CORE_READ(t, cred, uid.val) != filter_uid || BPF_CORE_READ(t, cred, euid.val) != filter_uid ||
	     BPF_CORE_READ(t, cred, suid.val) != filter_uid))
		return false;
	return follows(tgid);
}

static __always_inline void agg_to(void *map, struct vps_key *k, __u64 ns, __u64 now)
{
	struct vps_val *v = bpf_map_lookup_elem(map, k);

	if (!v) {
		struct vps_val z = {};

		bpf_map_update_elem(map, k, &z, BPF_NOEXIST);
		v = bpf_map_lookup_elem(map, k);
		if (!v) {
			count(VPS_CNT_AGG_FULL, 1);
			count(VPS_CNT_AGG_FULL_NS, ns);
			return;
		}
	}
	__sync_fetch_and_add(&v->ns, ns);
	__sync_fetch_and_add(&v->count, 1);
	v->last = now;
}

static __always_inline void agg(__u32 pid, __u32 tid, __u32 state, __s32 ks, __u64 us, __u64 ns, __u64 now)
{
	struct vps_key k = { .pid = pid, .tid = tid, .state = state, .kstack = ks, .ustack = us };

	if (!ns)
		return;
	if (agg_sel & 1)
		agg_to(&agg1, &k, ns, now);
	else
		agg_to(&agg0, &k, ns, now);
}

/* [*from, *to) cut to the sampling window; false when nothing of it lies inside. */
static __always_inline bool in_window(__u64 *from, __u64 *to)
{
	__u64 ws = win_start, we = win_end;

	if (*from < ws)
		*from = ws;
	if (we && *to > we)
		*to = we;
	return *to > *from;
}

/* The part of a run of n ns ending at now that lies inside the sampling window. */
static __always_inline __u64 run_in_window(__u64 now, __u64 n)
{
	__u64 from = n < now ? now - n : 0, to = now;

	return in_window(&from, &to) ? to - from : 0;
}

/* Charges the open off-CPU interval of ts, ending at now. ran is on-CPU time inside it
 * that no switch showed (a switch-in the program did not see, then the switch-out
 * that ends here or a switch-in and -out both unseen): it comes off the interval's
 * run-queue part (a blocked thread runs only after its wakeup), then off the blocked
 * part, so that running + off-CPU still add up to the elapsed time. The parts are then
 * cut to the sampling window. */
static __always_inline void charge_off(struct tstate *ts, __u32 pid, __u32 tid, __u64 now, __u64 ran)
{
	__u64 out = ts->out_time, w = ts->wake_time, from, to, end;

	if (!out || now <= out)
		return;
	if (walker && out < walk_since) {
		/* Opened by the frame-pointer object before this one took over. */
		count(VPS_CNT_EARLY, 1);
		count(VPS_CNT_EARLY_NS, now - out);
		return;
	}
	if (ran > now - out)
		ran = now - out;
	if (ts->state == VPS_RUNNABLE_PREEMPT) {
		from = out;
		to = now - ran;
		if (in_window(&from, &to))
			agg(pid, tid, VPS_RUNNABLE_PREEMPT, ts->kstack, ts->ustack, to - from, now);
		return;
	}
	/* Blocked until the wakeup, then waiting on the run queue; the unseen run is taken
	 * off the end of the run-queue part, then of the blocked part. */
	if (!w || w < out || w > now)
		w = now;
	end = now - ran;
	if (w > end)
		w = end;
	from = out;
	to = w;
	if (in_window(&from, &to))
		agg(pid, tid, ts->state, ts->kstack, ts->ustack, to - from, now);
	from = w;
	to = end;
	if (in_window(&from, &to))
		agg(pid, tid, VPS_RUNNABLE_WOKEN, ts->kstack, ts->ustack, to - from, now);
}

/* This CPU's run queue, through the switching tasks' CFS run queues (the per-CPU
 * variable runqueues has no kallsyms address on kernels without CONFIG_KALLSYMS_ALL,
 * so it cannot be taken with bpf_this_cpu_ptr there). Every task's se.cfs_rq is set
 * for its CPU (set_task_rq), also the idle task's and RT tasks'. */
static __always_inline struct rq *this_rq(struct task_struct *prev, struct task_struct *next, __u32 cpu)
{
	struct rq *rq = BPF_CORE_READ(prev, se.cfs_rq, rq);

	if (rq && BPF_CORE_READ(rq, cpu) == (int)cpu)
		return rq;
	rq = BPF_CORE_READ(next, se.cfs_rq, rq);
	if (rq && BPF_CORE_READ(rq, cpu) == (int)cpu)
		return rq;
	return NULL;
}

/* What a blocked thread waits for, from what the kernel knows at switch-out: I/O wait,
 * else the system call it is blocked in (its number in pt_regs->orig_ax; -1 when it
 * blocked outside one, e.g. on a page fault), else the task state. Java's own waits all
 * go through futex; the report names them from their Java frames (docs/offcpu.md). */
static __always_inline __u32 blocked_state(struct task_struct *prev, unsigned int prev_state)
{
	if (BPF_CORE_READ_BITFIELD_PROBED(prev, in_iowait))
		return VPS_BLOCKED_IO;
#if defined(__TARGET_ARCH_x86)
	{
		struct pt_regs *r = (struct pt_regs *)bpf_task_pt_regs(prev);
		long nr = r ? BPF_CORE_READ(r, orig_ax) : -1;

		switch (nr) {
		case 202: case 449: case 455:          /* futex, futex_waitv, futex_wait */
			return VPS_BLOCKED_LOCK;
		case 35: case 230:                     /* nanosleep, clock_nanosleep */
			return VPS_BLOCKED_SLEEP;
		case 0: case 17: case 19: case 295:    /* read, pread64, readv, preadv */
		case 7: case 23: case 270: case 271:   /* poll, select, pselect6, ppoll */
		case 232: case 281: case 441:          /* epoll_wait, epoll_pwait, epoll_pwait2 */
		case 43: case 288: case 42:            /* accept, accept4, connect */
		case 45: case 47: case 299:            /* recvfrom, recvmsg, recvmmsg */
		case 44: case 46: case 1: case 20:     /* sendto, sendmsg, write, writev */
			return VPS_BLOCKED_FD;
		}
	}
#endif
	if ((prev_state & TASK_UNINTERRUPTIBLE) && !(prev_state & TASK_WAKEKILL))
		return VPS_BLOCKED_OTHER;
	return VPS_BLOCKED_WAIT;
}

struct hash_ctx {
	struct walk *w;
	struct vps_ustack *u;
	__u64 h;
};

/* Copies frame i of the walk into the stack being interned and mixes it into the hash.
 * Only the walk's n frames are visited (user space reads n of them): a loop over the
 * whole array cost as much as the walk of a shallow stack. */
static long hash_frame(__u32 i, void *data)
{
	struct hash_ctx *c = data;
	__u64 x = 0;

	/* Written so that the compiler keeps the bound check on the register the index
	 * uses (the verifier rejects the access otherwise). */
	if (i >= VPS_MAX_UFRAMES)
		return 1;
	if (i < c->w->n)
		x = c->w->ustack[i];
	c->u->ips[i] = x;
	c->h = (c->h ^ x) * 0x100000001b3ull;
	c->h ^= c->h >> 29;
	return 0;
}

static long hash_jframe(__u32 i, void *data)
{
	struct hash_ctx *c = data;
	struct vpb_jframe z = {};

	if (i >= VPS_MAX_JFRAMES)
		return 1;
	if (i < c->w->nj)
		z = c->w->jframes[i];
	c->u->jframes[i] = z;
	c->h = (c->h ^ z.method ^ ((__u64)z.frame << 48) ^ (__u32)z.bci) * 0x100000001b3ull;
	c->h ^= c->h >> 29;
	return 0;
}

/* The current task's user stack, walked by the sampler's walker from its saved user
 * registers (so a wait inside a libc wrapper without frame pointers shows its
 * callers, and Java frames without -XX:+PreserveFramePointer are found), interned in
 * ustacks. A frame-pointer walk when its process has no tables yet. */
static __always_inline __u64 walked_ustack(void *ctx, struct task_struct *task, __u32 tgid)
{
	__u32 zero = 0;
	struct walk *w = walk_scratch();
	struct vps_ustack *u = bpf_map_lookup_elem(&ustack_scratch, &zero);
	struct pt_regs *r = (struct pt_regs *)bpf_task_pt_regs(task);
	struct hash_ctx hc;
	__u64 t0 = bpf_ktime_get_ns();
	long id;

	if (!w || !u || !r)
		return 0;
	w->s.pid = tgid;
	if (!walk_regs(w, tgid, BPF_CORE_READ(r, ip), BPF_CORE_READ(r, sp), BPF_CORE_READ(r, bp),
		       BPF_CORE_READ(r, r13))) {
		id = bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK);
		return id < 0 ? 0 : VPS_USTACK_FP | (__u32)id;
	}
	u->n = (__u16)w->n;
	u->nj = (__u16)w->nj;
	u->walk_end = (__u16)w->end;
	u->pad = 0;
	hc.w = w;
	hc.u = u;
	hc.h = 0xcbf29ce484222325ull ^ w->end ^ ((__u64)w->n << 8) ^ ((__u64)w->nj << 24);
	bpf_loop(w->n < VPS_MAX_UFRAMES ? w->n : VPS_MAX_UFRAMES, hash_frame, &hc, 0);
	bpf_loop(w->nj < VPS_MAX_JFRAMES ? w->nj : VPS_MAX_JFRAMES, hash_jframe, &hc, 0);
	hc.h &= ~VPS_USTACK_FP;
	if (!hc.h)
		hc.h = 1;
	/* The first time a stack is seen it is stored; later, the lookup is all. */
	if (!bpf_map_lookup_elem(&ustacks, &hc.h) && bpf_map_update_elem(&ustacks, &hc.h, u, BPF_NOEXIST) &&
	    !bpf_map_lookup_elem(&ustacks, &hc.h)) {
		count(VPS_CNT_USTACK_FULL, 1);
		hc.h = 0;
	}
	count(VPS_CNT_WALKS, 1);
	count(VPS_CNT_WALK_NS, bpf_ktime_get_ns() - t0);
	return hc.h;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	__u64 now = bpf_ktime_get_ns(), steal = 0, kstat = 0, delta = 0;
	__u32 cpu = bpf_get_smp_processor_id();
	struct vps_cpu *c = bpf_map_lookup_elem(&cpus, &cpu);
	struct rq *rq = this_rq(prev, next, cpu);
	struct tstate *ts;
	bool dead = prev_state & TASK_DEAD;

	count(VPS_CNT_SWITCHES, 1);
	if (!rq) {
		/* Not this CPU's run queue: nothing read, the steal of this interval goes to
		 * whoever leaves the CPU at the next switch that can read it. */
		count(VPS_CNT_NO_RQ, 1);
	} else if (c) {
		steal = BPF_CORE_READ(rq, prev_steal_time_rq);
		kstat = BPF_CORE_READ(rq, prev_steal_time);
		/* Seen once is first_time set, not a steal clock above 0: on a vCPU whose
		 * steal clock starts moving during the recording, the first steal is charged
		 * like every later one. */
		if (c->first_time) {
			delta = steal > c->steal_last ? steal - c->steal_last : 0;
		} else {
			c->steal_first = steal;
			c->kstat_first = kstat;
			c->first_time = now;
		}
		c->steal_last = steal;
		c->kstat_last = kstat;
		c->last_time = now;
		c->charged += delta;
		if (prev->pid == 0)
			c->idle_steal += delta;
	}

	if (is_tracked(prev)) {
		__u32 pid = prev->tgid, tid = prev->pid;
		bool open = off_cpu && !dead;
		__s32 ks = -1;
		__u64 us = 0;
		struct vps_thread *th;

		/* Stacks only when something will hang under them: the stack ids cost a
		 * walk each. Current is still prev here, so these are its stacks. */
		if (delta || open) {
			if (!user_only)
				ks = bpf_get_stackid(ctx, &stacks, KSTACK_SKIP);
			if (!(prev->flags & PF_KTHREAD)) {
				if (walker) {
					us = walked_ustack(ctx, prev, pid);
				} else {
					long id = bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK);

					us = id < 0 ? 0 : VPS_USTACK_FP | (__u32)id;
				}
			}
			if ((!user_only && ks < 0) || (!(prev->flags & PF_KTHREAD) && !us))
				count(VPS_CNT_NO_STACK, 1);
		}
		/* Steal that accrued in the window (a run that straddles an edge has all of
		 * it or none: the clock is read at switches only). */
		__u64 tdelta = now >= win_start && (!win_end || now <= win_end) ? delta : 0;

		agg(pid, tid, VPS_STEAL, ks, us, tdelta, now);
		ts = bpf_task_storage_get(&tstates, prev, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
		th = bpf_map_lookup_elem(&threads, &tid);
		if (!th) {
			struct vps_thread z = { .pid = pid, .first = ts && ts->in_time ? ts->in_time : now };

			bpf_map_update_elem(&threads, &tid, &z, BPF_NOEXIST);
			th = bpf_map_lookup_elem(&threads, &tid);
		}
		/* On-CPU since the switch-in. When that switch-in was not seen (in_time 0
		 * after a switch-out that was), the run is measured by the task's own
		 * runtime since that switch-out, and the off-CPU interval it ended is
		 * charged less that run. */
		__u64 sum = BPF_CORE_READ(prev, se.sum_exec_runtime), run = 0;

		if (ts && ts->in_time && now > ts->in_time) {
			run = now - ts->in_time;
		} else if (ts && ts->last_out && now > ts->last_out) {
			run = sum > ts->sum_out ? sum - ts->sum_out : 0;
			if (run > now - ts->last_out)
				run = now - ts->last_out;
			count(VPS_CNT_MISSED_IN, 1);
			count(VPS_CNT_MISSED_NS, run);
			if (off_cpu)
				charge_off(ts, pid, tid, now, run);
		}
		if (th) {
			th->oncpu_ns += run_in_window(now, run);
			th->switches++;
			th->steal_ns += tdelta;
			th->last = now;
		}
		if (ts) {
			ts->last_out = now;
			ts->sum_out = sum;
			ts->in_time = 0;
			ts->wake_time = 0;
			ts->out_time = open ? now : 0;
			if (open) {
				ts->kstack = ks;
				ts->ustack = us;
				ts->state = preempt || prev_state == TASK_RUNNING ? VPS_RUNNABLE_PREEMPT
										 : blocked_state(prev, prev_state);
			}
		}
	}

	if (is_tracked(next)) {
		__u32 pid = next->tgid, tid = next->pid;

		ts = bpf_task_storage_get(&tstates, next, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (!ts)
			return 0;
		/* Runtime since the last switch-out seen: 0, unless a switch-in and the
		 * switch-out after it were both missed; then that run is on-CPU time. */
		__u64 ran = 0;

		if (ts->last_out) {
			__u64 sum = BPF_CORE_READ(next, se.sum_exec_runtime);

			ran = sum > ts->sum_out ? sum - ts->sum_out : 0;
			if (ran) {
				struct vps_thread *th = bpf_map_lookup_elem(&threads, &tid);

				if (ran > now - ts->last_out)
					ran = now - ts->last_out;
				if (th)
					th->oncpu_ns += run_in_window(now, ran);
				ts->sum_out = sum;
				count(VPS_CNT_MISSED_IN, 1);
				count(VPS_CNT_MISSED_NS, ran);
			}
		}
		if (off_cpu && ts->out_time && now > ts->out_time) {
			charge_off(ts, pid, tid, now, ran);
		} else if (off_cpu && !ts->out_time && ts->wake_time && now > ts->wake_time) {
			/* A new thread's first wait on the run queue (sched_wakeup_new). */
			__u64 from = ts->wake_time, to = now;

			if (in_window(&from, &to))
				agg(pid, tid, VPS_RUNNABLE_WOKEN, -1, 0, to - from, now);
		}
		ts->out_time = 0;
		ts->wake_time = 0;
		ts->in_time = now;
	}
	return 0;
}

static __always_inline void wakeup(struct task_struct *p, bool new_task)
{
	struct tstate *ts;

	if (!off_cpu || !is_tracked(p))
		return;
	ts = bpf_task_storage_get(&tstates, p, 0, new_task ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
	if (!ts)
		return;
	/* The first wakeup after the switch-out ends the blocked part. */
	if ((new_task || ts->out_time) && !ts->wake_time)
		ts->wake_time = bpf_ktime_get_ns();
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(on_wakeup, struct task_struct *p)
{
	wakeup(p, false);
	return 0;
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(on_wakeup_new, struct task_struct *p)
{
	wakeup(p, true);
	return 0;
}

/* -p and launched commands follow the processes they fork (tracked.bpf.h). */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	follow_fork(parent, child);
	return 0;
}
