/* common/safefs: the one way root creates, opens and removes files where users can
 * reach. Each rule is tried against the trick it stops: a symlink on the way, a link
 * at a name we create, a link inside a tree we remove, a FIFO where a file was, a
 * directory of another owner. Parts that need a second owner run when we are root
 * (ctest's live lanes are); as another user they are reported as not run. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "common/safefs.h"
#include "test.h"
#include "test-run.h"

static char tmp[] = "/tmp/vp-test-safefs-XXXXXX";

static void cleanup(void)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	if (run_sh(cmd, 110)) {
		/* nothing more to do */
	}
}

static void path_of(char *out, const char *rel)
{
	snprintf(out, PATH_MAX, "%s/%s", tmp, rel);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	ASSERT_NOT_NULL(f);
	fputs(text, f);
	ASSERT_OK(fclose(f));
}

static void read_file(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");

	ASSERT_NOT_NULL(f);
	size_t n = fread(buf, 1, len - 1, f);
	buf[n] = '\0';
	fclose(f);
}

/* Symlinks on the way: refused without VP_SAFE_TRUSTED_LINKS; with it, followed only
 * when root or we made the link, in a directory others cannot write (or sticky). */
static void opendir_links(void)
{
	char a[PATH_MAX], p[PATH_MAX], l[PATH_MAX];
	struct stat st, want;

	path_of(a, "real/deep");
	path_of(p, "real");
	ASSERT_OK(mkdir(p, 0755));
	ASSERT_OK(mkdir(a, 0755));
	ASSERT_OK(stat(a, &want));
	path_of(l, "link");
	ASSERT_OK(symlink("real", l));

	path_of(p, "link/deep");
	ASSERT_EQ(vp_safe_opendir(p, 0), -ELOOP);
	int fd = vp_safe_opendir(p, VP_SAFE_TRUSTED_LINKS);
	ASSERT_GE(fd, 0);
	ASSERT_OK(fstat(fd, &st));
	ASSERT_UEQ(st.st_ino, want.st_ino);
	close(fd);
	/* A plain path opens either way; the fd serves openat (O_PATH). */
	path_of(p, "real/deep");
	fd = vp_safe_opendir(p, 0);
	ASSERT_GE(fd, 0);
	ASSERT_OK(mkdirat(fd, "made", 0700));
	close(fd);

	/* The same link in a directory anyone may write (no sticky bit): not trusted. */
	ASSERT_OK(chmod(tmp, 0777));
	path_of(p, "link/deep");
	ASSERT_EQ(vp_safe_opendir(p, VP_SAFE_TRUSTED_LINKS), -ELOOP);
	/* Sticky, like /tmp: others cannot replace our link. */
	ASSERT_OK(chmod(tmp, 01777));
	fd = vp_safe_opendir(p, VP_SAFE_TRUSTED_LINKS);
	ASSERT_GE(fd, 0);
	close(fd);
	ASSERT_OK(chmod(tmp, 0700));

	if (geteuid() == 0) {
		/* A link another user made is never followed, wherever it is. */
		ASSERT_OK(lchown(l, 12345, 12345));
		ASSERT_EQ(vp_safe_opendir(p, VP_SAFE_TRUSTED_LINKS), -ELOOP);
		ASSERT_OK(lchown(l, 0, 0));
	} else {
		fprintf(stderr, "not root: the link-of-another-user case was not run\n");
	}

	/* A link loop ends. */
	path_of(l, "loop");
	ASSERT_OK(symlink("loop", l));
	path_of(p, "loop/x");
	ASSERT_EQ(vp_safe_opendir(p, VP_SAFE_TRUSTED_LINKS), -ELOOP);
	/* A file on the way is no directory. */
	path_of(p, "file");
	write_file(p, "x");
	path_of(p, "file/x");
	ASSERT_EQ(vp_safe_opendir(p, VP_SAFE_TRUSTED_LINKS), -ENOTDIR);
}

/* VP_SAFE_CREATE makes what is missing, 0700, but never through a link. */
static void opendir_create(void)
{
	char p[PATH_MAX], l[PATH_MAX], outside[PATH_MAX];
	struct stat st;

	path_of(p, "c1/c2/c3");
	int fd = vp_safe_opendir(p, VP_SAFE_CREATE);
	ASSERT_GE(fd, 0);
	close(fd);
	path_of(p, "c1/c2");
	ASSERT_OK(stat(p, &st));
	ASSERT_EQ(st.st_mode & 07777, 0700);

	path_of(outside, "outside");
	ASSERT_OK(mkdir(outside, 0755));
	path_of(l, "c1/ln");
	ASSERT_OK(symlink(outside, l));
	path_of(p, "c1/ln/new");
	ASSERT_EQ(vp_safe_opendir(p, VP_SAFE_CREATE), -ELOOP);
	path_of(p, "outside/new");
	ASSERT_NE(access(p, F_OK), 0);
}

/* New files only: a link planted at the name is neither followed nor replaced. */
static void create_excl(void)
{
	char victim[PATH_MAX], l[PATH_MAX], buf[32];

	path_of(victim, "victim");
	write_file(victim, "precious");
	int dfd = vp_safe_opendir(tmp, 0);
	ASSERT_GE(dfd, 0);
	path_of(l, "out.tmp");
	ASSERT_OK(symlink(victim, l));
	ASSERT_EQ(vp_safe_create(dfd, "out.tmp", 0600), -EEXIST);
	read_file(victim, buf, sizeof(buf));
	ASSERT_STREQ(buf, "precious");
	int fd = vp_safe_create(dfd, "fresh", 0640);
	ASSERT_GE(fd, 0);
	struct stat st;
	ASSERT_OK(fstat(fd, &st));
	ASSERT_EQ(st.st_mode & 07777, 0640);   /* the mode asked for, umask aside */
	close(fd);
	close(dfd);
}

/* Directories: made or found, then checked to be a plain directory of the owner. */
static void mkdirat_owner(void)
{
	char p[PATH_MAX];
	bool made = false;
	int dfd = vp_safe_opendir(tmp, 0);

	ASSERT_GE(dfd, 0);
	int fd = vp_safe_mkdirat(dfd, "d", 0700, (uid_t)-1, &made);
	ASSERT_GE(fd, 0);
	ASSERT_TRUE(made);
	close(fd);
	fd = vp_safe_mkdirat(dfd, "d", 0700, (uid_t)-1, &made);
	ASSERT_GE(fd, 0);
	ASSERT_FALSE(made);
	close(fd);
	path_of(p, "dl");
	ASSERT_OK(symlink("d", p));
	ASSERT_EQ(vp_safe_mkdirat(dfd, "dl", 0700, (uid_t)-1, NULL), -ELOOP);
	if (geteuid() == 0) {
		path_of(p, "theirs");
		ASSERT_OK(mkdir(p, 0777));
		ASSERT_OK(chown(p, 12345, 12345));
		ASSERT_EQ(vp_safe_mkdirat(dfd, "theirs", 0700, (uid_t)-1, NULL), -EPERM);
		fd = vp_safe_mkdirat(dfd, "theirs", 0700, 12345, NULL);
		ASSERT_GE(fd, 0);
		close(fd);
	}
	close(dfd);
}

/* Removal goes through descriptors and stops at links: what a link points to stays. */
static void remove_tree(void)
{
	char p[PATH_MAX], keep[PATH_MAX];
	int dfd = vp_safe_opendir(tmp, 0);

	ASSERT_GE(dfd, 0);
	path_of(p, "keepdir");
	ASSERT_OK(mkdir(p, 0755));
	path_of(keep, "keepdir/keep");
	write_file(keep, "keep");
	path_of(p, "gone");
	ASSERT_OK(mkdir(p, 0700));
	path_of(p, "gone/sub");
	ASSERT_OK(mkdir(p, 0700));
	path_of(p, "gone/sub/f");
	write_file(p, "f");
	path_of(p, "gone/sub/tolink");
	char target[PATH_MAX];
	path_of(target, "keepdir");
	ASSERT_OK(symlink(target, p));
	ASSERT_OK(vp_safe_remove_tree(dfd, "gone"));
	path_of(p, "gone");
	ASSERT_NE(access(p, F_OK), 0);
	ASSERT_OK(access(keep, F_OK));
	ASSERT_OK(vp_safe_remove_tree(dfd, "gone"));   /* already gone: fine */

	/* Emptying keeps the directory itself. */
	int kfd = openat(dfd, "keepdir", O_RDONLY | O_DIRECTORY);
	ASSERT_GE(kfd, 0);
	ASSERT_OK(vp_safe_empty_dir(kfd));
	close(kfd);
	ASSERT_NE(access(keep, F_OK), 0);
	path_of(p, "keepdir");
	ASSERT_OK(access(p, F_OK));
	if (geteuid() == 0) {
		path_of(p, "notours");
		ASSERT_OK(mkdir(p, 0700));
		ASSERT_OK(chown(p, 12345, 12345));
		ASSERT_EQ(vp_safe_remove_tree(dfd, "notours"), -EPERM);
		ASSERT_OK(access(p, F_OK));
	}
	close(dfd);
}

/* Readers: a FIFO is refused at once (no reader would ever come), a file opens. */
static void open_regular(void)
{
	char p[PATH_MAX], l[PATH_MAX];

	path_of(p, "fifo");
	ASSERT_OK(mkfifo(p, 0600));
	ASSERT_EQ(vp_safe_open_regular(p, false), -EINVAL);
	ASSERT_EQ(vp_safe_open_regular("/dev/null", false), -EINVAL);
	path_of(p, "plain");
	write_file(p, "x");
	int fd = vp_safe_open_regular(p, false);
	ASSERT_GE(fd, 0);
	close(fd);
	path_of(l, "plainlink");
	ASSERT_OK(symlink(p, l));
	ASSERT_EQ(vp_safe_open_regular(l, true), -ELOOP);
	fd = vp_safe_open_regular(l, false);
	ASSERT_GE(fd, 0);
	close(fd);
}

/* The ACL: search for the users named, nothing for the group and others. */
static void grant_search(void)
{
	char p[PATH_MAX];
	struct stat st;
	uint8_t buf[256];

	path_of(p, "acl");
	ASSERT_OK(mkdir(p, 0700));
	int fd = open(p, O_RDONLY | O_DIRECTORY);
	ASSERT_GE(fd, 0);
	uid_t uids[] = { 23456, 12345, 23456 };
	int r = vp_safe_grant_search(fd, uids, 3);
	if (r == -EOPNOTSUPP) {
		fprintf(stderr, "no POSIX ACLs on %s: the ACL case was not run\n", tmp);
		close(fd);
		return;
	}
	ASSERT_EQ(r, 0);
	ASSERT_OK(fstat(fd, &st));
	ASSERT_EQ(st.st_mode & 07777, 0710);   /* group bits show the mask: x */
	ssize_t n = fgetxattr(fd, "system.posix_acl_access", buf, sizeof(buf));
	/* version + user_obj, two users (sorted, once each), group_obj, mask, other */
	ASSERT_EQ(n, 4 + 6 * 8);
	uint32_t id1, id2;
	memcpy(&id1, buf + 4 + 8 + 4, 4);
	memcpy(&id2, buf + 4 + 16 + 4, 4);
	ASSERT_EQ(id1, 12345);
	ASSERT_EQ(id2, 23456);
	/* Nobody left: a plain 0700 directory again. */
	ASSERT_OK(vp_safe_grant_search(fd, NULL, 0));
	ASSERT_OK(fstat(fd, &st));
	ASSERT_EQ(st.st_mode & 07777, 0700);
	ASSERT_LT(fgetxattr(fd, "system.posix_acl_access", buf, sizeof(buf)), 0);
	close(fd);
}

int main(void)
{
	ASSERT_NOT_NULL(mkdtemp(tmp));
	atexit(cleanup);
	opendir_links();
	opendir_create();
	create_excl();
	mkdirat_owner();
	remove_tree();
	open_regular();
	grant_search();
	return 0;
}
