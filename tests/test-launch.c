/* common/launch: the held child. It runs nothing before release (a marker file its
 * command would create stays absent), runs the command after it with the environment
 * variable set, reports a failed exec by errno, and exits 127 unrun when the caller
 * closes without releasing. */
#include <errno.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "common/launch.h"
#include "test.h"

static int wait_exit(pid_t pid)
{
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			FAIL("waitpid: %s", strerror(errno));
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int main(void)
{
	char dir[] = "/tmp/vp-test-launch-XXXXXX", marker[128], script[512];
	ASSERT_NOT_NULL(mkdtemp(dir));
	snprintf(marker, sizeof(marker), "%s/ran", dir);
	snprintf(script, sizeof(script), "echo \"$VP_TEST_VAR\" > %s", marker);
	char *cmd[] = { "sh", "-c", script, NULL };
	struct vp_launch_opts o = { .env_name = "VP_TEST_VAR", .env_value = "held-then-run", .who = "test-launch" };
	struct vp_held_child c;
	struct stat st;

	/* Held: nothing ran 200 ms later. */
	ASSERT_OK(vp_child__launch(&c, cmd, &o));
	ASSERT_GT(c.pid, 0);
	usleep(200 * 1000);
	ASSERT_TRUE(stat(marker, &st) != 0);
	int e = -1;
	ASSERT_OK(vp_child__release(&c, &e));
	ASSERT_EQ(e, 0);
	ASSERT_EQ(wait_exit(c.pid), 0);
	vp_child__close(&c);
	FILE *f = fopen(marker, "r");
	ASSERT_NOT_NULL(f);
	char line[64] = "";
	ASSERT_NOT_NULL(fgets(line, sizeof(line), f));
	fclose(f);
	ASSERT_STREQ(line, "held-then-run\n");
	unlink(marker);

	/* A command that does not exist: ENOENT back, exit 127. */
	char *bad[] = { "/nonexistent/vp-no-such-command", NULL };
	ASSERT_OK(vp_child__launch(&c, bad, &o));
	ASSERT_OK(vp_child__release(&c, &e));
	ASSERT_EQ(e, ENOENT);
	ASSERT_EQ(wait_exit(c.pid), 127);
	vp_child__close(&c);

	/* Given up before release: exits 127 and never runs the command. */
	ASSERT_OK(vp_child__launch(&c, cmd, &o));
	vp_child__close(&c);
	ASSERT_EQ(wait_exit(c.pid), 127);
	ASSERT_TRUE(stat(marker, &st) != 0);
	vp_child__close(&c);   /* twice is fine */

	ASSERT_EQ(vp_child__launch(&c, (char *[]){ NULL }, &o), -EINVAL);
	rmdir(dir);
	return 0;
}
