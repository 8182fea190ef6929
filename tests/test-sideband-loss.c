/* Side-band records lost while the recorder is starved (live, root, BPF backend).
 * On a busy machine `viprof record` may not run for a while; the BPF backend's side-band
 * ring (MMAP2/COMM/FORK of every process, one perf ring per CPU) then overflows, and the
 * launched program's MMAP records may be among those lost. The recorder must then read
 * the program's mappings again from /proc (resync_after_loss), or every sample in a
 * mapping made during the loss is [unknown] for good (a busy run of test-offcpu-walk
 * lost 2278 side-band records, among them the JVM's libjvm and libc, and reported "0.0%
 * reach the root").
 * The starvation is made on purpose: tests/fixtures/sideband-flood.c waits until the
 * test has stopped the recorder (SIGSTOP), maps itself 40000 times, loads libm and
 * computes in cbrt; the test then lets the recorder go on (SIGCONT). Checks: the stream
 * has a side-band LOST record (else the scenario did not happen), and >= 50% of the
 * program's samples are under cbrt, named (before the fix: 0%, [unknown]). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/chunkfile.h"
#include "common/session_format.h"
#include "postproc/profile.h"
#include "postproc/session.h"
#include "test.h"
#include "test-profile.h"
#include "test-run.h"

static char tmp[] = "/tmp/vp-flaky-sbloss-XXXXXX";

/* Waits up to 60 s for dir/name to exist (the fixture's signal that it got there). */
static void wait_file(const char *name, pid_t rec)
{
	char p[PATH_MAX];
	struct timespec ts = { 0, 10000000 };
	snprintf(p, sizeof(p), "%s/%s", tmp, name);
	for (int i = 0; i < 6000; i++) {
		if (access(p, F_OK) == 0)
			return;
		if (waitpid(rec, NULL, WNOHANG) == rec)
			FAIL("viprof record ended before the fixture wrote %s", name);
		nanosleep(&ts, NULL);
	}
	kill(rec, SIGKILL);
	FAIL("the fixture did not write %s within 60 s", p);
}

/* The side-band records the stream says were lost. */
static uint64_t sideband_lost(const char *sess)
{
	char path[PATH_MAX + 32], err[512];
	const struct vp_record *rec;
	uint64_t n = 0;
	snprintf(path, sizeof(path), "%s/" VP_SESSION_STREAM, sess);
	struct cfile_reader *r = cfile_reader__open(path, VP_KIND_SESSION_STREAM, err, sizeof(err));
	if (!r)
		FAIL("%s", err);
	while (cfile_reader__next(r, &rec) == 1)
		if (rec->type == VP_REC_LOST && vp_record_body_len(rec) >= sizeof(struct vp_lost) &&
		    ((const struct vp_lost *)vp_record_body(rec))->source == VP_LOST_SIDEBAND)
			n += ((const struct vp_lost *)vp_record_body(rec))->count;
	cfile_reader__close(r);
	return n;
}

int main(void)
{
	char sess[PATH_MAX], out[PATH_MAX], fifo[PATH_MAX];
	REQUIRE_ROOT();
	ASSERT_NOT_NULL(mkdtemp(tmp));
	snprintf(sess, sizeof(sess), "%s/s", tmp);
	snprintf(out, sizeof(out), "%s/record.out", tmp);
	snprintf(fifo, sizeof(fifo), "%s/go", tmp);
	ASSERT_OK(mkfifo(fifo, 0600));
	pid_t rec = fork();
	ASSERT_GE(rec, 0);
	if (rec == 0) {
		int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(126);
		execl(VIPROF_BIN, VIPROF_BIN, "record", "-q", "-g", "--backend", "bpf", "-o", sess, "--", FLOOD_BIN,
		      tmp, (char *)NULL);
		_exit(127);
	}
	wait_file("ready", rec);
	/* The recorder stops reading; the fixture maps while it cannot. */
	ASSERT_OK(kill(rec, SIGSTOP));
	int go = open(fifo, O_WRONLY | O_CLOEXEC);
	ASSERT_GE(go, 0);
	ASSERT_EQ(write(go, "g", 1), 1);
	close(go);
	wait_file("loaded", rec);
	ASSERT_OK(kill(rec, SIGCONT));
	int st = 0;
	ASSERT_EQ(waitpid(rec, &st, 0), rec);
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		char cmd[PATH_MAX + 16];
		snprintf(cmd, sizeof(cmd), "cat '%s' >&2", out);
		run_sh(cmd, 110);
		FAIL("viprof record ended with status %#x", st);
	}

	uint64_t lost = sideband_lost(sess);
	struct vp_profile *p = vp_profile__new();
	struct vp_session_opts o = { 0 };
	char err[512];
	ASSERT_NOT_NULL(p);
	if (vp_session__load(sess, p, &o, err, sizeof(err)))
		FAIL("load %s: %s", sess, err);
	struct tp_filter f = { .comm = "sideband-flood" };
	double all, in_cbrt = 0;
	all = tp_sum(p, &f, "cbrt", TP_SUBSTR, &in_cbrt);
	fprintf(stderr, "side-band records lost: %llu; sideband-flood: %.0f samples, %.1f%% under cbrt\n",
		(unsigned long long)lost, all, all > 0 ? 100.0 * in_cbrt / all : 0.0);
	if (!lost)
		SKIP("the side-band ring lost nothing while the recorder was stopped (a ring larger than "
		     "40000 MMAP2 records?): the scenario did not happen");
	ASSERT_GT_F(all, 500);   /* 2 s of CPU at 999 Hz */
	ASSERT_GE_F(in_cbrt * 2, all);
	vp_profile__free(p);
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	if (run_sh(cmd, 110) != 0)
		fprintf(stderr, "warning: could not remove %s\n", tmp);
	return 0;
}
