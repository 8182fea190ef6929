/* The JSON report: validates against docs/report-json-schema.json (a stdlib Python
 * validator, tests/test-report-json-validate.py), escapes hostile strings, a diff of a
 * profile against itself is all zeros, and a merge with itself doubles every count. */
#include <sys/wait.h>

#include "report/report.h"
#include "test-profile-synth.h"
#include "test-run.h"

static char dir[] = "/tmp/vp-test-report-json-XXXXXX";

static void write_json(const struct vp_profile *p, const struct vp_profile *base, const char *path)
{
	struct vp_out o;
	struct vp_report_opts opts = { .top = 10 };
	ASSERT_OK(vp_out__open(&o, path));
	ASSERT_OK(report_json(p, base, &o, &opts));
	ASSERT_OK(vp_out__close(&o));
}

static int py(const char *args)
{
	char cmd[2048];
	snprintf(cmd, sizeof(cmd), "python3 %s/tests/test-report-json-validate.py %s", SRCDIR, args);
	return run_sh(cmd, 100);
}
int main(void)
{
	if (run_sh("python3 -c 'import json' >/dev/null 2>&1", 110) != 0)
		SKIP("python3 is not installed; it runs the schema validator");
	ASSERT_NOT_NULL(mkdtemp(dir));
	char a[256], b[256], c[256], d[256], args[1024];
	snprintf(a, sizeof(a), "%s/a.json", dir);
	snprintf(b, sizeof(b), "%s/self-diff.json", dir);
	snprintf(c, sizeof(c), "%s/doubled.json", dir);
	snprintf(d, sizeof(d), "%s/broken.json", dir);

	/* A realistic profile plus a frame and a comm with every kind of hostile byte. */
	struct vp_profile *p = synth_java_profile();
	uint32_t w = synth_frame(p, VP_LAYER_NATIVE, "we\"ird\\ \n\x01\x7f </script> \xff\xc3\x28 ok \xc3\xa9", "/x", 0);
	ASSERT_OK(vp_profile__add(p, &w, 1, 1, 1, "tab\there", 0, 1, 1));
	/* One method's C1 (level 3) and C2 code: two frames, each with its tier (issue 25). */
	struct vp_frame t1 = { .name = "com.example.Tiered.run()", .image = "[jit]", .layer = VP_LAYER_JIT, .tier = 3 };
	struct vp_frame t2 = t1;
	t2.tier = VP_TIER_C2 | VP_TIER_OSR;
	uint32_t tf[2] = { vp_profile__frame(p, &t1), vp_profile__frame(p, &t2) };
	ASSERT_NE(tf[0], tf[1]);
	ASSERT_OK(vp_profile__add(p, &tf[0], 1, 1, 1, "tiered", 0, 1, 1));
	ASSERT_OK(vp_profile__add(p, &tf[1], 1, 1, 1, "tiered", 0, 1, 1));
	vp_profile__set_meta(p, "cmdline", "java -jar \"app.jar\"");
	vp_profile__warn(p, "lost 3 samples\twhile draining");
	write_json(p, NULL, a);
	snprintf(args, sizeof(args), "validate %s/docs/report-json-schema.json %s", SRCDIR, a);
	ASSERT_EQ(py(args), 0);

	char *txt = test_slurp(a, NULL);
	ASSERT_NOT_NULL(txt);
	ASSERT_CONTAINS(txt, "\"we\\\"ird\\\\ \\n\\u0001\\u007f </script> \\ufffd\\ufffd( ok \xc3\xa9\"");
	ASSERT_CONTAINS(txt, "\"comm\":\"tab\\there\"");
	ASSERT_CONTAINS(txt, "\"cmdline\":\"java -jar \\\"app.jar\\\"\"");
	ASSERT_CONTAINS(txt, "\"cpu-clock\":{\"samples\":1003,\"weight\":1000000003}");
	ASSERT_CONTAINS(txt, "\"name\":\"com.example.Tiered.run()\",\"layer\":\"jit\",\"image\":\"[jit]\",\"tier\":\"C1\",\"compile_level\":3,\"build_id\"");
	ASSERT_CONTAINS(txt, "\"name\":\"com.example.Tiered.run()\",\"layer\":\"jit\",\"image\":\"[jit]\",\"tier\":\"C2\",\"compile_level\":4,\"build_id\"");
	/* Frames without a known tier have neither key. */
	ASSERT_CONTAINS(txt, "\"name\":\"com.example.Server.handle\",\"layer\":\"jit\",\"image\":\"[jit]\",\"build_id\"");
	/* The top frame is the inlined encode at 400 of 1003 samples. */
	ASSERT_CONTAINS(txt, "\"name\":\"com.example.Codec.encode\",\"layer\":\"inlined\",\"image\":\"[jit]\",\"self\":400,\"total\":400,\"self_pct\":39.88");
	free(txt);

	/* The validator is not a rubber stamp: a wrong schema tag, a layer outside the enum,
	 * and totals that disagree with the stacks are each rejected. */
	static const char *const breaks[][2] = {
		{ "s/viprof-report/viprof-rep0rt/", "schema tag" },
		{ "s/\"layer\":\"jit\"/\"layer\":\"java\"/", "layer enum" },
		{ "s/\"samples\":1003,/\"samples\":1004,/", "totals" },
		{ "s/\"tier\":\"C1\"/\"tier\":\"C3\"/", "tier enum" },
		{ "s/\"compile_level\":3/\"compile_level\":5/", "compile level range" },
	};
	for (size_t i = 0; i < sizeof(breaks) / sizeof(breaks[0]); i++) {
		char cmd[1024];
		snprintf(cmd, sizeof(cmd), "sed '%s' %s > %s", breaks[i][0], a, d);
		ASSERT_EQ(run_sh(cmd, 110), 0);
		snprintf(args, sizeof(args), "validate %s/docs/report-json-schema.json %s 2>/dev/null", SRCDIR, d);
		if (py(args) != 1)
			FAIL("the validator accepted a broken document (%s)", breaks[i][1]);
	}

	/* Diff against itself: valid, and every delta zero. */
	write_json(p, p, b);
	snprintf(args, sizeof(args), "validate %s/docs/report-json-schema.json %s", SRCDIR, b);
	ASSERT_EQ(py(args), 0);
	snprintf(args, sizeof(args), "diff-zero %s", b);
	ASSERT_EQ(py(args), 0);
	/* ... while a diff against another profile is not. */
	struct vp_profile *q = synth_java_profile();
	write_json(q, p, d);
	snprintf(args, sizeof(args), "diff-zero %s 2>/dev/null", d);
	ASSERT_EQ(py(args), 1);

	/* Merge with itself doubles every count. */
	struct vp_profile *m = synth_java_profile();
	struct vp_profile *single = synth_java_profile();
	ASSERT_OK(vp_profile__merge(m, single));
	write_json(single, NULL, a);
	write_json(m, NULL, c);
	snprintf(args, sizeof(args), "validate %s/docs/report-json-schema.json %s", SRCDIR, c);
	ASSERT_EQ(py(args), 0);
	snprintf(args, sizeof(args), "doubled %s %s", a, c);
	ASSERT_EQ(py(args), 0);
	snprintf(args, sizeof(args), "doubled %s %s 2>/dev/null", a, a);
	ASSERT_EQ(py(args), 1);

	/* A failing output is reported, not swallowed. */
	struct vp_out o;
	ASSERT_OK(vp_out__open(&o, "/dev/full"));
	/* stdio buffers small outputs, so the error may only surface at close. */
	int werr = report_json(m, NULL, &o, NULL);
	int cerr = vp_out__close(&o);
	ASSERT_TRUE(werr != 0 || cerr != 0);

	vp_profile__free(p);
	vp_profile__free(q);
	vp_profile__free(m);
	vp_profile__free(single);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	run_sh(cmd, 110);
	return 0;
}
