/* The switch tracer's state, shared by its two BPF objects: sched.bpf.c (the programs at
 * every switch and wakeup) and sched_open.bpf.c (the sleepable task iterator that opens
 * the intervals of threads already off CPU when the recording's window opens, walking
 * their stacks from outside). Each object declares these maps; user space makes the
 * second reuse the first's (bpf_map__reuse_fd), so there is one of each. Include after
 * walker.bpf.h and tracked.bpf.h, with filter_uid declared (const volatile __u32).
 * sched_lite.bpf.c (the tracer without --off-cpu) defines VPS_LITE and has only the
 * counters and the task filters: no walker, no off-CPU state, none of their maps. */
#ifndef VIPROF_SAMPLER_SCHED_STATE_BPF_H
#define VIPROF_SAMPLER_SCHED_STATE_BPF_H

#define PF_KTHREAD 0x00200000
#define TASK_RUNNING 0x0000
#define TASK_UNINTERRUPTIBLE 0x0002
#define TASK_DEAD 0x0080
#define TASK_WAKEKILL 0x0100

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, VPS_CNT_NR);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

static __always_inline void count(__u32 idx, __u64 n)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &idx);

	if (v)
		*v += n;
}

/* Does t pass the uid filter (every task does without one)? */
static __always_inline bool uid_ok(struct task_struct *t)
{
	return filter_uid == (__u32)-1 ||
	       (BPF_CORE_READ(t, cred, uid.val) == filter_uid && BPF_CORE_READ(t, cred, euid.val) == filter_uid &&
		BPF_CORE_READ(t, cred, suid.val) == filter_uid);
}

static __always_inline bool is_tracked(struct task_struct *t)
{
	__u32 tgid = t->tgid;

	if (t->pid == 0)
		return false;   /* the idle task: its steal goes to the CPU's idle total */
	if (!uid_ok(t))
		return false;
	return follows(tgid);
}

#ifndef VPS_LITE
/* Walked user stacks, by the hash of their contents and part (sched.h); kept for the
 * whole recording like the stack-trace map (user space reads them when it drains the
 * sums). Allocated as stacks appear, not up front: most recordings need a few hundred. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, VPS_MAX_USTACKS);
	__type(key, struct vps_ukey);
	__type(value, struct vps_ustack);
} ustacks SEC(".maps");

/* The other parts of deep stacks (part 1 on). Preallocated: a deep stack stores up to 16
 * parts at once, more than the allocator's per-CPU cache of elements this size holds
 * (a 1000-frame stack's fifth part failed with ENOMEM in ustacks), and deep stacks are
 * few. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, VPS_MAX_UPARTS);
	__type(key, struct vps_ukey);
	__type(value, struct vps_ustack);
} uparts SEC(".maps");

/* One part of a stack being interned, per CPU (too large for the BPF stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct vps_ustack);
} ustack_scratch SEC(".maps");

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
	/* The thread's sums (struct vps_thread) since they were last added to the threads
	 * hash: here, in the storage every switch already looks up, they cost no hash
	 * lookup per switch. Added to the hash at the thread's last switch (TASK_DEAD) and,
	 * for threads alive then, by the pass at the end (flush_threads in sched.bpf.c). */
	__u64 oncpu_ns;
	__u64 switches;
	__u64 steal_ns;
	__u64 first;       /* first switch-in (or switch-out) seen, 0 = none yet */
	__u64 last;        /* last switch-out */
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct tstate);
} tstates SEC(".maps");

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
	__u32 nparts;
	bool full;
};

/* Mixes frame i of the walk into the hash. Only the walk's n frames are visited: a loop
 * over the whole array cost as much as the walk of a shallow stack. */
static long hash_frame(__u32 i, void *data)
{
	struct hash_ctx *c = data;
	__u64 x;

	/* Written so that the compiler keeps the bound check on the register the index
	 * uses (the verifier rejects the access otherwise). */
	if (i >= VPS_MAX_UFRAMES)
		return 1;
	x = c->w->ustack[i];
	c->h = (c->h ^ x) * 0x100000001b3ull;
	c->h ^= c->h >> 29;
	return 0;
}

static long hash_jframe(__u32 i, void *data)
{
	struct hash_ctx *c = data;
	struct vpb_jframe z;

	if (i >= VPS_MAX_JFRAMES)
		return 1;
	z = c->w->jframes[i];
	c->h = (c->h ^ z.method ^ ((__u64)z.frame << 48) ^ (__u32)z.bci) * 0x100000001b3ull;
	c->h ^= c->h >> 29;
	return 0;
}

/* Stores part nparts - 1 - i of the stack (the last first, part 0 last: sched.h). */
static long store_part(__u32 i, void *data)
{
	struct hash_ctx *c = data;
	struct walk *w = c->w;
	struct vps_ustack *u = c->u;
	__u32 p = c->nparts - 1 - i, first, n;
	struct vps_ukey k = { .hash = c->h };

	if (p >= VPS_MAX_PARTS)
		return 1;
	k.part = p;
	/* The part's frames and interpreted frames, copied in one go each (the walk's
	 * arrays and the part are map values: bpf_probe_read_kernel takes a bounded
	 * length and any source). */
	first = p * VPS_PART_FRAMES;
	n = first < w->n ? w->n - first : 0;
	if (n > VPS_PART_FRAMES)
		n = VPS_PART_FRAMES;
	if (n && first < VPS_MAX_UFRAMES)
		bpf_probe_read_kernel(u->ips, n * sizeof(__u64), &w->ustack[first]);
	first = p * VPS_PART_JFRAMES;
	n = first < w->nj ? w->nj - first : 0;
	if (n > VPS_PART_JFRAMES)
		n = VPS_PART_JFRAMES;
	if (n && first < VPS_MAX_JFRAMES)
		bpf_probe_read_kernel(u->jframes, n * sizeof(struct vpb_jframe), &w->jframes[first]);
	if (bpf_map_update_elem(p ? (void *)&uparts : (void *)&ustacks, &k, u, BPF_ANY)) {
		c->full = true;
		return 1;
	}
	return 0;
}

/* Interns the stack walked into w (walk_regs) in ustacks: returns its key (the hash of
 * its frames, interpreted frames and end), 0 when it cannot be kept. */
static __always_inline __u64 intern_walk(struct walk *w)
{
	__u32 zero = 0, nu = w->n, nj = w->nj, pu, pj;
	struct vps_ustack *u = bpf_map_lookup_elem(&ustack_scratch, &zero);
	struct vps_ukey k0 = {};
	struct hash_ctx hc = {};

	if (!u)
		return 0;
	if (nu > VPS_MAX_UFRAMES)
		nu = VPS_MAX_UFRAMES;
	if (nj > VPS_MAX_JFRAMES)
		nj = VPS_MAX_JFRAMES;
	u->n = (__u16)nu;
	u->nj = (__u16)nj;
	u->walk_end = (__u16)w->end;
	u->pad = 0;
	hc.w = w;
	hc.u = u;
	hc.h = 0xcbf29ce484222325ull ^ w->end ^ ((__u64)nu << 8) ^ ((__u64)nj << 24);
	bpf_loop(nu, hash_frame, &hc, 0);
	bpf_loop(nj, hash_jframe, &hc, 0);
	hc.h &= ~VPS_USTACK_FP;
	if (!hc.h)
		hc.h = 1;
	/* The first time a stack is seen it is stored; later, the lookup is all. */
	k0.hash = hc.h;
	if (bpf_map_lookup_elem(&ustacks, &k0))
		return hc.h;
	pu = (nu + VPS_PART_FRAMES - 1) / VPS_PART_FRAMES;
	pj = (nj + VPS_PART_JFRAMES - 1) / VPS_PART_JFRAMES;
	hc.nparts = pu > pj ? pu : pj;
	if (!hc.nparts)
		hc.nparts = 1;
	bpf_loop(hc.nparts, store_part, &hc, 0);
	if (hc.full) {
		count(VPS_CNT_USTACK_FULL, 1);
		return 0;
	}
	return hc.h;
}

#endif /* VPS_LITE */

#endif
