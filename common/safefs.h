/* How root touches the file system where users can reach: through directory fds.
 * A directory is opened once (O_DIRECTORY|O_NOFOLLOW, owner checked) and everything
 * under it is created relative to that fd with O_CREAT|O_EXCL|O_NOFOLLOW, so that a
 * path is never walked twice and no symlink a user plants is followed (STYLE.md 17). */
#ifndef VIPROF_COMMON_SAFEFS_H
#define VIPROF_COMMON_SAFEFS_H

#include <stdbool.h>
#include <sys/types.h>

/* Opens the directory path, every component with O_NOFOLLOW (a symlink anywhere in it
 * fails with ELOOP or ENOTDIR). Returns the fd or -errno. */
int vp_safe_opendir(const char *path);

/* Creates name under dirfd with mode (umask aside) unless it exists; either way opens
 * it with O_DIRECTORY|O_NOFOLLOW and checks that it is owned by owner (uid; (uid_t)-1:
 * by our euid). Returns the fd, -ENOTDIR/-ELOOP for anything but a plain directory,
 * -EPERM for another owner, or -errno. */
int vp_safe_mkdirat(int dirfd, const char *name, mode_t mode, uid_t owner);

/* Creates a new file name under dirfd: O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC, mode as
 * given (fchmod'ed, umask aside). Returns the fd or -errno. */
int vp_safe_create(int dirfd, const char *name, mode_t mode);

/* Opens a file to read without blocking and without following a final symlink, and
 * only if it is a regular file. Returns the fd, -EINVAL for a special file, or -errno. */
int vp_safe_open_regular(const char *path, bool nofollow);

#endif
