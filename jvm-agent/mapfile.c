/* Where a session's map goes and when the session ends (jvm-agent/mapfile.h). */
#define _GNU_SOURCE
#include "jvm-agent/mapfile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/safefs.h"
#include "jvm-agent/stats.h"
#include "maps/codemap_format.h"
#include "maps/codemap_writer.h"

static struct {
	char dir[PATH_MAX];
	char path[PATH_MAX + 32];
	bool default_dir;      /* no dir= option: the per-user default under /tmp */
	/* The session's end: a recorder holds lock_path locked while it records. */
	char lock_path[PATH_MAX];
	int lock_fd;
	uint64_t lock_checked;
	/* Handed over by the recorder (fds=), taken by vp_mapfile__watch and __open; -1 if none. */
	int given_map_fd, given_lock_fd;
} mf = { .lock_fd = -1, .given_map_fd = -1, .given_lock_fd = -1 };

void vp_mapfile__use(const char *dir, const char *lock, bool default_dir, int map_fd, int lock_fd)
{
	snprintf(mf.dir, sizeof(mf.dir), "%s", dir);
	snprintf(mf.lock_path, sizeof(mf.lock_path), "%s", lock);
	mf.default_dir = default_dir;
	if (mf.given_map_fd >= 0)
		close(mf.given_map_fd);
	if (mf.given_lock_fd >= 0)
		close(mf.given_lock_fd);
	mf.given_map_fd = map_fd;
	mf.given_lock_fd = lock_fd;
}

void vp_mapfile__unwatch(void)
{
	if (mf.lock_fd >= 0)
		close(mf.lock_fd);
	mf.lock_fd = -1;
}

const char *vp_mapfile__path(void)
{
	return mf.path;
}

const char *vp_mapfile__dir(void)
{
	return mf.dir;
}

/* Opens the file the recorder holds locked while its session lasts (lock=). Without
 * one (the JVM's own -agentpath, `viprof attach`) a session lasts until the next. */
void vp_mapfile__watch(void)
{
	struct stat st;

	if (mf.lock_fd >= 0)
		close(mf.lock_fd);
	mf.lock_fd = -1;
	if (mf.given_lock_fd >= 0) {
		/* The recorder's own lock file, opened by it for us: no path to resolve. */
		mf.lock_fd = mf.given_lock_fd;
		mf.given_lock_fd = -1;
	} else if (!mf.lock_path[0]) {
		return;
	} else {
		mf.lock_fd = open(mf.lock_path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	}
	if (mf.lock_fd >= 0 && (fstat(mf.lock_fd, &st) || !S_ISREG(st.st_mode))) {
		close(mf.lock_fd);
		mf.lock_fd = -1;
		errno = EINVAL;
	}
	if (mf.lock_fd < 0)
		fprintf(stderr, "viprof agent: cannot watch the recording's lock file %s: %s; this session's code map "
			"goes on after the recording ends, until the next attach\n", mf.lock_path, strerror(errno));
}

/* Has the recorder let go of its lock (stopped, or was killed: the kernel releases it)?
 * Asked at most twice a second unless now (the recorder said "end"), with a lock
 * attempt that never blocks. */
bool vp_mapfile__ended(bool now)
{
	if (mf.lock_fd < 0)
		return false;
	uint64_t t = now_ns();
	if (!now && t - mf.lock_checked < 500000000ull)
		return false;
	mf.lock_checked = t;
	if (flock(mf.lock_fd, LOCK_SH | LOCK_NB) == 0) {
		flock(mf.lock_fd, LOCK_UN);
		return true;
	}
	return errno != EWOULDBLOCK && errno != EINTR;
}

/* Opens the map directory. It is walked one component at a time without following a
 * symlink that a user other than root or us could have made (a dir= path an
 * administrator wrote, with /var/run -> /run in it, opens), missing directories made
 * 0700 on the way; it must be ours or root's and not open to others' writes (unless
 * sticky): a JVM running as root must not write where another user points it. The
 * default, /tmp/viprof-jit-<uid>, is the user's own: no link at all, a directory of ours,
 * made 0700; one a user planted is refused. Returns the fd or -errno. */
static int open_map_dir(void)
{
	struct stat st;
	int dfd;

	if (mf.default_dir) {
		int tmp = vp_safe_opendir("/tmp", 0);

		if (tmp < 0)
			return tmp;
		dfd = vp_safe_mkdirat(tmp, mf.dir + strlen("/tmp/"), 0700, (uid_t)-1, NULL);
		close(tmp);
		if (dfd >= 0 && fchmod(dfd, 0700)) {
			int e = -errno;

			close(dfd);
			return e;
		}
		return dfd == -EPERM ? -EACCES : dfd;
	}
	dfd = vp_safe_opendir(mf.dir, VP_SAFE_TRUSTED_LINKS | VP_SAFE_CREATE);
	if (dfd < 0)
		return dfd;
	if (fstat(dfd, &st) || (st.st_uid != geteuid() && st.st_uid != 0) ||
	    ((st.st_mode & 0022) && !(st.st_mode & S_ISVTX))) {
		close(dfd);
		return -EACCES;
	}
	return dfd;
}

/* <dir>/<pid> must be a directory of our own, made for us (by us, or by the recorder
 * for us), and the code map a new file in it. */
int vp_mapfile__open(struct vp_cm_writer **w)
{
	char real[PATH_MAX], name[32], fdpath[64];
	int pfd;

	if (mf.given_map_fd >= 0) {
		/* The recorder's jit/<pid> itself (checked when received): the pid in its name
		 * is ours as the recorder sees it, which in a container is not getpid(). */
		pfd = mf.given_map_fd;
		mf.given_map_fd = -1;
		snprintf(real, sizeof(real), "%s", mf.dir);
		snprintf(name, sizeof(name), "<pid>");
	} else {
		int dfd = open_map_dir();
		if (dfd < 0)
			return dfd;
		/* The directory's name as opened, for the messages that name the file. */
		snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", dfd);
		ssize_t rn = readlink(fdpath, real, sizeof(real) - 1);
		if (rn <= 0)
			snprintf(real, sizeof(real), "%s", mf.dir);
		else
			real[rn] = '\0';
		snprintf(name, sizeof(name), "%d", (int)getpid());
		pfd = vp_safe_mkdirat(dfd, name, 0700, (uid_t)-1, NULL);
		close(dfd);
		if (pfd < 0)
			return pfd == -EPERM ? -EACCES : pfd;
	}
	/* A second agent in the same pid directory (pid reuse, a second attach) gets its own
	 * file; readers take all codemap*.vpm files of the directory in creation order. */
	for (int i = 0; i < 100; i++) {
		char file[64];

		if (i == 0)
			snprintf(file, sizeof(file), "%s", VP_CODEMAP_FILE);
		else
			snprintf(file, sizeof(file), "codemap.%d.vpm", i);
		if (snprintf(mf.path, sizeof(mf.path), "%.3800s/%s/%s", real, name, file) >= (int)sizeof(mf.path))
			mf.path[sizeof(mf.path) - 1] = '\0';
		*w = vp_cm_writer__create_at(pfd, file);
		if (*w) {
			close(pfd);
			return 0;
		}
		if (errno != EEXIST) {
			int e = -errno;

			close(pfd);
			return e;
		}
	}
	close(pfd);
	return -EEXIST;
}

