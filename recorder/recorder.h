/* The recorder: one recording, from opening its events to the session's END record, as
 * a library that 'viprof record' (cli/record_cmd.c) and the service ('viprof serve')
 * drive the same way: start, poll until it is done or the caller wants it to end, stop,
 * free. It checks the events, creates the session (common/session_format.h), loads the
 * sampler and the switch tracer, walks stacks, loads the agent into running JVMs,
 * snapshots kernel symbols and steal time, and flushes the stream every second so that
 * a recorder killed at any moment leaves a session readable to its last chunk.
 *
 * Several recorders run in one process: each owns its sampler, session writer,
 * unwinder, tracer and kernel-symbol loader, and nothing is shared between them. One
 * thread drives one recorder. Signals, the live status line and launching a command
 * stay with the caller: for RECORD_TARGET_LAUNCH the caller forks the command held
 * before exec (common/launch.h), passes its pid in opts->launched, releases it once
 * vp_recorder__start returned, and reaps it; the recorder samples it and what it forks. */
#ifndef VIPROF_RECORDER_RECORDER_H
#define VIPROF_RECORDER_RECORDER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "recorder/record_request.h"

struct vp_recorder;   /* opaque */

/* A recording the service makes for a user (daemon/sock.c): only processes whose
 * real, effective and saved uid are uid are recorded, whatever the target grows into,
 * and the session has no directory on root's side: its stream and meta.json go into
 * stream_fd and meta_fd (vp_session_writer__create_stream), which the user's own
 * client stores. The client attaches the agent to its JVMs itself, as the user; what
 * came of each attach arrives here as jvms (a VP_REC_JVM record each). */
struct vp_recorder_owner {
	uid_t uid;
	gid_t gid;
	int stream_fd, meta_fd;    /* taken by vp_recorder__start_owned, also on failure */
	struct { pid_t pid; uint32_t flags; } jvms[RECORD_MAX_PIDS];
	int njvms;
};

struct vp_recorder_stats {
	uint64_t samples, lost;    /* the sampler's counts so far (final after stop) */
	uint64_t written;          /* samples in the session's stream on disk (flushed) */
	uint64_t elapsed_ns;       /* since sampling started (the END record's duration after stop) */
	uint64_t stream_bytes;     /* bytes written to the stream so far */
	uint64_t disk_bytes;       /* after stop: every file of the session, the JVMs' maps too */
	/* What the recording cost besides sampling, over the recorder's life (all its
	 * sessions), so that a service can show it per interval: */
	uint64_t jvm_cpu_ns;       /* CPU time of the JVM attaches (the watch's and each rotation's) */
	uint64_t rotate_cpu_ns;    /* CPU time of the rotations (a session's end, the next one's start) */
	uint64_t tables_ns;        /* time the stack walker spent building or loading unwind tables */
	uint64_t table_files;      /* files whose unwind tables it has */
};

/* Checks the events, creates the session and starts sampling. session_dirfd < 0:
 * the session is opts->output, created as 'viprof record' does (a missing directory
 * made 0700, an empty one of ours used, --force keeps the old one as DIR.old). A
 * directory fd >= 0 (open, e.g. O_PATH|O_DIRECTORY, not kept: it is duplicated) is an
 * empty directory of ours to write the session into, only through that fd, named
 * opts->output in messages.
 * Warnings and notes go to opts->log. NULL with errno and a one-line message naming
 * the cause and the fix in err on failure (-EINVAL for options or events that cannot
 * be had: a usage error). */
struct vp_recorder *vp_recorder__start(const struct vp_record_opts *opts, int session_dirfd, char *err, size_t errlen);
/* The same for a user of the service (see struct vp_recorder_owner). */
struct vp_recorder *vp_recorder__start_owned(const struct vp_record_opts *opts, const struct vp_recorder_owner *owner,
					     char *err, size_t errlen);

/* Drains the sampler (waiting up to timeout_ms for data; a signal ends the wait early),
 * writes steal and kernel symbols when due, flushes the stream every second. >0 still
 * recording; 0 finished by itself (the duration -d elapsed, or every -p process
 * exited; a launched command's end is its caller's to see); <0 -errno when the
 * sampler or the session failed: sampling has stopped, what was written stays
 * readable, vp_recorder__error says why; call stop next. */
int vp_recorder__poll(struct vp_recorder *r, int timeout_ms);
/* Ends the current session and goes on recording into a new one, without stopping the
 * sampler, the switch tracer or the stack walker (the continuous service's intervals):
 * the session so far gets its kernel symbols, last steal, END and meta.json and is
 * closed; the next, written through session_dirfd (an empty directory, as in
 * vp_recorder__start; named name in messages), starts with its own metadata and events,
 * the running processes' mappings, a steal baseline, kernel symbols read again, and the
 * JVMs' agents moved to it (re-attached), so each session reads on its own. 0 once
 * the new session is recorded (a failure to end the old one is logged; it stays
 * readable to its last chunk); -errno when the new session cannot be created, and the
 * old one goes on recording (err says why).
 * The counts of vp_recorder__stats and END are per session. Not for owned recordings
 * (vp_recorder__start_owned). */
int vp_recorder__rotate(struct vp_recorder *r, int session_dirfd, const char *name, char *err, size_t errlen);
/* Changes the sampling rate (-F) while recording, without reopening the events; call it
 * just before vp_recorder__rotate so that each session has one rate (its EVENT records
 * say the new one). -ENOTSUP when the events have rates of their own (-e with
 * freq=/period=, -c) or the backend cannot (perf): then restart the recorder. */
int vp_recorder__set_freq(struct vp_recorder *r, uint64_t freq);
/* The launched command's exit status for the END record (a wait() status); without it
 * END says 0. */
void vp_recorder__set_exit_status(struct vp_recorder *r, int wait_status);
/* Stops sampling, drains what is left, and ends the session: kernel symbols, last
 * steal, LOST, END, meta.json. Messages (the stack walker's summary unless quiet,
 * failures) go to opts->log. 0 or -errno; the session stays readable either way.
 * Call once. */
int vp_recorder__stop(struct vp_recorder *r);
void vp_recorder__free(struct vp_recorder *r);   /* accepts NULL; stops nothing, discards nothing */

void vp_recorder__stats(const struct vp_recorder *r, struct vp_recorder_stats *st);
/* The one-line reason of the last failure of poll or stop, or "". */
const char *vp_recorder__error(const struct vp_recorder *r);
/* The session directory: its absolute path when the recorder created it, else opts->output. */
const char *vp_recorder__session_dir(const struct vp_recorder *r);
/* The sampler backend in use: "bpf" or "perf". */
const char *vp_recorder__backend(const struct vp_recorder *r);

#endif
