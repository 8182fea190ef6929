/* Root's recorder must not be a way in (issue "Root's profiler must not be a way in").
 * Each scenario is its own ctest entry (argv[1]); they run as root and act as a real
 * unprivileged user (created here, removed at the end) where the attack needs one:
 *   odir      record -o into an empty directory another user owns: refused, nothing written
 *   perms     a session is 0700 (directories) / 0600 (files): kernel addresses stay private
 *   agentdir  the agent's default map directory, planted as a symlink by a user, is refused
 *   fifo      a FIFO put at a mapped file's path hangs neither record -p nor report
 *   sigquit   a process that maps a file named libjvm.so is not sent SIGQUIT
 *   diskfull  a full disk stops the recording, not the program it profiles
 *   metatmp   a symlink planted at meta.json.tmp during a recording is not followed
 *   agentcopy a JVM in a chroot whose tmp is a symlink: the agent copy is refused, nothing
 *             outside the chroot is written or removed
 *   otheruser a JVM of the user, recorded by root: only its own jit/<pid> is theirs, the
 *             session stays closed to them
 *   fifoino   a FIFO with the very inode number of a mapped library, at its path (another
 *             file system mounted over it), does not block record -p
 *   mapfifo   a FIFO in place of a JVM's code map (jit/<pid> is the JVM user's) does not
 *             block report or maps */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test.h"
#include "test-run.h"

#define USER "vpsectest"

static char tmp[] = "/tmp/vp-test-security-XXXXXX";
static bool made_user;

static void cleanup(void)
{
	char usr[PATH_MAX + 16];
	struct stat st;

	if (made_user)
		run_shf(50, "userdel -r " USER " >/dev/null 2>&1");
	/* agentcopy bind-mounts /usr into tmp/root in a mount namespace of its own; if
	 * that mount were ever visible here, rm -rf would go through it. */
	snprintf(usr, sizeof(usr), "%s/root/usr/lib", tmp);
	if (stat(usr, &st) == 0) {
		fprintf(stderr, "%s is mounted here: not removing %s\n", usr, tmp);
		return;
	}
	run_shf(50, "rm -rf %s", tmp);
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

static struct passwd *user(void)
{
	struct passwd *pw = getpwnam(USER);

	if (!pw) {
		if (run_shf(50, "useradd -M -s /bin/sh " USER " >/dev/null 2>&1") != 0)
			SKIP("cannot create a test user with useradd");
		made_user = true;
		pw = getpwnam(USER);
	}
	ASSERT_NOT_NULL(pw);
	return pw;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Waits (15 s at most) until process pid has path mapped: the moment a test may
 * change the file under it. */
static void wait_mapped(pid_t pid, const char *path)
{
	char maps[64];
	double t0 = now();

	snprintf(maps, sizeof(maps), "/proc/%d/maps", (int)pid);
	for (;;) {
		FILE *f = fopen(maps, "r");
		char line[4096];
		bool found = false;

		while (f && !found && fgets(line, sizeof(line), f))
			found = strstr(line, path) != NULL;
		if (f)
			fclose(f);
		if (found)
			return;
		if (now() - t0 > 15 || waitpid(pid, NULL, WNOHANG) != 0)
			FAIL("process %d did not map %s", (int)pid, path);
		usleep(10000);
	}
}

static int count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	ASSERT_NOT_NULL(d);
	while ((e = readdir(d)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	return n;
}

static void odir(void)
{
	char dir[PATH_MAX], out[8192];
	struct passwd *pw = user();

	snprintf(dir, sizeof(dir), "%s/theirs", tmp);
	ASSERT_OK(mkdir(dir, 0777));
	ASSERT_OK(chown(dir, pw->pw_uid, pw->pw_gid));
	char *rec[] = { VIPROF_BIN, "record", "-q", "-o", dir, "--", "/bin/true", NULL };
	int rc = run_logged(tmp, rec, out, sizeof(out), 50);
	fprintf(stderr, "record -o <another user's empty directory>: exit %d: %s", rc, out);
	ASSERT_NE(rc, 0);
	ASSERT_NOT_NULL(strstr(out, "belongs to uid"));
	ASSERT_EQ(count_entries(dir), 0);
}

static void perms(void)
{
	char dir[PATH_MAX], path[PATH_MAX + 32], out[8192];
	struct stat st;

	snprintf(dir, sizeof(dir), "%s/s", tmp);
	char *rec[] = { VIPROF_BIN, "record", "-q", "-o", dir, "--", "/bin/true", NULL };
	ASSERT_EQ(run_logged(tmp, rec, out, sizeof(out), 50), 0);
	ASSERT_OK(stat(dir, &st));
	ASSERT_EQ(st.st_mode & 07777, 0700);
	const char *files[] = { "stream.vps", "meta.json" };
	for (int i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
		ASSERT_OK(stat(path, &st));
		ASSERT_EQ(st.st_mode & 07777, 0600);
	}
	/* And the user cannot read the stream. */
	user();
	ASSERT_NE(run_shf(50, "su -s /bin/sh " USER " -c 'cat %s/stream.vps' >/dev/null 2>&1", dir), 0);
}

static void agentdir(void)
{
	char evil[PATH_MAX], def[64], out[PATH_MAX];
	struct stat st;
	struct passwd *pw = user();

	snprintf(def, sizeof(def), "/tmp/viprof-jit-%u", (unsigned)geteuid());
	if (lstat(def, &st) == 0)
		SKIP("%s exists already; this test plants it", def);
	snprintf(evil, sizeof(evil), "%s/evil", tmp);
	ASSERT_OK(mkdir(evil, 0777));
	ASSERT_OK(chown(evil, pw->pw_uid, pw->pw_gid));
	/* The user plants the root JVM's default map directory as a link to theirs (and the
	 * shared one older agents used, if nobody has it). */
	ASSERT_EQ(run_shf(50, "su -s /bin/sh " USER " -c 'ln -s %s %s'", evil, def), 0);
	bool old_planted = lstat("/tmp/viprof-jit", &st) != 0 &&
			   run_shf(50, "su -s /bin/sh " USER " -c 'ln -s %s /tmp/viprof-jit'", evil) == 0;
	snprintf(out, sizeof(out), "%s/java.err", tmp);
	int rc = run_shf(50, "%s -agentpath:%s -cp %s JitSplit 1 >/dev/null 2>%s", JAVA17, VIPROF_AGENT_SO,
		    VIPROF_JAVA_CLASSES, out);
	unlink(def);
	if (old_planted)
		unlink("/tmp/viprof-jit");
	ASSERT_EQ(rc, 0);   /* the JVM runs on without the agent */
	fprintf(stderr, "entries in the user's directory: %d\n", count_entries(evil));
	ASSERT_EQ(count_entries(evil), 0);
	ASSERT_EQ(run_shf(50, "grep -q 'viprof agent' %s", out), 0);
}

static void fifo(void)
{
	char libdir[PATH_MAX], lib[PATH_MAX + 16], sess[PATH_MAX], sess2[PATH_MAX + 8], out[8192], pid[16];

	snprintf(libdir, sizeof(libdir), "%s/lib", tmp);
	snprintf(lib, sizeof(lib), "%s/libz.so.1", libdir);
	snprintf(sess, sizeof(sess), "%s/s", tmp);
	snprintf(sess2, sizeof(sess2), "%s/s2", tmp);
	ASSERT_OK(mkdir(libdir, 0755));
	ASSERT_EQ(run_shf(50, "cp -L /lib/x86_64-linux-gnu/libz.so.1 %s", lib), 0);
	setenv("LD_LIBRARY_PATH", libdir, 1);

	/* 1. A recording of a program that maps the library; then a FIFO takes the place
	 * of the recorded path: the report must not wait on it. */
	char *rec1[] = { VIPROF_BIN, "record", "-q", "-o", sess2, "--", ZCALLER, "squeeze", "1", NULL };
	ASSERT_EQ(run_logged(tmp, rec1, out, sizeof(out), 50), 0);
	/* viprof itself links libz: it must not look for it in there from now on. */
	unsetenv("LD_LIBRARY_PATH");
	ASSERT_EQ(run_shf(50, "rm %s && mkfifo %s", lib, lib), 0);
	char *rep1[] = { VIPROF_BIN, "report", sess2, "--top", "5", NULL };
	double t0 = now();
	pid_t rp = run_logged_start(tmp, rep1, NULL);
	int rc1;
	run_reap(rp, 10000, &rc1);   /* -1: still waiting after 10 s (killed) */
	double took1 = now() - t0;
	ASSERT_EQ(run_shf(50, "rm %s && cp -L /lib/x86_64-linux-gnu/libz.so.1 %s", lib, lib), 0);

	/* 2. A running program whose mapped library's path becomes a FIFO: record -p
	 * must not wait on it either. */
	pid_t p = fork();
	ASSERT_GE(p, 0);
	if (p == 0) {
		setenv("LD_LIBRARY_PATH", libdir, 1);
		if (!freopen("/dev/null", "w", stdout))
			_exit(126);
		execl(ZCALLER, "zcaller", "squeeze", "20", (char *)NULL);
		_exit(127);
	}
	wait_mapped(p, lib);
	ASSERT_EQ(run_shf(50, "rm %s && mkfifo %s", lib, lib), 0);
	snprintf(pid, sizeof(pid), "%d", (int)p);
	char *rec[] = { VIPROF_BIN, "record", "-q", "-p", pid, "-d", "1", "-o", sess, NULL };
	t0 = now();
	int rc = run_logged(tmp, rec, out, sizeof(out), 50);
	double took = now() - t0;
	kill(p, SIGKILL);
	waitpid(p, NULL, 0);
	fprintf(stderr, "report with a FIFO at a recorded mapping path: exit %d in %.1f s (-1: still waiting after 10 s); "
		"record -p with a FIFO at a mapped path: exit %d in %.1f s\n", rc1, took1, rc, took);
	ASSERT_EQ(rc1, 0);
	ASSERT_LT_F(took1, 8.0);
	ASSERT_EQ(rc, 0);
	ASSERT_LT_F(took, 8.0);
}

static void sigquit(void)
{
	char dir[PATH_MAX], lib[PATH_MAX + 16], sess[PATH_MAX], out[8192], pid[16];
	int status;

	if (access("/usr/bin/python3", X_OK))
		SKIP("no /usr/bin/python3 to map a file");
	snprintf(dir, sizeof(dir), "%s/cwd", tmp);
	snprintf(lib, sizeof(lib), "%s/libjvm.so", dir);
	snprintf(sess, sizeof(sess), "%s/s", tmp);
	ASSERT_OK(mkdir(dir, 0755));
	/* HotSpot's own libjvm.so, so that its exported VM structure table alone is not
	 * taken for a JVM: a JVM also runs a 'VM Thread', which python3 does not. */
	char real[PATH_MAX];
	snprintf(real, sizeof(real), "%s", JAVA17);
	char *bin = strstr(real, "/bin/java");
	if (bin)
		snprintf(bin, sizeof(real) - (size_t)(bin - real), "/lib/server/libjvm.so");
	ASSERT_EQ(run_shf(50, "cp %s %s", access(real, R_OK) == 0 ? real : VIPROF_AGENT_SO, lib), 0);
	pid_t p = fork();
	ASSERT_GE(p, 0);
	if (p == 0) {
		if (chdir(dir))
			_exit(126);
		execl("/usr/bin/python3", "python3", "-c",
		      "import mmap,sys,time\nf=open(sys.argv[1],'rb')\nm=mmap.mmap(f.fileno(),0,prot=mmap.PROT_READ)\n"
		      "time.sleep(60)\n", lib, (char *)NULL);
		_exit(127);
	}
	wait_mapped(p, lib);
	snprintf(pid, sizeof(pid), "%d", (int)p);
	char *rec[] = { VIPROF_BIN, "record", "-q", "-p", pid, "-d", "1", "-o", sess, NULL };
	ASSERT_EQ(run_logged(tmp, rec, out, sizeof(out), 50), 0);
	pid_t r = waitpid(p, &status, WNOHANG);
	bool alive = r == 0;
	kill(p, SIGKILL);
	waitpid(p, NULL, 0);
	fprintf(stderr, "python3 mapping a file named libjvm.so: %s after record -p; entries in its cwd: %d\n",
		alive ? "alive" : "dead", count_entries(dir));
	ASSERT_TRUE(alive);
	ASSERT_EQ(count_entries(dir), 1);   /* libjvm.so only: no .attach_pid */
}

static void diskfull(void)
{
	char mnt[PATH_MAX], sess[PATH_MAX + 8], marker[PATH_MAX + 8], cmd[PATH_MAX + 128], out[8192];

	snprintf(mnt, sizeof(mnt), "%s/small", tmp);
	ASSERT_OK(mkdir(mnt, 0700));
	if (mount("tmpfs", mnt, "tmpfs", 0, "size=64k"))
		SKIP("cannot mount a small tmpfs: %s", strerror(errno));
	snprintf(sess, sizeof(sess), "%s/s", mnt);
	snprintf(marker, sizeof(marker), "%s/done", tmp);
	/* About 2.5 s of shell arithmetic, then a marker: the program's own end. */
	snprintf(cmd, sizeof(cmd), "i=0; while [ $i -lt 3000000 ]; do i=$((i+1)); done; touch %s; exit 7", marker);
	char *rec[] = { VIPROF_BIN, "record", "-q", "-g", "-F", "4999", "-o", sess, "--", "/bin/sh", "-c", cmd, NULL };
	int rc = run_logged(tmp, rec, out, sizeof(out), 50);
	bool done = access(marker, F_OK) == 0;
	char *rep[] = { VIPROF_BIN, "report", sess, "--top", "3", NULL };
	char rout[8192];
	int rc2 = run_logged(tmp, rep, rout, sizeof(rout), 50);
	umount(mnt);
	fprintf(stderr, "record on a full disk: exit %d, program %s; report of what was written: exit %d\n%s", rc,
		done ? "ran to its end" : "was stopped", rc2, out);
	ASSERT_NOT_NULL(strstr(out, "No space left on device"));
	ASSERT_TRUE(done);
	ASSERT_EQ(rc, 7);   /* the program's own exit status */
	ASSERT_EQ(rc2, 0);
}

static void metatmp(void)
{
	char sess[PATH_MAX], victim[PATH_MAX], link[PATH_MAX + 32], stream[PATH_MAX + 32], meta[PATH_MAX + 32];
	char out[8192], buf[64];
	struct stat st;

	snprintf(sess, sizeof(sess), "%s/s", tmp);
	snprintf(victim, sizeof(victim), "%s/victim", tmp);
	snprintf(link, sizeof(link), "%s/meta.json.tmp", sess);
	snprintf(stream, sizeof(stream), "%s/stream.vps", sess);
	snprintf(meta, sizeof(meta), "%s/meta.json", sess);
	write_file(victim, "precious\n");
	char *rec[] = { VIPROF_BIN, "record", "-q", "-o", sess, "--", "/bin/sleep", "2", NULL };
	pid_t p = run_logged_start(tmp, rec, NULL);
	double t0 = now();
	while (stat(stream, &st) && now() - t0 < 10)
		usleep(20000);
	/* Planted while the recording runs: as a user could when -o was theirs (now
	 * refused, see odir), here as root to check the file-level defence on its own. */
	ASSERT_OK(symlink(victim, link));
	int rc = run_logged_finish(tmp, p, out, sizeof(out), 50);
	read_file(victim, buf, sizeof(buf));
	fprintf(stderr, "record with a symlink at meta.json.tmp: exit %d; the link's target now holds: %.20s\n", rc, buf);
	ASSERT_STREQ(buf, "precious\n");
	ASSERT_EQ(rc, 0);
	ASSERT_OK(lstat(meta, &st));
	ASSERT_TRUE(S_ISREG(st.st_mode));
	ASSERT_EQ(st.st_mode & 07777, 0600);
}

/* A JVM in a chroot (its own mount namespace) whose /tmp is a symlink to an absolute
 * path: to the JVM that is a directory inside the chroot, but to root following
 * /proc/PID/root/tmp it is the host's directory of that name. The old recorder copied
 * the agent there, after unlinking a file of the copy's name. */
static void agentcopy(void)
{
	char root[PATH_MAX], victim[] = "/var/tmp/vp-sec-victim-XXXXXX", inside[PATH_MAX + 64], path[2 * PATH_MAX];
	char planted[PATH_MAX + 64], sess[PATH_MAX], out[8192], buf[64], pidarg[16], script[8 * PATH_MAX];
	const char *dirs[] = { "usr", "proc", "dev", "etc", "classes" };
	int status;

	if (access("/usr/bin/unshare", X_OK) || access("/usr/sbin/chroot", X_OK))
		SKIP("needs unshare and chroot");
	snprintf(root, sizeof(root), "%s/root", tmp);
	ASSERT_OK(mkdir(root, 0755));
	for (int i = 0; i < 5; i++) {
		snprintf(path, sizeof(path), "%s/%s", root, dirs[i]);
		ASSERT_OK(mkdir(path, 0755));
	}
	/* The merged-/usr layout, as on the host. */
	const char *links[][2] = { { "usr/lib", "lib" }, { "usr/lib64", "lib64" }, { "usr/bin", "bin" } };
	for (int i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "%s/%s", root, links[i][1]);
		ASSERT_OK(symlink(links[i][0], path));
	}
	ASSERT_NOT_NULL(mkdtemp(victim));
	snprintf(inside, sizeof(inside), "%s%s", root, victim);
	ASSERT_EQ(run_shf(50, "mkdir -p %s && chmod 1777 %s", inside, inside), 0);
	snprintf(path, sizeof(path), "%s/tmp", root);
	ASSERT_OK(symlink(victim, path));
	snprintf(script, sizeof(script),
		 "mount --bind /usr %s/usr && mount --bind /dev %s/dev && mount --bind /etc %s/etc && "
		 "mount --bind %s %s/classes && mount -t proc proc %s/proc && "
		 "exec chroot %s %s -cp /classes JitSplit 20",
		 root, root, root, VIPROF_JAVA_CLASSES, root, root, root, JAVA17);
	pid_t jvm = fork();
	ASSERT_GE(jvm, 0);
	if (jvm == 0) {
		if (!freopen("/dev/null", "w", stdout))
			_exit(126);
		execl("/usr/bin/unshare", "unshare", "-m", "--propagation", "private", "sh", "-c", script, (char *)NULL);
		_exit(127);
	}
	/* Ready when its hsperfdata directory appears in its (chroot's) /tmp. */
	snprintf(path, sizeof(path), "%s/hsperfdata_root", inside);
	double t0 = now();
	while (access(path, F_OK) && now() - t0 < 15 && waitpid(jvm, &status, WNOHANG) == 0)
		usleep(50000);
	/* Attachable once it catches SIGQUIT (before, the attach's SIGQUIT would kill it). */
	run_wait_state(jvm, SIGQUIT, 15000, "catching SIGQUIT (attachable)");
	snprintf(planted, sizeof(planted), "%s/.viprof-jvmti-%d.so", victim, (int)jvm);
	write_file(planted, "precious\n");
	snprintf(sess, sizeof(sess), "%s/s", tmp);
	snprintf(pidarg, sizeof(pidarg), "%d", (int)jvm);
	char *rec[] = { VIPROF_BIN, "record", "-q", "-p", pidarg, "-d", "1", "-o", sess, NULL };
	int rc = run_logged(tmp, rec, out, sizeof(out), 50);
	bool alive = waitpid(jvm, &status, WNOHANG) == 0;
	int entries = count_entries(victim);
	buf[0] = '\0';
	if (access(planted, F_OK) == 0)
		read_file(planted, buf, sizeof(buf));
	kill(jvm, SIGKILL);
	waitpid(jvm, NULL, 0);
	run_shf(50, "rm -rf %s", victim);
	fprintf(stderr, "record -p of a chrooted JVM whose tmp links to %s: exit %d, JVM %s, %d entries there, "
		"the planted file %s\n%s", victim, rc, alive ? "alive" : "dead", entries,
		!buf[0] ? "is gone" : strcmp(buf, "precious\n") ? "was overwritten" : "is intact", out);
	ASSERT_TRUE(alive);
	ASSERT_STREQ(buf, "precious\n");
	ASSERT_EQ(entries, 1);
	ASSERT_EQ(rc, 0);
	ASSERT_CONTAINS(out, "not a symbolic link");
}

/* The user's own JVM, recorded by root with -p: the agent (running as the user) writes
 * its maps into jit/<pid>, made for it and given to it; the session itself stays
 * root's, which the user can pass through (an ACL entry for them alone) to reach their
 * directory but not list or read. */
static void otheruser(void)
{
	char sess[PATH_MAX], path[PATH_MAX + 64], hs[PATH_MAX], out[8192], pidarg[16];
	struct passwd *pw = user();
	struct stat st;
	int status;

	pid_t jvm = fork();
	ASSERT_GE(jvm, 0);
	if (jvm == 0) {
		if (!freopen("/dev/null", "w", stdout) || chdir("/") || setgroups(0, NULL) || setgid(pw->pw_gid) ||
		    setuid(pw->pw_uid))
			_exit(126);
		execl(JAVA17, "java", "-cp", VIPROF_JAVA_CLASSES, "JitSplit", "20", (char *)NULL);
		_exit(127);
	}
	snprintf(hs, sizeof(hs), "/tmp/hsperfdata_%s/%d", pw->pw_name, (int)jvm);
	double t0 = now();
	while (access(hs, F_OK) && now() - t0 < 15 && waitpid(jvm, &status, WNOHANG) == 0)
		usleep(50000);
	/* Attached as soon as it catches SIGQUIT: the recorder waits for its live phase
	 * (test-attach-young). */
	run_wait_state(jvm, SIGQUIT, 15000, "catching SIGQUIT (attachable)");
	tu_drop_stale_attach_socket(jvm, pw->pw_uid);
	snprintf(sess, sizeof(sess), "%s/s", tmp);
	snprintf(pidarg, sizeof(pidarg), "%d", (int)jvm);
	char *rec[] = { VIPROF_BIN, "record", "-q", "-p", pidarg, "-d", "2", "-o", sess, NULL };
	int rc = run_logged(tmp, rec, out, sizeof(out), 50);
	fprintf(stderr, "record -p of uid %u's JVM: exit %d\n%s", (unsigned)pw->pw_uid, rc, out);
	/* What the user can do in the session, tried as the user. */
	int ls_sess = run_shf(50, "su -s /bin/sh " USER " -c 'ls %s' >/dev/null 2>&1", sess);
	int cat_stream = run_shf(50, "su -s /bin/sh " USER " -c 'cat %s/stream.vps' >/dev/null 2>&1", sess);
	int ls_own = run_shf(50, "su -s /bin/sh " USER " -c 'ls %s/jit/%d' >/dev/null 2>&1", sess, (int)jvm);
	kill(jvm, SIGKILL);
	waitpid(jvm, NULL, 0);
	snprintf(path, sizeof(path), "/tmp/hsperfdata_%s", pw->pw_name);
	run_shf(50, "rm -rf %s", path);
	ASSERT_EQ(rc, 0);
	ASSERT_OK(stat(sess, &st));
	ASSERT_EQ(st.st_uid, 0);
	ASSERT_EQ(st.st_mode & 0707, 0700);   /* group bits show the ACL mask (x) */
	snprintf(path, sizeof(path), "%s/jit/%d", sess, (int)jvm);
	ASSERT_OK(stat(path, &st));
	ASSERT_EQ(st.st_uid, pw->pw_uid);
	ASSERT_EQ(st.st_mode & 07777, 0700);
	snprintf(path, sizeof(path), "%s/jit/%d/codemap.vpm", sess, (int)jvm);
	ASSERT_OK(stat(path, &st));
	ASSERT_EQ(st.st_uid, pw->pw_uid);
	ASSERT_NE(ls_sess, 0);
	ASSERT_NE(cat_stream, 0);
	ASSERT_EQ(ls_own, 0);
}

/* A fresh tmpfs numbers its inodes from the same start: the library copied first into
 * one and the FIFO made first in another, mounted over the same directory, share an
 * inode number (on different devices), as a user's own mounts in a namespace can. */
static void fifoino(void)
{
	char libdir[PATH_MAX], lib[PATH_MAX + 16], sess[PATH_MAX], pidarg[16];
	struct stat a, b;

	snprintf(libdir, sizeof(libdir), "%s/lib", tmp);
	snprintf(lib, sizeof(lib), "%s/libz.so.1", libdir);
	snprintf(sess, sizeof(sess), "%s/s", tmp);
	ASSERT_OK(mkdir(libdir, 0755));
	if (mount("tmpfs", libdir, "tmpfs", 0, "size=4m"))
		SKIP("cannot mount a tmpfs: %s", strerror(errno));
	ASSERT_EQ(run_shf(50, "cp -L /lib/x86_64-linux-gnu/libz.so.1 %s", lib), 0);
	ASSERT_OK(stat(lib, &a));
	pid_t p = fork();
	ASSERT_GE(p, 0);
	if (p == 0) {
		setenv("LD_LIBRARY_PATH", libdir, 1);
		if (!freopen("/dev/null", "w", stdout))
			_exit(126);
		execl(ZCALLER, "zcaller", "squeeze", "30", (char *)NULL);
		_exit(127);
	}
	wait_mapped(p, lib);
	int mounted = mount("tmpfs", libdir, "tmpfs", 0, "size=64k");
	if (!mounted)
		mounted = mkfifo(lib, 0644) ? -1 : 1;
	bool same = mounted == 1 && stat(lib, &b) == 0 && S_ISFIFO(b.st_mode) && a.st_ino == b.st_ino;
	int rc = -1;
	double took = 0;
	if (same) {
		snprintf(pidarg, sizeof(pidarg), "%d", (int)p);
		char *rec[] = { VIPROF_BIN, "record", "-q", "-p", pidarg, "-d", "1", "-o", sess, NULL };
		pid_t r = run_logged_start(tmp, rec, NULL);
		double t0 = now();
		int st;
		while (now() - t0 < 10) {
			if (waitpid(r, &st, WNOHANG) == r) {
				rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
				break;
			}
			usleep(50000);
		}
		took = now() - t0;
		if (rc < 0) {
			kill(r, SIGKILL);
			waitpid(r, NULL, 0);
		}
	}
	kill(p, SIGKILL);
	waitpid(p, NULL, 0);
	if (mounted >= 0)
		umount(libdir);
	umount(libdir);
	if (!same)
		SKIP("could not put a FIFO with the library's inode number at its path");
	fprintf(stderr, "record -p with a FIFO of the mapped library's inode number (%llu) at its path: exit %d in %.1f s "
		"(-1: still waiting after 10 s)\n", (unsigned long long)a.st_ino, rc, took);
	ASSERT_EQ(rc, 0);
	ASSERT_LT_F(took, 8.0);
}

static void mapfifo(void)
{
	char sess[PATH_MAX], jit[PATH_MAX + 8], map[2 * PATH_MAX], out[8192], pidarg[16] = "";
	struct dirent *e;

	if (access(JAVA17, X_OK))
		SKIP("no JDK 17 at %s", JAVA17);
	snprintf(sess, sizeof(sess), "%s/s", tmp);
	snprintf(jit, sizeof(jit), "%s/jit", sess);
	char *rec[] = { VIPROF_BIN, "record", "-q", "-o", sess, "--", JAVA17, "-cp", VIPROF_JAVA_CLASSES, "JitSplit", "1", NULL };
	ASSERT_EQ(run_logged(tmp, rec, out, sizeof(out), 50), 0);
	DIR *d = opendir(jit);
	ASSERT_NOT_NULL(d);
	while ((e = readdir(d)))
		if (e->d_name[0] >= '0' && e->d_name[0] <= '9')
			snprintf(pidarg, sizeof(pidarg), "%.15s", e->d_name);
	closedir(d);
	ASSERT_TRUE(pidarg[0]);
	snprintf(map, sizeof(map), "%s/%s/codemap.vpm", jit, pidarg);
	ASSERT_OK(unlink(map));
	ASSERT_OK(mkfifo(map, 0600));
	char *rep[] = { VIPROF_BIN, "report", sess, "--top", "3", NULL };
	char *maps[] = { VIPROF_BIN, "maps", sess, "--pid", pidarg, "list", NULL };
	int rc1, rc2;
	run_reap(run_logged_start(tmp, rep, NULL), 10000, &rc1);
	run_reap(run_logged_start(tmp, maps, NULL), 10000, &rc2);
	fprintf(stderr, "a FIFO as JVM %s's code map: report exit %d, maps exit %d (-1: still waiting after 10 s)\n",
		pidarg, rc1, rc2);
	ASSERT_EQ(rc1, 0);   /* the report stands without the JIT names */
	ASSERT_GE(rc2, 0);   /* maps may say it has nothing to list, but says it */
}

int main(int argc, char **argv)
{
	const char *what = argc > 1 ? argv[1] : "";

	REQUIRE_ROOT();
	ASSERT_NOT_NULL(mkdtemp(tmp));
	chmod(tmp, 0755);
	atexit(cleanup);
	if (!strcmp(what, "odir"))
		odir();
	else if (!strcmp(what, "perms"))
		perms();
	else if (!strcmp(what, "agentdir"))
		agentdir();
	else if (!strcmp(what, "fifo"))
		fifo();
	else if (!strcmp(what, "sigquit"))
		sigquit();
	else if (!strcmp(what, "diskfull"))
		diskfull();
	else if (!strcmp(what, "metatmp"))
		metatmp();
	else if (!strcmp(what, "agentcopy"))
		agentcopy();
	else if (!strcmp(what, "otheruser"))
		otheruser();
	else if (!strcmp(what, "fifoino"))
		fifoino();
	else if (!strcmp(what, "mapfifo"))
		mapfifo();
	else
		FAIL("unknown scenario '%s'", what);
	return 0;
}
