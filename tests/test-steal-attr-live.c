/* Steal time of a live `viprof record` session: its VP_REC_STEAL values are /proc/stat's
 * cumulative steal (USER_HZ ticks in ns), so per CPU
 *     /proc/stat before <= first record <= last record <= /proc/stat after,
 * every value is a whole number of ticks, records come about every 100 ms, and victim
 * attribution (postproc/steal.h) over the session's real SWITCH records charges
 * exactly last - first per CPU. Then the same session loaded as a profile
 * (postproc/session.c) carries those deltas as steal.cpuN / steal.total and as the
 * weight of its "steal" event. Run twice: launching split3, and `record -a -d 2`.
 * argv[1] = viprof, argv[2] = split3. Needs root. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/wait.h>

#include "test.h"
#include "common/chunkfile.h"
#include "common/session_format.h"
#include "postproc/session.h"
#include "postproc/steal.h"

#define MAXCPU 256

static int read_proc_steal(uint64_t *ns)
{
	char line[512];
	long hz = sysconf(_SC_CLK_TCK);
	int n = 0;
	FILE *f = fopen("/proc/stat", "r");

	ASSERT_NOT_NULL(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long long v[8];
		int cpu;

		if (strncmp(line, "cpu", 3) || line[3] < '0' || line[3] > '9')
			continue;
		if (sscanf(line, "cpu%d %llu %llu %llu %llu %llu %llu %llu %llu", &cpu, &v[0], &v[1], &v[2],
			   &v[3], &v[4], &v[5], &v[6], &v[7]) == 9 && cpu < MAXCPU) {
			ns[cpu] = v[7] * (1000000000ull / (uint64_t)hz);
			if (cpu + 1 > n)
				n = cpu + 1;
		}
	}
	fclose(f);
	return n;
}

static uint64_t charged[MAXCPU];

/* The profile of the session agrees with the stream: per-vCPU meta = last - first, the
 * total is their sum, and the "steal" event weighs exactly that (or is absent at 0). */
static void check_profile(const char *dir, int ncpu, const uint64_t *first, const uint64_t *last)
{
	char err[256] = "", key[32];
	uint64_t total = 0, weight = 0;
	struct vp_profile *p = vp_profile__new();
	int st = -1;

	ASSERT_NOT_NULL(p);
	if (vp_session__load(dir, p, NULL, err, sizeof(err)))
		FAIL("load %s: %s", dir, err);
	for (int c = 0; c < ncpu; c++) {
		snprintf(key, sizeof(key), "steal.cpu%d", c);
		ASSERT_NOT_NULL(vp_profile__meta(p, key));
		ASSERT_UEQ(strtoull(vp_profile__meta(p, key), NULL, 10), last[c] - first[c]);
		total += last[c] - first[c];
	}
	ASSERT_NOT_NULL(vp_profile__meta(p, "steal.total"));
	ASSERT_UEQ(strtoull(vp_profile__meta(p, "steal.total"), NULL, 10), total);
	for (int e = 0; e < p->nevents; e++)
		if (!strcmp(p->events[e].name, "steal"))
			st = e;
	for (size_t i = 0; st >= 0 && i < p->nstacks; i++)
		weight += p->stacks[i].weight[st];
	const char *charged = vp_profile__meta(p, "sched_steal.charged_ns"), *idle = vp_profile__meta(p, "sched_steal.idle_ns");
	if (charged && idle) {
		/* The switch tracer measured steal per thread (issue 11): the event is its exact
		 * figures, /proc/stat only the cross-check above. Threads plus idle account for
		 * all of it in -a; a launched command gets its share. */
		uint64_t c = strtoull(charged, NULL, 10), id = strtoull(idle, NULL, 10);
		fprintf(stderr, "%s: exact steal %" PRIu64 " ns on threads, %" PRIu64 " ns idle, %" PRIu64 " ns charged\n",
			dir, weight, id, c);
		ASSERT_LE(weight + id, c);
	} else if (total) {
		ASSERT_UEQ(weight, total);
	} else {
		ASSERT_EQ(st, -1);
	}
	fprintf(stderr, "%s: profile steal.total %" PRIu64 " ns\n", dir, total);
	vp_profile__free(p);
}

static void victim(void *ctx, uint32_t cpu, uint32_t pid, uint32_t tid, uint64_t ns)
{
	if (cpu < MAXCPU)
		charged[cpu] += ns;
}

static bool record_and_check(const char *viprof, const char *split3, bool all)
{
	uint64_t before[MAXCPU], after[MAXCPU], first[MAXCPU], last[MAXCPU], t_first[MAXCPU], t_last[MAXCPU];
	int nsteal[MAXCPU] = { 0 }, ncpu, status, nswitch = 0;
	uint64_t tick = 1000000000ull / (uint64_t)sysconf(_SC_CLK_TCK);
	const struct vp_record *r;
	struct cfile_reader *rd;
	struct vp_steal_acct *acct;
	char err[256];
	pid_t pid;

	memset(charged, 0, sizeof(charged));
	ncpu = read_proc_steal(before);
	ASSERT_GT(ncpu, 0);
	pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		int fd = open("steal-live.log", O_WRONLY | O_CREAT | O_TRUNC, 0644);

		dup2(fd, 1);
		dup2(fd, 2);
		if (all)
			execl(viprof, "viprof", "record", "-q", "--force", "-e", "cpu-clock", "-o", "steal-live", "-a",
			      "-d", "2", (char *)NULL);
		else
			execl(viprof, "viprof", "record", "-q", "--force", "-e", "cpu-clock", "-o", "steal-live", "--",
			      split3, "1.5", (char *)NULL);
		_exit(126);
	}
	ASSERT_EQ(waitpid(pid, &status, 0), pid);
	read_proc_steal(after);
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		FAIL("viprof record failed (status %d); see steal-live.log", status);

	rd = cfile_reader__open("steal-live/" VP_SESSION_STREAM, VP_KIND_SESSION_STREAM, err, sizeof(err));
	if (!rd)
		FAIL("%s", err);
	acct = vp_steal_acct__new();
	ASSERT_NOT_NULL(acct);
	while (cfile_reader__next(rd, &r) == 1) {
		if (r->type == VP_REC_STEAL && vp_record_body_len(r) >= sizeof(struct vp_steal)) {
			const struct vp_steal *s = vp_record_body(r);

			ASSERT_LT(s->cpu, (uint32_t)ncpu);
			ASSERT_UEQ(s->steal_ns % tick, 0);     /* whole ticks: it is /proc/stat */
			if (!nsteal[s->cpu]++) {
				first[s->cpu] = s->steal_ns;
				t_first[s->cpu] = r->time;
			} else {
				ASSERT_GE(s->steal_ns, last[s->cpu]);
			}
			last[s->cpu] = s->steal_ns;
			t_last[s->cpu] = r->time;
			vp_steal_acct__steal(acct, r->time, s);
		} else if (r->type == VP_REC_SWITCH && vp_record_body_len(r) >= sizeof(struct vp_switch)) {
			vp_steal_acct__switch(acct, r->time, vp_record_body(r));
			nswitch++;
		}
	}
	cfile_reader__close(rd);
	/* The recorder keeps switches only for intervals in which a vCPU's steal grew. */
	bool grew = false;
	for (int c = 0; c < ncpu; c++)
		grew |= nsteal[c] && last[c] > first[c];
	if (grew)
		ASSERT_GT(nswitch, 0);
	else
		ASSERT_EQ(nswitch, 0);
	ASSERT_OK(vp_steal_acct__finish(acct, victim, NULL));
	vp_steal_acct__free(acct);
	for (int c = 0; c < ncpu; c++) {
		double secs = (double)(t_last[c] - t_first[c]) / 1e9;

		fprintf(stderr, "cpu%d: /proc/stat delta %" PRIu64 " ns, session %" PRIu64 " ns in %d records over %.2f s, "
			"attributed %" PRIu64 " ns\n", c, after[c] - before[c], last[c] - first[c], nsteal[c], secs,
			charged[c]);
		ASSERT_GE(nsteal[c], 2);
		/* Start, every ~100 ms, end: 1.5 s of workload gives well over 10. */
		ASSERT_GE(nsteal[c], (int)(secs * 10 * 0.7));
		ASSERT_GE(first[c], before[c]);
		ASSERT_LE(last[c], after[c]);
		ASSERT_LE(last[c] - first[c], after[c] - before[c]);
		ASSERT_UEQ(charged[c], last[c] - first[c]);
	}
	check_profile("steal-live", ncpu, first, last);
	return grew;
}

int main(int argc, char **argv)
{
	if (argc < 3)
		FAIL("usage: test-steal-attr-live viprof split3");
	REQUIRE_ROOT();
	bool grew = record_and_check(argv[1], argv[2], false);
	grew |= record_and_check(argv[1], argv[2], true);
	/* Without steal the attribution above charged 0 to no one and agreed with 0:
	 * the records were checked, the subject was not there. */
	if (!grew)
		SKIP("no vCPU's steal grew during either recording (/proc/stat): the steal records were checked, but there "
		     "was no steal to attribute");
	printf("test-steal-attr-live: ok\n");
	return 0;
}
