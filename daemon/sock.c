/* The service's Unix socket: see sock.h. */
#define _GNU_SOURCE
#include "daemon/sock.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <linux/kcmp.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/safefs.h"
#include "common/userns.h"
#include "common/util.h"
#include "recorder/recorder.h"
#include "hv-glue/events.h"
#include "common/session_format.h"
#include "daemon/sock_proto.h"

#define MAX_USERS 256
#define MAX_CONNS 64               /* all users together */
#define REQUEST_TIMEOUT_S 5        /* to send the request after connecting */
#define STATUS_INTERVAL_NS (500ull * 1000000)
#define SEND_TIMEOUT_S 1
#define VP_SOCK_COUNT_BOUND 20000000000ull   /* events a second assumed of a non-clock event */           /* a client that reads nothing for this long is gone */
#define STREAM_PIPE_BYTES (1 << 20)
#ifdef SO_PASSRIGHTS
#define VP_SO_PASSRIGHTS SO_PASSRIGHTS
#else
#define VP_SO_PASSRIGHTS 83   /* asm-generic/socket.h, Linux 6.16 */
#endif
#ifdef SO_PEERPIDFD
#define VP_SO_PEERPIDFD SO_PEERPIDFD
#else
#define VP_SO_PEERPIDFD 77    /* asm-generic/socket.h, Linux 6.5 */
#endif

/* Whom the limits count: the user who owns the peer's user namespace, so that one
 * user's subordinate uids share that user's limits (common/userns.h). */
struct user {
	uid_t uid;                 /* the accountable uid (vp_userns__accountable) */
	unsigned sessions;         /* connections past the checks, recording */
	unsigned conns;            /* all open connections */
	double tokens;             /* the request bucket: requests_per_min, refilled per second */
	uint64_t refilled;
};

struct vp_sock {
	struct vp_sock_opts o;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int lfd;
	pthread_t acceptor;
	bool acceptor_started;
	volatile bool stopping;
	pthread_mutex_t mu;
	pthread_cond_t idle;       /* signalled when a connection ends */
	unsigned nconns;
	struct user users[MAX_USERS];
	int nusers;
};

struct conn {
	struct vp_sock *s;
	int fd;
	struct ucred cred;
	uid_t owner;               /* whom the limits count: u->uid */
	struct user *u;            /* s->users entry; under s->mu */
	bool gone;                 /* a send failed or timed out: nothing more is sent */
	int pidfds[RECORD_MAX_PIDS + 1];   /* the checked processes, held from check to start */
	pid_t pidfd_pid[RECORD_MAX_PIDS + 1];
	int npidfds;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* One audit line per request: who, what, the result. */
static void audit(struct vp_sock *s, const struct ucred *c, uid_t owner, const char *what, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
static void audit(struct vp_sock *s, const struct ucred *c, uid_t owner, const char *what, const char *fmt, ...)
{
	char res[1024], line[2600], safe[sizeof(line) * 4];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(res, sizeof(res), fmt, ap);
	va_end(ap);
	/* What and the result carry the client's bytes (its directory's name, events,
	 * command): control characters are escaped, so that a client can neither end the
	 * line nor redraw a terminal to forge another one. */
	snprintf(line, sizeof(line), "%s -> %s", what, res);
	vp_escape_controls(line, safe, sizeof(safe));
	char of[48] = "";
	if (owner != c->uid)
		snprintf(of, sizeof(of), " owner=%u", (unsigned)owner);
	fprintf(s->o.log, "viprof serve: audit uid=%u%s pid=%d %s\n", (unsigned)c->uid, of, (int)c->pid, safe);
	fflush(s->o.log);
}

static int sendf(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int sendf(int fd, const char *fmt, ...)
{
	char buf[2048];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0)
		return -EINVAL;
	return vp_sock__send(fd, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1, -1);
}

/* To a connection's client: once a send fails or times out (SO_SNDTIMEO: a client
 * that reads nothing), the client counts as gone and nothing more is sent, so that a
 * client can never hold up the thread that drives its recording. */
static int csend(struct conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int csend(struct conn *c, const char *fmt, ...)
{
	char buf[2048];
	va_list ap;
	if (c->gone)
		return -EPIPE;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0)
		return -EINVAL;
	int e = vp_sock__send(c->fd, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1, -1);
	if (e)
		c->gone = true;
	return e;
}

/* The user's entry, made on first use; NULL when the table is full. Under s->mu. */
static struct user *user_of(struct vp_sock *s, uid_t uid)
{
	for (int i = 0; i < s->nusers; i++)
		if (s->users[i].uid == uid)
			return &s->users[i];
	/* Reuse an idle entry before growing. */
	for (int i = 0; i < s->nusers; i++) {
		struct user *u = &s->users[i];
		if (!u->conns && u->tokens >= s->o.limits.requests_per_min) {
			*u = (struct user){ .uid = uid, .tokens = s->o.limits.requests_per_min, .refilled = mono_ns() };
			return u;
		}
	}
	if (s->nusers == MAX_USERS)
		return NULL;
	struct user *u = &s->users[s->nusers++];
	*u = (struct user){ .uid = uid, .tokens = s->o.limits.requests_per_min, .refilled = mono_ns() };
	return u;
}

static void refill(const struct vp_sock *s, struct user *u)
{
	uint64_t now = mono_ns();
	double per_ns = s->o.limits.requests_per_min / 60e9;
	u->tokens += (double)(now - u->refilled) * per_ns;
	if (u->tokens > s->o.limits.requests_per_min)
		u->tokens = s->o.limits.requests_per_min;
	u->refilled = now;
}

/* The readable first pass of the check (kernel_may_read below decides): the same real,
 * effective and saved uid and gid, with a message that names whose process it is.
 * parent > 0: pid must also be a child of parent (a command the client launched). 0,
 * or -EPERM/-ESRCH with the one-line reason in why. */
static int may_trace(uid_t uid, gid_t gid, pid_t pid, pid_t parent, char *why, size_t len)
{
	char path[64], line[256];
	unsigned ids[2][4] = { { 0 } };
	int have = 0, ppid = -1;
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	if (pid <= 0 || stat(path, &st) != 0) {
		vp_err_no_process(why, len, (long)pid);
		return -ESRCH;
	}
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "Uid: %u %u %u %u", &ids[0][0], &ids[0][1], &ids[0][2], &ids[0][3]) == 4)
			have |= 1;
		else if (sscanf(line, "Gid: %u %u %u %u", &ids[1][0], &ids[1][1], &ids[1][2], &ids[1][3]) == 4)
			have |= 2;
		else
			sscanf(line, "PPid: %d", &ppid);
	}
	if (f)
		fclose(f);
	if (have != 3) {
		vp_err_no_process(why, len, (long)pid);
		return -ESRCH;
	}
	if (parent > 0 && ppid != parent) {
		vp_set_err(why, len, "process %d is not a child of the requesting client (pid %d)", (int)pid, (int)parent);
		return -EPERM;
	}
	if (uid == 0)
		return 0;
	for (int i = 0; i < 3; i++) {
		if (ids[0][i] != uid) {
			struct passwd pw, *pwp = NULL;
			char pbuf[1024];
			getpwuid_r(ids[0][i], &pw, pbuf, sizeof(pbuf), &pwp);
			vp_set_err(why, len, "process %d belongs to uid %u (%s), not to you (uid %u); you may record "
				   "only your own processes", (int)pid, ids[0][i], pwp ? pwp->pw_name : "?", (unsigned)uid);
			return -EPERM;
		}
	}
	for (int i = 0; i < 3; i++) {
		if (ids[1][i] != gid) {
			vp_set_err(why, len, "process %d runs with group %u, not yours (gid %u): set-gid, and the kernel "
				   "would not let you trace it", (int)pid, ids[1][i], (unsigned)gid);
			return -EPERM;
		}
	}
	if (st.st_uid != uid) {
		vp_set_err(why, len, "process %d is not dumpable (set-uid, or prctl PR_SET_DUMPABLE 0): the kernel "
			   "would not let you trace it", (int)pid);
		return -EPERM;
	}
	return 0;
}

/* Whether the kernel itself lets uid:gid read pid the way perf_event_open asks
 * (ptrace's PTRACE_MODE_READ_REALCREDS: the same uids and gids, a dumpable process, no
 * capability over it). A child becomes that user, with no groups and no capabilities,
 * and compares its memory with pid's (kcmp(2) makes exactly that check on both; where
 * kcmp is missing, opening /proc/PID/environ makes the same check on its fs ids).
 * The child runs as the user, so the user may signal it: one stopped (SIGSTOP) or
 * slow past CHECK_TIMEOUT_MS is killed and the answer is -ETIMEDOUT, so that no user
 * holds a connection thread, or the service's stop, for as long as they like. It
 * closes every descriptor it inherited and makes itself non-dumpable before it drops
 * root, so that even where fs.suid_dumpable lets users trace such a child, there is
 * nothing of root's in it to reach.
 * 0 allowed, -EPERM refused, -ESRCH gone, another -errno when it cannot tell. */
#define CHECK_TIMEOUT_MS 2000
static int kernel_may_read(uid_t uid, gid_t gid, pid_t pid)
{
	char environ[64];
	int st;

	snprintf(environ, sizeof(environ), "/proc/%d/environ", (int)pid);
	pid_t child = fork();
	if (child < 0)
		return -errno;
	if (child == 0) {
		/* Only system calls from here on: the service has other threads. */
		if ((syscall(SYS_close_range, 0u, ~0u, 0u) && errno != ENOSYS) ||
		    syscall(SYS_prctl, PR_SET_DUMPABLE, 0, 0, 0, 0) ||
		    syscall(SYS_setgroups, 0, NULL) || syscall(SYS_setresgid, gid, gid, gid) ||
		    syscall(SYS_setresuid, uid, uid, uid) || syscall(SYS_prctl, PR_SET_DUMPABLE, 0, 0, 0, 0))
			_exit(10);
		long r = syscall(SYS_kcmp, (pid_t)syscall(SYS_getpid), pid, KCMP_VM, 0, 0);
		if (r < 0 && errno == ENOSYS) {
			r = syscall(SYS_openat, AT_FDCWD, environ, O_RDONLY | O_CLOEXEC);
			if (r >= 0 || errno == ENOENT)
				_exit(r >= 0 ? 0 : 2);
		}
		_exit(r >= 0 ? 0 : errno == EPERM || errno == EACCES ? 1 : errno == ESRCH ? 2 : 3);
	}
	uint64_t deadline = mono_ns() + CHECK_TIMEOUT_MS * 1000000ull;
	for (;;) {
		pid_t w = waitpid(child, &st, WNOHANG);
		if (w == child)
			break;
		if (w < 0 && errno != EINTR)
			return -errno;
		if (mono_ns() >= deadline) {
			kill(child, SIGKILL);
			while (waitpid(child, &st, 0) < 0 && errno == EINTR)
				;
			return -ETIMEDOUT;
		}
		usleep(1000);
	}
	if (!WIFEXITED(st))
		return -EINTR;
	switch (WEXITSTATUS(st)) {
	case 0: return 0;
	case 1: return -EPERM;
	case 2: return -ESRCH;
	default: return -EIO;
	}
}

/* Takes hold of pid (a pidfd) and asks the kernel whether the caller may read it:
 * the hold is what makes the later open mean the process that was checked (a pid can
 * be reused once its process is gone and reaped; see confirm_held). 0 or -errno with
 * the one-line reason. */
static int check_and_hold(struct conn *c, pid_t pid, pid_t parent, char *why, size_t len)
{
	int e;
	if (c->npidfds >= (int)(sizeof(c->pidfds) / sizeof(c->pidfds[0]))) {
		vp_set_err(why, len, "too many processes in one request");
		return -E2BIG;
	}
	int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pfd < 0) {
		vp_err_no_process(why, len, (long)pid);
		return -ESRCH;
	}
	c->pidfds[c->npidfds] = pfd;
	c->pidfd_pid[c->npidfds++] = pid;
	if ((e = may_trace(c->cred.uid, c->cred.gid, pid, parent, why, len)))
		return e;
	if (c->cred.uid == 0)
		return 0;
	e = kernel_may_read(c->cred.uid, c->cred.gid, pid);
	if (e == -ESRCH) {
		vp_err_no_process(why, len, (long)pid);
	} else if (e == -EPERM) {
		vp_set_err(why, len, "process %d is not dumpable (set-uid, or prctl PR_SET_DUMPABLE 0) or otherwise "
			   "protected: the kernel would not let you trace it, so neither does the service", (int)pid);
	} else if (e == -ETIMEDOUT) {
		vp_set_err(why, len, "the check whether you may trace process %d did not finish within %d s (its "
			   "process runs as you: was it stopped?); try again", (int)pid, CHECK_TIMEOUT_MS / 1000);
	} else if (e) {
		vp_set_err(why, len, "cannot ask the kernel whether you may trace process %d (%s); try again",
			   (int)pid, strerror(-e));
	}
	return e;
}

/* After the start: each checked process is still the one that was checked, and
 * still the user's to read. A process that exited is fine (the recording sees it
 * gone), unless its pid is in use again: then what was opened by pid may be another
 * process. 0, or -EAGAIN/-EPERM with the reason. */
static int confirm_held(struct conn *c, char *why, size_t len)
{
	for (int i = 0; i < c->npidfds; i++) {
		struct pollfd p = { .fd = c->pidfds[i], .events = POLLIN };
		char path[32];
		if (poll(&p, 1, 0) <= 0) {
			/* Still running, so still the same process; and still the user's to
			 * read: the start read its mappings, and it could have run a set-uid
			 * program since the check (later ones the sampler sees itself). */
			int e = c->cred.uid ? kernel_may_read(c->cred.uid, c->cred.gid, c->pidfd_pid[i]) : 0;
			if (e && e != -ESRCH) {
				vp_set_err(why, len, "process %d stopped being yours to trace while the recording started "
					   "(it ran a set-uid program, or made itself non-dumpable)", (int)c->pidfd_pid[i]);
				return -EPERM;
			}
			continue;
		}
		snprintf(path, sizeof(path), "/proc/%d", (int)c->pidfd_pid[i]);
		if (access(path, F_OK) == 0) {
			vp_set_err(why, len, "process %d exited while the recording started and its pid is in use again; "
				   "try again", (int)c->pidfd_pid[i]);
			return -EAGAIN;
		}
	}
	return 0;
}

/* Checks the request against who asks and the limits. 0, or -errno with the one-line
 * reason (to the client and the audit line). */
static int authorize(struct conn *c, struct vp_record_opts *o, char *why, size_t len)
{
	const struct vp_sock_limits *l = &c->s->o.limits;
	uid_t uid = c->cred.uid;
	int e;

	if (o->target == RECORD_TARGET_ALL && uid != 0) {
		vp_set_err(why, len, "-a records every user's processes; only root may ask for it (record your own "
			   "with -p PID or -- CMD)");
		return -EPERM;
	}
	for (int i = 0; o->target == RECORD_TARGET_PIDS && i < o->npids; i++)
		if ((e = check_and_hold(c, o->pids[i], 0, why, len)))
			return e;
	if (o->target == RECORD_TARGET_LAUNCH && (e = check_and_hold(c, o->launched, c->cred.pid, why, len)))
		return e;
	if (uid == 0)
		return 0;   /* root is limited by nothing but the kernel */
	/* Every event's rate is capped: -F, -c, and an event's own freq=/period= terms.
	 * A clock's period is nanoseconds, so its rate is exact; any other event counts
	 * at a rate the service cannot know in advance, so its fixed period is taken
	 * as if it counted VP_SOCK_COUNT_BOUND a second (a core's cycles, generously):
	 * such a user asks with -F instead. */
	struct sampler_event ev[VP_MAX_EVENTS];
	char perr[256];
	int nev = o->events ? vp_events__parse(o->events, ev, VP_MAX_EVENTS, perr, sizeof(perr)) : 0;
	if (nev <= 0) {
		nev = vp_events__default(ev, perr, sizeof(perr)) == 0 ? 1 : 0;
		if (!nev) {
			ev[0] = (struct sampler_event){ .type = PERF_TYPE_SOFTWARE, .config = PERF_COUNT_SW_CPU_CLOCK,
							.software = true };
			snprintf(ev[0].name, sizeof(ev[0].name), "cpu-clock");
			nev = 1;
		}
		ev[0].freq = ev[0].period = 0;
	}
	uint64_t total = 0;
	for (int i = 0; i < nev; i++) {
		uint64_t period = ev[i].period ? ev[i].period : ev[i].freq ? 0 : o->period;
		uint64_t freq = ev[i].freq ? ev[i].freq : period ? 0 : o->freq;
		bool clock = ev[i].type == PERF_TYPE_SOFTWARE &&
			     (ev[i].config == PERF_COUNT_SW_CPU_CLOCK || ev[i].config == PERF_COUNT_SW_TASK_CLOCK);
		uint64_t hz = freq ? freq : !period ? 0 : (clock ? 1000000000ull : VP_SOCK_COUNT_BOUND) / period;
		if (hz > l->max_freq) {
			vp_set_err(why, len, "%s (%s %llu) %s %llu times a second, over this service's limit of %llu Hz per "
				   "user; ask for less%s (or the administrator raises viprof serve --max-freq)", ev[i].name,
				   freq ? "freq" : "period", (unsigned long long)(freq ? freq : period),
				   clock || freq ? "samples" : "could sample up to", (unsigned long long)hz,
				   (unsigned long long)l->max_freq, clock || freq ? "" : ", or give a rate with -F");
			return -EPERM;
		}
		total += hz;
	}
	/* The limit is the user's, not each event's: events sample side by side. */
	if (total > l->max_freq) {
		vp_set_err(why, len, "the %d events together sample up to %llu times a second, over this service's limit "
			   "of %llu Hz per user; ask for less with -F (each event's rate adds up)", nev,
			   (unsigned long long)total, (unsigned long long)l->max_freq);
		return -EPERM;
	}
	if (o->duration > l->max_seconds) {
		vp_set_err(why, len, "-d %.0f is over this service's limit of %.0f s per recording; ask for less (or the "
			   "administrator raises viprof serve --max-seconds)", o->duration, l->max_seconds);
		return -EPERM;
	}
	if (o->backend && !strcmp(o->backend, "perf"))
		o->backend = "auto";   /* the service has the better backend; the data is the same */
	return 0;
}

/* Sends what the recorder wrote to its log since the last call, a line per LOG. */
static void forward_log(struct conn *c, FILE *log, char **buf, size_t *sent)
{
	fflush(log);
	while (*buf && (*buf)[*sent]) {
		char *start = *buf + *sent, *nl = strchr(start, '\n');
		if (!nl)
			break;
		csend(c, "LOG %.*s", (int)(nl - start), start);
		*sent += (size_t)(nl - start) + 1;
	}
}

/* The client said STOP (its command is done: *status its wait status, or -1) or went
 * away. 1 STOP, 0 nothing yet, -1 gone. */
/* Whether the client's end of the connection is closed (it exited or was killed). */
static bool client_hung_up(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLRDHUP };
	return poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR));
}

static int client_message(int fd, int *status)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char buf[256];
	if (poll(&p, 1, 0) <= 0)
		return 0;
	ssize_t n = vp_sock__recv(fd, buf, sizeof(buf), NULL);
	if (n <= 0)
		return -1;
	if (sscanf(buf, "STOP %d", status) == 1)
		return 1;
	return 0;   /* unknown: ignored */
}

/* A pipe for one session file: the write end (non-blocking, so that a client that
 * stops reading costs its own recording at most VP_WRITE_STALL_MS, never the
 * service) in w, the read end for the client in r. 0 or -errno. */
static int session_pipe(int *w, int *r, int bytes)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC))
		return -errno;
	if (fcntl(p[1], F_SETFL, O_NONBLOCK)) {
		int e = -errno;
		close(p[0]);
		close(p[1]);
		return e;
	}
	if (bytes)
		fcntl(p[1], F_SETPIPE_SZ, bytes);   /* best effort: the default is 64 KiB */
	*r = p[0];
	*w = p[1];
	return 0;
}

static void describe(const struct vp_record_opts *o, char *buf, size_t len)
{
	char target[300] = "all";
	size_t off = 0;
	if (o->target == RECORD_TARGET_LAUNCH)
		snprintf(target, sizeof(target), "launch:%d", (int)o->launched);
	else if (o->target == RECORD_TARGET_PIDS)
		for (int i = 0; i < o->npids && off < sizeof(target); i++)
			off += (size_t)snprintf(target + off, sizeof(target) - off, "%s%d", i ? "," : "pids:", (int)o->pids[i]);
	snprintf(buf, len, "record target=%s events=%s freq=%llu duration=%.0f dir=%s", target,
		 o->events ? o->events : "default", (unsigned long long)o->freq, o->duration,
		 o->output ? o->output : "?");
}

/* The request, within REQUEST_TIMEOUT_S, waited for in slices so that a client that
 * connects and says nothing does not hold the service's stop. Its length, or -errno, 0 closed;
 * a descriptor it carries in *passed. */
static ssize_t read_request(struct conn *c, char *req, size_t len, int *passed)
{
	struct timeval tv = { .tv_sec = REQUEST_TIMEOUT_S };
	setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	tv.tv_sec = SEND_TIMEOUT_S;
	setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	ssize_t n = -ETIMEDOUT;
	for (uint64_t until = mono_ns() + REQUEST_TIMEOUT_S * 1000000000ull; !c->s->stopping && mono_ns() < until;) {
		struct pollfd p = { .fd = c->fd, .events = POLLIN };
		if (poll(&p, 1, 200) > 0) {
			n = vp_sock__recv(c->fd, req, len, passed);
			break;
		}
	}
	return n;
}

/* Counts the session against its user's limit (root has none): false when the user is at it. */
static bool count_session(struct conn *c)
{
	struct vp_sock *s = c->s;
	pthread_mutex_lock(&s->mu);
	bool over = c->cred.uid != 0 && c->u->sessions >= s->o.limits.sessions;
	if (!over)
		c->u->sessions++;
	pthread_mutex_unlock(&s->mu);
	return !over;
}

/* What the service does for an authorized request, narrowed to what the user may have. */
static void narrow_request(const struct conn *c, struct vp_record_opts *o, struct vp_recorder_owner *owner,
			   const struct vp_sock_jvm *jvms, int njvms)
{
	/* Unprivileged users get what the kernel would give them: kernel samples and the
	 * kernel's symbols (which root reads) only where the kernel shows a user kernel
	 * addresses itself, as /proc/kallsyms decides (kallsyms_show_value: kptr_restrict 0
	 * and perf_event_paranoid <= 1); with kptr_restrict 1 the kernel would sample a
	 * user's kernel frames but hide its symbol addresses from them. */
	if (c->cred.uid != 0 && (vp_read_int_file("/proc/sys/kernel/perf_event_paranoid", 2) >= 2 ||
				 vp_read_int_file("/proc/sys/kernel/kptr_restrict", 1) != 0))
		o->user_only = true;
	if (c->cred.uid != 0 && o->duration <= 0)
		o->duration = c->s->o.limits.max_seconds;
	/* The client attached its JVMs itself, as the user; the service attaches none. */
	o->agent = NULL;
	o->no_jit = true;
	o->force = false;
	for (int i = 0; i < njvms; i++) {
		owner->jvms[i].pid = jvms[i].pid;
		owner->jvms[i].flags = jvms[i].flags;
	}
	owner->njvms = njvms;
}

/* Runs the recording until it ends, the client says STOP (its wait status in *status) or goes,
 * or the service stops, forwarding the recorder's log and STATUS news. What ended it, for the
 * audit; a failure's cause in detail. */
static const char *watch_recording(struct conn *c, struct vp_recorder *rec, FILE *log, char **logbuf, size_t *logsent,
				   int *status, char *detail, size_t dlen)
{
	struct vp_sock *s = c->s;
	struct vp_recorder_stats st;
	uint64_t last_status = mono_ns();
	const char *result = "ok";
	for (;;) {
		if (c->gone) {
			result = "client gone";
			break;
		}
		int r = vp_recorder__poll(rec, 100);
		forward_log(c, log, logbuf, logsent);
		if (r < 0 && client_hung_up(c->fd)) {
			/* The stream's pipe broke because its reader, the client, is gone. */
			result = "client gone";
			break;
		}
		if (r < 0) {
			csend(c, "LOG viprof record: %s", vp_recorder__error(rec));
			result = "failed";
			snprintf(detail, dlen, "%s; ", vp_recorder__error(rec));
			break;
		}
		if (r == 0)
			break;
		int m = client_message(c->fd, status);
		if (m < 0) {
			result = "client gone";
			break;
		}
		if (m > 0)
			break;
		if (s->stopping) {
			csend(c, "LOG viprof record: the service is stopping; the recording ends here");
			result = "service stopping";
			break;
		}
		uint64_t now = mono_ns();
		vp_recorder__stats(rec, &st);
		if (c->cred.uid != 0 && st.stream_bytes > s->o.limits.max_bytes) {
			csend(c, "LOG viprof record: the session reached this service's limit of %llu bytes; stopped",
			      (unsigned long long)s->o.limits.max_bytes);
			result = "byte limit";
			break;
		}
		if (now - last_status >= STATUS_INTERVAL_NS) {
			/* Only news: dropped, not waited for, when the client reads nothing. */
			char msg[128];
			int k = snprintf(msg, sizeof(msg), "STATUS %llu %llu %llu", (unsigned long long)st.samples,
					 (unsigned long long)st.lost, (unsigned long long)st.elapsed_ns);
			if (send(c->fd, msg, (size_t)k, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && errno != EAGAIN)
				c->gone = true;
			last_status = now;
		}
	}
	return result;
}

static void serve_conn(struct conn *c)
{
	struct vp_sock *s = c->s;
	char req[VP_SOCK_MAX_MSG], why[1024] = "", what[1400] = "record (no request)";
	char *cmdv[2], *logbuf = NULL;
	size_t logsize = 0, logsent = 0;
	struct vp_record_opts o;
	struct vp_recorder *rec = NULL;
	struct vp_recorder_stats st;
	struct vp_recorder_owner owner = { .uid = c->cred.uid, .gid = c->cred.gid, .stream_fd = -1, .meta_fd = -1 };
	struct vp_sock_jvm jvms[RECORD_MAX_PIDS];
	FILE *log = NULL;
	int passed = -1, e, status = -1, njvms = 0, stream_r = -1, meta_r = -1;
	bool counted = false;

	ssize_t n = read_request(c, req, sizeof(req), &passed);
	if (n <= 0) {
		audit(s, &c->cred, c->owner, what, "client gone before its request (%s)", n < 0 ? strerror((int)-n) : "closed");
		goto out;
	}
	struct timeval tv = { .tv_sec = 0 };
	setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (vp_sock__decode_request(req, &o, cmdv, jvms, &njvms, why, sizeof(why))) {
		csend(c, "ERR 2 %s", why);
		audit(s, &c->cred, c->owner, what, "refused: %s", why);
		goto out;
	}
	describe(&o, what, sizeof(what));
	if (passed >= 0) {
		/* Root writes nothing through a descriptor a user hands it: the user's client
		 * stores the session itself. A client that passes one is another version. */
		snprintf(why, sizeof(why), "the request carries a file descriptor, which this service never takes (the "
			 "session is written by your own viprof); use the viprof that matches this service");
		csend(c, "ERR 2 %s", why);
		audit(s, &c->cred, c->owner, what, "refused: %s", why);
		goto out;
	}
	if ((e = authorize(c, &o, why, sizeof(why)))) {
		csend(c, "ERR 1 %s", why);
		audit(s, &c->cred, c->owner, what, "refused: %s", why);
		goto out;
	}
	counted = count_session(c);
	if (!counted) {
		snprintf(why, sizeof(why), "you (uid %u%s) already have %u recordings running, this service's limit "
			 "per user (your subordinate uids count as you); wait for one to end", (unsigned)c->owner,
			 c->owner != c->cred.uid ? ", the owner of this subordinate uid" : "", s->o.limits.sessions);
		csend(c, "ERR 1 %s", why);
		audit(s, &c->cred, c->owner, what, "refused: %s", why);
		goto out;
	}
	narrow_request(c, &o, &owner, jvms, njvms);
	if ((e = session_pipe(&owner.stream_fd, &stream_r, STREAM_PIPE_BYTES)) ||
	    (e = session_pipe(&owner.meta_fd, &meta_r, 0))) {
		if (owner.stream_fd >= 0)
			close(owner.stream_fd);
		snprintf(why, sizeof(why), "the service cannot make a pipe for the session (%s); try again later", strerror(-e));
		csend(c, "ERR 1 %s", why);
		audit(s, &c->cred, c->owner, what, "failed: %s", why);
		goto out;
	}
	log = open_memstream(&logbuf, &logsize);
	o.log = log;
	rec = vp_recorder__start_owned(&o, &owner, why, sizeof(why));
	if (log)
		forward_log(c, log, &logbuf, &logsent);
	if (rec && confirm_held(c, why, sizeof(why))) {
		vp_recorder__stop(rec);
		vp_recorder__free(rec);
		rec = NULL;
		errno = EAGAIN;
	}
	if (!rec) {
		e = errno;
		csend(c, "ERR %d %s", e == EINVAL ? 2 : 1, why);
		audit(s, &c->cred, c->owner, what, "failed: %s", why);
		goto out;
	}
	/* Sampling runs: the client gets the session's files to store, then the go. */
	if (vp_sock__send(c->fd, "FILE " VP_SESSION_STREAM, strlen("FILE " VP_SESSION_STREAM), stream_r) ||
	    vp_sock__send(c->fd, "FILE " VP_SESSION_META_JSON, strlen("FILE " VP_SESSION_META_JSON), meta_r))
		c->gone = true;
	close(stream_r);
	close(meta_r);
	stream_r = meta_r = -1;
	csend(c, "STARTED %s", vp_recorder__backend(rec));
	char detail[600] = "";
	const char *result = watch_recording(c, rec, log, &logbuf, &logsent, &status, detail, sizeof(detail));
	if (status >= 0)
		vp_recorder__set_exit_status(rec, status);
	e = vp_recorder__stop(rec);
	forward_log(c, log, &logbuf, &logsent);
	vp_recorder__stats(rec, &st);
	csend(c, "DONE %llu %llu %llu %llu %d", (unsigned long long)st.samples, (unsigned long long)st.lost,
	      (unsigned long long)st.elapsed_ns, (unsigned long long)st.disk_bytes, e < 0 ? 1 : 0);
	audit(s, &c->cred, c->owner, what, "%s: %s%llu samples (%llu lost) in %.1f s, %llu bytes", e < 0 && !strcmp(result, "ok") ? "failed" : result,
	      detail, (unsigned long long)st.samples, (unsigned long long)st.lost, (double)st.elapsed_ns / 1e9,
	      (unsigned long long)st.disk_bytes);
out:
	vp_recorder__free(rec);
	if (log)
		fclose(log);
	free(logbuf);
	if (passed >= 0)
		close(passed);
	if (stream_r >= 0)
		close(stream_r);
	if (meta_r >= 0)
		close(meta_r);
	for (int i = 0; i < c->npidfds; i++)
		close(c->pidfds[i]);
	pthread_mutex_lock(&s->mu);
	if (counted)
		c->u->sessions--;
	c->u->conns--;
	s->nconns--;
	pthread_cond_broadcast(&s->idle);
	pthread_mutex_unlock(&s->mu);
	close(c->fd);
	free(c);
}

static void *conn_thread(void *arg)
{
	serve_conn(arg);
	return NULL;
}

/* Accepts, identifies, and lets in or refuses at once: a user who floods the socket
 * spends their own request budget and connection slots, and the acceptor never waits
 * on anyone, so the others are served. */
static void *accept_thread(void *arg)
{
	struct vp_sock *s = arg;
	while (!s->stopping) {
		struct pollfd p = { .fd = s->lfd, .events = POLLIN };
		if (poll(&p, 1, 200) <= 0)
			continue;
		int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		struct ucred cred;
		socklen_t cl = sizeof(cred);
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0) {
			close(fd);
			continue;
		}
		/* Counted against the owner of the peer's user namespace: asked of the
		 * process that connected, held by the pidfd the kernel took at connect (a
		 * pid alone could name another process by now). */
		int pidfd = -1;
		socklen_t pl = sizeof(pidfd);
		if (getsockopt(fd, SOL_SOCKET, VP_SO_PEERPIDFD, &pidfd, &pl) != 0)
			pidfd = -1;
		uid_t owner = vp_userns__accountable(cred.uid, pidfd);
		if (pidfd >= 0)
			close(pidfd);
		char why[300] = "", you[96];
		if (owner != cred.uid)
			snprintf(you, sizeof(you), "you (uid %u, a subordinate uid counted as its owner uid %u)",
				 (unsigned)cred.uid, (unsigned)owner);
		else
			snprintf(you, sizeof(you), "you (uid %u)", (unsigned)cred.uid);
		pthread_mutex_lock(&s->mu);
		struct user *u = user_of(s, owner);
		if (!u) {
			snprintf(why, sizeof(why), "the service is serving too many users at once; try again later");
		} else if (cred.uid != 0) {
			refill(s, u);
			if (u->tokens < 1)
				snprintf(why, sizeof(why), "%s sent more than %u requests in the last minute, this "
					 "service's limit per user; try again later", you, s->o.limits.requests_per_min);
			else if (u->conns >= s->o.limits.sessions + 2)
				snprintf(why, sizeof(why), "%s have %u connections open, this service's limit per "
					 "user; wait for one to end", you, u->conns);
			else
				u->tokens -= 1;
		}
		if (!why[0] && s->nconns >= MAX_CONNS)
			snprintf(why, sizeof(why), "the service has %u recordings open, its limit; try again later", s->nconns);
		if (!why[0]) {
			u->conns++;
			s->nconns++;
		}
		pthread_mutex_unlock(&s->mu);
		if (why[0]) {
			sendf(fd, "ERR 1 %s", why);
			audit(s, &cred, owner, "connect", "refused: %s", why);
			close(fd);
			continue;
		}
		struct conn *c = calloc(1, sizeof(*c));
		pthread_t t;
		pthread_attr_t at;
		pthread_attr_init(&at);
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		if (c) {
			*c = (struct conn){ .s = s, .fd = fd, .cred = cred, .owner = owner, .u = u };
		}
		/* Admitted: the client may now prepare its directory and command. */
		if (!c || vp_sock__send(fd, "READY", 5, -1) != 0 || pthread_create(&t, &at, conn_thread, c) != 0) {
			sendf(fd, "ERR 1 the service cannot start a thread for the request (%s); try again later",
			      strerror(c ? errno : ENOMEM));
			free(c);
			close(fd);
			pthread_mutex_lock(&s->mu);
			u->conns--;
			s->nconns--;
			pthread_mutex_unlock(&s->mu);
		}
		pthread_attr_destroy(&at);
	}
	return NULL;
}

struct vp_sock *vp_sock__start(const struct vp_sock_opts *o, char *err, size_t errlen)
{
	struct vp_sock *s = calloc(1, sizeof(*s));
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int e;

	if (!s) {
		vp_set_err(err, errlen, "out of memory");
		return NULL;
	}
	s->o = *o;
	if (!s->o.log)
		s->o.log = stderr;
	s->lfd = -1;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->idle, NULL);
	if (snprintf(s->path, sizeof(s->path), "%s", o->path) >= (int)sizeof(s->path)) {
		vp_set_err(err, errlen, "socket path %s is too long (at most %zu bytes)", o->path, sizeof(s->path) - 1);
		e = -ENAMETOOLONG;
		goto fail;
	}
	/* Its directory (e.g. /run/viprof): made if missing, and searchable by everyone. */
	char dir[sizeof(s->path)];
	snprintf(dir, sizeof(dir), "%s", s->path);
	char *slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = '\0';
		struct stat st;
		bool existed = stat(dir, &st) == 0;
		int dfd = vp_safe_opendir(dir, VP_SAFE_TRUSTED_LINKS | VP_SAFE_CREATE);
		if (dfd < 0) {
			e = dfd;
			vp_set_err(err, errlen, "cannot make the socket's directory %s: %s", dir, strerror(-e));
			goto fail;
		}
		/* One we made (0700) must let users reach the socket; an existing one stays as it is. */
		if (!existed && chmod(dir, 0755) != 0)
			fprintf(s->o.log, "viprof serve: warning: cannot open %s to users (chmod 0755: %s); only root can connect\n",
				dir, strerror(errno));
		close(dfd);
	}
	s->lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s->lfd < 0) {
		e = -errno;
		vp_set_err(err, errlen, "cannot create a Unix socket: %s", strerror(-e));
		goto fail;
	}
	memcpy(sa.sun_path, s->path, strlen(s->path) + 1);
	/* A socket left by a service that was killed is replaced; one that answers is not. */
	int probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		close(probe);
		vp_set_err(err, errlen, "another viprof serve already listens on %s; stop it, or give --socket another path",
			   s->path);
		e = -EADDRINUSE;
		goto fail;
	}
	if (probe >= 0)
		close(probe);
	struct stat st;
	if (lstat(s->path, &st) == 0 && S_ISSOCK(st.st_mode))
		unlink(s->path);
	/* No client's file ever gets in (connections inherit this from the listener):
	 * the service takes none, and merely closing one can block its thread for as long
	 * as the client likes (a TCP socket with SO_LINGER and unsent data; a file of the
	 * client's own FUSE mount), the final close of a file the kernel drops for us
	 * too (a message past its control buffer, the queue of a closed connection). The
	 * sender's sendmsg fails with EPERM instead. Older kernels lack the option: then
	 * a passed file is refused as before, at the cost above. */
	int no = 0;
	if (setsockopt(s->lfd, SOL_SOCKET, VP_SO_PASSRIGHTS, &no, sizeof(no)) != 0)
		fprintf(s->o.log, "viprof serve: warning: this kernel cannot refuse file descriptors on the socket "
			"(SO_PASSRIGHTS, Linux 6.16): a client passing one that lingers on close can hold its "
			"connection, and the service's stop, until it lets go\n");
	if (bind(s->lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || chmod(s->path, 0666) != 0 ||
	    listen(s->lfd, 64) != 0) {
		e = -errno;
		vp_set_err(err, errlen, "cannot listen on %s: %s", s->path, strerror(-e));
		goto fail;
	}
	if ((e = -pthread_create(&s->acceptor, NULL, accept_thread, s))) {
		vp_set_err(err, errlen, "cannot start the socket's thread: %s", strerror(-e));
		unlink(s->path);
		goto fail;
	}
	s->acceptor_started = true;
	return s;
fail:
	if (s->lfd >= 0)
		close(s->lfd);
	free(s);
	errno = -e;
	return NULL;
}

void vp_sock__stop(struct vp_sock *s)
{
	if (!s)
		return;
	s->stopping = true;
	if (s->acceptor_started)
		pthread_join(s->acceptor, NULL);
	close(s->lfd);
	unlink(s->path);
	/* Every recording sees stopping within a poll and ends cleanly. */
	pthread_mutex_lock(&s->mu);
	while (s->nconns)
		pthread_cond_wait(&s->idle, &s->mu);
	pthread_mutex_unlock(&s->mu);
	free(s);
}
