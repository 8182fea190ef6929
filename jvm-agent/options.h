/* The agent's options: what one session asks for (the -agentpath or attach options, and
 * the descriptors a recorder hands over), and the JVM's own frame-pointer flag.
 * Internal to jvm-agent/. */
#ifndef VIPROF_JVM_AGENT_OPTIONS_H
#define VIPROF_JVM_AGENT_OPTIONS_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

/* Where one session's maps go: dir=, and lock= when a recorder holds that file locked
 * for as long as its session lasts (the agent stops writing when the lock is free). */
struct vp_agent_opts {
	char dir[PATH_MAX];
	char lock[PATH_MAX];
	bool default_dir;      /* no dir= option: the per-user default under /tmp */
	/* fds=SOCKET: the recorder hands over, on that Unix socket, the session's own
	 * jit/<pid> directory and its lock file as descriptors (map_fd, lock_fd; -1 until
	 * received), so that a JVM in a container, or one whose user cannot reach the
	 * session's path, writes straight into the session and nothing into its own /tmp. */
	char sock[PATH_MAX];
	int map_fd, lock_fd;
	/* The connection they came on, kept: the recorder's next session comes on it
	 * (channel_thread) instead of another attach. -1 if none. */
	int chan_fd;
	/* alloc=BYTES (0: off) and locks=NS (-1: off): each session says what it records. */
	uint64_t alloc;
	int64_t locks;
};

/* dir=DIR[,lock=FILE][,fds=SOCKET]: all optional; DIR defaults to /tmp/viprof-jit-<euid>. Also the
 * measurement options above (and VIPROF_AGENT_STATS=1 for stats). */
int vp_agent_opts__parse(const char *options, struct vp_agent_opts *o);

/* JVMTI does not expose VM flags, so read them where the JVM did: JAVA_TOOL_OPTIONS,
 * then JDK_JAVA_OPTIONS, then the command line, then _JAVA_OPTIONS (HotSpot's order). */
bool vp_agent_opts__frame_pointers(void);

#endif
