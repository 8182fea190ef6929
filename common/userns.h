/* Whom a local peer counts against. Every user of a Debian system gets 65,536
 * subordinate uids (useradd, /etc/subuid) that newuidmap maps into user namespaces the
 * user makes: each is a uid of its own to the kernel, so a service that counts per uid
 * would give one user 65,536 shares of every per-user limit. A peer is therefore
 * counted against the user who owns its user namespace (the namespace just below the
 * service's own, whose creator is a uid of the service's namespace); a peer whose
 * namespace the service cannot see (a TCP peer, a process gone) is counted against
 * the user whose /etc/subuid range holds its uid. Root's own namespaces (containers a
 * system service made) are no one's: such a peer counts as itself, and root's
 * exemption from the limits is never extended to it. */
#ifndef VIPROF_COMMON_USERNS_H
#define VIPROF_COMMON_USERNS_H

#include <sys/types.h>

#define VP_SUBUID_FILE "/etc/subuid"

/* The owner of the user namespace open on nsfd, as seen from the caller's: the uid
 * that created the outermost namespace between it and the caller's own (the caller's
 * own is no one's). 0 with *owner, -ENOENT when nsfd is the caller's namespace, or
 * -errno. nsfd stays open. */
int vp_userns__owner(int nsfd, uid_t *owner);

/* The user whose range in the subordinate-uid file path (lines "NAME_OR_UID:START:COUNT",
 * as in subuid(5)) holds uid. 0 with *owner, -ENOENT when no range holds it (or it
 * names a user this machine does not know), or -errno when the file cannot be read. */
int vp_subuid__owner(const char *path, uid_t uid, uid_t *owner);

/* Whom the peer with uid (as the service's namespace sees it) counts against, for
 * per-user limits: the owner of its process's user namespace (pidfd, or -1 when there
 * is none), else the owner of its /etc/subuid range, else uid itself; never root for
 * a uid that is not root (see above). */
uid_t vp_userns__accountable(uid_t uid, int pidfd);

#endif
