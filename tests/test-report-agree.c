/* One real recording of the split3 workload (work50/work30/work20), reported as text,
 * folded, JSON and pprof through the viprof CLI: all four agree on the total and on the
 * samples of the top frames; merging the session with itself doubles every count and
 * diffing it against itself changes nothing. Needs root (BPF/perf sampling). */
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "test-profile-synth.h"
#include "test-run.h"

static char dir[] = "/tmp/vp-test-report-agree-XXXXXX";

static char *slurp_in(const char *name)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	char *s = test_slurp(path, NULL);
	if (!s)
		FAIL("cannot read %s", path);
	return s;
}

/* Folded: total, and the samples whose leaf is exactly name. */
static uint64_t folded_sum(const char *folded, const char *leaf)
{
	uint64_t sum = 0;
	for (const char *l = folded; l && *l;) {
		const char *nl = strchr(l, '\n');
		size_t len = nl ? (size_t)(nl - l) : strlen(l);
		const char *sp = l + len;
		while (sp > l && sp[-1] != ' ')
			sp--;
		uint64_t n = strtoull(sp, NULL, 10);
		if (!leaf) {
			sum += n;
		} else {
			const char *semi = sp - 1;
			while (semi > l && semi[-1] != ';')
				semi--;
			if ((size_t)(sp - 1 - semi) == strlen(leaf) && !strncmp(semi, leaf, strlen(leaf)))
				sum += n;
		}
		l = nl ? nl + 1 : NULL;
	}
	return sum;
}

/* JSON: the n-th "top" row's name and self. */
static void json_top(const char *json, int n, char *name, size_t len, uint64_t *self)
{
	const char *t = strstr(json, "\"top\":[");
	ASSERT_NOT_NULL(t);
	for (int i = 0; i <= n; i++) {
		t = strstr(t + 1, "\"name\":\"");
		ASSERT_NOT_NULL(t);
	}
	t += 8;
	size_t l = strcspn(t, "\"");
	snprintf(name, len, "%.*s", (int)l, t);
	const char *s = strstr(t, "\"self\":");
	ASSERT_NOT_NULL(s);
	*self = strtoull(s + 7, NULL, 10);
}

/* Text: the samples column of the row whose symbol is name. */
static uint64_t text_samples(const char *text, const char *name)
{
	for (const char *l = text; l && *l;) {
		double a, b;
		unsigned long long n;
		char layer[32], sym[256];
		if (sscanf(l, " %lf %lf %llu %31s %255s", &a, &b, &n, layer, sym) == 5 && !strcmp(sym, name))
			return n;
		l = strchr(l, '\n');
		l = l ? l + 1 : NULL;
	}
	FAIL("no text row for %s:\n%s", name, text);
}

static uint64_t pprof_flat(const char *top, const char *name)
{
	for (const char *l = top; l && *l;) {
		double f, fp, sp, c, cp;
		int off = 0;
		if (sscanf(l, " %lf %lf%% %lf%% %lf %lf%% %n", &f, &fp, &sp, &c, &cp, &off) == 5 && off) {
			size_t len = strcspn(l + off, "\n");
			if (len == strlen(name) && !strncmp(l + off, name, len))
				return (uint64_t)f;
		}
		l = strchr(l, '\n');
		l = l ? l + 1 : NULL;
	}
	FAIL("no pprof row for %s:\n%s", name, top);
}

int main(void)
{
	REQUIRE_ROOT();
	ASSERT_NOT_NULL(mkdtemp(dir));
	const char *v = VIPROF_BIN;
	if (run_shf(100, "%s record -q -g -o %s/S -- %s 2 > %s/record.out 2>&1", v, dir, SPLIT3_BIN, dir) != 0) {
		char *out = slurp_in("record.out");
		FAIL("viprof record failed: %s", out);
	}
	ASSERT_EQ(run_shf(100, "%s report %s/S --no-color -n 40 -o %s/text.txt", v, dir, dir), 0);
	ASSERT_EQ(run_shf(100, "%s report %s/S -F folded -o %s/folded.txt", v, dir, dir), 0);
	ASSERT_EQ(run_shf(100, "%s report %s/S -F json -o %s/one.json", v, dir, dir), 0);
	ASSERT_EQ(run_shf(100, "%s report %s/S -F pprof -o %s/s.pb.gz", v, dir, dir), 0);
	ASSERT_EQ(run_shf(100, "%s report %s/S -F html -o %s/s.html", v, dir, dir), 0);
	char *text = slurp_in("text.txt"), *folded = slurp_in("folded.txt"), *json = slurp_in("one.json");

	/* Totals. */
	const char *h = strstr(text, "samples\n");
	ASSERT_NOT_NULL(h);
	while (h > text && h[-1] != ',')
		h--;
	uint64_t text_total = strtoull(h, NULL, 10);
	uint64_t folded_total = folded_sum(folded, NULL);
	const char *jt = strstr(json, "\"totals\":{\"");
	ASSERT_NOT_NULL(jt);
	jt = strstr(jt, "\"samples\":");
	uint64_t json_total = strtoull(jt + 10, NULL, 10);
	ASSERT_GT(json_total, 200);
	ASSERT_UEQ(text_total, json_total);
	ASSERT_UEQ(folded_total, json_total);

	/* Top frames: the workload's three functions, in order, with the same samples in
	 * every format. */
	static const char *const want[] = { "work50", "work30", "work20" };
	uint64_t self[3];
	for (int i = 0; i < 3; i++) {
		char name[128];
		json_top(json, i, name, sizeof(name), &self[i]);
		ASSERT_STREQ(name, want[i]);
		ASSERT_UEQ(folded_sum(folded, want[i]), self[i]);
		ASSERT_UEQ(text_samples(text, want[i]), self[i]);
	}
	ASSERT_GT(self[0], self[1]);
	ASSERT_GT(self[1], self[2]);
	ASSERT_GT(self[0] + self[1] + self[2], json_total * 8 / 10);

	/* pprof, when it can be built here (see test-report-pprof). */
	struct stat sb;
	if (stat("pprof", &sb) != 0 && run_shf(100, "command -v go >/dev/null") == 0)
		run_shf(250, "GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE=$PWD/gocache GOFLAGS= HOME=$PWD "
			"go build -o pprof.tmp github.com/google/pprof && mv pprof.tmp pprof");
	if (stat("pprof", &sb) == 0) {
		ASSERT_EQ(run_shf(100, "./pprof -top -nodecount=1000 -symbolize=none -sample_index=samples %s/s.pb.gz > %s/top.txt 2>&1",
			     dir, dir), 0);
		char *top = slurp_in("top.txt");
		char tot[64];
		snprintf(tot, sizeof(tot), "of %llu total", (unsigned long long)json_total);
		ASSERT_CONTAINS(top, tot);
		for (int i = 0; i < 3; i++)
			ASSERT_UEQ(pprof_flat(top, want[i]), self[i]);
		free(top);
	} else {
		fprintf(stderr, "note: pprof not available, the pprof output was not read back\n");
	}

	/* The flame graph carries the same functions. */
	char *html = slurp_in("s.html");
	ASSERT_CONTAINS(html, "[\"work50\",");
	char tot[64];
	snprintf(tot, sizeof(tot), "\"total\":%llu,", (unsigned long long)json_total);
	ASSERT_CONTAINS(html, tot);
	free(html);

	/* Two sessions merge: S with itself doubles every count; --diff against itself is 0. */
	ASSERT_EQ(run_shf(100, "%s report %s/S %s/S -F json -o %s/two.json", v, dir, dir, dir), 0);
	ASSERT_EQ(run_shf(100, "python3 %s/tests/test-report-json-validate.py doubled %s/one.json %s/two.json", SRCDIR, dir, dir), 0);
	ASSERT_EQ(run_shf(100, "%s report %s/S --diff %s/S -F json -o %s/diff.json", v, dir, dir, dir), 0);
	ASSERT_EQ(run_shf(100, "python3 %s/tests/test-report-json-validate.py diff-zero %s/diff.json", SRCDIR, dir), 0);
	ASSERT_EQ(run_shf(100, "python3 %s/tests/test-report-json-validate.py validate %s/docs/report-json-schema.json %s/one.json",
		     SRCDIR, SRCDIR, dir), 0);

	/* Errors: one line naming the path and the fix; exit 1 (runtime) or 2 (usage). */
	ASSERT_EQ(run_shf(100, "%s report %s/missing > %s/err.txt 2>&1", v, dir, dir), 1);
	char *err = slurp_in("err.txt");
	ASSERT_CONTAINS(err, "/missing");
	ASSERT_CONTAINS(err, "viprof record");
	ASSERT_EQ(strchr(err, '\n') - err + 1, (long)strlen(err));
	free(err);
	ASSERT_EQ(run_shf(100, "%s report %s/S --event no-such-event > %s/err.txt 2>&1", v, dir, dir), 1);
	err = slurp_in("err.txt");
	ASSERT_CONTAINS(err, "recorded: cpu-clock");
	free(err);
	ASSERT_EQ(run_shf(100, "%s report %s/S --format xml > /dev/null 2>&1", v, dir), 2);
	ASSERT_EQ(run_shf(100, "%s report %s/S --pid 1,x > /dev/null 2>&1", v, dir), 2);
	ASSERT_EQ(run_shf(100, "%s report %s/S --time 3,1 > /dev/null 2>&1", v, dir), 2);
	/* A session that is not one. */
	ASSERT_EQ(run_shf(100, "mkdir -p %s/bogus && echo garbage > %s/bogus/stream.vps", dir, dir), 0);
	ASSERT_EQ(run_shf(100, "%s report %s/bogus > %s/err.txt 2>&1", v, dir, dir), 1);
	err = slurp_in("err.txt");
	ASSERT_CONTAINS(err, "bogus");
	ASSERT_EQ(strchr(err, '\n') - err + 1, (long)strlen(err));
	free(err);

	free(text);
	free(folded);
	free(json);
	run_shf(100, "rm -rf %s", dir);
	return 0;
}
