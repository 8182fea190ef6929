/* The set of recorded processes, shared by the BPF programs that record some processes
 * only (-p, and a launched command): the sampler (profile.bpf.c) and the context-switch
 * tracer (sched.bpf.c). Include it after vmlinux.h, the libbpf headers and profile.h.
 *
 * User space puts the processes it was given in the tracked map; the fork program adds
 * every process one of them forks, at the moment of the fork. When both programs run
 * in one recording, the sampler's object reuses the tracer's map (bpf_map__reuse_fd
 * before load, sampler_config.tracked_fd), so both follow the same processes: a child
 * sampled on-CPU is the child whose off-CPU time and steal are charged. */
#ifndef VIPROF_SAMPLER_TRACKED_BPF_H
#define VIPROF_SAMPLER_TRACKED_BPF_H

/* Set by user space between open and load; the verifier prunes the dead branches. */
const volatile __u32 target_mode = VPB_TARGET_ALL;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, VPB_MAX_TRACKED);
	__type(key, __u32);              /* tgid */
	__type(value, __u8);
} tracked SEC(".maps");

/* Is this process recorded? Every process is without a pid set (-a). */
static __always_inline bool follows(__u32 tgid)
{
	return target_mode == VPB_TARGET_ALL || bpf_map_lookup_elem(&tracked, &tgid);
}

/* At sched_process_fork: a new process whose parent's process is tracked is tracked
 * too (a new thread shares its tgid and needs nothing). True when the child was added. */
static __always_inline bool follow_fork(struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = parent->tgid, ctgid = child->tgid;
	__u8 one = 1;

	if (ptgid == ctgid || !bpf_map_lookup_elem(&tracked, &ptgid))
		return false;
	bpf_map_update_elem(&tracked, &ctgid, &one, BPF_ANY);
	return true;
}

#endif
