/* The HTML flame graph in a real browser (headless chromium): no console errors, the
 * expected frames in the DOM, search by regex with its highlight and "matched" share,
 * zoom, hostile names kept inert, the differential view, a screenshot, and a 100k-node
 * tree that still loads. */

#include "test-html-util.h"

int main(void)
{
	html_test_start();

	struct vp_profile *p = synth_java_profile();
	/* A hostile frame name: must stay text, never markup or script. */
	uint32_t evil = synth_frame(p, VP_LAYER_NATIVE, "</script><script>window.PWNED=1;throw new Error('pwned')</script>&amp;", "/x", 0);
	ASSERT_OK(vp_profile__add(p, &evil, 1, 1, 1, "evil", 0, 1, 1000000));
	write_html(p, NULL, "flame-synth.html");

	size_t len;
	char *html = test_slurp("flame-synth.html", &len);
	ASSERT_NOT_NULL(html);
	/* Self-contained: no external resources, and one data block. */
	ASSERT_TRUE(strstr(html, "http://") == NULL && strstr(html, "https://") == NULL);
	ASSERT_TRUE(strstr(html, " src=") == NULL);
	ASSERT_CONTAINS(html, "<script type=\"application/json\" id=\"viprof-data\">");
	ASSERT_CONTAINS(html, "\\u003c/script\\u003e");
	/* The title says what is drawn in one line; the probe's words are in the metadata. */
	ASSERT_CONTAINS(html, "<title>Flame graph: cpu-clock, 1001 samples at 1000 Hz in 1.0 s on vm-test</title>");
	free(html);

	/* Plain load: the frames drawn at 800 px are in the DOM list, with the right shares. */
	char *dom = browse("flame-synth.html", NULL, NULL);
	static const char *const expect[] = { "all", "start_thread", "com.example.Server.handle", "com.example.Codec.encode",
					      "java.util.HashMap.get", "ksys_write", "G1CollectedHeap::do_collection",
					      "[steal]", "JLI_Launch" };
	for (size_t i = 0; i < sizeof(expect) / sizeof(expect[0]); i++)
		if (!li_for(dom, expect[i]))
			FAIL("frame %s is not in the DOM", expect[i]);
	char v[64];
	attr(li_for(dom, "com.example.Codec.encode"), "data-samples", v, sizeof(v));
	ASSERT_STREQ(v, "400");
	attr(li_for(dom, "com.example.Codec.encode"), "data-layer", v, sizeof(v));
	ASSERT_STREQ(v, "inlined");
	attr(li_for(dom, "ksys_write"), "data-layer", v, sizeof(v));
	ASSERT_STREQ(v, "kernel");
	ASSERT_CONTAINS(dom, "&lt;/script&gt;&lt;script&gt;window.PWNED");
	ASSERT_CONTAINS(dom, "data-layer=\"hypervisor\"");   /* the legend */
	ASSERT_CONTAINS(dom, "JVM runtime");
	ASSERT_TRUE(strstr(dom, "class=\"match\">") == NULL);
	free(dom);

	/* Search by regex: both inlined frames highlighted, 600 of 1001 samples. */
	dom = browse("flame-synth.html", "search=Codec%7CHashMap", NULL);
	ASSERT_CONTAINS(dom, "matched 59.94% (2 frames)");
	ASSERT_CONTAINS(li_for(dom, "com.example.Codec.encode"), "<li data-node");
	ASSERT_TRUE(strstr(li_for(dom, "com.example.Codec.encode"), "class=\"match\"") <
		    strchr(li_for(dom, "com.example.Codec.encode"), '>'));
	ASSERT_TRUE(strstr(li_for(dom, "ksys_write"), "class=\"match\"") == NULL ||
		    strstr(li_for(dom, "ksys_write"), "class=\"match\"") > strchr(li_for(dom, "ksys_write"), '>'));
	/* Matches nested in a match count once: handle covers encode and get. */
	free(dom);
	dom = browse("flame-synth.html", "search=Server%7CCodec", NULL);
	ASSERT_CONTAINS(dom, "matched 74.93% (2 frames)");
	/* Not a valid regex: taken as text. */
	free(dom);
	dom = browse("flame-synth.html", "search=%5Bsteal%5D%28", NULL);
	ASSERT_CONTAINS(dom, "matched 0.00% (0 frames)");
	free(dom);
	dom = browse("flame-synth.html", "search=%5Bsteal", NULL);
	ASSERT_CONTAINS(dom, "matched 5.00% (1 frame)");

	/* Zoom into VMThread::run: its subtree only, shares relative to it. */
	char node[32];
	attr(li_for(dom, "VMThread::run"), "data-node", node, sizeof(node));
	free(dom);
	char hash[128];
	snprintf(hash, sizeof(hash), "zoom=%s&search=collection", node);
	dom = browse("flame-synth.html", hash, NULL);
	ASSERT_NOT_NULL(li_for(dom, "G1CollectedHeap::do_collection"));
	ASSERT_NULL(li_for(dom, "ksys_write"));
	ASSERT_NULL(li_for(dom, "com.example.Codec.encode"));
	ASSERT_CONTAINS(dom, "matched 100.00% (1 frame)");
	/* The view is written back to the fragment, the zoom as a path of frame names
	 * (node numbers change with the view), and that path zooms the same. */
	char *vh = strstr(dom, "data-view-hash=\"");
	ASSERT_NOT_NULL(vh);
	ASSERT_CONTAINS(vh, "search=collection");
	ASSERT_CONTAINS(vh, "VMThread%3A%3Arun\"");
	char zhash[512];
	const char *z = strstr(vh, "zoom=");
	ASSERT_NOT_NULL(z);
	size_t zl = strcspn(z, "&\"");
	snprintf(zhash, sizeof(zhash), "orient=flame&%.*s", (int)zl, z);
	free(dom);
	dom = browse("flame-synth.html", zhash, NULL);
	ASSERT_NOT_NULL(li_for(dom, "G1CollectedHeap::do_collection"));
	ASSERT_NULL(li_for(dom, "ksys_write"));
	ASSERT_CONTAINS(dom, "data-orientation=\"flame\"");
	ASSERT_CONTAINS(strstr(dom, "data-view-hash=\""), "orient=flame&amp;zoom=");   /* & as the DOM writes it */
	free(dom);

	/* Screenshot. */
	char png[700];
	snprintf(png, sizeof(png), "%s/flame.png", cwd);
	unlink(png);
	free(browse("flame-synth.html", "search=Codec", png));
	char *img = test_slurp(png, &len);
	ASSERT_NOT_NULL(img);
	ASSERT_GT(len, 1000);
	ASSERT_TRUE(!memcmp(img, "\x89PNG", 4));
	free(img);

	/* Differential: base spends twice as long in encode, so encode is colder (-17.18
	 * points: 400/1001 now vs 800/1400 then) and everything else hotter. */
	struct vp_profile *base = synth_java_profile();
	uint32_t path[6];
	for (uint32_t i = 0; i < 6; i++) {
		static const char *const names[] = { "start_thread", "thread_native_entry", "JavaCalls::call_helper",
						     "com.example.Main.run", "com.example.Server.handle", "com.example.Codec.encode" };
		path[i] = UINT32_MAX;
		for (size_t f = 0; f < base->nframes; f++)
			if (!strcmp(base->frames[f].name, names[i]))
				path[i] = (uint32_t)f;
		ASSERT_NE(path[i], UINT32_MAX);
	}
	ASSERT_OK(vp_profile__add(base, path, 6, 4242, 4243, "worker-1", 0, 400, 400 * SYNTH_PERIOD_NS));
	write_html(p, base, "flame-diff.html");
	dom = browse("flame-diff.html", NULL, NULL);
	ASSERT_CONTAINS(dom, "hotter than base");
	ASSERT_CONTAINS(dom, "<title>Differential flame graph: cpu-clock");
	attr(li_for(dom, "com.example.Codec.encode"), "data-delta", v, sizeof(v));
	ASSERT_STREQ(v, "-17.18");
	attr(li_for(dom, "ksys_write"), "data-delta", v, sizeof(v));
	ASSERT_STREQ(v, "4.27");
	free(dom);
	/* Against itself: no change anywhere. */
	write_html(p, p, "flame-self.html");
	dom = browse("flame-self.html", NULL, NULL);
	attr(li_for(dom, "com.example.Codec.encode"), "data-delta", v, sizeof(v));
	ASSERT_STREQ(v, "0.00");
	free(dom);

	/* 111,112 nodes: loads, draws the wide frames, prunes the rest. */
	struct vp_profile *big = synth_big_profile(5);
	write_html(big, NULL, "flame-big.html");
	dom = browse("flame-big.html", "search=method42", NULL);
	ASSERT_NOT_NULL(li_for(dom, "start_thread"));
	ASSERT_NOT_NULL(li_for(dom, "com.example.level0.Class3.method3"));
	ASSERT_NOT_NULL(li_for(dom, "com.example.level1.Class2.method12"));
	/* method42 is level 4, digit 2: the last digit of the stack index, 10^4 nodes. */
	uint64_t all = 0, hit = 0;
	for (long i = 0; i < 100000; i++) {
		all += 1 + (uint64_t)(i % 7);
		hit += i % 10 == 2 ? 1 + (uint64_t)(i % 7) : 0;
	}
	char want[64];
	snprintf(want, sizeof(want), "matched %.2f%% (10000 frames)", 100.0 * (double)hit / (double)all);
	ASSERT_CONTAINS(dom, want);
	char *nv = strstr(dom, "id=\"nvisible\">");
	ASSERT_NOT_NULL(nv);
	long visible = strtol(nv + strlen("id=\"nvisible\">"), NULL, 10);
	ASSERT_GT(visible, 100);
	ASSERT_LT(visible, 100000);   /* pruned, not 111k rectangles */
	free(dom);

	vp_profile__free(big);
	vp_profile__free(base);
	vp_profile__free(p);
	html_test_end();
	return 0;
}
