/* A thread's weight belongs to the program it ran when it counted: the counts before an
 * exec to the comm before it, those after to the new comm. A sample weighs its thread's
 * count since its previous sample, so without a split at the exec the first sample
 * after it carried what the thread did before (test-weights-napper: perf stat's forked
 * child blocks on a pipe before it execs napper, and napper came out 3 switches over
 * perf stat's count on a busy machine). The fixture (tests/fixtures/weights/execsplit.c)
 * does N events before an exec and M after, under another comm, and reads the kernel's
 * count of each side itself: the post-exec one from a counter enabled at the exec, as
 * perf stat counts. The new comm must weigh that count, within 2 events or 1% (the
 * moments between the fixture's last read and its exit); the old comm at least its own.
 * Recorded at a low rate (-F, default 10) so that most of the events before the exec come
 * after that thread's last sample there. Exit 77 when not root or the bpf backend
 * cannot run here. argv = viprof execsplit csw|pf [HZ [BACKEND]] */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "postproc/profile.h"
#include "postproc/session.h"
#include "test.h"
#include "test-run.h"

/* Under ctest's 120 s. */
static int run(const char *cmd)
{
	return run_sh(cmd, 100);
}

static uint64_t counted(const char *file, const char *tag)
{
	char line[128], t[16];
	unsigned long long v;
	FILE *f = fopen(file, "r");
	ASSERT_NOT_NULL(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%15s %llu", t, &v) == 2 && !strcmp(t, tag)) {
			fclose(f);
			return v;
		}
	fclose(f);
	FAIL("no '%s' count in %s (the fixture failed before it)", tag, file);
}

int main(int argc, char **argv)
{
	char cmd[5 * PATH_MAX], dir[64], out[PATH_MAX], post[PATH_MAX], fix[PATH_MAX], err[512];
	if (argc < 4 || (strcmp(argv[3], "csw") && strcmp(argv[3], "pf")))
		FAIL("usage: test-weights-exec viprof execsplit csw|pf [HZ [BACKEND]]");
	REQUIRE_ROOT();
	const char *ev = argv[3], *event = !strcmp(ev, "csw") ? "context-switches" : "page-faults";
	const char *hz = argc > 4 ? argv[4] : "10", *backend = argc > 5 ? argv[5] : "bpf";
	/* 400 before, 100 after: naps of 100 us, or fresh pages. */
	const long n_pre = 400, n_post = 100;

	snprintf(dir, sizeof(dir), "weights-exec-%s-XXXXXX", ev);
	ASSERT_NOT_NULL(mkdtemp(dir));
	ASSERT_NOT_NULL(realpath(argv[2], fix));
	snprintf(out, sizeof(out), "%s/counts", dir);
	/* The same file under another name: the exec gives the thread another comm. */
	snprintf(post, sizeof(post), "%s/xsplit-post", dir);
	ASSERT_OK(symlink(fix, post));
	snprintf(cmd, sizeof(cmd), "%s record -q --backend %s -e %s -F %s -o %s/s -- %s %s %ld %ld %s %s >%s/log 2>&1",
		 argv[1], backend, event, hz, dir, fix, ev, n_pre, n_post, out, post, dir);
	int rc = run(cmd);
	if (rc) {
		snprintf(cmd, sizeof(cmd), "grep -q 'sampler' %s/log", dir);
		if (run(cmd) == 0)
			SKIP("the %s backend cannot run here; see %s/log", backend, dir);
		FAIL("viprof record failed (%d); see %s/log", rc, dir);
	}
	uint64_t want_pre = counted(out, "pre"), want_post = counted(out, "post");
	/* A nap whose timer fired before the thread went to sleep switches nothing. */
	ASSERT_GE(want_pre, n_pre / 2);
	ASSERT_GE(want_post, n_post / 2);

	struct vp_profile *p = vp_profile__new();
	ASSERT_NOT_NULL(p);
	char sdir[128];
	snprintf(sdir, sizeof(sdir), "%s/s", dir);
	if (vp_session__load(sdir, p, NULL, err, sizeof(err)))
		FAIL("load %s: %s", sdir, err);
	int e = -1;
	for (int i = 0; i < p->nevents; i++)
		if (!strcmp(p->events[i].name, event))
			e = i;
	ASSERT_GE(e, 0);
	uint64_t w_pre = 0, n_pre_s = 0, w_post = 0, n_post_s = 0, w_other = 0;
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct vp_stack *s = &p->stacks[i];
		if (!strcmp(s->comm, "execsplit")) {
			w_pre += s->weight[e];
			n_pre_s += s->samples[e];
		} else if (!strcmp(s->comm, "xsplit-post")) {
			w_post += s->weight[e];
			n_post_s += s->samples[e];
		} else {
			w_other += s->weight[e];
		}
	}
	fprintf(stderr, "%s, %s -F %s: before the exec %" PRIu64 " samples weigh %" PRIu64 " (kernel from main: %" PRIu64
		"); after it %" PRIu64 " samples weigh %" PRIu64 " (kernel: %" PRIu64 ", %+.1f%%); other comms %" PRIu64 "\n",
		backend, event, hz, n_pre_s, w_pre, want_pre, n_post_s, w_post, want_post,
		100.0 * ((double)w_post - (double)want_post) / (double)want_post, w_other);
	double tol = 0.01 * (double)want_post < 2.0 ? 2.0 : 0.01 * (double)want_post;
	ASSERT_DBL_NEAR((double)w_post, (double)want_post, tol);
	/* Before main (the loader) the kernel counted more than the fixture's own counter saw. */
	ASSERT_GE_F((double)w_pre, (double)want_pre - tol);
	vp_profile__free(p);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	run(cmd);
	printf("test-weights-exec-%s: ok\n", ev);
	return 0;
}
