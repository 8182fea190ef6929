/* The fleet store's encoding (fleet/encode.c), without a server: an interval's stacks are
 * written once each, its sample rows keep every sample and every nanosecond of weight
 * (spread over seconds by their samples), the GC epoch counts the JVM's epoch marks before
 * a sample, the off-CPU kind is the state leaf, and strings are escaped for TabSeparated. */
#include "test.h"

#include <stdlib.h>
#include <string.h>

#include "fleet/fleet.h"

static uint32_t frame(struct vp_profile *p, const char *name, uint8_t layer)
{
	struct vp_frame f = { .name = name, .image = "/bin/x", .build_id = "", .file = "", .layer = layer };
	return vp_profile__frame(p, &f);
}

/* Column col (0-based) of a TabSeparated line, copied into out. */
static void column(const char *line, int col, char *out, size_t outlen)
{
	for (int i = 0; i < col; i++)
		line = strchr(line, '\t') + 1;
	size_t n = strcspn(line, "\t\n");
	snprintf(out, outlen, "%.*s", (int)(n < outlen ? n : outlen - 1), line);
}

int main(void)
{
	struct vp_profile *p = vp_profile__new();
	ASSERT_TRUE(p != NULL);
	int cpu = vp_profile__add_event(p, "cpu-clock", "nanoseconds");
	int off = vp_profile__add_event(p, "off-cpu", "nanoseconds");
	uint32_t a[3] = { frame(p, "main", 2), frame(p, "it's\ta \\ name", 2), frame(p, "work", 2) };
	uint32_t b[2] = { frame(p, "main", 2), frame(p, "[blocked: lock]", 1) };
	uint32_t sa, sa2, sb;
	/* The same frames in two threads: two profile stacks, one stored stack. */
	ASSERT_OK(vp_profile__add_stack(p, a, 3, 10, 11, "t1", cpu, 3, 1000, &sa));
	ASSERT_OK(vp_profile__add_stack(p, a, 3, 10, 12, "t2", cpu, 1, 7, &sa2));
	ASSERT_OK(vp_profile__add_stack(p, b, 2, 10, 11, "t1", off, 1, 5000, &sb));
	/* sa: 2 samples in second 0 (before the GC mark at 1.5 s), 1 in second 2 (after). */
	ASSERT_OK(vp_profile__add_time(p, sa, cpu, 100000000ull, 1));
	ASSERT_OK(vp_profile__add_time(p, sa, cpu, 200000000ull, 1));
	ASSERT_OK(vp_profile__add_time(p, sa, cpu, 2100000000ull, 1));
	ASSERT_OK(vp_profile__add_mark(p, 1500000000ull, 10, "GC 1"));
	/* Another JVM's boundaries are not this one's; one at the sample's own time counts. */
	ASSERT_OK(vp_profile__add_mark(p, 50000000ull, 99, "GC 1"));
	ASSERT_OK(vp_profile__add_mark(p, 60000000ull, 9, "GC 1"));
	ASSERT_OK(vp_profile__add_mark(p, 2100000000ull, 10, "GC 2"));
	/* sa2 and sb have no times: one row at the interval's start. */
	struct vp_fleet_meta m = { .host = "vm-0", .service = "shop", .interval = "20261128T000000Z", .from_s = 1000 };
	char *st, *sm;
	size_t stl, sml;
	ASSERT_OK(vp_fleet__encode(p, &m, &st, &stl, &sm, &sml));
	/* Stacks: two distinct (a, b), the quote, tab and backslash escaped. */
	int nst = 0;
	for (const char *c = st; (c = strchr(c, '\n')); c++)
		nst++;
	ASSERT_EQ(nst, 2);
	ASSERT_TRUE(strstr(st, "['main','it\\'s\\ta \\\\ name','work']") != NULL);
	/* Samples: sa's second 0 (2 samples, epoch 0), sa's second 2 (1, epoch 1), sa2, sb. */
	int rows = 0;
	uint64_t samples = 0, weight[2] = { 0, 0 };
	bool blocked = false, epoch1 = false;
	for (char *line = sm; *line; line = strchr(line, '\n') + 1) {
		char ts[32], ev[32], kind[64], ep[16], n[32], w[32], idx[8];
		column(line, 0, ts, sizeof(ts));
		column(line, 8, ev, sizeof(ev));
		column(line, 10, idx, sizeof(idx));
		column(line, 12, kind, sizeof(kind));
		column(line, 13, ep, sizeof(ep));
		column(line, 15, n, sizeof(n));
		column(line, 16, w, sizeof(w));
		rows++;
		samples += strtoull(n, NULL, 10);
		weight[!strcmp(ev, "off-cpu")] += strtoull(w, NULL, 10);
		ASSERT_EQ(atoi(idx), !strcmp(ev, "off-cpu") ? off : cpu);
		if (!strcmp(ev, "off-cpu"))
			blocked = !strcmp(kind, "[blocked: lock]");
		else
			ASSERT_STREQ(kind, "");
		if (!strcmp(ts, "1002")) {
			ASSERT_STREQ(ep, "2");
			epoch1 = true;
		} else {
			ASSERT_STREQ(ep, "0");
		}
	}
	ASSERT_EQ(rows, 4);
	ASSERT_EQ(samples, 3 + 1 + 1);
	ASSERT_EQ(weight[0], 1000 + 7);   /* every nanosecond, however it was spread */
	ASSERT_EQ(weight[1], 5000);
	ASSERT_TRUE(blocked);
	ASSERT_TRUE(epoch1);
	ASSERT_TRUE(strstr(sm, "\tt1\t") && strstr(sm, "\tt2\t"));
	free(st);
	free(sm);
	vp_profile__free(p);
	printf("ok\n");
	return 0;
}
