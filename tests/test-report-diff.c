/* --diff semantics: both sides normalized to shares of their own totals, frames matched
 * by (layer, name, image) across profiles whose ids differ, frames only in the base or
 * only in the new profile, a base lacking the event; in the JSON diff and the HTML data. */
#include "report/report.h"
#include "test-profile-synth.h"

static char *render(const struct vp_profile *p, const struct vp_profile *base, bool html)
{
	char path[] = "/tmp/vp-test-report-diff-XXXXXX";
	int fd = mkstemp(path);
	ASSERT_GE(fd, 0);
	close(fd);
	struct vp_out o;
	struct vp_report_opts opts = { 0 };
	ASSERT_OK(vp_out__open(&o, path));
	ASSERT_OK(html ? report_html(p, base, &o, &opts) : report_json(p, base, &o, &opts));
	ASSERT_OK(vp_out__close(&o));
	char *s = test_slurp(path, NULL);
	ASSERT_NOT_NULL(s);
	unlink(path);
	return s;
}

/* The diff entry of the frame called name. */
static const char *entry(const char *json, const char *name)
{
	const char *d = strstr(json, "\"diff\":{");
	ASSERT_NOT_NULL(d);
	char pat[160];
	snprintf(pat, sizeof(pat), "{\"name\":\"%s\"", name);
	const char *e = strstr(d, pat);
	if (!e)
		FAIL("no diff entry for %s", name);
	return e;
}

static void expect(const char *json, const char *name, const char *fragment)
{
	const char *e = entry(json, name);
	const char *end = strchr(e, '}');
	const char *f = strstr(e, fragment);
	if (!f || f > end)
		FAIL("diff entry for %s lacks %s: %.*s", name, fragment, (int)(end - e + 1), e);
}

int main(void)
{
	/* new: f1 60, f2 40 (100 samples). base: f1 150, f3 150 (300), with its frames
	 * interned in another order so that ids differ. */
	struct vp_profile *n = vp_profile__new(), *b = vp_profile__new();
	ASSERT_NOT_NULL(n);
	ASSERT_NOT_NULL(b);
	vp_profile__add_event(n, "cpu-clock", "nanoseconds");
	vp_profile__add_event(b, "page-faults", "events");
	vp_profile__add_event(b, "cpu-clock", "nanoseconds");
	uint32_t nr = synth_frame(n, VP_LAYER_NATIVE, "main", "/app", 0);
	uint32_t n1 = synth_frame(n, VP_LAYER_JIT, "f1", "[jit]", 0);
	uint32_t n2 = synth_frame(n, VP_LAYER_JIT, "f2", "[jit]", 0);
	uint32_t b3 = synth_frame(b, VP_LAYER_JIT, "f3", "[jit]", 0);
	uint32_t b1 = synth_frame(b, VP_LAYER_JIT, "f1", "[jit]", 0);
	uint32_t br = synth_frame(b, VP_LAYER_NATIVE, "main", "/app", 0);
	/* Same name, other layer: a different frame, not matched with f1. */
	uint32_t bx = synth_frame(b, VP_LAYER_INLINED, "f1", "[jit]", 0);
	uint32_t s[2];
	s[0] = nr, s[1] = n1;
	ASSERT_OK(vp_profile__add(n, s, 2, 1, 1, "t", 0, 60, 60));
	s[1] = n2;
	ASSERT_OK(vp_profile__add(n, s, 2, 1, 1, "t", 0, 40, 40));
	s[0] = br, s[1] = b1;
	ASSERT_OK(vp_profile__add(b, s, 2, 1, 1, "t", 1, 150, 150));
	s[1] = b3;
	ASSERT_OK(vp_profile__add(b, s, 2, 1, 1, "t", 1, 120, 120));
	s[1] = bx;
	ASSERT_OK(vp_profile__add(b, s, 2, 1, 1, "t", 1, 30, 30));
	ASSERT_OK(vp_profile__add(b, s, 2, 1, 1, "t", 0, 999, 999));   /* another event: ignored */

	char *j = render(n, b, false);
	ASSERT_CONTAINS(j, "\"diff\":{\"event\":\"cpu-clock\",\"base_event_found\":true,\"total\":100,\"base_total\":300,");
	expect(j, "f1", "\"layer\":\"jit\"");
	expect(j, "f1", "\"self_pct\":60,\"base_self_pct\":50,\"delta_self_pct\":10,");
	expect(j, "f2", "\"self_pct\":40,\"base_self_pct\":0,\"delta_self_pct\":40,");
	expect(j, "f3", "\"id\":-1,");
	expect(j, "f3", "\"self_pct\":0,\"base_self_pct\":40,\"delta_self_pct\":-40,");
	expect(j, "main", "\"total_pct\":100,\"base_total_pct\":100,\"delta_total_pct\":0}");
	/* The inlined f1 of the base is its own entry (found after the JIT one). */
	const char *jit_f1 = entry(j, "f1");
	const char *inl = strstr(jit_f1 + 1, "{\"name\":\"f1\",\"layer\":\"inlined\"");
	ASSERT_NOT_NULL(inl);
	ASSERT_CONTAINS(inl, "\"base_self_pct\":10,\"delta_self_pct\":-10,");
	free(j);

	/* A base twice as long with the same shape: no change anywhere. */
	struct vp_profile *twice = synth_java_profile(), *one = synth_java_profile();
	ASSERT_OK(vp_profile__merge(twice, one));
	j = render(one, twice, false);
	for (const char *e = strstr(j, "\"delta_self_pct\":"); e; e = strstr(e + 1, "\"delta_self_pct\":"))
		ASSERT_TRUE(!strncmp(e, "\"delta_self_pct\":0,", 19));
	for (const char *e = strstr(j, "\"delta_total_pct\":"); e; e = strstr(e + 1, "\"delta_total_pct\":"))
		ASSERT_TRUE(!strncmp(e, "\"delta_total_pct\":0}", 20));
	free(j);

	/* A base without the event: found=false, all its shares 0. */
	struct vp_profile *pf = vp_profile__new();
	vp_profile__add_event(pf, "page-faults", "events");
	j = render(n, pf, false);
	ASSERT_CONTAINS(j, "\"base_event_found\":false,\"total\":100,\"base_total\":0,");
	expect(j, "f1", "\"base_self_pct\":0,\"delta_self_pct\":60,");
	free(j);

	/* HTML: the new tree, each node carrying its base count on the matched path; f3 (base
	 * only) is not drawn, and the inlined f1 of the base does not land on the JIT f1. */
	char *h = render(n, b, true);
	ASSERT_CONTAINS(h, "\"diff\":true,\"ev\":0,\"events\":[{\"name\":");
	ASSERT_CONTAINS(h, "\"total\":100,\"baseTotal\":300}");
	/* Preorder [frame, children, value, base]: root(100, base 300), main(100, 300),
	 * f1(60, 150), f2(40, 0); no thread level in a diff (the runs share no threads). */
	const char *tree = strstr(h, "\"tree\":[");
	ASSERT_NOT_NULL(tree);
	ASSERT_TRUE(!strncmp(tree, "\"tree\":[-1,1,100,300,0,2,100,300,1,0,60,150,2,0,40,0]", 53));
	ASSERT_CONTAINS(h, "\"threads\":[]");
	ASSERT_TRUE(strstr(h, "[\"f3\"") == NULL);
	free(h);

	vp_profile__free(n);
	vp_profile__free(b);
	vp_profile__free(pf);
	vp_profile__free(twice);
	vp_profile__free(one);
	return 0;
}
