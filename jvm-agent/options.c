/* The agent's options: see jvm-agent/options.h. */
#define _GNU_SOURCE
#include "jvm-agent/options.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "jvm-agent/stats.h"
#include "jvm-agent/vthread.h"
#include "jvm-agent/walk.h"

/* -XX:[+-]PreserveFramePointer in one whitespace- or NUL-separated list; last one wins. */
static void scan_fp(const char *s, size_t len, int *state)
{
	static const char on[] = "-XX:+PreserveFramePointer", off[] = "-XX:-PreserveFramePointer";
	for (size_t i = 0; i + sizeof(on) - 1 <= len; i++) {
		if (i > 0 && s[i - 1] != '\0' && s[i - 1] != ' ' && s[i - 1] != '\t')
			continue;
		if (!memcmp(s + i, on, sizeof(on) - 1))
			*state = 1;
		else if (!memcmp(s + i, off, sizeof(off) - 1))
			*state = 0;
	}
}

bool vp_agent_opts__frame_pointers(void)
{
	int state = 0;
	const char *env = getenv("JAVA_TOOL_OPTIONS");
	if (env)
		scan_fp(env, strlen(env), &state);
	if ((env = getenv("JDK_JAVA_OPTIONS")))
		scan_fp(env, strlen(env), &state);
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		char buf[65536];
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n > 0)
			scan_fp(buf, (size_t)n, &state);
		close(fd);
	}
	if ((env = getenv("_JAVA_OPTIONS")))
		scan_fp(env, strlen(env), &state);
	return state == 1;
}

/* The measurement options (docs/benchmarks.md): stats, noop, inline=no; gcwalk=no and
 * the code source (jit=events, jit=scan, scancheck) are walk.c's. */
static bool measure_option(const char *p, size_t len)
{
	return vp_stats__option(p, len) || vp_scan__option(p, len);
}

/* fds=SOCKET: connects to the recorder's socket (made for this attach, in a directory
 * of the recorder's in our /tmp) and takes the two descriptors it sends: the session's
 * jit/<pid> directory and its lock file. The directory must be ours and closed to
 * others, as the one we would make ourselves; the lock a regular file. Runs on the
 * attaching thread, which the recorder answers while it waits for the attach; a
 * recorder that does not answer within 5 s fails the attach. 0 or -errno. */
static int receive_fds(struct vp_agent_opts *o)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(2 * sizeof(int))];
	} cm;
	char byte;
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf, .msg_controllen = sizeof(cm.buf) };
	struct timeval tv = { .tv_sec = 5 };
	struct stat st;
	int s = -1, err = 0, got[2] = { -1, -1 }, ngot = 0;

	if (strlen(o->sock) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, o->sock);
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0 || setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) ||
	    connect(s, (struct sockaddr *)&sa, sizeof(sa))) {
		err = -errno;
		goto cleanup;
	}
	ssize_t n = recvmsg(s, &mh, MSG_CMSG_CLOEXEC);
	if (n <= 0) {
		err = n < 0 ? -errno : -ECONNRESET;
		goto cleanup;
	}
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (ngot < 2)
				got[ngot++] = fd;
			else
				close(fd);
		}
	}
	if (ngot != 2 || (mh.msg_flags & MSG_CTRUNC)) {
		err = -EPROTO;
		goto cleanup;
	}
	if (fstat(got[0], &st) || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 0022) ||
	    fstat(got[1], &st) || !S_ISREG(st.st_mode)) {
		err = -EACCES;
		goto cleanup;
	}
	o->map_fd = got[0];
	o->lock_fd = got[1];
	got[0] = got[1] = -1;
	o->chan_fd = s;
	s = -1;
cleanup:
	for (int i = 0; i < 2; i++)
		if (got[i] >= 0)
			close(got[i]);
	if (s >= 0)
		close(s);
	return err;
}

int vp_agent_opts__parse(const char *options, struct vp_agent_opts *o)
{
	vp_stats__env(getenv("VIPROF_AGENT_STATS"));
	memset(o, 0, sizeof(*o));
	o->map_fd = o->lock_fd = o->chan_fd = -1;
	vp_vthread__option(NULL, 0);   /* each session says whether it wants virtual threads */
	o->locks = -1;
	if (!options)
		options = "";
	const char *p = options;
	while (*p) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		char *dst = NULL;
		size_t skip = 0;
		if (len > 4 && !strncmp(p, "dir=", 4)) {
			dst = o->dir;
			skip = 4;
		} else if (len > 5 && !strncmp(p, "lock=", 5)) {
			dst = o->lock;
			skip = 5;
		} else if (len > 4 && !strncmp(p, "fds=", 4)) {
			dst = o->sock;
			skip = 4;
		} else if (len > 6 && !strncmp(p, "locks=", 6)) {
			char *e;
			long long v = strtoll(p + 6, &e, 10);
			if ((e != p + len) || v < 0)
				return -EINVAL;
			o->locks = v;
		} else if (len > 6 && !strncmp(p, "alloc=", 6)) {
			char num[24];
			snprintf(num, sizeof(num), "%.*s", (int)(len - 6 < 23 ? len - 6 : 23), p + 6);
			char *e;
			unsigned long long v = strtoull(num, &e, 10);
			if (*e || !v)
				return -EINVAL;
			o->alloc = v;
		} else if (measure_option(p, len) || vp_vthread__option(p, len)) {
			/* taken */
		} else if (len) {
			return -EINVAL;
		}
		if (dst) {
			if (len - skip >= PATH_MAX)
				return -ENAMETOOLONG;
			memcpy(dst, p + skip, len - skip);
			dst[len - skip] = '\0';
		}
		p += len + (end ? 1 : 0);
	}
	if (o->sock[0]) {
		int e = receive_fds(o);

		if (e) {
			fprintf(stderr, "viprof agent: receiving the session's directory from the recorder on %s failed: %s\n",
				o->sock, strerror(-e));
			return e;
		}
	}
	if (!o->dir[0]) {
		snprintf(o->dir, sizeof(o->dir), "/tmp/viprof-jit-%u", (unsigned)geteuid());
		o->default_dir = true;
	}
	vp_vthread__start(NULL, NULL);       /* a later session's: the first one's starts in setup */
	return 0;
}
