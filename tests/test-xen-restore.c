/* `record --xen-pmu-mode` leaves dom0's PMU mode as it found it (issue 11 item 6), on a
 * stand-in /sys/hypervisor tree: after a normal exit, an error exit (exit(2) from
 * anywhere), and the second-signal path that _exits (the handler restores); a forked
 * child that exits does not restore it behind its parent's back. */
#define _GNU_SOURCE
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hv-glue/xen.h"
#include "test.h"
#include "test-run.h"

#define PATH "xen-restore/sys/hypervisor/pmu/pmu_mode"

static void put(const char *mode)
{
	FILE *f = fopen(PATH, "w");
	ASSERT_NOT_NULL(f);
	fprintf(f, "%s\n", mode);
	fclose(f);
}

static const char *now(void)
{
	static char m[32];
	char err[256];
	ASSERT_OK(vp_xen__get_pmu_mode_at(PATH, m, sizeof(m), err, sizeof(err)));
	return m;
}

static void on_sig(int sig)
{
	vp_xen__restore_pmu_mode();
	_exit(128 + sig);
}

/* Runs how() in a child that first switches the mode to "all". */
static int child(int how)
{
	pid_t pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		char err[256];
		if (vp_xen__push_pmu_mode_at(PATH, "all", err, sizeof(err)))
			_exit(99);
		if (strcmp(now(), "all"))
			_exit(98);
		if (how == 0)
			exit(0);
		if (how == 1)
			exit(2);             /* an error after the mode was set */
		if (how == 2) {
			signal(SIGUSR1, on_sig);
			raise(SIGUSR1);      /* the recorder's second Ctrl-C */
			_exit(97);
		}
		pid_t g = fork();        /* how 3: a child of the recorder exits first */
		if (g == 0)
			exit(0);
		waitpid(g, NULL, 0);
		_exit(strcmp(now(), "all") ? 96 : 0);   /* _exit: no restore in this one */
	}
	int st;
	ASSERT_EQ(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int main(void)
{
	ASSERT_OK(run_sh("mkdir -p xen-restore/sys/hypervisor/pmu", 110));
	put("self");
	ASSERT_EQ(child(0), 0);
	ASSERT_STREQ(now(), "self");
	put("hv");
	ASSERT_EQ(child(1), 2);
	ASSERT_STREQ(now(), "hv");
	put("off");
	ASSERT_EQ(child(2), 128 + SIGUSR1);
	ASSERT_STREQ(now(), "off");
	put("self");
	ASSERT_EQ(child(3), 0);
	ASSERT_STREQ(now(), "all");   /* the grandchild left it alone; the child _exited */
	/* Nothing saved, nothing to do. */
	ASSERT_OK(vp_xen__restore_pmu_mode());
	printf("test-xen-restore: ok\n");
	return 0;
}
