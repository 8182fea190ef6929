/* End to end through the recorder: 'viprof record' on the bundled workloads with a
 * known ground truth, read back by the postproc loader.
 *  - launch mode, split3 -g, with each backend (bpf, perf): total shares 50/30/20
 *    within 3 points (the bar); the stream has
 *    META first, one EVENT, STEAL records (every 100 ms per CPU), SWITCH records, and
 *    a clean END whose sample count matches the SAMPLE records;
 *  - -p PID on a running split3 (stopped while the recording attaches, then run to its
 *    end): the split of its CPU time from there, through the synthesized mappings;
 *  - sysheavy: kernel leaves are named from the session's own KSYM records, each
 *    symbol emitted once and before the first sample that needs it, and the user
 *    function that made the system calls is on their stacks. */
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
#include "postproc/profile.h"
#include "postproc/session.h"
#include "test.h"
#include "test-profile.h"
#include "test-run.h"

/* test.h's ASSERT_GT compares integers; these are shares. */
#define ASSERT_SHARE_GT(a, b) do { double _a = (a), _b = (b); \
	if (!(_a > _b)) FAIL("%s > %s (%.3f vs %.3f)", #a, #b, _a, _b); } while (0)

static char tmp[] = "/tmp/vp-test-record-session-XXXXXX";

struct stream_facts {
	long records, meta, meta_after, sampling_start, events, samples, steals, switches, comms, mmaps, synth_mmaps, ends, ksyms;
	bool exact_steal;   /* the switch tracer's "steal" event: steal measured per thread */
	long ksym_dups, ksym_missing_at_end;
	struct vp_end end;
	int ncpu_steal;
	uint64_t steal_first[64], steal_last[64];
	bool steal_seen[64];
};

/* One pass over stream.vps checking order rules the loader does not. */
static void scan_stream(const char *sess, struct stream_facts *sf)
{
	char path[PATH_MAX + 32], err[512];
	memset(sf, 0, sizeof(*sf));
	snprintf(path, sizeof(path), "%s/" VP_SESSION_STREAM, sess);
	struct cfile_reader *r = cfile_reader__open(path, VP_KIND_SESSION_STREAM, err, sizeof(err));
	if (!r)
		FAIL("%s", err);
	static uint64_t ksym_addr[4096], ksym_size[4096];
	/* Kernel addresses of samples: a KSYM for each must come before END. Since the
	 * recorder reads kallsyms on a thread while it records, it may follow the samples
	 * that need it (the loader resolves samples after the whole stream). */
	static uint64_t kips[65536];
	long nkips = 0;
	const struct vp_record *rec;
	int k;
	bool other_seen = false;
	while ((k = cfile_reader__next(r, &rec)) == 1) {
		const void *b = vp_record_body(rec);
		sf->records++;
		if (rec->type == VP_REC_META) {
			sf->meta++;
			/* The sampling start (every view's time zero) is known only once the
			 * sampler runs: it follows the EVENT and JVM records, before any sample. */
			if (!strcmp(b, VP_META_SAMPLING_START))
				sf->sampling_start += !sf->samples;
			else
				sf->meta_after += other_seen;
			continue;
		}
		other_seen = true;
		switch (rec->type) {
		case VP_REC_EVENT:
			/* The switch tracer's events (steal, off-cpu) are measured, not sampled. */
			if (vp_record_body_len(rec) >= sizeof(struct vp_event_desc) &&
			    !(((const struct vp_event_desc *)b)->flags & VP_EVENT_SCHED))
				sf->events++;
			else if (vp_record_body_len(rec) >= sizeof(struct vp_event_desc) &&
				 !strncmp(((const struct vp_event_desc *)b)->name, "steal", sizeof("steal")))
				sf->exact_steal = true;
			break;
		case VP_REC_STEAL: {
			const struct vp_steal *st = b;
			sf->steals++;
			if ((int)st->cpu + 1 > sf->ncpu_steal)
				sf->ncpu_steal = (int)st->cpu + 1;
			if (st->cpu < 64) {
				if (!sf->steal_seen[st->cpu])
					sf->steal_first[st->cpu] = st->steal_ns;
				sf->steal_seen[st->cpu] = true;
				sf->steal_last[st->cpu] = st->steal_ns;
			}
			break;
		}
		case VP_REC_SWITCH: sf->switches++; break;
		case VP_REC_COMM: sf->comms++; break;
		case VP_REC_MMAP:
			sf->mmaps++;
			sf->synth_mmaps += ((const struct vp_mmap *)b)->synthesized;
			break;
		case VP_REC_KSYM: {
			const struct vp_ksym *ks = b;
			for (long i = 0; i < sf->ksyms && i < 4096; i++)
				if (ksym_addr[i] == ks->addr)
					sf->ksym_dups++;
			if (sf->ksyms < 4096) {
				ksym_addr[sf->ksyms] = ks->addr;
				ksym_size[sf->ksyms] = ks->size;
			}
			sf->ksyms++;
			break;
		}
		case VP_REC_SAMPLE: {
			const struct vp_sample *s = b;
			sf->samples++;
			for (unsigned i = 0; i < s->nr_kernel; i++) {
				uint64_t ip = s->ips[i];
				if (ip < 0xffff800000000000ull || ip >= (uint64_t)-4095)
					continue;
				if (nkips < 65536)
					kips[nkips++] = ip;
			}
			break;
		}
		case VP_REC_END:
			for (long i = 0; i < nkips && sf->ksyms < 4096; i++) {
				bool known = false;
				for (long j = 0; j < sf->ksyms && !known; j++)
					known = kips[i] >= ksym_addr[j] && kips[i] - ksym_addr[j] < ksym_size[j];
				sf->ksym_missing_at_end += !known;
			}
			sf->ends++;
			memcpy(&sf->end, b, sizeof(sf->end));
			break;
		}
	}
	if (k < 0)
		FAIL("%s: %s", path, cfile_reader__error(r));
	ASSERT_FALSE(cfile_reader__truncated(r));
	cfile_reader__close(r);
}

static struct vp_profile *load(const char *sess)
{
	char err[512];
	struct vp_profile *p = vp_profile__new();
	struct vp_session_opts o = { 0 };
	ASSERT_NOT_NULL(p);
	if (vp_session__load(sess, p, &o, err, sizeof(err)))
		FAIL("load %s: %s", sess, err);
	ASSERT_FALSE(p->incomplete);
	return p;
}

/* The bar: the report's split within 3 percentage points of split3's (50/30/20
 * over whole rounds). */
static void check_split(const struct vp_profile *p, uint32_t pid, const char *what, const double want[3])
{
	double a = tp_share(p, &(struct tp_filter){ .pid = pid }, "work50", TP_EXACT), b = tp_share(p, &(struct tp_filter){ .pid = pid }, "work30", TP_EXACT), c = tp_share(p, &(struct tp_filter){ .pid = pid }, "work20", TP_EXACT);
	fprintf(stderr, "%s: work50 %.3f work30 %.3f work20 %.3f\n", what, a, b, c);
	ASSERT_DBL_NEAR(a, want[0], 0.03);
	ASSERT_DBL_NEAR(b, want[1], 0.03);
	ASSERT_DBL_NEAR(c, want[2], 0.03);
}

static void test_launch(const char *backend)
{
	char sess[PATH_MAX], out[4096], what[64];
	snprintf(sess, sizeof(sess), "%s/launch-%s", tmp, backend);
	snprintf(what, sizeof(what), "launch (%s)", backend);
	int rc = run_logged(tmp, (char *const[]){ VIPROF_BIN, "record", "-g", "--backend", (char *)backend, "-o", sess, "--", SPLIT3, "2", NULL }, out, sizeof(out), 100);
	if (rc)
		FAIL("viprof record exited %d: %s", rc, out);
	ASSERT_CONTAINS(out, "samples (");   /* the summary line */
	ASSERT_CONTAINS(out, sess);

	struct stream_facts sf;
	scan_stream(sess, &sf);
	fprintf(stderr, "launch: %ld records, %ld samples, %ld steal, %ld switch, %ld comm, %ld mmap\n", sf.records,
		sf.samples, sf.steals, sf.switches, sf.comms, sf.mmaps);
	ASSERT_GE(sf.meta, 10);
	ASSERT_EQ(sf.meta_after, 0);
	ASSERT_EQ(sf.sampling_start, 1);
	ASSERT_EQ(sf.events, 1);
	ASSERT_EQ(sf.ends, 1);
	ASSERT_UEQ(sf.end.samples, (uint64_t)sf.samples);
	ASSERT_GT(sf.samples, 400);    /* 2 s at 999 Hz, on a machine others may share */
	ASSERT_EQ(sf.end.exit_status, 0);
	ASSERT_GT(sf.end.duration_ns, 1900000000ull);
	/* Steal every 100 ms on every CPU over ~2 s, plus start and end. */
	ASSERT_GE(sf.ncpu_steal, 1);
	ASSERT_GE(sf.steals, 15L * sf.ncpu_steal);
	/* Switches serve only the proportional split of steal: none are taken while the
	 * switch tracer measures it per thread; otherwise the recorder keeps them for the
	 * 100 ms intervals in which a vCPU's steal grew, and drops the rest. */
	bool stolen = false;
	for (int c = 0; c < 64; c++)
		stolen |= sf.steal_seen[c] && sf.steal_last[c] > sf.steal_first[c];
	fprintf(stderr, "launch: steal %s during the recording, %s, %ld switch records\n",
		stolen ? "grew" : "did not grow", sf.exact_steal ? "measured per thread" : "split", sf.switches);
	if (sf.exact_steal)
		ASSERT_EQ(sf.switches, 0);
	else if (stolen)
		ASSERT_GT(sf.switches, 0);
	else
		ASSERT_EQ(sf.switches, 0);
	ASSERT_GT(sf.mmaps, 0);

	struct vp_profile *p = load(sess);
	check_split(p, 0, what, (const double[3]){ 0.50, 0.30, 0.20 });
	vp_profile__free(p);

	char path[PATH_MAX + 32];
	struct stat st;
	snprintf(path, sizeof(path), "%s/meta.json", sess);
	ASSERT_OK(stat(path, &st));
	snprintf(path, sizeof(path), "%s/jit", sess);
	ASSERT_OK(stat(path, &st));
	ASSERT_TRUE(S_ISDIR(st.st_mode));
}

/* split3's thread CPU time in ns (its only thread: /proc/PID/schedstat's first field,
 * the kernel's sum_exec_runtime, which CLOCK_THREAD_CPUTIME_ID also reads). */
static uint64_t cpu_ns_of(pid_t pid)
{
	char path[64];
	unsigned long long ns = 0;
	snprintf(path, sizeof(path), "/proc/%d/schedstat", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f || fscanf(f, "%llu", &ns) != 1)
		FAIL("cannot read %s: %s", path, f ? "no number" : strerror(errno));
	fclose(f);
	return ns;
}

/* Whether the session's stream holds its sampling start yet (the recorder writes it once
 * the sampler runs; the writer flushes at least once a second). */
static bool sampling_started(const char *sess)
{
	char path[PATH_MAX + 32];
	const struct vp_record *rec;
	bool seen = false;
	snprintf(path, sizeof(path), "%s/" VP_SESSION_STREAM, sess);
	struct cfile_reader *r = cfile_reader__open(path, VP_KIND_SESSION_STREAM, NULL, 0);
	if (!r)
		return false;
	while (!seen && cfile_reader__next(r, &rec) == 1)
		seen = rec->type == VP_REC_META && !strcmp(vp_record_body(rec), VP_META_SAMPLING_START);
	cfile_reader__close(r);
	return seen;
}

/* split3's shares over its CPU time from c0 (ns) to its end (secs): its phases are a
 * function of its own CPU clock (50, 30 and 20 ms of each 100 ms round), so the split of
 * any stretch of it is known exactly. Its clock starts at main, a millisecond or so after
 * what schedstat counts from (exec, the dynamic linker): taken as 0, at most that much. */
static void split_from(uint64_t c0, double secs, double share[3])
{
	static const double lo[3] = { 0, 50e6, 80e6 }, hi[3] = { 50e6, 80e6, 100e6 };
	double from = (double)c0, to = secs * 1e9, all = 0, part[3] = { 0 };
	for (double r = 0; r < to; r += 100e6)
		for (int k = 0; k < 3; k++) {
			double a = r + lo[k] > from ? r + lo[k] : from, b = r + hi[k] < to ? r + hi[k] : to;
			if (b > a)
				part[k] += b - a;
		}
	for (int k = 0; k < 3; k++)
		all += part[k];
	for (int k = 0; k < 3; k++)
		share[k] = all > 0 ? part[k] / all : 0;
}

/* -p on a running split3. Recorded for a fixed wall time, the window held whatever CPU
 * time the machine gave split3 (139 samples at load 14: 1.4 rounds, no 50/30/20 split)
 * and cut its rounds anywhere. So split3 is stopped (SIGSTOP) once running, the recording
 * attaches, and split3 goes on once sampling has started and runs to its end (the
 * recording ends with it); the expected split is that of its CPU time from where it was
 * stopped, read from the kernel, to its end. */
static void test_pid(void)
{
	char sess[PATH_MAX], out[4096], pidarg[32];
	const double secs = 2;
	snprintf(sess, sizeof(sess), "%s/pid", tmp);
	pid_t w = fork();
	ASSERT_GE(w, 0);
	if (w == 0) {
		execl(SPLIT3, SPLIT3, "2", (char *)NULL);
		_exit(126);
	}
	/* Running its own code (its libraries mapped) before we look at /proc: some CPU
	 * time past the dynamic linker. */
	struct timespec ts = { 0, 10000000 };
	for (int i = 0; cpu_ns_of(w) < 20000000ull; i++) {
		if (i > 6000)
			FAIL("split3 (pid %d) used no 20 ms of CPU in 60 s", (int)w);
		nanosleep(&ts, NULL);
	}
	ASSERT_OK(kill(w, SIGSTOP));
	int st;
	ASSERT_EQ(waitpid(w, &st, WUNTRACED), w);
	ASSERT_TRUE(WIFSTOPPED(st));
	uint64_t c0 = cpu_ns_of(w);
	snprintf(pidarg, sizeof(pidarg), "%d", (int)w);
	pid_t rec = run_logged_start(tmp, (char *const[]){ VIPROF_BIN, "record", "-g", "-q", "-p", pidarg, "-o", sess, NULL },
			     NULL);
	for (int i = 0; !sampling_started(sess); i++) {
		if (i > 6000 || waitpid(rec, NULL, WNOHANG) == rec) {
			kill(w, SIGKILL);
			FAIL("viprof record -p %d did not start sampling within 60 s", (int)w);
		}
		nanosleep(&ts, NULL);
	}
	ASSERT_OK(kill(w, SIGCONT));
	int rc = run_logged_finish(tmp, rec, out, sizeof(out), 100);   /* ends when split3 has ended */
	ASSERT_EQ(waitpid(w, &st, 0), w);
	if (rc)
		FAIL("viprof record -p exited %d: %s", rc, out);
	ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	struct stream_facts sf;
	scan_stream(sess, &sf);
	ASSERT_GE(sf.synth_mmaps, 2);   /* split3 itself and libc, from /proc/PID/maps */
	ASSERT_GE(sf.comms, 1);
	ASSERT_GT(sf.samples, 400);
	double want[3];
	split_from(c0, secs, want);
	fprintf(stderr, "pid: stopped at %.1f ms of split3's CPU; its split from there: %.3f %.3f %.3f\n",
		(double)c0 / 1e6, want[0], want[1], want[2]);
	struct vp_profile *p = load(sess);
	check_split(p, (uint32_t)w, "pid", want);
	vp_profile__free(p);
}

static void test_kernel_symbols(void)
{
	char sess[PATH_MAX], out[4096];
	snprintf(sess, sizeof(sess), "%s/sys", tmp);
	int rc = run_logged(tmp, (char *const[]){ VIPROF_BIN, "record", "-g", "-q", "-o", sess, "--", SYSHEAVY, "2", NULL }, out,
		     sizeof(out), 100);
	if (rc)
		FAIL("viprof record exited %d: %s", rc, out);
	struct stream_facts sf;
	scan_stream(sess, &sf);
	fprintf(stderr, "sysheavy: %ld samples, %ld KSYM records\n", sf.samples, sf.ksyms);
	ASSERT_GT(sf.ksyms, 3);
	ASSERT_LT(sf.ksyms, 2000);          /* only what the samples need, not all of kallsyms */
	ASSERT_EQ(sf.ksym_dups, 0);
	ASSERT_EQ(sf.ksym_missing_at_end, 0);

	struct vp_profile *p = load(sess);
	double kernel = 0, total = 0, kernel_named = 0, under_loop = 0;
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct vp_stack *s = &p->stacks[i];
		if (!s->nframes)
			continue;
		const struct vp_frame *leaf = &p->frames[s->frames[s->nframes - 1]];
		total += (double)s->samples[0];
		if (leaf->layer != VP_LAYER_KERNEL)
			continue;
		kernel += (double)s->samples[0];
		if (leaf->name[0] && strncmp(leaf->name, "0x", 2) && strcmp(leaf->name, "[unknown]"))
			kernel_named += (double)s->samples[0];
		for (uint32_t f = 0; f < s->nframes; f++)
			if (!strcmp(p->frames[s->frames[f]].name, "syscall_loop")) {
				under_loop += (double)s->samples[0];
				break;
			}
	}
	fprintf(stderr, "sysheavy: kernel leaves %.3f, named %.3f, under syscall_loop %.3f\n", kernel / total,
		kernel_named / kernel, under_loop / kernel);
	ASSERT_SHARE_GT(kernel / total, 0.3);
	ASSERT_SHARE_GT(kernel_named / kernel, 0.95);
	ASSERT_SHARE_GT(under_loop / kernel, 0.8);
	vp_profile__free(p);
}

/* A command shorter than reading kallsyms (~60 ms here): the recorder reads them on a
 * thread and names the kernel frames once they arrive, after the last sample. A session
 * of 40 ms of system calls must still carry a KSYM for each kernel frame and report
 * them by name. */
static void test_short_command_ksyms(void)
{
	char sess[PATH_MAX], out[8192];
	snprintf(sess, sizeof(sess), "%s/short", tmp);
	int rc = run_logged(tmp, (char *const[]){ VIPROF_BIN, "record", "-q", "-F", "4999", "-o", sess, "--", SYSHEAVY, "0.04",
				      NULL }, out, sizeof(out), 100);
	if (rc)
		FAIL("viprof record exited %d: %s", rc, out);
	struct stream_facts sf;
	scan_stream(sess, &sf);
	fprintf(stderr, "short sysheavy: %ld samples, %ld KSYM records\n", sf.samples, sf.ksyms);
	ASSERT_GT(sf.samples, 5);
	ASSERT_GT(sf.ksyms, 0);
	ASSERT_EQ(sf.ksym_dups, 0);
	ASSERT_EQ(sf.ksym_missing_at_end, 0);
	ASSERT_EQ(sf.ends, 1);

	struct vp_profile *p = load(sess);
	double kernel = 0, kernel_named = 0;
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct vp_stack *s = &p->stacks[i];
		if (!s->nframes)
			continue;
		const struct vp_frame *leaf = &p->frames[s->frames[s->nframes - 1]];
		if (leaf->layer != VP_LAYER_KERNEL)
			continue;
		kernel += (double)s->samples[0];
		if (leaf->name[0] && strncmp(leaf->name, "[kernel] 0x", 11) && strcmp(leaf->name, "[unknown]"))
			kernel_named += (double)s->samples[0];
	}
	fprintf(stderr, "short sysheavy: %.0f kernel samples, %.0f named\n", kernel, kernel_named);
	ASSERT_GT_F(kernel, 0);
	ASSERT_SHARE_GT(kernel_named / kernel, 0.95);
	vp_profile__free(p);
}

int main(void)
{
	REQUIRE_ROOT();
	ASSERT_NOT_NULL(mkdtemp(tmp));
	/* The split with each backend: both must attribute the same way. */
	test_launch("bpf");
	test_launch("perf");
	test_pid();
	test_kernel_symbols();
	test_short_command_ksyms();
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	if (run_sh(cmd, 110) != 0)
		fprintf(stderr, "warning: could not remove %s\n", tmp);
	printf("ok\n");
	return 0;
}
