/* HotSpot dynamic attach (the protocol jcmd and jattach speak on Linux):
 *  1. the JVM listens on <its /tmp>/.java_pid<ns pid> once its attach listener runs;
 *  2. if not yet, we create .attach_pid<ns pid> in its cwd (or its /tmp) and send SIGQUIT,
 *     which makes the JVM start the listener instead of printing a thread dump;
 *  3. we connect and send "1\0load\0<agent>\0true\0<options>\0"; the JVM answers with the
 *     attach result code, a newline, then the agent's return code.
 * The JVM only accepts a peer with its own euid/egid (SO_PEERCRED), so the protocol runs
 * in a forked child (the helper) that takes the target's credentials; the caller never
 * changes ids (seteuid in a threaded recorder would change them for every thread). The
 * helper also does all that touches the JVM's /tmp and cwd (the trigger, the agent's
 * copy, its directory and socket): they are the user's files, made by the user, who may
 * have bound any directory over their /tmp in a mount namespace of theirs. Paths go
 * through /proc/PID/root and /proc/PID/cwd, so a JVM in a container is reached in its
 * own mount namespace, under its own pid (NSpid), without entering it. The caller
 * resolves no name there; it waits for the helper with a deadline, and kills it. */
#define _GNU_SOURCE
#include "recorder/jvm_attach.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/safefs.h"
#include "common/util.h"
#include <dirent.h>

#include "hotspot/symbols.h"

#define LISTENER_WAIT_MS 5000
/* A JVM still creating itself is waited for before it is signalled: its VM is not
 * live for an agent yet. */
#define CREATE_WAIT_MS 5000
/* The attach helper's own alarm: a JVM that never answers must not hang it. */
#define HELPER_ALARM_S ((LISTENER_WAIT_MS + CREATE_WAIT_MS) / 1000 + 10)
/* How long the caller waits for the helper at most. The helper runs as the JVM's user,
 * who may stop it (SIGSTOP is not held up by its alarm): at this deadline it is killed,
 * so that a user cannot hold the service's recorder, and its rotation, for as long as
 * they like. */
#define HELPER_DEADLINE_MS ((HELPER_ALARM_S + 2) * 1000)
#define VP_AGENT_COPY_NAME "libviprof-jvmti.so"

/* HotSpot names one of its threads "VM Thread". */
static bool has_vm_thread(pid_t pid)
{
	char path[64], comm[32];
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	struct dirent *de;
	bool found = false;

	while (d && !found && (de = readdir(d))) {
		char cp[320];
		int fd;
		ssize_t n;

		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		snprintf(cp, sizeof(cp), "/proc/%d/task/%s/comm", (int)pid, de->d_name);
		if ((fd = open(cp, O_RDONLY | O_CLOEXEC)) < 0)
			continue;
		n = read(fd, comm, sizeof(comm) - 1);
		close(fd);
		if (n > 0) {
			comm[n] = '\0';
			found = !strncmp(comm, "VM Thread", 9);
		}
	}
	if (d)
		closedir(d);
	return found;
}

/* A process is taken for a HotSpot JVM, and may be sent SIGQUIT, only if the libjvm.so
 * it maps (the mapped object itself, through map_files, if it is a regular file) exports
 * HotSpot's VM structure table and it runs HotSpot's VM thread: a file merely named
 * libjvm.so is not enough (SIGQUIT kills most programs). */
static bool maps_hotspot_libjvm(pid_t pid)
{
	struct vp_hs_libjvm *jm = malloc(sizeof(*jm));
	bool hs = false;

	if (jm && vp_hs_libjvm__find(pid, jm) == 0) {
		int fd = vp_hs_libjvm__open(pid, jm, false);
		hs = fd >= 0 && vp_hs__elf_is_hotspot(fd);
		if (fd >= 0)
			close(fd);
	}
	free(jm);
	return hs;
}

bool vp_jvm__is_hotspot(pid_t pid)
{
	return maps_hotspot_libjvm(pid) && has_vm_thread(pid);
}

int vp_jvm__wait_hotspot(pid_t pid, int timeout_ms)
{
	if (!maps_hotspot_libjvm(pid))
		return 0;
	/* HotSpot's libjvm is mapped: its VM thread comes once the VM is created, which
	 * a JVM started a moment ago (or slowed by a busy machine) has not finished. */
	for (int waited = 0; !has_vm_thread(pid); waited += 20) {
		if (waited >= timeout_ms || kill(pid, 0))
			return -ETIMEDOUT;
		usleep(20000);
	}
	return 1;
}

/* Readable once vp_jvm__abort_all was called: every wait of an attach, in any thread,
 * polls it too and gives up (the service's stop must not wait for a JVM's user). */
static pthread_once_t abort_once = PTHREAD_ONCE_INIT;
static int abort_fd = -1;

static void abort_init(void)
{
	abort_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

static int abort_pollfd(void)
{
	pthread_once(&abort_once, abort_init);
	return abort_fd;   /* -1 (no eventfd): poll ignores it, and waits end at their deadlines */
}

static bool aborted(void)
{
	struct pollfd pf = { .fd = abort_pollfd(), .events = POLLIN };
	return pf.fd >= 0 && poll(&pf, 1, 0) == 1;
}

void vp_jvm__abort_all(void)
{
	uint64_t one = 1;
	int fd = abort_pollfd();

	if (fd >= 0 && write(fd, &one, sizeof(one)) != (ssize_t)sizeof(one)) {
		/* Only a counter at its maximum fails, and that one is readable already. */
	}
}

struct target {
	pid_t pid, nspid;
	uid_t uid;
	gid_t gid;
};

/* Effective uid/gid and the innermost namespace pid, from /proc/PID/status. */
static int read_target(pid_t pid, struct target *t)
{
	char path[64], line[512];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -errno;
	t->pid = pid;
	t->nspid = pid;
	int have = 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long r, e;
		if (sscanf(line, "Uid: %lu %lu", &r, &e) == 2) {
			t->uid = (uid_t)e;
			have |= 1;
		} else if (sscanf(line, "Gid: %lu %lu", &r, &e) == 2) {
			t->gid = (gid_t)e;
			have |= 2;
		} else if (!strncmp(line, "NSpid:", 6)) {
			/* The last field is the pid inside the JVM's own pid namespace. */
			char *s = line + 6, *end;
			for (;;) {
				long v = strtol(s, &end, 10);
				if (end == s)
					break;
				t->nspid = (pid_t)v;
				s = end;
			}
		}
	}
	fclose(f);
	return have == 3 ? 0 : -EPROTO;
}

static long elapsed_ms(const struct timespec *t0)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

/* A copy of the agent made for one attach, inside the JVM's root: the directory we
 * made for it in the JVM's /tmp (tmpfd), by name, and the directory itself (dfd). */
struct agent_copy {
	int tmpfd, dfd;
	char name[64];
	bool sock;            /* VP_AGENT_SOCK_NAME was bound in it */
};

/* The socket on which the recorder hands the agent its descriptors (fds=). */
#define VP_AGENT_SOCK_NAME "agent.sock"

/* Removes the copy: the file through the directory we made, then that directory by its
 * name only if the name still names it. Nothing else is ever removed. */
static void agent_copy__remove(struct agent_copy *c)
{
	struct stat a, b;

	if (c->dfd >= 0) {
		unlinkat(c->dfd, VP_AGENT_COPY_NAME, 0);
		if (c->sock)
			unlinkat(c->dfd, VP_AGENT_SOCK_NAME, 0);
		if (fstat(c->dfd, &a) == 0 && fstatat(c->tmpfd, c->name, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
		    a.st_dev == b.st_dev && a.st_ino == b.st_ino)
			unlinkat(c->tmpfd, c->name, AT_REMOVEDIR);
		close(c->dfd);
	}
	if (c->tmpfd >= 0)
		close(c->tmpfd);
	c->dfd = c->tmpfd = -1;
}

/* The JVM opens the agent in its own mount namespace: if it would see a different file
 * there (a container), copy ours (in: opened by the caller, a: its stat) into a directory
 * made for it in the JVM's /tmp and return that path (as the JVM sees it) instead; c says
 * what to remove afterwards. Runs in the helper, as the JVM's user: what it makes is
 * theirs, and only where they may write. */
static int agent_visible_path(const struct target *t, const char *agent, int in, const struct stat *a, char *out,
			      size_t outlen, struct agent_copy *c, bool need_dir, char *err, size_t errlen)
{
	char there[PATH_MAX + 64];
	struct stat b;
	bool visible = false;
	c->tmpfd = c->dfd = -1;
	c->sock = false;
	snprintf(there, sizeof(there), "/proc/%d/root%s", (int)t->pid, agent);
	if (!stat(there, &b) && a->st_dev == b.st_dev && a->st_ino == b.st_ino) {
		snprintf(out, outlen, "%s", agent);
		if (!need_dir)
			return 0;
		visible = true;   /* the directory is for the socket only */
	}
	/* The JVM's root is reached through /proc (a magic link, followed on purpose), but
	 * "tmp" inside it must be a directory, not a symlink: in a chroot a user made, a
	 * link would lead us anywhere on the host. In it, a new directory of ours (mkdirat
	 * never reuses an existing name, and we check that what we open is the one we
	 * made), and in that a new file: nothing that exists is replaced or removed. */
	int fd = -1, rootfd = -1, ret = 0;
	struct stat st;
	const char *step = "opening the JVM's /tmp";
	snprintf(there, sizeof(there), "/proc/%d/root", (int)t->pid);
	rootfd = open(there, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rootfd >= 0)
		c->tmpfd = openat(rootfd, "tmp", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	/* Where others may write without the sticky bit, they could rename our directory
	 * and put theirs, with their library, in its place before the JVM loads it. */
	if (c->tmpfd >= 0 && (fstat(c->tmpfd, &st) ||
			      ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)))) {
		close(c->tmpfd);
		c->tmpfd = -1;
		errno = EPERM;
		step = "checking the JVM's /tmp (writable by others without the sticky bit)";
	}
	if (c->tmpfd >= 0)
		step = "making a directory in the JVM's /tmp";
	for (int i = 0; c->tmpfd >= 0 && c->dfd < 0 && i < 16; i++) {
		uint64_t r = 0;

		if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
			break;
		snprintf(c->name, sizeof(c->name), ".viprof-%d-%016llx", (int)t->nspid, (unsigned long long)r);
		if (mkdirat(c->tmpfd, c->name, 0700) == 0) {
			c->dfd = openat(c->tmpfd, c->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (c->dfd >= 0 && (fstat(c->dfd, &st) || st.st_uid != geteuid())) {
				/* Someone swapped it between mkdirat and openat: not ours. */
				close(c->dfd);
				c->dfd = -1;
				errno = EPERM;
				break;
			}
		} else if (errno != EEXIST) {
			break;
		}
	}
	if (c->dfd >= 0 && visible)
		goto cleanup;   /* the directory, for the socket */
	if (c->dfd >= 0) {
		step = "creating the copy";
		fd = vp_safe_create(c->dfd, VP_AGENT_COPY_NAME, 0600);
		if (fd < 0)
			errno = -fd;
	}
	if (c->dfd < 0 && visible) {
		ret = errno ? -errno : -EIO;
		vp_set_err(err, errlen, "making a directory in JVM %d's /tmp failed (%s: %s; /tmp must be a directory, "
			   "not a symlink)", (int)t->pid, step, strerror(-ret));
		goto cleanup;
	}
	snprintf(out, outlen, "/tmp/%s/" VP_AGENT_COPY_NAME, c->name);
	if (fd < 0) {
		ret = errno ? -errno : -EIO;
		vp_set_err(err, errlen, "copying the agent into JVM %d's /tmp failed (%s: %s; /tmp must be a directory of "
			   "the JVM's user may write, not a symlink); make the agent path visible inside the container",
			   (int)t->pid, step, strerror(-ret));
		goto cleanup;
	}
	char buf[65536];
	ssize_t n;
	while ((n = read(in, buf, sizeof(buf))) > 0) {
		if (write(fd, buf, (size_t)n) != n) {
			ret = -EIO;
			vp_set_err(err, errlen, "copying the agent into JVM %d's %s failed: short write; check free space in the JVM's /tmp",
				   (int)t->pid, out);
			goto cleanup;
		}
	}
cleanup:
	if (fd >= 0)
		close(fd);
	if (rootfd >= 0)
		close(rootfd);
	if (ret)
		agent_copy__remove(c);
	return ret;
}

/* HotSpot's attach trigger, .attach_pid<nspid>, in the directory (fd) where we put it. */
struct trigger {
	int dirfd;
	char name[32];
	bool made;            /* we created it: we remove it, if it is still ours */
	struct stat st;
};

/* Creates the trigger in the JVM's cwd, else in its /tmp (which must not be a symlink),
 * relative to the directory opened once, as a new file (O_EXCL|O_NOFOLLOW). A regular
 * file of that name that is there already (another attach tool's) is used as it is
 * and left alone. 0 or -errno. */
static int trigger__create(const struct target *t, struct trigger *tr)
{
	char path[64];
	int err = -ENOENT;

	snprintf(tr->name, sizeof(tr->name), ".attach_pid%d", (int)t->nspid);
	for (int i = 0; i < 2; i++) {
		int fd;

		if (i == 0) {
			snprintf(path, sizeof(path), "/proc/%d/cwd", (int)t->pid);
			tr->dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		} else {
			snprintf(path, sizeof(path), "/proc/%d/root", (int)t->pid);
			int root = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			tr->dirfd = root >= 0 ? openat(root, "tmp", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
			if (root >= 0)
				close(root);
		}
		if (tr->dirfd < 0) {
			err = -errno;
			continue;
		}
		fd = openat(tr->dirfd, tr->name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd >= 0) {
			tr->made = fstat(fd, &tr->st) == 0;
			close(fd);
			return 0;
		}
		err = -errno;
		if (errno == EEXIST && fstatat(tr->dirfd, tr->name, &tr->st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISREG(tr->st.st_mode)) {
			tr->made = false;
			return 0;
		}
		close(tr->dirfd);
		tr->dirfd = -1;
	}
	return err;
}

/* Removes the trigger only if we made it and the name still names that file. */
static void trigger__remove(struct trigger *tr)
{
	struct stat now;

	if (tr->dirfd < 0)
		return;
	if (tr->made && fstatat(tr->dirfd, tr->name, &now, AT_SYMLINK_NOFOLLOW) == 0 && now.st_dev == tr->st.st_dev &&
	    now.st_ino == tr->st.st_ino)
		unlinkat(tr->dirfd, tr->name, 0);
	close(tr->dirfd);
	tr->dirfd = -1;
}

/* JVMs that refused an attach (no attach listener within the wait): by pid and start
 * time, for the life of this process (the service's), so that they are not sent
 * SIGQUIT again: each one prints a full thread dump into the application's output when
 * the attach mechanism is off. */
#define MAX_REFUSED 256
static struct refused {
	pid_t pid;
	unsigned long long start;
	bool always;          /* its user stopped or stalled our helper: not asked again even if listening */
} refused[MAX_REFUSED];
static int nrefused;
static pthread_mutex_t refused_mu = PTHREAD_MUTEX_INITIALIZER;

/* The process's start time in clock ticks (/proc/PID/stat field 22); 0 if unknown. */
static unsigned long long start_time(pid_t pid)
{
	char path[64], buf[1024];
	unsigned long long st = 0;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	char *p = strrchr(buf, ')');   /* comm may hold spaces and parentheses */
	for (int field = 2; p && *p && field < 22; p++)
		if (*p == ' ')
			field++;
	if (p)
		st = strtoull(p, NULL, 10);
	return st;
}

/* Whether pid refused before; *always: even while it listens. */
static bool refused_before(pid_t pid, bool *always)
{
	unsigned long long st = start_time(pid);
	bool r = false;
	pthread_mutex_lock(&refused_mu);
	for (int i = 0; i < nrefused && !r; i++) {
		r = refused[i].pid == pid && refused[i].start == st;
		*always = r && refused[i].always;
	}
	pthread_mutex_unlock(&refused_mu);
	return r;
}

static void remember_refusal(pid_t pid, bool always)
{
	pthread_mutex_lock(&refused_mu);
	refused[nrefused % MAX_REFUSED] = (struct refused){ .pid = pid, .start = start_time(pid), .always = always };
	nrefused = nrefused < MAX_REFUSED ? nrefused + 1 : MAX_REFUSED;
	pthread_mutex_unlock(&refused_mu);
}

/* -XX:+DisableAttachMechanism where HotSpot reads options (JAVA_TOOL_OPTIONS,
 * JDK_JAVA_OPTIONS, the command line, _JAVA_OPTIONS; the last one wins). Such a JVM
 * never starts its attach listener: SIGQUIT would only dump its threads. */
static bool attach_disabled(pid_t pid)
{
	static const char on[] = "-XX:+DisableAttachMechanism", off[] = "-XX:-DisableAttachMechanism";
	char path[64], *buf = malloc(1 << 16);
	int state = 0;
	if (!buf)
		return false;
	static const char *const files[] = { "environ", "cmdline" };
	for (int f = 0; f < 2; f++) {
		snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, files[f]);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		size_t got = 0;
		ssize_t k;
		while (fd >= 0 && got < (1 << 16) - 1 && (k = read(fd, buf + got, (1 << 16) - 1 - got)) > 0)
			got += (size_t)k;
		if (fd >= 0)
			close(fd);
		buf[got] = '\0';
		for (size_t i = 0; i < got; i += strlen(buf + i) + 1) {
			const char *e = buf + i;
			if (f == 0 && strncmp(e, "JAVA_TOOL_OPTIONS=", 18) && strncmp(e, "JDK_JAVA_OPTIONS=", 17) &&
			    strncmp(e, "_JAVA_OPTIONS=", 14))
				continue;
			for (const char *q = e; (q = strstr(q, "-XX:")); q += 4) {
				if (!strncmp(q, on, sizeof(on) - 1))
					state = 1;
				else if (!strncmp(q, off, sizeof(off) - 1))
					state = 0;
			}
		}
	}
	free(buf);
	return state == 1;
}

/* The last setting of DisableAttachMechanism in text[0..len) (options separated by
 * spaces, as the perf data joins them): -XX:+Name / -XX:-Name / -XX:Name=true|false on
 * the command line, +Name / -Name / Name=true|false in a flags file. 1 (on), 0 (off),
 * -1 (not set). */
static int disable_flag(const char *text, size_t len)
{
	static const char name[] = "DisableAttachMechanism";
	const size_t nl = sizeof(name) - 1;
	int state = -1;
	for (size_t i = 0; i + nl <= len; i++) {
		if (memcmp(text + i, name, nl))
			continue;
		/* what precedes the name: [-XX:]+ or [-XX:]- or [-XX:] from a token's start */
		size_t b = i;
		char sign = 0;
		if (b > 0 && (text[b - 1] == '+' || text[b - 1] == '-'))
			sign = text[--b];
		if (b >= 4 && !memcmp(text + b - 4, "-XX:", 4))
			b -= 4;
		if (b > 0 && text[b - 1] != ' ')
			continue;
		const char *e = text + i + nl, *end = text + len;
		int v = -1;
		if (sign && (e == end || *e == ' '))
			v = sign == '+';
		else if (!sign && end - e >= 5 && !memcmp(e, "=true", 5) && (e + 5 == end || e[5] == ' '))
			v = 1;
		else if (!sign && end - e >= 6 && !memcmp(e, "=false", 6) && (e + 6 == end || e[6] == ' '))
			v = 0;
		if (v >= 0)
			state = v;
	}
	return state;
}

#define PERFDATA_MAX (1 << 20)

/* The entry of counter name, of type type ('B' a byte string, 'J' a long), in a HotSpot
 * perf data file (buf, len bytes; perfMemory.hpp: a 32-byte prologue, then entries of
 * 20-byte headers, native byte order): its data and its length (*vlen); NULL if the file
 * is not one or has no such counter. Every offset is checked against the entry it is
 * in: the file is the JVM user's. */
static const char *perfdata_entry(const char *buf, size_t len, const char *name, char type, size_t *vlen)
{
	static const unsigned char magic[4] = { 0xca, 0xfe, 0xc0, 0xc0 };
	uint32_t off, n, elen, noff, vl, doff;
	const uint16_t one = 1;

	if (len < 32 || memcmp(buf, magic, 4) || buf[4] != (*(const char *)&one ? 1 : 0))
		return NULL;   /* not perf data, or written in another byte order than ours */
	memcpy(&off, buf + 24, 4);
	memcpy(&n, buf + 28, 4);
	for (uint32_t i = 0; i < n && off <= len - 20; i++, off += elen) {
		memcpy(&elen, buf + off, 4);
		memcpy(&noff, buf + off + 4, 4);
		memcpy(&vl, buf + off + 8, 4);
		memcpy(&doff, buf + off + 16, 4);
		if (elen < 20 || elen > len - off)
			return NULL;
		if (noff >= elen || doff > elen || !memchr(buf + off + noff, 0, elen - noff))
			continue;
		if (buf[off + 12] != type || strcmp(buf + off + noff, name))
			continue;
		size_t dl = type == 'J' ? 8 : vl;   /* a scalar's vector length is 0 */
		if (dl > elen - doff)
			return NULL;
		*vlen = type == 'B' ? strnlen(buf + off + doff, dl) : dl;
		return buf + off + doff;
	}
	return NULL;
}

/* The JVM's perf data (<its /tmp>/hsperfdata_<user>/<nspid>, as jstat reads it) into
 * buf (PERFDATA_MAX bytes): its length, or -1 if it has none (-XX:-UsePerfData) or none
 * that is a regular file of the JVM's uid. Runs in the helper, as the JVM's user. */
static ssize_t perfdata_load(const struct target *t, char *buf)
{
	char path[64], name[32];
	int root = -1, tmp = -1;
	ssize_t got = -1;
	DIR *d = NULL;

	snprintf(path, sizeof(path), "/proc/%d/root", (int)t->pid);
	snprintf(name, sizeof(name), "%d", (int)t->nspid);
	if ((root = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0 ||
	    (tmp = openat(root, "tmp", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 || !(d = fdopendir(tmp)))
		goto cleanup;
	tmp = -1;   /* d has it */
	/* hsperfdata_<the JVM's user name as the JVM sees it>: its file of the JVM's uid */
	struct dirent *e;
	while (got < 0 && (e = readdir(d))) {
		if (strncmp(e->d_name, "hsperfdata_", 11))
			continue;
		int dd = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		int fd = dd >= 0 ? openat(dd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) : -1;
		struct stat st;
		if (dd >= 0)
			close(dd);
		if (fd < 0)
			continue;
		if (!fstat(fd, &st) && S_ISREG(st.st_mode) && st.st_uid == t->uid) {
			ssize_t k;
			got = 0;
			while (got < PERFDATA_MAX && (k = read(fd, buf + got, (size_t)(PERFDATA_MAX - got))) > 0)
				got += k;
		}
		close(fd);
	}
cleanup:
	if (d)
		closedir(d);
	if (tmp >= 0)
		close(tmp);
	if (root >= 0)
		close(root);
	return got;
}

/* -XX:+DisableAttachMechanism in the options the JVM itself parsed, as its perf data
 * records them in java.rt.vmArgs and java.rt.vmFlags: that includes options the launcher
 * took from an @argfile or a -XX:Flags= file, which neither /proc/PID/cmdline nor the
 * environment shows. Another viprof process (each remembers its own refusals) would
 * otherwise signal such a JVM again, one more thread dump in its output each time.
 * 1 (+), 0 (-), -1 (neither, or no perf data). */
static int perfdata_disabled(const char *buf, ssize_t len)
{
	static const char *const counters[] = { "java.rt.vmFlags", "java.rt.vmArgs" };
	int state = -1;

	for (int c = 0; len > 0 && c < 2; c++) {   /* the flags file first: the command line has the last word */
		size_t vl = 0;
		const char *v = perfdata_entry(buf, (size_t)len, counters[c], 'B', &vl);
		int s = v ? disable_flag(v, vl) : -1;
		if (s >= 0)
			state = s;
	}
	return state;
}

/* Whether the JVM finished creating itself (sun.rt.createVmEndTime set), 1 or 0; -1 if
 * its perf data does not say. A JVM catches SIGQUIT and runs its VM thread well before
 * JVMTI's live phase: an agent loaded by an attach before it fails GetEnv. */
static int perfdata_created(const char *buf, ssize_t len)
{
	size_t vl = 0;
	const char *v = len > 0 ? perfdata_entry(buf, (size_t)len, "sun.rt.createVmEndTime", 'J', &vl) : NULL;
	int64_t end;

	if (!v)
		return -1;
	memcpy(&end, v, sizeof(end));
	return end != 0;
}

/* The JVM's attach socket, <its /tmp>/.java_pid<nspid>, opened as a file (O_PATH, the
 * name not followed if it is a link) so that the file checked is the one connected to
 * (through /proc/self/fd). In a shared sticky /tmp anyone may create that name: only a
 * socket owned by the JVM's effective uid, as HotSpot makes it, is taken. Returns the
 * O_PATH descriptor; -ENOENT if there is none yet; -EACCES (err set) if the name is
 * someone else's or not a socket; another -errno if the JVM's /tmp cannot be opened. */
static int attach_sock__open(const struct target *t, char *err, size_t errlen)
{
	char path[64], name[32];
	struct stat st = { 0 };
	int root, tmp = -1, fd = -1, e;

	snprintf(path, sizeof(path), "/proc/%d/root", (int)t->pid);
	snprintf(name, sizeof(name), ".java_pid%d", (int)t->nspid);
	root = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root >= 0)
		tmp = openat(root, "tmp", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (tmp >= 0)
		fd = openat(tmp, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	e = fd >= 0 ? 0 : -errno;
	if (fd >= 0 && (fstat(fd, &st) || !S_ISSOCK(st.st_mode) || st.st_uid != t->uid)) {
		e = -EACCES;
		vp_set_err(err, errlen, "JVM %d's attach socket /tmp/%s is %s owned by uid %u, not a socket of the JVM's uid %u: "
			   "not used (another user may have put it there; remove it, and the next attach starts the JVM's own)",
			   (int)t->pid, name, S_ISSOCK(st.st_mode) ? "a socket" : S_ISLNK(st.st_mode) ? "a symbolic link" : "a file",
			   (unsigned)st.st_uid, (unsigned)t->uid);
		close(fd);
		fd = -1;
	}
	if (tmp >= 0)
		close(tmp);
	if (root >= 0)
		close(root);
	return fd >= 0 ? fd : e;
}

/* What the caller knows of the JVM and hands the helper, and what the helper learnt
 * (refuses). */
struct ask {
	bool refused;         /* it did not open its listener when asked before: not signalled again */
	bool disabled;        /* -XX:+DisableAttachMechanism where HotSpot reads options */
	bool refuses;         /* the attach mechanism is off, or it did not open its listener when signalled */
	const char *agent;    /* the agent's path, as the caller sees it */
	int agent_fd;         /* ... opened by the caller, read for a copy */
	struct stat agent_st;
	const char *options;
	bool need_dir;        /* a socket for the agent's descriptors (fds=) */
	int sp;               /* the helper's end of its socket pair with the caller */
};

static int agent_sock__listen(struct agent_copy *c);
static int send_fd(int sp, int fd);

/* Connects to the JVM's attach socket (sfd, O_PATH) and checks that the JVM serves it.
 * 0 (*fd connected), -ECONNREFUSED (nobody listens: a dead process's socket), or
 * another -errno with err set. */
static int attach_sock__connect(const struct target *t, int sfd, int *fd, char *err, size_t errlen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct ucred cr;
	socklen_t crl = sizeof(cr);
	int ret;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d", sfd);
	*fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (*fd < 0 || connect(*fd, (struct sockaddr *)&sa, sizeof(sa))) {
		ret = -errno;
		vp_set_err(err, errlen, "connecting to JVM %d's attach socket failed: %s; is it still running and of uid %u?",
			(int)t->pid, strerror(errno), (unsigned)t->uid);
		goto fail;
	}
	/* HotSpot listens in the JVM itself: a socket another process of the JVM's user
	 * listens on (one they put there) gets none of our paths or options. */
	if (getsockopt(*fd, SOL_SOCKET, SO_PEERCRED, &cr, &crl) || cr.pid != t->pid) {
		ret = -EACCES;
		vp_set_err(err, errlen, "JVM %d's attach socket /tmp/.java_pid%d is served by process %d, not the JVM: not used",
			   (int)t->pid, (int)t->nspid, (int)cr.pid);
		goto fail;
	}
	return 0;
fail:
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
	return ret;
}

/* Whether the socket file sfd is the one st described (the same inode). */
static bool same_file(int sfd, const struct stat *st)
{
	struct stat now;
	return !fstat(sfd, &now) && now.st_dev == st->st_dev && now.st_ino == st->st_ino;
}

/* Runs in the helper, as the target's uid/gid. Returns 0 or -errno with err set. */
static int attach_child(const struct target *t, struct ask *ask, char *err, size_t errlen)
{
	char agent[PATH_MAX], options[PATH_MAX * 2];
	struct agent_copy copy = { .tmpfd = -1, .dfd = -1 };
	struct stat dead = { 0 };
	bool have_dead = false;
	int fd = -1, ret = 0, sfd = attach_sock__open(t, err, errlen);

	/* A socket nobody listens on is a dead JVM's of the same pid (HotSpot leaves it
	 * when killed): the JVM has no listener yet, as if there were none. */
	if (sfd >= 0 && (ret = attach_sock__connect(t, sfd, &fd, err, errlen)) == -ECONNREFUSED) {
		have_dead = !fstat(sfd, &dead);
		close(sfd);
		sfd = -ENOENT;
		err[0] = '\0';
	} else if (sfd >= 0 && ret) {
		close(sfd);
		return ret;
	}
	ret = 0;
	if (sfd == -ENOENT && ask->refused) {
		err[0] = '\0';   /* said at its first refusal */
		return -EALREADY;
	}
	/* A JVM with the attach mechanism off never listens. Its perf data, when it has
	 * some, holds every option it parsed in order (JAVA_TOOL_OPTIONS, the command line
	 * with its @argfiles, the flags file): that answer has the last word. */
	char *pdata = sfd == -ENOENT ? malloc(PERFDATA_MAX) : NULL;
	ssize_t plen = pdata ? perfdata_load(t, pdata) : -1;
	if (sfd == -ENOENT) {
		int pd = perfdata_disabled(pdata, plen);
		if (pd >= 0 ? pd == 1 : ask->disabled) {
			free(pdata);
			ask->refuses = true;
			vp_set_err(err, errlen, "JVM %d runs with -XX:+DisableAttachMechanism: not signalled (start it with "
				   "-agentpath:<libviprof-jvmti.so> to name its Java methods)", (int)t->pid);
			return -EPERM;
		}
	}
	/* A JVM with no listener yet may still be creating itself: the agent waits for the
	 * live phase, as its perf data tells (CREATE_WAIT_MS at most; with no perf data, the
	 * VM thread the caller waited for is all there is to go by). */
	if (sfd == -ENOENT && pdata) {
		struct timespec t0;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		while (perfdata_created(pdata, plen) == 0 && elapsed_ms(&t0) < CREATE_WAIT_MS && !kill(t->pid, 0)) {
			usleep(20000);
			plen = perfdata_load(t, pdata);
		}
	}
	free(pdata);
	if (sfd < 0 && sfd != -ENOENT) {
		if (sfd != -EACCES)
			vp_set_err(err, errlen, "cannot open JVM %d's /tmp: %s; it must be a directory, not a symbolic link "
				   "(the JVM is not signalled)", (int)t->pid, strerror(-sfd));
		return sfd;
	}
	if (sfd == -ENOENT) {
		/* Start the listener: the JVM looks for the trigger in its cwd, then its /tmp.
		 * Its socket replaces a dead one (rename): it is the one of another inode. */
		struct trigger tr;
		if ((ret = trigger__create(t, &tr))) {
			vp_set_err(err, errlen, "cannot create the attach trigger .attach_pid%d in JVM %d's cwd or /tmp: %s; "
				   "check the JVM's /tmp", (int)t->nspid, (int)t->pid, strerror(-ret));
			return ret;
		}
		if (kill(t->pid, SIGQUIT)) {
			ret = -errno;
			vp_set_err(err, errlen, "signalling JVM %d failed: %s", (int)t->pid, strerror(errno));
			trigger__remove(&tr);
			return ret;
		}
		struct timespec t0;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		while ((sfd = attach_sock__open(t, err, errlen)) == -ENOENT || (sfd >= 0 && have_dead && same_file(sfd, &dead))) {
			if (sfd >= 0)
				close(sfd);
			if (elapsed_ms(&t0) > LISTENER_WAIT_MS || kill(t->pid, 0)) {
				trigger__remove(&tr);
				ask->refuses = true;
				vp_set_err(err, errlen,
					"JVM %d did not open its attach socket within %d s: it probably runs with -XX:+DisableAttachMechanism "
					"(restart it without, or start it with -agentpath:<libviprof-jvmti.so>=dir=<dir>)",
					(int)t->pid, LISTENER_WAIT_MS / 1000);
				return -ETIMEDOUT;
			}
			usleep(20000);
		}
		trigger__remove(&tr);
		if (sfd >= 0 && (ret = attach_sock__connect(t, sfd, &fd, err, errlen))) {
			close(sfd);
			return ret;
		}
	}
	if (sfd < 0) {
		if (sfd != -EACCES)
			vp_set_err(err, errlen, "cannot open JVM %d's /tmp/.java_pid%d: %s; the JVM's /tmp must be a directory, "
				   "not a symbolic link", (int)t->pid, (int)t->nspid, strerror(-sfd));
		return sfd;
	}

	/* The JVM listens, and we are connected (fd): the agent where it can open it, and
	 * the socket for its descriptors, whose listening end goes to the caller (who
	 * serves it). */
	if ((ret = agent_visible_path(t, ask->agent, ask->agent_fd, &ask->agent_st, agent, sizeof(agent), &copy,
				      ask->need_dir, err, errlen)))
		goto cleanup;
	snprintf(options, sizeof(options), "%s", ask->options ? ask->options : "");
	if (ask->need_dir) {
		int ls = agent_sock__listen(&copy);
		if (ls < 0 || (ret = send_fd(ask->sp, ls))) {
			ret = ls < 0 ? ls : ret;
			vp_set_err(err, errlen, "making the agent's socket in JVM %d's /tmp/%s failed: %s", (int)t->pid,
				   copy.name, strerror(-ret));
			if (ls >= 0)
				close(ls);
			goto cleanup;
		}
		close(ls);
		size_t ol = strlen(options);
		snprintf(options + ol, sizeof(options) - ol, "%sfds=/tmp/%s/" VP_AGENT_SOCK_NAME, ol ? "," : "", copy.name);
	}

	char req[PATH_MAX * 3];
	int n = snprintf(req, sizeof(req), "1%cload%c%s%ctrue%c%s%c", 0, 0, agent, 0, 0, options, 0);
	if (n <= 0 || (size_t)n >= sizeof(req)) {
		ret = -ENAMETOOLONG;
		vp_set_err(err, errlen, "agent path and options are too long");
		goto cleanup;
	}
	if (write(fd, req, (size_t)n) != n) {
		ret = -EIO;
		vp_set_err(err, errlen, "sending the load command to JVM %d failed: %s", (int)t->pid, strerror(errno));
		goto cleanup;
	}
	char resp[2048];
	size_t got = 0;
	ssize_t k;
	while (got < sizeof(resp) - 1 && (k = read(fd, resp + got, sizeof(resp) - 1 - got)) > 0)
		got += (size_t)k;
	resp[got] = '\0';
	char *nl = strchr(resp, '\n');
	for (char *p = resp; *p; p++)
		if (*p == '\n' && p[1])
			*p = ' ';
	resp[strcspn(resp, "\n")] = '\0';
	if (!got || atoi(resp) != 0) {
		ret = -EPROTO;
		vp_set_err(err, errlen, "JVM %d refused the load command: \"%s\"; check that the JVM can read %s", (int)t->pid,
			got ? resp : "(no answer)", agent);
		goto cleanup;
	}
	/* After the result code: the agent's return, as "N" (JDK <= 20) or "return code: N". */
	const char *rc = nl ? nl + 1 : "";
	const char *colon = strrchr(rc, ':');
	if (colon)
		rc = colon + 1;
	if (*rc && atoi(rc) != 0) {
		ret = -ENOEXEC;
		vp_set_err(err, errlen, "the viprof agent failed to start in JVM %d (%s); its own one-line reason is on the JVM's stderr",
			(int)t->pid, resp);
	}
cleanup:
	if (fd >= 0)
		close(fd);
	close(sfd);
	/* The JVM has mapped the copy by now (the load command returns after dlopen) and
	 * the agent has its descriptors, or never will: either way the copy goes. */
	agent_copy__remove(&copy);
	return ret;
}

/* The socket the agent connects to for its descriptors: bound by the helper (as the
 * JVM's user) in its directory in the JVM's /tmp (through /proc/self/fd, so that no path
 * the container's owner controls is resolved), 0600. Returns the listening fd
 * (non-blocking) or -errno. */
static int agent_sock__listen(struct agent_copy *c)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), e = 0;

	if (s < 0)
		return -errno;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/" VP_AGENT_SOCK_NAME, c->dfd);
	if (bind(s, (struct sockaddr *)&sa, sizeof(sa))) {
		e = -errno;
		goto cleanup;
	}
	c->sock = true;
	if (fchmodat(c->dfd, VP_AGENT_SOCK_NAME, 0600, 0) || listen(s, 4)) {
		e = -errno;
		goto cleanup;
	}
	return s;
cleanup:
	close(s);
	return e;
}

/* Hands fd to the caller, over the helper's socket pair. 0 or -errno. */
static int send_fd(int sp, int fd)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} cm;
	char tag = 'L';
	struct iovec iov = { .iov_base = &tag, .iov_len = 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf, .msg_controllen = sizeof(cm.buf) };
	struct cmsghdr *h = CMSG_FIRSTHDR(&mh);
	ssize_t k;

	memset(cm.buf, 0, sizeof(cm.buf));
	h->cmsg_level = SOL_SOCKET;
	h->cmsg_type = SCM_RIGHTS;
	h->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(h), &fd, sizeof(int));
	while ((k = sendmsg(sp, &mh, MSG_NOSIGNAL)) < 0 && errno == EINTR)
		;
	return k == 1 ? 0 : k < 0 ? -errno : -EIO;
}

/* One message from the helper: its text into buf (NUL-terminated), and a descriptor it
 * sent into *fd (else -1). The message's length, 0 at its end, or -errno. */
static ssize_t recv_helper(int sp, char *buf, size_t len, int *fd)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} cm;
	struct iovec iov = { .iov_base = buf, .iov_len = len - 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf, .msg_controllen = sizeof(cm.buf) };
	ssize_t k = recvmsg(sp, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);

	*fd = -1;
	if (k < 0)
		return -errno;
	buf[k] = '\0';
	for (struct cmsghdr *h = CMSG_FIRSTHDR(&mh); h; h = CMSG_NXTHDR(&mh, h))
		if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS && h->cmsg_len == CMSG_LEN(sizeof(int)))
			memcpy(fd, CMSG_DATA(h), sizeof(int));
	return k;
}

/* One connection on the agent's socket: only the target JVM itself (its pid, as the
 * kernel translates it into ours) gets the descriptors; anyone else is hung up on. */
static int agent_sock__serve(int ls, pid_t pid, const int *fds, int nfds)
{
	int cs = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
	struct ucred cr;
	socklen_t crl = sizeof(cr);
	bool sent = false;

	if (cs < 0)
		return -1;
	if (!getsockopt(cs, SOL_SOCKET, SO_PEERCRED, &cr, &crl) && cr.pid == pid) {
		union {
			struct cmsghdr h;
			char buf[CMSG_SPACE(4 * sizeof(int))];
		} cm;
		char byte = 'F';
		struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf,
				     .msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int)) };
		struct cmsghdr *h = CMSG_FIRSTHDR(&mh);

		memset(cm.buf, 0, sizeof(cm.buf));
		h->cmsg_level = SOL_SOCKET;
		h->cmsg_type = SCM_RIGHTS;
		h->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
		memcpy(CMSG_DATA(h), fds, (size_t)nfds * sizeof(int));
		ssize_t k;
		while ((k = sendmsg(cs, &mh, MSG_NOSIGNAL)) < 0 && errno == EINTR)
			;
		sent = k == 1;
	}
	if (sent)
		return cs;   /* the agent's channel: the caller keeps or closes it */
	close(cs);
	return -1;
}

int vp_jvm__send_session(int chan, const char *options, const int *fds, int nfds, int timeout_ms)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(4 * sizeof(int))];
	} cm;
	struct iovec iov = { .iov_base = (void *)options, .iov_len = strlen(options) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf,
			     .msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int)) };
	struct cmsghdr *h = CMSG_FIRSTHDR(&mh);
	char ack = 1;
	ssize_t k;

	if (nfds < 1 || nfds > 4 || !iov.iov_len)
		return -EINVAL;
	memset(cm.buf, 0, sizeof(cm.buf));
	h->cmsg_level = SOL_SOCKET;
	h->cmsg_type = SCM_RIGHTS;
	h->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
	memcpy(CMSG_DATA(h), fds, (size_t)nfds * sizeof(int));
	/* Never blocks: an agent that stopped reading its channel is attached again. */
	while ((k = sendmsg(chan, &mh, MSG_NOSIGNAL | MSG_DONTWAIT)) < 0 && errno == EINTR)
		;
	if (k != (ssize_t)iov.iov_len)
		return k < 0 ? -errno : -EIO;
	/* The agent answers once its new map is open and its live code replayed; a stop
	 * of the service (vp_jvm__abort_all) does not wait for it. */
	struct pollfd pf[2] = { { .fd = chan, .events = POLLIN }, { .fd = abort_pollfd(), .events = POLLIN } };
	int r;
	while ((r = poll(pf, 2, timeout_ms)) < 0 && errno == EINTR)
		;
	if (r == 0)
		return -ETIMEDOUT;
	if (pf[1].revents)
		return -ECANCELED;
	while ((k = recv(chan, &ack, 1, 0)) < 0 && errno == EINTR)
		;
	if (k != 1)
		return k < 0 ? -errno : -ECONNRESET;
	return ack == 0 ? 0 : -EPROTO;
}

int vp_jvm__end_sessions(const int *chans, int n, int timeout_ms)
{
	struct pollfd *pf = calloc((size_t)n + 1, sizeof(*pf));
	int sent = 0, answered = 0;

	if (!pf)
		return 0;   /* the agents end their maps at their next look at the lock */
	/* A channel is the agent's, in a JVM its user controls: one that does not read,
	 * or does not answer, costs this wait and nothing more. */
	for (int i = 0; i < n; i++) {
		ssize_t k;
		while ((k = send(chans[i], "end", 3, MSG_NOSIGNAL | MSG_DONTWAIT)) < 0 && errno == EINTR)
			;
		if (k == 3)
			pf[sent++] = (struct pollfd){ .fd = chans[i], .events = POLLIN };
	}
	pf[sent] = (struct pollfd){ .fd = abort_pollfd(), .events = POLLIN };
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int left = sent; left > 0;) {
		struct timespec t;
		clock_gettime(CLOCK_MONOTONIC, &t);
		long ms = timeout_ms - ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
		int r = ms > 0 ? poll(pf, (nfds_t)sent + 1, (int)ms) : 0;
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0 || pf[sent].revents)
			break;
		for (int i = 0; i < sent; i++) {
			if (pf[i].fd < 0 || !pf[i].revents)
				continue;
			char ack = 1;
			if (recv(pf[i].fd, &ack, 1, MSG_DONTWAIT) == 1 && ack == 0)
				answered++;
			pf[i].fd = -1;   /* answered, refused or gone: not waited for again */
			left--;
		}
	}
	free(pf);
	return answered;
}

int vp_jvm__attach(pid_t pid, const char *agent_path, const char *options, char *err, size_t errlen)
{
	return vp_jvm__attach_fds(pid, agent_path, options, NULL, 0, NULL, err, errlen);
}

/* The checks before anything is asked of process pid, in this order: it exists, we may
 * act on it (its uid, or root), it is a HotSpot JVM, and the descriptors are few. */
static int check_target(pid_t pid, struct target *t, int nfds, char *err, size_t errlen)
{
	int ret = read_target(pid, t);
	if (ret == -ESRCH || ret == -ENOENT)
		return vp_err_no_process(err, errlen, (long)pid);
	if (ret) {
		vp_set_err(err, errlen, "process %d: %s; check the pid", (int)pid, strerror(-ret));
		return ret;
	}
	/* The uid check comes first: another user's /proc/PID/maps is not readable. */
	if (geteuid() != 0 && geteuid() != t->uid) {
		vp_set_err(err, errlen, "process %d runs as uid %u and we are uid %u; run viprof as that user or as root",
			(int)pid, (unsigned)t->uid, (unsigned)geteuid());
		return -EPERM;
	}
	if (!vp_jvm__is_hotspot(pid)) {
		vp_set_err(err, errlen, "process %d is not a HotSpot JVM (no mapped libjvm.so exporting HotSpot's VM structure table, "
			   "or no 'VM Thread'); it is not signalled: attach works for HotSpot/OpenJDK only", (int)pid);
		return -ESRCH;
	}
	if (nfds < 0 || nfds > 4) {
		vp_set_err(err, errlen, "internal: %d descriptors for the agent (at most 4)", nfds);
		return -EINVAL;
	}
	return 0;
}

/* The forked helper: becomes the JVM's user, asks the JVM, and sends the result on
 * sp[1]. Never returns. */
static _Noreturn void run_helper(pid_t pid, const struct target *t, struct ask *ask, int sp[2])
{
	char msg[1024] = "";
	int r = 0;
	close(sp[0]);
	ask->sp = sp[1];
	alarm(HELPER_ALARM_S);   /* a JVM that never answers must not hang us */
	/* The JVM's user, wholly: ids, groups (none of ours), so that what it makes
	 * in the JVM's /tmp and cwd is theirs and where they may write. */
	if (geteuid() == 0 && (t->uid != 0 || t->gid != 0)) {
		if (setgroups(0, NULL) || setresgid(t->gid, t->gid, t->gid) || setresuid(t->uid, t->uid, t->uid)) {
			r = -errno;
			snprintf(msg, sizeof(msg), "switching to JVM %d's uid %u/gid %u failed: %s", (int)pid,
				 (unsigned)t->uid, (unsigned)t->gid, strerror(errno));
		}
	}
	if (!r)
		r = attach_child(t, ask, msg, sizeof(msg));
	/* The result, and whether the JVM is not to be signalled again: it has the
	 * attach mechanism off, or did not open its listener when signalled. */
	char out[1100];
	int n = snprintf(out, sizeof(out), "%d\t%c%s", r, ask->refuses ? 'R' : '-', msg);
	if (n >= (int)sizeof(out))
		n = (int)sizeof(out) - 1;
	if (n < 0 || send(sp[1], out, (size_t)n, MSG_NOSIGNAL) < 0)
		_exit(2);
	_exit(0);
}

/* How the wait for the helper ended, and its answer ("result\t[R-]message"). */
struct helper_wait {
	char buf[1100];
	size_t got;
	bool eof, late, cancelled;
};

/* While the helper speaks the attach protocol, the agent (loading in the JVM) comes
 * for its descriptors: both are served until the helper is done, its deadline
 * passes, or the service stops. *ls gets the helper's listening socket, *cs the
 * agent's channel. */
static void serve_helper(struct helper_wait *w, int sp0, pid_t pid, const int *fds, int nfds, int *ls, int *cs)
{
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (!w->eof) {
		struct pollfd pf[3] = { { .fd = sp0, .events = POLLIN }, { .fd = abort_pollfd(), .events = POLLIN },
					{ .fd = *ls, .events = POLLIN } };
		long left = HELPER_DEADLINE_MS - elapsed_ms(&t0);

		if (left <= 0) {
			w->late = true;
			break;
		}
		if (poll(pf, *ls >= 0 ? 3 : 2, (int)left) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pf[1].revents) {
			w->cancelled = true;
			break;
		}
		if (*ls >= 0 && (pf[2].revents & POLLIN)) {
			int c = agent_sock__serve(*ls, pid, fds, nfds);
			if (c >= 0 && *cs < 0)
				*cs = c;
			else if (c >= 0)
				close(c);
		}
		if (!pf[0].revents)
			continue;
		char m[sizeof(w->buf)];
		int fd;
		ssize_t k = recv_helper(sp0, m, sizeof(m), &fd);
		if (k == -EINTR || k == -EAGAIN)
			continue;
		w->eof = k == 0;
		if (k < 0)
			break;
		if (fd >= 0 && *ls < 0 && m[0] == 'L' && nfds > 0)
			*ls = fd;   /* the helper's listening socket (non-blocking) */
		else if (fd >= 0)
			close(fd);
		else if (k > 0 && !w->got)
			w->got = (size_t)snprintf(w->buf, sizeof(w->buf), "%s", m);
	}
}

int vp_jvm__attach_fds(pid_t pid, const char *agent_path, const char *options, const int *fds, int nfds,
		       int *chan, char *err, size_t errlen)
{
	struct target t = { 0 };
	int ls = -1, cs = -1, sp[2] = { -1, -1 };
	if (chan)
		*chan = -1;
	int ret = check_target(pid, &t, nfds, err, errlen);
	if (ret)
		return ret;
	/* Not asked at all where the answer is known: no SIGQUIT, no 5 s wait. Whether
	 * its listener is up the helper sees, as the JVM's user: the caller resolves no
	 * name in the JVM's /tmp. */
	bool always = false;
	struct ask ask = { .refused = refused_before(pid, &always), .agent = agent_path, .options = options,
			   .need_dir = nfds > 0, .agent_fd = -1 };
	if (always) {
		err[0] = '\0';   /* said at its first refusal */
		return -EALREADY;
	}
	if (aborted()) {
		vp_set_err(err, errlen, "JVM %d: not attached: the service is stopping", (int)pid);
		return -ECANCELED;
	}
	ask.disabled = !ask.refused && attach_disabled(pid);
	/* The agent is opened here, with our rights; the helper reads it for a copy. */
	ask.agent_fd = open(agent_path, O_RDONLY | O_CLOEXEC);
	if (ask.agent_fd < 0 || fstat(ask.agent_fd, &ask.agent_st)) {
		ret = -errno;
		vp_set_err(err, errlen, "agent %s: %s; build it (target viprof-jvmti) or set VIPROF_AGENT", agent_path,
			   strerror(-ret));
		goto cleanup;
	}
	/* Datagrams: the listening socket for the agent's descriptors (with its fd), then
	 * the result; its end when the helper exits. */
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp)) {
		ret = -errno;
		vp_set_err(err, errlen, "socketpair: %s", strerror(errno));
		goto cleanup;
	}
	pid_t child = fork();
	if (child < 0) {
		ret = -errno;
		vp_set_err(err, errlen, "fork: %s", strerror(errno));
		goto cleanup;
	}
	if (child == 0)
		run_helper(pid, &t, &ask, sp);
	close(sp[1]);
	sp[1] = -1;
	close(ask.agent_fd);
	ask.agent_fd = -1;
	struct helper_wait hw = { .buf = "" };
	serve_helper(&hw, sp[0], pid, fds, nfds, &ls, &cs);
	bool late = hw.late;
	size_t got = hw.got;
	char *buf = hw.buf;
	/* A helper whose socket is closed is exiting (it cannot be stopped any more); any
	 * other is killed, stopped or not, so that the wait below ends. */
	if (!hw.eof)
		kill(child, SIGKILL);
	int status = 0;
	while (waitpid(child, &status, 0) < 0 && errno == EINTR)
		;
	char *tab = strchr(buf, '\t');
	if (hw.cancelled) {
		vp_set_err(err, errlen, "JVM %d: attach abandoned: the service is stopping", (int)pid);
		ret = -ECANCELED;
		goto cleanup;
	}
	if (late || !got || !tab) {
		if (late)
			vp_set_err(err, errlen, "the attach helper process (as uid %u) did not finish within %d s (stopped or "
				   "stuck) and was killed; JVM %d is not asked again by this process", (unsigned)t.uid,
				   HELPER_DEADLINE_MS / 1000, (int)pid);
		else
			vp_set_err(err, errlen, "the attach helper process died (%s); JVM %d may not answer its attach socket",
				   WIFSIGNALED(status) ? strsignal(WTERMSIG(status)) : "no answer", (int)pid);
		ret = -ETIMEDOUT;
		/* It may have signalled the JVM: not again. One whose user stopped our
		 * helper is not asked again at all, listening or not. */
		remember_refusal(pid, late);
		goto cleanup;
	}
	ret = atoi(buf);
	if (ret)
		vp_set_err(err, errlen, "%s", tab[1] ? tab + 2 : "");
	if (tab[1] == 'R')
		remember_refusal(pid, false);
cleanup:
	for (int i = 0; i < 2; i++)
		if (sp[i] >= 0)
			close(sp[i]);
	if (ask.agent_fd >= 0)
		close(ask.agent_fd);
	if (ls >= 0)
		close(ls);
	if (cs >= 0 && chan && ret == 0)
		*chan = cs;
	else if (cs >= 0)
		close(cs);
	return ret;
}
