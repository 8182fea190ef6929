// SPDX-License-Identifier: GPL-2.0
/* The context-switch tracer: exact steal per thread from the run queue's steal clock,
 * and off-CPU intervals (blocked and runnable) with the stack at switch-out. See
 * sched.h for what is charged; user space is sampler-kernel/sched_tracer.c. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "sched.h"
/* Off-CPU stacks are walked as deep as the sampler's (sched.h). */
#define WALK_MAX VPS_MAX_UFRAMES
#define WALK_MAXJ VPS_MAX_JFRAMES
#define STK_BYTES 65536
/* The walk logs the words it reads, up to this many, so that the next switch-out of the
 * same thread can reuse it when none changed (walked_ustack). A 50-frame Java stack
 * reads about 150; a walk that reads more is not reused. */
#define WALK_SEG_WIN 16  /* segment-map bytes read at once (walker.bpf.h; a power of 2) */
#define WALK_LOG 512
_Static_assert((WALK_LOG & (WALK_LOG - 1)) == 0, "read_u64 wraps its log index with a mask");
#include "walker.bpf.h"
#include "tracked.bpf.h"

char LICENSE[] SEC("license") = "GPL";

const volatile bool off_cpu = false;   /* --off-cpu: charge off-CPU intervals too */
/* Only tasks whose real, effective and saved uid are this one (the service's users). */
const volatile __u32 filter_uid = (__u32)-1;
/* Walk user stacks at switch-out with the sampler's unwind-table and HotSpot walker
 * (walker.bpf.h, its maps reused from the sampler's object) instead of frame pointers. */
const volatile bool walker = false;
/* Reuse a thread's last walk when its stack is unchanged (walked_ustack); off only for
 * benchmarks that measure the walk itself (VIPROF_DEBUG_NO_WALK_REUSE). */
const volatile bool walk_reuse = true;

/* When the walking object took over (use_walker): intervals opened before it carry
 * frame-pointer user stacks, which lose a Java thread's callers; they are dropped, and
 * counted (VPS_CNT_EARLY), not charged to a stack that says less than the rest. */
volatile __u64 walk_since = 0;

#include "sched_state.bpf.h"
#include "sched_common.bpf.h"

/* Adds a thread's sums kept in its task storage (struct tstate) to the threads hash
 * that user space reads, and clears them: at the thread's last switch, and for the
 * threads still alive by the pass at the end (flush_threads). Each switch adds to the
 * task storage it already has in hand; a hash lookup per switch-out was a third of
 * the tracer's cost on a JVM's switches. */
static __always_inline void flush_thread(struct tstate *ts, __u32 pid, __u32 tid)
{
	struct vps_thread *th;

	if (!ts->switches && !ts->oncpu_ns && !ts->steal_ns)
		return;
	th = thread_entry(pid, tid, ts->first);
	if (th) {
		th->oncpu_ns += ts->oncpu_ns;
		th->switches += ts->switches;
		th->steal_ns += ts->steal_ns;
		if (ts->last > th->last)
			th->last = ts->last;
	}
	ts->oncpu_ns = 0;
	ts->switches = 0;
	ts->steal_ns = 0;
}

/* Charges the open off-CPU interval of ts, ending at now. ran is on-CPU time inside it
 * that no switch showed (a switch-in the program did not see, then the switch-out
 * that ends here or a switch-in and -out both unseen): it comes off the interval's
 * run-queue part (a blocked thread runs only after its wakeup), then off the blocked
 * part, so that running + off-CPU still add up to the elapsed time. The parts are then
 * cut to the sampling window. */
static __always_inline void charge_off(struct tstate *ts, __u32 pid, __u32 tid, __u64 now, __u64 ran)
{
	/* Claimed at once: the closing pass (close_open) and a switch-in on another CPU
	 * may reach the same interval together; one of them charges it. */
	__u64 out = __sync_lock_test_and_set(&ts->out_time, 0), w = ts->wake_time, from, to, end;

	if (!out || now <= out)
		return;
	if (walker && out < walk_since) {
		/* Opened by the frame-pointer object before this one took over (and not
		 * opened again by the opening pass): counted when it reaches into the window,
		 * which is all it would have been charged. */
		if (now > win_start) {
			count(VPS_CNT_EARLY, 1);
			count(VPS_CNT_EARLY_NS, now - out);
		}
		return;
	}
	if (ran > now - out)
		ran = now - out;
	if (ts->state == VPS_RUNNABLE_PREEMPT) {
		from = out;
		to = now - ran;
		if (in_window(&from, &to))
			agg(pid, tid, VPS_RUNNABLE_PREEMPT, ts->kstack, ts->ustack, to - from, from, to);
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
		agg(pid, tid, ts->state, ts->kstack, ts->ustack, to - from, from, to);
	from = w;
	to = end;
	if (in_window(&from, &to))
		agg(pid, tid, VPS_RUNNABLE_WOKEN, ts->kstack, ts->ustack, to - from, from, to);
}

/* A thread's last walk at switch-out, for the next one: the registers it started from,
 * its process's tables (slot and generation), what it produced, and every word it read
 * that a step used (a saved rbp only once used: walker.bpf.h, read_fp):
 * those of the stack copy as offsets into it (8-byte aligned), the others (metadata,
 * stack beyond the copy) with their address. The check compares the first kind without
 * a branch per word (replay_stack): compared like the others, word by word with an
 * address, a bound and an exit each, the 98 words of a ParkDeep stack took 1.1 of the
 * check's 1.8 us. */
#define WALK_OTHER 128     /* words outside the stack copy; a walk that read more is not kept */
struct wlast {
	__u64 pc, sp, fp, r13;
	__u64 ustack;      /* the walk's vps_key.ustack; 0: nothing to reuse */
	__u32 tgid, slot, gen, nlog;   /* nlog: words in addr/val */
	__u32 nstk, pad;   /* words in soff/sval */
	__u64 stk_len;     /* the walk's copy of the stack: copied again at once to check */
	__u16 soff[WALK_LOG];
	__u64 sval[WALK_LOG];
	__u64 addr[WALK_OTHER];
	__u64 val[WALK_OTHER];
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct wlast);
} wlasts SEC(".maps");

struct replay_ctx {
	struct walk *w;
	struct wlast *l;
	__u32 n;
	bool same;
};

#define REPLAY_STEP 4    /* words per bpf_loop iteration: the call costs as much as a word */

/* A word for the check: from the stack copy the check took (reusable), else from the
 * process. Simpler than read_u64 (no copy grows here), so cheaper to verify. */
static __always_inline int check_word(struct walk *w, __u64 addr, __u64 *v)
{
	__u64 off = addr - w->stk_base;

	if (addr >= w->stk_base && off + 8 <= w->stk_len && off <= STK_BYTES - 8) {
		*v = *(__u64 *)&w->stk[off & (STK_BYTES - 1)];   /* one load (read_u64_raw) */
		return 0;
	}
	return bpf_probe_read_user(v, sizeof(*v), (const void *)addr);
}

static long replay_words(__u32 i, void *data)
{
	struct replay_ctx *c = data;
	__u64 v;

	for (int k = 0; k < REPLAY_STEP; k++) {
		__u32 j = i * REPLAY_STEP + k;

		if (j >= c->n)
			return 1;
		/* Checked on the register the access uses (the verifier rejects it when the
		 * compiler folds the check into the loop's induction variable). */
		barrier_var(j);
		if (j >= WALK_OTHER)
			return 1;
		if (check_word(c->w, c->l->addr[j], &v) || v != c->l->val[j]) {
			c->same = false;
			return 1;
		}
	}
	return 0;
}

#define REPLAY_STK 16    /* stack words per bpf_loop iteration of replay_stack */

/* The stack words, from the check's copy (at least as long as the walk's: keep_walk
 * took only offsets below it), all of an iteration's differences or'ed together. */
static long replay_stack(__u32 i, void *data)
{
	struct replay_ctx *c = data;
	struct wlast *l = c->l;
	__u8 *stk = c->w->stk;
	__u64 diff = 0;

	for (int k = 0; k < REPLAY_STK; k++) {
		__u32 j = i * REPLAY_STK + k;

		if (j >= c->n)
			break;
		j &= WALK_LOG - 1;
		diff |= *(__u64 *)(stk + (l->soff[j] & (STK_BYTES - 8))) ^ l->sval[j];
	}
	if (diff) {
		c->same = false;
		return 1;
	}
	return 0;
}

/* Is the thread's last walk still its stack? The walk is a function of the registers
 * it starts from, the process's tables, the words it reads with read_u64 and uses (the
 * stack's return addresses, saved frame pointers a step used, the interpreter's frame slots, a
 * Method's ConstMethod) and of code: HotSpot's segment maps, code blob headers and, at
 * the leaf, instruction bytes. Registers, tables and every word are compared here (the
 * words read again, in the walk's order, from a fresh copy of the stack): the same
 * inputs make the same walk. Code is taken as unchanged at an unchanged pc: a code
 * blob is not freed while a frame on a stack is in it, and the one case left, a blob
 * freed and another compiled at the same address with a different frame layout under
 * a stack whose every word read is the same, is not checked (docs/offcpu.md). A thread
 * whose callers changed below an unchanged leaf (the same SP and pc at the switch,
 * other return addresses further up) differs in a word and is walked again. */
struct reuse_ctx {
	struct walk *w;
	struct wlast *l;
	__u64 pc, sp, fp, r13;
	__u32 tgid;
	__u32 blocked;     /* a block, not a preemption: its misses are counted */
	__u64 ustack;      /* out: the walk to reuse, 0: none */
};

/* Run as a bpf_loop callback of one iteration, like keep_walk. */
static long reusable(__u32 i, void *data)
{
	struct reuse_ctx *rc = data;
	struct walk *w = rc->w;
	struct wlast *l = rc->l;
	__u32 tgid = rc->tgid, *slot = bpf_map_lookup_elem(&proc_slots, &tgid);
	struct vpb_proc *p = slot ? bpf_map_lookup_elem(&unwind_procs, slot) : NULL;
	struct replay_ctx c = { .w = w, .l = l, .same = true };
	__u32 n = l->nlog;
	__u64 len = l->stk_len, sp = rc->sp;

	if (!l->ustack) {
		if (rc->blocked)
			count(VPS_CNT_MISS_NOLAST, 1);
		return 1;
	}
	if (!p || l->tgid != tgid || l->slot != *slot || l->gen != p->gen || l->pc != rc->pc ||
	    l->sp != sp || l->fp != rc->fp || l->r13 != rc->r13 || n > WALK_OTHER) {
		if (rc->blocked)
			count(VPS_CNT_MISS_REGS, 1);
		return 1;
	}
	/* The part of the stack the walk copied, in one copy (the walk grew it a chunk at
	 * a time as it went); words outside it are read one by one, as the walk read them.
	 * The copy must succeed: it is what shows the words the log left out (read_fp)
	 * still readable. */
	w->stk_base = sp;
	w->stk_len = 0;
	if (len > STK_BYTES || (len && bpf_probe_read_user(w->stk, len, (const void *)sp))) {
		if (rc->blocked)
			count(VPS_CNT_MISS_WORDS, 1);
		return 1;
	}
	w->stk_len = len;
	c.n = l->nstk;
	if (c.n > WALK_LOG)
		return 1;
	bpf_loop((c.n + REPLAY_STK - 1) / REPLAY_STK, replay_stack, &c, 0);
	c.n = n;
	if (c.same && n)
		bpf_loop((n + REPLAY_STEP - 1) / REPLAY_STEP, replay_words, &c, 0);
	if (c.same) {
		rc->ustack = l->ustack;
		count(VPS_CNT_CHECK_WORDS, n + l->nstk);
		count(VPS_CNT_CHECK_BYTES, w->stk_len);
	} else if (rc->blocked) {
		count(VPS_CNT_MISS_WORDS, 1);
	}
	return 1;
}

/* Keeps the walk just made (interned as h) in l for the next switch-out; h 0 (not
 * interned) is kept as it is, as nothing to reuse. Run as a bpf_loop callback of one
 * iteration: its tests then end inside it, and do not multiply the verifier's work on
 * everything after the walk (done inline, they doubled the load time of the program). */
struct keep_ctx {
	struct walk *w;
	struct wlast *l;
	__u64 h, pc, sp, fp, r13;
	__u32 tgid;
};

/* Files word j of the walk's log under the stack copy (an aligned offset in it) or the
 * others. The counts are kept in the map value, not in the context on the stack: there
 * the verifier tracked them exactly and walked the callback once per count (too large). */
static long sort_word(__u32 j, void *data)
{
	struct keep_ctx *c = data;
	struct walk *w = c->w;
	struct wlast *l = c->l;
	__u64 addr = w->log_addr[j & (WALK_LOG - 1)], val = w->log_val[j & (WALK_LOG - 1)];
	__u64 off = addr - w->stk_base;
	__u32 k;

	if (addr >= w->stk_base && off + 8 <= w->stk_len && off <= STK_BYTES - 8 && !(off & 7)) {
		k = l->nstk++;
		l->soff[k & (WALK_LOG - 1)] = (__u16)off;
		l->sval[k & (WALK_LOG - 1)] = val;
		return 0;
	}
	k = l->nlog++;
	if (k >= WALK_OTHER)
		return 1;
	l->addr[k] = addr;
	l->val[k] = val;
	return 0;
}

static long keep_walk(__u32 i, void *data)
{
	struct keep_ctx *c = data;
	struct walk *w = c->w;
	struct wlast *l = c->l;
	__u32 tgid = c->tgid, n = w->nlog, *slot = bpf_map_lookup_elem(&proc_slots, &tgid);
	struct vpb_proc *p = slot ? bpf_map_lookup_elem(&unwind_procs, slot) : NULL;

	l->ustack = 0;
	/* Only a walk that reached the root (or the depth limit) had a rule or a code
	 * blob for every frame: one that stopped early may have stopped at a table still
	 * being loaded (filled in under an index the process's entry already names, so
	 * its gen does not change), and the first walk after an exec often does. */
	if (!p || w->log_bad || (w->end != VPB_WALK_ROOT && w->end != VPB_WALK_DEPTH) || n >= WALK_LOG ||
	    *slot != w->slot)
		return 1;
	l->nstk = 0;
	l->nlog = 0;
	bpf_loop(n, sort_word, c, 0);
	if (l->nlog > WALK_OTHER)
		return 1;
	l->pc = c->pc;
	l->sp = c->sp;
	l->fp = c->fp;
	l->r13 = c->r13;
	l->tgid = tgid;
	l->slot = w->slot;
	l->gen = p->gen;
	l->stk_len = w->stk_len;
	l->ustack = c->h;
	return 1;
}

/* The current task's user stack, walked by the sampler's walker from its saved user
 * registers (so a wait inside a libc wrapper without frame pointers shows its
 * callers, and Java frames without -XX:+PreserveFramePointer are found), interned in
 * ustacks; or, when keep (the thread blocks), its last walk at a block, when nothing
 * that walk read has changed (most threads of a server wait at the same place every
 * time). Preemptions are walked and not kept: their stacks, anywhere in the thread's
 * work, seldom repeat, and would push out the wait's, which does. A frame-pointer walk
 * when its process has no tables yet.
 *
 * A global function (not static), so that the verifier checks it once, on its own:
 * inlined, it walked the walker once per distinct state of on_switch that reached it,
 * and loading the walking object took 0.43 s of CPU (0.58 s with the reuse); now 0.14 s
 * (VIPROF_DEBUG_TIMING=1). Its arguments are scalars only (a global function's context
 * argument needs a BTF tag kernels read only since 6.8), so the frame-pointer walk,
 * which needs the context, is the caller's: NO_TABLES asks for it. */
#define NO_TABLES (~0ull)   /* not a ustacks key: those have VPS_USTACK_FP clear */
__noinline __u64 walked_ustack(__u32 tgid, __u32 keep)
{
	/* The switching-out task is still current at sched_switch. */
	struct task_struct *task = bpf_get_current_task_btf();
	struct walk *w = walk_scratch();
	struct pt_regs *r = (struct pt_regs *)bpf_task_pt_regs(task);
	__u64 t0 = bpf_ktime_get_ns(), h, pc, sp, fp, r13;
	struct wlast *l;

	if (!w || !r)
		return 0;
	pc = BPF_CORE_READ(r, ip);
	sp = BPF_CORE_READ(r, sp);
	fp = BPF_CORE_READ(r, bp);
	r13 = BPF_CORE_READ(r, r13);
	/* The reuse's state is kept out of registers across the walk (in the scratch, in
	 * callbacks, or looked up again after it): the verifier walks the walk once per
	 * distinct state that reaches it, and a pointer or flag alive across it had it
	 * walk the walk two or three times (the load took twice as long). */
	w->keep = walk_reuse && keep;
	/* A preempted thread's walk is not kept, but may reuse the one kept at its last
	 * block: preempted in the kernel on its way back from that block (a wakeup
	 * preemption before the return to user mode), its user registers and stack are
	 * those of the block. Elsewhere its pc differs, and the check ends at the first
	 * compare. */
	if (walk_reuse) {
		struct reuse_ctx rc = { .w = w, .pc = pc, .sp = sp, .fp = fp, .r13 = r13, .tgid = tgid, .blocked = keep };

		rc.l = bpf_task_storage_get(&wlasts, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (rc.l)
			bpf_loop(1, reusable, &rc, 0);
		if (rc.ustack) {
			t0 = bpf_ktime_get_ns() - t0;
			count(VPS_CNT_WALKS, 1);
			count(VPS_CNT_REUSED, 1);
			count(VPS_CNT_WALK_NS, t0);
			count(VPS_CNT_REUSED_NS, t0);
			if (!keep)
				count(VPS_CNT_REUSED_PREEMPT, 1);
			return rc.ustack;
		}
	}
	w->s.pid = tgid;
	if (!walk_regs(w, tgid, pc, sp, fp, r13))
		return NO_TABLES;
	h = intern_walk(w);
	if (w->keep && (l = bpf_task_storage_get(&wlasts, task, 0, 0))) {
		struct keep_ctx kc = { .w = w, .l = l, .h = h, .pc = pc, .sp = sp, .fp = fp, .r13 = r13, .tgid = tgid };

		bpf_loop(1, keep_walk, &kc, 0);
	}
	t0 = bpf_ktime_get_ns() - t0;
	count(VPS_CNT_WALKS, 1);
	count(VPS_CNT_WALK_NS, t0);
	count(VPS_CNT_WALK_FRAMES, w->n);
	if (!keep) {
		count(VPS_CNT_WALK_PREEMPT, 1);
		count(VPS_CNT_WALK_PREEMPT_NS, t0);
	}
	return h;
}

/* prev leaves the CPU: its steal, its on-CPU run, and (--off-cpu) the stacks and state its
 * off-CPU interval will hang under. */
static __always_inline void switch_out(void *ctx, struct task_struct *prev, struct tstate *ts, bool preempt,
				       unsigned int prev_state, __u64 delta, __u64 now, __u64 cin, __u64 cin_sum)
{
	bool dead = prev_state & TASK_DEAD;
	__u32 pid = prev->tgid, tid = prev->pid;
	bool open = off_cpu && !dead;
	__s32 ks = -1;
	__u64 us = 0;

	/* Stacks only when something will hang under them: the stack ids cost a
	 * walk each. Current is still prev here, so these are its stacks. */
	if (delta || open) {
		if (!user_only)
			ks = bpf_get_stackid(ctx, &stacks, KSTACK_SKIP);
		if (!(prev->flags & PF_KTHREAD)) {
			if (walker) {
				us = walked_ustack(pid, !preempt && prev_state != TASK_RUNNING);
				if (us == NO_TABLES) {
					long id = bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK);

					us = id < 0 ? 0 : VPS_USTACK_FP | (__u32)id;
				}
			} else {
				long id = bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK);

				us = id < 0 ? 0 : VPS_USTACK_FP | (__u32)id;
			}
		}
		if ((!user_only && ks < 0) || (!(prev->flags & PF_KTHREAD) && !us))
			count(VPS_CNT_NO_STACK, 1);
	}
	/* delta is 0 outside the window (the clock is read at switches only: a run
	 * that straddles an edge has the steal since the switch before it). */
	agg(pid, tid, VPS_STEAL, ks, us, delta, 0, now);
	/* On-CPU since the switch-in. When that switch-in was not seen (in_time 0
	 * after a switch-out that was), the run is measured by the task's own
	 * runtime since that switch-out, and the off-CPU interval it ended is
	 * charged less that run. */
	__u64 sum = prev->se.sum_exec_runtime, run = 0, in = off_cpu ? (ts ? ts->in_time : 0) : cin;

	/* A CPU's record older than the thread's last switch-out seen is of an earlier
	 * run there (it left that CPU unseen, ran elsewhere, and came back unseen): no
	 * switch-in seen, so its runtime measures the run, as with in_time 0. */
	if (!off_cpu && ts && in <= ts->last_out)
		in = 0;
	/* Without off-CPU intervals the switch-in is the CPU's record of it (cin, cin_sum:
	 * on_switch), and what switch_in does for a run before it that no switch showed
	 * (a switch-in and -out both missed) is done here. */
	if (!off_cpu && ts && in && ts->last_out && cin_sum > ts->sum_out) {
		__u64 ran = cin_sum - ts->sum_out;

		if (in > ts->last_out && ran > in - ts->last_out)
			ran = in - ts->last_out;
		ts->oncpu_ns += run_in_window(in, ran);
		count(VPS_CNT_MISSED_IN, 1);
		count(VPS_CNT_MISSED_NS, ran);
	}
	if (ts && in && now > in) {
		run = now - in;
	} else if (ts && ts->last_out && now > ts->last_out) {
		run = sum > ts->sum_out ? sum - ts->sum_out : 0;
		if (run > now - ts->last_out)
			run = now - ts->last_out;
		count(VPS_CNT_MISSED_IN, 1);
		count(VPS_CNT_MISSED_NS, run);
		if (off_cpu)
			charge_off(ts, pid, tid, now, run);
	}
	if (ts) {
		if (!ts->first)
			ts->first = in ? in : now;
		ts->oncpu_ns += run_in_window(now, run);
		ts->switches++;
		ts->steal_ns += delta;
		ts->last = now;
	} else {
		/* No task storage (it could not be made): straight into the hash. */
		struct vps_thread *th = thread_entry(pid, tid, now);

		if (th) {
			th->switches++;
			th->steal_ns += delta;
			th->last = now;
		}
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
		/* Its last switch: the task storage goes with the task. */
		if (dead)
			flush_thread(ts, pid, tid);
	}
}

/* next comes on the CPU: its off-CPU interval (or a new thread's first run-queue wait)
 * is charged, and its run begins. */
static __always_inline void switch_in(struct task_struct *next, struct tstate *ts, __u64 now)
{
	__u32 pid = next->tgid, tid = next->pid;
	/* Runtime since the last switch-out seen: 0, unless a switch-in and the
	 * switch-out after it were both missed; then that run is on-CPU time. */
	__u64 ran = 0;

	if (ts->last_out) {
		__u64 sum = next->se.sum_exec_runtime;

		ran = sum > ts->sum_out ? sum - ts->sum_out : 0;
		if (ran) {
			if (ran > now - ts->last_out)
				ran = now - ts->last_out;
			ts->oncpu_ns += run_in_window(now, ran);
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
			agg(pid, tid, VPS_RUNNABLE_WOKEN, -1, 0, to - from, from, to);
	}
	ts->out_time = 0;
	ts->wake_time = 0;
	ts->in_time = now;
}

/* Is t recorded, and its state (NULL when it could not be made)? A task has a tstate
 * only once it was found recorded, and a process stays recorded (nothing leaves the
 * tracked map while the tracer runs): a task with one is recorded without a lookup in
 * tracked, which then costs only the first switch of each recorded task and the
 * switches of the others (most of which have no task storage at all, so that their
 * lookup ends at once). The uid filter is checked every time: a task's uid can change. */
static __always_inline bool tracked_state(struct task_struct *t, struct tstate **ts)
{
	if (t->pid == 0)
		return false;   /* the idle task: its steal goes to the CPU's idle total */
	if (!uid_ok(t))
		return false;
	*ts = bpf_task_storage_get(&tstates, t, 0, 0);
	if (*ts)
		return true;
	if (!follows(t->tgid))
		return false;
	*ts = bpf_task_storage_get(&tstates, t, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	return true;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	__u64 now = bpf_ktime_get_ns();
	__u32 cpu = bpf_get_smp_processor_id();
	struct vps_cpu *c = bpf_map_lookup_elem(&cpus, &cpu);
	struct rq *rq = this_rq(prev, next, cpu);
	struct tstate *ts = NULL;

	count(VPS_CNT_SWITCHES, 1);
	__u64 delta = switch_steal(c, rq, prev, now), cin = 0, cin_sum = 0;

	/* prev came in at this CPU's last switch, unless the tracer missed it. */
	if (!off_cpu && c && c->in_time && c->in_tid == prev->pid) {
		cin = c->in_time;
		cin_sum = c->in_sum;
	}
	if (tracked_state(prev, &ts))
		switch_out(ctx, prev, ts, preempt, prev_state, delta, now, cin, cin_sum);
	if (!off_cpu) {
		/* Only the switch-in's time and runtime are needed (switch_out): kept per
		 * CPU, so that next costs no lookup, tracked or not. A JVM serving requests
		 * switches 40,000 times a second; this lookup was a fifth of on_switch. */
		if (c) {
			c->in_tid = next->pid;
			c->in_time = now;
			c->in_sum = next->se.sum_exec_runtime;
		}
		return 0;
	}
	ts = NULL;
	if (tracked_state(next, &ts) && ts)
		switch_in(next, ts, now);
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

/* Run once by user space when the window closes (vp_sched__window), over every task:
 * the intervals still open then (a thread blocked through the end, or parked for good)
 * are charged up to the window's end, and threads on a CPU get their run up to it; a
 * later switch charges nothing more (it falls outside the window). */
SEC("iter/task")
int close_open(struct bpf_iter__task *ctx)
{
	struct task_struct *t = ctx->task;
	__u64 we = win_end;
	struct tstate *ts;

	if (!t || !we || !is_tracked(t))
		return 0;
	ts = bpf_task_storage_get(&tstates, t, 0, 0);
	if (!ts)
		return 0;
	if (off_cpu && ts->out_time) {
		charge_off(ts, t->tgid, t->pid, we, 0);
		ts->out_time = 0;
		ts->wake_time = 0;
	} else if (ts->in_time && we > ts->in_time) {
		ts->oncpu_ns += run_in_window(we, we - ts->in_time);
		ts->in_time = we;
	}
	return 0;
}

/* Run once by user space at the end, after the programs above are detached, over every
 * task: the sums of the threads still alive go to the threads hash (flush_thread).
 * Those that ended gave theirs at their last switch. */
SEC("iter/task")
int flush_threads(struct bpf_iter__task *ctx)
{
	struct task_struct *t = ctx->task;
	struct tstate *ts;

	if (!t)
		return 0;
	ts = bpf_task_storage_get(&tstates, t, 0, 0);
	if (ts)
		flush_thread(ts, t->tgid, t->pid);
	return 0;
}

/* -p and launched commands follow the processes they fork (tracked.bpf.h). */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	follow_fork(parent, child);
	return 0;
}
