/* Directory-fd based file creation for root: see safefs.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/safefs.h"

int vp_safe_opendir(const char *path)
{
	char buf[PATH_MAX];
	int fd, next;

	if (!path || !*path || snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return -ENAMETOOLONG;
	fd = open(buf[0] == '/' ? "/" : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	for (char *save = NULL, *c = strtok_r(buf, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		next = openat(fd, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		int e = errno;

		close(fd);
		if (next < 0)
			return -e;
		fd = next;
	}
	return fd;
}

int vp_safe_mkdirat(int dirfd, const char *name, mode_t mode, uid_t owner)
{
	struct stat st;
	bool made = mkdirat(dirfd, name, mode) == 0;

	if (!made && errno != EEXIST)
		return -errno;
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ELOOP ? -ELOOP : -errno;
	if (fstat(fd, &st) || st.st_uid != (owner == (uid_t)-1 ? geteuid() : owner)) {
		close(fd);
		return -EPERM;
	}
	if (made && fchmod(fd, mode)) {
		int e = -errno;

		close(fd);
		return e;
	}
	return fd;
}

int vp_safe_create(int dirfd, const char *name, mode_t mode)
{
	int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);

	if (fd < 0)
		return -errno;
	if (fchmod(fd, mode)) {
		int e = -errno;

		close(fd);
		return e;
	}
	return fd;
}

int vp_safe_open_regular(const char *path, bool nofollow)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY | (nofollow ? O_NOFOLLOW : 0));

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	return fd;
}
