/* The recorder's side of a session directory (common/session_format.h): creates the
 * directory, writes META/EVENT records first, passes the samplers' records through to
 * stream.vps (adding a VP_REC_KSYM before the first sample that needs each kernel
 * symbol, or as soon as the symbols arrive when they were deferred), flushes on a timer so a killed recorder leaves a readable stream, and at
 * the end writes LOST/END and meta.json. Not thread-safe: the recorder's one thread
 * owns it. */
#ifndef VIPROF_RECORDER_SESSION_WRITER_H
#define VIPROF_RECORDER_SESSION_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/session_format.h"
#include "sampler-kernel/sampler.h"

struct vp_kallsyms;
struct vp_session_writer;   /* opaque */

/* Prepares dir: creates it (0700) if missing; an existing empty directory of ours is
 * used; a non-empty one is refused (-EEXIST) unless force, which renames it to dir.old
 * (replacing an older dir.old of ours), as perf does with perf.data.old. Anything at
 * dir that belongs to another user is refused (-EPERM): root must not write where a
 * user can point it. Everything is created relative to directory fds opened once
 * (common/safefs.h): dir/jit (0700) and dir/stream.vps (0600). chunk_bytes 0 = the
 * container's default. NULL, errno, and a one-line reason in err on failure. */
struct vp_session_writer *vp_session_writer__create(const char *dir, bool force, size_t chunk_bytes,
						    char *err, size_t errlen);
/* The same in an existing empty directory of ours given as an open fd (O_PATH will do;
 * it is not kept), written only relative to it and named name in messages (the
 * continuous service's intervals). A directory that is not ours, or not empty, is
 * refused; discard() removes only what this writer created there. */
struct vp_session_writer *vp_session_writer__create_at(int dirfd, const char *name, size_t chunk_bytes,
						       char *err, size_t errlen);
/* A session with no directory: the stream goes to stream_fd and meta.json, at
 * finish, to meta_fd (both taken; typically non-blocking pipes, whose writes wait at
 * most VP_WRITE_STALL_MS for the reader). The service records this way for a user:
 * the user's own client reads the pipes and stores the files as that user, so root
 * never writes into a user's directory. admit() is refused (-ENOTSUP): the client
 * makes the JVMs' maps directories. name is for messages. */
struct vp_session_writer *vp_session_writer__create_stream(int stream_fd, int meta_fd, const char *name,
							   size_t chunk_bytes, char *err, size_t errlen);
/* Takes ownership of ks (may be NULL: then no KSYM records are written). If symbols
 * were deferred, writes the KSYM records that the samples since then need. */
void vp_session_writer__set_ksyms(struct vp_session_writer *w, struct vp_kallsyms *ks);
/* The kernel symbols will come later (vp_session_writer__set_ksyms): until then the
 * kernel addresses of samples are kept (up to a bound), so that their KSYM records
 * can follow. Readers resolve samples after reading the whole stream, so a KSYM
 * after the samples that need it is fine (docs/formats.md). */
void vp_session_writer__defer_ksyms(struct vp_session_writer *w);
/* The session's absolute directory path. */
const char *vp_session_writer__dir(const struct vp_session_writer *w);

/* One META record; the pair is also kept for meta.json. 0 or -errno. */
int vp_session_writer__meta(struct vp_session_writer *w, const char *key, const char *value);
/* One VP_REC_EVENT; index is assigned in call order. */
int vp_session_writer__event(struct vp_session_writer *w, const struct sampler_event *ev);
/* The EVENT record of the steal estimate (common/steal_est.h) at session index index
 * (sampler_config.steal_est_event): VP_EVENT_ESTIMATE, nanoseconds. */
int vp_session_writer__estimate_event(struct vp_session_writer *w, uint32_t index);
/* Appends any record. For VP_REC_SAMPLE it checks the body against its length,
 * counts the sample, and first emits KSYM records for kernel IPs whose symbol has
 * not been seen yet. The first error sticks: later calls return it. */
int vp_session_writer__emit(struct vp_session_writer *w, uint32_t type, uint64_t time,
			    const void *body, size_t len);
/* A sink whose emit() is vp_session_writer__emit, for struct sampler_config. */
struct vp_sink vp_session_writer__sink(struct vp_session_writer *w);
/* Lets the JVM pid, running as uid/gid, write its code maps: makes jit/<pid> (0700)
 * and gives it to that user; if that is not us, grants the user search permission, and
 * nothing more, on the session directory and jit/ through a POSIX ACL (0711 where the
 * file system has none). 0 or -errno. */
int vp_session_writer__admit(struct vp_session_writer *w, uid_t uid, gid_t gid, pid_t pid);
/* The bytes of all files in the session (the JVMs' maps too), counted through the
 * directory fd. */
uint64_t vp_session_writer__disk_bytes(const struct vp_session_writer *w);
/* Removes what was written: the directory, if this writer made it in this run, else
 * only the entries it created there; through the directory fds; and frees w. For a
 * recording that never started. Accepts NULL. */
void vp_session_writer__discard(struct vp_session_writer *w);
/* Emits VP_REC_STEAL for each CPU and remembers the values (first and last call go
 * into meta.json). */
int vp_session_writer__steal(struct vp_session_writer *w, uint64_t time, const uint64_t *steal_ns, int ncpus);
/* Writes the open chunk when at least interval_ns passed since the last write. */
int vp_session_writer__maybe_flush(struct vp_session_writer *w, uint64_t now, uint64_t interval_ns);
int vp_session_writer__flush(struct vp_session_writer *w);

uint64_t vp_session_writer__samples(const struct vp_session_writer *w);
/* Of those, the ones in chunks that reached the file (or the pipe). */
uint64_t vp_session_writer__samples_written(const struct vp_session_writer *w);
uint64_t vp_session_writer__ksyms_emitted(const struct vp_session_writer *w);
uint64_t vp_session_writer__bytes(const struct vp_session_writer *w);
int vp_session_writer__error(const struct vp_session_writer *w);  /* sticky, 0 if none */

/* Ends the stream with VP_REC_END (end->samples is filled in from the count), closes
 * it, and writes meta.json. Call once; free() afterwards. 0 or -errno. */
int vp_session_writer__finish(struct vp_session_writer *w, uint64_t time, struct vp_end *end,
			      char *err, size_t errlen);
/* Closes without END (a failed recording): everything written so far stays readable. */
void vp_session_writer__free(struct vp_session_writer *w);   /* accepts NULL */

#endif
