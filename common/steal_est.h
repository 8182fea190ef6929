/* Steal estimated from the guest's own clocks, where no steal clock says what the host
 * took (issue 34 item 1): one pure rule, shared by the sampler that applies it at
 * record time (sampler-kernel/bpf_backend.c) and the tests that hold it.
 *
 * The sampler's clock events (cpu-clock, task-clock) fire from an hrtimer whose
 * expiries lie on a fixed grid, one period apart (perf forwards the timer by whole
 * periods, skipping those already past). A vCPU the host does not run executes
 * nothing, its pending timer included: the timer fires when the vCPU runs again, late
 * by the time since the grid point it was due at, and every grid point in between is
 * skipped. A grid point that fell while the host had the vCPU is time the host took,
 * as a profiler in the host would have sampled it; the guest cannot see the gap
 * itself, but it sees the timer's lateness (the BPF program reads the expiry it
 * serves, before perf moves it on).
 *
 * Estimate for a sample late by late_ns on a timer of period_ns: every grid point
 * from the one served to now, each standing for one period:
 *     period * (1 + late / period)      when late >= threshold, else 0.
 * For a host gap of g ns at a random phase, the expected count of grid points inside
 * it is g / period, so the sum over gaps is unbiased but for two small terms: the
 * timer fires after the guest's own interrupt latency (tens of microseconds), which
 * lengthens each gap by that much, and the threshold, which keeps that latency out,
 * loses at most threshold per gap shorter than about a period. Each gap's own error is
 * under one period (a gap shorter than the period is charged one period or nothing).
 * What delays a guest timer inside the guest (a hard interrupt handler, a section with
 * interrupts off, longer than the threshold) is counted as well, as the host's. */
#ifndef VIPROF_COMMON_STEAL_EST_H
#define VIPROF_COMMON_STEAL_EST_H

#include <stdint.h>

/* Lateness under this is the guest's own interrupt latency, not the host: measured on
 * this project's KVM guests (docs/hypervisor.md, "Steal without a steal clock"). */
#define VP_STEAL_EST_THRESHOLD_NS 100000ull

/* The event the estimate is recorded under, and the layer its leaf frame belongs to. */
#define VP_STEAL_EST_EVENT "hypervisor-estimated"
#define VP_STEAL_EST_FRAME "[hypervisor: estimated]"

/* The estimated ns the host took around one timer sample (see above); 0 when the
 * sample was on time, the period is 0, or late_ns is below threshold_ns. Saturates
 * instead of overflowing. */
uint64_t vp_steal_est__ns(uint64_t late_ns, uint64_t period_ns, uint64_t threshold_ns);

#endif
