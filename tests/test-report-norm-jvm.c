/* Issue 25: the same Java program with lambdas (tests/java/Lambdas.java) recorded twice;
 * `report RUN2 --diff RUN1 --sort total` (names normalised by default for a diff) shows
 * no lambda method hotter or colder by more than 3 pp, where --no-norm shows each lambda
 * as gone from one run and new in the other. A method's share is summed over its Java
 * layers (jit, inlined, interpreted): whether HotSpot inlines a lambda's proxy into its
 * caller or calls it compiled on its own differs from run to run, and that is not what
 * the names are about. Only the main thread (--comm java) is compared, so that the JIT
 * compiler threads' varying share does not enter. Argument: 17 or 25 (the JDK). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test-agent-util.h"
#include "test-run.h"

#define MAXROWS 4096

struct row {
	char name[512];
	double base, cur;
};

static void record(const char *java, const char *dir)
{
	char out[8192];
	char *argv[] = { (char *)VIPROF_BIN, "record", "-q", "-g", "-F", "1999", "-o", (char *)dir, "--force", "--",
			 (char *)java, "-cp", (char *)VIPROF_JAVA_CLASSES, "Lambdas", "5", NULL };
	char parent[512];
	snprintf(parent, sizeof(parent), "%s", dir);
	*strrchr(parent, '/') = '\0';
	int rc = run_logged(parent, argv, out, sizeof(out), 200);
	if (rc)
		FAIL("viprof record exited %d: %s", rc, out);
}

/* Rows of the text diff: "base% new% delta layer symbol image", summed by symbol over
 * the Java layers. Returns the number of distinct symbols. */
static int diff_rows(const char *tmp, const char *run2, const char *run1, bool norm, struct row *rows)
{
	char outp[600], errp[600];
	snprintf(outp, sizeof(outp), "%s/diff.txt", tmp);
	snprintf(errp, sizeof(errp), "%s/diff.err", tmp);
	char *argv[] = { (char *)VIPROF_BIN, "report", (char *)run2, "--diff", (char *)run1, "--sort", "total",
			 "--comm", "java", "-n", "100000", norm ? "--norm" : "--no-norm", NULL };
	int rc = run_argv(argv, outp, errp, 120);
	if (rc)
		FAIL("viprof report --diff exited %d: %s", rc, tu_read(errp));
	char *txt = tu_read(outp);
	int n = 0;
	for (char *line = strtok(txt, "\n"); line; line = strtok(NULL, "\n")) {
		double b, c, d;
		char layer[32];
		int off = 0;
		if (line[0] == '#' || sscanf(line, "%lf %lf %lf %31s %n", &b, &c, &d, layer, &off) != 4 || !off)
			continue;
		if (strcmp(layer, "jit") && strcmp(layer, "inlined") && strcmp(layer, "interpreted"))
			continue;
		/* The symbol column is padded and may be cut with "..."; the image is last. */
		char *sym = line + off, *end = strstr(sym, "  ");
		if (end)
			*end = '\0';
		int k;
		for (k = 0; k < n && strcmp(rows[k].name, sym); k++)
			;
		if (k == n) {
			if (n == MAXROWS)
				break;
			snprintf(rows[n].name, sizeof(rows[n].name), "%s", sym);
			rows[n].base = rows[n].cur = 0;
			n++;
		}
		rows[k].base += b;
		rows[k].cur += c;
	}
	free(txt);
	return n;
}

static bool is_lambda(const char *name)
{
	return strstr(name, "$$Lambda") || strstr(name, "lambda$");
}

int main(int argc, char **argv)
{
	bool jdk17;
	const char *java = tu_jdk_from_args(argc, argv, &jdk17);
	tu_require_fixtures();
	char *tmp = tu_tmpdir("norm");
	char run1[600], run2[600];
	snprintf(run1, sizeof(run1), "%s/run1", tmp);
	snprintf(run2, sizeof(run2), "%s/run2", tmp);
	record(java, run1);
	record(java, run2);

	static struct row rows[MAXROWS];
	int n = diff_rows(tmp, run2, run1, true, rows), lambdas = 0;
	double worst = 0;
	for (int i = 0; i < n; i++) {
		if (!is_lambda(rows[i].name))
			continue;
		double d = rows[i].cur - rows[i].base;
		fprintf(stderr, "normalised: %-60s base %5.1f new %5.1f delta %+5.1f\n", rows[i].name, rows[i].base,
			rows[i].cur, d);
		ASSERT_TRUE(strstr(rows[i].name, ".0x") == NULL);
		if (fabs(d) > fabs(worst))
			worst = d;
		lambdas += rows[i].cur > 10;
	}
	/* Both lambda bodies (50% and 30% of the main thread) and their proxy are there. */
	ASSERT_GE(lambdas, 3);
	if (fabs(worst) > 3.0)
		FAIL("a lambda method moved by %+.1f pp between two runs of the same program (limit 3)", worst);

	/* Without normalisation the per-run addresses make the lambdas' proxies two
	 * different frames in the two runs: gone from one, new in the other. */
	n = diff_rows(tmp, run2, run1, false, rows);
	double raw_worst = 0;
	bool same_addr = false;
	for (int i = 0; i < n; i++) {
		if (!strstr(rows[i].name, "$$Lambda"))
			continue;
		double d = rows[i].cur - rows[i].base;
		if (fabs(d) > fabs(raw_worst))
			raw_worst = d;
		same_addr |= rows[i].base > 10 && rows[i].cur > 10;
	}
	if (same_addr)
		fprintf(stderr, "note: the two runs happened to give the lambdas the same addresses\n");
	else
		ASSERT_TRUE(fabs(raw_worst) > 10.0);
	fprintf(stderr, "largest lambda change: normalised %+.1f pp, raw %+.1f pp\n", worst, raw_worst);
	tu_rm_rf(tmp);
	return 0;
}
