/* The recorder's half of the frame-pointer-free stack walker: it keeps the BPF walker's
 * tables (sampler-kernel/profile.h) in step with the processes being recorded. For each
 * process it lists the executable mappings from /proc/PID/maps, gives every mapped ELF
 * file an unwind table built from its CFI (recorder/cfi.h, once per file: a library mapped
 * by many processes is parsed once), and, for a HotSpot JVM, reads where its code heaps
 * and interpreter are (recorder/hotspot.h). The work runs on its own thread so that
 * draining the sample buffers never waits for a large library to be parsed; until a
 * process's tables are in place its samples fall back to frame pointers and say so
 * (VP_WALK_NO_PROC). Internal to recorder/. */
#ifndef VIPROF_RECORDER_UNWINDER_H
#define VIPROF_RECORDER_UNWINDER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "sampler-kernel/sampler.h"

struct vp_unwinder;

/* Which processes get tables. EAGER: every process added, and what they fork, at once.
 * LAZY (record -a): processes that show up in samples, and every program at its exec
 * (so that a short-lived one has them before it is gone). SAMPLED (the service's
 * continuous recording): only processes that show up in samples, and nothing per exec
 * or fork: on a busy VM reading /proc/PID/maps of every new program was most of the
 * service's CPU; a program's first samples then walk by frame pointers. */
enum vp_unwind_mode { VP_UNWIND_EAGER = 0, VP_UNWIND_LAZY = 1, VP_UNWIND_SAMPLED = 2 };
/* NULL with errno set. */
struct vp_unwinder *vp_unwinder__new(const struct sampler_unwind *maps, int mode);

/* Schedules a process for (re)loading. */
void vp_unwinder__add_pid(struct vp_unwinder *u, pid_t pid);

/* Looks at a record on its way to the session (MMAP, COMM, FORK, EXIT, SAMPLE) and
 * schedules what it implies. Cheap; called from the recorder's drain loop. */
void vp_unwinder__observe(struct vp_unwinder *u, uint32_t type, const void *body, size_t len);

/* Builds, ahead of time, the tables of the program cmd (looked up in PATH like execvp)
 * and of the libraries it names (DT_NEEDED; for a JDK's java, libjvm.so): a launched
 * command's samples then have tables from its first instruction. */
void vp_unwinder__prewarm(struct vp_unwinder *u, const char *cmd);

/* Waits up to timeout_ms for the scheduled work to be done (for short-lived targets:
 * the recorder calls it before releasing a launched command). */
void vp_unwinder__settle(struct vp_unwinder *u, int timeout_ms);

struct vp_unwinder_stats {
	uint64_t files, rules, table_full, parse_ns, procs, jvms, jvm_failed;
	uint64_t cached, stored; /* files whose tables came from / went to the unwind-rule cache */
	uint64_t refreshes;      /* reads of a process's mappings */
	uint64_t mmaps_skipped;  /* executable mmaps inside a JVM's code heap: no refresh needed */
	char jvm_error[160];    /* the last reason a JVM's layout could not be read */
	uint64_t cfi_refused;    /* files whose unwind information failed the checks (vp_cfi__refused) */
	char cfi_error[200];     /* the last such file's reason */
};
void vp_unwinder__stats(struct vp_unwinder *u, struct vp_unwinder_stats *out);

/* A sink that shows every record to the unwinder (once set) and passes it on. */
struct vp_unwind_sink {
	struct vp_sink next;
	struct vp_unwinder *u;  /* NULL until the sampler has started */
};
struct vp_sink vp_unwind_sink(struct vp_unwind_sink *us);

void vp_unwinder__free(struct vp_unwinder *u);   /* stops the thread; accepts NULL */

#endif
