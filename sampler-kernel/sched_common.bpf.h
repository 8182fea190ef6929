/* What both objects of the switch tracer do at every switch: sched.bpf.c (with
 * --off-cpu) and sched_lite.bpf.c (without). The sampling window, the run queue's steal
 * clock per vCPU, and the maps user space reads: stacks, the two aggregation hashes, the
 * threads hash and the per-CPU records. Include after sched_state.bpf.h. */
#ifndef VIPROF_SAMPLER_SCHED_COMMON_BPF_H
#define VIPROF_SAMPLER_SCHED_COMMON_BPF_H

/* No kernel stacks: the recording is user-only (every event ":u", as the service makes
 * it for a user the kernel shows no kernel address: perf_event_paranoid 2 or
 * kptr_restrict). The sampler's perf events exclude the kernel themselves; a switch
 * always happens in the kernel, so here it is this program that must not look. */
const volatile bool user_only = false;
/* Off-CPU intervals at least this long are kept apart (sched.h, VPS_SPLIT_NS). */
const volatile __u64 split_ns = VPS_SPLIT_NS;
/* VIPROF_DEBUG_STEAL_CLOCK=rq (tests only): read the run queue's own clock (rq->clock,
 * which moves all the time) as if it were the steal clock, so that the charging of
 * steal (stacks, per-thread sums, idle steal, window edges) runs on a VM whose steal
 * clock never moves. Every switch then charges the time since the last one on its CPU. */
const volatile bool debug_steal_rq_clock = false;

/* Which aggregation hash the programs add to; user space flips it and drains the other. */
volatile __u32 agg_sel = 0;
/* The recording's sampling window (CLOCK_MONOTONIC ns, set by user space: sched.h): time
 * is charged only inside it. The tracer runs from before the sampler starts (it must see
 * the switch-outs of threads that block before the window opens) to after it stops; an
 * interval or a run that straddles an edge is cut at it, so that a thread's running,
 * runnable, blocked and steal add up to the window's length, not more. win_start ~0: not
 * open yet (vp_sched_config.windowed), 0: open from the start; win_end 0: not closed. */
volatile __u64 win_start = 0, win_end = 0;

/* The tracer's own frames at the leaf of a kernel stack taken here: the program,
 * bpf_trace_run4 and __traceiter_sched_switch; the stack then starts in __schedule. */
#define KSTACK_SKIP 3

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, VPS_MAX_STACKS);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, VPS_MAX_DEPTH * sizeof(__u64));
} stacks SEC(".maps");

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

/* The threads hash entry of tid, made when missing; NULL when the hash is full. */
static __always_inline struct vps_thread *thread_entry(__u32 pid, __u32 tid, __u64 first)
{
	struct vps_thread *th = bpf_map_lookup_elem(&threads, &tid);

	if (!th) {
		struct vps_thread z = { .pid = pid, .first = first };

		bpf_map_update_elem(&threads, &tid, &z, BPF_NOEXIST);
		th = bpf_map_lookup_elem(&threads, &tid);
	}
	return th;
}

static __always_inline void agg_to(void *map, struct vps_key *k, __u64 ns, __u64 end)
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
	v->last = end;
}

/* Adds ns (an interval [start, end), or steal with start 0) to its key's sum; a long
 * interval is a key of its own. */
static __always_inline void agg(__u32 pid, __u32 tid, __u32 state, __s32 ks, __u64 us, __u64 ns, __u64 start,
				__u64 end)
{
	struct vps_key k = { .pid = pid, .tid = tid, .state = state, .kstack = ks, .ustack = us,
			     .start = start && ns >= split_ns ? start : 0 };

	if (!ns)
		return;
	if (agg_sel & 1)
		agg_to(&agg1, &k, ns, end);
	else
		agg_to(&agg0, &k, ns, end);
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

/* This CPU's run queue, through the switching tasks' CFS run queues (the per-CPU
 * variable runqueues has no kallsyms address on kernels without CONFIG_KALLSYMS_ALL,
 * so it cannot be taken with bpf_this_cpu_ptr there). Every task's se.cfs_rq is set
 * for its CPU (set_task_rq), also the idle task's and RT tasks'. */
static __always_inline struct rq *this_rq(struct task_struct *prev, struct task_struct *next, __u32 cpu)
{
	/* Direct loads (the verifier makes them faulting loads, as safe as a probe read):
	 * this runs at every switch of the VM, and the three bpf_probe_read_kernel calls
	 * of BPF_CORE_READ were a large part of its cost. */
	struct rq *rq = prev->se.cfs_rq->rq;

	if (rq && rq->cpu == (int)cpu)
		return rq;
	rq = next->se.cfs_rq->rq;
	if (rq && rq->cpu == (int)cpu)
		return rq;
	return NULL;
}

/* The run queue's steal clock (the injected one for tests: debug_steal_rq_clock). */
static __always_inline __u64 steal_clock(struct rq *rq)
{
	return debug_steal_rq_clock ? rq->clock : rq->prev_steal_time_rq;
}

/* The steal this switch charges: the vCPU's steal clock since its last switch, read in
 * the recording's window only (c and rq may be NULL). */
static __always_inline __u64 switch_steal(struct vps_cpu *c, struct rq *rq, struct task_struct *prev, __u64 now)
{
	__u64 steal = 0, kstat = 0, delta = 0;

	if (!rq) {
		/* Not this CPU's run queue: nothing read, the steal of this interval goes to
		 * whoever leaves the CPU at the next switch that can read it. */
		count(VPS_CNT_NO_RQ, 1);
	} else if (c && now >= win_start && (!win_end || now <= win_end)) {
		steal = steal_clock(rq);
		kstat = rq->prev_steal_time;
		/* Seen once is first_time set, not a steal clock above 0: on a vCPU whose
		 * steal clock starts moving during the recording, the first steal is charged
		 * like every later one. The first switch in the window charges the steal
		 * since the last one before it (read below), as every later switch does. */
		if (c->first_time) {
			delta = steal > c->steal_last ? steal - c->steal_last : 0;
		} else {
			c->steal_first = c->last_time ? c->steal_last : steal;
			c->kstat_first = c->last_time ? c->kstat_last : kstat;
			c->first_time = now;
			delta = steal > c->steal_first ? steal - c->steal_first : 0;
		}
		c->steal_last = steal;
		c->kstat_last = kstat;
		c->last_time = now;
		c->charged += delta;
		if (prev->pid == 0)
			c->idle_steal += delta;
	} else if (c && !c->first_time) {
		/* Before the window: the clocks' last readings only, so that the window's
		 * first switch on this vCPU knows where its steal began. After the window
		 * nothing changes, so that the vCPU's figures are the window's. */
		c->steal_last = steal_clock(rq);
		c->kstat_last = rq->prev_steal_time;
		c->last_time = now;
	}

	return delta;
}

#endif
