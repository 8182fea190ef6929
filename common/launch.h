/* The one way viprof starts a command it measures (record -- CMD, stat -- CMD): fork,
 * hold the child before exec until the caller's events watch its pid, then let it exec.
 * Nothing of the new program runs unobserved, and when the caller gives up first the
 * child exits 127 without running the command at all. */
#ifndef VIPROF_COMMON_LAUNCH_H
#define VIPROF_COMMON_LAUNCH_H

#include <sys/types.h>

struct vp_held_child {
	pid_t pid;
	int go_fd;      /* one byte here lets the child exec; closing it makes it exit 127 */
	int exec_fd;    /* EOF once the exec happened; an int (errno) first when it failed */
};

struct vp_launch_opts {
	const char *env_name, *env_value;  /* set in the child's environment when not NULL */
	const char *who;                   /* "viprof", "viprof stat": names the failure */
};

/* Forks cmd (argv, NULL-terminated, searched in PATH) held before exec. In the child:
 * SIGINT and SIGTERM back to their defaults, a set-uid/set-gid viprof's privileges
 * dropped to the invoking user's, the environment variable set. 0 or -errno. */
int vp_child__launch(struct vp_held_child *c, char *const *cmd, const struct vp_launch_opts *o);
/* Lets the child exec. Then *exec_errno is 0 once the program runs, or the errno of
 * the failed exec (the child has printed why and exits 127). exec_errno may be NULL
 * (no wait). 0 or -errno. */
int vp_child__release(struct vp_held_child *c, int *exec_errno);
/* Closes what is left open; a child never released exits 127. Accepts repeated calls. */
void vp_child__close(struct vp_held_child *c);

#endif
