/* viprof record: parses the options, launches the command (held before exec), and
 * drives the recorder library (recorder/recorder.h) until the command, the duration or
 * the user ends it. Signals and the live status line live here, not in the library. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/record_opts.h"
#include "common/launch.h"
#include "common/safefs.h"
#include "common/session_format.h"
#include "common/util.h"
#include "recorder/record_jvm.h"
#include "recorder/recorder.h"
#include "hv-glue/steal.h"
#include "hv-glue/xen.h"
#include "daemon/sock_proto.h"

#define POLL_MS 100
#define STATUS_INTERVAL_NS (500ull * 1000000)

static volatile sig_atomic_t stop_signal;
static volatile sig_atomic_t child_exited;   /* a SIGCHLD came since the last reap */
static volatile pid_t launched_child;   /* for the handler: 0 when there is none */

/* The first SIGINT/SIGTERM asks for a clean end (drain, LOST, END, meta.json); a
 * second one exits at once. The stream is flushed every second and its chunks are
 * self-contained, so what was flushed stays readable. Only async-signal-safe calls. */
static void on_signal(int sig)
{
	if (stop_signal) {
		/* The launched command must not outlive its recording unprofiled. */
		if (launched_child > 0)
			kill(launched_child, SIGTERM);
		vp_xen__restore_pmu_mode();   /* _exit skips atexit: leave dom0 as found */
		_exit(128 + sig);
	}
	stop_signal = sig;
}

static void on_sigchld(int sig)
{
	(void)sig;
	child_exited = 1;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void join_args(char *buf, size_t len, char **argv, int argc)
{
	size_t off = 0;
	buf[0] = '\0';
	for (int i = 0; (argc < 0 ? argv[i] != NULL : i < argc) && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%s", i ? " " : "", argv[i]);
}

static int exit_code(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return 1;
}

static const char *agent_or_warn(void)
{
	const char *agent = viprof_agent_path();
	if (!agent || !*agent) {
		fprintf(stderr, "viprof: warning: the JVM agent libviprof-jvmti.so was not found next to viprof; "
				"Java methods will not be named (build it, or set VIPROF_AGENT=/path/to/libviprof-jvmti.so)\n");
		return NULL;
	}
	return agent;
}

/* The session directory's absolute name, for the agent's dir= option: the launched JVM
 * writes its maps there once it runs, after the recorder made the directory. */
static void absolute_dir(const char *dir, char *out, size_t len)
{
	char cwd[PATH_MAX];
	if (dir[0] == '/' || !getcwd(cwd, sizeof(cwd)))
		snprintf(out, len, "%s", dir);
	else
		snprintf(out, len, "%s/%s", strcmp(cwd, "/") ? cwd : "", dir);
}

/* The JVM options that load the agent into a launched JVM (writing its code maps into
 * session_dir/jit/), in opts (up to 4, malloc'ed first one); how many, 0 with no_jit or
 * no agent. The BPF walker steps over compiled Java frames by their frame size, so the
 * JVM runs as it would in production; only the frame-pointer walk needs
 * -XX:+PreserveFramePointer (it costs 3-4% here). DebugNonSafepoints makes the
 * agent's PC-to-line tables precise between safepoints. */
static int java_agent_options(const char *session_dir, bool no_jit, bool frame_pointers, uint64_t alloc_bytes,
			      bool lock, uint64_t lock_ns, bool off_cpu, char **opts)
{
	const char *agent = no_jit ? NULL : agent_or_warn();
	char extra[96] = "";
	int n = 0;
	/* -e alloc, -e lock: the agent's allocation sampling and lock recording (issue 25). */
	if (alloc_bytes)
		snprintf(extra, sizeof(extra), ",alloc=%llu", (unsigned long long)alloc_bytes);
	if (lock)
		snprintf(extra + strlen(extra), sizeof(extra) - strlen(extra), ",locks=%llu", (unsigned long long)lock_ns);
	/* --off-cpu: virtual threads' mounts and unmounts (JDK 21+), so that their waits
	 * while unmounted are charged to their own stacks (docs/offcpu.md). */
	if (off_cpu)
		snprintf(extra + strlen(extra), sizeof(extra) - strlen(extra), ",vthreads=1");
	if (!agent || asprintf(&opts[n], "-agentpath:%s=dir=%s/" VP_SESSION_JIT_DIR "%s", agent, session_dir, extra) < 0)
		return 0;
	n++;
	if (frame_pointers)
		opts[n++] = "-XX:+PreserveFramePointer";
	opts[n++] = "-XX:+UnlockDiagnosticVMOptions";
	opts[n++] = "-XX:+DebugNonSafepoints";
	return n;
}

/* The command to launch with those options: when it is java itself, on its command
 * line (right after "java", before -jar or the main class), so that the application's
 * stderr does not get HotSpot's "Picked up JAVA_TOOL_OPTIONS" line; otherwise (a script
 * that starts java) in JAVA_TOOL_OPTIONS, after any the user set, in *env (malloc'ed).
 * The argv to launch (malloc'ed, or cmd itself). */
static char **java_launch(char **cmd, char **opts, int nopts, char **env)
{
	const char *base = strrchr(cmd[0], '/');
	size_t argc = 0;
	*env = NULL;
	if (!nopts)
		return cmd;
	base = base ? base + 1 : cmd[0];
	while (cmd[argc])
		argc++;
	if (!strcmp(base, "java")) {
		char **argv = calloc(argc + (size_t)nopts + 1, sizeof(*argv));
		if (argv) {
			argv[0] = cmd[0];
			for (int i = 0; i < nopts; i++)
				argv[1 + i] = opts[i];
			for (size_t i = 1; i < argc; i++)
				argv[(size_t)nopts + i] = cmd[i];
			return argv;
		}
	}
	const char *old = getenv("JAVA_TOOL_OPTIONS");
	size_t len = (old ? strlen(old) : 0) + 2;
	for (int i = 0; i < nopts; i++)
		len += strlen(opts[i]) + 1;
	char *s = malloc(len);
	if (!s)
		return cmd;
	snprintf(s, len, "%s", old && *old ? old : "");
	for (int i = 0; i < nopts; i++) {
		if (*s)
			strcat(s, " ");
		strcat(s, opts[i]);
	}
	*env = s;
	return cmd;
}

static void print_status(uint64_t elapsed_ns, uint64_t samples, uint64_t lost)
{
	double t = (double)elapsed_ns / 1e9;
	fprintf(stderr, "\rviprof: %6.1f s  %10llu samples  %8llu lost  %8.0f/s   ", t, (unsigned long long)samples,
		(unsigned long long)lost, t > 0 ? (double)samples / t : 0.0);
}

/* Whether this process may load BPF and open system-wide events itself: root, or the
 * capabilities (CAP_SYS_ADMIN, or CAP_BPF with CAP_PERFMON) in its effective set. */
static bool can_sample_fully(void)
{
	FILE *f;
	char line[256];
	unsigned long long eff = 0;
	unsigned inner, outer, count;
	/* Root of a user namespace of our own (unshare -U) has its capabilities only over
	 * that namespace: BPF and system-wide events need them in the first one. */
	f = fopen("/proc/self/uid_map", "re");
	bool initial = f && fscanf(f, "%u %u %u", &inner, &outer, &count) == 3 && inner == 0 && outer == 0 &&
		       count == 4294967295u;
	if (f)
		fclose(f);
	if (!initial)
		return false;
	if (geteuid() == 0)
		return true;
	f = fopen("/proc/self/status", "re");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &eff) == 1)
			break;
	if (f)
		fclose(f);
	return (eff >> 21 & 1) || ((eff >> 38 & 1) && (eff >> 39 & 1));
}

/* A connection to the service, when this user cannot sample by themselves and one
 * listens (VIPROF_SOCKET or the default); -1 otherwise: record as before. */
static int service_connect(const struct vp_record_opts *o)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	const char *path = vp_sock__path();
	if (can_sample_fully() || !strcmp(o->backend, "perf") || getenv("VIPROF_NO_SERVICE") ||
	    strlen(path) >= sizeof(sa.sun_path))
		return -1;
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	memcpy(sa.sun_path, path, strlen(path) + 1);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
		return fd;
	if (fd >= 0)
		close(fd);
	return -1;
}

/* Creates (or takes, empty) the session directory as this user, as the recorder does
 * for itself, and opens it. The fd, its absolute name in abs, and whether we made it;
 * -errno with the reason in err. */
static int open_session_for_service(const struct vp_record_opts *o, char *abs, size_t abslen, bool *made,
				    int *parentfd, char *base, size_t baselen, char *err, size_t errlen)
{
	char parent[PATH_MAX], real[PATH_MAX], fdpath[64];
	size_t n;
	int e;

	snprintf(parent, sizeof(parent), "%s", o->output);
	n = strlen(parent);
	while (n > 1 && parent[n - 1] == '/')
		parent[--n] = '\0';
	char *slash = strrchr(parent, '/');
	snprintf(base, baselen, "%s", slash ? slash + 1 : parent);
	if (!*base || !strcmp(base, ".") || !strcmp(base, "..")) {
		vp_set_err(err, errlen, "%s is not a usable session directory name; give -o a path such as /var/tmp/run1", o->output);
		return -EINVAL;
	}
	if (!slash)
		snprintf(parent, sizeof(parent), ".");
	else if (slash == parent)
		snprintf(parent, sizeof(parent), "/");
	else
		*slash = '\0';
	*parentfd = vp_safe_opendir(parent, VP_SAFE_TRUSTED_LINKS);
	if (*parentfd < 0) {
		vp_set_err(err, errlen, "cannot open %s: %s", parent, strerror(-*parentfd));
		return *parentfd;
	}
	snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", *parentfd);
	ssize_t k = readlink(fdpath, real, sizeof(real) - 1);
	real[k > 0 ? k : 0] = '\0';
	if (snprintf(abs, abslen, "%s/%s", strcmp(real, "/") ? real : "", base) >= (int)abslen) {
		vp_set_err(err, errlen, "%s: path too long", o->output);
		return -ENAMETOOLONG;
	}
	*made = false;
	int fd = openat(*parentfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0) {
		struct stat st;
		int probe = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		DIR *d = probe >= 0 ? fdopendir(probe) : NULL;
		struct dirent *de;
		bool empty = true;
		while (d && (de = readdir(d)))
			if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
				empty = false;
		if (d)
			closedir(d);
		if (fstat(fd, &st) == 0 && st.st_uid == geteuid() && empty)
			return fd;
		close(fd);
		if (!o->force) {
			vp_set_err(err, errlen, "%s already exists and is not empty; use --force (the old one is kept as %s.old) or -o another directory",
				   abs, abs);
			return -EEXIST;
		}
		char old[NAME_MAX + 8];
		snprintf(old, sizeof(old), "%s.old", base);
		if ((e = vp_safe_remove_tree(*parentfd, old)) || renameat(*parentfd, base, *parentfd, old)) {
			e = e ? e : -errno;
			vp_set_err(err, errlen, "cannot keep the previous %s as %s.old: %s", abs, abs, strerror(-e));
			return e;
		}
	}
	if (mkdirat(*parentfd, base, 0700) != 0) {
		e = -errno;
		vp_set_err(err, errlen, "cannot create session directory %s: %s", abs, strerror(-e));
		return e;
	}
	*made = true;
	fd = openat(*parentfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		e = -errno;
		vp_set_err(err, errlen, "cannot open session directory %s: %s", abs, strerror(-e));
		return e;
	}
	return fd;
}

/* Whether cmd can be executed as execvp would find it; the reason in err if not. */
static bool command_runnable(const char *cmd, char *err, size_t errlen)
{
	char path[PATH_MAX];
	const char *dirs = getenv("PATH");
	int e = ENOENT;

	if (strchr(cmd, '/')) {
		if (access(cmd, X_OK) == 0)
			return true;
		e = errno;
	} else {
		for (const char *d = dirs && *dirs ? dirs : "/usr/local/bin:/usr/bin:/bin"; d;) {
			const char *colon = strchr(d, ':');
			size_t n = colon ? (size_t)(colon - d) : strlen(d);
			struct stat st;
			snprintf(path, sizeof(path), "%.*s%s%s", (int)n, d, n ? "/" : "", cmd);
			if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
				if (access(path, X_OK) == 0)
					return true;
				e = EACCES;
			}
			d = colon ? colon + 1 : NULL;
		}
	}
	vp_set_err(err, errlen, "cannot run '%s': %s; check the command name and PATH", cmd, strerror(e));
	return false;
}

/* -F within what the kernel allows, with a word when it costs more than it shows. */
static bool rate_sane(const struct vp_record_opts *o)
{
	long max = vp_read_int_file("/proc/sys/kernel/perf_event_max_sample_rate", 100000);
	if (o->period || !o->freq)
		return true;
	if ((long long)o->freq > max) {
		fprintf(stderr, "viprof record: -F %llu is over the kernel's limit of %ld samples a second "
				"(kernel.perf_event_max_sample_rate, which the kernel lowers when sampling takes too long); "
				"ask for less, e.g. -F 999\n", (unsigned long long)o->freq, max);
		return false;
	}
	/* Said also under -q: -q hides progress, not what may make the profile untrue. */
	if (o->freq > 10000)
		fprintf(stderr, "viprof: warning: -F %llu: every sample interrupts the program; this often, sampling "
				"can take much of each CPU and slow what it measures; 999 to 4999 Hz is usually plenty\n",
			(unsigned long long)o->freq);
	return true;
}

/* The launched command outlived the recording: SIGTERM, then up to 1 s for it to exit
 * (its status in *status and *done set when it did). */
/* The recording failed (a full disk, a broken sampler): that is no reason to end the
 * program. It runs to its own end, unprofiled, and this waits for it, unless a signal
 * (Ctrl-C, SIGTERM) says the user ends it after all. */
static void wait_unprofiled(const char *cmd, pid_t child, int *status, bool *done)
{
	int st;

	fprintf(stderr, "viprof record: %s (pid %d) keeps running without profiling; waiting for it to exit\n",
		cmd, (int)child);
	for (;;) {
		pid_t r = waitpid(child, &st, 0);

		if (r == child) {
			*status = st;
			*done = true;
			return;
		}
		if ((r < 0 && errno != EINTR) || stop_signal)
			return;
	}
}

/* Launches cmd held before its exec, with java_opts in JAVA_TOOL_OPTIONS (NULL: none).
 * Orphaned grandchildren are reparented to us, so "the command and its descendants are
 * done" is simply "no child is left". The command's exit interrupts the recorder's poll
 * (SIGCHLD without SA_RESTART: poll and nanosleep return EINTR), or, when it came before
 * the poll, makes the poll not wait; so the recording ends when the command does, not up
 * to a poll period later (that period was half of a short command's cost). 0, or -errno
 * after saying why. */
static int launch_held(char *const *cmd, const char *java_opts, struct vp_held_child *held)
{
	struct sigaction sc = { .sa_handler = on_sigchld };
	struct vp_launch_opts lo = { .env_name = java_opts ? "JAVA_TOOL_OPTIONS" : NULL, .env_value = java_opts,
				     .who = "viprof" };
	int e;

	prctl(PR_SET_CHILD_SUBREAPER, 1);
	sigemptyset(&sc.sa_mask);
	sigaction(SIGCHLD, &sc, NULL);
	if ((e = vp_child__launch(held, cmd, &lo)) < 0) {
		fprintf(stderr, "viprof record: cannot fork for '%s': %s\n", cmd[0], strerror(-e));
		return e;
	}
	return 0;
}

static void terminate_child(pid_t child, int *status, bool *done)
{
	int st;
	kill(child, SIGTERM);
	for (int i = 0; i < 20 && !*done; i++) {
		if (waitpid(child, &st, WNOHANG) == child) {
			*status = st;
			*done = true;
		} else {
			usleep(50000);
		}
	}
}

/* A session file whose bytes the service sends through a pipe (FILE messages): this
 * user's client stores it, so that the service, root, writes nothing here. */
struct service_file {
	const char *name;          /* its name in the session */
	const char *tmp;           /* written under this name, renamed once complete; or NULL */
	int pipe, fd;
	uint64_t bytes;
	bool done;                 /* the pipe ended */
};

/* Takes the pipe of a FILE message: the file is created here, new, 0600. */
static void service_file_open(struct service_file *f, int dirfd, int pipe_fd, const char *abs)
{
	if (f->pipe >= 0 || f->fd >= 0) {
		close(pipe_fd);   /* a second FILE of the same name: not ours to take */
		return;
	}
	f->fd = openat(dirfd, f->tmp ? f->tmp : f->name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (f->fd < 0) {
		fprintf(stderr, "viprof record: cannot create %s/%s: %s\n", abs, f->tmp ? f->tmp : f->name, strerror(errno));
		close(pipe_fd);
		return;
	}
	f->pipe = pipe_fd;
	flock(f->fd, LOCK_EX | LOCK_NB);   /* a report meanwhile knows it is in progress */
}

/* Moves what the pipe holds into the file; at the pipe's end the file is complete
 * (a temporary name is renamed). Non-blocking: 0 when there is nothing more now. */
static void service_file_drain(struct service_file *f, int dirfd, const char *abs)
{
	char buf[1 << 16];
	while (f->pipe >= 0) {
		ssize_t n = read(f->pipe, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n > 0) {
			int e = vp_write_all(f->fd, buf, (size_t)n);
			if (e)
				fprintf(stderr, "viprof record: cannot write %s/%s: %s\n", abs, f->name, strerror(-e));
			f->bytes += (uint64_t)n;
			continue;
		}
		close(f->pipe);
		f->pipe = -1;
		close(f->fd);
		f->fd = -1;
		f->done = true;
		if (f->tmp) {
			if (f->bytes && renameat(dirfd, f->tmp, dirfd, f->name))
				fprintf(stderr, "viprof record: cannot rename %s/%s: %s\n", abs, f->tmp, strerror(errno));
			else if (!f->bytes)
				unlinkat(dirfd, f->tmp, 0);
		}
	}
}

/* 'viprof record' through the service (daemon/sock_proto.h): the same options and the
 * same output. This user's process makes the session directory and its jit/, attaches
 * the agent to its own JVMs, launches the command (held before exec), and stores the
 * stream and meta.json that the service sends through pipes; the service, root, only
 * samples. Returns the exit status. */
/* Where no steal clock ran (vp_steal__clock_runs decides, common/steal_clock.h words
 * it), the recording says that steal is unknown, so that nobody reads the report's
 * missing steal as "the hypervisor took nothing". */
static void say_steal(void)
{
	char why[512];
	if (vp_steal__clock_runs(why, sizeof(why)) == 0)
		fprintf(stderr, "viprof: %s\n", why);
}

/* One recording through the service: what the client holds from the handshake to the
 * cleanup, so that each step below reads and leaves it as the one function did. */
struct svc_run {
	struct vp_record_opts *o;
	int sock;
	char abs[PATH_MAX + 8], base[NAME_MAX + 1], msg[VP_SOCK_MAX_MSG];
	char *java_opts, *opts[4];
	char **launch_argv;
	int nopts;
	struct vp_held_child held;
	struct record_jvm_lock lock;
	struct service_file files[2];
	pid_t child;
	int child_status, ret, parentfd, dirfd, done_rc;
	bool made, child_done, failed, done, started, stop_sent;
	bool tty, status_shown;
	uint64_t samples, lost, elapsed, done_at;
};

/* The service says first whether it takes us (a limit refuses at once): nothing is
 * created or launched for a request it would not take. */
static bool svc_wait_ready(struct svc_run *s)
{
	struct timeval tv = { .tv_sec = 10 };
	setsockopt(s->sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	ssize_t hn = vp_sock__recv(s->sock, s->msg, sizeof(s->msg), NULL);
	tv.tv_sec = 0;
	setsockopt(s->sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (hn <= 0 || strncmp(s->msg, "READY", 5)) {
		const char *line = hn > 4 && !strncmp(s->msg, "ERR ", 4) ? strchr(s->msg + 4, ' ') : NULL;
		if (line)
			fprintf(stderr, "viprof record: %s\n", line + 1);
		else
			fprintf(stderr, "viprof record: the service on %s did not answer (%s); try again, or record without it "
					"(VIPROF_NO_SERVICE=1)\n", vp_sock__path(), hn < 0 ? strerror((int)-hn) : "closed");
		s->dirfd = -1;
		return false;
	}
	return true;
}

/* Makes the session, launches the command held (or attaches our own JVMs' agents) and
 * sends the request; false after printing why. */
static bool svc_send_request(struct svc_run *s)
{
	struct vp_record_opts *o = s->o;
	char err[1024] = "";
	struct vp_sock_jvm jvms[RECORD_MAX_PIDS];
	pid_t jvm_pids[RECORD_MAX_PIDS];
	uint32_t jvm_flags[RECORD_MAX_PIDS];
	int njvms = 0;

	s->dirfd = open_session_for_service(o, s->abs, sizeof(s->abs), &s->made, &s->parentfd, s->base,
					    sizeof(s->base), err, sizeof(err));
	if (s->dirfd < 0) {
		fprintf(stderr, "viprof record: %s\n", err);
		return false;
	}
	/* The session is this user's: its jit/ too, where the agents write as this user. */
	if (mkdirat(s->dirfd, VP_SESSION_JIT_DIR, 0700)) {
		fprintf(stderr, "viprof record: cannot create %s/" VP_SESSION_JIT_DIR ": %s\n", s->abs, strerror(errno));
		return false;
	}
	if (o->target == RECORD_TARGET_LAUNCH) {
		s->nopts = java_agent_options(s->abs, o->no_jit, o->callchain && o->fp_walk, o->alloc_bytes, o->lock,
					      o->lock_ns, o->off_cpu, s->opts);
		s->launch_argv = java_launch(o->cmd, s->opts, s->nopts, &s->java_opts);
		if (launch_held(s->launch_argv, s->java_opts, &s->held))
			return false;
		s->child = s->held.pid;
		launched_child = s->child;
		o->launched = s->child;
	} else if (o->target == RECORD_TARGET_PIDS && !o->no_jit) {
		/* Our own JVMs get the agent from us, before sampling starts (every sample of
		 * their JIT code then falls after their code maps began). */
		const char *agent = agent_or_warn();
		if (agent)
			njvms = record_jvm__attach_own(s->abs, &s->lock, o->pids, o->npids, agent, o, jvm_pids, jvm_flags);
		for (int i = 0; i < njvms; i++)
			jvms[i] = (struct vp_sock_jvm){ .pid = jvm_pids[i], .flags = jvm_flags[i] };
	}
	if (vp_sock__encode_request(o, jvms, njvms, s->msg, sizeof(s->msg)) ||
	    vp_sock__send(s->sock, s->msg, strlen(s->msg), -1)) {
		fprintf(stderr, "viprof record: cannot send the request to the service on %s; the command line is too long?\n",
			vp_sock__path());
		return false;
	}
	return true;
}

/* A FILE message passes the pipe of one session file; false when the message was not
 * one (passed is then still ours). */
static bool svc_take_file(struct svc_run *s, int passed)
{
	if (strncmp(s->msg, "FILE ", 5) || passed < 0)
		return false;
	int k = !strcmp(s->msg + 5, s->files[0].name) ? 0 : !strcmp(s->msg + 5, s->files[1].name) ? 1 : -1;
	if (k >= 0) {
		fcntl(passed, F_SETFL, O_NONBLOCK);
		service_file_open(&s->files[k], s->dirfd, passed, s->abs);
	} else {
		close(passed);   /* a file this viprof does not know: not stored */
	}
	return true;
}

/* What the wait loop does after one message of the service. */
enum svc_next { SVC_REAP, SVC_LOOP, SVC_END };

/* One message of the service: SVC_END when the recording ends at once (an error before
 * it started), SVC_LOOP to poll again at once (a closed connection, a passed file),
 * SVC_REAP to look at the command first. */
static enum svc_next svc_on_message(struct svc_run *s)
{
	int passed = -1;
	ssize_t n = vp_sock__recv(s->sock, s->msg, sizeof(s->msg), &passed);
	if (n <= 0) {
		fprintf(stderr, "%sviprof record: the service closed the connection before the recording ended; "
				"%s keeps what was flushed\n", s->status_shown ? "\n" : "", s->abs);
		s->failed = true;
		s->done = true;   /* the pipes still end what was sent */
		s->done_at = now_ns();
		return SVC_LOOP;
	}
	if (svc_take_file(s, passed))
		return SVC_LOOP;
	if (passed >= 0)
		close(passed);
	const char *msg = s->msg;
	if (!strncmp(msg, "LOG ", 4)) {
		fprintf(stderr, "%s%s\n", s->status_shown ? "\n" : "", msg + 4);
		s->status_shown = false;
	} else if (!strncmp(msg, "ERR ", 4)) {
		int code = atoi(msg + 4);
		const char *line = strchr(msg + 4, ' ');
		fprintf(stderr, "viprof record: %s\n", line ? line + 1 : msg + 4);
		s->ret = code == 2 ? 2 : 1;
		s->failed = true;
		if (!s->started)
			return SVC_END;
		s->done = true;
		s->done_at = now_ns();
	} else if (!strncmp(msg, "STARTED", 7)) {
		s->started = true;
		vp_child__release(&s->held, NULL);
	} else if (!strncmp(msg, "STATUS ", 7)) {
		unsigned long long sm, ls, el;
		if (s->tty && sscanf(msg + 7, "%llu %llu %llu", &sm, &ls, &el) == 3) {
			double t = (double)el / 1e9;
			fprintf(stderr, "\rviprof: %6.1f s  %10llu samples  %8llu lost  %8.0f/s   ", t, sm, ls,
				t > 0 ? (double)sm / t : 0.0);
			s->status_shown = true;
		}
	} else if (!strncmp(msg, "DONE ", 5)) {
		unsigned long long sm, ls, el, by;
		if (sscanf(msg + 5, "%llu %llu %llu %llu %d", &sm, &ls, &el, &by, &s->done_rc) == 5) {
			s->samples = sm, s->lost = ls, s->elapsed = el;
		}
		s->done = true;
		s->done_at = now_ns();
	}
	return SVC_REAP;
}

/* Reap the command and any orphaned descendant; when none is left, the recording ends
 * with its status. */
static void svc_reap(struct svc_run *s)
{
	int status;
	pid_t q;
	child_exited = 0;
	while ((q = waitpid(-1, &status, WNOHANG)) > 0) {
		if (q == s->child) {
			s->child_status = status;
			s->child_done = true;
		}
	}
	if (q < 0 && errno == ECHILD) {
		snprintf(s->msg, sizeof(s->msg), "STOP %d", s->child_done ? s->child_status : -1);
		s->stop_sent = vp_sock__send(s->sock, s->msg, strlen(s->msg), -1) == 0;
	}
}

/* The wait loop: the service's messages, the file pipes, a stop signal and the command's
 * end, until the recording is done; false when it ends at once (an error before it
 * started). */
static bool svc_wait(struct svc_run *s)
{
	s->tty = isatty(STDERR_FILENO) && !s->o->quiet;
	for (;;) {
		/* After DONE, what is left in the pipes (they end with the recording); a
		 * service that dies leaves them ended too. */
		if (s->done && (s->files[0].pipe < 0 && s->files[1].pipe < 0))
			break;
		if (s->done && now_ns() - s->done_at > 5000000000ull)
			break;
		if (stop_signal && s->started && !s->stop_sent) {
			s->stop_sent = vp_sock__send(s->sock, "STOP -1", 7, -1) == 0;
		}
		struct pollfd p[3] = { { .fd = s->done ? -1 : s->sock, .events = POLLIN },
				       { .fd = s->files[0].pipe, .events = POLLIN },
				       { .fd = s->files[1].pipe, .events = POLLIN } };
		int pr = poll(p, 3, child_exited ? 0 : POLL_MS);
		for (int i = 0; i < 2; i++)
			if (pr > 0 && p[i + 1].revents)
				service_file_drain(&s->files[i], s->dirfd, s->abs);
		if (pr > 0 && p[0].revents) {
			enum svc_next next = svc_on_message(s);
			if (next == SVC_END)
				return false;
			if (next == SVC_LOOP)
				continue;
		}
		if (s->child && s->started && !s->stop_sent && !s->done)
			svc_reap(s);
	}
	return true;
}

/* After the wait: the rest of the pipes, our JVMs' maps, the command's end, the summary;
 * sets s->ret to the exit status. */
static void svc_result(struct svc_run *s)
{
	for (int i = 0; i < 2; i++)
		if (s->files[i].pipe >= 0)
			service_file_drain(&s->files[i], s->dirfd, s->abs);
	if (s->status_shown)
		fputc('\n', stderr);
	record_jvm__end(&s->lock);   /* our JVMs' agents finish this session's maps */
	bool we_stopped_child = false;
	if (s->child && !s->child_done && s->failed && !stop_signal && s->started)
		wait_unprofiled(s->o->cmd[0], s->child, &s->child_status, &s->child_done);
	if (s->child && !s->child_done && s->started) {
		we_stopped_child = true;
		terminate_child(s->child, &s->child_status, &s->child_done);
	}
	if (s->done && !s->failed) {
		double secs = (double)s->elapsed / 1e9;
		fprintf(stderr, "viprof: %llu samples (%llu lost) in %.1f s, %.0f/s; session %s (%llu bytes)\n",
			(unsigned long long)s->samples, (unsigned long long)s->lost, secs,
			secs > 0 ? (double)s->samples / secs : 0.0, s->abs, (unsigned long long)vp_safe_tree_bytes(s->dirfd));
		say_steal();
		if (!s->files[1].done || !s->files[1].bytes) {
			fprintf(stderr, "viprof record: the service sent no %s; %s reads to its last chunk\n",
				VP_SESSION_META_JSON, s->abs);
			s->failed = true;
		}
		s->failed |= s->done_rc != 0;
	}
	if (stop_signal && !s->o->quiet)
		fprintf(stderr, "viprof: stopped by %s\n", strsignal(stop_signal));
	s->ret = s->child && s->child_done && !we_stopped_child ? exit_code(s->child_status)
		 : s->failed ? (s->ret == 2 ? 2 : 1) : 0;
}

/* Closes what is open; a session that never started is removed (or emptied, when it
 * was given), and a held command that never ran is reaped. */
static void svc_cleanup(struct svc_run *s)
{
	for (int i = 0; i < 2; i++) {
		if (s->files[i].pipe >= 0)
			close(s->files[i].pipe);
		if (s->files[i].fd >= 0)
			close(s->files[i].fd);
	}
	record_jvm__end(&s->lock);
	vp_child__close(&s->held);
	if (s->child && !s->started) {
		int status;
		waitpid(s->child, &status, 0);
	}
	if (!s->started && s->made && s->parentfd >= 0)
		vp_safe_remove_tree(s->parentfd, s->base);   /* nothing was recorded: the directory we made goes */
	else if (!s->started && s->dirfd >= 0)
		vp_safe_remove_tree(s->dirfd, VP_SESSION_JIT_DIR);   /* an empty one given: back to empty */
	if (s->dirfd >= 0)
		close(s->dirfd);
	if (s->parentfd >= 0)
		close(s->parentfd);
	free(s->java_opts);
	if (s->nopts)
		free(s->opts[0]);
	if (s->launch_argv && s->launch_argv != s->o->cmd)
		free(s->launch_argv);
	close(s->sock);
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGCHLD, SIG_DFL);
}

static int record_via_service(struct vp_record_opts *o, int sock)
{
	struct svc_run s = {
		.o = o, .sock = sock, .ret = 1, .parentfd = -1, .dirfd = -1,
		.held = { .pid = -1, .go_fd = -1, .exec_fd = -1 },
		.lock = { .fd = -1 },
		.files = {
			{ .name = VP_SESSION_STREAM, .pipe = -1, .fd = -1 },
			{ .name = VP_SESSION_META_JSON, .tmp = VP_SESSION_META_JSON ".tmp", .pipe = -1, .fd = -1 },
		},
	};
	if (svc_wait_ready(&s) && svc_send_request(&s) && svc_wait(&s))
		svc_result(&s);
	svc_cleanup(&s);
	return s.ret;
}

/* Through the service: what it does not take is said here, before anything starts;
 * returns the exit status. */
static int record_through_service(struct vp_record_opts *o, int sock)
{
	const char *no = o->xen_pmu_mode ? "--xen-pmu-mode changes the hypervisor's PMU mode for every domain"
		       : o->jvm_attach == RECORD_JVM_UIDS || o->jvm_attach == RECORD_JVM_PIDS
			 ? "--jvm-attach with users or pids selects among other processes" : NULL;
	if (no) {
		fprintf(stderr, "viprof record: %s: only root may ask for it, and the service records for you "
				"(uid %u) without it; leave it out\n", no, (unsigned)getuid());
		close(sock);
		return 2;
	}
	/* Through the service the client attaches the user's own -p JVMs; on -a nobody
	 * attaches any (the user cannot load an agent into other users' JVMs). */
	if ((o->alloc_bytes || o->lock) && o->target == RECORD_TARGET_ALL) {
		fprintf(stderr, "viprof record: -e %s with -a: through the service (uid %u) no running JVM gets the "
				"agent that records it; name your own JVMs with -p PID\n", o->alloc_bytes ? "alloc" : "lock",
			(unsigned)getuid());
		close(sock);
		return 2;
	}
	if (o->jvm_attach == RECORD_JVM_NONE && o->target == RECORD_TARGET_PIDS)
		o->no_jit = true;   /* the same for -p: running JVMs keep no agent */
	return record_via_service(o, sock);
}

/* The local recording's loop: polls the recorder, shows the status line and reaps the
 * command; returns true when the recorder failed. */
static bool local_wait(struct vp_recorder *rec, const struct vp_record_opts *o, pid_t child, int *child_status,
		       bool *child_done)
{
	struct vp_recorder_stats st;
	bool tty = isatty(STDERR_FILENO) && !o->quiet, failed = false;
	uint64_t last_status = 0;
	while (!stop_signal) {
		int r = vp_recorder__poll(rec, child_exited ? 0 : POLL_MS);
		if (r < 0) {
			fprintf(stderr, "%sviprof record: %s\n", tty ? "\n" : "", vp_recorder__error(rec));
			failed = true;
			break;
		}
		uint64_t now = now_ns();
		if (tty && now - last_status >= STATUS_INTERVAL_NS) {
			vp_recorder__stats(rec, &st);
			print_status(st.elapsed_ns, st.samples, st.lost);
			last_status = now;
		}
		if (r == 0)
			break;
		if (child) {
			/* Reap the command and any orphaned descendant; stop when none is left. */
			int status;
			pid_t p;
			child_exited = 0;   /* before reaping: a later exit sets it again */
			while ((p = waitpid(-1, &status, WNOHANG)) > 0) {
				if (p == child) {
					*child_status = status;
					*child_done = true;
				}
			}
			if (p < 0 && errno == ECHILD)
				break;
		}
	}
	vp_timing("record: loop left (command exited)");
	if (tty)
		fputc('\n', stderr);
	return failed;
}

/* The local recording's summary line, after the recorder stopped. */
static void local_summary(struct vp_recorder *rec, bool failed)
{
	struct vp_recorder_stats st;
	vp_recorder__stats(rec, &st);
	double secs = (double)st.elapsed_ns / 1e9;
	if (failed && st.written < st.samples)
		/* Not "N samples": what the session holds is what counts. */
		fprintf(stderr, "viprof: the recording failed: the session holds %llu of the %llu samples taken in "
				"%.1f s (the rest could not be written); session %s (%llu bytes)\n",
			(unsigned long long)st.written, (unsigned long long)st.samples, secs,
			vp_recorder__session_dir(rec), (unsigned long long)st.disk_bytes);
	else
		fprintf(stderr, "viprof: %llu samples (%llu lost) in %.1f s, %.0f/s; session %s (%llu bytes)\n",
			(unsigned long long)st.samples, (unsigned long long)st.lost, secs,
			secs > 0 ? (double)st.samples / secs : 0.0, vp_recorder__session_dir(rec),
			(unsigned long long)st.disk_bytes);
	say_steal();
}

/* Records with the recorder library in this process (root, or what this user may use);
 * returns the exit status. */
static int record_local(struct vp_record_opts *o)
{
	struct vp_recorder *rec = NULL;
	char err[1024] = "", dir[PATH_MAX + 8];
	char *java_opts = NULL, *opts[4] = { NULL };
	char **launch_argv = NULL;
	int nopts = 0;
	pid_t child = 0;
	struct vp_held_child held = { .pid = -1, .go_fd = -1, .exec_fd = -1 };
	int child_status = 0, ret = 1;
	bool child_done = false, failed = false;

	bool on_my_own = !can_sample_fully();
	/* Also under -q: the report will lack what it names. */
	if (on_my_own)
		fprintf(stderr, "viprof: recording as uid %u with what an unprivileged user may use (perf events; no "
				"kernel frames, interpreted Java method names, exact steal or --off-cpu), because no viprof "
				"service answers on %s: ask root to run 'viprof serve' (packaging/viprof.service) for all "
				"of it\n",
			(unsigned)getuid(), vp_sock__path());
	if (o->target == RECORD_TARGET_LAUNCH) {
		absolute_dir(o->output, dir, sizeof(dir));
		/* The perf sampler walks by frame pointers only: so must the JVM it starts. */
		nopts = java_agent_options(dir, o->no_jit, o->callchain && (o->fp_walk || !strcmp(o->backend, "perf") ||
									      (on_my_own && !strcmp(o->backend, "auto"))),
					   o->alloc_bytes, o->lock, o->lock_ns, o->off_cpu, opts);
		launch_argv = java_launch(o->cmd, opts, nopts, &java_opts);
		/* Held before exec until the sampler watches its pid (released below). */
		if (launch_held(launch_argv, java_opts, &held))
			goto cleanup;
		child = held.pid;
		launched_child = child;
		o->launched = child;
		vp_timing("record: command launched (held)");
	}

	rec = vp_recorder__start(o, -1, err, sizeof(err));
	if (!rec) {
		ret = errno == EINVAL ? 2 : 1;
		fprintf(stderr, "viprof record: %s\n", err);
		goto cleanup;
	}
	vp_child__release(&held, NULL);
	vp_timing("record: command released");
	failed = local_wait(rec, o, child, &child_status, &child_done);

	/* A clean end even when the command still runs (-d, Ctrl-C): stop it, so its exit
	 * status is known and nothing keeps running unprofiled behind the user's back. */
	bool we_stopped_child = false;
	if (child && !child_done && failed && !stop_signal)
		wait_unprofiled(o->cmd[0], child, &child_status, &child_done);   /* the recorder stopped sampling */
	if (child && !child_done) {
		we_stopped_child = true;
		terminate_child(child, &child_status, &child_done);
	}
	if (child_done && !we_stopped_child)
		vp_recorder__set_exit_status(rec, child_status);
	if (vp_recorder__stop(rec) < 0)
		failed = true;
	local_summary(rec, failed);
	if (stop_signal && !o->quiet)
		fprintf(stderr, "viprof: stopped by %s\n", strsignal(stop_signal));
	/* A command that ran to its own end gives its own status, also when the recording
	 * failed (said above): a profiler must not turn a program's success into failure
	 * because it could not write. */
	ret = child && child_done && !we_stopped_child ? exit_code(child_status) : failed ? 1 : 0;

cleanup:
	vp_child__close(&held);   /* a held child reads EOF and exits without running the command */
	if (child && !rec) {
		int status;
		waitpid(child, &status, 0);
	}
	vp_recorder__free(rec);
	free(java_opts);
	if (nopts)
		free(opts[0]);
	if (launch_argv && launch_argv != o->cmd)
		free(launch_argv);
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGCHLD, SIG_DFL);
	vp_timing("record: cleaned up");
	return ret;
}

int cmd_record(int argc, char **argv)
{
	struct vp_record_opts o;
	char err[1024] = "", cmdline[4096];

	vp_record_opts__defaults(&o);
	if (record_opts__parse(&o, argc, argv, err, sizeof(err))) {
		fprintf(stderr, "viprof record: %s\n", err);
		return 2;
	}
	if (o.help) {
		record_opts__usage(stdout);
		return 0;
	}
	join_args(cmdline, sizeof(cmdline), argv, argc);
	o.cmdline = cmdline;
	/* A command that cannot run is said before anything is made (no session left
	 * behind to be refused by the next plain 'record'); 127 as the shell says it. */
	if (o.target == RECORD_TARGET_LAUNCH && !command_runnable(o.cmd[0], err, sizeof(err))) {
		fprintf(stderr, "viprof record: %s\n", err);
		return 127;
	}
	if (!rate_sane(&o))
		return 2;
	if (o.target != RECORD_TARGET_LAUNCH && !o.no_jit)
		o.agent = viprof_agent_path();

	/* The first SIGINT/SIGTERM from here on ends the recording cleanly as soon as it
	 * has started. */
	struct sigaction sa = { .sa_handler = on_signal };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	/* A user who cannot load BPF records through the service when one runs. */
	int sock = service_connect(&o);
	if (sock >= 0)
		return record_through_service(&o, sock);
	return record_local(&o);
}
