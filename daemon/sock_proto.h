/* The protocol of the service's Unix socket, shared by the client ('viprof record' run
 * by a user who cannot sample by themselves, cli/record_service.c) and the service
 * (daemon/sock.c). A SOCK_SEQPACKET socket: every message is one packet of text.
 *
 *   service -> client   "READY" at once when the connection is admitted, or "ERR ..."
 *                       (over a limit) and the connection closes
 *   client -> service   "RECORD\n" then "key=value\n" lines (below). No file
 *                       descriptor: a request that carries one is refused. The client
 *                       has made its session directory and attached its own JVMs, as
 *                       the user, before it asks.
 *   service -> client   "LOG <text>"      notes and warnings, printed as they are
 *                       "ERR <code> <line>" refused or failed; code 2 usage, 1 other
 *                       "FILE <name>" with the read end of a pipe attached: the bytes
 *                       of the session file <name> (stream.vps, then meta.json), which
 *                       the client stores in its session as the user; the pipe ends
 *                       when the file is complete
 *                       "STARTED <backend>" sampling runs: the client releases its command
 *                       "STATUS <samples> <lost> <elapsed_ns>"  twice a second, dropped
 *                       when the client has not read the last ones
 *                       "DONE <samples> <lost> <elapsed_ns> <stream_bytes> <rc>"  the end
 *   client -> service   "STOP <exit status>" the command is done (or the user pressed
 *                       Ctrl-C: -1); closing the socket ends the recording the same way.
 *
 * Request keys: events, freq, period, callchain, fp_walk, target (pids|launch|all),
 * pids (a,b,c), launched, duration, no_jit, off_cpu, backend, quiet, cmd, cmdline,
 * output (the directory's name, for messages only: the service never opens it), jvms
 * (pid:flags,..: what came of the client's attaches, VP_JVM_* flags). Unknown keys are
 * refused. */
#ifndef VIPROF_SERVICE_SOCK_PROTO_H
#define VIPROF_SERVICE_SOCK_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "recorder/record_request.h"

#define VP_SOCK_DEFAULT "/run/viprof/viprof.sock"
#define VP_SOCK_ENV "VIPROF_SOCKET"
#define VP_SOCK_MAX_MSG 65536

/* Where clients look for the service: $VIPROF_SOCKET, else the default. */
const char *vp_sock__path(void);

/* What came of the client's attach to one of its JVMs (VP_JVM_* flags). */
struct vp_sock_jvm {
	pid_t pid;
	uint32_t flags;
};

/* Writes the request for o (and the njvms attach results) into buf (NUL-terminated).
 * 0, or -ENOSPC. */
int vp_sock__encode_request(const struct vp_record_opts *o, const struct vp_sock_jvm *jvms, int njvms,
			    char *buf, size_t len);
/* Parses a request (buf is modified: o's strings point into it, cmd into cmdv, which
 * holds 2 entries; jvms holds RECORD_MAX_PIDS, each a pid of the request's pids). 0, or
 * -EINVAL with a one-line reason in err. */
int vp_sock__decode_request(char *buf, struct vp_record_opts *o, char **cmdv, struct vp_sock_jvm *jvms,
			    int *njvms, char *err, size_t errlen);

/* One packet with an optional fd (-1: none). 0 or -errno (-EAGAIN when the socket's
 * send timeout passed: the peer reads nothing). */
int vp_sock__send(int sock, const char *msg, size_t len, int fd);
/* One packet into buf (NUL-terminated, at most len - 1 bytes), the attached fd in *fd
 * (-1 if none; may be NULL, then an fd is closed). Bytes received, 0 at EOF, or -errno. */
ssize_t vp_sock__recv(int sock, char *buf, size_t len, int *fd);

#endif
