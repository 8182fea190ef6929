/* The sampler backend interface: one table of functions per kind of sampler, tried in
 * a fixed order (bpf, then perf) unless the user forces one with --backend. Both
 * backends emit the same session records (common/session_format.h) through a sink. */
#ifndef VIPROF_SAMPLER_H
#define VIPROF_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define VP_MAX_EVENTS 8

/* One event as perf_event_attr needs it (filled by hv-glue/events.h). */
struct sampler_event {
	uint32_t type;          /* PERF_TYPE_* */
	uint64_t config;
	uint64_t period;        /* sample every N events (or ns for clock events); 0 = use freq */
	uint64_t freq;          /* samples per second per CPU; 0 = use period */
	bool software;          /* a kernel clock/software event rather than a (v)PMU one */
	char name[64];
	/* Modifiers of perf's "name:u" / "name:k" syntax (added by hv-glue, additive):
	 * copy them into perf_event_attr.exclude_kernel / exclude_user. */
	bool exclude_kernel;    /* ":u": count user mode only */
	bool exclude_user;      /* ":k": count kernel mode only */
};

enum sampler_target {
	SAMPLER_TARGET_ALL,     /* -a: every CPU, every process */
	SAMPLER_TARGET_PIDS,    /* -p: these processes, all their threads, and children they fork */
	SAMPLER_TARGET_LAUNCH,  /* --: a child the recorder created and holds before exec */
};

/* The stack walker's tables of a running sampler (sampler-kernel/profile.h), for the
 * recorder's unwinder (recorder/unwinder.h) to fill. rules and pages are address space
 * reserved for shared mappings of the BPF arrays (rules_fd, pages_fd), valid until the
 * sampler is destroyed: the one who writes maps the part it reaches, at its offset in
 * the array (mmap MAP_SHARED | MAP_FIXED), so that the kernel puts no more of the
 * arrays into the page table than the tables use. */
struct sampler_unwind {
	int proc_slots_fd;      /* hash: tgid -> slot */
	int procs_fd;           /* array of struct vpb_proc, max_procs slots */
	int tables_fd;          /* array of struct vpb_table, max_tables */
	void *rules;            /* struct vpb_rule[max_rules] */
	uint64_t *pages;        /* uint64_t[max_pages] */
	uint32_t max_procs, max_tables, max_rules, max_pages;
	/* The rules and pages arrays themselves, for another BPF object that walks with
	 * the same tables (the switch tracer, bpf_map__reuse_fd). */
	int rules_fd, pages_fd;
};

/* Where samplers put what they observe. emit() is called from the recorder's own
 * thread (inside poll/stop), never from a signal handler. It returns 0 or -errno; a
 * sampler stops draining when it fails. Record bodies follow session_format.h. */
struct vp_sink {
	int (*emit)(void *ctx, uint32_t type, uint64_t time, const void *body, size_t len);
	void *ctx;
};

struct sampler_config {
	struct sampler_event events[VP_MAX_EVENTS];
	int nr_events;
	bool callchain;         /* -g: kernel and user stacks */
	bool unwind;            /* with -g: walk user stacks with unwind tables (bpf only) */
	enum sampler_target target;
	const pid_t *pids;      /* SAMPLER_TARGET_PIDS: the processes; LAUNCH: the one child */
	int nr_pids;
	bool want_switches;     /* emit VP_REC_SWITCH (for steal-time victim attribution) */
	/* Session event index of the steal estimate (common/steal_est.h), whose EVENT record
	 * the recorder writes; 0: not estimated. The bpf backend then adds, after each
	 * sample of a clock event whose timer fired late, a sample of this event under the
	 * same stack weighing the estimate (sched_state VP_SCHED_HV_ESTIMATED). */
	uint32_t steal_est_event;
	/* Xen PMU mode "all": samples from other domains (guest kernel/user mode) must be
	 * told from dom0's own; the bpf sampler sees only kernel/user mode and declines. */
	bool guest_modes;
	bool want_sideband;     /* emit MMAP/COMM/FORK/EXIT records (always true for record) */
	bool sideband_batched;  /* with unwind: the walker does not need a new process's mappings
				 * at once (it loads tables for sampled processes only), so the
				 * sideband is drained on the poll timer, not per record */
	size_t buffer_pages;    /* per-CPU buffer size in pages, 0 = default */
	/* The service records for one user: only tasks whose real, effective and saved uid
	 * are all only_uid are sampled (a set-uid program the user starts is not theirs),
	 * and other tasks in switch records show as the idle task (bpf backend; the perf
	 * backend's per-task events already stop at a set-uid exec). */
	bool filter_uid;
	uid_t only_uid;
	struct vp_sink sink;
	/* With cfg.unwind: called by start() with the walker's tables after the program is
	 * loaded and before any event is enabled, so that the tables of processes that
	 * already run are in place before their first sample. May be NULL. */
	void (*before_sampling)(void *ctx, const struct sampler_unwind *uw);
	void *before_ctx;
	/* Unless SAMPLER_TARGET_ALL: the tracked-process map of another BPF object that
	 * records the same processes (the switch tracer, vp_sched__hook), for the bpf
	 * backend to use as its own (bpf_map__reuse_fd) so that both follow the same
	 * forks; read at start only. 0: the sampler makes its own. */
	int tracked_fd;
};

struct sampler;   /* opaque, one per recording; never shared between recordings */


struct sampler_backend {
	const char *name;       /* "bpf", "perf" */
	/* Can this backend run here with this config? If not, a one-line reason. */
	bool (*supported)(const struct sampler_config *cfg, char *why, size_t whylen);
	/* Opens events and buffers and starts sampling. NULL and a one-line reason
	 * naming the cause and the fix on failure. */
	struct sampler *(*start)(const struct sampler_config *cfg, char *err, size_t errlen);
	/* Waits up to timeout_ms for data, then drains every buffer into the sink.
	 * Returns the number of records emitted or -errno. */
	int (*poll)(struct sampler *s, int timeout_ms);
	/* Disables the events, drains what is left, and emits VP_REC_LOST totals. */
	int (*stop)(struct sampler *s);
	/* Samples stored and lost so far (for the live status line). */
	void (*counts)(const struct sampler *s, uint64_t *samples, uint64_t *lost);
	/* Side-band records (MMAP, COMM, FORK) lost so far: after a loss the recorder reads
	 * the mappings again. May be NULL: counts' lost includes them (one perf ring each). */
	uint64_t (*sideband_lost)(const struct sampler *s);
	void (*destroy)(struct sampler *s);  /* accepts NULL */
	/* The walker's tables when cfg.unwind was honoured; -ENOTSUP otherwise (the perf
	 * backend walks frame pointers in the kernel). May be NULL. */
	int (*unwind_tables)(struct sampler *s, struct sampler_unwind *out);
	/* Changes the rate of the frequency-driven events (those without a period) while
	 * sampling, without reopening anything (PERF_EVENT_IOC_PERIOD). 0 or -errno; an
	 * event may be left at its old rate on failure. May be NULL: not supported. */
	int (*set_freq)(struct sampler *s, uint64_t freq);
};

extern const struct sampler_backend sampler_backend_bpf;
extern const struct sampler_backend sampler_backend_perf;

/* Picks a backend: name is "auto", "bpf" or "perf". For auto, the first supported one
 * in the fixed order bpf, perf; the reason for the choice goes into why. NULL with
 * the reason in why when nothing fits. */
/* Whether no event of cfg may see the kernel (":u" on every one, as the service makes
 * them for a user the kernel shows no kernel address): then nothing of the kernel's,
 * kernel symbols or the switch tracer's kernel stacks included, goes into the session. */
static inline bool sampler_config__user_only(const struct sampler_config *cfg)
{
	for (int i = 0; i < cfg->nr_events; i++)
		if (!cfg->events[i].exclude_kernel)
			return false;
	return cfg->nr_events > 0;
}

const struct sampler_backend *sampler__select(const char *name, const struct sampler_config *cfg,
					      char *why, size_t whylen);

#endif
