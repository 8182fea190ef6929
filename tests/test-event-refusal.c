/* An event this machine cannot count (issue 12): 'viprof stat' and 'viprof record' refuse
 * it the same way: the same exit status (2, as for any bad option), one line on stderr
 * naming the event, the cause and the fix ("try -e ..."), and the command never run.
 * The event is the first of a list of hardware events the VM does not count (all of
 * them where no PMU is exposed); skipped on a machine that counts every one. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test-helpers.h"
#include "test-run.h"
#include "test.h"

static int lines(const char *s)
{
	int n = 0;
	for (; *s; s++)
		n += *s == '\n';
	return n;
}

int main(void)
{
	static const char *const cands[] = { "cycles", "instructions", "branch-misses", "cache-misses",
					     "ref-cycles", "bus-cycles" };
	char tmpl[] = "/tmp/viprof-event-refusal.XXXXXX", args[1024], cmd[2048], marker[600], errp[600];
	const char *ev = NULL;
	char *serr = NULL, *rerr = NULL;
	int sst = 0;
	struct stat sb;

	ASSERT_NOT_NULL(mkdtemp(tmpl));
	snprintf(marker, sizeof(marker), "%s/ran", tmpl);
	snprintf(errp, sizeof(errp), "%s/err", tmpl);
	for (size_t i = 0; i < sizeof(cands) / sizeof(cands[0]) && !ev; i++) {
		snprintf(args, sizeof(args), "stat -e %s -- touch %s", cands[i], marker);
		free(serr);
		snprintf(cmd, sizeof(cmd), "%s %s > /dev/null 2> %s", VIPROF_BIN, args, errp);
		sst = run_sh(cmd, 50);
		serr = test_slurp_str(errp);
		if (sst != 0)
			ev = cands[i];
		unlink(marker);
	}
	if (!ev)
		SKIP("this machine counts every hardware event tried: nothing to refuse");
	fprintf(stderr, "stat -e %s: %d: %s", ev, sst, serr);
	ASSERT_EQ(sst, 2);
	ASSERT_EQ(lines(serr), 1);
	ASSERT_CONTAINS(serr, "viprof stat: event '");
	ASSERT_CONTAINS(serr, ev);
	ASSERT_CONTAINS(serr, "cannot be counted");
	ASSERT_CONTAINS(serr, "try -e ");
	ASSERT_NE(stat(marker, &sb), 0);   /* refused before the command ran */

	snprintf(args, sizeof(args), "record -q -e %s -o %s/s -- touch %s", ev, tmpl, marker);
	snprintf(cmd, sizeof(cmd), "%s %s > /dev/null 2> %s", VIPROF_BIN, args, errp);
	int rst = run_sh(cmd, 50);
	rerr = test_slurp_str(errp);
	fprintf(stderr, "record -e %s: %d: %s", ev, rst, rerr);
	ASSERT_EQ(rst, sst);
	ASSERT_EQ(lines(rerr), 1);
	ASSERT_CONTAINS(rerr, "viprof record: event '");
	ASSERT_CONTAINS(rerr, "cannot be counted");
	ASSERT_CONTAINS(rerr, "try -e ");
	ASSERT_NE(stat(marker, &sb), 0);
	/* Same cause, same words after the command's name. */
	ASSERT_STREQ(strchr(serr, ':'), strchr(rerr, ':'));

	free(serr);
	free(rerr);
	snprintf(args, sizeof(args), "rm -rf %s", tmpl);
	ASSERT_OK(run_sh(args, 50));
	return 0;
}
