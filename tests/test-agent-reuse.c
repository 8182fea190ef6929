/* Reused code addresses: CodeReuse loads its hot class afresh as GenR<N> each generation,
 * compiles it, unloads it and lets the JIT put the next generation's code where the last
 * one was. The epoch index must name each generation's code in that generation's time
 * window, everywhere; the flat (perf-PID.map-like) view must get reused addresses wrong.
 * JDK 25 frees code at GC; JDK 17's sweeper frees it later, so JDK 17 runs with a small
 * unsegmented code cache to make reuse happen within the run. */
#include "test-agent-util.h"

#include "maps/codemap.h"
#include "maps/jit_index.h"

#define MAX_GENS 16

struct gen {
	uint64_t start, end;
};

/* Returns 1 when addresses were reused (and the flat view was caught wrong), 0 when this
 * JVM reused none. */
static int check(const char *java, bool jdk17)
{
	char *dir = tu_tmpdir("reuse");
	char opt[600], out[600], piddir[600];
	snprintf(opt, sizeof(opt), "-agentpath:%s=dir=%s", VIPROF_AGENT_SO, dir);
	snprintf(out, sizeof(out), "%s/out", dir);
	char *argv17[] = { (char *)java, "-XX:-SegmentedCodeCache", "-XX:ReservedCodeCacheSize=8m", opt, "-cp",
			   VIPROF_JAVA_CLASSES, "CodeReuse", "8", "0.7", NULL };
	char *argv[] = { (char *)java, opt, "-cp", VIPROF_JAVA_CLASSES, "CodeReuse", "8", "0.7", NULL };
	pid_t pid = run_start(jdk17 ? argv17 : argv, out, NULL);
	ASSERT_EQ(run_wait(pid, 90), 0);
	snprintf(piddir, sizeof(piddir), "%s/%d", dir, (int)pid);

	struct gen gens[MAX_GENS + 1] = { 0 };
	int ngens = 0;
	char *o = tu_read(out);
	for (char *l = strtok(o, "\n"); l; l = strtok(NULL, "\n")) {
		int g;
		unsigned long long s, e;
		if (sscanf(l, "gen %d %llu %llu", &g, &s, &e) == 3 && g >= 1 && g <= MAX_GENS) {
			gens[g] = (struct gen){ s, e };
			ngens = g > ngens ? g : ngens;
		}
	}
	free(o);
	ASSERT_EQ(ngens, 8);

	char e[512];
	struct vp_jit_index *xi = vp_jit_index__open(piddir, e, sizeof(e));
	if (!xi)
		FAIL("%s", e);
	const struct vp_codemap *m = vp_jit_index__codemap(xi);
	int checked = 0, epoch_wrong = 0, flat_wrong = 0, reused = 0, run_compiled = 0;
	bool have_run[MAX_GENS + 1] = { false };
	for (size_t i = 0; i < m->nmethods; i++) {
		const struct vp_cm_method_info *x = &m->methods[i];
		int g;
		if (sscanf(x->name, "GenR%04d.", &g) != 1 || g < 1 || g > ngens)
			continue;
		if (!strncmp(x->name + 8, ".run(", 5) && !have_run[g]) {
			have_run[g] = true;
			run_compiled++;
		}
		ASSERT_GE(x->load_time, gens[g].start);
		/* Loads trail; unloads of GenR<g> come only after its loader was dropped. */
		ASSERT_TRUE(x->unload_time > gens[g].end);
		char want[16];
		snprintf(want, sizeof(want), "GenR%04d.", g);
		for (size_t j = 0; j < m->nmethods; j++) {
			const struct vp_cm_method_info *y = &m->methods[j];
			if (j != i && !strncmp(y->name, "GenR", 4) && strncmp(y->name, want, 9) &&
			    y->start < x->start + x->size && x->start < y->start + y->size)
				reused++;
		}
		/* Sample the method all over, late in its generation (its code surely live). */
		uint64_t t = gens[g].end - 1000000;
		if (t < x->load_time)
			continue;
		for (uint32_t off = 0; off < x->size; off += 8) {
			struct vp_jit_frame f[16];
			int n = vp_jit_index__resolve(xi, x->start + off, t, false, f, 16);
			ASSERT_GT(n, 0);
			checked++;
			if (strncmp(f[n - 1].name, want, 9)) {
				epoch_wrong++;
				fprintf(stderr, "epoch view: %#lx at gen %d -> %s\n", (unsigned long)(x->start + off), g, f[n - 1].name);
			}
			n = vp_jit_index__resolve(xi, x->start + off, t, true, f, 16);
			if (n <= 0 || strncmp(f[n - 1].name, want, 9))
				flat_wrong++;
		}
	}
	fprintf(stderr, "%s: %d addresses checked, epoch view wrong %d, flat view wrong %d, %d overlapping pairs across generations, %zu epochs\n",
		java, checked, epoch_wrong, flat_wrong, reused, m->nepochs);
	ASSERT_GT(checked, 100);
	ASSERT_EQ(epoch_wrong, 0);
	if (reused)
		ASSERT_GT(flat_wrong, 0);
	else
		ASSERT_EQ(flat_wrong, 0);
	vp_jit_index__close(xi);

	/* The picture of it: 'viprof maps timeline' shows every generation's code in the
	 * epoch it lived in, and marks R where a generation's code went where an earlier
	 * one's had been. */
	char tl[600];
	snprintf(tl, sizeof(tl), "%s/timeline", dir);
	char *targv[] = { VIPROF_BIN, "maps", piddir, "timeline", "--all", NULL };
	ASSERT_EQ(run_wait(run_start(targv, tl, NULL), 30), 0);
	char *t = tu_read(tl);
	int rows = 0, marked_r = 0;
	for (char *l = strtok(t, "\n"); l; l = strtok(NULL, "\n")) {
		int g;
		if (sscanf(l, "GenR%04d", &g) != 1 || strlen(l) < 48)
			continue;
		/* R on any generation's method: the overlapping pairs counted above may all
		 * be step()s (a CI run: 18 pairs, none of them run()s). */
		marked_r += strchr(l + 48, 'R') != NULL;
		if (strncmp(l + 8, ".run(", 5))
			continue;
		rows++;
	}
	free(t);
	fprintf(stderr, "timeline: %d GenR<N>.run rows (%d generations compiled run()), %d GenR rows marked R\n", rows,
		run_compiled, marked_r);
	ASSERT_EQ(rows, run_compiled);
	ASSERT_GE(run_compiled, ngens / 2);
	/* lookup by name: every copy of a method, by part of its name. */
	char *largv[] = { VIPROF_BIN, "maps", piddir, "lookup", "GenR0001.step", NULL };
	ASSERT_EQ(run_wait(run_start(largv, tl, NULL), 30), 0);
	t = tu_read(tl);
	ASSERT_CONTAINS(t, "GenR0001.step(long)  epoch ");
	free(t);
	if (reused)
		ASSERT_GT(marked_r, 0);
	tu_rm_rf(dir);
	return reused > 0;
}

int main(int argc, char **argv)
{
	tu_require_fixtures();
	bool jdk17;
	const char *java = tu_jdk_from_args(argc, argv, &jdk17);
	int any = check(java, jdk17);
	if (!any)
		SKIP("no JVM reused a code address during the run, so the flat view could not be caught wrong");
	return 0;
}
