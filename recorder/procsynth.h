/* Synthesized sideband for processes that already run when recording starts: one
 * VP_REC_COMM per thread (from /proc/PID/task/TID/comm) and one VP_REC_MMAP per
 * executable mapping (from /proc/PID/maps), marked synthesized=1, so that samples
 * taken before any live MMAP event can still be symbolized. */
#ifndef VIPROF_RECORDER_PROCSYNTH_H
#define VIPROF_RECORDER_PROCSYNTH_H

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "sampler-kernel/sampler.h"

struct vp_procsynth;   /* opaque: caches build-ids across processes (libc is in all of them) */

struct vp_procsynth *vp_procsynth__new(void);
void vp_procsynth__free(struct vp_procsynth *ps);   /* accepts NULL */
/* Emits COMM and MMAP records for pid at time through sink. 0, -ESRCH when the
 * process went away (not an error for -a), or the sink's -errno. */
int vp_procsynth__process(struct vp_procsynth *ps, pid_t pid, uint64_t time, const struct vp_sink *sink);
/* Every process in /proc; processes that exit meanwhile are skipped. Returns the
 * number of processes synthesized or the sink's -errno. */
int vp_procsynth__all(struct vp_procsynth *ps, uint64_t time, const struct vp_sink *sink);

/* The records a scan synthesized, per process, replayed at the next scan for the
 * processes that the side band shows unchanged since: no executable mapping, name,
 * thread, fork or exit of theirs went by (a munmap makes no record, so a replayed
 * mapping may be gone: it serves no sample, since whatever is mapped there later comes
 * with its own record). The service's rotation reads /proc/PID/maps only of the
 * processes that changed in the interval (the kernel formatting every process's maps was
 * most of a rotation's cost). Not thread-safe: the recording's thread only. */
struct vp_procsynth_cache;
struct vp_procsynth_cache *vp_procsynth_cache__new(void);
void vp_procsynth_cache__free(struct vp_procsynth_cache *c);   /* accepts NULL */
/* A record on its way to the session: a live MMAP, a COMM, FORK or EXIT marks its
 * process to be read again. Cheap for the rest (samples). Accepts NULL. */
void vp_procsynth_cache__observe(struct vp_procsynth_cache *c, uint32_t type, const void *body, size_t len);
/* Records were lost: every process is read again at the next scan. Accepts NULL. */
void vp_procsynth_cache__invalidate(struct vp_procsynth_cache *c);
/* As vp_procsynth__all, with unchanged processes replayed from c; *read gets how many
 * were read from /proc (NULL ok). */
int vp_procsynth_cache__all(struct vp_procsynth_cache *c, struct vp_procsynth *ps, uint64_t time,
			    const struct vp_sink *sink, int *read);

/* Reads the GNU build-id note of the ELF file at path (PT_NOTE segments). Returns
 * its length (1..20) or -errno (-ENOENT when the file has none). */
int vp_elf_build_id(const char *path, uint8_t *out, size_t outlen);

/* Emits the executable file mappings of /proc/PID/maps text read from f (closed here);
 * what vp_procsynth__process does for a live pid, exposed for the fuzzer. */
int vp_procsynth__parse_maps(struct vp_procsynth *ps, FILE *f, pid_t pid, uint64_t time, const struct vp_sink *sink);

#endif
