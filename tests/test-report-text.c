/* The text and folded reports on a hand-built profile: header, per-layer summary,
 * hotspot table (exact text), self% + (other) adding up to 100.0, total% counting a
 * recursive frame once per stack, several events, sorting by total, widths and
 * truncation, colour, the diff table, and folded stacks with layer suffixes, merged
 * across pids, per event. */
#include <errno.h>

#include "report/report.h"
#include "test.h"

#define LONGNAME "com.example.very.long.package.name.Interpreter.runSomethingVeryLong(java.lang.String)"

static uint32_t fr(struct vp_profile *p, int layer, const char *name, const char *image)
{
	struct vp_frame f = { .name = name, .image = image, .build_id = "", .file = "", .layer = (uint8_t)layer };
	uint32_t id = vp_profile__frame(p, &f);
	ASSERT_NE(id, UINT32_MAX);
	return id;
}

static struct vp_profile *build(bool base)
{
	struct vp_profile *p = vp_profile__new();
	ASSERT_NOT_NULL(p);
	ASSERT_EQ(vp_profile__add_event(p, "cpu-clock", "nanoseconds"), 0);
	ASSERT_EQ(vp_profile__add_event(p, "page-faults", "events"), 1);
	vp_profile__set_meta(p, "backend", "perf");
	vp_profile__set_meta(p, "duration_ns", "2500000000");
	uint32_t main_ = fr(p, VP_LAYER_NATIVE, "main", "/usr/bin/app");
	uint32_t work = fr(p, VP_LAYER_NATIVE, "work", "/usr/bin/app");
	uint32_t rec = fr(p, VP_LAYER_NATIVE, "recurse", "/usr/lib/libdeep.so");
	uint32_t jit = fr(p, VP_LAYER_JIT, "Foo.bar;x", "[jit]");
	uint32_t inl = fr(p, VP_LAYER_INLINED, "Foo.inl", "[jit]");
	uint32_t interp = fr(p, VP_LAYER_INTERPRETED, LONGNAME, "[jit]");
	uint32_t sched = fr(p, VP_LAYER_KERNEL, "schedule", "[kernel.kallsyms]");
	uint32_t a[] = { main_, work, rec, rec, rec }, b[] = { main_, jit, inl }, c[] = { main_, interp },
		 d[] = { main_, work, sched }, pf[] = { main_, work };
	if (base) {
		ASSERT_OK(vp_profile__add(p, a, 5, 1, 1, "app", 0, 6, 6000));
		ASSERT_OK(vp_profile__add(p, b, 3, 1, 1, "app", 0, 6, 6000));
		return p;
	}
	ASSERT_OK(vp_profile__add(p, a, 5, 1, 1, "app", 0, 5, 5000));
	ASSERT_OK(vp_profile__add(p, b, 3, 1, 1, "app", 0, 3, 3000));
	ASSERT_OK(vp_profile__add(p, c, 2, 1, 1, "app", 0, 1, 1000));
	ASSERT_OK(vp_profile__add(p, d, 3, 1, 1, "app", 0, 1, 1000));
	ASSERT_OK(vp_profile__add(p, a, 5, 2, 2, "app", 0, 2, 2000));   /* another pid, same stack */
	ASSERT_OK(vp_profile__add(p, pf, 2, 1, 1, "app", 1, 4, 4));
	p->lost = 3;
	vp_profile__warn(p, "a warning for the header");
	return p;
}

typedef int (*textfn)(const struct vp_profile *, const struct vp_profile *, struct vp_out *,
		      const struct vp_report_opts *);

static char *render(const struct vp_profile *p, const struct vp_profile *base, int width,
		    const struct vp_report_opts *ro, bool folded)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	ASSERT_NOT_NULL(f);
	struct vp_out o = { .f = f, .width = width };
	if (folded)
		ASSERT_OK(report_folded(p, &o, ro));
	else
		ASSERT_OK(report_text(p, base, &o, ro));
	fclose(f);
	return buf;
}

/* Sums the first column of the table rows (the lines after the column header). */
static double sum_self(const char *txt)
{
	const char *s = strstr(txt, "total%");
	ASSERT_NOT_NULL(s);
	s = strchr(s, '\n') + 1;
	double sum = 0;
	while (*s) {
		sum += strtod(s, NULL);
		s = strchr(s, '\n');
		if (!s)
			break;
		s++;
	}
	return sum;
}

int main(void)
{
	struct vp_profile *p = build(false), *base = build(true);

	struct vp_report_opts ro = { .top = 2 };
	char *t = render(p, NULL, 100, &ro, false);
	const char *expect =
		"# event: cpu-clock (nanoseconds), 12 samples\n"
		"# event: page-faults (events), 4 samples\n"
		"# lost: 3\n"
		"# duration: 2.500 s\n"
		"# backend: perf\n"
		"# warning: a warning for the header\n"
		"#\n"
		"# self by layer (cpu-clock):\n"
		"#   kernel         8.4%          1\n"   /* 1/12 twice: the tie goes to the first row */
		"#   native        58.3%          7\n"
		"#   inlined       25.0%          3\n"
		"#   interpreted    8.3%          1\n"
		"#\n"
		" cpu-clock page-faults  total%   samples  layer       symbol                       image\n"
		"     58.3         0.0    58.3          7  native      recurse                      libdeep.so\n"
		"     25.0         0.0    25.0          3  inlined     Foo.inl                      [jit]\n"
		"     16.7       100.0       -          2              (other: 2 more frames)\n";
	ASSERT_STREQ(t, expect);
	ASSERT_DBL_NEAR(sum_self(t), 100.0, 1e-9);
	free(t);

	/* Many rows of 1/12: the column still adds up to exactly 100.0. */
	ro = (struct vp_report_opts){ .top = 3 };
	t = render(p, NULL, 100, &ro, false);
	ASSERT_DBL_NEAR(sum_self(t), 100.0, 1e-9);
	free(t);

	/* Sorted by total on the page-faults event: main and work at 100%, then nothing. */
	ro = (struct vp_report_opts){ .top = 5, .sort = VP_SORT_TOTAL, .sort_event = 1 };
	t = render(p, NULL, 100, &ro, false);
	ASSERT_CONTAINS(t, "      0.0         0.0   100.0          0  native      main ");
	ASSERT_CONTAINS(t, "    100.0         0.0       -          0              (other)\n");
	ASSERT_CONTAINS(t, "      0.0       100.0   100.0          4  native      work ");
	ASSERT_CONTAINS(t, "# self by layer (page-faults):\n#   native       100.0%          4\n");
	free(t);

	/* total% counts the recursive frame once per stack (7 of 12), not 21 times. */
	ro = (struct vp_report_opts){ .top = 10, .sort = VP_SORT_TOTAL };
	t = render(p, NULL, 100, &ro, false);
	/* self 7/12 = 58.33 shows as 58.4: the column must add up to 100.0 and the tie of
	 * equal remainders (7/12, 1/12, 1/12) goes to the first row. total (also 7/12) is
	 * never shown below self (issue 12). */
	ASSERT_CONTAINS(t, "     58.4         0.0    58.4          7  native      recurse ");
	ASSERT_CONTAINS(t, "      0.0       100.0    66.7          0  native      work ");
	ASSERT_CONTAINS(t, "      0.0         0.0   100.0          0  native      main ");
	free(t);

	/* Narrow output: long names are cut with "..." and no line is wider than asked. */
	ro = (struct vp_report_opts){ .top = 10 };
	t = render(p, NULL, 70, &ro, false);
	ASSERT_CONTAINS(t, "interpreted com.ex");
	ASSERT_CONTAINS(t, "...  [jit]");
	ASSERT_NULL(strstr(t, "String)"));
	const char *tab = strstr(t, "total%");
	while (tab && *tab) {
		const char *nl = strchr(tab, '\n');
		size_t n = nl ? (size_t)(nl - tab) : strlen(tab);
		if (n > 70 - 16)  /* the header line starts mid-line; rows start at column 0 */
			ASSERT_LE((ssize_t)n, 70);
		tab = nl ? nl + 1 : NULL;
	}
	free(t);

	/* Colour only when asked. */
	ro = (struct vp_report_opts){ .top = 10, .color = true };
	t = render(p, NULL, 100, &ro, false);
	ASSERT_CONTAINS(t, "\033[36minlined    \033[0m Foo.inl");
	free(t);
	ro = (struct vp_report_opts){ .top = 10 };
	t = render(p, NULL, 100, &ro, false);
	ASSERT_NULL(strchr(t, '\033'));
	free(t);

	/* Diff: self% normalized per profile, sorted by |delta|, ties by name. */
	ro = (struct vp_report_opts){ .top = 10 };
	t = render(p, base, 100, &ro, false);
	const char *d = strstr(t, "   base%");
	ASSERT_NOT_NULL(d);
	const char *rows[] = {
		"   50.0    25.0   -25.0  inlined     Foo.inl ",
		"    0.0     8.3    +8.3  interpreted com.example",
		"   50.0    58.3    +8.3  native      recurse ",
		"    0.0     8.3    +8.3  kernel      schedule ",
	};
	for (size_t i = 0; i < 4; i++) {
		d = strchr(d, '\n') + 1;
		if (strncmp(d, rows[i], strlen(rows[i])))
			FAIL("diff row %zu is \"%.60s\", expected \"%s\"", i, d, rows[i]);
	}
	ASSERT_CONTAINS(t, "# diff on cpu-clock: base 12 samples, new 12 samples");
	free(t);

	/* Folded: one line per stack, pids merged, layer suffixes, ';' in names replaced. */
	ro = (struct vp_report_opts){ .threads = true };
	t = render(p, NULL, 100, &ro, true);
	ASSERT_STREQ(t,
		     "app;main;Foo.bar:x_[j];Foo.inl_[i] 3\n"
		     "app;main;" LONGNAME "_[0] 1\n"
		     "app;main;work;recurse;recurse;recurse 7\n"
		     "app;main;work;schedule_[k] 1\n");
	free(t);
	ro = (struct vp_report_opts){ .sort_event = 1, .threads = true };
	t = render(p, NULL, 100, &ro, true);
	ASSERT_STREQ(t, "app;main;work 4\n");
	free(t);

	/* A write error sticks and is returned. */
	FILE *full = fopen("/dev/full", "w");
	if (full) {
		struct vp_out o = { .f = full, .width = 80 };
		setvbuf(full, NULL, _IONBF, 0);
		ASSERT_LT(report_folded(p, &o, &ro), 0);
		fclose(full);
	}

	vp_profile__free(p);
	vp_profile__free(base);
	return 0;
}
