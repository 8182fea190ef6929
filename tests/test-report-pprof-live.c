/* The pprof report of real recordings, read back by the real pprof (issue 12): one
 * ctest entry per scenario.
 *   native  record -g --off-cpu of a thread alternating 30 ms on CPU (busy_30ms) and
 *           70 ms asleep (sleep_70ms): every location that names a mapping lies inside
 *           that mapping's range, no mapping is a 0x0/0x0 one claiming functions, the
 *           frames without an address (the off-CPU and steal states) are 0x0 locations
 *           without a mapping, the off-CPU samples keep the sleeping thread's stack by
 *           address under them, the profile is named after the fixture (its mapping
 *           first), and the clock event's weight is cpu/nanoseconds.
 *   jvm     record -g --off-cpu of JitSplit on JDK 17 (jvm25: Temurin 25): the same
 *           checks (the JVM's waiting threads put off-CPU states over native and Java
 *           stacks), JIT methods at their real addresses inside the [jit] mapping
 *           (never 0x0), the profile named after java (not ld-linux), and inlined
 *           methods as more lines of one location.
 *   wholevm record -a -g of two JVMs (Workers, the agent attached to both) and a C
 *           program (split3) running at once (issue 27): pprof names the profile
 *           after the VM ("File: whole VM ..."), not after one of its programs; every
 *           sample of each of the three carries its process's name (label "process",
 *           which -tagroot=process puts over the stacks) and pid; under 5% of their
 *           samples hold an "[unknown]" frame, and when any sample of the VM does, the
 *           profile's comments count them by reason.
 * Needs root (BPF), Go and Debian's pprof sources (pprof is built once per build tree,
 * as test-report-pprof does); skipped otherwise. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test-helpers.h"
#include "test-run.h"
#include "test.h"

#define PPROF_SRC "/usr/share/gocode/src/github.com/google/pprof"
#define MAXL 20000
#define MAXM 256

struct loc {
	uint64_t addr;
	unsigned map;      /* 0: none */
	int nlines;
	char fn[160];      /* the first (innermost) line's function */
};
struct map {
	uint64_t start, limit;
	char file[256];
	bool claims;       /* [FN] */
};

static struct loc locs[MAXL];
static struct map maps[MAXM];
static unsigned nlocs, nmaps;
static char dir[256];

static void need_pprof(void)
{
	struct stat sb;
	if (geteuid() != 0)
		SKIP("needs root (BPF sampler)");
	if (run_sh("command -v go >/dev/null 2>&1", 290) != 0)
		SKIP("go is not installed (apt-get install golang-go)");
	if (stat(PPROF_SRC, &sb) != 0)
		SKIP("pprof sources missing at %s (apt-get install golang-github-google-pprof-dev)", PPROF_SRC);
	if (stat("pprof", &sb) == 0)
		return;
	char cwd[512], cmd[4096];
	ASSERT_NOT_NULL(getcwd(cwd, sizeof(cwd)));
	/* A name of its own: test-report-pprof may be building the same binary. */
	snprintf(cmd, sizeof(cmd),
		 "GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE=%s/gocache GOFLAGS= HOME=%s "
		 "go build -o %s/pprof.%d github.com/google/pprof && mv %s/pprof.%d %s/pprof",
		 cwd, cwd, cwd, (int)getpid(), cwd, (int)getpid(), cwd);
	if (run_sh(cmd, 290) != 0)
		SKIP("could not build pprof from %s", PPROF_SRC);
}

/* Reads pprof -raw's Locations and Mappings sections. */
static void parse_raw(const char *raw)
{
	const char *l = strstr(raw, "\nLocations\n"), *m = strstr(raw, "\nMappings\n");
	ASSERT_NOT_NULL(l);
	ASSERT_NOT_NULL(m);
	nlocs = nmaps = 0;
	memset(locs, 0, sizeof(locs));
	for (const char *s = l + 11; s < m; s = strchr(s, '\n') + 1) {
		unsigned id, mid;
		unsigned long long a;
		int off = 0;
		char fn[160];
		if (sscanf(s, " %u: %llx %n", &id, &a, &off) == 2 && off) {
			ASSERT_TRUE(id >= 1 && id < MAXL);
			struct loc *c = &locs[id];
			c->addr = a;
			const char *r = s + off;
			if (sscanf(r, "M=%u %n", &mid, &off) == 1) {
				c->map = mid;
				r += off;
			}
			/* "NAME FILE:LINE s=0": the name may hold spaces ("[blocked: sleep]"). */
			const char *eol = strchr(r, '\n'), *sdisc = strstr(r, " s=");
			if (sdisc && (!eol || sdisc < eol)) {
				const char *sp = sdisc;
				while (sp > r && sp[-1] != ' ')
					sp--;
				if (sp > r)
					snprintf(c->fn, sizeof(c->fn), "%.*s", (int)(sp - 1 - r), r);
			}
			c->nlines = 1;
			if (id >= nlocs)
				nlocs = id + 1;
		} else if (nlocs && sscanf(s, " %159s", fn) == 1) {
			locs[nlocs - 1].nlines++;   /* an outer frame inlined at the same address */
		}
	}
	for (const char *s = m + 10; *s; s = strchr(s, '\n') ? strchr(s, '\n') + 1 : s + strlen(s)) {
		unsigned id;
		unsigned long long a, b, o;
		int off = 0;
		if (sscanf(s, "%u: %llx/%llx/%llx %n", &id, &a, &b, &o, &off) != 4 || !off)
			continue;
		ASSERT_TRUE(id >= 1 && id < MAXM);
		maps[id].start = a;
		maps[id].limit = b;
		sscanf(s + off, "%255s", maps[id].file);
		const char *eol = strchr(s, '\n');
		const char *fnflag = strstr(s, "[FN]");
		maps[id].claims = fnflag && (!eol || fnflag < eol);
		if (id >= nmaps)
			nmaps = id + 1;
	}
	ASSERT_GT(nlocs, 1);
	ASSERT_GT(nmaps, 1);
}

/* The address and mapping rules every recording must keep; returns how many
 * locations have no address. */
static unsigned check_addresses(void)
{
	unsigned unaddressed = 0;
	for (unsigned i = 1; i < nmaps; i++)
		if (maps[i].claims && maps[i].start == 0 && maps[i].limit == 0)
			FAIL("mapping %u (%s) is 0x0/0x0 yet claims functions", i, maps[i].file);
	for (unsigned i = 1; i < nlocs; i++) {
		const struct loc *c = &locs[i];
		if (!c->nlines)
			continue;
		if (!c->map) {
			/* An address in no recorded mapping (the launcher's, before its exec
			 * was seen) is "[unknown]" and keeps its address; only the states of a
			 * thread have none. A named function always has its mapping. */
			if (c->addr && strcmp(c->fn, "[unknown]"))
				FAIL("location %u (%s) at 0x%" PRIx64 " has no mapping", i, c->fn, c->addr);
			if (!c->addr && c->fn[0] != '[')
				FAIL("location %u (%s) has no address", i, c->fn);
			unaddressed += !c->addr;
			continue;
		}
		ASSERT_TRUE(c->map < nmaps);
		const struct map *m = &maps[c->map];
		if (c->addr < m->start || c->addr >= m->limit)
			FAIL("location %u (%s) at 0x%" PRIx64 " lies outside its mapping %u %s 0x%" PRIx64 "-0x%" PRIx64, i,
			     c->fn, c->addr, c->map, m->file, m->start, m->limit);
	}
	return unaddressed;
}

static unsigned loc_named(const char *fn, unsigned from)
{
	for (unsigned i = from; i < nlocs; i++)
		if (!strcmp(locs[i].fn, fn))
			return i;
	return 0;
}

/* Samples whose first location is state and whose stack holds a location of fn. */
static int samples_under(const char *raw, const char *state, const char *fn)
{
	int n = 0;
	unsigned st = loc_named(state, 1);
	if (!st)
		return 0;
	const char *s = strstr(raw, "[dflt]");
	ASSERT_NOT_NULL(s);
	const char *end = strstr(raw, "\nLocations\n");
	for (s = strchr(s, '\n'); s && s < end; s = strchr(s + 1, '\n')) {
		const char *colon = strchr(s + 1, ':'), *eol = strchr(s + 1, '\n');
		if (!colon || !eol || colon > eol || s[1] != ' ')
			continue;
		unsigned id;
		int off;
		const char *ids = colon + 1;
		if (sscanf(ids, " %u%n", &id, &off) != 1 || id != st)
			continue;
		for (ids += off; ids < eol && sscanf(ids, " %u%n", &id, &off) == 1; ids += off)
			if (id < nlocs && !strcmp(locs[id].fn, fn)) {
				n++;
				break;
			}
	}
	return n;
}

static void record(const char *args)
{
	char cmd[2048];
	snprintf(dir, sizeof(dir), "/tmp/vp-pprof-live-%d", (int)getpid());
	snprintf(cmd, sizeof(cmd), "rm -rf %s && %s record -q -g -o %s %s > rec.out 2> rec.err", dir, VIPROF_BIN, dir,
		 args);
	fprintf(stderr, "+ %s\n", cmd);
	int rc = run_sh(cmd, 250);
	if (rc != 0)
		FAIL("viprof record exited with %d: %s", rc, test_slurp_str("rec.err"));
	snprintf(cmd, sizeof(cmd), "%s report %s -F pprof -o live.pb.gz", VIPROF_BIN, dir);
	free(run_sh_output(cmd));
}

static void test_native(void)
{
	record("--off-cpu -- " OFFCPU_FIXTURE " split 2");
	char *raw = run_sh_output("./pprof -raw -symbolize=none live.pb.gz");
	ASSERT_CONTAINS(raw, "samples/count cpu/nanoseconds[dflt]");
	ASSERT_CONTAINS(raw, "off-cpu_samples/count off-cpu/nanoseconds");
	parse_raw(raw);
	unsigned unaddressed = check_addresses();
	ASSERT_GE(unaddressed, 1);   /* at least the sleep's "[blocked: sleep]" */
	ASSERT_TRUE(strstr(maps[1].file, "offcpu-fixture") != NULL);
	/* The sleep under its state, by address: [blocked: sleep] <- ... <- sleep_70ms. */
	unsigned sl = loc_named("sleep_70ms", 1);
	ASSERT_NE(sl, 0);
	ASSERT_NE(locs[sl].map, 0);
	ASSERT_GT(locs[sl].addr, 0);
	int n = samples_under(raw, "[blocked: sleep]", "sleep_70ms");
	fprintf(stderr, "%d off-CPU samples under [blocked: sleep] reach sleep_70ms by address\n", n);
	ASSERT_GE(n, 1);
	free(raw);

	char *top = run_sh_output("./pprof -top -symbolize=none live.pb.gz");
	ASSERT_CONTAINS(top, "File: offcpu-fixture\n");
	ASSERT_CONTAINS(top, "Type: cpu\n");
	ASSERT_CONTAINS(top, "busy_30ms");
	free(top);
	/* The local symbolizer has nothing to redo: every mapping says it is symbolized. */
	top = run_sh_output("./pprof -top -sample_index=off-cpu live.pb.gz");
	ASSERT_CONTAINS(top, "[blocked: sleep]");
	ASSERT_CONTAINS(top, "sleep_70ms");
	free(top);
}

static void test_jvm(const char *java)
{
	struct stat sb;
	char args[1024];
	if (stat(java, &sb) != 0)
		SKIP("no JDK at %s", java);
	snprintf(args, sizeof(args), "--off-cpu -- %s -cp %s JitSplit 3", java, JAVA_CLASSES);
	record(args);
	char *raw = run_sh_output("./pprof -raw -symbolize=none live.pb.gz");
	parse_raw(raw);
	check_addresses();
	unsigned jit = 0, inl = 0, hot = 0;
	for (unsigned i = 1; i < nmaps; i++)
		if (!strcmp(maps[i].file, "[jit]"))
			jit = i;
	ASSERT_NE(jit, 0);
	for (unsigned i = 1; i < nlocs; i++) {
		if (strncmp(locs[i].fn, "JitSplit.hot", 12))
			continue;
		if (locs[i].map == jit)
			hot++;
		if (!locs[i].addr)
			FAIL("JIT location %u (%s) at 0x0", i, locs[i].fn);
	}
	for (unsigned i = 1; i < nlocs; i++)
		if (locs[i].map == jit && locs[i].nlines > 1)
			inl++;
	fprintf(stderr, "%u locations of the hot methods in [jit], %u JIT locations with inlined frames\n", hot, inl);
	ASSERT_GE(hot, 3);
	ASSERT_GE(inl, 1);
	free(raw);
	char *top = run_sh_output("./pprof -top -symbolize=none live.pb.gz");
	ASSERT_CONTAINS(top, "File: java\n");
	ASSERT_TRUE(strstr(top, "File: ld-linux") == NULL);
	ASSERT_CONTAINS(top, "JitSplit.hotA(long)");
	free(top);
}

/* Starts argv with its output in out; returns its pid. */
/* Waits (up to 60 s) for word in file: a program's own word that it runs. */
static void wait_for_word(const char *file, const char *word, pid_t pid)
{
	for (int i = 0; i < 600; i++) {
		char *t = test_slurp(file, NULL);
		bool ok = t && strstr(t, word);
		free(t);
		if (ok)
			return;
		int st;
		if (waitpid(pid, &st, WNOHANG) == pid)
			FAIL("%d exited before saying '%s'", (int)pid, word);
		struct timespec ts = { 0, 100000000 };
		nanosleep(&ts, NULL);
	}
	FAIL("%s: no '%s' within 60 s", file, word);
}

struct proc_tally {
	pid_t pid;
	const char *name;          /* the process label every sample of it must carry */
	unsigned long long samples, unknown, misnamed;
};

/* Tallies pprof -raw's samples by pid: the first value is the sample count, then the
 * location ids, then label lines "k:[v] ...". */
static unsigned long long tally(const char *raw, struct proc_tally *t, int nt, unsigned long long *vm_unknown)
{
	unsigned long long all = 0;
	*vm_unknown = 0;
	const char *s = strstr(raw, "[dflt]");
	const char *end = strstr(raw, "\nLocations\n");
	ASSERT_NOT_NULL(s);
	ASSERT_NOT_NULL(end);
	s = strchr(s, '\n') + 1;
	while (s < end) {
		const char *eol = strchr(s, '\n');
		unsigned long long n;
		int off;
		const char *colon = strchr(s, ':');
		if (!eol || !colon || colon > eol || sscanf(s, " %llu%n", &n, &off) != 1) {
			s = eol ? eol + 1 : end;
			continue;
		}
		bool unknown = false;
		unsigned id;
		for (const char *ids = colon + 1; ids < eol && sscanf(ids, " %u%n", &id, &off) == 1; ids += off)
			unknown |= id < nlocs && !strcmp(locs[id].fn, "[unknown]");
		/* The label lines up to the next sample line. */
		const char *l = eol + 1, *lend = l;
		while (lend < end) {
			const char *f = lend + strspn(lend, " \t"), *e2 = strchr(lend, '\n');
			if (*f >= '0' && *f <= '9')
				break;   /* the next sample */
			lend = e2 ? e2 + 1 : end;
		}
		char labels[4096];
		snprintf(labels, sizeof(labels), "%.*s", (int)(lend - l), l);
		all += n;
		*vm_unknown += unknown ? n : 0;
		const char *pp = strstr(labels, "pid:[");
		long pid = pp ? strtol(pp + 5, NULL, 10) : -1;
		for (int k = 0; k < nt; k++) {
			if (pid != t[k].pid)
				continue;
			char want[128];
			snprintf(want, sizeof(want), "process:[%s]", t[k].name);
			t[k].samples += n;
			t[k].unknown += unknown ? n : 0;
			t[k].misnamed += strstr(labels, want) ? 0 : n;
		}
		s = lend;
	}
	return all;
}

static void test_wholevm(void)
{
	struct stat sb;
	if (stat(JAVA17, &sb) != 0)
		SKIP("no JDK at %s", JAVA17);
	char *j1[] = { JAVA17, "-cp", JAVA_CLASSES, "Workers", "60", NULL };
	char *c1[] = { SPLIT3, "60", NULL };
	pid_t p1 = run_start(j1, "j1.out", "j1.out"), p2 = run_start(j1, "j2.out", "j2.out"), p3 = run_start(c1, "c1.out", "c1.out");
	wait_for_word("j1.out", "ready", p1);
	wait_for_word("j2.out", "ready", p2);
	char args[256];
	/* Only these JVMs get the agent: other JVMs on the machine are not the test's. */
	snprintf(args, sizeof(args), "-a --jvm-attach %d,%d -d 4", (int)p1, (int)p2);
	record(args);
	pid_t pids[] = { p1, p2, p3 };
	for (int i = 0; i < 3; i++) {
		kill(pids[i], SIGKILL);
		waitpid(pids[i], NULL, 0);
	}

	char *top = run_sh_output("./pprof -top -symbolize=none live.pb.gz");
	fprintf(stderr, "%.*s", (int)(strstr(top, "flat%") ? strstr(top, "flat%") - top : 0), top);
	ASSERT_TRUE(strstr(top, "File: java\n") == NULL);
	ASSERT_CONTAINS(top, "File: whole VM");
	free(top);
	/* pprof's own way to split by process: the label as the stacks' root. */
	top = run_sh_output("./pprof -top -symbolize=none -tagroot=process -nodecount=2000 live.pb.gz");
	ASSERT_CONTAINS(top, " java\n");
	ASSERT_CONTAINS(top, " split3\n");
	free(top);

	char *raw = run_sh_output("./pprof -raw -symbolize=none live.pb.gz");
	parse_raw(raw);
	check_addresses();
	struct proc_tally t[] = { { p1, "java", 0, 0, 0 }, { p2, "java", 0, 0, 0 }, { p3, "split3", 0, 0, 0 } };
	unsigned long long vm_unknown, all = tally(raw, t, 3, &vm_unknown);
	unsigned long long mine = 0, mine_unknown = 0;
	for (int k = 0; k < 3; k++) {
		fprintf(stderr, "pid %d (%s): %llu samples, %llu with [unknown], %llu without its process label\n",
			(int)t[k].pid, t[k].name, t[k].samples, t[k].unknown, t[k].misnamed);
		ASSERT_GT(t[k].samples, 0);
		ASSERT_EQ(t[k].misnamed, 0);
		mine += t[k].samples;
		mine_unknown += t[k].unknown;
	}
	fprintf(stderr, "the three: %.2f%% of samples with [unknown]; the whole VM: %llu of %llu (%.2f%%)\n",
		100.0 * (double)mine_unknown / (double)mine, vm_unknown, all, all ? 100.0 * (double)vm_unknown / (double)all : 0);
	ASSERT_LT(mine_unknown * 100, mine * 5);
	/* The other programs of the machine are not the test's to quiet, but whatever
	 * [unknown] they have is accounted for, reason by reason, in the comments. */
	if (vm_unknown) {
		ASSERT_CONTAINS(raw, "Comment: [unknown] frames in ");
		char want[64];
		snprintf(want, sizeof(want), "[unknown] frames in %llu of ", vm_unknown);
		ASSERT_CONTAINS(raw, want);
	}
	free(raw);
}

int main(int argc, char **argv)
{
	if (argc < 2)
		FAIL("usage: %s native|jvm|jvm25", argv[0]);
	need_pprof();
	if (!strcmp(argv[1], "native"))
		test_native();
	else if (!strcmp(argv[1], "jvm"))
		test_jvm(JAVA17);
	else if (!strcmp(argv[1], "jvm25"))
		test_jvm(JAVA25);
	else if (!strcmp(argv[1], "wholevm"))
		test_wholevm();
	else
		FAIL("unknown scenario '%s'", argv[1]);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (run_sh(cmd, 290) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	return 0;
}
