/* common/strtab: the one string interner of the pprof, OTLP and JFR writers. Ids are
 * handed out in first-seen order (the writers emit the table in that order), survive
 * the table's growth, and the three ways of adding (borrowed, copied, taken over) name
 * one string alike. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/strtab.h"
#include "test.h"

int main(void)
{
	struct vp_strtab t = { 0 };
	ASSERT_EQ(vp_strtab__id(&t, ""), 0);
	ASSERT_EQ(vp_strtab__id(&t, NULL), 0);          /* NULL is "" */
	ASSERT_EQ(vp_strtab__id(&t, "samples"), 1);
	ASSERT_EQ(vp_strtab__id(&t, "count"), 2);
	ASSERT_EQ(vp_strtab__id(&t, "samples"), 1);

	/* A copy outlives the caller's buffer; a second add of equal text is the same id. */
	char tmp[32];
	snprintf(tmp, sizeof(tmp), "%s", "copied");
	ASSERT_EQ(vp_strtab__id_copy(&t, tmp), 3);
	memset(tmp, 'x', sizeof(tmp) - 1);
	ASSERT_STREQ(t.v[3], "copied");
	ASSERT_EQ(vp_strtab__id_copy(&t, "count"), 2);  /* present: not copied again */
	ASSERT_EQ(t.nowned, 1);

	/* Taken over: a duplicate is freed at once (ASan/valgrind would see a leak). */
	ASSERT_EQ(vp_strtab__id_owned(&t, strdup("owned")), 4);
	ASSERT_EQ(vp_strtab__id_owned(&t, strdup("owned")), 4);
	ASSERT_EQ(vp_strtab__id_owned(&t, NULL), -1);
	ASSERT_EQ(t.nowned, 2);

	/* Many strings: growth past several rehashes keeps every id, in order. */
	static char names[5000][16];
	for (int i = 0; i < 5000; i++) {
		snprintf(names[i], sizeof(names[i]), "s%d", i);
		ASSERT_EQ(vp_strtab__id(&t, names[i]), 5 + i);
	}
	for (int i = 0; i < 5000; i++)
		ASSERT_EQ(vp_strtab__id(&t, names[i]), 5 + i);
	ASSERT_EQ(vp_strtab__id_copy(&t, "s4999"), 5004);
	ASSERT_EQ(t.n, 5005);
	ASSERT_STREQ(t.v[1], "samples");
	ASSERT_STREQ(t.v[4], "owned");
	vp_strtab__free(&t);
	ASSERT_EQ(t.n, 0);
	vp_strtab__free(&t);   /* a freed table is a zeroed one */
	printf("ok\n");
	return 0;
}
