/* The frame-pointer-free walker on native code (issue: whole stacks without frame
 * pointers): 'viprof record -g' on tests/fixtures/unwind/zcaller, built without frame
 * pointers, calling Debian's libz (no frame pointers either) and libc's read wrapper.
 *   squeeze: at least 99% of the samples inside libz reach squeeze() and main();
 *   read:    at least 99% of the samples in libc's read wrapper (with the kernel below
 *            it) reach read_zeros(), the wrapper's caller.
 *   signal:  tests/fixtures/unwind/sigprof, a SIGPROF handler of the process's own (another
 *            signal-based profiler) running on top of native code: at least 99% of the
 *            samples in the handler reach, through the signal frame (libc's __restore_rt),
 *            the interrupted function and run() and main() (issue 32 item 5).
 *   crafted: zcaller with tests/fixtures/cfi/crafted-regs.elf mapped executable, the 1.3 KB
 *            file whose CFI made libdw ask for 1.5 GB: root's recorder stays under 512 MB
 *            at its peak, says the file's unwind information was refused, and still walks
 *            zcaller's own stacks.
 * Usage: test-unwind-native squeeze|read|signal|crafted (one ctest entry each). Needs root
 * and BPF. */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "postproc/profile.h"
#include "postproc/session.h"
#include "test.h"
#include "test-run.h"

static char tmp[] = "/tmp/vp-test-unwind-native-XXXXXX";

static bool has(const struct vp_profile *p, const struct vp_stack *s, const char *name, const char *image)
{
	for (uint32_t i = 0; i < s->nframes; i++) {
		const struct vp_frame *f = &p->frames[s->frames[i]];

		if ((!name || !strcmp(f->name, name)) && (!image || strstr(f->image, image)))
			return true;
	}
	return false;
}

static bool has_read_wrapper(const struct vp_profile *p, const struct vp_stack *s)
{
	return has(p, s, "read", "libc.so") || has(p, s, "__read", "libc.so") ||
	       has(p, s, "__libc_read", "libc.so");
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "squeeze";
	char sess[PATH_MAX], out[8192], err[512];

	if (geteuid() != 0)
		SKIP("needs root for the BPF sampler");
	ASSERT_NOT_NULL(mkdtemp(tmp));
	snprintf(sess, sizeof(sess), "%s/s", tmp);
	bool sig = !strcmp(mode, "signal"), crafted = !strcmp(mode, "crafted");
	char fx[PATH_MAX + 16];
	snprintf(fx, sizeof(fx), "%s/crafted.so", tmp);
	/* A copy of its own: a new file for the unwind-rule cache, as a user's would be. */
	if (crafted) {
		char cp[2 * PATH_MAX + 16];
		snprintf(cp, sizeof(cp), "cp '%s' '%s'", CFI_CRAFTED_REGS, fx);
		ASSERT_EQ(run_sh(cp, 50), 0);
	}
	char *rec[] = { VIPROF_BIN, "record", "-g", "-F", "999", "-q", "--backend", "bpf", "-o", sess,
			"--", ZCALLER, crafted ? "map" : (char *)mode, "4", crafted ? fx : NULL, NULL };
	char *rec_sig[] = { VIPROF_BIN, "record", "-g", "-F", "999", "-q", "--backend", "bpf", "-o", sess,
			    "--", SIGPROF_FIXTURE, "4", NULL };
	int rc = run_logged(tmp, sig ? rec_sig : rec, out, sizeof(out), 50);
	if (rc != 0)
		FAIL("viprof record exited %d: %s", rc, out);
	if (crafted) {
		/* The recorder is the only child waited for: its peak RSS. */
		struct rusage ru;
		getrusage(RUSAGE_CHILDREN, &ru);
		printf("crafted: viprof record's peak RSS %ld MB\n", ru.ru_maxrss / 1024);
		if (ru.ru_maxrss > 512 * 1024)
			FAIL("viprof record took %ld MB building the unwind table of %s (limit 512 MB)", ru.ru_maxrss / 1024,
			     fx);
		ASSERT_CONTAINS(out, "unwind information of 1 mapped files was refused");
		ASSERT_CONTAINS(out, "a length past its segment's end");
		mode = "read";               /* zcaller's own stacks, below */
	}

	struct vp_profile *p = vp_profile__new();
	ASSERT_NOT_NULL(p);
	ASSERT_OK(vp_session__load(sess, p, &(struct vp_session_opts){ 0 }, err, sizeof(err)));
	uint64_t inside = 0, reached = 0, rooted = 0;
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct vp_stack *s = &p->stacks[i];
		bool in = sig ? has(p, s, "handler_work", NULL) :
			  !strcmp(mode, "squeeze") ? has(p, s, NULL, "libz.so") : has_read_wrapper(p, s);

		if (!in)
			continue;
		inside += s->samples[0];
		if (has(p, s, sig ? "interrupted_work" : !strcmp(mode, "squeeze") ? "squeeze" : "read_zeros", NULL))
			reached += s->samples[0];
		if (has(p, s, "main", NULL) && has(p, s, "run", NULL))
			rooted += s->samples[0];
	}
	printf("%s: %llu samples inside, %llu reach the caller (%.2f%%), %llu reach run() and main() (%.2f%%)\n",
	       mode, (unsigned long long)inside, (unsigned long long)reached,
	       inside ? 100.0 * (double)reached / (double)inside : 0.0, (unsigned long long)rooted,
	       inside ? 100.0 * (double)rooted / (double)inside : 0.0);
	ASSERT_GT(inside, 200);
	ASSERT_GE(reached * 100, inside * 99);
	ASSERT_GE(rooted * 100, inside * 99);
	vp_profile__free(p);
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	if (run_sh(cmd, 50) != 0)
		fprintf(stderr, "cannot remove %s\n", tmp);
	return 0;
}
