/* JVMs among the processes of 'viprof record -p/-a': load the viprof agent into each
 * HotSpot JVM by dynamic attach (recorder/jvm_attach.h) so that its JIT code maps land
 * in <session>/jit/<pid>/, and record a VP_REC_JVM saying what happened. */
#ifndef VIPROF_RECORDER_RECORD_JVM_H
#define VIPROF_RECORDER_RECORD_JVM_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct vp_session_writer;

/* Attaches to the JVMs among pids (or, when all, among every process but ourselves).
 * A JVM that refuses is reported in one line on stderr and recorded with
 * VP_JVM_ATTACH_REFUSED; recording goes on. Returns the number of JVMs the agent was
 * loaded into, or the session writer's -errno. */
struct vp_record_opts;

/* A recording's hold on <session>/jit/recording.lock (one per recording, so that several
 * recordings in one process end their agents' sessions independently); fd -1 until the
 * first attach takes it. */
struct record_jvm_chan {
	pid_t pid;
	int fd;
};
struct record_jvm_lock {
	int fd;
	char path[PATH_MAX];
	/* The agents' channels (vp_jvm__attach_fds): the next session of this recorder
	 * goes to those JVMs over them, without an attach; carried from one session's lock
	 * to the next (record_jvm__carry), closed by record_jvm__end. */
	struct record_jvm_chan *chans;
	int nchans, capchans;
};

/* Attaches the agent to the -p processes that are HotSpot JVMs, or with all (-a) to every
 * HotSpot JVM on the machine, in both cases only those --jvm-attach allows (o). With
 * -a it says on stderr how many JVMs of how many users got the agent and how to limit
 * that. Returns the number loaded or -errno when the session cannot be written. */
int record_jvm__attach(struct vp_session_writer *w, struct record_jvm_lock *l, const pid_t *pids, int npids,
		       bool all, const char *agent, const struct vp_record_opts *o);

/* The same for the -p processes that are this user's own, into a session directory
 * this user made (the service's client, which attaches as the user so that the
 * service never does): what came of each attach goes into jvm_pids/jvm_flags
 * (VP_JVM_* flags; npids entries each) for the service to record. Returns how many. */
int record_jvm__attach_own(const char *session, struct record_jvm_lock *l, const pid_t *pids, int npids,
			   const char *agent, const struct vp_record_opts *o, pid_t *jvm_pids, uint32_t *jvm_flags);

/* The recording ended: the agents it attached stop writing its code maps (they watch
 * the lock the first attach took on <session>/jit/recording.lock) and turn idle; those
 * it has channels to are told so and waited for, RECORD_JVM_END_MS at most in all. */
#define RECORD_JVM_END_MS 3000
/* How long record -p waits for a named JVM that is still starting (no VM thread yet). */
#define RECORD_JVM_START_MS 5000
void record_jvm__end(struct record_jvm_lock *l);

/* A new session of the same recorder (continuous mode): the agents' channels go from
 * the old session's lock to the new one's, before its attach. */
void record_jvm__carry(struct record_jvm_lock *from, struct record_jvm_lock *to);

/* JVMs that start while a whole-VM recording (-a) runs: a process is watched from
 * when the side band shows it mapping libjvm.so (record_jvm__watch_mmap), for up to
 * RECORD_JVM_WATCH_S seconds, and a HotSpot JVM gets the agent (the attach above, with its
 * refusal memory and --jvm-attach) once it catches SIGQUIT (its signal dispatcher runs:
 * before that, the attach's SIGQUIT would kill it, which is the JDK's own attach
 * client's check too). Only those processes are read, once a second: the watch costs
 * nothing for the programs a busy VM starts that are no JVMs (reading every new
 * process's /proc files each second for 30 s was most of the service's CPU on a VM that
 * builds software). /proc is listed only once after the start (JVMs started before the
 * sampler ran, or still starting at the start's attach) and once after side-band
 * records were lost (record_jvm__watch_lost). A JVM started with the viprof agent
 * (-agentpath, as 'viprof record -- java' starts one) is its own recording's and is
 * left to the next session's attach, as before. Zero-initialized;
 * record_jvm__watch_free frees it. Used from the recording's thread only. */
#define RECORD_JVM_WATCH_S 30
struct record_jvm_watch_pid;
struct record_jvm_watch {
	struct record_jvm_watch_pid *v;   /* the processes that mapped libjvm.so */
	size_t n, cap;
	uint64_t next_ns;        /* the next look (monotonic) */
	uint64_t since_ticks;    /* when the watch began, in /proc's start-time ticks */
	uint64_t rescans;        /* how often /proc was listed */
	bool primed;
	bool rescan;             /* list /proc at the next look */
};

/* A live side-band record of type VP_REC_MMAP: a libjvm.so mapped (not a synthesized
 * record) makes its process watched. */
void record_jvm__watch_mmap(struct record_jvm_watch *wt, const void *body, size_t len, uint64_t now);
/* Whether body (a VP_REC_MMAP record of len bytes) is a live mapping of a libjvm.so. Pure. */
bool record_jvm__is_libjvm_mmap(const void *body, size_t len);
/* Side-band records were lost (a libjvm.so mapping may be among them). */
void record_jvm__watch_lost(struct record_jvm_watch *wt);

/* Looks at the watched processes once a second (now: CLOCK_MONOTONIC ns); attaches to
 * the JVMs that became ready. The first call (before sampling starts) only marks the
 * start. Returns how many got the agent, or the session writer's -errno. */
int record_jvm__watch(struct record_jvm_watch *wt, struct vp_session_writer *w, struct record_jvm_lock *l,
		      const char *agent, const struct vp_record_opts *o, uint64_t now);
void record_jvm__watch_free(struct record_jvm_watch *wt);

/* Whether pid runs with -XX:+PreserveFramePointer on its command line or in
 * JAVA_TOOL_OPTIONS / JDK_JAVA_OPTIONS (the last occurrence wins, as in HotSpot). */
bool record_jvm__frame_pointers(pid_t pid);

#endif
