/* `viprof maps export-jitdump` says what its file is good for: its help must not send
 * users to `perf inject --jit` (which ignores a jitdump that no recorded process mapped),
 * and must say that the code bytes are zeros and debug info is missing. */
#include <sys/wait.h>

#include "test-helpers.h"
#include "test-run.h"

int main(void)
{
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "%s maps --help > maps-help.txt 2>&1", VIPROF_BIN);
	run_sh(cmd, 110);
	char *help = test_slurp("maps-help.txt", NULL);
	ASSERT_NOT_NULL(help);
	const char *e = strstr(help, "export-jitdump FILE");
	ASSERT_NOT_NULL(e);
	ASSERT_TRUE(strstr(e, "for perf inject --jit\n") == NULL);
	ASSERT_CONTAINS(e, "code bytes are zeros");
	ASSERT_CONTAINS(e, "no debug-info");
	ASSERT_CONTAINS(e, "Not for `perf inject");
	free(help);
	return 0;
}
