/* How root touches the file system where users can reach: through directory fds.
 * A directory is opened once (O_DIRECTORY|O_NOFOLLOW, owner checked) and everything
 * under it is created relative to that fd with O_CREAT|O_EXCL|O_NOFOLLOW, so that a
 * path is never walked twice and no symlink a user plants is followed (STYLE.md 17).
 * Readers of recorded paths open them with vp_safe_open_regular: never a FIFO or a
 * device, never blocking. */
#ifndef VIPROF_COMMON_SAFEFS_H
#define VIPROF_COMMON_SAFEFS_H

#include <stdbool.h>
#include <dirent.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

/* Flags of vp_safe_opendir. */
enum {
	/* Follow a symlink on the way only if only root or we could have made it: the
	 * link is owned by root or by our euid, and the directory holding it is owned by
	 * root or by us and not writable by others (or sticky). A path an administrator
	 * wrote (/var/run -> /run) opens; one a user planted does not. Without the flag
	 * any symlink fails the walk with ELOOP. */
	VP_SAFE_TRUSTED_LINKS = 1,
	/* Create missing components (0700, ours) on the way, like mkdir -p. */
	VP_SAFE_CREATE = 2,
};

/* Opens the directory path one component at a time, each with O_NOFOLLOW (symlinks:
 * see VP_SAFE_TRUSTED_LINKS). Returns an O_PATH fd, for openat/mkdirat/fstat relative
 * to it (search permission suffices), or -errno: -ELOOP for a symlink that is refused,
 * -ENOTDIR for a component that is not a directory. */
int vp_safe_opendir(const char *path, unsigned flags);

/* Creates name under dirfd with mode (umask aside) unless it exists; either way opens
 * it with O_DIRECTORY|O_NOFOLLOW and checks that it is owned by owner (uid; (uid_t)-1:
 * by our euid). Returns the fd, -ENOTDIR/-ELOOP for anything but a plain directory,
 * -EPERM for another owner, or -errno. *made (may be NULL) says whether we made it. */
int vp_safe_mkdirat(int dirfd, const char *name, mode_t mode, uid_t owner, bool *made);

/* Creates a new file name under dirfd: O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC, mode as
 * given (fchmod'ed, umask aside). Returns the fd or -errno. */
int vp_safe_create(int dirfd, const char *name, mode_t mode);

/* Opens a file to read without blocking (O_NONBLOCK|O_NOCTTY) and without following a
 * final symlink when nofollow, and only if it is a regular file. Returns the fd,
 * -EINVAL for a special file, or -errno. */
int vp_safe_open_regular(const char *path, bool nofollow);

/* vp_safe_open_regular(path, nofollow: true), and the file's stat in *st (its mode and
 * owner, for a file whose secrecy is checked). The fd or -errno. */
int vp_safe_open_regular_stat(const char *path, struct stat *st);

/* Removes everything inside the directory dirfd, relative to descriptors only: no
 * symlink is followed and no path is walked again, so a tree a user can change while
 * we remove it never makes us remove anything outside it. 0 or -errno. */
int vp_safe_empty_dir(int dirfd);

/* Removes name under dirfd (a file, or a directory and all of it, as above), only if
 * it is owned by our euid: -EPERM otherwise. 0 (also when it does not exist) or
 * -errno. */
int vp_safe_remove_tree(int dirfd, const char *name);

/* Sets the POSIX ACL of the directory fd to: owner rwx, the owning group and others
 * nothing, and search (x, not read) for each of the n uids, so that exactly these
 * users can reach a path below it they know, and list nothing. -EOPNOTSUPP where the
 * file system has no ACLs. 0 or -errno. */
int vp_safe_grant_search(int fd, const uid_t *uids, int n);

/* Whether only root can rename, remove or replace the directory open on fd or any
 * directory above it, up to /: each parent is owned by root and writable by no one but
 * root (group root may write it), or is sticky (like /tmp) with the child below it
 * owned by root. Walked up through ".." from fd, so it judges the directories fd is
 * in, not a path. 0, or -EPERM with the first parent that fails described in why
 * (its path, owner and mode), or -errno. */
int vp_safe_check_parents(int fd, char *why, size_t len);

/* A directory stream over a new descriptor of dirfd's directory (the caller keeps
 * dirfd; closedir closes the new one): readdir without a path. NULL with errno set;
 * nothing is left open then. */
DIR *vp_dir__stream(int dirfd);

/* Bytes on disk of everything under dirfd (st_blocks), through descriptors only: no
 * symlink is followed and no path resolved. */
uint64_t vp_dir__usage(int dirfd);

/* The bytes of the regular files under dirfd (16 levels deep at most), through
 * directory descriptors: no path is walked, no symlink followed. */
uint64_t vp_safe_tree_bytes(int dirfd);

/* A credential file given as opt=path (push basic=, fleet user=): "user:password" on
 * one line of a regular file, not a symlink, not open to group or others, into out
 * (shorter than outlen). 0, or -errno with err saying what is wrong with the file and
 * how to fix it (opt names the option). */
int vp_safe_read_userpass(const char *opt, const char *path, char *out, size_t outlen, char *err, size_t errlen);

#endif
