// SPDX-License-Identifier: GPL-2.0
/* The eBPF sampler: runs on every overflow of the perf events the bpf backend opens
 * (one per CPU per event) and stores one struct vpb_sample per overflow in a ring
 * buffer that user space drains on a timer. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "profile.h"
/* The walker's once-per-walk steps as global functions, verified once each (walker.bpf.h);
 * its per-frame steps stay inlined: a BPF call per frame is not free. */
#define WALK_RARE __noinline
/* The walker's per-CPU cache of native caller rules, and its code-heap segment map read
 * 128 bytes at once by a global function (walker.bpf.h): on_sample only. */
#define WALK_RCACHE VPB_RCACHE
#define WALK_SEG_FN 128
#include "walker.bpf.h"
#include "tracked.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* Set by user space between open and load (as is target_mode, tracked.bpf.h); the
 * verifier prunes the dead branches. */
const volatile bool callchain = false;
const volatile __u32 event_index = 0;
/* Walk user stacks with the unwind tables below instead of bpf_get_stack's frame
 * pointers (the bpf backend sets it with -g). */
const volatile bool unwind = false;
/* Weigh each sample by the count its event read (below) instead of the kernel's period
 * (set for frequency-driven counting events). */
const volatile bool exact_period = false;
/* The service records for one user (sampler_config.only_uid): samples and switches of
 * tasks whose real, effective and saved uid are not all this one are dropped or made
 * anonymous, whatever the pid set says (a set-uid child is no longer the user's). */
const volatile __u32 filter_uid = (__u32)-1;
/* The event counts user mode only (":u"; every event of a service user the kernel shows
 * no kernel address). The kernel's clock events then never fire in the kernel, but a
 * PMU's overflow interrupt can land past a return to it (skid): such a sample is
 * dropped here, not written with a kernel ip and stack. */
const volatile bool exclude_kernel = false;
/* The event is a clock event (cpu-clock, task-clock) driven by perf's hrtimer, and steal
 * is estimated from its lateness (common/steal_est.h): each sample says how late its
 * timer fired. Never set for other events: their perf_event holds no hrtimer there. */
const volatile bool est_timer = false;

#define PF_KTHREAD 0x00200000

/* MMF_DUMPABLE_MASK and SUID_DUMP_USER of linux/sched/coredump.h. */
#define VP_MMF_DUMPABLE_MASK 3ul
#define VP_SUID_DUMP_USER    1ul

static __always_inline bool owned(struct task_struct *t)
{
	if (filter_uid == (__u32)-1)
		return true;
	if (BPF_CORE_READ(t, cred, uid.val) != filter_uid || BPF_CORE_READ(t, cred, euid.val) != filter_uid ||
	    BPF_CORE_READ(t, cred, suid.val) != filter_uid)
		return false;
	/* Nor is a process the kernel made non-dumpable (an execute-only program, which its
	 * user may not read; prctl PR_SET_DUMPABLE 0): ptrace refuses its user, and an exec
	 * into one ends the user's own perf events (begin_new_exec). mm->flags is read as
	 * its first word, an unsigned long before Linux 6.18 and a bitmap since. */
	struct mm_struct *mm = BPF_CORE_READ(t, mm);
	unsigned long flags = VP_SUID_DUMP_USER;
	if (mm)
		bpf_probe_read_kernel(&flags, sizeof(flags), (char *)mm + bpf_core_field_offset(struct mm_struct, flags));
	return (flags & VP_MMF_DUMPABLE_MASK) == VP_SUID_DUMP_USER;
}

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 24); /* resized by user space before load */
} events SEC(".maps");

/* With filter_uid: the recorded processes that stopped being the user's (a set-uid
 * or file-capability exec, a setuid call: every change of credentials passes
 * commit_creds), and when (CLOCK_MONOTONIC ns). User space drops their side-band
 * records (mappings, names) from that moment on; their samples are dropped by owned(). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, VPB_MAX_TRACKED);
	__type(key, __u32);
	__type(value, __u64);
} foreign SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, VPB_LOST_NR);
	__type(key, __u32);
	__type(value, __u64);
} lost SEC(".maps");

/* Per perf event instance (the kernel's struct perf_event, one per thread and event
 * with inherit), its count at its previous sample. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);      /* 1 when exact_period is off */
	__type(key, __u64);
	__type(value, __u64);
} last_count SEC(".maps");

/* Per thread and exactly weighed event, the perf_event its samples came from, so that
 * its count after the last sample can be read when the thread exits (on_exit). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);      /* 1 when no event is weighed exactly */
	__type(key, struct vpb_thread_key);
	__type(value, __u64);
} thread_ev SEC(".maps");

/* The events user space opened (the parents of the inherited copies), each with its
 * event index, as samples reveal them: on_exit finds a thread that was never sampled
 * by its copy of one of these. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);       /* 1 when no event is weighed exactly */
	__type(key, __u64);
	__type(value, __u32);
} families SEC(".maps");

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

/* The events since this event instance's previous sample. In frequency mode the
 * kernel's period (ctx->sample_period) is the one it meant to arm when it last retuned
 * the rate, not the one it armed (it even resets it at every sched-in of a software
 * event): a burst of page faults came out 10-30% high. The event's own count is the
 * truth; bpf_perf_prog_read_value would give it but refuses inherited events, so it
 * is read from the perf_event behind the context. First sample: the count so far. */
static __always_inline __u64 true_period(struct bpf_perf_event_data *ctx)
{
	struct bpf_perf_event_data_kern *k = (void *)ctx;
	struct perf_event *ev = NULL;
	__u64 count = 0, key, *last, d;

	if (bpf_probe_read_kernel(&ev, sizeof(ev), __builtin_preserve_access_index(&k->event)) || !ev)
		return ctx->sample_period;
	if (bpf_probe_read_kernel(&count, sizeof(count), __builtin_preserve_access_index(&ev->count)))
		return ctx->sample_period;
	key = (__u64)ev;
	last = bpf_map_lookup_elem(&last_count, &key);
	d = last ? (count >= *last ? count - *last : count) : count;
	bpf_map_update_elem(&last_count, &key, &count, BPF_ANY);
	{
		struct vpb_thread_key tk = { .tid = (__u32)bpf_get_current_pid_tgid(), .event = event_index };

		struct perf_event *parent = BPF_CORE_READ(ev, parent);
		__u64 fam = parent ? (__u64)parent : key;
		__u32 ei = event_index;

		bpf_map_update_elem(&thread_ev, &tk, &key, BPF_ANY);
		bpf_map_update_elem(&families, &fam, &ei, BPF_NOEXIST);
	}
	return d;
}

/* How late this sample's hrtimer fired: now minus the expiry it serves. perf's timer
 * callback (perf_swevent_hrtimer) runs this program before it forwards the timer, so
 * the expiry is still the grid point that was due; on a vCPU the host did not run,
 * it is the first one missed. 0 when it cannot be read. */
static __always_inline __u64 timer_late(struct bpf_perf_event_data *ctx, __u64 now)
{
	struct bpf_perf_event_data_kern *k = (void *)ctx;
	struct perf_event *ev = NULL;
	__s64 exp = 0;

	if (bpf_probe_read_kernel(&ev, sizeof(ev), __builtin_preserve_access_index(&k->event)) || !ev)
		return 0;
	if (bpf_probe_read_kernel(&exp, sizeof(exp), __builtin_preserve_access_index(&ev->hw.hrtimer.node.expires)))
		return 0;
	return exp > 0 && now > (__u64)exp ? now - (__u64)exp : 0;
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
	s->period = exact_period ? true_period(ctx) : ctx->sample_period;
	s->event = event_index;
	s->mode = kernel ? VPB_MODE_KERNEL : VPB_MODE_USER;
	s->flags = 0;
	s->kstack_bytes = 0;
	s->ustack_bytes = 0;
	s->walk_end = 0;
	s->nr_jframes = 0;
	s->late_ns = est_timer ? timer_late(ctx, s->time) : 0;
}


/* Walks the user stack of process tgid from the given user registers into the current
 * CPU's scratch (walker.bpf.h); returns 0 when the process has no tables yet (the caller
 * falls back to frame pointers), 1 otherwise.
 *
 * A global function (not static), so that the verifier checks the walk once, on its
 * own: inlined into on_sample it was walked once per distinct state of on_sample that
 * reached either call site (80,616 instructions processed, 0.2-0.3 s of CPU at every
 * start of record -g). Its arguments are scalars only (as sched.bpf.c's walked_ustack:
 * a context argument needs a BTF tag kernels read only since 6.8); the scratch is found
 * again here, the same CPU's entry as the caller's (a program runs to its end on its
 * CPU). */
__noinline int sample_walk(__u32 tgid, __u64 pc, __u64 sp, __u64 fp, __u64 r13)
{
	struct walk *w = walk_scratch();

	if (!w)
		return 0;
	return walk_regs(w, tgid, pc, sp, fp, r13) ? 1 : 0;
}

/* Walks the user stack of the current task into w->s.ustack (walker.bpf.h); returns
 * false when the process has no tables yet (the caller falls back to frame pointers). */
static __always_inline bool walk_user(struct walk *w, struct bpf_perf_event_data *ctx, bool kernel,
				      struct task_struct *task)
{
	__u64 pc, sp, fp, r13;

	if (kernel) {
		/* A sample in the kernel: the task's saved user registers, so that a
		 * system call made through a libc wrapper shows the wrapper's caller. */
		struct pt_regs *r = (struct pt_regs *)bpf_task_pt_regs(task);

		if (!r)
			return false;
		pc = BPF_CORE_READ(r, ip);
		sp = BPF_CORE_READ(r, sp);
		fp = BPF_CORE_READ(r, bp);
		r13 = BPF_CORE_READ(r, r13);
	} else {
		pc = PT_REGS_IP(&ctx->regs);
		sp = PT_REGS_SP(&ctx->regs);
		fp = PT_REGS_FP(&ctx->regs);
		r13 = ctx->regs.r13;
	}
	return sample_walk(w->s.pid, pc, sp, fp, r13) != 0;
}

/* Sends the walked sample in w as one VPB_KIND_WALKED entry sized by what was walked
 * (profile.h): a stack 2048 frames deep fits, and a shallow one costs no more ring
 * space or copying than before. The entry is reserved as a dynptr (a plain reserve
 * takes a constant size) and filled in four copies. */
static __always_inline void submit_walked(struct walk *w)
{
	/* 64-bit lengths: a 32-bit one is checked on a zero-extended copy. */
	__u64 kb = w->s.kstack_bytes > 0 ? (__u64)w->s.kstack_bytes : 0;
	__u64 ub = w->s.ustack_bytes > 0 ? (__u64)w->s.ustack_bytes : 0;
	__u64 jb = (__u64)w->s.nr_jframes * sizeof(struct vpb_jframe), off;
	struct bpf_dynptr d;

	/* Bounds the verifier can follow (the walker never exceeds them). */
	if (kb > sizeof(w->s.kstack))
		kb = sizeof(w->s.kstack);
	if (ub > sizeof(w->ustack))
		ub = sizeof(w->ustack);
	if (jb > sizeof(w->jframes))
		jb = sizeof(w->jframes);
	w->s.kind = VPB_KIND_WALKED;
	w->s.kstack_bytes = w->s.kstack_bytes > 0 ? (__s32)kb : w->s.kstack_bytes;
	w->s.ustack_bytes = w->s.ustack_bytes > 0 ? (__s32)ub : w->s.ustack_bytes;
	w->s.nr_jframes = (__u16)(jb / sizeof(struct vpb_jframe));
	if (bpf_ringbuf_reserve_dynptr(&events, VPB_SAMPLE_HDR + kb + ub + jb, 0, &d)) {
		bpf_ringbuf_discard_dynptr(&d, 0);
		count_lost(VPB_LOST_RINGBUF);
		return;
	}
	bpf_dynptr_write(&d, 0, &w->s, VPB_SAMPLE_HDR, 0);
	off = VPB_SAMPLE_HDR;
	/* Each length is checked again right at its copy: the compiler keeps the checks
	 * above on copies of the registers the verifier does not link to these. */
	barrier_var(kb);
	if (kb && kb <= sizeof(w->s.kstack))
		bpf_dynptr_write(&d, off, w->s.kstack, kb, 0);
	off += kb;
	barrier_var(ub);
	if (ub && ub <= sizeof(w->ustack))
		bpf_dynptr_write(&d, off, w->ustack, ub, 0);
	off += ub;
	barrier_var(jb);
	if (jb && jb <= sizeof(w->jframes))
		bpf_dynptr_write(&d, off, w->jframes, jb, 0);
	/* No wakeup: user space consumes on a timer (see below). */
	bpf_ringbuf_submit_dynptr(&d, BPF_RB_NO_WAKEUP);
}

SEC("perf_event")
int on_sample(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;
	bool kernel = is_kernel_ip(ctx);
	struct vpb_sample *s;

	if (!follows(tgid))
		return 0;
	if (filter_uid != (__u32)-1 && !owned(bpf_get_current_task_btf()))
		return 0;
	if (kernel && exclude_kernel)
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

	if (unwind) {
		struct walk *w = walk_scratch();
		struct task_struct *task = bpf_get_current_task_btf();

		if (!w)
			return 0;
		fill(&w->s, ctx, id, kernel);
		if (kernel) {
			w->s.kstack_bytes = bpf_get_stack(ctx, w->s.kstack, sizeof(w->s.kstack), 0);
			if (w->s.kstack_bytes < 0) {
				w->s.flags |= VPB_F_KERNEL_ERROR;
				count_lost(VPB_LOST_STACK);
			}
		}
		if (!(task->flags & PF_KTHREAD) && !walk_user(w, ctx, kernel, task)) {
			/* Tables not loaded yet (a process seen for the first time): frame
			 * pointers, and say so. */
			w->s.walk_end = VPB_WALK_NO_PROC;
			w->s.nr_jframes = 0;
			w->s.ustack_bytes = bpf_get_stack(ctx, w->ustack, VPB_MAX_USTACK * sizeof(__u64),
							  BPF_F_USER_STACK);
			if (w->s.ustack_bytes < 0) {
				w->s.flags |= VPB_F_USER_ERROR;
				count_lost(VPB_LOST_STACK);
			}
		}
		submit_walked(w);
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

/* Launch and -p modes follow children (tracked.bpf.h). */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = parent->tgid, ctgid = child->tgid;

	follow_fork(parent, child);
	/* A child of a process that is no longer the user's is not the user's either,
	 * whatever it does next. */
	if (ptgid != ctgid && filter_uid != (__u32)-1 && bpf_map_lookup_elem(&foreign, &ptgid)) {
		__u64 now = bpf_ktime_get_ns();
		bpf_map_update_elem(&foreign, &ctgid, &now, BPF_NOEXIST);
	}
	return 0;
}

/* Whether the new credentials may read the program being run, as the kernel's
 * would_dump() asks inode_permission(MAY_READ): by its mode bits, the owner's, the
 * group's (the primary group or one of the first 64 supplementary ones) or the others'.
 * An ACL is not read: a program only an ACL lets the user read counts as unreadable
 * (its samples are left out, never shown to someone the kernel would not show them). */
#define VP_MAX_GROUPS 64
static __always_inline bool may_read_program(struct linux_binprm *bprm, const struct cred *new)
{
	struct inode *ino = BPF_CORE_READ(bprm, file, f_inode);
	__u32 mode = BPF_CORE_READ(ino, i_mode), gid = BPF_CORE_READ(ino, i_gid.val);
	struct group_info *gi = BPF_CORE_READ(new, group_info);
	int n = gi ? BPF_CORE_READ(gi, ngroups) : 0;
	bool in = gid == BPF_CORE_READ(new, fsgid.val);

	if (BPF_CORE_READ(ino, i_uid.val) == BPF_CORE_READ(new, fsuid.val))
		return mode & 0400;
	for (int i = 0; i < VP_MAX_GROUPS && !in; i++) {
		__u32 g = 0;
		if (i >= n)
			break;
		bpf_probe_read_kernel(&g, sizeof(g), (char *)gi + bpf_core_field_offset(struct group_info, gid) + i * 4);
		in = g == gid;
	}
	if (in)
		return mode & 040;
	if (n > VP_MAX_GROUPS && (mode & 040) && !(mode & 04))
		return false;   /* in a group past those looked at, perhaps: cannot tell */
	return mode & 04;
}

/* An exec past its point of no return, its new credentials computed, before it
 * names the task or maps the new image (so before any of its COMM/MMAP2 records): a
 * recorded process that will no longer have the user's real, effective and saved uid,
 * gains anything from the file (set-gid, capabilities: AT_SECURE), or runs a file its
 * user may not read (execute-only), is foreign from now on. (A user's process changes credentials only by exec: anything else needs a
 * capability it does not have.) */
SEC("tp_btf/sched_prepare_exec")
int BPF_PROG(on_creds, struct task_struct *task, struct linux_binprm *bprm)
{
	__u32 tgid = (__u32)(bpf_get_current_pid_tgid() >> 32);
	const struct cred *new = BPF_CORE_READ(bprm, cred);
	__u64 now;

	if (filter_uid == (__u32)-1 || !bpf_map_lookup_elem(&tracked, &tgid))
		return 0;
	/* BINPRM_FLAGS_ENFORCE_NONDUMP (1): the user may not read the ELF interpreter; the
	 * program itself is judged by may_read_program (the kernel judges it later in the
	 * exec, after this point). Either makes the process non-dumpable (owned() above). */
	if (BPF_CORE_READ(new, uid.val) == filter_uid && BPF_CORE_READ(new, euid.val) == filter_uid &&
	    BPF_CORE_READ(new, suid.val) == filter_uid && !BPF_CORE_READ_BITFIELD_PROBED(bprm, secureexec) &&
	    !(BPF_CORE_READ(bprm, interp_flags) & 1) && may_read_program(bprm, new))
		return 0;
	now = bpf_ktime_get_ns();
	bpf_map_update_elem(&foreign, &tgid, &now, BPF_NOEXIST);
	return 0;
}

/* A thread exits (before the kernel folds its perf events into their parents): what
 * its event counted since its last sample is in no sample yet. It goes to user space,
 * which charges it to the thread's last sampled stack (sampler-kernel/tails.h). A
 * thread never sampled has no event here: its count stays in the totals only. The same
 * is done at an exec (on_exec), where the count so far belongs to the program before it. */
#define MAX_TASK_EVENTS 16

/* The task's copy of this program's event, among the events of its perf context
 * (Linux 6.2+: one context per task), by its parent, or the event itself when user space
 * opened it on this task (no parent); 0 when not found. */
static __always_inline __u64 task_event(struct task_struct *p)
{
	struct perf_event_context *ctx = BPF_CORE_READ(p, perf_event_ctxp);
	__u64 head, pos;

	if (!ctx)
		return 0;
	head = (__u64)ctx + bpf_core_field_offset(struct perf_event_context, event_list);
	pos = (__u64)BPF_CORE_READ(ctx, event_list.next);
	for (int i = 0; i < MAX_TASK_EVENTS && pos && pos != head; i++) {
		struct perf_event *e = (struct perf_event *)(pos - bpf_core_field_offset(struct perf_event, event_entry));
		__u64 par = (__u64)BPF_CORE_READ(e, parent), fam = par ? par : (__u64)e;
		__u32 *ei = bpf_map_lookup_elem(&families, &fam);

		if (ei && *ei == event_index)
			return (__u64)e;
		pos = (__u64)BPF_CORE_READ((struct list_head *)pos, next);
	}
	return 0;
}

/* Sends what thread p's event counted since its last sample as a VPB_KIND_TAIL entry
 * stamped now. exiting: the thread is gone, its entries go; else (an exec) the count
 * read becomes the one the thread's next sample is weighed from. */
static __always_inline void send_rest(struct task_struct *p, bool exiting)
{
	__u32 tid = BPF_CORE_READ(p, pid);
	struct vpb_thread_key tk = { .tid = tid, .event = event_index };
	__u64 *evp = bpf_map_lookup_elem(&thread_ev, &tk), key, count = 0, *last, rest;
	struct perf_event *ev;
	struct vpb_tail *t;

	/* A thread never sampled: its inherited copy of the event, if any. */
	key = evp ? *evp : task_event(p);
	if (!key)
		return;
	ev = (struct perf_event *)key;
	if (evp && exiting)
		bpf_map_delete_elem(&thread_ev, &tk);
	if (bpf_probe_read_kernel(&count, sizeof(count), __builtin_preserve_access_index(&ev->count)))
		return;
	last = bpf_map_lookup_elem(&last_count, &key);
	__u64 lastv = last ? *last : 0;
	rest = last ? (count > lastv ? count - lastv : 0) : count;
	if (exiting)
		bpf_map_delete_elem(&last_count, &key);
	else
		bpf_map_update_elem(&last_count, &key, &count, BPF_ANY);
	if (!rest)
		return;
	t = bpf_ringbuf_reserve(&events, sizeof(*t), 0);
	if (!t) {
		count_lost(VPB_LOST_RINGBUF);
		return;
	}
	t->kind = VPB_KIND_TAIL;
	t->cpu = bpf_get_smp_processor_id();
	t->time = bpf_ktime_get_ns();
	t->pid = BPF_CORE_READ(p, tgid);
	t->tid = tid;
	t->event = event_index;
	t->flags = exiting ? 0 : VPB_TAIL_EXEC;
	t->count = rest;
	bpf_ringbuf_submit(t, 0);
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_exit, struct task_struct *p)
{
	send_rest(p, true);
	return 0;
}

/* The kernel's in_execve bit (set for the whole execve); looked up by CO-RE so that a
 * kernel without it still loads the program. */
struct task_struct___execve {
	unsigned in_execve:1;
} __attribute__((preserve_access_index));

/* An exec renames the thread right after perf_event_exec (begin_new_exec: the point
 * where perf stat's enable_on_exec counters start), before the kernel's COMM record:
 * what the thread counted since its last sample was the old program's, so it is sent
 * now, stamped before the new name, and the thread's next sample is weighed from here.
 * Without it the first sample after the exec (or the exit tail) carried it: perf stat's
 * forked child blocks on a pipe before it execs the command, and the command's comm came
 * out 3 context switches over perf stat's count. A rename that is no exec (prctl,
 * /proc/PID/comm) changes no program and is left alone; where the kernel has no
 * in_execve bit every rename splits, which only moves counts to the name they were
 * made under. */
SEC("tp_btf/task_rename")
int BPF_PROG(on_exec, struct task_struct *task, const char *comm)
{
	struct task_struct___execve *x = (void *)task;

	if (bpf_core_field_exists(x->in_execve) && !BPF_CORE_READ_BITFIELD_PROBED(x, in_execve))
		return 0;
	if ((__u64)task != bpf_get_current_task())
		return 0;   /* an exec renames only itself */
	send_rest(task, false);
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
	/* Another user's task shows as the idle task: who ran is not theirs to see. */
	if (!owned(prev))
		w->prev_pid = w->prev_tid = 0;
	if (!owned(next))
		w->next_pid = w->next_tid = 0;
	bpf_ringbuf_submit(w, BPF_RB_NO_WAKEUP);
	return 0;
}
