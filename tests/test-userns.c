/* Whom a local peer counts against (common/userns.h, issue 31): a subordinate-uid
 * file's ranges name their owner (by login or by number; a range of an unknown login
 * names no one); the service's own user namespace has no owner; a process in a user
 * namespace made by a user (two levels deep) counts as that user, whatever uid it has
 * inside; and one in a namespace root made counts as itself, never as root. Also the
 * HTTP peer key: an IPv6 address by its /64, IPv4 (and IPv4 mapped) whole. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/userns.h"
#include "daemon/http.h"
#include "test.h"

static int write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = write(fd, text, strlen(text));
	close(fd);
	return n == (ssize_t)strlen(text) ? 0 : -1;
}

static int write_map(const char *path, unsigned outer)
{
	char line[32];
	snprintf(line, sizeof(line), "0 %u 1\n", outer);
	return write_file(path, line);
}

/* A child that becomes uid (when not 0), makes `levels` nested user namespaces and
 * waits; its pid, or -1 when unprivileged user namespaces are off. */
static pid_t child_in_userns(uid_t uid, int levels)
{
	int p[2];
	ASSERT_OK(pipe(p));
	pid_t c = fork();
	ASSERT_TRUE(c >= 0);
	if (c == 0) {
		char ok = 1;
		close(p[0]);
		/* Dumpable again after the change of uid, or /proc/self stays root's. */
		if (uid && (setgroups(0, NULL) || setresgid(uid, uid, uid) || setresuid(uid, uid, uid) ||
			    prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)))
			ok = 0;
		/* Each level maps the uid it was made by to 0, as unshare -r does (a nested
		 * namespace needs its creator's ids mapped). */
		for (int i = 0; ok && i < levels; i++) {
			uid_t u = geteuid();
			gid_t g = getegid();
			if (unshare(CLONE_NEWUSER) || write_file("/proc/self/setgroups", "deny") ||
			    write_map("/proc/self/uid_map", u) || write_map("/proc/self/gid_map", g))
				ok = 0;
		}
		if (write(p[1], &ok, 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	close(p[1]);
	char ok = 0;
	ASSERT_EQ(read(p[0], &ok, 1), 1);
	close(p[0]);
	if (!ok) {
		kill(c, SIGKILL);
		waitpid(c, NULL, 0);
		return -1;
	}
	return c;
}

static void reap(pid_t c)
{
	kill(c, SIGKILL);
	waitpid(c, NULL, 0);
}

int main(void)
{
	char path[] = "/tmp/vp-test-userns-XXXXXX";
	uid_t o = 12345;

	/* The subordinate-uid file. */
	int fd = mkstemp(path);
	ASSERT_TRUE(fd >= 0);
	const char *text = "# comment\nroot:100000:65536\nvp-no-such-login-x:200000:10\n4242:300000:100\n"
			   "garbage line\nroot:400000:0\n";
	ASSERT_EQ(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	ASSERT_OK(vp_subuid__owner(path, 100000, &o));
	ASSERT_EQ(o, 0);
	ASSERT_OK(vp_subuid__owner(path, 165535, &o));
	ASSERT_EQ(vp_subuid__owner(path, 165536, &o), -ENOENT);
	ASSERT_EQ(vp_subuid__owner(path, 200005, &o), -ENOENT);   /* an unknown login: no one */
	ASSERT_OK(vp_subuid__owner(path, 300099, &o));
	ASSERT_EQ(o, 4242);
	ASSERT_EQ(vp_subuid__owner(path, 300100, &o), -ENOENT);
	ASSERT_EQ(vp_subuid__owner(path, 400000, &o), -ENOENT);   /* an empty range */
	ASSERT_EQ(vp_subuid__owner(path, 99999, &o), -ENOENT);
	unlink(path);
	ASSERT_EQ(vp_subuid__owner("/nonexistent/subuid", 100000, &o), -ENOENT);

	/* The HTTP peer key. */
	struct sockaddr_storage a = { 0 }, b = { 0 };
	uint8_t ka[16], kb[16];
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&a, *b6 = (struct sockaddr_in6 *)&b;
	a6->sin6_family = b6->sin6_family = AF_INET6;
	inet_pton(AF_INET6, "2001:db8:1:2::1", &a6->sin6_addr);
	inet_pton(AF_INET6, "2001:db8:1:2:ffff:eeee:dddd:cccc", &b6->sin6_addr);
	vp_http__peer_key(&a, ka);
	vp_http__peer_key(&b, kb);
	ASSERT_EQ(memcmp(ka, kb, 16), 0);
	inet_pton(AF_INET6, "2001:db8:1:3::1", &b6->sin6_addr);
	vp_http__peer_key(&b, kb);
	ASSERT_NE(memcmp(ka, kb, 16), 0);
	inet_pton(AF_INET6, "::ffff:10.0.0.1", &a6->sin6_addr);
	inet_pton(AF_INET6, "::ffff:10.0.0.2", &b6->sin6_addr);
	vp_http__peer_key(&a, ka);
	vp_http__peer_key(&b, kb);
	ASSERT_NE(memcmp(ka, kb, 16), 0);   /* two IPv4 hosts stay two */
	struct sockaddr_in *a4 = (struct sockaddr_in *)&b;
	memset(&b, 0, sizeof(b));
	a4->sin_family = AF_INET;
	inet_pton(AF_INET, "10.0.0.1", &a4->sin_addr);
	vp_http__peer_key(&b, kb);
	ASSERT_EQ(memcmp(ka, kb, 16), 0);   /* mapped or not, the same host */

	/* Our own namespace has no owner. */
	int self = open("/proc/self/ns/user", O_RDONLY | O_CLOEXEC);
	ASSERT_TRUE(self >= 0);
	ASSERT_EQ(vp_userns__owner(self, &o), -ENOENT);
	close(self);

	if (geteuid() != 0)
		SKIP("the rest needs root (a child that becomes another uid)");
	if (access("/proc/self/ns/user", F_OK) != 0)
		SKIP("no user namespaces");
	const uid_t user = 65534;   /* nobody */
	pid_t c = child_in_userns(user, 2);
	if (c < 0)
		SKIP("unprivileged user namespaces are off here");
	char ns[64];
	snprintf(ns, sizeof(ns), "/proc/%d/ns/user", (int)c);
	int nsfd = open(ns, O_RDONLY | O_CLOEXEC);
	ASSERT_TRUE(nsfd >= 0);
	ASSERT_OK(vp_userns__owner(nsfd, &o));
	ASSERT_EQ(o, user);
	close(nsfd);
	int pidfd = (int)syscall(SYS_pidfd_open, c, 0);
	ASSERT_TRUE(pidfd >= 0);
	/* Whatever uid the peer shows (a subordinate one, here one no file names), it counts
	 * as the namespace's owner. */
	ASSERT_EQ(vp_userns__accountable(177777, pidfd), user);
	ASSERT_EQ(vp_userns__accountable(0, pidfd), 0);
	reap(c);
	/* Gone: no namespace to ask; the uid counts as itself (no /etc/subuid range holds
	 * this one on a test machine: skipped if one does). */
	if (vp_subuid__owner(VP_SUBUID_FILE, 177777, &o) == -ENOENT)
		ASSERT_EQ(vp_userns__accountable(177777, pidfd), 177777);
	close(pidfd);

	/* A namespace root made: its peers are not root's. */
	c = child_in_userns(0, 1);
	ASSERT_TRUE(c > 0);
	pidfd = (int)syscall(SYS_pidfd_open, c, 0);
	ASSERT_TRUE(pidfd >= 0);
	if (vp_subuid__owner(VP_SUBUID_FILE, 177777, &o) == -ENOENT)
		ASSERT_EQ(vp_userns__accountable(177777, pidfd), 177777);
	close(pidfd);
	reap(c);
	printf("PASS\n");
	return 0;
}
