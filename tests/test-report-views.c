/* Issue 25: the report's views of a profile (postproc/profile_xform.h) on synthetic
 * profiles: names normalised for comparison (lambda and hidden-class addresses, accessor
 * numbers), simple names, --include/--exclude, --java-only and --minwidth, and that a
 * normalised merge of two runs makes one lambda frame where the raw names make two. */
#include <string.h>

#include "postproc/profile_xform.h"
#include "report/report.h"
#include "test-html-util.h"
#include "test-profile-synth.h"
#include "test-profile.h"
#include "test.h"

static void check_norm(const char *in, const char *want)
{
	char out[256];
	vp_name__norm(in, out, sizeof(out));
	ASSERT_STREQ(out, want);
}

static void check_simple(const char *in, const char *want)
{
	char out[256];
	vp_name__simple(in, out, sizeof(out));
	ASSERT_STREQ(out, want);
}

static void test_names(void)
{
	/* JDK 17 lambdas (the agent writes the hidden class's '/' as '.'), JDK 21+ ones. */
	check_norm("Shop$$Lambda$2.0x00007fba7c000c28.applyAsLong(long)", "Shop$$Lambda.applyAsLong(long)");
	check_norm("Shop$$Lambda$17/0x0000000800c03000.run()", "Shop$$Lambda.run()");
	check_norm("Shop$$Lambda.0x000000001d040210.applyAsLong(long)", "Shop$$Lambda.applyAsLong(long)");
	check_norm("Shop$$Lambda/0x000000001d040210.get()", "Shop$$Lambda.get()");
	check_norm("java.lang.invoke.LambdaForm$MH.0x0000000062043800.invoke(Object, Object)",
		   "java.lang.invoke.LambdaForm$MH.invoke(Object, Object)");
	check_norm("jdk.internal.reflect.GeneratedMethodAccessor12.invoke(Object, Object[])",
		   "jdk.internal.reflect.GeneratedMethodAccessor.invoke(Object, Object[])");
	check_norm("jdk.internal.reflect.GeneratedConstructorAccessor3.newInstance(Object[])",
		   "jdk.internal.reflect.GeneratedConstructorAccessor.newInstance(Object[])");
	check_norm("jdk.internal.reflect.GeneratedSerializationConstructorAccessor41.newInstance(Object[])",
		   "jdk.internal.reflect.GeneratedSerializationConstructorAccessor.newInstance(Object[])");
	check_norm("jdk.proxy1.$Proxy12.handle(Request)", "jdk.proxy1.$Proxy.handle(Request)");
	/* What is not a per-run number stays. */
	check_norm("Shop.lambda$main$0(long)", "Shop.lambda$main$0(long)");
	check_norm("Shop$Inner2.run()", "Shop$Inner2.run()");
	check_norm("Hex.x0x1f(long)", "Hex.x0x1f(long)");
	check_norm("", "");

	check_simple("Shop.buy(String, int)", "Shop.buy");
	check_simple("Shop.<init>()", "Shop.<init>");
	check_simple("JavaCalls::call_helper(JavaValue*, methodHandle const&, JavaCallArguments*, JavaThread*)",
		     "JavaCalls::call_helper");
	check_simple("jni_invoke_static(JNIEnv_*, JavaValue*) [clone .constprop.1]", "jni_invoke_static");
	check_simple("Klass::name() const", "Klass::name");
	check_simple("std::function<void ()>::operator()() const", "std::function<void ()>::operator()");
	check_simple("(anonymous namespace)::run(int)", "(anonymous namespace)::run");
	check_simple("finish_task_switch.isra.0", "finish_task_switch.isra.0");
	check_simple("[blocked: lock]", "[blocked: lock]");
	/* A short buffer truncates, always terminated. */
	char small[5];
	vp_name__simple("Shop.buy(String)", small, sizeof(small));
	ASSERT_STREQ(small, "Shop");
}

/* One Java thread: libc and libjvm frames, then Thread.run, then a lambda. */
static void add_java(struct vp_profile *p, const char *lambda, const char *leaf, uint64_t n)
{
	uint32_t f[6] = {
		synth_frame(p, VP_LAYER_NATIVE, "start_thread", "libc.so.6", 0x10),
		synth_frame(p, VP_LAYER_JVM, "JavaCalls::call_helper(JavaValue*)", "libjvm.so", 0x20),
		synth_frame(p, VP_LAYER_INTERPRETED, "java.lang.Thread.run()", "[jit]", 0),
		synth_frame(p, VP_LAYER_JIT, "Shop.serve(Request)", "[jit]", 0),
		synth_frame(p, VP_LAYER_INLINED, lambda, "[jit]", 0),
		synth_frame(p, VP_LAYER_INLINED, leaf, "[jit]", 0),
	};
	ASSERT_OK(vp_profile__add(p, f, 6, 10, 11, "worker", 0, n, n * 1000));
}

static struct vp_profile *two_lambdas(const char *addr)
{
	struct vp_profile *p = vp_profile__new();
	ASSERT_NOT_NULL(p);
	ASSERT_EQ(vp_profile__add_event(p, "cpu-clock", "nanoseconds"), 0);
	char l1[128], l2[128];
	snprintf(l1, sizeof(l1), "Shop$$Lambda$1.0x%sa08.get()", addr);
	snprintf(l2, sizeof(l2), "Shop$$Lambda$2.0x%sc48.get()", addr);
	add_java(p, l1, "Shop.lambda$serve$0()", 60);
	add_java(p, l2, "Shop.lambda$serve$1()", 30);
	/* A GC thread: no Java frame at all. */
	uint32_t g[2] = {
		synth_frame(p, VP_LAYER_NATIVE, "start_thread", "libc.so.6", 0x10),
		synth_frame(p, VP_LAYER_JVM, "G1YoungCollector::collect()", "libjvm.so", 0x30),
	};
	ASSERT_OK(vp_profile__add(p, g, 2, 10, 12, "GC Thread#0", 0, 10, 10000));
	return p;
}

static int count_named(const struct vp_profile *p, const char *needle)
{
	int n = 0;
	for (size_t i = 0; i < p->nframes; i++)
		n += strstr(p->frames[i].name, needle) != NULL;
	return n;
}

static uint64_t samples_with(const struct vp_profile *p, const char *name)
{
	return (uint64_t)tp_with(p, &(struct tp_filter){ 0 }, name, TP_EXACT);
}

static void test_norm_merge(void)
{
	/* Two runs whose lambdas have different addresses: merged raw, four lambda frames;
	 * normalised, one (both lambdas implement the same method of the same class). */
	struct vp_profile *a = two_lambdas("00007fba7c000"), *b = two_lambdas("00007f214c000");
	ASSERT_OK(vp_profile__merge(a, b));
	ASSERT_EQ(count_named(a, "$$Lambda"), 4);
	char err[256];
	struct vp_xform x = { .norm = true };
	struct vp_profile *v = vp_profile__transform(a, &x, err, sizeof(err));
	ASSERT_NOT_NULL(v);
	ASSERT_EQ(count_named(v, "$$Lambda"), 1);
	ASSERT_UEQ(samples_with(v, "Shop$$Lambda.get()"), 180);
	ASSERT_UEQ(samples_with(v, "Shop.lambda$serve$0()"), 120);
	ASSERT_FALSE(vp_profile__has_samples(v) == false);
	/* Native names are left alone even when they look like an address. */
	ASSERT_UEQ(samples_with(v, "G1YoungCollector::collect()"), 20);
	vp_profile__free(v);
	vp_profile__free(a);
	vp_profile__free(b);
}

static void test_filters(void)
{
	struct vp_profile *p = two_lambdas("00007fba7c000");
	char err[256];
	/* Include keeps stacks with any matching frame; exclude drops them. */
	struct vp_xform x = { .ninclude = 1, .include = { "lambda\\$serve\\$1" } };
	struct vp_profile *v = vp_profile__transform(p, &x, err, sizeof(err));
	ASSERT_NOT_NULL(v);
	ASSERT_EQ(v->nstacks, 1);
	ASSERT_UEQ(samples_with(v, "Shop.serve(Request)"), 30);
	vp_profile__free(v);
	x = (struct vp_xform){ .nexclude = 2, .exclude = { "^G1", "serve\\$1" } };
	v = vp_profile__transform(p, &x, err, sizeof(err));
	ASSERT_NOT_NULL(v);
	ASSERT_EQ(v->nstacks, 1);
	ASSERT_UEQ(samples_with(v, "Shop.lambda$serve$0()"), 60);
	vp_profile__free(v);
	/* A bad pattern is named in the message. */
	x = (struct vp_xform){ .ninclude = 1, .include = { "(unclosed" } };
	ASSERT_NULL(vp_profile__transform(p, &x, err, sizeof(err)));
	ASSERT_CONTAINS(err, "--include '(unclosed'");

	/* Java only: stacks start at Thread.run; the GC thread keeps its native stack. */
	x = (struct vp_xform){ .java_only = true, .simple = true };
	v = vp_profile__transform(p, &x, err, sizeof(err));
	ASSERT_NOT_NULL(v);
	for (size_t i = 0; i < v->nstacks; i++) {
		const struct vp_stack *s = &v->stacks[i];
		const char *root = v->frames[s->frames[0]].name;
		if (!strcmp(s->comm, "worker"))
			ASSERT_STREQ(root, "java.lang.Thread.run");
		else
			ASSERT_STREQ(root, "start_thread");
	}
	ASSERT_UEQ(samples_with(v, "JavaCalls::call_helper"), 0);
	ASSERT_UEQ(samples_with(v, "G1YoungCollector::collect"), 10);
	vp_profile__free(v);

	/* Minwidth 20%: the 10% GC stack is cut at its root (nothing left of it but the
	 * thread), lambda$serve$1 (30%) stays; at 40% the second lambda's subtree goes and
	 * its 30 samples stay with Shop.serve as self. */
	x = (struct vp_xform){ .minwidth = 40, .minwidth_event = 0 };
	v = vp_profile__transform(p, &x, err, sizeof(err));
	ASSERT_NOT_NULL(v);
	ASSERT_UEQ(samples_with(v, "Shop.lambda$serve$1()"), 0);
	ASSERT_UEQ(samples_with(v, "Shop.serve(Request)"), 90);
	ASSERT_UEQ(samples_with(v, "G1YoungCollector::collect()"), 0);
	uint64_t all = 0;
	for (size_t i = 0; i < v->nstacks; i++)
		all += v->stacks[i].samples[0];
	ASSERT_UEQ(all, 100);   /* nothing lost, only cut */
	vp_profile__free(v);
	vp_profile__free(p);
}

/* The flame graph's include, exclude and min-width controls (#include=, #exclude=,
 * #minwidth= in the URL) draw what the report's options would (headless chromium). */
static void test_html(void)
{
	html_test_start();
	struct vp_profile *p = two_lambdas("00007fba7c000");
	const char *file = "test-report-views.html";
	write_html(p, NULL, file);
	char *dom = browse(file, NULL, NULL);
	ASSERT_NOT_NULL(li_for(dom, "Shop.lambda$serve$1()"));
	ASSERT_NOT_NULL(li_for(dom, "G1YoungCollector::collect()"));
	free(dom);
	dom = browse(file, "include=serve%5C%241", NULL);
	ASSERT_NOT_NULL(li_for(dom, "Shop.lambda$serve$1()"));
	ASSERT_NULL(li_for(dom, "Shop.lambda$serve$0()"));
	ASSERT_NULL(li_for(dom, "G1YoungCollector::collect()"));
	ASSERT_CONTAINS(dom, "30 samples (");   /* "N samples (N.N ms) of cpu-clock": a time event */
	free(dom);
	dom = browse(file, "exclude=%5EG1", NULL);
	ASSERT_NULL(li_for(dom, "G1YoungCollector::collect()"));
	ASSERT_NOT_NULL(li_for(dom, "Shop.lambda$serve$0()"));
	ASSERT_CONTAINS(dom, "90 samples (");   /* "N samples (N.N ms) of cpu-clock": a time event */
	free(dom);
	/* Java only: the worker's stack starts at Thread.run (no libjvm frame left), the GC
	 * thread's, without Java, stays whole; simple names drop the argument lists. */
	dom = browse(file, "javaonly=1", NULL);
	ASSERT_NULL(li_for(dom, "JavaCalls::call_helper(JavaValue*)"));
	const char *li = li_for(dom, "java.lang.Thread.run()");
	char v[32];
	ASSERT_NOT_NULL(li);
	attr(li, "data-depth", v, sizeof(v));
	ASSERT_STREQ(v, "1");
	attr(li, "data-samples", v, sizeof(v));
	ASSERT_STREQ(v, "90");
	ASSERT_NOT_NULL(li_for(dom, "G1YoungCollector::collect()"));
	li = li_for(dom, "start_thread");
	ASSERT_NOT_NULL(li);
	attr(li, "data-samples", v, sizeof(v));
	ASSERT_STREQ(v, "10");   /* only the stack without Java keeps its prefix */
	ASSERT_CONTAINS(dom, "100 samples (");   /* "N samples (N.N ms) of cpu-clock": a time event */
	free(dom);
	dom = browse(file, "simple=1&javaonly=1", NULL);
	ASSERT_NOT_NULL(li_for(dom, "Shop.serve"));
	ASSERT_NULL(li_for(dom, "Shop.serve(Request)"));
	ASSERT_NOT_NULL(li_for(dom, "java.lang.Thread.run"));
	free(dom);
	dom = browse(file, "minwidth=40", NULL);
	ASSERT_NULL(li_for(dom, "Shop.lambda$serve$1()"));
	ASSERT_NOT_NULL(li_for(dom, "Shop.lambda$serve$0()"));
	ASSERT_CONTAINS(dom, "100 samples (");   /* "N samples (N.N ms) of cpu-clock": a time event */
	free(dom);
	vp_profile__free(p);
	unlink(file);
	html_test_end();
}

/* Writes p (against base when given) in one format to a file and returns it. */
static char *views_report(const struct vp_profile *p, const struct vp_profile *base, int fmt,
			  const struct vp_report_opts *ro)
{
	char path[64];
	snprintf(path, sizeof(path), "/tmp/vp-views8-report.%d", (int)getpid());
	struct vp_out o;
	ASSERT_OK(vp_out__open(&o, path));
	ASSERT_OK(fmt == 0 ? report_text(p, base, &o, ro) : fmt == 1 ? report_folded(p, &o, ro) : report_json(p, base, &o, ro));
	ASSERT_OK(vp_out__close(&o));
	char *s = test_slurp(path, NULL);
	ASSERT_NOT_NULL(s);
	unlink(path);
	return s;
}

static int occurrences(const char *hay, const char *needle)
{
	int n = 0;
	for (const char *c = hay; (c = strstr(c, needle)); c += strlen(needle))
		n++;
	return n;
}

/* One method run interpreted (30), as C1 (20) and C2 (40) code, and inlined into its
 * caller (10), by two threads. */
static struct vp_profile *tiers_profile(uint64_t scale)
{
	struct vp_profile *p = vp_profile__new();
	ASSERT_NOT_NULL(p);
	ASSERT_EQ(vp_profile__add_event(p, "cpu-clock", "nanoseconds"), 0);
	uint32_t run = synth_frame(p, VP_LAYER_INTERPRETED, "Shop.run()", "[jit]", 0);
	uint32_t loop = synth_frame(p, VP_LAYER_JIT, "Shop.loop()", "[jit]", 0);
	struct vp_frame w = { .name = "Shop.work(int)", .image = "[jit]", .build_id = "", .file = "" };
	w.layer = VP_LAYER_INTERPRETED;
	uint32_t wi = vp_profile__frame(p, &w);
	w.layer = VP_LAYER_JIT;
	w.tier = 3;
	uint32_t w1 = vp_profile__frame(p, &w);
	w.tier = VP_TIER_C2;
	uint32_t w2 = vp_profile__frame(p, &w);
	w.layer = VP_LAYER_INLINED;
	w.tier = 0;
	uint32_t wl = vp_profile__frame(p, &w);
	uint32_t ph = synth_frame(p, VP_LAYER_INTERPRETED, "[interpreted]", "[jit]", 0);
	uint32_t a[] = { run, wi }, b[] = { run, w1 }, c[] = { run, w2 }, d[] = { run, loop, wl }, e[] = { run, ph };
	ASSERT_OK(vp_profile__add(p, a, 2, 10, 11, "worker-1", 0, 30 * scale, 30 * scale * 1000));
	ASSERT_OK(vp_profile__add(p, b, 2, 10, 12, "worker-2", 0, 20 * scale, 20 * scale * 1000));
	ASSERT_OK(vp_profile__add(p, c, 2, 10, 11, "worker-1", 0, 40 * scale, 40 * scale * 1000));
	ASSERT_OK(vp_profile__add(p, d, 3, 10, 12, "worker-2", 0, 10 * scale, 10 * scale * 1000));
	ASSERT_OK(vp_profile__add(p, e, 2, 10, 12, "worker-2", 0, 5, 5000));
	return p;
}

/* Issue 33: --merge-tiers makes a Java method one frame whatever ran it, in the layer
 * that had most of its samples, in every report (they all read the view). */
static void test_merge_tiers(void)
{
	struct vp_profile *p = tiers_profile(1);
	char err[256];
	ASSERT_EQ(count_named(p, "Shop.work(int)"), 4);
	struct vp_xform x = { .merge_tiers = true };
	ASSERT_TRUE(vp_xform__active(&x));
	struct vp_profile *v = vp_profile__transform(p, &x, err, sizeof(err));
	ASSERT_NOT_NULL(v);
	ASSERT_EQ(count_named(v, "Shop.work(int)"), 1);
	ASSERT_EQ(count_named(v, "[interpreted]"), 1);   /* a placeholder names no method */
	for (size_t i = 0; i < v->nframes; i++)
		if (!strcmp(v->frames[i].name, "Shop.work(int)")) {
			ASSERT_EQ(v->frames[i].layer, VP_LAYER_JIT);   /* 60 of its 100 samples */
			ASSERT_EQ(v->frames[i].tier, 0);
		} else if (!strcmp(v->frames[i].name, "Shop.run()"))
			ASSERT_EQ(v->frames[i].layer, VP_LAYER_INTERPRETED);
	ASSERT_UEQ(samples_with(v, "Shop.work(int)"), 100);
	struct vp_report_opts ro = { .top = 10 };
	char *t = views_report(v, NULL, 0, &ro);
	ASSERT_EQ(occurrences(t, "Shop.work(int)"), 1);
	ASSERT_CONTAINS(t, "95.2");   /* its 100 self samples of 105 in one row */
	free(t);
	t = views_report(v, NULL, 1, &ro);
	ASSERT_CONTAINS(t, "Shop.run()_[0];Shop.work(int)_[j] 90\n");
	ASSERT_CONTAINS(t, "Shop.run()_[0];Shop.loop()_[j];Shop.work(int)_[j] 10\n");
	free(t);
	/* JSON names each frame in "top" and in the frame table: once each. */
	t = views_report(v, NULL, 2, &ro);
	ASSERT_EQ(occurrences(t, "\"name\":\"Shop.work(int)\""), 2);
	free(t);
	/* Unmerged, the same reports split it in four. */
	t = views_report(p, NULL, 2, &ro);
	ASSERT_EQ(occurrences(t, "\"name\":\"Shop.work(int)\""), 8);
	free(t);
	/* A diff of merged views: one row for the method, no colder and hotter twins. */
	struct vp_profile *b = tiers_profile(2), *bv = vp_profile__transform(b, &x, err, sizeof(err));
	ASSERT_NOT_NULL(bv);
	t = views_report(v, bv, 0, &ro);
	ASSERT_EQ(occurrences(t, "Shop.work(int)"), 1);
	free(t);
	vp_profile__free(bv);
	vp_profile__free(b);
	vp_profile__free(v);
	vp_profile__free(p);
}

/* Issue 33: folded output merges threads unless asked (async-profiler's collapsed and
 * its -t), and --reverse writes lines leaf first; text --reverse adds the callers. */
static void test_threads_reverse(void)
{
	struct vp_profile *p = tiers_profile(1);
	struct vp_report_opts ro = { .top = 10 };
	char *t = views_report(p, NULL, 1, &ro);
	ASSERT_NULL(strstr(t, "worker-"));
	ASSERT_CONTAINS(t, "Shop.run()_[0];Shop.work(int)_[j] 40\n");
	ASSERT_EQ(strncmp(t, "Shop.run()", 10), 0);
	free(t);
	ro.threads = true;
	t = views_report(p, NULL, 1, &ro);
	ASSERT_CONTAINS(t, "worker-1;Shop.run()_[0];Shop.work(int)_[j] 40\n");
	free(t);
	ro.threads = false;
	ro.reverse = true;
	t = views_report(p, NULL, 1, &ro);
	ASSERT_CONTAINS(t, "Shop.work(int)_[i];Shop.loop()_[j];Shop.run()_[0] 10\n");
	ASSERT_CONTAINS(t, "Shop.work(int)_[0];Shop.run()_[0] 30\n");
	free(t);
	/* Merged threads and tiers: the same stack of two threads is one line. */
	char err[256];
	struct vp_xform x = { .merge_tiers = true };
	struct vp_profile *v = vp_profile__transform(p, &x, err, sizeof(err));
	ASSERT_NOT_NULL(v);
	ro.reverse = false;
	t = views_report(v, NULL, 1, &ro);
	ASSERT_CONTAINS(t, "Shop.run()_[0];Shop.work(int)_[j] 90\n");
	free(t);
	/* Text: the hottest frames' callers, callee first. */
	ro.reverse = true;
	t = views_report(v, NULL, 0, &ro);
	const char *sec = strstr(t, "# callers of the");
	ASSERT_NOT_NULL(sec);
	ASSERT_CONTAINS(sec, "Shop.work(int)\n");
	ASSERT_CONTAINS(sec, "<- Shop.run()\n");
	ASSERT_CONTAINS(sec, "<- Shop.loop()\n");
	ASSERT_CONTAINS(sec, "    <- Shop.run()\n");   /* loop's caller, one level deeper */
	free(t);
	ro.reverse = false;
	t = views_report(v, NULL, 0, &ro);
	ASSERT_NULL(strstr(t, "# callers of the"));
	free(t);
	vp_profile__free(v);
	vp_profile__free(p);
}

int main(int argc, char **argv)
{
	const char *which = argc > 1 ? argv[1] : "all";
	if (!strcmp(which, "all") || !strcmp(which, "names"))
		test_names();
	if (!strcmp(which, "all") || !strcmp(which, "norm-merge"))
		test_norm_merge();
	if (!strcmp(which, "all") || !strcmp(which, "filters"))
		test_filters();
	if (!strcmp(which, "all") || !strcmp(which, "merge-tiers"))
		test_merge_tiers();
	if (!strcmp(which, "all") || !strcmp(which, "threads-reverse"))
		test_threads_reverse();
	if (!strcmp(which, "html"))
		test_html();
	return 0;
}
