/* viprof serve's Unix socket: recordings for users who cannot sample by themselves
 * (protocol: daemon/sock_proto.h). Each caller is identified by SO_PEERCRED and may
 * record exactly the processes the kernel would let them ptrace (root: anything); the
 * session is written only through the directory fd the caller passes, and handed to
 * the caller. One thread per connection, each driving its own recorder
 * (recorder/recorder.h); limits per user; one audit line per request in the log. */
#ifndef VIPROF_SERVICE_SOCK_H
#define VIPROF_SERVICE_SOCK_H

#include <stdint.h>
#include <stdio.h>

struct vp_sock_limits {
	unsigned sessions;         /* concurrent recordings per user */
	unsigned requests_per_min; /* requests per user per minute (a burst of as many) */
	uint64_t max_freq;         /* Hz, per event */
	double max_seconds;        /* a recording's longest duration */
	uint64_t max_bytes;        /* a session's stream size */
};

#define VP_SOCK_DEFAULT_LIMITS { .sessions = 2, .requests_per_min = 30, .max_freq = 4000, \
				 .max_seconds = 3600, .max_bytes = 1ull << 30 }

struct vp_sock_opts {
	const char *path;          /* the socket to create (its directory is made 0755) */
	struct vp_sock_limits limits;
	const char *agent;         /* the JVM agent for -p recordings, or NULL */
	FILE *log;
};

struct vp_sock;
/* Listens on o->path (0666: every user may ask; the service decides). NULL with errno
 * and a one-line reason in err (e.g. another service already listens there). */
struct vp_sock *vp_sock__start(const struct vp_sock_opts *o, char *err, size_t errlen);
/* Stops listening, ends every recording cleanly and waits for them. Accepts NULL. */
void vp_sock__stop(struct vp_sock *s);

#endif
