/* Whom a local peer counts against: see userns.h. */
#define _GNU_SOURCE
#include "common/userns.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/nsfs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"

/* linux/pidfd.h of Linux 6.11; older headers lack it (older kernels answer ENOTTY). */
#ifndef PIDFD_GET_USER_NAMESPACE
#define PIDFD_GET_USER_NAMESPACE _IO(0xFF, 9)
#endif

#define VP_USERNS_MAX_DEPTH 40   /* the kernel allows 32 levels */

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

int vp_userns__owner(int nsfd, uid_t *owner)
{
	struct stat self, st;
	int e = 0, cur = -1;

	if (stat("/proc/self/ns/user", &self) || fstat(nsfd, &st))
		return -errno;
	if (same_file(&st, &self))
		return -ENOENT;
	cur = fcntl(nsfd, F_DUPFD_CLOEXEC, 0);
	if (cur < 0)
		return -errno;
	/* Up to the namespace whose parent is ours: its creator is one of our uids, the
	 * user who started the whole tree below (a namespace's own creator further down
	 * is one of that user's subordinate uids). */
	for (int depth = 0;; depth++) {
		if (depth == VP_USERNS_MAX_DEPTH) {
			e = -ELOOP;
			goto cleanup;
		}
		int parent = ioctl(cur, NS_GET_PARENT);
		if (parent < 0) {
			/* EPERM: its parent is not below ours, so neither is it (a service in
			 * a namespace of its own, a peer outside it): not ours to judge. */
			e = -errno;
			goto cleanup;
		}
		bool top = fstat(parent, &st) == 0 && same_file(&st, &self);
		if (top) {
			close(parent);
			break;
		}
		close(cur);
		cur = parent;
	}
	uid_t uid;
	if (ioctl(cur, NS_GET_OWNER_UID, &uid) != 0) {
		e = -errno;
		goto cleanup;
	}
	*owner = uid;
cleanup:
	close(cur);
	return e;
}

int vp_subuid__owner(const char *path, uid_t uid, uid_t *owner)
{
	char line[512];
	FILE *f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? -ENOENT : -errno;
	int e = -ENOENT;
	while (fgets(line, sizeof(line), f)) {
		char name[256];
		unsigned long long start, count;
		/* subuid(5): "login:start:count"; the login may be a numeric uid. */
		if (sscanf(line, "%255[^:\n]:%llu:%llu", name, &start, &count) != 3 || !count ||
		    (unsigned long long)uid < start || (unsigned long long)uid - start >= count)
			continue;
		struct passwd pw, *pwp = NULL;
		char buf[2048];
		long long n = vp_parse_num(name, 0, UINT32_MAX - 1ll);
		if (getpwnam_r(name, &pw, buf, sizeof(buf), &pwp) == 0 && pwp) {
			*owner = pw.pw_uid;
			e = 0;
		} else if (n >= 0) {
			*owner = (uid_t)n;
			e = 0;
		}
		break;
	}
	fclose(f);
	return e;
}

/* The user namespace of the process held by pidfd, as a descriptor: asked of the
 * pidfd itself (Linux 6.11), else opened by its pid and confirmed to be the same
 * process's afterwards (a pid may be reused once its process is reaped; a pidfd
 * becomes readable when its process exits). -errno when the process is gone. */
static int pidfd_userns(int pidfd)
{
	int ns = ioctl(pidfd, PIDFD_GET_USER_NAMESPACE, 0);
	if (ns >= 0)
		return ns;
	char path[64], line[128];
	pid_t pid = 0;
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
	FILE *f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "Pid: %d", &pid) == 1)
			break;
	if (f)
		fclose(f);
	if (pid <= 0)
		return -ESRCH;
	snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
	ns = open(path, O_RDONLY | O_CLOEXEC);
	if (ns < 0)
		return -errno;
	struct pollfd p = { .fd = pidfd, .events = POLLIN };
	if (poll(&p, 1, 0) != 0) {
		close(ns);
		return -ESRCH;
	}
	return ns;
}

uid_t vp_userns__accountable(uid_t uid, int pidfd)
{
	uid_t owner;
	if (uid == 0)
		return 0;
	if (pidfd >= 0) {
		int ns = pidfd_userns(pidfd);
		if (ns >= 0) {
			int e = vp_userns__owner(ns, &owner);
			close(ns);
			if (!e && owner != 0)
				return owner;
		}
	}
	if (vp_subuid__owner(VP_SUBUID_FILE, uid, &owner) == 0 && owner != 0)
		return owner;
	return uid;
}
