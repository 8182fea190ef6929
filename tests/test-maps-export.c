/* 'viprof maps ... export-perf-map F' / 'export-jitdump F' run as root (issue 20): a
 * FIFO a user planted at F neither blocks it nor is written; a file of another user's
 * is neither emptied nor written, with or without --force; a new F is created 0600;
 * an existing F of the caller's is replaced only with --force. The user is made here
 * with useradd; F sits in a sticky, world-writable directory like /tmp. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test.h"
#include "test-run.h"

#define USER "vpmapsx"

static char dir[] = "/tmp/vp-test-maps-export-XXXXXX";
static char in[300];

static void cleanup(void)
{
	char cmd[400];
	snprintf(cmd, sizeof(cmd), "rm -rf %s; userdel " USER " 2>/dev/null", dir);
	if (run_sh(cmd, 110) != 0) {
		/* Nothing left to remove. */
	}
}

/* Runs viprof maps --perf-map IN CMD F [--force]; its exit status, or FAIL when it is
 * still running after 5 s (blocked). */
static int export_to(const char *cmd, const char *f, bool force)
{
	int code;

	if (!run_reap(run_start((char *const[]){ VIPROF_BIN, "maps", "--perf-map", in, (char *)cmd, (char *)f,
						  force ? "--force" : NULL, NULL }, NULL, RUN_KEEP), 5000, &code))
		FAIL("viprof maps %s %s%s still ran after 5 s: blocked on it", cmd, f, force ? " --force" : "");
	return code;
}
/* As the user: a FIFO and a file with known contents in dir. */
static void plant(uid_t uid, gid_t gid)
{
	pid_t pid = fork();
	if (pid == 0) {
		if (setgid(gid) || setuid(uid))
			_exit(2);
		char p[300];
		snprintf(p, sizeof(p), "%s/fifo.map", dir);
		if (mkfifo(p, 0666))
			_exit(3);
		snprintf(p, sizeof(p), "%s/theirs.map", dir);
		int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0666);
		if (fd < 0 || write(fd, "USERDATA\n", 9) != 9)
			_exit(4);
		close(fd);
		_exit(0);
	}
	int status;
	waitpid(pid, &status, 0);
	ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(void)
{
	REQUIRE_ROOT();
	char p[300];
	struct stat st;
	if (run_sh("userdel " USER " 2>/dev/null; useradd -M -N -s /usr/sbin/nologin " USER, 110) != 0)
		SKIP("cannot create the test user with useradd");
	ASSERT_NOT_NULL(mkdtemp(dir));
	atexit(cleanup);
	ASSERT_OK(chmod(dir, 01777) ? -errno : 0);
	struct passwd *pw = getpwnam(USER);
	ASSERT_NOT_NULL(pw);
	snprintf(in, sizeof(in), "%s/in.map", dir);
	FILE *f = fopen(in, "we");
	fputs("1000 100 A.a()\n2000 80 B.b()\n", f);
	fclose(f);
	plant(pw->pw_uid, pw->pw_gid);

	static const char *const cmds[] = { "export-perf-map", "export-jitdump" };
	for (int c = 0; c < 2; c++) {
		for (int force = 0; force < 2; force++) {
			/* The FIFO: refused at once, still a FIFO. */
			snprintf(p, sizeof(p), "%s/fifo.map", dir);
			ASSERT_EQ(export_to(cmds[c], p, force), 1);
			ASSERT_OK(lstat(p, &st) ? -errno : 0);
			ASSERT_TRUE(S_ISFIFO(st.st_mode));
			/* The user's file: refused, untouched. */
			snprintf(p, sizeof(p), "%s/theirs.map", dir);
			ASSERT_EQ(export_to(cmds[c], p, force), 1);
			ASSERT_OK(lstat(p, &st) ? -errno : 0);
			ASSERT_EQ(st.st_uid, pw->pw_uid);
			ASSERT_EQ(st.st_size, 9);
		}
		/* A new file: created 0600, root's. */
		snprintf(p, sizeof(p), "%s/new-%d.map", dir, c);
		ASSERT_EQ(export_to(cmds[c], p, false), 0);
		ASSERT_OK(lstat(p, &st) ? -errno : 0);
		ASSERT_TRUE(S_ISREG(st.st_mode));
		ASSERT_EQ(st.st_mode & 07777, 0600);
		ASSERT_EQ(st.st_uid, 0);
		ASSERT_GT(st.st_size, 0);
		/* Ours, existing: only with --force. */
		ASSERT_EQ(export_to(cmds[c], p, false), 1);
		ASSERT_EQ(export_to(cmds[c], p, true), 0);
		/* A second name of one of root's files, planted in the sticky directory (a
		 * user can, where fs.protected_hardlinks is 0; root makes it here): root owns
		 * it, but it is not the export's to replace. And a user's symlink to it. */
		char secret[300], lnk[300];
		snprintf(secret, sizeof(secret), "%s/secret-%d", dir, c);
		f = fopen(secret, "we");
		fputs("ROOTDATA\n", f);
		fclose(f);
		snprintf(lnk, sizeof(lnk), "%s/link-%d.map", dir, c);
		ASSERT_OK(link(secret, lnk) ? -errno : 0);
		for (int force = 0; force < 2; force++)
			ASSERT_EQ(export_to(cmds[c], lnk, force), 1);
		snprintf(lnk, sizeof(lnk), "%s/sym-%d.map", dir, c);
		ASSERT_OK(symlink(secret, lnk) ? -errno : 0);
		ASSERT_OK(lchown(lnk, pw->pw_uid, pw->pw_gid) ? -errno : 0);
		for (int force = 0; force < 2; force++)
			ASSERT_EQ(export_to(cmds[c], lnk, force), 1);
		ASSERT_OK(stat(secret, &st) ? -errno : 0);
		ASSERT_EQ(st.st_size, 9);
		ASSERT_EQ(st.st_nlink, 2);
	}
	printf("test-maps-export: ok\n");
	return 0;
}
