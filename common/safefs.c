/* Directory-fd based file creation for root: see safefs.h. */
#define _GNU_SOURCE
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "common/safefs.h"
#include "common/util.h"

#define MAX_LINKS 40    /* as the kernel's own limit on nested symlinks */
#define MAX_DEPTH 64    /* sessions are three levels deep; a deeper tree is refused */

static bool root_or_us(uid_t uid)
{
	return uid == 0 || uid == geteuid();
}

/* The symlink st, found in the directory dirfd, is one only root or we could have put
 * there. */
static bool trusted_link(int dirfd, const struct stat *st)
{
	struct stat d;

	if (!root_or_us(st->st_uid) || fstat(dirfd, &d) || !root_or_us(d.st_uid))
		return false;
	return !(d.st_mode & (S_IWGRP | S_IWOTH)) || (d.st_mode & S_ISVTX);
}

int vp_safe_opendir(const char *path, unsigned flags)
{
	char buf[PATH_MAX], rest[PATH_MAX], comp[NAME_MAX + 1];
	int fd, err, links = 0;

	if (!path || !*path)
		return -EINVAL;
	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return -ENAMETOOLONG;
	/* O_PATH: a directory we may only search (x, as a JVM's user in a session it was
	 * let into) opens too; the fd serves openat, mkdirat and fstat. */
	fd = open(buf[0] == '/' ? "/" : ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	for (char *p = buf;;) {
		struct stat st;

		while (*p == '/')
			p++;
		if (!*p)
			break;
		size_t len = strcspn(p, "/");
		if (len > NAME_MAX) {
			err = -ENAMETOOLONG;
			goto fail;
		}
		memcpy(comp, p, len);
		comp[len] = '\0';
		p += len;
		int next = openat(fd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (next < 0 && errno == ENOENT && (flags & VP_SAFE_CREATE)) {
			/* mkdirat never follows a symlink in its last component. */
			if (mkdirat(fd, comp, 0700) && errno != EEXIST) {
				err = -errno;
				goto fail;
			}
			next = openat(fd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		}
		if (next >= 0) {
			close(fd);
			fd = next;
			continue;
		}
		err = -errno;
		/* O_NOFOLLOW|O_DIRECTORY on a symlink gives ELOOP or ENOTDIR. */
		if ((err != -ELOOP && err != -ENOTDIR) || fstatat(fd, comp, &st, AT_SYMLINK_NOFOLLOW) ||
		    !S_ISLNK(st.st_mode))
			goto fail;
		err = -ELOOP;
		if (!(flags & VP_SAFE_TRUSTED_LINKS) || ++links > MAX_LINKS || !trusted_link(fd, &st))
			goto fail;
		char target[PATH_MAX];
		ssize_t n = readlinkat(fd, comp, target, sizeof(target) - 1);
		if (n <= 0) {
			err = n < 0 ? -errno : -ENOENT;
			goto fail;
		}
		target[n] = '\0';
		/* Go on from the link's target, then with what was left of the path. */
		if (snprintf(rest, sizeof(rest), "%s/%s", target, p) >= (int)sizeof(rest)) {
			err = -ENAMETOOLONG;
			goto fail;
		}
		memcpy(buf, rest, sizeof(buf));
		p = buf;
		if (target[0] == '/') {
			close(fd);
			if ((fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
				return -errno;
		}
	}
	return fd;
fail:
	close(fd);
	return err;
}

int vp_safe_mkdirat(int dirfd, const char *name, mode_t mode, uid_t owner, bool *made)
{
	struct stat st;
	bool m = mkdirat(dirfd, name, mode) == 0;

	if (made)
		*made = m;
	if (!m && errno != EEXIST)
		return -errno;
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOTDIR && fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		       S_ISLNK(st.st_mode) ? -ELOOP : -errno;
	if (fstat(fd, &st) || st.st_uid != (owner == (uid_t)-1 ? geteuid() : owner)) {
		close(fd);
		return -EPERM;
	}
	if (m && fchmod(fd, mode)) {
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
	struct stat st = { 0 };
	char self[48];
	/* Looked at before it is opened: opening a device or a FIFO can act by itself (a
	 * watchdog starts, a tape rewinds, a writer waiting on a FIFO goes on), and root
	 * opens paths that users name or control (their mount namespace under
	 * /proc/PID/root). The O_PATH fd is reopened through /proc/self/fd, so that what
	 * is opened is the regular file looked at, not what the path names by then. */
	int pfd = open(path, O_PATH | O_CLOEXEC | (nofollow ? O_NOFOLLOW : 0));
	if (pfd < 0)
		return -errno;
	if (fstat(pfd, &st) || !S_ISREG(st.st_mode)) {
		int e = S_ISLNK(st.st_mode) ? -ELOOP : -EINVAL;   /* st zeroed: a failed fstat is -EINVAL */
		close(pfd);
		return e;
	}
	snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
	int fd = open(self, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	int e = -errno;
	close(pfd);
	return fd >= 0 ? fd : e;
}

int vp_safe_open_regular_stat(const char *path, struct stat *st)
{
	int fd = vp_safe_open_regular(path, true);
	if (fd >= 0 && fstat(fd, st) != 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	return fd;
}

DIR *vp_dir__stream(int dirfd)
{
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d && fd >= 0) {
		int e = errno;
		close(fd);
		errno = e;
	}
	return d;
}

static int empty_dir(int dirfd, int depth);

/* Removes name under dirfd whatever it is, a directory through its own fd. */
static int remove_at(int dirfd, const char *name, int depth)
{
	if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT)
		return 0;
	if (errno != EISDIR)
		return -errno;
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int err = empty_dir(fd, depth + 1);
	close(fd);
	if (!err && unlinkat(dirfd, name, AT_REMOVEDIR) && errno != ENOENT)
		err = -errno;
	return err;
}

static int empty_dir(int dirfd, int depth)
{
	int err = 0;

	if (depth > MAX_DEPTH)
		return -ELOOP;
	DIR *d = vp_dir__stream(dirfd);
	if (!d)
		return -errno;
	for (struct dirent *e; (e = readdir(d));) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		int r = remove_at(dirfd, e->d_name, depth);
		if (r && !err)
			err = r;
	}
	closedir(d);
	return err;
}

int vp_safe_empty_dir(int dirfd)
{
	return empty_dir(dirfd, 0);
}

int vp_safe_remove_tree(int dirfd, const char *name)
{
	struct stat st;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW))
		return errno == ENOENT ? 0 : -errno;
	if (st.st_uid != geteuid())
		return -EPERM;
	return remove_at(dirfd, name, 0);
}

/* The kernel's POSIX ACL xattr (include/uapi/linux/posix_acl_xattr.h), little-endian. */
struct acl_entry {
	uint16_t tag, perm;
	uint32_t id;
};

enum { ACL_VERSION = 2, TAG_USER_OBJ = 1, TAG_USER = 2, TAG_GROUP_OBJ = 4, TAG_MASK = 0x10, TAG_OTHER = 0x20 };

static int cmp_uid(const void *a, const void *b)
{
	uid_t x = *(const uid_t *)a, y = *(const uid_t *)b;

	return x < y ? -1 : x > y;
}

int vp_safe_grant_search(int fd, const uid_t *uids, int n)
{
	enum { MAX_UIDS = 64 };
	uid_t u[MAX_UIDS];
	struct {
		uint32_t version;
		struct acl_entry e[MAX_UIDS + 4];
	} acl;
	int k = 0, m = 0;

	if (n < 0 || n > MAX_UIDS)
		return -E2BIG;
	if (n) {
		memcpy(u, uids, (size_t)n * sizeof(*u));
		vp_sort(u, (size_t)n, sizeof(*u), cmp_uid);
	}
	acl.version = htole32(ACL_VERSION);
	acl.e[k++] = (struct acl_entry){ htole16(TAG_USER_OBJ), htole16(7), htole32(UINT32_MAX) };
	for (int i = 0; i < n; i++) {
		/* Entries sorted by uid, each once; the owner has its own entry above. */
		if ((i && u[i] == u[i - 1]) || u[i] == geteuid())
			continue;
		acl.e[k++] = (struct acl_entry){ htole16(TAG_USER), htole16(1), htole32(u[i]) };
		m++;
	}
	acl.e[k++] = (struct acl_entry){ htole16(TAG_GROUP_OBJ), htole16(0), htole32(UINT32_MAX) };
	if (m)
		acl.e[k++] = (struct acl_entry){ htole16(TAG_MASK), htole16(1), htole32(UINT32_MAX) };
	acl.e[k++] = (struct acl_entry){ htole16(TAG_OTHER), htole16(0), htole32(UINT32_MAX) };
	if (!m) {
		/* Nobody to let in: a plain 0700 directory, no ACL. */
		if (fremovexattr(fd, "system.posix_acl_access") && errno != ENODATA && errno != EOPNOTSUPP)
			return -errno;
		return fchmod(fd, 0700) ? -errno : 0;
	}
	if (fsetxattr(fd, "system.posix_acl_access", &acl, sizeof(acl.version) + (size_t)k * sizeof(acl.e[0]), 0))
		return -errno;
	return 0;
}

/* Sums the sizes of the files under dirfd, through descriptors (no path is walked, no
 * symlink followed). */
static uint64_t tree_bytes(int dirfd, int depth)
{
	uint64_t sum = 0;
	DIR *d = depth < 16 ? vp_dir__stream(dirfd) : NULL;

	if (!d)
		return 0;
	for (struct dirent *e; (e = readdir(d));) {
		struct stat st;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
		    fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW))
			continue;
		if (S_ISREG(st.st_mode)) {
			sum += (uint64_t)st.st_size;
		} else if (S_ISDIR(st.st_mode)) {
			int sub = openat(dirfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			if (sub >= 0) {
				sum += tree_bytes(sub, depth + 1);
				close(sub);
			}
		}
	}
	closedir(d);
	return sum;
}

uint64_t vp_safe_tree_bytes(int dirfd)
{
	return tree_bytes(dirfd, 0);
}

uint64_t vp_dir__usage(int dirfd)
{
	uint64_t sum = 0;
	DIR *d = vp_dir__stream(dirfd);
	if (!d)
		return 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		struct stat st;
		if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
			continue;
		sum += (uint64_t)st.st_blocks * 512;
		if (S_ISDIR(st.st_mode)) {
			int sub = openat(dirfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub >= 0) {
				sum += vp_dir__usage(sub);
				close(sub);
			}
		}
	}
	closedir(d);
	return sum;
}

int vp_safe_check_parents(int fd, char *why, size_t len)
{
	struct stat cst, pst;
	int e = 0, cur = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (cur < 0)
		return -errno;
	if (fstat(cur, &cst)) {
		e = -errno;
		goto cleanup;
	}
	for (int depth = 0;; depth++) {
		if (depth > PATH_MAX / 2) {
			e = -ELOOP;
			goto cleanup;
		}
		int par = openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (par < 0 || fstat(par, &pst)) {
			e = -errno;
			if (par >= 0)
				close(par);
			goto cleanup;
		}
		if (pst.st_dev == cst.st_dev && pst.st_ino == cst.st_ino) {
			close(par);
			break;   /* "/": its own parent */
		}
		bool others_write = (pst.st_mode & 002) || ((pst.st_mode & 020) && pst.st_gid != 0);
		bool sticky_safe = (pst.st_mode & S_ISVTX) && cst.st_uid == 0;
		if (pst.st_uid != 0 || (others_write && !sticky_safe)) {
			char link[64], path[PATH_MAX] = "?";
			snprintf(link, sizeof(link), "/proc/self/fd/%d", par);
			ssize_t n = readlink(link, path, sizeof(path) - 1);
			path[n > 0 ? n : 1] = '\0';
			vp_set_err(why, len, "%s (owner uid %u, group %u, mode %04o) %s", path, (unsigned)pst.st_uid,
				   (unsigned)pst.st_gid, (unsigned)(pst.st_mode & 07777),
				   pst.st_uid != 0 ? "is not root's" : (pst.st_mode & S_ISVTX) ? "is sticky but what is in it is not root's"
				   : (pst.st_mode & 002) ? "is writable by others" : "is writable by its group");
			close(par);
			e = -EPERM;
			goto cleanup;
		}
		close(cur);
		cur = par;
		cst = pst;
	}
cleanup:
	close(cur);
	return e;
}

int vp_safe_read_userpass(const char *opt, const char *path, char *out, size_t outlen, char *err, size_t errlen)
{
	struct stat st;
	int fd = vp_safe_open_regular_stat(path, &st);
	if (fd < 0) {
		vp_set_err(err, errlen, "%s=%s: cannot read it (%s): give a regular file holding user:password", opt,
			   path, strerror(-fd));
		return fd;
	}
	char line[400];
	ssize_t n = read(fd, line, sizeof(line) - 1);
	close(fd);
	if (st.st_mode & 077) {
		vp_set_err(err, errlen, "%s=%s is open to group or others (mode %04o): chmod 600 %s", opt, path,
			   (unsigned)(st.st_mode & 07777), path);
		return -EPERM;
	}
	line[n > 0 ? n : 0] = '\0';
	line[strcspn(line, "\r\n")] = '\0';
	if (!strchr(line, ':') || line[0] == ':' || strlen(line) >= outlen) {
		vp_set_err(err, errlen, "%s=%s: expected one line user:password", opt, path);
		explicit_bzero(line, sizeof(line));
		return -EINVAL;
	}
	snprintf(out, outlen, "%s", line);
	explicit_bzero(line, sizeof(line));
	return 0;
}
