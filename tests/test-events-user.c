/* Unprivileged users are not offered ":u" events that always read 0 (issue 12): the
 * kernel counts context switches and CPU migrations in its own context, so
 * context-switches:u opens but counts nothing. Run as root, the test drops to an
 * unprivileged uid in a child (skips unless perf_event_paranoid >= 2, where the
 * question arises) and checks, live, that the list of available events leaves them out
 * while keeping page-faults:u, and that `stat -e context-switches` names the cause. */
#define _GNU_SOURCE
#include <grp.h>
#include <linux/perf_event.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hv-glue/events.h"
#include "hv-glue/hv_internal.h"
#include "test.h"

int main(void)
{
	REQUIRE_ROOT();
	FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "r");
	int paranoid = 0;
	if (!f || fscanf(f, "%d", &paranoid) != 1)
		SKIP("cannot read perf_event_paranoid");
	fclose(f);
	if (paranoid < 2)
		SKIP("perf_event_paranoid is %d: unprivileged users may count kernel mode here", paranoid);
	pid_t pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		char avail[1024], err[1024];
		if (setgroups(0, NULL) || setresgid(65533, 65533, 65533) || setresuid(65533, 65533, 65533))
			_exit(77);
		ASSERT_EQ(vp_hv__user_mode_counts(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES), 0);
		ASSERT_EQ(vp_hv__user_mode_counts(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS), 1);
		ASSERT_EQ(vp_hv__user_mode_counts(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK), 1);
		vp_hv__available(avail, sizeof(avail));
		fprintf(stderr, "available: %s\n", avail);
		ASSERT_TRUE(strstr(avail, "context-switches:u") == NULL);
		ASSERT_CONTAINS(avail, "page-faults:u");
		struct sampler_event ev;
		ASSERT_EQ(vp_events__parse("context-switches", &ev, 1, err, sizeof(err)), 1);
		ASSERT_NE(vp_events__check(&ev, err, sizeof(err)), 0);
		ASSERT_CONTAINS(err, "always reads 0");
		ASSERT_TRUE(strstr(err, "use 'context-switches:u'") == NULL);
		_exit(0);
	}
	int st;
	ASSERT_EQ(waitpid(pid, &st, 0), pid);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 77)
		SKIP("cannot drop to uid 65533");
	ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	printf("test-events-user: ok\n");
	return 0;
}
