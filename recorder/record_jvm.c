/* Dynamic attach of the agent for -p/-a recordings: see record_jvm.h. */
#define _GNU_SOURCE
#include "recorder/record_jvm.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/safefs.h"
#include "common/session_format.h"
#include "recorder/jvm_attach.h"
#include "recorder/record_request.h"
#include "recorder/session_writer.h"

static void chans_close(struct record_jvm_lock *l);

/* Reads a whole /proc file of NUL-separated strings; returns its length or -1. */
static ssize_t read_proc(pid_t pid, const char *name, char *buf, size_t len)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t got = 0;
	ssize_t k;
	while (got < len - 1 && (k = read(fd, buf + got, len - 1 - got)) > 0)
		got += (size_t)k;
	close(fd);
	buf[got] = '\0';
	return (ssize_t)got;
}

/* Applies each ±PreserveFramePointer in text (space-separated JVM options) to *state. */
static void scan_options(const char *text, size_t len, int *state)
{
	static const char on[] = "-XX:+PreserveFramePointer", off[] = "-XX:-PreserveFramePointer";
	for (size_t i = 0; i + sizeof(on) - 1 <= len; i++) {
		if (!memcmp(text + i, on, sizeof(on) - 1))
			*state = 1;
		else if (!memcmp(text + i, off, sizeof(off) - 1))
			*state = 0;
	}
}

bool record_jvm__frame_pointers(pid_t pid)
{
	static char buf[1 << 16];
	int state = 0;
	/* HotSpot reads JAVA_TOOL_OPTIONS (and the launcher JDK_JAVA_OPTIONS) before the
	 * command line, so the command line has the last word. */
	ssize_t n = read_proc(pid, "environ", buf, sizeof(buf));
	for (ssize_t i = 0; i < n; i += (ssize_t)strlen(buf + i) + 1) {
		if (!strncmp(buf + i, "JAVA_TOOL_OPTIONS=", 18) || !strncmp(buf + i, "JDK_JAVA_OPTIONS=", 17))
			scan_options(buf + i, strlen(buf + i), &state);
	}
	n = read_proc(pid, "cmdline", buf, sizeof(buf));
	if (n > 0)
		scan_options(buf, (size_t)n, &state);
	return state == 1;
}

/* The agent writes <session>/jit/<pid>/ as the JVM's user, who may not be us: the
 * session writer makes that directory for it, owned by it, and lets that user (only)
 * reach it (vp_session_writer__admit). The user is the JVM's effective uid, the one
 * the attach also runs as. */
static void prepare_maps_dir(struct vp_session_writer *w, pid_t pid, FILE *log)
{
	char proc[64];
	struct stat st;

	snprintf(proc, sizeof(proc), "/proc/%d", (int)pid);
	if (stat(proc, &st) != 0)
		return;
	int e = vp_session_writer__admit(w, st.st_uid, st.st_gid, pid);
	if (e)
		fprintf(log, "viprof: warning: cannot make %s/" VP_SESSION_JIT_DIR "/%d for JVM %d (uid %u): %s; "
			"its code maps may be missing\n", vp_session_writer__dir(w), (int)pid, (int)pid,
			(unsigned)st.st_uid, strerror(-e));
}

/* The session's lock file, <session>/jit/recording.lock, held locked (LOCK_EX) from
 * before the first attach until record_jvm__end (or until we die: the kernel lets go
 * of it then). Each agent of this session watches it (lock=) and stops writing, turning
 * idle, once it is free; readable by all, so that the JVMs' users can open it. */
static int hold_lock(const char *session, struct record_jvm_lock *l)
{
	if (l->fd >= 0)
		return 0;
	snprintf(l->path, sizeof(l->path), "%s/" VP_SESSION_JIT_DIR, session);
	int dfd = vp_safe_opendir(l->path, VP_SAFE_TRUSTED_LINKS), fd = -1, e = 0;
	if (dfd < 0)
		return dfd;
	fd = vp_safe_create(dfd, VP_SESSION_JIT_LOCK, 0644);
	close(dfd);
	if (fd < 0)
		return fd;
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		e = -errno;
		close(fd);
		return e;
	}
	l->fd = fd;
	snprintf(l->path + strlen(l->path), sizeof(l->path) - strlen(l->path), "/" VP_SESSION_JIT_LOCK);
	return 0;
}

void record_jvm__end(struct record_jvm_lock *l)
{
	if (l->fd >= 0)
		close(l->fd);   /* the agents see the lock free and finish their maps */
	l->fd = -1;
	/* Those on our channels are told, and waited for: the session is whole when we
	 * return, even if the JVM is killed the moment after. */
	int *fds = l->nchans ? calloc((size_t)l->nchans, sizeof(int)) : NULL;
	for (int i = 0; fds && i < l->nchans; i++)
		fds[i] = l->chans[i].fd;
	if (fds)
		vp_jvm__end_sessions(fds, l->nchans, RECORD_JVM_END_MS);
	free(fds);
	chans_close(l);
}

/* The descriptors the agent takes instead of paths (vp_jvm__attach_fds): the session's
 * jit/<pid> (made for the JVM's user by prepare_maps_dir) and a read-only descriptor
 * of its own on the lock file (flock locks belong to the open file, so the agent's
 * shared lock attempts must not share ours). With them the agent needs no path: a JVM
 * in another mount namespace, or of a user who cannot reach the session, writes its
 * maps straight into the session and nothing into its own /tmp. 0 or -errno. */
static int open_agent_fds(struct vp_session_writer *w, const struct record_jvm_lock *l, pid_t pid, int fds[2])
{
	char path[PATH_MAX], name[32];
	int dfd, e = 0;

	fds[0] = fds[1] = -1;
	if (l->fd < 0)
		return -ENOENT;
	snprintf(path, sizeof(path), "%s/" VP_SESSION_JIT_DIR, vp_session_writer__dir(w));
	if ((dfd = vp_safe_opendir(path, VP_SAFE_TRUSTED_LINKS)) < 0)
		return dfd;
	snprintf(name, sizeof(name), "%d", (int)pid);
	fds[0] = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	fds[1] = openat(dfd, VP_SESSION_JIT_LOCK, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fds[0] < 0 || fds[1] < 0) {
		e = -errno;
		for (int i = 0; i < 2; i++)
			if (fds[i] >= 0)
				close(fds[i]);
		fds[0] = fds[1] = -1;
	}
	close(dfd);
	return e;
}

/* ---- the agents' channels ---- */

static void chans_close(struct record_jvm_lock *l)
{
	for (int i = 0; i < l->nchans; i++)
		close(l->chans[i].fd);   /* the agent's channel thread ends */
	free(l->chans);
	l->chans = NULL;
	l->nchans = l->capchans = 0;
}

void record_jvm__carry(struct record_jvm_lock *from, struct record_jvm_lock *to)
{
	chans_close(to);
	to->chans = from->chans;
	to->nchans = from->nchans;
	to->capchans = from->capchans;
	from->chans = NULL;
	from->nchans = from->capchans = 0;
}

static int chan_find(const struct record_jvm_lock *l, pid_t pid)
{
	for (int i = 0; i < l->nchans; i++)
		if (l->chans[i].pid == pid)
			return i;
	return -1;
}

static void chan_drop(struct record_jvm_lock *l, int i)
{
	close(l->chans[i].fd);
	l->chans[i] = l->chans[--l->nchans];
}

static void chan_add(struct record_jvm_lock *l, pid_t pid, int fd)
{
	int i = chan_find(l, pid);
	if (i >= 0)
		chan_drop(l, i);
	if (l->nchans == l->capchans) {
		int cap = l->capchans ? 2 * l->capchans : 16;
		struct record_jvm_chan *c = realloc(l->chans, (size_t)cap * sizeof(*c));
		if (!c) {
			close(fd);   /* no room: the next session attaches as before */
			return;
		}
		l->chans = c;
		l->capchans = cap;
	}
	l->chans[l->nchans++] = (struct record_jvm_chan){ .pid = pid, .fd = fd };
}

/* The agent in pid serves this recorder already: its next session goes over its channel,
 * without an attach (no attach listener traffic, no SIGQUIT, no dlopen). 0 when it took
 * it; otherwise the channel is dropped and the caller attaches. */
static int send_over_channel(struct record_jvm_lock *l, pid_t pid, const char *options, const int fds[2])
{
	int i = chan_find(l, pid);
	if (i < 0)
		return -ENOENT;
	int e = vp_jvm__send_session(l->chans[i].fd, options, fds, 2, 15000);
	if (e)
		chan_drop(l, i);
	return e;
}

/* Whether the recording walks user stacks by frame pointers only (-g without tables, or
 * the perf sampler), where a JVM without -XX:+PreserveFramePointer loses its stacks. */
#define FP_WALK(o) ((o)->callchain && ((o)->fp_walk || ((o)->backend && !strcmp((o)->backend, "perf"))))

/* --off-cpu: the agent records virtual threads' mounts and unmounts (docs/offcpu.md). */
static void add_vthreads(char *options, size_t len, bool on)
{
	if (on && strlen(options) + strlen(",vthreads=1") < len)
		strcat(options, ",vthreads=1");
}

/* -e alloc and -e lock (issue 25): the agent's alloc= and locks= options, appended to
 * opts; every session says them (or not), so a JVM that had them in an earlier session
 * stops sampling when this one does not ask. */
static void profile_options(char *opts, size_t len, const struct vp_record_opts *o)
{
	size_t n = strlen(opts);
	if (o->alloc_bytes && n < len)
		n += (size_t)snprintf(opts + n, len - n, ",alloc=%llu", (unsigned long long)o->alloc_bytes);
	if (o->lock && n < len)
		snprintf(opts + n, len - n, ",locks=%llu", (unsigned long long)o->lock_ns);
}

/* The agent's options for a session: its maps directory, the recording's lock when it
 * holds one (l; NULL without), and the profiles and virtual-thread events asked for. */
static void agent_options(char *options, size_t len, const char *session, const struct record_jvm_lock *l,
			  const struct vp_record_opts *o)
{
	if (l)
		snprintf(options, len, "dir=%s/" VP_SESSION_JIT_DIR ",lock=%s", session, l->path);
	else
		snprintf(options, len, "dir=%s/" VP_SESSION_JIT_DIR, session);
	profile_options(options, len, o);
	add_vthreads(options, len, o->off_cpu);
}

static int attach_one(struct vp_session_writer *w, struct record_jvm_lock *l, pid_t pid, const char *agent, FILE *log,
		      bool warn_fp, const struct vp_record_opts *o)
{
	const char *session = vp_session_writer__dir(w);
	char options[PATH_MAX + 96], err[512] = "", rel[64];
	struct timespec ts;
	uint32_t flags = 0;

	int le = hold_lock(session, l);
	if (le)
		fprintf(stderr, "viprof: warning: cannot create %s/" VP_SESSION_JIT_DIR "/" VP_SESSION_JIT_LOCK ": %s; "
			"JVM agents will go on writing code maps after this recording, until the next one\n", session,
			strerror(-le));
	agent_options(options, sizeof(options), session, le ? NULL : l, o);
	snprintf(rel, sizeof(rel), VP_SESSION_JIT_DIR "/%d", (int)pid);
	prepare_maps_dir(w, pid, log);
	if (!record_jvm__frame_pointers(pid))
		flags |= VP_JVM_NO_FRAME_POINTERS;
	/* A JVM that has the agent from an earlier session gets it again: the agent ends
	 * that session's map and starts this one, replaying its live code. */
	int fds[2];
	int e;
	if (!le && !open_agent_fds(w, l, pid, fds)) {
		int chan = -1;

		agent_options(options, sizeof(options), session, NULL, o);   /* the channel carries no lock */
		e = send_over_channel(l, pid, options, fds);
		if (!e)
			flags |= VP_JVM_CHANNEL;
		if (e) {
			e = vp_jvm__attach_fds(pid, agent, options, fds, 2, &chan, err, sizeof(err));
			if (!e && chan >= 0)
				chan_add(l, pid, chan);
		}
		close(fds[0]);
		close(fds[1]);
	} else {
		e = vp_jvm__attach(pid, agent, options, err, sizeof(err));
	}
	if (e == 0) {
		flags |= VP_JVM_AGENT_LOADED;
	} else {
		flags |= VP_JVM_ATTACH_REFUSED;
		if (e == -EALREADY)
			;   /* refused an earlier attach of this service: said then */
		else if (err[0])   /* the attach reason names the JVM already */
			fprintf(log, "viprof: %s; its Java methods will not be named\n", err);
		else
			fprintf(log, "viprof: JVM %d: attach failed: %s; its Java methods will not be named\n",
				(int)pid, strerror(-e));
	}
	/* Only the frame-pointer walk (FP_WALK) needs them: the default walker steps
	 * compiled frames by their frame sizes, and said so falsely at every attach. */
	if ((flags & VP_JVM_NO_FRAME_POINTERS) && warn_fp)
		fprintf(log, "viprof: JVM %d runs without -XX:+PreserveFramePointer: its Java stacks will be cut short\n",
			(int)pid);
	size_t rl = strlen(rel);
	char body[sizeof(struct vp_jvm) + 64];
	struct vp_jvm *j = (struct vp_jvm *)body;
	memset(body, 0, sizeof(body));
	j->pid = (uint32_t)pid;
	j->flags = flags;
	memcpy(j->maps_dir, rel, rl + 1);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	int we = vp_session_writer__emit(w, VP_REC_JVM, (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec,
					 body, sizeof(*j) + rl + 1);
	if (we)
		return we;
	return e == 0 ? 1 : 0;
}

/* Whether the process opted out of the agent: VIPROF_NO_AGENT=1 (or any value but
 * "" and "0") in the environment it started with. */
static bool opted_out(pid_t pid)
{
	static char buf[1 << 16];
	ssize_t n = read_proc(pid, "environ", buf, sizeof(buf));
	for (ssize_t i = 0; i < n; i += (ssize_t)strlen(buf + i) + 1)
		if (!strncmp(buf + i, "VIPROF_NO_AGENT=", 16))
			return buf[i + 16] && strcmp(buf + i + 16, "0");
	return false;
}

/* Does --jvm-attach let the agent into pid (owned by uid), and did the process not
 * opt out? */
/* Is pid one of --jvm-attach's pids? */
static bool listed_pid(const struct vp_record_opts *o, pid_t pid)
{
	if (o->jvm_attach != RECORD_JVM_PIDS)
		return false;
	for (int i = 0; i < o->jvm_n; i++)
		if (o->jvm_pids[i] == pid)
			return true;
	return false;
}

static bool allowed(const struct vp_record_opts *o, pid_t pid, uid_t uid)
{
	if (o->jvm_attach != RECORD_JVM_NONE && opted_out(pid))
		return false;
	switch (o->jvm_attach) {
	case RECORD_JVM_NONE:
		return false;
	case RECORD_JVM_UIDS:
		for (int i = 0; i < o->jvm_n; i++)
			if (o->jvm_uids[i] == uid)
				return true;
		return false;
	case RECORD_JVM_PIDS:
		return listed_pid(o, pid);
	default:
		return true;
	}
}

static uid_t owner(pid_t pid)
{
	char proc[64];
	struct stat st;

	snprintf(proc, sizeof(proc), "/proc/%d", (int)pid);
	return stat(proc, &st) == 0 ? st.st_uid : (uid_t)-1;
}

/* Whether pid, named by the user (-p), is a HotSpot JVM to attach: one still starting
 * is waited for (RECORD_JVM_START_MS), not skipped in silence, and one that does not get
 * there is said on log (its Java methods would go unnamed). */
static bool named_jvm_ready(pid_t pid, FILE *log)
{
	int hs = vp_jvm__wait_hotspot(pid, RECORD_JVM_START_MS);
	if (hs == -ETIMEDOUT)
		fprintf(log, "viprof: JVM %d is still starting (no VM thread after %d s): not attached, its Java methods "
			"will not be named; record it again once it runs\n", (int)pid, RECORD_JVM_START_MS / 1000);
	return hs == 1;
}

int record_jvm__attach_own(const char *session, struct record_jvm_lock *l, const pid_t *pids, int npids,
			   const char *agent, const struct vp_record_opts *o, pid_t *jvm_pids, uint32_t *jvm_flags)
{
	FILE *log = o->log ? o->log : stderr;
	char options[PATH_MAX + 96], err[512];
	uid_t self = geteuid();
	int n = 0;

	for (int i = 0; i < npids; i++) {
		pid_t pid = pids[i];
		if (owner(pid) != self)
			continue;
		if (!named_jvm_ready(pid, log) || !allowed(o, pid, self))
			continue;
		/* The user's own JVM writes its maps by path into the user's own session:
		 * no descriptors to hand over, no other user to let in. */
		int le = hold_lock(session, l);
		agent_options(options, sizeof(options), session, le ? NULL : l, o);
		uint32_t flags = record_jvm__frame_pointers(pid) ? 0 : VP_JVM_NO_FRAME_POINTERS;
		err[0] = '\0';
		int e = vp_jvm__attach(pid, agent, options, err, sizeof(err));
		flags |= e ? VP_JVM_ATTACH_REFUSED : VP_JVM_AGENT_LOADED;
		if (e)
			fprintf(log, "viprof: %s%s; its Java methods will not be named\n", err[0] ? err : "JVM attach failed: ",
				err[0] ? "" : strerror(-e));
		if ((flags & VP_JVM_NO_FRAME_POINTERS) && FP_WALK(o))
			fprintf(log, "viprof: JVM %d runs without -XX:+PreserveFramePointer: its Java stacks will be cut "
				"short\n", (int)pid);
		jvm_pids[n] = pid;
		jvm_flags[n++] = flags;
	}
	return n;
}

int record_jvm__attach(struct vp_session_writer *w, struct record_jvm_lock *l, const pid_t *pids, int npids,
		       bool all, const char *agent, const struct vp_record_opts *o)
{
	int loaded = 0, r;
	if (!all) {
		for (int i = 0; i < npids; i++) {
			if (!named_jvm_ready(pids[i], o->log ? o->log : stderr) || !allowed(o, pids[i], owner(pids[i])))
				continue;
			if ((r = attach_one(w, l, pids[i], agent, o->log ? o->log : stderr, FP_WALK(o), o)) < 0)
				return r;
			loaded += r;
		}
		return loaded;
	}
	DIR *d = opendir("/proc");
	if (!d)
		return loaded;
	struct dirent *e;
	pid_t self = getpid();
	int found = 0, chosen = 0, nusers = 0;
	uid_t users[64];
	while ((e = readdir(d))) {
		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		pid_t pid = (pid_t)atoi(e->d_name);
		if (pid == self || !vp_jvm__is_hotspot(pid))
			continue;
		uid_t uid = owner(pid);
		found++;
		if (!allowed(o, pid, uid))
			continue;
		chosen++;
		int k = 0;
		while (k < nusers && users[k] != uid)
			k++;
		if (k == nusers && nusers < 64)
			users[nusers++] = uid;
		if ((r = attach_one(w, l, pid, agent, o->log ? o->log : stderr, FP_WALK(o), o)) < 0) {
			closedir(d);
			return r;
		}
		loaded += r;
	}
	closedir(d);
	if (found && !o->quiet)
		fprintf(o->log ? o->log : stderr, "viprof: -a: the JVM agent went into %d of %d HotSpot JVMs (%d user%s)%s\n",
			chosen, found, nusers, nusers == 1 ? "" : "s",
			o->jvm_attach_given ? ""
			: "; every user's JVM gets it with -a: limit that with --jvm-attach none|user:NAME|PID,..");
	return loaded;
}

/* ---- JVMs that start during the recording (record_jvm.h) ---- */

enum { W_NEW, W_DONE };
struct record_jvm_watch_pid {
	pid_t pid;
	uint64_t start;          /* its start time (/proc/PID/stat), against pid reuse; 0: not read yet */
	uint64_t first_ns;       /* when this watch first saw it */
	uint8_t state;
	bool renoted;            /* libjvm.so mapped again since: a new JVM under a reused pid? */
};

/* Field 22 of /proc/PID/stat: the start time in clock ticks (0: unreadable). */
static uint64_t proc_start(pid_t pid)
{
	char buf[512];
	ssize_t n = read_proc(pid, "stat", buf, sizeof(buf) - 1);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	const char *p = strrchr(buf, ')');   /* the comm may hold spaces and parentheses */
	for (int f = 2; p && f < 22; f++)
		p = strchr(p + 1, ' ');
	return p ? strtoull(p + 1, NULL, 10) : 0;
}

/* Does pid catch SIGQUIT (SigCgt in /proc/PID/status)? */
static bool catches_sigquit(pid_t pid)
{
	char buf[4096];
	ssize_t n = read_proc(pid, "status", buf, sizeof(buf) - 1);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	const char *p = strstr(buf, "\nSigCgt:");
	return p && (strtoull(p + 8, NULL, 16) & (1ull << (3 - 1)));
}

/* Was pid started with the viprof agent (-agentpath on its command line, or in
 * JAVA_TOOL_OPTIONS / JDK_JAVA_OPTIONS, as 'viprof record -- java' starts it)? That
 * agent serves the recording that launched it: the watch leaves it to it. */
static bool has_own_agent(pid_t pid)
{
	static char buf[1 << 16];
	static const char *const files[] = { "cmdline", "environ" };
	for (int f = 0; f < 2; f++) {
		ssize_t n = read_proc(pid, files[f], buf, sizeof(buf) - 1);
		if (n > 0)
			buf[n] = '\0';
		for (ssize_t i = 0; i < n; i += (ssize_t)strlen(buf + i) + 1) {
			if (f == 1 && strncmp(buf + i, "JAVA_TOOL_OPTIONS=", 18) && strncmp(buf + i, "JDK_JAVA_OPTIONS=", 17))
				continue;
			if (strstr(buf + i, "-agentpath:") && strstr(buf + i, "libviprof-jvmti"))
				return true;
		}
	}
	return false;
}

static struct record_jvm_watch_pid *watch_find(struct record_jvm_watch *wt, pid_t pid)
{
	for (size_t i = 0; i < wt->n; i++)   /* JVMs only: a handful */
		if (wt->v[i].pid == pid)
			return &wt->v[i];
	return NULL;
}

static struct record_jvm_watch_pid *watch_add(struct record_jvm_watch *wt, pid_t pid, uint64_t now)
{
	if (wt->n == wt->cap) {
		size_t nc = wt->cap ? wt->cap * 2 : 16;
		void *nv = realloc(wt->v, nc * sizeof(*wt->v));
		if (!nv)
			return NULL;
		wt->v = nv;
		wt->cap = nc;
	}
	struct record_jvm_watch_pid *e = &wt->v[wt->n++];
	*e = (struct record_jvm_watch_pid){ .pid = pid, .first_ns = now, .state = W_NEW };
	return e;
}

bool record_jvm__is_libjvm_mmap(const void *body, size_t len)
{
	const struct vp_mmap *m = body;
	static const char tail[] = "/libjvm.so";
	if (len <= sizeof(*m) || m->synthesized)
		return false;   /* a process that ran before: the attach of its session's start */
	size_t fl = strnlen(m->filename, len - sizeof(*m));
	return fl >= sizeof(tail) - 1 && fl < len - sizeof(*m) &&
	       !memcmp(m->filename + fl - (sizeof(tail) - 1), tail, sizeof(tail) - 1);
}

void record_jvm__watch_mmap(struct record_jvm_watch *wt, const void *body, size_t len, uint64_t now)
{
	if (!record_jvm__is_libjvm_mmap(body, len))
		return;
	const struct vp_mmap *m = body;
	struct record_jvm_watch_pid *e = watch_find(wt, (pid_t)m->pid);
	if (e)
		e->renoted = true;
	else
		watch_add(wt, (pid_t)m->pid, now);
}

void record_jvm__watch_lost(struct record_jvm_watch *wt)
{
	wt->rescan = true;
}

/* Clock ticks since boot, as /proc/PID/stat's start times count them. */
static uint64_t boot_ticks(void)
{
	struct timespec ts;
	long hz = sysconf(_SC_CLK_TCK);
	if (clock_gettime(CLOCK_BOOTTIME, &ts) != 0 || hz <= 0)
		return 0;
	return (uint64_t)ts.tv_sec * (uint64_t)hz + (uint64_t)ts.tv_nsec / (1000000000ull / (uint64_t)hz);
}

/* After lost side-band records (or before the sampler ran): the JVMs that started
 * since the watch began and that it has not heard of, from /proc, once. */
static void watch_rescan(struct record_jvm_watch *wt, const struct vp_record_opts *o, uint64_t now, bool first)
{
	DIR *d = opendir("/proc");
	if (!d)
		return;
	pid_t self = getpid();
	struct dirent *de;
	wt->rescans++;
	while ((de = readdir(d))) {
		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		pid_t pid = (pid_t)atoi(de->d_name);
		if (pid == self || watch_find(wt, pid))
			continue;
		uint64_t st = proc_start(pid);
		/* One tick of slack: a JVM started in the tick the watch began is looked at.
		 * At the first look, also a JVM older than that whose signal dispatcher did not
		 * run yet: too early for the start's attach. And a pid --jvm-attach names that
		 * the start's attach did not find a JVM (watch_find: those it did are noted
		 * when the watch begins): a process older than the watch that exec'd java
		 * after that look, before the side band could tell (a shell's `exec java`
		 * while a loaded VM starts the sampler: test-serve-jvm-early in a CI run). */
		if (st && (st + 1 >= wt->since_ticks || (first && !catches_sigquit(pid)) || listed_pid(o, pid)) &&
		    vp_jvm__is_hotspot(pid)) {
			struct record_jvm_watch_pid *e = watch_add(wt, pid, now);
			if (e)
				e->start = st;
		}
	}
	closedir(d);
}

int record_jvm__watch(struct record_jvm_watch *wt, struct vp_session_writer *w, struct record_jvm_lock *l,
		      const char *agent, const struct vp_record_opts *o, uint64_t now)
{
	if (now < wt->next_ns)
		return 0;
	wt->next_ns = now + 1000000000ull;
	if (!wt->primed) {
		/* What runs now is the start's attach's. JVMs that start from here are heard
		 * of through the side band (their libjvm.so mapped); the one look at /proc
		 * at the next pass covers those started before the sampler ran. */
		wt->primed = true;
		wt->since_ticks = boot_ticks();
		wt->rescan = true;
		wt->n = 0;
		/* The named pids that are JVMs ready for an attach now were the start's
		 * attach's (attached or refused then): the look at /proc leaves them alone.
		 * One still too young for it is looked at again, as before. */
		for (int i = 0; o->jvm_attach == RECORD_JVM_PIDS && i < o->jvm_n; i++) {
			uint64_t st = proc_start(o->jvm_pids[i]);
			struct record_jvm_watch_pid *e;

			if (st && vp_jvm__is_hotspot(o->jvm_pids[i]) && catches_sigquit(o->jvm_pids[i]) &&
			    (e = watch_add(wt, o->jvm_pids[i], now))) {
				e->start = st;
				e->state = W_DONE;
			}
		}
		return 0;
	}
	if (wt->rescan) {
		watch_rescan(wt, o, now, wt->rescans == 0);
		wt->rescan = false;
	}
	int loaded = 0, err = 0;
	size_t keep = 0;
	for (size_t i = 0; i < wt->n; i++) {
		struct record_jvm_watch_pid *e = &wt->v[i];
		uint64_t st = proc_start(e->pid);
		if (!st)
			continue;   /* gone */
		if (!e->start)
			e->start = st;
		if (st != e->start) {
			if (!e->renoted)
				continue;   /* the pid went to another process, which mapped no libjvm.so */
			*e = (struct record_jvm_watch_pid){ .pid = e->pid, .start = st, .first_ns = now, .state = W_NEW };
		}
		e->renoted = false;
		if (e->state == W_NEW && !err) {
			if (now - e->first_ns > RECORD_JVM_WATCH_S * 1000000000ull) {
				e->state = W_DONE;
			} else if (catches_sigquit(e->pid)) {
				/* Decided once: a JVM catches SIGQUIT from when its signal dispatcher
				 * runs (its VM Thread exists by then). */
				e->state = W_DONE;
				if (vp_jvm__is_hotspot(e->pid) && !has_own_agent(e->pid) &&
				    allowed(o, e->pid, owner(e->pid))) {
					int r = attach_one(w, l, e->pid, agent, o->log ? o->log : stderr, FP_WALK(o), o);
					if (r < 0)
						err = r;
					else
						loaded += r;
				}
			}
		}
		wt->v[keep++] = *e;
	}
	wt->n = keep;
	return err ? err : loaded;
}

void record_jvm__watch_free(struct record_jvm_watch *wt)
{
	free(wt->v);
	*wt = (struct record_jvm_watch){ 0 };
}
