/* hv-glue internals shared by events.c, probe.c and probe_cmd.c; not for other components. */
#ifndef VIPROF_HV_INTERNAL_H
#define VIPROF_HV_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The hypervisor as a short name ("KVM", "Xen", "Hyper-V", "VMware", "QEMU-TCG", ...),
 * "none" on bare metal, "unknown" when the CPUID hypervisor bit is set but the
 * signature is not one we know. sig (13 bytes) receives the raw CPUID signature or "". */
const char *vp_hv__name(char *sig, size_t siglen, bool *hv_bit);

/* Name of the core PMU's event source ("cpu", "cpu_core", "cpu_atom"), or NULL when
 * the kernel registered none (no PMU, or the hypervisor hides it). */
const char *vp_hv__pmu_device(void);

/* One perf_event_open of (type, config) for the calling thread on any CPU, counting or
 * sampling; the fd is closed again. 0 or -errno. */
int vp_hv__try_event(uint32_t type, uint64_t config, bool sampling, bool exclude_kernel, bool exclude_user);

/* Whether a user-mode-only count of (type, config) on the calling thread sees the
 * events the thread provokes (sleeps, faults, CPU hops, a spin): 1 yes (or the event
 * cannot be provoked, so nothing says no), 0 it read 0, -errno when it cannot be opened. */
int vp_hv__user_mode_counts(uint32_t type, uint64_t config);

/* The perf names of the events this machine can sample, table order, ", "-separated. */
void vp_hv__available(char *buf, size_t len);

/* A name for an errno ("ENOENT"), never NULL. */
const char *vp_hv__errname(int err);

/* The named events that vp_events__parse knows (cache events aside), for the probe. */
struct vp_hv_event {
	const char *name;
	uint32_t type;
	uint64_t config;
};
extern const struct vp_hv_event vp_hv_events[];
extern const int vp_hv_nr_events;

/* Tests: replaces the counters' steal source (their own task-clock and runtime) with
 * fn; NULL puts the real one back. Not exported from libviprof-counters.so. */
struct vp_counters;
void vp_counters__time_source(struct vp_counters *c, int (*fn)(void *ctx, uint64_t *clock_ns, uint64_t *runtime_ns),
			      void *ctx);

/* Tests: vp_counters__open with every event bound to one CPU (perf_event_open(0, cpu)):
 * a per-task event that counts only while its thread runs on that CPU, while its
 * enabled time runs wherever the thread runs. A thread that alternates CPUs therefore
 * has running < enabled with no PMU at all: the software stand-in for multiplexing. */
struct vp_counters *vp_counters__open_cpu(const char *events, int cpu, char *err, size_t errlen);

/* Tests: whether the counters take a steal clock to run on this VM, in place of what
 * vp_steal__clock_runs found at open. */
void vp_counters__assume_steal_clock(struct vp_counters *c, bool runs);

/* Tests: how many read() calls the last reading of the whole set made (1 for a group). */
int vp_counters__reads(const struct vp_counters *c);

/* The user-page read of one counter (counters.c): 1 with *snap filled from the page
 * (rdpmc and rdtsc under the page's seqlock), 0 when read() must be used. Tests call
 * it on a page of their own, with vp_pc__hooks standing in for rdpmc and rdtsc (NULL
 * puts the instructions back). */
struct perf_event_mmap_page;
struct vp_count_snap;
int vp_pc__read(volatile struct perf_event_mmap_page *pc, struct vp_count_snap *snap);
void vp_pc__hooks(uint64_t (*rdpmc_fn)(uint32_t counter), uint64_t (*rdtsc_fn)(void));

#endif
