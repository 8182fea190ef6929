/* The session directory and its record stream: the one definition shared by the
 * recorder (recorder/), the samplers (sampler-kernel/) and the reader (postproc/).
 * Prose spec: docs/formats.md.
 *
 * A session is a directory:
 *   stream.vps     chunkfile.h container of kind VP_KIND_SESSION_STREAM holding the
 *                  records below, in the order they were observed (roughly by time)
 *   meta.json      human-readable summary written at the end (never read back; the
 *                  stream's META and END records are the truth)
 *   jit/<pid>/     code maps written by the JVM agent (maps/codemap_format.h)
 *
 * Every record starts with struct vp_record {type, size, time}; the bodies below
 * follow it. Variable-length tails (stacks, strings) are bounded by the record size,
 * and readers check them against it. Unknown types are skipped. Times are
 * CLOCK_MONOTONIC nanoseconds. */
#ifndef VIPROF_SESSION_FORMAT_H
#define VIPROF_SESSION_FORMAT_H

#include <stdint.h>
#include "common/chunkfile.h"

#define VP_SESSION_FORMAT_VERSION 1
#define VP_SESSION_STREAM "stream.vps"
#define VP_SESSION_META_JSON "meta.json"
#define VP_SESSION_JIT_DIR "jit"
/* In jit/: held locked (flock LOCK_EX) by the recorder while it records; the agents it
 * attached watch it and stop writing once it is free (docs/record.md). */
#define VP_SESSION_JIT_LOCK "recording.lock"

enum vp_rec_type {
	VP_REC_META       = 1,  /* body: "key\0value\0" pairs, repeated */
	VP_REC_EVENT      = 2,  /* struct vp_event_desc */
	VP_REC_SAMPLE     = 3,  /* struct vp_sample + ips[] */
	VP_REC_MMAP       = 4,  /* struct vp_mmap + filename */
	VP_REC_COMM       = 5,  /* struct vp_comm */
	VP_REC_FORK       = 6,  /* struct vp_task */
	VP_REC_EXIT       = 7,  /* struct vp_task */
	VP_REC_LOST       = 8,  /* struct vp_lost */
	VP_REC_KSYM       = 9,  /* struct vp_ksym + name */
	VP_REC_STEAL      = 10, /* struct vp_steal */
	VP_REC_SWITCH     = 11, /* struct vp_switch */
	VP_REC_COUNTER    = 12, /* struct vp_counter */
	VP_REC_JVM        = 13, /* struct vp_jvm + maps directory (relative to session) */
	VP_REC_END        = 14, /* struct vp_end: the recording ended cleanly */
	VP_REC_THREAD_TIME = 15, /* struct vp_thread_time: exact per-thread totals from the switch tracer */
	VP_REC_SCHED_CPU  = 16, /* struct vp_sched_cpu: the switch tracer's steal accounting of one vCPU */
	VP_REC_SCHED_STATS = 17, /* struct vp_sched_stats: the switch tracer's counters, at the end */
	VP_REC_CONTAINER  = 21, /* struct vp_container: a process's cgroup and namespaces */
	VP_REC_NSTID      = 22, /* struct vp_nstid: a container thread's tid in its own namespace */
	/* The kernel's vDSO image (an ELF file, at most VP_VDSO_MAX bytes) as the recorder
	 * saw it, so that a report on another kernel names [vdso] frames. Numbered apart
	 * from the sequence above so that types others add meanwhile do not collide. */
	VP_REC_VDSO       = 40,
};
#define VP_VDSO_MAX (1u << 20)

/* One recorded event (index = position among EVENT records, 0-based). */
struct vp_event_desc {
	uint32_t index;
	uint32_t perf_type;     /* PERF_TYPE_* */
	uint64_t perf_config;
	uint64_t period;        /* fixed period, or 0 when freq is used */
	uint64_t freq;          /* samples/s requested per CPU, or 0 */
	uint32_t flags;         /* VP_EVENT_* */
	uint32_t reserved;
	char name[64];          /* as the user wrote it, NUL-terminated */
};
#define VP_EVENT_SOFTWARE   0x1u  /* the kernel's clock events, not a (v)PMU */
#define VP_EVENT_TIME_UNITS 0x2u  /* period is in nanoseconds (cpu-clock, task-clock) */
/* Measured at context switches by the switch tracer (sampler-kernel/sched.bpf.c), not
 * sampled: "off-cpu" and "steal". Their samples are sums of intervals (period = ns,
 * one sample per distinct stack and state per drain) with vp_sample.sched_state set. */
#define VP_EVENT_SCHED      0x4u
/* Sampled in user mode only (":u", or a user the kernel shows no kernel to). For the
 * clock events the count still holds the time spent in the kernel, which no sample
 * can: a report says so instead of calling it a tail. */
#define VP_EVENT_USER_ONLY  0x8u
/* Estimated, not measured: the steal estimate from late sampler timers
 * (common/steal_est.h), recorded with VP_EVENT_SCHED | VP_EVENT_TIME_UNITS (ns summed
 * under stacks, never a sampling clock of its own). */
#define VP_EVENT_ESTIMATE   0x10u

/* Privilege level of the sampled IP. */
enum vp_mode { VP_MODE_UNKNOWN = 0, VP_MODE_KERNEL = 1, VP_MODE_USER = 2,
	       VP_MODE_HYPERVISOR = 3, VP_MODE_GUEST_KERNEL = 4, VP_MODE_GUEST_USER = 5 };

struct vp_sample {
	uint32_t pid, tid;
	uint32_t cpu;
	uint16_t event;         /* index of its vp_event_desc */
	uint8_t  mode;          /* enum vp_mode of ips[0] / the interrupted context */
	uint8_t  flags;         /* VP_SAMPLE_* */
	uint64_t period;        /* events (or ns) this sample stands for */
	uint16_t nr_kernel;     /* kernel frames, leaf first */
	uint16_t nr_user;       /* then user frames, leaf first */
	uint8_t  walk_end;      /* enum vp_walk_end: how the user stack walk ended */
	uint8_t  nr_java;       /* struct vp_java_frame entries after ips[]: the low byte */
	uint8_t  sched_state;   /* enum vp_sched_state for VP_EVENT_SCHED events, else 0 */
	uint8_t  nr_java_hi;    /* their high byte (issue 22; reserved and 0 before) */
	uint64_t ips[];         /* nr_kernel + nr_user entries, then nr_java vp_java_frame */
};

/* The count of vp_java_frame entries of a sample: 16 bits split over two bytes, so that
 * a session written while the count was one byte (and the second byte reserved, always
 * written 0) reads the same. Readers use these, and bound the count by the record. */
static inline unsigned vp_sample_nr_java(const struct vp_sample *s)
{
	return s->nr_java | (unsigned)s->nr_java_hi << 8;
}

static inline void vp_sample_set_nr_java(struct vp_sample *s, unsigned n)
{
	s->nr_java = (uint8_t)n;
	s->nr_java_hi = (uint8_t)(n >> 8);
}

/* How the user stack walk of a sample ended (0 in sessions from before the walker, and
 * from the perf backend, which walks frame pointers in the kernel and cannot tell). */
enum vp_walk_end {
	VP_WALK_UNKNOWN    = 0,
	VP_WALK_ROOT       = 1, /* reached the outermost frame */
	VP_WALK_NO_RULE    = 2, /* code with neither unwind information nor a frame pointer */
	VP_WALK_UNREADABLE = 3, /* stack memory could not be read */
	VP_WALK_DEPTH      = 4, /* the depth limit */
	VP_WALK_BAD_FRAME  = 5, /* the next frame made no sense (stack not growing, pc 0) */
	VP_WALK_NO_PROC    = 6, /* the process's unwind tables were not loaded yet */
	VP_WALK__COUNT
};

/* The name of an enum vp_walk_end value in reports ("root", "no_rule", ...); the loader
 * counts samples by it in the profile's meta as "stack_end.<name>". */
static inline const char *vp_walk_end_name(int k)
{
	static const char *const names[VP_WALK__COUNT] = {
		[VP_WALK_UNKNOWN] = "unknown", [VP_WALK_ROOT] = "root", [VP_WALK_NO_RULE] = "no_rule",
		[VP_WALK_UNREADABLE] = "unreadable", [VP_WALK_DEPTH] = "depth", [VP_WALK_BAD_FRAME] = "bad_frame",
		[VP_WALK_NO_PROC] = "tables_not_loaded",
	};
	return k >= 0 && k < VP_WALK__COUNT ? names[k] : "unknown";
}

/* What a thread did in the interval an off-cpu or steal sample sums (the values of
 * VPS_* in sampler-kernel/sched.h, which sched_tracer.c asserts). Reports end such a stack with a synthetic frame
 * naming it, e.g. "[blocked: sleep]" or "[runnable: preempted]". */
enum vp_sched_state {
	VP_SCHED_NONE             = 0, /* an ordinary sample */
	VP_SCHED_STEAL            = 1, /* running, but the hypervisor ran something else */
	VP_SCHED_BLOCKED_SLEEP    = 2, /* blocked, waiting for an event or a timer */
	VP_SCHED_BLOCKED_IO       = 3, /* blocked in I/O wait */
	VP_SCHED_BLOCKED_LOCK     = 4, /* blocked in futex(): a user-space lock or condition */
	VP_SCHED_RUNNABLE_PREEMPT = 5, /* preempted: runnable, waiting on the run queue */
	VP_SCHED_RUNNABLE_WOKEN   = 6, /* woken (or new): runnable, waiting on the run queue */
	VP_SCHED_BLOCKED_OTHER    = 7, /* blocked uninterruptibly, not in I/O wait */
	/* Recorded since issue 21, from the system call the thread blocked in (SLEEP then
	 * means nanosleep/clock_nanosleep only; older sessions use it for every
	 * interruptible wait but futex). */
	VP_SCHED_BLOCKED_FD       = 8, /* waiting on a file descriptor: poll, epoll, read, recv, accept */
	VP_SCHED_BLOCKED_WAIT     = 9, /* another interruptible wait (wait4, pause, ...) */
	/* Never recorded: the loader names a blocked interval by its Java frames
	 * (postproc/sched_state.c, vp_sched_java_state) where they say more than the kernel. */
	VP_SCHED_BLOCKED_PARK     = 10, /* LockSupport.park / Unsafe.park */
	VP_SCHED_BLOCKED_OBJWAIT  = 11, /* Object.wait */
	/* Running, but the host had the vCPU, by the estimate of a late sampler timer
	 * (common/steal_est.h): samples of the event VP_STEAL_EST_EVENT (VP_EVENT_ESTIMATE),
	 * under the stack the late timer interrupted. Never the switch tracer's. */
	VP_SCHED_HV_ESTIMATED     = 12,
	VP_SCHED__COUNT
};

/* An interpreted Java frame: ips[nr_kernel + frame] is a pc in HotSpot's interpreter,
 * and this says which method it was running (a Method*, named through the agent's
 * VP_CM_METHOD_PTR records at the sample's time) and at which bytecode. */
struct vp_java_frame {
	uint16_t frame;         /* index among the user frames */
	uint16_t reserved;
	int32_t  bci;           /* bytecode index, -1 when unknown */
	uint64_t method;        /* HotSpot Method* */
};
#define VP_SAMPLE_USER_TRUNCATED 0x1u /* user stack walk stopped early (no frame pointers?) */
#define VP_SAMPLE_KERNEL_ERROR   0x2u /* kernel stack could not be read */
#define VP_SAMPLE_USER_ERROR     0x4u /* user stack could not be read */
/* Not a sample: the count its thread made after its last sample (read when the thread
 * exited or the recording stopped), charged to that last sample's stack (a copy of
 * it; no frames when the thread was never sampled). Readers add the period to the
 * weights and count no sample for it. */
#define VP_SAMPLE_TAIL           0x8u
/* A VP_EVENT_SCHED sample that sums one interval only: it lasted period ns and ended at
 * the record's time (a blocked part at its wakeup, a run-queue part at switch-in). The
 * tracer keeps every interval of at least 10 ms apart (sampler-kernel/sched.h,
 * VPS_SPLIT_NS; meta "offcpu.split_ns"), so those always are; shorter ones are summed per
 * stack and drain and have no start of their own. Set since issue 33; older sessions
 * never set it. */
#define VP_SAMPLE_ONE_INTERVAL   0x10u
/* The switch tracer's split: intervals at least this long are recorded one by one (the
 * recorder writes it as META offcpu.split_ns with --off-cpu). */
#define VP_OFFCPU_SPLIT_NS (10ull * 1000000)
/* The most frames (kernel + user) a sample holds: a kernel stack of up to 64 and a
 * walked user stack of up to 2048 frames (async-profiler's default depth), each of them
 * possibly interpreted (nr_java <= nr_user). Sessions written before issue 22 hold at
 * most 127; readers take any count the record's size bears out. The BPF side's limits
 * (VPB_MAX_KSTACK + VPB_MAX_WALK, sampler-kernel/profile.h) are asserted equal in
 * bpf_backend.c. */
#define VP_MAX_FRAMES (64 + 2048)

struct vp_mmap {
	uint32_t pid, tid;
	uint64_t start, len, pgoff;
	uint32_t maj, min;
	uint64_t ino;
	uint32_t prot, flags;
	uint8_t  build_id[20];  /* as seen at record time, when known */
	uint8_t  build_id_size; /* 0 when unknown */
	uint8_t  synthesized;   /* 1 = from /proc/PID/maps at start, 0 = live event */
	uint16_t reserved;
	uint32_t reserved2;
	char filename[];        /* NUL-terminated */
};

struct vp_comm {
	uint32_t pid, tid;
	uint32_t exec;          /* 1 when the comm changed because of exec */
	char comm[16];
	uint32_t reserved;
};

struct vp_task {              /* FORK and EXIT */
	uint32_t pid, ppid, tid, ptid;
};

enum vp_lost_source { VP_LOST_KERNEL_RING = 1, /* ring/perf buffer full, counted in kernel */
		      VP_LOST_STACK = 2,        /* stack could not be stored */
		      VP_LOST_SIDEBAND = 3 };   /* mmap/comm records lost */
struct vp_lost {
	uint32_t cpu;           /* UINT32_MAX when summed over all CPUs */
	uint32_t source;        /* enum vp_lost_source */
	uint64_t count;
};

/* A kernel symbol the session needs: the recorder emits one for each kernel
 * function that appears in a sample (before the first such sample's chunk ends). */
struct vp_ksym {
	uint64_t addr;
	uint64_t size;          /* up to the next symbol */
	char module[56];        /* "" for vmlinux */
	char name[];            /* NUL-terminated */
};

struct vp_steal {
	uint32_t cpu;
	uint32_t reserved;
	uint64_t steal_ns;      /* cumulative, as the kernel accounts it for this vCPU */
};

struct vp_switch {
	uint32_t cpu;
	uint32_t prev_pid, prev_tid;
	uint32_t next_pid, next_tid;
	uint32_t reserved;
};

struct vp_counter {           /* a counting read of an event */
	uint32_t pid, tid;       /* VP_COUNTER_ALL: every thread and CPU the event covered */
	uint32_t event;
	uint32_t flags;          /* VP_COUNTER_*; was reserved (0) */
	uint64_t value;          /* raw: events counted while on a counter (not scaled) */
	uint64_t time_enabled;   /* ns the event was enabled */
	uint64_t time_running;   /* ns it was on a counter; < time_enabled: multiplexed */
};
#define VP_COUNTER_ALL     UINT32_MAX
/* The totals of a sampling event, read from the sampler's own fds when recording
 * stopped: its samples' weights add up to value (less the events after each thread's
 * or CPU's last overflow), and a report scales them by time_enabled / time_running. */
#define VP_COUNTER_SAMPLED 0x1u
/* With VP_COUNTER_SAMPLED: the same totals read while recording (cumulative, about
 * every VP_COUNTER_INTERVAL_NS), so that a report scales each stretch between two of
 * them by its own time_enabled / time_running instead of one ratio for the whole
 * recording; a reader that knows only SAMPLED takes the last record, the final one. */
#define VP_COUNTER_INTERVAL 0x2u
#define VP_COUNTER_INTERVAL_NS 250000000ull
/* With VP_COUNTER_SAMPLED: the PMU could not group this event with the first one (the
 * sampler fell back to a separate event somewhere), so it was multiplexed on its own
 * and a ratio with another event (IPC) mixes two independent estimates. */
#define VP_COUNTER_UNGROUPED 0x4u

/* Where a process runs: written before (or with) its first sample in a session, and
 * again after each exec. Reports derive its container id and pod UID from cgroup and
 * the namespaces (common/container.h). */
struct vp_container {
	uint32_t pid;
	uint32_t nspid;          /* its pid in its own (innermost) pid namespace */
	uint64_t pidns, mntns;   /* inodes of its pid and mount namespaces; 0 if unknown */
	uint64_t host_pidns;     /* the recorder's pid namespace inode */
	char cgroup[];           /* NUL-terminated: the path common/container.h picks */
};

/* A thread of a process in another pid namespace: its tid there, which is how the
 * JVM agent inside knows it (its thread names are keyed by it). Written with the
 * thread's first COMM or FORK in a session. */
struct vp_nstid {
	uint32_t pid, tid;
	uint32_t nstid;
	uint32_t reserved;
};

struct vp_jvm {
	uint32_t pid;
	uint32_t flags;          /* VP_JVM_* */
	char maps_dir[];         /* relative to the session directory */
};
#define VP_JVM_AGENT_LOADED      0x1u
#define VP_JVM_NO_FRAME_POINTERS 0x2u /* -XX:+PreserveFramePointer was not in effect */
#define VP_JVM_ATTACH_REFUSED    0x4u
#define VP_JVM_CHANNEL           0x8u /* the agent of an earlier session took this one over its
				       * channel to the recorder: no attach (with AGENT_LOADED) */

/* One thread's exact times, from its switches (written at the end of a recording that
 * ran the switch tracer; times within the recording). */
struct vp_thread_time {
	uint32_t pid, tid;
	uint64_t oncpu_ns;       /* switch-in to switch-out, summed (includes steal) */
	uint64_t steal_ns;       /* of oncpu_ns: what the run queue's steal clock took */
	uint64_t switches;       /* its switch-outs */
	uint64_t first, last;    /* CLOCK_MONOTONIC of its first and last switch seen */
};

/* One vCPU's steal as the switch tracer charged it, with the kernel's own account of
 * the same interval (its first to its last switch seen) for the cross-check. */
struct vp_sched_cpu {
	uint32_t cpu;
	uint32_t reserved;
	uint64_t first, last;       /* CLOCK_MONOTONIC of the first and last switch on it */
	uint64_t steal_clock_ns;    /* rq->prev_steal_time_rq advanced by this much */
	uint64_t charged_ns;        /* charged to threads (including idle_ns) */
	uint64_t idle_ns;           /* of charged_ns: while the CPU was idle */
	uint64_t kernel_steal_ns;   /* rq->prev_steal_time delta: the steal the kernel accounted at
				     * its ticks into CPUTIME_STEAL (/proc/stat), in ns */
};

/* What the switch tracer saw and what it could not record (written once, at the end). */
struct vp_sched_stats {
	uint64_t switches;          /* context switches seen, all CPUs */
	uint64_t records;           /* SAMPLE records it wrote (sums of intervals) */
	uint64_t bytes;             /* their bytes in the stream, headers included */
	uint64_t agg_full;          /* intervals not recorded: the kernel's hash was full */
	uint64_t agg_full_ns;       /* their nanoseconds */
	uint64_t no_stack;          /* intervals recorded without a stack */
	uint64_t no_rq;             /* switches where the run queue could not be read */
	/* Added later (readers accept the shorter record): switch-ins of a tracked thread the
	 * program did not see, and the on-CPU time of those runs, measured by the task's own
	 * runtime (se.sum_exec_runtime) and charged as on-CPU, not off-CPU. */
	uint64_t missed_in;
	uint64_t missed_ns;
	/* Added later: user stacks walked at switch-out with the sampler's walker, the
	 * nanoseconds those walks took, and walked stacks not kept (the kernel's stack
	 * hash was full). */
	uint64_t walks;
	uint64_t walk_ns;
	uint64_t ustack_full;
	/* Added later (issue 32): off-CPU intervals dropped because they began before the
	 * walking program took over (their user stacks were frame-pointer walks), and their
	 * nanoseconds (inside the window or not). */
	uint64_t early;
	uint64_t early_ns;
	/* Added later (issue 32): threads found off CPU when the window opened whose
	 * interval was opened then, with their stack walked from outside. */
	uint64_t opened;
	/* Added later (issue 37): of walks, those that reused the thread's previous walk
	 * because every word it read was unchanged (sampler-kernel/sched.bpf.c), and
	 * the nanoseconds the check took. */
	uint64_t reused;
	uint64_t reused_ns;         /* of walk_ns: the time those took (the check) */
};

struct vp_end {
	uint64_t samples;
	uint64_t lost;
	uint64_t duration_ns;
	uint32_t exit_status;    /* of the launched command, or 0 */
	uint32_t reserved;
	/* Added later (issue 33; readers accept the shorter record): where the window that
	 * duration_ns measures opened (CLOCK_MONOTONIC; META start_monotonic_ns is the
	 * recorder's start, before its setup), for readers that place events on the wall
	 * clock (JFR). */
	uint64_t window_start;
};

#endif
