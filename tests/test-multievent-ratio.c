/* Ratio lines of the text report on synthetic profiles (no PMU is needed): with both
 * cycles and instructions the header shows IPC = instructions / cycles over the
 * sampled stacks (sums of periods); with only one of them, no IPC line; with several
 * events each column of the hotspot table adds up to 100.0 with its (other) row. */
#include "postproc/profile.h"
#include "report/report.h"
#include "test.h"

static char *render(const struct vp_profile *p, int top)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	ASSERT_NOT_NULL(f);
	struct vp_out o = { .f = f, .width = 120 };
	struct vp_report_opts ro = { .top = top };
	ASSERT_OK(report_text(p, NULL, &o, &ro));
	fclose(f);
	return buf;
}

static uint32_t frame(struct vp_profile *p, const char *name)
{
	struct vp_frame f = { .name = name, .image = "/bin/app", .build_id = "", .file = "", .layer = VP_LAYER_NATIVE };
	uint32_t id = vp_profile__frame(p, &f);
	ASSERT_NE(id, UINT32_MAX);
	return id;
}

int main(void)
{
	struct vp_profile *p = vp_profile__new();
	ASSERT_NOT_NULL(p);
	int cyc = vp_profile__add_event(p, "cycles", "events");
	int ins = vp_profile__add_event(p, "instructions", "events");
	ASSERT_EQ(cyc, 0);
	ASSERT_EQ(ins, 1);
	uint32_t a[2] = { frame(p, "main"), frame(p, "hot") }, b[2] = { a[0], frame(p, "cold") };
	uint32_t c[2] = { a[0], frame(p, "warm") };
	/* cycles: 3 + 2 + 1 samples of 1M; instructions: 2 + 1 + 6 samples of 1M -> IPC 9 / 6 = 1.50 */
	ASSERT_OK(vp_profile__add(p, a, 2, 1, 1, "app", cyc, 3, 3000000));
	ASSERT_OK(vp_profile__add(p, b, 2, 1, 1, "app", cyc, 2, 2000000));
	ASSERT_OK(vp_profile__add(p, c, 2, 1, 1, "app", cyc, 1, 1000000));
	ASSERT_OK(vp_profile__add(p, a, 2, 1, 1, "app", ins, 2, 2000000));
	ASSERT_OK(vp_profile__add(p, b, 2, 1, 1, "app", ins, 1, 1000000));
	ASSERT_OK(vp_profile__add(p, c, 2, 1, 1, "app", ins, 6, 6000000));
	char *t = render(p, 0);
	fputs(t, stderr);
	ASSERT_CONTAINS(t, "# IPC 1.50 (instructions / cycles)\n");
	/* Rows: hot 50.0/22.2, cold 33.3/11.1, warm 16.7/66.7: each column is 100.0. */
	ASSERT_CONTAINS(t, "   50.0         22.2 ");   /* cycles, instructions: as wide as their names */
	ASSERT_CONTAINS(t, "   33.3         11.1 ");
	ASSERT_CONTAINS(t, "   16.7         66.7 ");
	free(t);
	/* The sampler could not group them (VP_COUNTER_UNGROUPED): each was multiplexed
	 * on its own, and the ratio of two separate estimates is not printed as IPC. */
	vp_profile__set_meta(p, "ungrouped.instructions", "1");
	t = render(p, 0);
	ASSERT_NULL(strstr(t, "# IPC 1.50"));
	ASSERT_CONTAINS(t, "# IPC not shown: the PMU could not group cycles and instructions");
	free(t);
	/* Two rows shown: (other) takes the rest of each column. */
	t = render(p, 2);
	ASSERT_CONTAINS(t, "   16.7         66.7       -");
	free(t);
	vp_profile__free(p);

	/* Only cycles: no ratio to show. */
	p = vp_profile__new();
	ASSERT_NOT_NULL(p);
	cyc = vp_profile__add_event(p, "cycles", "events");
	ASSERT_OK(vp_profile__add(p, a, 0, 1, 1, "app", cyc, 1, 1000));
	t = render(p, 0);
	ASSERT_NULL(strstr(t, "IPC"));
	free(t);
	vp_profile__free(p);
	printf("test-multievent-ratio: ok\n");
	return 0;
}
