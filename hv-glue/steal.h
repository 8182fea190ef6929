/* Steal time: how long the hypervisor kept each vCPU from running while it had work. */
#ifndef VIPROF_HV_STEAL_H
#define VIPROF_HV_STEAL_H

#include <stddef.h>
#include <stdint.h>

/* Cumulative steal time per CPU in ns (from /proc/stat, USER_HZ converted); returns the number of CPUs filled or -errno.
 * steal_ns is indexed by the N of "cpuN": offline CPUs leave gaps that are set to 0, and
 * the return value is 1 + the highest N seen (at most max_cpus; CPUs beyond it are
 * ignored, so size the array with sysconf(_SC_NPROCESSORS_CONF)). A kernel whose
 * /proc/stat has no steal column reports 0 for every CPU. */
int vp_steal__read(uint64_t *steal_ns, int max_cpus);

/* The parser behind vp_steal__read (additive, for tests and for fixtures): text is a whole
 * /proc/stat, clk_tck the USER_HZ its values are in (sysconf(_SC_CLK_TCK)). Same result
 * convention; -EINVAL when text holds no cpuN line or clk_tck <= 0. */
int vp_steal__parse(const char *text, long clk_tck, uint64_t *steal_ns, int max_cpus);

/* The sum of vp_steal__read over every CPU, in ns. 0 or -errno. */
int vp_steal__total(uint64_t *ns);

/* Whether a steal clock runs on this VM, decided from what the VM shows rather than
 * from the kernel's configuration: 1 when /proc/stat has accounted steal on some vCPU
 * since boot, 0 when it has stayed 0 (a hypervisor that exports no steal clock, e.g.
 * this project's PVM guests, or one that never preempted this VM: either way there is
 * no stolen time to report), -errno when /proc/stat cannot be read. With 0 or -errno,
 * why gets one line for the user. Callers report stolen time only on 1. */
int vp_steal__clock_runs(char *why, size_t whylen);
/* The same decision from a steal total since boot (for tests). */
int vp_steal__clock_runs_from(uint64_t steal_since_boot_ns, char *why, size_t whylen);

/* ---- Steal charged to one thread (issue 11 item 4: counters corrected for steal).
 *
 * Two clocks of the same thread differ by exactly the time the hypervisor held its vCPU
 * while the thread was on it: perf's task-clock runs on the CPU's sched_clock, which
 * keeps going while the vCPU is preempted by the host, while the scheduler's runtime
 * (sum_exec_runtime: /proc/PID/task/TID/schedstat, CLOCK_THREAD_CPUTIME_ID, wait4's
 * rusage) advances by rq->clock_task, from which a kernel built with
 * CONFIG_PARAVIRT_TIME_ACCOUNTING subtracts the paravirt steal clock (KVM, Xen,
 * Hyper-V) at every update. So
 *     stolen(thread) = task-clock(thread) - runtime(thread)
 * over the same interval, in ns, charged to exactly the thread that ran, on whichever
 * vCPUs it ran: Perfctr-xen's per-vCPU correction, done by the guest kernel itself.
 * Precision: the two clocks are read a few microseconds apart (stat reads them at the
 * end; the library at each read), so a few us of noise; the sum over threads matches
 * the growth of /proc/stat's steal within its 10 ms tick. With
 * CONFIG_IRQ_TIME_ACCOUNTING the runtime also excludes the time spent in interrupts
 * that hit the thread: the difference is then steal + irq, and says so. Without
 * PARAVIRT_TIME_ACCOUNTING the runtime keeps steal and nothing can be measured. */

/* What the difference measures here: VP_STEAL_ACCT_STEAL (steal), VP_STEAL_ACCT_IRQ
 * (steal + irq time), 0 when the kernel does not subtract steal from runtimes, -ENOENT
 * when its configuration cannot be read (/boot/config-RELEASE, /proc/config.gz). */
#define VP_STEAL_ACCT_STEAL 1
#define VP_STEAL_ACCT_IRQ   2
int vp_steal__accounting(void);
/* The same decision from a kernel .config's text (for tests). */
int vp_steal__accounting_from(const char *config_text);

/* The scheduler's runtime of thread tid of process pid in ns (schedstat's first field;
 * pid 0: the calling process). 0 or -errno (-ENOENT: the thread is gone). */
int vp_steal__runtime(int pid, int tid, uint64_t *ns);

/* stolen = clock - runtime over one interval, never negative (the two reads are not
 * atomic; a runtime read a little later than the clock can exceed it by a few us). */
static inline uint64_t vp_steal__stolen(uint64_t clock_ns, uint64_t runtime_ns)
{
	return clock_ns > runtime_ns ? clock_ns - runtime_ns : 0;
}

#endif
