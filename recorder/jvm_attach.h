/* HotSpot dynamic attach: load the viprof agent into a running JVM (API agreed in the
 * team's apis brief). */
#ifndef VIPROF_JVM_ATTACH_H
#define VIPROF_JVM_ATTACH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* libjvm.so mapped in /proc/PID/maps. */
bool vp_jvm__is_hotspot(pid_t pid);
/* For a pid named by the user (-p): 1 once it is a HotSpot JVM, waiting up to
 * timeout_ms for the VM thread of one whose HotSpot libjvm.so is mapped (a JVM still
 * starting); 0 when it maps none (not a JVM); -ETIMEDOUT when it did not get there. */
int vp_jvm__wait_hotspot(pid_t pid, int timeout_ms);

/* Loads agent_path with options into the running JVM pid via the attach protocol (acting
 * as the target's uid/gid, through /proc/PID/root for containers). 0 or -errno with a
 * one-line reason in err naming the cause and the fix. Takes up to ~6 s when the JVM's
 * attach listener has to be started, and never more than 17 s: the helper child, which
 * runs as the JVM's user (who may stop it), is killed then. Forks; the caller's
 * credentials never change.
 * A JVM started with -XX:+DisableAttachMechanism is refused (-EPERM) without a signal;
 * one that did not open its listener before (in this process's life) gets -EALREADY
 * and an empty err, without a signal either. */
int vp_jvm__attach(pid_t pid, const char *agent_path, const char *options, char *err, size_t errlen);

/* vp_jvm__attach that also hands the agent nfds (1..4) descriptors: through a Unix
 * socket made for this attach (by the helper, as the JVM's user) in a new directory in
 * the JVM's /tmp (named in the options as fds=/tmp/<dir>/agent.sock, as the JVM sees
 * it), served to the JVM's own
 * pid only, and removed with that directory when the attach returns. The viprof agent
 * takes the session's jit/<pid> directory and lock file this way (in that order).
 * With chan, the agent's connection is kept (or -1): the agent serves later sessions
 * on it (vp_jvm__send_session) without another attach, until it is closed. */
int vp_jvm__attach_fds(pid_t pid, const char *agent_path, const char *options, const int *fds, int nfds,
		       int *chan, char *err, size_t errlen);

/* A next session for an agent on its channel: options ("dir=<session>/jit") and nfds
 * descriptors (jit/<pid> and the lock file); waits up to timeout_ms for the agent to
 * say its new map is open. 0, or -errno (then attach again, and close the channel). */
int vp_jvm__send_session(int chan, const char *options, const int *fds, int nfds, int timeout_ms);

/* The session is over (its lock let go): each agent on chans[0..n) ends its map now and
 * answers once it is closed; waits up to timeout_ms in all (a stop of the service does
 * not wait). Returns how many answered that they ended it or had nothing to end; the
 * others end theirs when they next look at the lock, as before. */
int vp_jvm__end_sessions(const int *chans, int n, int timeout_ms);

/* Ends every attach under way in this process, and refuses later ones (-ECANCELED): a
 * helper child that its JVM's user stopped, or an agent that does not answer, must not
 * hold the service's stop. Called once, when the process is stopping; thread-safe. */
void vp_jvm__abort_all(void);

#endif
