/* kill -9 safety: a recorder killed mid-run leaves a stream that reads cleanly up to
 * its last complete chunk (the timed flush writes one at least every second): META
 * first, samples of the workload, no END, no corruption (a torn tail at most). */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "common/session_format.h"
#include "common/timezero.h"
#include "test.h"
#include "test-run.h"

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* The recorder's children (the launched workload), so that none outlives the test. */
static int children_of(pid_t pid, pid_t *out, int max)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	int k = 0;
	for (char *p = buf, *end; k < max; p = end) {
		long v = strtol(p, &end, 10);
		if (end == p)
			break;
		out[k++] = (pid_t)v;
	}
	return k;
}

/* Samples readable in the stream right now (the recorder is still writing it). */
static long count_samples(const char *sess)
{
	char path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/" VP_SESSION_STREAM, sess);
	struct cfile_reader *r = cfile_reader__open(path, VP_KIND_SESSION_STREAM, NULL, 0);
	if (!r)
		return 0;
	const struct vp_record *rec;
	long n = 0;
	while (cfile_reader__next(r, &rec) == 1)
		n += rec->type == VP_REC_SAMPLE;
	cfile_reader__close(r);
	return n;
}

int main(void)
{
	REQUIRE_ROOT();
	char dir[] = "/tmp/vp-test-record-kill-XXXXXX", sess[PATH_MAX], log[PATH_MAX], path[PATH_MAX + 32];
	ASSERT_NOT_NULL(mkdtemp(dir));
	snprintf(sess, sizeof(sess), "%s/s", dir);
	snprintf(log, sizeof(log), "%s/stderr", dir);

	pid_t rec = fork();
	ASSERT_GE(rec, 0);
	if (rec == 0) {
		freopen(log, "w", stderr);
		execl(VIPROF_BIN, VIPROF_BIN, "record", "-g", "-q", "-o", sess, "--", SPLIT3, "30", (char *)NULL);
		_exit(126);
	}
	/* At least ~2.5 s of recording, and until the timed flushes have put more than 500
	 * samples on disk (a busy machine gives the workload less CPU, so fewer samples
	 * per second): the check is that what was flushed survives the kill, not a rate. */
	int status;
	for (int i = 0; i < 150; i++) {
		sleep_ms(100);
		if (waitpid(rec, &status, WNOHANG) == rec) {
			char msg[2048] = "";
			FILE *f = fopen(log, "r");
			if (f) {
				size_t n = fread(msg, 1, sizeof(msg) - 1, f);
				msg[n] = '\0';
				fclose(f);
			}
			if (strstr(msg, "no sampler backend can run here"))
				SKIP("no sampler backend here: %s", msg);
			FAIL("the recorder exited early (status %d): %s", status, msg);
		}
		if (i >= 24 && count_samples(sess) > 600)
			break;
	}
	pid_t kids[16];
	int nk = children_of(rec, kids, 16);
	long before = count_samples(sess);
	ASSERT_OK(kill(rec, SIGKILL));
	ASSERT_EQ(waitpid(rec, &status, 0), rec);
	ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	ASSERT_GE(nk, 1);
	for (int i = 0; i < nk; i++)
		kill(kids[i], SIGKILL);

	snprintf(path, sizeof(path), "%s/" VP_SESSION_STREAM, sess);
	char err[512];
	struct cfile_reader *r = cfile_reader__open(path, VP_KIND_SESSION_STREAM, err, sizeof(err));
	if (!r)
		FAIL("%s", err);
	const struct vp_record *rec_;
	int k, idx = 0, first_non_meta = -1, meta_after = 0;
	long meta = 0, samples = 0, split_samples = 0, ends = 0, events = 0;
	uint32_t split_pid = (uint32_t)kids[0];
	while ((k = cfile_reader__next(r, &rec_)) == 1) {
		if (rec_->type == VP_REC_META) {
			meta++;
			/* All but the sampling start, known once the sampler runs (before any sample). */
			if (first_non_meta >= 0 && strcmp(vp_record_body(rec_), VP_META_SAMPLING_START))
				meta_after++;
		} else if (first_non_meta < 0) {
			first_non_meta = idx;
		}
		/* Sampled events only: the switch tracer's (steal, off-cpu) are measured. */
		if (rec_->type == VP_REC_EVENT && vp_record_body_len(rec_) >= sizeof(struct vp_event_desc) &&
		    !(((const struct vp_event_desc *)vp_record_body(rec_))->flags & VP_EVENT_SCHED))
			events++;
		if (rec_->type == VP_REC_SAMPLE) {
			const struct vp_sample *s = vp_record_body(rec_);
			samples++;
			if (s->pid == split_pid)
				split_samples++;
		}
		if (rec_->type == VP_REC_END)
			ends++;
		idx++;
	}
	if (k < 0)
		FAIL("stream corrupt after %d records: %s", idx, cfile_reader__error(r));
	fprintf(stderr, "records %d, meta %ld, samples %ld (%ld of the workload), chunks %llu, torn tail %s\n", idx,
		meta, samples, split_samples, (unsigned long long)cfile_reader__chunks(r),
		cfile_reader__truncated(r) ? "yes" : "no");
	cfile_reader__close(r);
	ASSERT_GE(meta, 5);
	ASSERT_EQ(meta_after, 0);     /* META records come first */
	ASSERT_EQ(events, 1);
	ASSERT_GT(samples, 500);
	ASSERT_GE(samples, before);   /* nothing that was readable before the kill was lost */
	ASSERT_GT(split_samples, 500);
	ASSERT_EQ(ends, 0);           /* killed: no clean end */

	snprintf(path, sizeof(path), "rm -rf %s", dir);
	if (run_sh(path, 50) != 0)
		fprintf(stderr, "warning: could not remove %s\n", dir);
	printf("ok\n");
	return 0;
}
