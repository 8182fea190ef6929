/* `viprof stat --per-thread -p PID` accounts for everything (issue 12): the page faults
 * of threads that came and went between two polls of /proc appear in a
 * "[not per-thread]" row, and the rows add up to "[all threads]", which agrees with
 * what the process did (burst-threads: 40 threads x 100 pages, none visible to the
 * poll). Before, 5001 of 6011 faults were shown without a word about the rest.
 * argv[1] = viprof, argv[2] = burst-threads. */
#define _GNU_SOURCE
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

int main(int argc, char **argv)
{
	char line[512], cmd[1024];
	if (argc < 3)
		FAIL("usage: test-stat-unattributed viprof burst-threads");
	int out[2];
	ASSERT_OK(pipe(out));
	pid_t fx = fork();
	ASSERT_GE(fx, 0);
	if (fx == 0) {
		dup2(out[1], 1);
		execl(argv[2], argv[2], "40", "100", (char *)NULL);
		_exit(127);
	}
	close(out[1]);
	FILE *f = fdopen(out[0], "r");
	ASSERT_NOT_NULL(fgets(line, sizeof(line), f));   /* "ready": signals are blocked */
	snprintf(cmd, sizeof(cmd), "%s stat --per-thread -x, -e page-faults -p %d 2>stat-unattributed.csv", argv[1],
		 (int)fx);
	pid_t st = fork();
	ASSERT_GE(st, 0);
	if (st == 0) {
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	usleep(500000);   /* stat has opened its events */
	ASSERT_OK(kill(fx, SIGUSR1));
	int status;
	ASSERT_EQ(waitpid(fx, &status, 0), fx);
	ASSERT_EQ(waitpid(st, &status, 0), st);
	ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	fclose(f);

	/* Rows: who,value,unit,event,running-ns,pct */
	FILE *csv = fopen("stat-unattributed.csv", "r");
	ASSERT_NOT_NULL(csv);
	double rows = 0, all = -1, rest = -1;
	int nrows = 0;
	while (fgets(line, sizeof(line), csv)) {
		char *c = strchr(line, ',');
		if (!c)
			continue;
		*c = '\0';
		double v = strtod(c + 1, NULL);
		if (!strcmp(line, "[all threads]"))
			all = v;
		else if (!strcmp(line, "[not per-thread]"))
			rest = v;
		else {
			rows += v;
			nrows++;
		}
	}
	fclose(csv);
	fprintf(stderr, "%d thread rows: %.0f; [not per-thread] %.0f; [all threads] %.0f\n", nrows, rows, rest, all);
	ASSERT_GE(nrows, 1);
	ASSERT_GE(all, 0);
	ASSERT_GE(rest, 0);
	ASSERT_DBL_NEAR(rows + rest, all, 0.5);
	ASSERT_GE(all, 40 * 100);            /* the threads' faults are in the total */
	ASSERT_GE(rest, 40 * 100 * 9 / 10);  /* and almost none of them in a thread row */
	printf("test-stat-unattributed: ok\n");
	return 0;
}
